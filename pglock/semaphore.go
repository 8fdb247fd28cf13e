package pglock

import (
	"context"
	"errors"
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
	return s.p.tryAcquire(ctx, s.name, s.try)
}

// Acquire retries TryAcquire until a slot is granted or ctx is done, woken
// by every release of the semaphore: a release in this process directly, a
// release in another one through PostgreSQL's NOTIFY (the release statement
// sends it; the Provider LISTENs on one connection of its own, opened on
// the first semaphore wait). A missed signal costs at most 100 ms.
func (s *semaphore) Acquire(ctx context.Context) (core.Handle, error) {
	if ctx.Err() != nil {
		return nil, kit.Wrap(backend, "acquire", s.name, kit.NotAcquired(ctx))
	}
	s.p.listen()
	wake, unsubscribe := s.p.notify.Subscribe(s.fence)
	defer unsubscribe()
	h, err := kit.Wait(ctx, s.p.semBackoff, wake, func(ctx context.Context) (core.Handle, time.Duration, error) {
		h, err := s.try(ctx)
		return h, 0, err
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
		c, err := s.p.sharedConn(ctx, Key{}, exclusive, true)
		if errors.Is(err, errNoConn) {
			return nil, kit.Busy("%v", err)
		}
		if err != nil {
			return nil, err
		}
		// Skip the slots this session holds: the server would grant them
		// again (advisory locks are reentrant per session).
		keys := make([]int64, 0, len(s.slots))
		first := rand.N(len(s.slots))
		s.p.mu.Lock()
		for i := range s.slots {
			k := s.slots[(first+i)%len(s.slots)]
			if c.held[k] == nil {
				keys = append(keys, k.v)
			}
		}
		s.p.mu.Unlock()
		if len(keys) == 0 {
			c.mu.Unlock()
			return nil, kit.Busy("all %d slots held by this process", len(s.slots))
		}
		var slot, token *int64
		octx, unbound := c.bound(ctx)
		err = c.pc.QueryRow(octx, s.p.sql.trySlots(), keys, s.fence, s.p.opts.identity).Scan(&slot, &token)
		unbound()
		if err != nil {
			if c.connFailed(err) {
				c.fail(err)
				c.mu.Unlock()
				if attempt == 0 {
					continue
				}
				return nil, err
			}
			// The statement may have failed after taking a slot: release
			// any candidate slot this session holds (it held none before).
			octx, unbound := c.bound(ctx)
			_, rerr := c.pc.Exec(octx, unlockSlotsIfHeldSQL, keys)
			unbound()
			if rerr != nil {
				c.fail(fmt.Errorf("re-check after a failed semaphore try: %w", rerr))
			}
			c.mu.Unlock()
			return nil, err
		}
		if slot == nil || token == nil {
			c.mu.Unlock()
			return nil, kit.Busy("all %d slots held", len(s.slots))
		}
		l := &locker{p: s.p, name: s.name, key: Int64Key(*slot), mode: exclusive, fence: s.fence, notify: true}
		return l.granted(ctx, c, *token)
	}
}
