/*
 * test_heapprint.c: what the fingerprint of a Lua state's lasting values
 * sees change (heapprint.h), and what it does not.
 */
#include <stdint.h>
#include <string.h>

#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

#include "heapprint.h"
#include "test.h"

static lua_State *new_state(void) {
  lua_State *L = luaL_newstate();
  ASSERT(L != NULL);
  luaL_openlibs(L);
  return L;
}

static void run(lua_State *L, const char *chunk) {
  if (luaL_dostring(L, chunk) != LUA_OK) {
    fprintf(stderr, "%s\n", lua_tostring(L, -1));
    ASSERT(0);
  }
  lua_settop(L, 0);
}

static uint64_t print_of(lua_State *L) {
  uint64_t p = eu_heapprint(L, NULL, NULL);
  ASSERT(p != 0);
  ASSERT_EQ(lua_gettop(L), 0);
  return p;
}

/* The print after chunk differs from the one before. */
static void changes(lua_State *L, const char *chunk) {
  uint64_t before = print_of(L);
  run(L, chunk);
  if (print_of(L) == before) {
    fprintf(stderr, "no change seen after: %s\n", chunk);
    ASSERT(0);
  }
}

/* The print after chunk is the one before. */
static void keeps(lua_State *L, const char *chunk) {
  uint64_t before = print_of(L);
  run(L, chunk);
  if (print_of(L) != before) {
    fprintf(stderr, "a change seen after: %s\n", chunk);
    ASSERT(0);
  }
}

static void test_garbage_is_no_change(void) {
  lua_State *L = new_state();
  run(L, "config = { name = 'pool', sizes = { 1, 2, 3 } }");
  keeps(L, "local t = {} for i = 1, 1000 do t[i] = { i, tostring(i) } end");
  keeps(L, "local s = string.rep('x', 100) .. config.name");
  /* the registry's integer slots are the host's references to one call */
  {
    uint64_t before = print_of(L);
    lua_newtable(L);
    (void)luaL_ref(L, LUA_REGISTRYINDEX);
    ASSERT_EQ(print_of(L), before);
  }
  lua_close(L);
}

static void test_tables(void) {
  lua_State *L = new_state();
  run(L, "config = { name = 'pool', sizes = { 1, 2, 3 } }");
  changes(L, "config.name = 'other'");
  changes(L, "config.sizes[2] = 20");
  changes(L, "config.sizes[2] = 20.5");
  changes(L, "config.flag = true");
  changes(L, "config.flag = false");
  lua_close(L);

  L = new_state();
  run(L, "config = { sizes = { 1, 2, 3 } }");
  keeps(L, "config.sizes = config.sizes");
  changes(L, "setmetatable(config, { __index = function() return 1 end })");
  changes(L, "getmetatable(config).__index = nil");
  changes(L, "string.extra = 1");
  lua_close(L);
}

/* A key added and taken away again leaves the print as it was, however the
 * table grew meanwhile: the entries are summed, whatever order next gives. */
static void test_order_does_not_count(void) {
  lua_State *L = new_state();
  uint64_t before;
  run(L, "t = { a = 1, b = 2, c = 3 }");
  before = print_of(L);
  run(L, "for i = 1, 100 do t['k' .. i] = i end");
  ASSERT(print_of(L) != before);
  run(L, "for i = 1, 100 do t['k' .. i] = nil end");
  ASSERT_EQ(print_of(L), before);
  lua_close(L);
}

static void test_upvalues(void) {
  lua_State *L = new_state();
  run(L, "local n, log = 0, {} "
         "function bump() n = n + 1 end "
         "function seen() return n end "
         "function note(x) log[#log + 1] = x end "
         "function read() return n, #log end");
  keeps(L, "read()");
  changes(L, "bump()");
  changes(L, "note('x')");
  lua_close(L);
}

/* Past the depth the walk follows at once, values wait their turn: a change
 * at the end of a long chain is seen all the same. */
static void test_deep_chain(void) {
  lua_State *L = new_state();
  run(L, "chain = {} local t = chain for i = 1, 500 do t.next = { i = i } t = t.next end "
         "local n = 0 function deep() local t = chain while t.next do t = t.next end return t end "
         "local f = function() return n end for i = 1, 300 do local g = f f = function() return g() end end "
         "calls = f");
  keeps(L, "deep()");
  changes(L, "deep().i = -1");
  changes(L, "deep().extra = {}");
  lua_close(L);
}

static void test_coroutines(void) {
  lua_State *L = new_state();
  run(L, "co = coroutine.create(function(a) local b = coroutine.yield(a) coroutine.yield(b) end)");
  changes(L, "coroutine.resume(co, 1)");
  changes(L, "coroutine.resume(co, 2)");
  lua_close(L);

  /* the same yield, on the same line, with a local moved on */
  L = new_state();
  run(L, "gen = coroutine.wrap(function() for i = 1, 10 do coroutine.yield(i) end end)");
  changes(L, "gen()");
  changes(L, "gen()");
  changes(L, "gen()");
  lua_close(L);
}

static lua_State *skipped;
static int skip_one(void *ud, lua_State *th) {
  (void)ud;
  return th == skipped;
}

/* A coroutine skip names is left out with its stack. */
static void test_skip(void) {
  lua_State *L = new_state();
  uint64_t before;
  run(L, "co = coroutine.create(function(a) local b = coroutine.yield(a) coroutine.yield(b) end)");
  lua_getglobal(L, "co");
  skipped = lua_tothread(L, -1);
  lua_pop(L, 1);
  before = eu_heapprint(L, skip_one, NULL);
  run(L, "coroutine.resume(co, {})");
  ASSERT_EQ(eu_heapprint(L, skip_one, NULL), before);
  ASSERT(eu_heapprint(L, NULL, NULL) != before);
  lua_close(L);
}

static void test_userdata(void) {
  lua_State *L = new_state();
  unsigned char *b = lua_newuserdatauv(L, 16, 1);
  memset(b, 0, 16);
  lua_setglobal(L, "box");
  {
    uint64_t before = print_of(L);
    b[3] = 7;
    ASSERT(print_of(L) != before);
    before = print_of(L);
    run(L, "debug.setuservalue(box, { 1 })");
    ASSERT(print_of(L) != before);
  }
  lua_close(L);
}

int main(void) {
  static const eu_test tests[] = {
    {"garbage_is_no_change", test_garbage_is_no_change},
    {"tables", test_tables},
    {"order_does_not_count", test_order_does_not_count},
    {"upvalues", test_upvalues},
    {"deep_chain", test_deep_chain},
    {"coroutines", test_coroutines},
    {"skip", test_skip},
    {"userdata", test_userdata},
  };
  return test_main(tests, sizeof tests / sizeof tests[0]);
}
