/*
 * test_isolate.c: where an isolate's code lives when it is in an arena.
 */
#include <lauxlib.h>
#include <lua.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arena.h"
#include "eutaxy.h"
#include "isolate.h"
#include "test.h"

#define LIMIT ((size_t)8 << 20)

/* A module of many functions, constants and lines, the last of which raises. */
static void write_module(const char *path) {
  FILE *f = fopen(path, "w");
  int i;
  ASSERT(f != NULL);
  fputs("local M = {}\n", f);
  for (i = 0; i < 200; i++)
    fprintf(f, "function M.f%d(x)\n  local t = { name = \"constant %d\", x = x }\n  return t.name .. tostring(t.x + %d)\nend\n",
            i, i, i);
  fputs("function M.fail() error(\"planted\") end\nreturn M\n", f);
  ASSERT(fclose(f) == 0);
}

/* An isolate in a, with path loaded and run while its code goes to the
 * fixed blocks, as a checker's isolate loads its modules; the image's size. */
static size_t image_after_loading(eu_arena *a, const char *path, char *fail_msg, size_t msglen) {
  eu_isolate_opts o;
  eu_isolate *iso;
  lua_State *L;
  char err[EU_ERRLEN];
  size_t used;
  memset(&o, 0, sizeof o);
  o.libdir = "/nonexistent";
  o.arena = a;
  ASSERT_OK(eu_isolate_new(&iso, &o, err, sizeof err));
  L = eu_isolate_L(iso);
  eu_isolate_fix_code(iso, 1);
  ASSERT_EQ(eu_isolate_loadfile(L, path), LUA_OK);
  ASSERT_EQ(lua_pcall(L, 0, 1, 0), LUA_OK);
  eu_isolate_fix_code(iso, 0);
  lua_getfield(L, -1, "f7");
  lua_pushinteger(L, 5);
  ASSERT_EQ(lua_pcall(L, 1, 1, 0), LUA_OK);
  ASSERT_STR_EQ(lua_tostring(L, -1), "constant 712");
  lua_pop(L, 1);
  lua_getfield(L, -1, "fail");
  ASSERT(lua_pcall(L, 0, 0, 0) != LUA_OK);
  snprintf(fail_msg, msglen, "%s", lua_tostring(L, -1));
  lua_settop(L, 0);
  lua_gc(L, LUA_GCCOLLECT);
  used = eu_arena_used(a);
  eu_isolate_close(iso);
  return used;
}

/* The first isolate to load a file parses it; the next loads the bytecode
 * the first kept. Both hold the same heap, with the code outside it: the
 * parser's work is done apart, not in the first isolate's image. */
static void test_the_first_isolate_to_load_a_file_holds_what_the_next_does(void) {
  char path[] = "/tmp/eutaxy_test_isolate_XXXXXX.lua";
  char msg0[256], msg1[256];
  eu_arena *a0 = eu_arena_new(LIMIT), *a1 = eu_arena_new(LIMIT);
  size_t first, next;
  int fd = mkstemps(path, 4);
  ASSERT(fd >= 0);
  close(fd);
  write_module(path);
  ASSERT(a0 != NULL && a1 != NULL);
  first = image_after_loading(a0, path, msg0, sizeof msg0);
  next = image_after_loading(a1, path, msg1, sizeof msg1);
  /* the code of 200 functions would be tens of kilobytes of the image */
  ASSERT(first <= next + 1024 && next <= first + 1024);
  /* errors still name the file and line */
  ASSERT_CONTAINS(msg0, ":802: planted");
  ASSERT_STR_EQ(msg1, msg0);
  eu_arena_delete(a0);
  eu_arena_delete(a1);
  eu_isolate_cache_clear();
  unlink(path);
}

/* A file that does not parse fails the same way each time, with the file
 * and line in the message, and is not kept. */
static void test_a_file_that_does_not_parse_names_its_line_each_time(void) {
  char path[] = "/tmp/eutaxy_test_isolate_XXXXXX.lua";
  eu_isolate_opts o;
  eu_isolate *iso;
  char err[EU_ERRLEN];
  int fd = mkstemps(path, 4), i;
  FILE *f;
  ASSERT(fd >= 0);
  ASSERT((f = fdopen(fd, "w")) != NULL);
  fputs("local x = 1\nlocal y = = 2\n", f);
  ASSERT(fclose(f) == 0);
  memset(&o, 0, sizeof o);
  o.libdir = "/nonexistent";
  ASSERT_OK(eu_isolate_new(&iso, &o, err, sizeof err));
  for (i = 0; i < 2; i++) {
    lua_State *L = eu_isolate_L(iso);
    ASSERT(eu_isolate_loadfile(L, path) != LUA_OK);
    ASSERT_CONTAINS(lua_tostring(L, -1), ":2: unexpected symbol near '='");
    lua_pop(L, 1);
  }
  eu_isolate_close(iso);
  eu_isolate_cache_clear();
  unlink(path);
}

int main(void) {
  static const eu_test tests[] = {
    { "the first isolate to load a file holds what the next does", test_the_first_isolate_to_load_a_file_holds_what_the_next_does },
    { "a file that does not parse names its line each time", test_a_file_that_does_not_parse_names_its_line_each_time },
  };
  return test_main(tests, sizeof tests / sizeof tests[0]);
}
