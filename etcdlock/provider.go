package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

const backend = "etcd"

// ErrClosed is returned by the calls of a closed Provider.
var ErrClosed = errors.New("etcdlock: provider closed")

// Provider makes mutexes, reader-writer locks and semaphores on etcd, and
// implements core.Membership, core.Heartbeater and core.Announcer. It is
// safe for concurrent use. Close it to free everything it holds and stop
// its goroutines.
type Provider struct {
	owned    *clientv3.Client // made by Open: Close closes it
	probe    *kit.Probe       // nil without observers or a logger
	cli      *clientv3.Client
	opts     options
	log      *slog.Logger
	keeper   *kit.Keeper
	window   time.Duration // a lease's trust window: TTL − margin from its last confirmation
	freshFor time.Duration // a lease confirmed this recently takes new keys without a call
	recheck  kit.Backoff   // fallback cadence of a wait (defaultRecheck; tests stretch it)
	follow   time.Duration // when a knocking wait watches its key too (knockFollow; tests stretch it)
	id       string        // in the Provider's key names and its bell's (bell.go)
	seq      atomic.Uint64 // makes each key of the Provider unique
	spare    spareNames    // names of deleted keys, for reuse (names.go)

	lmu  sync.Mutex
	sess *session

	bells bells

	// watches holds the watch of each lock this Provider waits for, by
	// the lock's prefix (watch.go).
	bmu      sync.Mutex
	watches  map[string]*lockWatch
	released []released // the latest exclusive releases, oldest first

	omu      sync.Mutex
	orphans  map[string]clientv3.LeaseID // keys that may stand in line for nobody, and their leases (orphans.go)
	sweeping bool                        // a sweep runs and deletes them

	wmu      sync.Mutex // guards closed against wg.Add
	closed   bool
	isClosed atomic.Bool
	ctx      context.Context // ends with Close: the watches' context
	stop     context.CancelFunc
	wg       sync.WaitGroup // the goroutines of spawn: watches, sweeps
}

var (
	_ core.Provider    = (*Provider)(nil)
	_ core.Membership  = (*Provider)(nil)
	_ core.Heartbeater = (*Provider)(nil)
	_ core.Announcer   = (*Provider)(nil)
)

// New returns a Provider on cli, which stays the caller's to close (after
// the Provider). It does no I/O: the lease is granted by the first call
// that needs it. A nil client or a bad option is an error matching
// core.ErrInvalidArgument.
func New(cli *clientv3.Client, opts ...Option) (*Provider, error) {
	if cli == nil {
		return nil, kit.Invalid("etcdlock: nil client")
	}
	o := defaults()
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	log := o.log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Provider{cli: cli, opts: o, log: log, recheck: defaultRecheck, follow: knockFollow, probe: kit.NewProbe(backend, log, o.observers...),
		id: newID(), watches: make(map[string]*lockWatch), orphans: make(map[string]clientv3.LeaseID)}
	p.bells.waits = make(map[string]*contender)
	p.bells.behind = make(map[string]*knocks)
	// Trust a lease until TTL/10 before the server could expire it: room
	// for clock drift and for the keep-alive's own round trip.
	margin := o.ttl / 10
	var err error
	p.keeper, err = kit.NewKeeper(kit.KeeperConfig{TTL: o.ttl, Margin: margin, Renew: p.renew})
	if err != nil {
		return nil, err
	}
	p.window = o.ttl - margin
	p.freshFor = p.window - o.ttl/3
	p.ctx, p.stop = context.WithCancel(context.Background())
	return p, nil
}

// Close marks every handle still held lost (core.ErrLockLost), ends the
// waits of its Acquire calls (ErrClosed), revokes the Provider's lease, so
// that its keys are deleted and its locks freed at once, and waits for its
// goroutines. It does not close the client. Calls after the first return
// nil.
func (p *Provider) Close() error {
	p.wmu.Lock()
	if p.closed {
		p.wmu.Unlock()
		return nil
	}
	p.closed = true
	p.isClosed.Store(true)
	p.wmu.Unlock()
	p.keeper.Close()
	p.revoke()
	p.stop()
	p.wg.Wait()
	if p.owned != nil {
		return p.owned.Close()
	}
	return nil
}

// TTL returns the lease TTL.
func (p *Provider) TTL() time.Duration { return p.opts.ttl }

// Identity returns the holder identity this Provider writes.
func (p *Provider) Identity() string { return p.opts.identity }

// Holder reports who holds the mutex name now: the holder's identity (see
// WithIdentity) and the fencing token of its grant, or "", 0 and nil when
// the mutex is free. It is Mutex(name).(core.Inspector).Holder in one call.
// One round trip.
func (p *Provider) Holder(ctx context.Context, name string) (id string, token uint64, err error) {
	if err := kit.ValidateName(name); err != nil {
		return "", 0, kit.Wrap(backend, "holder", name, err)
	}
	h, held, err := p.queue(name, mutexKind, 1).holder(ctx)
	if err != nil || !held {
		return "", 0, err
	}
	return h.ID, h.Token, nil
}

// Kinds of lock, each with keys of its own: a mutex, a reader-writer lock
// and a semaphore of the same name are distinct locks.
const (
	mutexKind     = "m/"
	rwKind        = "rw/"
	semaphoreKind = "s/"
	membersKind   = "members/"
	valuesKind    = "member-values/"
	voidKind      = "void/" // void marks of orphaned keys (orphans.go)
)

// queue returns the lock name of kind: its contenders' keys live under
// "<prefix><kind><kit.SafeName(name)>/". SafeName's output ([A-Za-z0-9_-])
// never holds a '/', so no lock's keys fall under another's prefix.
func (p *Provider) queue(name, kind string, max int) *queue {
	return &queue{p: p, name: name, prefix: p.opts.prefix + kind + kit.SafeName(name) + "/", max: max}
}

// key returns the name of a new key of role r in q, unique to this
// Provider: a spare one (names.go), else "<queue prefix><role><Provider
// id>.<sequence in hex>".
func (p *Provider) key(q *queue, r role) string {
	if name, ok := p.spare.get(q.prefix + string(r)); ok {
		return name
	}
	return fmt.Sprintf("%s%c%s.%x", q.prefix, r, p.id, p.seq.Add(1))
}
