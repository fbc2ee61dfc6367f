-- withdraw: remove the session from the lease's waiter queue (spi.Queuer.Withdraw).
-- KEYS: waiters, waiting   ARGV: session_id
-- Reply: {removed}
redis.call('ZREM', KEYS[1], ARGV[1])
return {redis.call('ZREM', KEYS[2], ARGV[1])}
