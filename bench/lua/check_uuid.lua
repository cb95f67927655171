-- Seed 000, approach A: multi-rule sliding window, one UUID member per request.
-- The seed's algorithm and call sequence (ZCOUNT per rule, ZADD, PEXPIRE,
-- ZREMRANGEBYSCORE); only the argument layout is tidied: the seed passes the
-- UUID and the time as KEYS[2] and KEYS[3], here they are ARGV so that KEYS
-- holds only real keys.
--
-- KEYS[1] = key
-- ARGV[1] = member (a UUID, made by the client)
-- ARGV[2] = now in ms
-- ARGV[3..] = count, window_ms, count, window_ms, ...
-- Returns true (integer 1) when limited, false (nil) when admitted.
local key = KEYS[1]
local uuid = ARGV[1]
local currentTime = tonumber(ARGV[2])
local expireTime = -1
for i = 3, #ARGV, 2 do
  local rateRuleCount = tonumber(ARGV[i])
  local rateRuleTime = tonumber(ARGV[i + 1])
  local count = redis.call('ZCOUNT', key, currentTime - rateRuleTime, currentTime)
  if tonumber(count) >= rateRuleCount then
    return true
  end
  if rateRuleTime > expireTime then
    expireTime = rateRuleTime
  end
end
redis.call('ZADD', key, currentTime, uuid)
redis.call('PEXPIRE', key, expireTime)
redis.call('ZREMRANGEBYSCORE', key, 0, currentTime - expireTime)
return false
