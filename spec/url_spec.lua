local url = require "eutaxy.url"

describe("eutaxy.url", function()
  describe("parse", function()
    it("splits an absolute URL into the Web's URL fields", function()
      local u = assert(url.parse("http://localhost:8787/projects/p-1/lease?a=1#top"))
      assert.are.equal("http://localhost:8787/projects/p-1/lease?a=1#top", u.href)
      assert.are.equal("http:", u.protocol)
      assert.are.equal("localhost:8787", u.host)
      assert.are.equal("localhost", u.hostname)
      assert.are.equal("8787", u.port)
      assert.are.equal("/projects/p-1/lease", u.pathname)
      assert.are.equal("?a=1", u.search)
      assert.are.equal("#top", u.hash)
      assert.are.equal("http://localhost:8787", u.origin)
      assert.are.same({ a = "1" }, u.query)
    end)

    it("resolves a path against http://localhost", function()
      local u = assert(url.parse("/items?id=7"))
      assert.are.equal("http://localhost/items?id=7", u.href)
      assert.are.equal("localhost", u.host)
      assert.are.equal("", u.port)
      assert.are.equal("/items", u.pathname)
    end)

    it("gives a scheme-relative URL the http scheme", function()
      assert.are.equal("http://example.com/x", url.parse("//example.com/x").href)
    end)

    it("defaults the path to / and search and hash to empty", function()
      local u = assert(url.parse("https://example.com"))
      assert.are.equal("/", u.pathname)
      assert.are.equal("", u.search)
      assert.are.equal("", u.hash)
      assert.are.same({}, u.query)
      assert.are.equal("https://example.com/", u.href)
    end)

    it("treats a lone ? or # as no search or hash", function()
      local u = assert(url.parse("http://h/p?#"))
      assert.are.equal("", u.search)
      assert.are.equal("", u.hash)
      assert.are.equal("http://h/p", u.href)
    end)

    it("lowercases the scheme and host but not the path", function()
      local u = assert(url.parse("HTTP://LocalHost/A/B"))
      assert.are.equal("http:", u.protocol)
      assert.are.equal("localhost", u.hostname)
      assert.are.equal("/A/B", u.pathname)
    end)

    it("drops the default port of the scheme", function()
      assert.are.equal("", url.parse("http://h:80/").port)
      assert.are.equal("h", url.parse("https://h:443/").host)
      assert.are.equal("8080", url.parse("https://h:8080/").port)
      assert.are.equal("", url.parse("ws://h:0080/").port)
    end)

    it("keeps user info apart from the host", function()
      local u = assert(url.parse("http://ann:secret@h:81/"))
      assert.are.equal("ann", u.username)
      assert.are.equal("secret", u.password)
      assert.are.equal("h:81", u.host)
      assert.are.equal("http://ann:secret@h:81/", u.href)
    end)

    it("accepts a bracketed IPv6 host", function()
      local u = assert(url.parse("http://[::1]:9000/x"))
      assert.are.equal("[::1]", u.hostname)
      assert.are.equal("9000", u.port)
    end)

    it("resolves . and .. segments in the path", function()
      assert.are.equal("/a/c", url.parse("/a/./b/../c").pathname)
      assert.are.equal("/", url.parse("/../..").pathname)
      assert.are.equal("/a/", url.parse("/a/b/..").pathname)
    end)

    it("percent-encodes bytes that may not appear raw", function()
      local u = assert(url.parse("/a b/é?q=x y#f g"))
      assert.are.equal("/a%20b/%C3%A9", u.pathname)
      assert.are.equal("?q=x%20y", u.search)
      assert.are.equal("#f%20g", u.hash)
      assert.are.equal("x y", u.query.q)
    end)

    it("trims surrounding whitespace", function()
      assert.are.equal("http://localhost/x", url.parse("  /x \n").href)
    end)
  end)

  describe("parse: query", function()
    it("decodes percent escapes and + as a space", function()
      local u = assert(url.parse("/?name=a+b%20c&path=%2Fx%2Fy&plus=%2B"))
      assert.are.same({ name = "a b c", path = "/x/y", plus = "+" }, u.query)
    end)

    it("lets the last value of a repeated name win", function()
      assert.are.equal("3", url.parse("/?a=1&a=2&a=3").query.a)
    end)

    it("gives a name without = the empty string and skips empty parts", function()
      assert.are.same({ flag = "", b = "2" }, url.parse("/?flag&&b=2&").query)
    end)

    it("keeps = signs after the first in the value", function()
      assert.are.equal("x=y", url.parse("/?a=x=y").query.a)
    end)

    it("is available on its own for form bodies", function()
      assert.are.same({ a = "1", b = "two words" }, url.parse_query("a=1&b=two+words"))
      assert.are.same({ a = "1" }, url.parse_query("?a=1"))
    end)
  end)

  describe("parse: invalid input", function()
    local function refused(s, pattern)
      local u, err = url.parse(s)
      assert.is_nil(u)
      assert.matches(pattern, err)
    end

    it("refuses text that is neither a URL nor a path", function()
      refused("nope", "^invalid URL: no scheme")
      refused("", "^invalid URL: ")
      refused("projects/1", "^invalid URL: ")
    end)

    it("refuses a scheme without //host", function()
      refused("mailto:someone@example.com", "^invalid URL: expected mailto://host")
    end)

    it("refuses an empty host", function()
      refused("http:///x", "^invalid URL: empty host")
      refused("http://", "^invalid URL: empty host")
    end)

    it("refuses a malformed or out-of-range port", function()
      refused("http://h:port/", "^invalid URL: bad port")
      refused("http://h:70000/", "^invalid URL: port out of range")
    end)

    it("refuses bad characters in the host", function()
      refused("http://a b/", "^invalid URL: bad character in host")
      refused("http://[zz]/", "^invalid URL: bad IPv6 address")
    end)

    it("refuses something that is not a string", function()
      refused(42, "^invalid URL: expected a string, got number")
    end)

    it("quotes the input in the message", function()
      refused("nope", '%("nope"%)$')
    end)
  end)

  -- url.parse is the host's one-pass parser (host/lurl.c) where
  -- eutaxy.core is loaded; url.lua's patterns are its definition.
  describe("parse: the host's parser against url.lua's", function()
    local core = require "eutaxy.core"
    local rng = 19
    local function random(n)
      rng = (rng * 1103515245 + 12345) % 2147483648
      return rng % n + 1
    end
    local function pick(t) return t[random(#t)] end
    local SCHEMES = { "http", "HTTPS", "ws", "wss", "a+b-c.d", "x1", "1x", "", "h t", "http:" }
    local USERS = { "", "", "", "u@", "u:p@", ":p@", "u:@", "a@b@", "%41:%42@" }
    local HOSTS = { "localhost", "Example.COM", "h", "", "[::1]", "[fe80::1%eth0]", "[]", "[g]", "a b", "a%b",
                    "h\\", "h^", "h|", "h\"", "h`", "h{", "h}", "h<", "h>", "h\v", "h\0x", "\200h" }
    local PORTS = { "", "", ":", ":80", ":443", ":0080", ":00", ":0", ":65535", ":65536", ":000065535",
                    ":99999999999999999999", ":8a", "::", ":-1" }
    local PIECES = { "/", "a", "b", ".", "..", "%2e", "%2E", ".%2e", "%2e.", "%2E%2e", "//", "?", "#", "&", "=",
                     "%", "%41", " ", "\t", "\n", "\r", "\0", "\1", "\31", "\127", "\200", "\255", "\"",
                     "<", ">", "`", "{", "}", "|", "\\", "^", "'", "+", "é", "@", ":" }
    local EDGES = { "", "", " ", "\t", "\n \0", "\32\1" }

    local function rest()
      local parts = {}
      for i = 1, random(8) - 1 do parts[i] = pick(PIECES) end
      return table.concat(parts)
    end

    local function input()
      local r, s = random(10)
      if r <= 5 then
        s = pick(SCHEMES) .. (random(6) == 1 and ":" or "://") .. pick(USERS) .. pick(HOSTS) .. pick(PORTS) .. rest()
      elseif r <= 7 then
        s = "/" .. rest()
      elseif r == 8 then
        s = "//" .. pick(HOSTS) .. pick(PORTS) .. rest()
      else
        s = rest()
      end
      return pick(EDGES) .. s .. pick(EDGES)
    end

    it("is the one url.parse uses here", function()
      assert.is_function(core.url_split)
      assert.is_function(core.url_href)
      assert.are_not.equal(url._parse_in_lua, url.parse)
    end)

    it("gives url.lua's fields, or its refusal, on random input", function()
      local parsed, refused = 0, 0
      for _ = 1, 6000 do
        local s = input()
        local want, want_err = url._parse_in_lua(s)
        local got, got_err = url.parse(s)
        assert.are.same(want, got, string.format("%q", s))
        assert.are.equal(want_err, got_err, string.format("%q", s))
        local href, href_err = url._href(s)
        assert.are.equal(want and want.href, href, string.format("%q", s))
        assert.are.equal(want_err, href_err, string.format("%q", s))
        if want then parsed = parsed + 1 else refused = refused + 1 end
      end
      assert.is_true(parsed > 1000 and refused > 1000, parsed .. " parsed, " .. refused .. " refused")
    end)

    it("refuses what is not a string as url.lua does", function()
      for _, v in ipairs({ 42, true, {}, print }) do
        assert.are.same({ url._parse_in_lua(v) }, { url.parse(v) })
        assert.are.same({ nil, select(2, url._parse_in_lua(v)) }, { url._href(v) })
      end
      assert.are.same({ url._parse_in_lua() }, { url.parse() })
    end)
  end)

  describe("encode and decode", function()
    it("encodes a component as encodeURIComponent does", function()
      assert.are.equal("a%20b%26c%3Dd%2F%3F%23", url.encode("a b&c=d/?#"))
      assert.are.equal("-_.!~*'()AZaz09", url.encode("-_.!~*'()AZaz09"))
      assert.are.equal("%C3%A9", url.encode("é"))
      assert.are.equal("%25", url.encode("%"))
    end)

    it("decodes percent escapes in either case", function()
      assert.are.equal("a b/é", url.decode("a%20b%2f%C3%A9"))
    end)

    it("keeps + and malformed escapes as they are", function()
      assert.are.equal("a+b%zz%4", url.decode("a+b%zz%4"))
    end)

    it("round-trips any bytes", function()
      local s = "x\0y\255 ✓&=%+"
      assert.are.equal(s, url.decode(url.encode(s)))
    end)
  end)
end)
