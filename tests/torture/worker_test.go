package torture

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/filelock"
	"github.com/distlock/distlock/natslock"
	"github.com/distlock/distlock/pglock"
	"github.com/distlock/distlock/redislock"
	"github.com/distlock/distlock/redlock"
	"github.com/distlock/distlock/tests/internal/launch"
)

// Environment of a worker process. TestMain runs workerMain instead of the
// tests when envWorker is set.
const (
	envWorker   = "DISTLOCK_TORTURE_WORKER"   // the worker's number
	envResource = "DISTLOCK_TORTURE_RESOURCE" // base URL of the fenced resource
	envBackend  = "DISTLOCK_TORTURE_BACKEND"  // file, redis, sentinel, redlock, postgres, nats, mysql or etcd
	envAddr     = "DISTLOCK_TORTURE_ADDR"     // directory, address(es) or URL of the backend
	envTTL      = "DISTLOCK_TORTURE_TTL"      // lease TTL, as time.ParseDuration reads it
	envLock     = "DISTLOCK_TORTURE_LOCK"     // the lock's name
	envKind     = "DISTLOCK_TORTURE_KIND"     // mutex, write (an RWMutex's write side) or semaphore (of 1)
)

// Exit codes of a worker.
const (
	exitOK    = 0
	exitSetup = 2 // could not open the backend
	exitLeak  = 3 // goroutines or connections left after closing the Provider
)

// opened is a backend's Provider as a worker opened it.
type opened struct {
	p     core.Provider
	close func() // closes the Provider and its client
	// conns counts, through a new connection, the server's connections
	// still open from the closed client; nil when the backend cannot tell.
	conns func(ctx context.Context) (int, error)
}

// open opens a worker's Provider on backend kind at addr. Its connections
// carry the name client, so the server can list them.
func open(kind, addr, client string, ttl time.Duration) (*opened, error) {
	switch kind {
	case "file":
		p, err := filelock.New(addr)
		if err != nil {
			return nil, err
		}
		return &opened{p: p, close: func() { _ = p.Close() }}, nil
	case "redis":
		rdb := redis.NewClient(&redis.Options{Addr: addr, ClientName: client,
			DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
		p, err := redislock.New(rdb, redislock.WithTTL(ttl))
		if err != nil {
			_ = rdb.Close()
			return nil, err
		}
		return &opened{p: p, close: func() { _ = p.Close(); _ = rdb.Close() }, conns: func(ctx context.Context) (int, error) {
			probe := redis.NewClient(&redis.Options{Addr: addr})
			defer probe.Close()
			list, err := probe.ClientList(ctx).Result()
			return strings.Count(list, " name="+client+" "), err
		}}, nil
	case "sentinel":
		// addr: the Sentinels; grants confirmed by the replica.
		rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: launch.SentinelMaster,
			SentinelAddrs: strings.Split(addr, ","), ClientName: client,
			DialTimeout: 200 * time.Millisecond, ReadTimeout: 3 * time.Second, WriteTimeout: 3 * time.Second})
		p, err := redislock.New(rdb, redislock.WithTTL(ttl), redislock.WithReplicaAck(1, time.Second))
		if err != nil {
			_ = rdb.Close()
			return nil, err
		}
		return &opened{p: p, close: func() { _ = p.Close(); _ = rdb.Close() }}, nil
	case "redlock":
		var clients []redis.UniversalClient
		for _, a := range strings.Split(addr, ",") {
			clients = append(clients, redis.NewClient(&redis.Options{Addr: a, ClientName: client,
				DialTimeout: 500 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond}))
		}
		closeClients := func() {
			for _, c := range clients {
				_ = c.Close()
			}
		}
		p, err := redlock.New(clients, redlock.WithTTL(ttl), redlock.WithMinValidity(ttl/2))
		if err != nil {
			closeClients()
			return nil, err
		}
		return &opened{p: p, close: func() { _ = p.Close(); closeClients() }}, nil
	case "postgres":
		cfg, err := pgxpool.ParseConfig(addr)
		if err != nil {
			return nil, err
		}
		cfg.ConnConfig.RuntimeParams["application_name"] = client
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			return nil, err
		}
		p, err := pglock.New(pool)
		if err != nil {
			pool.Close()
			return nil, err
		}
		return &opened{p: p, close: func() { _ = p.Close(); pool.Close() }, conns: func(ctx context.Context) (int, error) {
			probe, err := pgx.Connect(ctx, addr)
			if err != nil {
				return 0, err
			}
			defer probe.Close(context.Background())
			var n int
			err = probe.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", client).Scan(&n)
			return n, err
		}}, nil
	case "nats":
		nc, err := nats.Connect(addr, nats.Name(client), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
		if err != nil {
			return nil, err
		}
		js, err := jetstream.New(nc)
		if err != nil {
			nc.Close()
			return nil, err
		}
		p, err := natslock.New(js, natslock.WithTTL(ttl), natslock.WithTimeout(time.Second))
		if err != nil {
			nc.Close()
			return nil, err
		}
		return &opened{p: p, close: func() { _ = p.Close(); nc.Close() }}, nil
	case "mysql":
		return openMySQL(addr)
	case "etcd":
		return openEtcd(addr, ttl)
	case "unlocked", "unfenced":
		return &opened{p: brokenProvider{fenced: kind == "unlocked"}, close: func() {}}, nil
	}
	return nil, fmt.Errorf("unknown backend %q", kind)
}

