package redislock

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/redislock/internal/redistest"
)

// TestHolder: the conformance suite checks Holder's answers (Inspector);
// here, the identity survives any characters, and a queued waiter, which
// marks the lock value, changes nothing.
func TestHolder(t *testing.T) {
	p1 := newProvider(t, WithIdentity("one:#.✓"))
	p2 := newProvider(t, WithIdentity("two"))
	ctx := context.Background()
	name := uniqueName(t)
	insp := p2.Mutex(name).(core.Inspector)
	h, err := p1.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	defer func() { _ = h.Release(ctx) }()
	want := core.Holder{ID: "one:#.✓", Token: h.FencingToken()}
	who, held, err := insp.Holder(ctx)
	require.NoError(t, err)
	require.True(t, held)
	assert.Equal(t, want, who)

	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = p2.Mutex(name).Acquire(wctx)
	cancel()
	require.ErrorIs(t, err, core.ErrNotAcquired)
	who, held, err = insp.Holder(ctx)
	require.NoError(t, err)
	require.True(t, held)
	assert.Equal(t, want, who)

	_, ok := p1.Semaphore("x", 2).(core.Inspector)
	assert.False(t, ok, "a semaphore has many holders")
}

func TestHolderDeadServer(t *testing.T) {
	p, err := New(redistest.Client(t, redistest.DeadAddr(t)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _, err = p.Mutex("x").(core.Inspector).Holder(ctx)
	require.Error(t, err)
	var ce *core.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "holder", ce.Op)
}
