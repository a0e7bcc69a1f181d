-- Takes a session's lease unless another instance holds it and, when asked, reads the session
-- in the same atomic step (read.lua's `read_session`, which precedes this text): what loads is
-- then what the last owner left. All keys in the session's slot.
-- KEYS: 1 lease (hash t token, a address, i instance, ep epoch; expires), 2 epoch counter
--       (a number that only grows; never expires, survives deletion of the session), 3 head
--       (its `t` is set to the new token when it exists), 4 log
-- ARGV: 1 token (random, from the claimant), 2 address, 3 instance, 4 ttl in ms, 5 how many
--       of the newest events to read, or '' to read nothing
-- A lease this instance already holds is taken over: new token, new epoch.
-- Returns {'1', epoch} when granted (also when a read was asked but the session's keys hold
-- foreign data: the grant stands, and the caller's own load meets the error), {'1', epoch,
-- {v, e, n, r}, events} when granted and read (absent fields are nil), {'0', address,
-- instance, epoch} when held by another.
local held = redis.call('HMGET', KEYS[1], 'a', 'i', 'ep')
if held[2] and held[2] ~= ARGV[3] then
  return {'0', held[1], held[2], held[3]}
end
local epoch = redis.call('INCR', KEYS[2])
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 't', ARGV[1], 'a', ARGV[2], 'i', ARGV[3], 'ep', epoch)
redis.call('PEXPIRE', KEYS[1], ARGV[4])
-- The head mirrors the newest grant's token (see append.lua), so that an owner's appends need
-- not read the lease. A head that does not exist yet is left alone: the first append checks
-- the lease and writes the mirror.
local head_type = redis.call('TYPE', KEYS[3])['ok']
if head_type == 'hash' then
  redis.call('HSET', KEYS[3], 't', ARGV[1])
end
-- A script that fails after the grant would keep the lease written: keys of another type are
-- not read here.
local log_type = ARGV[5] ~= '' and redis.call('TYPE', KEYS[4])['ok'] or 'none'
if ARGV[5] == '' or (head_type ~= 'hash' and head_type ~= 'none')
    or (log_type ~= 'list' and log_type ~= 'none') then
  return {'1', tostring(epoch)}
end
local head, events = read_session(KEYS[3], KEYS[4], ARGV[5])
return {'1', tostring(epoch), head, events}
