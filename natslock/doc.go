// Package natslock is the distlock backend on a NATS JetStream key-value
// bucket: mutexes, reader-writer locks and semaphores with leases, fencing
// tokens and watch-driven waiting, plus core.Membership and a Holder lookup.
//
//	nc, _ := nats.Connect(nats.DefaultURL)
//	js, _ := jetstream.New(nc)
//	p, err := natslock.New(js, natslock.WithTTL(10*time.Second))
//	...
//	defer p.Close()
//	err = core.Do(ctx, p.Mutex("orders/42"), func(ctx context.Context) error {
//		return work(ctx) // ctx ends if the lock is lost
//	})
//
// # How a lock is held
//
// A held lock is a key in the bucket (default "distlock"), created by New
// with history 1 and a bucket-level TTL equal to the lease TTL: nats-server
// 2.9 has no per-key TTL, and a write to a key restarts its age. Acquire
// writes the key expecting its latest revision to be none or a delete marker
// (the KV Create); the Provider's lease keeper (kit.Keeper) rewrites it
// every TTL/3 expecting the revision it wrote last (the KV Update), batching
// all due renewals into one pipelined round trip; Release writes a delete
// marker expecting that revision (Delete with LastRevision), so it can never
// delete a later holder's entry, or hands the key to a local waiter (see
// Local handoff). A holder that dies stops renewing, and the server drops
// its key one TTL after the last renewal.
//
// The fencing token is the KV revision of the grant, the stream sequence of
// the bucket: strictly increasing across every key, hence per name, for as
// long as the bucket is not deleted and re-created.
//
// # Lost locks
//
// A handle's context ends with core.ErrLockLost when a renewal finds that
// the key no longer holds our entry (deleted by hand, purged, expired,
// taken), or when the trust window closes without a successful renewal:
// start of the last successful renewal + TTL − TTL/10. While the client is
// disconnected nothing is sent (a request buffered for the reconnect could
// land after the caller gave up); operations wait for the connection up to
// WithTimeout (default 5 s) and then fail with the client's error, so a dead
// server gives an error, never a wait as long as the caller's context.
//
// # Waiting
//
// Waiters of one Provider queue locally in arrival order and only the first
// contends on the server.
//
// A mutex has a wait line across processes. Its value names the holder's
// Provider inbox (a core NATS subject); a waiter that finds it held sends
// a join there, and the holder's release writes the key for the first
// waiter that joined, expecting the holder's last revision. The server
// acknowledges that write to the waiter itself, whose token is the write's
// revision, and the releaser sends it the rest of the line. A handover
// costs one KV write and a few messages to one process, and waiters do not
// race. A waiter that gives up asks the holder to take it
// out of the line and hands on a grant written for it meanwhile before its
// Acquire returns. A mutex waiter polls only to recover a lost message or
// an expired key (WithBackoff, from 250 ms at least). A holder written by
// an older natslock, without an inbox, is waited for by polling (from
// 20 ms at most), and its
// release deletes the key; older waiters get a held mutex only once the
// line is empty (line.go has the protocol).
//
// A semaphore or reader-writer lock waiter is woken by a KV watcher (an
// ordered consumer) on the keys it waits for, one per key per Provider,
// started by the first waiter and stopped a second after the last. The
// watcher hands over the delete marker's revision too, so the woken waiter
// takes the lock in one round trip. Because nats-server 2.9 removes an
// expired key without a marker, a bounded randomized retry
// (kit.DefaultBackoff, capped by the holder's remaining TTL) backs the
// watcher up.
//
// # Local handoff
//
// A mutex or semaphore slot released while an Acquire of the same Provider
// waits for it is not deleted but handed to that waiter, with one write of
// the holder's entry that expects the holder's last revision, where a
// delete and a new acquire cost two writes and a watcher delivery. The
// write's revision is the waiter's token: it lands only while the key
// still holds our entry, so the token is larger than every token granted
// before, and a key deleted or overwritten by hand is never handed on (the
// release deletes instead, and the waiter contends). A run of local
// handoffs is bounded (WithLocalHandoff, default 8 in a row and 20 ms) so
// that waiters in other processes get their turn: the release that ends it
// hands a mutex to the first waiter of its line, or deletes the key, and
// this Provider's waiters then contend like everyone else's.
// WithLocalHandoff(0, 0) turns handoffs off.
//
// # Keys
//
// Names are escaped with kit.SafeName (a readable prefix and a hash of the
// exact name, so names stay case-sensitive and any UTF-8 name works), under
// one prefix per kind: "m." for mutexes, "s.<name>.<slot>" for semaphore
// slots, "rw.<name>.w" and "rw.<name>.r.<random>" for reader-writer locks.
// A mutex, a reader-writer lock and a semaphore of the same name are
// distinct locks. Values are small JSON documents naming the holder
// (WithIdentity, default hostname-pid), readable with `nats kv get`.
//
// # Membership
//
// Register, Deregister and Members implement core.Membership, and Announce
// core.Announcer, over a second bucket (default "<bucket>_members", TTL
// WithMemberMaxTTL): each member is a key holding its id, ttl and announced
// value in JSON (the value base64, left out when empty, so entries of
// earlier versions read as an empty value), refreshed by Register or
// Announce; the server drops members not refreshed for the bucket's TTL,
// and the listings hide those older than the ttl they registered with.
// Register and Deregister cost one round trip; Members two (a consumer
// made and one fetch, up to 255 members; one more fetch per 256 beyond);
// Announce the same two, its put sent alongside the consumer's creation.
// Each member is one message, at most the server's max_payload (1 MiB by
// default; a value of core.MaxMemberValue takes about 342 KiB).
package natslock
