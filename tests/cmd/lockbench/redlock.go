package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredislib "github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/redlock"
)

// redlockCases: RedLock over 3 and 5 of the DISTLOCK_REDIS_ADDRS servers,
// distlock's redlock against go-redsync/redsync (the common Go RedLock) on
// the same servers.
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
			benchCase{Name: fmt.Sprintf("redlock N=%d", n), New: func(name string) core.Locker { return p.Mutex(name) }},
			benchCase{Name: fmt.Sprintf("redsync N=%d", n), New: func(name string) core.Locker { return redsyncLocker{rs: rs, name: name} }},
		)
	}
	return cases, cleanup, nil
}
