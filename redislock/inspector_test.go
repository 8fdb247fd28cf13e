package redislock

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/distlock/distlock/core"
)

func TestHolder(t *testing.T) {
	p1 := newProvider(t, WithIdentity("one:#.✓"))
	p2 := newProvider(t, WithIdentity("two"))
	ctx := context.Background()
	for _, kind := range []string{"mutex", "write"} {
		t.Run(kind, func(t *testing.T) {
			name := uniqueName(t)
			lockers := func(p *Provider) core.Locker {
				if kind == "write" {
					return p.RWMutex(name)
				}
				return p.Mutex(name)
			}
			insp, ok := lockers(p2).(core.Inspector)
			require.True(t, ok)
			_, held, err := insp.Holder(ctx)
			require.NoError(t, err)
			require.False(t, held)

			h, err := lockers(p1).TryAcquire(ctx)
			require.NoError(t, err)
			who, held, err := insp.Holder(ctx)
			require.NoError(t, err)
			require.True(t, held)
			assert.Equal(t, core.Holder{ID: "one:#.✓", Token: h.FencingToken()}, who)

			if kind == "mutex" {
				// A queued waiter marks the value; the answer is the same.
				wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				_, err = lockers(p2).Acquire(wctx)
				cancel()
				require.ErrorIs(t, err, core.ErrNotAcquired)
				who, held, err = insp.Holder(ctx)
				require.NoError(t, err)
				require.True(t, held)
				assert.Equal(t, core.Holder{ID: "one:#.✓", Token: h.FencingToken()}, who)
			}
			require.NoError(t, h.Release(ctx))
			_, held, err = insp.Holder(ctx)
			require.NoError(t, err)
			require.False(t, held)
		})
	}
	// Many holders: no Inspector.
	_, ok := p1.RWMutex("x").RLocker().(core.Inspector)
	assert.False(t, ok, "read side")
	_, ok = p1.Semaphore("x", 2).(core.Inspector)
	assert.False(t, ok, "semaphore")
}

func TestHolderDeadServer(t *testing.T) {
	p, err := New(newRedis(t, deadAddr(t)))
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
