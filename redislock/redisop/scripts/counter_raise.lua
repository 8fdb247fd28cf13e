-- Raises a durable counter to at least ARGV[1] (never lowers it).
-- KEYS[1] counter key
-- Returns the counter's value afterwards.
local v = tonumber(redis.call('GET', KEYS[1]) or '0')
local to = tonumber(ARGV[1])
if v < to then
  redis.call('SET', KEYS[1], ARGV[1])
  return to
end
return v
