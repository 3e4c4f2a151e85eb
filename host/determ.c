/*
 * determ.c: the base library made deterministic inside an isolate.
 *
 * Owns the replacements determ.h lists, and nothing else of the state: it
 * edits the global, math, os and io tables in place (so require "math"
 * sees the same functions) and keeps the hooks as a light userdata upvalue,
 * since they outlive the state.
 *
 * pairs and next order keys by eu_keycmp (clone.c), the order the value
 * encoding uses. Keys that are references have no content to order by: they
 * come last, by address, a fixed order within one process only.
 *
 * Time: os.time() and os.date() read the virtual wall clock, os.clock() the
 * virtual time since the world started. os.date always formats in UTC (a
 * format without a leading "!" gets one) and os.time(t) reads t as UTC,
 * because the machine's timezone would otherwise leak into results. So
 * os.time(os.date("*t")) round-trips on every machine.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <lua.h>
#include <lauxlib.h>

#include "clone.h"
#include "determ.h"
#include "eutaxy.h"

static const eu_determ_hooks *hooks_of(lua_State *L) {
  return (const eu_determ_hooks *)lua_touserdata(L, lua_upvalueindex(1));
}

/* eu_keycmp's order, with references tied in eu_keycmp broken by address:
 * next needs a strict order to step through keys one by one. */
static int key_order(const eu_key *a, const eu_key *b) {
  int c = eu_key_cmp(a, b);
  if (c == 0 && a->ref != b->ref)
    c = (uintptr_t)a->ref < (uintptr_t)b->ref ? -1 : 1;
  return c;
}

/*
 * next and pairs.
 */

static void (*charge)(lua_State *L, int64_t cost, const char *what);

void eu_determ_meter(void (*fn)(lua_State *L, int64_t cost, const char *what)) {
  charge = fn;
}

static void charge_sort(lua_State *L, size_t n, const char *what) {
  int64_t lg = 1;
  if (!charge) return;
  while (((size_t)1 << lg) < n && lg < 62) lg++;
  charge(L, (int64_t)n * lg + 1, what);
}

/* The smallest key greater than k, found by a scan: for a key the cache
 * below no longer knows (set to nil before the traversal it names). */
static int next_scan(lua_State *L) {
  eu_key k, cand, best;
  int have = 0;
  eu_key_describe(L, 2, &k);
  lua_settop(L, 2);
  lua_pushnil(L);  /* 3: the best key so far */
  lua_pushnil(L);
  while (lua_next(L, 1)) {  /* 4: key, 5: value */
    eu_key_describe(L, 4, &cand);
    if ((k.type == LUA_TNIL || key_order(&cand, &k) > 0) && (!have || key_order(&cand, &best) < 0)) {
      lua_copy(L, 4, 3);
      best = cand;  /* its string, if any, is held by slot 3 */
      have = 1;
    }
    lua_pop(L, 1);
  }
  if (!have) {
    lua_pushnil(L);
    return 1;
  }
  lua_pushvalue(L, 3);
  lua_pushvalue(L, 3);
  lua_rawget(L, 1);
  return 2;
}

/* next keeps, per state, the key order of the table it last stepped
 * through: { t, keys in eu_keycmp order, key -> its position }. A
 * traversal (next(t, nil), then each key in turn) sorts once and steps in
 * O(1) amortised, visiting what the scan above would visit: keys set to
 * nil on the way are skipped, as the scan would not see them. */
static const char next_key = 0;

const void *eu_determ_cache_key(void) { return &next_key; }

