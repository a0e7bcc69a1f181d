-- Removes one session and its index entries.
-- KEYS: 1 head, 2 log, 3 user index, 4 gc index. ARGV: 1 session id, 2 gc member,
--       3 expected gc score, or '' to delete unconditionally.
-- With a score, the session is removed only if it was not updated since gc chose it.
-- Returns 1 if the session existed and was removed, else 0.
if ARGV[3] ~= '' then
  local score = redis.call('ZSCORE', KEYS[4], ARGV[2])
  if (not score) or tonumber(score) ~= tonumber(ARGV[3]) then
    return 0
  end
end
local existed = redis.call('DEL', KEYS[1], KEYS[2])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[2])
if existed > 0 then
  return 1
end
return 0
