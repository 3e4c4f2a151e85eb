/*
 * eutaxy.json's encoder in C: ljson.h says what, lua/eutaxy/json.lua is the
 * definition. The text is built in a buffer on the C stack and, once it
 * outgrows that, in a userdata on the Lua stack that grows by replacement,
 * so an error raised while encoding (memory, the CPU meter) leaves nothing
 * to free.
 */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "buf.h"
#include "ljson.h"
#include "sandbox.h"

#define MAX_DEPTH 100

typedef struct out {
  lua_State *L;
  char *p;
  size_t n, cap;
  int slot;       /* the userdata holding p, on the stack */
  int array_mt;   /* stack index of json.array's metatable */
  int null;       /* stack index of json.null */
  int metered;
  int64_t values;     /* values written and not charged yet */
  size_t charged;     /* bytes of p charged */
} out;

/* An isolate's meter: a VM instruction a value and a 64 bytes written,
 * charged as the walk goes, so a huge value stops where the budget ends. */
static void charge(out *o) {
  if (!o->metered) return;
  eu_sandbox_charge(o->L, o->values + (int64_t)((o->n - o->charged) / 64), "json.encode");
  o->values = 0;
  o->charged = o->n - (o->n - o->charged) % 64;
}

static void reserve(out *o, size_t n) {
  size_t cap;
  char *q;
  if (o->cap - o->n >= n) return;
  cap = o->cap * 2;
  while (cap - o->n < n) cap *= 2;
  q = lua_newuserdatauv(o->L, cap, 0);
  memcpy(q, o->p, o->n);
  lua_replace(o->L, o->slot);
  o->p = q;
  o->cap = cap;
}

static void put(out *o, const char *s, size_t n) {
  reserve(o, n);
  memcpy(o->p + o->n, s, n);
  o->n += n;
}

/* The quote, the backslash and the control bytes (0-31 and 127) escaped,
 * every other byte as it is, as json.lua's encode_string. */
static void put_quoted(out *o, const unsigned char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  size_t i, from = 0;
  reserve(o, n + 2);
  o->p[o->n++] = '"';
  for (i = 0; i < n; i++) {
    unsigned char c = s[i];
    char esc[6];
    size_t k = 2;
    if (c >= 32 && c != '"' && c != '\\' && c != 127) continue;
    put(o, (const char *)s + from, i - from);
    from = i + 1;
    esc[0] = '\\';
    switch (c) {
    case '"': esc[1] = '"'; break;
    case '\\': esc[1] = '\\'; break;
    case '\b': esc[1] = 'b'; break;
    case '\f': esc[1] = 'f'; break;
    case '\n': esc[1] = 'n'; break;
    case '\r': esc[1] = 'r'; break;
    case '\t': esc[1] = 't'; break;
    default:
      memcpy(esc + 1, "u00", 3);
      esc[4] = hex[c >> 4];
      esc[5] = hex[c & 15];
      k = 6;
    }
    put(o, esc, k);
  }
  put(o, (const char *)s + from, n - from);
  put(o, "\"", 1);
}

/* The first of %.14g .. %.17g that reads back as v, as json.lua's
 * encode_float; 0 for NaN and the infinities, which it raises on. */
static int put_float(out *o, double v) {
  char buf[64];
  int precision, n = 0;
  if (isnan(v) || isinf(v)) return 0;
  for (precision = 14; precision <= 17; precision++) {
    n = snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (precision == 17 || strtod(buf, NULL) == v) break;
  }
  put(o, buf, (size_t)n);
  return 1;
}

static int put_value(out *o, int idx, int depth);

/* A key of an object, and the stack slot of the copy that keeps it reachable. */
typedef struct okey {
  eu_span s;
  int slot;
} okey;

static int okey_cmp(const void *a, const void *b) { return eu_span_cmp(&((const okey *)a)->s, &((const okey *)b)->s); }

/* The few keys most objects have are sorted on the C stack, by insertion. */
#define FEW_KEYS 16

/* The object at idx, of nkeys string keys, with its keys sorted bytewise
 * (json.lua's order in every locale). A copy of each key stays on the Lua
 * stack, below the walk's own key, so the keys stay reachable whatever a
 * finalizer, run by an allocation below, does to the table; neither loop
 * allocates (the array of keys has its room). 0 when the stack cannot hold
 * the keys: json.lua encodes such an object. */
