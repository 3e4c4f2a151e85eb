/*
 * fuzz_clone.c: the value cloner (host/clone.c).
 *
 * The first byte picks one of two runs:
 *
 *  - decode: the rest of the input as encoded bytes. Decoding either fails
 *    with EU_ECORRUPT or gives values; the format is canonical, so values
 *    that decode must encode back to exactly the same bytes. The rendering
 *    (eu_clone_format) must accept what decodes and stay within its length.
 *
 *  - round trip: the rest of the input builds Lua values (every type,
 *    nesting past EU_CLONE_MAXDEPTH, shared tables, cycles, functions and
 *    tables as keys). An independent walk says whether they can be cloned
 *    and bounds the size of their encoding; encoding must agree, also on
 *    EU_CLONE_MAXBYTES, and what it encodes must decode to values equal to
 *    the originals, down to a float's bits, and encode again to the same
 *    bytes.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clone.h"
#include "eutaxy.h"
#include "fuzz.h"

static lua_State *L;

#define CHECK(cond, ...)                                    \
  do {                                                      \
    if (!(cond)) {                                          \
      fprintf(stderr, "fuzz_clone: %s: ", #cond);           \
      fprintf(stderr, __VA_ARGS__);                         \
      fprintf(stderr, "\n");                                \
      abort();                                              \
    }                                                       \
  } while (0)

/* Tables made so far in this run, so later values can share or loop back to them. */
#define MAX_MADE 256

typedef struct gen {
  fz f;
  int made;  /* tables in the registry array at stack index 1 */
  int nodes; /* values built: bounds the run, not the shapes */
} gen;

static int l_noop(lua_State *Ls) {
  (void)Ls;
  return 0;
}

static void gen_value(gen *g, int level);

/* A key: mostly scalars, sometimes a table or a function (refused by the
 * encoder). Pushes nothing and returns 0 for a key Lua cannot hold. */
static int gen_key(gen *g, int level) {
  unsigned op = fz_u8(&g->f) % 8;
  double d;
  switch (op) {
    case 0: lua_pushinteger(L, (lua_Integer)(fz_u8(&g->f) % 8) + 1); return 1;
    case 1: lua_pushinteger(L, (lua_Integer)fz_u64(&g->f)); return 1;
    case 2: {
      uint64_t u = fz_u64(&g->f);
      memcpy(&d, &u, 8);
      if (isnan(d)) return 0;
      lua_pushnumber(L, d);
      return 1;
    }
    case 3: lua_pushboolean(L, fz_u8(&g->f) & 1); return 1;
    case 4:
      if (fz_u8(&g->f) == 7) {
        gen_value(g, level + 1);
        if (lua_isnil(L, -1) || lua_tonumber(L, -1) != lua_tonumber(L, -1)) {  /* nil, NaN */
          lua_pop(L, 1);
          return 0;
        }
        return 1;
      }
      /* fall through */
    default: {
      size_t n;
      const char *s = fz_bytes(&g->f, fz_u8(&g->f) % 24, &n);
      lua_pushlstring(L, s, n);
      return 1;
    }
  }
}

static void remember(gen *g) {
  if (g->made < MAX_MADE) {
    lua_pushvalue(L, -1);
    lua_rawseti(L, 1, ++g->made);
  }
}

static void gen_table(gen *g, int level, int array) {
  unsigned n = fz_u8(&g->f) % 9, i;
  lua_createtable(L, 0, 0);
  remember(g);
  for (i = 0; i < n && g->f.n > 0; i++) {
    if (array) {
      gen_value(g, level + 1);
      if (lua_isnil(L, -1)) lua_pop(L, 1);
      else lua_rawseti(L, -2, (lua_Integer)i + 1);
      continue;
    }
    if (!gen_key(g, level)) continue;
    gen_value(g, level + 1);
    lua_rawset(L, -3);  /* a nil value leaves the key out */
  }
}

