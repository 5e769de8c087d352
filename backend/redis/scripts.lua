-- jobq's Redis scripts: every state change of the backend is one of these
-- (or of workflows.lua's), run atomically by EVALSHA. scripts.go splits
-- this file at the "--- script: NAME" lines and prepends the prelude to
-- each script.
--
-- Keys. Each key has one name: its field in keys.go (queueKeys for the
-- keys of one queue, keyspace for those of the whole prefix), what every
-- script header calls it ("KEYS[i] name"), and its entry below, which
-- gives the key string behind it (P the key prefix, Q a queue name). The
-- key strings are the stored layout (see LayoutVersion in redis.go), not
-- names. A script's header lists its KEYS as its declaration in
-- scripts.go builds them, "KEYS[i] name" each, those repeated per item
-- last, as "KEYS[i..] name..."; TestKeyNames and TestScriptKeys check
-- that the names agree.
--   lastTS         P:{Q}:t        string: the last ID time part handed
--                  out in Q (see reserve)
--   ready          P:{Q}:q        zset: ready jobs in claim order: score
--                  -priority, member the time the job became due and its
--                  ID (see rmember), so equal scores order by due time,
--                  then by ID
--   readyList      P:{Q}:l        list: ready jobs of priority 0 without
--                  options but metadata that insert1 or insert wrote,
--                  minting their IDs, by ID (the ts as in ready), oldest
--                  first: the cheapest enqueue (RPUSH, no zset). The ready
--                  set is ready ∪ readyList, a job in at most one; claims
--                  take both in one order (see pick). readyList's jobs
--                  have no member in readyAt: their available time is
--                  their created time, and as they are appended as they
--                  are created, readyList is in due time order too
--   readyOld       P:{Q}:p        zset: layout 4's ready set (score
--                  -priority, member the ID): only read, to move its jobs
--                  into ready (see adopt), and empty once no layout-4
--                  process writes it
--   readyAt        P:{Q}:o        zset: when the jobs of ready became
--                  available (µs since 1970), for QueueStats.OldestDue: a
--                  member per ready job (its ID), except that the jobs one
--                  insert made ready now share one member '#<µs>', counted
--                  in readyAtCounts
--   readyAtCounts  P:{Q}:n        hash: '#<µs>' -> how many ready jobs
--                  that member of readyAt stands for
--   delayed        P:{Q}:d        zset: delayed and backing-off jobs by due
--                  time (µs)
--   reserved       P:{Q}:r        zset: reserved jobs by lease deadline (µs)
--   failed         P:{Q}:f        zset: failed jobs: score 0, member the
--                  failed ID's ts
--   jobPrefix      P:{Q}:j:       the live jobs' keys but the ID: scripts
--                  that build a job's key from an ID they read or mint
--                  (claim, sweep, insert) get it and append the ID
--   job            P:{Q}:j:<ts>   hash: a live job (fields below); a script
--                  given the IDs (complete, extend) takes one per item
--   failedPrefix   P:{Q}:x:       as jobPrefix, for failed jobs
--   failedJob      P:{Q}:x:<ts>   hash: a failed job: the job's hash
--                  renamed, plus j, e
--   failedByJob    P:{Q}:xj       hash: the failed jobs by job ID: the ID
--                  (ts) a job had while live, which users name a failed
--                  job by -> its failed ID (ts). Every script that writes a
--                  failed record (to_failed) or deletes one (replay, purge,
--                  purgescan) keeps it, so it has as many entries as failed
--                  has members; Migrate indexes the records of layouts
--                  before 7 (script "failedindex"), and failedof finds
--                  those a layout-6 process still running writes
--   settings       P:{Q}:s        hash: the queue's control settings,
--                  absent unless it is paused, limited or has key rules: p
--                  '1' (paused), cc (concurrency limit), rl and rp (rate
--                  limit per period in µs), rw and rc (the rate window,
--                  now / rp, and the claims counted in it), kl (limit per
--                  key), ko '1' (ordered keys), kp (their policy: hold,
--                  continue or halt; absent: hold), qi (the queue's index,
--                  with any key rule: see key_lib's bad)
--   channel        P:{Q}:w        not a key but the queue's pub/sub
--                  channel, an ARGV: "n <origin>" (jobs ready now) or "d
--                  <µs until due> <origin>" (a new earliest delayed job)
--   cancelling     P:{Q}:c        zset: cancelling jobs (reserved, cancel
--                  requested): score 0, member the ID
--   completed      P:{Q}:kc       zset: kept completed jobs: score 0,
--                  member the ID (so they list in ID order)
--   completedAt    P:{Q}:kct      zset: the same jobs by finish time (µs),
--                  for pruning, but those a prune by type moved to their
--                  type's zset (see below the keyed jobs' keys)
--   cancelled      P:{Q}:kx       zset: kept cancelled jobs, as completed
--   cancelledAt    P:{Q}:kxt      zset: the same jobs by finish time (µs)
--   finishedPrefix P:{Q}:y:       as jobPrefix, for the kept finished jobs:
--                  P:{Q}:y:<ts> is a hash, the job's hash renamed, plus s
--                  (state: completed or cancelled), fa (µs) and, for a
--                  job completed with a result, rs (the result JSON,
--                  written by complete with the completion; absent: none.
--                  A build before it ignores the field, so layout 9
--                  stands)
--   ticks          P:{Q}:ts       hash: schedule name -> "<last tick µs>
--                  <its job's ID> <µs enqueued> <the job's queue>" for the
--                  schedules whose jobs go to Q (script "tick"): in Q's
--                  slot, so the tick's compare-and-set and its job's
--                  insert are one script; "tickmove" carries a record over
--                  when a schedule's queue changes
--   inserted       P:{Q}:i        string: how many jobs were ever inserted
--                  into Q (INCRBY once per insert, insert1 and tick call; a
--                  replay re-creates jobs and does not count), for
--                  backend.InsertCounter: absent until the first insert by
--                  a build that counts
--   deadlines      P:{Q}:e        zset: the waiting jobs (ready, delayed,
--                  backing off) that have a deadline, scored by it (µs),
--                  member the ID: claims and sweeps expire those past it
--                  (see repend and expire)
--   base           P:{Q}:         the queue's key prefix: scripts that
--                  write keys they are not given build them from it (the
--                  workflow keys P:{Q}:wf:<id>, P:{Q}:wt:<id>, P:{Q}:wfs,
--                  wfr, wft, wfn and wj, named by those strings in
--                  workflows.lua; and delayed, in the scripts that may
--                  release a workflow task)
--   schema         P:schema       string: the layout version (Go only)
--   queues         P:queues       hash: the queue registry (script
--                  "register")
--   unique         P:unique       hash: unique key -> "<holder ID, 16
--                  hex>@<µs reserved>", or "<holder ID>@0" once an insert
--                  found the key held by its holder's kept completed job
--                  (see usteal)
--   schedules      P:schedules    hash: schedule name -> "<created µs>
--                  <registered µs> <queue>\n<type>\n<spec>" (script
--                  "schedule")
--   cancels        P:cancels      string: raised (INCR, after the script
--                  "cancel") by every cancel request that marked a running
--                  job, so that polls see when no queue's cancelling set
--                  can have grown (cancel.go)
--   pruneTurn      P:turn:prune   string: the prune turn's holder, with an
--                  expiry
-- Keyed jobs (backend.KeyController) have keys of their own, which no Go
-- code names and no script is given: the scripts build them from base
-- (or from jobPrefix without its "j:"), all in Q's slot, and only a
-- keyed job's path touches them (see key_lib). <key> is a job's key, as
-- given (any text: the hash tag is the first {Q}).
--   P:{Q}:Kq        zset: the keyed ready jobs, by due time (µs), member
--                   the ID: with ready and readyList, the ready set
--   P:{Q}:Kp        zset: the keyed pending jobs (ready or delayed), by
--                   turn, member the ID (a new job's turn starts past the
--                   lowest)
--   P:{Q}:Kk        zset: the keys that have a claimable job, member the
--                   key, score its job's: -priority * 2^41 + turn, so
--                   keys order as their jobs do (an ordered key's job is
--                   its head, another's the first in Kr:<key>)
--   P:{Q}:Kn        hash: key -> the highest turn of its jobs since it
--                   last had no live job (absent while it has none)
--   P:{Q}:Kc        hash: key -> its reserved jobs, cancelling included
--                   (0 may stay until the key has no live job)
--   P:{Q}:Ks        set: the keys with live or failed jobs (KeyList)
--   P:{Q}:Kr:<key>  zset: the key's ready jobs in claim order: score as
--                   Kk, member as in ready (rmember)
--   P:{Q}:Kl:<key>  zset: the key's live jobs, score 0, member the ID (its
--                   lowest is an ordered key's head)
--   P:{Q}:Kf:<key>  zset: the key's failed jobs, score 0, member the job
--                   ID (their lowest holds a held key)
-- Kept completed jobs a prune gave an age per type (backend.
-- FinishedPruneParams.Types) have keys of their own too, which the script
-- "prunecompleted" alone builds, from base, and alone reads and writes:
--   P:{Q}:kct:<type>  zset: kept completed jobs of one type by finish
--                     time (µs), as completedAt: those a prune took out of
--                     completedAt before their age was up
--   P:{Q}:kcn         set: the types that have such a zset
-- A layout-9 build that prunes by one age reads completedAt alone, and
-- leaves the jobs of these zsets to a build that reads them: nothing else
-- changes (completed still lists every kept job), so the layout stands.
-- Every per-queue script touches only keys of one queue, all tagged {Q},
-- so each runs in one Cluster slot.
--
-- Job hash fields: d the record "<max attempts> <type>\n<payload>" (what
-- never changes, in one field: each field costs an insert time and
-- memory; a type has no control characters), pr priority (absent: 0), c
-- created µs, av available µs (absent: c), a attempts (absent: 0), r
-- releases (absent: 0), e last error, u unique key, us the states in
-- which it holds u (backend.UniqueStates in decimal; absent: every
-- state, as for a job a build before it wrote; a failed job drops it),
-- m metadata JSON, ra
-- reserved µs and lu lease deadline µs ('' or absent unless reserved: lu ~=
-- '' IS the reserved state), k the fencing token of the job's latest claim
-- (absent: 0, never claimed; see claim), cx the µs a reserved job's cancel
-- was requested (absent otherwise: every write of its holder is then
-- refused and ends the job cancelled), w the workflow task whose job it is
-- (absent for a plain job; see workflows.lua: every script that ends or
-- replays a job reads it), tn that task's name (with w; claims and JobGet
-- return both, so a worker's log can name the task), el the job's attempt
-- errors (absent: none; see add_error), pk pp pm pa a holder's progress
-- (the token of the claim that reported it, percent, message, reported µs;
-- absent: none; see progress: it counts only while k is pk and the job is
-- reserved, so nothing else clears it, and moving a job elsewhere may
-- carry it along unread), ky "<turn> <key>" (absent: no
-- key, turn 0; one field, so that reading it costs a plain job one absent
-- field; see key_lib), dl the latest time the job may start, µs (absent:
-- none; never with ky or w; see expire). A failed job's hash drops dl (a
-- replay must not expire again), adds j (its job ID) and keeps e
-- as the error, el, and k, so that a replayed job's tokens still only
-- grow, w and tn, which FailedGet and failedscan return, and ky, so that a
-- replayed job takes its place among its key's jobs again; its failed_at
-- is the time part of its failed ID. A finished job's hash keeps ky, u
-- and us: a completed job of a set with UniqueCompleted that complete
-- kept holds its key on (if the unique hash still names it) until a prune
-- deletes it and frees the key (see holds_done).
--
-- The fence: a holder's write (complete, extend, release) applies only
-- while the job is reserved and its k is the token the holder's claim
-- returned, compared as the decimal string both sides write. The attempt
-- a is not the fence: a free release un-counts it and a replay resets it,
-- so two claims of one job can count the same attempt.
--
-- IDs: ts * 4096 + queue index, ts in µs since 2025-01-01 UTC, strictly
-- increasing per queue (max(last + 1, now)). Scripts see only ts (as 13
-- hex digits: "the ID" below), never whole IDs: Lua numbers are doubles,
-- exact only to 2^53, and ts < 2^51.

-- The helpers below are the prelude: each "--- helper" block is put in
-- front of every script that uses a name it defines (directly or through
-- another helper), in this order; defining the others would cost every
-- call time for nothing. A helper's parameter that holds a key is k and
-- the letter of its key string (kq ready, kl readyList, ko readyAt ...),
-- or says which key its comment names.

--- helper
local EPOCH_US = 1735689600000000 -- 2025-01-01T00:00:00Z in µs since 1970

--- helper
local MAXTS = 2251799813685248 -- 2^51: ts beyond this would not fit 63 bits

--- helper
local function n2s(x) return string.format('%d', x) end

--- helper
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

--- helper
-- tshex is the member and key form of an ID's time part ts.
local function tshex(ts) return string.format('%013x', ts) end

--- helper
-- rmember is a job's member in ready: the time it became due (its
-- available time av, µs since 1970, clamped to 0 .. 2^53 - 1) as 14 hex
-- digits, then its ID. ready scores by -priority and Redis orders equal
-- scores by member, byte by byte: so by due time, then by ID (claim
-- order). One score cannot hold all three: a double is exact to 53 bits,
-- and the priority's 11 leave 42, about 51 days of µs. rid is a member's
-- ID (its last 13 characters: a member of readyOld is the ID alone), rdue
-- its due time.
local function rmember(av, id)
  local t = tonumber(av)
  if t < 0 then t = 0 elseif t > 9007199254740991 then t = 9007199254740991 end
  return string.format('%014x', t) .. id
end
local function rid(m) return string.sub(m, -13) end
local function rdue(m) return tonumber(string.sub(m, 1, 14), 16) end

--- helper
-- reserve hands out n consecutive ts values of one queue (key: the string
-- holding the last one handed out) and returns the first, max(now, last +
-- 1): one SET … GET when the clock is past the last one (the usual case),
-- a second SET when it is not. insert1 writes it out for n = 1: a change
-- here belongs there too.
local function reserve(key, now, n)
  local ts = now - EPOCH_US
  local last = tonumber(redis.call('SET', key, n2s(ts + n - 1), 'GET') or '0')
  if ts <= last then
    ts = last + 1
    redis.call('SET', key, n2s(ts + n - 1))
  end
  return ts
end

--- helper
-- minter hands out up to n strictly increasing ts values of one queue,
-- reserving all n on first use.
local function minter(key, now, n)
  local m, ts = {}, nil
  function m.next()
    if ts then
      ts = ts + 1
    else
      ts = reserve(key, now, n)
    end
    return ts
  end
  return m
end

--- helper
-- rtype is the type in a job's record (field d).
local function rtype(d) return string.match(d, '^%d+ ([^\n]*)') end

