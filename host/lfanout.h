/*
 * lfanout.h: the fanout engine as Lua sees it inside an object's isolate
 * (eutaxy.core.durability().fanout).
 */
#ifndef EUTAXY_LFANOUT_H
#define EUTAXY_LFANOUT_H

#include <lua.h>
#include "store.h"

/* Pushes a table of C functions bound to s. */
void eu_lfanout_push(lua_State *L, eu_store *s);

#endif
