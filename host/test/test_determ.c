/*
 * test_determ.c: pairs, next, math.random and the clock inside an isolate.
 */
#define _DEFAULT_SOURCE  /* timegm, setenv, tzset: only to check os.time against libc */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

#include "determ.h"
#include "eutaxy.h"
#include "test.h"
#include "prng.h"


/* The world's side of the hooks: a clock the test sets, and either a script
 * of random draws or a seeded PRNG once the script runs out. */
typedef struct world {
  int64_t now, elapsed;
  const uint64_t *script;
  size_t nscript, drawn;
  eu_prng prng;
} world;

static int64_t w_now(void *ud) { return ((world *)ud)->now; }
static int64_t w_elapsed(void *ud) { return ((world *)ud)->elapsed; }
static uint64_t w_random(void *ud) {
  world *w = ud;
  size_t i = w->drawn++;
  return i < w->nscript ? w->script[i] : eu_prng_next(&w->prng);
}

static void world_init(world *w, eu_determ_hooks *h, uint64_t seed) {
  memset(w, 0, sizeof *w);
  eu_prng_seed(&w->prng, seed);
  h->ud = w;
  h->now_ms = w_now;
  h->elapsed_ms = w_elapsed;
  h->random = w_random;
}

static lua_State *new_isolate(const eu_determ_hooks *h) {
  lua_State *L = luaL_newstate();
  ASSERT(L != NULL);
  luaL_openlibs(L);
  ASSERT_EQ(eu_determ_open(L, h), EU_OK);
  /* what the tests use to see an iteration: its keys, joined */
  ASSERT_EQ(luaL_dostring(L,
    "function keys(f, s, k) local out = {} "
    "  for key in f, s, k do out[#out + 1] = tostring(key) end "
    "  return table.concat(out, ' ') end"), LUA_OK);
  return L;
}

/* Runs chunk, which must succeed, and returns its one result as a string
 * (copied into buf). */
static const char *eval(lua_State *L, const char *chunk, char *buf, size_t len) {
  if (luaL_dostring(L, chunk) != LUA_OK) {
    fprintf(stderr, "chunk failed: %s\n  %s\n", lua_tostring(L, -1), chunk);
    exit(1);
  }
  snprintf(buf, len, "%s", luaL_tolstring(L, -1, NULL));
  lua_settop(L, 0);
  return buf;
}

static void check(lua_State *L, const char *chunk) {
  char buf[16];
  ASSERT_STR_EQ(eval(L, chunk, buf, sizeof buf), "true");
}

/* Runs chunk, which must raise; returns the message. */
static const char *eval_err(lua_State *L, const char *chunk, char *buf, size_t len) {
  if (luaL_dostring(L, chunk) == LUA_OK) {
    fprintf(stderr, "chunk did not fail: %s\n", chunk);
    exit(1);
  }
  snprintf(buf, len, "%s", lua_tostring(L, -1));
  lua_settop(L, 0);
  return buf;
}

static void test_pairs_visits_keys_in_sorted_order(void) {
  world w;
  eu_determ_hooks h;
  lua_State *L;
  char buf[512];
  world_init(&w, &h, 1);
  L = new_isolate(&h);
  ASSERT_STR_EQ(eval(L, "local t = { b = 1, a = 1, [''] = 1, aa = 1, [true] = 1, [false] = 1, "
                        "  [3] = 1, [1] = 1, [2] = 1, [-5] = 1, [2.5] = 1, [1e100] = 1, [-1/0] = 1, "
                        "  ['a b'] = 1, B = 1 } "
                        "return keys(pairs(t))", buf, sizeof buf),
                "-inf -5 1 2 2.5 3 1e+100  B a a b aa b false true");
  lua_close(L);
}

static const char *const fill_forward =
  "local t = {} for i = 1, 300 do t['key' .. i] = i end "
  "for i = 1, 40 do t[i] = i; t[i + 0.5] = i end t[true] = 1 t[false] = 0 return t";
static const char *const fill_backward =
  "local t = {} for i = 1, 2000 do t['x' .. i] = i end for i = 1, 2000 do t['x' .. i] = nil end "
  "t[false] = 0 t[true] = 1 for i = 40, 1, -1 do t[i + 0.5] = i; t[i] = i end "
  "for i = 300, 1, -1 do t['key' .. i] = i end return t";

