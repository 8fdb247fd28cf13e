// Command distlock takes distributed locks from the shell, over any backend
// a URL names (see package github.com/distlock/distlock for the schemes and
// parameters).
//
//	distlock run [-wait D] [-ttl D] [-shared] [-semaphore N] [-grace D] [-v] URL NAME -- CMD [ARGS...]
//	distlock leader [-id ID] [-grace D] [-v] URL GROUP -- CMD [ARGS...]
//	distlock holder [-v] URL NAME
//	distlock members [-v] URL GROUP
//	distlock version
//
// run holds the lock NAME while CMD runs, like flock(1) across machines:
// the mutex NAME, or with -shared the read side of the reader-writer lock
// NAME, or with -semaphore N one of the N slots of the semaphore NAME. CMD
// gets the lock's fencing token and name in its environment
// (DISTLOCK_TOKEN, DISTLOCK_NAME): pass the token on to what CMD writes,
// so that a stale holder's writes can be refused. SIGINT and SIGTERM are
// forwarded to CMD. When the lock is lost while CMD runs, CMD gets SIGTERM,
// then SIGKILL after -grace; how fast a loss is seen is the backend's
// documented bound (the TTL on lease backends, twice the keepalive on
// postgres).
//
// leader runs CMD only while this process leads GROUP (package election:
// the holder of the mutex GROUP leads, the fencing token is the term). CMD
// gets DISTLOCK_TOKEN (the term), DISTLOCK_NAME (the group) and
// DISTLOCK_ID (the candidate's -id). On demotion CMD is stopped as run
// stops it on a loss, and the process campaigns again. When CMD exits on
// its own, or after a forwarded signal, leader gives up the lock and exits
// with CMD's status. -id (default hostname-pid) also becomes the URL's
// identity parameter unless the URL sets one (redlock:// has none), and on
// backends with core.Membership the candidate registers in GROUP while it
// runs, which members lists.
//
// holder tells who holds the mutex NAME (the holder's identity and fencing
// token), on backends whose locks can say (core.Inspector). members lists
// the live members of GROUP (core.Membership).
//
// On Linux, CMD is killed if distlock itself dies, so that it never runs
// on without the lock.
//
// # Exit status
//
//	CMD's own   run and leader: CMD's exit status; 128+N when signal N ended it
//	0           holder, members, version: done
//	1           the backend failed (unreachable, refused), or holder/members
//	            on a backend that cannot tell
//	2           usage: bad flags or arguments, a bad URL or name
//	75          run: the lock was not acquired within -wait (EX_TEMPFAIL)
//	76          run: the lock was lost while CMD ran; CMD was stopped
//	126, 127    CMD could not be started, or was not found
//	128+N       distlock got signal N before CMD started
package main
