/*
 * isolate.h: one lua_State and what makes it an isolate.
 *
 * An isolate has its own allocator (counted, with a limit), its own module
 * cache, the sandboxed base library and its CPU limit (sandbox.h) made
 * deterministic (determ.h), a require that finds eutaxy's Lua modules and
 * the user's project, `eutaxy.core` opened with the functions its owner
 * gives and seen by eutaxy's own modules only, and print sent to the
 * owner's log.
 * It knows nothing of objects, tasks or the scheduler: the world owns those
 * and reaches its own data through eu_isolate_ud.
 */
#ifndef EUTAXY_ISOLATE_H
#define EUTAXY_ISOLATE_H

#include <lua.h>
#include "arena.h"
#include "determ.h"
#include "sandbox.h"

typedef struct eu_isolate eu_isolate;

typedef struct eu_isolate_opts {
  const char *libdir;          /* folder that holds the eutaxy modules */
  const char *projectdir;      /* the user's project: modules are found there first */
  size_t mem_limit;            /* bytes; 0 for the default */
  const eu_determ_hooks *hooks;  /* copied: the isolate keeps its own */
  lua_CFunction open_core;     /* opens eutaxy.core for this isolate */
  void (*log)(void *ud, const char *msg, size_t len);  /* print's output */
  void *ud;                    /* the owner's data, for open_core and log */
  eu_arena *arena;             /* the heap to live in, emptied first (the checker's), or NULL */
} eu_isolate_opts;

#define EU_ISOLATE_MEM_DEFAULT ((size_t)128 << 20)

/* In an arena, the isolate (this handle included) is the arena's whole
 * heap: an image of the arena taken between turns returns it to that
 * moment, at the same address. */
int eu_isolate_new(eu_isolate **out, const eu_isolate_opts *o, char *err, size_t errlen);
void eu_isolate_close(eu_isolate *iso);
/* The isolate an image of its arena holds, once loaded back. */
eu_isolate *eu_isolate_in(eu_arena *a);
/* In an arena: while on, the code, constants and debug information of the
 * bytecode the isolate loads (eu_isolate_loadfile) go to the arena's fixed
 * blocks, outside its images (arena.h); off seals them. For what is loaded
 * before the arena's first image, and the same in every build of it. */
void eu_isolate_fix_code(eu_isolate *iso, int on);
lua_State *eu_isolate_L(eu_isolate *iso);
void *eu_isolate_ud(lua_State *L);          /* the owner's data, from any thread of the isolate */
/* A new owner, with its hooks, for an isolate put back from an image
 * another owner's build made (another object's, or another world's). */
void eu_isolate_set_owner(eu_isolate *iso, void *ud, const eu_determ_hooks *hooks);
eu_isolate *eu_isolate_of(lua_State *L);
size_t eu_isolate_mem(eu_isolate *iso);
size_t eu_isolate_mem_limit(eu_isolate *iso);
/* How many allocations isolates have refused for their limit in this
 * process (see eu_sqlmem_refusals). */
uint64_t eu_isolate_refusals(void);
eu_meter *eu_isolate_meter(eu_isolate *iso);  /* the CPU meter, for sandbox.c */

/* Bytes the same object uses elsewhere (its SQLite memory): *also counts
 * toward the limit with the isolate's own, read at every allocation that
 * grows; NULL to stop. also must stay valid until then or the close. */
void eu_isolate_count_also(eu_isolate *iso, const size_t *also);
/* The isolate's live byte count, for another allocator to add to its own. */
const size_t *eu_isolate_mem_ptr(eu_isolate *iso);

/* Memory the host's own work may take past the limit (reporting the error
 * of an invocation that filled the isolate): on lifts the limit by
 * EU_ISOLATE_RESERVE until it is called again with off. */
#define EU_ISOLATE_RESERVE ((size_t)1 << 20)
void eu_isolate_reserve(eu_isolate *iso, int on);

/* Loads a Lua file through the process's cache of compiled chunks. */
int eu_isolate_loadfile(lua_State *L, const char *path);
void eu_isolate_cache_clear(void);

/* CPU limit (sandbox.h): stops co, and every coroutine it resumes, once the
 * isolate has run more than limit VM instructions, C functions' work
 * included, since eu_isolate_arm. limit 0 gives the last turn's limit
 * again, to what the host runs between turns. One thread of an isolate runs
 * at a time, so the budget is the isolate's. */
void eu_isolate_arm(lua_State *co, int64_t limit);
/* Where the turn's coroutine can yield, the hook suspends it instead of
 * raising (a pcall cannot catch that): after such a yield this is the
 * message to end the turn with; NULL for any other yield. */
const char *eu_isolate_stopped(eu_isolate *iso);

#endif
