package limiters

import "github.com/redis/go-redis/v9"

// The Lua scripts of the Redis store. Each decides one request over every
// limit of one key atomically: refill/roll, check all limits, and consume from
// all of them only when every one admits. Conventions shared by all:
//
//	KEYS[i]     the state key of limit i (all in one hash slot)
//	ARGV[1]     now in Unix µs, or "" to take the time from Redis TIME
//	ARGV[2]     cost n of the request
//	ARGV[3 ...] per-limit parameters, a fixed number per limit
//
// Every script returns five integers: {allowed (0/1), limit (K or N of the
// tightest limit), remaining, retry-after µs, reset-after µs}. Time is in
// integer microseconds (exact in Lua doubles until the year 2255); token
// levels are in micro-tokens. A denied request writes nothing (the sliding
// log trims expired entries). TTLs are set in the same script: the time until
// the state equals a fresh one, plus 1 ms.

const luaPreamble = `
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local n = tonumber(ARGV[2])
local L = #KEYS
local allowed, tight, worst = 1, 0, 0
local function ttl(us)
  return math.ceil(us / 1000) + 1
end
`

// luaBucketAt reads a bucket's state (hash {l = level in micro-tokens, t =
// last update µs}; absent means full) and refills it to now at r
// micro-tokens/µs, capped at k. It returns the level and the last update.
// The token-bucket script and the regional debit script share it.
const luaBucketAt = `
local function bucketAt(key, now, k, r)
  local v = redis.call('HMGET', key, 'l', 't')
  local level, last = k, now
  if v[1] then
    level, last = tonumber(v[1]), tonumber(v[2])
  end
  if now > last and level < k then
    if now - last >= (k - level) / r then
      level = k
    else
      level = math.min(k, level + math.floor((now - last) * r))
    end
  end
  return level, last
end
`

// Token bucket. Per limit: K (tokens), r (tokens/s = micro-tokens/µs).
// State: hash {l = level in micro-tokens, t = last update µs}.
var tokenBucketScript = redis.NewScript(luaPreamble + luaBucketAt + `
local need = n * 1000000
local K, R, LV, T = {}, {}, {}, {}
local function waitfor(level, want, r)
  if level >= want then return 0 end
  return math.ceil((want - level) / r)
end
for i = 1, L do
  local k = tonumber(ARGV[1 + 2 * i]) * 1000000
  local r = tonumber(ARGV[2 + 2 * i])
  local level, last = bucketAt(KEYS[i], now, k, r)
  K[i], R[i], LV[i], T[i] = k, r, math.min(level, k), math.max(last, now)
  if LV[i] < need then
    allowed = 0
    local w = waitfor(LV[i], math.min(need, k), r)
    if tight == 0 or w > worst then
      tight, worst = i, w
    end
  end
end
if allowed == 1 then
  for i = 1, L do
    LV[i] = LV[i] - need
    redis.call('HSET', KEYS[i], 'l', LV[i], 't', T[i])
    redis.call('PEXPIRE', KEYS[i], ttl(T[i] - now + waitfor(LV[i], K[i], R[i])))
    if tight == 0 or LV[i] < LV[tight] then
      tight = i
    end
  end
end
return {allowed, K[tight] / 1000000, math.floor(LV[tight] / 1000000), worst, waitfor(LV[tight], K[tight], R[tight])}
`)

// GCRA. Per limit: T (emission interval µs, may be fractional), tau (K·T µs,
// integer), K. State: string TAT in µs.
var gcraScript = redis.NewScript(luaPreamble + `
local K, T, TAU, B, NT = {}, {}, {}, {}, {}
local function rem(i, ahead)
  if ahead < 0 then ahead = 0 end
  return math.max(0, math.floor((TAU[i] - ahead) / T[i]))
end
for i = 1, L do
  T[i], TAU[i], K[i] = tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1]), tonumber(ARGV[3 * i + 2])
  local tat = tonumber(redis.call('GET', KEYS[i]) or now)
  B[i] = math.max(tat, now)
  NT[i] = B[i] + math.floor(n * T[i] + 0.5)
  if NT[i] - now > TAU[i] then
    allowed = 0
    local w = NT[i] - now - TAU[i]
    if n > K[i] then
      w = B[i] - now
    end
    if tight == 0 or w > worst then
      tight, worst = i, w
    end
  end
end
if allowed == 1 then
  local best = -1
  for i = 1, L do
    redis.call('SET', KEYS[i], NT[i], 'PX', ttl(NT[i] - now))
    local r = rem(i, NT[i] - now)
    if best < 0 or r < best then
      best, tight = r, i
    end
  end
  return {1, K[tight], best, 0, NT[tight] - now}
end
return {0, K[tight], rem(tight, B[tight] - now), worst, math.max(0, B[tight] - now)}
`)

