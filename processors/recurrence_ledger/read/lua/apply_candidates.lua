-- ReviewCandidates of one partition into the cross-scope review keys, each
-- applied once (recurrence_ledger.read.records; after apply_once.lua and
-- review_place.lua). Every key is of the namespace's slot.
-- KEYS[1] follow-applied hash, KEYS[2] review queue items, KEYS[3] review status.
-- ARGV[1] the partition's follow-applied field, ARGV[2] the review-queue
-- prefix of every scope (Keys.queue_prefix), ARGV[3] JSON entries, in
-- offset order (records.candidate_entry): offset, candidate_id, timestamp
-- (the record's Kafka timestamp, ms), item (the queue item JSON).
-- Every candidate is kept and filed under its ReviewStatus (open until one
-- is applied). (Its scope's keys: apply_scope_candidates.lua.)
-- Returns {entries applied, then for each candidate whose stored status
-- was already decided: its offset, timestamp (ms), decided_at}.
local measured = {}
local applied = apply_once(ARGV[1], cjson.decode(ARGV[3]), function(entry)
  redis.call('HSET', KEYS[2], entry.candidate_id, entry.item)
  local status, decided_at = status_of(redis.call('HGET', KEYS[3], entry.candidate_id))
  place(entry.candidate_id, entry.timestamp, nil, status, ARGV[2])
  if decided_at ~= '' then
    table.insert(measured, entry.offset)
    table.insert(measured, entry.timestamp)
    table.insert(measured, decided_at)
  end
end)
table.insert(measured, 1, applied)
return measured
