// Package filelock is the distlock backend for one host: mutexes,
// reader-writer locks and semaphores made of lock files in a directory, with
// no server to run. Every process that opens a [Provider] on the same
// directory sees the same locks.
//
//	p, err := filelock.New(filepath.Join(os.TempDir(), "myapp-locks"))
//	if err != nil {
//		return err
//	}
//	defer p.Close()
//
//	h, err := p.Mutex("nightly-report").Acquire(ctx)
//	if err != nil {
//		return err
//	}
//	defer h.Release(context.WithoutCancel(ctx))
//	return writeReport(h.Context(), h.FencingToken())
//
// # How a lock is held
//
// A lock is an advisory lock on a file: flock(2) on Unix, LockFileEx on
// Windows. The kernel ties it to an open file, so a process that dies or is
// killed frees its locks at once, with no lease to wait out. Locks are not
// reentrant: a second acquire of a held name fails or waits, even in the same
// process and through the same Locker.
//
// A name is never used as a path. It becomes a stem of at most 54
// characters from [A-Za-z0-9_-]: a readable prefix of the name, '-', and a
// Base32 SHA-256 hash of the exact name (kit.SafeName, with the prefix cut
// to 27 characters). With an extension, every file name is a portable one of
// at most 64 characters, so any non-empty UTF-8 name works, "../x" and "a/b"
// included, and nothing is ever written outside the directory. Names are
// case-sensitive, even on case-insensitive file systems. The layout is
//
//	<dir>/mutex/<stem>.lock          a mutex
//	<dir>/rwmutex/<stem>.lock        a reader-writer lock (shared by readers)
//	<dir>/rwmutex/<stem>.gate        its writer-preference gate
//	<dir>/semaphore/<stem>.<i>.lock  slot i of a semaphore
//	<dir>/<kind>/<stem>.ctr          the fencing counter of each lock
//	<dir>/<kind>/<stem>.prio         priority claims of starving waiters
//	<dir>/mutex/<stem>.line/         a mutex's waiters in line (Linux): a FIFO each
//
// The directory and its subdirectories are created on the first acquire that
// needs them. Lock files stay after release and are reused; they cost one
// inode each and are empty but for the holder record (see "Who holds a
// lock"). Do not delete the directory while processes use it.
//
// A Mutex is one lock file locked exclusively. A Semaphore of max n is n slot
// files; a holder locks one free slot. An RWMutex locks its file shared for
// readers and exclusive for a writer; a writer also holds the gate file from
// its first attempt until it is granted, and readers pass the gate before
// taking the lock, so a waiting writer keeps new readers out (writer
// preference) while the readers already in finish.
//
// # Fencing tokens
//
// Each grant, of every primitive, increments the lock's counter file under an
// exclusive lock and returns the new value as the handle's fencing token: 1,
// 2, 3, ... per name and kind, strictly increasing across processes and
// restarts. The counter is plain decimal text and is never removed; deleting
// it restarts that lock's tokens at 1.
//
// # Waiting
//
// Acquire does not sleep-poll. On Linux a Mutex's waiters line up across
// the processes of the host: a waiter whose first attempt fails takes a
// ticket, a FIFO in <dir>/mutex/<stem>.line/ named by its arrival time,
// which it keeps open while it waits. A release writes a byte to the two
// earliest live tickets, which wakes those two waiters alone: the first to
// run takes the lock, and the other keeps its place. A ticket that no one
// has open any more (its waiter's process died) is deleted by whoever finds
// it. The tickets only decide whom a release wakes; flock alone decides who
// holds the lock, and a newcomer whose first attempt finds the lock free
// takes it. Each grant looks up the front of the line while the lock is
// held, so a handover costs a write and the next holder's attempt, and
// tells the waiters there so: they, and a waiter that joins a short line,
// also follow the lock file through inotify, so the death of a holder,
// which rings no one, wakes them at once. A waiter that gives up rings the
// line in its place. The others poll from 20 ms, only to recover a ring
// lost with waiters that died at the front.
//
// Reader-writer locks and semaphores, and every kind elsewhere than Linux,
// wait as before the line: one inotify descriptor per Provider watches the
// lock directories; a release, or the death of a holder, closes the only
// descriptor of the lock file that is open for writing, and the
// IN_CLOSE_WRITE event wakes the waiters in every process. Waiters in the
// same Provider are woken directly. The retry backoff ([WithBackoff],
// default 2 ms growing to 100 ms) is only the fallback for platforms
// without inotify and for signals that cannot be delivered.
//
// flock has no queue: on such a release every waiter wakes and one wins,
// and since the kernel signals watchers in a fixed order the same waiter
// tends to win. So a Semaphore waiter (and a Mutex waiter that cannot line
// up) that has lost the race twice claims priority (a shared lock on the
// .prio file), and waiters without a claim let the next two releases go
// by. That bounds starvation; it is not a FIFO. An RWMutex follows its
// writer-preference rule instead.
//
// # Who holds a lock
//
// A Mutex, and an RWMutex's write side, implement core.Inspector, so
// election can name the leader. While it holds the lock, a Mutex holder or
// an RWMutex writer keeps "<identity>\n<token>\n" in its lock file: the
// Provider's identity ([WithIdentity], default kit.DefaultIdentity(),
// "hostname-pid") and its fencing token, written before Acquire returns and
// removed before Release unlocks. Holder reads that record and checks with a
// non-blocking probe that the file is still locked, so a holder that died
// is reported free. It never waits, wakes no waiter and takes no lock on a
// held lock or on a free one, only, for two system calls, on one whose
// holder died (see Holder for the races). Semaphores do not implement
// core.Inspector: they have up to max holders, and no one to name.
//
// # Lost locks
//
// A file lock cannot expire, but its file can be deleted or replaced (by an
// operator, or a cleanup job that sweeps the directory): a new holder then
// locks a new file while the old holder still believes it holds the lock.
// filelock treats that as lost: the holder's handle context is cancelled
// with a cause matching core.ErrLockLost, at once on Linux (the watcher sees
// the delete or rename) and otherwise within [WithCheckInterval] (default
// 1 s). Each attempt also checks, after locking, that the path still names
// the file it locked, so it never takes a lock on a deleted file. Closing the
// Provider releases its locks and marks their handles lost.
//
// # Membership
//
// A Provider is also a core.Membership and a core.Announcer, so polllease
// can track the live instances of a service on one host: Register writes a
// small file <dir>/membership/<group stem>/<id stem>.mem holding the
// registration's expiry by this host's clock, Members lists the unexpired
// ones (and removes the expired), Deregister removes one. Announce also
// writes the value to <id stem>.val beside it (or removes that for an empty
// value) and reads back every member and value file, all under one hold of
// the group's lock. A per-group lock file keeps readers from seeing a file
// half written; a value file cut short by a crash, or left by a Register of
// an older version, reads as empty. Member files keep the format of
// versions without values: each version reads the other's.
//
// # Errors and cost
//
// Acquire errors are *core.Error values naming the backend ("file") and the
// lock. An empty or invalid UTF-8 name fails with core.ErrInvalidName, and a
// semaphore max outside [1, MaxSemaphore] or a nil context with
// core.ErrInvalidArgument, before any I/O. A directory that cannot hold lock
// files (not a directory, no permission, read-only file system) fails with
// core.ErrInvalidArgument wrapping the OS error. Other I/O errors are
// returned wrapped.
//
// An uncontended Mutex TryAcquire and Release is about twenty system calls
// (a dozen for the attempt and its grant, the rest the release and the
// look at the line, both ways) and no file creation once the lock file
// exists. Holder is four or five system calls.
//
// # Limits
//
// Locks are as reliable as the file system's locking: use a local file
// system. A FIFO only wakes processes of the host that writes to it, so on
// a directory shared between hosts a Mutex's waiters on other hosts poll.
// Where NFS emulates flock with byte-range locks, acquires fail with
// core.ErrUnsupported. Fencing counters are not fsynced, so tokens survive
// process crashes but not necessarily a machine crash. Every process must
// have write access to the directory and its files. On Windows a held lock
// file cannot be deleted, so a lock is never lost that way there.
package filelock