static void test_pairs_order_is_the_same_in_two_states(void) {
  world w1, w2;
  eu_determ_hooks h1, h2;
  lua_State *L1, *L2;
  char chunk[1024], a[8192], b[8192];
  world_init(&w1, &h1, 1);
  world_init(&w2, &h2, 2);
  L1 = new_isolate(&h1);
  L2 = new_isolate(&h2);
  snprintf(chunk, sizeof chunk, "local t = (function() %s end)() return keys(pairs(t))", fill_forward);
  eval(L1, chunk, a, sizeof a);
  snprintf(chunk, sizeof chunk, "local t = (function() %s end)() return keys(pairs(t))", fill_backward);
  eval(L2, chunk, b, sizeof b);
  ASSERT_STR_EQ(a, b);
  ASSERT(strncmp(a, "1 1.5 2 2.5 3", 13) == 0);
  lua_close(L1);
  lua_close(L2);
}

static void test_pairs_skips_keys_set_to_nil_during_traversal(void) {
  world w;
  eu_determ_hooks h;
  lua_State *L;
  char buf[256];
  world_init(&w, &h, 1);
  L = new_isolate(&h);
  ASSERT_STR_EQ(eval(L, "local t = { a = 1, b = 2, c = 3, d = 4, e = 5 } local seen = {} "
                        "for k, v in pairs(t) do seen[#seen + 1] = k .. v "
                        "  if k == 'a' then t.c = nil end "
                        "  if k == 'b' then t.b = nil end end "
                        "return table.concat(seen, ' ') .. ' / ' .. keys(pairs(t))", buf, sizeof buf),
                "a1 b2 d4 e5 / a d e");
  /* changing values of existing keys is fine too */
  check(L, "local t = { 1, 2, 3 } for k, v in pairs(t) do t[k] = v * 10 end "
           "return t[1] == 10 and t[2] == 20 and t[3] == 30");
  lua_close(L);
}

static void test_pairs_honours_pairs_metamethod(void) {
  world w;
  eu_determ_hooks h;
  lua_State *L;
  char buf[256];
  world_init(&w, &h, 1);
  L = new_isolate(&h);
  ASSERT_STR_EQ(eval(L, "local proxy = setmetatable({}, { __pairs = function(self) "
                        "  return function(s, k) if k == nil then return 'only', s end end, self, nil end }) "
                        "local out = {} for k, v in pairs(proxy) do out[#out + 1] = k .. tostring(v == proxy) end "
                        "return table.concat(out, ',')", buf, sizeof buf),
                "onlytrue");
  /* exactly three values, as Lua 5.4's pairs */
  check(L, "local p = setmetatable({}, { __pairs = function() return 1, 2, 3, 4 end }) "
           "return select('#', pairs(p)) == 3");
  /* a metatable without __pairs does not change the traversal */
  ASSERT_STR_EQ(eval(L, "return keys(pairs(setmetatable({ z = 1, y = 2 }, { __index = function() return 0 end })))",
                     buf, sizeof buf), "y z");
  ASSERT_CONTAINS(eval_err(L, "pairs(nil)", buf, sizeof buf),
                  "bad argument #1 to 'pairs' (table expected, got nil)");
  ASSERT_CONTAINS(eval_err(L, "pairs()", buf, sizeof buf), "bad argument #1 to 'pairs'");
  lua_close(L);
}

