package pglock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/stretchr/testify/require"
)

// grantOf returns the grant behind h in p, or nil.
func grantOf(p *Provider, h core.Handle) *grant {
	for _, c := range p.sess.Conns() {
		for _, g := range c.Grants() {
			if core.Handle(g.Handle()) == h {
				return g
			}
		}
	}
	return nil
}

// slowHandoffs lets a run of local handoffs last as long as a test takes
// (with the race detector on a busy machine, more than the default 20 ms).
func slowHandoffs() Option { return WithLocalHandoff(kit.DefaultHandoffMax, time.Hour) }

// waitIdleWaiter waits until n waiters stand in k's line behind a local
// holder: the first of them waits locally, so a release hands over.
func waitIdleWaiter(t *testing.T, p *Provider, k Key, n int) {
	t.Helper()
	fence := "k:" + k.String()
	require.Eventually(t, func() bool {
		_, held := p.sess.Hand.Holder(fence)
		return held && p.sess.Hand.Len(fence) >= n
	}, 5*time.Second, time.Millisecond)
}

// advisoryHolders lists the sessions granted, and those waiting for, the
// exclusive advisory lock k in pg_locks.
func advisoryHolders(t *testing.T, p *Provider, k Key) (granted, waiting []uint32) {
	t.Helper()
	cl, o, sub := k.lockTag()
	rows, err := p.pool.Query(context.Background(), `SELECT pid, granted FROM pg_locks WHERE locktype = 'advisory'
  AND classid = $1::int8::oid AND objid = $2::int8::oid AND objsubid = $3::int2`, cl, o, sub)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var pid uint32
		var ok bool
		require.NoError(t, rows.Scan(&pid, &ok))
		if ok {
			granted = append(granted, pid)
		} else {
			waiting = append(waiting, pid)
		}
	}
	require.NoError(t, rows.Err())
	return granted, waiting
}

func TestHandoffKeepsLockOnSession(t *testing.T) {
	ctx := context.Background()
	p := newProvider(t, slowHandoffs())
	name := uniqueName(t, "m")
	k, err := KeyOf(name)
	require.NoError(t, err)
	m := p.Mutex(name)

	h1, err := m.Acquire(ctx)
	require.NoError(t, err)
	pid := backendPID(t, h1)

	// A session of another client waits in the server's queue: an unlock
	// would grant it the lock.
	other := newPool(t)
	oc, err := other.Acquire(ctx)
	require.NoError(t, err)
	otherDone := make(chan error, 1)
	otherCtx, cancelOther := context.WithCancel(ctx)
	execDone := make(chan struct{})
	defer func() {
		// The connection goes back only once its statement has ended.
		cancelOther()
		<-execDone
		oc.Release()
	}()
	go func() {
		defer close(execDone)
		_, err := oc.Exec(otherCtx, "SELECT pg_advisory_lock($1::int8)", k.v)
		otherDone <- err
	}()
	require.Eventually(t, func() bool {
		_, waiting := advisoryHolders(t, p, k)
		return len(waiting) == 1
	}, 5*time.Second, time.Millisecond)

	got := make(chan core.Handle, 1)
	go func() {
		h, err := m.Acquire(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- h
	}()
	waitIdleWaiter(t, p, k, 1)
	require.NoError(t, h1.Release(ctx))
	h2 := <-got
	require.NotNil(t, h2)
	require.Greater(t, h2.FencingToken(), h1.FencingToken())
	require.Equal(t, pid, backendPID(t, h2), "handed on within the session")
	require.Equal(t, 1, grantOf(p, h2).Run().Len())
	require.ErrorIs(t, context.Cause(h1.Context()), core.ErrReleased)
	require.NoError(t, h2.Context().Err())

	granted, waiting := advisoryHolders(t, p, k)
	require.Equal(t, []uint32{pid}, granted)
	require.Len(t, waiting, 1, "the other session still waits: the lock was never unlocked")
	select {
	case err := <-otherDone:
		t.Fatalf("the other session got the lock during a handoff: %v", err)
	default:
	}

	// A stale handle's release is a no-op.
	require.NoError(t, h1.Release(ctx))
	require.NoError(t, h2.Context().Err())

	// Not reentrant while handed on.
	_, err = m.TryAcquire(ctx)
	require.ErrorIs(t, err, core.ErrNotAcquired)

	// With no local waiter, the release unlocks and the other session wins.
	require.NoError(t, h2.Release(ctx))
	select {
	case err := <-otherDone:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the other session was not granted the lock")
	}
}

func TestHandoffTokensIncreaseAndRunBound(t *testing.T) {
	for _, n := range []int{0, 1, 2, kit.DefaultHandoffMax} {
		t.Run(itoa(uint16(n)), func(t *testing.T) {
			ctx := context.Background()
			p := newProvider(t, WithLocalHandoff(n, time.Hour))
			name := uniqueName(t, "m")
			k, err := KeyOf(name)
			require.NoError(t, err)
			m := p.Mutex(name)
			h0, err := m.Acquire(ctx)
			require.NoError(t, err)

			var mu sync.Mutex
			var tokens []uint64
			var runs []int
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					h, err := m.Acquire(ctx)
					if !assertNoErr(t, err) {
						return
					}
					mu.Lock()
					tokens = append(tokens, h.FencingToken())
					if g := grantOf(p, h); g != nil {
						runs = append(runs, g.Run().Len())
					}
					mu.Unlock()
					time.Sleep(time.Millisecond)
					assertNoErr(t, h.Release(ctx))
				}()
			}
			if n > 0 {
				waitIdleWaiter(t, p, k, 8)
			}
			require.NoError(t, h0.Release(ctx))
			wg.Wait()

			require.Len(t, tokens, 8)
			prev := h0.FencingToken()
			for _, tok := range tokens {
				require.Greater(t, tok, prev, "tokens %v after %d", tokens, h0.FencingToken())
				prev = tok
			}
			most := 0
			for _, r := range runs {
				most = max(most, r)
			}
			require.LessOrEqual(t, most, n, "runs %v", runs)
			if n > 0 {
				require.Positive(t, most, "no handoff at all: runs %v", runs)
			}
		})
	}
}

