package natslock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

const backend = "nats"

// Defaults, one place; each is documented beside its option.
const (
	defaultBucket       = "distlock"
	defaultTTL          = 30 * time.Second
	defaultMemberMaxTTL = 5 * time.Minute
	defaultTimeout      = 5 * time.Second
	reconnectPoll       = 10 * time.Millisecond
	watchLinger         = time.Second
)

// Option configures New.
type Option func(*config)

type config struct {
	bucket        string
	membersBucket string
	ttl           time.Duration
	interval      time.Duration // 0: TTL/3
	memberMaxTTL  time.Duration
	identity      string
	backoff       kit.Backoff
	timeout       time.Duration
	handoff       kit.HandoffLimits
	log           *slog.Logger
	observers     []core.Observer
}

// WithBucket names the KV bucket that holds the locks. Default "distlock".
// Every process that shares locks must use the same bucket and the same TTL.
func WithBucket(name string) Option { return func(c *config) { c.bucket = name } }

// WithTTL sets the lease TTL, which is the bucket's TTL (max age): a holder
// that stops renewing loses the lock, and its key disappears, that long
// after its last renewal. Renewal runs every TTL/3 (WithRenewInterval); a
// handle is trusted until the start of its last successful renewal + TTL −
// TTL/10. Default 30 s.
func WithTTL(ttl time.Duration) Option { return func(c *config) { c.ttl = ttl } }

// WithRenewInterval sets the renewal cadence of held leases. Default TTL/3;
// must be positive and shorter than the trust window, TTL − TTL/10. A
// shorter interval leaves more renewals to fail before a lease is lost.
func WithRenewInterval(d time.Duration) Option { return func(c *config) { c.interval = d } }

// WithIdentity sets the holder identity stored in every lock value and
// reported by core.Inspector (a Mutex's Holder) and Provider.Holder. Default
// kit.DefaultIdentity(), "hostname-pid".
func WithIdentity(id string) Option { return func(c *config) { c.identity = id } }

// WithMembersBucket names the KV bucket used by the Membership methods.
// Default: the lock bucket's name + "_members".
func WithMembersBucket(name string) Option { return func(c *config) { c.membersBucket = name } }

// WithMemberMaxTTL sets the members bucket's TTL (max age), the longest ttl
// Register accepts. Default 5 min.
func WithMemberMaxTTL(ttl time.Duration) Option { return func(c *config) { c.memberMaxTTL = ttl } }

// WithBackoff sets the fallback retry cadence of a waiting Acquire. Waiters
// normally wake on a message of the mutex's line or on the key's delete;
// the backoff bounds what a missed signal or a silent expiry can cost (a
// mutex waiter's polls start at 250 ms at least, but at 20 ms at most
// behind a holder of an older natslock, which has no line). Default
// kit.DefaultBackoff.
func WithBackoff(b kit.Backoff) Option { return func(c *config) { c.backoff = b } }

// WithLogger sets where the Provider reports what happens to its locks
// (OBSERVABILITY.md lists the lines): at Warn, a KV watcher that could not
// start, while its waiters fall back to polling, a lock lost, a renewal or
// a release that failed; at Debug, each acquire and release. Default (and
// nil): discard, which costs nothing.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithObserver adds obs to the observers of the Provider's locks: every
// acquire (its outcome and how long it took), release, loss (with its
// cause) and lease renewal is reported to it (core.Observer). Given more
// than once, every observer sees every event, in the order given. Default:
// none, which costs nothing.
func WithObserver(obs core.Observer) Option {
	return func(c *config) { c.observers = append(c.observers, obs) }
}

