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
)

// cleanupTimeout bounds the detached clean-up of a write whose outcome a
// cancelled context left unknown.
const cleanupTimeout = 5 * time.Second

// acquireKey makes one attempt at key: it writes a fresh value expecting the
// hinted revision (0, or a delete marker's revision), and only when that
// guess is wrong reads the key's latest entry and, if it is free, writes
// again expecting that entry. So a free key costs one round trip when the
// guess is right and three when it is not; a held key costs two.
func (p *Provider) acquireKey(outer context.Context, name, key, watchKey string, waiting bool) (core.Handle, time.Duration, error) {
	if p.isClosed.Load() {
		return nil, 0, &core.Error{Backend: backend, Op: "acquire", Name: name, Err: ErrClosed}
	}
	start := time.Now()
	hint := p.hints.get(key)
	ctx, cancel := context.WithTimeout(outer, p.cfg.timeout)
	defer cancel()
	v := value{ID: p.cfg.identity, Owner: newOwner()}
	val := v.encode()
	rev, err := p.write(ctx, key, val, hint)
	if isWrongSeq(err) && hint != 0 {
		p.hints.drop(key, hint)
		if waiting {
			// Someone wrote after the release we were woken for: almost
			// surely a contender that took the lock. Skip the read; the
			// watcher wakes us at the next release, and if the guess was
			// wrong the next fallback retry (without a hint) finds out.
			return nil, 0, &core.Error{Backend: backend, Op: "acquire", Name: name, Err: core.Busy("taken by a concurrent acquire")}
		}
	}
	if isWrongSeq(err) {
		var msg *jetstream.RawStreamMsg
		msg, err = p.last(ctx, key)
		switch {
		case err != nil:
		case msg != nil && !isMarker(msg):
			return nil, p.retryIn(msg), &core.Error{Backend: backend, Op: "acquire", Name: name, Err: busy(msg)}
		default:
			var expect uint64
			if msg != nil {
				expect = msg.Sequence
				p.hints.set(key, expect)
			}
			rev, err = p.write(ctx, key, val, expect)
			if isWrongSeq(err) {
				return nil, time.Millisecond, &core.Error{Backend: backend, Op: "acquire", Name: name, Err: core.Busy("taken by a concurrent acquire")}
			}
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			// A write may have landed after all: make sure we hold nothing.
			p.cleanup(ctx, key, v.Owner)
		}
		if outer.Err() != nil {
			return nil, 0, &core.Error{Backend: backend, Op: "acquire", Name: name, Err: core.NotAcquired(outer)}
		}
		return nil, 0, &core.Error{Backend: backend, Op: "acquire", Name: name, Err: err}
	}
	l := &lease{p: p, name: name, key: key, watchKey: watchKey, value: v, rev: rev}
	l.value.Token = rev
	h := &handle{BaseHandle: core.NewHandle(rev, l.release), key: key, lease: l}
	p.keeper.Keep(h.BaseHandle, start, l)
	return h, 0, nil
}

// handle is the Handle natslock returns; key is the KV key it holds.
type handle struct {
	*core.BaseHandle
	key   string
	lease *lease
}

func busy(msg *jetstream.RawStreamMsg) error {
	v, err := decodeValue(msg.Data)
	if err != nil {
		return core.Busy("held (revision %d)", msg.Sequence)
	}
	return core.Busy("held by %s (token %d)", v.ID, v.token(msg.Sequence))
}

// retryIn is how long the holder's entry has left before the bucket's TTL
// removes it, as far as this clock can tell: the wait need not sleep longer.
func (p *Provider) retryIn(msg *jetstream.RawStreamMsg) time.Duration {
	left := p.cfg.ttl - time.Since(msg.Time)
	return max(left, time.Millisecond)
}

// cleanup deletes key if its latest entry is the one written with owner.
func (p *Provider) cleanup(ctx context.Context, key, owner string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	msg, err := p.last(ctx, key)
	if err != nil || msg == nil || isMarker(msg) {
		return
	}
	if v, err := decodeValue(msg.Data); err == nil && v.Owner == owner {
		_, _ = p.del(ctx, key, msg.Sequence)
	}
}

// lease is one held key. Neither renewal nor release holds mu across a
// round trip: when they cross, the loser sees "wrong last sequence" and
// re-reads the key, and an entry that carries our owner is still ours.
type lease struct {
	p        *Provider
	name     string
	key      string
	watchKey string // what this Provider's waiters for key subscribe to
	value    value  // what renewals write
	// onRelease, when set before the handle is returned, runs after a
	// successful release.
	onRelease func()

	mu   sync.Mutex
	rev  uint64 // latest revision we know we wrote
	done bool   // released: renewals stop
}

func (l *lease) current() (rev uint64, done bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rev, l.done
}

// advance records a revision we wrote, unless a later one is known.
func (l *lease) advance(rev uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rev = max(l.rev, rev)
}

// release deletes the key if it still holds our entry. A key that holds
// someone else's entry (or nothing) is left alone and the release succeeds:
// there is nothing of ours to free. One round trip; three when it crossed a
// renewal.
func (l *lease) release(ctx context.Context) error {
	l.mu.Lock()
	l.done = true
	rev := l.rev
	l.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, l.p.cfg.timeout)
	defer cancel()
	seq, err := l.p.del(ctx, l.key, rev)
	if isWrongSeq(err) {
		rev, err = l.ours(ctx)
		if err == nil && rev == 0 {
			l.released()
			return nil
		}
		if err == nil {
			seq, err = l.p.del(ctx, l.key, rev)
			if isWrongSeq(err) {
				l.released()
				return nil
			}
		}
	}
	if err != nil {
		return &core.Error{Backend: backend, Op: "release", Name: l.name, Err: err}
	}
	l.p.hints.set(l.key, seq)
	// Wake this Provider's own waiters now rather than when the watcher
	// relays the marker.
	l.p.notify.Notify(l.watchKey)
	l.released()
	return nil
}

func (l *lease) released() {
	if l.onRelease != nil {
		l.onRelease()
	}
}

// ours returns the key's latest revision if it is an entry we wrote (a
// renewal whose acknowledgement was lost or crossed), else 0.
func (l *lease) ours(ctx context.Context) (uint64, error) {
	msg, err := l.p.last(ctx, l.key)
	if err != nil || msg == nil || isMarker(msg) {
		return 0, err
	}
	if v, err := decodeValue(msg.Data); err == nil && v.Owner == l.value.Owner {
		return msg.Sequence, nil
	}
	return 0, nil
}

// renew is the Keeper's Renew: it writes every lease of the batch again,
// each expecting its last revision, pipelined over the connection (one round
// trip for the batch), which restarts each key's age in the bucket.
func (p *Provider) renew(ctx context.Context, batch []*core.Lease) []error {
	errs := make([]error, len(batch))
	if err := p.connected(ctx); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	futs := make([]jetstream.PubAckFuture, len(batch))
	for i, kl := range batch {
		l := kl.Data.(*lease)
		rev, done := l.current()
		if done {
			continue
		}
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
			l.advance(ack.Sequence)
		case err := <-f.Err():
			errs[i] = l.renewFailed(ctx, err)
		case <-ctx.Done():
			errs[i] = ctx.Err()
		}
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
		l.advance(rev)
		return errors.New("natslock: renewal revision moved; retrying")
	}
	if _, done := l.current(); done {
		return nil // released meanwhile: the keeper drops it anyway
	}
	return fmt.Errorf("%w: key %s was deleted, expired or taken", core.ErrLockLost, l.key)
}
