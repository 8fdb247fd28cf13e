-- KEYS[1] lock key, KEYS[2..4] wait queue (see lib.lua; a caller that does
-- not wait, ARGV[3] = 0, may pass the lock key alone), KEYS[5] (optional)
-- the name's durable counter: when given, a grant advances it (bump) and
-- its value is the token, recorded in the lock key (replica acknowledgment,
-- Client.WithReplicaAck), and KEYS[6] (optional) is the server's boot
-- marker, checked against ARGV[5] (Client.AcquireCounted)
-- ARGV[1] owner, ARGV[2] ttl ms, ARGV[3] wait ms (0: TryAcquire, do not queue),
-- ARGV[4] the channel to announce a handoff to this waiter on, or '' to
-- mark the lock as awaited without queueing (the release then announces on
-- the shared channel that the lock is free: see mutex_release.lua)
-- The lock key holds "<owner>:<token>", with "+" appended once waiters
-- queue, so a release without waiters is a GET and a DEL, and the token of
-- a grant handed over by a release is kept with it.
-- ARGV[5] (with KEYS[6]) the young-server guard in ms (see young in lib.lua)
-- and ARGV[6] the counter's time quantum in µs (see bump in lib.lua)
-- ARGV[7] (optional) a RedLock waiter's ticket: when given, the queue is
-- ordered by tickets, which the waiter sends alike to every server, so
-- every server has the same first waiter, and a free lock is granted only
-- to the first live waiter (a waiting caller joins with its ticket first;
-- a TryAcquire sends 0 and does not join). ARGV[4] is then the waiter's
-- inbox: a release (mutex_release.lua, ticket mode) hands the lock to the
-- first waiter and announces it there (a young server only announces the
-- turn, and the waiter takes the lock on every server).
-- Returns {1, token} when granted, {0, holder's remaining ms} when held;
-- with KEYS[6], a third element: when granted, the ms this server is still
-- young; when held, the name's counter, below the token of every grant
-- made after this reply (a handover by a release in ticket order), and a
-- fourth: the ms this server is still young (its counter may have been
-- lost with its data, and may be behind a handover's token). A
-- waiting caller joins the FIFO queue, or refreshes its entry for wait ms;
-- a release hands the lock to the first live waiter (mutex_release.lua).
local us, ms = now()
local left = 0
if KEYS[6] then
  left = young(KEYS[6], ms, ARGV[5])
end
local function refuse(wait_ms)
  local r = busy(wait_ms)
  if KEYS[6] then
    r[3] = tonumber(redis.call('GET', KEYS[5]) or '0')
    r[4] = left
  end
  return r
end
local mine = ARGV[1] .. ':'
local wait = tonumber(ARGV[3])
local ticket = tonumber(ARGV[7] or '')
if ticket then
  if wait > 0 then
    enqueue(KEYS[2], KEYS[3], KEYS[4], ARGV[1], ticket, ms, wait, ARGV[2] .. ' ' .. ARGV[4])
  end
  -- A free lock owed to an earlier waiter is refused; a held one is
  -- answered below, as ever (a grant of ours whose reply was lost stands).
  local head = queue_head(KEYS[2], KEYS[3], KEYS[4], ms)
  if head and head ~= ARGV[1] and redis.call('EXISTS', KEYS[1]) == 0 then
    return refuse(0)
  end
end
local holder = redis.call('SET', KEYS[1], mine .. string.format('%.0f', us), 'NX', 'PX', ARGV[2], 'GET')
if not holder then
  -- Free: granted. A waiter that got here by polling leaves the queue,
  -- or a release would hand the lock back to it. Under tickets, waiters
  -- left in the queue mark the lock awaited, so its release announces.
  local awaited = false
  if wait > 0 and redis.call('EXISTS', KEYS[2]) == 1 then
    dequeue(KEYS[2], KEYS[3], KEYS[4], ARGV[1])
    awaited = ticket ~= nil and redis.call('EXISTS', KEYS[2]) == 1
  end
  local tok = us
  if KEYS[5] then
    tok = bump(KEYS[5], us, ARGV[6])
  end
  if tok ~= us or awaited then
    local val = mine .. string.format('%.0f', tok)
    if awaited then
      val = val .. '+'
    end
    redis.call('SET', KEYS[1], val, 'KEEPTTL')
  end
  if KEYS[5] then
    return {1, tok, left}
  end
  return {1, us}
end
if string.sub(holder, 1, #mine) == mine then
  -- Handed over by a release whose message this waiter has not seen, or
  -- granted by a request whose reply was lost: claim it for a full TTL.
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if KEYS[2] then
    dequeue(KEYS[2], KEYS[3], KEYS[4], ARGV[1])
  end
  if KEYS[5] and not KEYS[6] then
    -- The grant's token, recorded in the key when it was made or handed
    -- over (mutex_release.lua).
    return {1, tonumber(string.match(holder, ':(%d+)')), 0}
  end
  if KEYS[5] then
    -- The counter was bumped when this grant was made.
    local n = tonumber(redis.call('GET', KEYS[5]) or '0')
    if n > 0 then
      return {1, n, left}
    end
    return {1, bump(KEYS[5], us, ARGV[6]), left}
  end
  return {1, tonumber(string.match(holder, ':(%d+)'))}
end
if wait > 0 then
  if ARGV[4] ~= '' and not ticket then
    enqueue(KEYS[2], KEYS[3], KEYS[4], ARGV[1], us, ms, wait, ARGV[2] .. ' ' .. ARGV[4])
  end
  if string.sub(holder, -1) ~= '+' then
    redis.call('SET', KEYS[1], holder .. '+', 'KEEPTTL')
  end
end
return refuse(redis.call('PTTL', KEYS[1]))
