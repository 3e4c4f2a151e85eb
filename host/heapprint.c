/*
 * heapprint.c: the walk behind eu_heapprint (heapprint.h).
 *
 * The walk visits each collectable value once, by address, as it finds
 * it: a table's value is visited between two of the table's entries, on
 * the same stack, with no copy. Past MAX_DEPTH levels a value waits on a
 * Lua thread of the walk's own (anchored in the registry under a key the
 * walk skips). Each object's print is its own, summed into the heap's, so
 * the order of the visits does not matter, nor the order lua_next gives a
 * table's entries in. Nothing in an isolate can join a closure's upvalue
 * to another's, so a closure's print is its identity and its upvalues'
 * values: an upvalue two closures share counts in both, whichever the
 * walk reaches first.
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

/* A walk: the print so far, and where it keeps what it has not visited
 * yet when the C stack is deep enough. */
typedef struct walk {
  lua_State *W;
  const void *registry;
  int (*skip)(void *ud, lua_State *th);
  void *ud;
  uint64_t print;
  int depth;
  int ok;  /* 0 once W or the seen set could not grow */
} walk;

/* How deep the walk follows a value it finds before it queues it on W
 * instead: each level takes a C frame and four Lua stack slots. */
#define MAX_DEPTH 48

static void visit(walk *k, lua_State *L, int i, int t, const void *p);

/* A value's identity as a print is made of it: a pointer with its type in
 * the bits above any address, a number scrambled; eu_mix64 mixes them
 * where they are combined. */
#define TAGGED(t, p) ((uint64_t)(uintptr_t)(p) ^ ((uint64_t)(8 + (t)) << 56))
#define SCRAMBLED(tag, b) ((uint64_t)(b) * 0x9e3779b97f4a7c15u + (tag))

/* The identity of the value at absolute index i of L (its contents, for
 * what has no identity of its own); a table, function, userdata or thread
 * seen for the first time is visited then (or queued). A C function
 * without upvalues holds nothing a turn can change: its identity is all of
 * it (the libraries' functions, most of a heap's). */
static uint64_t value(walk *k, lua_State *L, int i) {
  int t = lua_type(L, i), fresh;
  const void *p;
  switch (t) {
  case LUA_TNIL: return 1;
  case LUA_TBOOLEAN: return 2 + (uint64_t)lua_toboolean(L, i);
  case LUA_TNUMBER:
    if (lua_isinteger(L, i)) return SCRAMBLED(4, lua_tointeger(L, i));
    else {
      lua_Number d = lua_tonumber(L, i);
      uint64_t b = 0;
      memcpy(&b, &d, sizeof d < sizeof b ? sizeof d : sizeof b);
      return SCRAMBLED(5, b);
    }
  case LUA_TLIGHTUSERDATA: return TAGGED(t, lua_touserdata(L, i));
  case LUA_TSTRING: return TAGGED(t, lua_topointer(L, i));
  case LUA_TFUNCTION:
    p = lua_topointer(L, i);
    /* a light C function is its own pointer; a closure is not */
    if ((const void *)(uintptr_t)lua_tocfunction(L, i) == p) return TAGGED(t, p);
    break;
  default:
    p = lua_topointer(L, i);
    break;
  }
  if ((fresh = seen_add(p)) < 0) k->ok = 0;
  else if (fresh) visit(k, L, i, t, p);
  return TAGGED(t, p);
}

static int make_work(lua_State *L) {
  lua_newthread(L);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &work_key);
  return 0;
}

/* The registry's keys left out: its integer slots but the globals', the
 * walk's thread and next's cache. */
static int left_out(lua_State *L, int key) {
  if (lua_isinteger(L, key)) return lua_tointeger(L, key) != LUA_RIDX_GLOBALS;
  return lua_touserdata(L, key) == (void *)&work_key || lua_touserdata(L, key) == eu_determ_cache_key();
}

/* th's value pushed on th, looked at from L (th may be suspended) and
 * mixed into *sum; 0 when there was no room to push it. */
static int thread_value(walk *k, lua_State *L, lua_State *th, int pushed, uint64_t *sum) {
  int top = lua_gettop(L);
  if (!pushed) return 0;
  lua_xmove(th, L, 1);
  *sum = eu_mix64(*sum, value(k, L, top + 1));
  lua_settop(L, top);
  return 1;
}

/* A coroutine's print: its status, the values on its stack, and for each
 * of its frames the function, the line it is at, its locals (temporaries
 * included) and its extra arguments. A generator that yields from one line
 * with a local changed has changed. */
