package kit

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock/core"
)

// SessionConfig is the configuration that backends on Sessions share, set
// by their options of the same names (WithFenceTable, WithKeepalive, ...).
type SessionConfig struct {
	// FenceTable names the fence table, or the fence sequence when FenceSeq.
	FenceTable string
	FenceSeq   bool
	// MembersTable names the Membership table.
	MembersTable string
	// Keepalive is how often a session that holds locks is pinged.
	Keepalive time.Duration
	// MaxConns bounds the sessions a Provider pins.
	MaxConns int
	// Timeout bounds one statement on a shared session.
	Timeout time.Duration
	// Identity is recorded with grants and reported by Holder.
	Identity string
	// Handoff bounds runs of local handoffs.
	Handoff HandoffLimits
	// Log receives the backend's lines; nil discards them.
	Log *slog.Logger
	// Observers receive the lock events.
	Observers []core.Observer
}

// The defaults of DefaultSessionConfig.
const (
	DefaultSessionKeepalive = 2 * time.Second
	DefaultSessionMaxConns  = 16
	DefaultSessionTimeout   = 10 * time.Second
)

// DefaultSessionConfig returns the defaults: tokens from the sequence
// fenceSequence, Membership in membersTable, DefaultSessionKeepalive,
// DefaultSessionMaxConns, DefaultSessionTimeout, DefaultIdentity and
// DefaultHandoffLimits.
func DefaultSessionConfig(fenceSequence, membersTable string) SessionConfig {
	return SessionConfig{
		FenceTable:   fenceSequence,
		FenceSeq:     true,
		MembersTable: membersTable,
		Keepalive:    DefaultSessionKeepalive,
		MaxConns:     DefaultSessionMaxConns,
		Timeout:      DefaultSessionTimeout,
		Identity:     DefaultIdentity(),
		Handoff:      DefaultHandoffLimits(),
	}
}

// SessionRules are a backend's own rules for a SessionConfig.
type SessionRules struct {
	// Ident checks a table or sequence name.
	Ident func(name string) error
	// MaxIdentity bounds Identity, in bytes.
	MaxIdentity int
	// Check, when set, checks what else the backend needs, after the
	// names.
	Check func(c *SessionConfig) error
}

// Configure applies opts to c in order and returns the result, or the
// first broken invariant (Validate); a nil option is an error too. Both
// match core.ErrInvalidArgument and name backend. A nil Log becomes one
// that discards.
func Configure[O ~func(*SessionConfig)](backend string, c SessionConfig, opts []O, rules SessionRules) (SessionConfig, error) {
	for _, opt := range opts {
		if opt == nil {
			return c, Invalid("%s: nil option", backend)
		}
		opt(&c)
	}
	if err := c.Validate(backend, rules); err != nil {
		return c, err
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Validate returns the first broken invariant of c, matching
// core.ErrInvalidArgument and naming backend.
func (c *SessionConfig) Validate(backend string, rules SessionRules) error {
	for _, name := range []string{c.FenceTable, c.MembersTable} {
		if err := rules.Ident(name); err != nil {
			return err
		}
	}
	if rules.Check != nil {
		if err := rules.Check(c); err != nil {
			return err
		}
	}
	switch {
	case c.Keepalive <= 0:
		return Invalid("%s: keepalive %v must be positive", backend, c.Keepalive)
	case c.MaxConns < 2:
		return Invalid("%s: max conns %d must be at least 2", backend, c.MaxConns)
	case c.Timeout <= 0:
		return Invalid("%s: timeout %v must be positive", backend, c.Timeout)
	case ValidateName(c.Identity) != nil || len(c.Identity) > rules.MaxIdentity:
		return Invalid("%s: identity must be non-empty UTF-8 of at most %d bytes", backend, rules.MaxIdentity)
	}
	return c.Handoff.Validate(backend)
}

// ParseSessionURL is ParseURL for a backend on Sessions: it also reads the
// parameters that set a SessionConfig (identity, keepalive, max_conns,
// timeout, handoff_max and handoff_span, fence_table, fence_sequence,
// members_table) and returns their settings, for the backend's Open to
// apply before its caller's options.
func ParseSessionURL[O ~func(*SessionConfig)](rawURL string) (*URL, []O, error) {
	u, err := ParseURL(rawURL)
	if err != nil {
		return nil, nil, err
	}
	var sets []O
	add := func(f func(*SessionConfig)) { sets = append(sets, f) }
	u.Text("identity", func(id string) { add(func(c *SessionConfig) { c.Identity = id }) })
	u.Duration("keepalive", func(d time.Duration) { add(func(c *SessionConfig) { c.Keepalive = d }) })
	u.Int("max_conns", func(n int) { add(func(c *SessionConfig) { c.MaxConns = n }) })
	u.Duration("timeout", func(d time.Duration) { add(func(c *SessionConfig) { c.Timeout = d }) })
	u.Handoff(func(l HandoffLimits) { add(func(c *SessionConfig) { c.Handoff = l }) })
	u.Text("fence_table", func(n string) { add(func(c *SessionConfig) { c.FenceTable, c.FenceSeq = n, false }) })
	u.Text("fence_sequence", func(n string) { add(func(c *SessionConfig) { c.FenceTable, c.FenceSeq = n, true }) })
	u.Text("members_table", func(n string) { add(func(c *SessionConfig) { c.MembersTable = n }) })
	return u, sets, nil
}

// Setup is a schema step a Provider runs once (creating its tables, say):
// again after a failure, never after a success. Concurrent callers wait
// for the one running it. The zero Setup is ready to use.
type Setup struct {
	mu   sync.Mutex
	done atomic.Bool // f succeeded: read without mu on every call after
}

// Run runs f, bounded by timeout whatever ctx's own deadline, unless it
// already succeeded. Once it has, Run costs one atomic load: callers run
// it before every grant.
func (s *Setup) Run(ctx context.Context, timeout time.Duration, f func(ctx context.Context) error) error {
	if s.done.Load() {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	if err := f(ctx); err != nil {
		return err
	}
	s.done.Store(true)
	return nil
}