// WithTimeout bounds each operation's requests (an acquire attempt, a
// release, a read), so a server that stops answering gives an error instead
// of a wait as long as the caller's context. Default 5 s.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithLocalHandoff bounds runs of local handoffs of a mutex or a semaphore
// slot: at most max in a row, and none once a run has lasted span (default
// kit.DefaultHandoffMax, 8, and kit.DefaultHandoffSpan, 20 ms; max 0 turns
// handoffs off). When a holder releases while an Acquire of the same
// Provider waits, the release passes the key to the waiter with one write
// that lands only while the key is still ours, where a delete and a new
// acquire cost two and a wake-up. The run is bounded so that waiters in
// other processes get their turn: the release that ends it hands a mutex
// to the first waiter of its line, or deletes the key. New
// returns an error matching core.ErrInvalidArgument for a negative max or,
// with max > 0, a span that is not positive.
func WithLocalHandoff(max int, span time.Duration) Option {
	return func(c *config) { c.handoff = kit.HandoffLimits{Max: max, Span: span} }
}

// Provider makes locks in one JetStream KV bucket, and implements
// core.Membership and core.Announcer in a second one. It is safe for
// concurrent use. Close stops its lease keeper and watchers.
type Provider struct {
	cfg    config
	js     jetstream.JetStream
	kv     jetstream.KeyValue
	stream jetstream.Stream
	prefix string // subject prefix of the bucket's keys, "$KV.<bucket>."

	keeper  *kit.Keeper
	notify  kit.Notifier
	hints   hints
	spare   spareKeys
	gates   kit.Gates
	handoff kit.Handoffs[*lease, *handle] // local lines and holders (handoff.go)
	line    line                          // wait lines of mutexes across processes (line.go)
	probe   *kit.Probe

	wmu      sync.Mutex
	watches  map[string]*watch
	closed   bool // under wmu; also in isClosed for the lock-free check
	isClosed atomic.Bool
	wg       sync.WaitGroup

	mmu      sync.Mutex
	memberKV jetstream.KeyValue // created on first use

	owned func() // closes the connection Open made; nil after New
}

var (
	_ core.Provider   = (*Provider)(nil)
	_ core.Membership = (*Provider)(nil)
	_ core.Announcer  = (*Provider)(nil)
)

// New returns a Provider over the KV bucket named by WithBucket, creating
// the bucket (file storage, history 1, TTL = lease TTL) if it is missing. An
// existing bucket must have the same TTL, or New fails with an error matching
// core.ErrInvalidArgument: the TTL is what every holder's trust window is
// computed from. New makes two or three JetStream API requests, each bounded
// by the client's default API timeout.
//
// The bucket's KV revisions are the fencing tokens, so they stay increasing
// only as long as the bucket is not deleted and re-created.
func New(js jetstream.JetStream, opts ...Option) (*Provider, error) {
	cfg := config{
		bucket:       defaultBucket,
		ttl:          defaultTTL,
		memberMaxTTL: defaultMemberMaxTTL,
		identity:     kit.DefaultIdentity(),
		backoff:      kit.DefaultBackoff,
		timeout:      defaultTimeout,
		handoff:      kit.DefaultHandoffLimits(),
	}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.membersBucket == "" {
		cfg.membersBucket = cfg.bucket + "_members"
	}
	if cfg.log == nil {
		cfg.log = slog.New(slog.DiscardHandler)
	}
	if js == nil {
		return nil, kit.Invalid("natslock: nil JetStream")
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}

	ctx := context.Background() // the client bounds each request by its default timeout
	kv, err := openBucket(ctx, js, cfg.bucket, cfg.ttl)
	if err != nil {
		return nil, err
	}
	stream, err := js.Stream(ctx, "KV_"+cfg.bucket)
	if err != nil {
		return nil, fmt.Errorf("natslock: bucket %q: %w", cfg.bucket, err)
	}
	p := &Provider{
		cfg:     cfg,
		js:      js,
		kv:      kv,
		stream:  stream,
		prefix:  "$KV." + cfg.bucket + ".",
		watches: make(map[string]*watch),
		probe:   kit.NewProbe(backend, cfg.log, cfg.observers...),
	}
	// Trust a lease until TTL/10 before the server could expire it: room
	// for clock drift and for the renewal's own round trip.
	p.keeper, err = kit.NewKeeper(kit.KeeperConfig{TTL: cfg.ttl, Interval: cfg.interval, Margin: cfg.ttl / 10, Renew: p.renew})
	if err != nil {
		return nil, err
	}
	if err := p.line.start(p); err != nil {
		p.keeper.Close()
		return nil, fmt.Errorf("natslock: inbox: %w", err)
	}
	p.handoff.Limits = cfg.handoff
	p.handoff.Wake = p.notify.Notify
	p.notify.OnFirst = p.startWatch
	p.notify.OnLast = p.idleWatch
	return p, nil
}

