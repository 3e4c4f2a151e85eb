/*
 * llinecov.h: line coverage as the host's Lua side sees it
 * (eutaxy.core.coverage_start, coverage_finish and coverage_stop), for
 * `eutaxy check --coverage` (checker.lua), and what limits.lua needs to
 * set a hook of its own beside `eutaxy test --coverage`'s.
 */
#ifndef EUTAXY_LLINECOV_H
#define EUTAXY_LLINECOV_H

#include <lua.h>

/* Adds coverage_start, coverage_finish, coverage_stop, coverage_hooked and
 * coverage_rehook to the table on the top of the stack. */
int eu_open_linecov(lua_State *L);

#endif
