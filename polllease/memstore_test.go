package polllease

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// memStore is an in-memory lease store with TTLs, fencing counters and
// membership, shared by the memProviders of a test as a Redis server is by
// its clients. Each memProvider renews its leases through a kit.Keeper, as
// the real lease backends do, and can be cut off from the store.
type memStore struct {
	mu      sync.Mutex
	locks   map[string]*memEntry
	fence   map[string]uint64
	members map[string]map[string]time.Time
	values  map[string][]byte // group + "/" + id → announced value
	down    bool
}

type memEntry struct {
	owner   *kit.BaseHandle
	id      string
	token   uint64
	expires time.Time
}

var (
	errStoreDown   = errors.New("memstore: unreachable")
	errRenewFailed = errors.New("memstore: renewal timed out")
)

func newMemStore() *memStore {
	return &memStore{
		locks:   make(map[string]*memEntry),
		fence:   make(map[string]uint64),
		members: make(map[string]map[string]time.Time),
		values:  make(map[string][]byte),
	}
}

func (s *memStore) setDown(down bool) {
	s.mu.Lock()
	s.down = down
	s.mu.Unlock()
}

// drop deletes a lock's entry, as an operator deleting the key would.
func (s *memStore) drop(name string) {
	s.mu.Lock()
	delete(s.locks, name)
	s.mu.Unlock()
}

// held returns the live lock names.
func (s *memStore) held() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for n, e := range s.locks {
		if time.Now().Before(e.expires) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

type memProvider struct {
	s         *memStore
	id        string
	ttl       time.Duration
	keeper    *kit.Keeper
	cut       atomic.Bool // this client cannot reach the store
	failRenew atomic.Bool // renewals fail with an unknown outcome; all else works
	calls     atomic.Int64
	renewed   atomic.Int64 // leases renewed
}

func newMemProvider(t testing.TB, s *memStore, id string, ttl time.Duration) *memProvider {
	p := &memProvider{s: s, id: id, ttl: ttl}
	k, err := kit.NewKeeper(kit.KeeperConfig{TTL: ttl, Margin: ttl / 10, Renew: p.renew})
	if err != nil {
		t.Fatal(err)
	}
	p.keeper = k
	t.Cleanup(k.Close)
	return p
}

// lock takes the store's lock unless the store or this client is cut off.
// A cut-off call fails after a timeout (50 ms, or ctx's end if sooner), as
// a call to a black-holed server does.
func (p *memProvider) lock(ctx context.Context) error {
	p.calls.Add(1)
	p.s.mu.Lock()
	if p.s.down || p.cut.Load() {
		p.s.mu.Unlock()
		t := time.NewTimer(50 * time.Millisecond)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		return errStoreDown
	}
	return nil
}

func (p *memProvider) renew(ctx context.Context, batch []*kit.Lease) []error {
	errs := make([]error, len(batch))
	if p.failRenew.Load() {
		for i := range errs {
			errs[i] = errRenewFailed
		}
		return errs
	}
	if err := p.lock(ctx); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	defer p.s.mu.Unlock()
	now := time.Now()
	for i, l := range batch {
		e := p.s.locks[l.Data.(string)]
		if e == nil || e.owner != l.Handle || now.After(e.expires) {
			errs[i] = core.ErrLockLost
			continue
		}
		e.expires = now.Add(p.ttl)
		p.renewed.Add(1)
	}
	return errs
}

func (p *memProvider) Mutex(name string) core.Locker {
	if err := kit.ValidateName(name); err != nil {
		return kit.FailedLocker(name, err)
	}
	return &memLocker{p: p, name: name}
}

func (p *memProvider) RWMutex(name string) core.RWLocker {
	return kit.FailedRWLocker(name, core.ErrUnsupported)
}

func (p *memProvider) Semaphore(name string, _ int) core.Locker {
	return kit.FailedLocker(name, core.ErrUnsupported)
}

func (p *memProvider) Register(ctx context.Context, group, id string, ttl time.Duration) error {
	if err := p.lock(ctx); err != nil {
		return err
	}
	defer p.s.mu.Unlock()
	if p.s.members[group] == nil {
		p.s.members[group] = make(map[string]time.Time)
	}
	p.s.members[group][id] = time.Now().Add(ttl)
	delete(p.s.values, group+"/"+id)
	return nil
}

func (p *memProvider) Announce(ctx context.Context, group, id string, ttl time.Duration, value []byte) ([]core.Member, error) {
	if err := p.Register(ctx, group, id, ttl); err != nil {
		return nil, err
	}
	ids, err := p.Members(ctx, group)
	if err != nil {
		return nil, err
	}
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	p.s.values[group+"/"+id] = slices.Clone(value)
	out := make([]core.Member, len(ids))
	for i, m := range ids {
		out[i] = core.Member{ID: m, Value: slices.Clone(p.s.values[group+"/"+m])}
	}
	return out, nil
}

func (p *memProvider) Deregister(ctx context.Context, group, id string) error {
	if err := p.lock(ctx); err != nil {
		return err
	}
	defer p.s.mu.Unlock()
	delete(p.s.members[group], id)
	return nil
}

func (p *memProvider) Members(ctx context.Context, group string) ([]string, error) {
	if err := p.lock(ctx); err != nil {
		return nil, err
	}
	defer p.s.mu.Unlock()
	var out []string
	for id, exp := range p.s.members[group] {
		if time.Now().Before(exp) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out, nil
}

type memLocker struct {
	p    *memProvider
	name string
}

func (l *memLocker) Name() string { return l.name }

func (l *memLocker) TryAcquire(ctx context.Context) (core.Handle, error) {
	start := time.Now()
	if err := l.p.lock(ctx); err != nil {
		return nil, err
	}
	defer l.p.s.mu.Unlock()
	s := l.p.s
	if e := s.locks[l.name]; e != nil && start.Before(e.expires) {
		return nil, kit.Busy("held by %s", e.id)
	}
	s.fence[l.name]++
	var h *kit.BaseHandle
	h = kit.NewHandle(s.fence[l.name], func(ctx context.Context) error {
		if err := l.p.lock(ctx); err != nil {
			return err
		}
		defer s.mu.Unlock()
		if e := s.locks[l.name]; e != nil && e.owner == h {
			delete(s.locks, l.name)
		}
		return nil
	})
	s.locks[l.name] = &memEntry{owner: h, id: l.p.id, token: s.fence[l.name], expires: start.Add(l.p.ttl)}
	l.p.keeper.Keep(h, start, l.name)
	return h, nil
}

func (l *memLocker) Acquire(ctx context.Context) (core.Handle, error) {
	return kit.Wait(ctx, kit.DefaultBackoff, nil, func(ctx context.Context) (core.Handle, time.Duration, error) {
		h, err := l.TryAcquire(ctx)
		return h, 0, err
	})
}

func (l *memLocker) Holder(ctx context.Context) (core.Holder, bool, error) {
	if err := l.p.lock(ctx); err != nil {
		return core.Holder{}, false, err
	}
	defer l.p.s.mu.Unlock()
	e := l.p.s.locks[l.name]
	if e == nil || time.Now().After(e.expires) {
		return core.Holder{}, false, nil
	}
	return core.Holder{ID: e.id, Token: e.token}, true, nil
}

var (
	_ core.Provider   = (*memProvider)(nil)
	_ core.Membership = (*memProvider)(nil)
	_ core.Announcer  = (*memProvider)(nil)
	_ core.Inspector  = (*memLocker)(nil)
)
