package mysqllock

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/stretchr/testify/require"
)

// slowHandoffs lets a run of local handoffs last as long as a test takes
// (with the race detector on a busy machine, more than the default 20 ms).
func slowHandoffs() Option { return WithLocalHandoff(kit.DefaultHandoffMax, time.Hour) }

// waitIdleWaiter waits until n waiters stand in lock's line behind a local
// holder: the first of them waits locally, so a release hands over.
func waitIdleWaiter(t *testing.T, p *Provider, lock string, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, held := p.sess.Hand.Holder(lock)
		return held && p.sess.Hand.Len(lock) >= n
	}, 5*time.Second, time.Millisecond)
}

// usedBy returns the connection id IS_USED_LOCK reports for lock, 0 when
// it is free.
func usedBy(t *testing.T, db *sql.DB, lock string) uint64 {
	t.Helper()
	var id sql.NullInt64
	require.NoError(t, db.QueryRow(`SELECT IS_USED_LOCK(?)`, lock).Scan(&id))
	return uint64(id.Int64)
}

func TestHandoffKeepsLockOnSession(t *testing.T) {
	for _, src := range fenceSources {
		t.Run(src.name, func(t *testing.T) { testHandoffKeepsLockOnSession(t, src.opt) })
	}
}

// A release with a local waiter hands the grant over on the same session,
// with a greater token; a session of another client queued on the server
// is not granted the lock meanwhile, and is once the last local grant
// releases.
func testHandoffKeepsLockOnSession(t *testing.T, opt Option) {
	ctx := context.Background()
	p := newProvider(t, slowHandoffs(), opt)
	name := uniqueName(t, "m")
	lock := lockName(kindMutex, name)
	m := p.Mutex(name)
	h1, err := m.Acquire(ctx)
	require.NoError(t, err)
	id := connID(t, h1)

	db := newDB(t)
	other, err := db.Conn(ctx)
	require.NoError(t, err)
	defer func() { _ = other.Close() }()
	otherDone := make(chan error, 1)
	go func() {
		var ok sql.NullInt64
		err := other.QueryRowContext(ctx, `SELECT GET_LOCK(?, 60)`, lock).Scan(&ok)
		if err == nil && ok.Int64 != 1 {
			err = sql.ErrNoRows
		}
		otherDone <- err
	}()
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM information_schema.PROCESSLIST
WHERE INFO LIKE 'SELECT GET_LOCK(%' AND STATE = 'User lock'`).Scan(&n))
		return n > 0
	}, 5*time.Second, time.Millisecond, "the other session waits in the server's queue")

	got := make(chan core.Handle, 1)
	go func() {
		h, err := m.Acquire(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- h
	}()
	waitIdleWaiter(t, p, lock, 1)
	require.NoError(t, h1.Release(ctx))
	h2 := <-got
	require.NotNil(t, h2)
	require.Greater(t, h2.FencingToken(), h1.FencingToken())
	require.Equal(t, id, connID(t, h2), "handed on within the session")
	require.Equal(t, id, usedBy(t, db, lock))
	require.ErrorIs(t, context.Cause(h1.Context()), core.ErrReleased)
	if insp, ok := m.(core.Inspector); ok {
		who, held, err := insp.Holder(ctx)
		require.NoError(t, err)
		require.True(t, held)
		require.Equal(t, h2.FencingToken(), who.Token)
	}
	select {
	case err := <-otherDone:
		t.Fatalf("the other session got the lock during a handoff: %v", err)
	default:
	}
	require.NoError(t, h1.Release(ctx), "a stale handle's release is a no-op")
	require.NoError(t, h2.Context().Err())

	require.NoError(t, h2.Release(ctx))
	select {
	case err := <-otherDone:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the other session was not granted the lock")
	}
}

// With handoffs off, a release always goes through the server.
func TestHandoffOff(t *testing.T) {
	ctx := context.Background()
	p := newProvider(t, WithLocalHandoff(0, 0))
	name := uniqueName(t, "m")
	m := p.Mutex(name)
	h1, err := m.Acquire(ctx)
	require.NoError(t, err)
	got := make(chan core.Handle, 1)
	go func() {
		h, err := m.Acquire(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- h
	}()
	waitingConn(t, p)
	require.NoError(t, h1.Release(ctx))
	h2 := <-got
	require.NotNil(t, h2)
	require.Greater(t, h2.FencingToken(), h1.FencingToken())
	require.NotEqual(t, connID(t, h2), uint64(0))
	require.NoError(t, h2.Release(ctx))
}
