--- Splitting a check: what a shard's report says (--shard K/N), the
-- fingerprint every report carries, and `eutaxy check --merge` adding the
-- shards' --json reports up into the scenario's verdict, or refusing a set
-- that is not the N shards of one check.
local process = dofile("spec/helpers/process.lua")
local C = dofile("spec/helpers/check.lua")
local cjson = require "cjson"

local LEASES = "scenarios/lease-pool/leases.sim.lua"
local FIXED = "scenarios/lease-pool/leases.fixed.sim.lua"
local PROPS = "spec/fixtures/properties/"
local FANOUT = "scenarios/fanout/orders.fixed.sim.lua"
local NO_BUDGET = C.NO_BUDGET

local check, check_json, lines, has_line = C.run, C.json, C.lines, C.has_line

local function sh(command)
  local out, err, code = process.run(command)
  assert(code == 0, command .. ": " .. err)
  return (out:gsub("%s+$", ""))
end

-- A folder of this spec's own, removed by the describe that made it.
local function temp_dir()
  return sh("mktemp -d")
end

local function write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

-- Runs the N shards of args, each --json into PREFIX..K.json; returns the paths in shard order.
local function shards(prefix, args, n)
  local files = {}
  for k = 1, n do
    local out, err, code = check(args .. " --shard " .. k .. "/" .. n .. " --json" .. NO_BUDGET)
    assert(code <= 3, err)
    files[k] = prefix .. k .. ".json"
    write(files[k], out)
  end
  return files
end

local function merge(files, extra)
  return check("--merge " .. table.concat(files, " ") .. (extra or ""))
end

local function merge_json(files)
  local out, err, code = merge(files, " --json")
  local ok, doc = pcall(cjson.decode, out)
  assert(ok, "not one JSON document: " .. out .. err)
  return doc, code, err
end

