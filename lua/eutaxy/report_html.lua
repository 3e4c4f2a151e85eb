--- `eutaxy check --html FILE`: the checker's result as one self-contained
-- HTML page. For VIOLATED, a sequence diagram of the counterexample (one
-- lifeline per client request, the worker and each object; calls and answers
-- as arrows, the fault in red where it struck, a lost answer ending in an X,
-- alarm firings on the virtual time axis), the violating rows and the replay
-- command; for every verdict, what was explored and the coverage of fault
-- points.
--
-- The page loads nothing: inline CSS, inline SVG and a small inline script
-- that reports errors into the page itself, under a Content-Security-Policy
-- that forbids any fetch. Every piece of user text (object names, rows,
-- labels) goes through esc(), so a scenario cannot inject markup.
local report_html = {}

local function esc(s)
  return (tostring(s):gsub("[&<>\"']", {
    ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;", ["'"] = "&#39;",
  }))
end
report_html.escape = esc

-- At most n characters, cut on a UTF-8 boundary, with an ellipsis when cut.
local function clip(s, n)
  if #s <= n then return s end
  local cut = n - 1
  while cut > 0 and (s:byte(cut + 1) or 0) & 0xC0 == 0x80 do cut = cut - 1 end
  return s:sub(1, cut) .. "…"
end

