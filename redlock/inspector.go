package redlock

import (
	"context"
	"fmt"
	"slices"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/redislock/redisop"
)

var (
	_ core.Inspector = inspected{}
	_ core.Inspector = (*rwLocker)(nil)
)

// inspected is a mutex: a Locker with one holder to report.
type inspected struct{ *locker }

func (l inspected) Holder(ctx context.Context) (core.Holder, bool, error) { return l.holder(ctx) }

// Holder reports who holds the write side; see inspected's Holder.
func (l *rwLocker) Holder(ctx context.Context) (core.Holder, bool, error) { return l.holder(ctx) }

// holder reports who holds a Mutex, or the write side of an RWMutex, by the
// same majority rule that grants it: the grant that a majority of the
// servers hold (one parallel round trip, an MGET per server). held is false
// when no grant is on a majority, even when some servers still hold one
// (a grant being placed or released). The identity is the one the holder's
// Provider was given (WithIdentity). The token is read from the name
// counters of the servers holding the grant: the holder's token is the
// largest counter of its granting majority, written back to the others
// until a majority holds exactly it before Acquire returns, and no counter
// moves while the server holds the grant. Only a grant that landed after
// the majority (larger) or a server that lost its data (smaller) differ,
// and they are fewer than a majority, so the quorum-th smallest counter of
// the holding servers is the token. It takes no lock. A majority of servers
// must answer, or it fails with their errors.
func (l *locker) holder(ctx context.Context) (core.Holder, bool, error) {
	if l.lock.Kind != redisop.KindMutex && l.lock.Kind != redisop.KindWrite {
		return core.Holder{}, false, kit.Wrap(backend, "holder", l.lock.Name,
			fmt.Errorf("%w: only a mutex and a write side have one holder", core.ErrUnsupported))
	}
	p := l.p
	type grant struct {
		owner   string
		counter uint64
	}
	grants, err := majority(p, ctx, "holder", l.lock.Name, func(ctx context.Context, s server) (grant, error) {
		owner, counter, err := s.client.GrantOf(ctx, l.lock)
		return grant{owner, counter}, err
	})
	if err != nil {
		return core.Holder{}, false, err
	}
	counters := map[string][]uint64{} // by owner
	for _, g := range grants {
		if g.owner != "" {
			counters[g.owner] = append(counters[g.owner], g.counter)
		}
	}
	for owner, cs := range counters {
		if len(cs) >= p.quorum {
			slices.Sort(cs)
			return core.Holder{ID: redisop.OwnerIdentity(owner), Token: cs[p.quorum-1]}, true, nil
		}
	}
	return core.Holder{}, false, nil
}
