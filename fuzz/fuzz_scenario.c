/*
 * fuzz_scenario.c: the scenario loader of `eutaxy check` (the DSL of
 * lua/eutaxy/check.lua, and the preparation checker.lua does after it),
 * driven by fuzz/scenario.lua in an embedded Lua state.
 *
 * The driver reads the input as a plain Lua value (the value cloner's
 * format, leniently), so the fuzzer mutates a scenario's shape and values
 * rather than Lua syntax, and says what a clean outcome is; an error out
 * of it, a crash, or a runaway loop (fuzz.h's instruction budget) is a
 * finding.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

static lua_State *L;

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
  lua_pushlstring(L, (const char *)data, size);
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
