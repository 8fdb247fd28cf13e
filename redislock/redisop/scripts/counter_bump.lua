-- Increments a lock's durable counter if owner holds the grant: the fencing
-- counter of multi-server algorithms (redlock), sent in the same pipeline as
-- the acquire. The counter never expires and is never deleted.
-- KEYS[1] the grant's key, KEYS[2] counter key
-- ARGV[1] owner, ARGV[2] 'zset' when KEYS[1] is a sorted set of holders
-- Returns the new counter value, or 0 when owner does not hold the grant.
if ARGV[2] == 'zset' then
  if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
    return 0
  end
else
  local v = redis.call('GET', KEYS[1])
  if not v or (v ~= ARGV[1] and string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. ':') then
    return 0
  end
end
return redis.call('INCR', KEYS[2])
