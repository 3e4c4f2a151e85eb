/*
 * llinecov.h: line coverage as the host's Lua side sees it
 * (eutaxy.core.coverage_start, coverage_finish and coverage_stop), for
 * `eutaxy check --coverage` (checker.lua).
 */
#ifndef EUTAXY_LLINECOV_H
#define EUTAXY_LLINECOV_H

#include <lua.h>

/* Adds coverage_start, coverage_finish and coverage_stop to the table on
 * the top of the stack. */
int eu_open_linecov(lua_State *L);

#endif
