package natslock

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// maxSlots bounds a semaphore's max: an attempt tries the slots one by one.
const maxSlots = 1024

// Semaphore returns a semaphore of max slots named name. It does no I/O; an
// invalid name, or a max outside [1, 1024], is reported by the first acquire
// call.
//
// Each slot is a mutex on its own key, "s.<kit.SafeName(name)>.<i>" for i
// in [0, max), so each slot has its own lease and a dead holder frees only
// its slot: at most max holders, by construction. An attempt tries the slots
// from a random one onwards until one is granted, so a full semaphore costs
// about two round trips per slot (O(max)); a free slot usually one. Waiters
// watch all slots with one watcher and wake on any slot's release; a slot
// released while an Acquire of the same Provider waits is handed to it
// directly, as a Mutex is (WithLocalHandoff). Fencing tokens are KV
// revisions, strictly increasing across all slots of the name. Every user
// of the name must pass the same max.
func (p *Provider) Semaphore(name string, max int) core.Locker {
	if err := kit.ValidateName(name); err != nil {
		return kit.FailedLocker(name, kit.Wrap(backend, "acquire", name, err))
	}
	if max < 1 || max > maxSlots {
		return kit.FailedLocker(name, kit.Wrap(backend, "acquire", name, kit.Invalid("semaphore max %d not in [1, %d]", max, maxSlots)))
	}
	prefix := semaphoreKeys(name)
	s := &semaphore{p: p, name: name, prefix: prefix, watchKey: prefix + ".*",
		keys: make([]string, max)}
	for i := range s.keys {
		s.keys[i] = slotKey(prefix, i)
	}
	return p.probe.Semaphore(s)
}

type semaphore struct {
	p        *Provider
	name     string
	prefix   string
	watchKey string
	keys     []string
}

func (s *semaphore) Name() string { return s.name }

// TryAcquire takes a free slot or fails with an error matching
// core.ErrNotAcquired.
func (s *semaphore) TryAcquire(ctx context.Context) (core.Handle, error) {
	if ctx.Err() != nil {
		return nil, kit.Wrap(backend, "acquire", s.name, kit.NotAcquired(ctx))
	}
	h, _, err := s.try(ctx, false)
	return h, err
}

// Acquire waits for a free slot or until ctx is done.
func (s *semaphore) Acquire(ctx context.Context) (core.Handle, error) {
	return s.p.waitLocal(ctx, s.name, s.watchKey, s.p.cfg.backoff, func(ctx context.Context) (core.Handle, time.Duration, error) {
		return s.try(ctx, true)
	})
}

func (s *semaphore) try(ctx context.Context, waiting bool) (core.Handle, time.Duration, error) {
	n := len(s.keys)
	first := rand.N(n)
	var soonest time.Duration
	for j := range n {
		i := (first + j) % n
		h, retryIn, err := s.p.acquireKey(ctx, s.name, s.keys[i], s.watchKey, waiting, true)
		if err == nil || !errors.Is(err, core.ErrNotAcquired) || ctx.Err() != nil {
			return h, 0, err
		}
		if soonest == 0 || retryIn < soonest {
			soonest = retryIn
		}
	}
	return nil, soonest, kit.Wrap(backend, "acquire", s.name, kit.Busy("all %d slots held", n))
}
