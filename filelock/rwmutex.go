package filelock

import (
	"context"
	"time"

	"github.com/distlock/distlock/core"
)

// rwmutex is a reader-writer lock on two files: <safe name>.lock, locked
// shared by readers and exclusive by the writer, and <safe name>.gate, which
// gives writers preference. A writer holds the gate exclusively from its
// first attempt until it is granted; a reader must take the gate shared,
// briefly, before it may take the lock. So once a writer waits, new readers
// wait behind it, while the readers already in finish.
type rwmutex struct {
	p    *Provider
	name string
	base string
}

func (l *rwmutex) Name() string { return l.name }

// RLocker returns the shared side of the lock.
func (l *rwmutex) RLocker() core.Locker { return reader{l} }

// TryAcquire makes one attempt at the write side without waiting. It fails
// with an error matching core.ErrNotAcquired when a reader or writer holds
// the lock or another writer waits for it.
func (l *rwmutex) TryAcquire(ctx context.Context) (core.Handle, error) {
	if err := l.p.begin(ctx, l.name); err != nil {
		return nil, err
	}
	var gate gateHold
	defer gate.drop(l)
	h, _, err := l.tryWrite(&gate)
	return h, err
}

// Acquire waits for the write side. From its first attempt it keeps new
// readers out, and lets them in again if it gives up.
func (l *rwmutex) Acquire(ctx context.Context) (core.Handle, error) {
	if err := l.p.begin(ctx, l.name); err != nil {
		return nil, err
	}
	var gate gateHold
	defer gate.drop(l)
	return l.p.wait(ctx, l.name, l.base, false,
		func(context.Context) (core.Handle, time.Duration, error) { return l.tryWrite(&gate) })
}

func (l *rwmutex) tryWrite(gate *gateHold) (core.Handle, time.Duration, error) {
	if err := l.p.usable(l.name); err != nil {
		return nil, 0, err
	}
	if gate.file == nil {
		g, err := l.p.tryLock(l.base+".gate", false, true)
		if err != nil {
			return nil, 0, attemptError(l.name, err, "another writer holds it or waits for it")
		}
		gate.file = g
	}
	lf, err := l.p.tryLock(l.base+".lock", false, true)
	if err != nil {
		return nil, 0, attemptError(l.name, err, "held by readers or a writer")
	}
	// The gate stays held across failed attempts. Once granted, the
	// caller's deferred drop gives it back, and readers queue behind the
	// lock itself again. The writer records itself for Holder.
	return l.p.grant(l.name, l.base, lf, true)
}

// gateHold is the gate a waiting writer holds between attempts.
type gateHold struct{ file *lockFile }

func (g *gateHold) drop(l *rwmutex) {
	if g.file == nil {
		return
	}
	_ = g.file.release()
	g.file = nil
	l.p.notifier.Notify(l.base)
}

// reader is the shared side of an rwmutex.
type reader struct{ l *rwmutex }

func (r reader) Name() string { return r.l.name }

// TryAcquire makes one attempt at the read side without waiting. It fails
// with an error matching core.ErrNotAcquired when a writer holds the lock or
// waits for it.
func (r reader) TryAcquire(ctx context.Context) (core.Handle, error) {
	if err := r.l.p.begin(ctx, r.l.name); err != nil {
		return nil, err
	}
	h, _, err := r.try(ctx)
	return h, err
}

// Acquire waits for the read side.
func (r reader) Acquire(ctx context.Context) (core.Handle, error) {
	if err := r.l.p.begin(ctx, r.l.name); err != nil {
		return nil, err
	}
	return r.l.p.wait(ctx, r.l.name, r.l.base, false, r.try)
}

func (r reader) try(context.Context) (core.Handle, time.Duration, error) {
	l := r.l
	if err := l.p.usable(l.name); err != nil {
		return nil, 0, err
	}
	g, err := l.p.tryLock(l.base+".gate", true, false)
	if err != nil {
		return nil, 0, attemptError(l.name, err, "a writer holds it or waits for it")
	}
	lf, err := l.p.tryLock(l.base+".lock", true, true)
	// A reader's passage through the gate signals nobody.
	_ = g.release()
	if err != nil {
		return nil, 0, attemptError(l.name, err, "a writer holds it")
	}
	// Readers share the file and record nothing.
	return l.p.grant(l.name, l.base, lf, false)
}
