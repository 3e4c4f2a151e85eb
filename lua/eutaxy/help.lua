--- eutaxy.help: the text of `eutaxy help`, every command's --help and the
-- man page, from one table.
--
-- Each command's parser lives with the command (checker.lua, serve.lua,
-- starter.lua, main.c); the usage those parsers print on a mistake is taken
-- from here too, so there is one place to describe a flag. spec/help_spec.lua
-- reads the parsers' sources and fails when one accepts a flag this table
-- does not name.

---@class eutaxy.help
local help = {}

---@class eutaxy.help.Option
---@field [1] string the flag as typed, with its argument: "--seed S"
---@field [2] string what it does

---@class eutaxy.help.Command
---@field name string
---@field synopsis string what follows `eutaxy NAME` on the usage line
---@field summary string one line, for the list of commands
---@field description string a paragraph
---@field options eutaxy.help.Option[]
---@field exit string|nil what the exit codes mean

---@type eutaxy.help.Command[]
help.commands = {
  {
    name = "check",
    synopsis = "SCENARIO.lua [options] | --merge SHARD.json...",
    summary = "explore a scenario's schedules under faults",
    description = "Loads a scenario (sim.defineScenario), runs its drive in virtual time, injects faults at "
      .. "every call, explores the schedules within its bounds depth-first (fewest faults first), one order of "
      .. "each set of turns that commute (turns of different objects touch nothing in common), and checks "
      .. "its invariants at the end of every run (sim.always and sim.sometimes also after every turn that "
      .. "wrote). A violation is shrunk and printed with its schedule, its trace and the command that replays it. "
      .. "Every report carries a fingerprint of the scenario, the project's files, the options that shape the "
      .. "search and eutaxy itself. A check split with --shard K/N over machines is one verdict again with "
      .. "--merge: a shard's report speaks only for its part (BOUNDED in shard K/N).",
    options = {
      { "--replay SCHEDULE", "run one schedule (as a report prints it) and show its trace" },
      { "--save-regression", "with a VIOLATED result, add its schedule and invariant to the scenario file's "
          .. "regressions list; every check replays the regressions first, before exploring" },
      { "--json", "print the result as one JSON document" },
      { "--html FILE", "also write the result to FILE as one self-contained HTML page" },
      { "--random N", "explore N random schedules instead of all of them (never BOUNDED)" },
      { "--seed S", "the seed of --random (default 1)" },
      { "--shard K/N", "explore part K of N (1-based), reported as \"in shard K/N\": the N parts are the whole" },
      { "--merge FILE...", "one verdict from the --json reports of all N shards (same fingerprint, each K once)" },
      { "-j N, --jobs N, -jN", "explore with N processes" },
      { "--check-determinism", "run every schedule twice and fail on any difference" },
      { "--no-reduction", "explore every order of tied events, also those that only reorder independent turns" },
      { "--no-restore", "build every schedule's world from the start instead of returning to a state an earlier "
          .. "schedule passed through, and run the sweep's runs again rather than play them back (the same "
          .. "verdict and counts, slower)" },
      { "--by-fault-count", "explore the schedules with no fault first, then those with one, and so on, one "
          .. "tree a count, rather than all in one tree (a violation found has the fewest faults either way; "
          .. "without reduction the same counts, slower; a shard always does)" },
      { "--budget-ms MS", "the time budget (default: the scenario's bounds.budgetMs)" },
      { "--quiet", "print the verdict line only" },
      { "--coverage", "also write an LCOV tracefile, lcov.info (for genhtml or CI), of the lines of the "
          .. "project's Lua files the worker and objects ran, over every schedule explored (-j N's workers "
          .. "included); eutaxy's modules and the scenario are not counted" },
      { "--coverage-out FILE", "--coverage, written to FILE instead of lcov.info" },
      { "--end-states", "testing aid: add endStates (the digests of the distinct end states: the tables "
          .. "of the objects the scenario names, and the drive's answers) and endStateCount to --json; "
          .. "one process only: not with -j N, --random or --replay" },
      { "-h, --help", "this text" },
    },
    exit = "0 BOUNDED, 1 VIOLATED (or NONDETERMINISTIC), 2 bad usage or scenario, "
      .. "3 INCONCLUSIVE (the budget ran out, or a sim.sometimes was never reached)",
  },
  {
    name = "serve",
    synopsis = "WRANGLER.jsonc [options]",
    summary = "serve a wrangler.jsonc's worker and objects over HTTP",
    description = "Runs the worker and its objects as a local HTTP/1.1 server on the wall clock, one SQLite "
      .. "file per object under --state, alarms re-armed at start-up. env holds the config's vars and the "
      .. "secrets of the .dev.vars file beside it. An answer leaves only once the writes "
      .. "it follows are durable; the writes of concurrent requests share one sync per file. Idle objects "
      .. "are evicted and come back on their next call. The config's triggers.crons fire the worker's "
      .. "scheduled(controller, env, ctx) on the clock (UTC), each firing its own invocation; a failure is "
      .. "logged and retried after 2, 4, 8, 16, 32 and 64 s unless the handler called controller:noRetry(). "
      .. "eutaxy.fetch makes real HTTP and HTTPS requests, each once the writes before it are durable. "
      .. "SIGINT or SIGTERM finish the requests in flight and close every database.",
    options = {
      { "--port N", "port to listen on (default 8787; 0 takes any free port)" },
      { "--host H", "address to listen on (default 127.0.0.1)" },
      { "--state DIR", "where each object's SQLite file lives (default .eutaxy/state)" },
      { "--durability MODE", "full (default): an answer leaves once the writes it follows are fsynced; "
          .. "process: they survive a crash of the server but not a power loss (faster)" },
      { "--max-resident N", "objects kept loaded at once (default 1000); beyond it the least recently "
          .. "active are evicted" },
      { "--max-awake N", "resident objects kept awake at once (default 256; 0: all): heap unpacked and "
          .. "database open; the heaps of the others are packed, as what changed since their isolate was "
          .. "built, a tenth of the size or less, their databases closed, and both opened again on their "
          .. "next event" },
      { "--evict-after SECONDS", "evict an object idle this long (default 60; 0: never)" },
      { "--header-timeout SECONDS", "a request must arrive whole within this (default 10), else 408 and "
          .. "the connection is closed" },
      { "--idle-timeout SECONDS", "close a connection with nothing asked after this (default 60)" },
      { "--max-connections N", "connections served at once; more wait in the backlog (default: from the "
          .. "file descriptor limit)" },
      { "--cpu-limit N", "VM instructions per turn before an invocation is stopped (default 200000000): "
          .. "a runaway fetch answers 500" },
      { "--memory-limit MB", "memory of each object's and the worker's Lua state, an object's SQLite "
          .. "memory included (default 128)" },
      { "--max-object-bytes N", "the size one object's database may reach (default 1073741824, 1 GiB); "
          .. "a write past it fails, and requests whose turns it cost answer 507" },
      { "--test-clock MS", "for tests: a clock of the server's own that starts at MS (ms since 1970, "
          .. "UTC) and moves only when POST /__eutaxy/clock?advance=N asks (its answer, {\"now\":...}, leaves "
          .. "once the crons, alarms and sleeps that came due on the way have run); GET /__eutaxy/clock "
          .. "says the time" },
      { "--fetch-timeout SECONDS", "an outbound eutaxy.fetch must be answered whole within this "
          .. "(default 30), redirects included, else it raises TimeoutError" },
      { "--fetch-max-bytes N", "the largest response body an outbound fetch takes (default 16777216, "
          .. "16 MiB; at most 33554432); a larger one raises NetworkError and is not kept" },
      { "--ws-max-message N", "the largest WebSocket message a client may send (default 33554432, "
          .. "32 MiB, the most); a larger one closes its connection with 1009" },
      { "--ca-file FILE", "outbound HTTPS also trusts the CA certificates in FILE (PEM), besides the "
          .. "system's; certificates are always verified" },
      { "--quiet", "no request log on stderr" },
      { "-h, --help", "this text" },
    },
    exit = "0 after SIGINT or SIGTERM, 1 the server could not start, 2 bad usage or config",
  },
  {
    name = "init",
    synopsis = "DIR",
    summary = "write a small working project into DIR",
    description = "Writes a worker with one object, its wrangler.jsonc, a scenario whose check is BOUNDED, "
      .. "a spec, a .luarc.json for editors and a README into DIR, which must be missing or empty.",
    options = {
      { "-h, --help", "this text" },
    },
    exit = "0 written, 1 a file could not be written, 2 bad usage or DIR is not empty",
  },
  {
    name = "test",
    synopsis = "[BUSTED-ARGS]",
    summary = "run busted specs (default: the spec/ folder)",
    description = "Runs busted inside the eutaxy binary, with eutaxy's modules on the path, so specs run "
      .. "under the same build (sanitizers included) as the host. Every argument but eutaxy's own below "
      .. "goes to busted: its own options, such as --output=TAP and --filter, follow this text in eutaxy "
      .. "test --help. A relative path a spec gives testing.world is relative to the spec's folder, wherever "
      .. "busted runs from.",
    options = {
      { "--coverage, -c", "write an LCOV tracefile, lcov.info (for genhtml or CI; no LuaCov needed), of "
          .. "the lines of the project's Lua files that ran in the worlds' isolates and in the specs' own state: "
          .. "files under the working folder but specs (*_spec.lua, spec/), scenarios (*.sim.lua) and eutaxy's "
          .. "modules; written even when a spec fails" },
      { "--coverage-out FILE", "--coverage, written to FILE instead of lcov.info" },
      { "-h, --help", "this text, then busted's options" },
    },
    exit = "0 every spec passed, 1 one failed, 2 the coverage file could not be written",
  },
  {
    name = "run",
    synopsis = "FILE [ARGS]",
    summary = "run a Lua script with eutaxy's modules",
    description = "Runs FILE, Lua source (not bytecode), as the lua command would, with arg set and eutaxy's "
      .. "modules on the path: "
      .. "require \"eutaxy.testing\" builds a world, as a spec does. require finds the modules beside FILE "
      .. "(after eutaxy's own), and a relative path FILE gives testing.world is relative to FILE's folder.",
    options = {
      { "-h, --help", "this text (only as the first argument: later ones go to FILE)" },
    },
    exit = "0 the script ran, 1 it raised an error, 2 it could not be loaded",
  },
  {
    name = "version",
    synopsis = "",
    summary = "print the version",
    description = "Prints the version (also: eutaxy --version).",
    options = {
      { "--version", "the same, as a flag" },
      { "-h, --help", "this text" },
    },
  },
  {
    name = "help",
    synopsis = "[COMMAND | --man]",
    summary = "list the commands, or describe one",
    description = "Without COMMAND, lists the commands; with one, prints what eutaxy COMMAND --help prints. "
      .. "The same text makes the eutaxy(1) man page, which the build writes beside the binary.",
    options = {
      { "-h, --help", "this text (eutaxy --help lists the commands)" },
      { "--man", "print the eutaxy(1) man page, in roff (eutaxy help --man | man -l -)" },
    },
    exit = "0, or 2 for a command eutaxy does not have",
  },
}

