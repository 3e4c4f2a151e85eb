--- eutaxy.merge: the shards of one check, read back and added up
-- (`eutaxy check --merge a.json b.json ...`).
--
-- `--shard K/N` explores one of N disjoint parts of the schedule tree, so a
-- shard's report is a part's: only all N together say anything about the
-- scenario. This module reads the shards' --json reports, refuses a set that
-- is not one whole (a file that is no shard report, shards of different
-- fingerprints or of different N, a shard twice or one missing) and adds
-- the parts up: counts, coverage, probes, and the one verdict. Wording is
-- the checker's (checker.lua turns the result into its usual report).
--
-- Every refusal is a plain error message naming the file it is about.

local json = require "eutaxy.json"
local sim = require "eutaxy.check"

local merge = {}

local VERDICTS = { BOUNDED = true, VIOLATED = true, INCONCLUSIVE = true, NONDETERMINISTIC = true }

local function fail(fmt, ...)
  error(string.format(fmt, ...), 0)
end

local function short(hash)
  return tostring(hash):sub(1, 12)
end

-- The decoded report in file, or an error naming the file.
local function read(file)
  local f, err = io.open(file, "rb")
  if not f then fail("%s", err) end
  local text = f:read("a") or ""
  f:close()
  local ok, doc = pcall(json.decode, text)
  if not ok then fail("%s is not JSON (%s)", file, (tostring(doc):gsub("^json%.decode: ", ""))) end
  if type(doc) ~= "table" or not VERDICTS[doc.verdict] or type(doc.scenario) ~= "string" then
    fail("%s is not a report of eutaxy check --json", file)
  end
  local s = doc.shard
  if s == nil then
    fail("%s is not a shard's report: it has no \"shard\" (make each with eutaxy check SCENARIO --shard K/N --json)", file)
  end
  if type(s) ~= "table" or math.type(s.k) ~= "integer" or math.type(s.n) ~= "integer" or s.k < 1 or s.k > s.n then
    fail("%s: \"shard\" is not {\"k\": K, \"n\": N} with 1 <= K <= N", file)
  end
  if type(doc.fingerprint) ~= "string" then fail("%s has no fingerprint", file) end
  if doc.verdict ~= "NONDETERMINISTIC" then
    local c = doc.counts
    if type(c) ~= "table" or type(c.byFaults) ~= "table" then fail("%s has no counts", file) end
    for _, b in ipairs(c.byFaults) do
      if type(b) ~= "table" or math.type(b.faults) ~= "integer" or math.type(b.schedules) ~= "integer" or b.faults < 0 then
        fail("%s: counts.byFaults holds something other than {\"faults\": F, \"schedules\": S}", file)
      end
    end
  end
  return doc
end

