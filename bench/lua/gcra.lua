-- GCRA (the token bucket of RL.THROTTLE, redis-cell, Stripe) for one rule, as
-- a user without the module would write it from SPEC.md's arithmetic: "burst
-- units at once, refilled at count units per window ms". The state is a hash
-- at KEYS[1], one field per rule named by its window in ms ("3600000"),
-- holding the rule's theoretical arrival time (TAT).
--
-- Precision: Lua numbers are doubles, exact for integers up to 2^53 only. The
-- module keeps times in exact nanoseconds (t_ns ~ 1.8e18, beyond 2^53); this
-- script keeps them in MICROSECONDS (now ~ 1.8e15 us, exact until the year
-- 2255). The emission interval T = floor(window * 1000 / count) us is then
-- the module's T = floor(window * 10^6 / count) ns only when that is a whole
-- number of us: for rules where it is not, the two round T differently and
-- can disagree near the edge of a bucket. The benchmark's rules all have a
-- whole number of us (it checks the decisions against the module's), and the
-- stored TAT is in us, so the field is NOT interoperable with the module's
-- (which holds ns).
--
-- The TAT is written with string.format('%.0f'): a Lua number passed to
-- redis.call is converted with '%.14g', which would write 1.8e15 us as
-- "1.8000000000000e+15" and lose the last digits.
--
-- Expiry: absolute, when the bucket is full again (PEXPIREAT ceil(TAT) ms),
-- as the module sets it for a caller whose clock is not behind the server's
-- (the benchmark's clock runs ahead). Unlike the module, the script does not
-- add a lagging caller's lag: its state can expire before its own clock says
-- the bucket is full.
--
-- KEYS[1] = key
-- ARGV[1] = now in ms, ARGV[2] = burst, ARGV[3] = count, ARGV[4] = window ms,
-- ARGV[5] = cost (optional, default 1)
-- Returns RL.THROTTLE's reply for one rule:
-- {limited, 1, burst, remaining, retry_after ms (-1 admitted), reset_after ms}.
local key = KEYS[1]
local field = ARGV[4]
local t = tonumber(ARGV[1]) * 1000
local burst = tonumber(ARGV[2])
local T = math.floor(tonumber(ARGV[4]) * 1000 / tonumber(ARGV[3]))
local cost = tonumber(ARGV[5] or 1)
local tau = T * burst
local tat = tonumber(redis.call('HGET', key, field)) or t
local base = math.max(tat, t)
local new = base + T * cost
if new - tau <= t then
  redis.call('HSET', key, field, string.format('%.0f', new))
  redis.call('PEXPIREAT', key, math.ceil(new / 1000))
  return {0, 1, burst, math.floor((tau - (new - t)) / T), -1, math.ceil((new - t) / 1000)}
end
return {1, 1, burst, math.max(0, math.floor((tau - (base - t)) / T)),
        math.ceil((new - tau - t) / 1000), math.ceil((base - t) / 1000)}
