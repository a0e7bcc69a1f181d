-- Compare-and-set append of one turn to one session; every key is in the session's hash slot.
-- The fold happens in Rust; this script only checks the version and writes, so the turn's
-- events and head land atomically or not at all. Shared state and indexes are written after
-- it, by separate commands (see docs/stores.md).
-- KEYS: 1 head (hash v/e/u/n/r), 2 log (list)
-- ARGV: 1 base version, 2 epoch (the head's, or a new one when base is 0), 3 new version,
--       4 updated_ms, 5 next_seq, 6 ttl in ms (0 = none), 7 the record as JSON when this
--       append writes a checkpoint, else '', then the events.
-- The epoch is random per creation of the session: a session deleted and created again reaches
-- the same versions, and the epoch tells the two apart.
-- Returns {1, new version} or {0, stored version}.
local head = redis.call('HMGET', KEYS[1], 'v', 'e')
local found = head[1] or '0'
if found ~= ARGV[1] or (found ~= '0' and head[2] ~= ARGV[2]) then
  return {0, found}
end
if ARGV[7] ~= '' then
  redis.call('HSET', KEYS[1], 'v', ARGV[3], 'e', ARGV[2], 'u', ARGV[4], 'n', ARGV[5], 'r', ARGV[7])
else
  redis.call('HSET', KEYS[1], 'v', ARGV[3], 'u', ARGV[4], 'n', ARGV[5])
end
local i = 8
-- Chunked so that a large turn stays within Lua's limit on unpacked arguments.
while i <= #ARGV do
  local j = math.min(i + 999, #ARGV)
  redis.call('RPUSH', KEYS[2], unpack(ARGV, i, j))
  i = j + 1
end
local ttl = tonumber(ARGV[6])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
end
return {1, ARGV[3]}
