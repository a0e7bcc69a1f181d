-- Shared by load.lua and claim.lua, which the store sends with this text in front of them.
-- Reads one session's head and the newest events of its log, so that the two always agree: at
-- least `want` events, and every event past the head's checkpoint (the head's `n` minus `c`),
-- which the reader folds onto the checkpoint. Returns {v, e, n, r} (absent fields are nil) and
-- the events.
local function read_session(head_key, log_key, want)
  local head = redis.call('HMGET', head_key, 'v', 'e', 'n', 'r', 'c')
  want = tonumber(want)
  if head[3] and head[5] then
    want = math.max(want, tonumber(head[3]) - tonumber(head[5]))
  end
  local events = {}
  if want > 0 then
    events = redis.call('LRANGE', log_key, -want, -1)
  end
  return {head[1], head[2], head[3], head[4]}, events
end
