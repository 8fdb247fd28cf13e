package polllease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/distlock/distlock/core"
	"github.com/distlock/distlock/core/kit"
)

// Defaults of Config, in one place. With them and a Provider whose lease
// TTL is RecommendedLeaseTTL, a crashed instance's targets are polled again
// within max(lease TTL, HeartbeatTTL) + 1.2 × ReconcileInterval = 15 s + 6 s
// = 21 s, plus an acquire's round trip (see the package documentation,
// "Failover").
const (
	DefaultGroup             = "poll"
	DefaultHeartbeatTTL      = 15 * time.Second
	DefaultHeartbeatInterval = 5 * time.Second
	DefaultReconcileInterval = 5 * time.Second
	DefaultMinHold           = 30 * time.Second
	DefaultPollInterval      = 10 * time.Second
	DefaultMaxParallel       = 16
	DefaultTargetKey         = "target"

	// RecommendedLeaseTTL is the lease TTL to give the Provider (for
	// example redislock.WithTTL), renewed every 5 s (a third of it, the
	// backends' default), for the failover bound above. A longer TTL
	// lengthens the failover by as much.
	RecommendedLeaseTTL = 15 * time.Second
)

// Config configures a Coordinator. Provider, Membership, Targets and Poll
// are required; everything else has a default.
//
// The lease TTL and renewal cadence are the Provider's (for example
// redislock's TTL option): the Coordinator never renews leases itself, it
// watches each lease's handle context, which the backend ends when the lease
// is lost or its trust window closes. Give the Provider a lease TTL of
// RecommendedLeaseTTL (15 s, renewed every 5 s) for the defaults below to
// meet their failover bound.
type Config struct {
	// Provider makes the per-target leases: one Mutex per target, named
	// Group + ":lease:" + target.
	Provider core.Provider
	// Membership keeps this instance's heartbeat and lists the live ones.
	Membership core.Membership

	// Group names the fleet: instances with the same Group on the same
	// store share the targets. It is the membership group and the prefix
	// of every lease name. Default "poll".
	Group string
	// InstanceID identifies this instance; it must be unique in the group.
	// Default "hostname-boottime-random" (see DefaultInstanceID).
	InstanceID string

	// HeartbeatTTL is how long the store lists this instance after its last
	// heartbeat. Default 15 s.
	HeartbeatTTL time.Duration
	// HeartbeatInterval is the heartbeat cadence: every reconcile tick
	// heartbeats, and the heartbeat loop beats when none was attempted for
	// this long (up to a quarter of it longer while a tick that will beat
	// is due). It must be shorter than HeartbeatTTL − HeartbeatTTL/10.
	// Default 5 s.
	HeartbeatInterval time.Duration
	// ReconcileInterval is the mean period of the reconcile tick, which
	// heartbeats and lists the live members (one call), re-reads the
	// targets, acquires, and releases; each tick is jittered by ±20 %.
	// Default 5 s.
	ReconcileInterval time.Duration
	// MinHold is how long a lease is kept before it may be released to
	// rebalance, so that assignment changes do not make leases flap.
	// Default 30 s.
	MinHold time.Duration
	// LoadFactor bounds the load: no instance is assigned more than
	// Capacity's ⌊LoadFactor × targets / instances⌋ targets (at least the
	// even share rounded up), nor fewer than Floor's
	// ⌈(2 − LoadFactor) × targets / instances⌉ (at most the even share).
	// Default 1.2; must be ≥ 1.
	LoadFactor float64
	// MaxParallel bounds the acquire attempts in flight at once during a
	// tick. Default 16.
	MaxParallel int

	// Targets returns the current set of targets; it is called once per
	// reconcile tick. An error skips the tick's assignment (owned targets
	// keep polling). Targets must be non-empty valid UTF-8 strings;
	// others are logged and ignored.
	Targets func(ctx context.Context) ([]string, error)
	// Poll polls one target once. ctx ends when the lease is lost,
	// released or uncertain, or the Coordinator stops: Poll must return
	// promptly then, and should pass token to whatever it writes so a
	// stale poller can be refused. An error is logged; polling goes on.
	Poll func(ctx context.Context, target string, token uint64) error
	// PollInterval returns the period between the starts of two polls of
	// target (4–120 s, say). Default: 10 s for every target.
	PollInterval func(target string) time.Duration

	// Logger receives the log lines; the package documentation ("Logs")
	// lists them and their attributes. Default: slog.Default().
	Logger *slog.Logger
	// TargetKey is the name of the attribute that carries the target in
	// every log line. Default "target"; "endpoint" gives the lines the
	// poll-lease plan's operators grep for.
	TargetKey string
	// RoutineLevel is the level of the lines logged for every renewal of a
	// lease and every poll start: one line per lease per renew interval
	// and per poll, thousands a minute on a large fleet. Default
	// slog.LevelDebug; slog.LevelInfo logs them with the acquisitions and
	// releases. A *slog.LevelVar changes it while the Coordinator runs.
	RoutineLevel slog.Leveler
	// OnEvent, when set, is called for every Event, synchronously and in
	// order from the Coordinator's goroutines: it must not block, and must
	// not call the Coordinator's methods that take a context.
	OnEvent func(Event)
}