static void test_next_follows_the_pairs_order(void) {
  world w;
  eu_determ_hooks h;
  lua_State *L;
  char a[8192], b[8192], chunk[1024];
  world_init(&w, &h, 1);
  L = new_isolate(&h);
  snprintf(chunk, sizeof chunk, "local t = (function() %s end)() return keys(pairs(t))", fill_backward);
  eval(L, chunk, a, sizeof a);
  snprintf(chunk, sizeof chunk, "local t = (function() %s end)() return keys(next, t)", fill_backward);
  eval(L, chunk, b, sizeof b);
  ASSERT_STR_EQ(a, b);
  check(L, "local t = { x = 1, [1] = 'a' } local k, v = next(t) "
           "return k == 1 and v == 'a' and next(t, 'x') == nil and next({}) == nil");
  /* clearing each key as next walks on is allowed, as in Lua */
  check(L, "local t = { a = 1, b = 2, c = 3, 10, 20 } for k in next, t do t[k] = nil end "
           "return next(t) == nil");
  ASSERT_CONTAINS(eval_err(L, "next({ a = 1 }, 'zz')", a, sizeof a), "invalid key to 'next'");
  ASSERT_CONTAINS(eval_err(L, "next(nil)", a, sizeof a),
                  "bad argument #1 to 'next' (table expected, got nil)");
  lua_close(L);
}

static void test_reference_keys_come_last_once_each(void) {
  world w;
  eu_determ_hooks h;
  lua_State *L;
  world_init(&w, &h, 1);
  L = new_isolate(&h);
  check(L, "local t = { [{}] = 'table', [{}] = 'table', [print] = 'function', [type] = 'function', "
           "  [coroutine.create(print)] = 'thread', z = 'string', [true] = 'boolean', [1] = 'number' } "
           "local function walk(f, s) local out, seen = {}, {} "
           "  for k, v in f, s do assert(not seen[k]) seen[k] = true out[#out + 1] = v end "
           "  return table.concat(out, ' ') end "
           "local want = 'number string boolean table table function function thread' "
           "return walk(pairs(t)) == want and walk(next, t) == want");
  lua_close(L);
}

static void test_random_draws_from_the_hook_as_lua_does(void) {
  static const uint64_t script[] = {
    0, UINT64_MAX, 0x8000000000000000ULL, 6, 3, 12345, 0xdeadbeefULL, 7, 7, 7, 7
  };
  world w;
  eu_determ_hooks h;
  lua_State *L;
  char buf[256];
  world_init(&w, &h, 1);
  w.script = script;
  w.nscript = sizeof script / sizeof script[0];
  L = new_isolate(&h);
  check(L, "return math.random() == 0.0");
  check(L, "local x = math.random() return x < 1 and x == (2^53 - 1) / 2^53");
  check(L, "return math.random(0) == math.mininteger");
  ASSERT_EQ(w.drawn, 3);
  check(L, "return math.random(1, 6) == 4");  /* 6 & 7 is past 5: drawn again, 3 & 7 */
  ASSERT_EQ(w.drawn, 5);
  check(L, "return math.random(3, 3) == 3");
  check(L, "return math.random(math.mininteger, math.maxinteger) == 0xdeadbeef + math.mininteger");
  check(L, "return math.random(8) == 8");  /* 7 & 7 in [0, 7] */
  ASSERT_CONTAINS(eval_err(L, "math.random(2, 1)", buf, sizeof buf), "interval is empty");
  ASSERT_CONTAINS(eval_err(L, "math.random(1, 2, 3)", buf, sizeof buf), "wrong number of arguments");
  ASSERT_CONTAINS(eval_err(L, "math.random(1.5)", buf, sizeof buf), "number has no integer representation");
  ASSERT_CONTAINS(eval_err(L, "math.random(-3)", buf, sizeof buf), "interval is empty");
  lua_close(L);
}

/* Lua's own math.random, seeded by math.randomseed(42), against ours drawing
 * from the same xoshiro256** state: every result must agree. */
static void test_random_matches_lua_itself(void) {
  static const char *const draw =
    "local out = {} for i = 1, 300 do "
    "  out[#out + 1] = math.random(1, 6) out[#out + 1] = math.random(1000) "
    "  out[#out + 1] = math.random(-7, 1 << 40) out[#out + 1] = math.random(0) "
    "  out[#out + 1] = string.format('%a', math.random()) "
    "  out[#out + 1] = math.random(math.mininteger, math.maxinteger) "
    "  out[#out + 1] = math.random(3, 1 << 62) end "
    "return table.concat(out, ' ')";
  world w;
  eu_determ_hooks h;
  lua_State *lua, *iso;
  char *a = malloc(65536), *b = malloc(65536);
  int i;
  ASSERT(a && b);
  world_init(&w, &h, 1);
  w.prng.s[0] = 42;  /* what Lua 5.4's randomseed(42) sets, then 16 draws discarded */
  w.prng.s[1] = 0xff;
  w.prng.s[2] = 0;
  w.prng.s[3] = 0;
  for (i = 0; i < 16; i++) eu_prng_next(&w.prng);
  lua = luaL_newstate();
  luaL_openlibs(lua);
  ASSERT_EQ(luaL_dostring(lua, "math.randomseed(42)"), LUA_OK);
  iso = new_isolate(&h);
  eval(lua, draw, a, 65536);
  eval(iso, draw, b, 65536);
  ASSERT(strlen(a) > 1000);
  ASSERT_STR_EQ(a, b);
  free(a);
  free(b);
  lua_close(lua);
  lua_close(iso);
}

