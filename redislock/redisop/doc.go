// Package redisop is the building block for redlock and other Redis-based
// backends: the lock operations on one Redis deployment (a server, or a
// cluster through *redis.ClusterClient), each one Lua script call, one
// round trip, and the pub/sub Waker that turns their release and handoff
// announcements into wake-ups of local waiters.
//
// A Client keeps no state besides its key prefix: it does not wait, renew
// or hand out handles. A backend builds those on top with package kit
// (Keeper for renewal, Wait for retries, NewHandle for handles), as
// redislock does over one Client and redlock over one Client per server.
//
// The scripts live in scripts/*.lua, each with a header stating its KEYS,
// ARGV and reply. They are embedded, loaded once per server and then
// called by SHA, falling back to their source after a script cache flush
// or a restart.
//
// Errors: an invalid Lock, ttl or member fails before any I/O with an
// error matching core.ErrInvalidName or core.ErrInvalidArgument; a busy
// lock is a Result, not an error; a grant that is gone matches
// core.ErrLockLost; anything else is the driver's error, or says that a
// reply was not what the script returns.
package redisop
