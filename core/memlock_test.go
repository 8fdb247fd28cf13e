package core_test

import (
	"context"
	"sync"
	"time"

	"github.com/distlock/distlock/core"
)

// memLocker is a tiny in-process lock used to test core's helpers (Do,
// AcquireAll, Wait). It is not a backend.
type memLocker struct {
	name string
	mu   sync.Mutex
	held bool
	tok  uint64
	n    core.Notifier
}

func (m *memLocker) Name() string { return m.name }

func (m *memLocker) TryAcquire(ctx context.Context) (core.Handle, error) {
	if err := ctx.Err(); err != nil {
		return nil, core.NotAcquired(ctx)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held {
		return nil, core.Busy("held")
	}
	m.held = true
	m.tok++
	return core.NewHandle(m.tok, func(context.Context) error {
		m.mu.Lock()
		m.held = false
		m.mu.Unlock()
		m.n.Notify(m.name)
		return nil
	}), nil
}

func (m *memLocker) Acquire(ctx context.Context) (core.Handle, error) {
	wake, stop := m.n.Subscribe(m.name)
	defer stop()
	return core.Wait(ctx, core.DefaultBackoff, wake, func(ctx context.Context) (core.Handle, time.Duration, error) {
		h, err := m.TryAcquire(ctx)
		return h, 0, err
	})
}
