package mysqllock

import (
	"context"
	"testing"

	"github.com/distlock/distlock/core"
	"github.com/stretchr/testify/require"
)

// The Provider's statements run on go-sql-driver/mysql's connection
// itself; on a connection it does not know (its socket not found, as with
// another driver) they run through database/sql instead, each bounded by a
// context deadline. Both give the same grants, tokens and releases.
func TestStatementPaths(t *testing.T) {
	p := newProvider(t)
	ctx := context.Background()
	l := p.Mutex(uniqueName(t, "m"))
	h, err := l.TryAcquire(ctx)
	require.NoError(t, err)
	c := grantOf(t, h).Session
	require.True(t, c.Conn.direct(), "go-sql-driver/mysql's connection runs the statements itself")
	first := h.FencingToken()
	require.NoError(t, h.Release(ctx))

	// The same connection, made to take database/sql's path: its
	// statements prepared on the driver are closed first.
	c.Lock()
	require.NoError(t, c.Conn.sc.Raw(func(any) error {
		for _, s := range c.Conn.st {
			require.NoError(t, s.dr.Close())
		}
		return nil
	}))
	clear(c.Conn.st)
	c.Conn.nc = nil
	c.Unlock()

	h, err = l.TryAcquire(ctx)
	require.NoError(t, err)
	require.Same(t, c, grantOf(t, h).Session)
	require.Greater(t, h.FencingToken(), first)
	held, err := h.(core.Verifier).Verify(ctx)
	require.NoError(t, err)
	require.True(t, held)
	require.NoError(t, h.Release(ctx))

	// A lock held by another session is busy; a semaphore grants a slot.
	name := uniqueName(t, "busy")
	other, err := newProvider(t).Mutex(name).TryAcquire(ctx)
	require.NoError(t, err)
	_, err = p.Mutex(name).TryAcquire(ctx)
	require.ErrorIs(t, err, core.ErrNotAcquired)
	require.NoError(t, other.Release(ctx))
	s, err := p.Semaphore(uniqueName(t, "sem"), 2).TryAcquire(ctx)
	require.NoError(t, err)
	require.Same(t, c, grantOf(t, s).Session)
	require.NoError(t, s.Release(ctx))

	for _, s := range c.Conn.st {
		require.NotNil(t, s.db, "prepared through database/sql")
	}
}
