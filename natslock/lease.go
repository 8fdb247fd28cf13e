package natslock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// keyTry is one attempt at a key.
type keyTry struct {
	name, key string
	watchKey  string // what this Provider's waiters for key subscribe to
	owner     string // our owner value ("": a fresh one)
	// waiting: a waiter woken by a release signal may skip the read.
	waiting bool
	// handoff marks the lease's releases as free to hand the key to a
	// waiter of this Provider (handoff.go): a mutex's key, a semaphore's
	// slot.
	handoff bool
	// line: the key is a mutex with a wait line (line.go): our value names
	// our inbox, and the grant's hold takes joins.
	line bool

	held *value // set when the key was found held: its value
	rev  uint64 // and revision
}

// acquireKey makes one attempt at key with a fresh owner (see tryKey).
func (p *Provider) acquireKey(ctx context.Context, name, key, watchKey string, waiting, handoff bool) (core.Handle, time.Duration, error) {
	return p.tryKey(ctx, &keyTry{name: name, key: key, watchKey: watchKey, waiting: waiting, handoff: handoff})
}

// tryKey makes one attempt at t.key: it writes our value expecting the
// hinted revision (0, or a delete marker's revision), and only when that
// guess is wrong reads the key's latest entry and, if it is free, writes
// again expecting that entry. So a free key costs one round trip when the
// guess is right and three when it is not; a held key costs two, and sets
// t.held. A mutex waiter that loses the race for a freed key reads it once
// more, to join the winner's line: up to five.
func (p *Provider) tryKey(outer context.Context, t *keyTry) (core.Handle, time.Duration, error) {
	if p.isClosed.Load() {
		return nil, 0, kit.Wrap(backend, "acquire", t.name, ErrClosed)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(outer, p.cfg.timeout)
	defer cancel()
	v := value{ID: p.cfg.identity, Owner: t.owner}
	if v.Owner == "" {
		v.Owner = newOwner()
	}
	if t.line {
		v.Inbox = p.line.inbox
		p.line.open(t.key, v.Owner, nil)
	}
	rev, retryIn, err := p.writeFree(ctx, t, v.encode())
	if err != nil {
		if t.line {
			p.line.unopen(v.Owner)
		}
		if ctx.Err() != nil && !errors.Is(err, core.ErrNotAcquired) {
			// A write may have landed after all: make sure we hold
			// nothing. (A busy key refused our write.)
			p.cleanup(ctx, t.key, v.Owner)
		}
		if outer.Err() != nil {
			return nil, 0, kit.Wrap(backend, "acquire", t.name, kit.NotAcquired(outer))
		}
		return nil, retryIn, kit.Wrap(backend, "acquire", t.name, err)
	}
	v.Token = rev
	e := &entry{owner: v.Owner, rev: rev, revAt: start}
	l := &lease{p: p, name: t.name, key: t.key, watchKey: t.watchKey, e: e, value: v, handoff: t.handoff, line: t.line, run: kit.StartRun(start)}
	return p.grant(l, start), 0, nil
}

// writeFree is tryKey's writes: it returns the revision of our entry, or
// an error (busy, with the time the holder's entry has left, or another).
func (p *Provider) writeFree(ctx context.Context, t *keyTry, val []byte) (uint64, time.Duration, error) {
	hint := p.hints.get(t.key)
	rev, err := p.write(ctx, t.key, val, hint)
	if isWrongSeq(err) && hint != 0 {
		p.hints.drop(t.key, hint)
		if t.waiting {
			// Someone wrote after the release we were woken for: almost
			// surely a contender that took the lock. Skip the read; the
			// watcher wakes us at the next release, and if the guess was
			// wrong the next fallback retry (without a hint) finds out.
			return 0, 0, kit.Busy("taken by a concurrent acquire")
		}
	}
	if !isWrongSeq(err) {
		return rev, 0, err
	}
	for tries := 1; ; tries++ {
		var msg *jetstream.RawStreamMsg
		msg, err = p.last(ctx, t.key)
		switch {
		case err != nil:
			return 0, 0, err
		case msg != nil && !isMarker(msg):
			if hv, err := decodeValue(msg.Data); err == nil {
				t.held, t.rev = &hv, msg.Sequence
				if t.line {
					p.line.note(t.key, hv)
				}
			}
			return 0, p.retryIn(msg), busy(msg)
		}
		var expect uint64
		if msg != nil {
			expect = msg.Sequence
			p.hints.set(t.key, expect)
		}
		rev, err = p.write(ctx, t.key, val, expect)
		// A mutex waiter that lost the race reads once more, to join the
		// winner's line.
		if !isWrongSeq(err) || !t.line || tries == 2 {
			break
		}
	}
	if isWrongSeq(err) {
		return 0, time.Millisecond, kit.Busy("taken by a concurrent acquire")
	}
	return rev, 0, err
}

// grant makes the handle of lease l, whose key the backend held for it at
// start, and has the keeper renew it.
func (p *Provider) grant(l *lease, start time.Time) *handle {
	h := &handle{BaseHandle: kit.NewHandle(l.value.Token, l.release), key: l.key, lease: l}
	l.base = h.BaseHandle
	if l.handoff && l.key == l.watchKey {
		p.handoff.SetHolder(l.key, l)
	}
	p.keeper.Keep(h.BaseHandle, start, l)
	return h
}

// handle is the Handle natslock returns; key is the KV key it holds.
type handle struct {
	*kit.BaseHandle
	key   string
	lease *lease
}

func busy(msg *jetstream.RawStreamMsg) error {
	v, err := decodeValue(msg.Data)
	if err != nil {
		return kit.Busy("held (revision %d)", msg.Sequence)
	}
	return kit.Busy("held by %s (token %d)", v.ID, v.token(msg.Sequence))
}

// retryIn is how long the holder's entry has left before the bucket's TTL
// removes it, as far as this clock can tell: the wait need not sleep longer.
func (p *Provider) retryIn(msg *jetstream.RawStreamMsg) time.Duration {
	left := p.cfg.ttl - time.Since(msg.Time)
	return max(left, time.Millisecond)
}

// cleanup deletes key if its latest entry is the one written with owner.
func (p *Provider) cleanup(ctx context.Context, key, owner string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), kit.CleanupTimeout)
	defer cancel()
	msg, err := p.last(ctx, key)
	if err != nil || msg == nil || isMarker(msg) {
		return
	}
	if v, err := decodeValue(msg.Data); err == nil && v.Owner == owner {
		_, _ = p.del(ctx, key, msg.Sequence)
	}
}

