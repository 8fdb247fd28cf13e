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
// A waiting Acquire is woken by a KV watcher (an ordered consumer) on the
// key it waits for, one per key per Provider, started by the first waiter
// and stopped a second after the last. The watcher hands over the delete
// marker's revision too, so the woken waiter takes the lock in one round
// trip. Waiters of one Provider queue locally in arrival order and only the
// first contends on the server. Because nats-server 2.9 removes an expired
// key without a marker, a bounded randomized retry (kit.DefaultBackoff,
// capped by the holder's remaining TTL) backs the watcher up.
//
// # Local handoff
//
// A mutex or semaphore slot released while an Acquire of the same Provider
// waits for it is not deleted but handed to that waiter. Its token is a
// revision of the key that this Provider wrote after the holder's grant,
// while the key held its entry: as soon as a waiter lines up behind a
// local holder, the holder's entry is rewritten in the background (a
// renewal, in effect), so the release usually hands on without a round
// trip, where a delete and a new acquire cost two. Tokens stay KV
// revisions, strictly increasing, and the new lease starts when that write
// started. A handed-on grant rewrites the key at once with its own token,
// for Holder. Waiters in other processes only wake on deletes, so a run of
// local handoffs is bounded (WithLocalHandoff, default 8 in a row, and 20
// ms); the release that ends it deletes the key, and this Provider's
// waiters then hear the delete from the watcher like everyone else's.
//
// One difference from a fresh acquire: a handed-on grant rests on the last
// write rather than on a write made for it. A key deleted by hand after
// that write is caught by the Provider's watcher, which relays the delete
// marker, and the release then deletes instead of handing on; but a delete
// made within the watcher's delivery delay before the release (a fraction
// of a millisecond) goes unseen, and the new holder, like the old one,
// only learns of it at its next renewal. Its token is then smaller than
// that of whoever took the key meanwhile, so a resource that checks tokens
// refuses it. WithLocalHandoff(0) turns handoffs off for callers that
// would rather pay the round trips.
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
// Register, Deregister and Members implement core.Membership over a second
// bucket (default "<bucket>_members", TTL WithMemberMaxTTL): each member is
// a key refreshed by Register; the server drops members not refreshed for
// the bucket's TTL, and Members hides those older than the ttl they
// registered with.
package natslock
