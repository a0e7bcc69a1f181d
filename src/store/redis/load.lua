-- Reads one session's head and the newest events of its log in one atomic step, so that the
-- two always agree: at least ARGV[1] events, and every event past the head's checkpoint (the
-- head's `n` minus `c`), which the reader folds onto the checkpoint.
-- KEYS: 1 head, 2 log. ARGV: 1 how many of the newest events the caller wants (0 or more).
-- Returns {{v, e, n, r}, events}; absent fields are nil.
local head = redis.call('HMGET', KEYS[1], 'v', 'e', 'n', 'r', 'c')
local want = tonumber(ARGV[1])
if head[3] and head[5] then
  want = math.max(want, tonumber(head[3]) - tonumber(head[5]))
end
local events = {}
if want > 0 then
  events = redis.call('LRANGE', KEYS[2], -want, -1)
end
return {{head[1], head[2], head[3], head[4]}, events}