static void test_random_stays_in_range(void) {
  world w;
  eu_determ_hooks h;
  lua_State *L;
  world_init(&w, &h, 7);
  L = new_isolate(&h);
  check(L, "local seen = {} for i = 1, 5000 do local x = math.random(1, 6) "
           "  assert(math.type(x) == 'integer' and x >= 1 and x <= 6) seen[x] = true end "
           "for i = 1, 6 do assert(seen[i]) end "
           "for i = 1, 5000 do local x = math.random(10) assert(x >= 1 and x <= 10) end "
           "for i = 1, 5000 do local x = math.random(-3, 3) assert(x >= -3 and x <= 3) end "
           "for i = 1, 5000 do local x = math.random() assert(math.type(x) == 'float' and x >= 0 and x < 1) end "
           "return true");
  lua_close(L);
}

static void test_random_sequence_is_the_hooks(void) {
  world w1, w2, w3;
  eu_determ_hooks h1, h2, h3;
  lua_State *L1, *L2, *L3;
  char a[1024], b[1024], c[1024];
  static const char *const draw =
    "local out = {} for i = 1, 20 do out[#out + 1] = math.random(1000) end "
    "out[#out + 1] = math.random() return table.concat(out, ' ')";
  world_init(&w1, &h1, 99);
  world_init(&w2, &h2, 99);
  world_init(&w3, &h3, 100);
  L1 = new_isolate(&h1);
  L2 = new_isolate(&h2);
  L3 = new_isolate(&h3);
  /* randomseed neither returns anything nor changes the draws */
  check(L2, "return select('#', math.randomseed(12345)) == 0 and select('#', math.randomseed()) == 0");
  eval(L1, draw, a, sizeof a);
  eval(L2, draw, b, sizeof b);
  eval(L3, draw, c, sizeof c);
  ASSERT_STR_EQ(a, b);
  ASSERT(strcmp(a, c) != 0);
  lua_close(L1);
  lua_close(L2);
  lua_close(L3);
}

static void test_time_reads_the_virtual_clock(void) {
  world w;
  eu_determ_hooks h;
  lua_State *L;
  char buf[128];
  world_init(&w, &h, 1);
  w.now = 1700000000123LL;  /* 2023-11-14 22:13:20.123 UTC */
  w.elapsed = 2500;
  L = new_isolate(&h);
  check(L, "return os.time() == 1700000000 and math.type(os.time()) == 'integer'");
  check(L, "return os.clock() == 2.5 and math.type(os.clock()) == 'float'");
  ASSERT_STR_EQ(eval(L, "return os.date('%Y-%m-%d %H:%M:%S')", buf, sizeof buf), "2023-11-14 22:13:20");
  ASSERT_STR_EQ(eval(L, "return os.date('!%Y-%m-%d %H:%M:%S')", buf, sizeof buf), "2023-11-14 22:13:20");
  ASSERT_STR_EQ(eval(L, "return os.date('%H:%M', 0)", buf, sizeof buf), "00:00");
  check(L, "local d = os.date('*t') return d.year == 2023 and d.month == 11 and d.day == 14 "
           "  and d.hour == 22 and d.isdst == false");
  check(L, "return os.time{ year = 2023, month = 11, day = 14, hour = 22, min = 13, sec = 20 } == 1700000000");
  check(L, "return os.time(os.date('*t')) == os.time()");
  check(L, "return os.time{ year = 1970, month = 1, day = 1 } == 12 * 3600");  /* hour defaults to 12 */
  w.now = -1;  /* a millisecond before the epoch is still second -1 */
  check(L, "return os.time() == -1");
  w.now = 86400000;
  w.elapsed = 1;
  check(L, "return os.time() == 86400 and os.clock() == 0.001");
  ASSERT_STR_EQ(eval(L, "return os.date('%Y-%m-%d')", buf, sizeof buf), "1970-01-02");
  ASSERT_CONTAINS(eval_err(L, "os.time{ year = 2024 }", buf, sizeof buf), "field 'month' missing in date table");
  ASSERT_CONTAINS(eval_err(L, "os.time{ year = 2024, month = 'x', day = 1 }", buf, sizeof buf),
                  "field 'month' is not an integer");
  ASSERT_CONTAINS(eval_err(L, "os.time(5)", buf, sizeof buf), "table expected, got number");
  lua_close(L);
}

