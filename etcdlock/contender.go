package etcdlock

import (
	"context"
	"fmt"
	"slices"
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
// A read names the newest keys ahead of the contender in its scope, with
// their create revisions, and counts the others; the first deletion of a
// named key after its creation is that key's (a name is written again
// only once its key is gone), and crosses it off. A mutex's or writer's
// contender is admitted when no key is left ahead, a reader's when no
// writer's is, a slot's when fewer than max are. So the release that
// unblocks a contender admits it without a request, whichever key it
// released, and wakes no other wait: each deletion reaches every
// contender of the Provider that waits on the lock's watch, but it wakes
// only those it admits (a contender that knocked hears a ring, bell.go).
// When the keys left unnamed could decide (a line longer than a read
// names), the contender reads the queue again (one round trip), naming
// them all.
//
// The newest key left on the list is the one right ahead of the contender:
// every newer key ahead was named too, and has been crossed off.
// When it is a grant of this Provider's exclusive role, its release says
// so to the contender directly, before its delete is sent
// (Provider.cleared): the grant proved that nothing was ahead of it, so
// nothing is left ahead of the contender either.
type contender struct {
	q    *queue
	r    role
	rev  int64 // the key's create revision
	h    *handle
	news chan struct{} // wakes the wait (kit.Wait) when something changed

	mu        sync.Mutex
	ahead     []aheadKey // the keys ahead named by the read and not deleted since, oldest first
	unnamed   int64      // how many keys ahead the read counted but did not name
	cleared   bool       // the key right ahead is a local exclusive grant being released
	changed   bool       // something was heard since the last look
	broken    bool       // the watch ended: only a read can tell what is ahead
	reading   bool       // a read is in flight: what is heard waits in pending
	pending   []deletion
	knocked   aheadKey    // the key ahead this contender knocked on (bell.go); zero when none
	later     *time.Timer // starts the watch of knocked (follow)
	early     *time.Timer // reads the key behind c's own ahead of its grant
	unfollow  func()      // stops the watch of knocked
	moved     aheadKey    // a key whose Provider answered c's knock with "moved"
	reknock   bool        // a "moved" ring came: knock on the next key ahead whatever its place
	knockGone bool        // knocked was deleted, and no ring admitted c yet
	graced    bool        // the wait gave the ring knockGrace since
}

// aheadKey is a key ahead of a contender: its name and create revision.
type aheadKey struct {
	key string
	rev int64
}

// seeLocked records a read of the keys ahead: kvs, newest first, are the
// first of n keys. The deletions heard while the read was in flight are
// applied on top: one the read already reflects crosses off nothing,
// since a name the read found was written after that deletion; c.mu is
// held.
func (c *contender) seeLocked(kvs []*mvccpb.KeyValue, n int64) {
	c.ahead = c.ahead[:0]
	for _, kv := range slices.Backward(kvs) {
		c.ahead = append(c.ahead, aheadKey{string(kv.Key), kv.CreateRevision})
	}
	c.unnamed = n - int64(len(kvs))
	c.cleared, c.broken, c.knockGone, c.graced = false, false, false, false
	for _, d := range c.pending {
		c.applyLocked(d)
	}
	c.reading, c.pending = false, nil
}

// hear takes in a deletion under c's lock, and wakes the wait if it admits
// c or calls for a read.
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

// applyLocked applies d and reports whether the wait must look again: d
// admitted c, or left it needing a read; c.mu is held.
func (c *contender) applyLocked(d deletion) bool {
	switch {
	case d.broken:
		// A ring may be lost too: knock again after the read, unless the
		// key's Provider said it does not hold that key ("moved", with the
		// key named): then the watch of the key has to tell.
		if d.key != "" && c.knocked == (aheadKey{d.key, d.created}) {
			c.moved = c.knocked
		}
		// The key ahead left: the one now ahead may have counted it among
		// its knockers, and not look for c when granted (findNext).
		c.reknock = c.reknock || d.key != ""
		c.unfollowLocked()
		c.broken = true
		c.changed = true
		return true
	case d.cleared:
		if c.r == slot || len(c.ahead) == 0 || c.ahead[len(c.ahead)-1] != (aheadKey{d.key, d.created}) {
			return false
		}
		c.cleared = true
	default:
		// Keys mostly go oldest first, so the search starts there.
		i := slices.IndexFunc(c.ahead, func(k aheadKey) bool { return k.key == d.key && k.rev < d.at })
		if i < 0 {
			return false // a key behind c, outside its scope, or already crossed off
		}
		if c.ahead[i] == c.knocked {
			// Its ring, which admits c when it released a grant, comes
			// with the same revision, often just after: the wait gives
			// it knockGrace, then reads the line again (look).
			c.knockGone, c.changed = true, true
			return true
		}
		c.ahead = slices.Delete(c.ahead, i, i+1)
	}
	c.changed = true
	return c.admitted() || c.unsure()
}

// admitted reports whether what c knows admits it; c.mu is held.
func (c *contender) admitted() bool {
	left := int64(len(c.ahead)) + c.unnamed
	switch {
	case c.r == slot:
		return left < int64(c.q.max)
	case c.cleared:
		return true
	}
	return left == 0
}

// unsure reports whether the keys ahead that the read did not name could
// admit c: only a read can tell; c.mu is held.
func (c *contender) unsure() bool {
	need := 1 // exclusive, shared: admitted when none is left
	if c.r == slot {
		need = c.q.max
	}
	return c.unnamed > 0 && len(c.ahead) < need
}

func (c *contender) admittedNow() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.admitted()
}

