/*
 * lcore.h: opening eutaxy.core.
 */
#ifndef EUTAXY_LCORE_H
#define EUTAXY_LCORE_H

#include <lua.h>

/* The host face: worlds. Pushes the module table. */
int eu_open_core_host(lua_State *L);

#endif
