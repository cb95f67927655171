-- The expiring semaphore services run today (Redis in Action 6.3, Stripe's
-- concurrent-requests limiter): a sorted set of the holders' request ids,
-- scored with each lease's expiry. Acquire: drop expired leases, count,
-- add. Release (not here): `ZREM key id` from the client.
--
-- KEYS[1] = semaphore key
-- ARGV[1] = the client's id, ARGV[2] = now ms, ARGV[3] = limit, ARGV[4] = ttl ms
-- Returns 1 when acquired, 0 when full.
local key, id = KEYS[1], ARGV[1]
local now, limit, ttl = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
if redis.call('ZCARD', key) < limit then
  redis.call('ZADD', key, now + ttl, id)
  return 1
end
return 0
