-- fence_hset: HSET one field of the caller's hash only if the token is at least the highest the
-- fence key has seen, raising that to the token; otherwise write nothing.
-- KEYS: fence, target   ARGV: token, field, value
-- Reply: {status, highest}
-- Tokens are plain decimals without sign or leading zeros; they compare as text (shorter is
-- smaller, then byte order), exact for every int64 where Lua's numbers are not.
local function plain(s) return string.match(s, '^[1-9]%d*$') ~= nil or s == '0' end
local function below(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end
local token = ARGV[1]
if not plain(token) then
  return redis.error_reply('ERR ${error.corrupt_token} token argument "' .. string.sub(token, 1, 32) .. '"')
end
local highest = redis.call('GET', KEYS[1])
if highest then
  if not plain(highest) then
    return redis.error_reply('ERR ${error.corrupt_token} ' .. KEYS[1] .. ' holds "' .. string.sub(highest, 1, 32) .. '"')
  end
  if below(token, highest) then
    return {${status.stale}, highest}
  end
end
-- The target first: if it is not a hash (WRONGTYPE), the script stops with nothing written,
-- not with the fence raised for a write that never landed (Lua scripts are not rolled back).
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
if highest ~= token then
  redis.call('SET', KEYS[1], token)
end
return {${status.ok}, token}
