-- release_leases (Cluster, one slot): free each given lease the session holds with the given
-- token (token 0: whatever token the session holds, as a close does), publishing each name.
-- KEYS: lease keys...   ARGV: session_id, names..., tokens...
-- Reply: {released}
local sid, n = ARGV[1], #KEYS
local released = 0
for i = 1, n do
  local key, name, token = KEYS[i], ARGV[1 + i], ARGV[1 + n + i]
  local l = redis.call('HMGET', key, '${lease.session}', '${lease.token}')
  -- Tokens compare as the decimal strings the scripts write, never coerced ("0x10" is not 16).
  if l[1] == sid and (token == '0' or l[2] == token) then
    redis.call('HDEL', key, '${lease.session}', '${lease.expires}', '${lease.owner}')
    redis.call('PUBLISH', key, name)
    released = released + 1
  end
end
return {released}
