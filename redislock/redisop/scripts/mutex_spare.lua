-- Draws a token for a local handoff of a mutex (handoff.go) while ARGV[1]
-- holds it: the server time in microseconds, or one more than the largest
-- token the value names when the clock is behind, so it is larger than
-- every token granted so far and smaller than any granted after the lock is
-- next released. The draw also renews the grant for ARGV[2] ms.
-- KEYS[1] lock key, KEYS[2] (optional) the name's durable counter: the
-- token is also above it, and raises it (replica acknowledgment,
-- Client.WithReplicaAck); ARGV[1] owner, ARGV[2] ttl ms, ARGV[3] the holder's
-- token, to record as the value's token with the new one as its spare
-- ("<owner>:<token>/<spare>"), or '0' to record the new token itself (the
-- caller hands it on at once).
-- Returns the new token, or 0 when ARGV[1] does not hold the lock.
local v = redis.call('GET', KEYS[1])
local mine = ARGV[1] .. ':'
if not v or string.sub(v, 1, #mine) ~= mine then
  return 0
end
local us = now()
local last = last_token(string.sub(v, #mine + 1))
if KEYS[2] then
  last = math.max(last, tonumber(redis.call('GET', KEYS[2]) or '0'))
end
if us <= last then
  us = last + 1
end
local tok = string.format('%.0f', us)
if KEYS[2] then
  redis.call('SET', KEYS[2], tok)
end
local val = mine .. tok
if ARGV[3] ~= '0' then
  val = mine .. ARGV[3] .. '/' .. tok
end
if string.sub(v, -1) == '+' then
  val = val .. '+'
end
redis.call('SET', KEYS[1], val, 'PX', ARGV[2])
return us
