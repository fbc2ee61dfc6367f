-- join (standalone): add a live session to a group, scored by the session's expiry.
-- KEYS: session, session_groups, group   ARGV: session_id, group
-- Reply: {status}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expires = tonumber(redis.call('HGET', KEYS[1], '${session.expires}'))
if not expires or expires <= now then
  return {${status.expired}}
end
-- The session's set is read before the first write: of another type, it fails the script
-- (WRONGTYPE) with the group untouched (Lua scripts are not rolled back).
redis.call('SISMEMBER', KEYS[2], ARGV[2])
local e = string.format('%d', expires)
local changed = redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now) + redis.call('ZADD', KEYS[3], e, ARGV[1])
redis.call('SADD', KEYS[2], ARGV[2])
if changed > 0 then
  redis.call('PUBLISH', KEYS[3], ARGV[2])
end
return {${status.ok}}
