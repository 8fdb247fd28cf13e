-- Releases a grant held as a zset member (reader, semaphore slot).
-- KEYS[1] zset, KEYS[2] fence key
-- ARGV[1] owner, ARGV[2] wake-up channel, ARGV[3] wake-up payload,
-- ARGV[4] '1' to wake waiters only once no live member is left (readers:
-- only writers wait on them), '0' to wake them on every release.
-- Returns 1 when released, 0 when the member was gone.
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then
  return 0
end
local us, ms = now()
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ms)
local left = redis.call('ZCARD', KEYS[1])
if left == 0 then
  redis.call('DEL', KEYS[2])
end
if left == 0 or ARGV[4] ~= '1' then
  redis.call('PUBLISH', ARGV[2], ARGV[3])
end
return 1
