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
// or a later one) and what its watch heard since; since keys ahead only
// go, what it knows errs on the side of more keys, and it is admitted as
// soon as what it knows admits it.
//
// An exclusive or shared contender watches the one key right ahead of it
// in its scope (the blocker): a release wakes only the contender right
// behind it. When the blocker goes it is admitted without a read if the
// blocker was the only key ahead, or if the blocker was a grant of this
// Provider's exclusive role (its grant proves that nothing was ahead of
// it, and the release tells the contender directly, without waiting for
// the watch). Otherwise it reads the queue again (one round trip), finds
// the next key ahead, and watches that one.
//
// A slot contender is admitted by any release among the keys ahead, so it
// watches the lock's whole prefix and counts the deletions of keys ahead of
// it: every release of the semaphore wakes each of its waiting contenders,
// and none of them makes a request until it is admitted.
type contender struct {
	q    *queue
	r    role
	rev  int64 // the key's create revision
	h    *handle
	news chan struct{} // wakes the wait (kit.Wait) when something changed

	mu      sync.Mutex
	gen     int    // counts the watches; the callbacks of an older one are ignored
	blocker string // exclusive, shared: the key right ahead, "" when none
	bRev    int64  // the blocker's create revision (names are reused)
	only    bool   // exclusive, shared: no other key was ahead of the blocker
	ahead   int64  // slot: how many keys are ahead
	gone    bool   // the blocker was deleted
	cleared bool   // ... by the release of a local exclusive grant
	changed bool   // the watch heard something since the last look
	broken  bool   // the watch ended: only a read can tell what is ahead
	stop    func() // ends the watch; nil when none runs
}

// see records a read of the keys ahead: kvs, newest first, are the first
// of n keys.
func (c *contender) see(kvs []*mvccpb.KeyValue, n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.blocker, c.bRev, c.only, c.ahead = "", 0, false, n
	c.gone, c.cleared, c.broken = false, false, false
	if c.r != slot && len(kvs) > 0 {
		c.blocker, c.bRev = string(kvs[0].Key), kvs[0].CreateRevision
		c.only = len(kvs) == 1
	}
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

// first is the attempt that follows the enqueue: granted, or busy with the
// watch armed from the enqueue's revision.
func (c *contender) first() (core.Handle, time.Duration, error) {
	if c.admittedNow() {
		return c.grant(), 0, nil
	}
	c.arm(c.rev + 1)
	return nil, 0, c.busy()
}

// look is each later attempt of a waiting Acquire, after a wake-up or the
// fallback delay: granted when what the watch heard admits c; otherwise a
// read of the queue (one round trip) unless the watch keeps what c knows
// exact (a slot's count, a blocker still there).
func (c *contender) look(ctx context.Context) (core.Handle, time.Duration, error) {
	c.mu.Lock()
	ok := c.admitted()
	read := c.broken || !c.changed || (c.r != slot && c.gone)
	c.changed = false
	c.mu.Unlock()
	switch {
	case ok:
		return c.grant(), 0, nil
	case !read:
		return nil, 0, c.busy()
	}
	c.disarm() // what the old watch hears from now on is in the read
	rev, err := c.read(ctx)
	if err != nil {
		// Keep waiting: the key holds our place while its lease is
		// trusted, and a lost key sends the wait back to the enqueue.
		c.arm(0)
		return nil, 0, fmt.Errorf("%w: reading the queue: %w", core.ErrNotAcquired, err)
	}
	if c.admittedNow() {
		return c.grant(), 0, nil
	}
	c.arm(rev + 1)
	return nil, 0, c.busy()
}

// read reads the keys ahead of c again and returns the read's revision.
func (c *contender) read(ctx context.Context) (int64, error) {
	ctx, cancel := c.q.p.ctxFor(ctx)
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithMaxCreateRev(c.rev - 1),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend)}
	if c.r != slot {
		opts = append(opts, clientv3.WithLimit(2))
	}
	resp, err := c.q.p.cli.Get(ctx, c.q.scope(c.r), opts...)
	if err != nil {
		return 0, err
	}
	// The response's count ignores WithMaxCreateRev: count what came back.
	c.see(resp.Kvs, int64(len(resp.Kvs)))
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

