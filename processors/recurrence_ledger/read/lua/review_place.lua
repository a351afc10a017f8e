-- The head of the review scripts (recurrence_ledger.read.scripts prepends
-- it after apply_once.lua): where a review candidate is filed.
-- filters(status): the review-queue filters (Keys.REVIEW_FILTERS) a
-- candidate with that ReviewStatus status passes.
-- place(id, ts, old, new, prefix): moves candidate `id` (score `ts`, its
-- record's Kafka timestamp in ms) from the filters of status `old` (nil: it
-- was filed nowhere) to those of status `new`, in the sorted sets `prefix`
-- .. filter: those of every scope (Keys.queue_prefix) in the namespace's
-- scripts, those of its scope (Keys.scope_queue_prefix) in a scope's.
local function filters(status)
  if status == 'approved' or status == 'rejected' then return {status, 'decided', 'all'} end
  return {status, 'all'}
end
local function place(id, ts, old, new, prefix)
  if old then
    for _, f in ipairs(filters(old)) do redis.call('ZREM', prefix .. f, id) end
  end
  for _, f in ipairs(filters(new)) do redis.call('ZADD', prefix .. f, ts, id) end
end
-- status_of(row): status and decided_at ('' when undecided) of a stored
-- ReviewStatus row (nil: 'open', '').
local function status_of(row)
  if not row then return 'open', '' end
  local s = cjson.decode(row)
  local decided = ''
  if type(s.decision) == 'table' then decided = s.decision.decided_at end
  return s.status, decided
end
