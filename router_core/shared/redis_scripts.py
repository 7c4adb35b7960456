"""The Lua scripts :class:`router_core.shared.redis_store.RedisStore` runs on Redis, by name.

Each runs atomically on the server; those that read time read the server's clock (``TIME``), so the
replicas' clocks do not matter. The store loads them once (and again after an outage) and calls
them by SHA; what each is for is in :mod:`router_core.shared.redis_store`.
"""

__all__ = ["SCRIPTS"]

# KEYS[1] bucket; ARGV rate, burst, floor, debt, want -> {granted, wait s, tokens left} (floats as strings:
# a Lua number reaches the client as an integer). wait: until one more token is there above the floor.
_GRANT = """
local rate, burst, floor = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local debt, want = tonumber(ARGV[4]), tonumber(ARGV[5])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local held = redis.call('HMGET', KEYS[1], 't', 'at')
local tokens, at = tonumber(held[1]), tonumber(held[2])
if tokens == nil or at == nil then tokens, at = burst, now end
if now > at then tokens = math.min(burst, tokens + (now - at) * rate); at = now end
tokens = math.min(burst, tokens - debt)
local granted = math.max(0, math.min(want, math.floor(tokens - floor + 1e-9)))
tokens = tokens - granted
local wait = 0
if tokens - floor < 1 then wait = (1 + floor - tokens) / rate end
redis.call('HSET', KEYS[1], 't', tostring(tokens), 'at', tostring(at))
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) / rate * 1000) + 1000)
return {granted, tostring(wait), tostring(tokens)}
"""

# KEYS[1] counter, KEYS[2] its restoration record (see _RESTORE); ARGV amount, ttl ms -> {new total (string),
# ms left}. The TTL is set at creation only. A record left from an earlier life of the counter is dropped.
_ADD = """
if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('DEL', KEYS[2])
elseif redis.call('EXISTS', KEYS[2]) == 1 then redis.call('HINCRBYFLOAT', KEYS[2], 'added', ARGV[1]) end
local total = redis.call('INCRBYFLOAT', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2], 'NX')
return {total, redis.call('PTTL', KEYS[1])}
"""

# KEYS[1] counter, KEYS[2] its restoration record (hash: base, added); ARGV a total a replica knew from the
# server before, its ms left -> {the counter's total (string), ms left}. The counter becomes the largest total restored
# (base) plus every add made on this server (added: what the counter held at the first restore, then _ADD's),
# so replicas restoring the same total count it once, in any order with their adds. The TTL is never shortened.
_RESTORE = """
local held = redis.call('HMGET', KEYS[2], 'base', 'added')
local base, added = tonumber(held[1]), tonumber(held[2])
if redis.call('EXISTS', KEYS[1]) == 0 or base == nil or added == nil then
  base, added = 0, tonumber(redis.call('GET', KEYS[1]) or '0') or 0
end
base = math.max(base, tonumber(ARGV[1]))
local total = string.format('%.17g', base + added)
redis.call('SET', KEYS[1], total, 'KEEPTTL')
local ms, left = redis.call('PTTL', KEYS[1]), tonumber(ARGV[2])
if ms < left then ms = left; redis.call('PEXPIRE', KEYS[1], ms) end
redis.call('HSET', KEYS[2], 'base', string.format('%.17g', base), 'added', string.format('%.17g', added))
redis.call('PEXPIRE', KEYS[2], ms)
return {total, ms}
"""

# KEYS[1] binding; ARGV value, ttl ms, mode (nx | set), channel, message -> the value held.
_BIND = """
local set
if ARGV[3] == 'set' then set = redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else set = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) end
if set then
  redis.call('PUBLISH', ARGV[4], ARGV[5])
  return ARGV[1]
end
return redis.call('GETEX', KEYS[1], 'PX', ARGV[2])
"""

# KEYS[1] replicas (sorted set); ARGV id, stale seconds -> how many replicas beat within ``stale``.
_PRESENCE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2]) * 1000))
return redis.call('ZCARD', KEYS[1])
"""

# KEYS[1] a channel's kept messages (hash: key -> "<until ms, server clock>:<payload>"); ARGV key, payload,
# ttl ms (0: delete), nx ("1": unless one is held, unexpired) -> 1 written, 0 not. The hash lives as long as
# its longest-lived field; expired fields are dropped as they are read.
_KEEP = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ms = tonumber(ARGV[3])
if ms <= 0 then redis.call('HDEL', KEYS[1], ARGV[1]); return 1 end
if ARGV[4] == '1' then
  local held = redis.call('HGET', KEYS[1], ARGV[1])
  local until_ms = held and tonumber(string.match(held, '^(%d+):'))
  if until_ms and until_ms > now then return 0 end
end
redis.call('HSET', KEYS[1], ARGV[1], string.format('%d:', now + ms) .. ARGV[2])
if redis.call('PTTL', KEYS[1]) < ms then redis.call('PEXPIRE', KEYS[1], ms) end
return 1
"""

# KEYS[1] a channel's kept messages -> {key, payload, ms left, ...} of the unexpired ones (the others dropped).
_KEPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local all, out = redis.call('HGETALL', KEYS[1]), {}
for i = 1, #all, 2 do
  local until_ms, payload = string.match(all[i + 1], '^(%d+):(.*)$')
  until_ms = tonumber(until_ms)
  if until_ms and until_ms > now then
    out[#out + 1] = all[i]; out[#out + 1] = payload; out[#out + 1] = until_ms - now
  else redis.call('HDEL', KEYS[1], all[i]) end
end
return out
"""

SCRIPTS = {"grant": _GRANT, "add": _ADD, "restore": _RESTORE, "bind": _BIND, "presence": _PRESENCE, "keep": _KEEP,
           "kept": _KEPT}
