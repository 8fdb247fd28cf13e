package mysqllock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// With the driver in go.mod, a pinned connection's statements are bounded
// by its socket's deadline (netconn.go): a statement that overruns
// WithTimeout fails by then, and its connection is failed, which loses the
// handles on it.
func TestSocketBound(t *testing.T) {
	const timeout = 500 * time.Millisecond
	p := newProvider(t, WithTimeout(timeout))
	ctx := context.Background()
	h, err := p.Mutex(uniqueName(t, "m")).TryAcquire(ctx)
	require.NoError(t, err)
	g := grantOf(t, h)
	c := g.Session
	require.NotNil(t, c.Conn.nc, "the driver's socket was not found: statements fall back to a context deadline each")

	c.Lock()
	start := time.Now()
	_, err = c.Conn.exec(ctx, "DO SLEEP(5)")
	took := time.Since(start)
	require.Error(t, err, "a statement overrunning the timeout")
	assert.Less(t, took, 4*time.Second, "the statement was not bounded")
	assert.GreaterOrEqual(t, took, timeout*3/4)
	assert.True(t, connFailed(err), "an overrun must read as a broken connection: %v", err)
	c.Fail(err)
	c.Unlock()

	require.True(t, waitDone(h.Context(), 10*time.Second))
	assert.True(t, errors.Is(context.Cause(h.Context()), core.ErrLockLost))
	require.NoError(t, h.Release(ctx))

	// A new connection serves the next grant, its statements bounded anew.
	h, err = p.Mutex(uniqueName(t, "m2")).TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, h.Release(ctx))
}
