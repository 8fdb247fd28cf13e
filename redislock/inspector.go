package redislock

import (
	"context"
	"errors"
	"strconv"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/redislock/redisop"
	"github.com/redis/go-redis/v9"
)

var (
	_ core.Inspector = (*locker)(nil)
	_ core.Inspector = (*rwLocker)(nil)
)

// Holder reports who holds a Mutex, or the write side of an RWMutex: the
// identity its Provider was given (WithIdentity) and its fencing token.
// held is false when it is free. One round trip (a GET; for the write side
// an MGET of the writer and fence keys); it takes no lock. A grant that
// expired on the server counts as free even if its holder has not yet
// noticed.
//
// The identity travels in the owner value of each grant, after the random
// part: "<32 hex digits>.<identity, base64url>". A mutex handed on within
// this process (handoff.go) keeps its owner value, and its value names the
// new holder's token once the new holder's background write lands, a round
// trip after the handoff; until then Holder of another Provider reports the
// previous token (Holder of the holder's own Provider knows the new one).
func (l *locker) Holder(ctx context.Context) (core.Holder, bool, error) {
	rdb := l.p.client.Redis()
	var owner, token string
	switch l.lock.Kind {
	case redisop.KindMutex:
		// "<owner>:<token>", then "/<spare>" once a token was drawn for a
		// local handoff (handoff.go), then "+" while waiters queue.
		v, err := rdb.Get(ctx, l.p.client.Key(l.lock)).Result()
		if errors.Is(err, redis.Nil) {
			return core.Holder{}, false, nil
		}
		if err != nil {
			return core.Holder{}, false, kit.Wrap(backend, "holder", l.lock.Name, err)
		}
		owner, token = redisop.MutexOwner(v)
		if ls, ok := l.p.hand.Holder(l.p.client.Key(l.lock)); ok && ls.grant.Owner == owner && !ls.lost() && !ls.h.Released() {
			// Ours: the local holder knows its token even before the
			// write that follows a handoff without a round trip landed.
			return core.Holder{ID: redisop.OwnerIdentity(owner), Token: ls.h.FencingToken()}, true, nil
		}
	case redisop.KindWrite:
		vs, err := rdb.MGet(ctx, l.p.client.Key(l.lock), l.p.client.FenceKey(l.lock)).Result()
		if err != nil {
			return core.Holder{}, false, kit.Wrap(backend, "holder", l.lock.Name, err)
		}
		w, _ := vs[0].(string)
		if w == "" {
			return core.Holder{}, false, nil
		}
		// While a writer holds the lock no reader can take a token, so
		// the fence key holds the writer's.
		owner = w
		token, _ = vs[1].(string)
	default:
		return core.Holder{}, false, kit.Wrap(backend, "holder", l.lock.Name, core.ErrUnsupported)
	}
	tok, err := strconv.ParseUint(token, 10, 64)
	if err != nil {
		return core.Holder{}, false, kit.Wrap(backend, "holder", l.lock.Name, errors.New("unreadable grant: "+strconv.Quote(token)))
	}
	return core.Holder{ID: redisop.OwnerIdentity(owner), Token: tok}, true, nil
}