static uint64_t thread_sum(walk *k, lua_State *L, lua_State *th) {
  lua_Debug ar;
  int n, level;
  uint64_t sum = eu_mix64((uint64_t)lua_status(th), (uint64_t)lua_gettop(th));
  for (n = 1; k->ok && n <= lua_gettop(th); n++) {
    if (!lua_checkstack(th, 1)) k->ok = 0;
    else {
      lua_pushvalue(th, n);
      thread_value(k, L, th, 1, &sum);
    }
  }
  for (level = 0; k->ok && lua_getstack(th, level, &ar); level++) {
    if (!lua_checkstack(th, 1) || !lua_getinfo(th, "fl", &ar)) {
      k->ok = 0;
      break;
    }
    sum = eu_mix64(sum, (uint64_t)(ar.currentline + 1));
    thread_value(k, L, th, 1, &sum);
    for (n = 1; k->ok && lua_checkstack(th, 1) && thread_value(k, L, th, lua_getlocal(th, &ar, n) != NULL, &sum); n++) {}
    for (n = -1; k->ok && lua_checkstack(th, 1) && thread_value(k, L, th, lua_getlocal(th, &ar, n) != NULL, &sum); n--) {}
  }
  return sum;
}

/* The object at absolute index i of L, of type t at p, seen for the first
 * time: its print goes into the heap's. Values it reaches are visited as
 * they are found, down to MAX_DEPTH; deeper, they wait on W. L's stack is
 * as it was when it returns. */
static void visit(walk *k, lua_State *L, int i, int t, const void *p) {
  int top = lua_gettop(L), n;
  uint64_t sum = 0;
  if (k->depth >= MAX_DEPTH || !lua_checkstack(L, 4)) {
    if (!lua_checkstack(k->W, 1)) {
      k->ok = 0;
      return;
    }
    lua_pushvalue(L, i);
    lua_xmove(L, k->W, 1);
    return;
  }
  k->depth++;
  switch (t) {
  case LUA_TTABLE:
    if (lua_getmetatable(L, i)) {
      sum = eu_mix64(sum, value(k, L, top + 1));
      lua_settop(L, top);
    }
    lua_pushnil(L);
    while (k->ok && lua_next(L, i)) {
      if (p != k->registry || !left_out(L, top + 1)) {
        uint64_t key = value(k, L, top + 1);
        sum += eu_mix64(key, value(k, L, top + 2));
      }
      lua_settop(L, top + 1);
    }
    break;
  case LUA_TFUNCTION:
    /* A closure's upvalues are the same for its life (nothing here can
     * join one to another's): its print is its identity and its upvalues'
     * values, in their order. */
    for (n = 1; k->ok && lua_getupvalue(L, i, n) != NULL; n++) {
      sum = eu_mix64(sum, value(k, L, top + 1));
      lua_settop(L, top);
    }
    break;
  case LUA_TUSERDATA: {
    size_t len = lua_rawlen(L, i), j;
    const unsigned char *b = lua_touserdata(L, i);
    for (j = 0; b && j < len && j < 256; j++) sum = eu_mix64(sum, b[j]);
    if (lua_getmetatable(L, i)) {
      sum = eu_mix64(sum, value(k, L, top + 1));
      lua_settop(L, top);
    }
    for (n = 1; k->ok && lua_getiuservalue(L, i, n) != LUA_TNONE; n++) {
      sum = eu_mix64(sum, value(k, L, top + 1));
      lua_settop(L, top);
    }
    break;
  }
  case LUA_TTHREAD: {
    lua_State *th = lua_tothread(L, i);
    if (th == L || th == k->W || (k->skip && k->skip(k->ud, th))) break;
    sum = thread_sum(k, L, th);
    break;
  }
  default:
    break;
  }
  k->depth--;
  k->print += eu_mix64((uint64_t)(uintptr_t)p, sum);
  lua_settop(L, top);
}

uint64_t eu_heapprint(lua_State *L, int (*skip)(void *ud, lua_State *th), void *ud) {
  int top = lua_gettop(L);
  walk k;
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
  k.W = lua_tothread(L, -1);
  lua_pop(L, 1);
  lua_settop(k.W, 0);
  k.skip = skip;
  k.ud = ud;
  k.print = 0x3c6ef372fe94f82bu;
  k.depth = 0;
  k.ok = 1;
  lua_pushvalue(L, LUA_REGISTRYINDEX);
  k.registry = lua_topointer(L, -1);
  seen_begin();
  if (seen_add(k.registry) < 0) k.ok = 0;
  else visit(&k, L, top + 1, LUA_TTABLE, k.registry);
  lua_settop(L, top);
  while (k.ok && lua_gettop(k.W) > 0) {
    lua_xmove(k.W, L, 1);
    visit(&k, L, top + 1, lua_type(L, top + 1), lua_topointer(L, top + 1));
    lua_settop(L, top);
  }
  lua_settop(k.W, 0);
  if (!k.ok) return 0;
  return k.print ? k.print : 1;
}
