package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// A lock is a queue: every contender writes a key of its own under the
// lock's prefix, attached to its Provider's lease, and the keys line up by
// create revision, which etcd makes strictly increasing across all keys.
// A contender is admitted by the keys ahead of it, by its role:
type role byte

const (
	exclusive role = 'x' // a mutex, a writer: admitted when no key is ahead
	shared    role = 'r' // a reader: admitted when no exclusive key is ahead
	slot      role = 's' // a semaphore's: admitted when fewer than max keys are ahead
)

// Keys ahead of a contender can only go (a release, a give-up, an expired
// lease), never come: a later key has a later create revision. So a
// contender that is admitted stays admitted, grants happen in create
// revision order, and the key's create revision is a fencing token larger
// than every earlier grant's. A waiting contender watches the deletion of
// the key it queues behind (contender.go).

// queue is one lock: its name, and the prefix its contenders' keys live
// under.
type queue struct {
	p      *Provider
	name   string
	prefix string
	max    int // how many slot contenders are admitted at once
}

// scope is where the keys that can keep a contender of role r out live:
// the writers' keys for a reader (the role is the first byte of a key
// after the prefix), every key of the lock otherwise.
func (q *queue) scope(r role) string {
	if r == shared {
		return q.prefix + string(exclusive)
	}
	return q.prefix
}

// defaultRecheck is the fallback cadence of a waiting Acquire: a wait that
// heard nothing from the lock's watch for this long reads the queue again.
// Watches replay from a revision and miss nothing, so this only bounds what
// a stalled watch could cost.
var defaultRecheck = kit.Backoff{Min: time.Second, Max: 10 * time.Second}

// usable fails when ctx is done or the Provider closed.
func (q *queue) usable(ctx context.Context) error {
	if ctx.Err() != nil {
		return kit.Wrap(backend, "acquire", q.name, kit.NotAcquired(ctx))
	}
	if q.p.isClosed.Load() {
		return kit.Wrap(backend, "acquire", q.name, ErrClosed)
	}
	return nil
}

// failed names an acquire's error; when ctx ended it matches
// core.ErrNotAcquired and ctx.Err().
func (q *queue) failed(ctx context.Context, err error) error {
	if ctx.Err() != nil && !errors.Is(err, ErrClosed) {
		return kit.Wrap(backend, "acquire", q.name, kit.NotAcquired(ctx))
	}
	return kit.Wrap(backend, "acquire", q.name, err)
}

// txnFunc runs a transaction that writes key, attached to lease.
type txnFunc func(ctx context.Context, key string, lease clientv3.LeaseID) (*clientv3.TxnResponse, error)

// put runs txn for a new key of role r, bounded by the Provider's timeout
// but not by ctx's cancellation: a write cancelled in flight may still land
// after a delete sent behind it, and leave a key nobody owns in the line.
// So the write always completes, and a caller whose ctx ended meanwhile
// deletes the key it now knows it wrote. When the server no longer knows
// the Provider's lease, put moves to a new lease and tries once more. When
// the outcome is unknown (the timeout passed, the connection broke), the
// key becomes an orphan, which the Provider deletes until a delete
// succeeds (orphans.go): the write may have landed, or land later.
func (q *queue) put(ctx context.Context, r role, txn txnFunc) (key string, s *session, resp *clientv3.TxnResponse, err error) {
	tctx, cancel := q.p.ctxFor(context.WithoutCancel(ctx))
	defer cancel()
	for range 2 {
		if s, err = q.p.lease(tctx); err != nil {
			return "", nil, nil, err
		}
		key = q.p.key(q, r)
		resp, err = txn(tctx, key, s.id)
		if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			break
		}
		s.kill()
	}
	if err != nil {
		q.p.orphan(key, s.id)
		return "", nil, nil, err
	}
	return key, s, resp, nil
}

// take is TryAcquire for the exclusive and shared roles: one transaction
// that writes the key only if no key of the contender's scope exists, and
// otherwise reads the first of them, to name it. One round trip; a busy
// lock leaves nothing behind.
func (q *queue) take(ctx context.Context, r role) (core.Handle, error) {
	scope := q.scope(r)
	key, s, resp, err := q.put(ctx, r, func(ctx context.Context, key string, lease clientv3.LeaseID) (*clientv3.TxnResponse, error) {
		return q.p.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(scope), "=", 0).WithPrefix(), q.p.unvoided(key)).
			Then(clientv3.OpPut(key, q.p.opts.identity, clientv3.WithLease(lease))).
			Else(clientv3.OpGet(scope, clientv3.WithPrefix(),
				clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))).
			Commit()
	})
	if err != nil {
		return nil, q.failed(ctx, err)
	}
	if !resp.Succeeded {
		kvs := resp.Responses[0].GetResponseRange().Kvs
		return nil, kit.Wrap(backend, "acquire", q.name, busy(r, kvs))
	}
	h := q.p.newHandle(q, r, key, resp.Header.Revision, s)
	h.grant()
	return h, nil
}

func busy(r role, kvs []*mvccpb.KeyValue) error {
	switch {
	case len(kvs) == 0:
		return kit.Busy("taken by a concurrent acquire")
	case r == shared:
		return kit.Busy("a writer holds it or waits for it: %s (token %d)", kvs[0].Value, kvs[0].CreateRevision)
	}
	return kit.Busy("held by %s (token %d)", kvs[0].Value, kvs[0].CreateRevision)
}

// named is how many of the keys ahead of it an enqueue names: a
// contender behind more reads the queue again once those named cannot
// decide.
const named = 32