// first is the attempt that follows the enqueue: granted, or busy and
// listening for the deletions after the enqueue (and woken at once when
// only a read can tell).
func (c *contender) first() (core.Handle, time.Duration, error) {
	c.mu.Lock()
	ok, unsure := c.admitted(), c.unsure()
	c.mu.Unlock()
	if ok {
		return c.grant()
	}
	c.listen(c.rev)
	if unsure {
		wake(c.news)
	}
	return nil, 0, c.busy()
}

// look is each later attempt of a waiting Acquire, after a wake-up or the
// fallback delay: granted when what c heard admits it; otherwise a read of
// the queue (one round trip) unless what c knows decides: the watch is
// unbroken and was heard since the last look, and the keys the read did
// not name cannot admit c.
func (c *contender) look(ctx context.Context) (core.Handle, time.Duration, error) {
	c.mu.Lock()
	ok := c.admitted()
	grace := c.knockGone && !c.graced
	c.graced = c.graced || grace
	read := c.broken || !c.changed || c.unsure() || c.knockGone && !grace
	c.changed = false
	c.mu.Unlock()
	switch {
	case ok:
		return c.grant()
	case grace:
		return nil, knockGrace, c.busy()
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
		if c.admittedNow() {
			return c.grant() // by what was heard during the read
		}
		return nil, c.q.p.recheck.Min, fmt.Errorf("%w: reading the queue: %w", core.ErrNotAcquired, err)
	}
	if c.admittedNow() {
		return c.grant()
	}
	c.listen(rev) // after a watch that broke, a new one starts
	return nil, 0, c.busy()
}

// listen has c hear what goes ahead of it after revision since, the
// revision of the read it goes by: a contender for the exclusive role
// right behind an exclusive key knocks on it (bell.go), and needs no
// watch of the lock's keys; the others join their lock's watch
// (watch.go), and hear the releases of this Provider's grants there too
// (Provider.cleared).
func (c *contender) listen(since int64) {
	k, ok := c.bellAhead()
	if !ok || !c.q.p.bellReady() {
		c.mu.Lock()
		c.unfollowLocked()
		c.mu.Unlock()
		c.q.p.join(c, since)
		return
	}
	c.q.p.part(c)
	c.knock(k, since)
}

// bellAhead returns the key c can knock on: the newest key ahead, when
// both are exclusive and that key's Provider has a bell.
func (c *contender) bellAhead() (aheadKey, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.r != exclusive || len(c.ahead) == 0 {
		return aheadKey{}, false
	}
	k := c.ahead[len(c.ahead)-1]
	_, ok := ownerOf(c.q.prefix, k.key)
	return k, ok && c.q.roleOf([]byte(k.key)) == exclusive
}

