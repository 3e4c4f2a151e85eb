/*
 * llinecov.c: eutaxy.core.coverage_start, coverage_finish and
 * coverage_stop, with which `eutaxy check --coverage` (checker.lua) counts
 * the lines its isolates run; linecov.c does the counting and the writing.
 */
#include <lauxlib.h>

#include "eutaxy.h"
#include "linecov.h"
#include "llinecov.h"

static const char *opt_string(lua_State *L, const char *field) {
  const char *s;
  lua_getfield(L, 1, field);
  s = lua_isnil(L, -1) ? NULL : luaL_checkstring(L, -1);
  lua_pop(L, 1);
  return s;  /* the table keeps the string */
}

/* coverage_start{ out = FILE, libdir = DIR, root = DIR? } -> true, or nil
 * and why (a file that cannot be written, counting already on). */
static int l_coverage_start(lua_State *L) {
  char err[EU_ERRLEN];
  const char *out, *root, *libdir;
  luaL_checktype(L, 1, LUA_TTABLE);
  out = opt_string(L, "out");
  root = opt_string(L, "root");
  libdir = opt_string(L, "libdir");
  if (eu_linecov_start(out, root, libdir, err, sizeof err) != EU_OK) {
    luaL_pushfail(L);
    lua_pushstring(L, err);
    return 2;
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* coverage_finish() -> { files =, lines =, hit = }, or nil and why: writes
 * the tracefile and stops counting. */
static int l_coverage_finish(lua_State *L) {
  char err[EU_ERRLEN];
  int files = 0, lines = 0, hit = 0;
  if (eu_linecov_finish(&files, &lines, &hit, err, sizeof err) != EU_OK) {
    luaL_pushfail(L);
    lua_pushstring(L, err);
    return 2;
  }
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, files);
  lua_setfield(L, -2, "files");
  lua_pushinteger(L, lines);
  lua_setfield(L, -2, "lines");
  lua_pushinteger(L, hit);
  lua_setfield(L, -2, "hit");
  return 1;
}

/* coverage_stop(): stops counting, writing nothing (a check that failed). */
static int l_coverage_stop(lua_State *L) {
  (void)L;
  eu_linecov_stop();
  return 0;
}

/* coverage_hooked() -> whether the calling thread's hook is the one that
 * counts lines in a state that is not an isolate (eutaxy test's). */
static int l_coverage_hooked(lua_State *L) {
  lua_pushboolean(L, lua_gethook(L) == eu_linecov_host_hook);
  return 1;
}

/* coverage_rehook(): puts that hook back on the calling thread, which
 * debug.sethook cannot (limits.pcall sets a hook of its own meanwhile);
 * nothing once counting stopped. */
static int l_coverage_rehook(lua_State *L) {
  lua_sethook(L, eu_linecov_on ? eu_linecov_host_hook : NULL, eu_linecov_on ? LUA_MASKLINE : 0, 0);
  return 0;
}

int eu_open_linecov(lua_State *L) {
  static const luaL_Reg fns[] = {
    {"coverage_start", l_coverage_start},
    {"coverage_finish", l_coverage_finish},
    {"coverage_stop", l_coverage_stop},
    {"coverage_hooked", l_coverage_hooked},
    {"coverage_rehook", l_coverage_rehook},
    {NULL, NULL}
  };
  luaL_setfuncs(L, fns, 0);
  return 0;
}