static void next_rebuild(lua_State *L) {
  eu_key *order;
  size_t n = 0, i = 0;
  lua_pushnil(L);
  while (lua_next(L, 1)) {
    lua_pop(L, 1);
    n++;
  }
  if (n > (size_t)INT32_MAX) luaL_error(L, "table too large for next");
  charge_sort(L, n, "next");
  lua_createtable(L, 3, 0);  /* the cache */
  lua_pushvalue(L, 1);
  lua_rawseti(L, -2, 1);
  lua_createtable(L, (int)n, 0);  /* the keys as found, which hold their strings */
  order = (eu_key *)lua_newuserdatauv(L, n * sizeof *order, 0);
  lua_pushnil(L);
  while (lua_next(L, 1) && i < n) {
    lua_pop(L, 1);
    lua_pushvalue(L, -1);
    lua_rawseti(L, -4, (lua_Integer)i + 1);
    eu_key_describe(L, -1, &order[i]);
    order[i].pos = i + 1;
    i++;
  }
  eu_key_sort(order, i);
  lua_createtable(L, (int)i, 0);  /* keys in order */
  lua_createtable(L, 0, (int)i);  /* key -> position */
  for (n = 0; n < i; n++) {
    lua_rawgeti(L, -4, (lua_Integer)order[n].pos);
    lua_pushvalue(L, -1);
    lua_rawseti(L, -4, (lua_Integer)n + 1);
    lua_pushinteger(L, (lua_Integer)n + 1);
    lua_rawset(L, -3);
  }
  lua_rawseti(L, -5, 3);
  lua_rawseti(L, -4, 2);
  lua_pop(L, 2);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &next_key);
}

static int d_next(lua_State *L) {
  lua_Integer i = 0, n;
  int64_t steps = 0;
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 2);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &next_key);  /* 3 */
  if (lua_isnil(L, 2)) {
    lua_pop(L, 1);
    next_rebuild(L);
  } else {
    int hit = 0;
    if (lua_istable(L, 3)) {
      lua_rawgeti(L, 3, 1);
      if (lua_rawequal(L, -1, 1)) {
        lua_rawgeti(L, 3, 3);
        lua_pushvalue(L, 2);
        lua_rawget(L, -2);
        if (lua_isinteger(L, -1)) {
          i = lua_tointeger(L, -1);
          hit = 1;
        }
        lua_pop(L, 2);
      }
      lua_pop(L, 1);
    }
    if (!hit) {
      /* raw next raises "invalid key to 'next'" for a key t never held, and
       * accepts one just set to nil during a traversal: the same rule as Lua */
      lua_pushvalue(L, 2);
      if (lua_next(L, 1)) lua_pop(L, 2);
      lua_pop(L, 1);
      next_rebuild(L);
      lua_rawgeti(L, 3, 3);
      lua_pushvalue(L, 2);
      lua_rawget(L, -2);
      if (!lua_isinteger(L, -1)) {
        lua_settop(L, 2);
        return next_scan(L);
      }
      i = lua_tointeger(L, -1);
      lua_pop(L, 2);
    }
  }
  lua_rawgeti(L, 3, 2);  /* 4: keys in order */
  n = (lua_Integer)lua_rawlen(L, 4);
  while (++i <= n) {
    steps++;
    lua_rawgeti(L, 4, i);
    lua_pushvalue(L, -1);
    if (lua_rawget(L, 1) != LUA_TNIL) {
      if (charge) charge(L, steps, "next");
      return 2;
    }
    lua_pop(L, 2);
  }
  if (charge) charge(L, steps + 1, "next");
  lua_pushnil(L);
  return 1;
}

/* Upvalues: 1 the table, 2 its keys as of the pairs call, 3 an eu_key array
 * (userdata) in sorted order whose pos indexes upvalue 2, 4 the position. */
static int pairs_iter(lua_State *L) {
  const eu_key *order = (const eu_key *)lua_touserdata(L, lua_upvalueindex(3));
  size_t n = lua_rawlen(L, lua_upvalueindex(3)) / sizeof *order;
  lua_Integer i = lua_tointeger(L, lua_upvalueindex(4));
  while (i >= 0 && (size_t)i < n) {
    lua_rawgeti(L, lua_upvalueindex(2), (lua_Integer)order[i].pos);
    i++;
    lua_pushvalue(L, -1);
    if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) {  /* skip keys set to nil since */
      lua_pushinteger(L, i);
      lua_replace(L, lua_upvalueindex(4));
      return 2;
    }
    lua_pop(L, 2);
  }
  lua_pushinteger(L, i);
  lua_replace(L, lua_upvalueindex(4));
  lua_pushnil(L);
  return 1;
}

