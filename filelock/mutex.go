package filelock

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// mutex is an exclusive lock on the file <dir>/mutex/<safe name>.lock. Its
// holder records itself in the file for Holder (inspector.go).
type mutex struct {
	p    *Provider
	name string
	base string // path without extension; also the notifier key
}

func (m *mutex) Name() string { return m.name }

// TryAcquire makes one attempt without waiting: about fifteen system calls
// (open and flock the lock file, check it is still the one at the path,
// open its signal descriptor, update the fencing counter, write the holder
// record, look for a line to ring at release), and no file creation once
// the lock file exists. A held lock gives an error
// matching core.ErrNotAcquired at once.
func (m *mutex) TryAcquire(ctx context.Context) (core.Handle, error) {
	if err := m.p.begin(ctx, m.name); err != nil {
		return nil, err
	}
	h, _, err := m.try(ctx)
	return h, err
}

// Acquire waits until the lock is granted or ctx ends; then the error
// matches both core.ErrNotAcquired and ctx.Err(). On Linux waiters line up
// (line.go): a release, from this process or another, wakes the two at the
// front alone, and the death of the holder wakes them at once; elsewhere
// waiters retry on the Provider's backoff.
func (m *mutex) Acquire(ctx context.Context) (core.Handle, error) {
	if err := m.p.begin(ctx, m.name); err != nil {
		return nil, err
	}
	if !lines {
		return m.p.wait(ctx, m.name, m.base, true, m.try)
	}
	m.p.watch(filepath.Dir(m.base))
	h, _, err := m.try(ctx)
	if err == nil || !errors.Is(err, core.ErrNotAcquired) {
		return h, err
	}
	return m.p.waitInLine(ctx, m.name, m.base, m.attempt)
}

func (m *mutex) try(ctx context.Context) (core.Handle, time.Duration, error) {
	return m.attempt(nil)(ctx)
}

// attempt is one try at the lock by the waiter whose ticket is t (nil for
// none). Once it has the lock it takes the ticket out of the line, so that
// its bell, and joiners, see the waiters behind it at the front.
func (m *mutex) attempt(t *ticket) kit.Attempt {
	return func(context.Context) (core.Handle, time.Duration, error) {
		if err := m.p.usable(m.name); err != nil {
			return nil, 0, err
		}
		lf, err := m.p.tryLock(m.base+".lock", false, true)
		if err != nil {
			return nil, 0, attemptError(m.name, err, "held by another handle or process")
		}
		t.unlink()
		lf.bell = newBell(m.base)
		return m.p.grant(m.name, m.base, lf, true)
	}
}

// attemptError turns a tryLock error into the error an attempt returns.
func attemptError(name string, err error, held string) error {
	if err == errBusy {
		return busy(name, held)
	}
	return kit.Wrap(backend, "acquire", name, classify(err))
}
