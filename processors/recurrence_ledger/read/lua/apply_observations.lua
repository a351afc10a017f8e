-- RecurrenceObservations of one partition and one scope, each applied once
-- per scope (recurrence_ledger.read.records; after apply_once.lua). Every
-- key is of the scope's slot.
-- KEYS[1] the scope's applied hash.
-- ARGV[1] the partition's applied field, ARGV[2] history limit,
-- ARGV[3] JSON entries, in offset order (records.observation_entry):
-- offset, history_key, history_meta_key, avoided_key,
-- task_outcome_position, padded_position (the position as 19 digits),
-- member (the history member), event, signature_key.
-- An avoided verdict ends the runs of the revision's review candidates
-- whose run started before it (their c: fields of the history meta go; the
-- candidates stay in the review queue until a decision, contract §18).
-- Returns the number of entries applied.
local limit = tonumber(ARGV[2])
return apply_once(ARGV[1], cjson.decode(ARGV[3]), function(entry)
  local meta = entry.history_meta_key
  redis.call('ZADD', entry.history_key, entry.task_outcome_position, entry.member)
  redis.call('HINCRBY', meta, 'total', 1)
  redis.call('HINCRBY', meta, entry.event, 1)
  redis.call('HSET', meta, 'signature_key', entry.signature_key)
  if entry.event == 'avoided' then
    redis.call('ZADD', entry.avoided_key, entry.task_outcome_position, entry.padded_position)
    local fields = redis.call('HGETALL', meta)
    for i = 1, #fields, 2 do
      local name = fields[i]
      if string.sub(name, 1, 2) == 'c:' then
        local run_start = string.match(fields[i + 1], '^([0-9]*)|')
        if run_start == '' or run_start < entry.padded_position then
          redis.call('HDEL', meta, name)
        end
      end
    end
  end
  trim(entry.history_key, limit)
end)