// DefaultInstanceID returns "hostname-boottime-random": the host name, the
// Unix time the process started (here: now) and 6 random hex digits.
func DefaultInstanceID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, time.Now().Unix(), hex.EncodeToString(b[:]))
}

// withDefaults returns cfg with its defaults filled in, or an error matching
// core.ErrInvalidArgument naming the first broken invariant.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Group == "" {
		cfg.Group = DefaultGroup
	}
	if cfg.InstanceID == "" {
		cfg.InstanceID = DefaultInstanceID()
	}
	if cfg.HeartbeatTTL == 0 {
		cfg.HeartbeatTTL = DefaultHeartbeatTTL
	}
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if cfg.ReconcileInterval == 0 {
		cfg.ReconcileInterval = DefaultReconcileInterval
	}
	if cfg.MinHold == 0 {
		cfg.MinHold = DefaultMinHold
	}
	if cfg.LoadFactor == 0 {
		cfg.LoadFactor = DefaultLoadFactor
	}
	if cfg.MaxParallel == 0 {
		cfg.MaxParallel = DefaultMaxParallel
	}
	if cfg.PollInterval == nil {
		cfg.PollInterval = func(string) time.Duration { return DefaultPollInterval }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.TargetKey == "" {
		cfg.TargetKey = DefaultTargetKey
	}
	if cfg.RoutineLevel == nil {
		cfg.RoutineLevel = slog.LevelDebug
	}
	switch {
	case cfg.Provider == nil:
		return cfg, kit.Invalid("polllease: Provider is nil")
	case cfg.Membership == nil:
		return cfg, kit.Invalid("polllease: Membership is nil")
	case cfg.Targets == nil:
		return cfg, kit.Invalid("polllease: Targets is nil")
	case cfg.Poll == nil:
		return cfg, kit.Invalid("polllease: Poll is nil")
	case kit.ValidateName(cfg.Group) != nil:
		return cfg, kit.Invalid("polllease: Group %q is not valid UTF-8", cfg.Group)
	case kit.ValidateName(cfg.InstanceID) != nil:
		return cfg, kit.Invalid("polllease: InstanceID %q is not valid UTF-8", cfg.InstanceID)
	case cfg.HeartbeatTTL < 0:
		return cfg, kit.Invalid("polllease: negative HeartbeatTTL %v", cfg.HeartbeatTTL)
	case cfg.HeartbeatInterval < 0 || cfg.HeartbeatInterval >= cfg.HeartbeatTTL-cfg.heartbeatMargin():
		return cfg, kit.Invalid("polllease: HeartbeatInterval %v must be positive and shorter than HeartbeatTTL − TTL/10 (%v)",
			cfg.HeartbeatInterval, cfg.HeartbeatTTL-cfg.heartbeatMargin())
	case cfg.ReconcileInterval < 0:
		return cfg, kit.Invalid("polllease: negative ReconcileInterval %v", cfg.ReconcileInterval)
	case cfg.MinHold < 0:
		return cfg, kit.Invalid("polllease: negative MinHold %v", cfg.MinHold)
	case cfg.LoadFactor < 1:
		return cfg, kit.Invalid("polllease: LoadFactor %v must be ≥ 1", cfg.LoadFactor)
	case cfg.MaxParallel < 0:
		return cfg, kit.Invalid("polllease: negative MaxParallel %d", cfg.MaxParallel)
	}
	return cfg, nil
}

// heartbeatMargin is subtracted from the heartbeat TTL for clock drift and
// the latency of the heartbeat itself.
func (cfg Config) heartbeatMargin() time.Duration { return cfg.HeartbeatTTL / 10 }

// LeaseName returns the name of target's lease: Group + ":lease:" + target.
// With the defaults, target "a" is the lock "poll:lease:a".
func (cfg Config) LeaseName(target string) string {
	group := cfg.Group
	if group == "" {
		group = DefaultGroup
	}
	return group + ":lease:" + target
}
