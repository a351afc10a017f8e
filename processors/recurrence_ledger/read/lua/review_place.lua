-- The head of the review scripts (recurrence_ledger.read.scripts prepends
-- it after apply_once.lua): where a review candidate is filed.
-- filters(status): the review-queue filters (Keys.REVIEW_FILTERS) a
-- candidate with that ReviewStatus status passes.
-- place(candidate_id, timestamp, old_status, new_status, prefix): moves the
-- candidate (score `timestamp`, its record's Kafka timestamp in ms) from the
-- filters of `old_status` (nil: it was filed nowhere) to those of
-- `new_status`, in the sorted sets `prefix`
-- .. filter: those of every scope (Keys.queue_prefix) in the namespace's
-- scripts, those of its scope (Keys.scope_queue_prefix) in a scope's.
local function filters(status)
  if status == 'approved' or status == 'rejected' then return {status, 'decided', 'all'} end
  return {status, 'all'}
end
local function place(candidate_id, timestamp, old_status, new_status, prefix)
  if old_status then
    for _, filter in ipairs(filters(old_status)) do redis.call('ZREM', prefix .. filter, candidate_id) end
  end
  for _, filter in ipairs(filters(new_status)) do redis.call('ZADD', prefix .. filter, timestamp, candidate_id) end
end
-- status_of(row): status and decided_at ('' when undecided) of a stored
-- ReviewStatus row (nil: 'open', '').
local function status_of(row)
  if not row then return 'open', '' end
  local record = cjson.decode(row)
  local decided_at = ''
  if type(record.decision) == 'table' then decided_at = record.decision.decided_at end
  return record.status, decided_at
end
