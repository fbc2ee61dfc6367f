-- keep_alive: renew the session, then move the expiry of each asked lease it holds and refresh
-- its membership of each asked group it is a member of, all in one call (standalone). With no
-- leases and no groups it touches only the session's slot: that is the session part of a
-- Cluster keep-alive.
-- KEYS: session, session_leases, session_groups, lease keys..., group keys...
-- ARGV: session_id, lease_count, lease names..., group names...
-- Reply: {status, remaining_ms, expires_ms, {{name, token}...}, {{member...} per group},
--         {lapse_ms per group: the time left of the first other member to expire, -1: none}}
local sid, nl = ARGV[1], tonumber(ARGV[2])
local ng = #KEYS - 3 - nl
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local s = redis.call('HMGET', KEYS[1], '${session.ttl}', '${session.expires}')
local ttl, expires = tonumber(s[1]), tonumber(s[2])
if not ttl or not expires or expires <= now then
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
  return {${status.expired}, 0, 0, {}, {}, {}}
end
-- Every key is read before the first write, so that a key of another type than Simba keeps
-- there fails the script (WRONGTYPE) with nothing written (Lua scripts are not rolled back): the
-- session's sets, each asked lease and each asked group.
redis.call('SISMEMBER', KEYS[2], '')
redis.call('SISMEMBER', KEYS[3], '')
local ls = {}
for i = 1, nl do
  ls[i] = redis.call('HMGET', KEYS[3 + i], '${lease.session}', '${lease.token}')
end
for j = 1, ng do
  redis.call('ZSCORE', KEYS[3 + nl + j], sid)
end
expires = now + ttl
local e = string.format('%d', expires)
redis.call('HSET', KEYS[1], '${session.expires}', e)
redis.call('PEXPIREAT', KEYS[1], e)
local held = {}
for i = 1, nl do
  local key, name, l = KEYS[3 + i], ARGV[2 + i], ls[i]
  -- A token that is not a plain decimal (someone else wrote it) is never coerced: the lease is
  -- not reported held, and the next acquire refuses it as corrupt_token.
  if l[1] == sid and l[2] and string.match(l[2], '^%d+$') then
    redis.call('HSET', key, '${lease.expires}', e)
    held[#held + 1] = {name, tonumber(l[2])}
  else
    redis.call('SREM', KEYS[2], name)
  end
end
redis.call('PEXPIREAT', KEYS[2], e)
local members, lapse = {}, {}
for j = 1, ng do
  local key, group = KEYS[3 + nl + j], ARGV[2 + nl + j]
  -- Refresh only: a keep-alive never makes the session a member (join does), so a keep-alive
  -- that crosses a leave does not undo it.
  local changed = redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  redis.call('ZADD', key, 'XX', e, sid)
  if changed > 0 then
    redis.call('PUBLISH', key, group)
  end
  members[j] = redis.call('ZRANGE', key, 0, -1)
  -- No message tells an expiry until a script drops it: the client reads the members when the
  -- first other member would expire (the two lowest scores: one of them is not this session).
  lapse[j] = -1
  local first = redis.call('ZRANGE', key, 0, 1, 'WITHSCORES')
  for k = 1, #first, 2 do
    if first[k] ~= sid then
      lapse[j] = tonumber(first[k + 1]) - now
      break
    end
  end
end
redis.call('PEXPIREAT', KEYS[3], e)
return {${status.ok}, ttl, expires, held, members, lapse}
