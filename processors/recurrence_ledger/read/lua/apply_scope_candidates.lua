-- ReviewCandidates of one partition and one scope into the scope's keys,
-- each applied once per scope (recurrence_ledger.read.records; after
-- apply_once.lua and review_place.lua). Every key is of the scope's slot.
-- KEYS[1] the scope's applied hash, KEYS[2] the scope's review state.
-- ARGV[1] the partition's applied field, ARGV[2] the scope's review-queue
-- prefix (Keys.scope_queue_prefix), ARGV[3] JSON entries, in offset order:
-- o offset, id candidate_id, ts Kafka timestamp (ms), m history-meta key,
-- a avoided key, start run start as 19 digits ("" for null), surface
-- repair_surface.
-- The candidate is filed in the scope's queue under the status the scope's
-- review state holds for it (open until a ReviewStatus is applied), and its
-- run is recorded in the revision's history meta while it is still the
-- revision's current run: no avoided verdict after its start.
-- Returns the number of entries applied.
return apply_once(ARGV[1], cjson.decode(ARGV[3]), function(e)
  local last = redis.call('ZREVRANGE', e.a, 0, 0)
  local closed = #last > 0 and (e.start == '' or last[1] > e.start)
  if not closed then
    redis.call('HSET', e.m, 'c:' .. e.id, e.start .. '|' .. e.surface)
  end
  redis.call('HSET', KEYS[2], 't:' .. e.id, e.ts)
  local status = redis.call('HGET', KEYS[2], 's:' .. e.id) or 'open'
  place(e.id, e.ts, nil, status, ARGV[2])
end)
