package main

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// listToken is the server-side handover floor: a Redis list holding one
// token. BLPOP takes it, LPUSH gives it back, and the server hands it to
// the longest-waiting BLPOP in the LPUSH itself: one hop from server to
// client per handover, the least any Redis lock can spend. No safety at
// all: a holder that dies loses the token for good; no fencing, no lease.
type listToken struct {
	rdb  *redis.Client
	name string
	key  string
}

// listInit puts the one token into the list once per lock, whoever of the
// contenders (goroutines or processes) comes first.
var listInit = redis.NewScript(`if redis.call('SET', KEYS[2], '1', 'NX') then redis.call('LPUSH', KEYS[1], 't') end return 1`)

func newListToken(rdb *redis.Client, name string) core.Locker {
	key := "rawlist:" + name
	if err := listInit.Run(context.Background(), rdb, []string{key, key + ":init"}).Err(); err != nil {
		return kit.FailedLocker(name, err)
	}
	return listToken{rdb: rdb, name: name, key: key}
}

func (l listToken) Name() string { return l.name }

func (l listToken) handle() core.Handle {
	return kit.NewHandle(1, func(ctx context.Context) error {
		return l.rdb.LPush(context.WithoutCancel(ctx), l.key, "t").Err()
	})
}

func (l listToken) TryAcquire(ctx context.Context) (core.Handle, error) {
	err := l.rdb.LPop(ctx, l.key).Err()
	if errors.Is(err, redis.Nil) {
		return nil, core.ErrNotAcquired
	}
	if err != nil {
		return nil, err
	}
	return l.handle(), nil
}

// Acquire blocks in BLPOP a second at a time, so that the context is
// honoured without cancelling a BLPOP, whose token could be lost in
// flight.
func (l listToken) Acquire(ctx context.Context) (core.Handle, error) {
	for ctx.Err() == nil {
		err := l.rdb.BLPop(context.WithoutCancel(ctx), time.Second, l.key).Err()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return l.handle(), nil
	}
	return nil, kit.NotAcquired(ctx)
}
