package mysqllock

import (
	"context"
	"testing"

	"github.com/distlock/distlock/core"
	"github.com/stretchr/testify/require"
)

// A Mutex and a Semaphore of one name are distinct locks.
func TestPrimitivesDistinct(t *testing.T) {
	p := newProvider(t)
	ctx := context.Background()
	name := uniqueName(t, "x")
	m, err := p.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	s, err := p.Semaphore(name, 1).TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, m.Release(ctx))
	require.NoError(t, s.Release(ctx))
}

// Tokens of a name increase across Providers and primitives' grants; a
// semaphore's token tells its slot in the low 16 bits.
func TestFencingAcrossGrants(t *testing.T) {
	p1, p2 := newProvider(t), newProvider(t)
	ctx := context.Background()
	name := uniqueName(t, "x")
	var last uint64
	for i := range 6 {
		p := []*Provider{p1, p2}[i%2]
		h, err := p.Mutex(name).TryAcquire(ctx)
		require.NoError(t, err)
		require.Greater(t, h.FencingToken(), last)
		last = h.FencingToken()
		require.NoError(t, h.Release(ctx))
	}
	require.Equal(t, uint64(6), last, "a mutex counts its grants")

	last = 0
	slots := map[uint64]bool{}
	var hs []core.Handle
	for i := range 3 {
		h, err := []*Provider{p1, p2}[i%2].Semaphore(name, 3).TryAcquire(ctx)
		require.NoError(t, err)
		require.Greater(t, h.FencingToken(), last)
		last = h.FencingToken()
		require.Equal(t, uint64(i+1), last>>16)
		slots[last&0xffff] = true
		hs = append(hs, h)
	}
	for _, h := range hs {
		require.NoError(t, h.Release(ctx))
	}
}

// Holder reports the identity and token of the last grant while it holds
// the lock.
func TestHolder(t *testing.T) {
	p1, p2 := newProvider(t, WithIdentity("worker-1")), newProvider(t)
	ctx := context.Background()
	name := uniqueName(t, "x")
	insp := p2.Mutex(name).(core.Inspector)
	_, held, err := insp.Holder(ctx)
	require.NoError(t, err)
	require.False(t, held)
	h, err := p1.Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	who, held, err := insp.Holder(ctx)
	require.NoError(t, err)
	require.True(t, held)
	require.Equal(t, core.Holder{ID: "worker-1", Token: h.FencingToken()}, who)
	require.NoError(t, h.Release(ctx))
	_, held, err = insp.Holder(ctx)
	require.NoError(t, err)
	require.False(t, held)
}
