-- withdraw: remove the session from the lease's waiter queue (spi.Queuer.Withdraw) and, when the
-- lease was owed to its entry (no live session holds it and no live entry is ahead of it), publish
-- the name on the lease key's channel, as a release does: the next waiter, whom an acquire told
-- held_by naming the withdrawn session with its entry's time left (up to a TTL), tries again at
-- once instead of then. A withdraw from a held lease, or behind a live first waiter, publishes
-- nothing (the lease is not owed to the next waiter then).
-- KEYS: lease, waiters, waiting   ARGV: session_id, name
-- Reply: {removed}
local sid = ARGV[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- Every key is read before the first write: one of another type fails the script (WRONGTYPE)
-- with nothing written (Lua scripts are not rolled back).
local l = redis.call('HMGET', KEYS[1], '${lease.session}', '${lease.expires}')
redis.call('ZSCORE', KEYS[3], sid)
local rank = redis.call('ZRANK', KEYS[2], sid)
local owed = false
if rank then
  local until_ms = tonumber(l[2])
  owed = not (l[1] and until_ms and until_ms > now)
  -- The entries ahead in arrival order (as acquire ranks them), read in batches of 16: the first
  -- live one (its entry's expiry in the future) means the lease was owed to it.
  local i = 0
  while owed and i < rank do
    local ids = redis.call('ZRANGE', KEYS[2], i, math.min(i + 15, rank - 1))
    for _, id in ipairs(ids) do
      local x = tonumber(redis.call('ZSCORE', KEYS[3], id))
      if x and x > now then
        owed = false
        break
      end
    end
    i = i + 16
  end
end
redis.call('ZREM', KEYS[2], sid)
local removed = redis.call('ZREM', KEYS[3], sid)
if owed then
  redis.call('PUBLISH', KEYS[1], ARGV[2])
end
return {removed}
