-- jobq's Redis scripts for workflows (backend.Workflower; workflow.go,
-- workflow_read.go). scripts.go parses this file like scripts.lua: its
-- helpers follow those of scripts.lua (so they may use them), and the
-- scripts of scripts.lua that end jobs use the helpers below.
--
-- A workflow lives in ONE queue Q, the queue of all its tasks (workflow.go
-- refuses others): a task's job ends in a script of Q's slot, and that same
-- script must end the task and release its dependants, whose jobs go to Q.
-- Key layout (P the key prefix). Every script here gets base, the queue's
-- key prefix "P:{Q}:" (see the key legend of scripts.lua), and builds from
-- it the keys below, which no Go code names and no script is given, and
-- those of scripts.lua it writes: base..'t' (lastTS), base..'q' (ready),
-- base..'l' (readyList), base..'o' (readyAt), base..'d' (delayed),
-- base..'i' (inserted), base..'j:<ts>' (job):
--   P:{Q}:wf:<id>  hash   a workflow: n name, s state (running, succeeded,
--                         failed, cancelled), c created µs, f finished µs
--                         (absent while running), T its number of tasks, u
--                         tasks waiting or active, cw ca cs cf cc its tasks
--                         by state (waiting, active, succeeded, failed,
--                         cancelled), fj its failed tasks whose failed job
--                         is still among the failed jobs (see
--                         wf_failedjobs: absent until a task fails or is
--                         replayed or purged; never below the truth)
--   P:{Q}:wt:<id>  hash   its tasks, fields suffixed by the task's index i
--                         (decimal, 0 first, in the topological order
--                         ValidateWorkflow returned): n<i> name, q<i> the
--                         name as Go's %q writes it (only when that is not
--                         the name in plain double quotes), d<i> the job's
--                         record (field d of a job), o<i> "<priority> <run
--                         at µs or -> <delay µs or ->" (absent: 0 - -), m<i>
--                         metadata JSON, D<i> dependencies and E<i>
--                         dependants, each "<index><policy>," per edge in
--                         Deps order (policy c DepCancel, k DepContinue),
--                         s<i> state (w a s f c: waiting, active,
--                         succeeded, failed, cancelled), W<i> dependencies
--                         left (waiting only), J<i> its job's ID (once
--                         released), K<i> its job's key (absent: none),
--                         R<i> result, r<i> reason, F<i> finished
--                         µs, C<i> why it was cancelled (d a dependency, u
--                         WorkflowCancel, j its own job): only d comes back
--                         with a replay
--   P:{Q}:wfs      zset   the queue's workflows: score 0, member the ID
--   P:{Q}:wfr      set    the running ones
--   P:{Q}:wft      zset   the prune's index, by finished µs: the succeeded
--                         and cancelled ones, and the failed ones that can
--                         no longer be replayed (fj 0: each failed job of
--                         theirs was purged, or they failed through a
--                         cancelled job). A replay reopens only a failed
--                         one with fj above 0, so none of wft runs again
--   P:{Q}:wfn      hash   s, f, c: workflows succeeded, failed, cancelled;
--                         w: tasks waiting (only running workflows have any)
--   P:{Q}:wj       hash   job ID -> "<workflow ID> <index>" of every task's
--                         job ever released, live or not (WorkflowDeps)
-- and the field w of a task's job hash (kept through failure and replay):
-- "<workflow ID> <index>", read by every script that ends a job with the
-- fields it reads already, so that a plain job's end costs one field more;
-- beside it tn, the task's name, which a claim returns with w (a copy of
-- n<i>, so that a claim of a task's job reads no task hash).
-- Workflow IDs are minted from Q's t like job IDs: unique under P, growing
-- with time, naming Q.

