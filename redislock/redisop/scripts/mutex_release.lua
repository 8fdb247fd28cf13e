-- Releases a mutex, or withdraws a waiter that gives up, and hands the lock
-- straight to the first live waiter: the lock key is set to
-- "<waiter>:<token>" for the waiter's TTL, and the grant is published as
-- "<payload>#<waiter>#<token>" on the waiter's own channel, so the waiter
-- (and no other process) learns that it holds the lock without another
-- round trip.
-- KEYS[1] lock key, KEYS[2..4] wait queue (see lib.lua), KEYS[5]
-- (optional) the name's durable counter: a handoff's token is also above
-- it, and raises it (replica acknowledgment, Client.WithReplicaAck, and
-- RedLock's tickets below)
-- ARGV[1] owner, ARGV[2] wake-up payload, ARGV[3] '1' when a waiter
-- withdraws (leave the queue first), ARGV[4] the shared channel on which a
-- release of an awaited lock that has nobody queued announces ARGV[2],
-- ARGV[5] '1' for RedLock waiters in ticket order (see below), with
-- KEYS[5] the name's durable counter, KEYS[6] the server's boot marker,
-- ARGV[6] the young-server guard in ms and ARGV[7] the counter's quantum
-- in µs (see young and bump in lib.lua)
-- Returns 1 when the lock was released, 0 when ARGV[1] did not hold it.
if ARGV[3] == '1' then
  dequeue(KEYS[2], KEYS[3], KEYS[4], ARGV[1])
end
local v = redis.call('GET', KEYS[1])
local mine = ARGV[1] .. ':'
if not v or string.sub(v, 1, #mine) ~= mine then
  return 0
end
if string.sub(v, -1) ~= '+' then
  -- Nobody queued while we held it.
  redis.call('DEL', KEYS[1])
  return 1
end
-- (A holder is never in the queue: every grant dequeues its owner.)
local us, ms = now()
local heir, ttl, channel = queue_head(KEYS[2], KEYS[3], KEYS[4], ms)
if not heir then
  -- Awaited by callers that poll instead of queueing (or whose entries
  -- expired): tell them it is free.
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[4], ARGV[2])
  return 1
end
-- RedLock waiters in ticket order (ARGV[5], mutex_acquire.lua): every
-- server owes the lock to the same first waiter, so each hands it to that
-- one, with a token from the name's counter, as an acquire would grant it;
-- the waiter holds the lock once a majority announced theirs. A server
-- still young (its grants must not count) only wakes the waiter, which
-- then takes the lock on every server; so does any release to an entry
-- without an inbox, on the shared channel.
local tickets = ARGV[5] == '1'
if channel == '' or (tickets and (not KEYS[6] or young(KEYS[6], ms, ARGV[6]) > 0)) then
  redis.call('DEL', KEYS[1])
  if channel == '' then
    channel = ARGV[4]
  end
  redis.call('PUBLISH', channel, ARGV[2] .. '#' .. heir)
  return 1
end
dequeue(KEYS[2], KEYS[3], KEYS[4], heir)
local tok
if tickets then
  tok = string.format('%.0f', bump(KEYS[5], us, ARGV[7]))
else
  local last = last_token(string.sub(v, #mine + 1))
  if KEYS[5] then
    last = math.max(last, tonumber(redis.call('GET', KEYS[5]) or '0'))
  end
  if last >= us then
    us = last + 1
  end
  tok = string.format('%.0f', us)
  if KEYS[5] then
    redis.call('SET', KEYS[5], tok)
  end
end
local val = heir .. ':' .. tok
if redis.call('EXISTS', KEYS[2]) == 1 then
  val = val .. '+'
end
redis.call('SET', KEYS[1], val, 'PX', ttl)
redis.call('PUBLISH', channel, ARGV[2] .. '#' .. heir .. '#' .. tok)
return 1
