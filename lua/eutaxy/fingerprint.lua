--- eutaxy.fingerprint: what a check explored, as one hash.
--
-- Shards of one check run on different machines and are merged afterwards
-- (eutaxy check --merge). Their counts only add up to the whole if every
-- shard explored the same tree: the same scenario, the same worker and
-- modules, the same bounds and options, the same eutaxy. The fingerprint
-- hashes all of that, so a merge can refuse shards that did not.
--
-- The hash must be the same in every process and on every machine: files
-- are named by their path relative to the scenario's folder (or to the
-- folder they were found under), never by an absolute path, and only their
-- bytes count, never a time stamp. The inputs are one JSON document
-- (eutaxy.json sorts keys bytewise), hashed with FNV-1a 64: a mistake
-- detector, not a cryptographic hash; nobody is expected to forge one.
--
-- What a run can load: the isolates `require` from the worker's folder and
-- eutaxy's own lib folder (host/sandbox.c), the checker loads the scenario
-- and what it requires from the scenario's folder. The folders are listed
-- whole (every .lua below them, hidden folders skipped): a module no run
-- loads changes the fingerprint too, which errs on the safe side.

local json = require "eutaxy.json"
local core = require "eutaxy.core"
-- the eutaxy binary's own (host/luac.c): not there under a plain lua
local has_luac, luac = pcall(require, "eutaxy.luac")

local fingerprint = {}

--- FNV-1a 64 of the bytes of s, as 16 lower-case hex digits.
---@param s string
---@return string
fingerprint.hash = core.fnv1a64

--- The files under dir (recursively, symbolic links followed, names that
--- start with a dot skipped) whose name ends with .lua, as paths relative
--- to dir. Unordered. Nil and a message when dir cannot be listed.
---@type fun(dir: string): string[]|nil, string|nil
fingerprint.lua_files = core.lua_files

--- path without "." segments and with "x/.." folded away, so one file has one name.
---@param path string
---@return string
function fingerprint.normalize(path)
  local absolute = path:sub(1, 1) == "/"
  local parts = {}
  for part in path:gmatch("[^/]+") do
    if part == ".." and #parts > 0 and parts[#parts] ~= ".." then
      parts[#parts] = nil
    elseif part ~= "." then
      parts[#parts + 1] = part
    end
  end
  local s = table.concat(parts, "/")
  if absolute then return "/" .. s end
  return s == "" and "." or s
end

local function read(path)
  local f, err = io.open(path, "rb")
  if not f then error(err, 0) end
  local bytes = f:read("a")
  f:close()
  if not bytes then error(path .. ": cannot be read", 0) end
  return bytes
end

---@class eutaxy.fingerprint.Sources
---@field scenario string the scenario file, as given
---@field scenario_dir string its folder
---@field project string the worker's folder, as the scenario names it (relative to scenario_dir, or absolute)
---@field config string the config file, as the scenario names it
---@field libdir string the folder holding eutaxy/
---@field version string eutaxy's version
---@field options table what else changes the explored tree (plain values only)

--- The fingerprint of a check and what it was made of: the hash, and the
--- inputs (eutaxy, options, files: name -> hash of the bytes) as JSON shows
--- them. Raises a message naming the file that cannot be read.
---@param s eutaxy.fingerprint.Sources
---@return string, table
function fingerprint.compute(s)
  local files = {}
  -- hash: the file's, when known already
  local function add(name, path, hash)
    if not files[name] then files[name] = hash or fingerprint.hash(read(path)) end
  end
  -- a folder named twice (the scenario's is often the worker's too) is listed once
  local listed = {}
  -- known: path -> hash of the files whose hash is known already
  local function add_tree(under, name, known)
    listed[under] = listed[under] or assert(fingerprint.lua_files(under))
    for _, rel in ipairs(listed[under]) do
      local path = under .. "/" .. rel
      add(name(rel), path, known and known[path])
    end
  end
  local function join(rel)
    if rel:sub(1, 1) == "/" then return rel end
    return s.scenario_dir .. "/" .. rel
  end
  -- A file the scenario names by a relative path is named relative to the
  -- scenario's folder (the same on every checkout); one under an absolute
  -- folder, by its role and the path below that folder.
  local function name_in(dir, role, rel)
    if dir:sub(1, 1) == "/" then return role .. ":" .. fingerprint.normalize(rel) end
    return fingerprint.normalize(dir .. "/" .. rel)
  end
  local function add_dir(dir, role)
    add_tree(join(dir), function(rel) return name_in(dir, role, rel) end)
  end

  add(fingerprint.normalize(s.scenario:match("[^/]*$")), s.scenario)
  add_dir(".", "scenario")
  add_dir(s.project, "project")
  add(name_in(s.config:match("^(.*)/[^/]*$") or ".", "config", s.config:match("[^/]*$")), join(s.config))
  -- eutaxy's own modules, wherever this eutaxy was built or installed; the
  -- build hashed them, and a module not changed since is not read again
  add_tree(s.libdir .. "/eutaxy", function(rel) return "lib:eutaxy/" .. fingerprint.normalize(rel) end,
           has_luac and luac.digest() or nil)
  local inputs = { eutaxy = s.version, options = s.options, files = files }
  return fingerprint.hash(json.encode(inputs)), inputs
end

return fingerprint
