package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/stretchr/testify/require"
)

func TestNewRejectsBadInput(t *testing.T) {
	db, err := sql.Open("mysql", "u@tcp(127.0.0.1:1)/x") // no I/O until used
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = New(nil)
	require.ErrorIs(t, err, core.ErrInvalidArgument)
	for name, opt := range map[string]Option{
		"nil option":         nil,
		"fence table":        WithFenceTable("bad name"),
		"fence table dots":   WithFenceTable("a.b.c"),
		"members table":      WithMembersTable("x;DROP"),
		"long sequence":      WithFenceSequence("s." + strings.Repeat("q", 60)),
		"keepalive":          WithKeepalive(0),
		"max conns":          WithMaxConns(1),
		"timeout":            WithTimeout(-time.Second),
		"empty identity":     WithIdentity(""),
		"long identity":      WithIdentity(string(make([]byte, MaxIdentity+1))),
		"bad utf-8 identity": WithIdentity("\xff"),
		"handoff max":        WithLocalHandoff(-1, time.Millisecond),
		"handoff span":       WithLocalHandoff(2, 0),
	} {
		_, err := New(db, opt)
		require.ErrorIs(t, err, core.ErrInvalidArgument, name)
	}
	db.SetMaxOpenConns(DefaultMaxConns + 1)
	_, err = New(db)
	require.ErrorIs(t, err, core.ErrInvalidArgument, "a pool too small for the pinned connections")
	_, err = New(db, WithMaxConns(DefaultMaxConns-1))
	require.NoError(t, err)
}

func TestBadLockArguments(t *testing.T) {
	p := newProvider(t)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name string
		l    core.Locker
		want error
	}{
		{"empty mutex name", p.Mutex(""), core.ErrInvalidName},
		{"bad utf-8 mutex name", p.Mutex("\xff"), core.ErrInvalidName},
		{"empty semaphore name", p.Semaphore("", 2), core.ErrInvalidName},
		{"semaphore max 0", p.Semaphore("s", 0), core.ErrInvalidArgument},
		{"semaphore max -1", p.Semaphore("s", -1), core.ErrInvalidArgument},
		{"semaphore max too large", p.Semaphore("s", MaxSemaphore+1), core.ErrInvalidArgument},
		{"rwmutex", p.RWMutex("rw"), core.ErrUnsupported},
		{"rwmutex read side", p.RWMutex("rw").RLocker(), core.ErrUnsupported},
	} {
		for _, f := range []func(context.Context) (core.Handle, error){c.l.TryAcquire, c.l.Acquire} {
			h, err := f(context.Background())
			require.Nil(t, h, c.name)
			require.ErrorIs(t, err, c.want, c.name)
			var named *core.Error
			require.True(t, errors.As(err, &named), "%s: %v is not a *core.Error", c.name, err)
		}
	}
	for _, l := range []core.Locker{p.Mutex(uniqueName(t, "m")), p.Semaphore(uniqueName(t, "s"), 3)} {
		for _, f := range []func(context.Context) (core.Handle, error){l.TryAcquire, l.Acquire} {
			_, err := f(cancelled)
			require.ErrorIs(t, err, core.ErrNotAcquired)
			require.ErrorIs(t, err, context.Canceled)
		}
	}
	for _, err := range []error{
		p.Register(context.Background(), "", "id", time.Second),
		p.Register(context.Background(), "g", "", time.Second),
		p.Register(context.Background(), "g", "id", 0),
		p.Register(context.Background(), "g", string(make([]byte, 256)), time.Second),
		p.Deregister(context.Background(), "g", ""),
	} {
		require.Error(t, err)
		require.True(t, errors.Is(err, core.ErrInvalidName) || errors.Is(err, core.ErrInvalidArgument), "%v", err)
	}
}

// A dead server fails every call with the driver's error, promptly, and
// leaves nothing behind (TestMain checks for goroutines).
func TestDeadServer(t *testing.T) {
	db, err := sql.Open("mysql", "distlock@tcp(127.0.0.1:1)/distlock?timeout=1s")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	p, err := New(db, WithTimeout(2*time.Second), WithFenceTable(DefaultFenceTable))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, l := range []core.Locker{p.Mutex("m"), p.Semaphore("s", 2)} {
		for _, f := range []func(context.Context) (core.Handle, error){l.TryAcquire, l.Acquire} {
			h, err := f(ctx)
			require.Nil(t, h)
			require.Error(t, err)
			require.NotErrorIs(t, err, core.ErrNotAcquired)
		}
	}
	_, _, err = p.Mutex("m").(core.Inspector).Holder(ctx)
	require.Error(t, err)
	_, err = p.Members(ctx, "g")
	require.Error(t, err)
	require.NoError(t, ctx.Err(), "calls on a dead server hung")
}

// After Close every acquire fails, and Close is idempotent.
func TestClosedProvider(t *testing.T) {
	p := newProvider(t)
	h, err := p.Mutex(uniqueName(t, "m")).TryAcquire(context.Background())
	require.NoError(t, err)
	require.NoError(t, p.Close())
	require.True(t, waitDone(h.Context(), time.Second))
	require.ErrorIs(t, context.Cause(h.Context()), core.ErrLockLost)
	require.NoError(t, h.Release(context.Background()))
	_, err = p.Mutex(uniqueName(t, "m")).TryAcquire(context.Background())
	require.Error(t, err)
	require.NoError(t, p.Close())
}
