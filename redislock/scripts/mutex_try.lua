-- One attempt at a mutex by a caller that does not wait (TryAcquire): the
-- part of mutex_acquire.lua such a call runs, on the lock key alone.
-- KEYS[1] lock key; ARGV[1] owner, ARGV[2] ttl ms
-- Returns {1, token} when granted, {0, holder's remaining ms} when held.
local us = now()
local mine = ARGV[1] .. ':'
local holder = redis.call('SET', KEYS[1], mine .. string.format('%.0f', us), 'NX', 'PX', ARGV[2], 'GET')
if not holder then
  return {1, us}
end
if string.sub(holder, 1, #mine) == mine then
  -- Granted by a request whose reply was lost: claim it for a full TTL.
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, tonumber(string.match(holder, ':(%d+)'))}
end
return busy(redis.call('PTTL', KEYS[1]))
