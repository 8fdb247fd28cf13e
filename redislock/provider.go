package redislock

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/redislock/redisop"
	"github.com/redis/go-redis/v9"
)

const backend = "redis"

// errClosed is why acquires fail once the Provider is closed.
var errClosed = errors.New("redislock: provider closed")

// Provider makes mutexes, reader-writer locks and semaphores on one Redis
// deployment, renews the leases of the handles it grants and wakes its
// waiters on releases. It implements core.Provider, core.Membership,
// core.Heartbeater and core.Announcer and is safe for concurrent use. Make
// one per process and client, and Close it when done.
//
// A Provider runs two long-lived goroutines: the lease keeper, while handles
// are held past half a renew interval (all renewals that fall due together
// go out in one pipeline), and the pub/sub listener, while some Acquire is
// waiting (and a few seconds after, to spare reconnects under steady
// contention). While its own Acquires wait for a mutex it holds, it also
// draws fencing tokens for the local handoff, one short call at a time per
// held mutex. Close stops them all and waits for them.
type Provider struct {
	client *redisop.Client
	cfg    config
	idTag  string // the identity as it is recorded in owner values
	keeper *kit.Keeper
	waker  *redisop.Waker
	closed atomic.Bool
	owned  func() error // closes the client Open made; nil after New
	probe  *kit.Probe   // nil without observers

	hand kit.Handoffs[*lease, *handle] // local lines and holders of mutexes (handoff.go)
}

var (
	_ core.Provider   = (*Provider)(nil)
	_ core.Membership = (*Provider)(nil)
	_ core.Announcer  = (*Provider)(nil)
)

// New returns a Provider over rdb (*redis.Client or *redis.ClusterClient).
// It does no I/O. It fails with an error matching core.ErrInvalidArgument
// when rdb is nil or an option is out of range: TTL ≤ 0 or over MaxTTL,
// renew interval ≤ 0 or not shorter than TTL − drift margin, drift margin
// negative or not shorter than TTL.
func New(rdb redis.UniversalClient, opts ...Option) (*Provider, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	client, err := redisop.NewClient(rdb, cfg.prefix)
	if err != nil {
		return nil, err
	}
	// Handoffs to this Provider's waiters come on a channel of its own.
	client = client.WithInbox(client.Channel() + ":" + redisop.NewOwner()[:16])
	if cfg.ack.set {
		if client, err = client.WithReplicaAck(cfg.ack.n, cfg.ack.timeout); err != nil {
			return nil, err
		}
	}
	p := &Provider{client: client, cfg: cfg, idTag: redisop.IdentityTag(cfg.identity), probe: kit.NewProbe(backend, cfg.log, cfg.observers...)}
	p.hand.Limits = cfg.handoff
	p.hand.Wake = func(tag string) { p.waker.Notify(tag) }
	p.keeper, err = kit.NewKeeper(kit.KeeperConfig{
		TTL:      cfg.ttl,
		Interval: cfg.interval,
		Margin:   cfg.margin,
		Renew:    p.renew,
	})
	if err != nil {
		return nil, err
	}
	p.waker = redisop.NewWaker(rdb, cfg.log.With("backend", backend), client.Channel(), client.Inbox())
	return p, nil
}

// TTL returns the lease of every grant.
func (p *Provider) TTL() time.Duration { return p.cfg.ttl }

// Close stops the Provider's goroutines. Handles still held are marked lost
// (their contexts end with core.ErrLockLost) and their grants expire on the
// server after the TTL unless released; acquires fail. Release still works
// after Close, except on a Provider from Open: Close also closes the client
// Open made (and returns the error of closing it), so release first.
func (p *Provider) Close() error {
	p.closed.Store(true)
	p.keeper.Close()
	p.waker.Close()
	if p.owned != nil {
		return p.owned()
	}
	return nil
}

// Mutex returns the exclusive lock called name. Acquiring a free mutex costs
// one round trip (one script: SET NX PX with the fencing token), releasing
// it one more (compare-and-delete). Waiters queue in Redis in arrival order;
// a release hands the lock straight to the first of them and announces it
// with one PUBLISH, so a contended handoff costs no extra round trip.
func (p *Provider) Mutex(name string) core.Locker {
	return p.locker(redisop.Lock{Kind: redisop.KindMutex, Name: name})
}

// RWMutex returns the reader-writer lock called name. Readers are held in a
// sorted set, each renewed on its own, so a crashed reader stops counting
// after the TTL while the others renew; a writer that waits keeps new
// readers out. Acquire and release cost one round trip each.
func (p *Provider) RWMutex(name string) core.RWLocker {
	w := redisop.Lock{Kind: redisop.KindWrite, Name: name}
	if err := w.Validate(); err != nil {
		return kit.FailedRWLocker(name, kit.Wrap(backend, "acquire", name, err))
	}
	return p.probe.RWMutex(&rwLocker{
		locker: &locker{p: p, lock: p.client.Prepare(w)},
		read:   struct{ core.Locker }{&locker{p: p, lock: p.client.Prepare(redisop.Lock{Kind: redisop.KindRead, Name: name})}},
	})
}

// Semaphore returns the semaphore called name with max slots. Holders are
// kept in a sorted set scored by their expiry on the server's clock; expired
// holders are purged on every attempt. Acquire and release cost one round
// trip each. Every user of the name must pass the same max.
func (p *Provider) Semaphore(name string, max int) core.Locker {
	return p.locker(redisop.Lock{Kind: redisop.KindSemaphore, Name: name, Max: max})
}

// Register adds id to group, or refreshes it, for ttl, with an empty value;
// the server's clock decides expiry. One round trip.
func (p *Provider) Register(ctx context.Context, group, id string, ttl time.Duration) error {
	return kit.Wrap(backend, "register", group, p.client.Register(ctx, group, id, ttl))
}

// Deregister removes id from group, with its value. One round trip.
func (p *Provider) Deregister(ctx context.Context, group, id string) error {
	return kit.Wrap(backend, "deregister", group, p.client.Deregister(ctx, group, id))
}

// Members lists the live ids of group, sorted. One round trip.
func (p *Provider) Members(ctx context.Context, group string) ([]string, error) {
	ids, err := p.client.Members(ctx, group)
	if err != nil {
		return nil, kit.Wrap(backend, "members", group, err)
	}
	return ids, nil
}

// renew is the Keeper's Renew: one pipeline for the whole batch.
func (p *Provider) renew(ctx context.Context, batch []*kit.Lease) []error {
	gs := make([]redisop.Grant, len(batch))
	for i, l := range batch {
		switch d := l.Data.(type) {
		case *lease:
			gs[i] = d.grant
		default:
			gs[i] = d.(redisop.Grant)
		}
	}
	return p.client.ExtendAll(ctx, gs, p.cfg.ttl)
}

// handle is a granted lock.
type handle struct {
	*kit.BaseHandle
	p     *Provider
	grant redisop.Grant
	lease *lease // a mutex's; nil for the other kinds
}

// newHandle returns the handle of a grant the server made.
func (p *Provider) newHandle(g redisop.Grant, token uint64, start time.Time) *handle {
	if g.Lock.Kind == redisop.KindMutex {
		return p.newMutexHandle(g, token, start, kit.StartRun(start))
	}
	h := &handle{p: p, grant: g}
	h.BaseHandle = kit.NewHandle(token, func(ctx context.Context) error {
		if _, err := p.client.Release(ctx, g); err != nil {
			return kit.Wrap(backend, "release", g.Lock.Name, err)
		}
		return nil // released, or already gone: either way not held
	})
	p.keeper.Keep(h.BaseHandle, start, g)
	return h
}
