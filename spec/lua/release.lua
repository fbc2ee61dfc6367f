-- release (standalone): free the lease if the session holds it with this token, and publish the
-- name on the lease key's channel; otherwise change nothing.
-- KEYS: lease, session_leases   ARGV: session_id, name, token
-- Reply: {released}
local l = redis.call('HMGET', KEYS[1], '${lease.session}', '${lease.token}')
-- Tokens compare as the decimal strings the scripts write, never coerced ("0x10" is not 16).
if l[1] ~= ARGV[1] or l[2] ~= ARGV[3] then
  return {0}
end
-- The session's set is read before the first write: of another type, it fails the script
-- (WRONGTYPE) with the lease untouched (Lua scripts are not rolled back).
redis.call('SISMEMBER', KEYS[2], ARGV[2])
redis.call('HDEL', KEYS[1], '${lease.session}', '${lease.expires}', '${lease.owner}')
redis.call('SREM', KEYS[2], ARGV[2])
redis.call('PUBLISH', KEYS[1], ARGV[2])
return {1}
