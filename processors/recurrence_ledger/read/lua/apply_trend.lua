-- ScopeStatistics records of one partition and one scope as trend points,
-- each applied once per scope (recurrence_ledger.read.records; after
-- apply_once.lua). Every key is of the scope's slot.
-- KEYS[1] the scope's applied hash, KEYS[2] its trend meta (total), KEYS[3] its trend.
-- ARGV[1] the partition's applied field, ARGV[2] trend limit, ARGV[3] JSON
-- entries, in offset order (records.trend_entry): offset, as_of_position,
-- member (the trend member).
-- Returns the number of entries applied.
local limit = tonumber(ARGV[2])
return apply_once(ARGV[1], cjson.decode(ARGV[3]), function(entry)
  redis.call('ZADD', KEYS[3], entry.as_of_position, entry.member)
  redis.call('HINCRBY', KEYS[2], 'total', 1)
  trim(KEYS[3], limit)
end)
