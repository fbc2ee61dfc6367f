-- leave (standalone): remove the session from a group (publishing the change); reports expired
-- if the session no longer exists.
-- KEYS: session, session_groups, group   ARGV: session_id, group
-- Reply: {status}
-- The session's hash and set are read before the first write: a key of another type fails the
-- script (WRONGTYPE) with nothing written (Lua scripts are not rolled back).
local expires = tonumber(redis.call('HGET', KEYS[1], '${session.expires}'))
redis.call('SISMEMBER', KEYS[2], ARGV[2])
if redis.call('ZREM', KEYS[3], ARGV[1]) > 0 then
  redis.call('PUBLISH', KEYS[3], ARGV[2])
end
redis.call('SREM', KEYS[2], ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if not expires or expires <= now then
  return {${status.expired}}
end
return {${status.ok}}
