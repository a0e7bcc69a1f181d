-- Removes one session's head and log; its index entries are removed after, by the caller.
-- KEYS: 1 head, 2 log. ARGV: 1 the gc score the caller saw, or '' to delete unconditionally.
-- With a score, the session is removed only if its head's own updated_ms is not newer than the
-- score: a gc index entry that lags behind its session never removes a session updated since.
-- Returns {1, ''} if the session existed and was removed, {0, ''} if it did not exist, and
-- {2, updated_ms} if it was kept because it was updated after the score.
if ARGV[1] ~= '' then
  local updated = redis.call('HGET', KEYS[1], 'u')
  if updated and tonumber(updated) > tonumber(ARGV[1]) then
    return {2, updated}
  end
end
if redis.call('DEL', KEYS[1], KEYS[2]) > 0 then
  return {1, ''}
end
return {0, ''}
