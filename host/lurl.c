/*
 * lurl.c: the parts of a URL, for eutaxy.url.parse (lua/eutaxy/url.lua).
 *
 * url.lua's parse_in_lua is the definition: a chain of Lua patterns, each
 * its own pass over the string and its own new strings. Workers parse a
 * URL in every request, so this is the same parse in one pass of C, and
 * spec/url_spec.lua compares the two on random input. Every byte test
 * below is the pattern class it stands for, in the C locale Lua's
 * patterns use.
 */
#include <ctype.h>
#include <string.h>

#include <lauxlib.h>

#include "buf.h"
#include "lurl.h"
#include "sandbox.h"

#define DEFAULT_BASE "http://localhost"

/* The byte sets url.lua encodes, as one bit each. */
enum { IN_PATH = 1, IN_QUERY = 2, IN_FRAGMENT = 4 };

static int needs_escape(unsigned char c, int set) {
  if (c <= 32 || c >= 127) return 1;
  switch (c) {
    case '"': case '<': case '>': case '`':
      return 1;
    case '{': case '}': case '^': case '|': case '\\':
      return (set & (IN_PATH | IN_QUERY)) != 0;
    case '\'':
      return (set & IN_QUERY) != 0;
    default:
      return 0;
  }
}

/* Writes s with the set's bytes as %XX to out (room for 3 * n); returns the length. */
static size_t escape(char *out, eu_span s, int set) {
  static const char hex[] = "0123456789ABCDEF";
  size_t i, k = 0;
  for (i = 0; i < s.n; i++) {
    unsigned char c = (unsigned char)s.p[i];
    if (needs_escape(c, set)) {
      out[k++] = '%';
      out[k++] = hex[c >> 4];
      out[k++] = hex[c & 15];
    } else {
      out[k++] = (char)c;
    }
  }
  return k;
}

static size_t escaped_len(eu_span s, int set) {
  size_t i, n = s.n;
  for (i = 0; i < s.n; i++) n += needs_escape((unsigned char)s.p[i], set) ? 2 : 0;
  return n;
}

/* "." or "%2e" (any case of the e): one dot segment's part. */
static int is_dot(const char *p, size_t n) {
  return (n == 1 && p[0] == '.') || (n == 3 && p[0] == '%' && p[1] == '2' && (p[2] | 0x20) == 'e');
}

static int is_dotdot(const char *p, size_t n) {
  if (n == 2) return p[0] == '.' && p[1] == '.';
  if (n == 4) return (p[0] == '.' && is_dot(p + 1, 3)) || (is_dot(p, 3) && p[3] == '.');
  if (n == 6) return is_dot(p, 3) && is_dot(p + 3, 3);
  return 0;
}

/* RFC 3986 section 5.2.4 on path (which starts with '/'), as url.lua's
 * remove_dot_segments: out holds path.n + 1 bytes, segs a span for each
 * '/' in path and one more. */
static size_t remove_dots(char *out, eu_span path, eu_span *segs) {
  const char *p = path.p + 1, *end = path.p + path.n;
  size_t nseg = 0, k = 0, i;
  int trailing = 0;
  for (;;) {
    const char *slash = memchr(p, '/', (size_t)(end - p));
    const char *e = slash ? slash : end;
    size_t n = (size_t)(e - p);
    trailing = 0;
    if (is_dot(p, n)) {
      trailing = 1;
    } else if (is_dotdot(p, n)) {
      if (nseg > 0) nseg--;
      trailing = 1;
    } else {
      segs[nseg].p = p;
      segs[nseg].n = n;
      nseg++;
    }
    if (!slash) break;
    p = slash + 1;
  }
  out[k++] = '/';
  for (i = 0; i < nseg; i++) {
    if (i) out[k++] = '/';
    memcpy(out + k, segs[i].p, segs[i].n);
    k += segs[i].n;
  }
  if (trailing && k > 1) out[k++] = '/';
  return k;
}

static void set_field(lua_State *L, const char *name, const char *p, size_t n) {
  lua_pushlstring(L, p, n);
  lua_setfield(L, -2, name);
}

/* Appends n bytes of p at *k in buf. */
static void put(char *buf, size_t *k, const char *p, size_t n) {
  memcpy(buf + *k, p, n);
  *k += n;
}

static int fail(lua_State *L, const char *why) {
  luaL_pushfail(L);
  lua_pushstring(L, why);
  return 2;
}

/* split(s): a table of href, origin, protocol, username, password, host,
 * hostname, port, pathname, search and hash, or nil and why the URL is
 * refused (url.lua words the message); with href_only, the href alone. */
