-- record_position: a view follower's position after a batch Redis took
-- whole (recurrence_ledger.read.positions). KEYS[1]: the namespace's
-- follow-position hash; ARGV: triples (field, at least, offset). Records
-- every offset, or none when a field no longer holds at least what the
-- follower found there before the batch (-1: it did not look): gone
-- (Redis came back empty meanwhile) or lowered (another follower found the
-- view lost), the batch may have been written into a view that lost what
-- came before it. Returns 1 when recorded, else 0.
for i = 1, #ARGV, 3 do
  local least = tonumber(ARGV[i + 1])
  local held = redis.call('HGET', KEYS[1], ARGV[i])
  if least >= 0 and (not held or tonumber(held) < least) then return 0 end
end
for i = 1, #ARGV, 3 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 2])
end
return 1
