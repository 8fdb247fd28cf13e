package election

import (
	"context"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/distlock/distlock/core/kit"
)

// Config configures an Election. The zero value of every optional field
// means its default; New rejects negative durations and other broken
// invariants with one error per field, each matching core.ErrInvalidArgument.
type Config struct {
	// ID names this candidate in events and logs. Default
	// kit.DefaultIdentity() ("hostname-pid"), which is also what backends
	// report through core.Inspector unless their Provider was given another
	// identity: give both the same ID so Leader and OnNewLeader name
	// candidates the way you do.
	ID string

	// OnPromote is called when this candidate wins a term; term is the
	// lock's fencing token, strictly greater than every earlier term of
	// the election. ctx is done as soon as leadership ends: the lock is
	// lost, its trust window closes by the Clock, Resign is called, the
	// health check fails, or Run's context ends. ctx's Err and Done read
	// the Clock themselves, so check ctx.Err() (or IsLeader) before each
	// step of the work: the first check after a freeze sees the term over
	// even before any timer has fired. OnPromote may do the leader's work itself and return when ctx
	// is done, or start work that watches ctx and return at once; in both
	// cases the lock stays held until OnPromote has returned and the term
	// has ended. Required.
	OnPromote func(ctx context.Context, term uint64)

	// OnDemote is called exactly once per term, after the term has ended
	// and OnPromote has returned, before the lock is released. Never
	// without an OnPromote before it. Optional.
	OnDemote func()

	// OnNewLeader is called with the ID of each leader this candidate sees
	// take over, itself included. Followers see other leaders only when
	// the Locker implements core.Inspector; they ask every
	// ObserveInterval. Optional.
	OnNewLeader func(id string)

	// OnEvent receives every leadership change of this candidate, one at
	// a time and in order, while Run runs; it must not block for long, as
	// the election waits for it. Optional.
	OnEvent func(Event)

	// Metrics, when set, is told about leader state, transitions and
	// failed campaigns. Optional.
	Metrics Metrics

	// Logger receives a line per event (OBSERVABILITY.md lists them):
	// a term won or ended and a new leader seen at Info, a failed
	// campaign or release at Warn, with the attributes election, id,
	// term, leader and err. Default (and nil): discard.
	Logger *slog.Logger

	// RetryBackoff spaces out campaigns that failed with an error (the
	// store unreachable, say): the n-th consecutive failure waits a random
	// delay in [d/2, d], d = min(Max, Min·2ⁿ). Default 50 ms growing to 5 s.
	// A campaign that finds the lock held is not a failure: the candidate
	// waits for the release as the Locker's Acquire does.
	RetryBackoff kit.Backoff

	// HealthCheck, when set, is called every HealthInterval. While it
	// fails a leader resigns (the term ends with a cause matching
	// ErrUnhealthy) and a follower does not campaign. Each call gets a
	// context bounded by HealthInterval. Optional.
	HealthCheck func(ctx context.Context) error
	// HealthInterval is the health check cadence. Default 5 s.
	HealthInterval time.Duration

	// Priority ranks candidates: 0, the default, is the most preferred. A
	// candidate with Priority p > 0 waits p × PriorityDelay after seeing
	// the lock free before it tries to take it, so a preferred candidate
	// that is waiting wins the election. Priority never preempts a leader.
	Priority int
	// PriorityDelay is the head start per priority level. Default 1 s.
	PriorityDelay time.Duration

	// ResignDelay is how long a candidate that resigned waits before it
	// campaigns again, so that a follower takes over. Default 1 s.
	ResignDelay time.Duration

	// Clock drives every wait of the election (retry backoff, priority
	// and resign delays, health and observe cadences, campaign rounds),
	// stamps events, and judges whether the term's trust window (the
	// lease deadline a core.LeaseReporter handle reports) has closed. Default the system clock; tests substitute a fake.
	// Calls into the Locker and the health check are bounded in real
	// time, since they wait on real I/O.
	Clock Clock

	// ObserveInterval is how often a follower asks the Locker who leads,
	// for OnNewLeader and LeaderChanged events. Used only when one of
	// OnNewLeader and OnEvent is set and the Locker implements
	// core.Inspector. Default 2 s.
	ObserveInterval time.Duration
}

// Defaults, in one place.
const (
	defaultHealthInterval  = 5 * time.Second
	defaultPriorityDelay   = time.Second
	defaultResignDelay     = time.Second
	defaultObserveInterval = 2 * time.Second
	// releaseTimeout bounds the release at the end of a term when Run's
	// context is already done. A release that fails leaves a lease to
	// expire on its own.
	releaseTimeout = 5 * time.Second
)

var defaultRetryBackoff = kit.Backoff{Min: 50 * time.Millisecond, Max: 5 * time.Second}

// withDefaults validates c and fills in the defaults.
func (c Config) withDefaults() (Config, error) {
	if c.ID == "" {
		c.ID = kit.DefaultIdentity()
	}
	if c.RetryBackoff == (kit.Backoff{}) {
		c.RetryBackoff = defaultRetryBackoff
	}
	if c.HealthInterval == 0 {
		c.HealthInterval = defaultHealthInterval
	}
	if c.PriorityDelay == 0 {
		c.PriorityDelay = defaultPriorityDelay
	}
	if c.ResignDelay == 0 {
		c.ResignDelay = defaultResignDelay
	}
	if c.ObserveInterval == 0 {
		c.ObserveInterval = defaultObserveInterval
	}
	if c.Clock == nil {
		c.Clock = kit.SystemClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case !utf8.ValidString(c.ID):
		return c, kit.Invalid("election: ID %q is not valid UTF-8", c.ID)
	case c.OnPromote == nil:
		return c, kit.Invalid("election: OnPromote is required")
	case c.RetryBackoff.Min <= 0 || c.RetryBackoff.Max < c.RetryBackoff.Min:
		return c, kit.Invalid("election: RetryBackoff needs 0 < Min ≤ Max, got %v, %v", c.RetryBackoff.Min, c.RetryBackoff.Max)
	case c.HealthInterval < 0:
		return c, kit.Invalid("election: negative HealthInterval %v", c.HealthInterval)
	case c.Priority < 0:
		return c, kit.Invalid("election: negative Priority %d (0 is the most preferred)", c.Priority)
	case c.PriorityDelay < 0:
		return c, kit.Invalid("election: negative PriorityDelay %v", c.PriorityDelay)
	case c.ResignDelay < 0:
		return c, kit.Invalid("election: negative ResignDelay %v", c.ResignDelay)
	case c.ObserveInterval < 0:
		return c, kit.Invalid("election: negative ObserveInterval %v", c.ObserveInterval)
	}
	return c, nil
}

// Clock tells the time and waits, so that tests can drive an Election
// without sleeping. It is kit.Clock, so one fake can drive both an Election
// and the kit.Keeper of a test's Locker.
type Clock = kit.Clock
