-- acquire (standalone): take the lease for a live session if it is free, its holder's expiry
-- has passed, or the session already holds it (same token). The session's expiry and owner are
-- read from the session hash and copied into the lease hash.
-- KEYS: lease, session, session_leases   ARGV: session_id, name
-- Reply: {status, token, remaining_ms, holder, owner}
local sid, name = ARGV[1], ARGV[2]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local s = redis.call('HMGET', KEYS[2], '${session.owner}', '${session.expires}')
local expires = tonumber(s[2])
if not expires or expires <= now then
  return {${status.expired}, 0, 0, '', ''}
end
local l = redis.call('HMGET', KEYS[1], '${lease.session}', '${lease.token}', '${lease.expires}', '${lease.owner}')
local token
if l[1] == sid and l[2] then
  token = tonumber(l[2])
else
  local until_ms = tonumber(l[3])
  if l[1] and until_ms and until_ms > now then
    return {${status.held_by}, tonumber(l[2]) or 0, until_ms - now, l[1], l[4] or ''}
  end
  -- A new tenure: the next token, written in the same atomic script (the hash is never deleted,
  -- so tokens only grow).
  token = (tonumber(l[2]) or 0) + 1
end
redis.call('HSET', KEYS[1], '${lease.session}', sid, '${lease.token}', string.format('%d', token),
  '${lease.expires}', string.format('%d', expires), '${lease.owner}', s[1] or '')
-- The set exists (open_session) and carries the session's expiry; SADD keeps it.
redis.call('SADD', KEYS[3], name)
return {${status.ok}, token, expires - now, '', ''}
