-- acquire_at (Cluster): acquire touching only keys of the lease's slot (the lease and its waiter
-- queue). The session's owner and expiry (in Redis TIME ms, from its last keep-alive reply) come
-- from the client; an expiry already past is refused as expired. A re-acquire by the holder keeps its token and never moves the lease's
-- expiry back.
-- KEYS: lease, waiters, waiting   ARGV: session_id, owner, expires_ms, queued
-- Reply: {status, token, remaining_ms, holder, owner}
local sid, owner, expires = ARGV[1], ARGV[2], tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if not expires or expires <= now then
  return {${status.expired}, 0, 0, '', ''}
end
local l = redis.call('HMGET', KEYS[1], '${lease.session}', '${lease.token}', '${lease.expires}', '${lease.owner}', '${lease.waiters}')
-- The waiter queue (spi.Queuer): KEYS[2] is a sorted set of waiting session ids scored by
-- arrival (Redis TIME µs), KEYS[3] the same ids scored by their entry's expiry (ms): the
-- waiter's session expiry as of its latest queued acquire. An entry whose expiry has passed is
-- dead; dead entries are pruned when the lease is free. The lease's waiters field is set while the
-- queue may hold entries, so that an acquire with nobody waiting reads no queue key.
local queued = ARGV[4] == '1'
local function entry(id)
  return tonumber(redis.call('ZSCORE', KEYS[3], id))
end
-- wait registers the session as a waiter (a live entry keeps its place) when queued.
local function wait()
  if not queued then
    return
  end
  local x = entry(sid)
  if not x or x <= now then
    redis.call('ZADD', KEYS[2], tonumber(t[1]) * 1000000 + tonumber(t[2]), sid)
  end
  redis.call('ZADD', KEYS[3], expires, sid)
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
  -- A re-acquire never moves the expiry back: a keep-alive may have moved it past ARGV's.
  token = last
  expires = math.max(expires, tonumber(l[3]) or 0)
else
  local until_ms = tonumber(l[3])
  if l[1] and until_ms and until_ms > now then
    wait()
    return {${status.held_by}, last, until_ms - now, l[1], l[4] or ''}
  end
  -- A free lease goes to the first live waiter: prune dead entries, then refuse anyone else,
  -- naming that waiter, with its entry's time left. An empty queue clears the waiters field.
  while l[5] do
    local first = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
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
    redis.call('ZREM', KEYS[2], first)
    redis.call('ZREM', KEYS[3], first)
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
  redis.call('ZREM', KEYS[3], sid)
  redis.call('ZREM', KEYS[2], sid)
end
redis.call('HSET', KEYS[1], '${lease.session}', sid, '${lease.token}', string.format('%d', token),
  '${lease.expires}', string.format('%d', expires), '${lease.owner}', owner)
return {${status.ok}, token, expires - now, '', ''}
