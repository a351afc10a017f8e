-- The head of every apply_* script (recurrence_ledger.read.scripts prepends
-- it): exactly-once application of one partition's records (of one scope,
-- or the namespace's part of them).
-- apply_once(field, entries, apply): calls apply(entry) for each entry (in
-- offset order, entry.offset its Kafka offset) at or past the partition's
-- follow-applied offset, the field `field` of the hash KEYS[1] (a scope's
-- applied hash, or the namespace's follow-applied), and moves that offset
-- past them in the same script. Returns the number of entries applied.
-- trim(key, limit): keeps the newest `limit` members of the sorted set `key`.
local function apply_once(field, entries, apply)
  local next_offset = tonumber(redis.call('HGET', KEYS[1], field) or '0')
  local applied = 0
  for _, entry in ipairs(entries) do
    if entry.offset >= next_offset then
      apply(entry)
      next_offset = entry.offset + 1
      applied = applied + 1
    end
  end
  redis.call('HSET', KEYS[1], field, next_offset)
  return applied
end
local function trim(key, limit)
  local size = redis.call('ZCARD', key)
  if size > limit then redis.call('ZREMRANGEBYRANK', key, 0, size - limit - 1) end
end
