-- ScopeStatistics records of one partition as trend points, each applied
-- once (recurrence_ledger.read.records; after apply_once.lua).
-- KEYS[1] follow-applied hash, KEYS[2] trend totals.
-- ARGV[1] the partition's follow-applied field, ARGV[2] trend limit,
-- ARGV[3] JSON entries, in offset order: o offset, k trend key, s
-- as_of_position, mem trend member, scope scope id.
-- Returns the number of entries applied.
local limit = tonumber(ARGV[2])
return apply_once(ARGV[1], cjson.decode(ARGV[3]), function(e)
  redis.call('ZADD', e.k, e.s, e.mem)
  redis.call('HINCRBY', KEYS[2], e.scope, 1)
  trim(e.k, limit)
end)