// brokenProvider is a negative control: its locks exclude nobody. With
// fenced set its tokens still increase (the time), so fencing alone must
// keep every update; without, every token is 1 and updates get lost.
type brokenProvider struct{ fenced bool }

func (p brokenProvider) Mutex(name string) core.Locker { return brokenLocker{p, name} }
func (p brokenProvider) RWMutex(name string) core.RWLocker {
	return kit.FailedRWLocker(name, core.ErrUnsupported)
}
func (p brokenProvider) Semaphore(name string, _ int) core.Locker { return brokenLocker{p, name} }

type brokenLocker struct {
	p    brokenProvider
	name string
}

func (l brokenLocker) Name() string { return l.name }

func (l brokenLocker) TryAcquire(ctx context.Context) (core.Handle, error) { return l.Acquire(ctx) }

func (l brokenLocker) Acquire(context.Context) (core.Handle, error) {
	token := uint64(1)
	if l.p.fenced {
		token = uint64(time.Now().UnixNano())
	}
	return kit.NewHandle(token, func(context.Context) error { return nil }), nil
}

// workerMain is a worker process: it loops acquire, read-modify-write on
// the resource, release, until the resource says stop. It exits when its
// stdin closes, so it never outlives the test.
func workerMain() int {
	id, _ := strconv.Atoi(os.Getenv(envWorker))
	ttl, _ := time.ParseDuration(os.Getenv(envTTL))
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(exitOK) // the test is gone
	}()
	name := fmt.Sprintf("distlock-torture-%d-%d", os.Getppid(), id)
	b, err := open(os.Getenv(envBackend), os.Getenv(envAddr), name, ttl)
	if err != nil {
		fmt.Fprintf(os.Stderr, "worker %d: %v\n", id, err)
		return exitSetup
	}
	c := &client{base: os.Getenv(envResource), worker: id, http: &http.Client{}}
	c.loop(locker(b.p, os.Getenv(envKind), os.Getenv(envLock)))
	b.close()
	c.http.CloseIdleConnections()
	if b.conns != nil {
		if err := noConns(b.conns); err != nil {
			fmt.Fprintf(os.Stderr, "worker %d: %v\n", id, err)
			return exitLeak
		}
	}
	// The stdin reader is the one goroutine we own and leave running.
	if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/distlock/distlock/tests/torture.workerMain.func1")); err != nil {
		fmt.Fprintf(os.Stderr, "worker %d: goroutines left after Close: %v\n", id, err)
		return exitLeak
	}
	return exitOK
}

// locker returns the lock of the given kind (see envKind) called name.
func locker(p core.Provider, kind, name string) core.Locker {
	switch kind {
	case "write":
		return p.RWMutex(name)
	case "semaphore":
		return p.Semaphore(name, 1)
	}
	return p.Mutex(name)
}

// noConns waits until the server shows none of the closed client's
// connections; it may take the server a moment to notice the closes.
func noConns(conns func(ctx context.Context) (int, error)) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		n, err := conns(ctx)
		if err == nil && n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("connections left after Close: %d (%v)", n, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// client is a worker's side of the resource protocol.
type client struct {
	base   string
	worker int
	http   *http.Client
}

func (c *client) loop(l core.Locker) {
	bg := context.Background()
	for {
		ctx, cancel := context.WithTimeout(bg, 5*time.Second)
		h, err := l.Acquire(ctx)
		cancel()
		if err != nil {
			if !errors.Is(err, core.ErrNotAcquired) {
				fmt.Fprintf(os.Stderr, "worker %d: acquire: %v\n", c.worker, err)
			}
			if c.stopped() {
				return
			}
			time.Sleep(50 * time.Millisecond) // the server may be down: do not spin
			continue
		}
		stop := c.critical(h.FencingToken())
		rctx, cancel := context.WithTimeout(bg, 5*time.Second)
		_ = h.Release(rctx)
		cancel()
		if stop {
			return
		}
	}
}

// critical is the critical section: read the counter and write it + 1,
// both with the fencing token. It does not look at the handle's context
// on purpose: fencing must catch a holder that lost its lock unawares.
func (c *client) critical(token uint64) (stop bool) {
	var r enterReply
	if err := c.call("/enter", token, 0, &r); err != nil || r.Stop {
		return r.Stop || c.stopped()
	}
	if !r.OK {
		return false
	}
	if r.Hold {
		_ = c.call("/hold", token, 0, nil)
	}
	_ = c.call("/write", token, r.Value+1, nil)
	return false
}

func (c *client) stopped() bool {
	var r enterReply
	err := c.call("/stop", 0, 0, &r)
	return err != nil || r.Stop // a resource that is gone means stop too
}

func (c *client) call(path string, token uint64, v int64, out any) error {
	q := url.Values{"w": {strconv.Itoa(c.worker)}, "t": {strconv.FormatUint(token, 10)}, "v": {strconv.FormatInt(v, 10)}}
	resp, err := c.http.Post(c.base+path+"?"+q.Encode(), "text/plain", strings.NewReader(""))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return fmt.Errorf("%s: %s", path, resp.Status)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
