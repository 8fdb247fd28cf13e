-- lib.lua holds the functions the scripts share. Each script is sent with
-- the functions it uses prepended (scripts.go, libFor): keep exactly one
-- blank line between two functions and none inside one. Keys of one lock
-- share a {hash tag}, so every script touches a single cluster slot.

-- now returns the server time as microseconds and as milliseconds. Scripts
-- judge expiry by the server's clock, never a client's.
local function now()
  local t = redis.call('TIME')
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  return us, math.floor(us / 1000)
end

-- bump advances a durable counter (no TTL) and returns its new value: the
-- server time in microseconds, rounded up to a multiple of quantum µs when
-- quantum is given, or the last value + 1 when that is larger. A counter
-- lost with the data set therefore starts again above every value it
-- handed out before, as long as the server's clock has moved on by more
-- than it stepped back plus a quantum; a counter kept never goes back,
-- whatever the clock. Servers whose counters agree and whose clocks read
-- the same quantum advance them to the same value.
local function bump(key, us, quantum)
  quantum = tonumber(quantum) or 1
  if quantum > 1 then
    us = math.ceil(us / quantum) * quantum
  end
  local n = tonumber(redis.call('GET', key) or '0')
  if n < us then
    n = us
  else
    n = n + 1
  end
  redis.call('SET', key, string.format('%.0f', n))
  return n
end

-- fence returns the name's next fencing token: the server time in
-- microseconds, or the last token + 1 when that is larger, and remembers it
-- for ttl ms. Tokens therefore keep increasing across idle periods, key
-- expiry and a server restart that lost the data set, as long as the
-- server's clock does not step back further than the time between grants.
-- With counter (the name's durable counter, under replica acknowledgment)
-- the token is also above the counter's value and the counter is raised to
-- it, so a replica promoted with the counter issues larger tokens whatever
-- its clock says.
local function fence(key, us, ttl, counter)
  if counter then
    us = bump(counter, us)
  end
  local last = tonumber(redis.call('SET', key, string.format('%.0f', us), 'PX', ttl, 'GET') or '')
  if last and last >= us then
    -- Clock behind the last token (a step back, or a burst of grants
    -- within one microsecond): count on from the last token.
    us = last + 1
    redis.call('SET', key, string.format('%.0f', us), 'PX', ttl)
    if counter then
      redis.call('SET', counter, string.format('%.0f', us))
    end
  end
  return us
end

-- young returns how many ms the grants of this server must not count yet
-- (0 when guard ms is 0 or has passed): marker holds the server time in ms
-- at which the data set was first seen by a counted acquire, and is
-- written now when absent. A server that lost its data set has lost the
-- marker with it, so it is young again for guard ms after the first
-- acquire that follows; every grant it lost had expired by then.
local function young(marker, ms, guard)
  guard = tonumber(guard)
  if guard <= 0 then
    return 0
  end
  local born = tonumber(redis.call('GET', marker) or '')
  if not born then
    redis.call('SET', marker, string.format('%.0f', ms))
    born = ms
  end
  return math.max(born + guard - ms, 0)
end

-- again answers a request that already succeeded (the driver retried it after
-- a lost reply): the grant stands, with the last token handed out.
local function again(key, us, ttl, counter)
  local last = tonumber(redis.call('GET', key) or '')
  if last then
    return {1, last}
  end
  return {1, fence(key, us, ttl, counter)}
end

-- stretch makes key live at least ttl ms more, never shortening it.
local function stretch(key, ttl)
  if redis.call('PTTL', key) < tonumber(ttl) then
    redis.call('PEXPIRE', key, ttl)
  end
end

-- last_token returns the largest token named by rest, the part of a mutex
-- value after "<owner>:": "<token>", then "/<spare>" once a spare was drawn
-- for a local handoff (mutex_spare.lua), then "+" while waiters queue.
local function last_token(rest)
  local tok = tonumber(string.match(rest, '^(%d+)')) or 0
  local spare = tonumber(string.match(rest, '^%d+/(%d+)')) or 0
  return math.max(tok, spare)
end

-- busy is the answer when the lock is taken: 0 and the ms worth waiting
-- before trying again (0 when unknown).
local function busy(ms)
  if ms == nil or ms < 0 then
    ms = 0
  end
  return {0, ms}
end

-- Mutex wait queue: q maps each waiting owner to its arrival (µs), qx to
-- the expiry (ms) of its entry, which the waiter refreshes on every attempt,
-- qt to "<ttl ms> <channel>": the TTL a release hands the lock over with and
-- the channel the waiter's process listens on.

-- queue_head returns the first waiter whose entry is still live, its TTL
-- and its channel, dropping dead entries it finds in front; nil when none
-- waits.
local function queue_head(q, qx, qt, ms)
  while true do
    local head = redis.call('ZRANGE', q, 0, 0)[1]
    if not head then
      return nil
    end
    local exp = tonumber(redis.call('ZSCORE', qx, head))
    local ttl, channel = string.match(redis.call('HGET', qt, head) or '', '^(%d+) (.*)$')
    if exp and ttl and exp > ms then
      return head, tonumber(ttl), channel
    end
    redis.call('ZREM', q, head)
    redis.call('ZREM', qx, head)
    redis.call('HDEL', qt, head)
  end
end

-- enqueue puts owner in the wait queue at score, or keeps the place it
-- has, and records entry ("<ttl ms> <channel>") with a life of wait ms.
local function enqueue(q, qx, qt, owner, score, ms, wait, entry)
  redis.call('ZADD', q, 'NX', score, owner)
  redis.call('ZADD', qx, ms + wait, owner)
  redis.call('HSET', qt, owner, entry)
  stretch(q, wait)
  stretch(qx, wait)
  stretch(qt, wait)
end

local function dequeue(q, qx, qt, owner)
  redis.call('ZREM', q, owner)
  redis.call('ZREM', qx, owner)
  redis.call('HDEL', qt, owner)
end

-- Membership: a group's zset maps each member id to its expiry (ms), and
-- its values hash maps the id to its entry: an 8-byte big-endian stamp
-- followed by the value's bytes. Every registration writes both, so the
-- hash holds exactly the zset's ids; a zset written by a version that kept
-- no values has ids without an entry, listed with an empty value.

-- enroll purges the expired members of a group, with their entries, then
-- registers id until ms + ttl with entry. Entries left without a member by
-- a version that kept no values (its purge or Deregister dropped the id
-- alone) show as a hash longer than the zset and are dropped too.
local function enroll(zset, vals, ms, id, ttl, entry)
  local gone = redis.call('ZRANGEBYSCORE', zset, '-inf', ms)
  for _, g in ipairs(gone) do
    redis.call('HDEL', vals, g)
  end
  redis.call('ZREMRANGEBYSCORE', zset, '-inf', ms)
  redis.call('ZADD', zset, ms + tonumber(ttl), id)
  redis.call('HSET', vals, id, entry)
  if redis.call('HLEN', vals) > redis.call('ZCARD', zset) then
    for _, g in ipairs(redis.call('HKEYS', vals)) do
      if not redis.call('ZSCORE', zset, g) then
        redis.call('HDEL', vals, g)
      end
    end
  end
  stretch(zset, ttl)
  stretch(vals, ttl)
end
