package election

import (
	"errors"
	"fmt"
	"time"
)

// EventKind says what an Event reports.
type EventKind int

const (
	// Promoted: this candidate won a term and OnPromote is being called.
	Promoted EventKind = iota + 1
	// Demoted: this candidate's term ended, OnPromote returned and
	// OnDemote was called; the lock is released right after. Err says why
	// the term ended.
	Demoted
	// CampaignFailed: a campaign ended with an error rather than with the
	// lock found held (the store unreachable, the health check failing).
	// Err is the error; the candidate retries after RetryBackoff.
	CampaignFailed
	// LeaderChanged: a new leader was seen; Leader names it.
	LeaderChanged
	// ReleaseFailed: the lock could not be given up at the end of term
	// Term; Err says why. The backend frees it when its lease expires or
	// its connection closes.
	ReleaseFailed
)

func (k EventKind) String() string {
	switch k {
	case Promoted:
		return "promoted"
	case Demoted:
		return "demoted"
	case CampaignFailed:
		return "campaign-failed"
	case LeaderChanged:
		return "leader-changed"
	case ReleaseFailed:
		return "release-failed"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is one change in a candidate's view of the election. A candidate's
// events are delivered in order; every Promoted is followed by exactly one
// Demoted with the same Term before the next Promoted.
type Event struct {
	Kind EventKind
	// Election is the name of the election (the Locker's name).
	Election string
	// ID is this candidate's ID.
	ID string
	// Term is the term won or ended (Promoted, Demoted), else 0.
	Term uint64
	// Leader is the leader's ID (LeaderChanged, Promoted).
	Leader string
	// Err is why the term ended (Demoted: it matches ErrResigned,
	// ErrUnhealthy or core.ErrLockLost, or is the cause of Run's context)
	// or the failure (CampaignFailed, ReleaseFailed).
	Err error
	// Time is when the change happened.
	Time time.Time
}

// Sentinel causes of a term's end, seen in Event.Err and as the cause of the
// context OnPromote runs under.
var (
	ErrResigned  = errors.New("election: resigned")
	ErrUnhealthy = errors.New("election: health check failed")
	// ErrNoLeader is returned by Leader when nobody leads.
	ErrNoLeader = errors.New("election: no leader")
)

// Metrics receives the numbers worth graphing: wire it to Prometheus,
// OpenTelemetry or expvar. election is an argument so one implementation
// can serve many elections (a RoleManager's roles, say). Calls come one at
// a time while Run runs and must not block for long.
type Metrics interface {
	// SetLeader is a gauge: true while this candidate leads election.
	SetLeader(election string, leader bool)
	// Transition counts Promoted and Demoted events; term is the term
	// begun or ended (the lock's fencing token).
	Transition(election string, kind EventKind, term uint64)
	// CampaignFailed counts campaigns that ended with an error.
	CampaignFailed(election string, err error)
}