--- helper
-- zadd, zrem and hdel send large batches in slices: unpack() is bounded
-- by the Lua stack (8000).
local function zadd(key, args)
  for i = 1, #args, 4000 do
    redis.call('ZADD', key, unpack(args, i, math.min(i + 3999, #args)))
  end
end
local function zrem(key, members)
  for i = 1, #members, 4000 do
    redis.call('ZREM', key, unpack(members, i, math.min(i + 3999, #members)))
  end
end
local function hdel(key, fields)
  for i = 1, #fields, 4000 do
    redis.call('HDEL', key, unpack(fields, i, math.min(i + 3999, #fields)))
  end
end

--- helper
-- A moves collects jobs becoming ready (q and o: ready and readyAt; or
-- l: IDs to append to readyList, which only a script minting them above
-- every ID in it may add) or delayed (d); flush adds them to kq ready, kl
-- readyList, ko readyAt and kd delayed, and publishes the wake-ups: "n"
-- when the ready set (ready and readyList) goes from empty to non-empty
-- (an idle worker last saw it empty, so no other case needs one), "d"
-- when a delayed job is due before every earlier one. It returns woke (1
-- or 0) and the new earliest due time as µs from now, or -1.
local function moves() return { q = {}, o = {}, d = {}, l = {} } end
local function ready(mv, id, pr, av)
  local q, o = mv.q, mv.o
  q[#q + 1] = -tonumber(pr); q[#q + 1] = rmember(av, id)
  o[#o + 1] = av; o[#o + 1] = id
end
local function later(mv, id, av)
  local d = mv.d
  d[#d + 1] = av; d[#d + 1] = id
end
local function flush(mv, kq, kl, ko, kd, chan, origin, now)
  local woke, due = 0, -1
  if #mv.q > 0 or #mv.l > 0 then
    local empty = redis.call('ZCARD', kq) == 0 and redis.call('LLEN', kl) == 0
    zadd(kq, mv.q)
    zadd(ko, mv.o)
    local l = mv.l
    for i = 1, #l, 4000 do
      redis.call('RPUSH', kl, unpack(l, i, math.min(i + 3999, #l)))
    end
    if empty then
      redis.call('PUBLISH', chan, 'n ' .. origin)
      woke = 1
    end
  end
  if #mv.d > 0 then
    local first = redis.call('ZRANGE', kd, 0, 0, 'WITHSCORES')
    local min = nil
    for i = 1, #mv.d, 2 do
      local s = tonumber(mv.d[i])
      if not min or s < min then min = s end
    end
    zadd(kd, mv.d)
    if #first == 0 or min < tonumber(first[2]) then
      due = math.max(min - now, 0)
      redis.call('PUBLISH', chan, 'd ' .. n2s(due) .. ' ' .. origin)
    end
  end
  return woke, due
end

--- helper
-- unready keeps ko readyAt and kn readyAtCounts right for jobs that left
-- the ready set: ids, and avs[i] the available time of ids[i] (nil when
-- its hash is gone). A job with a member of its own loses it; the others
-- were counted under '#<av>', whose count drops, and which goes at 0.
local function unready(ko, kn, ids, avs)
  local own, counted, groups = {}, {}, {}
  for i = 1, #ids, 4000 do
    local sc = redis.call('ZMSCORE', ko, unpack(ids, i, math.min(i + 3999, #ids)))
    for j = 1, #sc do
      local x = i + j - 1
      if sc[j] then
        own[#own + 1] = ids[x]
      elseif avs[x] then
        local m = '#' .. avs[x]
        if not counted[m] then
          counted[m] = 0
          groups[#groups + 1] = m
        end
        counted[m] = counted[m] + 1
      end
    end
  end
  zrem(ko, own)
  if #groups == 0 then return end
  local have = redis.call('HMGET', kn, unpack(groups))
  local keep, gone = {}, {}
  for i, m in ipairs(groups) do
    local left = tonumber(have[i] or '0') - counted[m]
    if left > 0 then
      keep[#keep + 1] = m; keep[#keep + 1] = left
    else
      gone[#gone + 1] = m
    end
  end
  if #keep > 0 then redis.call('HSET', kn, unpack(keep)) end
  if #gone > 0 then
    redis.call('HDEL', kn, unpack(gone))
    zrem(ko, gone)
  end
end

--- helper
-- add_error appends an attempt's error to el, the error log of the job
-- hash k: a, its attempt number, ended at now (µs) after took µs on worker
-- with error err. el holds one JSON object a line (the fields
-- internal/attemptlog reads), at most MAXERR lines, the oldest dropped:
-- lines are appended and cut as text, never decoded, since cjson would
-- round the µs times, and cjson.encode escapes a newline in a string, so a
-- line is one entry. Only the paths that record an error call it.
local MAXERR = 20 -- backend.MaxAttemptErrors (TestMaxErrMatches)
local function add_error(k, a, now, took, worker, err)
  local line = '{"attempt":' .. n2s(a) .. ',"at_us":' .. n2s(now) .. ',"duration_us":' .. n2s(took) ..
    ',"worker":' .. cjson.encode(worker) .. ',"error":' .. cjson.encode(err) .. '}'
  local el = redis.call('HGET', k, 'el')
  if el then
    local n = 1
    for _ in string.gmatch(el, '\n') do n = n + 1 end
    if n >= MAXERR then el = string.sub(el, string.find(el, '\n', 1, true) + 1) end
    line = el .. '\n' .. line
  end
  redis.call('HSET', k, 'el', line)
end

--- helper
-- to_failed renames the live job hash k (ID id) to a failed record with
-- failed ID fid (its key xprefix, failedPrefix, and fid) and error err,
-- indexed by id in failedByJob; the caller adds fid to the failed set.
-- failedByJob is failedPrefix with j for its last colon (P:{Q}:x: ->
-- P:{Q}:xj): the scripts that fail jobs need not take one more key.
local function to_failed(k, id, xprefix, fid, err)
  local fk = xprefix .. fid
  redis.call('RENAME', k, fk)
  redis.call('HSET', fk, 'j', id, 'e', err)
  redis.call('HDEL', fk, 'ra', 'lu', 'av', 'r', 'us', 'dl')
  redis.call('HSET', string.sub(xprefix, 1, -2) .. 'j', id, fid)
end

--- helper
-- deadline_text is backend.DeadlineError of the deadline dl (field dl: µs
-- since 1970, a decimal string): the prefix, then the deadline's second
-- in RFC 3339, UTC. The seconds are cut from the string, not divided, so
-- they are exact for any year (µs past 2255 no longer fit a double);
-- the date is Howard Hinnant's civil_from_days, in whole numbers.
local DEADLINE_PREFIX = 'deadline exceeded: not started by ' -- backend.DeadlineErrorPrefix (TestDeadlineText)
local function deadline_text(dl)
  local s = tonumber(string.sub(dl, 1, -7)) or 0
  local days = math.floor(s / 86400)
  local r = s - days * 86400
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local d = doy - math.floor((153 * mp + 2) / 5) + 1
  local m = mp + 3
  if mp >= 10 then m = mp - 9 end
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return DEADLINE_PREFIX .. string.format('%04d-%02d-%02dT%02d:%02d:%02dZ', y, m, d,
    math.floor(r / 3600), math.floor(r % 3600 / 60), r % 60)
end

--- helper
-- A job with a deadline (field dl) is in the deadlines set, scored by
-- it, while it waits (ready, delayed or backing off), and out of it while
-- reserved: so the set's head says whether any waiting job of the queue
-- has expired, and nothing else is ever read for it. repend puts the job
-- hash k (ID id) back as it waits again (a retry, a release, a rescue),
-- when it has a deadline; ke is the deadlines set. It returns the
-- deadline (µs), or nil for none.
local function repend(ke, k, id)
  local dl = redis.call('HGET', k, 'dl')
  if dl then redis.call('ZADD', ke, dl, id) end
  return tonumber(dl)
end

--- helper
-- expire_job moves the waiting job hash k (ID id, record d, attempts a,
-- token tk, unique key u, deadline dl), which its caller took out of the
-- ready or delayed set, to the failed set as it is: no attempt was made,
-- so a and el stay. E holds the keys (see expire), mint the failed IDs.
-- It appends the job to out (ID, attempts, token, type) and its unique
-- key to released, and its failed ID to E.failed, for the caller to add.
local function expire_job(E, k, id, d, a, tk, u, dl, mint, out, released)
  local fid = tshex(mint.next())
  to_failed(k, id, E.x, fid, deadline_text(dl))
  local f = E.failed
  f[#f + 1] = 0; f[#f + 1] = fid
  out[#out + 1] = id; out[#out + 1] = a or '0'; out[#out + 1] = tk or ''; out[#out + 1] = rtype(d)
  if u then released[#released + 1] = id; released[#released + 1] = u end
end
-- expire moves up to limit waiting jobs whose deadline passed by now
-- (a job may start at its deadline, not after it), earliest deadline
-- first, to the failed set (see expire_job), and returns how many. E
-- holds the keys: e deadlines, q ready, o readyAt, n readyAtCounts, d
-- delayed, j jobPrefix, f failed, x failedPrefix, t lastTS (the failed
-- IDs are minted from it). An entry whose job is gone or reserved (none
-- should be) only leaves the set. A job with a deadline is never keyed,
-- a task's or in readyList (insert keeps it out), so nothing else holds
-- it.
local function expire(E, now, limit, out, released)
  local ids = redis.call('ZRANGEBYSCORE', E.e, '-inf', '(' .. n2s(now), 'LIMIT', 0, limit)
  if #ids == 0 then return 0 end
  local mint = minter(E.t, now, #ids)
  local rids, ravs, n = {}, {}, 0
  E.failed = {}
  for i = 1, #ids do
    local id = ids[i]
    local k = E.j .. id
    local v = redis.call('HMGET', k, 'd', 'lu', 'av', 'c', 'a', 'k', 'u', 'dl')
    if v[1] and v[8] and (not v[2] or v[2] == '') then
      local av = v[3] or v[4]
      if redis.call('ZREM', E.q, rmember(av, id)) == 1 then
        rids[#rids + 1] = id; ravs[#ravs + 1] = av
      else
        redis.call('ZREM', E.d, id)
      end
      expire_job(E, k, id, v[1], v[5], v[6], v[7], v[8], mint, out, released)
      n = n + 1
    end
  end
  zrem(E.e, ids)
  unready(E.o, E.n, rids, ravs)
  zadd(E.f, E.failed)
  return n
end

--- helper
-- finish ends the live job hash k (ID id) as state s ('completed' or
-- 'cancelled') at now: renamed to the finished record (under yprefix,
-- finishedPrefix), indexed in the state's sets kl (by ID: completed or
-- cancelled) and kt (by time: completedAt or cancelledAt) and, when kc is
-- given, removed from cancelling. The caller frees its unique key.
local function finish(k, id, yprefix, kl, kt, kc, s, now)
  local yk = yprefix .. id
  redis.call('RENAME', k, yk)
  redis.call('HSET', yk, 's', s, 'fa', n2s(now))
  redis.call('HDEL', yk, 'ra', 'lu', 'cx')
  redis.call('ZADD', kl, 0, id)
  redis.call('ZADD', kt, now, id)
  if kc then redis.call('ZREM', kc, id) end
end

--- helper
-- holds_done reports whether a job of the states us (its field us, false
-- when absent) keeps its unique key once it completed and is kept:
-- backend.UniqueCompleted, bit 16. complete then leaves the key held, and
-- the prune that deletes the job lists the key to be freed. A build
-- before it frees the key as the job completes: the job holds nothing
-- (see LayoutVersion in redis.go).
local function holds_done(us)
  return us and math.floor(tonumber(us) / 16) % 2 == 1 or false
end

--- helper
-- key_lib makes the functions of keyed jobs (see "Keyed jobs" at the top)
-- of the queue whose key prefix is base, and returns them: once per call
-- (key_made), and only when a script meets a keyed job, so that a plain
-- job's path pays nothing for them (one closure made per call, as
-- wf_lib). A script that changed a key calls done, which recomputes the
-- claimable job of every key it touched. Redis runs a script's calls one
-- by one, each costing more than the work it does, so the functions keep
-- what they read or wrote for the rest of the call (a key's reserved
-- count, its highest turn, the queue's lowest pending turn) rather than
-- read it again.
local key_made
local KT = 2199023255552 -- 2^41: a keyed job's score is -priority * KT + turn
local function key_lib(base)
  if key_made then return key_made end
  local call = redis.call
  -- key_wholeid is the decimal whole ID of the ID id (its ts, 13 hex
  -- digits) in the queue of index qi: ts * 4096 + qi, beyond the doubles'
  -- 2^53, written from two exact parts.
  local function key_wholeid(id, qi)
    local ts = tonumber(id, 16)
    local th = math.floor(ts / 1000000000)
    local c = (ts - th * 1000000000) * 4096 + qi
    local lo = c % 1000000000
    local hi = th * 4096 + (c - lo) / 1000000000
    if hi == 0 then return n2s(lo) end
    return n2s(hi) .. string.format('%09d', lo)
  end
  -- key_quote is a key as Go's %q writes it: keys hold no control
  -- characters (backend.ValidateKey), so only \ and " are escaped.
  local function key_quote(s)
    return '"' .. string.gsub(s, '[\\"]', '\\%0') .. '"'
  end
  local K = { ended = {} }
  local touched, order, rules = {}, {}, nil
  -- resv: each key's reserved count (Kc) once read or written; tops: its
  -- highest live turn (Kn) once read, dirty when raised since; low: the
  -- lowest turn in Kp once read (false: Kp is empty); grew and shrank:
  -- the keys that gained or lost a live or failed job, whose place in Ks
  -- and Kn done settles; lives: the keys refresh saw a live job of;
  -- addq and addp: the members joining Kq and Kp, and taken: the IDs
  -- claims took, which leave both, each written in one call (settled);
  -- kks and kko: the scores refresh gave keys in Kk (false: out of it),
  -- and those keys in order, written in two calls (K.sync).
  local resv, tops, dirty, grew, shrank, lives, taken, low = {}, {}, {}, {}, {}, {}, {}, nil
  local kks, kko, addq, addp = {}, {}, {}, {}
  local before = call('ZCARD', base .. 'Kk')
  -- rules are the queue's key rules (settings fields kl, ko, kp) and its
  -- index (qi), which a halted job's error names its head's ID with.
  function K.rules()
    if not rules then
      local v = call('HMGET', base .. 's', 'kl', 'ko', 'kp', 'qi')
      rules = { limit = tonumber(v[1] or '0'), ordered = v[2] == '1', policy = '', qi = tonumber(v[4] or '0') }
      if rules.ordered then rules.policy = v[3] or 'hold' end
    end
    return rules
  end
  local function touch(key)
    if not touched[key] then
      touched[key] = true
      order[#order + 1] = key
    end
  end
  K.touch = touch
  function K.score(pr, tu) return -tonumber(pr) * KT + tonumber(tu) end
  local function top(key)
    local t = tops[key]
    if t == nil then
      t = tonumber(call('HGET', base .. 'Kn', key) or '0')
      tops[key] = t
    end
    return t
  end
  local function settled()
    if #addq > 0 then
      zadd(base .. 'Kq', addq)
      addq = {}
    end
    if #addp > 0 then
      zadd(base .. 'Kp', addp)
      addp = {}
    end
    if #taken > 0 then
      zrem(base .. 'Kq', taken)
      zrem(base .. 'Kp', taken)
      taken = {}
    end
  end
  -- sync writes the keys' places in Kk that refresh decided: before any
  -- read of Kk.
  function K.sync()
    if #kko == 0 then return end
    local add, del = {}, {}
    for _, key in ipairs(kko) do
      local sc = kks[key]
      if sc then
        add[#add + 1] = sc; add[#add + 1] = key
      else
        del[#del + 1] = key
      end
    end
    zadd(base .. 'Kk', add)
    zrem(base .. 'Kk', del)
    kks, kko = {}, {}
  end
  -- turn is the turn of a new job of key: one past the highest turn of
  -- the key's live jobs (Kn), and past the lowest turn of the queue's
  -- pending keyed jobs.
  function K.turn(key)
    if low == nil then
      settled()
      local l = call('ZRANGE', base .. 'Kp', 0, 0, 'WITHSCORES')
      low = l[2] and tonumber(l[2]) or false
    end
    return math.max(top(key), low or 0) + 1
  end
  -- live: job id (turn tu) of key is live (inserted or replayed).
  function K.live(id, key, tu)
    call('ZADD', base .. 'Kl:' .. key, 0, id)
    tu = tonumber(tu)
    if tu > top(key) then
      tops[key] = tu
      dirty[key] = true
    end
    grew[key] = true
    touch(key)
  end
  local function pend(id, tu)
    addp[#addp + 1] = tu; addp[#addp + 1] = id
    tu = tonumber(tu)
    if low == false or (low and tu < low) then low = tu end
  end
  -- ready: the job is ready since av; later: it waits in delayed (the
  -- caller puts it there). Both are pending.
  function K.ready(id, key, pr, tu, av)
    call('ZADD', base .. 'Kr:' .. key, K.score(pr, tu), rmember(av, id))
    addq[#addq + 1] = av; addq[#addq + 1] = id
    pend(id, tu)
    touch(key)
  end
  function K.later(id, key, tu)
    pend(id, tu)
    touch(key)
  end
  -- unready: the job, ready since av (or delayed), is no longer pending.
  function K.unready(id, key, av)
    settled()
    call('ZREM', base .. 'Kr:' .. key, rmember(av, id))
    call('ZREM', base .. 'Kq', id)
    call('ZREM', base .. 'Kp', id)
    low = nil
    touch(key)
  end
  -- unreserve: a reserved job of key is no longer (it ended or is
  -- pending again): its slot frees. A count of 0 stays until the key
  -- has no live job (settle).
  function K.unreserve(key)
    local c = call('HINCRBY', base .. 'Kc', key, -1)
    if c < 0 then
      call('HDEL', base .. 'Kc', key)
      c = 0
    end
    resv[key] = c
    touch(key)
  end
  -- gone: the job, reserved or no longer pending, is no longer live (it
  -- ended or failed).
  function K.gone(id, key)
    call('ZREM', base .. 'Kl:' .. key, id)
    shrank[key] = true
    touch(key)
  end
  -- failed, unfailed: the job joins or leaves the failed jobs of key.
  function K.failed(id, key)
    call('ZADD', base .. 'Kf:' .. key, 0, id)
    grew[key] = true
    touch(key)
  end
  function K.unfailed(id, key)
    call('ZREM', base .. 'Kf:' .. key, id)
    shrank[key] = true
    touch(key)
  end
  -- claim reserves the claimable job of key (a member of Kk, see the
  -- legend) and returns its ID, and the key's new score in Kk when it
  -- stays claimable (nil when it left Kk).
  function K.claim(key)
    local kr = base .. 'Kr:' .. key
    local id
    if K.rules().ordered then
      id = call('ZRANGE', base .. 'Kl:' .. key, 0, 0)[1]
      local v = call('HMGET', base .. 'j:' .. id, 'av', 'c')
      call('ZREM', kr, rmember(v[1] or v[2], id))
    else
      id = rid(call('ZPOPMIN', kr)[1])
    end
    taken[#taken + 1] = id
    low = nil
    resv[key] = call('HINCRBY', base .. 'Kc', key, 1)
    return id, K.refresh(key)
  end
  -- refresh puts key in Kk under the score of its claimable job, or takes
  -- it out, and returns that score (nil: none): under the rules, an
  -- ordered key's is its lowest-ID live job when that is ready, nothing
  -- of the key is reserved and the key is not held; any other key's is
  -- its best ready job, while fewer than the limit are reserved.
  function K.refresh(key)
    local r = K.rules()
    local reserved = resv[key]
    if reserved == nil then
      reserved = tonumber(call('HGET', base .. 'Kc', key) or '0')
      resv[key] = reserved
    end
    local score = nil
    if reserved > 0 then lives[key] = true end
    if r.ordered then
      if reserved == 0 and not (r.policy == 'hold' and call('EXISTS', base .. 'Kf:' .. key) == 1) then
        local h = call('ZRANGE', base .. 'Kl:' .. key, 0, 0)[1]
        if h then
          lives[key] = true
          local v = call('HMGET', base .. 'j:' .. h, 'av', 'c')
          if v[2] then score = call('ZSCORE', base .. 'Kr:' .. key, rmember(v[1] or v[2], h)) or nil end
        end
      end
    elseif r.limit == 0 or reserved < r.limit then
      score = call('ZRANGE', base .. 'Kr:' .. key, 0, 0, 'WITHSCORES')[2]
    end
    if kks[key] == nil then kko[#kko + 1] = key end
    if score then
      lives[key] = true
      kks[key] = score
    else
      kks[key] = false
    end
    return score
  end
  -- settle keeps Ks (the keys with live or failed jobs), and Kn and Kc
  -- (absent once the key has no live job) for key, after refresh.
  local function settle(key)
    if shrank[key] and not lives[key] and call('EXISTS', base .. 'Kl:' .. key) == 0 then
      call('HDEL', base .. 'Kn', key)
      call('HDEL', base .. 'Kc', key)
      resv[key] = 0
      tops[key], dirty[key] = nil, nil
      if call('EXISTS', base .. 'Kf:' .. key) == 0 then
        call('SREM', base .. 'Ks', key)
        return
      end
      grew[key] = true
    end
    if grew[key] then call('SADD', base .. 'Ks', key) end
    if dirty[key] then call('HSET', base .. 'Kn', key, n2s(tops[key])) end
  end
  -- bad: job id of key failed for good or ended cancelled (it is gone
  -- already). Under KeyHalt, when no live job of the key has a lower ID
  -- (it was the head), every pending job of the key ends cancelled,
  -- its error naming the head (backend.HaltedError); their unique keys
  -- are appended to released, and the tasks' jobs among them to
  -- K.ended (ID, w), whose tasks the caller ends.
  function K.bad(id, key, now, released)
    local r = K.rules()
    if r.policy ~= 'halt' then return end
    local live = call('ZRANGE', base .. 'Kl:' .. key, 0, -1)
    if live[1] and tonumber(live[1], 16) < tonumber(id, 16) then return end
    local msg = 'halted: job ' .. key_wholeid(id, r.qi) .. ', the head of key ' .. key_quote(key) ..
      ', failed or was cancelled'
    for _, j in ipairs(live) do
      local jk = base .. 'j:' .. j
      local v = call('HMGET', jk, 'lu', 'av', 'c', 'u', 'w')
      if v[3] and (not v[1] or v[1] == '') then
        K.unready(j, key, v[2] or v[3])
        call('ZREM', base .. 'd', j)
        K.gone(j, key)
        call('HSET', jk, 'e', msg)
        finish(jk, j, base .. 'y:', base .. 'kx', base .. 'kxt', nil, 'cancelled', now)
        if v[4] then released[#released + 1] = j; released[#released + 1] = v[4] end
        if v[5] then K.ended[#K.ended + 1] = j; K.ended[#K.ended + 1] = v[5] end
      end
    end
  end
  -- done refreshes the keys touched and, when chan is given and Kk went
  -- from empty to not (a key became claimable while no key was), publishes
  -- a wake-up on it. It returns 1 when it did, else 0.
  function K.done(chan, origin)
    settled()
    for _, key in ipairs(order) do
      K.refresh(key)
      settle(key)
    end
    K.sync()
    touched, order, grew, shrank, dirty, lives = {}, {}, {}, {}, {}, {}
    if chan and before == 0 and call('ZCARD', base .. 'Kk') > 0 then
      call('PUBLISH', chan, 'n ' .. origin)
      before = 1
      return 1
    end
    return 0
  end
  key_made = K
  return K
end
--- helper
-- place puts key, whose score in Kk became s, into kb, the claim's window
-- on Kk (key, score, ...; see the claim), among its entries from i on:
-- after those of a lower or equal score. A key that would go past the end
-- of a full window is left out: Kk holds it, and the window's next read
-- finds it in its place.
local function place(kb, i, full, key, s)
  local n = tonumber(s)
  while i <= #kb and tonumber(kb[i + 1]) <= n do i = i + 2 end
  if i > #kb and full then return end
  table.insert(kb, i, s)
  table.insert(kb, i, key)
end
--- helper
-- promote moves up to limit delayed jobs that are due (kd delayed; their
-- hashes under jprefix, jobPrefix) into kq ready and ko readyAt, keyed
-- ones among their key's ready jobs (key_lib, on the queue's key prefix:
-- jprefix without its "j:"). It returns how many it moved.
local function promote(kq, ko, kd, jprefix, now, limit)
  local due = redis.call('ZRANGEBYSCORE', kd, '-inf', n2s(now), 'WITHSCORES', 'LIMIT', 0, limit)
  if #due == 0 then return 0 end
  local mv, ids, K = moves(), {}, nil
  for i = 1, #due, 2 do
    local id = due[i]
    local v = redis.call('HMGET', jprefix .. id, 'pr', 'c', 'ky')
    if v[3] then
      K = key_lib(string.sub(jprefix, 1, -3))
      local tu, ky = string.match(v[3], '^(%d+) (.*)$')
      K.ready(id, ky, v[1] or '0', tu, due[i + 1])
    elseif v[2] then
      ready(mv, id, v[1] or '0', due[i + 1])
    end
    ids[#ids + 1] = id
  end
  zrem(kd, ids)
  zadd(kq, mv.q)
  zadd(ko, mv.o)
  if K then K.done() end
  return #ids
end

--- helper
-- adopt moves up to limit jobs from kp readyOld, the ready set of layout
-- 4 (score -priority, member the ID), into kq ready, the ready set in
-- claim order, each under the time it became due (its av, or c when it
-- has none). Migrate moves them all (script "adopt"). A layout-4 process
-- still running after that keeps readying jobs into readyOld and claims
-- from there and readyList alone (ready's jobs wait for this build's
-- workers); every lease sweep moves what it readied since (script
-- "expired"), so nothing it leaves is stranded once it stops, and claims,
-- which never read readyOld, pay nothing for it. It returns how many it
-- moved.
local function adopt(kp, kq, jprefix, limit)
  if redis.call('EXISTS', kp) == 0 then return 0 end
  local old = redis.call('ZRANGE', kp, 0, limit - 1, 'WITHSCORES')
  local add, ids = {}, {}
  for i = 1, #old, 2 do
    local v = redis.call('HMGET', jprefix .. old[i], 'av', 'c', 'lu')
    if v[2] and (not v[3] or v[3] == '') then
      add[#add + 1] = old[i + 1]; add[#add + 1] = rmember(v[1] or v[2], old[i])
    end
    ids[#ids + 1] = old[i]
  end
  zrem(kp, ids)
  zadd(kq, add)
  return #ids
end

--- helper
-- pick merges the best jobs of ready and readyList in claim order
-- (priority, then due time, then ID): best is ready's first members with
-- their scores (ZRANGE … WITHSCORES), head readyList's first IDs (all
-- priority 0: score 0, due since created: their field c, read from the
-- hashes under jprefix, jobPrefix, when the merge must compare one, or
-- when withdue asks for every pick's due time). ready's higher priorities
-- (score < 0) come first, then the priority-0 jobs of both by due time
-- and ID (compared as numbers: Lua's string order follows the server's
-- locale), then ready's lower priorities. It returns up to take picks
-- {ID, score, due µs ('' for a readyList job whose due time it did not
-- read), ...}, whether each is ready's (inp[k] for the k-th pick), and
-- how many are ready's and readyList's: a prefix of each, so ZPOPMIN and
-- LTRIM take them.
local function pick(best, head, take, jprefix, withdue)
  local out, inp, i, j, hdue = {}, {}, 1, 1, nil
  local function headdue()
    if not hdue then hdue = tonumber(redis.call('HGET', jprefix .. head[j], 'c') or '0') end
    return hdue
  end
  while #inp < take do
    local m, h = best[i], head[j]
    local fromq
    if not m then
      if not h then break end
      fromq = false
    else
      local s = tonumber(best[i + 1])
      if not h or s ~= 0 then
        fromq = not h or s < 0
      else
        local d, hd = rdue(m), headdue()
        fromq = d < hd or (d == hd and tonumber(rid(m), 16) < tonumber(h, 16))
      end
    end
    if fromq then
      out[#out + 1] = rid(m); out[#out + 1] = best[i + 1]; out[#out + 1] = n2s(rdue(m))
      inp[#inp + 1] = true
      i = i + 2
    else
      local d = ''
      if withdue or hdue then d = n2s(headdue()) end
      out[#out + 1] = h; out[#out + 1] = '0'; out[#out + 1] = d
      inp[#inp + 1] = false
      j = j + 1
      hdue = nil
    end
  end
  return out, inp, (i - 1) / 2, j - 1
end

--- helper
-- scan walks kf, the failed set (failed jobs under xprefix,
-- failedPrefix), newest first below an exclusive upper bound,
-- after applying the time cutoff, and calls visit(fid, fkey) for each
-- failed job of the wanted type and key (key nil or '': any) until visit
-- returns false or budget entries were examined. With keepheld '1' it
-- skips the keyed jobs when the queue's keys are ordered under hold
-- (backend.FailedFilter.KeepHeld): each may hold its key. It returns the cursor: the fid to continue below,
-- or '' once the set is exhausted. A cutoff before every possible failed
-- ID matches nothing.
local function scan(kf, xprefix, upper, before, older, typ, budget, visit, key, keepheld)
  local cut = nil
  if before ~= '' then cut = tonumber(before) end
  if older ~= '' then
    local c = now_us() - tonumber(older)
    if not cut or c < cut then cut = c end
  end
  if cut then
    local ts = cut - EPOCH_US
    if ts <= 0 then return '' end
    if ts < MAXTS then
      local b = tshex(ts)
      if upper == '' or b < upper then upper = b end
    end
  end
  local max = '+'
  if upper ~= '' then max = '(' .. upper end
  local held = false
  if keepheld == '1' then
    -- The settings hash is the queue's key prefix (failedPrefix without
    -- its "x:") and s.
    local r = redis.call('HMGET', string.sub(xprefix, 1, -3) .. 's', 'ko', 'kp')
    held = r[1] == '1' and (not r[2] or r[2] == 'hold')
  end
  local got = redis.call('ZREVRANGEBYLEX', kf, max, '-', 'LIMIT', 0, budget)
  for i = 1, #got do
    local fid = got[i]
    local fk = xprefix .. fid
    if (typ == '' or rtype(redis.call('HGET', fk, 'd') or '') == typ) and
        (not key or key == '' or string.match(redis.call('HGET', fk, 'ky') or '', '^%d+ (.*)$') == key) and
        not (held and redis.call('HEXISTS', fk, 'ky') == 1) then
      if not visit(fid, fk) then
        if i == #got and #got < budget then return '' end
        return fid
      end
    end
  end
  if #got < budget then return '' end
  return got[#got]
end

--- helper
-- allowance is how many of want jobs a claim may take from a queue under
-- its settings s (see QueueController) with reserved set r (reserved):
-- want when there are none, 0 when paused, else bounded by the
-- concurrency limit (reserved jobs) and what is left of the rate window.
-- Returns take, the settings (nil: none), the window and the claims
-- counted in it (nil without a rate).
local function allowance(s, r, now, want)
  local v = redis.call('HMGET', s, 'p', 'cc', 'rl', 'rp', 'rw', 'rc')
  if not (v[1] or v[2] or v[3]) then return want end
  if v[1] then return 0, v end
  local take = want
  if v[2] then take = math.min(take, tonumber(v[2]) - redis.call('ZCARD', r)) end
  local win, used
  if v[3] then
    local rp = tonumber(v[4])
    win = (now - now % rp) / rp -- exact: integers below 2^53
    used = 0
    local sw = tonumber(v[5] or '-1')
    if sw == win then
      used = tonumber(v[6])
    elseif sw > win then
      win, used = sw, tonumber(v[6]) -- the clock went back: keep counting
    end
    take = math.min(take, tonumber(v[3]) - used)
  end
  return math.max(take, 0), v, win, used
end

--- helper
-- cancel1 cancels the job id of one queue, K being the KEYS of the script
-- "cancel" (which see; wfcancel shares it): a pending job ends cancelled
-- at once, a reserved one gets cx and joins the cancelling set. It returns
-- the outcome (as backend.CancelOutcome), the attempts, and the field w of
-- a task's job that ended cancelled (nil otherwise), whose task the caller
-- ends; a job ended holding a unique key is appended to released (ID,
-- key), one that left ready to rids and ravs (for unready). A job in
-- readyList leaves it by LREM, unless inl is given: then its ID is
-- appended there, for the caller to take out of readyList with others in
-- one walk (see wfcancel).
local function cancel1(K, id, now, released, rids, ravs, inl)
  local k = K[9] .. id
  local v = redis.call('HMGET', k, 'd', 'lu', 'cx', 'a', 'av', 'c', 'u', 'w', 'ky', 'dl')
  local a = v[4] or '0'
  if v[9] then v[9] = string.match(v[9], '^%d+ (.*)$') end
  if v[1] then
    if v[3] then
      return 3, a
    elseif v[2] and v[2] ~= '' then
      redis.call('HSET', k, 'cx', n2s(now))
      redis.call('ZADD', K[6], 0, id)
      return 2, a
    end
    if v[9] then
      -- A keyed job waits among its key's ready jobs, or in delayed; a
      -- head cancelled may halt its key (key_lib's bad).
      local kl = key_lib(K[14])
      kl.unready(id, v[9], v[5] or v[6])
      redis.call('ZREM', K[4], id)
      kl.gone(id, v[9])
      finish(k, id, K[10], K[7], K[8], nil, 'cancelled', now)
      if v[7] then released[#released + 1] = id; released[#released + 1] = v[7] end
      kl.bad(id, v[9], now, released)
      return 1, a, v[8] or nil
    end
    -- A ready job's member in ready is its due time and ID; one a
    -- layout-4 process readied since the last sweep is in readyOld by ID.
    if redis.call('ZREM', K[1], rmember(v[5] or v[6], id)) == 1 or redis.call('ZREM', K[13], id) == 1 then
      rids[#rids + 1] = id; ravs[#ravs + 1] = v[5] or v[6]
    elseif redis.call('ZREM', K[4], id) == 0 then
      if inl then
        inl[#inl + 1] = id
      else
        redis.call('LREM', K[12], 1, id)
      end
    end
    if v[10] then redis.call('ZREM', K[14] .. 'e', id) end
    finish(k, id, K[10], K[7], K[8], nil, 'cancelled', now)
    if v[7] then released[#released + 1] = id; released[#released + 1] = v[7] end
    return 1, a, v[8] or nil
  end
  local y = redis.call('HMGET', K[10] .. id, 's', 'a')
  if y[1] == 'cancelled' then return 3, y[2] or '0' end
  if y[1] == 'completed' then return 4, y[2] or '0' end
  -- A failed ID is minted after its job's ID: look above it only.
  local fids = redis.call('ZRANGEBYLEX', K[5], '(' .. id, '+')
  for j = 1, #fids do
    if redis.call('HGET', K[11] .. fids[j], 'j') == id then return 5, '0' end
  end
  return 6, '0'
end

--- script: register
-- Registers a queue and returns its index, the low 12 bits of its IDs.
-- KEYS[1] queues  (fields "n:<name>" -> index, "i:<index>" -> name, "last")
-- ARGV[1] queue name  ARGV[2] the highest index allowed
-- Returns the index (integer), or an error "jobq: queue: …" once every
-- index is taken.
local idx = redis.call('HGET', KEYS[1], 'n:' .. ARGV[1])
if idx then return tonumber(idx) end
local last = tonumber(redis.call('HGET', KEYS[1], 'last') or '0')
if last >= tonumber(ARGV[2]) then
  return redis.error_reply('jobq: queue: ' .. ARGV[1] .. ' would be one queue too many: a key prefix holds at most ' .. ARGV[2] .. ' queues')
end
last = last + 1
redis.call('HSET', KEYS[1], 'last', last, 'n:' .. ARGV[1], last, 'i:' .. last, ARGV[1])
return last

--- script: now
-- Reads the clock of the server that holds one queue's keys (on a
-- cluster, each node reads its own), for what an insert checks before it
-- writes (backend.CheckDeadlines): the clock its scripts go by.
-- KEYS[1] lastTS (unread: it routes the call to the queue's slot)
-- Returns now, µs since 1970 (integer).
return now_us()

--- script: mint
-- Reserves n consecutive job IDs of one queue without inserting anything,
-- for inserts that must name their IDs before writing (unique keys, and
-- batches spanning queues, whose IDs must grow in the batch's order).
-- KEYS[1] lastTS
-- ARGV[1] n  ARGV[2] the least ts to hand out (0 for none)
-- Returns ts of the first ID (integer): max(now, last + 1, least); the IDs
--   have ts + i for i < n.
return reserve(KEYS[1], math.max(now_us(), EPOCH_US + tonumber(ARGV[2])), tonumber(ARGV[1]))

--- script: insert
-- Inserts a batch of jobs of one queue. When it mints the IDs, its jobs
-- that are ready now, of priority 0 and without options but metadata go
-- to readyList, like insert1's: those IDs are above every ID in it (all
-- minted from lastTS inside scripts, strictly increasing), so readyList
-- stays in ID order, and an RPUSH costs less than the ZADDs to ready and
-- readyAt (and claims then take readyList alone, LPOP). Given IDs were
-- minted before the call, maybe before IDs already in readyList, whose
-- order they would break: those jobs go to ready, as do jobs with other
-- options.
-- A keyed job gets its turn (key_lib's turn) and joins its key's jobs; a
-- job with a deadline joins the deadlines set (P:{Q}:e, from base), and
-- never readyList.
-- KEYS[1] lastTS  KEYS[2] ready  KEYS[3] readyAt  KEYS[4] readyAtCounts
--   KEYS[5] delayed  KEYS[6] jobPrefix  KEYS[7] inserted  KEYS[8] readyList
--   KEYS[9] base  KEYS[10..] job... one per item, when the IDs are given
-- ARGV[1] channel  ARGV[2] origin  ARGV[3] items  ARGV[4] items with
--   options
--   then per item its record (field d)
--   then per item with options (any of these not 0 or ''), 9 values: its
--   number (1-based), priority, run at µs ('' for none), delay µs (''
--   for none), unique key ('' for none), metadata JSON ('' for none), key
--   ('' for none), unique states (field us: backend.UniqueStates in
--   decimal; '' for every state), deadline µs ('' for none)
--   then, when the IDs are given, per item its ID (minted here otherwise)
-- Returns {ts of the first minted ID (0 when given), woke, due µs or -1}.
local now = now_us()
local nows = n2s(now)
local n, e = tonumber(ARGV[3]), tonumber(ARGV[4])
local ob = 5 + n
local opts = {}
for j = ob, ob + 9 * (e - 1), 9 do opts[tonumber(ARGV[j])] = j end
local given = #KEYS > 9
local nowp = rmember(now, '') -- the member in ready of a job ready now, but its ID
local first = 0
if not given then first = reserve(KEYS[1], now, n) end
redis.call('INCRBY', KEYS[7], n)
local call, kj, ib = redis.call, KEYS[6], ob + 9 * e - 1
local mv, fresh, nf = moves(), {}, 0
local mq, ml = mv.q, mv.l
for i = 1, n do
  local id, k
  if given then
    id, k = ARGV[ib + i], KEYS[9 + i]
  else
    id = tshex(first + i - 1)
    k = kj .. id
  end
  local d, o = ARGV[4 + i], opts[i]
  if not o then
    -- The common job: ready now, priority 0, nothing optional; kept lean
    -- (it is most of a batch insert's time).
    call('HSET', k, 'd', d, 'c', nows)
    if given then
      mq[#mq + 1] = '0'; mq[#mq + 1] = nowp .. id
      nf = nf + 1
      fresh[nf] = id
    else
      ml[#ml + 1] = id
    end
  else
    local pr, runat, delay, u, md, ky = ARGV[o + 1], ARGV[o + 2], ARGV[o + 3], ARGV[o + 4], ARGV[o + 5], ARGV[o + 6]
    local av, avs = now, nows
    if runat ~= '' then
      av, avs = tonumber(runat), runat
    elseif delay ~= '' then
      av = now + tonumber(delay)
      avs = n2s(av)
    end
    local f = { 'd', d, 'c', nows }
    if pr ~= '0' then f[#f + 1] = 'pr'; f[#f + 1] = pr end
    if av ~= now then f[#f + 1] = 'av'; f[#f + 1] = avs end
    if u ~= '' then f[#f + 1] = 'u'; f[#f + 1] = u end
    if md ~= '' then f[#f + 1] = 'm'; f[#f + 1] = md end
    if ARGV[o + 7] ~= '' then f[#f + 1] = 'us'; f[#f + 1] = ARGV[o + 7] end
    local dl = ARGV[o + 8]
    if dl ~= '' then
      f[#f + 1] = 'dl'; f[#f + 1] = dl
      call('ZADD', KEYS[9] .. 'e', dl, id)
    end
    local K, tu = nil, nil
    if ky ~= '' then
      K = key_lib(KEYS[9])
      tu = K.turn(ky)
      f[#f + 1] = 'ky'; f[#f + 1] = n2s(tu) .. ' ' .. ky
    end
    call('HSET', k, unpack(f))
    if K then
      K.live(id, ky, tu)
      if av <= now then K.ready(id, ky, pr, tu, avs) else later(mv, id, avs); K.later(id, ky, tu) end
    elseif av == now and pr == '0' and u == '' and dl == '' and not given then
      -- Metadata alone (a trace context, say) changes nothing of the
      -- job's place: it goes to readyList with the plain jobs. In ready, a
      -- traced 1 % of a batch kept every claim off readyList's fast path.
      ml[#ml + 1] = id
    elseif av == now then
      mq[#mq + 1] = -tonumber(pr); mq[#mq + 1] = nowp .. id
      nf = nf + 1
      fresh[nf] = id
    elseif av < now then
      ready(mv, id, pr, avs)
    else
      later(mv, id, avs)
    end
  end
end
-- The jobs ready now: one member of readyAt of their own when alone, else
-- one counted member for all (see unready).
if nf == 1 then
  local mo = mv.o
  mo[#mo + 1] = nows; mo[#mo + 1] = fresh[1]
elseif nf > 1 then
  call('ZADD', KEYS[3], nows, '#' .. nows)
  call('HINCRBY', KEYS[4], '#' .. nows, nf)
end
local woke, due = flush(mv, KEYS[2], KEYS[8], KEYS[3], KEYS[5], ARGV[1], ARGV[2], now)
if key_made and key_made.done(ARGV[1], ARGV[2]) == 1 then woke = 1 end
return { first, woke, due }

--- script: insert1
-- Inserts one job of priority 0 into one queue, ready now and without
-- options (no run at, delay, unique key or metadata): the usual single
-- enqueue, and the one whose cost is a round trip's. It is TIME, SET (the
-- ID), HSET, INCR, RPUSH readyList, and only when readyList was empty
-- ZCARD ready (PUBLISH when that is 0 too): no zset, and no member of
-- readyAt. readyList stays in ID order: the ID is minted from lastTS,
-- strictly increasing, and appended in the same script, and only insert
-- appends to readyList otherwise, under the same rule.
-- It mints the ID as reserve does, written out: each helper is a closure
-- made on every call. That, the reply a number rather than a table, and
-- two keys and an argument fewer took its server time from 36 to 27 µs
-- (INFO commandstats, on a machine where Asynq's enqueue script takes
-- 17); what remains is mostly TIME, SET and INCR, the Redis clock and the
-- insert counter.
-- KEYS[1] lastTS  KEYS[2] ready  KEYS[3] readyList  KEYS[4] jobPrefix
--   KEYS[5] inserted
-- ARGV[1] channel  ARGV[2] origin  ARGV[3] its record (field d)
-- Returns ts * 2 + woke: the ID's ts (< 2^51, so the sum is exact) and
-- 1 when it published a wake-up.
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local ts = now - EPOCH_US
local last = redis.call('SET', KEYS[1], string.format('%d', ts), 'GET')
if last and ts <= tonumber(last) then
  ts = last + 1
  redis.call('SET', KEYS[1], string.format('%d', ts))
end
local id = string.format('%013x', ts)
redis.call('HSET', KEYS[4] .. id, 'd', ARGV[3], 'c', string.format('%d', now))
redis.call('INCR', KEYS[5])
if redis.call('RPUSH', KEYS[3], id) == 1 and redis.call('ZCARD', KEYS[2]) == 0 then
  redis.call('PUBLISH', ARGV[1], 'n ' .. ARGV[2])
  return ts * 2 + 1
end
return ts * 2

--- script: conflict
-- Applies conflict modes (backend.ConflictMode) to the live jobs of one
-- queue holding the unique keys of duplicates: a waiting job (ready,
-- delayed, backing off) takes the new payload and due time, a reserved
-- one is left alone, and so is a keyed job or a workflow task's (their
-- place is fixed at insert). The key's holder was found in the unique
-- hash, in its own slot; this script sees the holder's state atomically,
-- and a holder that ended meanwhile is reported, for the caller to insert
-- again. The due time is the Redis clock's: replace's run at, or now +
-- its delay (now without either); debounce's now + its delay, but never
-- past the job's created time + its bound.
-- KEYS[1] ready  KEYS[2] readyAt  KEYS[3] readyAtCounts  KEYS[4] delayed
--   KEYS[5] readyList  KEYS[6] readyOld  KEYS[7..] job... one per item
-- ARGV[1] channel  ARGV[2] origin
--   then per item 5 values: its ID, payload, run at µs ('' none), delay
--   µs ('' none), debounce bound µs ('' for replace)
-- Returns {{outcome per item: 1 changed, 0 left alone, -1 no live job},
--   woke, due µs or -1}.
local now = now_us()
local mv, out, rids, ravs = moves(), {}, {}, {}
for i = 1, (#ARGV - 2) / 5 do
  local b = 3 + 5 * (i - 1)
  local id, k = ARGV[b], KEYS[6 + i]
  local v = redis.call('HMGET', k, 'd', 'lu', 'w', 'ky', 'av', 'c', 'pr')
  if not v[1] then
    out[i] = -1
  elseif (v[2] and v[2] ~= '') or v[3] or v[4] then
    out[i] = 0
  else
    local was = v[5] or v[6]
    if redis.call('ZREM', KEYS[1], rmember(was, id)) == 1 or redis.call('ZREM', KEYS[6], id) == 1 then
      rids[#rids + 1] = id; ravs[#ravs + 1] = was
    elseif redis.call('ZREM', KEYS[4], id) == 0 then
      redis.call('LREM', KEYS[5], 1, id)
    end
    local av = now
    if ARGV[b + 4] ~= '' then
      av = math.min(now + tonumber(ARGV[b + 3]), tonumber(v[6]) + tonumber(ARGV[b + 4]))
    elseif ARGV[b + 2] ~= '' then
      av = tonumber(ARGV[b + 2])
    elseif ARGV[b + 3] ~= '' then
      av = now + tonumber(ARGV[b + 3])
    end
    local avs = n2s(av)
    redis.call('HSET', k, 'd', string.match(v[1], '^%d+ [^\n]*\n') .. ARGV[b + 1], 'av', avs)
    if av <= now then ready(mv, id, v[7] or '0', avs) else later(mv, id, avs) end
    out[i] = 1
  end
end
unready(KEYS[2], KEYS[3], rids, ravs)
local woke, due = flush(mv, KEYS[1], KEYS[5], KEYS[2], KEYS[4], ARGV[1], ARGV[2], now)
return { out, woke, due }

--- script: peek
-- Promotes due delayed jobs of one queue and shows its best ready jobs, so
-- a claim over several queues can pick the best across them. Jobs whose
-- deadline has passed are left out (the claim moves them to the failed
-- set, see expire): up to the promotion limit of them.
-- KEYS[1] ready  KEYS[2] readyList  KEYS[3] readyAt  KEYS[4] delayed
--   KEYS[5] jobPrefix  KEYS[6] settings  KEYS[7] reserved  KEYS[8] base
--   KEYS[9] deadlines
-- ARGV[1] max  ARGV[2] promotion limit
-- Returns {ID, score, due µs, turn, ...}: up to max jobs of ready,
--   readyList and the claimable keys (Kk: each key's claimable job),
--   best first (score -priority: '0' for readyList's), no more than the
--   queue's settings let a claim take now.
local now = now_us()
promote(KEYS[1], KEYS[3], KEYS[4], KEYS[5], now, tonumber(ARGV[2]))
local take = allowance(KEYS[6], KEYS[7], now, tonumber(ARGV[1]))
if take == 0 then return {} end
local best
local late = redis.call('ZCOUNT', KEYS[9], '-inf', '(' .. n2s(now))
if late == 0 then
  best = redis.call('ZRANGE', KEYS[1], 0, take - 1, 'WITHSCORES')
else
  -- Read as many more as have expired, then leave those out.
  local got = redis.call('ZRANGE', KEYS[1], 0, take + math.min(late, tonumber(ARGV[2])) - 1, 'WITHSCORES')
  best = {}
  for i = 1, #got, 4000 do
    local ids = {}
    for j = i, math.min(i + 3999, #got), 2 do ids[#ids + 1] = rid(got[j]) end
    local sc = redis.call('ZMSCORE', KEYS[9], unpack(ids))
    for j = 1, #ids do
      if #best < 2 * take and not (sc[j] and tonumber(sc[j]) < now) then
        best[#best + 1] = got[i + 2 * j - 2]; best[#best + 1] = got[i + 2 * j - 1]
      end
    end
  end
end
local head = redis.call('LRANGE', KEYS[2], 0, take - 1)
local out = pick(best, head, take, KEYS[5], true)
local keyed = redis.call('ZRANGE', KEYS[8] .. 'Kk', 0, take - 1, 'WITHSCORES')
if #keyed == 0 then
  for i = #out, 3, -3 do table.insert(out, i + 1, '0') end
  return out
end
-- Merge: priority, turn (0 without a key), due time, ID.
local all = {}
for i = 1, #out, 3 do
  all[#all + 1] = { out[i], tonumber(out[i + 1]), 0, tonumber(out[i + 2]) }
end
-- Each key's claimable jobs: an ordered key's one, another's best ready
-- ones, as many as its limit lets a claim take.
local r = key_lib(KEYS[8]).rules()
local function add(m, s)
  s = tonumber(s)
  local f = math.floor(s / KT)
  all[#all + 1] = { string.sub(m, 15, 27), f, s - f * KT, rdue(m) }
end
for i = 1, #keyed, 2 do
  local key = keyed[i]
  if r.ordered then
    local h = redis.call('ZRANGE', KEYS[8] .. 'Kl:' .. key, 0, 0)[1]
    local v = redis.call('HMGET', KEYS[5] .. h, 'av', 'c')
    add(rmember(v[1] or v[2], h), keyed[i + 1])
  else
    local cap = take
    if r.limit > 0 then cap = math.min(cap, r.limit - tonumber(redis.call('HGET', KEYS[8] .. 'Kc', key) or '0')) end
    local js = redis.call('ZRANGE', KEYS[8] .. 'Kr:' .. key, 0, cap - 1, 'WITHSCORES')
    for j = 1, #js, 2 do add(js[j], js[j + 1]) end
  end
end
table.sort(all, function(x, y)
  if x[2] ~= y[2] then return x[2] < y[2] end
  if x[3] ~= y[3] then return x[3] < y[3] end
  if x[4] ~= y[4] then return x[4] < y[4] end
  return tonumber(x[1], 16) < tonumber(y[1], 16)
end)
local res = {}
for i = 1, math.min(take, #all) do
  local e = all[i]
  res[#res + 1] = e[1]; res[#res + 1] = n2s(e[2]); res[#res + 1] = n2s(e[4]); res[#res + 1] = n2s(e[3])
end
return res

--- script: claim
-- Reserves up to max ready jobs of one queue (ready and readyList), best
-- first, after promoting due delayed jobs (at most the promotion limit per
-- call). Takes no more than the queue's settings allow (see allowance)
-- and counts what it took in the rate window. Each claim gives its job the
-- token k = max(k + 1, now µs): above every earlier claim's while the hash
-- keeps k. When a restart lost the last writes (AOF everysec drops up to a
-- second), k rolled back while a worker may still hold a lost claim's
-- token; that token was its own claim's now (k + 1 passes the clock only
-- for claims of one job within a µs, or after the clock went back), so the
-- time floor keeps the next token above it. Tokens stay below 2^53, so
-- Lua's doubles hold them exactly.
-- Keyed jobs are claimed from Kk, the claimable job of each key (see
-- key_lib), merged with the others: by priority, then a job without a key
-- (turn 0) first.
-- Jobs whose deadline has passed are never claimed: first up to the
-- promotion limit of them move to the failed set (expire), so they take
-- no place in the claim; any beyond the limit that the claim still meets
-- move there instead of being claimed. A queue with no waiting job that
-- has a deadline pays one ZRANGE on its deadlines set for this.
-- KEYS[1] ready  KEYS[2] readyList  KEYS[3] readyAt  KEYS[4] readyAtCounts
--   KEYS[5] delayed  KEYS[6] reserved  KEYS[7] jobPrefix  KEYS[8] settings
--   KEYS[9] base  KEYS[10] lastTS  KEYS[11] failed  KEYS[12] failedPrefix
--   KEYS[13] deadlines
-- ARGV[1] max  ARGV[2] lease µs  ARGV[3] promotion limit  ARGV[4] channel
--   ARGV[5] origin
-- Returns {now µs, lease deadline µs, ready jobs left, next due µs or '',
--   limits: '' or "<concurrency limit or 0> <next rate window µs or 0>"
--   (0: the window is not spent), {ID, attempts, token, type, ... of the
--   jobs moved to the failed set for their deadline}, {ID, unique key, ...
--   of those holding a unique key}, then per job claimed 14 values: ID, d,
--   pr, a, r, av, c, e, u, m, k (the claim's token), w, tn, ky} (absent
--   fields as '', av as c when absent).
local now = now_us()
local nows = n2s(now)
-- E: the keys of expire, set while the queue has jobs with a deadline.
local E, expd, exu = nil, {}, {}
local dlhead = redis.call('ZRANGE', KEYS[13], 0, 0, 'WITHSCORES')
if #dlhead > 0 then
  E = { e = KEYS[13], q = KEYS[1], o = KEYS[3], n = KEYS[4], d = KEYS[5], j = KEYS[7], f = KEYS[11], x = KEYS[12],
    t = KEYS[10] }
  if tonumber(dlhead[2]) < now then expire(E, now, tonumber(ARGV[3]), expd, exu) end
end
local np, nl = redis.call('ZCARD', KEYS[1]), redis.call('LLEN', KEYS[2])
local kk = KEYS[9] .. 'Kk'
local nk = redis.call('ZCARD', kk)
local was = np + nl + nk
local promoted = promote(KEYS[1], KEYS[3], KEYS[5], KEYS[7], now, tonumber(ARGV[3]))
if promoted > 0 then nk = redis.call('ZCARD', kk) end
local take, ctl, win, used = allowance(KEYS[8], KEYS[6], now, tonumber(ARGV[1]))
-- took lists the IDs taken, best first; inp[i] tells whether took[i] came
-- from ready (only those have readyAt bookkeeping, for unready), keyed[i]
-- whether it came from Kk (only those have a key: the others' HMGET
-- spares the field).
local took, inp, left, keyed = {}, {}, nil, {}
if take > 0 and nk > 0 then
  -- Keyed jobs wait: merge the key's claimable jobs with the others. A
  -- key's next claimable job enters Kk as its last one is taken.
  local picks, pinp = pick(redis.call('ZRANGE', KEYS[1], 0, take - 1, 'WITHSCORES'),
    redis.call('LRANGE', KEYS[2], 0, take - 1), take, KEYS[7], false)
  local K = key_lib(KEYS[9])
  local u, fromq, froml = 1, 0, 0
  -- kb is a window on Kk's best keys (key, score, ...), read from ki on
  -- and kept in Kk's order as claims change it (see place); full: Kk may
  -- hold more keys past it, read when the window runs out.
  local kb, ki, full = {}, 1, true
  while #took < take do
    if full and ki > #kb then
      local want = take - #took
      K.sync()
      kb, ki = redis.call('ZRANGE', kk, 0, want - 1, 'WITHSCORES'), 1
      full = #kb == 2 * want
    end
    local key, ks = kb[ki], kb[ki + 1]
    local p = picks[3 * u - 2]
    local usekey
    if not key then
      if not p then break end
      usekey = false
    elseif not p then
      usekey = true
    else
      usekey = math.floor(tonumber(ks) / KT) < tonumber(picks[3 * u - 1])
    end
    if usekey then
      local id, ns = K.claim(key)
      took[#took + 1] = id; inp[#took] = false; keyed[#took] = true
      ki = ki + 2
      if ns then place(kb, ki, full, key, ns) end
    else
      took[#took + 1] = p; inp[#took] = pinp[u]
      if pinp[u] then fromq = fromq + 1 else froml = froml + 1 end
      u = u + 1
    end
  end
  K.done()
  if fromq > 0 then redis.call('ZPOPMIN', KEYS[1], fromq) end
  if froml > 0 then redis.call('LTRIM', KEYS[2], froml, -1) end
  nl = nl - froml
  left = redis.call('ZCARD', KEYS[1]) + nl + redis.call('ZCARD', kk)
elseif take > 0 then
  if nl == 0 then
    local popped = redis.call('ZPOPMIN', KEYS[1], take)
    for i = 1, #popped, 2 do
      took[#took + 1] = rid(popped[i]); inp[#took] = true
    end
  elseif np == 0 and promoted == 0 then
    -- Only readyList holds ready jobs: the usual case of single enqueues.
    took = redis.call('LPOP', KEYS[2], take) or {}
    left = nl - #took
  else
    local picks, fromq, froml
    picks, inp, fromq, froml = pick(redis.call('ZRANGE', KEYS[1], 0, take - 1, 'WITHSCORES'),
      redis.call('LRANGE', KEYS[2], 0, take - 1), take, KEYS[7], false)
    if fromq > 0 then redis.call('ZPOPMIN', KEYS[1], fromq) end
    if froml > 0 then redis.call('LTRIM', KEYS[2], froml, -1) end
    for i = 1, #picks, 3 do took[#took + 1] = picks[i] end
    nl = nl - froml
  end
end
local lease = n2s(now + tonumber(ARGV[2]))
local out = { nows, lease, 0, '', '', expd, exu }
local ids, avs, rs = {}, {}, {}
-- dls: the taken jobs with a deadline, which leave the deadlines set;
-- smint mints the failed IDs of those found past it.
local dls, smint = {}, nil
if E then E.failed = {} end
for i = 1, #took do
  local id = took[i]
  local k = KEYS[7] .. id
  local v, dl
  if keyed[i] then
    v = redis.call('HMGET', k, 'd', 'pr', 'a', 'r', 'av', 'c', 'e', 'u', 'm', 'k', 'w', 'tn', 'ky')
  elseif E then
    v = redis.call('HMGET', k, 'd', 'pr', 'a', 'r', 'av', 'c', 'e', 'u', 'm', 'k', 'w', 'tn', 'dl')
    dl, v[13] = v[13], nil
  else
    v = redis.call('HMGET', k, 'd', 'pr', 'a', 'r', 'av', 'c', 'e', 'u', 'm', 'k', 'w', 'tn')
  end
  if inp[i] then ids[#ids + 1] = id end
  if v[1] and dl then dls[#dls + 1] = id end
  if v[1] and dl and tonumber(dl) < now then
    -- Past its deadline, beyond what expire took above: it is not
    -- claimed, it fails as expire would have failed it.
    if inp[i] then avs[#ids] = v[5] or v[6] end
    smint = smint or minter(KEYS[10], now, #took)
    expire_job(E, k, id, v[1], v[3], v[10], v[8], dl, smint, expd, exu)
  elseif v[1] then
    local a = tonumber(v[3] or '0') + 1
    -- Usually the last token is a past claim's time: the token is now,
    -- whose string the claim has already.
    local tk = tonumber(v[10] or '0') + 1
    if tk <= now then v[10] = nows else v[10] = n2s(tk) end
    redis.call('HSET', k, 'a', a, 'ra', nows, 'lu', lease, 'k', v[10])
    v[3] = tostring(a)
    v[5] = v[5] or v[6] -- no av: available since created
    if inp[i] then avs[#ids] = v[5] end
    out[#out + 1] = id
    for f = 1, 13 do out[#out + 1] = v[f] or '' end
    rs[#rs + 1] = lease; rs[#rs + 1] = id
  end
end
unready(KEYS[3], KEYS[4], ids, avs)
zadd(KEYS[6], rs)
if E then
  zrem(KEYS[13], dls)
  zadd(KEYS[11], E.failed)
end
left = left or redis.call('ZCARD', KEYS[1]) + nl
out[3] = left
local nd = redis.call('ZRANGE', KEYS[5], 0, 0, 'WITHSCORES')
if nd[2] then out[4] = nd[2] end
if promoted > 0 and was == 0 and left > 0 then
  -- Promotion made jobs ready that this claim did not take: wake others.
  redis.call('PUBLISH', ARGV[4], 'n ' .. ARGV[5])
end
if ctl then
  local nextwin = 0
  if win then
    local counted = used + #rs / 2
    redis.call('HSET', KEYS[8], 'rw', n2s(win), 'rc', counted)
    if counted >= tonumber(ctl[3]) then nextwin = (win + 1) * tonumber(ctl[4]) end
  end
  out[5] = (ctl[2] or '0') .. ' ' .. n2s(nextwin)
end
return out

--- script: adopt
-- Moves up to limit jobs of one queue from readyOld, layout 4's ready
-- set, into ready (see adopt): Migrate's step from layout 4 to 5,
-- repeated until readyOld is empty.
-- KEYS[1] readyOld  KEYS[2] ready  KEYS[3] jobPrefix
-- ARGV[1] limit
-- Returns how many it moved (integer): 0 once readyOld is empty.
return adopt(KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[1]))

--- script: complete
-- Applies outcomes of attempts of one queue, each fenced: it applies only
-- while the job is reserved (lu ~= '') under the given token (k). A job
-- whose cancel was requested (cx) ends cancelled whatever the outcome,
-- when the token matches: an earlier claim's write is stale all the same.
-- KEYS[1] lastTS  KEYS[2] ready  KEYS[3] readyAt  KEYS[4] delayed
--   KEYS[5] reserved  KEYS[6] failed  KEYS[7] failedPrefix  KEYS[8] completed
--   KEYS[9] completedAt  KEYS[10] cancelled  KEYS[11] cancelledAt
--   KEYS[12] cancelling  KEYS[13] finishedPrefix  KEYS[14] readyList
--   KEYS[15] base (workflows.lua)  KEYS[16..] job... one per outcome
-- ARGV[1] channel  ARGV[2] origin  ARGV[3] n
--   then per outcome, 5 values: ID, token, kind ('d' done, 'k' done and
--   kept, 'r' retry, 'u' defer: a retry that un-counts the attempt and
--   keeps the last error, 'f' fail; a retry's and a fail's followed by
--   " <duration µs> <worker>", their entry in el: see add_error), retry
--   delay µs, error text (retry, fail) or result JSON (done: what a task's
--   dependants read, and a kept job's rs; '' none)
-- A job that ends and is a workflow task's (field w) ends its task here,
-- releasing or cancelling its dependants (job_ended in workflows.lua).
-- Returns {{stale outcome numbers (1-based)}, {ID, unique key, ... of jobs
--   that ended holding a unique key}, woke, due µs or -1, {outcome numbers
--   that ended their job cancelled}}. A job kept as completed whose set
--   holds UniqueCompleted (holds_done) keeps its key: it is not listed.
local now = now_us()
local n = tonumber(ARGV[3])
local mint = minter(KEYS[1], now, n)
local mv = moves()
local stale, released, gone, failed, cancelled = {}, {}, {}, {}, {}
for i = 1, n do
  local b = 4 + (i - 1) * 5
  local id, kind = ARGV[b], string.sub(ARGV[b + 2], 1, 1)
  local k = KEYS[15 + i]
  local v = redis.call('HMGET', k, 'k', 'lu', 'pr', 'u', 'cx', 'w', 'a', 'ky')
  local K, ky = nil, nil
  if v[8] and v[2] and v[2] ~= '' and v[1] == ARGV[b + 1] then
    v[9], ky = string.match(v[8], '^(%d+) (.*)$')
    K = key_lib(KEYS[15])
    K.unreserve(ky)
  end
  if not v[2] or v[2] == '' or v[1] ~= ARGV[b + 1] then
    stale[#stale + 1] = i
  elseif v[5] then
    gone[#gone + 1] = id
    finish(k, id, KEYS[13], KEYS[10], KEYS[11], KEYS[12], 'cancelled', now)
    cancelled[#cancelled + 1] = i
    if v[4] then released[#released + 1] = id; released[#released + 1] = v[4] end
    if v[6] then wf_lib().job_ended(KEYS[15], now, mv, id, v[6], 'c', 'cancelled', nil) end
    if K then
      K.gone(id, ky)
      K.bad(id, ky, now, released)
    end
  else
    gone[#gone + 1] = id
    if K and (kind == 'r' or kind == 'u') then
      local delay = tonumber(ARGV[b + 3])
      local av = n2s(now + delay)
      if kind == 'u' then
        redis.call('HINCRBY', k, 'a', -1)
        redis.call('HSET', k, 'av', av, 'ra', '', 'lu', '')
      else
        local took, worker = string.match(ARGV[b + 2], '^. (%d+) (.*)$')
        add_error(k, tonumber(v[7] or '0'), now, tonumber(took), worker, ARGV[b + 4])
        redis.call('HSET', k, 'e', ARGV[b + 4], 'av', av, 'ra', '', 'lu', '')
      end
      if delay <= 0 then K.ready(id, ky, v[3] or '0', v[9], av) else later(mv, id, av); K.later(id, ky, v[9]) end
    elseif kind == 'r' or kind == 'u' then
      local delay = tonumber(ARGV[b + 3])
      local av = n2s(now + delay)
      if kind == 'u' then
        redis.call('HINCRBY', k, 'a', -1)
        redis.call('HSET', k, 'av', av, 'ra', '', 'lu', '')
      else
        local took, worker = string.match(ARGV[b + 2], '^. (%d+) (.*)$')
        add_error(k, tonumber(v[7] or '0'), now, tonumber(took), worker, ARGV[b + 4])
        redis.call('HSET', k, 'e', ARGV[b + 4], 'av', av, 'ra', '', 'lu', '')
      end
      if delay <= 0 then ready(mv, id, v[3] or '0', av) else later(mv, id, av) end
      repend(KEYS[15] .. 'e', k, id)
    else
      local holds = false
      if kind == 'f' then
        local took, worker = string.match(ARGV[b + 2], '^. (%d+) (.*)$')
        add_error(k, tonumber(v[7] or '0'), now, tonumber(took), worker, ARGV[b + 4])
        local fid = tshex(mint.next())
        to_failed(k, id, KEYS[7], fid, ARGV[b + 4])
        failed[#failed + 1] = 0; failed[#failed + 1] = fid
      elseif kind == 'k' then
        -- us is read only for a job with a unique key: a plain one's
        -- completion pays nothing for it.
        holds = v[4] and holds_done(redis.call('HGET', k, 'us'))
        finish(k, id, KEYS[13], KEYS[8], KEYS[9], nil, 'completed', now)
        -- Behind the fence above, in this script: a stale holder's
        -- result is refused with its completion.
        if ARGV[b + 4] ~= '' then redis.call('HSET', KEYS[13] .. id, 'rs', ARGV[b + 4]) end
      else
        redis.call('DEL', k)
      end
      if v[4] and not holds then released[#released + 1] = id; released[#released + 1] = v[4] end
      if K then
        K.gone(id, ky)
        if kind == 'f' then
          K.failed(id, ky)
          K.bad(id, ky, now, released)
        end
      end
      if v[6] then
        if kind == 'f' then
          wf_lib().job_ended(KEYS[15], now, mv, id, v[6], 'f', ARGV[b + 4], nil)
        else
          wf_lib().job_ended(KEYS[15], now, mv, id, v[6], 's', nil, ARGV[b + 4])
        end
      end
    end
  end
end
zrem(KEYS[5], gone)
zadd(KEYS[6], failed)
local kwoke = key_end(KEYS[15], now, mv, ARGV[1], ARGV[2])
local woke, due = flush(mv, KEYS[2], KEYS[14], KEYS[3], KEYS[4], ARGV[1], ARGV[2], now)
if kwoke == 1 then woke = 1 end
return { stale, released, woke, due, cancelled }

--- script: extend
-- Extends the leases of held jobs of one queue, each fenced like complete;
-- a job whose cancel was requested (cx) is lost.
-- KEYS[1] reserved  KEYS[2..] job... one per ref
-- ARGV[1] lease µs  then per ref: ID, token
-- Returns {ref numbers (1-based) whose lease was lost}.
local lease = n2s(now_us() + tonumber(ARGV[1]))
local lost, rs = {}, {}
for i = 1, #KEYS - 1 do
  local k = KEYS[1 + i]
  local v = redis.call('HMGET', k, 'k', 'lu', 'cx')
  if not v[2] or v[2] == '' or v[3] or v[1] ~= ARGV[1 + 2 * i] then
    lost[#lost + 1] = i
  else
    redis.call('HSET', k, 'lu', lease)
    rs[#rs + 1] = lease; rs[#rs + 1] = ARGV[2 * i]
  end
end
zadd(KEYS[1], rs)
return lost

--- script: progress
-- Records a holder's progress of held jobs of one queue, each fenced like
-- extend (a job whose cancel was requested is refused too), tagged with
-- the claim's token (pk) so that a read shows it only while that claim
-- holds the job: no other script has to clear it.
-- KEYS[1] reserved (unread: it routes the call to the queue's slot)
--   KEYS[2..] job... one per ref
-- ARGV[1] percent  ARGV[2] message  then per ref: token
-- Returns {ref numbers (1-based) refused}.
local at = n2s(now_us())
local refused = {}
for i = 1, #KEYS - 1 do
  local k = KEYS[1 + i]
  local v = redis.call('HMGET', k, 'k', 'lu', 'cx')
  if not v[2] or v[2] == '' or v[3] or v[1] ~= ARGV[2 + i] then
    refused[#refused + 1] = i
  else
    redis.call('HSET', k, 'pk', ARGV[2 + i], 'pp', ARGV[1], 'pm', ARGV[2], 'pa', at)
  end
end
return refused

--- script: release
-- Gives held jobs of one queue back at once, fenced like complete. The
-- first max-free releases of a job un-count its attempt; later ones count
-- it, and on its last attempt move the job to the failed set. A job whose
-- cancel was requested (cx) ends cancelled instead.
-- KEYS[1] lastTS  KEYS[2] ready  KEYS[3] readyAt  KEYS[4] reserved
--   KEYS[5] failed  KEYS[6] failedPrefix  KEYS[7] cancelled
--   KEYS[8] cancelledAt  KEYS[9] cancelling  KEYS[10] finishedPrefix
--   KEYS[11] readyList  KEYS[12] base (workflows.lua)  KEYS[13..] job... one
--   per ref
-- ARGV[1] channel  ARGV[2] origin  ARGV[3] max free  ARGV[4] error text
--   of a counted release  then per ref: ID, token
-- Returns, as complete does, {{i, ... of the refs that no longer matched
--   (stale)}, {ID, unique key, ... of jobs failed or ended holding a
--   unique key}, woke, due, {i, ... of the refs that ended cancelled}}, i
--   counting refs from 1; due is flush's (a released task may be delayed).
local now = now_us()
local nows = n2s(now)
local free = tonumber(ARGV[3])
local mint = minter(KEYS[1], now, #KEYS - 12)
local mv = moves()
local stale, cancelled, released, gone, failed = {}, {}, {}, {}, {}
for i = 1, #KEYS - 12 do
  local k = KEYS[12 + i]
  local id = ARGV[3 + 2 * i]
  local v = redis.call('HMGET', k, 'a', 'lu', 'r', 'd', 'pr', 'u', 'cx', 'k', 'w', 'ky')
  local a = tonumber(v[1] or '0')
  if v[2] and v[2] ~= '' and v[8] == ARGV[4 + 2 * i] then
    gone[#gone + 1] = id
    local rel = tonumber(v[3] or '0') + 1
    local K, ky = nil, nil
    if v[10] then
      v[11], ky = string.match(v[10], '^(%d+) (.*)$')
      K = key_lib(KEYS[12])
      K.unreserve(ky)
    end
    if v[7] then
      finish(k, id, KEYS[10], KEYS[7], KEYS[8], KEYS[9], 'cancelled', now)
      cancelled[#cancelled + 1] = i
      if v[6] then released[#released + 1] = id; released[#released + 1] = v[6] end
      if v[9] then wf_lib().job_ended(KEYS[12], now, mv, id, v[9], 'c', 'cancelled', nil) end
      if K then
        K.gone(id, ky)
        K.bad(id, ky, now, released)
      end
    elseif rel <= free or a < tonumber(string.match(v[4], '^%d+')) then
      if rel <= free then
        redis.call('HSET', k, 'a', a - 1, 'r', rel, 'av', nows, 'ra', '', 'lu', '')
      else
        add_error(k, a, now, 0, '', ARGV[4])
        redis.call('HSET', k, 'r', rel, 'e', ARGV[4], 'av', nows, 'ra', '', 'lu', '')
      end
      if K then
        K.ready(id, ky, v[5] or '0', v[11], nows)
      else
        ready(mv, id, v[5] or '0', nows)
        repend(KEYS[12] .. 'e', k, id)
      end
    else
      add_error(k, a, now, 0, '', ARGV[4])
      local fid = tshex(mint.next())
      to_failed(k, id, KEYS[6], fid, ARGV[4])
      failed[#failed + 1] = 0; failed[#failed + 1] = fid
      if v[6] then released[#released + 1] = id; released[#released + 1] = v[6] end
      if v[9] then wf_lib().job_ended(KEYS[12], now, mv, id, v[9], 'f', ARGV[4], nil) end
      if K then
        K.gone(id, ky)
        K.failed(id, ky)
        K.bad(id, ky, now, released)
      end
    end
  else
    stale[#stale + 1] = i
  end
end
zrem(KEYS[4], gone)
zadd(KEYS[5], failed)
local kwoke = key_end(KEYS[12], now, mv, ARGV[1], ARGV[2])
-- delayed, from base: a task released above may be delayed.
local woke, due = flush(mv, KEYS[2], KEYS[11], KEYS[3], KEYS[12] .. 'd', ARGV[1], ARGV[2], now)
if kwoke == 1 then woke = 1 end
return { stale, released, woke, due, cancelled }

--- script: expired
-- Counts reserved jobs of one queue whose lease has expired and waiting
-- jobs whose deadline has passed, the first step of every lease sweep,
-- which runs on every worker, periodically: so it also moves up to limit
-- jobs from readyOld into ready, those a layout-4 process still running
-- readied since Migrate (see adopt), at the cost of an EXISTS once none
-- runs.
-- KEYS[1] reserved  KEYS[2] readyOld  KEYS[3] ready  KEYS[4] jobPrefix
--   KEYS[5] deadlines
-- ARGV[1] limit
-- Returns the count (integer).
adopt(KEYS[2], KEYS[3], KEYS[4], tonumber(ARGV[1]))
local now = n2s(now_us())
return redis.call('ZCOUNT', KEYS[1], '-inf', now) + redis.call('ZCOUNT', KEYS[5], '-inf', '(' .. now)

--- script: sweep
-- Returns up to limit expired reserved jobs of one queue to ready, or,
-- with their attempts spent, moves them to the failed set. Jobs whose
-- cancel was requested (cx) end cancelled instead. Within what is left
-- of limit, it then moves waiting jobs whose deadline has passed to the
-- failed set (expire), and beyond it those it just rescued past theirs,
-- each handled twice: rescued, then expired (a job of a sweep's count is
-- in it once).
-- KEYS[1] lastTS  KEYS[2] ready  KEYS[3] readyAt  KEYS[4] reserved
--   KEYS[5] failed  KEYS[6] failedPrefix  KEYS[7] jobPrefix  KEYS[8] cancelled
--   KEYS[9] cancelledAt  KEYS[10] cancelling  KEYS[11] finishedPrefix
--   KEYS[12] readyList  KEYS[13] base (workflows.lua)  KEYS[14] readyAtCounts
--   KEYS[15] delayed  KEYS[16] deadlines
-- ARGV[1] channel  ARGV[2] origin  ARGV[3] limit  ARGV[4] error text
--   ('lease expired')
-- Returns {{ID, attempt, token, type, failed (1 or 0), ...}: the claims
--   whose lease expired, {ID, unique key, ... of jobs failed or cancelled
--   holding a unique key, expired ones included}, woke, cancelled, due,
--   {ID, attempts, token, type, ... of the jobs expired}}; due is flush's
--   (a released task may be delayed).
local now = now_us()
local nows = n2s(now)
local mv = moves()
local exp = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', nows, 'LIMIT', 0, tonumber(ARGV[3]))
local mint = minter(KEYS[1], now, #exp)
local out, released, failed, cancelled, late = {}, {}, {}, 0, 0
for i = 1, #exp do
  local id = exp[i]
  local k = KEYS[7] .. id
  local v = redis.call('HMGET', k, 'a', 'd', 'pr', 'u', 'cx', 'k', 'w', 'ky')
  local K, ky = nil, nil
  if v[8] and v[2] then
    v[9], ky = string.match(v[8], '^(%d+) (.*)$')
    K = key_lib(KEYS[13])
    K.unreserve(ky)
  end
  if v[2] and v[5] then
    finish(k, id, KEYS[11], KEYS[8], KEYS[9], KEYS[10], 'cancelled', now)
    cancelled = cancelled + 1
    if v[4] then released[#released + 1] = id; released[#released + 1] = v[4] end
    if v[7] then wf_lib().job_ended(KEYS[13], now, mv, id, v[7], 'c', 'cancelled', nil) end
    if K then
      K.gone(id, ky)
      K.bad(id, ky, now, released)
    end
  elseif v[2] then
    local a = tonumber(v[1] or '0')
    local ma, typ = string.match(v[2], '^(%d+) ([^\n]*)')
    add_error(k, a, now, 0, '', ARGV[4])
    if a < tonumber(ma) then
      redis.call('HSET', k, 'e', ARGV[4], 'av', nows, 'ra', '', 'lu', '')
      if K then
        K.ready(id, ky, v[3] or '0', v[9], nows)
      else
        ready(mv, id, v[3] or '0', nows)
        local dl = repend(KEYS[16], k, id)
        if dl and dl < now then late = late + 1 end
      end
      out[#out + 1] = id; out[#out + 1] = a; out[#out + 1] = v[6] or ''; out[#out + 1] = typ; out[#out + 1] = 0
    else
      local fid = tshex(mint.next())
      to_failed(k, id, KEYS[6], fid, ARGV[4])
      failed[#failed + 1] = 0; failed[#failed + 1] = fid
      out[#out + 1] = id; out[#out + 1] = a; out[#out + 1] = v[6] or ''; out[#out + 1] = typ; out[#out + 1] = 1
      if v[4] then released[#released + 1] = id; released[#released + 1] = v[4] end
      if v[7] then wf_lib().job_ended(KEYS[13], now, mv, id, v[7], 'f', ARGV[4], nil) end
      if K then
        K.gone(id, ky)
        K.failed(id, ky)
        K.bad(id, ky, now, released)
      end
    end
  end
end
zrem(KEYS[4], exp)
zadd(KEYS[5], failed)
local kwoke = key_end(KEYS[13], now, mv, ARGV[1], ARGV[2])
-- A task released above may be delayed.
local woke, due = flush(mv, KEYS[2], KEYS[12], KEYS[3], KEYS[15], ARGV[1], ARGV[2], now)
if kwoke == 1 then woke = 1 end
-- After flush: a job rescued above past its deadline is in ready now.
local expd = {}
if tonumber(ARGV[3]) - #exp + late > 0 then
  expire({ e = KEYS[16], q = KEYS[2], o = KEYS[3], n = KEYS[14], d = KEYS[15], j = KEYS[7], f = KEYS[5], x = KEYS[6],
    t = KEYS[1] }, now, tonumber(ARGV[3]) - #exp + late, expd, released)
end
return { out, released, woke, cancelled, due, expd }

--- script: stats
-- Counts one queue's jobs by state.
-- KEYS[1] ready  KEYS[2] readyList  KEYS[3] readyAt  KEYS[4] delayed
--   KEYS[5] reserved  KEYS[6] failed  KEYS[7] jobPrefix  KEYS[8] readyOld
--   KEYS[9] base (its Kq: keyed ready jobs)
-- Returns {pending (ready, and delayed ones already due), scheduled,
--   reserved, failed, oldest due µs or ''}.
local now = now_us()
local nows = n2s(now)
local due = redis.call('ZCOUNT', KEYS[4], '-inf', nows)
local oldest = nil
local function older(us)
  if us and (not oldest or tonumber(us) < oldest) then oldest = tonumber(us) end
end
local o1 = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
older(o1[2])
-- readyList's head is its oldest job, available since it was created.
local head = redis.call('LINDEX', KEYS[2], 0)
if head then older(redis.call('HGET', KEYS[7] .. head, 'c')) end
local d1 = redis.call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')
if d1[2] and tonumber(d1[2]) <= now then older(d1[2]) end
local k1 = redis.call('ZRANGE', KEYS[9] .. 'Kq', 0, 0, 'WITHSCORES')
older(k1[2])
if oldest then oldest = n2s(oldest) else oldest = '' end
return {
  redis.call('ZCARD', KEYS[1]) + redis.call('ZCARD', KEYS[8]) + redis.call('LLEN', KEYS[2]) + due +
    redis.call('ZCARD', KEYS[9] .. 'Kq'),
  redis.call('ZCARD', KEYS[4]) - due,
  redis.call('ZCARD', KEYS[5]),
  redis.call('ZCARD', KEYS[6]),
  oldest,
}

--- script: failedscan
-- Lists failed jobs of one queue matching a filter, newest first.
-- KEYS[1] failed  KEYS[2] failedPrefix
-- ARGV[1] exclusive upper bound on the failed ID ('' for none)
--   ARGV[2] failed before, µs ('' for none)  ARGV[3] older than, µs ('')
--   ARGV[4] type ('' for any)  ARGV[5] most matches  ARGV[6] most entries
--   examined  ARGV[7] 'rec' (whole records) or 'ref' (what a replay needs)
--   ARGV[8] key ('' for any)  ARGV[9] '1': keep held (see scan)
-- Returns {cursor ('' when exhausted), then per match: for 'rec' 13
--   values: failed ID, j, d, pr, a, e, u, m, c, el, w, tn, ky; for 'ref'
--   4 values: failed ID, j, type, u} (absent fields as '').
local out = { '' }
local limit = tonumber(ARGV[5])
local n = 0
local ref = ARGV[7] == 'ref'
local fields = { 'j', 'd', 'pr', 'a', 'e', 'u', 'm', 'c', 'el', 'w', 'tn', 'ky' }
if ref then fields = { 'j', 'd', 'u' } end
out[1] = scan(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[6]), function(fid, fk)
  local v = redis.call('HMGET', fk, unpack(fields))
  if ref then v[2] = rtype(v[2] or '') end
  out[#out + 1] = fid
  for f = 1, #fields do out[#out + 1] = v[f] or '' end
  n = n + 1
  return n < limit
end, ARGV[8], ARGV[9])
return out

--- script: failedof
-- Finds the failed records of jobs of one queue by job ID: through
-- failedByJob, and when it names none (or a record that is gone) while
-- the failed set holds records it does not index, written by a layout-6
-- process still running (failedByJob then has fewer or more entries than
-- failed has members), by a walk of the failed set above the job's ID,
-- as cancel1 does: a failed ID is minted after its job's ID. So a lookup
-- costs two reads (three when the job is not failed), unless such records
-- are about.
-- KEYS[1] failed  KEYS[2] failedPrefix  KEYS[3] failedByJob
-- ARGV job IDs
-- Returns {failed ID, or '' when the job is not failed, per job ID}.
local out, partial = {}, nil
for i = 1, #ARGV do
  local id = ARGV[i]
  local fid = redis.call('HGET', KEYS[3], id)
  local stale = fid and redis.call('HGET', KEYS[2] .. fid, 'j') ~= id
  if stale then fid = nil end
  if not fid then
    if partial == nil then
      partial = redis.call('HLEN', KEYS[3]) ~= redis.call('ZCARD', KEYS[1])
    end
    -- An entry naming a gone record with the counts equal: some record
    -- has no entry.
    if partial or stale then
      local fids = redis.call('ZRANGEBYLEX', KEYS[1], '(' .. id, '+')
      for j = 1, #fids do
        if redis.call('HGET', KEYS[2] .. fids[j], 'j') == id then
          fid = fids[j]
          break
        end
      end
    end
  end
  out[i] = fid or ''
end
return out

--- script: failedindex
-- Indexes the failed records of one queue in failedByJob, oldest first
-- above a cursor, at most limit of them: Migrate's step from layout 6,
-- whose records have no entry.
-- KEYS[1] failed  KEYS[2] failedPrefix  KEYS[3] failedByJob
-- ARGV[1] the failed ID to continue above ('' from the start)
--   ARGV[2] limit
-- Returns the cursor: the last failed ID indexed, '' once the set is
--   exhausted.
local min = '-'
if ARGV[1] ~= '' then min = '(' .. ARGV[1] end
local limit = tonumber(ARGV[2])
local got = redis.call('ZRANGEBYLEX', KEYS[1], min, '+', 'LIMIT', 0, limit)
for i = 1, #got do
  local j = redis.call('HGET', KEYS[2] .. got[i], 'j')
  if j then redis.call('HSET', KEYS[3], j, got[i]) end
end
if #got < limit then return '' end
return got[#got]

--- script: purgescan
-- Deletes failed jobs of one queue matching a filter, newest first below
-- the bound: at most limit of them, examining at most budget entries. A
-- workflow task's job (field w) is counted out of its workflow (purged in
-- workflows.lua), whose last one lets a failed workflow be pruned.
-- KEYS[1] failed  KEYS[2] failedPrefix  KEYS[3] base (workflows.lua)
--   KEYS[4] failedByJob
-- ARGV[1..4] as failedscan  ARGV[5] most deleted  ARGV[6] most examined
--   ARGV[7] key ('' for any)  ARGV[8] '1': keep held (see scan)
-- A keyed job leaves its key's failed jobs: a held key goes on (wakes).
-- Returns {cursor ('' when exhausted), number deleted}.
local limit = tonumber(ARGV[5])
local del, jobs = {}, {}
local cursor = scan(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[6]), function(fid, fk)
  local v = redis.call('HMGET', fk, 'j', 'w', 'ky')
  redis.call('DEL', fk)
  del[#del + 1] = fid
  if v[1] then jobs[#jobs + 1] = v[1] end
  if v[2] then wf_lib().purged(KEYS[3], v[1], v[2]) end
  if v[3] and v[1] then key_lib(KEYS[3]).unfailed(v[1], string.match(v[3], '^%d+ (.*)$')) end
  return #del < limit
end, ARGV[7], ARGV[8])
zrem(KEYS[1], del)
hdel(KEYS[4], jobs)
if key_made then key_made.done(KEYS[3] .. 'w', '') end
return { cursor, #del }

--- script: purge
-- Deletes the named failed jobs of one queue; unknown ones are ignored. A
-- workflow task's job (field w) is counted out of its workflow, as in
-- purgescan.
-- KEYS[1] failed  KEYS[2] base (workflows.lua)  KEYS[3] failedByJob
--   KEYS[4..] failedJob... one per ID
-- ARGV failed IDs, in the order of their keys
-- Returns how many were deleted (integer).
local del, jobs = {}, {}
local base = KEYS[2]
for i = 1, #ARGV do
  local v = redis.call('HMGET', KEYS[3 + i], 'j', 'w', 'ky')
  if redis.call('DEL', KEYS[3 + i]) == 1 then
    del[#del + 1] = ARGV[i]
    if v[1] then jobs[#jobs + 1] = v[1] end
    if v[2] then wf_lib().purged(base, v[1], v[2]) end
    if v[3] and v[1] then key_lib(base).unfailed(v[1], string.match(v[3], '^%d+ (.*)$')) end
  end
end
zrem(KEYS[1], del)
hdel(KEYS[3], jobs)
if key_made then key_made.done(base .. 'w', '') end
return #del

--- script: replay
-- Moves failed jobs of one queue back to ready, keeping their job IDs,
-- attempts and releases reset to 0, and keeping k: the next claim's token
-- is still above every earlier claim's, so a holder from before the
-- failure stays stale. With ARGV[3] = '1' it is all or nothing: if any
-- named failed job is missing, nothing moves. A workflow task's job
-- (field w) reopens its task and what its failure cancelled, here
-- (replayed in workflows.lua), unless a user cancelled its workflow (or
-- it was pruned, being cancelled): then it stays failed (skipped).
-- KEYS[1] ready  KEYS[2] readyAt  KEYS[3] failed  KEYS[4] readyList
--   KEYS[5] base (workflows.lua)  KEYS[6] failedByJob  KEYS[7..] failedJob...
--   job... a pair per item
-- ARGV[1] channel  ARGV[2] origin  ARGV[3] '1' all or nothing, '0' skip
--   missing ones  then per item: failed ID, job ID
-- Returns {-1, item number} when all or nothing found one missing, else
--   {number moved, woke, due (ms until the first delayed job it
--   released is due, -1 for none), then the item numbers (1-based) moved, then
--   the negated item numbers skipped (their workflow was cancelled)}.
local now = now_us()
local nows = n2s(now)
local n = (#KEYS - 6) / 2
local base = KEYS[5]
local strict = ARGV[3] == '1'
local prs, wvs, skipped, kys, tus = {}, {}, {}, {}, {}
for i = 1, n do
  local v = redis.call('HMGET', KEYS[5 + 2 * i], 'j', 'pr', 'w', 'ky')
  if v[1] == ARGV[3 + 2 * i] then
    if v[3] and wf_lib().unreplayable(base, v[3]) then
      skipped[#skipped + 1] = -i
    else
      prs[i] = v[2] or '0'
      wvs[i] = v[3]
      if v[4] then tus[i], kys[i] = string.match(v[4], '^(%d+) (.*)$') end
    end
  elseif strict then
    return { -1, i }
  end
end
local mv = moves()
local out, gone, jobs = { 0, 0, -1 }, {}, {}
for i = 1, n do
  if prs[i] then
    local jk, id = KEYS[6 + 2 * i], ARGV[3 + 2 * i]
    if redis.call('RENAMENX', KEYS[5 + 2 * i], jk) == 1 then
      -- A replay clears the deadline (to_failed drops it already), or
      -- the job would expire again at once.
      redis.call('HDEL', jk, 'j', 'dl')
      jobs[#jobs + 1] = id
      redis.call('HSET', jk, 'a', 0, 'r', 0, 'av', nows)
      if kys[i] then
        -- Back in its place among its key's jobs: its ID and turn kept.
        local K = key_lib(base)
        K.unfailed(id, kys[i])
        K.live(id, kys[i], tus[i])
        K.ready(id, kys[i], prs[i], tus[i], nows)
      else
        ready(mv, id, prs[i], nows)
      end
      gone[#gone + 1] = ARGV[2 + 2 * i]
      out[#out + 1] = i
      if wvs[i] then wf_lib().replayed(base, now, mv, id, wvs[i]) end
    end
  end
end
zrem(KEYS[3], gone)
hdel(KEYS[6], jobs)
out[1] = #gone
local kwoke = key_end(base, now, mv, ARGV[1], ARGV[2])
-- delayed, from base: a task the replay released may be delayed.
out[2], out[3] = flush(mv, KEYS[1], KEYS[4], KEYS[2], base .. 'd', ARGV[1], ARGV[2], now)
if kwoke == 1 then out[2] = 1 end
for _, x in ipairs(skipped) do out[#out + 1] = x end
return out

--- script: ureserve
-- Reserves unique keys for jobs: a key that is free, or already held by
-- the same ID, is set to "<ID>@<now µs>". A key the ID held already (a
-- replay sent again after its reply was lost, whose job is live) is told
-- apart: a caller whose own write then fails must not free it.
-- KEYS[1] unique
-- ARGV per key: unique key, ID (16 hex digits: the whole ID)
-- Returns {now µs, then per key: '' (reserved, was free), '=' (held by
--   the ID already) or the holder's value}.
local now = n2s(now_us())
local out = { now }
for i = 1, #ARGV, 2 do
  local v = redis.call('HGET', KEYS[1], ARGV[i])
  if not v or string.sub(v, 1, 16) == ARGV[i + 1] then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1] .. '@' .. now)
    if v then out[#out + 1] = '=' else out[#out + 1] = '' end
  else
    out[#out + 1] = v
  end
end
return out

--- script: usteal
-- Takes unique keys over from holders found dead or out of their states,
-- or marks keys found held by their holder's kept completed job
-- (backend.UniqueCompleted), each only if its value is still the one
-- found (compare and set). The mark ("<holder ID>@0") is what makes a
-- completed holder's key its own: a takeover judged while the job still
-- ran, and sent after it completed, expects the value before the mark and
-- fails, so an insert that names the completed job as the key's holder,
-- having marked it first, is never contradicted by one that took the key.
-- A key found freed (its completed job pruned) is taken in either mode.
-- KEYS[1] unique
-- ARGV per key: unique key, the value found, the new holder's ID, '' to
--   take the key or '0' to mark it
-- Returns {now µs, then per key: '' (taken), '0' (marked) or the value
--   now there}.
local now = n2s(now_us())
local out = { now }
for i = 1, #ARGV, 4 do
  local v = redis.call('HGET', KEYS[1], ARGV[i])
  if v == ARGV[i + 1] and ARGV[i + 3] == '0' then
    redis.call('HSET', KEYS[1], ARGV[i], string.sub(v, 1, 16) .. '@0')
    out[#out + 1] = '0'
  elseif not v or v == ARGV[i + 1] then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 2] .. '@' .. now)
    out[#out + 1] = ''
  else
    out[#out + 1] = v
  end
end
return out

--- script: urelease
-- Frees unique keys still held by the given holders: a 16-hex-digit ID
-- frees the key while that ID holds it (a job that ended); a whole value
-- "<ID>@<µs>" only while it holds exactly that reservation (one whose job
-- was not written: a replay reuses its job's ID, and another replay of
-- the same job may have reserved the key again meanwhile).
-- KEYS[1] unique
-- ARGV per key: unique key, holder
-- Returns how many were freed (integer).
local freed = 0
for i = 1, #ARGV, 2 do
  local v = redis.call('HGET', KEYS[1], ARGV[i])
  local h = ARGV[i + 1]
  if v and (v == h or (#h == 16 and string.sub(v, 1, 16) == h)) then
    redis.call('HDEL', KEYS[1], ARGV[i])
    freed = freed + 1
  end
end
return freed

--- script: qctl
-- Sets one queue's control settings (see QueueController): pauses or
-- resumes it (keeping its limits), or replaces its limits (keeping the
-- pause) and starts a new rate window. Fields are only present when set,
-- so a queue neither paused nor limited has no settings hash at all.
-- Resuming or new limits wake idle workers of every process.
-- KEYS[1] settings
-- ARGV[1] 'p' (pause: ARGV[2] '1' or '0') or 'l' (limits: ARGV[2]
--   concurrency, ARGV[3] rate, ARGV[4] period µs; 0: none)
--   ARGV[5] channel  ARGV[6] origin (its own subscribers the caller wakes)
-- Returns 1.
if ARGV[1] == 'p' then
  if ARGV[2] == '1' then
    redis.call('HSET', KEYS[1], 'p', '1')
    return 1
  end
  redis.call('HDEL', KEYS[1], 'p')
else
  redis.call('HDEL', KEYS[1], 'cc', 'rl', 'rp', 'rw', 'rc')
  if ARGV[2] ~= '0' then redis.call('HSET', KEYS[1], 'cc', ARGV[2]) end
  if ARGV[3] ~= '0' then redis.call('HSET', KEYS[1], 'rl', ARGV[3], 'rp', ARGV[4]) end
end
redis.call('PUBLISH', ARGV[5], 'n ' .. ARGV[6])
return 1

--- script: cancel
-- Cancels jobs of one queue: a pending one (ready or delayed) ends
-- cancelled at once; a reserved one gets cx and joins cancelling. A
-- pending job in readyList leaves it by LREM, which walks the list: O(n)
-- in the ready jobs, as Asynq and BullMQ pay to cancel a waiting job;
-- cancelling a pending job is an operator's act, rare next to inserts and
-- claims, which the list makes cheaper.
-- KEYS[1] ready  KEYS[2] readyAt  KEYS[3] readyAtCounts  KEYS[4] delayed
--   KEYS[5] failed  KEYS[6] cancelling  KEYS[7] cancelled  KEYS[8] cancelledAt
--   KEYS[9] jobPrefix  KEYS[10] finishedPrefix  KEYS[11] failedPrefix
--   KEYS[12] readyList  KEYS[13] readyOld  KEYS[14] base (workflows.lua)
-- ARGV[1] channel  ARGV[2] origin  then the IDs
-- Returns {{outcome, attempts, ... per ID}, {ID, unique key, ... of jobs
--   cancelled holding a unique key}, woke, due µs or -1}; outcome as
--   backend.CancelOutcome (1 cancelled, 2 requested, 3 already, 4
--   completed, 5 failed, 6 unknown). A task's job cancelled while pending
--   ends its task, which may release dependants (DepContinue): woke and
--   due are their wake-ups'.
local now = now_us()
local mv = moves()
local out, released, rids, ravs = {}, {}, {}, {}
for i = 3, #ARGV do
  local id = ARGV[i]
  local res, a, wv = cancel1(KEYS, id, now, released, rids, ravs)
  out[#out + 1] = res; out[#out + 1] = a
  -- A task's pending job ends its task, in this script (workflows.lua).
  if wv then wf_lib().job_ended(KEYS[14], now, mv, id, wv, 'c', 'cancelled', nil) end
end
unready(KEYS[2], KEYS[3], rids, ravs)
local kwoke = key_end(KEYS[14], now, mv, ARGV[1], ARGV[2])
local woke, due = flush(mv, KEYS[1], KEYS[12], KEYS[2], KEYS[4], ARGV[1], ARGV[2], now)
if kwoke == 1 then woke = 1 end
return { out, released, woke, due }

--- script: cancelling
-- Lists the cancelling claims of one queue.
-- KEYS[1] cancelling  KEYS[2] jobPrefix
-- Returns {ID, attempt, token, ...}.
local ids = redis.call('ZRANGE', KEYS[1], 0, -1)
local out = {}
for i = 1, #ids do
  local v = redis.call('HMGET', KEYS[2] .. ids[i], 'a', 'k')
  if v[1] then out[#out + 1] = ids[i]; out[#out + 1] = v[1]; out[#out + 1] = v[2] or '' end
end
return out

--- script: finishedscan
-- Lists kept finished jobs of one queue and state, newest (highest ID)
-- first. It is given the sets of both states, so that its keys are the
-- same for either.
-- KEYS[1] completed  KEYS[2] cancelled  KEYS[3] finishedPrefix
-- ARGV[1] exclusive upper ID ('' none)  ARGV[2] type ('' any)
--   ARGV[3] since µs ('' none)  ARGV[4] until µs ('' none)  ARGV[5] limit
--   ARGV[6] state ('completed' or 'cancelled')  ARGV[7] key ('' any)
--   ARGV[8] '1': read each job's result (rs); anything else: '' for it,
--   so a list never carries results
-- Returns {ID, d, pr, a, e, u, m, c, fa, ky, rs, ...}, 11 values per job.
local byid = KEYS[1]
if ARGV[6] == 'cancelled' then byid = KEYS[2] end
local max = '+'
if ARGV[1] ~= '' then max = '(' .. ARGV[1] end
local limit = tonumber(ARGV[5])
local since, till = tonumber(ARGV[3]), tonumber(ARGV[4])
local fields = { 'd', 'pr', 'a', 'e', 'u', 'm', 'c', 'fa', 'ky' }
if ARGV[8] == '1' then fields[10] = 'rs' end
local out, n = {}, 0
while n < limit do
  local got = redis.call('ZREVRANGEBYLEX', byid, max, '-', 'LIMIT', 0, 200)
  for i = 1, #got do
    local v = redis.call('HMGET', KEYS[3] .. got[i], unpack(fields))
    local fa = tonumber(v[8] or '0')
    if v[1] and (ARGV[2] == '' or rtype(v[1]) == ARGV[2]) and (not since or fa >= since) and (not till or fa < till) and
        (ARGV[7] == '' or string.match(v[9] or '', '^%d+ (.*)$') == ARGV[7]) then
      out[#out + 1] = got[i]
      for j = 1, 10 do out[#out + 1] = v[j] or '' end
      n = n + 1
      if n == limit then break end
    end
  end
  if #got < 200 then break end
  max = '(' .. got[#got]
end
return out

--- script: joblist
-- Lists live jobs of one queue in one state, newest (highest ID) first.
-- It reads the whole state's set: an operator's call, not a hot path.
-- KEYS[1] ready  KEYS[2] delayed  KEYS[3] reserved  KEYS[4] jobPrefix
--   KEYS[5] readyList  KEYS[6] readyOld  KEYS[7] base (its Kq: keyed ready
--   jobs)
-- ARGV[1] state ('pending', 'scheduled' or 'reserved')  ARGV[2] exclusive
--   upper ID ('' none)  ARGV[3] type ('' any)  ARGV[4] since µs ('' none)
--   ARGV[5] until µs ('' none)  ARGV[6] limit  ARGV[7] key ('' any)
-- Returns the IDs, at most limit.
local nows = n2s(now_us())
local ids = {}
if ARGV[1] == 'pending' then
  local ms = redis.call('ZRANGE', KEYS[1], 0, -1)
  for i = 1, #ms do ids[i] = rid(ms[i]) end
  local more = redis.call('ZRANGE', KEYS[6], 0, -1)
  for i = 1, #more do ids[#ids + 1] = more[i] end
  more = redis.call('LRANGE', KEYS[5], 0, -1)
  for i = 1, #more do ids[#ids + 1] = more[i] end
  more = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', nows)
  for i = 1, #more do ids[#ids + 1] = more[i] end
  more = redis.call('ZRANGE', KEYS[7] .. 'Kq', 0, -1)
  for i = 1, #more do ids[#ids + 1] = more[i] end
elseif ARGV[1] == 'scheduled' then
  ids = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. nows, '+inf')
else
  ids = redis.call('ZRANGE', KEYS[3], 0, -1)
end
local cand = {}
for i = 1, #ids do
  if ARGV[2] == '' or ids[i] < ARGV[2] then cand[#cand + 1] = ids[i] end
end
table.sort(cand, function(x, y) return x > y end)
local limit = tonumber(ARGV[6])
local since, till = tonumber(ARGV[4]), tonumber(ARGV[5])
local out = {}
for i = 1, #cand do
  if #out >= limit then break end
  local v = redis.call('HMGET', KEYS[4] .. cand[i], 'd', 'av', 'c', 'ra', 'ky')
  if v[1] and (ARGV[7] == '' or string.match(v[5] or '', '^%d+ (.*)$') == ARGV[7]) then
    local at = v[2] or v[3]
    if ARGV[1] == 'reserved' then at = v[4] or '0' end
    at = tonumber(at)
    if (ARGV[3] == '' or rtype(v[1]) == ARGV[3]) and (not since or at >= since) and (not till or at < till) then
      out[#out + 1] = cand[i]
    end
  end
end
return out

--- script: prunefinished
-- Deletes up to limit kept finished jobs of one queue and state that
-- finished more than a given time ago (Redis clock). It is given the sets
-- of both states, as finishedscan, but the Go code prunes completed jobs
-- with "prunecompleted", which also reads the zsets per type and lists
-- the unique keys its jobs may hold (holds_done).
-- KEYS[1] completed  KEYS[2] completedAt  KEYS[3] cancelled
--   KEYS[4] cancelledAt  KEYS[5] finishedPrefix
-- ARGV[1] older than µs  ARGV[2] limit  ARGV[3] state ('completed' or
--   'cancelled')
-- Returns how many it deleted.
local byid, bytime = KEYS[1], KEYS[2]
if ARGV[3] == 'cancelled' then byid, bytime = KEYS[3], KEYS[4] end
local cut = now_us() - tonumber(ARGV[1])
local ids = redis.call('ZRANGEBYSCORE', bytime, '-inf', '(' .. n2s(cut), 'LIMIT', 0, tonumber(ARGV[2]))
for i = 1, #ids do redis.call('DEL', KEYS[5] .. ids[i]) end
zrem(byid, ids)
zrem(bytime, ids)
return #ids

--- script: prunecompleted
-- Deletes up to limit kept completed jobs of one queue that finished more
-- than their type's age ago (Redis clock), each type by its own. The
-- prune by type stays O(jobs it reads), each read once: what completedAt
-- holds past the shortest age is deleted, or, when its type's age is not
-- up, moved to its type's zset (P:{Q}:kct:<type>, see the key legend),
-- where it is read again only once its own age is up. A job is moved at
-- most once, by the first prune that finds it past the shortest age.
-- KEYS[1] completed  KEYS[2] completedAt  KEYS[3] finishedPrefix
--   KEYS[4] base
-- ARGV[1] the age µs of the types ARGV does not name ('0': kept)
--   ARGV[2] limit  ARGV[3..] pairs: a type, its age µs (> 0)
-- Returns {how many it deleted, how many jobs it read, {ID, unique key,
--   ... of the deleted jobs that may hold their key (holds_done), for the
--   caller to free while the key names them}}: fewer read than limit when
--   nothing is left to prune.
local now = now_us()
local held = {}
-- drop deletes the record of the kept completed job id, listing its key
-- in held when the job may hold it.
local function drop(id)
  local k = KEYS[3] .. id
  local v = redis.call('HMGET', k, 'u', 'us')
  if v[1] and holds_done(v[2]) then held[#held + 1] = id; held[#held + 1] = v[1] end
  redis.call('DEL', k)
end
local rest, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local ages, shortest = {}, nil
if rest > 0 then shortest = rest end
for i = 3, #ARGV, 2 do
  local a = tonumber(ARGV[i + 1])
  ages[ARGV[i]] = a
  if not shortest or a < shortest then shortest = a end
end
local typed = next(ages) ~= nil
local bytype, types = KEYS[4] .. 'kct:', KEYS[4] .. 'kcn'
local deleted, read = 0, 0
if shortest then
  local got = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. n2s(now - shortest), 'WITHSCORES', 'LIMIT', 0, limit)
  local out, unlisted = {}, {}
  for i = 1, #got, 2 do
    local id, fa = got[i], got[i + 1]
    out[#out + 1] = id
    -- Without ages per type, every job read is past the one age.
    local t = nil
    if typed then t = rtype(redis.call('HGET', KEYS[3] .. id, 'd') or '') end
    local a = rest
    if t then a = ages[t] or rest end
    if not typed or (t and a > 0 and tonumber(fa) < now - a) then
      drop(id)
      unlisted[#unlisted + 1] = id
      deleted = deleted + 1
    elseif t then
      redis.call('ZADD', bytype .. t, fa, id)
      redis.call('SADD', types, t)
    else
      unlisted[#unlisted + 1] = id -- no record: only its entries were left
    end
  end
  read = #out
  zrem(KEYS[2], out)
  zrem(KEYS[1], unlisted)
end
if read < limit then
  local ts = redis.call('SMEMBERS', types)
  for _, t in ipairs(ts) do
    local a = ages[t] or rest
    if a > 0 and read < limit then
      local k = bytype .. t
      local ids = redis.call('ZRANGEBYSCORE', k, '-inf', '(' .. n2s(now - a), 'LIMIT', 0, limit - read)
      for i = 1, #ids do drop(ids[i]) end
      zrem(KEYS[1], ids)
      zrem(k, ids)
      read = read + #ids
      deleted = deleted + #ids
      if redis.call('EXISTS', k) == 0 then redis.call('SREM', types, t) end
    end
  end
end
return { deleted, read, held }

--- script: turn
-- Takes or renews a turn (the prune turn): the holder keeps it while it
-- renews within the expiry, by the Redis clock.
-- KEYS[1] pruneTurn
-- ARGV[1] holder  ARGV[2] expiry ms
-- Returns 1 when the holder has the turn, else 0.
local h = redis.call('GET', KEYS[1])
if not h or h == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0

--- script: schedule
-- Registers schedule definitions: a new name gets created = registered =
-- now; an existing one keeps its created time.
-- KEYS[1] schedules
-- ARGV[1] n  then per schedule 4 values: name, queue, type, spec
-- Returns the stored records, one per schedule, in order (strings).
local now = n2s(now_us())
local out = {}
for i = 0, tonumber(ARGV[1]) - 1 do
  local name, q, typ, spec = ARGV[2 + 4 * i], ARGV[3 + 4 * i], ARGV[4 + 4 * i], ARGV[5 + 4 * i]
  local cur = redis.call('HGET', KEYS[1], name)
  local created = now
  if cur then created = string.match(cur, '^(%-?%d+)') or now end
  local rec = created .. ' ' .. now .. ' ' .. q .. '\n' .. typ .. '\n' .. spec
  redis.call('HSET', KEYS[1], name, rec)
  out[#out + 1] = rec
end
return out

--- script: tick
-- Enqueues one tick of a schedule: advances its last tick, only forward,
-- and inserts the tick's job (ready now, or delayed), atomically.
-- KEYS[1] lastTS  KEYS[2] ready  KEYS[3] readyAt  KEYS[4] readyAtCounts
--   KEYS[5] delayed  KEYS[6] jobPrefix  KEYS[7] ticks  KEYS[8] inserted
--   KEYS[9] readyList
-- ARGV[1] channel  ARGV[2] origin  ARGV[3] schedule name  ARGV[4] tick µs
--   ARGV[5] the job's record (field d)  ARGV[6] priority  ARGV[7] delay µs
--   ('' for none)  ARGV[8] metadata JSON ('' for none)  ARGV[9] queue name
--   ARGV[10] key ('' for none; see key_lib: the base is jobPrefix's)
-- Returns {0, stored last tick µs (string)} when that is at or after the
--   tick (nothing written), else {1, ts of the job's ID, woke, due µs or
--   -1}.
local cur = redis.call('HGET', KEYS[7], ARGV[3])
if cur then
  local last = string.match(cur, '^(%-?%d+)')
  if tonumber(last) >= tonumber(ARGV[4]) then return { 0, last } end
end
local now = now_us()
local nows = n2s(now)
local ts = reserve(KEYS[1], now, 1)
local id = tshex(ts)
local pr, delay, md = ARGV[6], ARGV[7], ARGV[8]
local f = { 'd', ARGV[5], 'c', nows }
if pr ~= '0' then f[#f + 1] = 'pr'; f[#f + 1] = pr end
local av, avs = now, nows
if delay ~= '' then
  av = now + tonumber(delay)
  avs = n2s(av)
  f[#f + 1] = 'av'; f[#f + 1] = avs
end
if md ~= '' then f[#f + 1] = 'm'; f[#f + 1] = md end
local ky, K, tu = ARGV[10], nil, nil
if ky ~= '' then
  K = key_lib(string.sub(KEYS[6], 1, -3))
  tu = K.turn(ky)
  f[#f + 1] = 'ky'; f[#f + 1] = n2s(tu) .. ' ' .. ky
end
redis.call('HSET', KEYS[6] .. id, unpack(f))
local mv = moves()
if K then
  K.live(id, ky, tu)
  if av == now then K.ready(id, ky, pr, tu, nows) else later(mv, id, avs); K.later(id, ky, tu) end
elseif av == now then
  ready(mv, id, pr, nows)
else
  later(mv, id, avs)
end
local woke, due = flush(mv, KEYS[2], KEYS[9], KEYS[3], KEYS[5], ARGV[1], ARGV[2], now)
if K and K.done(ARGV[1], ARGV[2]) == 1 then woke = 1 end
redis.call('HSET', KEYS[7], ARGV[3], ARGV[4] .. ' ' .. id .. ' ' .. nows .. ' ' .. ARGV[9])
redis.call('INCR', KEYS[8])
return { 1, ts, woke, due }

--- script: tickmove
-- Carries a schedule's last-tick record into the hash of its new queue,
-- unless that already holds a tick at or after it.
-- KEYS[1] ticks (of the new queue)
-- ARGV[1] schedule name  ARGV[2] the record (as script "tick" writes it)
-- Returns 1 when it wrote the record, 0 when it kept a later one.
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur and tonumber(string.match(cur, '^(%-?%d+)')) >= tonumber(string.match(ARGV[2], '^(%-?%d+)')) then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1

--- script: qkeys
-- Replaces one queue's key rules (see KeyController), keeping its pause
-- and limits, then puts every key of the queue right under them (a looser
-- rule makes jobs claimable, a stricter one takes keys out of Kk) and
-- wakes idle workers of every process.
-- KEYS[1] settings  KEYS[2] base (its key structures, see key_lib)
-- ARGV[1] limit ('0': none)  ARGV[2] ordered ('1' or '0')  ARGV[3] policy
--   ('' for the default)  ARGV[4] the queue's index (a halted job's error
--   names its head's whole ID)  ARGV[5] channel  ARGV[6] origin
-- Returns how many keys it put right (integer).
redis.call('HDEL', KEYS[1], 'kl', 'ko', 'kp', 'qi')
local f = {}
if ARGV[1] ~= '0' then f[#f + 1] = 'kl'; f[#f + 1] = ARGV[1] end
if ARGV[2] == '1' then f[#f + 1] = 'ko'; f[#f + 1] = '1' end
if ARGV[3] ~= '' then f[#f + 1] = 'kp'; f[#f + 1] = ARGV[3] end
if #f > 0 then
  f[#f + 1] = 'qi'; f[#f + 1] = ARGV[4]
  redis.call('HSET', KEYS[1], unpack(f))
end
local K = key_lib(KEYS[2])
local keys = redis.call('SMEMBERS', KEYS[2] .. 'Ks')
for _, key in ipairs(keys) do K.touch(key) end
K.done()
redis.call('PUBLISH', ARGV[5], 'n ' .. ARGV[6])
return #keys

--- script: rekey
-- Layout 9's keyed structures of one queue from layout 8's (Migrate):
-- Kk's members become the keys alone, without their map Km, and each
-- key's highest turn moves from the zset Kt:<key> (its live jobs by turn)
-- to the hash Kn.
-- KEYS[1] base (its key structures, see key_lib)
-- Returns how many keys it converted (integer).
local base = KEYS[1]
redis.call('DEL', base .. 'Kk', base .. 'Km')
local K = key_lib(base)
local keys = redis.call('SMEMBERS', base .. 'Ks')
for _, key in ipairs(keys) do
  local kt = base .. 'Kt:' .. key
  local top = redis.call('ZRANGE', kt, -1, -1, 'WITHSCORES')
  if top[2] then redis.call('HSET', base .. 'Kn', key, top[2]) end
  redis.call('DEL', kt)
  K.touch(key)
end
K.done()
return #keys

--- script: keylist
-- Lists the keys of one queue that have live or failed jobs (Ks).
-- KEYS[1] base (its key structures, see key_lib)
-- Returns {key, live jobs, reserved jobs (cancelling ones included),
--   failed jobs, the lowest failed job's ID ('' for none), its failed ID
--   (its failed_at; '' for none), ...}.
local base = KEYS[1]
local out = {}
for _, key in ipairs(redis.call('SMEMBERS', base .. 'Ks')) do
  local low = redis.call('ZRANGE', base .. 'Kf:' .. key, 0, 0)[1]
  out[#out + 1] = key
  out[#out + 1] = redis.call('ZCARD', base .. 'Kl:' .. key)
  out[#out + 1] = tonumber(redis.call('HGET', base .. 'Kc', key) or '0')
  out[#out + 1] = redis.call('ZCARD', base .. 'Kf:' .. key)
  out[#out + 1] = low or ''
  out[#out + 1] = low and redis.call('HGET', base .. 'xj', low) or ''
end
return out
