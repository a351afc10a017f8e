-- ReviewCandidates of one partition and one scope into the scope's keys,
-- each applied once per scope (recurrence_ledger.read.records; after
-- apply_once.lua and review_place.lua). Every key is of the scope's slot.
-- KEYS[1] the scope's applied hash, KEYS[2] the scope's review state.
-- ARGV[1] the partition's applied field, ARGV[2] the scope's review-queue
-- prefix (Keys.scope_queue_prefix), ARGV[3] JSON entries, in offset order
-- (records.scope_candidate_entry): offset, candidate_id, timestamp (the
-- record's Kafka timestamp, ms), history_meta_key, avoided_key,
-- run_start_position (19 digits, "" for null), repair_surface.
-- The candidate is filed in the scope's queue under the status the scope's
-- review state holds for it (open until a ReviewStatus is applied), and its
-- run is recorded in the revision's history meta while it is still the
-- revision's current run: no avoided verdict after its start.
-- Returns the number of entries applied.
return apply_once(ARGV[1], cjson.decode(ARGV[3]), function(entry)
  local last_avoided = redis.call('ZREVRANGE', entry.avoided_key, 0, 0)
  local closed = #last_avoided > 0 and (entry.run_start_position == '' or last_avoided[1] > entry.run_start_position)
  if not closed then
    redis.call('HSET', entry.history_meta_key, 'c:' .. entry.candidate_id, entry.run_start_position .. '|' .. entry.repair_surface)
  end
  redis.call('HSET', KEYS[2], 't:' .. entry.candidate_id, entry.timestamp)
  local status = redis.call('HGET', KEYS[2], 's:' .. entry.candidate_id) or 'open'
  place(entry.candidate_id, entry.timestamp, nil, status, ARGV[2])
end)
