-- open_session: create (or, on a retried open, recreate) the session hash and its two sets, all
-- expiring at TIME + ttl_ms.
-- KEYS: session, session_leases, session_groups   ARGV: owner, ttl_ms
-- Reply: {remaining_ms, expires_ms}
local ttl = tonumber(ARGV[2])
if not ttl or ttl < 1 or ttl ~= math.floor(ttl) then
  return redis.error_reply('ERR ${error_prefix} ttl_ms must be a positive integer')
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expires = now + ttl
local e = string.format('%d', expires)
-- The hash is deleted too (a retried open writes all its fields again), so that nothing under
-- the session's keys makes HSET or SADD fail midway (Lua scripts are not rolled back).
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
redis.call('HSET', KEYS[1], '${session.owner}', ARGV[1], '${session.ttl}', string.format('%d', ttl), '${session.expires}', e)
-- The sets hold the empty string (never a name) from the start, so that they exist, with the
-- session's expiry, for the session's whole life: SADD and SREM then never need a PEXPIREAT.
redis.call('SADD', KEYS[2], '')
redis.call('SADD', KEYS[3], '')
redis.call('PEXPIREAT', KEYS[1], e)
redis.call('PEXPIREAT', KEYS[2], e)
redis.call('PEXPIREAT', KEYS[3], e)
return {ttl, expires}
