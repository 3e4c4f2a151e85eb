--- What the specs that compare two --json reports share:
--   local reports = dofile("spec/helpers/reports.lua")
local cjson = require "cjson"

local reports = {}

--- A value of a report for a message: "absent" for nil, whole floats (cjson
--- reads every number as a float) as integers, tables as JSON, cut at 200.
---@param v any
---@return string
function reports.show(v)
  if v == nil then return "absent" end
  if math.type(v) == "float" and math.tointeger(v) then v = math.tointeger(v) end
  v = type(v) == "table" and cjson.encode(v) or tostring(v)
  return #v > 200 and v:sub(1, 200) .. "..." or v
end

--- Every path where a and b differ, appended to out: "counts.turnChecks: 6
--- restored, 12 with --no-restore" for the names "restored" and "with
--- --no-restore".
---@param a any
---@param b any
---@param a_name string
---@param b_name string
---@param out? string[]
---@return string[]
function reports.differences(a, b, a_name, b_name, out)
  out = out or {}
  local function walk(x, y, path)
    if type(x) == "table" and type(y) == "table" then
      local keys = {}
      for k in pairs(x) do keys[#keys + 1] = k end
      for k in pairs(y) do if x[k] == nil then keys[#keys + 1] = k end end
      table.sort(keys, function(p, q) return tostring(p) < tostring(q) end)
      for _, k in ipairs(keys) do walk(x[k], y[k], path == "" and tostring(k) or path .. "." .. tostring(k)) end
    elseif x ~= y then
      out[#out + 1] = string.format("%s: %s %s, %s %s", path, reports.show(x), a_name, reports.show(y), b_name)
    end
  end
  walk(a, b, "")
  return out
end

--- A copy of a report without the counts named in dropped (what may differ
--- between the two checks compared: the clock, the restorer's counts).
---@param doc table
---@param dropped string[]
---@return table
function reports.comparable(doc, dropped)
  local copy = {}
  for k, v in pairs(doc) do copy[k] = v end
  if type(doc.counts) == "table" then
    copy.counts = {}
    for k, v in pairs(doc.counts) do copy.counts[k] = v end
    for _, field in ipairs(dropped) do copy.counts[field] = nil end
  end
  return copy
end

return reports