// Fixed window. Per limit: N, W (µs). State: hash {w = window index, c = count}.
var fixedWindowScript = redis.NewScript(luaPreamble + `
local N, W, C, I = {}, {}, {}, {}
for i = 1, L do
  N[i], W[i] = tonumber(ARGV[1 + 2 * i]), tonumber(ARGV[2 + 2 * i])
  I[i] = math.floor(now / W[i])
  local v = redis.call('HMGET', KEYS[i], 'w', 'c')
  C[i] = 0
  if v[1] and tonumber(v[1]) == I[i] then
    C[i] = tonumber(v[2])
  end
  if C[i] + n > N[i] then
    allowed = 0
    local w = (I[i] + 1) * W[i] - now
    if tight == 0 or w > worst then
      tight, worst = i, w
    end
  end
end
if allowed == 1 then
  for i = 1, L do
    C[i] = C[i] + n
    redis.call('HSET', KEYS[i], 'w', I[i], 'c', C[i])
    redis.call('PEXPIRE', KEYS[i], ttl((I[i] + 1) * W[i] - now))
    if tight == 0 or N[i] - C[i] < N[tight] - C[tight] then
      tight = i
    end
  end
end
local reset = 0
if C[tight] > 0 then
  reset = (I[tight] + 1) * W[tight] - now
end
return {allowed, N[tight], math.max(0, N[tight] - C[tight]), worst, reset}
`)

// Sliding log. Per limit: N, W (µs). State: sorted set of admitted times
// (score µs, member "µs:seq").
var slidingLogScript = redis.NewScript(luaPreamble + `
local N, W, C = {}, {}, {}
local function newest(key)
  local e = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if e[2] then
    return tonumber(e[2])
  end
  return nil
end
for i = 1, L do
  N[i], W[i] = tonumber(ARGV[1 + 2 * i]), tonumber(ARGV[2 + 2 * i])
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - W[i])
  C[i] = redis.call('ZCARD', KEYS[i])
  if C[i] + n > N[i] then
    allowed = 0
    local w = 0
    if n <= N[i] then
      local idx = C[i] + n - N[i] - 1
      local e = redis.call('ZRANGE', KEYS[i], idx, idx, 'WITHSCORES')
      w = tonumber(e[2]) + W[i] - now
    elseif C[i] > 0 then
      w = newest(KEYS[i]) + W[i] - now
    end
    if tight == 0 or w > worst then
      tight, worst = i, w
    end
  end
end
if allowed == 1 then
  local stamp = string.format('%.0f:', now)
  for i = 1, L do
    local seq = C[i]
    for j = 1, n do
      while redis.call('ZADD', KEYS[i], 'NX', now, stamp .. seq) == 0 do
        seq = seq + 1
      end
      seq = seq + 1
    end
    C[i] = C[i] + n
    redis.call('PEXPIRE', KEYS[i], ttl(newest(KEYS[i]) + W[i] - now))
    if tight == 0 or N[i] - C[i] < N[tight] - C[tight] then
      tight = i
    end
  end
end
local reset = 0
if C[tight] > 0 then
  reset = newest(KEYS[tight]) + W[tight] - now
end
return {allowed, N[tight], math.max(0, N[tight] - C[tight]), worst, reset}
`)

// Sliding counter. Per limit: N, W (µs). State: hash {w = window index,
// c = count in w, p = count in w-1}.
var slidingCounterScript = redis.NewScript(luaPreamble + `
local N, W, P, C, I, EL = {}, {}, {}, {}, {}, {}
local function reset(i)
  if C[i] > 0 then return 2 * W[i] - EL[i] end
  if P[i] > 0 then return W[i] - EL[i] end
  return 0
end
local function retry(i)
  local prev, cur, lim, w, el = P[i], C[i], N[i], W[i], EL[i]
  if n > lim then return reset(i) end
  if cur + n <= lim and prev > 0 then
    return math.max(0, math.ceil(w * (prev - (lim - cur - n)) / prev) - el)
  end
  local at = 0
  if cur > 0 then at = math.max(0, math.ceil(w * (cur - (lim - n)) / cur)) end
  return w - el + at
end
local function rem(i)
  local est = P[i] * (W[i] - EL[i]) / W[i] + C[i]
  return math.max(0, math.floor(N[i] - est))
end
for i = 1, L do
  N[i], W[i] = tonumber(ARGV[1 + 2 * i]), tonumber(ARGV[2 + 2 * i])
  I[i] = math.floor(now / W[i])
  EL[i] = now - I[i] * W[i]
  P[i], C[i] = 0, 0
  local v = redis.call('HMGET', KEYS[i], 'w', 'c', 'p')
  if v[1] then
    local sw = tonumber(v[1])
    if sw == I[i] then
      P[i], C[i] = tonumber(v[3]), tonumber(v[2])
    elseif sw == I[i] - 1 then
      P[i] = tonumber(v[2])
    end
  end
  if P[i] * (W[i] - EL[i]) + (C[i] + n) * W[i] > N[i] * W[i] then
    allowed = 0
    local w = retry(i)
    if tight == 0 or w > worst then
      tight, worst = i, w
    end
  end
end
if allowed == 1 then
  local best = -1
  for i = 1, L do
    C[i] = C[i] + n
    redis.call('HSET', KEYS[i], 'w', I[i], 'c', C[i], 'p', P[i])
    redis.call('PEXPIRE', KEYS[i], ttl((I[i] + 2) * W[i] - now))
    local r = rem(i)
    if best < 0 or r < best then
      best, tight = r, i
    end
  end
end
return {allowed, N[tight], rem(tight), worst, reset(tight)}
`)
