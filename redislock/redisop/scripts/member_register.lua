-- Registers or refreshes a live member of a group, with its entry, by the
-- server's clock.
-- KEYS[1] group zset (id -> expiry ms), KEYS[2] group values hash (id ->
-- entry); ARGV[1] id, ARGV[2] ttl ms, ARGV[3] entry (8-byte stamp, value)
local us, ms = now()
enroll(KEYS[1], KEYS[2], ms, ARGV[1], ARGV[2], ARGV[3])
return 1