/* os.time(t) normalizes and converts as timegm does, over many odd dates. */
static void test_time_of_a_table_matches_timegm(void) {
  world w;
  eu_determ_hooks h;
  lua_State *L;
  eu_prng r;
  int i;
  world_init(&w, &h, 1);
  eu_prng_seed(&r, 5);
  L = new_isolate(&h);
  for (i = 0; i < 3000; i++) {
    struct tm tm;
    time_t want;
    memset(&tm, 0, sizeof tm);
    tm.tm_year = (int)eu_prng_below(&r, 1000) - 300;  /* 1600 .. 2599 */
    tm.tm_mon = (int)eu_prng_below(&r, 60) - 24;
    tm.tm_mday = (int)eu_prng_below(&r, 400) - 150;
    tm.tm_hour = (int)eu_prng_below(&r, 100) - 30;
    tm.tm_min = (int)eu_prng_below(&r, 200) - 60;
    tm.tm_sec = (int)eu_prng_below(&r, 200) - 60;
    lua_getglobal(L, "os");
    lua_getfield(L, -1, "time");
    lua_createtable(L, 0, 6);
    lua_pushinteger(L, tm.tm_year + 1900); lua_setfield(L, -2, "year");
    lua_pushinteger(L, tm.tm_mon + 1); lua_setfield(L, -2, "month");
    lua_pushinteger(L, tm.tm_mday); lua_setfield(L, -2, "day");
    lua_pushinteger(L, tm.tm_hour); lua_setfield(L, -2, "hour");
    lua_pushinteger(L, tm.tm_min); lua_setfield(L, -2, "min");
    lua_pushinteger(L, tm.tm_sec); lua_setfield(L, -2, "sec");
    lua_pushvalue(L, -1);
    lua_insert(L, 1);  /* keep the table to read its normalized fields */
    ASSERT_EQ(lua_pcall(L, 1, 1, 0), LUA_OK);
    want = timegm(&tm);
    ASSERT_EQ(lua_tointeger(L, -1), (lua_Integer)want);
    lua_getfield(L, 1, "year"); ASSERT_EQ(lua_tointeger(L, -1), tm.tm_year + 1900); lua_pop(L, 1);
    lua_getfield(L, 1, "month"); ASSERT_EQ(lua_tointeger(L, -1), tm.tm_mon + 1); lua_pop(L, 1);
    lua_getfield(L, 1, "day"); ASSERT_EQ(lua_tointeger(L, -1), tm.tm_mday); lua_pop(L, 1);
    lua_getfield(L, 1, "hour"); ASSERT_EQ(lua_tointeger(L, -1), tm.tm_hour); lua_pop(L, 1);
    lua_getfield(L, 1, "min"); ASSERT_EQ(lua_tointeger(L, -1), tm.tm_min); lua_pop(L, 1);
    lua_getfield(L, 1, "sec"); ASSERT_EQ(lua_tointeger(L, -1), tm.tm_sec); lua_pop(L, 1);
    lua_getfield(L, 1, "yday"); ASSERT_EQ(lua_tointeger(L, -1), tm.tm_yday + 1); lua_pop(L, 1);
    lua_getfield(L, 1, "wday"); ASSERT_EQ(lua_tointeger(L, -1), tm.tm_wday + 1); lua_pop(L, 1);
    lua_settop(L, 0);
  }
  lua_close(L);
}

