package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
	"github.com/distlock/distlock/redislock/redisop"
	"github.com/redis/go-redis/v9"
)

const backend = "redlock"

// Provider makes RedLock mutexes and reader-writer locks over N independent
// Redis servers. It implements core.Provider, core.Membership,
// core.Heartbeater and core.Announcer and is safe for concurrent use. Close
// it when done.
type Provider struct {
	servers []server
	quorum  int
	cfg     config
	idTag   string // the identity as owner values carry it
	keeper  *kit.Keeper
	gates   kit.Gates // one contender per lock per Provider
	probe   *kit.Probe

	bg     sync.WaitGroup // calls that outlive the operation that started them
	bgCtx  context.Context
	stopBg context.CancelFunc
	work   *workers     // runs the per-server calls; its goroutines are in bg
	owned  func() error // closes the clients Open made; nil after New

	stamp atomic.Uint64 // the last membership stamp (membership.go)
}

type server struct {
	name   string // for errors: "redis[1] 127.0.0.1:6380"
	client *redisop.Client
	waker  *redisop.Waker
}

var _ core.Provider = (*Provider)(nil)

// New returns a Provider over clients, one per independent Redis server
// (not replicas of one another: RedLock's safety needs independent
// failures). N = len(clients) must be at least 1; with N = 1 it behaves
// like redislock on that server. It does no I/O. It fails with an error
// matching core.ErrInvalidArgument when clients is empty or holds a nil
// client, or when an option is out of range.
func New(clients []redis.UniversalClient, opts ...Option) (*Provider, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if len(clients) == 0 {
		return nil, kit.Invalid("redlock: no redis clients")
	}
	p := &Provider{cfg: cfg, quorum: len(clients)/2 + 1, idTag: redisop.IdentityTag(cfg.identity), probe: kit.NewProbe(backend, cfg.log, cfg.observers...)}
	inbox := redisop.NewOwner()[:16]
	for i, rdb := range clients {
		c, err := redisop.NewClient(rdb, cfg.prefix)
		if err != nil {
			return nil, fmt.Errorf("redlock: client %d: %w", i, err)
		}
		// An inbox of its own: a release hands the lock to the first
		// waiter in line, announced there, so no other process hears it.
		c = c.WithTicketInbox(c.Channel()+":"+inbox, cfg.guard)
		p.servers = append(p.servers, server{
			name:   serverName(i, rdb),
			client: c,
			waker:  redisop.NewWaker(rdb, cfg.log.With("backend", backend), c.Channel(), c.Inbox()),
		})
	}
	p.bgCtx, p.stopBg = context.WithCancel(context.Background())
	p.work = newWorkers(&p.bg, p.bgCtx.Done())
	p.keeper, err = kit.NewKeeper(kit.KeeperConfig{
		TTL:      cfg.ttl,
		Interval: cfg.interval,
		Margin:   max(cfg.margin, time.Nanosecond), // 0 would mean "default" to the Keeper
		Renew:    p.renew,
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

func serverName(i int, rdb redis.UniversalClient) string {
	if c, ok := rdb.(*redis.Client); ok {
		return fmt.Sprintf("redis[%d] %s", i, c.Options().Addr)
	}
	return fmt.Sprintf("redis[%d]", i)
}

// Quorum returns how many servers must agree: N/2+1.
func (p *Provider) Quorum() int { return p.quorum }

// Close stops the Provider's goroutines and waits for calls still in flight
// (bounded by their timeouts). Handles still held are marked lost; their
// grants expire on the servers after the TTL unless released. Close closes
// the redis clients only when Open made them (and returns the error of
// closing them): release first.
func (p *Provider) Close() error {
	p.keeper.Close()
	for _, s := range p.servers {
		s.waker.Close()
	}
	p.stopBg()
	p.bg.Wait()
	if p.owned != nil {
		return p.owned()
	}
	return nil
}

// Mutex returns the exclusive lock called name. Acquiring it costs one
// parallel round trip to every server (two when the servers' fencing
// counters disagree), releasing it one; a waiter is handed the lock by the
// release, at no round trip of its own (see the package doc, Waiting).
func (p *Provider) Mutex(name string) core.Locker {
	return p.locker(redisop.Lock{Kind: redisop.KindMutex, Name: name})
}

// RWMutex returns the reader-writer lock called name, each side granted by
// a majority. A waiting writer keeps new readers out on the servers it
// reaches.
func (p *Provider) RWMutex(name string) core.RWLocker {
	if err := kit.ValidateName(name); err != nil {
		return kit.FailedRWLocker(name, kit.Wrap(backend, "acquire", name, err))
	}
	return p.probe.RWMutex(&rwLocker{
		locker: &locker{p: p, lock: p.prepare(redisop.Lock{Kind: redisop.KindWrite, Name: name})},
		read:   &locker{p: p, lock: p.prepare(redisop.Lock{Kind: redisop.KindRead, Name: name})},
	})
}

// Semaphore returns the semaphore called name with max slots when the
// Provider has one server, and otherwise a Locker whose acquire calls fail
// with core.ErrUnsupported: see the package documentation for why a
// majority vote cannot keep a semaphore's bound.
func (p *Provider) Semaphore(name string, max int) core.Locker {
	if len(p.servers) > 1 {
		return kit.FailedLocker(name, kit.Wrap(backend, "acquire", name,
			fmt.Errorf("%w: a semaphore over %d servers: a majority vote does not preserve the bound", core.ErrUnsupported, len(p.servers))))
	}
	return p.locker(redisop.Lock{Kind: redisop.KindSemaphore, Name: name, Max: max})
}

// prepare computes lock's keys once: every server's Client has the same
// prefix, so they all reuse them.
func (p *Provider) prepare(lock redisop.Lock) redisop.Lock {
	return p.servers[0].client.Prepare(lock)
}

// background runs f on a goroutine the Provider waits for in Close.
func (p *Provider) background(f func(ctx context.Context)) {
	p.bg.Add(1)
	go func() {
		defer p.bg.Done()
		ctx, cancel := context.WithTimeout(p.bgCtx, kit.CleanupTimeout)
		defer cancel()
		f(ctx)
	}()
}

// each calls f for every server in parallel and sends each result on the
// returned channel, which has room for all of them, so the caller may stop
// reading early. The goroutines end when f returns.
func each[T any](p *Provider, ctx context.Context, f func(ctx context.Context, s server) (T, error)) <-chan reply[T] {
	return eachOf(p, ctx, nil, f)
}

// eachOf is each for the servers i with send[i], or all when send is nil.
func eachOf[T any](p *Provider, ctx context.Context, send []bool, f func(ctx context.Context, s server) (T, error)) <-chan reply[T] {
	out := make(chan reply[T], len(p.servers))
	for i, s := range p.servers {
		if send != nil && !send[i] {
			continue
		}
		p.work.run(func() {
			v, err := f(ctx, s)
			if err != nil {
				err = fmt.Errorf("%s: %w", s.name, err)
			}
			out <- reply[T]{i: i, v: v, err: err}
		})
	}
	return out
}

type reply[T any] struct {
	i   int
	v   T
	err error
}

// renew is the Keeper's Renew: every server extends the whole batch in one
// pipeline, in parallel, placing again the grants it lost with its data
// set where the lock is free. A lease is renewed once a majority extended it and
// lost once more than N − quorum servers said it is gone; it is decided as
// soon as either is certain, so a stalled server cannot hold the batch up.
func (p *Provider) renew(ctx context.Context, batch []*kit.Lease) []error {
	gs := make([]redisop.Grant, len(batch))
	for i, l := range batch {
		gs[i] = l.Data.(redisop.Grant)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stragglers
	replies := each(p, ctx, func(ctx context.Context, s server) ([]error, error) {
		// A grant a young server lost is placed again where the lock is
		// free, and counts although the server is young: the guard
		// protects the holder of a lost grant, and this is that holder,
		// whose lease is still trusted, so nobody else holds a majority.
		return s.client.Reassert(ctx, gs, p.cfg.ttl, p.cfg.guard), nil
	})
	ok := make([]int, len(gs))
	gone := make([]int, len(gs))
	other := make([][]error, len(gs))
	undecided := len(gs)
	n := len(p.servers)
	for range n {
		r := <-replies
		for i, err := range r.v {
			if ok[i] >= p.quorum || gone[i] > n-p.quorum {
				continue
			}
			switch {
			case err == nil:
				ok[i]++
			case errors.Is(err, core.ErrLockLost):
				gone[i]++
			default:
				other[i] = append(other[i], fmt.Errorf("%s: %w", p.servers[r.i].name, err))
			}
			if ok[i] >= p.quorum || gone[i] > n-p.quorum {
				undecided--
			}
		}
		if undecided == 0 {
			break
		}
	}
	errs := make([]error, len(gs))
	for i := range gs {
		switch {
		case ok[i] >= p.quorum:
		case gone[i] > n-p.quorum:
			errs[i] = fmt.Errorf("%w: %d of %d servers no longer hold the grant", core.ErrLockLost, gone[i], n)
		default:
			errs[i] = fmt.Errorf("extended on %d of %d servers, %d needed: %w", ok[i], n, p.quorum, errors.Join(other[i]...))
		}
	}
	return errs
}

// releaseAll gives g up on every server. It returns once every server
// answered, or, once a majority confirmed, after a grace of twice the time
// that took (at least releaseGrace): on healthy servers a Release is then
// complete everywhere, so the next TryAcquire of any client is not refused
// by a delete still in flight, while a paused server delays a Release by
// the grace only. With st (a grant decided before every server answered),
// a server whose acquire reply is still due gets its release when the
// reply arrives, or none when its call did not grant: every release runs
// after the grant it is for, so a server confirms whether it deleted the
// grant or found nothing.
func (p *Provider) releaseAll(ctx context.Context, g redisop.Grant, st *stragglers) error {
	ctx = context.WithoutCancel(ctx)
	start := time.Now()
	replies := make(chan reply[bool], len(p.servers))
	send := func(i int, mayHold bool) {
		if !mayHold {
			replies <- reply[bool]{i: i}
			return
		}
		s := p.servers[i]
		p.work.run(func() {
			// Each call has its own deadline: a straggler's starts
			// when its acquire reply arrives.
			ctx, cancel := context.WithTimeout(ctx, kit.CleanupTimeout)
			defer cancel()
			// The release script announces the lock free when a
			// waiter marked it awaited (AcquireCounted), and only then.
			v, err := s.client.Release(ctx, g)
			if err != nil {
				err = fmt.Errorf("%s: %w", s.name, err)
			}
			replies <- reply[bool]{i: i, v: v, err: err}
		})
	}
	var known []bool
	if st != nil {
		known = st.release(send)
	}
	first := make([]bool, len(p.servers)) // the servers sent to at once
	for i := range p.servers {
		if first[i] = known == nil || known[i]; first[i] {
			send(i, true)
		}
	}
	return p.awaitRelease(g, start, first, replies)
}

// awaitRelease counts the replies of releaseAll's calls (see there). It
// returns once a majority confirmed and the first servers, those that had
// answered the acquire when the release started, all answered: the others
// are too few to keep a majority from the next acquire, and their releases
// go on in the background.
func (p *Provider) awaitRelease(g redisop.Grant, start time.Time, first []bool, replies <-chan reply[bool]) error {
	var errs []error
	var grace <-chan time.Time
	confirmed, waiting := 0, 0
	for _, f := range first {
		if f {
			waiting++
		}
	}
	for range p.servers {
		if confirmed >= p.quorum && waiting == 0 {
			return nil
		}
		var r reply[bool]
		select {
		case r = <-replies:
		case <-grace:
			return nil
		}
		if first[r.i] {
			waiting--
		}
		if r.err != nil {
			errs = append(errs, r.err)
			continue
		}
		if confirmed++; confirmed >= p.quorum && grace == nil {
			grace = time.After(max(2*time.Since(start), releaseGrace))
		}
	}
	if confirmed >= p.quorum {
		return nil
	}
	return kit.Wrap(backend, "release", g.Lock.Name, fmt.Errorf("confirmed by %d of %d servers, %d needed: %w",
		confirmed, len(p.servers), p.quorum, errors.Join(errs...)))
}

// releaseGrace is the least a Release waits for the servers that had not
// answered when a majority confirmed.
const releaseGrace = 100 * time.Millisecond

// handle is a lock granted by a majority.
type handle struct {
	*kit.BaseHandle
	grant redisop.Grant
}

// newHandle makes the handle of a grant; st is nil when every server had
// answered the acquire.
func (p *Provider) newHandle(g redisop.Grant, token uint64, start time.Time, st *stragglers) *handle {
	h := &handle{grant: g}
	h.BaseHandle = kit.NewHandle(token, func(ctx context.Context) error {
		return p.releaseAll(ctx, g, st)
	})
	p.keeper.Keep(h.BaseHandle, start, g)
	return h
}
