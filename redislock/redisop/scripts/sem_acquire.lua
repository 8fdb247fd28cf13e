-- Semaphore: a zset of holders scored by their expiry in server ms.
-- KEYS[1] holders zset, KEYS[2] fence key, KEYS[3] (optional) the name's
-- durable counter (see fence in lib.lua)
-- ARGV[1] owner, ARGV[2] ttl ms, ARGV[3] max holders
-- Returns {1, token} when granted, {0, ms until the first slot expires} when
-- every slot is taken. Expired holders are purged on every attempt.
local us, ms = now()
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return again(KEYS[2], us, ARGV[2], KEYS[3])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ms)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], ms + tonumber(ARGV[2]), ARGV[1])
  stretch(KEYS[1], ARGV[2])
  return {1, fence(KEYS[2], us, ARGV[2], KEYS[3])}
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return busy(tonumber(first[2]) - ms)
