/*
 * pattern.h: Lua 5.4's string patterns, with every step charged.
 *
 * string.find, string.match, string.gmatch and string.gsub as Lua 5.4
 * defines them (the same results and, as far as reasonable, the same error
 * messages), written for the isolate: matching charges its steps to the
 * isolate's CPU meter (sandbox.h) as it goes, so a pattern that backtracks
 * exponentially is stopped mid-match like a loop is, instead of running for
 * seconds inside one VM instruction.
 */
#ifndef EUTAXY_PATTERN_H
#define EUTAXY_PATTERN_H

#include <lua.h>

/* Sets find, match, gmatch and gsub in the table at idx (string). Only for
 * an isolate's state: the functions charge its meter. */
void eu_pattern_open(lua_State *L, int idx);

#endif
