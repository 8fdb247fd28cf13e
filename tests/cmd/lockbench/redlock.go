package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredislib "github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/redlock"
)

// redlockCases: RedLock over 3 and 5 of the DISTLOCK_REDIS_ADDRS servers,
// distlock's redlock against go-redsync/redsync (the common Go RedLock) and
// the raw floor (rawQuorum) on the same servers.
func redlockCases() ([]benchCase, func(), error) {
	addrs, err := redisAddrs(5)
	if err != nil {
		return nil, nil, err
	}
	return redlockCasesOn(addrs, 3, 5)
}

// redisAddrs returns the first n addresses of DISTLOCK_REDIS_ADDRS.
func redisAddrs(n int) ([]string, error) {
	addrs := strings.Split(os.Getenv("DISTLOCK_REDIS_ADDRS"), ",")
	if len(addrs) < n || addrs[0] == "" {
		return nil, fmt.Errorf("redlock: DISTLOCK_REDIS_ADDRS needs %d servers", n)
	}
	for i := range addrs {
		addrs[i] = strings.TrimSpace(addrs[i])
	}
	return addrs[:n], nil
}

// redlockCasesOn returns the RedLock cases over the first n of addrs, for
// each n of ns.
func redlockCasesOn(addrs []string, ns ...int) ([]benchCase, func(), error) {
	var closers []func()
	cleanup := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	var cases []benchCase
	for _, n := range ns {
		clients := make([]goredislib.UniversalClient, n)
		pools := make([]redis.Pool, n)
		for i := range clients {
			c := goredislib.NewClient(&goredislib.Options{Addr: addrs[i]})
			closers = append(closers, func() { _ = c.Close() })
			// The bench servers did not restart: a boot marker from long
			// ago spares the first round redlock's restart guard.
			if err := c.Set(context.Background(), redlock.DefaultPrefix+"boot", 0, 0).Err(); err != nil {
				cleanup()
				return nil, nil, err
			}
			clients[i] = c
			pools[i] = goredis.NewPool(c)
		}
		p, err := redlock.New(clients, redlock.WithTTL(benchTTL))
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		closers = append(closers, func() { _ = p.Close() })
		rs := redsync.New(pools...)
		cases = append(cases,
			benchCase{Name: fmt.Sprintf("raw quorum N=%d", n), New: func(name string) core.Locker { return rawQuorum{clients: clients, name: name} }},
			benchCase{Name: fmt.Sprintf("redlock N=%d", n), New: func(name string) core.Locker { return p.Mutex(name) }},
			benchCase{Name: fmt.Sprintf("redsync N=%d", n), New: func(name string) core.Locker { return redsyncLocker{rs: rs, name: name} }},
		)
	}
	return cases, cleanup, nil
}

// rawQuorum is the floor of a RedLock round: a plain SET NX PX on every
// server in parallel, decided once a majority said yes, and a
// compare-and-delete on every server in parallel, done once a majority is
// known free. A SET still running when the majority is reached may land
// after the release passed its server: a delete there proves nothing, and
// the late SET is deleted again when it lands. No fencing, no renewal, no
// waiting (Acquire polls every millisecond).
type rawQuorum struct {
	clients []goredislib.UniversalClient
	name    string
}

func (l rawQuorum) Name() string { return l.name }

type rawReply struct {
	i  int
	ok bool
}

// fanOut runs call on every server in parallel and returns once count says
// a majority counts (true) or can no longer (false); rest receives the
// replies not waited for.
func (l rawQuorum) fanOut(call func(c goredislib.UniversalClient) bool, count func(r rawReply) bool) (ok bool, rest <-chan rawReply, left int) {
	n := len(l.clients)
	out := make(chan rawReply, n)
	for i, c := range l.clients {
		go func() { out <- rawReply{i: i, ok: call(c)} }()
	}
	yes, no := 0, 0
	for yes <= n/2 && no < (n+1)/2 {
		if count(<-out) {
			yes++
		} else {
			no++
		}
	}
	return yes > n/2, out, n - yes - no
}

func (l rawQuorum) TryAcquire(ctx context.Context) (core.Handle, error) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	value := hex.EncodeToString(b[:])
	key := "rawq:" + l.name
	del := func(c goredislib.UniversalClient) bool {
		n, err := rawRelease.Run(context.Background(), c, []string{key}, value).Int()
		return err == nil && n == 1
	}
	var mu sync.Mutex
	known := make([]bool, len(l.clients)) // the server's SET reply arrived
	releasing := false
	release := func(context.Context) error {
		mu.Lock()
		releasing = true
		freed := slices.Clone(known)
		mu.Unlock()
		// A server is known free when the delete found our value, or
		// found nothing after the server had answered the SET.
		l.fanOut(del, func(r rawReply) bool { return r.ok || freed[r.i] })
		return nil
	}
	ok, rest, left := l.fanOut(func(c goredislib.UniversalClient) bool {
		ok, err := c.SetNX(ctx, key, value, benchTTL).Result()
		return err == nil && ok
	}, func(r rawReply) bool {
		mu.Lock()
		known[r.i] = true
		mu.Unlock()
		return r.ok
	})
	go func() {
		for range left {
			r := <-rest
			mu.Lock()
			known[r.i] = true
			again := releasing
			mu.Unlock()
			if again {
				del(l.clients[r.i])
			}
		}
	}()
	if ok {
		return kit.NewHandle(1, release), nil
	}
	_ = release(ctx)
	return nil, core.ErrNotAcquired
}

func (l rawQuorum) Acquire(ctx context.Context) (core.Handle, error) {
	return pollEvery1ms(ctx, l.TryAcquire)
}
