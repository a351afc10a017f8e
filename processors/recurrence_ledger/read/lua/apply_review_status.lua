-- ReviewStatus records of one partition (contract §18, the compacted
-- review-status view) into the cross-scope review keys, each applied once
-- (recurrence_ledger.read.records; after apply_once.lua and
-- review_place.lua). Every key is of the namespace's slot.
-- KEYS[1] follow-applied hash, KEYS[2] review queue items, KEYS[3] review
-- status, KEYS[4] repair counts.
-- ARGV[1] the partition's follow-applied field, ARGV[2] the review-queue
-- prefix of every scope (Keys.queue_prefix), ARGV[3] JSON entries, in
-- offset order (records.review_status_entry): offset, candidate_id,
-- status, repair_status (the repair's status, "" for none), row (the
-- record as canonical JSON).
-- The row replaces the candidate's stored one; a candidate already applied
-- moves to the filters of its new status (one not yet applied is filed when
-- it comes). (Its scope's keys: apply_scope_review_status.lua.)
-- Returns {entries applied, then for each applied candidate decided by
-- this row for the first time: the row's offset, the candidate's
-- timestamp (ms), decided_at}.
local measured = {}
local applied = apply_once(ARGV[1], cjson.decode(ARGV[3]), function(entry)
  local old_row = redis.call('HGET', KEYS[3], entry.candidate_id)
  local old_status, old_decided_at = status_of(old_row)
  if old_row then
    local repair = cjson.decode(old_row).repair
    if type(repair) == 'table' then redis.call('HINCRBY', KEYS[4], repair.status, -1) end
  end
  redis.call('HSET', KEYS[3], entry.candidate_id, entry.row)
  if entry.repair_status ~= '' then redis.call('HINCRBY', KEYS[4], entry.repair_status, 1) end
  local item = redis.call('HGET', KEYS[2], entry.candidate_id)
  if item then
    local timestamp = cjson.decode(item).timestamp
    place(entry.candidate_id, timestamp, old_status, entry.status, ARGV[2])
    local _, decided_at = status_of(entry.row)
    if decided_at ~= '' and old_decided_at == '' then
      table.insert(measured, entry.offset)
      table.insert(measured, timestamp)
      table.insert(measured, decided_at)
    end
  end
end)
table.insert(measured, 1, applied)
return measured
