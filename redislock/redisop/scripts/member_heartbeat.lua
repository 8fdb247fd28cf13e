-- Registers or refreshes a live member of a group and lists the live
-- members, by the server's clock: member_register and member_list in one
-- call.
-- KEYS[1] group zset (id -> expiry ms); ARGV[1] id, ARGV[2] ttl ms
local us, ms = now()
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ms)
redis.call('ZADD', KEYS[1], ms + tonumber(ARGV[2]), ARGV[1])
stretch(KEYS[1], ARGV[2])
return redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. string.format('%.0f', ms), '+inf')