describe("a shard's report", function()
  it("says which shard it is in its verdict line, and that it is not the scenario's verdict", function()
    local out, err, code = check(FIXED .. " --shard 2/3" .. NO_BUDGET)
    assert.are.equal(0, code, err)
    assert.are.equal("BOUNDED in shard 2/3  leases-fixed  (seed leases-fixed)", lines(out)[1])
    assert.matches("\nNo invariant is violated in any of the %d+ schedules? of shard 2/3 within the bounds", out)
    assert.is_true(has_line(out, "Shard 2/3 explored only its part of the schedules: merge the --json reports of "
      .. "all 3 shards (eutaxy check --merge) for the scenario's verdict."), out)
    local quiet = check(FIXED .. " --shard 2/3 --quiet" .. NO_BUDGET)
    assert.are.equal("BOUNDED in shard 2/3  leases-fixed\n", quiet)
  end)

  it("keeps its JSON verdict, with the shard as {k, n, exhausted}", function()
    local doc, code = check_json(FIXED .. " --shard 2/3" .. NO_BUDGET)
    assert.are.equal(0, code)
    assert.are.equal("BOUNDED", doc.verdict)
    assert.are.same({ k = 2, n = 3, exhausted = true }, doc.shard)
    local whole = check_json(FIXED .. NO_BUDGET)
    assert.is_nil(whole.shard)
  end)

  it("is not exhausted when it explored only random schedules of its part", function()
    local doc, code = check_json(FIXED .. " --shard 1/2 --random 3 --seed 1")
    assert.are.equal(3, code)
    assert.are.equal("INCONCLUSIVE", doc.verdict)
    assert.is_false(doc.shard.exhausted)
  end)

  it("names its shard where it found a violation, and replays it without one", function()
    local found
    for k = 1, 3 do
      local out, _, code = check(LEASES .. " --shard " .. k .. "/3" .. NO_BUDGET)
      if code == 1 then
        found = true
        assert.are.equal("VIOLATED in shard " .. k .. "/3  leases  (seed leases)", lines(out)[1])
        assert.matches("\nFound in shard " .. k .. "/3 after %d+ schedules? ", out)
        local all = lines(out)
        assert.is_nil(all[#all]:find("--shard", 1, true))
      end
    end
    assert.is_true(found)
  end)
end)

describe("the fingerprint", function()
  local dir, base
  lazy_setup(function() base = check_json(FIXED .. NO_BUDGET) end)
  before_each(function() dir = temp_dir() end)
  after_each(function() os.execute("rm -rf " .. dir) end)

  -- bin as a path that works from any folder
  local bin = process.bin:sub(1, 1) == "/" and process.bin or (sh("pwd") .. "/" .. process.bin)

  local function fingerprint_in(folder, args)
    local out, err = process.run("cd " .. folder .. " && " .. bin .. " check " .. args .. " --json" .. NO_BUDGET)
    local ok, doc = pcall(cjson.decode, out)
    assert(ok, out .. err)
    return doc.fingerprint, doc
  end

  it("hashes the .lua files below a folder: links followed, once round a cycle, hidden names left out", function()
    local fingerprint = require "eutaxy.fingerprint"
    sh("mkdir -p " .. dir .. "/sub/deeper " .. dir .. "/.hidden")
    for _, f in ipairs({ "a.lua", "notes.txt", "lua", ".dot.lua", "sub/b.lua", "sub/deeper/c.lua", ".hidden/d.lua" }) do
      write(dir .. "/" .. f, "return 1\n")
    end
    sh("cd " .. dir .. " && ln -s a.lua linked.lua && ln -s sub again && ln -s . loop && ln -s missing.lua broken.lua")
    local files = assert(fingerprint.lua_files(dir))
    table.sort(files)
    assert.are.same({ "a.lua", "again/b.lua", "again/deeper/c.lua", "linked.lua", "sub/b.lua", "sub/deeper/c.lua" },
      files)
  end)

  it("is 16 hex digits in JSON, with what it hashed, and its first 12 in the text", function()
    local doc = base
    assert.matches("^%x+$", doc.fingerprint)
    assert.are.equal(16, #doc.fingerprint)
    local files = doc.fingerprintInputs.files
    assert.is_truthy(files["leases.fixed.sim.lua"] and files["leases.sim.lua"] and files["worker_fixed.lua"]
      and files["schema.lua"] and files["wrangler.jsonc"] and files["lib:eutaxy/checker.lua"])
    assert.are.equal(1, doc.fingerprintInputs.options.maxFaultsPerRun)
    assert.are.equal(sh(process.bin .. " version"):match("^eutaxy (.*)$"), doc.fingerprintInputs.eutaxy)
    local out = check(FIXED .. NO_BUDGET)
    assert.is_true(has_line(out, "Fingerprint: " .. doc.fingerprint:sub(1, 12)), out)
  end)

  it("is the same in two processes, from another folder, and for a copy of the project elsewhere", function()
    local a = base.fingerprint
    assert.are.equal(a, check_json(FIXED .. NO_BUDGET).fingerprint)
    assert.are.equal(a, (fingerprint_in("scenarios/lease-pool", "leases.fixed.sim.lua")))
    sh("cp -R scenarios/lease-pool " .. dir .. "/copy")
    assert.are.equal(a, (fingerprint_in(dir .. "/copy", "leases.fixed.sim.lua")))
    assert.are.equal(a, (fingerprint_in(dir, "copy/leases.fixed.sim.lua")))
  end)

  it("does not change with the budget, the processes or the shard, and changes with what shapes the tree", function()
    local a = base.fingerprint
    assert.are.equal(a, check_json(FIXED .. " -j 2" .. NO_BUDGET).fingerprint)
    assert.are.equal(a, check_json(FIXED .. " --budget-ms 500000").fingerprint)
    assert.are.equal(a, check_json(FIXED .. " --shard 2/3" .. NO_BUDGET).fingerprint)
    local r1 = check_json(FIXED .. " --random 3 --seed 1").fingerprint
    local r2 = check_json(FIXED .. " --random 3 --seed 2").fingerprint
    local full = check_json(FIXED .. " --no-reduction" .. NO_BUDGET).fingerprint
    assert.are_not.equal(a, r1)
    assert.are_not.equal(r1, r2)
    assert.are_not.equal(a, full)
  end)

  it("changes when a file of the worker changes, and when the scenario does", function()
    sh("cp -R scenarios/lease-pool " .. dir .. "/copy")
    local before = fingerprint_in(dir .. "/copy", "leases.fixed.sim.lua")
    local worker = dir .. "/copy/worker_fixed.lua"
    write(worker, process.read(worker) .. "\n-- a comment changes no behaviour, but the code is not the same\n")
    local after = fingerprint_in(dir .. "/copy", "leases.fixed.sim.lua")
    assert.are_not.equal(before, after)
    write(dir .. "/copy/leases.fixed.sim.lua", process.read(FIXED):gsub("leases%-fixed", "leases-fixed-2"))
    assert.are_not.equal(after, (fingerprint_in(dir .. "/copy", "leases.fixed.sim.lua")))
    assert.are_not.equal(check_json(LEASES .. NO_BUDGET).fingerprint, base.fingerprint)
  end)
end)

describe("eutaxy check --merge", function()
  -- One set of shards of each kind serves every test that only reads them.
  local dir, reduced, whole, full, planted
  lazy_setup(function()
    dir = temp_dir()
    reduced = shards(dir .. "/reduced-", FIXED, 3)
    whole = check_json(FIXED .. NO_BUDGET)
    full = shards(dir .. "/full-", FIXED .. " --no-reduction", 3)
    planted = shards(dir .. "/planted-", LEASES, 3)
  end)
  lazy_teardown(function() os.execute("rm -rf " .. dir) end)

  -- the merge of files has the whole check's verdict, counts and coverage
  local function same_as_whole(files, one)
    local doc, code = merge_json(files)
    assert.are.equal(0, code)
    assert.are.equal("BOUNDED", doc.verdict)
    assert.is_nil(doc.shard)
    assert.are.equal(one.fingerprint, doc.fingerprint)
    assert.are.equal(one.counts.schedules, doc.counts.schedules)
    assert.are.same(one.counts.byFaults, doc.counts.byFaults)
    assert.are.same(one.counts.faultsByKind, doc.counts.faultsByKind)
    assert.are.equal(one.counts.faultsTried, doc.counts.faultsTried)
    assert.are.same(one.coverage, doc.coverage)
    return doc
  end

  it("adds the shards of a BOUNDED check up to the whole check: verdict, counts and coverage", function()
    local doc = same_as_whole(reduced, whole)
    assert.is_true(doc.counts.reduction)
    assert.are.equal(3, doc.merged.n)
    local sum, slowest = 0, 0
    for k, s in ipairs(doc.merged.shards) do
      assert.are.equal(k, s.k)
      assert.are.equal(reduced[k], s.file)
      sum, slowest = sum + s.elapsedMs, math.max(slowest, s.elapsedMs)
    end
    assert.are.equal(sum, doc.counts.elapsedMsSum)
    assert.are.equal(slowest, doc.counts.elapsedMs)
  end)

  it("adds them up to the whole check under --no-reduction too", function()
    local doc = same_as_whole(full, check_json(FIXED .. " --no-reduction" .. NO_BUDGET))
    assert.is_false(doc.counts.reduction)
    assert.are_not.equal(whole.fingerprint, doc.fingerprint)
  end)

  it("explores no fewer schedules than the whole check where no fault is in play (subtrees reduced alone)", function()
    local one = check_json(PROPS .. "order_reached.sim.lua" .. NO_BUDGET)
    local doc, code = merge_json(shards(dir .. "/faultless-", PROPS .. "order_reached.sim.lua", 3))
    assert.are.equal(0, code)
    assert.are.equal("BOUNDED", doc.verdict)
    assert.is_true(doc.counts.schedules >= one.counts.schedules, doc.counts.schedules .. " < " .. one.counts.schedules)
  end)

  it("unites the shards' end states (--end-states) into the whole check's", function()
    local one = check_json(FIXED .. " --end-states" .. NO_BUDGET)
    local doc, code = merge_json(shards(dir .. "/states-", FIXED .. " --end-states", 3))
    assert.are.equal(0, code)
    assert.are.same(one.endStates, doc.endStates)
    assert.are.equal(one.endStateCount, doc.endStateCount)
    assert.is_nil(merge_json(reduced).endStates)
  end)

  it("prints the merge as a report of the whole, with the shards it came from", function()
    local text = check(FIXED .. NO_BUDGET)
    local out, err, code = merge(reduced)
    assert.are.equal(0, code, err)
    assert.are.equal("BOUNDED  leases-fixed  (seed leases-fixed)", lines(out)[1])
    local schedules = text:match("any of the (%d+) schedules")
    assert.matches("\nNo invariant is violated in any of the " .. schedules .. " schedules of the 3 shards within the bounds", out)
    assert.is_true(has_line(out, "Merged from 3 shards:"), out)
    assert.matches("\n  1/3  BOUNDED +%d+ schedules? +%d+ ms  " .. reduced[1]:gsub("%p", "%%%0") .. "\n", out)
    -- the coverage is the whole check's, line for line
    assert.are.equal(text:match("\nCoverage.*$"), out:match("\nCoverage.*$"))
    assert.are.equal("BOUNDED  leases-fixed\n", (merge(reduced, " --quiet")))
  end)

  it("finds the planted bug if a shard did, and prints it with a replay that needs no --shard", function()
    local doc, code = merge_json(planted)
    assert.are.equal(1, code)
    assert.are.equal("VIOLATED", doc.verdict)
    assert.are.equal("one-runner-per-request", doc.invariant)
    assert.are.equal(1, #doc.faults)
    local k = math.tointeger(doc.merged.violation.k)
    local from = cjson.decode(process.read(planted[k]))
    assert.are.equal("VIOLATED", from.verdict)
    assert.are.same(from.trace, doc.trace)
    assert.are.equal(from.replay, doc.replay)
    assert.are.equal(("eutaxy check %s --replay %s"):format(LEASES, doc.schedule), doc.replay)
    local again, again_code = check_json(LEASES .. " --replay " .. doc.schedule)
    assert.are.equal(1, again_code)
    assert.are.same(doc.trace, again.trace)
    local out = merge(planted)
    local all = lines(out)
    assert.are.equal("VIOLATED  leases  (seed leases)", all[1])
    assert.matches("\nFound in shard " .. k .. "/3 after %d+ schedules? of the 3 shards", out)
    assert.are.equal("Replay: " .. doc.replay, all[#all])
  end)

  it("takes the violation with the fewest faults, the lowest shard on a tie", function()
    local docs, violating = {}, nil
    for k = 1, 3 do
      docs[k] = cjson.decode(process.read(planted[k]))
      if docs[k].verdict == "VIOLATED" then violating = docs[k] end
    end
    -- every shard made violating: shard 1 with two faults, 2 and 3 with one
    local files = {}
    for k = 1, 3 do
      local d = docs[k]
      for _, field in ipairs({ "verdict", "invariant", "message", "schedule", "events", "faults", "trace", "replay",
                               "columns", "rows" }) do
        d[field] = violating[field]
      end
      d.message = "from shard " .. k
      d.faults = k == 1 and { "one", "two" } or { "one" }
      files[k] = dir .. "/edited-" .. k .. ".json"
      write(files[k], cjson.encode(d))
    end
    local doc, code = merge_json(files)
    assert.are.equal(1, code)
    assert.are.equal("from shard 2", doc.message)
    assert.are.equal(2, doc.merged.violation.k)
  end)

  it("counts a sometimes probe reached in any shard, and one reached in none makes it INCONCLUSIVE", function()
    local reached, code = merge_json(shards(dir .. "/reached-", PROPS .. "order_reached.sim.lua", 3))
    assert.are.equal(0, code)
    assert.are.equal("BOUNDED", reached.verdict)
    assert.are.same({ "b-first" }, reached.reached)
    local order = shards(dir .. "/order-", PROPS .. "order.sim.lua", 3)
    local never, never_code = merge_json(order)
    local whole = check_json(PROPS .. "order.sim.lua")
    assert.are.equal(3, never_code)
    assert.are.equal("INCONCLUSIVE", never.verdict)
    assert.are.same(whole.reached, never.reached)
    assert.are.same(whole.neverReached, never.neverReached)
    local out = merge(order)
    assert.is_true(has_line(out, "never reached: " .. whole.neverReached[1]), out)
  end)

  it("is INCONCLUSIVE when a shard did not explore its whole part, and says which", function()
    -- the fanout's full tree: its smaller half takes over 100 ms, so 10 ms explores a part of neither
    local files = {}
    for k = 1, 2 do
      files[k] = dir .. "/budget-" .. k .. ".json"
      write(files[k], (check(FANOUT .. " --no-reduction --shard " .. k .. "/2 --json --budget-ms 10")))
    end
    local doc, code = merge_json(files)
    assert.are.equal(3, code)
    assert.are.equal("INCONCLUSIVE", doc.verdict)
    assert.are.equal("Shard 1/2 (" .. files[1] .. "): The budget of 10 ms ran out before every schedule of this "
      .. "shard was explored.\nShard 2/2 (" .. files[2] .. "): The budget of 10 ms ran out before every schedule "
      .. "of this shard was explored.", doc.reason)
  end)
end)

describe("eutaxy check --merge refuses, with exit 2 and the file named,", function()
  -- the refusals only read the reports: one set serves them all
  local dir, files
  lazy_setup(function()
    dir = temp_dir()
    files = shards(dir .. "/", FIXED, 3)
  end)
  lazy_teardown(function() os.execute("rm -rf " .. dir) end)

  local function refused(list, pattern)
    local out, err, code = merge(list)
    assert.are.equal(2, code, out .. err)
    assert.are.equal("", out)
    assert.matches("^eutaxy check: %-%-merge: " .. pattern, err)
    return err
  end

  local function p(s) return (s:gsub("%p", "%%%0")) end

  it("shards whose fingerprints differ, saying in what", function()
    sh("cp -R scenarios/lease-pool " .. dir .. "/copy")
    local worker = dir .. "/copy/worker_fixed.lua"
    write(worker, process.read(worker) .. "\n-- changed\n")
    local other = dir .. "/other.json"
    write(other, (process.run("cd " .. dir .. "/copy && " .. (process.bin:sub(1, 1) == "/" and process.bin
      or sh("pwd") .. "/" .. process.bin) .. " check leases.fixed.sim.lua --shard 3/3 --json" .. NO_BUDGET)))
    refused({ files[1], files[2], other }, p(other) .. " has fingerprint %x+, but " .. p(files[1])
      .. " has %x+ %(they differ in worker_fixed%.lua%)")
  end)

  it("shards of another scenario or other options", function()
    local leases3 = dir .. "/leases3.json"
    write(leases3, (check(LEASES .. " --shard 3/3 --json" .. NO_BUDGET)))
    refused({ files[1], files[2], leases3 }, p(leases3) .. " has fingerprint .*options%.scenario")
  end)

  it("a missing shard", function()
    refused({ files[1], files[3] }, "shard 2/3 is missing: %-%-merge needs every shard of 3, each once %(given: "
      .. p(files[1]) .. ", " .. p(files[3]) .. "%)")
  end)

  it("a shard given twice", function()
    refused({ files[1], files[2], files[2], files[3] }, p(files[2]) .. " is shard 2/3 again %(so is " .. p(files[2]))
  end)

  it("shards that split the tree into different N", function()
    local half = dir .. "/half.json"
    write(half, (check(FIXED .. " --shard 1/2 --json" .. NO_BUDGET)))
    refused({ files[1], half }, p(half) .. " is shard 1/2, but " .. p(files[1]) .. " is shard 1/3")
  end)

  it("a file that is not JSON, one that is not a shard's report, and one that does not exist", function()
    local text = dir .. "/report.txt"
    write(text, (check(FIXED .. " --shard 1/3" .. NO_BUDGET)))
    refused({ text, files[2], files[3] }, p(text) .. " is not JSON")
    local whole = dir .. "/whole.json"
    write(whole, (check(FIXED .. " --json" .. NO_BUDGET)))
    refused({ whole, files[2], files[3] }, p(whole) .. " is not a shard's report")
    local other = dir .. "/other.json"
    write(other, '{"name": "not a report"}')
    refused({ other, files[2], files[3] }, p(other) .. " is not a report of eutaxy check %-%-json")
    refused({ dir .. "/nowhere.json", files[2], files[3] }, p(dir .. "/nowhere.json") .. ": No such file")
  end)

  it("options that explore, and no file at all", function()
    local _, err, code = check("--merge " .. files[1] .. " --shard 1/3")
    assert.are.equal(2, code)
    assert.matches("^eutaxy check: %-%-merge adds up shards' reports: it explores nothing, so it takes no %-%-shard\n", err)
    _, err, code = check("--merge " .. files[1] .. " --no-reduction")
    assert.are.equal(2, code)
    assert.matches("it explores nothing, so it takes no %-%-no%-reduction\n", err)
    _, err, code = check("--merge")
    assert.are.equal(2, code)
    assert.matches("^eutaxy check: %-%-merge needs the shards' reports", err)
  end)
end)
