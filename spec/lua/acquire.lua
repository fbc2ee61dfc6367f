-- acquire (standalone): take the lease for a live session if it is free, its holder's expiry
-- has passed, or the session already holds it (same token). The session's expiry and owner are
-- read from the session hash and copied into the lease hash.
-- KEYS: lease, session, session_leases, waiters, waiting   ARGV: session_id, name, queued
-- Reply: {status, token, remaining_ms, holder, owner}
local sid, name = ARGV[1], ARGV[2]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local s = redis.call('HMGET', KEYS[2], '${session.owner}', '${session.expires}')
local expires = tonumber(s[2])
if not expires or expires <= now then
  return {${status.expired}, 0, 0, '', ''}
end
-- Every key of another type than Simba keeps there fails the script (WRONGTYPE) before its first
-- write, since Lua scripts are not rolled back: the session's lease set, written last, is read
-- here, so that a grant never lands in the lease hash without the set naming it.
redis.call('SISMEMBER', KEYS[3], name)
local l = redis.call('HMGET', KEYS[1], '${lease.session}', '${lease.token}', '${lease.expires}', '${lease.owner}', '${lease.waiters}')
-- The waiter queue (spi.Queuer): KEYS[4] is a sorted set of waiting session ids scored by
-- arrival (Redis TIME µs), KEYS[5] the same ids scored by their entry's expiry (ms): the
-- waiter's session expiry as of its latest queued acquire. An entry whose expiry has passed is
-- dead; dead entries are pruned when the lease is free. The lease's waiters field is set while the
-- queue may hold entries, so that an acquire with nobody waiting reads no queue key.
local queued = ARGV[3] == '1'
local function entry(id)
  return tonumber(redis.call('ZSCORE', KEYS[5], id))
end
-- wait registers the session as a waiter (a live entry keeps its place) when queued.
local function wait()
  if not queued then
    return
  end
  local x = entry(sid)
  if not x or x <= now then
    redis.call('ZADD', KEYS[4], tonumber(t[1]) * 1000000 + tonumber(t[2]), sid)
  end
  redis.call('ZADD', KEYS[5], expires, sid)
  if not l[5] then
    redis.call('HSET', KEYS[1], '${lease.waiters}', '1')
    l[5] = '1'
  end
end
-- The stored token, never coerced: absent (never granted, or the hash was lost) is 0; anything
-- but a plain decimal is corrupt (tonumber would read "0x10" as 16 and "-5" as -5). Lua numbers
-- are doubles, exact below 2^53 only, so a token there or above has no exact successor.
local last = 0
if l[2] then
  if not string.match(l[2], '^%d+$') then
    return redis.error_reply('ERR ${error.corrupt_token} ' .. KEYS[1] .. ' holds token "' .. string.sub(l[2], 1, 32) .. '"')
  end
  last = tonumber(l[2])
  if last >= ${token_limit} then
    return redis.error_reply('ERR ${error.token_overflow} ' .. KEYS[1] .. ' holds token ' .. l[2] .. ', at or above 2^53')
  end
end
local token
local head = false -- the session is the first live waiter of the free lease
if l[1] == sid and l[2] then
  token = last
else
  local until_ms = tonumber(l[3])
  if l[1] and until_ms and until_ms > now then
    wait()
    return {${status.held_by}, last, until_ms - now, l[1], l[4] or ''}
  end
  -- A free lease goes to the first live waiter: prune dead entries, then refuse anyone else,
  -- naming that waiter, with its entry's time left. An empty queue clears the waiters field.
  while l[5] do
    local first = redis.call('ZRANGE', KEYS[4], 0, 0)[1]
    if not first then
      redis.call('HDEL', KEYS[1], '${lease.waiters}')
      break
    end
    local x = entry(first)
    if x and x > now then
      if first ~= sid then
        wait()
        return {${status.held_by}, last, x - now, first, ''}
      end
      head = true
      break
    end
    redis.call('ZREM', KEYS[4], first)
    redis.call('ZREM', KEYS[5], first)
  end
  -- A new tenure: max(last + 1, Redis TIME in microseconds since the epoch), written in this
  -- atomic script. Simba never deletes the hash, but Redis may lose it (eviction under an
  -- allkeys-* policy, a restart without AOF, an operator's DEL): the clock floor keeps the next
  -- token above every earlier one while the server's clock does not go back (DESIGN.md §5).
  token = math.max(last + 1, tonumber(t[1]) * 1000000 + tonumber(t[2]))
  if token >= ${token_limit} then
    return redis.error_reply('ERR ${error.token_overflow} ' .. KEYS[1] .. ': the next token would reach 2^53')
  end
end
-- The grantee leaves the queue (it can only have a live entry if it was the head waiter).
if head then
  redis.call('ZREM', KEYS[5], sid)
  redis.call('ZREM', KEYS[4], sid)
end
redis.call('HSET', KEYS[1], '${lease.session}', sid, '${lease.token}', string.format('%d', token),
  '${lease.expires}', string.format('%d', expires), '${lease.owner}', s[1] or '')
-- The set exists (open_session) and carries the session's expiry; SADD keeps it.
redis.call('SADD', KEYS[3], name)
return {${status.ok}, token, expires - now, '', ''}
