-- Reads one session's head and the newest events of its log in one atomic step, so that the
-- two always agree. KEYS: 1 head, 2 log. ARGV: 1 how many of the newest events (at least 1).
-- Returns {{v, e, n, r}, events}; absent fields are nil.
local head = redis.call('HMGET', KEYS[1], 'v', 'e', 'n', 'r')
local events = redis.call('LRANGE', KEYS[2], -tonumber(ARGV[1]), -1)
return {head, events}
