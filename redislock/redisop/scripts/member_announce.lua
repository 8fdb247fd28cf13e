-- Registers or refreshes a live member of a group with its entry and lists
-- the live members with theirs, by the server's clock: member_heartbeat
-- that also returns the entries.
-- KEYS[1] group zset (id -> expiry ms), KEYS[2] group values hash (id ->
-- entry); ARGV[1] id, ARGV[2] ttl ms, ARGV[3] entry (8-byte stamp, value)
-- Reply: id, entry, id, entry, ... for the live members in expiry order;
-- the entry is "" for an id registered without one (an older version).
local us, ms = now()
enroll(KEYS[1], KEYS[2], ms, ARGV[1], ARGV[2], ARGV[3])
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. string.format('%.0f', ms), '+inf')
local out = {}
for _, id in ipairs(ids) do
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', KEYS[2], id) or ''
end
return out
