-- Advances a lock's durable counter (bump in lib.lua) if owner holds the
-- grant: the fencing counter of multi-server algorithms (redlock), sent in
-- the same pipeline as the acquire. The counter never expires and is never
-- deleted. It also reads (and, when absent, writes) the server's boot
-- marker for the young-server guard.
-- KEYS[1] the grant's key, KEYS[2] counter key, KEYS[3] boot marker
-- ARGV[1] owner, ARGV[2] 'zset' when KEYS[1] is a sorted set of holders,
-- ARGV[3] the young-server guard in ms (see young in lib.lua), ARGV[4] the
-- counter's time quantum in µs (see bump in lib.lua)
-- Returns {the new counter value, or 0 when owner does not hold the grant;
-- the ms this server is still young}.
local us, ms = now()
local left = young(KEYS[3], ms, ARGV[3])
if ARGV[2] == 'zset' then
  if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
    return {0, left}
  end
else
  local v = redis.call('GET', KEYS[1])
  if not v or (v ~= ARGV[1] and string.sub(v, 1, #ARGV[1] + 1) ~= ARGV[1] .. ':') then
    return {0, left}
  end
end
return {bump(KEYS[2], us, ARGV[4]), left}
