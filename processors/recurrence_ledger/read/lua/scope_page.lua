-- One filtered page of the scope index, read-only (run with EVALSHA_RO).
-- KEYS[1] the sort's index, KEYS[2] the needing_review index.
-- ARGV[1] needs_review ("", "1" or "0"), ARGV[2] the scope id substring
-- ("" for none), ARGV[3] offset, ARGV[4] limit.
-- Returns {available, ids...}: the members of the sort's index in its order
-- that pass the filters, counted, rows offset to offset + limit returned -
-- in Redis, without sending the index to the caller.
local needs, text = ARGV[1], ARGV[2]
local first, last = tonumber(ARGV[3]) + 1, tonumber(ARGV[3]) + tonumber(ARGV[4])
local page, seen = {}, 0
local function passes(id)
  if text ~= '' and string.find(id, text, 1, true) == nil then return false end
  if needs == '' then return true end
  local score = tonumber(redis.call('ZSCORE', KEYS[2], id) or '0')
  return (needs == '1') == (score < 0)
end
local available
if text == '' then
  -- Only the needing_review filter: its count is exact without a pass, and the
  -- walk stops once the page is full.
  local needing = redis.call('ZCOUNT', KEYS[2], '-inf', '(0')
  available = needs == '1' and needing or redis.call('ZCARD', KEYS[1]) - needing
end
local start, chunk = 0, 1000
while true do
  local ids = redis.call('ZRANGE', KEYS[1], start, start + chunk - 1)
  for _, id in ipairs(ids) do
    if passes(id) then
      seen = seen + 1
      if seen >= first and seen <= last then page[#page + 1] = id end
    end
  end
  if #ids < chunk or (available ~= nil and seen >= last) then break end
  start = start + chunk
end
table.insert(page, 1, available or seen)
return page
