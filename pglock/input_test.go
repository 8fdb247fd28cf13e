package pglock

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Bad input is reported before any I/O: a Provider on a pool that was
// never connected (and could not connect) gives the validation errors.
func TestBadInput(t *testing.T) {
	cfg, err := pgxpool.ParseConfig("postgres://nobody@127.0.0.1:1/none")
	require.NoError(t, err)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	t.Run("New", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			pool *pgxpool.Pool
			opts []Option
		}{
			{"nil pool", nil, nil},
			{"nil option", pool, []Option{nil}},
			{"negative keepalive", pool, []Option{WithKeepalive(-time.Second)}},
			{"zero keepalive", pool, []Option{WithKeepalive(0)}},
			{"negative timeout", pool, []Option{WithTimeout(-time.Second)}},
			{"max conns 1", pool, []Option{WithMaxConns(1)}},
			{"empty fence table", pool, []Option{WithFenceTable("")}},
			{"fence table with quote", pool, []Option{WithFenceTable(`x"; DROP TABLE y; --`)}},
			{"fence table with two dots", pool, []Option{WithFenceTable("a.b.c")}},
			{"long fence table", pool, []Option{WithFenceTable("a234567890123456789012345678901234567890123456789012345678901234")}},
			{"members table with space", pool, []Option{WithMembersTable("a b")}},
			{"fence sequence with quote", pool, []Option{WithFenceSequence("a'b")}},
			{"empty identity", pool, []Option{WithIdentity("")}},
			{"identity too long", pool, []Option{WithIdentity(strings.Repeat("x", MaxIdentity+1))}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				p, err := New(tc.pool, tc.opts...)
				assert.ErrorIs(t, err, core.ErrInvalidArgument)
				assert.Nil(t, p)
			})
		}
	})

	p, err := New(pool, WithFenceTable("locks.fence_2"), WithMembersTable("m"))
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	ctx := context.Background()
	done, cancel := context.WithCancel(ctx)
	cancel()

	for _, tc := range []struct {
		name string
		call func() error
		want error
	}{
		{"mutex empty name", func() error { _, err := p.Mutex("").TryAcquire(ctx); return err }, core.ErrInvalidName},
		{"mutex bad utf-8", func() error { _, err := p.Mutex("a\xff").Acquire(ctx); return err }, core.ErrInvalidName},
		{"rw empty name", func() error { _, err := p.RWMutex("").RLocker().Acquire(ctx); return err }, core.ErrInvalidName},
		{"semaphore empty name", func() error { _, err := p.Semaphore("", 1).TryAcquire(ctx); return err }, core.ErrInvalidName},
		{"semaphore max 0", func() error { _, err := p.Semaphore("s", 0).TryAcquire(ctx); return err }, core.ErrInvalidArgument},
		{"semaphore max -1", func() error { _, err := p.Semaphore("s", -1).Acquire(ctx); return err }, core.ErrInvalidArgument},
		{"semaphore max too big", func() error { _, err := p.Semaphore("s", maxSlots+1).Acquire(ctx); return err }, core.ErrInvalidArgument},
		{"tx empty name", func() error { _, err := p.TryAcquireTx(ctx, nil, ""); return err }, core.ErrInvalidName},
		{"tx nil", func() error { _, err := p.AcquireTx(ctx, nil, "x"); return err }, core.ErrInvalidArgument},
		{"done ctx mutex", func() error { _, err := p.Mutex("x").Acquire(done); return err }, core.ErrNotAcquired},
		{"done ctx try", func() error { _, err := p.Mutex("x").TryAcquire(done); return err }, context.Canceled},
		{"done ctx semaphore", func() error { _, err := p.Semaphore("x", 3).Acquire(done); return err }, context.Canceled},
		{"register negative ttl", func() error { return p.Register(ctx, "g", "i", -time.Second) }, core.ErrInvalidArgument},
		{"register empty group", func() error { return p.Register(ctx, "", "i", time.Second) }, core.ErrInvalidName},
		{"register empty id", func() error { return p.Register(ctx, "g", "", time.Second) }, core.ErrInvalidArgument},
		{"members empty group", func() error { _, err := p.Members(ctx, ""); return err }, core.ErrInvalidName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			require.ErrorIs(t, err, tc.want)
			var e *core.Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, "postgres", e.Backend)
		})
	}
}
