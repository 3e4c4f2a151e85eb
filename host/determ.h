/*
 * determ.h: the base library made deterministic inside an isolate.
 *
 * Lua 5.4 seeds its string hashes per process and hashes tables by address,
 * so the order of raw `next` differs between two runs of the same schedule.
 * eu_determ_open replaces, in one lua_State:
 *   pairs, next       visit keys in eu_keycmp order (a __pairs metamethod is honoured)
 *   math.random       draws from the world's PRNG (same contract as Lua's)
 *   math.randomseed   does nothing: the run's seed decides
 *   os.time, os.clock, os.date   read the virtual clock
 *   os.exit, os.execute, os.getenv, os.remove, os.rename, os.tmpname, io.popen
 *                     raise "<name> is not available inside an isolate"
 *   os.setlocale      too: the locale is the whole process's, and changes
 *                     how numbers and dates print
 * os.date formats in UTC and os.time(t) reads t as UTC, so the machine's
 * timezone never shows. A library that was not opened is left absent.
 * Returns EU_EINVAL if hooks or one of its functions is NULL.
 * Keys that are tables, functions or other references have no content to
 * order by: pairs visits them after every other key, in an order that can
 * differ between processes. Code that depends on that order is not
 * deterministic, and --check-determinism says so.
 */
#ifndef EUTAXY_DETERM_H
#define EUTAXY_DETERM_H

#include <lua.h>
#include <stdint.h>

typedef struct eu_determ_hooks {
  void *ud;
  int64_t (*now_ms)(void *ud);       /* virtual wall clock, ms since the Unix epoch */
  int64_t (*elapsed_ms)(void *ud);   /* virtual time since the world started, for os.clock */
  uint64_t (*random)(void *ud);      /* 64 random bits */
} eu_determ_hooks;

/* Installs the replacements in L's globals. hooks must outlive L. */
int eu_determ_open(lua_State *L, const eu_determ_hooks *hooks);
/* The registry key of next's cache of a table's sorted keys: a cache, which
 * changes no result, so heapprint.h leaves it out. */
const void *eu_determ_cache_key(void);

/* What next and pairs charge their work to (sandbox.h's meter), for every
 * state of the process; NULL, the default, charges nothing. next keeps the
 * order of the table it last traversed, so a traversal costs one sort and
 * a step each. */
void eu_determ_meter(void (*charge)(lua_State *L, int64_t cost, const char *what));

#endif
