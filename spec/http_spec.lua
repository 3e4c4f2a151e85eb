local http = require "eutaxy.http"
local json = require "eutaxy.json"

local Headers, Request, Response = http.Headers, http.Request, http.Response

local function entries_of(headers)
  local out = {}
  for name, value in headers:entries() do out[#out + 1] = name .. "=" .. value end
  return table.concat(out, " ")
end

describe("eutaxy.http", function()
  describe("Headers", function()
    it("looks names up without regard to case", function()
      local h = Headers.new({ ["Content-Type"] = "text/plain" })
      assert.are.equal("text/plain", h:get("content-type"))
      assert.are.equal("text/plain", h:get("CONTENT-TYPE"))
      assert.is_true(h:has("Content-type"))
      assert.is_false(h:has("accept"))
      assert.is_nil(h:get("accept"))
    end)

    it("iterates lowercase names in insertion order", function()
      local h = Headers.new()
      h:append("X-B", "2")
      h:append("x-a", "1")
      h:append("X-C", "3")
      assert.are.equal("x-b=2 x-a=1 x-c=3", entries_of(h))
    end)

    it("adds a {name = value} table in name order, since tables have none", function()
      local h = Headers.new({ zed = "1", Alpha = "2", beta = "3" })
      assert.are.equal("alpha=2 beta=3 zed=1", entries_of(h))
    end)

    it("keeps the order of an array of pairs", function()
      local h = Headers.new({ { "Zed", "1" }, { "alpha", "2" } })
      assert.are.equal("zed=1 alpha=2", entries_of(h))
    end)

    it("accepts an array of values for a repeated header in a table", function()
      local h = Headers.new({ ["set-cookie"] = { "a=1", "b=2" } })
      assert.are.equal("set-cookie=a=1 set-cookie=b=2", entries_of(h))
    end)

    it("copies another Headers instead of sharing it", function()
      local a = Headers.new({ x = "1" })
      local b = Headers.new(a)
      b:set("x", "2")
      assert.are.equal("1", a:get("x"))
      assert.are.equal("2", b:get("x"))
    end)

    it("joins repeated values with a comma in get", function()
      local h = Headers.new()
      h:append("Accept", "text/html")
      h:append("accept", "application/json")
      assert.are.equal("text/html, application/json", h:get("accept"))
    end)

    it("replaces every value on set, keeping the place of the first", function()
      local h = Headers.new({ { "a", "1" }, { "b", "2" }, { "a", "3" } })
      h:set("A", "9")
      assert.are.equal("a=9 b=2", entries_of(h))
      h:set("c", "4")
      assert.are.equal("a=9 b=2 c=4", entries_of(h))
    end)

    it("removes every value on delete", function()
      local h = Headers.new({ { "a", "1" }, { "b", "2" }, { "a", "3" } })
      h:delete("A")
      assert.are.equal("b=2", entries_of(h))
      assert.is_false(h:has("a"))
    end)

    it("turns numbers into strings and trims surrounding whitespace", function()
      local h = Headers.new({ ["content-length"] = 12, x = "  padded\t" })
      assert.are.equal("12", h:get("content-length"))
      assert.are.equal("padded", h:get("x"))
    end)

    it("lists its entries as fresh {name, value} pairs", function()
      local h = Headers.new({ { "X-A", "1" }, { "x-b", "2" } })
      local list = h:toList()
      assert.are.same({ { "x-a", "1" }, { "x-b", "2" } }, list)
      list[1][2] = "changed"
      assert.are.equal("1", h:get("x-a"))
    end)

    it("refuses invalid names", function()
      assert.has_error(function() Headers.new({ ["bad name"] = "1" }) end,
        'Headers:append: invalid header name "bad name"')
      assert.has_error(function() Headers.new():get("") end, 'Headers:get: invalid header name ""')
      assert.has_error(function() Headers.new():set(1, "x") end,
        "Headers:set: invalid header name (a number)")
    end)

    it("refuses values with line breaks or of the wrong type", function()
      assert.has_error(function() Headers.new():set("x", "a\r\nInjected: 1") end,
        "Headers:set: the value of header x contains a line break or NUL")
      assert.has_error(function() Headers.new():append("x", {}) end,
        "Headers:append: the value of header x must be a string, got table")
    end)

    it("refuses an init that is neither a table nor Headers", function()
      assert.has_error(function() Headers.new("x: 1") end,
        "Headers.new: expected a table of headers, got string")
    end)

    it("refuses an array entry that is not a pair", function()
      assert.has_error(function() Headers.new({ { "a", "1" }, { "b" } }) end,
        "Headers.new: entry 2 must be a {name, value} pair")
    end)

    it("refuses a table mixing pairs and names", function()
      assert.has_error(function() Headers.new({ { "a", "1" }, b = "2" }) end)
    end)

    it("refuses names that are not strings in a {name = value} table", function()
      assert.has_error(function() Headers.new({ [true] = "1" }) end,
        "Headers.new: header names must be strings, got boolean")
    end)

    it("can be told apart from other tables", function()
      assert.is_true(http.is_headers(Headers.new()))
      assert.is_false(http.is_headers({}))
    end)
  end)

  describe("Request", function()
    it("defaults to GET with no body, resolving a path against http://localhost", function()
      local r = Request.new("/items?id=1")
      assert.are.equal("GET", r.method)
      assert.are.equal("http://localhost/items?id=1", r.url)
      assert.is_nil(r.body)
      assert.are.equal("", r:text())
      assert.is_true(http.is_headers(r.headers))
    end)

    it("uppercases the method", function()
      assert.are.equal("PATCH", Request.new("/", { method = "patch" }).method)
    end)

    it("takes headers and a body from init", function()
      local r = Request.new("http://h/x", {
        method = "POST", headers = { ["Content-Type"] = "application/json" }, body = '{"a":1}',
      })
      assert.are.equal("application/json", r.headers:get("content-type"))
      assert.are.equal('{"a":1}', r:text())
      assert.are.same({ a = 1 }, r:json())
    end)

    it("copies another request, letting init override its parts", function()
      local a = Request.new("/a", { method = "PUT", headers = { x = "1" }, body = "b" })
      local b = Request.new(a, { headers = { y = "2" } })
      assert.are.equal("PUT", b.method)
      assert.are.equal(a.url, b.url)
      assert.are.equal("b", b.body)
      assert.is_false(b.headers:has("x"))
      assert.are.equal("2", b.headers:get("y"))
    end)

    it("clones into a request with its own headers", function()
      local a = Request.new("/a", { method = "POST", headers = { x = "1" }, body = "b" })
      local b = a:clone()
      b.headers:set("x", "2")
      assert.are.equal("1", a.headers:get("x"))
      assert.are.equal("POST", b.method)
      assert.are.equal("b", b.body)
      assert.is_true(http.is_request(b))
    end)

    it("refuses a body on GET and HEAD, as fetch does", function()
      assert.has_error(function() Request.new("/", { body = "x" }) end,
        "Request.new: a GET request cannot have a body")
      assert.has_error(function() Request.new("/", { method = "head", body = "x" }) end,
        "Request.new: a HEAD request cannot have a body")
      local post = Request.new("/", { method = "POST", body = "x" })
      assert.has_error(function() Request.new(post, { method = "GET" }) end,
        "Request.new: a GET request cannot have a body")
    end)

    it("refuses a body that is not a string", function()
      assert.has_error(function() Request.new("/", { method = "POST", body = { a = 1 } }) end,
        "Request.new: body must be a string or nil, got table (use Response.json or json.encode for tables)")
      assert.has_error(function() Request.new("/", { method = "POST", body = 5 }) end,
        "Request.new: body must be a string or nil, got number")
    end)

    it("refuses an invalid URL or input", function()
      assert.has_error(function() Request.new("items") end,
        'Request.new: invalid URL: no scheme and not a path starting with / ("items")')
      assert.has_error(function() Request.new(42) end,
        "Request.new: expected a URL string or a Request, got number")
    end)

    it("refuses an invalid method or init", function()
      assert.has_error(function() Request.new("/", { method = "GE T" }) end,
        "Request.new: invalid method GE T")
      assert.has_error(function() Request.new("/", "POST") end,
        "Request.new: init must be a table, got string")
    end)

    it("follows redirects unless init says manual or error, and keeps the choice in a copy", function()
      assert.are.equal("follow", Request.new("/").redirect)
      local manual = Request.new("/", { redirect = "manual" })
      assert.are.equal("manual", manual.redirect)
      assert.are.equal("manual", Request.new(manual).redirect)
      assert.are.equal("error", Request.new(manual, { redirect = "error" }).redirect)
      assert.has_error(function() Request.new("/", { redirect = "never" }) end,
        'Request.new: redirect must be "follow", "manual" or "error", got never')
    end)

    it("refuses to decode an empty body as JSON", function()
      assert.has_error(function() Request.new("/"):json() end, "Request:json: the body is empty")
    end)

    it("reports malformed JSON bodies with json.decode's message", function()
      local r = Request.new("/", { method = "POST", body = "{" })
      local ok, err = pcall(r.json, r)
      assert.is_false(ok)
      assert.matches("^json%.decode: ", err)
    end)
  end)

  describe("Response", function()
    it("defaults to 200, ok, with empty statusText", function()
      local r = Response.new("hello")
      assert.are.equal(200, r.status)
      assert.are.equal("", r.statusText)
      assert.is_true(r.ok)
      assert.are.equal("hello", r.body)
      assert.are.equal("hello", r:text())
    end)

    it("is ok only for 200-299", function()
      assert.is_true(Response.new(nil, { status = 299 }).ok)
      assert.is_false(Response.new(nil, { status = 300 }).ok)
      assert.is_false(Response.new("down", { status = 503, statusText = "Unavailable" }).ok)
    end)

    it("keeps status, statusText and headers from init", function()
      local r = Response.new("x", { status = 418, statusText = "Teapot", headers = { { "X-A", "1" } } })
      assert.are.equal(418, r.status)
      assert.are.equal("Teapot", r.statusText)
      assert.are.equal("1", r.headers:get("x-a"))
    end)

    it("gives text() an empty string when there is no body", function()
      assert.are.equal("", Response.new(nil, { status = 204 }):text())
    end)

    it("refuses a status outside 200-599", function()
      assert.has_error(function() Response.new("x", { status = 42 }) end,
        "Response.new: status 42 is outside 200-599")
      assert.has_error(function() Response.new("x", { status = 600 }) end,
        "Response.new: status 600 is outside 200-599")
      assert.has_error(function() Response.new(nil, { status = 101 }) end,
        "Response.new: a 101 response needs a webSocket (the client end of a WebSocketPair)")
      assert.has_error(function() Response.new(nil, { status = 100 }) end,
        "Response.new: status 100 is outside 200-599")
    end)

    it("refuses a webSocket that is not an accepted pair's client end, or without 101", function()
      local pair = require("eutaxy.websocket").WebSocketPair.new()
      assert.has_error(function() Response.new(nil, { status = 101, webSocket = pair[1] }) end,
        "Response.new: the pair's server end (pair[2]) was not accepted: call self.ctx:acceptWebSocket(pair[2]) first")
      assert.has_error(function() Response.new(nil, { status = 101, webSocket = pair[2] }) end,
        "Response.new: webSocket must be the client end of the pair (pair[1])")
      assert.has_error(function() Response.new(nil, { status = 200, webSocket = pair[1] }) end,
        "Response.new: a response with a webSocket must have status 101, got 200")
      assert.has_error(function() Response.new(nil, { status = 101, webSocket = {} }) end,
        "Response.new: webSocket must be a WebSocket, got table")
    end)

    it("refuses a status that is not an integer", function()
      assert.has_error(function() Response.new("x", { status = "200" }) end,
        "Response.new: status must be an integer, got string")
      assert.has_error(function() Response.new("x", { status = 200.5 }) end,
        "Response.new: status must be an integer, got 200.5")
    end)

    it("accepts an integral float status as an integer", function()
      assert.are.equal("integer", math.type(Response.new("x", { status = 201.0 }).status))
    end)

    it("refuses a body on 204, 205 and 304", function()
      for _, status in ipairs({ 204, 205, 304 }) do
        assert.has_error(function() Response.new("", { status = status }) end,
          "Response.new: a " .. status .. " response cannot have a body")
      end
    end)

    it("refuses a body that is not a string", function()
      assert.has_error(function() Response.new({ a = 1 }) end,
        "Response.new: body must be a string or nil, got table (use Response.json or json.encode for tables)")
    end)

    it("refuses a statusText with a line break and an init that is not a table", function()
      assert.has_error(function() Response.new("x", { statusText = "a\nb" }) end,
        "Response.new: statusText must be a string without line breaks")
      assert.has_error(function() Response.new("x", 200) end,
        "Response.new: init must be a table, got number")
    end)

    it("decodes its body with json()", function()
      assert.are.same({ ok = true }, Response.new('{"ok":true}'):json())
      assert.has_error(function() Response.new():json() end, "Response:json: the body is empty")
    end)

    it("clones into a response with its own headers", function()
      local a = Response.new("x", { status = 201, statusText = "Created", headers = { x = "1" } })
      local b = a:clone()
      b.headers:set("x", "2")
      assert.are.equal("1", a.headers:get("x"))
      assert.are.equal(201, b.status)
      assert.are.equal("Created", b.statusText)
      assert.are.equal("x", b.body)
      assert.is_true(http.is_response(b))
    end)
  end)

  describe("Response.json", function()
    it("encodes the value deterministically and sets the content type", function()
      local r = Response.json({ slot = "r-1", expiresAt = 1000 })
      assert.are.equal('{"expiresAt":1000,"slot":"r-1"}', r.body)
      assert.are.equal("application/json", r.headers:get("content-type"))
      assert.are.equal(200, r.status)
    end)

    it("keeps status and a content type given in init", function()
      local r = Response.json({ 1 }, { status = 201, headers = { ["Content-Type"] = "application/problem+json" } })
      assert.are.equal(201, r.status)
      assert.are.equal("application/problem+json", r.headers:get("content-type"))
    end)

    it("does not modify the init it was given", function()
      local init = { status = 202, headers = { x = "1" } }
      Response.json({}, init)
      assert.are.same({ status = 202, headers = { x = "1" } }, init)
    end)

    it("raises json.encode's error for values JSON cannot hold", function()
      assert.has_error(function() Response.json({ f = print }) end,
        "json.encode: cannot encode a function at .f")
    end)

    it("makes with no init what it makes with an empty one", function()
      local plain, empty = Response.json({ a = { 1, 2 } }), Response.json({ a = { 1, 2 } }, {})
      assert.are.same(getmetatable(empty), getmetatable(plain))
      assert.are.same(getmetatable(empty.headers), getmetatable(plain.headers))
      assert.are.same(empty.headers:toList(), plain.headers:toList())
      for _, field in ipairs({ "status", "statusText", "ok", "body", "webSocket" }) do
        assert.are.equal(empty[field], plain[field], field)
      end
      for k in pairs(empty) do assert.is_not_nil(plain[k], k) end
      for k in pairs(plain) do assert.is_not_nil(empty[k], k) end
      plain.headers:set("x-one", "1")
      assert.is_nil(Response.json(1).headers:get("x-one"))
    end)

    it("is distinct from the json() method of a response", function()
      local r = Response.json({ a = 1 })
      assert.are.same({ a = 1 }, r:json())
    end)
  end)

  describe("Response.redirect", function()
    it("sets the status and an absolute location", function()
      local r = Response.redirect("/login", 303)
      assert.are.equal(303, r.status)
      assert.are.equal("http://localhost/login", r.headers:get("location"))
      assert.is_nil(r.body)
    end)

    it("defaults to 302 and refuses statuses that are not redirects", function()
      assert.are.equal(302, Response.redirect("http://h/").status)
      assert.has_error(function() Response.redirect("/", 200) end,
        "Response.redirect: status 200 is not a redirect status")
    end)

    it("refuses an invalid location", function()
      assert.has_error(function() Response.redirect("no") end,
        'Response.redirect: invalid URL: no scheme and not a path starting with / ("no")')
    end)
  end)

  describe("to_wire and from_wire", function()
    it("turns a request into plain data", function()
      local r = Request.new("/x", { method = "POST", headers = { { "X-A", "1" } }, body = "b" })
      local wire = http.to_wire(r)
      assert.are.same({
        kind = "request", method = "POST", url = "http://localhost/x",
        headers = { { "x-a", "1" } }, body = "b",
      }, wire)
      assert.is_nil(getmetatable(wire))
      assert.is_nil(getmetatable(wire.headers))
    end)

    it("turns a response into plain data", function()
      local r = Response.new("b", { status = 404, statusText = "Not Found", headers = { x = "1" } })
      assert.are.same({
        kind = "response", status = 404, statusText = "Not Found",
        headers = { { "x", "1" } }, body = "b",
      }, http.to_wire(r))
    end)

    it("rebuilds an equal request and response", function()
      local req = Request.new("/q?a=1", { method = "PUT", headers = { { "b", "1" }, { "a", "2" } }, body = "x" })
      local back = http.from_wire(http.to_wire(req))
      assert.is_true(http.is_request(back))
      assert.are.same(http.to_wire(req), http.to_wire(back))

      local res = Response.new(nil, { status = 204, headers = { { "set-cookie", "a" }, { "set-cookie", "b" } } })
      local res_back = http.from_wire(http.to_wire(res))
      assert.is_true(http.is_response(res_back))
      assert.are.same(http.to_wire(res), http.to_wire(res_back))
    end)

    it("carries a redirect mode other than follow", function()
      local r = Request.new("/x", { redirect = "manual" })
      assert.are.equal("manual", http.to_wire(r).redirect)
      assert.are.equal("manual", http.from_wire(http.to_wire(r)).redirect)
      assert.is_nil(http.to_wire(Request.new("/x")).redirect)
    end)

    it("keeps plain data JSON-encodable", function()
      local wire = http.to_wire(Request.new("/x", { headers = { a = "1" } }))
      assert.are.equal('{"headers":[["a","1"]],"kind":"request","method":"GET","url":"http://localhost/x"}',
        json.encode(wire))
    end)

    it("checks rebuilt data as the constructors do", function()
      assert.has_error(function()
        http.from_wire({ kind = "response", status = 42, headers = {} })
      end, "Response.new: status 42 is outside 200-599")
      assert.has_error(function()
        http.from_wire({ kind = "request", method = "GET", url = "/", body = "x" })
      end, "Request.new: a GET request cannot have a body")
    end)

    it("refuses what is not a request or response", function()
      assert.has_error(function() http.to_wire({}) end,
        "http.to_wire: expected a Request or Response, got table")
      assert.has_error(function() http.from_wire("x") end, "http.from_wire: expected a table, got string")
      assert.has_error(function() http.from_wire({ kind = "socket" }) end,
        'http.from_wire: kind must be "request" or "response", got socket')
      assert.has_error(function()
        http.from_wire({ kind = "request", url = "/", headers = { a = "1" } })
      end, "http.from_wire: headers must be an array of {name, value} pairs")
    end)
  end)

  describe("is_request and is_response", function()
    it("tell requests, responses and other tables apart", function()
      local req, res = Request.new("/"), Response.new()
      assert.is_true(http.is_request(req))
      assert.is_false(http.is_request(res))
      assert.is_true(http.is_response(res))
      assert.is_false(http.is_response(req))
      assert.is_false(http.is_request({ method = "GET", url = "/" }))
      assert.is_false(http.is_response(nil))
    end)
  end)
end)
