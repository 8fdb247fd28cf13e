package mysqllock

import (
	"context"
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
	return s.p.sess.TryAcquire(ctx, s.name, s.try)
}

// Acquire tries every slot as TryAcquire does and, when all are held,
// waits in the server's queue of one slot, picked at random, on a
// connection of its own, for at most 100 ms, then tries every slot again:
// the slot it queues for is handed over by the server at once, a slot
// freed elsewhere is taken within about 100 ms, and a release in this
// process wakes it at once when it is not queued on the server.
func (s *semaphore) Acquire(ctx context.Context) (core.Handle, error) {
	return s.p.sess.Acquire(ctx, kit.SessionAcquire[string, *session, struct{}]{
		Name: s.name, Wake: s.row, Backoff: semBackoff, Try: s.try,
		Block: func(ctx context.Context, c *conn) (core.Handle, time.Duration, error) {
			one := []string{s.slots[rand.N(len(s.slots))]}
			return s.p.block(ctx, c, claim{name: s.name, row: s.row, locks: one, sem: true}, semWait)
		},
	})
}

func (s *semaphore) try(ctx context.Context) (core.Handle, error) {
	if err := s.p.ensureFence(ctx); err != nil {
		return nil, err
	}
	return s.p.sess.Try(ctx, s.p.sess.Any, func(c *conn) (core.Handle, error) {
		// Skip the slots this session holds: the server would grant them
		// again (GET_LOCK is reentrant per session).
		locks := c.Unheld(s.slots, rand.N(len(s.slots)))
		if len(locks) == 0 {
			c.Unlock()
			return nil, kit.Busy("all %d slots held by this process", len(s.slots))
		}
		return s.p.tryOn(ctx, c, claim{name: s.name, row: s.row, locks: locks, sem: true})
	})
}
