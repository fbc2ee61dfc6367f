-- close_session: release each given lease the session holds (publishing each), leave each given
-- group (publishing each change), and delete the session with its sets. With no leases and no
-- groups it touches only the session's slot (the session part of a Cluster close).
-- KEYS: session, session_leases, session_groups, lease keys..., group keys...
-- ARGV: session_id, lease_count, lease names..., group names...
-- Reply: {released}
local sid, nl = ARGV[1], tonumber(ARGV[2])
local ng = #KEYS - 3 - nl
local released = 0
-- Every lease and group is read before the first write: a key of another type fails the script
-- (WRONGTYPE) with nothing written (Lua scripts are not rolled back).
local holders = {}
for i = 1, nl do
  holders[i] = redis.call('HGET', KEYS[3 + i], '${lease.session}')
end
for j = 1, ng do
  redis.call('ZSCORE', KEYS[3 + nl + j], sid)
end
for i = 1, nl do
  local key, name = KEYS[3 + i], ARGV[2 + i]
  if holders[i] == sid then
    redis.call('HDEL', key, '${lease.session}', '${lease.expires}', '${lease.owner}')
    redis.call('PUBLISH', key, name)
    released = released + 1
  end
end
for j = 1, ng do
  local key, group = KEYS[3 + nl + j], ARGV[2 + nl + j]
  if redis.call('ZREM', key, sid) > 0 then
    redis.call('PUBLISH', key, group)
  end
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
return {released}
