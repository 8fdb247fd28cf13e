// Package polllease shares the polling of a dynamic set of targets (sessions,
// endpoints, feeds) among the live instances of a service, so that each
// target is polled by exactly one instance at a time, the work is spread
// evenly, and it moves quickly and safely when instances come and go.
//
// It is built only on core interfaces, so it runs over every backend that
// offers a core.Provider (one lease per target) and a core.Membership
// (heartbeats): redislock is the primary deployment, pglock and natslock
// work the same way, and filelock is the zero-setup choice for one host.
//
// # The protocol
//
// Every instance of a Group runs a Coordinator. It has an ID (by default
// "hostname-boottime-random") and three loops:
//
//   - Heartbeat: the instance registers its ID in the Group through
//     core.Membership with HeartbeatTTL (15 s); the store lists it until
//     the TTL runs out. Every reconcile tick heartbeats; the heartbeat
//     loop registers only when no heartbeat was attempted for
//     HeartbeatInterval (5 s; a quarter of it while they fail), which
//     happens at start and when ticks are slower than heartbeats, slow or
//     skipped. When a tick is due within a quarter interval of that
//     moment, the loop waits for the tick's heartbeat rather than beat
//     twice.
//   - Reconcile: every ReconcileInterval (5 s, jittered by ±20 % so
//     instances do not tick together) it heartbeats and lists the live
//     members in one call, re-reads the targets (Config.Targets), and
//     computes the assignment, with the load bounded on both sides: every
//     instance is assigned between 0.8 and 1.2 × targets / instances
//     (±20 % of the mean) once there are at least 5 targets per instance
//     (see Capacity and Floor).
//     Where the Membership is a core.Announcer (every bundled backend), the
//     heartbeat announces the targets this instance holds with their
//     fencing tokens (8 bytes of hash and a varint token each), and the
//     assignment starts from the holders the announcements name
//     (AssignFrom): a target stays with its holder while the holder is
//     live and within the bounds, so a joining instance takes the fewest
//     targets that bound the loads (Floor, or the others' excess over
//     Capacity, whichever is more) and a leaving one moves only its own.
//     Where two announcements name a target, the higher token wins; an
//     instance counts what it holds as its own. Other Memberships list
//     members only (core.Heartbeat), as does an Announcer whose Announce
//     answers core.ErrUnsupported (a members table of an older version
//     that the database user may not alter, say: the instance then says
//     so once and heartbeats without values until it is restarted), and
//     the assignment is then Assign's:
//     rendezvous (highest random weight) hashing of each target over the
//     members, stateless, so a join can move up to 2.2 × targets /
//     instances where there are fewer than 40 targets per instance.
//     The assignment is what is desired; ownership only changes
//     through leases: it tries the leases of the targets assigned to it
//     every tick until it holds them; a target whose assigned instance
//     has not taken it within two ticks is taken by its second choice (the
//     "backup", next in rendezvous order), so no target stays unpolled when
//     instances disagree about who is live or one of them is live but not
//     polling; it releases a target assigned elsewhere only after
//     holding it MinHold (30 s), only after its poller has stopped, and at
//     most max(1, 10 % of what it owns) per tick, so rebalancing converges
//     without flapping. An instance that sees a target it handed over
//     taken by the recipient's backup while it was still assigned to the
//     recipient (or takes it back itself) hands nothing more to the
//     recipient for 2 × MinHold, the hold doubling each time in a row up
//     to 32 × MinHold; and a target no announcement names for two ticks
//     is tried by its backup at once, however its earlier attempts were
//     paced, so a live instance that does not poll costs a few unpolled
//     ticks per hold. It
//     releases at once the targets that left the set; it never takes a
//     lease someone holds.
//   - Poll: each owned target has its own loop that calls Config.Poll every
//     PollInterval(target), under the lease handle's context and with its
//     fencing token. Before each poll it checks, by the clock, that the
//     lease is still owned and not paused (see below); IsOwnedStrict asks
//     the store, for critical polls: the lease's handle where it can
//     confirm its grant (core.Verifier: pglock and mysqllock), otherwise
//     the lock's holder (core.Inspector: filelock, redislock, redlock by a
//     majority, natslock, etcdlock); it fails with core.ErrUnsupported on
//     a backend that can do neither.
//
// A lease is one core.Locker per target, named Group + ":lease:" + target
// ("poll:lease:endpoint-7" by default). Its TTL and renewal belong to the
// Provider (configure RecommendedLeaseTTL, 15 s, renewed every 5 s; see
// "Failover" below): the backend renews all the
// leases of one Provider together, in one round trip per interval on Redis
// (kit.Keeper); on Postgres a lease lives as long as its connection, which
// one keepalive per connection checks, however many leases it holds. The
// heartbeat, announcement and member listing of a tick are one round trip
// on redislock and pglock (one per server on redlock), two on mysqllock,
// natslock and etcdlock.
// So with the defaults an instance's steady-state cost on Redis is 2 round
// trips per 5 s whatever the number of targets, one renewal and one
// heartbeat with listing, plus a backup's rare check of the targets it
// backs up (paced to about one TryAcquire per 48 ticks per instance, 0.02
// per tick at 10 × 1,000). The Coordinator never renews a lease
// itself; it watches each handle's context and, on backends whose handles
// report their lease (core.LeaseReporter), each renewal's outcome.
//
// # Failure handling: fail closed
//
// A lease's handle context ends when the backend loses the lease, and on
// lease backends also when the lease's trust window closes without a
// successful renewal: last renewal start + TTL − margin, which is before the
// store can expire it and grant it to another instance. The poller runs
// under that context, so it stops in time even when the store cannot be
// reached. The Coordinator then reports EventLost, cleans up and tries to
// acquire the target again on a later tick.
//
// It does not wait for the window to close: when a renewal of a lease
// fails (the backend's keeper reports it through core.LeaseReporter), the
// store may not have extended the lease, so that lease's poller pauses at
// once (EventUncertain, with the renewal's error; its poll context ends)
// while the lease is kept and renewals go on. The next successful renewal
// resumes it (EventResumed); if none succeeds in time, the lease is lost.
//
// On top of that it watches its own heartbeat. After a failed heartbeat it
// makes no acquisition and no voluntary release until one succeeds again.
// When no heartbeat has succeeded for HeartbeatTTL − HeartbeatTTL/10 since
// the start of the last successful one, the store may already count the
// instance dead: every poller pauses (EventUncertain, for those not paused
// already) while the leases are kept and renewals go on. When a heartbeat
// succeeds again, the pollers of the leases still held resume
// (EventResumed), except those a failed renewal keeps paused, and a
// reconcile tick runs at once, so the instance recovers on its own when
// the store returns.
//
// Every check before a poll reads the clock, not only the timers that end
// a lease's context and close the heartbeat's trust window: after the
// process was frozen (a long GC pause, a VM migration, SIGSTOP), the poll
// timers can fire before those do. A lease whose trust window (last renewal
// start + TTL − margin, core.LeaseState.Expired) has closed by the clock is
// paused as uncertain, and a closed heartbeat window pauses every lease,
// each reported by its EventUncertain before any poll starts; a renewal that
// succeeds resumes the lease, as after a failed renewal, and the backend's
// keeper otherwise ends it (EventLost). IsOwned makes the same check.
//
// # What no lock can promise
//
// A check, however late, comes before the work: a poll already running
// when the process froze, or that freezes between the check and its write,
// carries on when the process resumes, with a lease that may have passed to
// another instance meanwhile. Neither the Coordinator nor any lock can stop
// it; only the resource can, by refusing the write of a stale holder. That
// is what the fencing token passed to Config.Poll is for: tokens increase
// with each grant of a target's lease, so the resource keeps the highest
// token it has accepted per target and refuses a lower one, in the same
// atomic step as the write:
//
//	Poll: func(ctx context.Context, target string, token uint64) error {
//		data, err := fetch(ctx, target)
//		if err != nil {
//			return err
//		}
//		// UPDATE results SET data = $1, token = $2
//		//  WHERE target = $3 AND token <= $2
//		// (0 rows: a newer holder wrote; this poll is stale)
//		return store.Save(ctx, target, token, data)
//	},
//
// # Failover
//
// A graceful stop (the end of Run) stops every poller, releases every
// lease and deregisters, so its targets move within one reconcile tick.
//
// A crashed instance's leases expire on the store at most the lease TTL
// (L, the Provider's) after its last renewal, and its registration at most
// HeartbeatTTL (H) after its last heartbeat. The first reconcile tick of
// another instance after both have expired lists the members without it,
// assigns its targets to the live instances and acquires them: ticks come
// at most 1.2 × ReconcileInterval (R) apart, so its targets are polled
// again within
//
//	max(L, H) + 1.2 × R   (plus an acquire's round trip)
//
// after the crash. The defaults with the recommended lease TTL (L =
// RecommendedLeaseTTL = 15 s, H = 15 s, R = 5 s) give 21 s, under the 30 s
// a poll-lease deployment is expected to meet; a Provider left at its own
// default TTL of 30 s gives 36 s. The tests measure the bound with these
// timings scaled down by 10 against a real Redis and a SIGKILLed process.
//
// # Logs
//
// Config.OnEvent receives every Event: acquired, renewed, released (with a
// Reason: rebalance, stop, target removed, manual), lost, uncertain and
// resumed, each with the instance, target and fencing token. The same
// changes go to Config.Logger (log/slog), one line each:
//
//	level=INFO msg="Lease acquired" instance=web-1712-a3f9c2 target=endpoint-7 token=42
//
//	message               level         attributes
//	Lease acquired        Info          instance, target, token
//	Lease released        Info          instance, target, token, reason (rebalance, stop,
//	                                    target removed, manual), error (a failed release)
//	Lease resumed         Info          instance, target, token
//	Lease lost            Warn          instance, target, token, error
//	Lease uncertain       Warn          instance, target, token, error
//	Lease renewed         RoutineLevel  instance, target, token
//	Poll started          RoutineLevel  instance, target, token
//	Lease busy            Debug         instance, target, owner, token (the holder's), error
//	Poll failed           Warn          instance, target, token, error
//	Lease acquire failed  Warn          instance, target, error (the store failed, not busy)
//	Lease release failed… Warn          instance, target, token, error (it expires by its TTL)
//	Handoffs held off…    Warn          instance, target, recipient, times, for (a target
//	                                    handed to recipient was not taken by it)
//	Holding more targets… Warn          instance, held, announced (once: over 14,563 targets
//	                                    held, the announcement names some)
//	Announce unsupported… Warn          instance, error (once: Announce answered
//	                                    core.ErrUnsupported; heartbeats go without values)
//	Target ignored        Warn          instance, target, error (not valid UTF-8, empty)
//
// The attribute named target above is named by Config.TargetKey: set it to
// "endpoint" and every line about a target carries endpoint=… instead.
// Renewals and poll starts come once per lease per renew interval and once
// per poll, thousands a minute on a large fleet, so they are logged at
// Config.RoutineLevel, Debug by default; RoutineLevel: slog.LevelInfo logs
// them with the rest. A busy acquire (the lease is held elsewhere) names
// the holder when the backend implements core.Inspector: that is one more
// round trip, made only when the logger has Debug enabled. A backend whose
// handles do not report their lease (pglock, whose locks live as long as
// the connection) sends no renewed events, and its leases are paused only
// by the heartbeat. The coordinator also logs, without a target, when the
// heartbeat fails, recovers or lets its trust window close, and when it
// stops.
//
// # Inspection
//
// Coordinator.State tells, locally and without I/O, where this instance
// stands on a target: Owned (polling it), Uncertain (holding its lease
// with the poller paused) or NotOwned, since when, and with which fencing
// token; Owned is exactly IsOwned. Coordinator.Snapshot lists the live
// members and, for each target, its preferred instance, its holder (the
// holder's identity and token come from core.Inspector where the backend
// implements it) and this instance's State.
//
// The store's own records stay readable. The README's "Inspection"
// section gives, per backend, the commands (redis-cli, psql, nats) that
// list the live instances and name a target's holder and token; a test of
// the repository runs each of them against real servers, so they match
// what the backends write.
package polllease
