-- RecurrenceObservations of one partition, each applied once
-- (recurrence_ledger.read.records; after apply_once.lua).
-- KEYS[1] follow-applied hash, KEYS[2] review queue, KEYS[3] review queue items.
-- ARGV[1] the partition's follow-applied field, ARGV[2] history limit,
-- ARGV[3] the review-queue surface key prefix (Keys.surface_prefix: + a
-- repair_surface read from the history-meta hash = Keys.surface(surface)),
-- ARGV[4] JSON entries, in offset order: o offset, h history key, m
-- history-meta key, a avoided key, q scope review-queue key, s position,
-- pp position as 19 digits, mem history member, e event, sig signature_key.
-- An avoided verdict closes the open review candidates of its revision whose
-- run started before it.
-- Returns the number of entries applied.
local limit, surface_prefix = tonumber(ARGV[2]), ARGV[3]
return apply_once(ARGV[1], cjson.decode(ARGV[4]), function(e)
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
        local start, surface = string.match(fields[i + 1], '^([0-9]*)|(.*)$')
        if start == '' or start < e.pp then
          local id = string.sub(name, 3)
          redis.call('ZREM', KEYS[2], id)
          redis.call('ZREM', e.q, id)
          redis.call('ZREM', surface_prefix .. surface, id)
          redis.call('HDEL', KEYS[3], id)
          redis.call('HDEL', e.m, name)
        end
      end
    end
  end
  trim(e.h, limit)
end)
