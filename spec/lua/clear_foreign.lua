-- clear_foreign: free a lease whose holder field is exactly the foreign value the caller saw
-- (not a client session id), keeping its token; otherwise change nothing.
-- KEYS: lease   ARGV: holder
-- Reply: {cleared}
if redis.call('HGET', KEYS[1], '${lease.session}') ~= ARGV[1] then
  return {0}
end
redis.call('HDEL', KEYS[1], '${lease.session}', '${lease.expires}', '${lease.owner}')
return {1}
