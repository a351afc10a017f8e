-- One scope of the view, guarded (recurrence_ledger.read.follower_view.FollowerView):
-- the scope keys are replaced only when the record's position is >= the
-- stored one, a revision row only when its version (published by the
-- ledger) is >= the stored row's (absent, so 0, in rows written before
-- record revision 4). The field names come in the payload
-- (follower_view.POSITION_FIELD, VERSION_FIELD). Every key is of
-- the scope's slot; the scope set and index are written after it
-- (index_scope.lua).
-- KEYS[1] scope hash, KEYS[2] top, KEYS[3] review, KEYS[4] revisions hash.
-- ARGV[1] JSON payload: position_field, version_field; scope (null, or pos: the position as 19 digits,
-- fields: [name, value, ...], top: [score, member, ...], review:
-- [member, ...]); rows: [[field, value, version], ...].
-- Returns {scope written (0/1), rows written}.
local function pad(s) return string.rep('0', 19 - #s) .. s end
local p = cjson.decode(ARGV[1])
local wrote = 0
if type(p.scope) == 'table' then
  local stored = redis.call('HGET', KEYS[1], p.position_field)
  if (not stored) or pad(stored) <= p.scope.pos then
    redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
    local f = p.scope.fields
    for i = 1, #f, 2 do redis.call('HSET', KEYS[1], f[i], f[i + 1]) end
    local t = p.scope.top
    for i = 1, #t, 2 do redis.call('ZADD', KEYS[2], t[i], t[i + 1]) end
    for _, m in ipairs(p.scope.review) do redis.call('SADD', KEYS[3], m) end
    wrote = 1
  end
end
local rows = 0
for _, r in ipairs(p.rows) do
  local stored = redis.call('HGET', KEYS[4], r[1])
  local newer = true
  if stored then
    local old = cjson.decode(stored)
    newer = (old[p.version_field] or 0) <= r[3]
  end
  if newer then
    redis.call('HSET', KEYS[4], r[1], r[2])
    rows = rows + 1
  end
end
return {wrote, rows}