/* Pushes one value. level is its nesting (1 at the top). */
static void gen_value(gen *g, int level) {
  unsigned op;
  double d;
  if (!lua_checkstack(L, 8) || ++g->nodes > 4000 || level > 150) {
    lua_pushnil(L);
    return;
  }
  op = fz_u8(&g->f) % 12;
  switch (op) {
    case 0: lua_pushnil(L); break;
    case 1: lua_pushboolean(L, fz_u8(&g->f) & 1); break;
    case 2: lua_pushinteger(L, (lua_Integer)(int8_t)fz_u8(&g->f)); break;
    case 3: lua_pushinteger(L, (lua_Integer)fz_u64(&g->f)); break;
    case 4: {
      uint64_t u = fz_u64(&g->f);
      memcpy(&d, &u, 8);
      lua_pushnumber(L, d);
      break;
    }
    case 5: {
      size_t n;
      const char *s = fz_bytes(&g->f, fz_u8(&g->f) % 64, &n);
      lua_pushlstring(L, s, n);
      break;
    }
    case 6: gen_table(g, level, 0); break;
    case 7: gen_table(g, level, 1); break;
    case 8: {  /* a chain of one-element tables, around the depth limit */
      unsigned depth = 90 + fz_u8(&g->f) % 20, i;
      gen_value(g, level + (int)depth);
      for (i = 0; i < depth; i++) {
        lua_createtable(L, 1, 0);
        lua_insert(L, -2);
        if (lua_isnil(L, -1)) lua_pop(L, 1);
        else lua_rawseti(L, -2, 1);
      }
      break;
    }
    case 9:  /* a table made before: shared, or a cycle if it is an ancestor */
      if (g->made > 0) {
        lua_rawgeti(L, 1, (lua_Integer)(fz_u8(&g->f) % (unsigned)g->made) + 1);
        break;
      }
      lua_pushnil(L);
      break;
    case 10:
      if (fz_u8(&g->f) == 3) {
        lua_pushcfunction(L, l_noop);
        break;
      }
      /* fall through */
    default: lua_pushliteral(L, "x"); break;
  }
}

/* The independent verdict, by a walk that visits each table once (a value
 * sharing tables level after level expands beyond any walk of its paths).
 * Per table, in the memo at stack index 2: false while it is being walked
 * (met again then, it is a cycle), then { ok, height, lo, hi }, lo and hi
 * bounding the bytes its encoding takes, each shared table counted every
 * time it is met, as the encoder writes it. */
typedef struct verdict {
  int ok;      /* no function, userdata, table key or cycle below */
  int height;  /* levels of tables, itself included */
  double lo, hi;
} verdict;

static void walk(int idx, verdict *v);

static void walk_table(int idx, verdict *v) {
  verdict kv, vv;
  if (!lua_checkstack(L, 6)) abort();
  lua_pushvalue(L, idx);
  if (lua_rawget(L, 2) != LUA_TNIL) {  /* met before */
    if (lua_isboolean(L, -1)) {  /* and still open: a cycle */
      v->ok = 0;
      v->height = 0;
      v->lo = v->hi = 0;
    } else {
      lua_rawgeti(L, -1, 1);
      v->ok = lua_toboolean(L, -1);
      lua_rawgeti(L, -2, 2);
      v->height = (int)lua_tointeger(L, -1);
      lua_rawgeti(L, -3, 3);
      v->lo = lua_tonumber(L, -1);
      lua_rawgeti(L, -4, 4);
      v->hi = lua_tonumber(L, -1);
      lua_pop(L, 4);
    }
    lua_pop(L, 1);
    return;
  }
  lua_pop(L, 1);
  lua_pushvalue(L, idx);
  lua_pushboolean(L, 0);
  lua_rawset(L, 2);
  v->ok = 1;
  v->height = 1;
  v->lo = 2;   /* tag and count */
  v->hi = 11;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    int kt = lua_type(L, -2);
    if (kt != LUA_TNUMBER && kt != LUA_TSTRING && kt != LUA_TBOOLEAN) v->ok = 0;
    walk(lua_absindex(L, -2), &kv);
    walk(lua_absindex(L, -1), &vv);
    v->ok &= kv.ok && vv.ok;
    if (vv.height + 1 > v->height) v->height = vv.height + 1;
    v->lo += kv.lo + vv.lo;
    v->hi += kv.hi + vv.hi;
    lua_pop(L, 1);
  }
  lua_pushvalue(L, idx);
  lua_createtable(L, 4, 0);
  lua_pushboolean(L, v->ok);
  lua_rawseti(L, -2, 1);
  lua_pushinteger(L, v->height);
  lua_rawseti(L, -2, 2);
  lua_pushnumber(L, v->lo);
  lua_rawseti(L, -2, 3);
  lua_pushnumber(L, v->hi);
  lua_rawseti(L, -2, 4);
  lua_rawset(L, 2);
}

static void walk(int idx, verdict *v) {
  size_t len;
  v->ok = 1;
  v->height = 0;
  switch (lua_type(L, idx)) {
    case LUA_TNIL: case LUA_TBOOLEAN: v->lo = v->hi = 1; break;
    case LUA_TNUMBER:
      if (lua_isinteger(L, idx)) { v->lo = 2; v->hi = 11; }
      else v->lo = v->hi = 9;
      break;
    case LUA_TSTRING:
      lua_tolstring(L, idx, &len);
      v->lo = 2 + (double)len;
      v->hi = 11 + (double)len;
      break;
    case LUA_TTABLE: walk_table(idx, v); break;
    default: v->ok = 0; v->lo = v->hi = 0; break;
  }
}