// enqueue writes a new key of role r and reads the keys ahead of it, in
// one transaction: one round trip. The read is newest first: it names up
// to upTo keys ahead (the contender crosses them off as they go) and
// counts them all (the response's count, which the limit does not cut).
func (q *queue) enqueue(ctx context.Context, r role, news chan struct{}, upTo int64) (*contender, error) {
	limit := upTo
	if r != shared {
		limit++ // the own key is in the scope, and newest
	}
	key, s, resp, err := q.put(ctx, r, func(ctx context.Context, key string, lease clientv3.LeaseID) (*clientv3.TxnResponse, error) {
		return q.p.cli.Txn(ctx).If(q.p.unvoided(key)).Then(
			clientv3.OpPut(key, q.p.opts.identity, clientv3.WithLease(lease)),
			clientv3.OpGet(q.scope(r), clientv3.WithPrefix(), clientv3.WithKeysOnly(),
				clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(limit)),
		).Commit()
	})
	if err != nil {
		return nil, err
	}
	if !resp.Succeeded {
		// Only a write swept as an orphan fails its condition.
		return nil, fmt.Errorf("etcdlock: the key %s of %q was voided before it was written", key, q.name)
	}
	rev := resp.Header.Revision
	c := &contender{q: q, r: r, news: news, rev: rev}
	c.h = q.p.newHandle(q, r, key, rev, s)
	rr := resp.Responses[1].GetResponseRange()
	kvs, n := rr.Kvs, rr.Count
	if r != shared {
		if len(kvs) == 0 || string(kvs[0].Key) != key {
			c.leave(ctx)
			return nil, fmt.Errorf("etcdlock: the queue of %q did not list the key just written", q.name)
		}
		kvs, n = kvs[1:], n-1
	}
	c.mu.Lock()
	c.seeLocked(kvs, n)
	c.mu.Unlock()
	return c, nil
}

// tryAcquire is one attempt: take for the exclusive and shared roles; for
// a slot, an enqueue that deletes its key again when too many are ahead
// (then two round trips).
func (q *queue) tryAcquire(ctx context.Context, r role) (core.Handle, error) {
	if err := q.usable(ctx); err != nil {
		return nil, err
	}
	if r != slot {
		return q.take(ctx, r)
	}
	c, err := q.enqueue(ctx, r, nil, 0) // the count decides
	if err != nil {
		return nil, q.failed(ctx, err)
	}
	if c.admittedNow() {
		h, _, err := c.grant()
		if err == nil {
			return h, nil
		}
		err = kit.Wrap(backend, "acquire", q.name, err)
		c.leave(ctx)
		return nil, err
	}
	c.leave(ctx)
	return nil, kit.Wrap(backend, "acquire", q.name, kit.Busy("all %d slots are taken", q.max))
}

// acquire waits in line: it enqueues, then waits (kit.Wait) for what the
// contender hears of the deletions ahead of it (watch.go), and reads the
// queue again where they cannot tell. When its key is lost while it waits
// (its lease expired during an outage, say), it enqueues anew, at the end
// of the line. A wait that ends without a grant deletes its key before
// returning.
func (q *queue) acquire(ctx context.Context, r role) (core.Handle, error) {
	if err := q.usable(ctx); err != nil {
		return nil, err
	}
	news := make(chan struct{}, 1)
	var c *contender
	stopLost := func() bool { return false }
	h, err := kit.Wait(ctx, q.p.recheck, news, func(ctx context.Context) (core.Handle, time.Duration, error) {
		if c != nil && c.h.Context().Err() != nil {
			stopLost()
			c.leave(ctx)
			c = nil
			if q.p.isClosed.Load() {
				return nil, 0, ErrClosed
			}
		}
		if c != nil {
			return c.look(ctx)
		}
		var err error
		if c, err = q.enqueue(ctx, r, news, named); err != nil {
			return nil, 0, err
		}
		stopLost = context.AfterFunc(c.h.Context(), func() { wake(news) })
		return c.first()
	})
	stopLost()
	if err != nil {
		if c != nil {
			c.leave(ctx)
		}
		return nil, q.failed(ctx, err)
	}
	return h, nil
}

// wake sends on news without blocking; news holds one wake-up.
func wake(news chan struct{}) {
	select {
	case news <- struct{}{}:
	default:
	}
}

// holder reads the first key of the queue: the holder of a mutex, or of a
// reader-writer lock's write side when that key is a writer's. One round
// trip.
func (q *queue) holder(ctx context.Context) (core.Holder, bool, error) {
	if q.p.isClosed.Load() {
		return core.Holder{}, false, kit.Wrap(backend, "holder", q.name, ErrClosed)
	}
	ctx, cancel := q.p.ctxFor(ctx)
	defer cancel()
	resp, err := q.p.cli.Get(ctx, q.prefix, clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))
	if err != nil {
		return core.Holder{}, false, kit.Wrap(backend, "holder", q.name, err)
	}
	if len(resp.Kvs) == 0 || q.roleOf(resp.Kvs[0].Key) != exclusive {
		return core.Holder{}, false, nil
	}
	kv := resp.Kvs[0]
	return core.Holder{ID: string(kv.Value), Token: uint64(kv.CreateRevision)}, true, nil
}

// roleOf returns the role of a key of q.
func (q *queue) roleOf(key []byte) role {
	if len(key) <= len(q.prefix) {
		return 0
	}
	return role(key[len(q.prefix)])
}
