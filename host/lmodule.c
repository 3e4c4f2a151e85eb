/*
 * lmodule.c: eutaxy/core.so, the C module that plain `lua` and `busted` load.
 */
#include <lauxlib.h>
#include <lua.h>

#include "isolate.h"
#include "lcore.h"

#if defined(__GNUC__)
__attribute__((visibility("default")))
#endif
int luaopen_eutaxy_core(lua_State *L);

static int clear_caches(lua_State *L) {
  (void)L;
  eu_isolate_cache_clear();
  return 0;
}

/* isolate.c's caches of compiled chunks live as long as the process; their
 * roots are in this library, which lua unloads as it closes the state. A
 * value in the registry frees them first: finalizers run in the reverse
 * order they were set, and the library's own was set before this one. */
int luaopen_eutaxy_core(lua_State *L) {
  lua_newuserdatauv(L, 0, 0);
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, clear_caches);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_setfield(L, LUA_REGISTRYINDEX, "eutaxy.core caches");
  return eu_open_core_host(L);
}