// knock tells the Provider of k, the newest key ahead of c, that c waits
// right behind it, unless c did so already. Across Providers only a
// contender with no other key ahead knocks: a key with keys ahead of it
// was not granted yet, and reads which key is right behind it once it is
// (Provider.findNext). Within one, a knock costs nothing.
// After Provider.follow (knockFollow), c also watches k, to hear it go
// where no ring tells (contender.follow).
func (c *contender) knock(k aheadKey, since int64) {
	p := c.q.p
	c.mu.Lock()
	if c.knocked == k {
		c.mu.Unlock()
		return
	}
	c.unfollowLocked()
	c.knocked, c.knockGone, c.graced = k, false, false
	id, _ := ownerOf(c.q.prefix, k.key)
	tell := (id == p.id || len(c.ahead) == 1 && c.unnamed == 0 || c.reknock) && k != c.moved
	c.reknock = c.reknock && !tell
	c.later = time.AfterFunc(p.follow, func() { c.follow(k, since) })
	if c.early == nil && len(c.ahead)+int(c.unnamed) > 1 {
		// Not next in line: by the time it is granted, the key behind it is
		// likely there, and reading it now keeps that read off the
		// handover (Provider.findNext).
		c.early = time.AfterFunc(successorAfter, func() { p.findNext(c.q.prefix, c.h.key, c.rev) })
	}
	c.mu.Unlock()
	p.bells.mu.Lock()
	p.bells.waits[c.h.key] = c
	p.bells.mu.Unlock()
	if tell {
		p.ring(ring{kind: knockRing, key: k.key, rev: k.rev, to: c.h.key})
	}
}

// follow watches k, the key c knocked on, from revision since + 1 on,
// since being the revision of the read that named k: a watch from the
// past misses nothing, and what it hears late (the server catches such a
// watch up at its next round) is what no ring told. When the watch ends
// (its revision was compacted), c reads the line again and knocks anew.
func (c *contender) follow(k aheadKey, since int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.knocked != k || c.unfollow != nil {
		return
	}
	c.unfollow = c.q.p.watch(watchSpec{key: k.key, from: since + 1,
		deleted: func(ev *clientv3.Event) { c.hear(deletion{key: k.key, at: ev.Kv.ModRevision}) },
		ended:   func(int64) { c.hear(deletion{broken: true}) },
	})
}

// unfollowLocked stops the watch of the key c knocked on, or its start;
// c.mu is held.
func (c *contender) unfollowLocked() {
	if c.later != nil {
		c.later.Stop()
		c.later = nil
	}
	if c.unfollow != nil {
		c.unfollow()
		c.unfollow = nil
	}
	c.knocked = aheadKey{}
}

// deafen undoes listen.
func (c *contender) deafen() {
	p := c.q.p
	p.part(c)
	p.bells.mu.Lock()
	if p.bells.waits[c.h.key] == c {
		delete(p.bells.waits, c.h.key)
	}
	p.bells.mu.Unlock()
	c.mu.Lock()
	c.unfollowLocked()
	if c.early != nil {
		c.early.Stop()
	}
	c.mu.Unlock()
}

// read reads the keys ahead of c again, naming them all, and returns the
// read's revision.
func (c *contender) read(ctx context.Context) (int64, error) {
	c.mu.Lock()
	c.reading = true
	c.mu.Unlock()
	ctx, cancel := c.q.p.ctxFor(ctx)
	defer cancel()
	resp, err := c.q.p.cli.Get(ctx, c.q.scope(c.r), clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithMaxCreateRev(c.rev-1), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend))
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
	c.seeLocked(resp.Kvs, int64(len(resp.Kvs)))
	if c.broken || c.knockGone {
		wake(c.news) // heard during the read, which may not show it
	}
	return resp.Header.Revision, nil
}

func (c *contender) busy() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	left := int64(len(c.ahead)) + c.unnamed
	switch {
	case c.r == slot:
		return kit.Busy("%d keys ahead, %d slots", left, c.q.max)
	case len(c.ahead) > 0:
		return kit.Busy("waiting behind %s, %d keys ahead", c.ahead[len(c.ahead)-1].key, left)
	}
	return kit.Busy("%d keys ahead", left)
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
	c.deafen()
	c.h.grant()
	if c.r == exclusive {
		c.q.p.findNext(c.q.prefix, c.h.key, c.rev)
	}
	return c.h, 0, nil
}

// leave gives up: the key is deleted before leave returns (bounded by
// kit.CleanupTimeout), so that nobody waits behind it.
func (c *contender) leave(ctx context.Context) {
	c.deafen()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), kit.CleanupTimeout)
	defer cancel()
	_ = c.h.Release(ctx)
}
