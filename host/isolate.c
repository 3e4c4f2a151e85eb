/*
 * isolate.c: building and closing a lua_State as an isolate.
 *
 * The allocator counts every byte so one object cannot take the process's
 * memory; past the limit an allocation fails and Lua raises its ordinary
 * "not enough memory" inside the isolate, which ends that invocation only.
 */
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lualib.h>

#include "eutaxy.h"
#include "isolate.h"

struct eu_isolate {
  lua_State *L;
  size_t mem, mem_limit;
  int64_t budget;    /* VM instructions left to the running turn */
  void *ud;
  void (*log)(void *ud, const char *msg, size_t len);
};

/* The extra space of every thread holds the isolate: lua_newthread copies it. */
eu_isolate *eu_isolate_of(lua_State *L) {
  eu_isolate *iso;
  memcpy(&iso, lua_getextraspace(L), sizeof iso);
  return iso;
}

void *eu_isolate_ud(lua_State *L) {
  eu_isolate *iso = eu_isolate_of(L);
  return iso ? iso->ud : NULL;
}

lua_State *eu_isolate_L(eu_isolate *iso) {
  return iso->L;
}

size_t eu_isolate_mem(eu_isolate *iso) {
  return iso->mem;
}

static void *alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  eu_isolate *iso = ud;
  size_t old = ptr ? osize : 0;
  void *p;
  if (nsize == 0) {
    free(ptr);
    iso->mem -= old;
    return NULL;
  }
  if (nsize > old && iso->mem - old + nsize > iso->mem_limit) return NULL;
  p = realloc(ptr, nsize);
  if (p) iso->mem = iso->mem - old + nsize;
  return p;
}

static int l_print(lua_State *L) {
  eu_isolate *iso = eu_isolate_of(L);
  int n = lua_gettop(L), i;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (i = 1; i <= n; i++) {
    if (i > 1) luaL_addchar(&b, '\t');
    luaL_tolstring(L, i, NULL);
    luaL_addvalue(&b);
  }
  luaL_pushresult(&b);
  if (iso->log) {
    size_t len;
    const char *s = lua_tolstring(L, -1, &len);
    iso->log(iso->ud, s, len);
  }
  return 0;
}

static void set_path(lua_State *L, const char *field, const char *projectdir,
                     const char *libdir, const char *ext) {
  lua_getglobal(L, "package");
  if (ext[0] == 'l') {
    lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s/?.lua;%s/?/init.lua;%s", projectdir, projectdir,
                    libdir, libdir, LUA_PATH_DEFAULT);
  } else {
    lua_pushstring(L, LUA_CPATH_DEFAULT);
  }
  lua_setfield(L, -2, field);
  lua_pop(L, 1);
}


static int boot(lua_State *L) {
  const eu_isolate_opts *o = lua_touserdata(L, 1);
  luaL_openlibs(L);
  eu_determ_open(L, o->hooks);
  lua_pushcfunction(L, l_print);
  lua_setglobal(L, "print");
  set_path(L, "path", o->projectdir ? o->projectdir : ".", o->libdir, "lua");
  set_path(L, "cpath", NULL, NULL, "c");
  if (o->open_core) {
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    lua_pushcfunction(L, o->open_core);
    lua_setfield(L, -2, "eutaxy.core");
    lua_pop(L, 1);
  }
  return 0;
}

int eu_isolate_new(eu_isolate **out, const eu_isolate_opts *o, char *err, size_t errlen) {
  eu_isolate *iso = calloc(1, sizeof *iso);
  lua_State *L;
  *out = NULL;
  if (!iso) return eu_err(err, errlen, EU_ENOMEM, "out of memory creating an isolate");
  iso->mem_limit = o->mem_limit ? o->mem_limit : EU_ISOLATE_MEM_DEFAULT;
  iso->ud = o->ud;
  iso->log = o->log;
  L = lua_newstate(alloc, iso);
  if (!L) {
    free(iso);
    return eu_err(err, errlen, EU_ENOMEM, "out of memory creating an isolate");
  }
  iso->L = L;
  memcpy(lua_getextraspace(L), &iso, sizeof iso);
  lua_pushcfunction(L, boot);
  lua_pushlightuserdata(L, (void *)o);
  if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
    eu_err(err, errlen, EU_ELUA, "creating an isolate: %s", lua_tostring(L, -1));
    eu_isolate_close(iso);
    return EU_ELUA;
  }
  *out = iso;
  return EU_OK;
}

void eu_isolate_close(eu_isolate *iso) {
  if (!iso) return;
  if (iso->L) lua_close(iso->L);
  free(iso);
}

#define EU_HOOK_STEP 10000

static void cpu_hook(lua_State *L, lua_Debug *ar) {
  eu_isolate *iso = eu_isolate_of(L);
  (void)ar;
  iso->budget -= EU_HOOK_STEP;
  if (iso->budget < 0) luaL_error(L, "CPU limit exceeded: the invocation ran too long without yielding");
}

void eu_isolate_arm(lua_State *co, int64_t limit) {
  eu_isolate *iso = eu_isolate_of(co);
  iso->budget = limit;
  lua_sethook(co, limit > 0 ? cpu_hook : NULL, limit > 0 ? LUA_MASKCOUNT : 0, EU_HOOK_STEP);
}