func assertNoErr(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}

// heldMutex is a held mutex of a fresh Provider; acquire starts another
// Acquire of it, whose handle arrives on got.
type heldMutex struct {
	p   *Provider
	k   Key
	h1  core.Handle
	got chan core.Handle
	m   core.Locker
}

func holdMutex(t *testing.T, opts ...Option) *heldMutex {
	t.Helper()
	p := newProvider(t, append([]Option{slowHandoffs()}, opts...)...)
	name := uniqueName(t, "m")
	k, _ := KeyOf(name)
	m := p.Mutex(name)
	h1, err := m.Acquire(context.Background())
	require.NoError(t, err)
	return &heldMutex{p: p, k: k, h1: h1, got: make(chan core.Handle, 2), m: m}
}

func (hm *heldMutex) acquire(t *testing.T) {
	go func() {
		h, err := hm.m.Acquire(context.Background())
		assertNoErr(t, err)
		hm.got <- h
	}()
}

func TestHandoffRunSpan(t *testing.T) {
	ctx := context.Background()
	hm := holdMutex(t, WithLocalHandoff(kit.DefaultHandoffMax, kit.DefaultHandoffSpan))
	p, h1, got := hm.p, hm.h1, hm.got
	hm.acquire(t)
	waitIdleWaiter(t, p, hm.k, 1)
	run := grantOf(p, h1).Run()
	require.Eventually(t, func() bool { return !p.sess.Hand.Within(run) }, 5*time.Second, time.Millisecond,
		"the run outlasts its span")
	require.NoError(t, h1.Release(ctx))
	h2 := <-got
	require.NotNil(t, h2)
	require.Greater(t, h2.FencingToken(), h1.FencingToken())
	require.Equal(t, 0, grantOf(p, h2).Run().Len(), "a new run after an unlock")
	require.NoError(t, h2.Release(ctx))
}

func TestHandoffWaiterGivesUp(t *testing.T) {
	ctx := context.Background()
	p := newProvider(t, slowHandoffs())
	name := uniqueName(t, "m")
	k, _ := KeyOf(name)
	m := p.Mutex(name)
	other := newProvider(t).Mutex(name)
	for i := range 30 {
		h1, err := m.Acquire(ctx)
		require.NoError(t, err)
		wctx, cancel := context.WithCancel(ctx)
		res := make(chan error, 1)
		go func() {
			h, err := m.Acquire(wctx)
			if err == nil {
				err = h.Release(ctx)
				if err == nil {
					err = errors.New("granted")
				}
			}
			res <- err
		}()
		waitIdleWaiter(t, p, k, 1)
		// Cancel the waiter and release the holder together: whichever
		// wins, the lock must end up free.
		go cancel()
		require.NoError(t, h1.Release(ctx))
		err = <-res
		if err != nil && err.Error() != "granted" {
			require.ErrorIs(t, err, core.ErrNotAcquired)
		}
		tctx, tcancel := context.WithTimeout(ctx, 2*time.Second)
		h, err := other.Acquire(tctx)
		tcancel()
		require.NoError(t, err, "iteration %d: the lock was left held", i)
		require.NoError(t, h.Release(ctx))
		cancel()
	}
}

func TestHandoffBrokenConnection(t *testing.T) {
	ctx := context.Background()
	hm := holdMutex(t)
	p, k, h1, got := hm.p, hm.k, hm.h1, hm.got
	hm.acquire(t)
	waitIdleWaiter(t, p, k, 1)
	require.NoError(t, h1.Release(ctx))
	h2 := <-got
	require.Equal(t, 1, grantOf(p, h2).Run().Len())

	// A waiter lines up behind the handed-on grant, whose session dies.
	hm.acquire(t)
	waitIdleWaiter(t, p, k, 1)
	terminate(t, h2)
	require.True(t, waitDone(h2.Context(), 3*testKeepalive), "handed-on grant not lost")
	require.ErrorIs(t, context.Cause(h2.Context()), core.ErrLockLost)
	require.ErrorIs(t, context.Cause(h1.Context()), core.ErrReleased)

	// The waiter gets the lock afresh, with a larger token.
	var h3 core.Handle
	select {
	case h3 = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not granted the lock after the connection broke")
	}
	require.NotNil(t, h3)
	require.Greater(t, h3.FencingToken(), h2.FencingToken())
	require.Equal(t, 0, grantOf(p, h3).Run().Len())
	require.NotEqual(t, backendPID(t, h3), uint32(0))
	require.NoError(t, h2.Release(ctx))
	require.NoError(t, h3.Release(ctx))
}

func TestHandoffOffWithFenceTable(t *testing.T) {
	p := newProvider(t, WithFenceTable(DefaultFenceTable))
	require.False(t, p.handoffOn())
	for _, opt := range []Option{WithLocalHandoff(-1, time.Second), WithLocalHandoff(8, 0)} {
		_, err := New(p.pool, opt)
		require.ErrorIs(t, err, core.ErrInvalidArgument)
	}
}
