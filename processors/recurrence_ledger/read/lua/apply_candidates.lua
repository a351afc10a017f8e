-- ReviewCandidates of one partition, each applied once
-- (recurrence_ledger.read.records; after apply_once.lua).
-- KEYS[1] follow-applied hash, KEYS[2] review queue, KEYS[3] review queue items.
-- ARGV[1] the partition's follow-applied field, ARGV[2] JSON entries, in
-- offset order: o offset, id candidate_id, ts Kafka timestamp (ms), q scope
-- review-queue key, sk surface review-queue key, m history-meta key, a
-- avoided key, start run start as 19 digits ("" for null), surface
-- repair_surface, item the queue item JSON.
-- A candidate enters the queue only while it is open: no avoided verdict of
-- its revision after its run's start.
-- Returns the number of entries applied.
return apply_once(ARGV[1], cjson.decode(ARGV[2]), function(e)
  local last = redis.call('ZREVRANGE', e.a, 0, 0)
  local closed = #last > 0 and (e.start == '' or last[1] > e.start)
  if not closed then
    redis.call('ZADD', KEYS[2], e.ts, e.id)
    redis.call('ZADD', e.q, e.ts, e.id)
    redis.call('ZADD', e.sk, e.ts, e.id)
    redis.call('HSET', KEYS[3], e.id, e.item)
    redis.call('HSET', e.m, 'c:' .. e.id, e.start .. '|' .. e.surface)
  end
end)
