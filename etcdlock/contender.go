package etcdlock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// contender is an acquire with a key in a queue, until it is granted or
// gives up. What it knows of the keys ahead comes from a read (the enqueue
// or a later one) and the deletions it heard since (watch.go); since keys
// ahead only go, what it knows errs on the side of more keys, and it is
// admitted as soon as what it knows admits it.
//
// An exclusive or shared contender waits for the one key right ahead of it
// in its scope (the blocker): the deletion of any other key changes
// nothing for it, so a release wakes only the contender right behind it.
// When the blocker goes it is admitted without a read if the blocker was
// the only key ahead, or if the blocker was a grant of this Provider's
// exclusive role (its grant proves that nothing was ahead of it, and the
// release says so to the contender directly, before the watch does).
// Otherwise it reads the queue again (one round trip) and waits for the
// next key ahead.
//
// A slot contender is admitted by any release among the keys ahead, so it
// counts the deletions of keys ahead of it: every release of the semaphore
// reaches each of its waiting contenders, and none of them makes a request
// until it is admitted.
type contender struct {
	q    *queue
	r    role
	rev  int64 // the key's create revision
	h    *handle
	news chan struct{} // wakes the wait (kit.Wait) when something changed

	mu      sync.Mutex
	blocker string // exclusive, shared: the key right ahead, "" when none
	bRev    int64  // the blocker's create revision (names are reused)
	only    bool   // exclusive, shared: no other key was ahead of the blocker
	ahead   int64  // slot: how many keys are ahead
	seen    int64  // slot: the revision of the last deletion counted, or of the read
	gone    bool   // the blocker was deleted
	cleared bool   // ... by the release of a local exclusive grant
	changed bool   // something was heard since the last look
	broken  bool   // the watch ended: only a read can tell what is ahead
	reading bool   // a read is in flight: what is heard waits in pending
	pending []deletion
}

// seeLocked records a read, at revision rev, of the keys ahead: kvs,
// newest first, are the first of n keys. The deletions heard while the
// read was in flight are applied on top: those it already reflects change
// nothing (a slot contender counts only deletions after rev, and a key the
// read did not find is nobody's blocker); c.mu is held.
func (c *contender) seeLocked(kvs []*mvccpb.KeyValue, n, rev int64) {
	c.blocker, c.bRev, c.only, c.ahead, c.seen = "", 0, false, n, rev
	c.gone, c.cleared, c.broken = false, false, false
	if c.r != slot && len(kvs) > 0 {
		c.blocker, c.bRev = string(kvs[0].Key), kvs[0].CreateRevision
		c.only = len(kvs) == 1
	}
	for _, d := range c.pending {
		c.applyLocked(d)
	}
	c.reading, c.pending = false, nil
}

// hear takes in a deletion under c's lock, and wakes the wait if it
// matters to c.
func (c *contender) hear(d deletion) {
	c.mu.Lock()
	if c.reading {
		c.pending = append(c.pending, d)
		c.mu.Unlock()
		return
	}
	ok := c.applyLocked(d)
	c.mu.Unlock()
	if ok {
		wake(c.news)
	}
}

// applyLocked applies d and reports whether it mattered; c.mu is held. A
// slot contender counts each deletion once: deletions reach it in revision
// order, a restarted watch replaying some of them again.
func (c *contender) applyLocked(d deletion) bool {
	switch {
	case d.broken:
		c.broken = true
	case c.r == slot:
		if d.at <= c.seen {
			return false
		}
		c.seen = d.at
		if d.created == 0 {
			c.broken = true // the server could not say where the key stood
		} else if d.created >= c.rev {
			return false
		} else {
			c.ahead--
		}
	case d.key == c.blocker && d.at > c.bRev:
		// The first deletion of the name after the blocker's creation is
		// the blocker's: the name is written again only after it.
		c.gone = true
		c.cleared = c.cleared || d.cleared
	default:
		return false
	}
	c.changed = true
	return true
}

