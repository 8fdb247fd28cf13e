package mysqllock

import (
	"context"
	"fmt"
	"math/rand/v2"
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

// fenceSources are the two sources of tokens.
var fenceSources = []struct {
	name string
	opt  Option
}{
	{"sequence", WithFenceSequence(DefaultFenceSequence)},
	{"table", WithFenceTable(DefaultFenceTable)},
}

func TestFencingAcrossGrants(t *testing.T) {
	for _, src := range fenceSources {
		t.Run(src.name, func(t *testing.T) { testFencingAcrossGrants(t, src.opt, src.name == "table") })
	}
}

// Tokens of a name increase across Providers' grants (a counter row counts
// them); a semaphore's grants take distinct slots.
func testFencingAcrossGrants(t *testing.T, opt Option, counts bool) {
	p1, p2 := newProvider(t, opt), newProvider(t, opt)
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
	if counts {
		require.Equal(t, uint64(6), last, "a counter row counts its grants")
	}

	last = 0
	slots := map[string]bool{}
	var hs []core.Handle
	for i := range 3 {
		h, err := []*Provider{p1, p2}[i%2].Semaphore(name, 3).TryAcquire(ctx)
		require.NoError(t, err)
		require.Greater(t, h.FencingToken(), last)
		last = h.FencingToken()
		if counts {
			require.Equal(t, uint64(i+1), last)
		}
		slots[grantOf(t, h).Key] = true
		hs = append(hs, h)
	}
	require.Len(t, slots, 3, "three grants, three slots")
	for _, h := range hs {
		require.NoError(t, h.Release(ctx))
	}
}

// Holder reports the identity and token of the last grant while it holds
// the lock, with the fence table; with the sequence no row records the
// holder and the Locker does not implement core.Inspector.
func TestHolder(t *testing.T) {
	_, ok := newProvider(t).Mutex("x").(core.Inspector)
	require.False(t, ok, "a Mutex on the sequence implements core.Inspector")
	p1 := newProvider(t, WithIdentity("worker-1"), WithFenceTable(DefaultFenceTable))
	p2 := newProvider(t, WithFenceTable(DefaultFenceTable))
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

// Each block of the fence sequence a Provider draws from is confirmed by
// one commit of the mark row before a token from it is returned, and only
// one: with CACHE 3, seven grants span three blocks.
func TestSequenceBlocksConfirmed(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	seq := fmt.Sprintf("distlock_test_seq_%08x", rand.Uint32())
	for _, q := range []string{"CREATE SEQUENCE " + seq + " INCREMENT BY 1 CACHE 3", "CREATE SEQUENCE " + seq + "_bad INCREMENT BY 2"} {
		_, err := db.Exec(q)
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		for _, q := range []string{"DROP SEQUENCE " + seq, "DROP SEQUENCE " + seq + "_bad", "DROP TABLE " + seq + "_mark"} {
			_, _ = db.Exec(q)
		}
	})
	p := newProviderOn(t, db, WithFenceSequence(seq))
	marks := func() int {
		var n int
		require.NoError(t, db.QueryRow("SELECT n FROM "+seq+"_mark WHERE id = 1").Scan(&n))
		return n
	}
	var last uint64
	for i := range 7 {
		h, err := p.Mutex(uniqueName(t, "m")).TryAcquire(ctx)
		require.NoError(t, err)
		require.Equal(t, uint64(i+1), h.FencingToken())
		last = h.FencingToken()
		require.NoError(t, h.Release(ctx))
		require.Equal(t, i/3+1, marks(), "confirmations after token %d", last)
	}

	_, err := newProviderOn(t, db, WithFenceSequence(seq+"_bad")).Mutex("x").TryAcquire(ctx)
	require.ErrorContains(t, err, "INCREMENT 2")
}
