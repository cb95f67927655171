#!lua name=ratelimit
-- redis-ratelimit as a Redis Functions library: every RL.* command of the
-- module as function rl_<command>, for servers that load no module (managed
-- Redis and Valkey). SPEC.md, "The Functions library", is the contract:
-- replies, errors, keys, scores, fields and expiries are the module's, so a
-- server moves between the two with every count kept.
--
--   FUNCTION LOAD REPLACE "$(cat functions/ratelimit.lua)"
--   FCALL rl_check 1 key * 10 60000
--   FCALL rl_all 2 a b * CHECK 1 5 60000 LEASE 2 3 60000 TOKEN t
--
-- Lua 5.1 as Redis and Valkey run it: numbers are doubles, so RL.THROTTLE's
-- nanosecond times (beyond 2^53) use the exact integers of section "Big
-- integers" below. One file, no build step: the version below is the project's
-- (VERSION; scripts/stamp_version.py writes it, its --check checks it).

local RL_VERSION = 300 -- VERSION as major*10000 + minor*100 + patch (scripts/stamp_version.py writes it)

-- Redis runs a library's top level with no standard library in reach
-- (string, math, table are nil while FUNCTION LOAD runs): the code is built
-- on the first call, and the top level only registers the functions.
local function build()
local MAX_SAFE = 9007199254740991
local MAX_COST = 10000
local MAX_RULES = 64
local MAX_KEYS = 64
local MAX_TOKENS = 64
local MAX_NOW = 253402300799999
local MINUTE_MS, HOUR_MS, DAY_MS = 60000, 3600000, 86400000
local WRONGTYPE = 'WRONGTYPE Operation against a key holding the wrong kind of value'
local UNSAFE_SCORE = "' holds a score that is not finite or outside -9007199254740991..9007199254740991"

local floor, ceil, max, min = math.floor, math.ceil, math.max, math.min
local byte, char, sub, find, format, upper =
  string.byte, string.char, string.sub, string.find, string.format, string.upper
local concat, tinsert = table.concat, table.insert
local call, pcall_redis = redis.call, redis.pcall

-- Errors travel as their reply text through error(text, 0) (the server
-- turns error objects into strings in pcall) and become the reply in run(),
-- so no script suffix reaches the caller.
local function fail(text) error(text, 0) end
local function arg_error(text) fail('ERR ' .. text) end

-- A Redis call whose error (WRONGTYPE) becomes the command's error reply.
local function rcall(...)
  local r = pcall_redis(...)
  if type(r) == 'table' and r.err then error(r.err, 0) end
  return r
end

