// Package etcdlock is the distlock backend on etcd (v3 API, through
// go.etcd.io/etcd/client/v3): mutexes, reader-writer locks and semaphores
// granted in arrival order, with fencing tokens, one lease per Provider and
// watch-driven waiting, plus core.Membership and a Holder lookup.
//
//	cli, _ := clientv3.New(clientv3.Config{Endpoints: []string{"localhost:2379"}})
//	p, err := etcdlock.New(cli, etcdlock.WithTTL(15*time.Second))
//	...
//	defer p.Close()
//	err = core.Do(ctx, p.Mutex("orders/42"), func(ctx context.Context) error {
//		return work(ctx) // ctx ends if the lock is lost
//	})
//
// # How a lock is held
//
// A lock is a line of keys under "<prefix><kind><kit.SafeName(name)>/"
// (WithPrefix, default "distlock/"; kind "m/" for a Mutex, "rw/" for an
// RWMutex, "s/" for a Semaphore, so the three of one name are distinct
// locks). Every acquire writes a key of its own, holding the Provider's
// identity (WithIdentity) and attached to the Provider's lease, and the
// keys line up by create revision, which etcd makes strictly increasing
// across all keys. A contender is admitted by the keys ahead of it: a
// mutex's or a writer's when there is none, a reader's when there is no
// writer's, a semaphore's when fewer than max are ahead. Keys ahead of a
// contender can only go (released, given up, expired), never come, so an
// admitted contender stays admitted and grants follow arrival order.
// Release deletes the key; its name is unique to the grant, so a stale
// handle never frees another's.
//
// The fencing token is the key's create revision: grants are made in
// create revision order, so every grant's token is larger than every
// earlier grant's, of every name (etcd's revision is one counter for the
// whole store). It survives restarts and leader changes (the revision is
// replicated and persisted), not a store re-created from scratch.
//
// # Waiting
//
// TryAcquire of a mutex, a writer or a reader is one transaction that
// writes the key only if nothing is ahead, so a busy lock costs one round
// trip and leaves nothing behind; a semaphore's writes its key and counts
// the keys ahead in one transaction, and deletes the key again when max
// are ahead. Acquire writes its key and, in the same transaction, reads
// the keys ahead of it: it names the newest 32 with their create
// revisions and counts them all. When it must wait, it crosses off each
// named key as its deletion arrives (the first deletion of a name after
// its creation is that key's: a name is written again only once its key
// is gone), and is admitted when what is left admits it: no key for a
// mutex or a writer, no writer's for a reader, fewer than max for a
// semaphore. So the release that unblocks a contender admits it without
// a request, and wakes no other wait. A contender queued behind more keys
// than its read named reads the queue again (one round trip, naming them
// all) once the named ones can no longer decide.
//
// A wait for a mutex, or a writer's behind a writer, right behind another
// exclusive key knocks on it instead of watching the lock (bell.go):
// every Provider has a bell, a key it watches for as long as it lives,
// and its keys' names carry its id. A contender whose only key ahead is
// another Provider's writes to that Provider's bell that it waits behind
// the key; a contender further back does not, since the key it waits
// behind is not granted yet, and its Provider reads which key is right
// behind it (one read, 5 ms into its own wait, or once granted when that
// found none). The release of a grant
// writes "cleared" to the bell of the contender right behind it, in the
// transaction that deletes the key, and that admits the contender at once:
// the grant proved that nothing was ahead of it (a knock or a read that
// comes during the delete is rung once it is done, and a knock that comes
// after is answered at once). A release thus reaches one Provider,
// whatever the length of the line. A contender that gives up tells the
// one right behind it (one read), which reads the line and knocks on the
// key now ahead of it. A contender that has waited 100 ms also watches
// the key it waits behind, to hear it go where no ring tells (its Provider
// died); it then gives the ring 20 ms and reads the line again.
//
// The other waits (a reader's, a semaphore's, a writer's behind a reader,
// and a Provider's first wait, while its bell's watch starts) hear the
// deletions through one etcd watch per lock and Provider, shared by its
// waits for that lock. It watches from the time it starts: etcd hands a
// watch that starts in the past its events only at its next catch-up
// round (every 100 ms), which would hold up the whole line behind the
// wait, and so does it with a watch from now that starts while a write
// commits; the watch of a lock outlives its last wait by a second, and a
// bell's lives with its Provider, so either pays that rarely. Once the
// server confirms the watch, a wait whose read is older reads the queue
// again (one round trip), and nothing between a read and the watch goes
// unseen. The watch replays its latest deletions to a wait that joins it
// late. The release of a grant tells the contender of the same Provider
// right behind it at once, before its delete is even sent: the grant
// proved that nothing was ahead of it, and every other contender is behind
// that one, so no one else can be admitted meanwhile. A wait that hears
// nothing reads the queue again, first after 0.5 to 1 s, then at growing
// intervals up to 10 s, which only bounds what a stalled watch or a lost
// ring could cost; a read that fails is tried again within a second.
// A wait that ends without a grant deletes its key before it returns.
//
// There is no local handoff (WithLocalHandoff in other backends): a
// handoff lets a waiter of the releasing process pass the waiters of
// other processes queued before it, which breaks arrival order, and a
// grant made out of order would carry a token smaller than one granted
// before it. The queue already hands a released lock to the next
// contender of the same Provider at once, and to one of another process
// in one delete and one watch event.
//
// # The lease and lost locks
//
// A Provider writes every key with one etcd lease, granted by the first
// acquire and kept alive by the Provider's kit.Keeper: one keep-alive per
// renewal interval (TTL/3) for all the keys it holds or waits with. A
// handle is trusted until the start of the lease's last successful
// keep-alive + TTL − TTL/10 (the trust window); its context ends with
// core.ErrLockLost when the window closes without a keep-alive (a dead or
// partitioned server), when a keep-alive finds the lease gone, or when the
// key is deleted: a grant's key is watched from 10 ms after the grant (a
// watch costs about what a grant does, and most grants are released
// sooner; a deletion in between is heard as soon as the watch starts,
// since it replays from the key's creation). A lease past its trust window
// is never kept alive again, even if the server kept it (a restart restores
// leases): new keys go to a new lease, and the keys of lost grants expire.
// A key that may stand in line for nobody (a lost grant's, a release's
// whose delete failed, an acquire's whose write had an unknown outcome: the
// connection broke or the timeout passed with the request sent, and a
// cluster may still apply it, as when the member that took it dies and a
// new leader commits it) is deleted at once by its Provider, and again
// until a delete succeeds (at most a second apart), since the Provider's
// other keys keep the shared lease, and with it that key, alive: so the
// contenders behind it wait only for the server, never for the Provider's
// lifetime. The delete writes a void mark of the key on its lease in the
// same transaction, and every write of a key requires that its mark does
// not exist, so a write that lands after the delete (a frozen member
// passing it on when it thaws) fails and leaves nothing in line.
//
// A process that dies stops the keep-alives: the server deletes its keys
// one TTL later (at least the server's minimum lease, 2 s with etcd's
// defaults; etcd checks for expired leases every 500 ms), and the
// contenders behind them hear it from their watches (a knocking contender
// watches the key it waits behind from 100 ms into its wait, and hears
// the deletion within the server's catch-up round, up to 100 ms more,
// then gives a ring 20 ms). Close revokes the lease, which frees
// everything the Provider held or waited for at once.
// An Acquire whose key is lost while it waits (its lease expired during an
// outage) writes a new key, at the end of the line. Every request for a
// call of the caller's is bounded by WithTimeout (default 5 s), so a dead
// server gives the client's error, never an error matching
// core.ErrNotAcquired; a write is not cut short by the caller's context,
// since a write cancelled in flight could land after the delete meant to
// undo it.
//
// # Cost
//
// TryAcquire and Release: one round trip each (a busy semaphore's
// TryAcquire, two). Acquire of a mutex behind another Provider's key: one
// round trip, and a write to that Provider's bell when only that key is
// ahead; one read of the key behind it, 5 ms into a wait not next in
// line, or once granted (both when the first found none), and when that
// read comes back after the release, one more bell write; a
// wait longer than 100 ms starts and ends a watch of the key ahead; a
// give-up, one read and one bell write. The release's bell writes go in
// its delete's transaction. The other waits: one round trip, then waiting
// that costs no request, but
// for one read when the Provider's watch of the lock starts after the
// queue changed, and behind more than 32 keys, one once those named are
// gone; one watch per lock and Provider while it waits. One watch per
// Provider, of its bell, from its first exclusive key on.
// Keep-alive: one round trip per TTL/3 per Provider, however many locks
// it holds. etcd's index keeps every name a key range has held until the
// next compaction, and each transaction on a lock walks the names of its
// range; a Provider reuses the names of its deleted keys, so a lock's
// range stays near the peak number of its contenders, but run etcd with
// auto-compaction (as every deployment should) so that other clients'
// keys do not pile up.
//
// # Membership
//
// Register, Deregister and Members implement core.Membership, Heartbeat
// core.Heartbeater and Announce core.Announcer: a member is the key
// "<prefix>members/<SafeName(group)>/<SafeName(id)>", holding its id,
// and, after an Announce with a non-empty value, the key
// "<prefix>member-values/<SafeName(group)>/<SafeName(id)>", holding the
// value (earlier versions, which read the member keys alone, list the
// members as ever), both attached to a lease of their own with the
// member's ttl, granted by each Register, Heartbeat or Announce (two round
// trips: the grant, then the puts, with which Heartbeat and Announce list
// the group in one transaction). The server deletes the keys when the lease expires, so a
// member that stops registering is dropped its ttl after its last
// registration, rounded up to whole seconds (etcd's lease unit; at least
// the server's minimum lease), plus up to 500 ms. etcd's request limit
// (1.5 MiB by default) bounds an Announce's put, not its listing: that is
// one response, bounded by the client's MaxCallRecvMsgSize (about 2 GiB
// by default), so a group's values together are limited only by what the
// server and client hold in memory.
//
// # A cluster
//
// Give the client every member's endpoint, and have it ping its
// connections (clientv3.Config's DialKeepAliveTime, which gRPC raises to
// at least 10 s, and DialKeepAliveTimeout; Open sets 10 s and 2 s). A member that dies closes its connections, and
// the client moves its requests and watches to the others at once; one
// that is frozen or cut off by a partition keeps them open and answers
// nothing, and without pings the watches on it would hear nothing, leaving
// the waits to the fallback reads. With the pings, the client drops it
// within the two durations. Either way grants resume once the others have
// elected a leader, and the keys of leases whose trust window closed
// meanwhile are gone: their own Providers delete them, or the server
// expires them one TTL after the new leader took office.
//
// # Servers
//
// The client is go.etcd.io/etcd/client/v3 v3.6.8, the newest release that
// builds with Go 1.24; it is tested against etcd 3.4.23 (Debian's
// etcd-server), a single member and a three-member cluster (Providers on
// different members; the leader killed under contention), and uses
// nothing newer than the etcd 3.3 API (range compares, watches from a
// revision with previous values).
package etcdlock
