package memlock

import (
	"context"
	"errors"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

const backend = "mem"

// errClosed is why acquires fail, and held handles are lost, once the
// Provider is closed.
var errClosed = errors.New("memlock: provider closed")

// Option configures a Provider.
type Option func(*config)

type config struct {
	store    *Store
	identity string
}

// WithStore puts the Provider on s, whose locks every Provider on s
// shares. Default: a new Store of the Provider's own.
func WithStore(s *Store) Option { return func(c *config) { c.store = s } }

// WithIdentity sets the identity Holder reports for the Provider's grants
// (core.Inspector). It must be non-empty valid UTF-8. Default
// kit.DefaultIdentity() ("hostname-pid").
func WithIdentity(id string) Option { return func(c *config) { c.identity = id } }

// Provider makes mutexes, reader-writer locks and semaphores in a Store. It
// implements core.Provider, core.Membership, core.Heartbeater and
// core.Announcer and is safe for concurrent use. It runs no goroutine.
type Provider struct {
	s      *Store
	id     string
	closed bool   // under s.mu
	onDone func() // run once by Close; set by Open for a named store
}

var (
	_ core.Provider    = (*Provider)(nil)
	_ core.Membership  = (*Provider)(nil)
	_ core.Heartbeater = (*Provider)(nil)
	_ core.Announcer   = (*Provider)(nil)
)

// New returns a Provider. A nil Store or an empty or invalid identity is an
// error matching core.ErrInvalidArgument.
func New(opts ...Option) (*Provider, error) {
	c := config{identity: kit.DefaultIdentity()}
	for _, o := range opts {
		if o == nil {
			return nil, kit.Invalid("memlock: nil option")
		}
		o(&c)
	}
	if kit.ValidateName(c.identity) != nil {
		return nil, kit.Invalid("memlock: identity %q must be non-empty UTF-8", c.identity)
	}
	if c.store == nil {
		c.store = NewStore()
	}
	return &Provider{s: c.store, id: c.identity}, nil
}

// Store returns the Store the Provider's locks live in, to make more
// Providers on it.
func (p *Provider) Store() *Store { return p.s }

// Close frees every lock the Provider holds and ends their handles'
// contexts with a cause wrapping core.ErrLockLost, as the end of a
// process's connection would. Acquires after Close fail; Release still
// works. It always returns nil.
func (p *Provider) Close() error {
	p.s.mu.Lock()
	was := p.closed
	p.closed = true
	p.s.mu.Unlock()
	if was {
		return nil
	}
	p.s.breakWhere(errClosed, func(g *grant) bool { return g.owner == p })
	if p.onDone != nil {
		p.onDone()
	}
	return nil
}

// Break makes every held grant of name lost, of every primitive and every
// Provider on the Store, as an operator deleting the lock on a server
// would: the lock is free at once, and each holder's handle context ends
// with a cause wrapping core.ErrLockLost. It returns how many grants it
// broke.
func (p *Provider) Break(name string) int {
	return p.s.breakWhere(errBroken, func(g *grant) bool { return g.key.name == name })
}

// BreakHandle is Break for the one grant behind h, a handle of a Provider
// on the same Store; it reports false when h holds nothing there.
func (p *Provider) BreakHandle(h core.Handle) bool {
	return p.s.breakWhere(errBroken, func(g *grant) bool { return core.Handle(g.h) == h }) > 0
}

// Mutex returns the exclusive lock called name. It implements
// core.Inspector.
func (p *Provider) Mutex(name string) core.Locker {
	if err := kit.ValidateName(name); err != nil {
		return kit.FailedLocker(name, kit.Wrap(backend, "acquire", name, err))
	}
	return &inspectLocker{locker{p: p, key: lockKey{kindMutex, name}, side: exclusive}}
}

// RWMutex returns the reader-writer lock called name. A writer waiting in
// Acquire keeps new readers out. The write side implements core.Inspector.
func (p *Provider) RWMutex(name string) core.RWLocker {
	if err := kit.ValidateName(name); err != nil {
		return kit.FailedRWLocker(name, kit.Wrap(backend, "acquire", name, err))
	}
	key := lockKey{kindRW, name}
	return &rwLocker{
		inspectLocker: inspectLocker{locker{p: p, key: key, side: exclusive}},
		read:          &locker{p: p, key: key, side: shared},
	}
}

// Semaphore returns the semaphore called name with max slots. A max below
// 1, or another max than the one the current holders passed, fails the
// acquire calls with an error matching core.ErrInvalidArgument.
func (p *Provider) Semaphore(name string, max int) core.Locker {
	if err := kit.ValidateName(name); err != nil {
		return kit.FailedLocker(name, kit.Wrap(backend, "acquire", name, err))
	}
	if max < 1 {
		return kit.FailedLocker(name, kit.Wrap(backend, "acquire", name, kit.Invalid("semaphore max %d < 1", max)))
	}
	return &locker{p: p, key: lockKey{kindSemaphore, name}, side: slot, max: max}
}

// locker is one primitive's side of a lock.
type locker struct {
	p    *Provider
	key  lockKey
	side side
	max  int
}

func (l *locker) Name() string { return l.key.name }

// TryAcquire makes one attempt.
func (l *locker) TryAcquire(ctx context.Context) (core.Handle, error) {
	if ctx.Err() != nil {
		return nil, kit.Wrap(backend, "acquire", l.key.name, kit.NotAcquired(ctx))
	}
	h, err := l.p.s.try(l.p, l.key, l.side, l.max)
	if err != nil {
		return nil, kit.Wrap(backend, "acquire", l.key.name, err)
	}
	return h, nil
}

// Acquire waits for the lock; a release that frees it wakes the wait.
func (l *locker) Acquire(ctx context.Context) (core.Handle, error) {
	if l.side == exclusive && l.key.kind == kindRW {
		l.p.s.waitWriter(l.key, +1)
		defer l.p.s.waitWriter(l.key, -1)
	}
	wake, stop := l.p.s.notify.Subscribe(l.key.String())
	defer stop()
	h, err := kit.Wait(ctx, kit.DefaultBackoff, wake, func(ctx context.Context) (core.Handle, time.Duration, error) {
		h, err := l.TryAcquire(ctx)
		return h, 0, err
	})
	if err != nil {
		return nil, kit.Wrap(backend, "acquire", l.key.name, err)
	}
	return h, nil
}

// inspectLocker is a locker that can tell its exclusive holder.
type inspectLocker struct{ locker }

var _ core.Inspector = (*inspectLocker)(nil)

// Holder reports the exclusive holder: a mutex's, or an RW lock's writer.
func (l *inspectLocker) Holder(ctx context.Context) (core.Holder, bool, error) {
	if err := ctx.Err(); err != nil {
		return core.Holder{}, false, kit.Wrap(backend, "holder", l.key.name, err)
	}
	h, held := l.p.s.holder(l.key)
	return h, held, nil
}

type rwLocker struct {
	inspectLocker
	read *locker
}

func (l *rwLocker) RLocker() core.Locker { return l.read }
