package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredislib "github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/redlock"
)

// redlockCases: RedLock over 3 and 5 of the DISTLOCK_REDIS_ADDRS servers,
// distlock's redlock against go-redsync/redsync (the common Go RedLock) and
// the raw floor (rawQuorum) on the same servers.
func redlockCases() ([]benchCase, func(), error) {
	addrs := strings.Split(os.Getenv("DISTLOCK_REDIS_ADDRS"), ",")
	if len(addrs) < 5 || addrs[0] == "" {
		return nil, nil, errors.New("redlock: DISTLOCK_REDIS_ADDRS needs five servers")
	}
	var closers []func()
	cleanup := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	var cases []benchCase
	for _, n := range []int{3, 5} {
		clients := make([]goredislib.UniversalClient, n)
		pools := make([]redis.Pool, n)
		for i := range clients {
			c := goredislib.NewClient(&goredislib.Options{Addr: strings.TrimSpace(addrs[i])})
			closers = append(closers, func() { _ = c.Close() })
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
// compare-and-delete on every server in parallel, done once a majority
// confirmed. A SET still running when the majority is reached may land after
// the release passed its server: the release then deletes it again there.
// No fencing, no renewal, no waiting (Acquire polls every millisecond).
type rawQuorum struct {
	clients []goredislib.UniversalClient
	name    string
}

func (l rawQuorum) Name() string { return l.name }

// fanOut runs call on every server in parallel and reports whether a
// majority answered true, as soon as that is decided; rest receives the
// answers not waited for.
func (l rawQuorum) fanOut(call func(c goredislib.UniversalClient) bool) (ok bool, rest <-chan bool, left int) {
	n := len(l.clients)
	out := make(chan bool, n)
	for _, c := range l.clients {
		go func() { out <- call(c) }()
	}
	yes, no := 0, 0
	for yes <= n/2 && no < (n+1)/2 {
		if <-out {
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
		return rawRelease.Run(context.Background(), c, []string{key}, value).Err() == nil
	}
	var mu sync.Mutex
	released := false // a release has started: it may have passed a late SET
	release := func(context.Context) error {
		mu.Lock()
		released = true
		mu.Unlock()
		l.fanOut(del)
		return nil
	}
	ok, rest, left := l.fanOut(func(c goredislib.UniversalClient) bool {
		ok, err := c.SetNX(ctx, key, value, benchTTL).Result()
		return err == nil && ok
	})
	go func() {
		late := false
		for range left {
			late = <-rest || late
		}
		mu.Lock()
		again := released && late
		mu.Unlock()
		if again {
			l.fanOut(del)
		}
	}()
	if ok {
		return core.NewHandle(1, release), nil
	}
	_ = release(ctx)
	return nil, core.ErrNotAcquired
}

func (l rawQuorum) Acquire(ctx context.Context) (core.Handle, error) {
	return pollEvery1ms(ctx, l.TryAcquire)
}
