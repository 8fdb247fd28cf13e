package natslock

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// RWMutex returns the reader-writer lock name. It does no I/O; a bad name
// is reported by the first acquire call (core.ErrInvalidName).
//
// Layout: the writer key "rw.<kit.SafeName(name)>.w", taken like a Mutex,
// and one key per read grant, "rw.<kit.SafeName(name)>.r.<random>", so each
// reader's share has its own lease and a dead reader frees only its share.
// A Provider reuses the keys of its released read grants, so the reader keys
// of a lock stay about as many as its peak concurrent readers.
// KV compare-and-set covers one key, so the two sides meet in a fixed order
// on the bucket's single, totally ordered stream: a reader writes its key
// and then checks the writer key; a writer takes the writer key and then
// lists the reader keys. Whichever wrote second sees the other, so a reader
// and a writer never both proceed.
//
// Writer preference: a waiting writer holds the writer key (renewed like a
// lease) while it waits for the readers to leave, and readers that find the
// writer key give up their key and wait.
//
// Cost: a read grant takes two round trips (three for a reader that waited:
// it checks the writer key before writing its own) and its release one; a write grant takes the
// writer key as a Mutex does plus a listing of the reader keys (one
// short-lived ordered consumer, a few round trips, since nats-server 2.9 has
// no batched get). Fencing tokens are KV revisions: a read grant's is its
// key's revision, a write grant's the writer key's, strictly increasing in
// grant order across both sides. Waiters on either side watch all of the
// lock's keys with one watcher.
func (p *Provider) RWMutex(name string) core.RWLocker {
	if err := kit.ValidateName(name); err != nil {
		return kit.FailedRWLocker(name, kit.Wrap(backend, "acquire", name, err))
	}
	base := "rw." + kit.SafeName(name)
	return p.probe.RWMutex(&rwMutex{p: p, name: name, wKey: base + ".w", rPrefix: base + ".r", watchKey: base + ".>"})
}

type rwMutex struct {
	p        *Provider
	name     string
	wKey     string
	rPrefix  string
	watchKey string
}

func (rw *rwMutex) Name() string { return rw.name }

// RLocker returns the shared side.
func (rw *rwMutex) RLocker() core.Locker { return (*rLocker)(rw) }

// TryAcquire takes the write side if no writer holds it and no reader holds
// a share; otherwise it fails with an error matching core.ErrNotAcquired.
func (rw *rwMutex) TryAcquire(ctx context.Context) (core.Handle, error) {
	if ctx.Err() != nil {
		return nil, kit.Wrap(backend, "acquire", rw.name, kit.NotAcquired(ctx))
	}
	var pending *handle
	defer rw.drop(ctx, &pending)
	h, _, err := rw.writeAttempt(false, &pending)(ctx)
	return h, err
}

// Acquire waits for the write side. From the moment it holds the writer key
// it keeps new readers out, and it returns once the readers holding shares
// have released them (or their leases expired).
func (rw *rwMutex) Acquire(ctx context.Context) (core.Handle, error) {
	var pending *handle
	defer rw.drop(ctx, &pending)
	return rw.p.wait(ctx, rw.name, rw.watchKey, rw.p.cfg.backoff, rw.writeAttempt(true, &pending))
}

// drop releases a writer key taken by an acquire that did not succeed.
func (rw *rwMutex) drop(ctx context.Context, pending **handle) {
	if *pending == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), kit.CleanupTimeout)
	defer cancel()
	_ = (*pending).Release(ctx)
	*pending = nil
}

// writeAttempt takes the writer key (once; it is kept in *pending across
// attempts) and grants the write side when no reader key is live.
func (rw *rwMutex) writeAttempt(waiting bool, pending **handle) kit.Attempt {
	return func(ctx context.Context) (core.Handle, time.Duration, error) {
		if *pending != nil && (*pending).Context().Err() != nil {
			rw.drop(ctx, pending) // the writer key slipped away while we waited
		}
		if *pending == nil {
			h, retryIn, err := rw.p.acquireKey(ctx, rw.name, rw.wKey, rw.watchKey, waiting, false)
			if err != nil {
				return nil, retryIn, err
			}
			*pending = h.(*handle)
		}
		n, err := rw.p.countLive(ctx, rw.rPrefix+".*")
		if err != nil {
			if ctx.Err() != nil {
				err = kit.NotAcquired(ctx)
			}
			return nil, 0, kit.Wrap(backend, "acquire", rw.name, err)
		}
		if n > 0 {
			return nil, 0, kit.Wrap(backend, "acquire", rw.name, kit.Busy("%d readers hold the lock", n))
		}
		h := *pending
		*pending = nil
		return h, 0, nil
	}
}

// rLocker is the shared side of an rwMutex.
type rLocker rwMutex

func (r *rLocker) Name() string { return r.name }

// TryAcquire takes a share unless a writer holds or waits for the lock;
// then it fails with an error matching core.ErrNotAcquired.
func (r *rLocker) TryAcquire(ctx context.Context) (core.Handle, error) {
	if ctx.Err() != nil {
		return nil, kit.Wrap(backend, "acquire", r.name, kit.NotAcquired(ctx))
	}
	h, _, err := r.attempt(false)(ctx)
	return h, err
}

// Acquire waits for a share, until no writer holds or waits for the lock.
func (r *rLocker) Acquire(ctx context.Context) (core.Handle, error) {
	return r.p.wait(ctx, r.name, r.watchKey, r.p.cfg.backoff, r.attempt(true))
}

func (r *rLocker) attempt(waiting bool) kit.Attempt {
	return func(ctx context.Context) (core.Handle, time.Duration, error) {
		if waiting {
			// Woken by some change: see whether a writer is still there
			// before writing a key only to delete it again.
			if msg, err := r.writer(ctx); err != nil || msg != nil {
				return nil, r.retry(msg), r.busyOr(ctx, msg, err)
			}
		}
		key, ok := r.p.spare.get(r.rPrefix)
		if !ok {
			key = r.rPrefix + "." + newOwner()
		}
		h, _, err := r.p.acquireKey(ctx, r.name, key, r.watchKey, false, false)
		if err != nil {
			if !errors.Is(err, core.ErrNotAcquired) {
				r.p.spare.put(r.rPrefix, key)
			}
			return nil, 0, err
		}
		h.(*handle).lease.onRelease = func() { r.p.spare.put(r.rPrefix, key) }
		msg, err := r.writer(ctx)
		if err != nil || msg != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), kit.CleanupTimeout)
			_ = h.Release(rctx)
			cancel()
			return nil, r.retry(msg), r.busyOr(ctx, msg, err)
		}
		return h, 0, nil
	}
}

// writer returns the writer key's live entry, or nil when no writer holds
// or waits for the lock.
func (r *rLocker) writer(ctx context.Context) (*jetstream.RawStreamMsg, error) {
	ctx, cancel := context.WithTimeout(ctx, r.p.cfg.timeout)
	defer cancel()
	msg, err := r.p.last(ctx, r.wKey)
	if err != nil || msg == nil || isMarker(msg) {
		return nil, err
	}
	return msg, nil
}

func (r *rLocker) retry(msg *jetstream.RawStreamMsg) time.Duration {
	if msg == nil {
		return 0
	}
	return r.p.retryIn(msg)
}

func (r *rLocker) busyOr(ctx context.Context, msg *jetstream.RawStreamMsg, err error) error {
	switch {
	case ctx.Err() != nil:
		err = kit.NotAcquired(ctx)
	case err == nil:
		err = busy(msg)
	}
	return kit.Wrap(backend, "acquire", r.name, err)
}
