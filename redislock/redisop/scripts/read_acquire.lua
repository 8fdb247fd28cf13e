-- Read side of a reader-writer lock.
-- KEYS[1] writer key, KEYS[2] readers zset (owner -> expiry ms),
-- KEYS[3] writer-waiting marker, KEYS[4] fence key, KEYS[5] (optional) the
-- name's durable counter (see fence in lib.lua)
-- ARGV[1] owner, ARGV[2] ttl ms
-- Returns {1, token} when granted, {0, ms worth waiting} when a writer holds
-- the lock or waits for it.
local us, ms = now()
if redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  return again(KEYS[4], us, ARGV[2], KEYS[5])
end
local w = redis.call('PTTL', KEYS[1])
if w ~= -2 then
  return busy(w)
end
w = redis.call('PTTL', KEYS[3])
if w ~= -2 then
  return busy(w)
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ms)
redis.call('ZADD', KEYS[2], ms + tonumber(ARGV[2]), ARGV[1])
stretch(KEYS[2], ARGV[2])
return {1, fence(KEYS[4], us, ARGV[2], KEYS[5])}
