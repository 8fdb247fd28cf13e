-- Releases a lock held in a plain key (mutex, write side) and wakes waiters.
-- KEYS[1] lock key, KEYS[2] fence key
-- ARGV[1] owner, ARGV[2] wake-up channel, ARGV[3] wake-up payload
-- Returns 1 when released, 0 when the key is gone or held by another owner.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('PUBLISH', ARGV[2], ARGV[3])
return 1
