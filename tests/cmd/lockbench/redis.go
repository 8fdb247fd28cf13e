package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	bsm "github.com/bsm/redislock"
	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// benchTTL is the lease every Redis contender uses.
const benchTTL = 30 * time.Second

// redisCases returns the contenders on the first server of
// DISTLOCK_REDIS_ADDRS, or an error if it is unset:
//
//   - "raw SET NX PX + CAD script": the floor. TryAcquire is one SET NX PX
//     with a random value, Release one compare-and-delete script; Acquire
//     polls every millisecond.
//   - "raw BLPOP/LPUSH token": the server-side handover floor (listToken).
//   - "redislock": this repository's backend with its defaults.
//   - "bsm/redislock": github.com/bsm/redislock, retrying every 10 ms
//     (LinearBackoff), as its README suggests.
//   - "redsync": github.com/go-redsync/redsync/v4 with its defaults over one
//     server (32 tries 50–250 ms apart); Acquire calls Lock again when
//     those tries run out, as a caller that must get the lock would.
//
// The third-party locks have no fencing: their handles carry token 1.
func redisCases() ([]benchCase, func(), error) {
	addrs := os.Getenv("DISTLOCK_REDIS_ADDRS")
	if addrs == "" {
		return nil, nil, errors.New("redis: DISTLOCK_REDIS_ADDRS is not set")
	}
	rdb := redis.NewClient(&redis.Options{Addr: strings.TrimSpace(strings.Split(addrs, ",")[0])})
	p, err := redislock.New(rdb, redislock.WithTTL(benchTTL))
	if err != nil {
		_ = rdb.Close()
		return nil, nil, err
	}
	bsmClient := bsm.New(rdb)
	rs := redsync.New(goredis.NewPool(rdb))
	cleanup := func() {
		_ = p.Close()
		_ = rdb.Close()
	}
	return []benchCase{
		{Name: "raw SET NX PX + CAD script", New: func(name string) core.Locker { return rawLocker{rdb: rdb, name: name} }},
		{Name: "raw BLPOP/LPUSH token", New: func(name string) core.Locker { return newListToken(rdb, name) }},
		{Name: "redislock", New: func(name string) core.Locker { return p.Mutex(name) }},
		{Name: "bsm/redislock", New: func(name string) core.Locker { return bsmLocker{c: bsmClient, name: name} }},
		{Name: "redsync", New: func(name string) core.Locker { return redsyncLocker{rs: rs, name: name} }},
	}, cleanup, nil
}

// rawLocker is the least code that makes a correct Redis lock.
type rawLocker struct {
	rdb  *redis.Client
	name string
}

var rawRelease = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

func (l rawLocker) Name() string { return l.name }

func (l rawLocker) TryAcquire(ctx context.Context) (core.Handle, error) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	value := hex.EncodeToString(b[:])
	ok, err := l.rdb.SetNX(ctx, "raw:"+l.name, value, benchTTL).Result()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, core.ErrNotAcquired
	}
	return kit.NewHandle(1, func(ctx context.Context) error {
		return rawRelease.Run(ctx, l.rdb, []string{"raw:" + l.name}, value).Err()
	}), nil
}

func (l rawLocker) Acquire(ctx context.Context) (core.Handle, error) {
	return pollEvery1ms(ctx, l.TryAcquire)
}

// bsmLocker adapts github.com/bsm/redislock.
type bsmLocker struct {
	c    *bsm.Client
	name string
}

func (l bsmLocker) Name() string { return l.name }

func (l bsmLocker) obtain(ctx context.Context, retry bsm.RetryStrategy) (core.Handle, error) {
	lock, err := l.c.Obtain(ctx, "bsm:"+l.name, benchTTL, &bsm.Options{RetryStrategy: retry})
	if errors.Is(err, bsm.ErrNotObtained) {
		return nil, fmt.Errorf("%w: %w", kit.NotAcquired(ctx), err)
	}
	if err != nil {
		return nil, err
	}
	return kit.NewHandle(1, lock.Release), nil
}

func (l bsmLocker) TryAcquire(ctx context.Context) (core.Handle, error) {
	return l.obtain(ctx, bsm.NoRetry())
}

func (l bsmLocker) Acquire(ctx context.Context) (core.Handle, error) {
	return l.obtain(ctx, bsm.LinearBackoff(10*time.Millisecond))
}

// redsyncLocker adapts github.com/go-redsync/redsync/v4. A redsync Mutex
// holds one grant's state, so every acquire makes a new one.
type redsyncLocker struct {
	rs   *redsync.Redsync
	name string
}

func (l redsyncLocker) Name() string { return l.name }

func (l redsyncLocker) handle(m *redsync.Mutex) core.Handle {
	return kit.NewHandle(1, func(ctx context.Context) error {
		_, err := m.UnlockContext(ctx)
		return err
	})
}

func (l redsyncLocker) TryAcquire(ctx context.Context) (core.Handle, error) {
	m := l.rs.NewMutex("redsync:" + l.name)
	if err := m.TryLockContext(ctx); err != nil {
		return nil, fmt.Errorf("%w: %w", core.ErrNotAcquired, err)
	}
	return l.handle(m), nil
}

func (l redsyncLocker) Acquire(ctx context.Context) (core.Handle, error) {
	for {
		m := l.rs.NewMutex("redsync:" + l.name)
		err := m.LockContext(ctx)
		if err == nil {
			return l.handle(m), nil
		}
		if ctx.Err() != nil {
			return nil, kit.NotAcquired(ctx)
		}
		var taken *redsync.ErrTaken
		if !errors.Is(err, redsync.ErrFailed) && !errors.As(err, &taken) {
			return nil, err
		}
	}
}
