-- Deletes a lease if it is still the one with this token (compare-and-delete), and the head's
-- mirror of that token (see append.lua) in any case, so that nothing is written under it any
-- more. KEYS: 1 lease, 2 head. ARGV: 1 token. Returns 1 if the lease was deleted, 0 if it was
-- gone or another's.
local released = 0
if redis.call('HGET', KEYS[1], 't') == ARGV[1] then
  redis.call('DEL', KEYS[1])
  released = 1
end
-- A head key of another type (foreign data) does not keep the lease from being given back.
if redis.call('TYPE', KEYS[2])['ok'] == 'hash' and redis.call('HGET', KEYS[2], 't') == ARGV[1] then
  redis.call('HDEL', KEYS[2], 't')
end
return released