// check validates the settings New was given.
func (c *config) check() error {
	switch {
	case c.ttl < 100*time.Millisecond:
		return kit.Invalid("natslock: TTL %v is shorter than 100ms", c.ttl)
	case c.interval < 0:
		return kit.Invalid("natslock: renew interval %v is negative", c.interval)
	case c.interval >= c.ttl-c.ttl/10:
		return kit.Invalid("natslock: renew interval %v is not shorter than the trust window %v (TTL − TTL/10)", c.interval, c.ttl-c.ttl/10)
	case c.memberMaxTTL < time.Second:
		return kit.Invalid("natslock: member max TTL %v is shorter than 1s", c.memberMaxTTL)
	case !validBucket(c.bucket):
		return kit.Invalid("natslock: bad bucket name %q", c.bucket)
	case !validBucket(c.membersBucket):
		return kit.Invalid("natslock: bad members bucket name %q", c.membersBucket)
	case c.identity == "":
		return kit.Invalid("natslock: empty identity")
	case c.timeout <= 0:
		return kit.Invalid("natslock: timeout %v is not positive", c.timeout)
	}
	return c.handoff.Validate("natslock")
}

// openBucket opens the bucket, creating it when missing, and checks its TTL.
func openBucket(ctx context.Context, js jetstream.JetStream, bucket string, ttl time.Duration) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      bucket,
			Description: "distlock locks",
			History:     1,
			TTL:         ttl,
			Storage:     jetstream.FileStorage,
		})
		if errors.Is(err, jetstream.ErrBucketExists) { // lost a creation race
			kv, err = js.KeyValue(ctx, bucket)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("natslock: bucket %q: %w", bucket, err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("natslock: bucket %q: %w", bucket, err)
	}
	if st.TTL() != ttl {
		return nil, kit.Invalid("natslock: bucket %q has TTL %v, want %v", bucket, st.TTL(), ttl)
	}
	return kv, nil
}

// ErrClosed is returned by the acquire calls of a closed Provider.
var ErrClosed = errors.New("natslock: provider closed")

// Close stops renewing: every handle still held is marked lost (its key
// expires after the TTL unless released first). It stops the watchers and
// waits for the Provider's goroutines. It closes the NATS connection only
// when Open made it: otherwise the connection belongs to the caller.
func (p *Provider) Close() error {
	p.wmu.Lock()
	p.closed = true
	p.isClosed.Store(true)
	ws := p.watches
	p.watches = make(map[string]*watch)
	p.wmu.Unlock()
	for _, w := range ws {
		w.stop()
	}
	p.line.stop()
	p.keeper.Close()
	p.wg.Wait()
	if p.owned != nil {
		p.owned()
	}
	return nil
}

// TTL returns the lease TTL.
func (p *Provider) TTL() time.Duration { return p.cfg.ttl }

// Identity returns the holder identity this Provider writes.
func (p *Provider) Identity() string { return p.cfg.identity }

// Holder reports who holds the mutex name now: the holder's identity (see
// WithIdentity) and the fencing token of its grant, or "", 0 and nil when
// the mutex is free. It is Mutex(name).(core.Inspector).Holder in one call.
// One round trip.
func (p *Provider) Holder(ctx context.Context, name string) (id string, token uint64, err error) {
	if err := kit.ValidateName(name); err != nil {
		return "", 0, kit.Wrap(backend, "holder", name, err)
	}
	m := &mutex{p: p, name: name, key: mutexKey(name)}
	h, held, err := m.Holder(ctx)
	if err != nil || !held {
		return "", 0, err
	}
	return h.ID, h.Token, nil
}

