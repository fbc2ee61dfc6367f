-- keep_alive_leases (Cluster, one slot): move the expiry of each given lease the session holds to
-- the session's new expiry (Redis TIME ms, from the session part of the keep-alive) and report
-- them (never moving an expiry back: a late call cannot shorten a lease); an expiry already past
-- is refused as expired.
-- KEYS: lease keys...   ARGV: session_id, expires_ms, names...
-- Reply: {status, remaining_ms, {{name, token}...}}
local sid, expires = ARGV[1], tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if not expires or expires <= now then
  return {${status.expired}, 0, {}}
end
local e = string.format('%d', expires)
-- Every lease is read before the first write: one of another type fails the script (WRONGTYPE)
-- with nothing written (Lua scripts are not rolled back).
local ls = {}
for i = 1, #KEYS do
  ls[i] = redis.call('HMGET', KEYS[i], '${lease.session}', '${lease.token}', '${lease.expires}')
end
local held = {}
for i = 1, #KEYS do
  local l = ls[i]
  -- A token that is not a plain decimal is never coerced: not reported held (see keep_alive).
  if l[1] == sid and l[2] and string.match(l[2], '^%d+$') then
    if (tonumber(l[3]) or 0) < expires then
      redis.call('HSET', KEYS[i], '${lease.expires}', e)
    end
    held[#held + 1] = {ARGV[2 + i], tonumber(l[2])}
  end
end
return {${status.ok}, expires - now, held}
