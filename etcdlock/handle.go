package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// handle is one contender's key in a queue, from the write that created
// it: while it waits it is the contender's place in line, and once
// admitted it is the grant the caller holds. Its lease is kept from the
// start, so a waiting key lives as long as a held one, and its fencing
// token is the key's create revision.
type handle struct {
	*kit.BaseHandle
	p       *Provider
	q       *queue
	key     string
	r       role
	s       *session
	granted atomic.Bool // admitted and handed to the caller

	mu      sync.Mutex
	done    bool        // released: follow starts nothing
	later   *time.Timer // starts the watch of the key
	stopOwn func()      // stops the watch of the key
}

// followAfter is how long after its grant a key is first watched. A watch
// costs the server and the client a creation and a cancellation, as much
// as the grant itself; most grants are released sooner than this, and a
// key deleted in the meantime (while it waited, too) is heard as soon as
// the watch starts, since it replays from the key's creation. A lease
// that expires is seen by the Keeper's trust window, watched or not.
const followAfter = 10 * time.Millisecond

// newHandle makes the handle of key, created at revision rev with lease s,
// and has the Keeper keep s alive for it from now on.
func (p *Provider) newHandle(q *queue, r role, key string, rev int64, s *session) *handle {
	h := &handle{p: p, q: q, key: key, r: r, s: s}
	h.BaseHandle = kit.NewHandle(uint64(rev), h.release)
	if r == exclusive {
		p.openDoor(key, rev)
	}
	// The trust window starts at the lease's last confirmation, which is
	// no later than the write that attached the key to it.
	confirmed, _ := s.state()
	p.keeper.Keep(h.BaseHandle, confirmed, h)
	context.AfterFunc(h.Context(), h.giveBack)
	return h
}

// giveBack deletes the key of a handle lost while its key may live on: the
// Provider's other grants keep the shared lease alive, so a key whose
// holder stopped trusting it (a renewal that did not answer in time) would
// otherwise stay in line until Release. It runs when the handle's context
// ends and does nothing after a Release or a Close (which revokes the
// lease): the key becomes an orphan, which the Provider deletes at once
// and again until the delete succeeds (orphans.go).
func (h *handle) giveBack() {
	if errors.Is(context.Cause(h.Context()), core.ErrLockLost) {
		h.p.orphan(h.key, h.s.id)
	}
}

// grant marks h admitted and handed to the caller, and watches its key
// from followAfter on.
func (h *handle) grant() {
	h.granted.Store(true)
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.done {
		from := int64(h.FencingToken()) + 1
		h.later = time.AfterFunc(followAfter, func() { h.follow(from) })
	}
}

// follow watches the key from revision from: its deletion (by hand, or
// with its lease) loses the handle at once. When the server cancels the
// watch because its revision was compacted, a read decides: the key is
// still ours (watched again from the read) or the handle is lost.
func (h *handle) follow(from int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done {
		return
	}
	h.stopOwn = h.p.watch(watchSpec{
		key:  h.key,
		from: from,
		deleted: func(ev *clientv3.Event) {
			h.Lose(fmt.Errorf("key %s deleted at revision %d", h.key, ev.Kv.ModRevision))
		},
		ended: func(compacted int64) {
			if compacted > 0 {
				h.verify()
			}
		},
	})
}

// verify reads the key after its watch was lost to a compaction.
func (h *handle) verify() {
	ctx, cancel := h.p.ctxFor(h.p.ctx)
	defer cancel()
	resp, err := h.p.cli.Get(ctx, h.key)
	switch {
	case err != nil:
		h.Lose(fmt.Errorf("key %s: watch compacted and the key could not be read: %w", h.key, err))
	case len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != int64(h.FencingToken()):
		h.Lose(fmt.Errorf("key %s deleted", h.key))
	default:
		h.follow(resp.Header.Revision + 1)
	}
}

// release deletes the key: one round trip. The key's name is unique to
// this handle, so the delete can never free another grant. When the delete
// fails, the key stays attached to the Provider's lease, which lives on
// while other grants keep it: the Provider deletes it on its own until a
// delete succeeds (orphans.go).
//
// Releasing a granted exclusive key first admits the contenders of this
// Provider that wait right behind it (Provider.cleared), before the delete
// is sent: the grant proved that nothing was ahead of the key, so nothing
// is ahead of them but the key, whose holder has stopped (its context
// ended before release was called), and every other contender stays
// behind them, so no one else can be admitted meanwhile. Their tokens are
// their own keys' create revisions, larger than this one. The contenders
// of other Providers right behind it that knocked are told "cleared" in
// the delete's transaction, or on their own when that transaction fails,
// by the same reasoning (delete, door.go). A delete that fails then only
// keeps the contenders further back waiting until the orphan goes.
func (h *handle) release(ctx context.Context) error {
	h.mu.Lock()
	h.done = true
	if h.later != nil {
		h.later.Stop()
	}
	stop := h.stopOwn
	h.mu.Unlock()
	if stop != nil {
		stop()
	}
	if h.r == exclusive && h.granted.Load() {
		h.p.cleared(h.q.prefix, h.key, int64(h.FencingToken()))
	}
	ctx, cancel := h.p.ctxFor(ctx)
	defer cancel()
	if err := h.delete(ctx); err != nil {
		h.p.orphan(h.key, h.s.id)
		return kit.Wrap(backend, "release", h.q.name, err)
	}
	// A lost handle's key is an orphan (giveBack): a sweep may delete its
	// name after this, so the name must not start another key.
	if !errors.Is(context.Cause(h.Context()), core.ErrLockLost) {
		h.p.spare.put(h.q.prefix+string(h.r), h.key)
	}
	return nil
}
