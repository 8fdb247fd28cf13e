-- Write side of a reader-writer lock.
-- KEYS[1] writer key, KEYS[2] readers zset (owner -> expiry ms),
-- KEYS[3] writer-waiting marker, KEYS[4] fence key, KEYS[5] (optional) the
-- name's durable counter (see fence in lib.lua)
-- ARGV[1] owner, ARGV[2] ttl ms, ARGV[3] '1' when the caller waits,
-- ARGV[4] marker ttl ms
-- Returns {1, token} when granted, {0, ms worth waiting} when busy. A waiting
-- writer that finds the lock busy sets the marker, which keeps new readers
-- out (writer preference) until it expires or a writer gets the lock.
local us, ms = now()
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  return again(KEYS[4], us, ARGV[2], KEYS[5])
end
local wait = 0
if holder then
  wait = redis.call('PTTL', KEYS[1])
else
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ms)
  local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  if #first == 0 then
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
    if redis.call('GET', KEYS[3]) == ARGV[1] then
      redis.call('DEL', KEYS[3])
    end
    return {1, fence(KEYS[4], us, ARGV[2], KEYS[5])}
  end
  wait = tonumber(first[2]) - ms
end
if ARGV[3] == '1' then
  redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[4])
end
return busy(wait)
