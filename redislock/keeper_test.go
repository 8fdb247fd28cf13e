package redislock

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/redislock/internal/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// roundTrips counts what a client sends: single commands, and pipelines
// with the commands in them. The handshake of a new connection (HELLO,
// CLIENT SETINFO), which the driver runs through the same hook, is not
// counted: the pool opens connections as concurrent pipelines need them.
type roundTrips struct {
	single, pipelines, piped atomic.Int64
}

func (c *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch cmd.Name() {
		case "hello", "client", "auth", "select":
		default:
			c.single.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (c *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.pipelines.Add(1)
		c.piped.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

func (c *roundTrips) reset() {
	c.single.Store(0)
	c.pipelines.Store(0)
	c.piped.Store(0)
}

// forEach runs fn for 0..n-1 on a few goroutines.
func forEach(n int, fn func(i int)) {
	const workers = 16
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				fn(i)
			}
		}()
	}
	wg.Wait()
}

func TestTenThousandLocksRenewedInPipelines(t *testing.T) {
	const (
		n = 10_000
		// The test is about batching, not latency: the trust window (TTL
		// − TTL/10, 54 s) outlasts the stalls of the renewals while the
		// 16 workers below flood the client with 10,000 acquires, which
		// take 4 to 31 s with -race on a loaded 2-core machine. The
		// renewals still run every interval.
		ttl      = time.Minute
		interval = time.Second
		cadences = 3
	)
	prefix := redistest.Prefix()
	rdb := redistest.Client(t, redistest.Addr(t))
	var count roundTrips
	rdb.AddHook(&count)
	p, err := New(rdb, WithPrefix(prefix), WithTTL(ttl), WithRenewInterval(interval))
	require.NoError(t, err)
	defer p.Close()

	ctx := context.Background()
	start := time.Now()
	handles := make([]core.Handle, n)
	errs := make([]error, n)
	forEach(n, func(i int) {
		handles[i], errs[i] = p.Mutex(t.Name() + "/" + string(rune('a'+i%26)) + "/" + time.Duration(i).String()).TryAcquire(ctx)
	})
	for _, err := range errs {
		require.NoError(t, err)
	}
	t.Logf("acquired %d locks in %v", n, time.Since(start).Round(time.Millisecond))

	// Hold them until three cadences of renewals have been answered (on a
	// loaded machine a cadence's pipeline can take longer than the
	// interval, so the test waits for the renewals, not for the clock).
	count.reset()
	deadline := time.Now().Add(30 * cadences * interval)
	for count.piped.Load() < cadences*n && time.Now().Before(deadline) {
		time.Sleep(interval / 10)
	}
	for i, h := range handles {
		require.NoError(t, h.Context().Err(), "handle %d lost: %v", i, context.Cause(h.Context()))
	}
	single, pipes, piped := count.single.Load(), count.pipelines.Load(), count.piped.Load()
	t.Logf("while holding %d locks: %d pipelines carrying %d renewals, %d single commands",
		n, pipes, piped, single)
	assert.Zero(t, single, "renewals go out in pipelines only")
	require.GreaterOrEqual(t, piped, int64(cadences*n), "every lock renewed every cadence")
	rounds := (piped + n - 1) / n
	assert.LessOrEqual(t, pipes, (rounds+1)*8, "renewals that fall due together share a pipeline")
	held := 0
	for _, k := range scanKeys(t, rdb, prefix) {
		if strings.HasSuffix(k, "}:mutex") {
			held++
		}
	}
	assert.Equal(t, n, held, "every lock key is still there")

	forEach(n, func(i int) { errs[i] = handles[i].Release(ctx) })
	for _, err := range errs {
		require.NoError(t, err)
	}
	assert.Empty(t, len(scanKeys(t, rdb, prefix)), "releasing every lock leaves no keys")
	assert.Zero(t, p.keeper.Len(), "released handles are no longer renewed")
}
