-- Signature patterns of one pattern group (contract §23.3) into the group's
-- hash (the group's slot), never replacing a pattern with one of fewer
-- recurred verdicts: the pattern stage keeps the highest count per (scope,
-- signature), so each record it publishes for a key has more recurred
-- verdicts than the one before, and `recurred` orders them as the topic
-- does. A replay, a follower reading a batch again after a rebalance, or a
-- rebuild racing a follower puts back nothing older; an equal one is
-- written (the same record read again).
-- KEYS[1] the group's patterns hash.
-- ARGV: triples (signature_key, the record as canonical JSON, its recurred).
-- Returns the number of patterns written.
local written = 0
for i = 1, #ARGV, 3 do
  local stored = redis.call('HGET', KEYS[1], ARGV[i])
  if not stored or tonumber(cjson.decode(stored)['recurred']) <= tonumber(ARGV[i + 2]) then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
    written = written + 1
  end
end
return written
