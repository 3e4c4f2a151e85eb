/*
 * sandbox.h: the isolate's base library and its CPU limit.
 *
 * eu_sandbox_open builds, in a fresh lua_State, the only globals user code
 * gets: Lua's base, coroutine, table, string, math, utf8 and os libraries
 * with what reaches outside the isolate removed (no io, no native code, no
 * bytecode, no debug hooks), a require that finds Lua files of the project
 * and of eutaxy's lib folder only, and stable names for tostring. The
 * deterministic replacements (determ.h) are installed on top by the caller.
 *
 * The CPU limit is a meter: a count hook charges VM instructions to the
 * running turn's budget, and the library's C functions charge the work
 * they do (pattern steps, bytes, elements moved) to the same budget before
 * they do it, so a long C call is stopped as a long loop is. The meter is
 * deterministic: the same code charges the same amounts in every process.
 */
#ifndef EUTAXY_SANDBOX_H
#define EUTAXY_SANDBOX_H

#include <lua.h>
#include <stdint.h>

typedef struct eu_meter {
  int64_t budget;      /* units left to the running turn */
  int64_t limit;       /* the turn's whole budget, for the message; 0: unlimited */
  int64_t turn_limit;  /* the last turn's limit: what work between turns gets */
  int spent;           /* the budget ran out: msg says where */
  int stopped;         /* a turn was suspended for it (eu_isolate_stopped) */
  int watched;         /* the turn runs uncounted (eu_sandbox_watch_begin) */
  lua_State *armed;    /* the thread the last eu_sandbox_arm named */
  char msg[320];
} eu_meter;

typedef struct eu_sandbox_opts {
  const char *libdir;       /* eutaxy's Lua modules: "eutaxy" and "eutaxy.*" resolve here only */
  const char *projectdir;   /* the user's modules, searched before libdir for other names */
  lua_CFunction open_core;  /* eutaxy.core for lib modules only; NULL for none */
} eu_sandbox_opts;

/* Opens the libraries in L, whose extra space holds its isolate. Raises a
 * Lua error on failure (call it under lua_pcall). */
void eu_sandbox_open(lua_State *L, const eu_sandbox_opts *o);

/* Starts a budget of limit units for co (limit 0: the last turn's limit
 * again, for the host's work between turns). */
void eu_sandbox_arm(lua_State *co, int64_t limit);

/* The turn armed last is over: what runs now is the host's (a watched
 * turn's time ends here). */
void eu_sandbox_turn_over(void);

/* For a run that can be run again: turns of a limit large enough run
 * without the count hook, watched by a timer of the thread's CPU time
 * (sandbox.c says why the limit is then kept all the same). 1 when on;
 * 0 when every instruction is counted (EUTAXY_CPU_TICK_US=0, line
 * coverage, no timer). */
int eu_sandbox_watch_begin(void);
/* Reads EUTAXY_CPU_TICK_US (the tick, in microseconds of the thread's CPU
 * time; 0: count every instruction) and EUTAXY_CPU_WATCH_MIN (the smallest
 * limit watched, a testing aid): EU_OK, or EU_EINVAL with err set. Until it
 * is called, every instruction is counted. */
int eu_sandbox_watch_config(char *err, size_t errlen);
/* Ends the watch: 1 when a turn ran long or spent its budget uncounted,
 * stopped, and the run must be run again with eu_sandbox_watch_begin off. */
int eu_sandbox_watch_end(void);
/* Whether the watched run was stopped so (the world stops there). */
int eu_sandbox_watch_wanted(void);

/* Charges cost units to L's isolate; once the budget is spent it stops the
 * running code: suspends the coroutine where it can yield (a pcall cannot
 * catch that), else raises the CPU limit error. what names the function. */
void eu_sandbox_charge(lua_State *L, int64_t cost, const char *what);

/* What an allocation of a new string of n bytes costs: Lua's concatenation
 * copies without a C call to charge it. Never stops (the allocator cannot):
 * the next instruction does. */
void eu_sandbox_charge_alloc(eu_meter *m, size_t n);

/* luaL_tolstring with names stable across processes: "table: 0x00000001"
 * numbered per isolate in order of first use, unless __tostring or __name
 * applies. Pushes the string and returns it. */
const char *eu_sandbox_tolstring(lua_State *L, int idx, size_t *len);

/* Frees the process's cache of where modules were found. */
void eu_sandbox_cache_clear(void);

#endif
