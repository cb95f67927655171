-- RL.ALL's CHECK + THROTTLE + QUOTA as a service writes it without RL.ALL:
-- a script that calls the three commands in turn and, when one refuses,
-- gives back what the earlier ones admitted with their REFUND option, so that
-- a refused request leaves no charge (atomic: the script runs alone). It
-- stops at the first refusal (the later clauses are not asked).
--
-- KEYS[1] = the RL.CHECK key, KEYS[2] = the RL.THROTTLE key,
-- KEYS[3] = the RL.QUOTA key
-- ARGV[1] = now (ms or *), ARGV[2] = cost, then three argument lists, each
-- preceded by its length:
--   n, count window [count window ...]          (RL.CHECK's rules)
--   n, burst count window [burst count window ...] (RL.THROTTLE's rules)
--   n, zone period limit [period limit ...]     (RL.QUOTA's zone and periods)
--
-- Returns RL.ALL's seven integers {limited, clause, rule, limit, remaining,
-- retry_after, reset_after}: refused, the first refusing command's reply with
-- its index (1, 2, 3); admitted, the command with the fewest requests of this
-- shape left (floor(remaining / max(cost, 1))), ties to the larger
-- reset_after, then to the lower index, as RL.ALL chooses.
local now, cost = ARGV[1], ARGV[2]
local cmds = {'RL.CHECK', 'RL.THROTTLE', 'RL.QUOTA'}
-- each command's arguments: key, now, its list, COST cost (REFUND appended
-- for a refund; unpack() expands only as the last argument of a call)
local args = {}
local i = 3
for c = 1, 3 do
  local n = tonumber(ARGV[i])
  local a = {KEYS[c], now}
  for j = i + 1, i + n do
    a[#a + 1] = ARGV[j]
  end
  a[#a + 1] = 'COST'
  a[#a + 1] = cost
  args[c] = a
  i = i + n + 1
end

local replies = {}
for c = 1, 3 do
  local r = redis.call(cmds[c], unpack(args[c]))
  if r[1] ~= 0 then
    for j = c - 1, 1, -1 do
      local a = args[j]
      a[#a + 1] = 'REFUND'
      redis.call(cmds[j], unpack(a))
    end
    return {1, c, r[2], r[3], r[4], r[5], r[6]}
  end
  replies[c] = r
end

local per = math.max(tonumber(cost), 1)
local best, left = 1, math.floor(replies[1][4] / per)
for c = 2, 3 do
  local l = math.floor(replies[c][4] / per)
  if l < left or (l == left and replies[c][6] > replies[best][6]) then
    best, left = c, l
  end
end
local r = replies[best]
return {0, best, r[2], r[3], r[4], -1, r[6]}
