-- Seed 000, approach B: multi-rule sliding window, the timestamp is the member
-- (on a duplicate, retry at +1 ms, then at a random offset). The seed's
-- algorithm and call sequence; the time is ARGV[1] here (KEYS[2] in the seed).
--
-- KEYS[1] = key
-- ARGV[1] = now in ms
-- ARGV[2..] = count, window_ms, count, window_ms, ...
-- Returns true (integer 1) when limited, false (nil) when admitted.
local key = KEYS[1]
local currentTime = ARGV[1]
local expireTime = -1
for i = 2, #ARGV, 2 do
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
redis.call('PEXPIRE', key, expireTime)
redis.call('ZREMRANGEBYSCORE', key, 0, currentTime - expireTime)
local maxRetries = 5
local retries = 0
while true do
  local result = redis.call('ZADD', key, currentTime, currentTime)
  if result == 1 then
    break
  else
    retries = retries + 1
    if retries >= maxRetries then
      local random_value = math.random(1, 1000)
      currentTime = currentTime + random_value
    else
      currentTime = currentTime + 1
    end
  end
end
return false
