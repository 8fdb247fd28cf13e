package natslock

import (
	"context"
	"errors"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// Mutex returns the exclusive lock name. It does no I/O; a bad name is
// reported by the first acquire call (core.ErrInvalidName).
//
// The lock is the KV key "m.<kit.SafeName(name)>". TryAcquire costs one
// round trip when the lock is free and this Provider saw its last release
// (or never saw the key used), up to three otherwise, and two when it is
// held. The handle's fencing token is the KV revision of the grant. The
// lease is renewed every TTL/3 by the Provider's keeper; the handle's
// context ends with core.ErrLockLost when a renewal finds the key deleted,
// expired or taken, or when the trust window closes without a renewal (a
// dead server, a partition). Release is one round trip and never deletes
// another holder's entry; when an Acquire waits, it hands the lock over
// instead, in one write: to a waiter of this Provider (WithLocalHandoff),
// else to the first waiter of the mutex's line (see the package doc,
// Waiting). The Locker implements core.Inspector.
func (p *Provider) Mutex(name string) core.Locker {
	if err := kit.ValidateName(name); err != nil {
		return kit.FailedLocker(name, kit.Wrap(backend, "acquire", name, err))
	}
	return p.probe.Mutex(&mutex{p: p, name: name, key: mutexKey(name)})
}

var _ core.Inspector = (*mutex)(nil)

type mutex struct {
	p    *Provider
	name string
	key  string
}

func (m *mutex) Name() string { return m.name }

// Holder reports the current holder: the identity its Provider was
// configured with (WithIdentity) and its fencing token. held is false when
// the mutex is free. One round trip; it takes no lock.
func (m *mutex) Holder(ctx context.Context) (core.Holder, bool, error) {
	if m.p.isClosed.Load() {
		return core.Holder{}, false, kit.Wrap(backend, "holder", m.name, ErrClosed)
	}
	ctx, cancel := context.WithTimeout(ctx, m.p.cfg.timeout)
	defer cancel()
	msg, err := m.p.last(ctx, m.key)
	if err != nil {
		return core.Holder{}, false, kit.Wrap(backend, "holder", m.name, err)
	}
	if msg == nil || isMarker(msg) {
		return core.Holder{}, false, nil
	}
	v, err := decodeValue(msg.Data)
	if err != nil {
		return core.Holder{}, false, kit.Wrap(backend, "holder", m.name, err)
	}
	if l, ok := m.p.handoff.Holder(m.key); ok && l.value.Owner == v.Owner {
		// Ours: the local holder knows its token even before the write
		// that follows a handoff without a round trip has landed.
		return core.Holder{ID: v.ID, Token: l.value.Token}, true, nil
	}
	return core.Holder{ID: v.ID, Token: v.token(msg.Sequence)}, true, nil
}

// TryAcquire makes one attempt; a held lock gives an error matching
// core.ErrNotAcquired that names the holder.
func (m *mutex) TryAcquire(ctx context.Context) (core.Handle, error) {
	if ctx.Err() != nil {
		return nil, kit.Wrap(backend, "acquire", m.name, kit.NotAcquired(ctx))
	}
	h, _, err := m.p.tryKey(ctx, &keyTry{name: m.name, key: m.key, watchKey: m.key, handoff: true, line: true})
	return h, err
}

// Acquire waits until the lock is granted or ctx is done. It joins the
// holder's wait line (line.go), whose release hands it the lock, and polls
// only to recover a lost message or an expired key: from 250 ms at least,
// capped by the holder's remaining TTL, and from 20 ms at most while the
// holder is of an older natslock without a line.
func (m *mutex) Acquire(ctx context.Context) (core.Handle, error) {
	if ctx.Err() != nil {
		return nil, kit.Wrap(backend, "acquire", m.name, kit.NotAcquired(ctx))
	}
	w := &mutexWait{m: m, owner: newOwner()}
	m.p.line.expect(m.key, w.owner)
	h, err := m.p.waitLocal(ctx, m.name, m.key, lineBackoff(m.p.cfg.backoff), w.attempt)
	w.leave(h)
	return h, err
}

// wait is Acquire for every primitive. Waiters of one Provider line up
// behind a local gate per key (kit.Gates); the first in line makes one
// attempt, then, if the lock is busy, a kit.Wait woken by the watcher of
// watchKey (a mutex: by its line, line.go). When this Provider watches the
// key already (a hot lock), it subscribes before the first attempt
// instead, which saves the attempt that kit.Wait would repeat. A primitive
// that takes local handoffs waits through waitLocal instead.
func (p *Provider) wait(ctx context.Context, name, watchKey string, b kit.Backoff, try kit.Attempt) (core.Handle, error) {
	if ctx.Err() != nil {
		return nil, kit.Wrap(backend, "acquire", name, kit.NotAcquired(ctx))
	}
	leave, err := p.gates.Enter(ctx, watchKey)
	if err != nil {
		return nil, kit.Wrap(backend, "acquire", name, kit.NotAcquired(ctx))
	}
	defer leave()
	return p.waitGated(ctx, name, watchKey, b, try)
}

// waitGated is the wait of the caller that is first in line.
func (p *Provider) waitGated(ctx context.Context, name, watchKey string, b kit.Backoff, try kit.Attempt) (core.Handle, error) {
	if !p.watching(watchKey) {
		h, _, err := try(ctx)
		if err == nil || !errors.Is(err, core.ErrNotAcquired) || ctx.Err() != nil {
			return h, err
		}
	}
	wake, unsubscribe := p.notify.Subscribe(watchKey)
	defer unsubscribe()
	h, err := kit.Wait(ctx, b, wake, try)
	if err != nil && ctx.Err() != nil {
		err = kit.Wrap(backend, "acquire", name, err)
	}
	return h, err
}