// lease is one grant of a key: its token and the value its renewals write.
// The key's state on the server is its entry, which a run of local
// handoffs (handoff.go) passes from grant to grant.
type lease struct {
	p        *Provider
	name     string
	key      string
	watchKey string // what this Provider's waiters for key subscribe to
	e        *entry
	value    value // what renewals write; value.Token is the grant's token
	base     *kit.BaseHandle
	// onRelease, when set before the handle is returned, runs after a
	// successful release.
	onRelease func()
	// handoff: a release may hand the key to a local waiter; run is the
	// grant's place in a run of such handoffs (handoff.go).
	handoff bool
	run     kit.Run
	// line: a mutex with a wait line (line.go); a release hands the key
	// to the first waiter of its hold.
	line bool

	done bool // under e.mu; released: renewals stop
}

// entry is our entry in a key: written by an acquire, with a random owner
// value, and rewritten by renewals and by the handoffs of handoff.go. Our
// writes to it go one at a time, each expecting the revision the previous
// one made, so they never fail on each other; a release waits for the one
// in flight. Release does not hold mu across a round trip: when it crosses
// a write it could not wait for, the loser sees "wrong last sequence" and
// re-reads the key, and an entry that carries our owner is still ours.
type entry struct {
	owner string

	mu      sync.Mutex
	rev     uint64        // latest revision we know we wrote
	revAt   time.Time     // no later than the start of the write that made rev
	writing chan struct{} // closed when our write in flight ends; nil when none
}

func (l *lease) current() (rev uint64, done bool) {
	l.e.mu.Lock()
	defer l.e.mu.Unlock()
	return l.e.rev, l.done
}