// admitted reports whether what c knows admits it; c.mu is held.
func (c *contender) admitted() bool {
	switch {
	case c.r == slot:
		return c.ahead < int64(c.q.max)
	case c.blocker == "":
		return true
	}
	return c.gone && (c.only || c.cleared)
}

func (c *contender) admittedNow() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.admitted()
}

// first is the attempt that follows the enqueue: granted, or busy and
// listening for the deletions after the enqueue.
func (c *contender) first() (core.Handle, time.Duration, error) {
	if c.admittedNow() {
		return c.grant()
	}
	c.q.p.join(c, c.rev)
	return nil, 0, c.busy()
}

// look is each later attempt of a waiting Acquire, after a wake-up or the
// fallback delay: granted when what c heard admits it; otherwise a read of
// the queue (one round trip) unless what c knows is exact (a slot's count
// from an unbroken watch, a blocker still there).
func (c *contender) look(ctx context.Context) (core.Handle, time.Duration, error) {
	c.mu.Lock()
	ok := c.admitted()
	read := c.broken || !c.changed || (c.r != slot && c.gone)
	c.changed = false
	c.mu.Unlock()
	switch {
	case ok:
		return c.grant()
	case !read:
		return nil, 0, c.busy()
	}
	rev, err := c.read(ctx)
	if err != nil {
		// Keep waiting: the key holds our place while its lease is
		// trusted, and a lost key sends the wait back to the enqueue.
		// Nothing tells a wait whose read failed when the server is back
		// (its watch may be broken too), so it reads again within the
		// fallback's shortest delay rather than its longest.
		return nil, c.q.p.recheck.Min, fmt.Errorf("%w: reading the queue: %w", core.ErrNotAcquired, err)
	}
	if c.admittedNow() {
		return c.grant()
	}
	c.q.p.join(c, rev) // a watch that broke starts again from the read
	return nil, 0, c.busy()
}

// read reads the keys ahead of c again and returns the read's revision.
func (c *contender) read(ctx context.Context) (int64, error) {
	c.mu.Lock()
	c.reading = true
	c.mu.Unlock()
	ctx, cancel := c.q.p.ctxFor(ctx)
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithMaxCreateRev(c.rev - 1),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend)}
	if c.r != slot {
		opts = append(opts, clientv3.WithLimit(2))
	}
	resp, err := c.q.p.cli.Get(ctx, c.q.scope(c.r), opts...)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.reading, c.broken = false, true
		for _, d := range c.pending {
			c.applyLocked(d)
		}
		c.pending = nil
		return 0, err
	}
	// The response's count ignores WithMaxCreateRev: count what came back.
	c.seeLocked(resp.Kvs, int64(len(resp.Kvs)), resp.Header.Revision)
	return resp.Header.Revision, nil
}

func (c *contender) busy() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.r == slot {
		return kit.Busy("%d keys ahead, %d slots", c.ahead, c.q.max)
	}
	return kit.Busy("waiting behind %s", c.blocker)
}

// grant ends the wait with the handle, unless the handle was lost while it
// waited (its lease's trust window closed): its key is gone or going, and
// contenders behind it may have been granted since, so a grant now could
// carry a smaller token than theirs. Then the error matches
// core.ErrNotAcquired, and Acquire lines up again with a new key.
func (c *contender) grant() (core.Handle, time.Duration, error) {
	if err := c.h.Context().Err(); err != nil {
		return nil, 0, fmt.Errorf("%w: its key was lost while it waited: %w", core.ErrNotAcquired, context.Cause(c.h.Context()))
	}
	c.q.p.part(c)
	c.h.grant()
	return c.h, 0, nil
}

// leave gives up: the key is deleted before leave returns (bounded by
// kit.CleanupTimeout), so that nobody waits behind it.
func (c *contender) leave(ctx context.Context) {
	c.q.p.part(c)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), kit.CleanupTimeout)
	defer cancel()
	_ = c.h.Release(ctx)
}