--- helper
-- wf_lib makes the workflow functions and returns them, by their names
-- without the wf_ prefix (wf_finish as conclude: a key "finish" would pull
-- the helper finish into every script using wf_lib, see withHelpers). A
-- script makes them only when it meets a task (a script's helpers are
-- closures made on every call: a plain job's completion pays for this one
-- alone), once per call (wf_made).
local wf_made
local function wf_lib()
  if wf_made then return wf_made end
  -- WF_WORD names a task state letter as backend.TaskState does.
  local WF_WORD = { w = 'waiting', a = 'active', s = 'succeeded', f = 'failed', c = 'cancelled' }
  -- WF_COUNTS are the workflow's count fields a step changes (wf_save).
  local WF_COUNTS = { 'u', 'cw', 'ca', 'cs', 'cf', 'cc' }

  -- wf_edges parses an edge list (D<i> or E<i>; nil for none) into the
  -- indexes (strings) and policies (c or k) of its edges, in order.
  local function wf_edges(s)
    local idx, pol = {}, {}
    if s then
      for i, p in string.gmatch(s, '(%d+)(%a)') do
        idx[#idx + 1] = i; pol[#pol + 1] = p
      end
    end
    return idx, pol
  end

  -- wf_read reads fields a<i> (and b<i> when b is given) of the tasks idxs
  -- from the task hash t, in slices (unpack is bounded by the Lua stack).
  -- Absent fields read false.
  local function wf_read(t, idxs, a, b)
    local ra, rb = {}, {}
    for s = 1, #idxs, 2000 do
      local f = {}
      for j = s, math.min(s + 1999, #idxs) do
        f[#f + 1] = a .. idxs[j]
        if b then f[#f + 1] = b .. idxs[j] end
      end
      local v = redis.call('HMGET', t, unpack(f))
      if b then
        for j = 1, #v, 2 do ra[#ra + 1] = v[j]; rb[#rb + 1] = v[j + 1] end
      else
        for j = 1, #v do ra[#ra + 1] = v[j] end
      end
    end
    return ra, rb
  end

  -- A wf is one workflow being changed by a script: its keys, its state, the
  -- moves (see moves in scripts.lua) its released jobs join, and the count
  -- changes wf_save applies once at the end (dc: the workflow's fields; W:
  -- the queue's waiting tasks), so that a fan-out of a thousand costs a
  -- thousand task writes, not three thousand counter writes on top.
  local function wf_open(base, wid, now, mv)
    local k = base .. 'wf:' .. wid
    return {
      base = base, id = wid, k = k, t = base .. 'wt:' .. wid, now = now, mv = mv,
      state = redis.call('HGET', k, 's'), dc = {}, ins = 0,
    }
  end
  local function wf_count(w, f, d) w.dc[f] = (w.dc[f] or 0) + d end
  -- wf_set counts a task moving from state letter from to state letter to.
  local function wf_set(w, from, to)
    wf_count(w, 'c' .. from, -1)
    wf_count(w, 'c' .. to, 1)
    if from == 'w' then wf_count(w, 'W', -1) end
    if to == 'w' then wf_count(w, 'W', 1) end
  end
  -- wf_failedjobs is fj as read in v (HMGET of fj and cf), dcf being the
  -- change to cf already written by the caller's script. An absent fj
  -- starts at cf before that change: exact for a workflow written since
  -- fj exists (absent until its first task fails), and never below the
  -- truth for an older one, whose purges were not counted: at worst such
  -- a workflow is never pruned, and it is never pruned too early.
  local function wf_failedjobs(v, dcf)
    if v[1] then return tonumber(v[1]) end
    return tonumber(v[2] or '0') - dcf
  end
  -- wf_finish ends a running workflow as s (succeeded, failed, cancelled).
  -- A failed one is prunable at once when no failed job of its tasks is
  -- left to replay (it failed through a cancelled job); else the purge
  -- of the last one makes it so (wf_purged).
  local function wf_finish(w, s)
    redis.call('HSET', w.k, 's', s, 'f', n2s(w.now))
    redis.call('SREM', w.base .. 'wfr', w.id)
    redis.call('HINCRBY', w.base .. 'wfn', string.sub(s, 1, 1), 1)
    if s ~= 'failed' or wf_failedjobs(redis.call('HMGET', w.k, 'fj', 'cf'), 0) == 0 then
      redis.call('ZADD', w.base .. 'wft', w.now, w.id)
    end
    w.state = s
  end
  -- wf_save applies the counted changes; a running workflow whose last
  -- unfinished task ended ends: succeeded when every task did, else failed.
  local function wf_save(w)
    local dc = w.dc
    local u = nil
    for _, f in ipairs(WF_COUNTS) do
      if dc[f] and dc[f] ~= 0 then
        local x = redis.call('HINCRBY', w.k, f, dc[f])
        if f == 'u' then u = x end
      end
    end
    if dc.fj and dc.fj ~= 0 then
      -- Not HINCRBY: an absent fj does not start at 0 (wf_failedjobs).
      local fj = wf_failedjobs(redis.call('HMGET', w.k, 'fj', 'cf'), dc.cf or 0) + dc.fj
      redis.call('HSET', w.k, 'fj', fj)
    end
    if dc.W and dc.W ~= 0 then redis.call('HINCRBY', w.base .. 'wfn', 'w', dc.W) end
    if w.ins > 0 then redis.call('INCRBY', w.base .. 'i', w.ins) end
    w.dc, w.ins = {}, 0
    if w.state == 'running' and u == 0 and dc.u < 0 then
      local v = redis.call('HMGET', w.k, 'cs', 'T')
      local s = 'failed'
      if v[1] == v[2] then s = 'succeeded' end
      wf_finish(w, s)
    end
  end

  -- wf_newjob writes the job id (ts) of task wv ("<workflow ID> <index>",
  -- named name) from its record, options (field o) and metadata (false:
  -- none), and wf_release inserts the job of task i (waiting, its last
  -- dependency just ended) with it, as the script "insert" would: ID
  -- minted from lastTS, pending, due after its delay from now or at its
  -- run at, in readyList when it is ready now with priority 0 (its ID is
  -- above every ID there: minted here), else in ready or delayed through
  -- the wf's moves, whose flush publishes the wake-up. The task becomes
  -- active with the job's ID, and the job carries the task (fields w and
  -- tn).
  local function wf_newjob(base, mv, now, id, wv, name, rec, o, md, ky)
    local nows = n2s(now)
    local pr, av, avs = '0', now, nows
    if o then
      local runat, delay
      pr, runat, delay = string.match(o, '^(%S+) (%S+) (%S+)$')
      if runat ~= '-' then
        av, avs = tonumber(runat), runat
      elseif delay ~= '-' then
        av = now + tonumber(delay)
        avs = n2s(av)
      end
    end
    local f = { 'd', rec, 'c', nows, 'w', wv, 'tn', name }
    if pr ~= '0' then f[#f + 1] = 'pr'; f[#f + 1] = pr end
    if av ~= now then f[#f + 1] = 'av'; f[#f + 1] = avs end
    if md then f[#f + 1] = 'm'; f[#f + 1] = md end
    if ky then
      -- A keyed task's job joins its key's jobs as the script "insert"
      -- puts it (key_lib); the script's key_end settles the key.
      local K = key_lib(base)
      local tu = K.turn(ky)
      f[#f + 1] = 'ky'; f[#f + 1] = n2s(tu) .. ' ' .. ky
      redis.call('HSET', base .. 'j:' .. id, unpack(f))
      K.live(id, ky, tu)
      if av <= now then
        K.ready(id, ky, pr, tu, avs)
      else
        later(mv, id, avs)
        K.later(id, ky, tu)
      end
      return
    end
    redis.call('HSET', base .. 'j:' .. id, unpack(f))
    if av == now and pr == '0' then
      mv.l[#mv.l + 1] = id
    elseif av <= now then
      ready(mv, id, pr, avs)
    else
      later(mv, id, avs)
    end
  end
  local function wf_release(w, i)
    local v = redis.call('HMGET', w.t, 'd' .. i, 'o' .. i, 'm' .. i, 'n' .. i, 'K' .. i)
    local id = tshex(reserve(w.base .. 't', w.now, 1))
    local wv = w.id .. ' ' .. i
    wf_newjob(w.base, w.mv, w.now, id, wv, v[4], v[1], v[2], v[3], v[5])
    redis.call('HSET', w.t, 's' .. i, 'a', 'J' .. i, id)
    redis.call('HDEL', w.t, 'W' .. i)
    redis.call('HSET', w.base .. 'wj', id, wv)
    wf_set(w, 'w', 'a')
    w.ins = w.ins + 1
  end

  -- wf_end ends task i, in state from, as to (s, f or c) with its reason,
  -- result and cancel cause (each nil or '' for none); it resolves no edge.
  local function wf_end(w, i, from, to, reason, result, cause)
    local f = { 's' .. i, to, 'F' .. i, n2s(w.now) }
    if reason and reason ~= '' then f[#f + 1] = 'r' .. i; f[#f + 1] = reason end
    if result and result ~= '' then f[#f + 1] = 'R' .. i; f[#f + 1] = result end
    if cause then f[#f + 1] = 'C' .. i; f[#f + 1] = cause end
    redis.call('HSET', w.t, unpack(f))
    if from == 'w' then redis.call('HDEL', w.t, 'W' .. i) end
    wf_set(w, from, to)
    wf_count(w, 'u', -1)
  end
  -- wf_depreason is backend.DepCancelReason of task x ended as xs.
  local function wf_depreason(w, x, xs)
    local v = redis.call('HMGET', w.t, 'n' .. x, 'q' .. x)
    return 'dependency ' .. (v[2] or ('"' .. v[1] .. '"')) .. ' ' .. WF_WORD[xs]
  end

  -- wf_resolve resolves each outgoing edge of task i, which just ended as st,
  -- and of every task that ends with it, exactly once, breadth first: a
  -- waiting dependant counts down on a success or a DepContinue edge and is
  -- released at 0; on a DepCancel edge from a failed or cancelled task it is
  -- cancelled, and its own edges resolved in turn. Dependants in skip (a
  -- replay's tasks awaiting their recount) are left alone. edges is task
  -- i's field E when the caller read it already (false: none). It costs
  -- the edges it touches.
  local function wf_resolve(w, i, st, skip, edges)
    local work, ws, k = { i }, { st }, 1
    while k <= #work do
      local x, xs = work[k], ws[k]
      k = k + 1
      local e = edges
      if k > 2 or e == nil then e = redis.call('HGET', w.t, 'E' .. x) end
      local ds, ps = wf_edges(e)
      if #ds > 0 then
        local dst, dw = wf_read(w.t, ds, 's', 'W')
        local reason = nil
        for j = 1, #ds do
          local d = ds[j]
          if dst[j] == 'w' and not (skip and skip[d]) then
            if xs == 's' or ps[j] == 'k' then
              local left = tonumber(dw[j] or '0') - 1
              if left <= 0 then
                wf_release(w, d)
              else
                redis.call('HSET', w.t, 'W' .. d, left)
              end
            else
              reason = reason or wf_depreason(w, x, xs)
              wf_end(w, d, 'w', 'c', reason, nil, 'd')
              work[#work + 1] = d; ws[#ws + 1] = 'c'
            end
          end
        end
      end
    end
  end

  -- wf_job_ended ends the task of the job id (ts; wv its field w) that the
  -- calling script has just made terminal, as st: s (done, result its
  -- outcome's), f (moved to the failed set, reason its error) or c
  -- (cancelled, reason 'cancelled'). Only a task active with this very job
  -- ends: a job ending twice, or one whose task a WorkflowCancel ended, or
  -- whose workflow was pruned, changes nothing. In a workflow that is not
  -- running (cancelled) only the task changes: nothing waits there.
  local function wf_job_ended(base, now, mv, id, wv, st, reason, result)
    local wid, i = string.match(wv, '^(%x+) (%d+)$')
    if not wid then return end
    local v = redis.call('HMGET', base .. 'wt:' .. wid, 's' .. i, 'J' .. i, 'E' .. i)
    if v[1] ~= 'a' or v[2] ~= id then return end
    local w = wf_open(base, wid, now, mv)
    local cause = nil
    if st == 'c' then cause = 'j' end
    wf_end(w, i, 'a', st, reason, result, cause)
    -- The calling script has just written the job's failed record.
    if st == 'f' then wf_count(w, 'fj', 1) end
    if w.state == 'running' then wf_resolve(w, i, st, nil, v[3]) end
    wf_save(w)
  end

  -- wf_unreplayable reports whether the workflow of a task's job (wv its
  -- field w) was cancelled by a user, or is gone: a pruned workflow that
  -- was not cancelled had no failed task whose failed job was still there
  -- (a succeeded one has no failed task; a failed one is pruned once fj is
  -- 0). A replay leaves such a job failed.
  local function wf_unreplayable(base, wv)
    local wid = string.match(wv, '^(%x+) ')
    if not wid then return false end
    local s = redis.call('HGET', base .. 'wf:' .. wid, 's')
    return not s or s == 'cancelled'
  end

  -- wf_reopen returns task x, ended as from (f or c), to to (a or w). It
  -- ended badly, so its DepContinue edges counted their waiting dependants
  -- down: they count it again (those in mark are recounted instead).
  local function wf_reopen(w, x, from, to, mark)
    redis.call('HDEL', w.t, 'r' .. x, 'R' .. x, 'C' .. x, 'F' .. x)
    redis.call('HSET', w.t, 's' .. x, to)
    wf_set(w, from, to)
    wf_count(w, 'u', 1)
    local ds, ps = wf_edges(redis.call('HGET', w.t, 'E' .. x))
    local cont = {}
    for j = 1, #ds do
      if ps[j] == 'k' and not mark[ds[j]] then cont[#cont + 1] = ds[j] end
    end
    local st = wf_read(w.t, cont, 's')
    for j = 1, #cont do
      if st[j] == 'w' then redis.call('HINCRBY', w.t, 'W' .. cont[j], 1) end
    end
  end

  -- wf_replayed reopens the failed task of the job id (wv its field w) that
  -- the calling script is making live again: the task is active, its
  -- workflow running, and the tasks its failure cancelled (reachable through
  -- tasks cancelled because of a dependency) come back, each recounted in
  -- index (topological) order: cancelled again when another DepCancel
  -- dependency failed or was cancelled, else waiting on the dependencies
  -- that have not ended, or released when none is left.
  local function wf_replayed(base, now, mv, id, wv)
    local wid, i = string.match(wv, '^(%x+) (%d+)$')
    if not wid then return end
    local t = base .. 'wt:' .. wid
    local v = redis.call('HMGET', t, 's' .. i, 'J' .. i)
    if v[1] ~= 'f' or v[2] ~= id then return end
    local w = wf_open(base, wid, now, mv)
    local mark, revived, frontier, k = {}, {}, { i }, 1
    while k <= #frontier do
      local ds = wf_edges(redis.call('HGET', t, 'E' .. frontier[k]))
      k = k + 1
      local st, cs = wf_read(t, ds, 's', 'C')
      for j = 1, #ds do
        local d = ds[j]
        if st[j] == 'c' and cs[j] == 'd' and not mark[d] then
          mark[d] = true
          revived[#revived + 1] = d
          frontier[#frontier + 1] = d
        end
      end
    end
    table.sort(revived, function(x, y) return tonumber(x) < tonumber(y) end)
    if w.state ~= 'running' then
      -- Failed (a succeeded workflow has no failed task; a cancelled one is
      -- not replayed: see wf_unreplayable). Its fj counted this job, so it
      -- is not in wft; were the count ever wrong, a running workflow must
      -- still never be pruned.
      redis.call('HSET', w.k, 's', 'running')
      redis.call('HDEL', w.k, 'f')
      redis.call('SADD', base .. 'wfr', wid)
      redis.call('ZREM', base .. 'wft', wid)
      redis.call('HINCRBY', base .. 'wfn', string.sub(w.state, 1, 1), -1)
      w.state = 'running'
    end
    -- The calling script is renaming the job's failed record to its job.
    wf_count(w, 'fj', -1)
    wf_reopen(w, i, 'f', 'a', mark)
    for _, d in ipairs(revived) do wf_reopen(w, d, 'c', 'w', mark) end
    for _, d in ipairs(revived) do
      -- Its dependencies that came back too have lower indexes: recounted.
      mark[d] = nil
      local deps, pols = wf_edges(redis.call('HGET', t, 'D' .. d))
      local st = wf_read(t, deps, 's')
      local culprit, left = nil, 0
      for j = 1, #deps do
        if pols[j] == 'c' and (st[j] == 'f' or st[j] == 'c') then
          culprit = j
          break
        end
        if st[j] == 'w' or st[j] == 'a' then left = left + 1 end
      end
      if culprit then
        wf_end(w, d, 'w', 'c', wf_depreason(w, deps[culprit], st[culprit]), nil, 'd')
        wf_resolve(w, d, 'c', mark)
      elseif left == 0 then
        wf_release(w, d)
      else
        redis.call('HSET', t, 'W' .. d, left)
      end
    end
    wf_save(w)
  end

  -- wf_purged counts out the failed job id (ts; wv its field w) whose
  -- failed record the calling script is deleting, when its task failed
  -- with it (a job that failed after a WorkflowCancel ended its task was
  -- never counted). A failed workflow whose last such job this was can no
  -- longer be replayed: it joins wft under its finished time. A pruned
  -- workflow has no task hash (wfprune deletes both): nothing is written
  -- back for it.
  local function wf_purged(base, id, wv)
    local wid, i = string.match(wv, '^(%x+) (%d+)$')
    if not wid then return end
    local v = redis.call('HMGET', base .. 'wt:' .. wid, 's' .. i, 'J' .. i)
    if v[1] ~= 'f' or v[2] ~= id then return end
    local k = base .. 'wf:' .. wid
    local h = redis.call('HMGET', k, 'fj', 'cf', 's', 'f')
    local fj = wf_failedjobs(h, 0) - 1
    redis.call('HSET', k, 'fj', fj)
    if fj == 0 and h[3] == 'failed' then redis.call('ZADD', base .. 'wft', h[4], wid) end
  end

  wf_made = {
    edges = wf_edges, read = wf_read, open = wf_open, conclude = wf_finish, save = wf_save,
    newjob = wf_newjob, ['end'] = wf_end, job_ended = wf_job_ended,
    unreplayable = wf_unreplayable, replayed = wf_replayed, purged = wf_purged,
  }
  return wf_made
end

--- helper
-- key_end settles what a script's keyed jobs left (see key_lib in
-- scripts.lua), at its end, when it made key_lib: it ends the tasks of the
-- jobs a halt cancelled (their dependants join the moves mv), then puts
-- the keys touched right, publishing on chan when a key became claimable
-- while none was. It returns 1 when it published, else 0. It is here, not
-- in scripts.lua, because it ends tasks.
local function key_end(base, now, mv, chan, origin)
  if not key_made then return 0 end
  local e = key_made.ended
  key_made.ended = {}
  for i = 1, #e, 2 do
    wf_lib().job_ended(base, now, mv, e[i], e[i + 1], 'c', 'cancelled', nil)
  end
  return key_made.done(chan, origin)
end

--- script: wfinsert
-- Inserts a workflow into one queue: the workflow, its tasks (waiting),
-- and the jobs of the tasks without dependencies (released at once).
-- KEYS[1] base
-- ARGV[1] channel  ARGV[2] origin  ARGV[3] workflow name  ARGV[4] tasks
--   then per task, index 0 first, 9 values: name, quoted name ('' when
--   plain), record (field d), options (field o, '' for none), metadata
--   JSON ('' for none), dependencies (field D), dependants (field E),
--   number of dependencies, key (field K, '' for none)
-- Returns {ts of the workflow's ID, woke, due µs or -1, then per released
--   task: index, ts of its job's ID}.
local wf = wf_lib()
local now = now_us()
local base = KEYS[1]
local n = tonumber(ARGV[4])
local nfree = 0
for i = 0, n - 1 do
  if ARGV[12 + 9 * i] == '0' then nfree = nfree + 1 end
end
-- The workflow's ID, then its released jobs' IDs, in one reservation.
local first = reserve(base .. 't', now, 1 + nfree)
local wid = tshex(first)
local tk = base .. 'wt:' .. wid
local mv = moves()
local f, wj, out = {}, {}, { wid, 0, -1 }
local function put(key, t)
  redis.call('HSET', key, unpack(t))
  return {}
end
for i = 0, n - 1 do
  local a = 5 + 9 * i
  local s = tostring(i)
  f[#f + 1] = 'n' .. s; f[#f + 1] = ARGV[a]
  f[#f + 1] = 'd' .. s; f[#f + 1] = ARGV[a + 2]
  if ARGV[a + 1] ~= '' then f[#f + 1] = 'q' .. s; f[#f + 1] = ARGV[a + 1] end
  if ARGV[a + 3] ~= '' then f[#f + 1] = 'o' .. s; f[#f + 1] = ARGV[a + 3] end
  if ARGV[a + 4] ~= '' then f[#f + 1] = 'm' .. s; f[#f + 1] = ARGV[a + 4] end
  if ARGV[a + 5] ~= '' then f[#f + 1] = 'D' .. s; f[#f + 1] = ARGV[a + 5] end
  if ARGV[a + 6] ~= '' then f[#f + 1] = 'E' .. s; f[#f + 1] = ARGV[a + 6] end
  if ARGV[a + 8] ~= '' then f[#f + 1] = 'K' .. s; f[#f + 1] = ARGV[a + 8] end
  if ARGV[a + 7] == '0' then
    -- No dependency: released now (see wf_release, the same for later).
    local id = tshex(first + (#out - 1) / 2)
    local wv = wid .. ' ' .. s
    wf.newjob(base, mv, now, id, wv, ARGV[a], ARGV[a + 2], ARGV[a + 3] ~= '' and ARGV[a + 3], ARGV[a + 4] ~= '' and ARGV[a + 4],
      ARGV[a + 8] ~= '' and ARGV[a + 8])
    f[#f + 1] = 's' .. s; f[#f + 1] = 'a'
    f[#f + 1] = 'J' .. s; f[#f + 1] = id
    wj[#wj + 1] = id; wj[#wj + 1] = wv
    out[#out + 1] = s; out[#out + 1] = id
    if #wj >= 6000 then wj = put(base .. 'wj', wj) end
  else
    f[#f + 1] = 's' .. s; f[#f + 1] = 'w'
    f[#f + 1] = 'W' .. s; f[#f + 1] = ARGV[a + 7]
  end
  if #f >= 6000 then f = put(tk, f) end
end
if #f > 0 then put(tk, f) end
if #wj > 0 then put(base .. 'wj', wj) end
redis.call('HSET', base .. 'wf:' .. wid, 'n', ARGV[3], 's', 'running', 'c', n2s(now), 'T', n, 'u', n,
  'cw', n - nfree, 'ca', nfree, 'cs', 0, 'cf', 0, 'cc', 0)
redis.call('ZADD', base .. 'wfs', 0, wid)
redis.call('SADD', base .. 'wfr', wid)
if n > nfree then redis.call('HINCRBY', base .. 'wfn', 'w', n - nfree) end
if nfree > 0 then redis.call('INCRBY', base .. 'i', nfree) end
local kwoke = key_end(base, now, mv, ARGV[1], ARGV[2])
out[2], out[3] = flush(mv, base .. 'q', base .. 'l', base .. 'o', base .. 'd', ARGV[1], ARGV[2], now)
if kwoke == 1 then out[2] = 1 end
return out

--- script: wfcancel
-- Cancels a running workflow of one queue: its waiting tasks end cancelled,
-- and so do its active ones, whose jobs are cancelled as the script
-- "cancel" does it (pending: ended cancelled; reserved: marked cancelling,
-- their holders told to stop), after their tasks ended, so that the jobs'
-- ends find the tasks ended and resolve nothing.
-- KEYS, as the script "cancel" (cancel1 reads them): KEYS[1] ready
--   KEYS[2] readyAt  KEYS[3] readyAtCounts  KEYS[4] delayed  KEYS[5] failed
--   KEYS[6] cancelling  KEYS[7] cancelled  KEYS[8] cancelledAt
--   KEYS[9] jobPrefix  KEYS[10] finishedPrefix  KEYS[11] failedPrefix
--   KEYS[12] readyList  KEYS[13] readyOld  KEYS[14] base
-- ARGV[1] ts of the workflow's ID
-- Returns {-1} when there is no such workflow, {0, state} when it is not
--   running (unchanged), else {1, tasks cancelled at once, tasks whose
--   running jobs were told to stop}.
local wf = wf_lib()
local now = now_us()
local base = KEYS[14]
local wid = ARGV[1]
local k = base .. 'wf:' .. wid
local v = redis.call('HMGET', k, 's', 'T')
if not v[1] then return { -1 } end
if v[1] ~= 'running' then return { 0, v[1] } end
local w = wf.open(base, wid, now, moves())
wf.conclude(w, 'cancelled')
local n = tonumber(v[2])
local cancelled, requested = 0, 0
local released, rids, ravs, inl = {}, {}, {}, {}
for s = 0, n - 1, 2000 do
  local f = {}
  for i = s, math.min(s + 1999, n - 1) do
    f[#f + 1] = 's' .. i; f[#f + 1] = 'J' .. i
  end
  local st = redis.call('HMGET', w.t, unpack(f))
  for j = 1, #st, 2 do
    local x = st[j]
    if x == 'w' or x == 'a' then
      wf['end'](w, n2s(s + (j - 1) / 2), x, 'c', 'workflow cancelled', nil, 'u')
      if x == 'w' then
        cancelled = cancelled + 1
      else
        local res = cancel1(KEYS, st[j + 1], now, released, rids, ravs, inl)
        if res == 1 then
          cancelled = cancelled + 1
        elseif res == 2 or res == 3 then
          requested = requested + 1
        end
      end
    end
  end
end
unready(KEYS[2], KEYS[3], rids, ravs)
-- The pending jobs found in readyList leave it in one walk from its head,
-- not an LREM each (each walks the list up to its job: quadratic in a big
-- workflow): each is overwritten by '#' (never an ID) where found, then
-- that many '#' go. readyList is in ID order, so the walk ends at the
-- last of them.
if #inl == 1 then
  redis.call('LREM', KEYS[12], 1, inl[1])
elseif #inl > 1 then
  local want, left, at = {}, #inl, 0
  for _, id in ipairs(inl) do want[id] = true end
  while left > 0 do
    local got = redis.call('LRANGE', KEYS[12], at, at + 999)
    if #got == 0 then break end
    for x = 1, #got do
      if want[got[x]] then
        redis.call('LSET', KEYS[12], at + x - 1, '#')
        left = left - 1
      end
    end
    at = at + #got
  end
  redis.call('LREM', KEYS[12], #inl - left, '#')
end
if key_made then
  -- A keyed head cancelled here may have halted its key (key_lib's bad):
  -- settle the keys, and wake on the channel (base .. 'w') what the
  -- tasks of the jobs it halted released.
  key_end(base, now, w.mv, base .. 'w', '')
  flush(w.mv, KEYS[1], KEYS[12], KEYS[2], KEYS[4], base .. 'w', '', now)
end
wf.save(w)
redis.call('HSET', k, 'u', 0)
return { 1, cancelled, requested }

--- script: wfget
-- Reads one workflow of one queue with its tasks, in one snapshot.
-- KEYS[1] base
-- ARGV[1] ts of the workflow's ID
-- Returns {} when there is no such workflow, else {workflow hash fields and
--   values, task hash fields and values}, the task records (d<i>) cut to
--   their types and without metadata (m<i>), which a reader never shows.
local wf = redis.call('HGETALL', KEYS[1] .. 'wf:' .. ARGV[1])
if #wf == 0 then return {} end
local all = redis.call('HGETALL', KEYS[1] .. 'wt:' .. ARGV[1])
local out = {}
for i = 1, #all, 2 do
  local c = string.sub(all[i], 1, 1)
  if c == 'd' then
    out[#out + 1] = all[i]; out[#out + 1] = rtype(all[i + 1]) or ''
  elseif c ~= 'm' then
    out[#out + 1] = all[i]; out[#out + 1] = all[i + 1]
  end
end
return { wf, out }

--- script: wflist
-- Lists workflows of one queue, newest (highest ID) first, without tasks.
-- KEYS[1] base
-- ARGV[1] exclusive upper ts ('' none)  ARGV[2] state ('' any)
--   ARGV[3] most rows  ARGV[4] most workflows examined
-- Returns {cursor ('' when exhausted), then per workflow 10 values: ts of
--   its ID, n, s, c, f, cw, ca, cs, cf, cc} (absent fields as '').
local max = '+'
if ARGV[1] ~= '' then max = '(' .. ARGV[1] end
local limit, budget = tonumber(ARGV[3]), tonumber(ARGV[4])
local got = redis.call('ZREVRANGEBYLEX', KEYS[1] .. 'wfs', max, '-', 'LIMIT', 0, budget)
local out, n = { '' }, 0
for i = 1, #got do
  local v = redis.call('HMGET', KEYS[1] .. 'wf:' .. got[i], 'n', 's', 'c', 'f', 'cw', 'ca', 'cs', 'cf', 'cc')
  if v[2] and (ARGV[2] == '' or v[2] == ARGV[2]) then
    out[#out + 1] = got[i]
    for j = 1, 9 do out[#out + 1] = v[j] or '' end
    n = n + 1
    if n == limit then
      if i < #got or #got == budget then out[1] = got[i] end
      return out
    end
  end
end
if #got == budget then out[1] = got[#got] end
return out

--- script: wfdeps
-- Reads the outcomes of the dependencies of the task whose job is the
-- given one, of one queue.
-- KEYS[1] base
-- ARGV[1] ts of the job's ID
-- Returns {0} when the job is no task's, else {1, then per dependency in
--   Deps order 5 values: name, policy (c or k), state letter, result,
--   reason} (absent fields as '').
local wf = wf_lib()
local wv = redis.call('HGET', KEYS[1] .. 'wj', ARGV[1])
if not wv then return { 0 } end
local wid, i = string.match(wv, '^(%x+) (%d+)$')
local t = KEYS[1] .. 'wt:' .. wid
local deps, pols = wf.edges(redis.call('HGET', t, 'D' .. i))
local out = { 1 }
for j = 1, #deps do
  local d = deps[j]
  local v = redis.call('HMGET', t, 'n' .. d, 's' .. d, 'R' .. d, 'r' .. d)
  if not v[1] then return { 0 } end -- pruned meanwhile
  out[#out + 1] = v[1]; out[#out + 1] = pols[j]; out[#out + 1] = v[2] or ''
  out[#out + 1] = v[3] or ''; out[#out + 1] = v[4] or ''
end
return out

--- script: wfstats
-- Counts one queue's workflows by state and its waiting tasks.
-- KEYS[1] base
-- Returns {running, succeeded, failed, cancelled, tasks waiting}.
local v = redis.call('HMGET', KEYS[1] .. 'wfn', 's', 'f', 'c', 'w')
return { redis.call('SCARD', KEYS[1] .. 'wfr'), tonumber(v[1] or '0'), tonumber(v[2] or '0'),
  tonumber(v[3] or '0'), tonumber(v[4] or '0') }

--- script: wfcheck
-- Recounts, for each running workflow of one queue, each waiting task's
-- dependencies not ended and the tasks waiting or active, from the tasks'
-- states, and reports the stored counts that differ. It only reads.
-- KEYS[1] base
-- Returns {per drift 4 values: ts of the workflow's ID, task name ('' for
--   the workflow's unfinished count), stored, recounted}.
local wf = wf_lib()
local out = {}
local ids = redis.call('SMEMBERS', KEYS[1] .. 'wfr')
for _, wid in ipairs(ids) do
  local t = KEYS[1] .. 'wt:' .. wid
  local v = redis.call('HMGET', KEYS[1] .. 'wf:' .. wid, 'T', 'u')
  local n = tonumber(v[1] or '0')
  local idx = {}
  for i = 0, n - 1 do idx[#idx + 1] = tostring(i) end
  local st, wt = wf.read(t, idx, 's', 'W')
  local unfinished = 0
  for j = 1, n do
    if st[j] == 'w' or st[j] == 'a' then unfinished = unfinished + 1 end
    if st[j] == 'w' then
      local deps = wf.edges(redis.call('HGET', t, 'D' .. idx[j]))
      local ds = wf.read(t, deps, 's')
      local want = 0
      for x = 1, #ds do
        if ds[x] == 'w' or ds[x] == 'a' then want = want + 1 end
      end
      local stored = tonumber(wt[j] or '0')
      if stored ~= want then
        out[#out + 1] = wid; out[#out + 1] = redis.call('HGET', t, 'n' .. idx[j]) or ''
        out[#out + 1] = stored; out[#out + 1] = want
      end
    end
  end
  if tonumber(v[2] or '0') ~= unfinished then
    out[#out + 1] = wid; out[#out + 1] = ''; out[#out + 1] = tonumber(v[2] or '0'); out[#out + 1] = unfinished
  end
end
return out

--- script: wfprune
-- Deletes the workflows of one queue in wft (succeeded, cancelled, and
-- failed ones that can no longer be replayed) that finished more than a
-- given time ago (Redis clock), with their tasks and their jobs' entries
-- in wj, oldest first, until about budget tasks are gone.
-- KEYS[1] base
-- ARGV[1] older than µs  ARGV[2] budget (tasks)
-- Returns {workflows deleted, 1 when it stopped on the budget, else 0}.
local wf = wf_lib()
local base = KEYS[1]
local cut = now_us() - tonumber(ARGV[1])
local budget = tonumber(ARGV[2])
local ids = redis.call('ZRANGEBYSCORE', base .. 'wft', '-inf', '(' .. n2s(cut), 'LIMIT', 0, 100)
local del = 0
for _, wid in ipairs(ids) do
  if budget <= 0 then return { del, 1 } end
  local k, t = base .. 'wf:' .. wid, base .. 'wt:' .. wid
  local v = redis.call('HMGET', k, 's', 'T')
  local n = tonumber(v[2] or '0')
  local idx = {}
  for i = 0, n - 1 do idx[#idx + 1] = tostring(i) end
  local jobs = wf.read(t, idx, 'J')
  local gone = {}
  for j = 1, #jobs do
    if jobs[j] then gone[#gone + 1] = jobs[j] end
  end
  for s = 1, #gone, 4000 do
    redis.call('HDEL', base .. 'wj', unpack(gone, s, math.min(s + 3999, #gone)))
  end
  redis.call('DEL', k, t)
  redis.call('ZREM', base .. 'wfs', wid)
  redis.call('ZREM', base .. 'wft', wid)
  if v[1] then redis.call('HINCRBY', base .. 'wfn', string.sub(v[1], 1, 1), -1) end
  del = del + 1
  budget = budget - math.max(n, 1)
end
return { del, (#ids == 100 and 1) or 0 }
