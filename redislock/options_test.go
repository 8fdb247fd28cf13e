package redislock

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/redislock/internal/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// unreachable is a client for an address nothing listens on: the cases
// below must fail before any I/O.
func unreachable(t *testing.T) *redis.Client {
	return redistest.Client(t, "127.0.0.1:1")
}

func TestNewRejectsBadInput(t *testing.T) {
	rdb := unreachable(t)
	var nilClient *redis.Client
	tests := []struct {
		name string
		rdb  redis.UniversalClient
		opts []Option
	}{
		{"nil client", nil, nil},
		{"typed nil client", nilClient, nil},
		{"zero TTL", rdb, []Option{WithTTL(0)}},
		{"negative TTL", rdb, []Option{WithTTL(-time.Second)}},
		{"absurd TTL", rdb, []Option{WithTTL(MaxTTL + time.Second)}},
		{"cadence equal to TTL", rdb, []Option{WithTTL(time.Second), WithRenewInterval(time.Second)}},
		{"cadence above TTL", rdb, []Option{WithTTL(time.Second), WithRenewInterval(2 * time.Second)}},
		{"cadence beyond TTL minus margin", rdb, []Option{WithTTL(time.Second), WithRenewInterval(950 * time.Millisecond)}},
		{"zero cadence", rdb, []Option{WithRenewInterval(0)}},
		{"negative cadence", rdb, []Option{WithRenewInterval(-time.Second)}},
		{"negative margin", rdb, []Option{WithDriftMargin(-time.Millisecond)}},
		{"margin equal to TTL", rdb, []Option{WithTTL(time.Second), WithDriftMargin(time.Second)}},
		{"inverted backoff", rdb, []Option{WithBackoff(kit.Backoff{Min: time.Second, Max: time.Millisecond})}},
		{"replica ack by no replica", rdb, []Option{WithReplicaAck(0, time.Second)}},
		{"replica ack without timeout", rdb, []Option{WithReplicaAck(1, 0)}},
		{"replica ack beyond the read timeout", rdb, []Option{WithReplicaAck(1, time.Hour)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(tt.rdb, tt.opts...)
			require.ErrorIs(t, err, core.ErrInvalidArgument)
			assert.Nil(t, p)
		})
	}
}

func TestNewAcceptsGoodInput(t *testing.T) {
	rdb := unreachable(t)
	tests := []struct {
		name string
		opts []Option
	}{
		{"defaults", nil},
		{"max TTL", []Option{WithTTL(MaxTTL)}},
		{"explicit everything", []Option{WithTTL(time.Minute), WithRenewInterval(10 * time.Second),
			WithDriftMargin(0), WithPrefix(""), WithLogger(nil), WithBackoff(kit.Backoff{Min: time.Millisecond, Max: time.Second})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(rdb, tt.opts...)
			require.NoError(t, err)
			require.NoError(t, p.Close())
		})
	}
}

func TestBadLockArgumentsFailBeforeIO(t *testing.T) {
	p, err := New(unreachable(t))
	require.NoError(t, err)
	defer p.Close()
	tests := []struct {
		name   string
		locker core.Locker
		want   error
	}{
		{"empty mutex name", p.Mutex(""), core.ErrInvalidName},
		{"invalid UTF-8", p.Mutex("a\xffb"), core.ErrInvalidName},
		{"empty RW name", p.RWMutex(""), core.ErrInvalidName},
		{"empty RW read name", p.RWMutex("").RLocker(), core.ErrInvalidName},
		{"empty semaphore name", p.Semaphore("", 3), core.ErrInvalidName},
		{"semaphore max 0", p.Semaphore("s", 0), core.ErrInvalidArgument},
		{"semaphore max negative", p.Semaphore("s", -1), core.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := tt.locker.TryAcquire(context.Background())
			require.ErrorIs(t, err, tt.want)
			assert.Nil(t, h)
			h, err = tt.locker.Acquire(context.Background())
			require.ErrorIs(t, err, tt.want)
			assert.Nil(t, h)
		})
	}
}

func TestMembershipBadInput(t *testing.T) {
	p, err := New(unreachable(t))
	require.NoError(t, err)
	defer p.Close()
	ctx := context.Background()
	require.ErrorIs(t, p.Register(ctx, "", "a", time.Second), core.ErrInvalidName)
	require.ErrorIs(t, p.Register(ctx, "g", "", time.Second), core.ErrInvalidArgument)
	require.ErrorIs(t, p.Register(ctx, "g", "a", 0), core.ErrInvalidArgument)
	require.ErrorIs(t, p.Deregister(ctx, "", "a"), core.ErrInvalidName)
	_, err = p.Members(ctx, "")
	require.ErrorIs(t, err, core.ErrInvalidName)
}
