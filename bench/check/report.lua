--- Reads the runs bench/check.sh recorded and prints one table row per
-- workload. Run with the project's own binary, so cjson is there:
--   eutaxy run bench/check/report.lua RUNS.tsv
-- RUNS.tsv has one line per run, tab-separated:
--   workload  expected-verdict  expected-schedules (0: any)  jobs  exit-code  wall-ns  json-file  peak-rss-kb (0: unknown)
-- Exits 1 when a workload's verdict is not the expected one.
local cjson = require "cjson"

local function median(xs)
  local s = {}
  for i, x in ipairs(xs) do s[i] = x end
  table.sort(s)
  local n = #s
  if n == 0 then return nil end
  if n % 2 == 1 then return s[(n + 1) // 2] end
  return (s[n // 2] + s[n // 2 + 1]) / 2
end

local function read_json(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local text = f:read("a")
  f:close()
  local ok, doc = pcall(cjson.decode, text)
  if ok and type(doc) == "table" then return doc end
  return nil
end

local order, by_name = {}, {}
if not arg[1] then io.stderr:write("usage: report.lua RUNS.tsv\n") os.exit(2) end
for line in io.lines(arg[1]) do
  local name, verdict, schedules, jobs, rc, wall, json, rss = line:match(
    "^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t?([^\t]*)$")
  if name then
    local w = by_name[name]
    if not w then
      w = { name = name, expect = verdict, expect_schedules = tonumber(schedules), jobs = tonumber(jobs),
            wall = {}, elapsed = {}, verdicts = {}, schedules = {}, runs = {}, rss = {} }
      by_name[name] = w
      order[#order + 1] = w
    end
    local doc = read_json(json)
    w.wall[#w.wall + 1] = tonumber(wall) / 1e6
    if tonumber(rss) and tonumber(rss) > 0 then w.rss[#w.rss + 1] = tonumber(rss) end
    if doc then
      w.verdicts[doc.verdict or "?"] = true
      local c = doc.counts or {}
      if c.elapsedMs then w.elapsed[#w.elapsed + 1] = c.elapsedMs end
      w.schedules[#w.schedules + 1] = c.schedules
      w.runs[#w.runs + 1] = c.runs
    else
      w.verdicts["exit " .. rc] = true
    end
  end
end

local function verdict_of(w)
  local vs = {}
  for v in pairs(w.verdicts) do vs[#vs + 1] = v end
  table.sort(vs)
  return table.concat(vs, "/")
end

local function rate(n, ms)
  if not n or not ms or ms <= 0 then return "-" end
  return string.format("%.0f", n / (ms / 1000))
end

local function num(x, fmt)
  if x == nil then return "-" end
  return string.format(fmt or "%d", x)
end

local header = { "workload", "verdict", "schedules", "runs", "jobs", "wall ms", "(min-max)", "elapsedMs",
                 "sched/s (elapsed)", "sched/s (wall)", "sched/s/core (wall)", "peak RSS MB" }
local rows, notes, failed = { header }, {}, false
for _, w in ipairs(order) do
  local verdict = verdict_of(w)
  if verdict ~= w.expect then
    failed = true
    notes[#notes + 1] = string.format("%s: verdict %s, expected %s", w.name, verdict, w.expect)
  end
  local schedules, runs = median(w.schedules), median(w.runs)
  if w.expect_schedules and w.expect_schedules > 0 and schedules and schedules ~= w.expect_schedules then
    notes[#notes + 1] = string.format("%s: %d schedules, expected %d (the explored space changed)",
      w.name, schedules, w.expect_schedules)
  end
  local wall, elapsed = median(w.wall), median(w.elapsed)
  local lo, hi = math.min(table.unpack(w.wall)), math.max(table.unpack(w.wall))
  local per_core = (schedules and wall and wall > 0) and string.format("%.0f", schedules / (wall / 1000) / w.jobs) or "-"
  rows[#rows + 1] = {
    w.name, verdict, num(schedules), num(runs), num(w.jobs), num(wall, "%.1f"),
    string.format("%.1f-%.1f", lo, hi), num(elapsed, "%.0f"), rate(schedules, elapsed), rate(schedules, wall), per_core,
    median(w.rss) and string.format("%.1f", median(w.rss) / 1024) or "-",
  }
end

local widths = {}
for _, r in ipairs(rows) do
  for i, cell in ipairs(r) do widths[i] = math.max(widths[i] or 0, #cell) end
end
for _, r in ipairs(rows) do
  local cells = {}
  for i, cell in ipairs(r) do
    cells[i] = i <= 2 and string.format("%-" .. widths[i] .. "s", cell) or string.format("%" .. widths[i] .. "s", cell)
  end
  print(table.concat(cells, "  "))
end
for _, n in ipairs(notes) do print("note: " .. n) end
os.exit(failed and 1 or 0)
