// Package election elects one leader among the candidates of a group, over
// any distlock backend: the leader is whoever holds the group's lock, and
// the lock's fencing token is the term number.
//
//	e, err := election.New(provider.Mutex("billing-leader"), election.Config{
//		OnPromote: func(ctx context.Context, term uint64) {
//			runBilling(ctx, term) // returns when ctx is done
//		},
//	})
//	...
//	err = e.Run(ctx) // campaigns, leads, campaigns again, until ctx ends
//
// # State machine
//
// A candidate is a follower or a leader. Run loops:
//
//	follower ──(Acquire granted, term = fencing token)──▶ leader
//	   ▲                                                     │
//	   └──(OnPromote returned, OnDemote called, released)────┘
//	       after: lock lost │ Resign │ health check failed │ Run's ctx done
//
// A follower campaigns by waiting in the Locker's Acquire, so it wakes on
// the backend's release signal and takes over a resigned leader's lock in
// about one round trip, and one that died when its lease expires (or, for
// connection-bound backends, when the server sees the connection drop).
// On winning, OnPromote(ctx, term) is called with a context that is done
// when leadership ends. When the term ends, the candidate waits for
// OnPromote to return, calls OnDemote, releases the lock and becomes a
// follower again: OnDemote is called exactly once per term, never without an
// OnPromote, and no two terms of one candidate overlap. Terms strictly
// increase across the whole group, since they are fencing tokens.
//
// Events (Config.OnEvent) report each step in order: Promoted, then exactly
// one Demoted with the same term (reported before the lock is released, so
// no follower is promoted before it); CampaignFailed between terms;
// LeaderChanged whenever a new leader is seen, this candidate included;
// ReleaseFailed when the lock could not be given up. Config.Metrics
// receives the same as a gauge and counters. Every wait (backoff, delays,
// cadences) runs on Config.Clock, so tests can drive an Election without
// sleeping.
//
// # The trust window
//
// A leader trusts its leadership for as long as its lock handle's context
// is alive and the lease behind it is inside its trust window, and
// OnPromote's context ends with either. On lease backends (redislock,
// redlock, natslock) the handle's lease is renewed every TTL/3 and is
// trusted until
//
//	start of the last successful renewal + TTL − margin
//
// which is before the store can let the lease expire and grant it to a
// follower, as long as clocks drift less than the margin (TTL/10 by
// default). So in a store outage the leader stops leading first, and a
// follower can take over only afterwards. IsLeader, Term and the Err and
// Done of OnPromote's context compare that deadline with Config.Clock
// themselves: after a GC pause, a VM freeze or SIGSTOP, the first check
// reads the term over, before the timers that would report the loss have
// fired. On pglock the context ends when the session's connection is seen
// to drop, within the keepalive cadence; on filelock when the lock file is
// deleted or replaced.
//
// # What no lock can promise: fencing
//
// A check and the step that follows it are two moments. Work already past
// its check when the process froze finishes after the process resumes,
// under a term that may have passed to another leader meanwhile; so does
// work that a partition or a slow write delivers late. No lock can stop
// that. Only the resource can refuse it, by checking the term, which is a
// fencing token: strictly greater for every new term. Check the term
// before each step, and give it to the resource with the step:
//
//	OnPromote: func(ctx context.Context, term uint64) {
//		for ctx.Err() == nil { // reads the clock: false once the window closed
//			job := next(ctx)
//			// The store applies the write only if term ≥ the highest term
//			// it has seen, and records it:
//			//   UPDATE jobs SET state = $1, term = $2
//			//   WHERE id = $3 AND term <= $2
//			if err := store.Apply(ctx, job, term); errors.Is(err, store.ErrStaleTerm) {
//				return // a newer leader wrote first: stop
//			}
//		}
//	},
//
// The check before each step keeps a deposed leader from starting new
// work; the term checked by the resource refuses the one step that was
// under way when it was deposed.
//
// # Failures
//
//   - The store is unreachable while campaigning: the campaign fails with the
//     backend's error, reported as a CampaignFailed event, and is retried
//     after RetryBackoff (jittered exponential backoff, so candidates that
//     failed together do not retry together). Run does not return.
//   - The store is unreachable while leading: the lease keeper retries; if
//     the trust window closes first, the term ends with a cause matching
//     core.ErrLockLost and the candidate campaigns again, with backoff until
//     the store answers. A leader that recovers before the window closes
//     stays leader.
//   - The lock is taken from the leader (deleted key, killed connection): the
//     backend reports it lost, and the term ends as above.
//   - The leader process dies: its lock is freed by lease expiry or by the
//     connection closing, and a waiting follower is granted it.
//   - The health check fails: a leader resigns (cause ErrUnhealthy) and a
//     follower does not campaign until the check passes again.
//   - Resign: the term ends with cause ErrResigned, the lock is released at
//     once and the candidate waits ResignDelay before campaigning again, so a
//     follower wins.
//   - Run's context ends: the term ends with that context's cause and the
//     lock is released before Run returns.
//   - The Locker reports a permanent error (an invalid name, an unsupported
//     primitive): Run returns it.
//
// # Priority
//
// A candidate with Priority p > 0 lets the lock sit free for p ×
// PriorityDelay before trying to take it (it asks the holder through
// core.Inspector where the Locker offers it, else it polls with TryAcquire),
// so among waiting candidates the one with the lowest Priority wins. A
// leader is never preempted.
//
// # Roles
//
// A RoleManager runs several elections ("scheduler", "cleanup") from one
// process and merges their events into one ordered stream.
//
// election depends on core only; pick any backend for the Locker.
package election