local by_name = {}
for _, c in ipairs(help.commands) do by_name[c.name] = c end

--- The command named name, or nil.
---@param name string
---@return eutaxy.help.Command|nil
function help.command(name)
  return by_name[name]
end

-- Wraps text to width columns, each line after indent spaces.
local function wrap(text, indent, width)
  local lines, line = {}, nil
  for word in text:gmatch("%S+") do
    if line and #line + 1 + #word > width - indent then
      lines[#lines + 1] = (" "):rep(indent) .. line
      line = word
    else
      line = line and (line .. " " .. word) or word
    end
  end
  if line then lines[#lines + 1] = (" "):rep(indent) .. line end
  return table.concat(lines, "\n")
end

local function usage_line(c)
  return "usage: eutaxy " .. c.name .. (c.synopsis ~= "" and (" " .. c.synopsis) or "")
end

--- The help of one command, as `eutaxy help NAME` prints it.
---@param name string
---@return string
function help.text(name)
  local c = by_name[name]
  if not c then error("eutaxy.help: no command " .. tostring(name), 2) end
  local out = { usage_line(c), "", wrap(c.description, 2, 78), "" }
  local w = 0
  for _, o in ipairs(c.options) do w = math.max(w, #o[1]) end
  for _, o in ipairs(c.options) do
    out[#out + 1] = ("  %-" .. w .. "s  %s"):format(o[1], o[2])
  end
  if c.exit then
    out[#out + 1] = ""
    out[#out + 1] = "exit: " .. c.exit
  end
  return table.concat(out, "\n") .. "\n"
end

--- The list of commands, as `eutaxy help` prints it.
---@return string
function help.overview()
  local out = { "usage: eutaxy COMMAND [ARGS]", "", "commands:" }
  local w = 0
  for _, c in ipairs(help.commands) do w = math.max(w, #c.name) end
  for _, c in ipairs(help.commands) do
    out[#out + 1] = ("  %-" .. w .. "s  %s"):format(c.name, c.summary)
  end
  out[#out + 1] = ""
  out[#out + 1] = "eutaxy help COMMAND (or eutaxy COMMAND --help) describes one; eutaxy --version prints the version."
  return table.concat(out, "\n") .. "\n"
end

-- Escapes text for roff: backslashes, and a leading dot or quote.
local function roff_escape(s)
  s = s:gsub("\\", "\\e"):gsub("%-", "\\-")
  if s:find("^[.']") then s = "\\&" .. s end
  return s
end

--- The eutaxy(1) man page, in roff, from the same table.
---@return string
function help.roff()
  local out = {
    '.TH EUTAXY 1 "" "eutaxy" "User Commands"',
    ".SH NAME",
    "eutaxy \\- check, serve and test stateful objects written in Lua",
    ".SH SYNOPSIS",
    ".B eutaxy",
    ".I COMMAND",
    "[\\fIARGS\\fR]",
    ".SH DESCRIPTION",
    roff_escape("eutaxy hosts Durable-Object-style stateful objects written in Lua: each object has its own "
      .. "SQLite database and one alarm, and a stateless worker answers HTTP requests and calls the objects."),
    ".SH COMMANDS",
  }
  for _, c in ipairs(help.commands) do
    out[#out + 1] = ".SS " .. c.name
    out[#out + 1] = ".B eutaxy " .. c.name
    if c.synopsis ~= "" then out[#out + 1] = roff_escape(c.synopsis) end
    out[#out + 1] = ".PP"
    out[#out + 1] = roff_escape(c.description)
    for _, o in ipairs(c.options) do
      out[#out + 1] = ".TP"
      out[#out + 1] = "\\fB" .. roff_escape(o[1]) .. "\\fR"
      out[#out + 1] = roff_escape(o[2])
    end
    if c.exit then
      out[#out + 1] = ".PP"
      out[#out + 1] = "Exit status: " .. roff_escape(c.exit) .. "."
    end
  end
  out[#out + 1] = ".SH FILES"
  out[#out + 1] = ".TP"
  out[#out + 1] = ".B wrangler.jsonc"
  out[#out + 1] = roff_escape("the worker's config, in Wrangler's format: main, durable_objects.bindings (names "
    .. "to classes), and vars (names to strings, numbers, booleans or JSON objects and arrays), which env "
    .. "holds in the worker and in every object; other fields are ignored")
  out[#out + 1] = ".TP"
  out[#out + 1] = ".B .dev.vars"
  out[#out + 1] = roff_escape("beside wrangler.jsonc, if there is one: secrets, NAME=value a line, as Wrangler "
    .. "reads them (dotenv: export, quotes, # comments); env holds them over the vars of the same name. "
    .. "A line that does not read, or a name a binding has, is an error naming the file and the line. "
    .. "check, serve and a spec's world read it; a scenario's vars and a world's go over both")
  out[#out + 1] = ".SH ENVIRONMENT"
  out[#out + 1] = ".TP"
  out[#out + 1] = ".B EUTAXY_LUADIR"
  out[#out + 1] = roff_escape("the folder eutaxy's Lua modules are loaded from, instead of the source tree's lua/ "
    .. "(the binary in its build folder) or, installed, PREFIX/share/eutaxy/lua beside PREFIX/bin/eutaxy")
  out[#out + 1] = ".TP"
  out[#out + 1] = ".B EUTAXY_LUACDIR"
  out[#out + 1] = roff_escape("the folder of the bytecode the build compiled eutaxy's modules to, instead of the "
    .. "build's luac/ or, installed, PREFIX/share/eutaxy/luac; a module is loaded from it only when its bytecode was compiled from the very file found and is "
    .. "not older than it, else parsed from its source (EUTAXY_LUACDIR=/dev/null parses every one)")
  out[#out + 1] = ".SH SEE ALSO"
  out[#out + 1] = ".BR busted (1)"
  return table.concat(out, "\n") .. "\n"
end

--- busted's options, as `busted --help` prints them, for `eutaxy test --help`:
--- busted runs inside the binary, so its own --help cannot be reached.
---@return string
function help.busted()
  local ok, cli = pcall(require, "busted.modules.cli")
  if not ok then return "busted's options: busted is not installed (Debian's lua-busted)\n" end
  -- the default output busted.runner picks for this stdout
  local has_term, term = pcall(require, "term")
  local tty = has_term and term.isatty(io.stdout)
  local parser = cli({ standalone = false, output = tty and "utfTerminal" or "plainTerminal" })
  parser:set_name("eutaxy test")
  -- busted's parser answers --help as an error: its text, between "NAME: error: " and a hint to re-run
  local _, text = parser:parse({ "--help" })
  text = tostring(text):gsub("^eutaxy test: error: ", ""):gsub("\n?; re%-run with %-%-help for usage%.%s*$", "")
  -- busted's -c/--coverage (LuaCov) and its config file: eutaxy test takes -c itself (above)
  local kept, skipping = {}, false
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    if line:match("^%s+%-") or not line:match("^%s") then
      skipping = line:match("^%s+%-c, %-%-%[no%-%]coverage") or line:match("^%s+%-%-coverage%-config%-file")
    end
    if not skipping then kept[#kept + 1] = line end
  end
  return (table.concat(kept, "\n"):gsub("\n*$", "\n"))
end

--- `eutaxy help [COMMAND]`; returns the exit code.
---@param argv string[]
---@return integer
function help.main(argv)
  local name = argv[1]
  if name == nil then
    io.stdout:write(help.overview())
    return 0
  end
  if name == "-h" or name == "--help" then name = "help" end
  if name == "--man" then
    io.stdout:write(help.roff())
    return 0
  end
  if by_name[name] then
    io.stdout:write(help.text(name))
    if name == "test" then io.stdout:write("\n", help.busted()) end
    return 0
  end
  local names = {}
  for _, c in ipairs(help.commands) do names[#names + 1] = c.name end
  io.stderr:write(("eutaxy: unknown command '%s' (the commands: %s; eutaxy help COMMAND describes one)\n")
    :format(name, table.concat(names, ", ")))
  return 2
end

return help