// arm starts the watch of what c waits for, from revision from; from 0
// marks the watch broken instead, so that the next look reads again.
func (c *contender) arm(from int64) {
	c.mu.Lock()
	c.gen++
	gen, blocker := c.gen, c.blocker
	if from == 0 {
		c.broken = true
	}
	c.mu.Unlock()
	if from == 0 {
		return
	}
	spec := watchSpec{key: blocker, from: from,
		deleted: func(*clientv3.Event) { c.note(gen, func() { c.gone = true }) },
		ended:   func(int64) { c.note(gen, func() { c.broken = true }) },
	}
	if c.r == slot {
		spec.key, spec.prefix = c.q.prefix, true
		spec.deleted = func(ev *clientv3.Event) {
			c.note(gen, func() {
				switch {
				case ev.PrevKv == nil:
					c.broken = true // cannot tell where the key stood
				case ev.PrevKv.CreateRevision < c.rev:
					c.ahead--
				}
			})
		}
	} else {
		c.q.p.block(blocker, c)
	}
	stop := c.q.p.watch(spec)
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen { // disarmed meanwhile
		stop()
		return
	}
	c.stop = stop
}

// disarm stops c's watch; what it hears from now on is ignored.
func (c *contender) disarm() {
	c.mu.Lock()
	c.gen++
	stop, blocker := c.stop, c.blocker
	c.stop = nil
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
	if c.r != slot && blocker != "" {
		c.q.p.unblock(blocker, c)
	}
}

// note applies what watch gen heard, unless a newer watch replaced it, and
// wakes the wait.
func (c *contender) note(gen int, f func()) {
	c.mu.Lock()
	if gen != c.gen {
		c.mu.Unlock()
		return
	}
	f()
	c.changed = true
	c.mu.Unlock()
	wake(c.news)
}

// clear hears that key, created at revision rev, a grant of this
// Provider's exclusive role, was released: if it is c's blocker, nothing
// is left ahead of c.
func (c *contender) clear(key string, rev int64) {
	c.mu.Lock()
	if c.blocker != key || c.bRev != rev {
		c.mu.Unlock()
		return
	}
	c.gone, c.cleared, c.changed = true, true, true
	c.mu.Unlock()
	wake(c.news)
}

// grant ends the wait with the handle.
func (c *contender) grant() core.Handle {
	c.disarm()
	c.h.grant()
	return c.h
}

// leave gives up: the key is deleted before leave returns (bounded by
// kit.CleanupTimeout), so that nobody waits behind it.
func (c *contender) leave(ctx context.Context) {
	c.disarm()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), kit.CleanupTimeout)
	defer cancel()
	_ = c.h.Release(ctx)
}

// block records that c waits behind key, so that the release of key, a
// local exclusive grant, can clear c's way at once (handle.release).
func (p *Provider) block(key string, c *contender) {
	p.bmu.Lock()
	defer p.bmu.Unlock()
	cs := p.blocked[key]
	if cs == nil {
		cs = make(map[*contender]struct{})
		p.blocked[key] = cs
	}
	cs[c] = struct{}{}
}

func (p *Provider) unblock(key string, c *contender) {
	p.bmu.Lock()
	defer p.bmu.Unlock()
	if cs := p.blocked[key]; cs != nil {
		delete(cs, c)
		if len(cs) == 0 {
			delete(p.blocked, key)
		}
	}
}

// cleared tells the contenders waiting behind key, created at revision
// rev, a released exclusive grant of this Provider, that nothing is ahead
// of them in key's place.
func (p *Provider) cleared(key string, rev int64) {
	p.bmu.Lock()
	cs := make([]*contender, 0, len(p.blocked[key]))
	for c := range p.blocked[key] {
		cs = append(cs, c)
	}
	p.bmu.Unlock()
	for _, c := range cs {
		c.clear(key, rev)
	}
}