-- Where two fingerprints' inputs differ, in words: "worker.lua",
-- "options.maxFaultsPerRun", "the eutaxy version". Nil when unknown.
local function difference(a, b)
  if type(a) ~= "table" or type(b) ~= "table" then return nil end
  if a.eutaxy ~= b.eutaxy then
    return string.format("the eutaxy version (%s, %s)", tostring(a.eutaxy), tostring(b.eutaxy))
  end
  local names, seen = {}, {}
  local function differ(prefix, x, y)
    x, y = type(x) == "table" and x or {}, type(y) == "table" and y or {}
    for _, t in ipairs({ x, y }) do
      for k in pairs(t) do
        if not seen[prefix .. k] and json.encode(x[k]) ~= json.encode(y[k]) then
          seen[prefix .. k] = true
          names[#names + 1] = prefix .. k
        end
      end
    end
  end
  differ("", a.files, b.files)
  differ("options.", a.options, b.options)
  if #names == 0 then return nil end
  table.sort(names)
  if #names > 3 then return table.concat(names, ", ", 1, 3) .. string.format(" and %d more", #names - 3) end
  return table.concat(names, ", ")
end

-- kinds in the order sim.FAULT_KINDS gives them (C's order too), any other after.
local KIND_ORDER = {}
for i, k in ipairs(sim.FAULT_KINDS) do KIND_ORDER[k] = i end

local function union(a, b)
  local set, list = {}, {}
  for _, l in ipairs({ a or {}, b or {} }) do
    for _, k in ipairs(l) do
      if not set[k] then
        set[k] = true
        list[#list + 1] = k
      end
    end
  end
  table.sort(list, function(x, y)
    local i, j = KIND_ORDER[x] or math.huge, KIND_ORDER[y] or math.huge
    if i ~= j then return i < j end
    return x < y
  end)
  return list
end

---@class eutaxy.merge.Shard
---@field k integer
---@field n integer
---@field file string
---@field doc table the report as decoded

---@class eutaxy.merge.Result
---@field n integer how many shards
---@field shards eutaxy.merge.Shard[] by k
---@field doc table shard 1's report: scenario, seed, fingerprint, bounds, fault kinds
---@field verdict string
---@field violation table|nil the chosen violating shard's report
---@field violation_k integer|nil its k
---@field nondeterministic eutaxy.merge.Shard|nil the first shard that was
---@field incomplete eutaxy.merge.Shard[] shards that did not explore their whole part
---@field counted integer[] schedules by fault count (index faults + 1)
---@field runs integer
---@field faultsTried integer
---@field faultsByKind table<string, integer>
---@field turnChecks integer
---@field blockedRuns integer
---@field races integer
---@field sweepRuns integer
---@field splitRuns integer
---@field reduction boolean|nil whether the shards reduced (the fingerprint makes it the same in all)
---@field elapsedMax integer
---@field elapsedSum integer
---@field coverage table[] as core.explore gives it: point, reached, kinds, tried, open, spent
---@field probes string[]|nil every sometimes probe, in scenario order
---@field reached table<string, boolean> the probes some shard reached
---@field endStates string[]|nil the digests any shard saw, when every shard has them (--end-states)

--- Reads the shard reports in files and adds them up; raises a message
--- naming the file when they are not the N shards of one check.
---@param files string[]
---@return eutaxy.merge.Result
function merge.shards(files)
  if #files == 0 then fail("--merge needs the shards' reports: eutaxy check --merge 1.json 2.json ...") end
  local shards, by_k = {}, {}
  local first
  for _, file in ipairs(files) do
    local doc = read(file)
    local s = { k = doc.shard.k, n = doc.shard.n, file = file, doc = doc }
    if not first then
      first = s
    else
      if s.n ~= first.n then
        fail("%s is shard %d/%d, but %s is shard %d/%d: every shard must split the tree into the same N",
          file, s.k, s.n, first.file, first.k, first.n)
      end
      if doc.fingerprint ~= first.doc.fingerprint then
        local where = difference(first.doc.fingerprintInputs, doc.fingerprintInputs)
        fail("%s has fingerprint %s, but %s has %s%s: shards of different scenarios, code, bounds or options cannot "
          .. "be merged", file, short(doc.fingerprint), first.file, short(first.doc.fingerprint),
          where and (" (they differ in " .. where .. ")") or "")
      end
    end
    if by_k[s.k] then
      fail("%s is shard %d/%d again (so is %s): each shard once", file, s.k, s.n, by_k[s.k].file)
    end
    by_k[s.k] = s
    shards[#shards + 1] = s
  end
  local n = first.n
  local missing = {}
  for k = 1, n do
    if not by_k[k] then missing[#missing + 1] = k .. "/" .. n end
  end
  if #missing > 0 then
    fail("shard%s %s %s missing: --merge needs every shard of %d, each once (given: %s)",
      #missing == 1 and "" or "s", table.concat(missing, ", "), #missing == 1 and "is" or "are", n,
      table.concat(files, ", "))
  end
  table.sort(shards, function(a, b) return a.k < b.k end)

  local m = {
    n = n, shards = shards, doc = shards[1].doc, counted = {}, runs = 0, faultsTried = 0, faultsByKind = {},
    turnChecks = 0, elapsedMax = 0, elapsedSum = 0, coverage = {}, incomplete = {}, reached = {},
    blockedRuns = 0, races = 0, sweepRuns = 0, splitRuns = 0,
  }
  local points, most = {}, 0
  local states, every_state = {}, true
  for _, s in ipairs(shards) do
    local doc = s.doc
    if doc.verdict == "VIOLATED" then
      -- the fewest faults, then the lowest shard: what one unsharded search finds first
      local faults = #(doc.faults or {})
      if not m.violation or faults < #(m.violation.faults or {}) then m.violation, m.violation_k = doc, s.k end
    elseif doc.verdict == "NONDETERMINISTIC" then
      m.nondeterministic = m.nondeterministic or s
    elseif not doc.shard.exhausted then
      m.incomplete[#m.incomplete + 1] = s
    end
    local c = doc.counts
    if c then
      for _, b in ipairs(c.byFaults or {}) do
        m.counted[b.faults + 1] = (m.counted[b.faults + 1] or 0) + b.schedules
        most = math.max(most, b.faults + 1)
      end
      m.runs = m.runs + (c.runs or 0)
      m.faultsTried = m.faultsTried + (c.faultsTried or 0)
      for _, field in ipairs({ "turnChecks", "blockedRuns", "races", "sweepRuns", "splitRuns" }) do
        m[field] = m[field] + (math.tointeger(c[field]) or 0)
      end
      if m.reduction == nil then m.reduction = c.reduction end
      m.elapsedMax = math.max(m.elapsedMax, c.elapsedMs or 0)
      m.elapsedSum = m.elapsedSum + (c.elapsedMs or 0)
      for kind, count in pairs(c.faultsByKind or {}) do m.faultsByKind[kind] = (m.faultsByKind[kind] or 0) + count end
    end
    for _, p in ipairs(doc.coverage or {}) do
      local q = points[p.point]
      if not q then
        q = { point = p.point, reached = 0 }
        points[p.point] = q
        m.coverage[#m.coverage + 1] = q
      end
      q.reached = q.reached + (p.reached or 0)
      q.kinds, q.tried = union(q.kinds, p.kinds), union(q.tried, p.tried)
      q.open, q.spent = union(q.open, p.open), union(q.spent, p.spent)
    end
    if doc.probes then m.probes = m.probes or doc.probes end
    if doc.endStates then
      for _, digest in ipairs(doc.endStates) do states[digest] = true end
    else
      every_state = false
    end
    for _, name in ipairs(doc.reached or {}) do m.reached[name] = true end
  end
  for i = 1, most do m.counted[i] = m.counted[i] or 0 end
  -- a violating shard stops early: its states are not its whole part's
  if every_state and not m.violation then
    m.endStates = {}
    for digest in pairs(states) do m.endStates[#m.endStates + 1] = digest end
  end

  local unreached = false
  for _, name in ipairs(m.probes or {}) do
    if not m.reached[name] then unreached = true end
  end
  if m.violation then m.verdict = "VIOLATED"
  elseif m.nondeterministic then m.verdict = "NONDETERMINISTIC"
  elseif #m.incomplete > 0 or unreached then m.verdict = "INCONCLUSIVE"
  else m.verdict = "BOUNDED" end
  return m
end

return merge
