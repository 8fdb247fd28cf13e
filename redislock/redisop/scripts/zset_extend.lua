-- Extends a grant held as a zset member (reader, semaphore slot, member).
-- KEYS[1] zset; ARGV[1] owner, ARGV[2] ttl ms
-- Returns 1 when extended, 0 when the member is gone.
local us, ms = now()
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[1], 'XX', ms + tonumber(ARGV[2]), ARGV[1])
stretch(KEYS[1], ARGV[2])
return 1
