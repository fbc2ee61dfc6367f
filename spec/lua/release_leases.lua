-- release_leases (Cluster, one slot): free each given lease the session holds with the given
-- token (token 0: whatever token the session holds, as a close does), publishing each name.
-- KEYS: lease keys...   ARGV: session_id, names..., tokens...
-- Reply: {released}
local sid, n = ARGV[1], #KEYS
local released = 0
-- Every lease is read before the first write: one of another type fails the script (WRONGTYPE)
-- with nothing written (Lua scripts are not rolled back).
local ls = {}
for i = 1, n do
  ls[i] = redis.call('HMGET', KEYS[i], '${lease.session}', '${lease.token}')
end
for i = 1, n do
  local key, name, token, l = KEYS[i], ARGV[1 + i], ARGV[1 + n + i], ls[i]
  -- Tokens compare as the decimal strings the scripts write, never coerced ("0x10" is not 16).
  if l[1] == sid and (token == '0' or l[2] == token) then
    redis.call('HDEL', key, '${lease.session}', '${lease.expires}', '${lease.owner}')
    redis.call('PUBLISH', key, name)
    released = released + 1
  end
end
return {released}