static int url_split(lua_State *L, int metered, int href_only) {
  size_t ls, i, k, nin, nslash, npath_esc, nsearch_esc, nhash_esc, nwork;
  const char *s = luaL_checklstring(L, 1, &ls);
  const char *a, *b, *end;
  char *in, *out, *protocol, *lowhost, *path_esc, *path_out, *search_out, *hash_out, *href;
  eu_span *segs;
  eu_span after, authority, tail, username = { "", 0 }, password = { "", 0 };
  eu_span hostname, port, pathname, search, hash;
  size_t nscheme, npath, nhref, host_at, nhost;
  if (metered) eu_sandbox_charge(L, (int64_t)(ls / 4) + 16, "url.parse");
  if (ls > ((size_t)-1) / 32 - 64) return luaL_error(L, "url.parse: the URL is too long");
  /* the input without the bytes 0-32 at either end, then without tabs and
   * line breaks; "//..." takes http:, and "/..." the default base */
  a = s;
  b = s + ls;
  while (a < b && (unsigned char)*a <= 32) a++;
  while (b > a && (unsigned char)b[-1] <= 32) b--;
  in = lua_newuserdatauv(L, (size_t)(b - a) + sizeof DEFAULT_BASE, 0);
  k = sizeof DEFAULT_BASE - 1;
  for (; a < b; a++)
    if (*a != '\t' && *a != '\n' && *a != '\r') in[k++] = *a;
  nin = k - (sizeof DEFAULT_BASE - 1);
  in += sizeof DEFAULT_BASE - 1;
  if (nin >= 2 && in[0] == '/' && in[1] == '/') {
    in -= 5;
    memcpy(in, "http:", 5);
    nin += 5;
  } else if (nin >= 1 && in[0] == '/') {
    in -= sizeof DEFAULT_BASE - 1;
    memcpy(in, DEFAULT_BASE, sizeof DEFAULT_BASE - 1);
    nin += sizeof DEFAULT_BASE - 1;
  }
  end = in + nin;
  /* ^(%a[%w+%-.]*):(.*)$ */
  if (nin == 0 || !isalpha((unsigned char)in[0])) return fail(L, "no scheme and not a path starting with /");
  for (i = 1; i < nin && (isalnum((unsigned char)in[i]) || in[i] == '+' || in[i] == '-' || in[i] == '.'); i++) {}
  if (i >= nin || in[i] != ':') return fail(L, "no scheme and not a path starting with /");
  nscheme = i;
  after.p = in + nscheme + 1;
  after.n = (size_t)(end - after.p);
  if (after.n < 2 || after.p[0] != '/' || after.p[1] != '/') {
    luaL_pushfail(L);
    lua_pushliteral(L, "expected ");
    for (i = 0; i < nscheme; i++) in[i] = (char)tolower((unsigned char)in[i]);
    lua_pushlstring(L, in, nscheme + 1);  /* the scheme and its colon */
    lua_pushliteral(L, "//host");
    lua_concat(L, 3);
    return 2;
  }
  after.p += 2;
  after.n -= 2;
  /* ^([^/?#]*)(.*)$ */
  authority.p = after.p;
  for (i = 0; i < after.n && after.p[i] != '/' && after.p[i] != '?' && after.p[i] != '#'; i++) {}
  authority.n = i;
  tail.p = after.p + i;
  tail.n = after.n - i;
  /* ^(.*)@(.*)$, so at the last @; then the user info ^([^:]*):?(.*)$ */
  for (i = authority.n; i > 0 && authority.p[i - 1] != '@'; i--) {}
  if (i > 0) {
    size_t j;
    for (j = 0; j < i - 1 && authority.p[j] != ':'; j++) {}
    username.p = authority.p;
    username.n = j;
    if (j < i - 1) j++;
    password.p = authority.p + j;
    password.n = i - 1 - j;
    authority.p += i;
    authority.n -= i;
  }
  if (authority.n > 0 && authority.p[0] == '[') {
    /* ^(%[[%x:.]+%])(.*)$ */
    for (i = 1; i < authority.n && (isxdigit((unsigned char)authority.p[i]) || authority.p[i] == ':' ||
                                    authority.p[i] == '.'); i++) {}
    if (i == 1 || i >= authority.n || authority.p[i] != ']') return fail(L, "bad IPv6 address");
    i++;
  } else {
    /* ^([^:]*)(.*)$ */
    for (i = 0; i < authority.n && authority.p[i] != ':'; i++) {}
  }
  hostname.p = authority.p;
  hostname.n = i;
  port.p = authority.p + i;
  port.n = authority.n - i;
  if (hostname.n == 0) return fail(L, "empty host");
  for (i = 0; i < hostname.n; i++) {
    unsigned char c = (unsigned char)hostname.p[i];
    if (isspace(c) || (c != 0 && strchr("%<>\\^|\"`{}", c) != NULL)) return fail(L, "bad character in host");
  }
  if (port.n > 0) {
    /* ^:(%d*)$, then ^0+(%d) -> %1 */
    if (port.p[0] != ':') return fail(L, "bad port");
    for (i = 1; i < port.n; i++)
      if (!isdigit((unsigned char)port.p[i])) return fail(L, "bad port");
    port.p++;
    port.n--;
    while (port.n >= 2 && port.p[0] == '0') {
      port.p++;
      port.n--;
    }
    if (port.n > 5) return fail(L, "port out of range");
    if (port.n > 0) {
      long v = 0;
      for (i = 0; i < port.n; i++) v = v * 10 + (port.p[i] - '0');
      if (v > 65535) return fail(L, "port out of range");
    }
  }
  /* ^([^?#]*)(%??[^#]*)(#?.*)$ */
  pathname.p = tail.p;
  for (i = 0; i < tail.n && tail.p[i] != '?' && tail.p[i] != '#'; i++) {}
  pathname.n = i;
  search.p = tail.p + i;
  if (i < tail.n && tail.p[i] == '?')
    for (i++; i < tail.n && tail.p[i] != '#'; i++) {}
  search.n = (size_t)(tail.p + i - search.p);
  hash.p = tail.p + i;
  hash.n = tail.n - i;
  if (pathname.n == 0) {
    pathname.p = "/";
    pathname.n = 1;
  }
  if (search.n == 1) search.n = 0;  /* a bare ? */
  if (hash.n == 1) hash.n = 0;      /* a bare # */
  /* the new strings, each sized exactly, in one block */
  npath_esc = escaped_len(pathname, IN_PATH);
  nsearch_esc = escaped_len(search, IN_QUERY);
  nhash_esc = escaped_len(hash, IN_FRAGMENT);
  for (nslash = 0, i = 0; i < pathname.n; i++) nslash += pathname.p[i] == '/';
  nwork = (nscheme + 1) + hostname.n + npath_esc + (npath_esc + 1) + nsearch_esc + nhash_esc;
  nwork += (nscheme + 1) + 2 + username.n + 1 + password.n + 1 + hostname.n + 1 + port.n + (npath_esc + 1) +
           nsearch_esc + nhash_esc;
  nwork = (nwork + 15) & ~(size_t)15;  /* the spans after the bytes, aligned */
  out = lua_newuserdatauv(L, nwork + (nslash + 1) * sizeof(eu_span), 0);
  segs = (eu_span *)(void *)(out + nwork);
  protocol = out;
  for (i = 0; i < nscheme; i++) protocol[i] = (char)tolower((unsigned char)in[i]);
  protocol[nscheme] = ':';
  lowhost = protocol + nscheme + 1;
  for (i = 0; i < hostname.n; i++) lowhost[i] = (char)tolower((unsigned char)hostname.p[i]);
  path_esc = lowhost + hostname.n;
  escape(path_esc, pathname, IN_PATH);
  path_out = path_esc + npath_esc;
  {
    eu_span escaped;
    escaped.p = path_esc;
    escaped.n = npath_esc;
    npath = remove_dots(path_out, escaped, segs);
  }
  search_out = path_out + npath;
  escape(search_out, search, IN_QUERY);
  hash_out = search_out + nsearch_esc;
  escape(hash_out, hash, IN_FRAGMENT);
  href = hash_out + nhash_esc;
  /* a scheme's default port is no port */
  {
    static const char *const defaults[][2] = { { "http:", "80" }, { "https:", "443" }, { "ws:", "80" }, { "wss:", "443" } };
    for (i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
      if (nscheme + 1 == strlen(defaults[i][0]) && memcmp(protocol, defaults[i][0], nscheme + 1) == 0 &&
          port.n == strlen(defaults[i][1]) && memcmp(port.p, defaults[i][1], port.n) == 0)
        port.n = 0;
  }
  nhref = 0;
  put(href, &nhref, protocol, nscheme + 1);
  put(href, &nhref, "//", 2);
  if (username.n || password.n) {
    put(href, &nhref, username.p, username.n);
    if (password.n) {
      put(href, &nhref, ":", 1);
      put(href, &nhref, password.p, password.n);
    }
    put(href, &nhref, "@", 1);
  }
  host_at = nhref;
  put(href, &nhref, lowhost, hostname.n);
  if (port.n) {
    put(href, &nhref, ":", 1);
    put(href, &nhref, port.p, port.n);
  }
  nhost = nhref - host_at;
  put(href, &nhref, path_out, npath);
  put(href, &nhref, search_out, nsearch_esc);
  put(href, &nhref, hash_out, nhash_esc);
  if (href_only) {
    lua_pushlstring(L, href, nhref);
    return 1;
  }
  lua_createtable(L, 0, 12);
  set_field(L, "href", href, nhref);
  lua_pushlstring(L, protocol, nscheme + 1);
  lua_pushliteral(L, "//");
  lua_pushlstring(L, href + host_at, nhost);
  lua_concat(L, 3);
  lua_setfield(L, -2, "origin");
  set_field(L, "protocol", protocol, nscheme + 1);
  set_field(L, "username", username.p, username.n);
  set_field(L, "password", password.p, password.n);
  set_field(L, "host", href + host_at, nhost);
  set_field(L, "hostname", lowhost, hostname.n);
  set_field(L, "port", port.p, port.n);
  set_field(L, "pathname", path_out, npath);
  set_field(L, "search", search_out, nsearch_esc);
  set_field(L, "hash", hash_out, nhash_esc);
  return 1;
}

int eu_url_split(lua_State *L) { return url_split(L, 0, 0); }
int eu_url_split_metered(lua_State *L) { return url_split(L, 1, 0); }
int eu_url_href(lua_State *L) { return url_split(L, 0, 1); }
int eu_url_href_metered(lua_State *L) { return url_split(L, 1, 1); }
