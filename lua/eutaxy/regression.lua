--- `eutaxy check --save-regression`: writes a violating schedule into the
-- scenario file's `regressions = { ... }` list, editing its text.
--
-- The file is the user's: only the list changes, in the layout around it.
-- Its text is read as Lua tokens (strings and comments stepped over whole,
-- so a brace inside one is no brace), the table given to sim.defineScenario
-- or sim.variant is found by the line the scenario was defined on, and the
-- entry goes into its regressions list, or a new regressions field at the
-- table's end. Where that table is not written out in the file (a variable,
-- a function's result), nothing is written and the caller is told why. The
-- new text must still compile before it replaces the file, through a
-- temporary file renamed over it.
local regression = {}

local LONG_OPEN = "^%[(=*)%["

-- The tokens of src: { kind = "name"|"string"|"number"|"op"|"comment", s, e, line }
-- (spaces left out), or nil and why.
local function tokens(src)
  local list, i, line, n = {}, 1, 1, #src
  local function add(kind, s, e)
    list[#list + 1] = { kind = kind, s = s, e = e, line = line, text = src:sub(s, e) }
  end
  -- past a long bracket opening at i: the index of its last byte, or nil
  local function long_end(at)
    local eqs = src:match(LONG_OPEN, at)
    if not eqs then return nil end
    local _, close = src:find("]" .. eqs .. "]", at + #eqs + 2, true)
    return close
  end
  while i <= n do
    local c = src:sub(i, i)
    local start, start_line = i, line
    if c == "\n" then
      line = line + 1
      i = i + 1
    elseif c:find("%s") then
      i = i + 1
    elseif src:find("^%-%-", i) then
      local long = src:find(LONG_OPEN, i + 2) == i + 2
      local close = long and long_end(i + 2)
      if long and not close then return nil, "a comment that never ends", start_line end
      local e = close or (src:find("\n", i, true) or n + 1) - 1
      local _, breaks = src:sub(i, e):gsub("\n", "")
      line = line + breaks
      i = e + 1
      list[#list + 1] = { kind = "comment", s = start, e = e, line = start_line }
    elseif c == '"' or c == "'" then
      local j = i + 1
      while j <= n do
        local d = src:sub(j, j)
        if d == "\\" then
          if src:sub(j + 1, j + 1) == "\n" then line = line + 1 end
          j = j + 2
        elseif d == c then
          break
        elseif d == "\n" then
          return nil, "a string that never ends", start_line
        else
          j = j + 1
        end
      end
      if j > n then return nil, "a string that never ends", start_line end
      list[#list + 1] = { kind = "string", s = start, e = j, line = start_line, text = src:sub(start, j) }
      i = j + 1
    elseif c == "[" and src:find(LONG_OPEN, i) == i then
      local close = long_end(i)
      if not close then return nil, "a long string that never ends", start_line end
      local _, breaks = src:sub(i, close):gsub("\n", "")
      line = line + breaks
      list[#list + 1] = { kind = "string", s = start, e = close, line = start_line, text = src:sub(start, close) }
      i = close + 1
    elseif c:find("[%a_]") then
      local e = select(2, src:find("^[%w_]+", i))
      add("name", i, e)
      i = e + 1
    elseif c:find("%d") or (c == "." and src:find("^%.%d", i)) then
      local e = select(2, src:find("^[%w%.]+", i))
      while src:find("^[eEpP]", e) and src:find("^[+-]", e + 1) do e = select(2, src:find("^[+-][%w%.]*", e + 1)) end
      add("number", i, e)
      i = e + 1
    else
      local op = src:match("^%.%.%.", i) or src:match("^[=~<>]=", i) or src:match("^%.%.", i) or src:match("^//", i)
        or src:match("^::", i) or src:match("^<<", i) or src:match("^>>", i) or c
      add("op", i, i + #op - 1)
      i = i + #op
    end
  end
  return list
end

-- The index of the token that closes the bracket opened at tokens[i].
local PAIRS = { ["{"] = "}", ["("] = ")", ["["] = "]" }
local function closing(toks, i)
  local depth = 0
  for j = i, #toks do
    local t = toks[j]
    if t.kind == "op" then
      if PAIRS[t.text] then depth = depth + 1
      elseif t.text == "}" or t.text == ")" or t.text == "]" then
        depth = depth - 1
        if depth == 0 then return j end
      end
    end
  end
  return nil
end

-- The significant token before index j (comments skipped), and its index.
local function before(toks, j)
  for k = j - 1, 1, -1 do
    if toks[k].kind ~= "comment" then return toks[k], k end
  end
  return nil
end

-- The indentation of the line that holds byte position pos.
local function indent_at(src, pos)
  local line_start = pos
  while line_start > 1 and src:sub(line_start - 1, line_start - 1) ~= "\n" do line_start = line_start - 1 end
  return src:match("^[ \t]*", line_start), line_start
end

-- Whether tokens[j] is the first thing on its line.
local function first_on_line(src, toks, j)
  local _, line_start = indent_at(src, toks[j].s)
  return src:sub(line_start, toks[j].s - 1):find("^[ \t]*$") ~= nil
end

-- A string as Lua source.
local function quote(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    if c == "\n" then return "\\n" end
    if c == '"' or c == "\\" then return "\\" .. c end
    return string.format("\\%03d", c:byte())
  end) .. '"'
end

--- The entry as the list holds it.
function regression.entry_text(entry)
  if entry.invariant then
    return string.format("{ schedule = %s, invariant = %s }", quote(entry.schedule), quote(entry.invariant))
  end
  return string.format("{ schedule = %s }", quote(entry.schedule))
end

-- The table constructor given to the scenario's call: the indices of its
-- braces, or nil and why.
local function scenario_table(toks, line)
  local calls = {}
  for i, t in ipairs(toks) do
    if t.kind == "name" and (t.text == "defineScenario" or t.text == "variant") then
      local prev = before(toks, i)
      if prev and prev.kind == "op" and (prev.text == "." or prev.text == ":") then calls[#calls + 1] = i end
    end
  end
  local at
  for _, i in ipairs(calls) do
    if toks[i].line == line then at = i end
  end
  if not at and #calls == 1 then at = calls[1] end
  if not at then
    if #calls == 0 then return nil, "it has no sim.defineScenario or sim.variant call" end
    return nil, string.format("it has %d sim.defineScenario and sim.variant calls, none on line %s", #calls,
      tostring(line))
  end
  local name, k = toks[at].text, at + 1
  while toks[k] and toks[k].kind == "comment" do k = k + 1 end
  local t = toks[k]
  if t and t.kind == "op" and t.text == "(" then
    k = k + 1
    while toks[k] and toks[k].kind == "comment" do k = k + 1 end
    if name == "variant" then
      -- variant(file, { ... }): the table after the file
      if not (toks[k] and toks[k].kind == "string") then
        return nil, "sim.variant's first argument is not a string written in the file"
      end
      k = k + 1
      while toks[k] and toks[k].kind == "comment" do k = k + 1 end
      if not (toks[k] and toks[k].text == ",") then return nil, "sim.variant is not called with a table of fields" end
      k = k + 1
      while toks[k] and toks[k].kind == "comment" do k = k + 1 end
    end
    t = toks[k]
  end
  if not (t and t.kind == "op" and t.text == "{") then
    return nil, string.format("the argument of sim.%s on line %d is not a table written in the file", name,
      toks[at].line)
  end
  local close = closing(toks, k)
  if not close then return nil, "the table of sim." .. name .. " never closes" end
  return k, close
end

-- The regressions field of the table between open and close: the indices of
-- its list's braces, nil when it has none, or false and why.
local function regressions_list(toks, open, close)
  local k = open + 1
  while k < close do
    local t = toks[k]
    if t.kind == "op" and PAIRS[t.text] then
      k = closing(toks, k) + 1
    else
      if t.kind == "name" and t.text == "regressions" then
        local eq = toks[k + 1]
        if eq and eq.kind == "op" and eq.text == "=" then
          local v = k + 2
          while toks[v] and toks[v].kind == "comment" do v = v + 1 end
          if not (toks[v] and toks[v].kind == "op" and toks[v].text == "{") then
            return false, string.format("its regressions field (line %d) is not a list written in the file", t.line)
          end
          return v, closing(toks, v)
        end
      end
      k = k + 1
    end
  end
  return nil
end

-- src with an element added at the end of the table between toks[open] and
-- toks[close]: text_of(indent, on_lines) writes it, indented for a table laid
-- out on lines (a line of its own), or inline for one on a single line.
local function append(src, toks, open, close, text_of)
  local last, last_i = before(toks, close)
  local empty = last_i == open
  local sep = (empty or last.text == "," or last.text == ";") and "" or ","
  if first_on_line(src, toks, close) and toks[close].line > toks[open].line then
    -- laid out on lines: a line of its own, indented as the elements are
    local close_indent, line_start = indent_at(src, toks[close].s)
    local indent
    if not empty then
      local first = open + 1
      while toks[first].kind == "comment" do first = first + 1 end
      if first_on_line(src, toks, first) then indent = indent_at(src, toks[first].s) end
    end
    indent = indent or close_indent .. (close_indent:find("^\t") and "\t" or "  ")
    local insert = text_of(indent, true) .. ",\n"
    local head = sep == "" and src:sub(1, line_start - 1)
      or src:sub(1, last.e) .. sep .. src:sub(last.e + 1, line_start - 1)
    return head .. insert .. src:sub(line_start)
  end
  -- on one line: after the last element
  local at = empty and toks[open].e or last.e
  return src:sub(1, at) .. sep .. " " .. text_of("", false) .. (empty and " " or "") .. src:sub(at + 1)
end

--- Adds entry ({ schedule =, invariant = }) to the regressions of the
--- scenario defined on `line` of the file at path. Returns "added" or
--- "present" (the schedule is listed already), or nil and why not.
---@param path string
---@param line integer|nil
---@param entry { schedule: string, invariant: string|nil }
---@return string|nil, string|nil
function regression.save(path, line, entry)
  local f, err = io.open(path, "rb")
  if not f then return nil, err end
  local src = f:read("a")
  f:close()
  local toks, why, at = tokens(src)
  if not toks then return nil, string.format("%s:%d: %s", path, at, why) end
  local open, close = scenario_table(toks, line)
  if not open then return nil, path .. ": " .. close end
  local entry_text = regression.entry_text(entry)
  local lopen, lclose = regressions_list(toks, open, close)
  if lopen == false then return nil, path .. ": " .. lclose end
  local new
  if lopen then
    for k = lopen + 1, lclose - 1 do
      local t = toks[k]
      if t.kind == "string" and (t.text == quote(entry.schedule) or t.text:sub(2, -2) == entry.schedule) then
        return "present"
      end
    end
    new = append(src, toks, lopen, lclose, function(indent) return indent .. entry_text end)
  else
    new = append(src, toks, open, close, function(indent, lines)
      if not lines then return "regressions = { " .. entry_text .. " }" end
      local inner = indent .. (indent:find("^\t") and "\t" or "  ")
      return indent .. "regressions = {\n" .. inner .. entry_text .. ",\n" .. indent .. "}"
    end)
  end
  local ok, cerr = load(new, "=" .. path, "t")
  if not ok then return nil, path .. ": the edited text would not compile (" .. tostring(cerr) .. "); nothing was written" end
  local tmp = path .. ".save-regression"
  local out, oerr = io.open(tmp, "wb")
  if not out then return nil, oerr end
  local wrote, werr = out:write(new)
  local closed, cerr2 = out:close()
  if not wrote or not closed then
    os.remove(tmp)
    return nil, tostring(werr or cerr2)
  end
  local renamed, rerr = os.rename(tmp, path)
  if not renamed then
    os.remove(tmp)
    return nil, rerr
  end
  return "added"
end

return regression
