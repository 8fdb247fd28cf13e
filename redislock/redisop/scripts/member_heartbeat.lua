-- Registers or refreshes a live member of a group and lists the live
-- members, by the server's clock: member_register and member_list in one
-- call.
-- KEYS[1] group zset (id -> expiry ms), KEYS[2] group values hash (id ->
-- entry); ARGV[1] id, ARGV[2] ttl ms, ARGV[3] entry (8-byte stamp, value)
-- Reply: the live ids, in expiry order.
local us, ms = now()
enroll(KEYS[1], KEYS[2], ms, ARGV[1], ARGV[2], ARGV[3])
return redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. string.format('%.0f', ms), '+inf')
