-- Seed 004: count, then lock out. The interceptor's GET / SET / INCR / DEL
-- flow, moved into one script so that it is atomic.
--
-- KEYS[1] = lock key, KEYS[2] = count key
-- ARGV[1] = window ms, ARGV[2] = max, ARGV[3] = lock time ms
-- Returns {limited, count}: {0, new count} admitted; {1, count} when the
-- count reached max and the lock was set; {1, 0} when already locked.
if redis.call('GET', KEYS[1]) then
  return {1, 0}
end
local count = redis.call('GET', KEYS[2])
if not count then
  redis.call('SET', KEYS[2], 1, 'PX', ARGV[1])
  return {0, 1}
end
count = tonumber(count)
if count < tonumber(ARGV[2]) then
  return {0, redis.call('INCR', KEYS[2])}
end
redis.call('SET', KEYS[1], 1, 'PX', ARGV[3])
redis.call('DEL', KEYS[2])
return {1, count}
