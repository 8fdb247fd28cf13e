package election_test

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// memLocker is a tiny in-process lock for state-machine unit tests (the idea
// of core's memlock_test.go). It is not a backend: backend behaviour is
// tested against filelock and, in the tests module, the server backends.
type memLocker struct {
	name string
	n    kit.Notifier

	mu     sync.Mutex
	holder *kit.BaseHandle
	owner  string
	tok    uint64
	fail   error // when set, every attempt fails with it
	relErr error // when set, every release fails with it (and frees)
}

func newMemLocker(name string) *memLocker { return &memLocker{name: name} }

func (m *memLocker) Name() string { return m.name }

// as returns a view of m whose grants are owned by id, as a Provider
// configured with identity id would make.
func (m *memLocker) as(id string) *memView { return &memView{m: m, id: id} }

func (m *memLocker) setFail(err error) {
	m.mu.Lock()
	m.fail = err
	m.mu.Unlock()
	m.n.Notify(m.name)
}

// lose makes the current holder's handle lost and frees the lock, as an
// expired lease would.
func (m *memLocker) lose() bool {
	m.mu.Lock()
	h := m.holder
	m.holder, m.owner = nil, ""
	m.mu.Unlock()
	if h == nil {
		return false
	}
	h.Lose(errors.New("test: taken away"))
	m.n.Notify(m.name)
	return true
}

func (m *memLocker) try(ctx context.Context, id string) (core.Handle, error) {
	if err := ctx.Err(); err != nil {
		return nil, kit.NotAcquired(ctx)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return nil, &core.Error{Backend: "mem", Op: "acquire", Name: m.name, Err: m.fail}
	}
	if m.holder != nil {
		return nil, kit.Busy("held by %s", m.owner)
	}
	m.tok++
	var h *kit.BaseHandle
	h = kit.NewHandle(m.tok, func(context.Context) error {
		m.mu.Lock()
		mine := m.holder == h
		if mine {
			m.holder, m.owner = nil, ""
		}
		err := m.relErr
		m.mu.Unlock()
		if mine {
			m.n.Notify(m.name)
		}
		return err
	})
	m.holder, m.owner = h, id
	return h, nil
}

func (m *memLocker) acquire(ctx context.Context, id string) (core.Handle, error) {
	wake, stop := m.n.Subscribe(m.name)
	defer stop()
	return kit.Wait(ctx, kit.Backoff{Min: time.Millisecond, Max: 20 * time.Millisecond}, wake,
		func(ctx context.Context) (core.Handle, time.Duration, error) {
			h, err := m.try(ctx, id)
			return h, 0, err
		})
}

// memView is one candidate's Locker on a memLocker. It implements
// core.Inspector.
type memView struct {
	m  *memLocker
	id string
}

func (v *memView) Name() string                                        { return v.m.name }
func (v *memView) TryAcquire(ctx context.Context) (core.Handle, error) { return v.m.try(ctx, v.id) }
func (v *memView) Acquire(ctx context.Context) (core.Handle, error)    { return v.m.acquire(ctx, v.id) }

func (v *memView) Holder(ctx context.Context) (core.Holder, bool, error) {
	v.m.mu.Lock()
	defer v.m.mu.Unlock()
	if v.m.fail != nil {
		return core.Holder{}, false, v.m.fail
	}
	if v.m.holder == nil {
		return core.Holder{}, false, nil
	}
	return core.Holder{ID: v.m.owner, Token: v.m.tok}, true, nil
}

// plainLocker hides the Inspector of a memView.
type plainLocker struct{ v *memView }

func (p plainLocker) Name() string                                        { return p.v.Name() }
func (p plainLocker) TryAcquire(ctx context.Context) (core.Handle, error) { return p.v.TryAcquire(ctx) }
func (p plainLocker) Acquire(ctx context.Context) (core.Handle, error)    { return p.v.Acquire(ctx) }
