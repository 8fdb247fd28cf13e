package pglock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// maxSlots bounds a semaphore's max: each try passes every slot key.
const maxSlots = 1 << 16

// semBackoff paces a waiting semaphore acquire between wake-ups. Every
// release wakes the waiters (through the Provider's LISTEN connection when
// it comes from another process), so the backoff only bounds the cost of a
// missed signal.
var semBackoff = kit.Backoff{Min: 2 * time.Millisecond, Max: 100 * time.Millisecond}

// semaphore holds one of max slot keys, each an exclusive advisory lock.
type semaphore struct {
	p     *Provider
	name  string
	slots []Key
	fence string
}

func (p *Provider) newSemaphore(name string, k Key, max int) *semaphore {
	s := &semaphore{p: p, name: name, slots: make([]Key, max), fence: "s:" + k.String()}
	for i := range s.slots {
		s.slots[i] = derive("sem", k, i)
	}
	return s
}

// Name returns the name the semaphore was made with.
func (s *semaphore) Name() string { return s.name }

// TryAcquire takes a free slot if there is one: one round trip that tries
// the slots in turn, starting at a random one, stops at the first granted
// and bumps the semaphore's fence counter. Errors are as for Mutex.
func (s *semaphore) TryAcquire(ctx context.Context) (core.Handle, error) {
	return s.p.sess.TryAcquire(ctx, s.name, s.try)
}

// Acquire retries TryAcquire until a slot is granted or ctx is done, woken
// by every release of the semaphore: a release in this process directly, a
// release in another one through PostgreSQL's NOTIFY (the release statement
// sends it; the Provider LISTENs on one connection of its own, opened on
// the first semaphore wait). A missed signal costs at most 100 ms.
func (s *semaphore) Acquire(ctx context.Context) (core.Handle, error) {
	if ctx.Err() == nil {
		s.p.listen()
	}
	return s.p.sess.Acquire(ctx, kit.SessionAcquire[Key, *session, lockInfo]{
		Name: s.name, Wake: s.fence, Backoff: s.p.semBackoff, Try: s.try,
	})
}

func (s *semaphore) try(ctx context.Context) (core.Handle, error) {
	if err := s.p.ensureFence(ctx); err != nil {
		return nil, err
	}
	return s.p.sess.Try(ctx, s.p.sess.Any, func(c *conn) (core.Handle, error) {
		// Skip the slots this session holds: the server would grant them
		// again (advisory locks are reentrant per session).
		free := c.Unheld(s.slots, rand.N(len(s.slots)))
		if len(free) == 0 {
			c.Unlock()
			return nil, kit.Busy("all %d slots held by this process", len(s.slots))
		}
		keys := make([]int64, len(free))
		for i, k := range free {
			keys[i] = k.v
		}
		var slot, token *int64
		octx, unbound := c.Conn.bound(ctx)
		err := c.Conn.pc.QueryRow(octx, s.p.sql.trySlots(), keys, s.fence, s.p.opts.Identity).Scan(&slot, &token)
		unbound()
		if err != nil {
			if c.Conn.connFailed(err) {
				c.Fail(err)
				c.Unlock()
				return nil, fmt.Errorf("%w: %w", kit.ErrSessionFailed, err)
			}
			// The statement may have failed after taking a slot: release
			// any candidate slot this session holds (it held none before).
			octx, unbound := c.Conn.bound(ctx)
			_, rerr := c.Conn.pc.Exec(octx, unlockSlotsIfHeldSQL, keys)
			unbound()
			if rerr != nil {
				c.Fail(fmt.Errorf("re-check after a failed semaphore try: %w", rerr))
			}
			c.Unlock()
			return nil, err
		}
		if slot == nil || token == nil {
			c.Unlock()
			return nil, kit.Busy("all %d slots held", len(s.slots))
		}
		l := &locker{p: s.p, name: s.name, key: Int64Key(*slot), mode: exclusive, fence: s.fence, notify: true}
		return l.granted(ctx, c, *token)
	})
}
