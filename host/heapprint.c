/*
 * heapprint.c: the walk behind eu_heapprint (heapprint.h).
 *
 * Breadth does not matter, so the walk keeps its pending values on a Lua
 * thread of its own (anchored in the registry under a key the walk skips)
 * and visits each collectable value once, by address. A table's entries
 * are summed, so the order lua_next happens to give does not matter. An
 * upvalue is a value of its own: a closure's print has the upvalues'
 * identities, and each upvalue's value is summed once into the heap's,
 * however many closures share it and whichever the walk reaches first (a
 * table that grows and shrinks back changes that order, and nothing else).
 */
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "determ.h"
#include "prng.h"
#include "heapprint.h"

static const char work_key = 'w';


/* The values seen by a walk, by address. Kept from walk to walk, with a
 * walk number in each slot instead of clearing: the worker is printed
 * after every one of its turns, and its heap is about the same size each
 * time. One thread walks at a time (a world runs on one). */
typedef struct slot {
  const void *p;
  unsigned walk;
} slot;

static _Thread_local struct {
  slot *slot;
  size_t mask, n;
  unsigned walk;
} seen;

static void seen_begin(void) {
  seen.n = 0;
  if (++seen.walk == 0) {  /* wrapped: every slot is stale */
    if (seen.slot) memset(seen.slot, 0, (seen.mask + 1) * sizeof *seen.slot);
    seen.walk = 1;
  }
}

/* 1 if p is new, 0 if seen, -1 out of memory. */
static int seen_add(const void *p) {
  size_t i;
  if (2 * (seen.n + 1) > seen.mask + 1) {
    size_t cap = seen.mask ? 2 * (seen.mask + 1) : 4096, j;
    slot *a = calloc(cap, sizeof *a);
    if (!a) return -1;
    for (j = 0; seen.slot && j <= seen.mask; j++)
      if (seen.slot[j].walk == seen.walk) {
        for (i = ((uintptr_t)seen.slot[j].p >> 4) & (cap - 1); a[i].walk == seen.walk; i = (i + 1) & (cap - 1)) {}
        a[i] = seen.slot[j];
      }
    free(seen.slot);
    seen.slot = a;
    seen.mask = cap - 1;
  }
  for (i = ((uintptr_t)p >> 4) & seen.mask; seen.slot[i].walk == seen.walk; i = (i + 1) & seen.mask)
    if (seen.slot[i].p == p) return 0;
  seen.slot[i].p = p;
  seen.slot[i].walk = seen.walk;
  seen.n++;
  return 1;
}

/* A value's identity (its contents, for what has no identity of its own),
 * and, for a table, function, userdata or thread not queued before, the
 * value queued on W: one look at its type and address for both. *ok
 * becomes 0 when W cannot grow or the seen set cannot. */
static uint64_t vq(lua_State *L, lua_State *W, int i, int *ok) {
  int t = lua_type(L, i), fresh;
  const void *p;
  switch (t) {
  case LUA_TNIL: return 1;
  case LUA_TBOOLEAN: return 2 + (uint64_t)lua_toboolean(L, i);
  case LUA_TNUMBER:
    if (lua_isinteger(L, i)) return eu_mix64(4, (uint64_t)lua_tointeger(L, i));
    else {
      lua_Number d = lua_tonumber(L, i);
      uint64_t b = 0;
      memcpy(&b, &d, sizeof d < sizeof b ? sizeof d : sizeof b);
      return eu_mix64(5, b);
    }
  case LUA_TLIGHTUSERDATA: return eu_mix64(6, (uint64_t)(uintptr_t)lua_touserdata(L, i));
  case LUA_TSTRING: return eu_mix64(8 + (uint64_t)t, (uint64_t)(uintptr_t)lua_topointer(L, i));
  case LUA_TFUNCTION:
    /* a C function without upvalues holds nothing a turn can change: its
     * identity is all of it (the libraries' functions, most of a heap's) */
    if (lua_iscfunction(L, i)) {
      if (lua_getupvalue(L, i, 1) == NULL) return eu_mix64(8 + (uint64_t)t, (uint64_t)(uintptr_t)lua_topointer(L, i));
      lua_pop(L, 1);
    }
    /* fall through */
  default:
    p = lua_topointer(L, i);
    if ((fresh = seen_add(p)) < 0) *ok = 0;
    else if (fresh) {
      if (!lua_checkstack(W, 1)) {
        *ok = 0;
      } else {
        lua_pushvalue(L, i);
        lua_xmove(L, W, 1);
      }
    }
    return eu_mix64(8 + (uint64_t)t, (uint64_t)(uintptr_t)p);
  }
}

static int make_work(lua_State *L) {
  lua_newthread(L);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &work_key);
  return 0;
}

/* The object at L's top; *h gets its print, and the print of each upvalue
 * it is the first to reach. 0 when the walk cannot go on. */
