-- withdraw: remove the session from the lease's waiter queue (spi.Queuer.Withdraw).
-- KEYS: waiters, waiting   ARGV: session_id
-- Reply: {removed}
-- Both queues are read before the first write: one of another type fails the script (WRONGTYPE)
-- with nothing written (Lua scripts are not rolled back).
redis.call('ZSCORE', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[1], ARGV[1])
return {redis.call('ZREM', KEYS[2], ARGV[1])}
