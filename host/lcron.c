/*
 * lcron.c: eutaxy.core.cron_check(expr) and cron_next(expr, after_ms), for
 * the host's Lua side: config.lua refuses a bad triggers.crons entry with
 * the first, and specs ask the second when an expression is due. Worlds
 * parse their crons themselves (world.c); this file only lends cron.c to Lua.
 */
#include <lauxlib.h>

#include "cron.h"
#include "eutaxy.h"
#include "lcron.h"

/* cron_check(expr) -> true, or nil and why ('minute field "61": ...'). */
static int l_cron_check(lua_State *L) {
  const char *expr = luaL_checkstring(L, 1);
  char err[EU_ERRLEN];
  eu_cron c;
  if (eu_cron_parse(&c, expr, err, sizeof err) != EU_OK) {
    luaL_pushfail(L);
    lua_pushstring(L, err);
    return 2;
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* cron_next(expr, after_ms) -> the first time expr is due after after_ms
 * (ms since 1970, UTC); raises for an expression cron_check refuses. */
static int l_cron_next(lua_State *L) {
  const char *expr = luaL_checkstring(L, 1);
  lua_Integer after = luaL_checkinteger(L, 2);
  char err[EU_ERRLEN];
  eu_cron c;
  if (eu_cron_parse(&c, expr, err, sizeof err) != EU_OK) return luaL_error(L, "cron_next: %s", err);
  lua_pushinteger(L, (lua_Integer)eu_cron_next(&c, (int64_t)after));
  return 1;
}

int eu_open_cron(lua_State *L) {
  lua_pushcfunction(L, l_cron_check);
  lua_setfield(L, -2, "cron_check");
  lua_pushcfunction(L, l_cron_next);
  lua_setfield(L, -2, "cron_next");
  return 0;
}
