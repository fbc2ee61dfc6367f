-- keep_alive_group (Cluster, the group's slot): the group part of a Cluster keep-alive. Refresh
-- the session's membership score to the session's new expiry if it is a member (ZADD XX GT:
-- never a join, so a keep-alive that crosses a leave does not undo it, and never lowering a
-- score a newer keep-alive set; Redis >= 6.2), then drop the expired members (publishing the
-- change) and return the live ones, in expiry order.
-- KEYS: group   ARGV: session_id, expires_ms, group
-- Reply: {{member...}, lapse_ms: the time left of the first other member to expire (-1: none)}
redis.call('ZADD', KEYS[1], 'XX', 'GT', ARGV[2], ARGV[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) > 0 then
  redis.call('PUBLISH', KEYS[1], ARGV[3])
end
local lapse = -1
local first = redis.call('ZRANGE', KEYS[1], 0, 1, 'WITHSCORES')
for k = 1, #first, 2 do
  if first[k] ~= ARGV[1] then
    lapse = tonumber(first[k + 1]) - now
    break
  end
end
return {redis.call('ZRANGE', KEYS[1], 0, -1), lapse}
