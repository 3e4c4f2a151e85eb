/*
 * lagenda.c: placeholder until the binding is written.
 */
#include <lua.h>
#include "lagenda.h"

void eu_lagenda_push(lua_State *L, eu_store *s) {
  (void)s;
  lua_newtable(L);
}