// value is what a held key stores. Token is 0 in the value written by the
// acquire (the token is that entry's revision, unknown until it is written)
// and the grant's revision in the values written by renewals.
type value struct {
	ID    string `json:"id"`
	Owner string `json:"owner"` // random per grant: tells our entry from another's
	Token uint64 `json:"token,omitempty"`
	// Inbox, in a mutex's value, is the holder's Provider inbox, where
	// waiters join its line (line.go).
	Inbox string `json:"inbox,omitempty"`
}

func (v value) token(rev uint64) uint64 {
	if v.Token != 0 {
		return v.Token
	}
	return rev
}

func decodeValue(b []byte) (value, error) {
	var v value
	if err := json.Unmarshal(b, &v); err != nil {
		return value{}, fmt.Errorf("natslock: foreign value in lock key: %w", err)
	}
	return v, nil
}

func (v value) encode() []byte {
	b, _ := json.Marshal(v) // cannot fail: strings and an integer
	return b
}

func newOwner() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// Key layout: one prefix per kind ("m.", "s.", "rw."), so a mutex, a
// semaphore and a reader-writer lock of the same name never collide.
// kit.SafeName output ([A-Za-z0-9_-]) is valid KV key material and keeps
// names case-sensitive.
func mutexKey(name string) string { return "m." + kit.SafeName(name) }

func isMutexKey(key string) bool { return strings.HasPrefix(key, "m.") }

func semaphoreKeys(name string) string { return "s." + kit.SafeName(name) }

func slotKey(prefix string, i int) string { return prefix + "." + strconv.Itoa(i) }

func validBucket(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// The KV operation header the client library writes on delete markers.
const (
	kvOpHeader = "KV-Operation"
	kvOpDel    = "DEL"
	kvOpPurge  = "PURGE"
)

func isMarker(m *jetstream.RawStreamMsg) bool {
	switch m.Header.Get(kvOpHeader) {
	case kvOpDel, kvOpPurge:
		return true
	}
	return false
}

// isWrongSeq reports whether err is JetStream's "wrong last sequence": the
// key's latest revision is not the one the write expected.
func isWrongSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// connected waits, within ctx, for the client to be connected. A request
// made while the client reconnects would sit in its reconnect buffer and
// could land after the caller gave up (a lock taken by nobody), so requests
// go out only on a live connection; a server that stays away gives the
// client's error once ctx (bounded by WithTimeout) ends.
func (p *Provider) connected(ctx context.Context) error {
	nc := p.js.Conn()
	var tick *time.Ticker
	for {
		switch nc.Status() {
		case nats.CONNECTED:
			return nil
		case nats.CLOSED:
			return nats.ErrConnectionClosed
		}
		if tick == nil {
			// The client offers no safe way to stop listening for status
			// changes, so poll its local state.
			tick = time.NewTicker(reconnectPoll)
			defer tick.Stop()
		}
		select {
		case <-ctx.Done():
			if nc.Status() == nats.RECONNECTING {
				return nats.ErrConnectionReconnecting
			}
			return nats.ErrDisconnected
		case <-tick.C:
		}
	}
}

// last returns the latest entry of key, delete markers included, or nil when
// the key has none (never written, or expired). One round trip.
func (p *Provider) last(ctx context.Context, key string) (*jetstream.RawStreamMsg, error) {
	if err := p.connected(ctx); err != nil {
		return nil, err
	}
	m, err := p.stream.GetLastMsgForSubject(ctx, p.prefix+key)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	return m, err
}

// write stores val under key if the key's latest revision is expect (0: the
// key has no entry) and returns the new revision. One round trip.
func (p *Provider) write(ctx context.Context, key string, val []byte, expect uint64) (uint64, error) {
	if err := p.connected(ctx); err != nil {
		return 0, err
	}
	m := &nats.Msg{Subject: p.prefix + key, Data: val, Header: nats.Header{}}
	ack, err := p.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(expect))
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// del writes a delete marker on key if its latest revision is expect and
// returns the marker's revision. One round trip.
func (p *Provider) del(ctx context.Context, key string, expect uint64) (uint64, error) {
	if err := p.connected(ctx); err != nil {
		return 0, err
	}
	m := nats.NewMsg(p.prefix + key)
	m.Header.Set(kvOpHeader, kvOpDel)
	ack, err := p.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(expect))
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}