static int put_object(out *o, int idx, int depth, size_t nkeys) {
  lua_State *L = o->L;
  okey few[FEW_KEYS], *keys = few, x;
  size_t k = 0, i, j;
  int top = lua_gettop(L);
  if (nkeys > (size_t)INT_MAX / 2 || !lua_checkstack(L, (int)nkeys + 4)) return 0;
  if (nkeys > FEW_KEYS) keys = lua_newuserdatauv(L, nkeys * sizeof *keys, 0);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) == LUA_TSTRING && k < nkeys) {
      lua_pushvalue(L, -1);
      lua_insert(L, -2);
      keys[k].s.p = lua_tolstring(L, -2, &keys[k].s.n);
      keys[k].slot = lua_gettop(L) - 1;
      k++;
    }
  }
  if (k > FEW_KEYS) {
    qsort(keys, k, sizeof *keys, okey_cmp);
  } else {
    for (i = 1; i < k; i++) {
      x = keys[i];
      for (j = i; j > 0 && eu_span_cmp(&keys[j - 1].s, &x.s) > 0; j--) keys[j] = keys[j - 1];
      keys[j] = x;
    }
  }
  put(o, "{", 1);
  for (i = 0; i < k; i++) {
    if (i > 0) put(o, ",", 1);
    put_quoted(o, (const unsigned char *)keys[i].s.p, keys[i].s.n);
    put(o, ":", 1);
    lua_pushvalue(L, keys[i].slot);
    lua_rawget(L, idx);
    if (!put_value(o, lua_gettop(L), depth + 1)) return 0;
    lua_pop(L, 1);
  }
  put(o, "}", 1);
  lua_settop(L, top);
  return 1;
}

/* The table at idx (absolute); 0 when json.lua is to say it. */
static int put_table(out *o, int idx, int depth) {
  lua_State *L = o->L;
  lua_Integer count = 0, max_index = 0, i;
  size_t nkeys = 0;
  int marked = 0;
  if (depth > MAX_DEPTH || !lua_checkstack(L, 6)) return 0;
  if (lua_getmetatable(L, idx)) {
    marked = lua_rawequal(L, -1, o->array_mt);
    lua_pop(L, 1);
    if (!marked) return 0;  /* getmetatable may answer otherwise */
  }
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) == LUA_TSTRING) {
      nkeys++;
    } else if (lua_isinteger(L, -1) && lua_tointeger(L, -1) >= 1) {
      count++;
      if (lua_tointeger(L, -1) > max_index) max_index = lua_tointeger(L, -1);
    } else {
      lua_pop(L, 1);
      return 0;
    }
  }
  if ((count > 0 && nkeys > 0) || (marked && nkeys > 0)) return 0;
  if (count > 0 || marked) {
    if (max_index != count) return 0;
    put(o, "[", 1);
    for (i = 1; i <= count; i++) {
      if (i > 1) put(o, ",", 1);
      lua_rawgeti(L, idx, i);
      if (!put_value(o, lua_gettop(L), depth + 1)) return 0;
      lua_pop(L, 1);
    }
    put(o, "]", 1);
    return 1;
  }
  if (nkeys == 0) {
    put(o, "{}", 2);
    return 1;
  }
  return put_object(o, idx, depth, nkeys);
}

static int put_value(out *o, int idx, int depth) {
  lua_State *L = o->L;
  if (++o->values >= 256) charge(o);
  switch (lua_type(L, idx)) {
  case LUA_TSTRING: {
    size_t n;
    const char *s = lua_tolstring(L, idx, &n);
    put_quoted(o, (const unsigned char *)s, n);
    return 1;
  }
  case LUA_TNUMBER:
    if (lua_isinteger(L, idx)) {
      char buf[20];
      put(o, buf, eu_dec64((int64_t)lua_tointeger(L, idx), buf));
      return 1;
    }
    return put_float(o, (double)lua_tonumber(L, idx));
  case LUA_TBOOLEAN:
    if (lua_toboolean(L, idx)) put(o, "true", 4);
    else put(o, "false", 5);
    return 1;
  case LUA_TNIL:
    put(o, "null", 4);
    return 1;
  case LUA_TLIGHTUSERDATA:
    if (!lua_rawequal(L, idx, o->null)) return 0;
    put(o, "null", 4);
    return 1;
  case LUA_TTABLE:
    return put_table(o, idx, depth);
  default:
    return 0;
  }
}

/* json.encode: the closure json_encoder makes, with json.array's
 * metatable, json.null and json.lua's encoder as its upvalues. */
static int json_encode(lua_State *L, int metered) {
  out o;
  char first[256];  /* the text until it outgrows this: most do not */
  int ok;
  lua_settop(L, 1);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_pushvalue(L, lua_upvalueindex(2));
  memset(&o, 0, sizeof o);
  o.L = L;
  o.array_mt = 2;
  o.null = 3;
  o.metered = metered;
  o.cap = sizeof first;
  o.p = first;
  lua_pushnil(L);  /* the slot of the userdata that takes over from first */
  o.slot = lua_gettop(L);
  ok = put_value(&o, 1, 0);
  charge(&o);
  if (!ok) {  /* json.lua's encoder says what is wrong, or encodes what is deep */
    lua_settop(L, 1);
    lua_pushvalue(L, lua_upvalueindex(3));
    lua_insert(L, 1);
    lua_call(L, 1, 1);
    return 1;
  }
  lua_pushlstring(L, o.p, o.n);
  return 1;
}

static int encode_metered(lua_State *L) { return json_encode(L, 1); }
static int encode_plain(lua_State *L) { return json_encode(L, 0); }

static int json_encoder(lua_State *L, lua_CFunction fn) {
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_checktype(L, 3, LUA_TFUNCTION);
  lua_settop(L, 3);
  lua_pushcclosure(L, fn, 3);
  return 1;
}

int eu_json_encoder(lua_State *L) { return json_encoder(L, encode_plain); }
int eu_json_encoder_metered(lua_State *L) { return json_encoder(L, encode_metered); }
