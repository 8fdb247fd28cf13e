-- Extends a grant held in a plain key (mutex, write side) and, when the key
-- is gone because the server lost its data set (it is young: see young in
-- lib.lua) and the lock is free here, places the grant again: redlock's
-- extension, which restores what a restart without persistence lost, so
-- that the holder's majority does not shrink one restart at a time. On a
-- server that is not young a missing key is a lost grant, as in
-- key_extend.lua.
-- KEYS[1] lock key, KEYS[2] boot marker, KEYS[3] (write side only) the
-- readers zset, which must hold no live reader for the grant to be placed
-- ARGV[1] owner, ARGV[2] ttl ms, ARGV[3] '1' for a mutex, whose value is
-- "<owner>:<token>" (the token placed is the server time in µs: redlock's
-- tokens come from its counters, not from this value), ARGV[4] the
-- young-server guard in ms
-- Returns 1 when extended, 2 when placed again, 0 when the grant is lost.
local v = redis.call('GET', KEYS[1])
if v then
  if v == ARGV[1] or string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. ':' then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return 1
  end
  return 0
end
local us, ms = now()
if young(KEYS[2], ms, ARGV[4]) == 0 then
  return 0
end
if KEYS[3] and redis.call('ZCOUNT', KEYS[3], string.format('(%.0f', ms), '+inf') > 0 then
  return 0
end
local val = ARGV[1]
if ARGV[3] == '1' then
  val = ARGV[1] .. ':' .. string.format('%.0f', us)
end
redis.call('SET', KEYS[1], val, 'PX', ARGV[2])
return 2