// advance records a revision we wrote, by a write that started at or after
// at (zero: unknown, then the previous revision's time stays, which is
// earlier), unless a later revision is known.
func (e *entry) advance(rev uint64, at time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if rev <= e.rev {
		return
	}
	e.rev = rev
	if at.IsZero() {
		return
	}
	e.revAt = at
}

// beginWrite waits, within ctx, for our write in flight to end, then marks
// a new one in flight and returns the revision it must expect and the func
// that ends it. ok is false once l is released (or ctx ended).
func (l *lease) beginWrite(ctx context.Context) (rev uint64, end func(), ok bool) {
	e := l.e
	if !e.lockIdle(ctx) {
		return 0, nil, false
	}
	defer e.mu.Unlock()
	if l.done {
		return 0, nil, false
	}
	return e.rev, e.startWrite(), true
}

// lockIdle locks e.mu once no write of ours is in flight and reports true;
// it reports false, e.mu not held, when ctx ends first.
func (e *entry) lockIdle(ctx context.Context) bool {
	for {
		e.mu.Lock()
		w := e.writing
		if w == nil {
			return true
		}
		e.mu.Unlock()
		select {
		case <-w:
		case <-ctx.Done():
			return false
		}
	}
}

// startWrite marks a write in flight and returns the func that ends it;
// e.mu is held.
func (e *entry) startWrite() (end func()) {
	ch := make(chan struct{})
	e.writing = ch
	return func() {
		e.mu.Lock()
		e.writing = nil
		e.mu.Unlock()
		close(ch)
	}
}

// settle waits, within ctx, for our write in flight, so that what follows
// does not race it, and returns the latest revision we wrote.
func (e *entry) settle(ctx context.Context) uint64 {
	if !e.lockIdle(ctx) {
		e.mu.Lock()
	}
	defer e.mu.Unlock()
	return e.rev
}

// release hands the key to a waiter of this Provider when it may
// (handoff.go), else to the first waiter of its line (line.go), else
// deletes the key if it still holds our entry. A key that holds someone
// else's entry (or nothing) is left alone and the release succeeds: there
// is nothing of ours to free. One round trip, a handoff included; three
// when it crossed a renewal.
func (l *lease) release(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, l.p.cfg.timeout)
	defer cancel()
	// Forget l as the local holder first: a local waiter woken by the
	// release must not find it and skip its attempt.
	l.p.handoff.DropHolder(l.key, l)
	l.e.mu.Lock()
	l.done = true
	l.e.mu.Unlock()
	if l.handoff && !l.p.isClosed.Load() {
		if handed, err := l.p.handoff.Pass(ctx, l.watchKey, l.run, l.handOn); handed {
			l.released()
			if err != nil {
				return kit.Wrap(backend, "release", l.name, err)
			}
			return nil
		}
	}
	if l.line && !l.lost() && l.handToLine(ctx) {
		l.released()
		return nil
	}
	seq, err := l.deleteKey(ctx)
	if l.line {
		l.p.line.freed(l.e.owner, seq)
	}
	if err != nil {
		return kit.Wrap(backend, "release", l.name, err)
	}
	if seq != 0 {
		l.p.hints.set(l.key, seq)
		if !(l.handoff && !l.p.handoff.Within(l.run) && l.p.watchLive(l.watchKey)) {
			// Wake this Provider's own waiters now rather than when the
			// watcher relays the marker. Not at the end of a run of local
			// handoffs: there our waiters hear the marker from the
			// watcher, as waiters in other processes do, so that they all
			// race for the key on equal terms (handoff.go).
			l.p.notify.Notify(l.watchKey)
		}
	}
	l.released()
	return nil
}

// handToLine hands the key to the first waiter of our line, after our write
// in flight, and reports whether it did.
func (l *lease) handToLine(ctx context.Context) bool {
	e := l.e
	if !e.lockIdle(ctx) {
		return false
	}
	rev, end := e.rev, e.startWrite()
	e.mu.Unlock()
	defer end()
	handed, _ := l.p.handOver(ctx, l.key, e.owner, rev)
	return handed
}