static void test_process_functions_are_refused(void) {
  static const char *const names[] = {
    "os.exit", "os.execute", "os.getenv", "os.remove", "os.rename", "os.tmpname", "io.popen", NULL
  };
  world w;
  eu_determ_hooks h;
  lua_State *L;
  char chunk[128], want[128], buf[256];
  int i;
  world_init(&w, &h, 1);
  L = new_isolate(&h);
  for (i = 0; names[i]; i++) {
    snprintf(chunk, sizeof chunk, "%s('x')", names[i]);
    snprintf(want, sizeof want, "%s is not available inside an isolate", names[i]);
    ASSERT_CONTAINS(eval_err(L, chunk, buf, sizeof buf), want);
  }
  check(L, "return not pcall(os.exit, 0) and os.difftime(3, 1) == 2");
  /* the locale can be asked, not changed: it is the whole process's */
  check(L, "return type(os.setlocale(nil, 'collate')) == 'string' and os.setlocale() ~= nil");
  ASSERT_CONTAINS(eval_err(L, "os.setlocale('C', 'collate')", buf, sizeof buf),
                  "os.setlocale can only ask what the locale is inside an isolate, not change it");
  lua_close(L);
}

static void test_open_checks_hooks_and_missing_libraries(void) {
  world w;
  eu_determ_hooks h;
  lua_State *L = luaL_newstate();
  world_init(&w, &h, 1);
  ASSERT_EQ(eu_determ_open(L, NULL), EU_EINVAL);
  h.random = NULL;
  ASSERT_EQ(eu_determ_open(L, &h), EU_EINVAL);
  h.random = w_random;
  /* only the base library: pairs and next still replaced, nothing else made up */
  luaL_requiref(L, "_G", luaopen_base, 1);
  lua_pop(L, 1);
  ASSERT_EQ(eu_determ_open(L, &h), EU_OK);
  ASSERT_EQ(lua_gettop(L), 0);
  ASSERT_EQ(lua_getglobal(L, "math"), LUA_TNIL);
  ASSERT_EQ(lua_getglobal(L, "os"), LUA_TNIL);
  lua_settop(L, 0);
  ASSERT_EQ(luaL_dostring(L, "local s = '' for k in pairs({ b = 1, a = 2 }) do s = s .. k end return s"), LUA_OK);
  ASSERT_STR_EQ(lua_tostring(L, -1), "ab");
  lua_close(L);
}

static const struct { const char *name; void (*fn)(void); } tests[] = {
  { "pairs visits keys in sorted order", test_pairs_visits_keys_in_sorted_order },
  { "pairs order is the same in two states", test_pairs_order_is_the_same_in_two_states },
  { "pairs skips keys set to nil during traversal", test_pairs_skips_keys_set_to_nil_during_traversal },
  { "pairs honours __pairs", test_pairs_honours_pairs_metamethod },
  { "next follows the pairs order", test_next_follows_the_pairs_order },
  { "reference keys come last, once each", test_reference_keys_come_last_once_each },
  { "random draws from the hook as Lua does", test_random_draws_from_the_hook_as_lua_does },
  { "random matches Lua itself", test_random_matches_lua_itself },
  { "random stays in range", test_random_stays_in_range },
  { "random sequence is the hook's", test_random_sequence_is_the_hooks },
  { "time reads the virtual clock", test_time_reads_the_virtual_clock },
  { "time of a table matches timegm", test_time_of_a_table_matches_timegm },
  { "process functions are refused", test_process_functions_are_refused },
  { "open checks hooks and missing libraries", test_open_checks_hooks_and_missing_libraries },
};

int main(void) {
  size_t i, n = sizeof tests / sizeof tests[0];
  /* a timezone far from UTC: nothing an isolate sees may depend on it */
  setenv("TZ", "XYZ+5", 1);
  tzset();
  for (i = 0; i < n; i++) {
    tests[i].fn();
    printf("ok %zu - %s\n", i + 1, tests[i].name);
  }
  printf("%zu tests passed\n", n);
  return 0;
}