-- A command with a long tail of arguments (Lua 5.1's unpack() stops near
-- 8000 values), sent in chunks of whole groups: cmd(head..., items[i..j]).
-- Returns the sum of the integer replies.
local CHUNK = 2000
local function call_chunked(head, items, group)
  local total = 0
  local i, n = 1, #items
  while i <= n do
    local cmd = {}
    for j = 1, #head do cmd[j] = head[j] end
    local stop = min(n, i + CHUNK * group - 1)
    for j = i, stop do cmd[#cmd + 1] = items[j] end
    total = total + call(unpack(cmd))
    i = stop + 1
  end
  return total
end

-- Integers written as %.17g prints them: plain digits below 1e17. A whole
-- number in that range goes through '%d' (the same digits; an integer
-- conversion costs a fraction of a float one); -0 and fractions stay %.17g.
local function istr(n)
  if n == floor(n) and n ~= 0 and n < 1e17 and n > -1e17 then return format('%d', n) end
  return format('%.17g', n)
end

---------------------------------------------------------------- show()
-- The module's show(): at most 64 characters (then "..."), control
-- characters as '?', bytes that are not UTF-8 as U+FFFD (Rust's lossy
-- decoding: one per maximal ill-formed subpart).
local FFFD = '\239\191\189'
local function show(s)
  local out, n, i, len = {}, 0, 1, #s
  while i <= len do
    if n == 64 then out[#out + 1] = '...'; break end
    local b = byte(s, i)
    local piece, step
    if b < 0x80 then
      piece = (b < 0x20 or b == 0x7f) and '?' or char(b); step = 1
    else
      local need, lo, hi = 0, 0x80, 0xbf
      if b >= 0xc2 and b <= 0xdf then need = 1
      elseif b >= 0xe0 and b <= 0xef then
        need = 2
        if b == 0xe0 then lo = 0xa0 elseif b == 0xed then hi = 0x9f end
      elseif b >= 0xf0 and b <= 0xf4 then
        need = 3
        if b == 0xf0 then lo = 0x90 elseif b == 0xf4 then hi = 0x8f end
      end
      if need == 0 then piece = FFFD; step = 1
      else
        local j, ok = 1, true
        while j <= need do
          local c = byte(s, i + j)
          if not c then ok = false; break end
          if j == 1 then
            if c < lo or c > hi then ok = false; break end
          elseif c < 0x80 or c > 0xbf then ok = false; break end
          j = j + 1
        end
        if ok then
          piece = sub(s, i, i + need); step = need + 1
          if b == 0xc2 and byte(s, i + 1) <= 0x9f then piece = '?' end -- C1 controls
        else
          piece = FFFD; step = j
        end
      end
    end
    out[#out + 1] = piece; n = n + 1; i = i + step
  end
  return concat(out)
end

---------------------------------------------------------------- integers
-- As the module parses them (as INCRBY does): optional '-', digits, no
-- leading zeros, no '+', no '-0'; nil when not an integer or outside [lo, hi]
-- (lo, hi within +-(2^53-1)).
local function parse_int(s, lo, hi)
  local v
  if s == '0' then v = 0
  elseif find(s, '^%-?[1-9]%d*$') and #s <= 17 then v = tonumber(s)
  else return nil end
  if v < lo or v > hi then return nil end
  return v
end

local function expected(lo, hi)
  return 'expected an integer from ' .. istr(lo) .. ' to ' .. istr(hi)
end

local function ranged(s, what, lo, hi)
  local v = parse_int(s, lo, hi)
  if v == nil then
    arg_error('invalid ' .. what .. " '" .. show(s) .. "': " .. expected(lo, hi))
  end
  return v
end

local function starts_options(s)
  local b = byte(s, 1)
  return b ~= nil and ((b >= 65 and b <= 90) or (b >= 97 and b <= 122))
end

---------------------------------------------------------------- clock
local function server_ms()
  local t = call('TIME')
  return tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000)
end

-- The server's clock when the call needs it: for '*', or for a write (a
-- late caller's lag, the reap bound, a counter's TTL); a peek or a release
-- at an explicit time reads no clock.
local function clock_for(now_arg, write)
  if write or now_arg == '*' then return server_ms() end
  return 0
end

-- now: '*' (the server's clock) or an integer in [0, 2^53-1].
local function parse_now(s, server_time)
  if s == '*' then return server_time end
  local t = parse_int(s, 0, MAX_SAFE)
  if t == nil then
    arg_error("invalid now '" .. show(s) .. "': expected '*' or an integer from 0 to " .. istr(MAX_SAFE))
  end
  return t
end

---------------------------------------------------------------- big integers
-- Non-negative integers as little-endian limbs of base 10^7 (products of two
-- limbs stay below 2^53), for RL.THROTTLE's nanoseconds (up to ~2^128).
local BASE = 10000000

local function bn(n) -- n: an integer double, 0 <= n < 2^54
  local a, i = {}, 1
  repeat
    local r = n % BASE
    a[i] = r; n = (n - r) / BASE; i = i + 1
  until n == 0
  return a
end

local function bnorm(a)
  local n = #a
  while n > 1 and a[n] == 0 do a[n] = nil; n = n - 1 end
  return a
end

local function bcmp(a, b)
  local na, nb = #a, #b
  if na ~= nb then return na < nb and -1 or 1 end
  for i = na, 1, -1 do
    local x, y = a[i], b[i]
    if x ~= y then return x < y and -1 or 1 end
  end
  return 0
end

local function badd(a, b)
  local c, carry = {}, 0
  for i = 1, max(#a, #b) do
    local s = (a[i] or 0) + (b[i] or 0) + carry
    if s >= BASE then c[i] = s - BASE; carry = 1 else c[i] = s; carry = 0 end
  end
  if carry > 0 then c[#c + 1] = carry end
  return c
end

local function bsub(a, b) -- a >= b
  local c, borrow = {}, 0
  for i = 1, #a do
    local s = a[i] - (b[i] or 0) - borrow
    if s < 0 then c[i] = s + BASE; borrow = 1 else c[i] = s; borrow = 0 end
  end
  return bnorm(c)
end

local function bmul(a, b)
  local c = {}
  for i = 1, #a + #b do c[i] = 0 end
  for i = 1, #a do
    local x = a[i]
    if x ~= 0 then
      local carry = 0
      for j = 1, #b do
        local s = c[i + j - 1] + x * b[j] + carry
        carry = floor(s / BASE)
        c[i + j - 1] = s - carry * BASE
      end
      local k = i + #b
      while carry > 0 do
        local s = c[k] + carry
        carry = floor(s / BASE)
        c[k] = s - carry * BASE
        k = k + 1
      end
    end
  end
  return bnorm(c)
end

local function bnum(a) -- as a double (exact below 2^53)
  local v = 0
  for i = #a, 1, -1 do v = v * BASE + a[i] end
  return v
end

local function bstr(a)
  local n = #a
  local parts = {format('%d', a[n])}
  for i = n - 1, 1, -1 do parts[#parts + 1] = format('%07d', a[i]) end
  return concat(parts)
end

local function bparse(s) -- decimal digits (already validated)
  local a, i = {}, #s
  while i >= 1 do
    local j = max(1, i - 6)
    a[#a + 1] = tonumber(sub(s, j, i))
    i = j - 1
  end
  return bnorm(a)
end

-- floor(a / d), a mod d for 1 <= d <= 9e8.
local function bdivsmall(a, d)
  local q, r = {}, 0
  for i = #a, 1, -1 do
    local x = r * BASE + a[i]
    local qi = floor(x / d)
    q[i] = qi; r = x - qi * d
  end
  return bnorm(q), r
end

-- floor(a / b), a mod b (long division, a trial digit per limb).
local function bdivmod(a, b)
  if #b == 1 and b[1] <= 900000000 then
    local q, r = bdivsmall(a, b[1])
    return q, bn(r)
  end
  local q, r = {}, {0}
  local bd = bnum(b)
  for i = #a, 1, -1 do
    tinsert(r, 1, a[i]); bnorm(r)
    local d = 0
    if bcmp(r, b) >= 0 then
      d = floor(bnum(r) / bd)
      if d >= BASE then d = BASE - 1 end
      local p = bmul(b, bn(d))
      while bcmp(p, r) > 0 do d = d - 1; p = bsub(p, b) end
      r = bsub(r, p)
      while bcmp(r, b) >= 0 do d = d + 1; r = bsub(r, b) end
    end
    q[i] = d
  end
  return bnorm(q), r
end

local NS = bn(1000000)
local ZERO = {0}

-- t * 10^6 for a time in ms (0 <= t < 2^53): one limb of base 10^7 holds
-- the last digit of t and the six zeros.
local function ns_of(t)
  local last = t % 10
  local a = bn((t - last) / 10)
  tinsert(a, 1, last * 1000000)
  return bnorm(a)
end

-- floor(a / b) when it is below 2^53 (a, b > 0): a float estimate, then
-- exact corrections.
local function bdivq(a, b)
  local q = floor(bnum(a) / bnum(b))
  if q < 0 then q = 0 end
  local p = bmul(b, bn(q))
  while bcmp(p, a) > 0 do q = q - 1; p = bsub(p, b) end
  while true do
    local p2 = badd(p, b)
    if bcmp(p2, a) > 0 then break end
    q = q + 1; p = p2
  end
  return q
end

local function ceil_ms_b(a) -- ceil(a / 10^6), a >= 0, as a bigint
  local q, r = bdivsmall(a, 1000000)
  if r > 0 then q = badd(q, {1}) end
  return q
end

---------------------------------------------------------------- expiry grid
local crc_table = {}
for i = 0, 255 do
  local c = i * 256
  for _ = 1, 8 do
    if c >= 32768 then c = (c * 2 - 65536); c = bit.bxor(c, 0x1021)
    else c = c * 2 end
  end
  crc_table[i] = c % 65536
end
-- What the hot paths keep across calls (each bounded): a key's crc16, the
-- rule list of a one-rule RL.CHECK, the parts of the member names.
local kept = {crc = {}, crc_n = 0, one_rule = {}, one_rule_n = 0, prefix_of = -1, prefix = false, pairs = {}}
local function crc16(s)
  local c = kept.crc[s]
  if c then return c end
  c = 0
  for i = 1, #s do
    local idx = bit.bxor(floor(c / 256), byte(s, i))
    c = bit.bxor((c % 256) * 256, crc_table[idx])
  end
  if kept.crc_n >= 1024 then kept.crc, kept.crc_n = {}, 0 end
  kept.crc[s] = c; kept.crc_n = kept.crc_n + 1
  return c
end

-- PEXPIRETIME: nil for a missing key or one without expiry.
local function expire_time(key)
  local e = call('PEXPIRETIME', key)
  if e < 0 then return nil end
  return e
end

-- The grid point at or after x ("Expiries on a grid"), or nil when the
-- expiry e already covers x. x: a number (below 2^53) or a bigint.
local function grid_expiry(key, w, e, x)
  local step = max(1, floor(w / 8))
  local offset = crc16(key) % step
  if type(x) == 'table' then
    if bcmp(x, bn(MAX_SAFE)) <= 0 then x = bnum(x)
    else
      if e and e >= bnum(x) then return nil end
      local _, late = bdivmod(bsub(x, bn(offset)), bn(step))
      late = bnum(late)
      if late == 0 then return bstr(x) end
      return bstr(badd(x, bn(step - late)))
    end
  end
  if e and e >= x then return nil end
  local late = (x - offset) % step
  if late == 0 then return x end
  return x + step - late
end

---------------------------------------------------------------- binding
-- The binding rule: refused, the violated rule with the largest retry_after
-- (-1, waiting cannot help, first); admitted, the smallest remaining, ties to
-- the larger reset_after, then the lower index. outcomes[i] = {violated,
-- remaining, retry_after, reset_after}.
local BIG = 1e300
local function binding(outcomes)
  local refused, admitted
  for i = 1, #outcomes do
    local o = outcomes[i]
    if o[1] then
      local w = o[3] == -1 and BIG or o[3]
      if not refused or w > (outcomes[refused][3] == -1 and BIG or outcomes[refused][3]) then
        refused = i
      end
    else
      local b = admitted and outcomes[admitted]
      if not b or o[2] < b[2] or (o[2] == b[2] and o[4] > b[4]) then admitted = i end
    end
  end
  return refused or admitted
end

---------------------------------------------------------------- options
-- COST, REFUND, DEBIT, RESERVE after the rules (RL.CHECK, RL.THROTTLE,
-- RL.QUOTA and their peeks).
-- The options each command accepts, and the options of a call that has
-- none (shared, only read).
local OPTIONS = {write = {refund = true, debit = true}, peek = {},
  throttle_write = {refund = true, debit = true, reserve = true}, throttle_peek = {reserve = true},
  none = {}}
local function parse_options(args, from, accepts, t)
  if from > #args then return OPTIONS.none end
  local o = {}
  local i = from
  while i <= #args do
    local name = args[i]
    local up = upper(name)
    local twice
    if up == 'COST' then twice = o.cost_arg ~= nil
    elseif up == 'REFUND' and accepts.refund then twice = o.refund
    elseif up == 'DEBIT' and accepts.debit then twice = o.debit
    elseif up == 'RESERVE' and accepts.reserve then twice = o.reserve ~= nil
    else
      local names = {'COST'}
      if accepts.refund then names[#names + 1] = 'REFUND' end
      if accepts.debit then names[#names + 1] = 'DEBIT' end
      if accepts.reserve then names[#names + 1] = 'RESERVE' end
      local list
      if #names == 1 then list = names[1]
      else list = concat(names, ', ', 1, #names - 1) .. ' or ' .. names[#names] end
      arg_error("syntax error: unknown option '" .. show(name) .. "' (expected " .. list .. ')')
    end
    if twice then arg_error('syntax error: option ' .. up .. ' given twice') end
    if up ~= 'COST' then
      local first = (o.refund and 'REFUND') or (o.debit and 'DEBIT') or (o.reserve and 'RESERVE')
      if first then
        arg_error('syntax error: option ' .. up .. ' cannot be combined with ' .. first)
      end
    end
    if up == 'COST' then
      if i + 1 > #args then arg_error('syntax error: option COST needs a value') end
      o.cost_arg = args[i + 1]; i = i + 2
    elseif up == 'REFUND' then o.refund = true; i = i + 1
    elseif up == 'DEBIT' then o.debit = true; i = i + 1
    else
      if i + 1 > #args then arg_error('syntax error: option RESERVE needs a value') end
      local value = args[i + 1]
      local most = MAX_SAFE - max(t, 0)
      local wait = parse_int(value, 0, most)
      if wait == nil then
        arg_error("invalid RESERVE max_wait '" .. show(value) .. "': " .. expected(0, most) ..
          ' (now + max_wait at most ' .. istr(MAX_SAFE) .. ')')
      end
      o.reserve = wait; i = i + 2
    end
  end
  return o
end

local function option_cost(o, lo, hi)
  if o.cost_arg == nil then return 1 end
  return ranged(o.cost_arg, 'cost', lo, hi)
end

local function rule_error(what, s, n)
  arg_error('invalid ' .. what .. " '" .. show(s) .. "' for rule " .. n .. ': ' .. expected(1, MAX_SAFE))
end

local function too_many_rules(n)
  arg_error('too many rules: ' .. n .. ' given, at most ' .. MAX_RULES .. ' per call')
end

-- Splits now, rules, options: the options start at the first argument after
-- now that begins with a letter. Returns t, the index of the first rule
-- argument, the index after the last one.
local function split_rules(args, server_time)
  if #args < 1 then arg_error('missing now') end
  local t = parse_now(args[1], server_time)
  local n = #args
  local stop = n + 1
  for i = 2, n do
    local b = byte(args[i], 1) -- starts_options(), inline: called per argument
    if b ~= nil and ((b >= 65 and b <= 90) or (b >= 97 and b <= 122)) then stop = i; break end
  end
  return t, 2, stop
end

---------------------------------------------------------------- sorted sets
local function zscore_at(key, rank)
  local r = call('ZRANGE', key, rank, rank, 'WITHSCORES')
  return tonumber(r[2])
end

local function safe_score(s)
  return s == s and s >= -MAX_SAFE and s <= MAX_SAFE
end

local function unsafe_score(key)
  fail("ERR sorted set at '" .. show(key) .. UNSAFE_SCORE)
end

-- The highest score (WRONGTYPE checked here), every score checked to be
-- within +-(2^53-1); the size is read when needed (zlen).
local LOW_UNSAFE = '(-' .. istr(MAX_SAFE)
local function zextremes(key)
  local hi = rcall('ZRANGE', key, '-1', '-1', 'WITHSCORES')
  if not hi[2] then return {len = 0} end
  local highest = tonumber(hi[2])
  if not safe_score(highest) or call('ZCOUNT', key, '-inf', LOW_UNSAFE) > 0 then unsafe_score(key) end
  return {highest = highest}
end

local function zlen(key, ex)
  if not ex.len then ex.len = call('ZCARD', key) end
  return ex.len
end

local function count_newer_than(key, ex, edge)
  if not ex.highest or ex.highest <= edge then return 0 end
  return call('ZCOUNT', key, '(' .. istr(edge), '+inf')
end

---------------------------------------------------------------- member names
-- 8 characters as the module writes them: a letter, then 7 of [0-9A-Za-z]
-- (never a decimal number, never a UUID), from a sequence seeded once from
-- the clock; a name already present is skipped.
local LETTERS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'
local ALNUM = '0123456789' .. LETTERS
local SPACE = 52 * 62 ^ 7
local seq
-- The first six characters change once per 3844 names: kept; the last two
-- come from a table of pairs filled as they are met.
local function next_name()
  if not seq then
    local t = call('TIME')
    seq = (tonumber(t[1]) * 1000003 + tonumber(t[2]) * 7919) % SPACE
  end
  local n = seq
  seq = (seq + 1) % SPACE
  local low = n % 3844
  local m = (n - low) / 3844
  if m ~= kept.prefix_of then
    local d6 = m % 62; m = (m - d6) / 62
    local d5 = m % 62; m = (m - d5) / 62
    local d4 = m % 62; m = (m - d4) / 62
    local d3 = m % 62; m = (m - d3) / 62
    local d2 = m % 62; m = (m - d2) / 62
    kept.prefix_of = (n - low) / 3844
    kept.prefix = char(byte(LETTERS, m % 52 + 1), byte(ALNUM, d2 + 1), byte(ALNUM, d3 + 1), byte(ALNUM, d4 + 1),
      byte(ALNUM, d5 + 1), byte(ALNUM, d6 + 1))
  end
  local pair = kept.pairs[low]
  if not pair then
    local d8 = low % 62
    pair = char(byte(ALNUM, (low - d8) / 62 + 1), byte(ALNUM, d8 + 1))
    kept.pairs[low] = pair
  end
  return kept.prefix .. pair
end

---------------------------------------------------------------- RL.CHECK
-- One rule's list by its two argument strings (a cached pair was valid):
-- the usual call parses nothing and makes no table. The lists are only read.
-- Returns t, rules, cost, refund, debit (parse_check: as a table).
local function parse_check_values(args, write, server_time)
  if #args == 3 then -- now count window, a pair met before: no options, cost 1
    local by_count = kept.one_rule[args[2]]
    local rules = by_count and by_count[args[3]]
    if rules then return parse_now(args[1], server_time), rules, 1 end
  end
  local t, first, stop = split_rules(args, server_time)
  local rules
  local n = 0
  local i = first
  if stop == first + 2 then
    local by_count = kept.one_rule[args[first]]
    rules = by_count and by_count[args[first + 1]]
    if rules then n = 1; i = stop end
  end
  if not rules then rules = {} end
  while i < stop do
    n = n + 1
    if i + 1 >= stop then
      arg_error('missing window for rule ' .. n .. ": rules are 'count window' pairs")
    end
    local count = parse_int(args[i], 1, MAX_SAFE)
    if not count then rule_error('count', args[i], n) end
    local window = parse_int(args[i + 1], 1, MAX_SAFE)
    if not window then rule_error('window', args[i + 1], n) end
    rules[n] = {count = count, window = window}
    i = i + 2
  end
  if n == 0 then arg_error("at least one rule 'count window' is required") end
  if n > MAX_RULES then too_many_rules(n) end
  if n == 1 and i == stop and stop == first + 2 then
    if kept.one_rule_n >= 256 then kept.one_rule, kept.one_rule_n = {}, 0 end
    local by_count = kept.one_rule[args[first]]
    if not by_count then by_count = {}; kept.one_rule[args[first]] = by_count end
    if not by_count[args[first + 1]] then
      by_count[args[first + 1]] = rules; kept.one_rule_n = kept.one_rule_n + 1
    end
  end
  local o = parse_options(args, stop, write and OPTIONS.write or OPTIONS.peek, t)
  local smallest = rules[1].count
  for j = 2, n do smallest = min(smallest, rules[j].count) end
  local cost
  if o.refund or o.debit then cost = option_cost(o, 1, MAX_COST)
  else cost = option_cost(o, write and 1 or 0, min(smallest, MAX_COST)) end
  return t, rules, cost, o.refund, o.debit
end

local function parse_check(args, write, server_time)
  local t, rules, cost, refund, debit = parse_check_values(args, write, server_time)
  return {t = t, rules = rules, cost = cost, refund = refund, debit = debit}
end

-- The module's decide() over the key's log.
local function check_decide(key, ex, rules, cost, t)
  local n = #rules
  if n == 1 then -- one rule admitted: the reply without the binding rule's tables
    local r = rules[1]
    local used = count_newer_than(key, ex, t - r.window)
    if used + cost <= r.count then
      local newest_after
      if cost > 0 then newest_after = ceil(max(ex.highest or t, t))
      elseif ex.highest then newest_after = ceil(ex.highest) end
      return {0, 1, r.count, r.count - used - cost, -1,
        newest_after and max((newest_after - t) + r.window, 0) or 0}
    end
  end
  local used, seen = {}, {}
  for i = 1, n do
    local w = rules[i].window
    local u = seen[w]
    if u == nil then
      u = count_newer_than(key, ex, t - w)
      seen[w] = u
    end
    used[i] = u
  end
  local violated = false
  for i = 1, n do
    if used[i] + cost > rules[i].count then violated = true; break end
  end
  local outcomes = {}
  if not violated then
    local newest_after
    if cost > 0 then newest_after = ceil(max(ex.highest or t, t))
    elseif ex.highest then newest_after = ceil(ex.highest) end
    for i = 1, n do
      local r = rules[i]
      outcomes[i] = {false, r.count - used[i] - cost, -1,
        newest_after and max((newest_after - t) + r.window, 0) or 0}
    end
    local b = binding(outcomes)
    return {0, b, rules[b].count, outcomes[b][2], -1, outcomes[b][4]}
  end
  local newest = ceil(ex.highest or t)
  for i = 1, n do
    local r = rules[i]
    local v = used[i] + cost > r.count
    local retry = -1
    if v then
      local k = used[i] + cost - r.count
      local first_in_window = max(zlen(key, ex) - used[i], 0)
      retry = (ceil(zscore_at(key, first_in_window + k - 1)) - t) + r.window
    end
    outcomes[i] = {v, max(r.count - used[i], 0), retry, (newest - t) + r.window}
  end
  local b = binding(outcomes)
  local o = outcomes[b]
  return {1, b, rules[b].count, o[2], o[3], o[4]}
end

-- Adds cost members scored t, trims and moves the expiry (an admission or a
-- debit).
local function check_record(key, ex, rules, cost, t, server_time)
  local maxw = 1
  for i = 1, #rules do maxw = max(maxw, rules[i].window) end
  local newest_after = ceil(max(ex.highest or t, t))
  local x = max(newest_after, server_time) + maxw
  if x > MAX_SAFE then x = badd(bn(max(newest_after, server_time)), bn(maxw)) end
  local at = grid_expiry(key, maxw, expire_time(key), x)
  local added = 0
  if cost == 1 then -- one member: no argument lists
    local ts = istr(t)
    while call('ZADD', key, 'NX', ts, next_name()) == 0 do end
    added = 1
  end
  while added < cost do
    local items = {}
    local ts = istr(t) -- one conversion (Redis converts each number argument)
    for _ = 1, cost - added do
      items[#items + 1] = ts
      items[#items + 1] = next_name()
    end
    added = added + call_chunked({'ZADD', key, 'NX'}, items, 2)
  end
  if at then
    local through = t - maxw
    if ex.highest then call('ZREMRANGEBYSCORE', key, '-inf', istr(through)) end
    call('PEXPIREAT', key, at)
  end
end

-- A refund: removes min(cost, used over the longest window) members, the
-- highest scores first (ties: the greatest name). Returns the key's
-- extremes after it.
local function check_refund(key, ex, rules, cost, t)
  if not ex.highest then return ex end
  local maxw = 1
  for i = 1, #rules do maxw = max(maxw, rules[i].window) end
  local n = min(count_newer_than(key, ex, t - maxw), cost)
  if n <= 0 then return ex end
  call_chunked({'ZREM', key}, call('ZRANGE', key, -n, -1), 1)
  return zextremes(key)
end

local function check_run(key, args, write, refund_only)
  local server_time = clock_for(args[1], write)
  local t, rules, cost, refund, debit = parse_check_values(args, write, server_time)
  if refund_only and not refund then arg_error('rl_refund runs refunds only: add REFUND') end
  local ex = zextremes(key)
  if refund then
    return check_decide(key, check_refund(key, ex, rules, cost, t), rules, 0, t)
  end
  if debit then
    check_record(key, ex, rules, cost, t, server_time)
    return check_decide(key, zextremes(key), rules, 0, t)
  end
  local reply = check_decide(key, ex, rules, cost, t)
  if write and reply[1] == 0 then check_record(key, ex, rules, cost, t, server_time) end
  return reply
end

---------------------------------------------------------------- RL.THROTTLE
local MAX_TOL = bmul(bn(MAX_SAFE), NS)
local MAX_TAT = badd(MAX_TOL, MAX_TOL)
local MAX_TAT_STR = bstr(MAX_TAT)
local rule_cache, rule_cache_n = {}, 0

-- A rule's emission interval and tolerance in ns (exact), cached by its
-- arguments.
local function gcra_rule(burst, count, window, n, ck)
  local q1, r1 = bdivmod(bn(window), bn(count))
  local q2 = bdivmod(bmul(r1, NS), bn(count))
  local interval = badd(bmul(q1, NS), q2)
  if bcmp(interval, ZERO) == 0 then
    arg_error('invalid rule ' .. n .. ': count ' .. istr(count) .. ' over window ' .. istr(window) ..
      ' gives an emission interval below 1 ns')
  end
  local tol = bmul(interval, bn(burst))
  if bcmp(tol, MAX_TOL) > 0 then
    arg_error('invalid rule ' .. n .. ': burst ' .. istr(burst) .. ' * emission interval ' ..
      bstr(interval) .. ' ns (count ' .. istr(count) .. ' over window ' .. istr(window) ..
      ') is above ' .. istr(MAX_SAFE) .. ' ms')
  end
  local r = {burst = burst, window = window, interval = interval, tol = tol, field = istr(window)}
  -- doubles for the fast path (exact below 2^53)
  if bcmp(tol, bn(MAX_SAFE)) <= 0 then r.iv, r.tv = bnum(interval), bnum(tol) end
  if rule_cache_n >= 256 then rule_cache, rule_cache_n = {}, 0 end
  local a = rule_cache[ck[1]]
  if not a then a = {}; rule_cache[ck[1]] = a end
  local b = a[ck[2]]
  if not b then b = {}; a[ck[2]] = b end
  b[ck[3]] = r; rule_cache_n = rule_cache_n + 1
  r.list = {r} -- the rule list of a one-rule call
  return r
end

-- A rule from its three arguments: cached by their text (a cached triple
-- was valid), else parsed, checked and computed.
local function throttle_rule(args, i, n)
  local a = rule_cache[args[i]]
  local b = a and a[args[i + 1]]
  local r = b and b[args[i + 2]]
  if r then return r end
  local ck = {args[i], args[i + 1], args[i + 2]}
  local burst = parse_int(args[i], 1, MAX_SAFE)
  if not burst then rule_error('burst', args[i], n) end
  local count = parse_int(args[i + 1], 1, MAX_SAFE)
  if not count then rule_error('count', args[i + 1], n) end
  local window = parse_int(args[i + 2], 1, MAX_SAFE)
  if not window then rule_error('window', args[i + 2], n) end
  return gcra_rule(burst, count, window, n, ck)
end

-- Returns t, rules, cost, refund, debit, reserve (parse_throttle: as a table).
local function parse_throttle_values(args, write, server_time)
  if #args == 4 then -- now burst count window, a triple met before: no options, cost 1
    local a = rule_cache[args[2]]
    local b = a and a[args[3]]
    local r = b and b[args[4]]
    if r then return parse_now(args[1], server_time), r.list, 1 end
  end
  local t, first, stop = split_rules(args, server_time)
  local rules, windows
  local n = 0
  local i = first
  if stop == first + 3 then -- one rule: its cached list, no tables
    local r = throttle_rule(args, first, 1)
    rules, n, i = r.list, 1, stop
  else rules, windows = {}, {} end
  while i < stop do
    n = n + 1
    if i + 2 >= stop then
      arg_error('incomplete rule ' .. n .. ": rules are 'burst count window' triples")
    end
    local r = throttle_rule(args, i, n)
    local window = r.window
    local earlier = windows[window]
    if earlier then
      arg_error('invalid rule ' .. n .. ': window ' .. istr(window) .. ' is also the window of rule ' ..
        earlier .. ' (state is kept per window)')
    end
    windows[window] = n
    if n <= MAX_RULES then rules[n] = r end
    i = i + 3
  end
  if n > MAX_RULES then too_many_rules(n) end
  if n == 0 then arg_error("at least one rule 'burst count window' is required") end
  local o = parse_options(args, stop, write and OPTIONS.throttle_write or OPTIONS.throttle_peek, t)
  local smallest = rules[1].burst
  for j = 2, n do smallest = min(smallest, rules[j].burst) end
  local cost
  if o.refund or o.debit then cost = option_cost(o, 1, MAX_SAFE)
  else cost = option_cost(o, write and 1 or 0, smallest) end
  return t, rules, cost, o.refund, o.debit, o.reserve
end

local function parse_throttle(args, write, server_time)
  local t, rules, cost, refund, debit, reserve = parse_throttle_values(args, write, server_time)
  return {t = t, rules = rules, cost = cost, refund = refund, debit = debit, reserve = reserve}
end

local function parse_tat(s)
  if s == '0' then return {0} end
  if not find(s, '^[1-9]%d*$') or #s > #MAX_TAT_STR then return nil end
  local v = bparse(s)
  if bcmp(v, MAX_TAT) > 0 then return nil end
  return v
end

-- The stored TATs of the rules' fields (nil: a full bucket).
-- The stored TATs as text, checked (nil: a full bucket).
local function read_raw(key, rules)
  local values
  if #rules == 1 then values = rcall('HMGET', key, rules[1].field)
  else
    local fields = {}
    for i = 1, #rules do fields[i] = rules[i].field end
    values = rcall('HMGET', key, unpack(fields))
  end
  local raw = values -- false where a field is missing, as nil would be
  for i = 1, #rules do
    local v = values[i]
    if v then
      local ok = v == '0' or (find(v, '^[1-9]%d*$') and (#v < #MAX_TAT_STR or (#v == #MAX_TAT_STR and v <= MAX_TAT_STR)))
      if not ok then
        fail("ERR hash at '" .. show(key) .. "' field '" .. show(rules[i].field) .. "' holds '" .. show(v) ..
          "', not a theoretical arrival time in ns (a decimal integer from 0 to " .. MAX_TAT_STR .. ')')
      end
    end
  end
  return raw
end

local function tats_of(raw, n)
  local tats = {}
  for i = 1, n do if raw[i] then tats[i] = bparse(raw[i]) end end
  return tats
end


local function bceil_num(a) return bnum(ceil_ms_b(a)) end

---------------------------------------------------------------- THROTTLE, fast path
-- The same decision in doubles, relative to t_ns, when every value it
-- touches is an integer below 2^53 (the usual case: TATs within ~100 days of
-- now, tolerances below ~104 days): exact, and without the big integers.
-- Returns nil when a value is out of that range (the big-integer path
-- decides then).
local TWO53 = 9007199254740992
local NEAR = 9000000000 -- ms: (H - t) * 10^6 stays below 2^53

local function ceil_ns_ms(x) -- ceil(x / 10^6), 0 <= x < 2^53
  local r = x % 1000000
  local q = (x - r) / 1000000
  if r > 0 then q = q + 1 end
  return q
end

local function floor_div(a, b) -- floor(a / b), 0 <= a < 2^53, 0 < b < 2^53
  return (a - math.fmod(a, b)) / b
end

-- A stored TAT relative to t_ns: (H - t) * 10^6 + L for "H...LLLLLL"; -1
-- for one far in the past (a full bucket either way); nil when too far
-- ahead.
local function tat_delta(s, t)
  local len = #s
  if len <= 6 then return tonumber(s) - t * 1000000 end
  if len > 22 then return nil end
  local h = tonumber(sub(s, 1, len - 6))
  if h > MAX_SAFE then return nil end
  local dh = h - t
  if dh < -NEAR then return -1 end
  if dh > NEAR then return nil end
  return dh * 1000000 + tonumber(sub(s, len - 5))
end

local function gcra_fast(rules, cost, t, raw, reserve)
  if t > MAX_SAFE - NEAR or (reserve and reserve >= NEAR) then return nil end
  if not reserve and #rules == 1 then
    local r = rules[1]
    local iv, tv = r.iv, r.tv
    if not iv or iv * cost >= TWO53 or tv >= TWO53 then return nil end
    local d = 0
    if raw[1] then
      d = tat_delta(raw[1], t)
      if not d then return nil end
    end
    local b = d > 0 and d or 0
    local nw = b + iv * cost
    if nw >= TWO53 then return nil end
    local allows = nw <= tv
    local used = allows and nw or b
    local remaining = 0
    if used <= tv then remaining = min(floor_div(tv - used, iv), r.burst) end
    if allows then return {0, 1, r.burst, remaining, -1, ceil_ns_ms(used)}, nw end
    return {1, 1, r.burst, remaining, ceil_ns_ms(nw - tv), ceil_ns_ms(used)}, nil
  end
  local hz = reserve and reserve * 1000000 or 0
  local n = #rules
  local base, new, allows = {}, {}, {}
  local admitted = true
  for i = 1, n do
    local r = rules[i]
    local iv, tv = r.iv, r.tv
    if not iv or iv * cost >= TWO53 or hz + tv >= TWO53 then return nil end
    local d = 0
    if raw[i] then
      d = tat_delta(raw[i], t)
      if not d then return nil end
    end
    local b = d > 0 and d or 0
    local nw = b + iv * cost
    if nw >= TWO53 then return nil end
    base[i], new[i] = b, nw
    allows[i] = nw <= hz + tv
    if not allows[i] then admitted = false end
  end
  local function outcome(i)
    local r = rules[i]
    local used = admitted and new[i] or base[i]
    local remaining = 0
    if used <= r.tv then remaining = min(floor_div(r.tv - used, r.iv), r.burst) end
    local retry = -1
    if not allows[i] then retry = ceil_ns_ms(new[i] - r.tv - hz) end
    return {not allows[i], remaining, retry, ceil_ns_ms(used)}
  end
  if admitted and reserve then
    local due_i, due
    for i = 1, n do
      local at = new[i] - rules[i].tv
      if not due or at > due then due_i, due = i, at end
    end
    local delay = due > 0 and ceil_ns_ms(due) or 0
    if delay > 0 then
      local o = outcome(due_i)
      return {0, due_i, rules[due_i].burst, o[2], delay, o[4]}, new
    end
  end
  local outs = {}
  for i = 1, n do outs[i] = outcome(i) end
  local b = binding(outs)
  local o = outs[b]
  if admitted then return {0, b, rules[b].burst, o[2], reserve and 0 or -1, o[4]}, new end
  return {1, b, rules[b].burst, o[2], o[3], o[4]}, nil
end

-- Writes the fast path's new TATs (relative to t_ns) and moves the expiry.
local function throttle_write_fast(key, rules, new, server_time, t)
  if type(new) == 'number' then -- one rule
    local r = rules[1]
    if not r.wms then r.wms = bceil_num(r.tol) end
    local ns = new % 1000000
    local ms = t + (new - ns) / 1000000
    local x = t + ceil_ns_ms(new) + max(0, server_time - t)
    local at = grid_expiry(key, r.wms, expire_time(key), x)
    call('HSET', key, r.field, ms > 0 and format('%d%06d', ms, ns) or istr(ns))
    if at then call('PEXPIREAT', key, at) end
    return
  end
  local newest, w = 0, 0
  local set = {}
  for i = 1, #rules do
    local d = new[i]
    if d > newest then newest = d end
    local r = rules[i]
    if not r.wms then r.wms = bceil_num(r.tol) end
    if r.wms > w then w = r.wms end
    local ns = d % 1000000
    local ms = t + (d - ns) / 1000000
    set[#set + 1] = r.field
    set[#set + 1] = ms > 0 and format('%d%06d', ms, ns) or istr(ns)
  end
  local x = t + ceil_ns_ms(newest) + max(0, server_time - t)
  local at = grid_expiry(key, w, expire_time(key), x)
  call('HSET', key, unpack(set))
  if at then call('PEXPIREAT', key, at) end
end

-- The module's decide_reserving(): tats[i] a bigint or nil; returns the
-- reply and the new TATs when admitted.
local function gcra_decide(rules, cost, t, tats, reserve)
  local n = #rules
  local t_ns = ns_of(t)
  local horizon = reserve and badd(t_ns, ns_of(reserve)) or t_ns
  local costb = bn(cost)
  local steps = {}
  local admitted = true
  for i = 1, n do
    local r = rules[i]
    local tat = tats[i] or t_ns
    local base = bcmp(tat, t_ns) > 0 and tat or t_ns
    local new = base
    if cost == 1 then new = badd(base, r.interval)
    elseif cost > 0 then new = badd(base, bmul(r.interval, costb)) end
    local limit = badd(horizon, r.tol)
    local allows = bcmp(new, limit) <= 0
    if not allows then admitted = false end
    steps[i] = {base = base, new = new, allows = allows}
  end
  local function outcome(i)
    local s, r = steps[i], rules[i]
    local level = admitted and s.new or s.base
    local used = bsub(level, t_ns)
    local remaining
    if bcmp(used, r.tol) > 0 then remaining = 0
    else
      remaining = min(bdivq(bsub(r.tol, used), r.interval), r.burst)
    end
    local retry = -1
    if not s.allows then
      retry = bceil_num(bsub(s.new, badd(r.tol, horizon)))
    end
    return {not s.allows, remaining, retry, bceil_num(used)}
  end
  local b, o
  if admitted and reserve then
    -- the rule whose next unit is due last (exact ns), ties to the lower index
    local due_i, due
    for i = 1, n do
      local s, r = steps[i], rules[i]
      -- compare new - tol across rules as new + (maxtol - tol)
      local at = badd(s.new, bsub(MAX_TOL, r.tol))
      if not due or bcmp(at, due) > 0 then due_i, due = i, at end
    end
    local s, r = steps[due_i], rules[due_i]
    local at_plus_tol = s.new
    local lim = badd(t_ns, r.tol)
    local delay = 0
    if bcmp(at_plus_tol, lim) > 0 then delay = bceil_num(bsub(at_plus_tol, lim)) end
    if delay > 0 then
      b = due_i; o = outcome(b)
      return {0, b, rules[b].burst, o[2], delay, o[4]}, steps
    end
    local outs = {}
    for i = 1, n do outs[i] = outcome(i) end
    b = binding(outs); o = outs[b]
    return {0, b, rules[b].burst, o[2], 0, o[4]}, steps
  end
  local outs = {}
  for i = 1, n do outs[i] = outcome(i) end
  b = binding(outs); o = outs[b]
  if admitted then return {0, b, rules[b].burst, o[2], -1, o[4]}, steps end
  return {1, b, rules[b].burst, o[2], o[3], o[4]}, nil
end

local function hash_finish(key, set, deleted, at)
  if #set == 0 and #deleted == 0 then return end
  if #set > 0 then call('HSET', key, unpack(set)) end
  if #deleted > 0 then call_chunked({'HDEL', key}, deleted, 1) end
  -- (after an HSET the key exists: only deletions can have removed it)
  if #set == 0 and call('EXISTS', key) == 0 then return end
  if at then call('PEXPIREAT', key, at) end
end

local function throttle_write(key, rules, new_tats, server_time, t)
  local newest = new_tats[1]
  local deepest = rules[1].tol
  for i = 2, #rules do
    if bcmp(new_tats[i], newest) > 0 then newest = new_tats[i] end
    if bcmp(rules[i].tol, deepest) > 0 then deepest = rules[i].tol end
  end
  local x = badd(ceil_ms_b(newest), bn(max(0, server_time - t)))
  local w = bceil_num(deepest)
  local at = grid_expiry(key, w, expire_time(key), x)
  local set = {}
  for i = 1, #rules do
    set[#set + 1] = rules[i].field
    set[#set + 1] = bstr(new_tats[i])
  end
  hash_finish(key, set, {}, at)
end

local function gcra_refund(rules, cost, t, tats)
  local t_ns = ns_of(t)
  local after = {}
  local costb = bn(cost)
  for i = 1, #rules do
    local tat = tats[i]
    if tat then
      local step = bmul(rules[i].interval, costb)
      if bcmp(tat, step) > 0 then
        local back = bsub(tat, step)
        if bcmp(back, t_ns) > 0 then after[i] = back end
      end
    end
  end
  return after
end

local function gcra_debit(rules, cost, t, tats)
  local t_ns = ns_of(t)
  local costb = bn(cost)
  local new = {}
  for i = 1, #rules do
    local tat = tats[i] or t_ns
    local base = bcmp(tat, t_ns) > 0 and tat or t_ns
    local v = badd(base, bmul(rules[i].interval, costb))
    if bcmp(v, MAX_TAT) > 0 then v = MAX_TAT end
    new[i] = v
  end
  return new
end

local function throttle_run(key, args, write, refund_only)
  local server_time = clock_for(args[1], write)
  local t, rules, cost, refund, debit, reserve = parse_throttle_values(args, write, server_time)
  if refund_only and not refund then arg_error('rl_refund runs refunds only: add REFUND') end
  local raw = read_raw(key, rules)
  if not refund and not debit then
    local reply, new = gcra_fast(rules, cost, t, raw, reserve)
    if reply then
      if write and reply[1] == 0 then throttle_write_fast(key, rules, new, server_time, t) end
      return reply
    end
  end
  local tats = tats_of(raw, #rules)
  if refund then
    local after = gcra_refund(rules, cost, t, tats)
    local set, deleted = {}, {}
    for i = 1, #rules do
      if tats[i] then
        if after[i] then
          set[#set + 1] = rules[i].field; set[#set + 1] = bstr(after[i])
        else deleted[#deleted + 1] = rules[i].field end
      end
    end
    hash_finish(key, set, deleted, nil)
    return (gcra_decide(rules, 0, t, after))
  end
  if debit then
    local new = gcra_debit(rules, cost, t, tats)
    throttle_write(key, rules, new, server_time, t)
    return (gcra_decide(rules, 0, t, new))
  end
  local reply, steps = gcra_decide(rules, cost, t, tats, reserve)
  if write and reply[1] == 0 then
    local new = {}
    for i = 1, #rules do new[i] = steps[i].new end
    throttle_write(key, rules, new, server_time, t)
  end
  return reply
end

---------------------------------------------------------------- RL.QUOTA
local PERIODS = {MINUTE = 'minute', HOUR = 'hour', DAY = 'day', WEEK = 'week', MONTH = 'month', YEAR = 'year'}
local LONGEST = {minute = MINUTE_MS, hour = HOUR_MS, day = 25 * HOUR_MS, week = 169 * HOUR_MS,
  month = 745 * HOUR_MS, year = 8785 * HOUR_MS}
-- IANA names whose offset is 0 for all time: computed here.
local UTC_NAMES = {}
for _, n in ipairs({'UTC', 'UCT', 'GMT', 'GMT0', 'GMT+0', 'GMT-0', 'Greenwich', 'Universal', 'Zulu'}) do
  UTC_NAMES[n] = true; UTC_NAMES['Etc/' .. n] = true
end
-- The other IANA names (the module's): the areas, and the names without one.
local IANA_AREAS = {}
for _, n in ipairs({'Africa', 'America', 'Antarctica', 'Arctic', 'Asia', 'Atlantic', 'Australia', 'Brazil',
  'Canada', 'Chile', 'Etc', 'Europe', 'Indian', 'Mexico', 'Pacific', 'US'}) do IANA_AREAS[n] = true end
local IANA_WORDS = {}
for _, n in ipairs({'CET', 'CST6CDT', 'Cuba', 'EET', 'EST', 'EST5EDT', 'Egypt', 'Eire', 'GB', 'GB-Eire', 'HST',
  'Hongkong', 'Iceland', 'Iran', 'Israel', 'Jamaica', 'Japan', 'Kwajalein', 'Libya', 'MET', 'MST', 'MST7MDT',
  'NZ', 'NZ-CHAT', 'Navajo', 'PRC', 'PST8PDT', 'Poland', 'Portugal', 'ROC', 'ROK', 'Singapore', 'Turkey',
  'W-SU', 'WET'}) do IANA_WORDS[n] = true end

local function days_from_civil(y, m, d)
  if m <= 2 then y = y - 1 end
  local era = floor(y / 400)
  local yoe = y - era * 400
  local mp = (m + 9) % 12
  local doy = floor((153 * mp + 2) / 5) + d - 1
  local doe = yoe * 365 + floor(yoe / 4) - floor(yoe / 100) + doy
  return era * 146097 + doe - 719468
end

local function civil_from_days(z)
  z = z + 719468
  local era = floor(z / 146097)
  local doe = z - era * 146097
  local yoe = floor((doe - floor(doe / 1460) + floor(doe / 36524) - floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + floor(yoe / 4) - floor(yoe / 100))
  local mp = floor((5 * doy + 2) / 153)
  local d = doy - floor((153 * mp + 2) / 5) + 1
  local m = mp < 10 and mp + 3 or mp - 9
  return yoe + era * 400 + (m <= 2 and 1 or 0), m, d
end

local function local_bounds(period, loc)
  local function fixed(len)
    local s = floor(loc / len) * len
    return s, s + len
  end
  local day = floor(loc / DAY_MS)
  if period == 'minute' then return fixed(MINUTE_MS)
  elseif period == 'hour' then return fixed(HOUR_MS)
  elseif period == 'day' then return fixed(DAY_MS)
  elseif period == 'week' then
    local monday = day - (day + 3) % 7
    return monday * DAY_MS, (monday + 7) * DAY_MS
  elseif period == 'month' then
    local y, m = civil_from_days(day)
    local ny, nm = y, m + 1
    if m == 12 then ny, nm = y + 1, 1 end
    return days_from_civil(y, m, 1) * DAY_MS, days_from_civil(ny, nm, 1) * DAY_MS
  else
    local y = civil_from_days(day)
    return days_from_civil(y, 1, 1) * DAY_MS, days_from_civil(y + 1, 1, 1) * DAY_MS
  end
end

local function two(v) return format('%02d', v) end

local function format_local(loc, offset)
  local day = floor(loc / DAY_MS)
  local y, m, d = civil_from_days(day)
  local in_day = loc - day * DAY_MS
  local secs = floor(math.abs(offset) / 1000)
  local s = format('%04d', y) .. '-' .. two(m) .. '-' .. two(d) .. 'T' .. two(floor(in_day / HOUR_MS)) ..
    ':' .. two(floor(in_day % HOUR_MS / MINUTE_MS)) .. (offset < 0 and '-' or '+') ..
    two(floor(secs / 3600)) .. ':' .. two(floor(secs % 3600 / 60))
  if secs % 60 ~= 0 then s = s .. ':' .. two(secs % 60) end
  return s
end

-- A zone this library computes: UTC or a fixed offset; nil for text that is
-- no zone at all; false for an IANA name (the module's).
local function parse_zone(s)
  if UTC_NAMES[s] then return 0 end
  local sign, h, m = string.match(s, '^([+-])(%d%d):(%d%d)$')
  if sign then
    h, m = tonumber(h), tonumber(m)
    if h > 23 or m > 59 then return nil end
    local off = (h * 3600 + m * 60) * 1000
    return sign == '-' and -off or off
  end
  local area = string.match(s, '^([A-Za-z]+)/[A-Za-z0-9_+/-]+$')
  if (area and IANA_AREAS[area]) or IANA_WORDS[s] then return false end
  return nil
end

local bucket_cache = {}
local function quota_bucket(period, t, offset)
  local ck = period .. offset
  local b = bucket_cache[ck]
  if b and b.start <= t and t < b.finish then return b end
  b = nil
  local s, e = local_bounds(period, t + offset)
  b = {start = s - offset, finish = e - offset, field = period .. ':' .. format_local(s, offset)}
  bucket_cache[ck] = b
  return b
end

local function parse_start(text)
  if #text < 16 then return nil end
  local y, mo, d, hh, mm = string.match(sub(text, 1, 16), '^(%d%d%d%d)%-(%d%d)%-(%d%d)T(%d%d):(%d%d)$')
  if not y then return nil end
  y, mo, d, hh, mm = tonumber(y), tonumber(mo), tonumber(d), tonumber(hh), tonumber(mm)
  local rest = sub(text, 17)
  local sign, oh, om, os = string.match(rest, '^([+-])(%d%d):(%d%d)$')
  if not sign then
    sign, oh, om, os = string.match(rest, '^([+-])(%d%d):(%d%d):(%d%d)$')
    if not sign then return nil end
  end
  oh, om, os = tonumber(oh), tonumber(om), tonumber(os or 0)
  if mo < 1 or mo > 12 or d < 1 or hh > 23 or mm > 59 then return nil end
  local ny, nm = y, mo + 1
  if mo == 12 then ny, nm = y + 1, 1 end
  if d > days_from_civil(ny, nm, 1) - days_from_civil(y, mo, 1) then return nil end
  if oh > 25 or om > 59 or os > 59 then return nil end
  local offset = (sign == '-' and -1 or 1) * (oh * 3600 + om * 60 + os) * 1000
  local loc = days_from_civil(y, mo, d) * DAY_MS + hh * HOUR_MS + mm * MINUTE_MS
  if format_local(loc, offset) ~= text then return nil end
  return loc - offset
end

local function is_stale(field, period, current_start)
  local prefix = period .. ':'
  if sub(field, 1, #prefix) ~= prefix then return false end
  local start = parse_start(sub(field, #prefix + 1))
  if not start then return false end
  return current_start - start > LONGEST[period]
end

local function parse_quota(args, write, server_time)
  if #args < 2 then arg_error('missing now or zone') end
  local now_arg, zone_arg = args[1], args[2]
  local t = parse_now(now_arg, server_time)
  if now_arg ~= '*' and t > MAX_NOW then
    arg_error("invalid now '" .. show(now_arg) .. "': expected '*' or an integer from 0 to " ..
      istr(MAX_NOW) .. ' (the end of year 9999)')
  end
  local offset = parse_zone(zone_arg)
  if offset == nil then
    arg_error("invalid zone '" .. show(zone_arg) ..
      "': expected an IANA time-zone name (e.g. Asia/Shanghai) or an offset +HH:MM")
  elseif offset == false then
    arg_error("zone '" .. show(zone_arg) .. "' needs the redis-ratelimit module: the Functions " ..
      "library computes UTC and fixed offsets (+HH:MM) only")
  end
  if t > MAX_NOW then
    arg_error("invalid now '" .. istr(t) .. "': expected '*' or an integer from 0 to " .. istr(MAX_NOW))
  end
  if t > MAX_NOW - 93599000 then
    local y = civil_from_days(floor((t + offset) / DAY_MS))
    if y > 9999 then
      arg_error("invalid now '" .. istr(t) .. "': in zone " .. zone_arg .. ' it is past the end of year 9999')
    end
  end
  local periods, given = {}, {}
  local i = 3
  while i <= #args do
    local p = PERIODS[upper(args[i])]
    if not p then break end
    if i + 1 > #args then arg_error('missing limit for period ' .. show(args[i])) end
    if given[p] then arg_error('period ' .. show(args[i]) .. ' given twice') end
    local limit = parse_int(args[i + 1], 0, MAX_SAFE)
    if not limit then
      arg_error("invalid limit '" .. show(args[i + 1]) .. "' for period " .. show(args[i]) .. ': ' ..
        expected(0, MAX_SAFE))
    end
    given[p] = true
    periods[#periods + 1] = {period = p, limit = limit}
    i = i + 2
  end
  if #periods == 0 and i <= #args then
    local w = upper(args[i])
    if w ~= 'COST' and w ~= 'REFUND' then
      arg_error("invalid period '" .. show(args[i]) .. "': expected MINUTE, HOUR, DAY, WEEK, MONTH or YEAR")
    end
  end
  if #periods == 0 then
    arg_error("at least one 'period limit' pair is required (period: MINUTE, HOUR, DAY, WEEK, MONTH or YEAR)")
  end
  local o = parse_options(args, i, write and OPTIONS.write or OPTIONS.peek, t)
  local cost = option_cost(o, write and 1 or 0, MAX_SAFE)
  local buckets = {}
  for j = 1, #periods do buckets[j] = quota_bucket(periods[j].period, t, offset) end
  return {t = t, periods = periods, buckets = buckets, cost = cost, refund = o.refund, debit = o.debit}
end

local function quota_read(key, buckets)
  local fields = {}
  for i = 1, #buckets do fields[i] = buckets[i].field end
  local values = rcall('HMGET', key, unpack(fields))
  local stored = {}
  for i = 1, #buckets do
    local v = values[i]
    if v then
      local c = parse_int(v, -MAX_SAFE, MAX_SAFE)
      if not c then
        fail("ERR value of field '" .. show(fields[i]) .. "' of key '" .. show(key) ..
          "' is not an integer from -" .. istr(MAX_SAFE) .. ' to ' .. istr(MAX_SAFE))
      end
      stored[i] = max(c, 0)
    end
  end
  return stored
end

local function quota_decide(periods, buckets, counts, cost, t)
  local n = #periods
  local admitted = true
  for i = 1, n do
    if (counts[i] or 0) + cost > periods[i].limit then admitted = false end
  end
  local outs = {}
  for i = 1, n do
    local used, limit = counts[i] or 0, periods[i].limit
    local until_end = buckets[i].finish - t
    outs[i] = {used + cost > limit, max(0, limit - used - (admitted and cost or 0)),
      cost > limit and -1 or until_end, until_end}
  end
  local b = binding(outs)
  local o = outs[b]
  return {admitted and 0 or 1, b, periods[b].limit, o[2], admitted and -1 or o[3], o[4]}
end

local function quota_record(key, periods, buckets, counts, stored, server_time, t)
  local e = expire_time(key)
  local lag = max(0, server_time - t)
  local last_end = t
  for i = 1, #buckets do last_end = max(last_end, buckets[i].finish) end
  local at = last_end + lag
  if e then at = max(e, at) end
  local present = 0
  local stale = {}
  local size = call('HLEN', key)
  local set = {}
  for i = 1, #buckets do
    set[#set + 1] = buckets[i].field
    set[#set + 1] = istr(counts[i])
  end
  for i = 1, #buckets do if stored[i] then present = present + 1 end end
  if size > present then
    local names
    if size > 64 then names = call('HRANDFIELD', key, 64) else names = call('HKEYS', key) end
    for _, f in ipairs(names) do
      for i = 1, #periods do
        if is_stale(f, periods[i].period, buckets[i].start) then stale[#stale + 1] = f; break end
      end
    end
  end
  hash_finish(key, set, stale, e ~= at and at or nil)
end

local function quota_run(key, args, write, refund_only)
  local server_time = clock_for(args[1], write)
  local a = parse_quota(args, write, server_time)
  if refund_only and not a.refund then arg_error('rl_refund runs refunds only: add REFUND') end
  local t, periods, buckets, cost = a.t, a.periods, a.buckets, a.cost
  local stored = quota_read(key, buckets)
  local counts = {}
  for i = 1, #buckets do counts[i] = stored[i] or 0 end
  if a.refund then
    local set, deleted = {}, {}
    for i = 1, #buckets do
      local v = stored[i]
      if v then
        local left = v - min(max(cost, 0), max(v, 0))
        if left > 0 then
          set[#set + 1] = buckets[i].field; set[#set + 1] = istr(left); counts[i] = left
        else deleted[#deleted + 1] = buckets[i].field; counts[i] = 0 end
      end
    end
    hash_finish(key, set, deleted, nil)
    return quota_decide(periods, buckets, counts, 0, t)
  end
  if a.debit then
    for i = 1, #counts do counts[i] = min(counts[i] + cost, MAX_SAFE) end
    quota_record(key, periods, buckets, counts, stored, server_time, t)
    return quota_decide(periods, buckets, counts, 0, t)
  end
  local reply = quota_decide(periods, buckets, counts, cost, t)
  if write and reply[1] == 0 then
    for i = 1, #counts do counts[i] = counts[i] + cost end
    quota_record(key, periods, buckets, counts, stored, server_time, t)
  end
  return reply
end

---------------------------------------------------------------- RL.LEASE
local function is_token(s)
  return #s >= 1 and #s <= 64 and find(s, '^[!-~]+$') ~= nil and not find(s, '#', 1, true)
end

local function check_token(s)
  if not is_token(s) then
    arg_error("invalid token '" .. show(s) ..
      "': expected 1 to 64 printable ASCII characters other than space and '#'")
  end
end

local function parse_ttl(s, t)
  local ttl = ranged(s, 'ttl', 1, MAX_SAFE)
  if ttl > MAX_SAFE - t then
    arg_error("invalid ttl '" .. show(s) .. "': now + ttl must be at most " .. istr(MAX_SAFE))
  end
  return ttl
end

local function parse_lease(args, with_ttl, min_cost, server_time)
  if #args < 1 then arg_error('missing now') end
  local t = parse_now(args[1], server_time)
  if #args < 2 then arg_error('missing limit') end
  local limit = ranged(args[2], 'limit', 1, MAX_SAFE)
  local ttl, i = 0, 3
  if with_ttl then
    if #args < 3 then arg_error('missing ttl') end
    ttl = parse_ttl(args[3], t); i = 4
  end
  local cost_arg, token
  while i <= #args do
    local name = args[i]
    local up = upper(name)
    if not starts_options(name) then
      arg_error("syntax error: unexpected argument '" .. show(name) .. "' (expected COST or TOKEN)")
    elseif up ~= 'COST' and up ~= 'TOKEN' then
      arg_error("syntax error: unknown option '" .. show(name) .. "' (expected COST or TOKEN)")
    end
    if (up == 'COST' and cost_arg) or (up == 'TOKEN' and token) then
      arg_error('syntax error: option ' .. up .. ' given twice')
    end
    if i + 1 > #args then arg_error('syntax error: option ' .. up .. ' needs a value') end
    local value = args[i + 1]
    if up == 'COST' then cost_arg = value else check_token(value); token = value end
    i = i + 2
  end
  local cost = 1
  if cost_arg then cost = ranged(cost_arg, 'cost', min_cost, min(limit, MAX_COST)) end
  return {t = t, limit = limit, ttl = ttl, cost = cost, token = token}
end

local function unit_name(token, i)
  if i <= 1 then return token end
  return token .. '#' .. i
end

local function is_whole(s) return s == floor(s) end

-- A lease's units: tok, then (when tok is scored half a ms before a whole
-- ms: a lease of 2 or more) tok#2, tok#3, ... up to the first missing one.
-- Returns names, scores and the first index not known to be missing.
local function walk(key, token, typed)
  local s = (typed and rcall or call)('ZSCORE', key, token)
  if not s then return {}, {}, 2 end
  s = tonumber(s)
  local names, scores = {token}, {s}
  if is_whole(s) then return names, scores, 2 end
  local i = 2
  while true do
    local name = token .. '#' .. i
    local v = call('ZSCORE', key, name)
    if not v then return names, scores, i + 1 end
    names[i] = name; scores[i] = tonumber(v)
    i = i + 1
  end
end

local function live_units(scores, t)
  local n = 0
  for i = 1, #scores do if scores[i] > t then n = n + 1 end end
  return n
end

-- The lease state of a call: reads the key (WRONGTYPE, stored scores).
local function lease_open(key, a, write, server_time)
  -- every field the call sets later is named here (false): the table is
  -- made at its size once instead of growing field by field
  local st = {key = key, limit = a.limit, ttl = a.ttl, cost = a.cost, token = a.token, t = a.t,
    server_time = server_time, write = write, names = false, own = false, lowest = false, highest = false,
    len = false, walked = false, next_unknown = false, verdict = false, reply = false, written = false}
  local lo = rcall('ZRANGE', key, '0', '0', 'WITHSCORES')
  if lo[2] then
    local hi = call('ZRANGE', key, '-1', '-1', 'WITHSCORES')
    local lowest, highest = tonumber(lo[2]), tonumber(hi[2])
    -- the module checks the lowest score only when it is t or earlier
    if (lowest <= a.t and not safe_score(lowest)) or not safe_score(highest) then unsafe_score(key) end
    st.lowest, st.highest = lowest, highest
  else
    st.len = 0
  end
  return st
end

local function lease_len(st)
  if not st.len then st.len = call('ZCARD', st.key) end
  return st.len
end

local function lease_walk(st)
  if st.walked then return end
  st.walked = true
  if st.cost <= 0 or not st.token then st.names, st.own = {}, {}; return end
  st.names, st.own, st.next_unknown = walk(st.key, st.token)
end

local function lease_live(st)
  if not st.lowest then return 0 end
  if st.lowest > st.t then return lease_len(st) end
  if st.highest <= st.t then return 0 end
  return call('ZCOUNT', st.key, '(' .. istr(st.t), '+inf')
end

local function reset_after(top, t)
  if not top then return 0 end
  return max(ceil(top) - t, 0)
end

-- decide(): live, held, verdict; retry_after for a refusal.
local function lease_verdict(st)
  local t, limit, cost = st.t, st.limit, st.cost
  local live = lease_live(st)
  local held = min(live_units(st.own, t), live)
  local needed = live - held + cost
  if needed <= limit then
    return {admitted = true, live = live, held = held, retry = -1, reused = 0}
  end
  local k = needed - limit
  local own_live = {}
  for i = 1, #st.own do if st.own[i] > t then own_live[#own_live + 1] = st.own[i] end end
  table.sort(own_live)
  local first_live = lease_len(st) - live
  local own_below, score = 0, nil
  while true do
    score = zscore_at(st.key, first_live + k - 1 + own_below)
    local n = 0
    for i = 1, #own_live do if own_live[i] <= score then n = n + 1 end end
    if n == own_below then break end
    own_below = n
  end
  return {admitted = false, live = live, held = held, retry = ceil(score) - t, reused = 0}
end

local function verdict_reply(st, v, top)
  local live_after = v.live
  if v.admitted then live_after = v.live - v.held + st.cost - v.reused end
  return {v.admitted and 0 or 1, 1, st.limit, max(st.limit - live_after, 0), v.retry, reset_after(top, st.t)}
end

-- Units of the token's name past the walked chain, up to cost: reused by
-- an admission (counted live once).
local function live_past_the_chain(st)
  lease_walk(st)
  if not st.token or st.cost <= 0 then return 0 end
  local live = 0
  for i = st.next_unknown or (#st.names + 2), st.cost do
    if i > #st.names then
      local v = call('ZSCORE', st.key, unit_name(st.token, i))
      if v then
        v = tonumber(v)
        if v > st.t then live = live + 1 end
        st.own[#st.own + 1] = v
      end
    end
  end
  return live
end

-- The highest score that is not the token's own, against the score the
-- units would get.
local function top_after(st, score)
  if not st.highest then return score end
  local high = st.highest
  local all_below = true
  for i = 1, #st.own do if st.own[i] >= high then all_below = false end end
  if all_below then return max(high, score) end
  local own_desc = {}
  for i = 1, #st.own do own_desc[i] = st.own[i] end
  table.sort(own_desc, function(x, y) return x > y end)
  local rank = 0
  while true do
    local r = call('ZRANGE', st.key, -(rank + 1), -(rank + 1), 'WITHSCORES')
    if not r[2] then return score end
    local s = tonumber(r[2])
    if own_desc[rank + 1] == s then rank = rank + 1
    else return max(s, score) end
  end
end

-- committing: an admission's reply is lease_commit's (not made here)
local function lease_decide(st, committing)
  lease_walk(st)
  local v = lease_verdict(st)
  if v.admitted then v.reused = live_past_the_chain(st) end
  st.verdict = v
  if committing and v.admitted then return nil end
  local top
  if not st.write and st.ttl > 0 and v.admitted and st.cost > 0 then
    top = top_after(st, st.t + st.ttl)
  else
    top = st.highest
  end
  st.reply = verdict_reply(st, v, top)
  return st.reply
end

local function lease_commit(st)
  local key, t, cost, limit = st.key, st.t, st.cost, st.limit
  local v = st.verdict
  local existing = expire_time(key)
  local bound = min(t, st.server_time)
  local expired_before = 0
  if st.lowest and st.lowest <= bound then expired_before = call('ZCOUNT', key, '-inf', istr(bound)) end
  local expiry = t + st.ttl
  local names = st.names
  if #names > cost then
    local dropped = {}
    for i = cost + 1, #names do dropped[#dropped + 1] = names[i] end
    call_chunked({'ZREM', key}, dropped, 1)
  end
  local token = st.token
  if not token then
    for _ = 1, 64 do
      local name = next_name()
      if not call('ZSCORE', key, name) and (cost == 1 or not call('ZSCORE', key, name .. '#2'))
        and not call('ZSCORE', key, name .. '#' .. (cost + 1)) then
        local clash = false
        for i = 3, cost do
          if call('ZSCORE', key, name .. '#' .. i) then clash = true; break end
        end
        if not clash then token = name; break end
      end
    end
    if not token then fail('ERR could not find a free lease name') end
    st.token = token
  end
  local es = istr(expiry)
  if cost == 1 then call('ZADD', key, es, names[1] or token) -- one unit: no argument lists
  else
    local items = {}
    for i = 1, cost do
      -- the first unit of a lease of 2 or more half a ms early (SPEC's marker)
      items[#items + 1] = (i == 1 and cost >= 2) and istr(expiry - 0.5) or es
      items[#items + 1] = names[i] or unit_name(token, i)
    end
    call_chunked({'ZADD', key}, items, 2)
  end
  -- the highest score now: read back only when it was one of the token's
  local top = expiry
  if st.highest then
    local own_top = false
    for i = 1, #st.own do if st.own[i] >= st.highest then own_top = true end end
    if own_top then top = tonumber(call('ZRANGE', key, '-1', '-1', 'WITHSCORES')[2])
    else top = max(st.highest, expiry) end
  end
  local x = ceil(top) + max(0, st.server_time - t)
  local at = grid_expiry(key, st.ttl, existing, x)
  if expired_before > 0 and (at or expired_before >= limit) then
    call('ZREMRANGEBYSCORE', key, '-inf', istr(bound))
  end
  if at then call('PEXPIREAT', key, at) end
  st.written = true
  st.reply = verdict_reply(st, v, top)
  return st.reply
end

-- RL.LEASE's admission: decide, then commit (the module's quick path for a
-- token not held yet decides the same).
local function lease_admit(st)
  local reply = lease_decide(st, true)
  if reply then return reply end
  return lease_commit(st)
end

local function lease_refund(st)
  lease_walk(st)
  if #st.names > 0 then call_chunked({'ZREM', st.key}, st.names, 1) end
  st.len, st.lowest, st.highest = nil, nil, nil
  local lo = call('ZRANGE', st.key, '0', '0', 'WITHSCORES')
  if lo[2] then
    st.lowest = tonumber(lo[2])
    st.highest = tonumber(call('ZRANGE', st.key, '-1', '-1', 'WITHSCORES')[2])
  else
    st.len = 0
  end
  local saved_cost, saved_own = st.cost, st.own
  st.cost, st.own = 0, {}
  local v = lease_verdict(st)
  st.reply = verdict_reply(st, v, st.highest)
  st.cost, st.own = saved_cost, saved_own
  st.verdict = nil
  return st.reply
end

local function lease_run(key, args, write)
  local server_time = clock_for(args[1], write)
  local a = parse_lease(args, write, write and 1 or 0, server_time)
  local st = lease_open(key, a, write, server_time)
  if write then
    local reply = lease_admit(st) -- a new table, not kept: the token goes on as its 7th
    if reply[1] == 0 then reply[7] = st.token else reply[7] = false end
    return reply
  end
  return lease_decide(st)
end

local function parse_tokens(args, renew, server_time)
  if #args < 1 then arg_error('missing now') end
  local t = parse_now(args[1], server_time)
  local ttl, i = 0, 2
  if renew then
    if #args < 2 then arg_error('missing ttl') end
    ttl = parse_ttl(args[2], t); i = 3
  end
  if i > #args then arg_error('at least one token is required') end
  local tokens, seen = {}, {}
  for j = i, #args do
    local s = args[j]
    check_token(s)
    if seen[s] then
      arg_error("token '" .. show(s) .. "' given twice (token " .. (j - i + 1) .. ')')
    end
    seen[s] = true
    tokens[#tokens + 1] = s
  end
  if #tokens > MAX_TOKENS then
    arg_error('too many tokens: ' .. #tokens .. ' given, at most ' .. MAX_TOKENS .. ' per call')
  end
  return t, ttl, tokens
end

local function release_run(key, args)
  local t, _, tokens = parse_tokens(args, false, clock_for(args[1], false))
  local counts, removed = {}, {}
  for i = 1, #tokens do
    -- the first read checks the key's type (WRONGTYPE before anything else)
    local names, scores = walk(key, tokens[i], i == 1)
    for j = 1, #scores do if not safe_score(scores[j]) then unsafe_score(key) end end
    counts[i] = live_units(scores, t)
    for j = 1, #names do removed[#removed + 1] = names[j] end
  end
  if #removed == 1 then call('ZREM', key, removed[1])
  elseif #removed > 0 then call_chunked({'ZREM', key}, removed, 1) end
  return counts
end

local function renew_run(key, args)
  local server_time = server_ms()
  local t, ttl, tokens = parse_tokens(args, true, server_time)
  local len = rcall('ZCARD', key)
  if len > 0 then zextremes(key) end
  local existing = expire_time(key)
  local expiry = t + ttl
  local counts = {}
  local items = {}
  for i = 1, #tokens do
    local names, scores = walk(key, tokens[i])
    if live_units(scores, t) == 0 then counts[i] = 0
    else
      for j = 1, #names do
        items[#items + 1] = (j == 1 and #names >= 2) and expiry - 0.5 or expiry
        items[#items + 1] = names[j]
      end
      counts[i] = #names
    end
  end
  if #items == 0 then return counts end
  call_chunked({'ZADD', key, 'XX'}, items, 2)
  local hi = call('ZRANGE', key, '-1', '-1', 'WITHSCORES')
  local top = tonumber(hi[2]) or expiry
  local x = ceil(top) + max(0, server_time - t)
  local at = grid_expiry(key, ttl, existing, x)
  if at then call('PEXPIREAT', key, at) end
  return counts
end

---------------------------------------------------------------- RL.DAYHOUR, RL.LOCKCOUNT
local function require_string(key)
  local ty = call('TYPE', key).ok
  if ty ~= 'none' and ty ~= 'string' then fail(WRONGTYPE) end
  return ty ~= 'none'
end

local function read_counter(key, exists, role)
  if not exists then return nil end
  local s = call('GET', key)
  local v = parse_int(s, -MAX_SAFE, MAX_SAFE)
  if v == nil then
    fail("ERR value '" .. show(s) .. "' of " .. role .. ' is not an integer from -' .. istr(MAX_SAFE) ..
      ' to ' .. istr(MAX_SAFE))
  end
  return v
end

-- An increment: INCR when the counter is a non-negative value with an
-- expiry, else SET value PXAT (the module's writes).
local function increment(key, value, ttl, server_time)
  local count = max(value or 0, 0)
  local e = value ~= nil and expire_time(key) or nil
  local at = e or (server_time + ttl)
  if value ~= nil and value >= 0 and e then
    call('INCR', key)
  else
    call('SET', key, count + 1, 'PXAT', at)
  end
  return count + 1, at
end

local function dayhour_run(keys, args)
  local daylimit = ranged(args[1], 'daylimit', 0, MAX_SAFE)
  local hourlimit = ranged(args[2], 'hourlimit', 0, MAX_SAFE)
  local dayttl = ranged(args[3], 'dayttl', 1, MAX_SAFE)
  local hourttl = ranged(args[4], 'hourttl', 1, MAX_SAFE)
  local day_key, hour_key = keys[1], keys[2]
  if day_key == hour_key then
    arg_error("daykey and hourkey must be different keys, got '" .. show(day_key) .. "' twice")
  end
  local server_time = server_ms()
  local day_exists = require_string(day_key)
  local hour_exists = require_string(hour_key)
  local d = read_counter(day_key, day_exists, 'daykey')
  local h = read_counter(hour_key, hour_exists, 'hourkey')
  local dc, hc = max(d or 0, 0), max(h or 0, 0)
  local day_refuses, hour_refuses = dc >= daylimit, hc >= hourlimit
  if day_refuses or hour_refuses then
    return {dc + (day_refuses and 1 or 0), hc + (hour_refuses and 1 or 0)}
  end
  increment(day_key, d, dayttl, server_time)
  increment(hour_key, h, hourttl, server_time)
  return {dc + 1, hc + 1}
end

local function lockcount_run(keys, args)
  local window = ranged(args[1], 'window', 1, MAX_SAFE)
  local maxv = ranged(args[2], 'max', 0, MAX_SAFE)
  local locktime = ranged(args[3], 'locktime', 1, MAX_SAFE)
  local lock_key, count_key = keys[1], keys[2]
  if lock_key == count_key then
    arg_error("lockkey and countkey must be different keys, got '" .. show(lock_key) .. "' twice")
  end
  local server_time = server_ms()
  local count_exists = require_string(count_key)
  local v = read_counter(count_key, count_exists, 'countkey')
  local c = max(v or 0, 0)
  if call('EXISTS', lock_key) == 1 then
    local e = expire_time(lock_key)
    return {1, c, e and max(e - server_time, 0) or -1}
  end
  if c < maxv then
    local value, at = increment(count_key, v, window, server_time)
    return {0, value, max(at - server_time, 0)}
  end
  call('SET', lock_key, 1, 'PXAT', server_time + locktime)
  if count_exists then call('DEL', count_key) end
  return {1, c, locktime}
end

---------------------------------------------------------------- RL.ALL
local KINDS = {CHECK = 'CHECK', THROTTLE = 'THROTTLE', QUOTA = 'QUOTA', LEASE = 'LEASE'}

-- DETAILS or REFUND (where the call takes it) as a word that may end the call.
local function tail_word(w, refund_allowed)
  if w == nil then return nil end
  if #w == 7 and upper(w) == 'DETAILS' then return 'DETAILS' end
  if #w == 6 and refund_allowed and upper(w) == 'REFUND' then return 'REFUND' end
  return nil
end

local function split_clauses(args, from, refund_allowed)
  local spans = {}
  local ending = {}
  local n = #args
  local start = from
  local i = from
  while i <= n do
    local word = args[i]
    i = i + 1
    -- uw: a word that starts with a letter in upper case; nil for a number,
    -- '*' or an offset (no clause, option or tail word: the clause's key
    -- index or one of its arguments, as below)
    local uw, tail
    local handled = false
    local b = byte(word, 1)
    if b and ((b >= 65 and b <= 90) or (b >= 97 and b <= 122)) then
      uw = upper(word)
      local kind = KINDS[uw]
      if kind then
        spans[#spans + 1] = {kind = kind, first = i, last = i - 1}
        start = i
        handled = true
      else
        tail = tail_word(word, refund_allowed)
        if tail and #spans > 0 then
          local is_last = i == n + 1
          local before_last_details = (i == n) and tail_word(args[i], refund_allowed) == 'DETAILS'
          if tail == 'DETAILS' and is_last then ending.details = true; handled = true
          elseif tail == 'REFUND' and (is_last or before_last_details) then ending.refund = true; handled = true end
        end
      end
    end
    if not handled then
      local span = spans[#spans]
      if not span then
        arg_error("syntax error: expected a clause (CHECK, THROTTLE, QUOTA or LEASE) after now, got '" ..
          show(word) .. "'")
      end
      if span.index == nil and span.last < span.first then
        span.index = word
        start = i
        span.first = i; span.last = i - 1
      else
        if tail then
          local at = i - 1 - start
          if span.misplaced == nil then span.misplaced = {at, tail}
          elseif tail == 'DETAILS' then span.misplaced = {span.misplaced[1], 'DETAILS'} end
        end
        local takes_value = uw == 'COST' or (span.kind == 'LEASE' and uw == 'TOKEN')
        if takes_value and i <= n then i = i + 1 end
        span.first = start; span.last = i - 1
      end
    end
  end
  if #spans == 0 then
    arg_error('at least one clause (CHECK, THROTTLE, QUOTA or LEASE) is required')
  end
  return spans, ending
end

local TAIL_RULE = {
  REFUND = 'REFUND may only end the call, or come right before a last DETAILS',
  DETAILS = 'DETAILS may only be the last argument of the call',
}

-- A clause's arguments parsed as its command parses them; errors prefixed
-- with the clause.
local function parse_clause_as(kind, cargs, mode, server_time)
  if kind == 'LEASE' then
    local write = mode ~= 'peek'
    local a = parse_lease(cargs, true, write and 1 or 0, server_time)
    if write and not a.token then arg_error('TOKEN is required in a LEASE clause of RL.ALL') end
    a.request = 'admit'
    return a
  end
  local words = cargs
  if mode == 'refund' then
    words = {}
    for j = 1, #cargs do words[j] = cargs[j] end
    words[#words + 1] = 'REFUND'
  end
  local write = mode ~= 'peek'
  local a
  if kind == 'CHECK' then a = parse_check(words, write, server_time)
  elseif kind == 'THROTTLE' then a = parse_throttle(words, write, server_time)
  else a = parse_quota(words, write, server_time) end
  a.request = (a.refund and 'refund') or (a.debit and 'debit') or (a.reserve and 'reserve') or 'admit'
  return a
end

local function with_prefix(n, kind, f, ...)
  local ok, r = pcall(f, ...)
  if ok then return r end
  if type(r) == 'string' and sub(r, 1, 4) == 'ERR ' then
    fail('ERR clause ' .. n .. ' (' .. kind .. '): ' .. sub(r, 5))
  end
  error(r, 0)
end

local function refuse_clause_options(n, kind, request, mode)
  if request == 'debit' then arg_error('clause ' .. n .. ' (' .. kind .. '): DEBIT is not an option of a clause') end
  if request == 'reserve' then arg_error('clause ' .. n .. ' (' .. kind .. '): RESERVE is not an option of a clause') end
  if request == 'refund' and mode == 'admit' then
    arg_error('clause ' .. n .. ' (' .. kind .. '): REFUND is not an option of a clause (' .. TAIL_RULE.REFUND .. ')')
  end
end

local function parse_clause(n, kind, cargs, misplaced, mode, server_time)
  if misplaced then
    local as_written = mode == 'peek' and 'peek' or 'admit'
    local before = {}
    for j = 1, min(#cargs, 1 + misplaced[1]) do before[j] = cargs[j] end
    local written = with_prefix(n, kind, parse_clause_as, kind, before, as_written, server_time)
    refuse_clause_options(n, kind, written.request, as_written)
    arg_error('clause ' .. n .. ' (' .. kind .. '): ' .. misplaced[2] .. ' is not an option of a clause (' ..
      TAIL_RULE[misplaced[2]] .. ')')
  end
  if mode == 'refund' then
    local ok, written = pcall(parse_clause_as, kind, cargs, 'admit', server_time)
    if ok then refuse_clause_options(n, kind, written.request, 'admit') end
  end
  local a = with_prefix(n, kind, parse_clause_as, kind, cargs, mode, server_time)
  refuse_clause_options(n, kind, a.request, mode)
  return a
end

local function clause_rules(kind, a)
  if kind == 'CHECK' or kind == 'THROTTLE' then return #a.rules end
  if kind == 'QUOTA' then return #a.periods end
  return 1
end

-- A clause's limiter: read, decide, commit, refund and details per kind.
local function clause_open(c, write, server_time)
  local kind, a, key = c.kind, c.args, c.key
  if kind == 'CHECK' then
    c.ex = zextremes(key)
  elseif kind == 'THROTTLE' then
    c.raw = read_raw(key, a.rules)
    c.tats = tats_of(c.raw, #a.rules)
  elseif kind == 'QUOTA' then
    c.stored = quota_read(key, a.buckets)
    c.counts = {}
    for i = 1, #a.buckets do c.counts[i] = c.stored[i] or 0 end
  else
    c.st = lease_open(key, a, write, server_time)
  end
end

local function clause_decide(c)
  local kind, a, key = c.kind, c.args, c.key
  if kind == 'CHECK' then return check_decide(key, c.ex, a.rules, a.cost, a.t)
  elseif kind == 'THROTTLE' then
    if not c.details then
      local reply, new = gcra_fast(a.rules, a.cost, a.t, c.raw, nil)
      if reply then c.fast_new = new; return reply end
    end
    local reply, steps = gcra_decide(a.rules, a.cost, a.t, c.tats, nil)
    c.steps = steps
    return reply
  elseif kind == 'QUOTA' then return quota_decide(a.periods, a.buckets, c.counts, a.cost, a.t)
  else return lease_decide(c.st) end
end

local function clause_details(c, phase)
  local kind, a, key = c.kind, c.args, c.key
  local out = {}
  if kind == 'CHECK' then
    local cost = phase == 'refunded' and 0 or a.cost
    for i = 1, #a.rules do
      local r = check_decide(key, c.ex, {a.rules[i]}, cost, a.t)
      r[2] = i; out[i] = r
    end
  elseif kind == 'THROTTLE' then
    local refunded = phase == 'refunded' and gcra_refund(a.rules, a.cost, a.t, c.tats) or nil
    for i = 1, #a.rules do
      local cost, tat = 0, nil
      if phase == 'admitted' then tat = c.steps[i].new
      elseif phase == 'rejected' then cost = a.cost; tat = c.tats[i]
      else tat = refunded[i] end
      local r = gcra_decide({a.rules[i]}, cost, a.t, {tat}, nil)
      r[2] = i; out[i] = r
    end
  elseif kind == 'QUOTA' then
    for i = 1, #a.periods do
      local count, cost = 0, 0
      local stored = c.stored[i]
      if phase == 'admitted' then count = (stored or 0) + a.cost
      elseif phase == 'rejected' then count = stored or 0; cost = a.cost
      else
        if stored then
          local left = stored - min(max(a.cost, 0), max(stored, 0))
          count = left > 0 and left or 0
        end
      end
      local r = quota_decide({a.periods[i]}, {a.buckets[i]}, {count}, cost, a.t)
      r[2] = i; out[i] = r
    end
  else
    local st = c.st
    if phase == 'rejected' and st.verdict then
      out[1] = verdict_reply(st, st.verdict, st.highest)
    else
      out[1] = st.reply
    end
  end
  return out
end

local function clause_commit(c, server_time)
  local kind, a, key = c.kind, c.args, c.key
  if kind == 'CHECK' then
    check_record(key, c.ex, a.rules, a.cost, a.t, server_time)
    return c.reply
  elseif kind == 'THROTTLE' then
    if c.fast_new then
      throttle_write_fast(key, a.rules, c.fast_new, server_time, a.t)
      return c.reply
    end
    local new = {}
    for i = 1, #a.rules do new[i] = c.steps[i].new end
    throttle_write(key, a.rules, new, server_time, a.t)
    return c.reply
  elseif kind == 'QUOTA' then
    local counts = {}
    for i = 1, #c.counts do counts[i] = c.counts[i] + a.cost end
    quota_record(key, a.periods, a.buckets, counts, c.stored, server_time, a.t)
    return c.reply
  else
    return lease_commit(c.st)
  end
end

local function clause_refund(c)
  local kind, a, key = c.kind, c.args, c.key
  if kind == 'CHECK' then
    c.ex = check_refund(key, c.ex, a.rules, a.cost, a.t)
    return check_decide(key, c.ex, a.rules, 0, a.t)
  elseif kind == 'THROTTLE' then
    local after = gcra_refund(a.rules, a.cost, a.t, c.tats)
    local set, deleted = {}, {}
    for i = 1, #a.rules do
      if c.tats[i] then
        if after[i] then set[#set + 1] = a.rules[i].field; set[#set + 1] = bstr(after[i])
        else deleted[#deleted + 1] = a.rules[i].field end
      end
    end
    hash_finish(key, set, deleted, nil)
    return (gcra_decide(a.rules, 0, a.t, after))
  elseif kind == 'QUOTA' then
    local set, deleted = {}, {}
    local counts = {}
    for i = 1, #a.buckets do
      counts[i] = c.counts[i]
      local v = c.stored[i]
      if v then
        local left = v - min(max(a.cost, 0), max(v, 0))
        if left > 0 then set[#set + 1] = a.buckets[i].field; set[#set + 1] = istr(left); counts[i] = left
        else deleted[#deleted + 1] = a.buckets[i].field; counts[i] = 0 end
      end
    end
    hash_finish(key, set, deleted, nil)
    return quota_decide(a.periods, a.buckets, counts, 0, a.t)
  else
    return lease_refund(c.st)
  end
end

local function all_reply(replies, costs)
  local refused, admitted
  local refused_wait, admitted_room -- the wait (-1: BIG) and headroom of each so far
  for i = 1, #replies do
    local r = replies[i]
    if r[1] ~= 0 then
      local w = r[5] == -1 and BIG or r[5]
      if not refused or w > refused_wait then refused, refused_wait = i, w end
    else
      local room = floor(max(r[4], 0) / max(costs[i], 1))
      if not admitted or room < admitted_room or (room == admitted_room and r[6] > replies[admitted][6]) then
        admitted, admitted_room = i, room
      end
    end
  end
  local b = refused or admitted or 1
  local limited = refused and 1 or 0
  local r = replies[b]
  return {limited, b, r[2], r[3], r[4], r[5], r[6]}
end

-- The Redis type of each clause kind's key, and the key order.
local KIND_TYPE = {CHECK = 'zset', LEASE = 'zset', THROTTLE = 'hash', QUOTA = 'hash'}
local function by_key_index(x, y) return x.k < y.k end

-- Reads every clause's key in key order (no writes).
local function open_clauses(order, details, write, server_time)
  for _, c in ipairs(order) do
    c.details = details
    clause_open(c, write, server_time)
  end
end

local function all_run(keys, args, write, refund_only)
  local server_time = clock_for(#keys > 0 and args[1] or '*', write)
  local numkeys = #keys
  local rest_from = 1
  if numkeys == 0 then
    -- the keys were not given to FCALL (a numkeys the module refuses): the
    -- module's own numkeys errors
    local s = args[1]
    if s == nil then arg_error('missing numkeys') end
    local n = parse_int(s, 1, MAX_KEYS)
    if not n then
      arg_error("invalid numkeys '" .. show(s) .. "': expected an integer from 1 to " .. MAX_KEYS)
    end
    if #args - 1 < n then
      arg_error('numkeys is ' .. n .. ' but only ' .. (#args - 1) .. ' arguments follow it')
    end
    arg_error('rl_all takes its keys as FCALL keys: FCALL rl_all numkeys key [key ...] now clause ...')
  end
  if numkeys > MAX_KEYS then
    arg_error("invalid numkeys '" .. numkeys .. "': expected an integer from 1 to " .. MAX_KEYS)
  end
  local seen = {}
  for j = 1, numkeys do
    local i = seen[keys[j]]
    if i then
      arg_error('key ' .. j .. ' repeats key ' .. i .. " ('" .. show(keys[j]) .. "'): the keys must be distinct")
    end
    seen[keys[j]] = j
  end
  local now_arg = args[rest_from]
  if now_arg == nil then arg_error('missing now') end
  local ok, err = pcall(parse_now, now_arg, server_time)
  if not ok then
    if type(err) == 'string' and sub(err, 1, 4) == 'ERR ' then
      fail(err .. ' (now is the argument after the ' .. numkeys .. ' key' ..
        (numkeys == 1 and '' or 's') .. ' numkeys counts)')
    end
    error(err, 0)
  end
  local spans, ending = split_clauses(args, rest_from + 1, write)
  local mode = (not write and 'peek') or (ending.refund and 'refund') or 'admit'
  if refund_only and mode ~= 'refund' then arg_error('rl_refund runs refunds only: add REFUND') end
  local used = {}
  local clauses = {}
  local rules = 0
  for i = 1, #spans do
    local span = spans[i]
    local n = i
    if span.index == nil then arg_error('missing key index for clause ' .. n) end
    local k = parse_int(span.index, 1, numkeys)
    if not k then
      arg_error("invalid key index '" .. show(span.index) .. "' for clause " .. n ..
        ': expected an integer from 1 to ' .. numkeys)
    end
    if used[k] then
      arg_error('key index ' .. k .. ' for clause ' .. n ..
        ' is used by an earlier clause: each key belongs to exactly one clause')
    end
    used[k] = true
    local cargs = {now_arg, unpack(args, span.first, span.last)}
    local a = parse_clause(n, span.kind, cargs, span.misplaced, mode, server_time)
    rules = rules + clause_rules(span.kind, a)
    if rules > MAX_RULES then
      arg_error('too many rules: ' .. rules .. ' given over all clauses, at most ' .. MAX_RULES .. ' per call')
    end
    clauses[n] = {n = n, kind = span.kind, k = k, key = keys[k], args = a}
  end
  for k = 1, numkeys do
    if not used[k] then
      arg_error('key ' .. k .. ' is used by no clause: each key belongs to exactly one clause')
    end
  end
  local order = {}
  for i = 1, #clauses do order[i] = clauses[i] end
  table.sort(order, by_key_index)
  -- WRONGTYPE in key order, then stored values in key order. Each kind's
  -- first read of its key refuses a wrong type, so the reads in key order
  -- give WRONGTYPE first unless a stored value fails before it: then
  -- the types of all the keys decide which error is the call's.
  local opened, err = pcall(open_clauses, order, ending.details, write, server_time)
  if not opened then
    for _, c in ipairs(order) do
      local ty = call('TYPE', c.key).ok
      if ty ~= 'none' and ty ~= KIND_TYPE[c.kind] then fail(WRONGTYPE) end
    end
    error(err, 0)
  end
  local replies, costs = {}, {}
  for _, c in ipairs(order) do
    if mode ~= 'refund' then
      c.reply = clause_decide(c)
      replies[c.n] = c.reply
      costs[c.n] = c.args.cost
    end
  end
  local function details_of(phase)
    local d = {}
    for i = 1, #clauses do d[i] = clause_details(clauses[i], phase) end
    return d
  end
  local function with(reply, d)
    if not ending.details then return reply end
    for i = 1, #d do reply[#reply + 1] = d[i] end
    return reply
  end
  if mode == 'refund' then
    for _, c in ipairs(order) do
      c.reply = clause_refund(c)
      replies[c.n] = c.reply
      costs[c.n] = 0
    end
    local d = ending.details and details_of('refunded') or nil
    return with(all_reply(replies, costs), d)
  end
  local admitted = true
  for i = 1, #clauses do if replies[i][1] ~= 0 then admitted = false end end
  if mode == 'peek' or not admitted then
    local d = ending.details and details_of(admitted and 'admitted' or 'rejected') or nil
    return with(all_reply(replies, costs), d)
  end
  local d
  if ending.details then
    d = {}
    for i = 1, #clauses do
      if clauses[i].kind ~= 'LEASE' then d[i] = clause_details(clauses[i], 'admitted') end
    end
  end
  for _, c in ipairs(order) do
    replies[c.n] = clause_commit(c, server_time)
  end
  if d then
    for i = 1, #clauses do
      if clauses[i].kind == 'LEASE' then d[i] = {clauses[i].st.reply} end
    end
  end
  return with(all_reply(replies, costs), d)
end

---------------------------------------------------------------- registration
-- Redis's arity check, as the module's command table declares it (the
-- command name counts).
local function arity_error(name)
  fail("ERR wrong number of arguments for '" .. name .. "' command")
end

local function run(f, keys, args)
  local ok, r = pcall(f, keys, args)
  if ok then return r end
  if type(r) == 'table' and r.err then r = r.err end
  if type(r) == 'string' and find(r, '^[A-Z]+ ') then return redis.error_reply(r) end
  return redis.error_reply('ERR ratelimit library: ' .. tostring(r))
end

-- One key then arguments: the module's `RL.X key ...` commands.
local function keyed(name, arity, body, flag)
  local function checked(keys, args)
    local total = 1 + #keys + #args
    if (arity < 0 and total < -arity) or (arity > 0 and total ~= arity) then arity_error(name) end
    if #keys ~= 1 then
      arg_error(name .. ' takes 1 key: FCALL rl_' .. sub(name, 4) .. ' 1 key ...')
    end
    return body(keys[1], args, flag)
  end
  return function(keys, args) return run(checked, keys, args) end
end

local function two_keys(name, arity, body)
  return function(keys, args)
    return run(function()
      if 1 + #keys + #args ~= arity then arity_error(name) end
      if #keys ~= 2 then
        arg_error(name .. ' takes 2 keys: FCALL rl_' .. sub(name, 4) .. ' 2 key key ...')
      end
      return body(keys, args)
    end, keys, args)
  end
end

local function all_entry(name, write)
  return function(keys, args)
    return run(function()
      local total = 1 + #args + (#keys > 0 and #keys + 1 or 0)
      if total < 5 then arity_error(name) end
      return all_run(keys, args, write, false)
    end, keys, args)
  end
end

local entries = {}
local function register(name, f) entries[name] = f end
register('rl_check', keyed('rl.check', -5, check_run, true))
register('rl_peek', keyed('rl.peek', -5, check_run, false))
register('rl_throttle', keyed('rl.throttle', -6, throttle_run, true))
register('rl_throttlepeek', keyed('rl.throttlepeek', -6, throttle_run, false))
register('rl_quota', keyed('rl.quota', -6, quota_run, true))
register('rl_quotapeek', keyed('rl.quotapeek', -6, quota_run, false))
register('rl_lease', keyed('rl.lease', -5, lease_run, true))
register('rl_leasepeek', keyed('rl.leasepeek', -4, lease_run, false))
register('rl_release', keyed('rl.release', -4, release_run))
register('rl_renew', keyed('rl.renew', -5, renew_run))
register('rl_dayhour', two_keys('rl.dayhour', 7, dayhour_run))
register('rl_lockcount', two_keys('rl.lockcount', 6, lockcount_run))
register('rl_all', all_entry('rl.all', true))
register('rl_allpeek', all_entry('rl.allpeek', false))

-- Refunds above maxmemory (SPEC "Memory"): FCALL rl_refund numkeys key ...
-- check|throttle|quota|all <that command's arguments, REFUND included>.
register('rl_refund', function(keys, args)
  return run(function()
    local what = args[1] and string.lower(args[1])
    local rest = {}
    for i = 2, #args do rest[#rest + 1] = args[i] end
    -- the arity of the command whose refund this is
    local arity = ({check = 5, throttle = 6, quota = 6, all = 5})[what]
    if arity then
      local total = 1 + #keys + #rest + (what == 'all' and 1 or 0)
      if total < arity then arity_error('rl.' .. what) end
    end
    if what == 'all' then return all_run(keys, rest, true, true) end
    if #keys ~= 1 then arg_error('rl_refund takes the refund call\'s keys') end
    if what == 'check' then return check_run(keys[1], rest, true, true)
    elseif what == 'throttle' then return throttle_run(keys[1], rest, true, true)
    elseif what == 'quota' then return quota_run(keys[1], rest, true, true) end
    arg_error("rl_refund: unknown command '" .. show(args[1] or '') .. "' (expected CHECK, THROTTLE, QUOTA or ALL)")
  end, keys, args)
end)

register('rl_version', function() return RL_VERSION end)
return entries
end

local entries
local function entry(name)
  return function(keys, args)
    if not entries then entries = build() end
    return entries[name](keys, args)
  end
end

local RO, OOM = {'no-writes'}, {'allow-oom'}
local function register(name, flags)
  redis.register_function{function_name = name, callback = entry(name), flags = flags}
end
register('rl_check')
register('rl_peek', RO)
register('rl_throttle')
register('rl_throttlepeek', RO)
register('rl_quota')
register('rl_quotapeek', RO)
register('rl_lease')
register('rl_leasepeek', RO)
register('rl_release', OOM)
register('rl_renew', OOM)
register('rl_dayhour')
register('rl_lockcount')
register('rl_all')
register('rl_allpeek', RO)
register('rl_refund', OOM)
register('rl_version', RO)
