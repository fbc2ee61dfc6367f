-- members: drop the group's expired members (publishing the change) and return the live ones,
-- in expiry order.
-- KEYS: group   ARGV: group
-- Reply: {{member...}}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) > 0 then
  redis.call('PUBLISH', KEYS[1], ARGV[1])
end
return {redis.call('ZRANGE', KEYS[1], 0, -1)}