local function fmt_ms(ms)
  return string.format("+%d.%03d s", ms // 1000, ms % 1000)
end

-- ---- the sequence diagram ------------------------------------------------------

local ROW, COL, LEFT, TOP = 30, 250, 110, 64
local CHAR = 7.4     -- px per character of the diagram's 12px monospace
local RIGHT = 200    -- room right of the last lifeline for its notes

-- Lifelines: the drive's clients first, then the worker, then objects as they appear.
local function lifelines(timeline, clients)
  local order, index = {}, {}
  local function add(name)
    if name and name ~= "" and not index[name] then
      order[#order + 1] = name
      index[name] = #order
    end
  end
  for _, c in ipairs(clients or {}) do
    for _, e in ipairs(timeline) do
      if e.from == c or e.to == c then add(c) break end
    end
  end
  for _, e in ipairs(timeline) do
    if e.from == "worker" or e.to == "worker" then add("worker") break end
  end
  for _, e in ipairs(timeline) do
    add(e.from)
    add(e.to)
  end
  return order, index
end

-- A fault on a call is decided before the call leaves: drawn after the
-- arrow it struck, on that arrow.
local CALL_FAULTS = { ["rpc-fail"] = true, ambiguous = true, ["caller-crash"] = true, overloaded = true }

local function rows_of(timeline)
  local rows, i = {}, 1
  while i <= #timeline do
    local e, nxt = timeline[i], timeline[i + 1]
    local kind = e.kind == "fault" and e.text:match("^(%S+)")
    if kind and CALL_FAULTS[kind] and nxt and (nxt.kind == "call" or nxt.kind == "dropped") and nxt.from == e.from then
      rows[#rows + 1] = nxt
      rows[#rows + 1] = { t = e.t, kind = "fault", from = nxt.from, to = nxt.to, text = e.text, fault = kind }
      i = i + 2
    else
      if kind then e = { t = e.t, kind = "fault", from = e.from, to = e.to, text = e.text, fault = kind } end
      rows[#rows + 1] = e
      i = i + 1
    end
  end
  return rows
end

-- An RPC call's text is its encoded arguments, the method first: acquire("p-1", ...).
local function call_text(text)
  local method, rest = text:match('^"([%w_]+)", (.*)$')
  if method then return method .. "(" .. rest .. ")" end
  method = text:match('^"([%w_]+)"$')
  if method then return method .. "()" end
  return text
end

local FAULT_SAYS = {
  ["ambiguous"] = "ran and committed; its answer will be lost",
  ["rpc-fail"] = "lost before it arrived",
  ["caller-crash"] = "the caller crashes right after the answer",
  ["reset"] = "in-memory state lost",
  ["alarm-fail"] = "the alarm throws before it commits",
  ["alarm-lost"] = "the alarm's completion will be lost",
  ["resend"] = "the client sends it again",
  ["delivery-fail"] = "the delivery fails",
  ["delivery-timeout"] = "the delivery times out",
  ["cron-fail"] = "the cron's invocation fails before it runs",
  ["cron-lost"] = "the cron's outcome will be lost",
  ["overloaded"] = "refused: the object is overloaded",
}

local function diagram(r)
  local timeline = r.timeline or {}
  local names, at = lifelines(timeline, r.events)
  local rows = rows_of(timeline)
  local width = LEFT + math.max(#names, 1) * COL + RIGHT
  local height = TOP + 30 + #rows * ROW + 20
  local out = {}
  local function put(fmt, ...) out[#out + 1] = string.format(fmt, ...) end
  local function x(name) return LEFT + ((at[name] or 1) - 0.5) * COL end
  -- a note may run on to the next lifeline; the last one has the margin
  local function note_chars(name)
    return math.floor(((at[name] == #names and COL / 2 + RIGHT or COL) - 24) / CHAR)
  end

  put('<svg class="seq" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="sequence diagram of the counterexample">',
    width, height, width, height)
  put('<defs><marker id="head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#333"/></marker>'
    .. '<marker id="open" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10" fill="none" stroke="#333" stroke-width="1.5"/></marker></defs>')
  -- the virtual time axis
  put('<line class="axis" x1="%d" y1="%d" x2="%d" y2="%d"/>', LEFT - 16, TOP + 10, LEFT - 16, height - 10)
  put('<text class="axis-title" x="8" y="%d">virtual time</text>', TOP + 4)
  -- lifelines
  for i, name in ipairs(names) do
    local cx = LEFT + (i - 0.5) * COL
    local kind = name == "worker" and "worker" or name:match("^DO:") and "object" or "client"
    put('<g class="lifeline %s"><title>%s</title><rect x="%d" y="8" width="%d" height="34" rx="6"/>', kind, esc(name),
      math.floor(cx - COL / 2 + 12), COL - 24)
    put('<text class="head" x="%d" y="30">%s</text>', math.floor(cx), esc(clip(name, 30)))
    put('<line x1="%d" y1="42" x2="%d" y2="%d"/></g>', math.floor(cx), math.floor(cx), height - 10)
  end
  local last_t
  for i, e in ipairs(rows) do
    local y = TOP + 20 + (i - 1) * ROW
    if e.t ~= last_t then
      put('<line class="tick" x1="%d" y1="%d" x2="%d" y2="%d"/>', LEFT - 20, y - ROW / 2 + 4, width - 8, y - ROW / 2 + 4)
      put('<text class="time" x="8" y="%d">%s</text>', y + 4, esc(fmt_ms(e.t)))
      last_t = e.t
    end
    local x1, x2 = x(e.from), e.to ~= "" and x(e.to) or nil
    local text = (e.kind == "call" or e.kind == "dropped") and call_text(e.text) or e.text
    local full = string.format("%s %s %s%s: %s", fmt_ms(e.t), e.from, e.kind, e.to ~= "" and (" → " .. e.to) or "", e.text)
    if x2 and x2 ~= x1 and (e.kind == "send" or e.kind == "call" or e.kind == "answer") then
      local dashed = e.kind == "answer" and ' stroke-dasharray="6 4"' or ""
      local chars = math.floor(math.abs(x2 - x1) / CHAR) - 2
      put('<g class="arrow %s"><title>%s</title><line x1="%d" y1="%d" x2="%d" y2="%d"%s marker-end="url(#%s)"/>',
        e.kind, esc(full), x1, y, x2, y, dashed, e.kind == "answer" and "open" or "head")
      put('<text x="%d" y="%d">%s</text></g>', math.floor((x1 + x2) / 2), y - 5, esc(clip(text, chars)))
    elseif x2 and x2 ~= x1 and (e.kind == "lost" or e.kind == "dropped") then
      -- the arrow stops short of its target and ends in an X: it never arrives
      local stop = x1 + (x2 - x1) * 0.55
      local chars = math.floor(math.abs(x2 - x1) / CHAR) - 2
      local says = e.kind == "lost" and "answer lost: " or "call lost on the way: "
      put('<g class="arrow %s"><title>%s</title><line x1="%d" y1="%d" x2="%d" y2="%d" stroke-dasharray="%s"/>',
        e.kind, esc(full), x1, y, math.floor(stop), y, e.kind == "lost" and "6 4" or "none")
      put('<path class="x-mark" d="M%d,%d L%d,%d M%d,%d L%d,%d"/>', math.floor(stop) - 7, y - 7, math.floor(stop) + 7, y + 7,
        math.floor(stop) - 7, y + 7, math.floor(stop) + 7, y - 7)
      put('<text x="%d" y="%d">%s</text></g>', math.floor((x1 + x2) / 2), y - 10, esc(clip(says .. text, chars)))
    elseif e.kind == "fault" then
      local cx = x2 and (x1 + x2) / 2 or x1
      local says = FAULT_SAYS[e.fault]
      if e.fault == "reset" and e.text:find(" while ", 1, true) then
        says = e.text:find(" while the worker ", 1, true) and "its client goes away"
          or "while it waits; its calls run on"
      end
      local label = "FAULT " .. e.fault .. (says and (": " .. says) or "")
      local w = math.min(utf8.len(label) * CHAR + 16, COL * 2 - 20)
      put('<g class="fault" data-kind="%s"><title>%s</title><rect x="%d" y="%d" width="%d" height="20" rx="4"/>',
        esc(e.fault), esc(e.text), math.floor(cx - w / 2), y - 12, math.floor(w))
      put('<text x="%d" y="%d">%s</text></g>', math.floor(cx), y + 3, esc(clip(label, math.floor((w - 16) / CHAR))))
    elseif e.kind == "alarm" then
      put('<g class="alarm"><title>%s</title><circle cx="%d" cy="%d" r="8"/><path d="M%d,%d L%d,%d L%d,%d"/>',
        esc(full), x1, y, x1, y - 5, x1, y, x1 + 4, y + 2)
      put('<text x="%d" y="%d">%s</text></g>', x1 + 14, y + 4, esc(clip(text, note_chars(e.from))))
    else
      put('<g class="note"><title>%s</title><circle cx="%d" cy="%d" r="3"/>', esc(full), x1, y)
      put('<text x="%d" y="%d">%s</text></g>', x1 + 8, y + 4, esc(clip(text, note_chars(e.from))))
    end
  end
  put('</svg>')
  return table.concat(out, "\n")
end

-- ---- tables ---------------------------------------------------------------

local function cell(v)
  if v == nil then return '<td class="null">NULL</td>' end
  return "<td>" .. esc(v) .. "</td>"
end

local function rows_table(columns, rows)
  if not columns or not rows or #rows == 0 then return "" end
  local out = { '<table class="rows"><thead><tr>' }
  for _, c in ipairs(columns) do out[#out + 1] = "<th>" .. esc(c) .. "</th>" end
  out[#out + 1] = "</tr></thead><tbody>"
  for _, row in ipairs(rows) do
    out[#out + 1] = "<tr>"
    for _, c in ipairs(columns) do out[#out + 1] = cell(row[c]) end
    out[#out + 1] = "</tr>"
  end
  out[#out + 1] = "</tbody></table>"
  return table.concat(out)
end

local function kinds_html(list, class)
  local parts = {}
  for _, k in ipairs(list) do parts[#parts + 1] = string.format('<span class="kind %s">%s</span>', class, esc(k)) end
  return table.concat(parts, " ")
end

local function coverage_table(rows)
  if not rows or #rows == 0 then return "<p>No fault point was reached.</p>" end
  local out = { '<table class="coverage"><thead><tr><th>fault point</th><th>schedules that reached it</th>'
    .. '<th>kinds tried</th><th>kinds never tried</th></tr></thead><tbody>' }
  for _, c in ipairs(rows) do
    local never = kinds_html(c.untried, "untried")
    if c.why then never = never .. ' <span class="why">' .. esc(c.why) .. "</span>" end
    out[#out + 1] = string.format('<tr%s><td class="point">%s</td><td class="num">%d</td><td>%s</td><td>%s</td></tr>',
      #c.untried > 0 and ' class="gap"' or "", esc(c.point), c.reached, kinds_html(c.tried, "tried"), never)
  end
  out[#out + 1] = "</tbody></table>"
  return table.concat(out)
end

local function summary(r)
  local out = {}
  local function li(label, value) out[#out + 1] = string.format("<li><b>%s</b> %s</li>", esc(label), value) end
  if r.schedules then
    local parts = {}
    for _, b in ipairs(r.byFaultsList or {}) do
      parts[#parts + 1] = string.format("%d with %d fault%s", b.schedules, b.faults, b.faults == 1 and "" or "s")
    end
    li("Schedules explored:", esc(string.format("%d%s in %d ms", r.schedules,
      #parts > 0 and (" (" .. table.concat(parts, ", ") .. ")") or "", r.elapsedMs or 0)))
    local kinds = {}
    for _, k in ipairs(r.faultKindsList or {}) do
      local n = (r.faultsByKind or {})[k]
      if n then kinds[#kinds + 1] = string.format("%s: %d", k, n) end
    end
    li("Faults injected, by kind:", esc(#kinds > 0 and table.concat(kinds, ", ") or "none"))
  end
  if r.bounds then li("Bounds:", esc(r.bounds)) end
  if r.faultKinds then li("Fault kinds in play:", esc(r.faultKinds)) end
  return "<ul class=\"summary\">" .. table.concat(out) .. "</ul>"
end

local CSS = [[
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #222; margin: 24px; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px; }
.verdict { display: inline-block; padding: 2px 10px; border-radius: 4px; color: #fff; background: #2e7d32; }
.verdict.VIOLATED, .verdict.NONDETERMINISTIC { background: #c62828; } .verdict.INCONCLUSIVE { background: #b26a00; }
.message { font-size: 15px; } code, pre, td.point { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12.5px; }
pre.replay { background: #f4f4f4; padding: 8px 12px; border-radius: 4px; overflow-x: auto; }
.diagram { overflow-x: auto; border: 1px solid #ddd; border-radius: 6px; padding: 4px; }
svg.seq text { font: 12px ui-monospace, "DejaVu Sans Mono", monospace; fill: #222; }
svg.seq .lifeline rect { fill: #eef3fb; stroke: #5b7db1; } svg.seq .lifeline.client rect { fill: #f3f3f3; stroke: #888; }
svg.seq .lifeline.worker rect { fill: #eef8ee; stroke: #5a9a5a; }
svg.seq .lifeline line { stroke: #bbb; stroke-dasharray: 4 4; } svg.seq text.head { text-anchor: middle; font-weight: bold; }
svg.seq .axis { stroke: #999; } svg.seq .tick { stroke: #eee; } svg.seq text.time { fill: #666; } svg.seq text.axis-title { fill: #666; font-style: italic; }
svg.seq .arrow line { stroke: #333; stroke-width: 1.4; } svg.seq .arrow text { text-anchor: middle; }
svg.seq .arrow.lost line, svg.seq .arrow.dropped line { stroke: #c62828; } svg.seq .arrow.lost text, svg.seq .arrow.dropped text { fill: #c62828; font-weight: bold; }
svg.seq .x-mark { stroke: #c62828; stroke-width: 3; }
svg.seq .fault rect { fill: #c62828; } svg.seq .fault text { fill: #fff; text-anchor: middle; font-weight: bold; }
svg.seq .alarm circle { fill: #fff3e0; stroke: #e65100; stroke-width: 2; } svg.seq .alarm path { stroke: #e65100; fill: none; stroke-width: 1.5; }
svg.seq .alarm text { fill: #e65100; font-weight: bold; } svg.seq .note circle { fill: #888; } svg.seq .note text { fill: #666; font-style: italic; }
.legend span { margin-right: 18px; } .legend .red { color: #c62828; font-weight: bold; } .legend .orange { color: #e65100; font-weight: bold; }
table { border-collapse: collapse; margin: 6px 0; } th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } td.null { color: #999; font-style: italic; } td.num { text-align: right; }
table.coverage tr.gap td { background: #fff8e1; } td.point { white-space: nowrap; } .kind { display: inline-block; border-radius: 3px; padding: 0 5px; margin: 1px; font-size: 12px; }
.kind.tried { background: #e8f5e9; color: #1b5e20; } .kind.untried { background: #ffebee; color: #b71c1c; } .why { color: #8a6d00; font-size: 12px; }
ul.faults li { color: #c62828; } #errors { color: #c62828; }
]]

-- window.onerror writes any script error into the page, so a headless
-- browser's DOM shows it; data-render says the page was drawn.
local SCRIPT = [[
window.onerror = function (message, source, line) {
  document.getElementById('errors').textContent += 'error: ' + message + ' (line ' + line + ')\n';
  document.body.setAttribute('data-render', 'error');
};
(function () {
  var svg = document.querySelector('svg.seq');
  document.body.setAttribute('data-arrows', String(svg ? svg.querySelectorAll('.arrow').length : 0));
  document.body.setAttribute('data-faults', String(svg ? svg.querySelectorAll('.fault').length : 0));
  document.body.setAttribute('data-lost', String(svg ? svg.querySelectorAll('.arrow.lost, .arrow.dropped').length : 0));
  if (document.body.getAttribute('data-render') !== 'error') document.body.setAttribute('data-render', 'ok');
})();
]]

--- The whole page for a checker result (the table checker.lua builds).
function report_html.render(r)
  local out = {}
  local function put(s) out[#out + 1] = s end
  put("<!DOCTYPE html>")
  put('<html lang="en"><head><meta charset="utf-8">')
  put([[<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'">]])
  put(string.format("<title>%s %s</title>", esc(r.verdict or "?"), esc(r.scenario or "")))
  put("<style>" .. CSS .. "</style></head>")
  put('<body data-render="pending">')
  -- a shard's verdict is its part's, never the scenario's
  local part = r.shard and string.format(" in shard %d/%d", r.shard.k, r.shard.n) or ""
  local merged = r.merged and string.format(", merged from %d shards", r.merged.n) or ""
  put(string.format('<h1><span class="verdict %s">%s</span>%s %s%s</h1>', esc(r.verdict or ""), esc(r.verdict or "?"),
    esc(part), esc(r.scenario or ""), esc(merged)))
  put(string.format("<p>seed <code>%s</code>%s%s</p>", esc(r.seed), r.file and (" · scenario <code>" .. esc(r.file) .. "</code>") or "",
    r.fingerprint and (" · fingerprint <code>" .. esc(r.fingerprint:sub(1, 12)) .. "</code>") or ""))
  if r.verdict == "VIOLATED" or r.verdict == "HOLDS" then
    if r.invariant then
      put(string.format('<p class="message">Invariant <b>%s</b> is violated: %s</p>', esc(r.invariant), esc(r.message or "")))
    end
    if r.turn then
      put(string.format("<p>Broken after the turn of <code>%s</code> in <code>%s</code> at %d.%03ds, where the run stopped.</p>",
        esc(r.turn.task), esc(r.turn.object), r.turn.atMs // 1000, r.turn.atMs % 1000))
    end
    if r.capped then put("<p>This run reached alarmsPerObject: an alarm it needed may not have fired.</p>") end
    put(string.format("<p>Schedule <code>%s</code>, events kept: %s</p>", esc(r.schedule or ""),
      esc(table.concat(r.events or {}, ", "))))
    if r.faults and #r.faults > 0 then
      put('<ul class="faults">')
      for _, f in ipairs(r.faults) do put("<li>" .. esc(f) .. "</li>") end
      put("</ul>")
    else
      put("<p>No fault: the events' interleaving alone.</p>")
    end
    put("<h2>The counterexample</h2>")
    put('<p class="legend"><span>→ call or request</span><span>⇢ answer</span>'
      .. '<span class="red">✕ an answer or call that never arrives</span><span class="red">FAULT where it struck</span>'
      .. '<span class="orange">◷ alarm firing</span></p>')
    put('<div class="diagram">' .. diagram(r) .. "</div>")
    if r.columns and r.rows and #r.rows > 0 then
      put("<h2>The violating rows</h2>")
      put(rows_table(r.columns, r.rows))
    end
    if r.replay then
      put("<h2>Replay</h2>")
      put('<pre class="replay">' .. esc(r.replay) .. "</pre>")
    end
  elseif r.verdict == "INCONCLUSIVE" then
    put("<p>" .. esc(r.why or "") .. "</p>")
    if r.unreachedWhy then
      put('<ul class="faults">')
      for _, name in ipairs(r.neverReached) do put("<li>" .. esc(r.unreachedWord .. ": " .. name) .. "</li>") end
      put("</ul>")
      put("<p>" .. esc(r.unreachedWhy) .. "</p>")
    end
  elseif r.verdict == "NONDETERMINISTIC" then
    put("<pre>" .. esc(r.message or "") .. "</pre>")
  end
  if r.schedules then
    put("<h2>What was explored</h2>")
    put(summary(r))
    put("<h2>Coverage of fault points</h2>")
    put("<p>Every place a fault could strike that the explored schedules reached, and the kinds of fault tried there. "
      .. "A kind never tried marks code that a bound kept from being tested.</p>")
    put(coverage_table(r.coverage))
  end
  if r.trace and #r.trace > 0 then
    put("<h2>Trace</h2><details><summary>every event with its virtual time</summary><pre>")
    for _, l in ipairs(r.trace) do put(esc(l)) end
    put("</pre></details>")
  end
  put('<pre id="errors"></pre>')
  put("<script>" .. SCRIPT .. "</script>")
  put("</body></html>")
  return table.concat(out, "\n") .. "\n"
end

return report_html
