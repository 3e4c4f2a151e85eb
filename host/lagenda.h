/*
 * lagenda.h: the agenda, named alarms and durable operations as Lua sees
 * them inside an object's isolate (eutaxy.core.durability().agenda).
 */
#ifndef EUTAXY_LAGENDA_H
#define EUTAXY_LAGENDA_H

#include <lua.h>
#include "store.h"

/* Pushes a table of C functions bound to s. */
void eu_lagenda_push(lua_State *L, eu_store *s);

#endif
