/*
 * fuzz_jsonc.c: the wrangler.jsonc reader (lua/eutaxy/jsonc.lua and
 * config.lua), driven by fuzz/jsonc.lua in an embedded Lua state.
 *
 * The input is the text of a wrangler.jsonc. The driver decides what is a
 * clean outcome (see its header); an error out of it, a crash, or a
 * runaway loop (fuzz.h's instruction budget) is a finding.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"

static lua_State *L;
static char path[64];

static void remove_file(void) {
  remove(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!L) {
    L = fz_lua_new();
    if (!L) abort();
    fz_lua_driver(L, "jsonc.lua");
    lua_setglobal(L, "check_jsonc");
    snprintf(path, sizeof path, "/tmp/eutaxy-fuzz-jsonc-%ld.jsonc", (long)getpid());
    atexit(remove_file);
  }
  fz_lua_budget("jsonc.lua");
  lua_getglobal(L, "check_jsonc");
  lua_pushlstring(L, (const char *)data, size);
  lua_pushstring(L, path);
  if (lua_pcall(L, 2, 0, 0) != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    /* a memory error is a clean end: the cap is an isolate's */
    if (!msg || !strstr(msg, "not enough memory")) {
      fprintf(stderr, "fuzz_jsonc: %s\n", msg ? msg : "(an error that is not a string)");
      abort();
    }
    lua_pop(L, 1);
  }
  lua_gc(L, LUA_GCCOLLECT, 0);
  return 0;
}
