-- Deletes a lease if it is still the one with this token (compare-and-delete), and the head's
-- mirror of that token (see append.lua), so that nothing written under it is taken any more.
-- KEYS: 1 lease, 2 head. ARGV: 1 token. Returns 1 if deleted, 0 if it was gone or another's.
if redis.call('HGET', KEYS[2], 't') == ARGV[1] then
  redis.call('HDEL', KEYS[2], 't')
end
if redis.call('HGET', KEYS[1], 't') == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
