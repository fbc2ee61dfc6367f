-- acquire_at (Cluster): acquire touching only the lease key. The session's owner and expiry (in
-- Redis TIME ms, from its last keep-alive reply) come from the client; an expiry already past is
-- refused as expired. A re-acquire by the holder keeps its token and never moves the lease's
-- expiry back.
-- KEYS: lease   ARGV: session_id, owner, expires_ms
-- Reply: {status, token, remaining_ms, holder, owner}
local sid, owner, expires = ARGV[1], ARGV[2], tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if not expires or expires <= now then
  return {${status.expired}, 0, 0, '', ''}
end
local l = redis.call('HMGET', KEYS[1], '${lease.session}', '${lease.token}', '${lease.expires}', '${lease.owner}')
local token
if l[1] == sid and l[2] then
  -- A re-acquire never moves the expiry back: a keep-alive may have moved it past ARGV's.
  token = tonumber(l[2])
  expires = math.max(expires, tonumber(l[3]) or 0)
else
  local until_ms = tonumber(l[3])
  if l[1] and until_ms and until_ms > now then
    return {${status.held_by}, tonumber(l[2]) or 0, until_ms - now, l[1], l[4] or ''}
  end
  token = (tonumber(l[2]) or 0) + 1
end
redis.call('HSET', KEYS[1], '${lease.session}', sid, '${lease.token}', string.format('%d', token),
  '${lease.expires}', string.format('%d', expires), '${lease.owner}', owner)
return {${status.ok}, token, expires - now, '', ''}
