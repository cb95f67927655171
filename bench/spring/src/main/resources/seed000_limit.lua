-- Seed 000's sliding-window script, "Approach B: Timestamp as Member Value",
-- copied verbatim from shared/seeds/000 (the aspect passes KEYS = {key, now}
-- and ARGV = count, windowMs, count, windowMs, ...). Only these comments are ours.
-- 1. Get parameters
local key = KEYS[1]
local currentTime = KEYS[2]
-- 2. Determine max TTL
local expireTime = -1
-- 3. Check each rule
for i = 1, #ARGV, 2 do
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
-- 4. Set expiry
redis.call('PEXPIRE', key, expireTime)
-- 5. Clean old entries
redis.call('ZREMRANGEBYSCORE', key, 0, currentTime - expireTime)
-- 6. Add with retry on duplicate score
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
