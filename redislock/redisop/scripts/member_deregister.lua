-- Removes a member from a group, with its entry. An absent id is no error.
-- KEYS[1] group zset (id -> expiry ms), KEYS[2] group values hash (id ->
-- entry); ARGV[1] id
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 1
