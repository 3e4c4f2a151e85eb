--- What the specs of `eutaxy check` share: running it, its JSON, and
-- reading its text report.
local process = dofile("spec/helpers/process.lua")
local cjson = require "cjson"

local check = {}

--- A budget no run can reach, so a slow machine changes no verdict.
check.NO_BUDGET = " --budget-ms 600000"

--- Every schedule run twice, rewound and built afresh; under valgrind
--- (EUTAXY_VALGRIND) once, as the check/* tests are: a second identical run
--- finds no other memory error.
check.DETERMINISM = os.getenv("EUTAXY_VALGRIND") and "" or " --check-determinism"

--- Runs `eutaxy check ARGS`; returns stdout, stderr and the exit code.
function check.run(args)
  return process.run(process.bin .. " check " .. args)
end

--- Runs it with --json; returns the document, the exit code and stderr.
function check.json(args)
  local out, err, code = check.run(args .. " --json")
  local ok, doc = pcall(cjson.decode, out)
  assert(ok, "not one JSON document: " .. out .. err)
  return doc, code, err
end

--- The lines of s.
function check.lines(s)
  local t = {}
  for l in s:gmatch("([^\n]*)\n") do t[#t + 1] = l end
  return t
end

--- Whether s has a line that is exactly line.
function check.has_line(s, line)
  for _, l in ipairs(check.lines(s)) do
    if l == line then return true end
  end
  return false
end

--- The report's "Trace:" section, up to the blank line after it.
function check.trace_section(report)
  return assert(report:match("\nTrace:\n(.-\n)\n"), "no trace in:\n" .. report)
end

--- The coverage entry of a fault point, or an error naming it.
function check.find_point(coverage, name)
  for _, c in ipairs(coverage) do
    if c.point == name then return c end
  end
  error("no coverage point " .. name)
end

return check
