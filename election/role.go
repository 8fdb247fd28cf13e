package election

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// RoleEvent is an Event of one role of a RoleManager.
type RoleEvent struct {
	Role string
	Event
}

// RoleManager runs several roles ("scheduler", "cleanup", ...) from one
// process, each its own Election with its own lock, and merges their events
// into one ordered stream. Add every role, then Run.
type RoleManager struct {
	onEvent func(RoleEvent)

	mu      sync.Mutex
	roles   map[string]*Election
	order   []string
	running bool

	emitMu sync.Mutex // keeps the merged stream in order
}

// NewRoleManager returns an empty RoleManager. onEvent, when not nil,
// receives every role's events, one at a time and in the order they
// happened; it must not block for long.
func NewRoleManager(onEvent func(RoleEvent)) *RoleManager {
	return &RoleManager{onEvent: onEvent, roles: make(map[string]*Election)}
}

// Add makes role an Election over locker with cfg (see New) and returns it.
// The role's own cfg.OnEvent, if any, is still called, before the manager's.
// It returns an error matching core.ErrInvalidArgument when role is empty or
// taken, or when the manager is running, and New's errors.
func (m *RoleManager) Add(role string, locker core.Locker, cfg Config) (*Election, error) {
	if role == "" {
		return nil, kit.Invalid("election: empty role")
	}
	if own := cfg.OnEvent; m.onEvent != nil {
		cfg.OnEvent = func(ev Event) {
			if own != nil {
				own(ev)
			}
			m.emitMu.Lock()
			defer m.emitMu.Unlock()
			m.onEvent(RoleEvent{Role: role, Event: ev})
		}
	}
	e, err := New(locker, cfg)
	if err != nil {
		return nil, fmt.Errorf("role %q: %w", role, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.running:
		return nil, kit.Invalid("election: role %q added while the RoleManager runs", role)
	case m.roles[role] != nil:
		return nil, kit.Invalid("election: role %q added twice", role)
	}
	m.roles[role] = e
	m.order = append(m.order, role)
	return e, nil
}

// Role returns the role's Election, or nil.
func (m *RoleManager) Role(role string) *Election {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.roles[role]
}

// Roles returns the roles in the order they were added.
func (m *RoleManager) Roles() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.order)
}

// Leading returns the roles this process leads now, in the order they were
// added. It does no I/O.
func (m *RoleManager) Leading() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, r := range m.order {
		if m.roles[r].IsLeader() {
			out = append(out, r)
		}
	}
	return out
}

// Run runs every role's Election until ctx is done, then returns once each
// has stepped down. When one role's Run fails (see Election.Run), the others
// are stopped too and the errors are returned joined.
func (m *RoleManager) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.running {
		m.mu.Unlock()
		return errors.New("election: RoleManager is already running")
	}
	m.running = true
	elections := m.electionsLocked()
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.running = false
		m.mu.Unlock()
	}()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	return forEach(elections, func(e *Election) error {
		err := e.Run(ctx)
		if err != nil {
			cancel()
		}
		return err
	})
}

// ResignAll resigns every role this process leads (see Election.Resign) and
// returns the errors joined.
func (m *RoleManager) ResignAll(ctx context.Context) error {
	m.mu.Lock()
	elections := m.electionsLocked()
	m.mu.Unlock()
	return forEach(elections, func(e *Election) error { return e.Resign(ctx) })
}

// electionsLocked returns the roles' Elections in the order they were
// added; m.mu is held.
func (m *RoleManager) electionsLocked() []*Election {
	elections := make([]*Election, 0, len(m.order))
	for _, r := range m.order {
		elections = append(elections, m.roles[r])
	}
	return elections
}

// forEach runs f on every Election at once and returns the errors joined.
func forEach(elections []*Election, f func(*Election) error) error {
	errs := make([]error, len(elections))
	var wg sync.WaitGroup
	for i, e := range elections {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(e)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
