/*
 * lmodule.c: eutaxy/core.so, the C module that plain `lua` and `busted` load.
 */
#include <lua.h>

#include "lcore.h"

#if defined(__GNUC__)
__attribute__((visibility("default")))
#endif
int luaopen_eutaxy_core(lua_State *L);

int luaopen_eutaxy_core(lua_State *L) {
  return eu_open_core_host(L);
}
