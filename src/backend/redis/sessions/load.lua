-- Reads one session's head and the newest events of its log in one atomic step (read.lua's
-- `read_session`, which precedes this text).
-- KEYS: 1 head, 2 log. ARGV: 1 how many of the newest events the caller wants (0 or more).
-- Returns {{v, e, n, r}, events}; absent fields are nil.
local head, events = read_session(KEYS[1], KEYS[2], ARGV[1])
return {head, events}
