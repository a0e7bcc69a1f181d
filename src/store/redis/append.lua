-- Compare-and-set append of one turn. The fold happens in Rust; this script only checks the
-- version and writes, so the whole turn lands atomically or not at all.
-- KEYS: 1 head (hash v/r/e), 2 log (list), 3 user index (zset), 4 user state (hash),
--       5 app state (hash), 6 gc index (zset)
-- ARGV: 1 base version, 2 epoch (the head's, or a new one when base is 0), 3 new version,
--       4 record JSON, 5 session id, 6 gc member, 7 updated_ms, 8 ttl in ms (0 = none),
--       9 event count, then the events, then the user delta and the app delta, each as a
--       count n and n field/value pairs (an empty value deletes the field).
-- The epoch is random per creation of the session: a session deleted and created again reaches
-- the same versions, and the epoch tells the two apart.
-- Returns {1, new version} or {0, stored version}.
local head = redis.call('HMGET', KEYS[1], 'v', 'e')
local found = head[1] or '0'
if found ~= ARGV[1] or (found ~= '0' and head[2] ~= ARGV[2]) then
  return {0, found}
end
redis.call('HSET', KEYS[1], 'v', ARGV[3], 'r', ARGV[4], 'e', ARGV[2])
local i = 10
local last = i + tonumber(ARGV[9]) - 1
-- Chunked so that a large turn stays within Lua's limit on unpacked arguments.
while i <= last do
  local j = math.min(i + 999, last)
  redis.call('RPUSH', KEYS[2], unpack(ARGV, i, j))
  i = j + 1
end
for _, target in ipairs({KEYS[4], KEYS[5]}) do
  local n = tonumber(ARGV[i])
  i = i + 1
  for _ = 1, n do
    if ARGV[i + 1] == '' then
      redis.call('HDEL', target, ARGV[i])
    else
      redis.call('HSET', target, ARGV[i], ARGV[i + 1])
    end
    i = i + 2
  end
end
redis.call('ZADD', KEYS[3], 0, ARGV[5])
redis.call('ZADD', KEYS[6], ARGV[7], ARGV[6])
local ttl = tonumber(ARGV[8])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
end
return {1, ARGV[3]}