static int visit(lua_State *L, lua_State *W, const void *registry, int (*skip)(void *, lua_State *),
                 void *ud, uint64_t *h) {
  int top = lua_gettop(L), n, ok = 1;
  const void *p = lua_topointer(L, top);
  uint64_t sum = 0;
  switch (lua_type(L, top)) {
  case LUA_TTABLE:
    if (lua_getmetatable(L, top)) {
      sum = eu_mix64(sum, vq(L, W, -1, &ok));
      lua_pop(L, 1);
      if (!ok) return 0;
    }
    lua_pushnil(L);
    while (lua_next(L, top)) {
      if (p == registry && (lua_isinteger(L, -2) ? lua_tointeger(L, -2) != LUA_RIDX_GLOBALS
                            : (lua_touserdata(L, -2) == (void *)&work_key ||
                               lua_touserdata(L, -2) == eu_determ_cache_key()))) {
        lua_pop(L, 1);
        continue;
      }
      {
        uint64_t k = vq(L, W, -2, &ok), v = vq(L, W, -1, &ok);
        sum += eu_mix64(k, eu_mix64(v, 0x7ab1e));
      }
      if (!ok) return 0;
      lua_pop(L, 1);
    }
    break;
  case LUA_TFUNCTION:
    for (n = 1; lua_getupvalue(L, top, n) != NULL; n++) {
      const void *id = lua_upvalueid(L, top, n);
      int fresh = seen_add(id);
      if (fresh < 0) return 0;
      sum = eu_mix64(sum, (uint64_t)(uintptr_t)id);
      if (fresh) *h += eu_mix64((uint64_t)(uintptr_t)id ^ 0x75b5a1, vq(L, W, -1, &ok));
      if (!ok) return 0;
      lua_pop(L, 1);
    }
    break;
  case LUA_TUSERDATA: {
    size_t len = lua_rawlen(L, top);
    const unsigned char *b = lua_touserdata(L, top);
    size_t k;
    for (k = 0; b && k < len && k < 256; k++) sum = eu_mix64(sum, b[k]);
    if (lua_getmetatable(L, top)) {
      sum = eu_mix64(sum, vq(L, W, -1, &ok));
      lua_pop(L, 1);
    }
    for (n = 1; ok && lua_getiuservalue(L, top, n) != LUA_TNONE; n++) {
      sum = eu_mix64(sum, vq(L, W, -1, &ok));
      lua_pop(L, 1);
    }
    if (!ok) return 0;
    lua_pop(L, 1);
    break;
  }
  case LUA_TTHREAD: {
    lua_State *th = lua_tothread(L, top);
    lua_Debug ar;
    int i, level;
    if (th == L || th == W || (skip && skip(ud, th))) break;
    sum = eu_mix64((uint64_t)lua_status(th), (uint64_t)lua_gettop(th));
    for (i = 1; i <= lua_gettop(th); i++) {
      if (!lua_checkstack(th, 1)) return 0;
      sum = eu_mix64(sum, vq(th, W, i, &ok));
      if (!ok) return 0;
    }
    for (level = 0; lua_getstack(th, level, &ar); level++)
      if (lua_getinfo(th, "l", &ar)) sum = eu_mix64(sum, (uint64_t)(ar.currentline + 1));
    break;
  }
  default:
    break;
  }
  *h += eu_mix64((uint64_t)(uintptr_t)p, sum);
  lua_settop(L, top);
  return 1;
}

uint64_t eu_heapprint(lua_State *L, int (*skip)(void *ud, lua_State *th), void *ud) {
  int top = lua_gettop(L), ok = 1;
  const void *registry;
  lua_State *W;
  uint64_t print = 0x3c6ef372fe94f82bu;
  if (!lua_checkstack(L, 8)) return 0;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &work_key) != LUA_TTHREAD) {
    lua_pop(L, 1);
    lua_pushcfunction(L, make_work);
    if (lua_pcall(L, 0, 0, 0) != LUA_OK) {
      lua_settop(L, top);
      return 0;
    }
    lua_rawgetp(L, LUA_REGISTRYINDEX, &work_key);
  }
  W = lua_tothread(L, -1);
  lua_pop(L, 1);
  lua_settop(W, 0);
  lua_pushvalue(L, LUA_REGISTRYINDEX);
  registry = lua_topointer(L, -1);
  lua_xmove(L, W, 1);
  seen_begin();
  if (seen_add(registry) < 0) ok = 0;
  while (ok && lua_gettop(W) > 0) {
    uint64_t h = 0;
    lua_xmove(W, L, 1);
    if ((ok = visit(L, W, registry, skip, ud, &h)) != 0) print += h;
    lua_settop(L, top);
  }
  lua_settop(W, 0);
  if (!ok) return 0;
  return print ? print : 1;
}
