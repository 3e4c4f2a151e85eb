--- The fanout benchmark: delivery throughput to three targets with batching,
-- and the cost of an enqueue with a large backlog against an empty one.
--
--   build/eutaxy run bench/fanout/bench.lua                 # the default sizes
--   build/eutaxy run bench/fanout/bench.lua --messages 20000 --backlog 100000 --probe 2000
--
-- Times are CPU seconds of this process (os.clock): a world is one thread on
-- a virtual clock, so CPU time is the time. See bench/fanout/README.md.
local testing = require "eutaxy.testing"

local opts = { messages = 20000, backlog = "0,1000,10000,100000", probe = 2000, runs = 3 }
do
  local i = 1
  while arg[i] do
    local k = arg[i]:match("^%-%-(.+)$")
    local v = arg[i + 1]
    if not k or opts[k] == nil or not v or not (k == "backlog" and v:match("^[%d,]+$") or math.tointeger(tonumber(v))) then
      io.stderr:write("usage: eutaxy run bench/fanout/bench.lua [--messages N] [--backlog N,N,...] [--probe N] [--runs N]\n")
      os.exit(2)
    end
    opts[k] = k == "backlog" and v or math.tointeger(tonumber(v))
    i = i + 2
  end
end
local backlogs = {}
for n in opts.backlog:gmatch("%d+") do backlogs[#backlogs + 1] = math.tointeger(tonumber(n)) end

local WORKER = "bench/fanout/worker.lua"
local TARGETS = 3

local function world_with(config)
  local world = testing.world { main = WORKER, bindings = { BENCH = "Bench" }, seed = 1 }
  local bench = world.env.BENCH:getByName("bench")
  bench:configure(config)
  world:reset("BENCH", "bench")
  bench:load()  -- builds the instance (and migrates) before anything is timed
  return world, bench
end

local function median(xs)
  table.sort(xs)
  return xs[(#xs + 1) // 2]
end

local function fmt(n)
  local s = ("%d"):format(math.floor(n + 0.5))
  return (s:reverse():gsub("(%d%d%d)", "%1,"):reverse():gsub("^,", ""))
end

-- Throughput: enqueue the messages (in batches of 500) while delivery is
-- held (batchDelayMs puts them all on one boundary), then let the alarm
-- deliver them all; deliveries are messages times targets.
local HOLD = 1000000000
local function throughput(config)
  local enq, del = {}, {}
  config.batchDelayMs = HOLD
  for _ = 1, opts.runs do
    local world, bench = world_with(config)
    local t = os.clock()
    for from = 1, opts.messages, 500 do bench:fill(from, math.min(500, opts.messages - from + 1)) end
    enq[#enq + 1] = os.clock() - t
    assert(bench:delivered() == 0)
    t = os.clock()
    world:advance(HOLD)
    del[#del + 1] = os.clock() - t
    assert(bench:delivered() == opts.messages * TARGETS, "not everything was delivered")
    assert(bench:load().pending == 0)
    world:close()
  end
  return median(enq), median(del)
end

print(("fanout benchmark: %s messages to %d targets, backlogs of %s deliveries, %d runs (medians)")
  :format(fmt(opts.messages), TARGETS, opts.backlog, opts.runs))
print()
print("delivery throughput")
print(("  %-36s %14s %18s %16s"):format("configuration", "enqueue msg/s", "deliveries/s", "messages/s"))
for _, c in ipairs({
  { "maxBatchSize 10, explicit ack", { maxBatchSize = 10 } },
  { "maxBatchSize 10, ackOnReturn", { maxBatchSize = 10, ackOnReturn = true } },
  { "maxBatchSize 100, explicit ack", { maxBatchSize = 100 } },
  { "maxBatchSize 100, ackOnReturn", { maxBatchSize = 100, ackOnReturn = true } },
}) do
  local enq, del = throughput(c[2])
  print(("  %-36s %14s %18s %16s"):format(c[1], fmt(opts.messages / enq), fmt(opts.messages * TARGETS / del),
    fmt(opts.messages / del)))
end

-- Enqueue cost: probe single-message enqueues against an empty fanout and
-- against one holding the backlog. The backlog is due in 10^9 ms
-- (batchDelayMs), so no alarm delivers it while we measure.
local function probe(backlog)
  local each, one = {}, {}
  for _ = 1, opts.runs do
    local world, bench = world_with({ batchDelayMs = HOLD })
    local filled = 0
    local n = backlog // TARGETS
    for from = 1, n, 1000 do filled = bench:fill(from, math.min(1000, n - from + 1)) end
    assert(filled == n * TARGETS)
    local base = n + 1
    local t = os.clock()
    bench:enqueueEach(base, opts.probe)
    each[#each + 1] = (os.clock() - t) / opts.probe
    base = base + opts.probe
    t = os.clock()
    for i = base, base + opts.probe - 1 do bench:enqueueOne(i) end
    one[#one + 1] = (os.clock() - t) / opts.probe
    world:close()
  end
  return median(each), median(one)
end

print()
print(("enqueue cost, one message (%d deliveries), %s probes"):format(TARGETS, fmt(opts.probe)))
print(("  %-20s %18s %8s %26s %8s"):format("pending deliveries", "enqueue call (us)", "ratio",
  "request with commit (us)", "ratio"))
local e0, o0
for _, n in ipairs(backlogs) do
  local e, o = probe(n)
  e0, o0 = e0 or e, o0 or o
  print(("  %-20s %18.1f %8.2f %26.1f %8.2f"):format(fmt(n), e * 1e6, e / e0, o * 1e6, o / o0))
end