// deleteKey writes a delete marker on the key if it still holds our entry
// and returns the marker's revision (0: the key held nothing of ours).
func (l *lease) deleteKey(ctx context.Context) (uint64, error) {
	rev := l.e.settle(ctx)
	seq, err := l.p.del(ctx, l.key, rev)
	if !isWrongSeq(err) {
		return seq, err
	}
	rev, err = l.ours(ctx)
	if err != nil || rev == 0 {
		return 0, err
	}
	seq, err = l.p.del(ctx, l.key, rev)
	if isWrongSeq(err) {
		return 0, nil
	}
	return seq, err
}

func (l *lease) released() {
	if l.onRelease != nil {
		l.onRelease()
	}
}

// ours returns the key's latest revision if it is an entry we wrote (a
// write whose acknowledgement was lost or crossed), else 0.
func (l *lease) ours(ctx context.Context) (uint64, error) {
	msg, err := l.p.last(ctx, l.key)
	if err != nil || msg == nil || isMarker(msg) {
		return 0, err
	}
	if v, err := decodeValue(msg.Data); err == nil && v.Owner == l.e.owner {
		return msg.Sequence, nil
	}
	return 0, nil
}

// renew is the Keeper's Renew: it writes every lease of the batch again,
// each expecting its last revision, pipelined over the connection (one round
// trip for the batch), which restarts each key's age in the bucket.
func (p *Provider) renew(ctx context.Context, batch []*kit.Lease) []error {
	errs := make([]error, len(batch))
	if err := p.connected(ctx); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	start := time.Now()
	futs := make([]jetstream.PubAckFuture, len(batch))
	ends := make([]func(), len(batch))
	defer func() {
		for _, end := range ends {
			if end != nil {
				end()
			}
		}
	}()
	for i, kl := range batch {
		l := kl.Data.(*lease)
		// One write of ours at a time per key: a renewal that crossed a
		// handoff's background write would fail and read as uncertain.
		rev, end, ok := l.beginWrite(ctx)
		if !ok {
			if ctx.Err() != nil {
				errs[i] = ctx.Err()
			}
			continue // released
		}
		ends[i] = end
		m := &nats.Msg{Subject: p.prefix + l.key, Data: l.value.encode(), Header: nats.Header{}}
		futs[i], errs[i] = p.js.PublishMsgAsync(m, jetstream.WithExpectLastSequencePerSubject(rev))
	}
	for i, f := range futs {
		if f == nil {
			continue
		}
		l := batch[i].Data.(*lease)
		select {
		case ack := <-f.Ok():
			l.e.advance(ack.Sequence, start)
		case err := <-f.Err():
			errs[i] = l.renewFailed(ctx, err)
		case <-ctx.Done():
			errs[i] = ctx.Err()
		}
		ends[i]()
		ends[i] = nil
	}
	return errs
}

// renewFailed classifies a failed renewal: lost when the key no longer holds
// our entry, retryable otherwise.
func (l *lease) renewFailed(ctx context.Context, err error) error {
	if !isWrongSeq(err) {
		return err
	}
	rev, gerr := l.ours(ctx)
	switch {
	case gerr != nil:
		return gerr
	case rev != 0:
		// An earlier renewal landed although we never saw its ack.
		l.e.advance(rev, time.Time{})
		return errors.New("natslock: renewal revision moved; retrying")
	}
	if _, done := l.current(); done {
		return nil // released meanwhile: the keeper drops it anyway
	}
	return fmt.Errorf("%w: key %s was deleted, expired or taken", core.ErrLockLost, l.key)
}

// adopt makes the handle of a grant written for owner by another holder's
// release: token is the grant's revision, rev the latest revision of our
// entry, written no earlier than start.
func (p *Provider) adopt(name, key, owner string, token, rev uint64, start time.Time) *handle {
	v := value{ID: p.cfg.identity, Owner: owner, Inbox: p.line.inbox, Token: token}
	e := &entry{owner: owner, rev: rev, revAt: start}
	l := &lease{p: p, name: name, key: key, watchKey: key, e: e, value: v, handoff: true, line: true, run: kit.StartRun(start)}
	return p.grant(l, start)
}