static int pairs_cont(lua_State *L, int status, lua_KContext k) {
  (void)L; (void)status; (void)k;
  return 3;
}

static int d_pairs(lua_State *L) {
  eu_key *order;
  size_t n = 0, i = 0;
  luaL_checkany(L, 1);
  if (luaL_getmetafield(L, 1, "__pairs") != LUA_TNIL) {  /* as Lua 5.4 does */
    lua_pushvalue(L, 1);
    lua_callk(L, 1, 3, 0, pairs_cont);
    return 3;
  }
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  lua_pushnil(L);
  while (lua_next(L, 1)) {
    lua_pop(L, 1);
    n++;
  }
  if (n > (size_t)INT32_MAX) return luaL_error(L, "table too large for pairs");
  lua_createtable(L, (int)n, 0);  /* 2: the keys, which keep their strings alive */
  order = (eu_key *)lua_newuserdatauv(L, n * sizeof *order, 0);  /* 3 */
  lua_pushnil(L);
  while (lua_next(L, 1) && i < n) {  /* 4: key, 5: value */
    lua_pushvalue(L, 4);
    lua_rawseti(L, 2, (lua_Integer)i + 1);
    eu_key_describe(L, 4, &order[i]);
    order[i].pos = i + 1;
    i++;
    lua_pop(L, 1);
  }
  lua_settop(L, 3);
  charge_sort(L, i, "pairs");
  eu_key_sort(order, i);
  lua_pushvalue(L, 1);
  lua_insert(L, 2);  /* 1 t, 2 t, 3 keys, 4 order */
  lua_pushinteger(L, 0);
  lua_pushcclosure(L, pairs_iter, 4);
  lua_pushvalue(L, 1);
  lua_pushnil(L);
  return 3;
}

/*
 * math.random, with Lua 5.4's contract, from the world's PRNG.
 */

/* Lua 5.4's projection of a random integer into [0, n]: the same draws give
 * the same results as Lua's own math.random would. */
static lua_Unsigned project(lua_Unsigned ran, lua_Unsigned n, const eu_determ_hooks *h) {
  lua_Unsigned lim = n;
  if ((n & (n + 1)) == 0) return ran & n;  /* n + 1 is a power of 2 */
  lim |= (lim >> 1);
  lim |= (lim >> 2);
  lim |= (lim >> 4);
  lim |= (lim >> 8);
  lim |= (lim >> 16);
  lim |= (lim >> 32);
  while ((ran &= lim) > n) ran = (lua_Unsigned)h->random(h->ud);
  return ran;
}

static int d_random(lua_State *L) {
  const eu_determ_hooks *h = hooks_of(L);
  lua_Integer low, up;
  lua_Unsigned p;
  uint64_t rv = h->random(h->ud);  /* drawn before the checks, as Lua does */
  switch (lua_gettop(L)) {
    case 0:
      lua_pushnumber(L, (lua_Number)(rv >> 11) * 0x1.0p-53);  /* [0, 1) */
      return 1;
    case 1:
      low = 1;
      up = luaL_checkinteger(L, 1);
      if (up == 0) {  /* all 64 bits */
        lua_pushinteger(L, (lua_Integer)rv);
        return 1;
      }
      break;
    case 2:
      low = luaL_checkinteger(L, 1);
      up = luaL_checkinteger(L, 2);
      break;
    default:
      return luaL_error(L, "wrong number of arguments");
  }
  luaL_argcheck(L, low <= up, 1, "interval is empty");
  p = project((lua_Unsigned)rv, (lua_Unsigned)up - (lua_Unsigned)low, h);
  lua_pushinteger(L, (lua_Integer)(p + (lua_Unsigned)low));
  return 1;
}

static int d_randomseed(lua_State *L) {
  (void)L;  /* the run's seed decides */
  return 0;
}

/*
 * Time, in UTC, from the virtual clock.
 */

static int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if (a % b != 0 && (a < 0) != (b < 0)) q--;
  return q;
}

