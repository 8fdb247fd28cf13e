-- A waiting writer gives up: drop its writer-waiting marker and wake the
-- readers it was holding back.
-- KEYS[1] marker; ARGV[1] owner, ARGV[2] wake-up channel, ARGV[3] payload
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], ARGV[3])
  return 1
end
return 0
