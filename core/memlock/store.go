package memlock

import (
	"context"
	"errors"
	"sync"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// Store holds the locks, fencing counters and members that the Providers
// made on it share, as a server holds them for its clients. The zero value
// is not ready: make one with NewStore. It is safe for concurrent use.
type Store struct {
	mu      sync.Mutex
	locks   map[lockKey]*entry
	tokens  map[string]uint64            // the last token granted per name, across kinds
	members map[string]map[string]member // group → id → registration
	notify  kit.Notifier                 // keyed by lockKey.String()
}

// NewStore returns an empty Store.
func NewStore() *Store {
	return &Store{
		locks:   make(map[lockKey]*entry),
		tokens:  make(map[string]uint64),
		members: make(map[string]map[string]member),
	}
}

// kind tells the three primitives of one name apart: they are distinct
// locks.
type kind uint8

const (
	kindMutex kind = iota
	kindRW
	kindSemaphore
)

type lockKey struct {
	kind kind
	name string
}

func (k lockKey) String() string { return string(rune('0'+k.kind)) + "/" + k.name }

// side is how a Locker holds its lock.
type side uint8

const (
	exclusive side = iota // a mutex, or an RW lock's writer
	shared                // an RW lock's reader
	slot                  // one of a semaphore's max slots
)

// entry is one held lock; it exists while it has grants or waiting writers.
type entry struct {
	grants  map[*grant]struct{}
	writer  *grant // the exclusive grant, when one holds the lock
	max     int    // a semaphore's slots, as its holders passed it
	writers int    // writers waiting (Acquire of an RW lock's write side)
}

// grant is one handle's hold on a lock.
type grant struct {
	key   lockKey
	owner *Provider
	h     *kit.BaseHandle
}

// errBroken is the cause a broken handle's context wraps, beside
// core.ErrLockLost.
var errBroken = errors.New("memlock: lock broken")

// entryLocked returns key's entry, made when missing; s.mu is held.
func (s *Store) entryLocked(key lockKey) *entry {
	e := s.locks[key]
	if e == nil {
		e = &entry{grants: make(map[*grant]struct{})}
		s.locks[key] = e
	}
	return e
}

// tidyLocked drops key's entry once nothing holds or waits for it; s.mu is
// held.
func (s *Store) tidyLocked(key lockKey) {
	if e := s.locks[key]; e != nil && len(e.grants) == 0 && e.writers == 0 {
		delete(s.locks, key)
	}
}

// try makes one attempt for p at key on side (max is a semaphore's). It
// returns the handle, or an error matching core.ErrNotAcquired when the
// lock is busy, or core.ErrInvalidArgument when a semaphore's holders
// passed another max.
func (s *Store) try(p *Provider, key lockKey, sd side, max int) (*kit.BaseHandle, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.closed {
		return nil, errClosed
	}
	e := s.entryLocked(key)
	if err := e.busy(sd, max); err != nil {
		s.tidyLocked(key)
		return nil, err
	}
	s.tokens[key.name]++
	g := &grant{key: key, owner: p}
	g.h = kit.NewHandle(s.tokens[key.name], func(context.Context) error {
		s.free(g)
		return nil // released, or broken already: either way not held
	})
	e.grants[g] = struct{}{}
	e.max = max
	if sd == exclusive {
		e.writer = g
	}
	return g.h, nil
}

// busy returns why e cannot grant side now, or nil when it can.
func (e *entry) busy(sd side, max int) error {
	switch {
	case e.writer != nil:
		return kit.Busy("held by %s", e.writer.owner.id)
	case sd == exclusive && len(e.grants) > 0:
		return kit.Busy("held by %d readers", len(e.grants))
	case sd == shared && e.writers > 0:
		return kit.Busy("a writer is waiting")
	case sd == slot && len(e.grants) > 0 && e.max != max:
		return kit.Invalid("the semaphore's holders passed max %d, this Locker %d", e.max, max)
	case sd == slot && len(e.grants) >= max:
		return kit.Busy("all %d slots held", max)
	}
	return nil
}

// free removes g from its lock and wakes the lock's waiters; it reports
// whether g still held the lock.
func (s *Store) free(g *grant) bool {
	s.mu.Lock()
	held := s.removeLocked(g)
	s.mu.Unlock()
	if held {
		s.notify.Notify(g.key.String())
	}
	return held
}

// removeLocked removes g from its lock; s.mu is held.
func (s *Store) removeLocked(g *grant) bool {
	e := s.locks[g.key]
	if e == nil {
		return false
	}
	if _, ok := e.grants[g]; !ok {
		return false
	}
	delete(e.grants, g)
	if e.writer == g {
		e.writer = nil
	}
	s.tidyLocked(g.key)
	return true
}

// breakWhere frees every grant that match selects and ends its handle with
// a cause wrapping core.ErrLockLost and why. It returns how many it broke.
func (s *Store) breakWhere(why error, match func(*grant) bool) int {
	s.mu.Lock()
	var broken []*grant
	for _, e := range s.locks {
		for g := range e.grants {
			if match(g) {
				broken = append(broken, g)
			}
		}
	}
	for _, g := range broken {
		s.removeLocked(g)
	}
	s.mu.Unlock()
	for _, g := range broken {
		g.h.Lose(why)
		s.notify.Notify(g.key.String())
	}
	return len(broken)
}

// waitWriter counts a writer waiting for key (delta +1) or no longer
// waiting (-1). While one waits, readers are refused; the last one to stop
// wakes them.
func (s *Store) waitWriter(key lockKey, delta int) {
	s.mu.Lock()
	e := s.entryLocked(key)
	e.writers += delta
	last := e.writers == 0
	s.tidyLocked(key)
	s.mu.Unlock()
	if last {
		s.notify.Notify(key.String())
	}
}

// holder reports the exclusive holder of key.
func (s *Store) holder(key lockKey) (core.Holder, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.locks[key]
	if e == nil || e.writer == nil {
		return core.Holder{}, false
	}
	return core.Holder{ID: e.writer.owner.id, Token: e.writer.h.FencingToken()}, true
}
