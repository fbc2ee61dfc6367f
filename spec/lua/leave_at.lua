-- leave_at (Cluster, the group's slot): remove the session from the group (publishing the
-- change); reports expired if the session's expiry from the client has passed.
-- KEYS: group   ARGV: session_id, expires_ms, group
-- Reply: {status}
if redis.call('ZREM', KEYS[1], ARGV[1]) > 0 then
  redis.call('PUBLISH', KEYS[1], ARGV[3])
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expires = tonumber(ARGV[2])
if not expires or expires <= now then
  return {${status.expired}}
end
return {${status.ok}}