/* Values equal as the clone must keep them: same types, same integer or
 * float, floats bit for bit, tables with equal pairs. */
static int same_value(int a, int b) {
  int t = lua_type(L, a), ok = 1;
  if (t != lua_type(L, b)) return 0;
  switch (t) {
    case LUA_TNUMBER:
      if (lua_isinteger(L, a) != lua_isinteger(L, b)) return 0;
      if (lua_isinteger(L, a)) return lua_tointeger(L, a) == lua_tointeger(L, b);
      {
        double x = lua_tonumber(L, a), y = lua_tonumber(L, b);
        return memcmp(&x, &y, sizeof x) == 0;
      }
    case LUA_TTABLE:
      a = lua_absindex(L, a);
      b = lua_absindex(L, b);
      if (!lua_checkstack(L, 4)) return 0;
      /* not lua_rawlen: a table with holes has more than one border */
      lua_pushnil(L);
      while (ok && lua_next(L, a)) {
        lua_pushvalue(L, -2);
        lua_rawget(L, b);
        ok = !lua_isnil(L, -1) && same_value(-2, -1);
        lua_pop(L, 2);
      }
      if (!ok) {
        lua_pop(L, 1);
        return 0;
      }
      lua_pushnil(L);  /* and b has no pair a lacks */
      while (lua_next(L, b)) {
        lua_pushvalue(L, -2);
        lua_rawget(L, a);
        ok = !lua_isnil(L, -1);
        lua_pop(L, 2);
        if (!ok) {
          lua_pop(L, 1);
          return 0;
        }
      }
      return 1;
    default:
      return lua_rawequal(L, a, b);
  }
}

static void check_format(const char *p, size_t len, size_t maxlen, int must_accept) {
  eu_buf out;
  int rc;
  eu_buf_init(&out);
  rc = eu_clone_format(p, len, &out, maxlen);
  if (must_accept) CHECK(rc == EU_OK, "format refused %zu bytes that decode (rc %d)", len, rc);
  if (rc == EU_OK)
    CHECK(out.n <= maxlen + 3, "format wrote %zu bytes for a maximum of %zu: %s", out.n, maxlen, out.p);
  else CHECK(out.n == 0, "a failed format left %zu bytes", out.n);
  eu_buf_free(&out);
}

/* Protected, so that a memory error while decoding is a Lua error. */
static int decode_run(lua_State *Ls) {
  const char *p = lua_touserdata(Ls, 1);
  size_t len = (size_t)lua_tointeger(Ls, 2), maxlen = (size_t)lua_tointeger(Ls, 3);
  char err[EU_ERRLEN];
  int n = 0, rc, base;
  eu_buf again;
  lua_settop(Ls, 0);
  rc = eu_clone_decode(Ls, p, len, &n, err, sizeof err);
  if (rc != EU_OK) {
    CHECK(rc == EU_ECORRUPT || rc == EU_ENOMEM, "decode returned %d: %s", rc, err);
    CHECK(lua_gettop(Ls) == 0, "a failed decode left %d values", lua_gettop(Ls));
    check_format(p, len, maxlen, 0);
    return 0;
  }
  CHECK(lua_gettop(Ls) == n, "decode said %d values and pushed %d", n, lua_gettop(Ls));
  base = 1;
  eu_buf_init(&again);
  rc = eu_clone_encode(Ls, base, n, &again, err, sizeof err);
  CHECK(rc == EU_OK, "values that decoded do not encode: %s", err);
  CHECK(again.n == len && memcmp(again.p, p, len) == 0,
        "decode then encode of %zu bytes gave %zu other bytes", len, again.n);
  eu_buf_free(&again);
  check_format(p, len, maxlen, 1);
  return 0;
}

static void run_decode(fz *f) {
  size_t maxlen = fz_u8(f), len;
  const char *p = fz_bytes(f, f->n, &len);
  /* libFuzzer's buffer ends exactly at the input: reads past it are caught */
  lua_settop(L, 0);
  lua_pushcfunction(L, decode_run);
  lua_pushlightuserdata(L, (void *)p);
  lua_pushinteger(L, (lua_Integer)len);
  lua_pushinteger(L, (lua_Integer)maxlen);
  if (lua_pcall(L, 3, 0, 0) != LUA_OK) {
    CHECK(strstr(lua_tostring(L, -1), "memory") != NULL, "decode raised: %s", lua_tostring(L, -1));
  }
  lua_settop(L, 0);
}

