-- ReviewCandidates of one partition, each applied once
-- (recurrence_ledger.read.records; after apply_once.lua and review_place.lua).
-- KEYS[1] follow-applied hash, KEYS[2] review queue items, KEYS[3] review status.
-- ARGV[1] the partition's follow-applied field, ARGV[2] the review-queue
-- prefix of every scope (Keys.queue_prefix), ARGV[3] JSON entries, in
-- offset order: o offset, id candidate_id, ts Kafka timestamp (ms), sq the
-- scope's review-queue prefix, m history-meta key, a avoided key, start
-- run start as 19 digits ("" for null), surface repair_surface, item the
-- queue item JSON.
-- Every candidate is kept and filed under its ReviewStatus (open until one
-- is applied). Its run is recorded in the revision's history meta while it
-- is still the revision's current run: no avoided verdict after its start.
-- Returns {entries applied, then for each candidate whose stored status
-- was already decided: its timestamp (ms), decided_at}.
local measured = {}
local applied = apply_once(ARGV[1], cjson.decode(ARGV[3]), function(e)
  redis.call('HSET', KEYS[2], e.id, e.item)
  local last = redis.call('ZREVRANGE', e.a, 0, 0)
  local closed = #last > 0 and (e.start == '' or last[1] > e.start)
  if not closed then
    redis.call('HSET', e.m, 'c:' .. e.id, e.start .. '|' .. e.surface)
  end
  local status, decided = status_of(redis.call('HGET', KEYS[3], e.id))
  place(e.id, e.ts, nil, status, ARGV[2], e.sq)
  if decided ~= '' then
    table.insert(measured, e.ts)
    table.insert(measured, decided)
  end
end)
table.insert(measured, 1, applied)
return measured