/* Days since 1970-01-01 of a proleptic Gregorian date, and back (the
 * well-known era arithmetic; month 1..12). */
static int64_t days_from_civil(int64_t y, int m, int d) {
  int64_t era, yoe, doy, doe;
  y -= m <= 2;
  era = floor_div(y, 400);
  yoe = y - era * 400;
  doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d) {
  int64_t era, doe, yoe, doy, mp;
  z += 719468;
  era = floor_div(z, 146097);
  doe = z - era * 146097;
  yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  mp = (5 * doy + 2) / 153;
  *d = (int)(doy - (153 * mp + 2) / 5 + 1);
  *m = (int)(mp < 10 ? mp + 3 : mp - 9);
  *y = yoe + era * 400 + (*m <= 2);
}

/* A field of os.time's table, with Lua's defaults and messages. */
static int64_t get_field(lua_State *L, const char *key, int64_t d) {
  int isnum;
  int t = lua_getfield(L, 1, key);
  lua_Integer res = lua_tointegerx(L, -1, &isnum);
  if (!isnum) {
    if (t != LUA_TNIL) return luaL_error(L, "field '%s' is not an integer", key);
    if (d < 0) return luaL_error(L, "field '%s' missing in date table", key);
    res = d;
  }
  else if (res < INT32_MIN || res > INT32_MAX) {  /* what struct tm would hold */
    return luaL_error(L, "field '%s' is out-of-bound", key);
  }
  lua_pop(L, 1);
  return res;
}

static void set_field(lua_State *L, const char *key, int64_t v) {
  lua_pushinteger(L, (lua_Integer)v);
  lua_setfield(L, 1, key);
}

/* os.time(t) as Lua's, with t read as UTC: fields out of range carry over
 * (month 13 is January of the next year) and t is updated to the
 * normalized date, as mktime would. */
static int time_of_table(lua_State *L) {
  int64_t year, month, day, hour, min, sec, days, secs, y, yday;
  int m, d;
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  year = get_field(L, "year", -1);
  month = get_field(L, "month", -1);
  day = get_field(L, "day", -1);
  hour = get_field(L, "hour", 12);
  min = get_field(L, "min", 0);
  sec = get_field(L, "sec", 0);
  month -= 1;
  year += floor_div(month, 12);
  month -= floor_div(month, 12) * 12;
  days = days_from_civil(year, (int)month + 1, 1) + (day - 1);
  secs = days * 86400 + hour * 3600 + min * 60 + sec;  /* |secs| < 2^62: no overflow */
  days = floor_div(secs, 86400);
  civil_from_days(days, &y, &m, &d);
  yday = days - days_from_civil(y, 1, 1) + 1;
  set_field(L, "year", y);
  set_field(L, "month", m);
  set_field(L, "day", d);
  set_field(L, "hour", (secs - days * 86400) / 3600);
  set_field(L, "min", (secs - days * 86400) % 3600 / 60);
  set_field(L, "sec", (secs - days * 86400) % 60);
  set_field(L, "yday", yday);
  set_field(L, "wday", (days % 7 + 7 + 4) % 7 + 1);  /* 1970-01-01 was a Thursday (5) */
  lua_pushboolean(L, 0);
  lua_setfield(L, 1, "isdst");
  lua_pushinteger(L, (lua_Integer)secs);
  return 1;
}

static int d_time(lua_State *L) {
  const eu_determ_hooks *h = hooks_of(L);
  if (!lua_isnoneornil(L, 1)) return time_of_table(L);
  lua_pushinteger(L, (lua_Integer)floor_div(h->now_ms(h->ud), 1000));
  return 1;
}

static int d_clock(lua_State *L) {
  const eu_determ_hooks *h = hooks_of(L);
  lua_pushnumber(L, (lua_Number)h->elapsed_ms(h->ud) / 1000.0);
  return 1;
}

