-- ReviewStatus records of one partition and one scope into the scope's
-- keys, each applied once per scope (recurrence_ledger.read.records; after
-- apply_once.lua and review_place.lua). Every key is of the scope's slot.
-- KEYS[1] the scope's applied hash, KEYS[2] the scope's review state.
-- ARGV[1] the partition's applied field, ARGV[2] the scope's review-queue
-- prefix (Keys.scope_queue_prefix), ARGV[3] JSON entries, in offset order
-- (records.scope_review_status_entry): offset, candidate_id, status.
-- The status replaces the one the scope's review state holds; a candidate
-- of the scope already applied moves to the filters of its new status (one
-- not yet applied is filed when it comes).
-- Returns the number of entries applied.
return apply_once(ARGV[1], cjson.decode(ARGV[3]), function(entry)
  local old_status = redis.call('HGET', KEYS[2], 's:' .. entry.candidate_id) or 'open'
  redis.call('HSET', KEYS[2], 's:' .. entry.candidate_id, entry.status)
  local timestamp = redis.call('HGET', KEYS[2], 't:' .. entry.candidate_id)
  if timestamp then place(entry.candidate_id, tonumber(timestamp), old_status, entry.status, ARGV[2]) end
end)
