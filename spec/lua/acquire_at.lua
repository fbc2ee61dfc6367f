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
-- The stored token, never coerced: absent (never granted, or the hash was lost) is 0; anything
-- but a plain decimal is corrupt (tonumber would read "0x10" as 16 and "-5" as -5). Lua numbers
-- are doubles, exact below 2^53 only, so a token there or above has no exact successor.
local last = 0
if l[2] then
  if not string.match(l[2], '^%d+$') then
    return redis.error_reply('ERR ${error.corrupt_token} ' .. KEYS[1] .. ' holds token "' .. string.sub(l[2], 1, 32) .. '"')
  end
  last = tonumber(l[2])
  if last >= 9007199254740992 then
    return redis.error_reply('ERR ${error.token_overflow} ' .. KEYS[1] .. ' holds token ' .. l[2] .. ', at or above 2^53')
  end
end
local token
if l[1] == sid and l[2] then
  -- A re-acquire never moves the expiry back: a keep-alive may have moved it past ARGV's.
  token = last
  expires = math.max(expires, tonumber(l[3]) or 0)
else
  local until_ms = tonumber(l[3])
  if l[1] and until_ms and until_ms > now then
    return {${status.held_by}, last, until_ms - now, l[1], l[4] or ''}
  end
  -- A new tenure: max(last + 1, Redis TIME in microseconds since the epoch), written in this
  -- atomic script. Simba never deletes the hash, but Redis may lose it (eviction under an
  -- allkeys-* policy, a restart without AOF, an operator's DEL): the clock floor keeps the next
  -- token above every earlier one while the server's clock does not go back (DESIGN.md §5).
  token = math.max(last + 1, tonumber(t[1]) * 1000000 + tonumber(t[2]))
  if token >= 9007199254740992 then
    return redis.error_reply('ERR ${error.token_overflow} ' .. KEYS[1] .. ': the next token would reach 2^53')
  end
end
redis.call('HSET', KEYS[1], '${lease.session}', sid, '${lease.token}', string.format('%d', token),
  '${lease.expires}', string.format('%d', expires), '${lease.owner}', owner)
return {${status.ok}, token, expires - now, '', ''}
