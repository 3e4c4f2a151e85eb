--- eutaxy.fetch under `eutaxy serve`: real HTTP and HTTPS requests out of
-- the worker and out of objects, on loopback only. The HTTP target is a
-- second eutaxy serve (spec/fixtures/fetch/target.lua), the HTTPS one
-- openssl s_server -WWW with a self-signed certificate made here. Four
-- servers fetch: one that trusts that certificate (--ca-file) and takes at
-- most 4096 bytes of a body, two that trust only the system's CAs, one of
-- them waiting a short --fetch-timeout (the other's refusal of the
-- certificate must not race a timeout on a slow machine).
local h = dofile("spec/fixtures/serve/harness.lua")
local cjson = require "cjson"

local TARGET = "spec/fixtures/fetch/target.jsonc"
local CLIENT = "spec/fixtures/fetch/client.jsonc"
-- Under valgrind (EUTAXY_VALGRIND) a TLS handshake alone can take a second.
local TIMEOUT_MS = os.getenv("EUTAXY_VALGRIND") and 5000 or 500
local MAX_TIME = os.getenv("EUTAXY_VALGRIND") and 60 or 10

local function sh(cmd)
  local out, err, code = dofile("spec/helpers/process.lua").run(cmd)
  assert(code == 0, cmd .. ": " .. out .. err)
  return out
end

local function write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

-- POSTs a JSON body; the status and the body decoded.
local function post(server, path, body)
  local file = os.tmpname()
  write(file, cjson.encode(body))
  local out = h.sh(("curl -s --max-time %d -o - -w '\\n%%{http_code}' -X POST --data-binary @%s http://127.0.0.1:%s%s")
    :format(MAX_TIME, file, server.port, path))
  os.remove(file)
  local text, status = out:match("^(.*)\n(%d+)$")
  return tonumber(status), text and text ~= "" and cjson.decode(text) or nil
end

-- eutaxy.fetch(url, init) from the worker of server: what it answered, or { error = ... }.
local function fetch(server, url, init)
  local status, answer = post(server, "/fetch", { url = url, init = init })
  assert.are.equal(200, status)
  return answer
end

local function header(pairs, name)
  for _, p in ipairs(pairs) do
    if p[1] == name then return p[2] end
  end
end

-- openssl s_server -WWW in dir on a free port: it answers GET /FILE with
-- the file. Its output is line-buffered (stdbuf), so that the line saying
-- its port comes at once; the shell's pid line may come before or after.
local function start_tls(dir)
  local pipe = assert(io.popen(("sh -c 'cd %s && stdbuf -oL openssl s_server -WWW -accept 127.0.0.1:0 "
    .. "-cert cert.pem -key key.pem 2>/dev/null & echo $!; wait $!' 2>/dev/null"):format(dir)))
  local server = { pipe = pipe }
  while not (server.pid and server.port) do
    local line = pipe:read("l")
    assert(line, "openssl s_server printed no ACCEPT line")
    if line:find("^%d+$") then server.pid = line end
    server.port = server.port or line:match("^ACCEPT 127%.0%.0%.1:(%d+)$")
  end
  return server
end

