-- Lists the live members of a group by the server's clock.
-- KEYS[1] group zset (id -> expiry ms)
local us, ms = now()
return redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. string.format('%.0f', ms), '+inf')
