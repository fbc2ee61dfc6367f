-- join_at (Cluster, the group's slot): add or refresh the session's membership, scored by the
-- session's expiry from the client (Redis TIME ms), and return the live members. Used by Join
-- and by the group part of a Cluster keep-alive. An expiry already past removes the member and
-- is refused as expired.
-- KEYS: group   ARGV: session_id, expires_ms, group
-- Reply: {status, {member...}}
local sid, expires = ARGV[1], tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local changed = redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local status = ${status.expired}
if expires and expires > now then
  changed = changed + redis.call('ZADD', KEYS[1], string.format('%d', expires), sid)
  status = ${status.ok}
else
  changed = changed + redis.call('ZREM', KEYS[1], sid)
end
if changed > 0 then
  redis.call('PUBLISH', KEYS[1], ARGV[3])
end
if status ~= ${status.ok} then
  return {status, {}}
end
return {status, redis.call('ZRANGE', KEYS[1], 0, -1)}
