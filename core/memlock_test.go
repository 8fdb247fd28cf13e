package core_test

import (
	"context"
	"sync"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// memLocker is a tiny in-process lock used to test core's helpers (Do,
// AcquireAll, Wait). It is not a backend.
type memLocker struct {
	name string
	mu   sync.Mutex
	held bool
	tok  uint64
	n    kit.Notifier
}

func (m *memLocker) Name() string { return m.name }

func (m *memLocker) TryAcquire(ctx context.Context) (core.Handle, error) {
	if err := ctx.Err(); err != nil {
		return nil, kit.NotAcquired(ctx)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held {
		return nil, kit.Busy("held")
	}
	m.held = true
	m.tok++
	return kit.NewHandle(m.tok, func(context.Context) error {
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
	return kit.Wait(ctx, kit.DefaultBackoff, wake, func(ctx context.Context) (core.Handle, time.Duration, error) {
		h, err := m.TryAcquire(ctx)
		return h, 0, err
	})
}
