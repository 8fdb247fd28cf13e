-- Extends a lock held in a plain key (mutex, write side). The key holds the
-- owner, or "<owner>:<token>..." for a mutex.
-- KEYS[1] lock key; ARGV[1] owner, ARGV[2] ttl ms
-- Returns 1 when extended, 0 when the key is gone or held by another owner.
local v = redis.call('GET', KEYS[1])
if v and (v == ARGV[1] or string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. ':') then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
