-- Extends a lease if it is still the one with this token. KEYS: 1 lease.
-- ARGV: 1 token, 2 ttl in ms. Returns 1 if extended, 0 if the lease is gone or another's.
if redis.call('HGET', KEYS[1], 't') == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
