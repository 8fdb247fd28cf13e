package filelock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/distlock/distlock/core"
)

// semaphore admits up to max holders, each holding one slot file
// <dir>/semaphore/<stem>.<slot>.lock exclusively.
type semaphore struct {
	p    *Provider
	name string
	base string
	max  int
}

func (s *semaphore) Name() string { return s.name }

// TryAcquire takes a free slot without waiting. It tries the slots from a
// random one on, so holders spread over the slots; on a full semaphore it
// tries all max of them (a few system calls each) and fails with an error
// matching core.ErrNotAcquired.
func (s *semaphore) TryAcquire(ctx context.Context) (core.Handle, error) {
	if err := s.p.begin(ctx, s.name); err != nil {
		return nil, err
	}
	h, _, err := s.try(ctx)
	return h, err
}

// Acquire waits for a free slot.
func (s *semaphore) Acquire(ctx context.Context) (core.Handle, error) {
	if err := s.p.begin(ctx, s.name); err != nil {
		return nil, err
	}
	return s.p.wait(ctx, s.name, s.base, true, s.try)
}

func (s *semaphore) try(context.Context) (core.Handle, time.Duration, error) {
	if err := s.p.usable(s.name); err != nil {
		return nil, 0, err
	}
	first := rand.IntN(s.max)
	for i := range s.max {
		slot := (first + i) % s.max
		lf, err := s.p.tryLock(s.base+"."+strconv.Itoa(slot)+".lock", false, true)
		if err == errBusy {
			continue
		}
		if err != nil {
			return nil, 0, attemptError(s.name, err, "")
		}
		return s.p.grant(s.name, s.base, lf, false)
	}
	return nil, 0, busy(s.name, fmt.Sprintf("all %d slots are held", s.max))
}
