/*
 * lfanout.c: placeholder until the binding is written.
 */
#include <lua.h>
#include "lfanout.h"

void eu_lfanout_push(lua_State *L, eu_store *s) {
  (void)s;
  lua_newtable(L);
}