/* Upvalues: 1 the hooks, 2 the original os.date, which does the formatting. */
static int d_date(lua_State *L) {
  const eu_determ_hooks *h = hooks_of(L);
  size_t len;
  const char *fmt = luaL_optlstring(L, 1, "%c", &len);
  luaL_Buffer b;
  lua_settop(L, 2);  /* 2 is the time, nil if absent, whatever is pushed next */
  if (!lua_isnil(L, 2)) luaL_checkinteger(L, 2);
  lua_pushvalue(L, lua_upvalueindex(2));
  luaL_buffinit(L, &b);
  if (fmt[0] != '!') luaL_addchar(&b, '!');
  luaL_addlstring(&b, fmt, len);
  luaL_pushresult(&b);
  if (lua_isnil(L, 2)) lua_pushinteger(L, (lua_Integer)floor_div(h->now_ms(h->ud), 1000));
  else lua_pushvalue(L, 2);
  lua_call(L, 2, 1);
  return 1;
}

/* Upvalue 1: the function's name. */
static int d_unavailable(lua_State *L) {
  return luaL_error(L, "%s is not available inside an isolate", lua_tostring(L, lua_upvalueindex(1)));
}

/* os.setlocale inside an isolate: asking what a category is set to is
 * allowed (json's key order asks whether strings collate bytewise), changing
 * it is not, since the locale is the whole process's. Upvalue 1: the real one. */
static int d_setlocale(lua_State *L) {
  if (!lua_isnoneornil(L, 1))
    return luaL_error(L, "os.setlocale can only ask what the locale is inside an isolate, not change it");
  lua_settop(L, 2);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, 2, 1);
  return 1;
}

/* Replaces lib[name] in the table at the top of the stack, if there is one. */
static void refuse_field(lua_State *L, const char *lib, const char *name) {
  lua_pushfstring(L, "%s.%s", lib, name);
  lua_pushcclosure(L, d_unavailable, 1);
  lua_setfield(L, -2, name);
}

int eu_determ_open(lua_State *L, const eu_determ_hooks *hooks) {
  static const char *const os_refused[] = {
    "exit", "execute", "getenv", "remove", "rename", "tmpname", NULL
  };
  int i;
  if (!hooks || !hooks->now_ms || !hooks->elapsed_ms || !hooks->random) return EU_EINVAL;
  if (!lua_checkstack(L, 8)) return EU_ENOMEM;
  lua_pushcfunction(L, d_next);
  lua_setglobal(L, "next");
  lua_pushcfunction(L, d_pairs);
  lua_setglobal(L, "pairs");
  /* a library that was not opened is left absent */
  if (lua_getglobal(L, "math") == LUA_TTABLE) {
    lua_pushlightuserdata(L, (void *)hooks);
    lua_pushcclosure(L, d_random, 1);
    lua_setfield(L, -2, "random");
    lua_pushcfunction(L, d_randomseed);
    lua_setfield(L, -2, "randomseed");
  }
  lua_pop(L, 1);
  if (lua_getglobal(L, "os") == LUA_TTABLE) {
    lua_pushlightuserdata(L, (void *)hooks);
    lua_pushcclosure(L, d_time, 1);
    lua_setfield(L, -2, "time");
    lua_pushlightuserdata(L, (void *)hooks);
    lua_pushcclosure(L, d_clock, 1);
    lua_setfield(L, -2, "clock");
    if (lua_getfield(L, -1, "date") == LUA_TFUNCTION) {
      lua_pushlightuserdata(L, (void *)hooks);
      lua_insert(L, -2);
      lua_pushcclosure(L, d_date, 2);
      lua_setfield(L, -2, "date");
    }
    else lua_pop(L, 1);
    if (lua_getfield(L, -1, "setlocale") == LUA_TFUNCTION) {
      lua_pushcclosure(L, d_setlocale, 1);
      lua_setfield(L, -2, "setlocale");
    }
    else lua_pop(L, 1);
    for (i = 0; os_refused[i]; i++) refuse_field(L, "os", os_refused[i]);
  }
  lua_pop(L, 1);
  if (lua_getglobal(L, "io") == LUA_TTABLE) refuse_field(L, "io", "popen");
  lua_pop(L, 1);
  return EU_OK;
}
