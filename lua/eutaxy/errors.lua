--- Error values that cross between isolates.
--
-- An error raised by user code in one isolate reaches the caller in another
-- as a table with `name`, `message`, `remote` (user code threw),
-- `retryable` (the infrastructure failed; trying again may work) and
-- `overloaded` (the object was too busy to take the call; trying again only
-- adds to its load), with a __tostring, so `pcall` works as `try` does in a
-- Durable Object.
local errors = {}

---@class eutaxy.Error
---@field name string
---@field message string
---@field remote boolean
---@field retryable boolean
---@field overloaded boolean
---@field stack string|nil
local Error = {}
Error.__index = Error
Error.__name = "eutaxy.Error"

function Error.__tostring(e)
  return tostring(e.name or "Error") .. ": " .. tostring(e.message)
end

errors.Error = Error

--- Makes an error value.
---@param name string
---@param message string
---@param fields table|nil extra fields (remote, retryable, ...)
---@return eutaxy.Error
function errors.new(name, message, fields)
  local e = { name = name, message = message }
  for k, v in pairs(fields or {}) do e[k] = v end
  return setmetatable(e, Error)
end

---@return boolean
function errors.is_error(v)
  return getmetatable(v) == Error
end

local primitive = { string = true, number = true, boolean = true }

--- A plain table that describes any Lua error value, ready to be cloned.
---@param e any the error value
---@param traceback string|nil
function errors.to_wire(e, traceback)
  local w
  if type(e) == "table" then
    w = {}
    for k, v in pairs(e) do
      if type(k) == "string" and primitive[type(v)] then w[k] = v end
    end
    if type(w.message) ~= "string" then
      local mt = getmetatable(e)
      w.message = (mt and mt.__tostring) and tostring(e) or tostring(w.message or "error")
    end
    if type(w.name) ~= "string" then w.name = "Error" end
  else
    w = { name = "Error", message = tostring(e) }
  end
  if w.remote == nil then w.remote = true end
  if w.retryable == nil then w.retryable = false end
  if w.overloaded == nil then w.overloaded = false end
  if traceback and w.stack == nil then w.stack = traceback end
  return w
end

--- The error value a caller sees for a wire error.
function errors.from_wire(w)
  if type(w) ~= "table" then return w end
  return setmetatable(w, Error)
end

return errors
