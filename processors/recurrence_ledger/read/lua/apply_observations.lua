-- RecurrenceObservations of one partition and one scope, each applied once
-- per scope (recurrence_ledger.read.records; after apply_once.lua). Every
-- key is of the scope's slot.
-- KEYS[1] the scope's applied hash.
-- ARGV[1] the partition's applied field, ARGV[2] history limit,
-- ARGV[3] JSON entries, in offset order: o offset, h history key, m
-- history-meta key, a avoided key, s position, pp position as 19 digits,
-- mem history member, e event, sig signature_key.
-- An avoided verdict ends the runs of the revision's review candidates
-- whose run started before it (their c: fields of the history meta go; the
-- candidates stay in the review queue until a decision, contract §18).
-- Returns the number of entries applied.
local limit = tonumber(ARGV[2])
return apply_once(ARGV[1], cjson.decode(ARGV[3]), function(e)
  redis.call('ZADD', e.h, e.s, e.mem)
  redis.call('HINCRBY', e.m, 'total', 1)
  redis.call('HINCRBY', e.m, e.e, 1)
  redis.call('HSET', e.m, 'signature_key', e.sig)
  if e.e == 'avoided' then
    redis.call('ZADD', e.a, e.s, e.pp)
    local fields = redis.call('HGETALL', e.m)
    for i = 1, #fields, 2 do
      local name = fields[i]
      if string.sub(name, 1, 2) == 'c:' then
        local start = string.match(fields[i + 1], '^([0-9]*)|')
        if start == '' or start < e.pp then
          redis.call('HDEL', e.m, name)
        end
      end
    end
  end
  trim(e.h, limit)
end)
