/*
 * fuzz_scenario.c: the scenario loader of `eutaxy check` (the DSL of
 * lua/eutaxy/check.lua, and the preparation checker.lua does after it),
 * driven by fuzz/scenario.lua in an embedded Lua state.
 *
 * The input is decoded with the value cloner's format into a plain Lua
 * value (bytes that do not decode are skipped: fuzz_clone covers them), so
 * the fuzzer mutates a scenario's shape and values rather than Lua syntax.
 * The driver says what a clean outcome is; an error out of it, a crash, or
 * a runaway loop (fuzz.h's instruction budget) is a finding.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clone.h"
#include "eutaxy.h"
#include "fuzz.h"

static lua_State *L;

/* Protected: the input's one value, or nothing. */
static int decode(lua_State *Ls) {
  const char *p = lua_touserdata(Ls, 1);
  size_t len = (size_t)lua_tointeger(Ls, 2);
  char err[EU_ERRLEN];
  int n = 0;
  lua_settop(Ls, 0);
  if (eu_clone_decode(Ls, p, len, &n, err, sizeof err) != EU_OK) return 0;
  return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!L) {
    L = fz_lua_new();
    if (!L) abort();
    lua_pushstring(L, EUTAXY_FUZZDIR "/scenario.lua");
    lua_setglobal(L, "SCENARIO_FILE");
    fz_lua_driver(L, "scenario.lua");
    lua_setglobal(L, "check_scenario");
  }
  lua_settop(L, 0);
  lua_getglobal(L, "check_scenario");
  lua_pushcfunction(L, decode);
  lua_pushlightuserdata(L, (void *)data);
  lua_pushinteger(L, (lua_Integer)size);
  if (lua_pcall(L, 2, LUA_MULTRET, 0) != LUA_OK || lua_gettop(L) != 2) {
    lua_settop(L, 0);  /* no single value: not a scenario */
    return 0;
  }
  fz_lua_budget("scenario.lua");
  if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    if (!msg || !strstr(msg, "not enough memory")) {
      fprintf(stderr, "fuzz_scenario: %s\n", msg ? msg : "(an error that is not a string)");
      abort();
    }
  }
  lua_settop(L, 0);
  lua_gc(L, LUA_GCCOLLECT, 0);
  return 0;
}
