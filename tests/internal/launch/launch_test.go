package launch_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/distlock/distlock/tests/internal/launch"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRedis(t *testing.T) {
	srv := launch.Redis(t, launch.RedisConfig{AOF: true})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialerRetries: 1})
	defer rdb.Close()
	ctx := context.Background()
	require.NoError(t, rdb.Set(ctx, "k", "v", 0).Err())

	srv.Kill(t)
	require.Error(t, rdb.Ping(ctx).Err(), "a killed server answers")
	srv.Start(t)
	v, err := rdb.Get(ctx, "k").Result()
	require.NoError(t, err)
	require.Equal(t, "v", v, "AOF data lost across Kill and Start")

	srv.Pause(t)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	require.Error(t, rdb.Ping(short).Err(), "a paused server answers")
	srv.Resume(t)
	require.NoError(t, rdb.Ping(ctx).Err())
}

func TestPostgres(t *testing.T) {
	srv := launch.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	query := func() error {
		conn, err := pgx.Connect(ctx, srv.Addr())
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		return conn.QueryRow(ctx, "SELECT 1").Scan(new(int))
	}
	require.NoError(t, query())
	srv.Kill(t)
	require.Error(t, query(), "a killed cluster answers")
	srv.Start(t)
	require.NoError(t, query())
}

func TestNATS(t *testing.T) {
	srv := launch.NATS(t)
	greets := func() bool {
		c, err := net.DialTimeout("tcp", srv.Addr(), time.Second)
		if err != nil {
			return false
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(time.Second))
		_, err = c.Read(make([]byte, 512))
		return err == nil
	}
	require.True(t, greets())
	srv.Kill(t)
	require.False(t, greets(), "a killed server greets")
	srv.Start(t)
	require.True(t, greets())
}

func TestSentinel(t *testing.T) {
	s := launch.Sentinel(t)
	ctx := context.Background()
	fc := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: launch.SentinelMaster, SentinelAddrs: s.Sentinels,
		DialTimeout: 200 * time.Millisecond})
	defer fc.Close()
	old := s.Master(t, 10*time.Second)
	require.Equal(t, s.Servers[0], old, "the master as started is not the master")
	require.NoError(t, fc.Set(ctx, "k", "v", 0).Err())
	require.NoError(t, fc.Wait(ctx, 1, 5000).Err())

	old.Kill(t)
	promoted := s.WaitFailover(t, old, 30*time.Second)
	require.Equal(t, s.Servers[1], promoted)
	require.Eventually(t, func() bool { return fc.Get(ctx, "k").Val() == "v" }, 10*time.Second, 20*time.Millisecond,
		"the failover client does not read the replicated key from the promoted replica")

	// The old master comes back empty and becomes the new master's replica.
	s.Rejoin(t, old, 30*time.Second)
	rc := redis.NewClient(&redis.Options{Addr: old.Addr()})
	defer rc.Close()
	require.Eventually(t, func() bool { return rc.Get(ctx, "k").Val() == "v" }, 10*time.Second, 20*time.Millisecond,
		"the old master did not resync from the new one")
	require.Equal(t, promoted, s.Master(t, time.Second))
}
