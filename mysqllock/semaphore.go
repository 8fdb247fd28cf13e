package mysqllock

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// MaxSemaphore is the largest max a Semaphore takes: a try names every
// free slot in one statement.
const MaxSemaphore = 1024

// semWait bounds one blocking wait of a semaphore on one of its slots: a
// slot freed elsewhere is looked for again at least this often.
const semWait = 100 * time.Millisecond

// semBackoff paces a semaphore's waiter when it has no connection to wait
// on; releases in this process wake it at once.
var semBackoff = kit.Backoff{Min: 2 * time.Millisecond, Max: semWait}

// semaphore holds one of max slot locks, each a user-level lock; their
// grants draw their tokens from one counter row.
type semaphore struct {
	p     *Provider
	name  string
	row   string
	slots []string
}

func (p *Provider) newSemaphore(name string, max int) *semaphore {
	s := &semaphore{p: p, name: name, row: lockName(kindSem, name), slots: make([]string, max)}
	for i := range s.slots {
		s.slots[i] = lockName(slotKind(i), name)
	}
	return s
}

// Name returns the name the semaphore was made with.
func (s *semaphore) Name() string { return s.name }

// TryAcquire takes a free slot if there is one: one round trip that tries
// the slots in turn, starting at a random one, stops at the first granted
// and draws its token. Errors are as for Mutex.
func (s *semaphore) TryAcquire(ctx context.Context) (core.Handle, error) {
	return s.p.tryAcquire(ctx, s.name, s.try)
}

// Acquire tries every slot as TryAcquire does and, when all are held,
// waits in the server's queue of one slot, picked at random, on a
// connection of its own, for at most 100 ms, then tries every slot again:
// the slot it queues for is handed over by the server at once, a slot
// freed elsewhere is taken within about 100 ms, and a release in this
// process wakes it at once when it is not queued on the server.
func (s *semaphore) Acquire(ctx context.Context) (core.Handle, error) {
	if ctx.Err() != nil {
		return nil, kit.Wrap(backend, "acquire", s.name, kit.NotAcquired(ctx))
	}
	wake, unsubscribe := s.p.notify.Subscribe(s.row)
	defer unsubscribe()
	h, err := kit.Wait(ctx, semBackoff, wake, func(ctx context.Context) (core.Handle, time.Duration, error) {
		h, err := s.try(ctx)
		if err == nil || !errors.Is(err, core.ErrNotAcquired) {
			return h, 0, err
		}
		c, cerr := s.p.emptyConn(ctx)
		if cerr != nil {
			return nil, 0, cerr
		}
		if c == nil {
			return nil, 0, err
		}
		one := []string{s.slots[rand.N(len(s.slots))]}
		return s.p.block(ctx, c, claim{name: s.name, row: s.row, locks: one, sem: true}, semWait)
	})
	if err != nil {
		return nil, kit.Wrap(backend, "acquire", s.name, err)
	}
	return h, nil
}

func (s *semaphore) try(ctx context.Context) (core.Handle, error) {
	if err := s.p.ensureFence(ctx); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		c, err := s.p.sharedConn(ctx, "", true)
		if errors.Is(err, errNoConn) {
			return nil, kit.Busy("%v", err)
		}
		if err != nil {
			return nil, err
		}
		// Skip the slots this session holds: the server would grant them
		// again (GET_LOCK is reentrant per session).
		locks := make([]string, 0, len(s.slots))
		first := rand.N(len(s.slots))
		s.p.mu.Lock()
		for i := range s.slots {
			if l := s.slots[(first+i)%len(s.slots)]; c.held[l] == nil {
				locks = append(locks, l)
			}
		}
		s.p.mu.Unlock()
		if len(locks) == 0 {
			c.mu.Unlock()
			return nil, kit.Busy("all %d slots held by this process", len(s.slots))
		}
		h, err := s.p.tryOn(ctx, c, claim{name: s.name, row: s.row, locks: locks, sem: true})
		if err != nil && attempt == 0 && errors.Is(err, errConnFailed) {
			continue
		}
		return h, err
	}
}
