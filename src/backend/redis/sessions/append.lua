-- Compare-and-set append of one turn to one session; every key is in the session's hash slot.
-- The fold happens in Rust; this script only checks and writes, so the turn's events and head
-- land atomically or not at all. Shared state and indexes are written after it, by separate
-- commands (see docs/stores.md).
-- KEYS: 1 head (hash v/e/u/n/r/c/f/t), 2 log (list), 3 lease (hash, only for a fenced write)
-- ARGV: 1 base version, 2 epoch (the head's, or a new one when base is 0), 3 new version,
--       4 updated_ms, 5 next_seq, 6 ttl in ms (0 = none), 7 the record as JSON when this
--       append writes a checkpoint, else '', 8 the lease token for a fenced write, else '',
--       9 the lease epoch (fenced) or '', then the events.
-- The epoch (ARGV 2) is random per creation of the session: a session deleted and created
-- again reaches the same versions, and the epoch tells the two apart. The lease epoch is
-- another thing: a number per grant of the session's lease that only grows; the head's `f`
-- holds the newest that wrote.
-- Returns {'1', new version}; {'0', stored version} (Conflict); {'-1', address, instance,
-- lease epoch} when the lease is missing or another's (NotOwner; nils when there is none);
-- {'-2', head's lease epoch} when a newer lease epoch has written (Fenced).
local fenced = ARGV[8] ~= ''
local head = redis.call('HMGET', KEYS[1], 'v', 'e', 'f', 't')
-- The token alone tells a grant: each grant writes a new random one with its epoch, and a
-- renewal keeps both. The head's `t` mirrors the token of the newest grant made while the head
-- existed (claim.lua writes it), so a head naming this token needs no look at the lease: any
-- later grant would have replaced it. Otherwise (a head created since the grant, a head of
-- layout 2, a grant lost to another) the lease decides; its owner's fields name it in a refusal.
local mirrored = fenced and head[4] == ARGV[8]
if fenced and not mirrored then
  local lease = redis.call('HMGET', KEYS[3], 't', 'a', 'i', 'ep')
  if lease[1] ~= ARGV[8] then
    return {'-1', lease[2], lease[3], lease[4]}
  end
end
if fenced and head[3] and tonumber(head[3]) > tonumber(ARGV[9]) then
  return {'-2', head[3]}
end
local found = head[1] or '0'
if found ~= ARGV[1] or (found ~= '0' and head[2] ~= ARGV[2]) then
  return {'0', found}
end
if ARGV[7] ~= '' then
  redis.call('HSET', KEYS[1], 'v', ARGV[3], 'e', ARGV[2], 'u', ARGV[4], 'n', ARGV[5], 'r', ARGV[7],
    'c', ARGV[5])
else
  redis.call('HSET', KEYS[1], 'v', ARGV[3], 'u', ARGV[4], 'n', ARGV[5])
end
if fenced and (head[3] ~= ARGV[9] or not mirrored) then
  redis.call('HSET', KEYS[1], 'f', ARGV[9], 't', ARGV[8])
end
local i = 10
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
return {'1', ARGV[3]}
