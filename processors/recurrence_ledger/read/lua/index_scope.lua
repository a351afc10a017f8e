-- One scope in the scope set and the scope index (the namespace's slot),
-- written after the scope's own keys (RedisView._write, guarded_write.lua)
-- and never with an older record than the one it was last written with:
-- idempotent, and a replay or a late writer puts back nothing older.
-- KEYS[1] the scope set, KEYS[2] scopes:at (scope id -> as_of_position as
-- 19 digits), KEYS[3..] the scope index, one key per sort.
-- ARGV[1] scope id, ARGV[2] as_of_position as 19 digits, ARGV[3..] one
-- score per KEYS[3..].
-- Returns {the scope set existed (0/1), written (0/1)}.
local existed = redis.call('EXISTS', KEYS[1])
local stored = redis.call('HGET', KEYS[2], ARGV[1])
if stored and stored > ARGV[2] then return {existed, 0} end
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
for i = 3, #KEYS do redis.call('ZADD', KEYS[i], ARGV[i], ARGV[1]) end
return {existed, 1}