/* Protected: builds the values, then checks the encoder against walk. */
static int round_trip(lua_State *Ls) {
  gen *g = lua_touserdata(Ls, 1);
  int nvals = (int)(fz_u8(&g->f) % 4), i, expect = 1, rc, n = 0, first;
  double lo = 1, hi = 10;  /* the count of values */
  char err[EU_ERRLEN];
  eu_buf b, again;
  lua_settop(Ls, 0);
  lua_newtable(Ls);  /* 1: tables made */
  lua_newtable(Ls);  /* 2: walk's memo */
  for (i = 0; i < nvals; i++) gen_value(g, 1);
  first = 3;
  for (i = 0; i < nvals; i++) {
    verdict v;
    walk(first + i, &v);
    expect &= v.ok && v.height <= EU_CLONE_MAXDEPTH;
    lo += v.lo;
    hi += v.hi;
  }
  CHECK(lua_gettop(Ls) == first + nvals - 1, "the stack moved");
  eu_buf_init(&b);
  rc = eu_clone_encode(Ls, first, nvals, &b, err, sizeof err);
  CHECK(lua_gettop(Ls) == first + nvals - 1, "encode moved the stack");
  if (expect && lo > (double)EU_CLONE_MAXBYTES)
    CHECK(rc == EU_ECLONE && strstr(err, "too large"), "%.0f bytes or more encoded (rc %d)", lo, rc);
  if (!expect || rc == EU_ECLONE) {
    CHECK(rc == EU_ECLONE, "encode accepted a value that cannot be cloned (rc %d)", rc);
    CHECK(b.n == 0, "a refused encode left %zu bytes", b.n);
    CHECK(strncmp(err, "cannot clone", 12) == 0 || strstr(err, "nests deeper") != NULL ||
          strstr(err, "too large") != NULL, "unclear refusal: %s", err);
    CHECK(!expect || hi > (double)EU_CLONE_MAXBYTES, "encode refused a value that can be cloned: %s", err);
    eu_buf_free(&b);
    return 0;
  }
  CHECK(rc == EU_OK || rc == EU_ENOMEM, "encode failed with %d: %s", rc, err);
  if (rc != EU_OK) {
    eu_buf_free(&b);
    return 0;
  }
  rc = eu_clone_decode(Ls, b.p, b.n, &n, err, sizeof err);
  if (rc != EU_OK) {
    CHECK(rc == EU_ENOMEM, "what encode wrote does not decode: %s", err);
    eu_buf_free(&b);
    return 0;
  }
  CHECK(n == nvals, "encoded %d values, decoded %d", nvals, n);
  CHECK((double)b.n >= lo && (double)b.n <= hi, "%zu bytes encoded, not within %.0f..%.0f", b.n, lo, hi);
  /* walking every path of a large shared value is slow: the bytes encoded
   * again below check it as well */
  for (i = 0; i < nvals && b.n < (1u << 16); i++)
    CHECK(same_value(first + i, first + nvals + i), "value %d changed in the round trip", i + 1);
  eu_buf_init(&again);
  rc = eu_clone_encode(Ls, first + nvals, nvals, &again, err, sizeof err);
  CHECK(rc == EU_OK || rc == EU_ENOMEM, "a decoded value does not encode: %s", err);
  if (rc == EU_OK)
    CHECK(again.n == b.n && memcmp(again.p, b.p, b.n) == 0, "one value, two encodings");
  check_format(b.p, b.n, 200, 1);
  eu_buf_free(&again);
  eu_buf_free(&b);
  return 0;
}

static void run_round_trip(fz *f) {
  gen g;
  g.f = *f;
  g.made = 0;
  g.nodes = 0;
  lua_settop(L, 0);
  lua_pushcfunction(L, round_trip);
  lua_pushlightuserdata(L, &g);
  if (lua_pcall(L, 1, 0, 0) != LUA_OK)
    CHECK(strstr(lua_tostring(L, -1), "memory") != NULL, "round trip raised: %s", lua_tostring(L, -1));
  lua_settop(L, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz f;
  if (!L) {
    L = fz_lua_new();
    if (!L) abort();
    lua_sethook(L, NULL, 0, 0);  /* no Lua code runs here */
    lua_newtable(L);  /* an id class, so an id that decodes encodes back as one */
    eu_clone_set_id_class(L, -1);
    lua_pop(L, 1);
  }
  f.p = data;
  f.n = size;
  if (fz_u8(&f) & 1) run_round_trip(&f);
  else run_decode(&f);
  lua_gc(L, LUA_GCCOLLECT, 0);
  return 0;
}