describe("eutaxy.fetch under eutaxy serve", function()
  local dir, target, client, strict, untrusting, tls, T, S

  setup(function()
    if not h.have("curl") or not h.have("openssl") then return end
    dir = h.tempdir()
    sh(("cd %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout key.pem "
      .. "-out cert.pem -days 2 -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1,DNS:localhost 2>&1"):format(dir))
    write(dir .. "/hello.txt", "hello over TLS\n")
    write(dir .. "/big.txt", string.rep("y", 5000))
    tls = start_tls(dir)
    target = h.start(dir .. "/target", nil, TARGET)
    client = h.start(dir .. "/client", "--ca-file " .. dir .. "/cert.pem --fetch-max-bytes 4096", CLIENT)
    strict = h.start(dir .. "/strict", "--fetch-timeout " .. TIMEOUT_MS / 1000, CLIENT)
    untrusting = h.start(dir .. "/untrusting", nil, CLIENT)
    T = "http://127.0.0.1:" .. target.port
    S = "https://127.0.0.1:" .. tls.port
  end)

  teardown(function()
    if not dir then return end
    h.request(target, "POST", "/release")  -- what hangs answers: the target can stop
    if tls.pid then os.execute("kill " .. tls.pid) end
    tls.pipe:close()
    local report = h.stop_all()
    os.execute("rm -rf " .. dir)
    assert(report == nil, report)
  end)

  before_each(function()
    if not dir then pending("curl or openssl is not installed (the .ci/packages list has them)") end
  end)

  describe("over HTTP", function()
    it("sends a GET from the worker with no header but Host, and answers status, reason, headers and body",
      function()
        local r = fetch(client, T .. "/echo/a?b=1")
        assert.are.equal(201, r.status)
        assert.are.equal("Made", r.statusText)
        assert.are.equal("yes", header(r.headers, "x-echo"))
        assert.are.equal("application/json", header(r.headers, "content-type"))
        local echo = cjson.decode(r.body)
        assert.are.equal("GET", echo.method)
        assert.are.equal(T .. "/echo/a?b=1", echo.url)
        assert.are.same({ { "host", "127.0.0.1:" .. target.port } }, echo.headers)
      end)

    it("sends a POST's headers and body as given, an empty header included", function()
      local r = fetch(client, T .. "/echo/post", {
        method = "POST", body = "a=1&b=2",
        headers = { { "Content-Type", "text/plain" }, { "X-Many", "1" }, { "X-Many", "2" }, { "X-Empty", "" } },
      })
      assert.are.equal(201, r.status)
      local echo = cjson.decode(r.body)
      assert.are.equal("POST", echo.method)
      assert.are.equal("a=1&b=2", echo.body)
      assert.are.same({ { "host", "127.0.0.1:" .. target.port }, { "content-type", "text/plain" },
        { "x-many", "1" }, { "x-many", "2" }, { "x-empty", "" }, { "content-length", "7" } }, echo.headers)
    end)

    it("sends another method with its body", function()
      local echo = cjson.decode(fetch(client, T .. "/echo/put", { method = "PUT", body = "new" }).body)
      assert.are.equal("PUT", echo.method)
      assert.are.equal("new", echo.body)
      echo = cjson.decode(fetch(client, T .. "/echo/del", { method = "DELETE" }).body)
      assert.are.equal("DELETE", echo.method)
      assert.is_nil(echo.body)
    end)

    it("fetches from an object, whose writes before the fetch are committed when it goes out", function()
      -- the target calls back the client, which reads the object's rows while its fetch waits
      local status, r = post(client, "/object/o-1", { url = T .. "/relay?url=http://127.0.0.1:" .. client.port
        .. "/rows/o-1" })
      assert.are.equal(200, status)
      assert.are.equal(200, r.status)
      assert.are.equal('200 {"n":1}', r.body)
    end)

    it("follows a redirect by default, answers it with redirect = manual and raises with redirect = error",
      function()
        local to = T .. "/redirect?to=" .. T .. "/echo/there"
        local r = fetch(client, to)
        assert.are.equal(201, r.status)
        assert.are.equal(T .. "/echo/there", cjson.decode(r.body).url)
        r = fetch(client, to, { redirect = "manual" })
        assert.are.equal(302, r.status)
        assert.are.equal(T .. "/echo/there", header(r.headers, "location"))
        r = fetch(client, to, { redirect = "error" })
        assert.are.equal("NetworkError", r.error.name)
        assert.matches('redirected %(302 to .*/echo/there%) where redirect is "error"', r.error.message)
      end)

    it("runs two invocations' fetches at once: each answers only once both have arrived", function()
      local url = T .. "/rendezvous?key=two"
      local function start()
        return dofile("spec/helpers/process.lua").start(
          ("curl -s --max-time %d -X POST --data-binary '%s' http://127.0.0.1:%s/fetch")
            :format(MAX_TIME, cjson.encode({ url = url }), client.port))
      end
      local first, second = start(), start()
      local a, b = first(), second()
      assert.are.equal("met", cjson.decode(a).body)
      assert.are.equal("met", cjson.decode(b).body)
    end)

    it("raises TimeoutError, retryable, when the server does not answer within --fetch-timeout", function()
      local r = fetch(strict, T .. "/hang")
      assert.are.same({ name = "TimeoutError", retryable = true,
        message = "GET " .. T .. "/hang: no answer within " .. TIMEOUT_MS .. " ms (--fetch-timeout)" }, r.error)
    end)

    it("raises NetworkError, not retryable, for a body past --fetch-max-bytes, and takes one at the limit",
      function()
        local r = fetch(client, T .. "/big?n=4097")
        assert.are.same({ name = "NetworkError", retryable = false, message = "GET " .. T .. "/big?n=4097: "
          .. "the response's body is larger than 4096 bytes (--fetch-max-bytes); it was not kept" }, r.error)
        assert.are.equal(4096, #fetch(client, T .. "/big?n=4096").body)
      end)

    it("raises NetworkError, retryable, when nothing listens", function()
      local r = fetch(client, "http://127.0.0.1:1/x")
      assert.are.equal("NetworkError", r.error.name)
      assert.is_true(r.error.retryable)
      assert.matches("^GET http://127%.0%.0%.1:1/x: cannot connect", r.error.message)
    end)

    it("refuses, naming it, a URL that does not parse and a scheme other than http: and https:", function()
      local function message(url)
        return (fetch(client, url).error.message:gsub("^[^ ]*:%d+: ", ""))
      end
      assert.are.equal('eutaxy.fetch: unsupported scheme ftp: in "ftp://127.0.0.1/x": only http: and https: '
        .. "URLs are fetched", message("ftp://127.0.0.1/x"))
      assert.are.equal('eutaxy.fetch: invalid URL: empty host ("http:///x")', message("http:///x"))
      assert.are.equal('eutaxy.fetch needs an absolute URL (https://host/path), got "/x"', message("/x"))
    end)
  end)

  describe("over HTTPS", function()
    it("fetches from a server whose CA --ca-file trusts", function()
      local r = fetch(client, S .. "/hello.txt")
      assert.are.equal(200, r.status)
      assert.are.equal("hello over TLS\n", r.body)
    end)

    it("raises NetworkError, not retryable, naming the certificate, when no CA it trusts signed it", function()
      local r = fetch(untrusting, S .. "/hello.txt")
      assert.are.equal("NetworkError", r.error.name)
      assert.is_false(r.error.retryable)
      assert.matches("^GET " .. S:gsub("%p", "%%%0") .. "/hello%.txt: the server's certificate is not trusted: "
        .. "SSL certificate problem: self%-signed certificate", r.error.message)
    end)

    it("stops a body of no stated length at --fetch-max-bytes", function()
      local r = fetch(client, S .. "/big.txt")
      assert.are.equal("NetworkError", r.error.name)
      assert.matches("larger than 4096 bytes", r.error.message)
    end)
  end)

  describe("options", function()
    it("refuses a --ca-file that cannot be read or holds no certificate", function()
      local process = dofile("spec/helpers/process.lua")
      local _, err, code = process.run(h.bin .. " serve " .. CLIENT .. " --ca-file /nonexistent/ca.pem")
      assert.are.equal(2, code)
      assert.matches("eutaxy serve: %-%-ca%-file: cannot read /nonexistent/ca%.pem", err)
      _, err, code = process.run(h.bin .. " serve " .. CLIENT .. " --ca-file " .. CLIENT)
      assert.are.equal(2, code)
      assert.matches("holds no PEM certificate", err)
    end)
  end)
end)
