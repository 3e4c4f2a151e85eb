/*
 * sandbox.c: the isolate's base library and its CPU limit.
 *
 * Owns what user code can reach in an isolate and the meter that bounds
 * what it runs; determ.c owns what makes that library deterministic, and
 * pattern.c the string matcher. What is left out of Lua's libraries, and why:
 *
 *   io                  files and processes: print already goes to the log
 *   package.loadlib, package.cpath, package.searchpath, package.searchers
 *                       native code: loadlib("liblua5.4.so", "luaopen_os")
 *                       gives an unpatched os. require is ours (s_require)
 *   dofile, loadfile    files outside the project; the runtime loads the
 *                       worker with core.loadfile, which lib modules alone see
 *   load in mode "b", string.dump
 *                       bytecode is not verified: a forged chunk crashes the host
 *   debug (but traceback)
 *                       sethook removes the CPU limit; getregistry and
 *                       getupvalue reach the host's values
 *   __gc metamethods    a finalizer runs with hooks off (Lua stops them during
 *                       GC metamethods), where no limit could end a loop, and at
 *                       close, in the host's time; setmetatable refuses them
 *   collectgarbage      but "collect" and "step": the collector's tuning is
 *                       the host's, and "count" differs between an isolate
 *                       that parsed its modules and one that loaded them
 *                       from the cache of compiled chunks
 *   eutaxy.core         never in package.loaded or preload: lib modules get it
 *                       as their third chunk argument (select(3, ...))
 *
 * The CPU limit. A count hook charges EU_HOOK_STEP units every EU_HOOK_STEP
 * VM instructions, on every thread: the main thread gets it at boot and
 * lua_newthread copies it to every coroutine. What a single instruction
 * can start in C is charged to the same budget, before it runs, where its
 * cost is not already bounded by an allocation the memory limit counts:
 *
 *   string.find, match, gmatch, gsub   backtracking is exponential: pattern.c
 *                       charges every matching step and stops mid-match
 *   string.rep          loops n times even when it builds "": n is charged
 *   string.byte, table.unpack, utf8.codepoint, utf8.len, utf8.offset
 *                       one unit an element or character
 *   table.concat, table.move       their ranges, which need not exist
 *   table.insert, table.remove     the elements they shift
 *   table.sort          n log n comparisons
 *   next, pairs         determ.c charges its sorting and its steps
 *   load                the source's bytes; a cjson.decode the text's
 *   collectgarbage      "collect" and "step" are charged by the heap's size
 *   .., string.sub, string.format, upper, lower, reverse, gsub's result, ...
 *                       copy bytes into a new string: every new string of
 *                       STR_CHARGED bytes or more is charged by its size as
 *                       it is allocated (eu_sandbox_charge_alloc)
 * The rest of the base library runs in time bounded by its arguments, which
 * the stack limit and the memory limit bound. Once the budget is spent the
 * meter stops what runs: where the coroutine can yield it is suspended (a
 * pcall cannot catch that; eu_isolate_stopped); where it cannot (a sort
 * comparator, a gsub replacement) the CPU limit error is raised; and
 * pcall, xpcall, coroutine.resume and coroutine.wrap, which would catch
 * either, stop their caller in turn while the budget stays spent.
 *
 * Names. tostring, print and string.format's %s and %p would show
 * addresses, which ASLR changes from one process to the next: a replayed
 * schedule would print differently. They show a number per isolate
 * instead, given in order of first use and kept in a weak-keyed table.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lualib.h>

#include "determ.h"
#include "eutaxy.h"
#include "isolate.h"
#include "linecov.h"
#include "pattern.h"
#include "prng.h"
#include "sandbox.h"

#define EU_HOOK_STEP 10000
#define STR_CHARGED 256    /* new strings at least this long are charged by size */
#define BYTES_A_UNIT 64    /* bytes copied that cost one VM instruction */

static const char core_key = 0;   /* registry: the isolate's eutaxy.core */
static const char names_key = 0;  /* registry: value -> its stable number */

static eu_meter *meter_of(lua_State *L) {
  eu_isolate *iso = eu_isolate_of(L);
  return iso ? eu_isolate_meter(iso) : NULL;
}

/* ---- the meter -------------------------------------------------------- */

static void cpu_hook(lua_State *L, lua_Debug *ar);

/* The hook's events: the count alone, as ever, and line events too while
 * --coverage counts lines (linecov.h): lua_sethook keeps one hook a thread,
 * so cpu_hook serves both. */
static int hook_mask(void) {
  return eu_linecov_on ? LUA_MASKCOUNT | LUA_MASKLINE : LUA_MASKCOUNT;
}

/* Suspends or raises, as the header says. In a hook lua_yield returns and
 * the VM yields as the hook returns; in a C function it unwinds at once. */
static void stop_here(lua_State *L, eu_meter *m) {
  if (lua_isyieldable(L)) {
    m->stopped = 1;
    lua_yield(L, 0);
    return;
  }
  lua_pushstring(L, m->msg);
  lua_error(L);
}

/* The first time the budget runs out, the message names the line of Lua
 * code that ran (level 0 in a hook, the caller of a C function else). */
static void spend(lua_State *L, eu_meter *m, lua_Debug *ar, const char *what) {
  char where[200] = "";
  lua_Debug d;
  int level;
  if (m->spent) return;
  m->spent = 1;
  if (ar && lua_getinfo(L, "Sl", ar) && ar->currentline > 0) {
    snprintf(where, sizeof where, "%s:%d: ", ar->short_src, ar->currentline);
  } else {
    for (level = 0; lua_getstack(L, level, &d); level++) {
      if (lua_getinfo(L, "Sl", &d) && d.currentline > 0) {
        snprintf(where, sizeof where, "%s:%d: ", d.short_src, d.currentline);
        break;
      }
    }
  }
  snprintf(m->msg, sizeof m->msg, "%sCPU limit exceeded: more than %lld VM instructions without yielding%s%s%s",
           where, (long long)m->limit, what ? " (in " : "", what ? what : "", what ? ")" : "");
}

static void watch_stop(lua_State *L, eu_meter *m);

static void cpu_hook(lua_State *L, lua_Debug *ar) {
  eu_meter *m;
  if (ar->event == LUA_HOOKLINE) {  /* costs no budget: a line is not an instruction */
    eu_linecov_isolate_line(L, ar);
    return;
  }
  m = meter_of(L);
  if (!m || m->limit <= 0) return;
  if (m->watched) {  /* set by eu_sandbox_charge_alloc */
    if (m->budget < 0 || m->spent) watch_stop(L, m);
    return;
  }
  m->budget -= EU_HOOK_STEP;
  if (m->budget >= 0 && !m->spent) return;
  spend(L, m, ar, NULL);
  stop_here(L, m);
}

void eu_sandbox_charge(lua_State *L, int64_t cost, const char *what) {
  eu_meter *m = meter_of(L);
  if (!m || m->limit <= 0) return;
  if (cost > 0) m->budget -= cost > m->limit ? m->limit + 1 : cost;
  if (m->budget >= 0 && !m->spent) return;
  if (m->watched) {
    watch_stop(L, m);
    return;
  }
  spend(L, m, NULL, what);
  stop_here(L, m);
}

void eu_sandbox_charge_alloc(eu_meter *m, size_t n) {
  if (m->limit <= 0 || n < STR_CHARGED) return;
  m->budget -= (int64_t)(n / BYTES_A_UNIT);
  if (m->budget < 0 && m->armed) lua_sethook(m->armed, cpu_hook, hook_mask(), 1);  /* stop at the next instruction */
}

/* ---- counting only where a turn can run long --------------------------
 *
 * The count hook costs every VM instruction a call (Lua runs a thread with
 * a hook on a slower path): 8% of what a checker's schedule runs outside
 * its copies. So
 * where a run can be run again, the checker's, it is watched instead
 * (eu_sandbox_watch_begin): a turn starts without the hook, and a timer of
 * the thread's CPU time ticks every EUTAXY_CPU_TICK_US microseconds (5,000
 * by default; 0 counts every instruction, as elsewhere). A turn still
 * running at two ticks in a row, or one whose charged work spends what its
 * budget leaves it (below), stops at once and asks for the run again with
 * every instruction counted (eu_sandbox_watch_end); the checker does so
 * from then on.
 *
 * A turn that ends unstopped ran for less than two of the ticks' spans: on
 * Linux a span is the interval and at most a scheduler tick more, 15 ms at
 * 100 Hz, so 30 ms: at 5 billion VM instructions a second (ten times this
 * project's machines) 150 million at the default tick. Only a turn whose
 * limit is at least that is watched, and those instructions are taken from
 * its budget first: what is left (50 million of the default 200 million)
 * is what its charged work may spend before the run is wanted again. Any
 * other turn counts as ever. So a turn that runs uncounted to its end never
 * passed its limit, and ends as it would have counted. */

#define WATCH_TICK_US 5000
#define WATCH_SPAN_US(tick) ((tick) + 10000)       /* a scheduler tick at 100 Hz */
#define WATCH_RATE_PER_US 5000                      /* VM instructions */

static struct {
  int on;                          /* between eu_sandbox_watch_begin and _end */
  int timer;                       /* the timer is made, in this process */
  long tick_us;                    /* 0: every instruction counted (eu_sandbox_watch_config) */
  int64_t min_limit;               /* turns of smaller limits are counted */
  volatile sig_atomic_t turn;      /* the turn running uncounted (a serial), or 0 */
  volatile sig_atomic_t seen;      /* turn at the last tick */
  volatile sig_atomic_t wanted;    /* a run counted throughout is needed */
  lua_State *volatile current;     /* the thread running, nested coroutines included */
  sig_atomic_t serial;
} watch = { 0, 0, 0, 0, 0, 0, 0, NULL, 0 };

static void watch_hook(lua_State *L, lua_Debug *ar);

/* Stops the running thread at its next instruction: a hook may be set
 * from a signal handler (ldebug.c's lua_sethook says so). */
static void on_tick(int sig) {
  int saved = errno;
  (void)sig;
  if (watch.on && watch.turn && watch.turn == watch.seen) {
    watch.wanted = 1;
    if (watch.current) lua_sethook(watch.current, watch_hook, LUA_MASKCOUNT, 1);
  }
  watch.seen = watch.turn;
  errno = saved;
}

static void forked(void) { watch.timer = 0; }

static int make_timer(long tick_us) {
  static int atfork;
  struct sigaction sa;
  struct sigevent sev;
  struct itimerspec it;
  timer_t t;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_tick;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGVTALRM, &sa, NULL) != 0) return 0;
  memset(&sev, 0, sizeof sev);
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = SIGVTALRM;
  sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
  if (timer_create(CLOCK_THREAD_CPUTIME_ID, &sev, &t) != 0) return 0;
  it.it_interval.tv_sec = it.it_value.tv_sec = tick_us / 1000000;
  it.it_interval.tv_nsec = it.it_value.tv_nsec = tick_us % 1000000 * 1000;
  if (timer_settime(t, 0, &it, NULL) != 0) {
    timer_delete(t);
    return 0;
  }
  /* a process forked to explore a share makes its own */
  if (!atfork && pthread_atfork(NULL, NULL, forked) == 0) atfork = 1;
  return 1;
}

int eu_sandbox_watch_config(char *err, size_t errlen) {
  int64_t tick = WATCH_TICK_US, least = 0;
  int rc;
  if ((rc = eu_env_int("EUTAXY_CPU_TICK_US", 0, 1000000, &tick, err, errlen)) != EU_OK) return rc;
  /* a testing aid: watch turns of smaller limits, so that a test can
   * reach a stop by the watch without a turn of 150 million instructions */
  if ((rc = eu_env_int("EUTAXY_CPU_WATCH_MIN", 1, INT64_MAX, &least, err, errlen)) != EU_OK) return rc;
  watch.tick_us = tick;
  watch.min_limit = least ? least : (int64_t)2 * WATCH_SPAN_US(tick) * WATCH_RATE_PER_US;
  return EU_OK;
}

int eu_sandbox_watch_begin(void) {
  if (watch.tick_us <= 0 || eu_linecov_on) return 0;
  if (!watch.timer && !(watch.timer = make_timer(watch.tick_us))) {
    watch.tick_us = 0;  /* no timer here: every instruction is counted */
    return 0;
  }
  watch.turn = watch.seen = 0;
  watch.wanted = 0;
  watch.current = NULL;
  watch.on = 1;
  return 1;
}

int eu_sandbox_watch_end(void) {
  int wanted = watch.wanted;
  watch.on = 0;
  watch.turn = 0;
  watch.current = NULL;
  watch.wanted = 0;
  return wanted;
}

int eu_sandbox_watch_wanted(void) { return watch.wanted; }

/* The turn's budget ran out, or a tick found it running long: uncounted,
 * where it would have stopped is not known, so the run is wanted again. */
static void watch_stop(lua_State *L, eu_meter *m) {
  watch.wanted = 1;
  if (!m->spent) {
    m->spent = 1;
    snprintf(m->msg, sizeof m->msg, "stopped to be run again with every instruction counted");
  }
  stop_here(L, m);
}

static void watch_hook(lua_State *L, lua_Debug *ar) {
  eu_meter *m = meter_of(L);
  (void)ar;
  if (m && watch.wanted) watch_stop(L, m);
}

void eu_sandbox_arm(lua_State *co, int64_t limit) {
  eu_meter *m = meter_of(co);
  if (limit > 0) m->turn_limit = limit;
  m->limit = m->budget = m->turn_limit;
  m->spent = m->stopped = 0;
  m->armed = co;
  m->watched = watch.on && m->limit >= watch.min_limit;
  if (m->watched) {
    /* the instructions it may run uncounted are taken from the budget
     * first: what is left is for the work charged */
    m->budget = m->limit - watch.min_limit;
    lua_sethook(co, NULL, 0, 0);
    watch.current = co;
    /* limit 0 is the host's own work after a turn: not the turn's */
    watch.turn = limit > 0 ? (watch.serial = watch.serial % 1000000000 + 1) : 0;
    return;
  }
  lua_sethook(co, cpu_hook, hook_mask(), EU_HOOK_STEP);
}

void eu_sandbox_turn_over(void) {
  watch.turn = 0;
  watch.current = NULL;
}

/* For pcall and the coroutine functions: what they caught may be the stop. */
static int spent(lua_State *L) {
  eu_meter *m = meter_of(L);
  return m && m->spent;
}

static int restop(lua_State *L) {
  eu_meter *m = meter_of(L);
  stop_here(L, m);
  return 0;
}

/* ---- stable names ----------------------------------------------------- */

static lua_Integer stable_number(lua_State *L, int idx) {
  lua_Integer n;
  idx = lua_absindex(L, idx);
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &names_key) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_createtable(L, 0, 8);
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "k");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &names_key);
  }
  lua_pushvalue(L, idx);
  if (lua_rawget(L, -2) == LUA_TNUMBER) {
    n = lua_tointeger(L, -1);
    lua_pop(L, 2);
    return n;
  }
  lua_pop(L, 1);
  lua_pushboolean(L, 0);  /* the count so far, under a key no value to name can be */
  lua_rawget(L, -2);
  n = lua_tointeger(L, -1) + 1;
  lua_pop(L, 1);
  lua_pushboolean(L, 0);
  lua_pushinteger(L, n);
  lua_rawset(L, -3);
  lua_pushvalue(L, idx);
  lua_pushinteger(L, n);
  lua_rawset(L, -3);
  lua_pop(L, 1);
  return n;
}

static void push_hex(lua_State *L, lua_Integer n) {
  char buf[32];
  snprintf(buf, sizeof buf, "0x%08llx", (unsigned long long)n);
  lua_pushstring(L, buf);
}

const char *eu_sandbox_tolstring(lua_State *L, int idx, size_t *len) {
  int t;
  idx = lua_absindex(L, idx);
  if (luaL_callmeta(L, idx, "__tostring")) {
    if (!lua_isstring(L, -1)) luaL_error(L, "'__tostring' must return a string");
    return lua_tolstring(L, -1, len);
  }
  t = lua_type(L, idx);
  if (t == LUA_TNIL || t == LUA_TBOOLEAN || t == LUA_TNUMBER || t == LUA_TSTRING)
    return luaL_tolstring(L, idx, len);  /* no address to show, and no __tostring: checked */
  t = luaL_getmetafield(L, idx, "__name");
  if (t != LUA_TSTRING) {  /* as Lua names values: __name if it is a string */
    if (t != LUA_TNIL) lua_pop(L, 1);
    lua_pushstring(L, luaL_typename(L, idx));
  }
  push_hex(L, stable_number(L, idx));
  lua_pushfstring(L, "%s: %s", lua_tostring(L, -2), lua_tostring(L, -1));
  lua_replace(L, -3);
  lua_pop(L, 1);
  return lua_tolstring(L, -1, len);
}

static int s_tostring(lua_State *L) {
  luaL_checkany(L, 1);
  eu_sandbox_tolstring(L, 1, NULL);
  return 1;
}

/* string.format: %s of a value without an address passes through; other
 * values are named first, and %p is given the name's number as a string. */
static int s_format(lua_State *L) {
  size_t flen;
  const char *fmt = luaL_checklstring(L, 1, &flen), *p, *e = fmt + flen;
  int top = lua_gettop(L), arg = 1, has_p = 0;
  luaL_Buffer b;
  eu_sandbox_charge(L, (int64_t)(flen / BYTES_A_UNIT), "string.format");
  for (p = fmt; p < e; p++) {
    int t;
    if (*p != '%') continue;
    if (++p < e && *p == '%') continue;
    while (p < e && *p && strchr("-+ #0123456789.", *p)) p++;
    if (p >= e) break;
    if (++arg > top) break;
    t = lua_type(L, arg);
    if (*p == 'p') {
      has_p = 1;
      if (lua_topointer(L, arg)) push_hex(L, stable_number(L, arg));
      else lua_pushliteral(L, "(null)");
      lua_replace(L, arg);
    } else if (*p == 's' && t != LUA_TSTRING && t != LUA_TNUMBER) {
      eu_sandbox_tolstring(L, arg, NULL);
      lua_replace(L, arg);
    }
  }
  if (has_p) {  /* %p becomes %s of the name */
    luaL_buffinit(L, &b);
    for (p = fmt; p < e; p++) {
      luaL_addchar(&b, *p);
      if (*p != '%') continue;
      if (p + 1 < e && p[1] == '%') {
        luaL_addchar(&b, *++p);
        continue;
      }
      while (p + 1 < e && p[1] && strchr("-+ #0123456789.", p[1])) luaL_addchar(&b, *++p);
      if (p + 1 < e) {
        p++;
        luaL_addchar(&b, *p == 'p' ? 's' : *p);
      }
    }
    luaL_pushresult(&b);
    lua_replace(L, 1);
  }
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, top, 1);
  return 1;
}

/* ---- pcall, xpcall, coroutines ---------------------------------------- */

/* As Lua's own: extra is how many stack slots sit below the results. */
static int finish_pcall(lua_State *L, int status, lua_KContext extra) {
  if (status != LUA_OK && status != LUA_YIELD) {
    if (spent(L)) return restop(L);
    lua_pushboolean(L, 0);
    lua_pushvalue(L, -2);
    return 2;
  }
  return lua_gettop(L) - (int)extra;
}

static int s_pcall(lua_State *L) {
  int status;
  luaL_checkany(L, 1);
  lua_pushboolean(L, 1);
  lua_insert(L, 1);  /* true, f, args */
  status = lua_pcallk(L, lua_gettop(L) - 2, LUA_MULTRET, 0, 0, finish_pcall);
  return finish_pcall(L, status, 0);
}

static int s_xpcall(lua_State *L) {
  int status, n = lua_gettop(L);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_pushboolean(L, 1);
  lua_pushvalue(L, 1);
  lua_rotate(L, 3, 2);  /* f, handler, true, f, args */
  status = lua_pcallk(L, n - 2, LUA_MULTRET, 2, 2, finish_pcall);
  return finish_pcall(L, status, 2);
}

/* Resumes co with narg values from L's top: the count of its results moved
 * to L, or -1 with its error on L's top. A stop inside co stops L too. */
static int resume(lua_State *L, lua_State *co, int narg) {
  int status, nres;
  if (!lua_checkstack(co, narg)) {
    lua_pushliteral(L, "too many arguments to resume");
    return -1;
  }
  lua_xmove(L, co, narg);
  if (watch.on) watch.current = co;
  status = lua_resume(co, L, narg, &nres);
  if (watch.on) watch.current = L;
  if (spent(L)) {
    restop(L);
    return -1;
  }
  if (status == LUA_OK || status == LUA_YIELD) {
    if (!lua_checkstack(L, nres + 1)) {
      lua_pop(co, nres);
      lua_pushliteral(L, "too many results to resume");
      return -1;
    }
    lua_xmove(co, L, nres);
    return nres;
  }
  lua_xmove(co, L, 1);
  return -1;
}

static int s_resume(lua_State *L) {
  lua_State *co = lua_tothread(L, 1);
  int r;
  luaL_argexpected(L, co, 1, "coroutine");
  r = resume(L, co, lua_gettop(L) - 1);
  if (r < 0) {
    lua_pushboolean(L, 0);
    lua_insert(L, -2);
    return 2;
  }
  lua_pushboolean(L, 1);
  lua_insert(L, -(r + 1));
  return r + 1;
}

static int wrapped(lua_State *L) {
  lua_State *co = lua_tothread(L, lua_upvalueindex(1));
  int r = resume(L, co, lua_gettop(L));
  if (r < 0) {
    int st = lua_status(co);
    if (st != LUA_OK && st != LUA_YIELD) {  /* it died: close its to-be-closed variables */
      st = lua_resetthread(co);
      lua_xmove(co, L, 1);
    }
    if (st != LUA_ERRMEM && lua_type(L, -1) == LUA_TSTRING) {
      luaL_where(L, 1);
      lua_insert(L, -2);
      lua_concat(L, 2);
    }
    return lua_error(L);
  }
  return r;
}

static int s_wrap(lua_State *L) {
  lua_State *co;
  luaL_checktype(L, 1, LUA_TFUNCTION);
  co = lua_newthread(L);
  lua_pushvalue(L, 1);
  lua_xmove(L, co, 1);
  lua_pushcclosure(L, wrapped, 1);
  return 1;
}

/* ---- functions charged before they run ---------------------------------- */

enum { C_REP, C_CONCAT, C_INSERT, C_REMOVE, C_MOVE, C_SORT, C_UNPACK, C_BYTE, C_UTF8, C_OFFSET, C_LOAD,
       C_DECODE, C_GC };

static const char *const charged_names[] = {
  "string.rep", "table.concat", "table.insert", "table.remove", "table.move", "table.sort",
  "table.unpack", "string.byte", "utf8", "utf8.offset", "load", "cjson.decode", "collectgarbage"
};

/* b - a + 1 as a cost: 0 for an empty range, and no overflow. */
static int64_t span(lua_Integer a, lua_Integer b) {
  if (b < a) return 0;
  if ((lua_Unsigned)b - (lua_Unsigned)a >= (lua_Unsigned)INT64_MAX / 4) return INT64_MAX / 4;
  return (int64_t)((lua_Unsigned)b - (lua_Unsigned)a) + 1;
}

static int64_t len_of(lua_State *L, int idx) {
  size_t n = 0;
  if (lua_type(L, idx) == LUA_TSTRING) lua_tolstring(L, idx, &n);
  else if (lua_type(L, idx) == LUA_TTABLE) n = lua_rawlen(L, idx);
  return (int64_t)n;
}

static int64_t cost_of(lua_State *L, int kind) {
  int64_t n;
  lua_Integer i, j;
  switch (kind) {
    case C_REP: {
      /* The result's bytes are charged as it is allocated, and a result
       * past the memory limit is refused before any loop: what is left is
       * the loop's own cost, which "" repeated 2^50 times is all of. */
      lua_Integer times = luaL_checkinteger(L, 2);
      eu_isolate *iso = eu_isolate_of(L);
      int64_t each = len_of(L, 1) + len_of(L, 3);
      if (times <= 0) return 0;
      if (each > 0 && (uint64_t)times > (eu_isolate_mem_limit(iso) + EU_ISOLATE_RESERVE) / (uint64_t)each) return 0;
      return span(1, times) / BYTES_A_UNIT + 1;
    }
    case C_CONCAT:
      i = luaL_optinteger(L, 3, 1);
      j = lua_isnoneornil(L, 4) ? (lua_Integer)len_of(L, 1) : luaL_checkinteger(L, 4);
      return span(i, j);
    case C_INSERT:
    case C_REMOVE:
      n = len_of(L, 1);
      if (lua_gettop(L) >= (kind == C_INSERT ? 3 : 2) && lua_isinteger(L, 2))
        return span(lua_tointeger(L, 2), n) + 1;
      return 1;
    case C_MOVE:
      return span(luaL_checkinteger(L, 2), luaL_checkinteger(L, 3));
    case C_SORT: {
      int64_t lg = 1;
      n = len_of(L, 1);
      while (((int64_t)1 << lg) < n && lg < 62) lg++;
      return n * lg;
    }
    case C_UNPACK:
      i = luaL_optinteger(L, 2, 1);
      j = lua_isnoneornil(L, 3) ? (lua_Integer)len_of(L, 1) : luaL_checkinteger(L, 3);
      return span(i, j);
    case C_BYTE:
      n = len_of(L, 1);
      i = luaL_optinteger(L, 2, 1);
      j = luaL_optinteger(L, 3, i);
      if (i < 0) i = n + i + 1;
      if (j < 0) j = n + j + 1;
      if (i < 1) i = 1;
      if (j > n) j = n;
      return span(i, j);
    case C_UTF8:
    case C_LOAD:
    case C_DECODE:
      return len_of(L, 1) / (kind == C_UTF8 ? 1 : 8);
    case C_OFFSET:
      n = len_of(L, 1);
      i = luaL_optinteger(L, 2, 1);
      return i < 0 ? (i < -n ? n : -i) : (i > n ? n : i);
    case C_GC: {
      const char *opt = luaL_optstring(L, 1, "collect");
      eu_isolate *iso = eu_isolate_of(L);
      if (strcmp(opt, "collect") != 0 && strcmp(opt, "step") != 0)
        luaL_error(L, "collectgarbage(\"%s\") is not available inside an isolate", opt);
      return (int64_t)(eu_isolate_mem(iso) / BYTES_A_UNIT);
    }
  }
  return 0;
}

/* Upvalues: 1 the function, 2 its kind. */
static int charged(lua_State *L) {
  int kind = (int)lua_tointeger(L, lua_upvalueindex(2));
  eu_sandbox_charge(L, cost_of(L, kind), charged_names[kind]);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  return lua_gettop(L);
}

/* Replaces t[name], t at the top of the stack, by its charged version. */
static void charge_field(lua_State *L, const char *name, int kind) {
  lua_getfield(L, -1, name);
  lua_pushinteger(L, kind);
  lua_pushcclosure(L, charged, 2);
  lua_setfield(L, -2, name);
}

/* load(chunk [, name [, mode [, env]]]) in text mode whatever mode says. */
static int s_load(lua_State *L) {
  int n = lua_gettop(L);
  eu_sandbox_charge(L, cost_of(L, C_LOAD), "load");
  if (n < 3) lua_settop(L, n = 3);
  lua_pushliteral(L, "t");
  lua_replace(L, 3);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, n, LUA_MULTRET);
  return lua_gettop(L);
}

/* The base library's setmetatable, and its checks, with one more: no
 * __gc. */
static int s_setmetatable(lua_State *L) {
  int t = lua_type(L, 2);
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_argexpected(L, t == LUA_TNIL || t == LUA_TTABLE, 2, "nil or table");
  if (t == LUA_TTABLE) {
    lua_pushliteral(L, "__gc");
    if (lua_rawget(L, 2) != LUA_TNIL)
      return luaL_error(L, "setmetatable: __gc is not available inside an isolate (a finalizer runs "
                           "where the CPU limit cannot stop it)");
    lua_pop(L, 1);
  }
  if (luaL_getmetafield(L, 1, "__metatable") != LUA_TNIL)
    return luaL_error(L, "cannot change a protected metatable");
  lua_settop(L, 2);
  lua_setmetatable(L, 1);
  return 1;
}

/* ---- require ---------------------------------------------------------- */

/* Where a module was found, by folders and name: the search tries files
 * that do not exist, a system call each, in every isolate. */
typedef struct found {
  char *key;   /* projectdir, NUL, libdir, NUL, name */
  size_t klen;
  char *path;
  struct found *next;
} found;

#define FOUND_BUCKETS 64
static found *founds[FOUND_BUCKETS];
static lua_CFunction cjson_open;

static unsigned hash_bytes(const char *s, size_t n) {
  return (unsigned)(eu_hash64(s, n, 0) % FOUND_BUCKETS);
}

void eu_sandbox_cache_clear(void) {
  int i;
  for (i = 0; i < FOUND_BUCKETS; i++) {
    while (founds[i]) {
      found *f = founds[i];
      founds[i] = f->next;
      free(f->key);
      free(f->path);
      free(f);
    }
  }
}

static void remember(const char *key, size_t klen, const char *path) {
  found *f = calloc(1, sizeof *f);
  unsigned h = hash_bytes(key, klen);
  if (!f || !(f->key = malloc(klen)) || !(f->path = strdup(path))) {
    if (f) free(f->key);
    free(f);
    return;
  }
  memcpy(f->key, key, klen);
  f->klen = klen;
  f->next = founds[h];
  founds[h] = f;
}

static int readable(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  fclose(f);
  return 1;
}

/* Pushes the file that holds module name (dots are folders), from the
 * folders in upvalues 1 (lib) and 2 (project); raises Lua's message when
 * there is none. Only files ending in .lua are ever named. */
static const char *find_module(lua_State *L, const char *name, int lib_only) {
  const char *dirs[2], *path;
  int i, ndirs = 0, base = lua_gettop(L);
  size_t klen;
  found *f;
  if (!lib_only) dirs[ndirs++] = lua_tostring(L, lua_upvalueindex(2));
  dirs[ndirs++] = lua_tostring(L, lua_upvalueindex(1));
  lua_pushstring(L, lua_tostring(L, lua_upvalueindex(2)));
  lua_pushliteral(L, "\0");
  lua_pushstring(L, lua_tostring(L, lua_upvalueindex(1)));
  lua_pushliteral(L, "\0");
  lua_pushstring(L, name);
  lua_concat(L, 5);
  {
    const char *key = lua_tolstring(L, -1, &klen);
    for (f = founds[hash_bytes(key, klen)]; f; f = f->next)
      if (f->klen == klen && memcmp(f->key, key, klen) == 0) {
        lua_pushstring(L, f->path);
        lua_replace(L, base + 1);
        return lua_tostring(L, -1);
      }
  }
  luaL_gsub(L, name, ".", "/");  /* base + 2 */
  lua_pushfstring(L, "module '%s' not found:", name);  /* base + 3 */
  for (i = 0; i < ndirs; i++) {
    static const char *const forms[] = { "%s/%s.lua", "%s/%s/init.lua" };
    int k;
    for (k = 0; k < 2; k++) {
      path = lua_pushfstring(L, forms[k], dirs[i], lua_tostring(L, base + 2));
      if (readable(path)) {
        remember(lua_tostring(L, base + 1), klen, path);
        lua_replace(L, base + 1);
        lua_settop(L, base + 1);
        return lua_tostring(L, -1);
      }
      lua_pushfstring(L, "\n\tno file '%s'", path);
      lua_remove(L, -2);
      lua_concat(L, 2);
    }
  }
  lua_error(L);
  return NULL;
}

/* lua-cjson, which eutaxy.json decodes with, opened once per process from
 * Lua's default C path (never the user's), without cjson.new: an instance
 * of its own would decode without the meter. Its encoding buffer, malloc's
 * and not the heap's, is made for each encoding instead of kept: between
 * calls the isolate's heap then holds nothing outside it, which closing an
 * isolate in an arena, packing it and rewinding it rely on (isolate.c). */
static void push_cjson(lua_State *L) {
  if (!cjson_open) {
    const char *p = LUA_CPATH_DEFAULT, *semi;
    while (*p && !cjson_open) {
      void *lib;
      semi = strchr(p, ';');
      if (!semi) semi = p + strlen(p);
      lua_pushlstring(L, p, (size_t)(semi - p));
      luaL_gsub(L, lua_tostring(L, -1), "?", "cjson");
      lib = dlopen(lua_tostring(L, -1), RTLD_NOW | RTLD_LOCAL);
      if (lib) cjson_open = (lua_CFunction)(uintptr_t)dlsym(lib, "luaopen_cjson");
      lua_pop(L, 2);
      p = *semi ? semi + 1 : semi;
    }
    if (!cjson_open) luaL_error(L, "module 'cjson' not found: install lua-cjson");
  }
  lua_pushcfunction(L, cjson_open);
  lua_pushliteral(L, "cjson");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "encode_keep_buffer");
  lua_pushboolean(L, 0);
  lua_call(L, 1, 0);
  lua_createtable(L, 0, 3);
  lua_getfield(L, -2, "decode");
  lua_pushinteger(L, C_DECODE);
  lua_pushcclosure(L, charged, 2);
  lua_setfield(L, -2, "decode");
  lua_getfield(L, -2, "encode");
  lua_setfield(L, -2, "encode");
  lua_getfield(L, -2, "null");
  lua_setfield(L, -2, "null");
  lua_remove(L, -2);
}

static int is_eutaxy(const char *name) {
  return strncmp(name, "eutaxy", 6) == 0 && (name[6] == '\0' || name[6] == '.');
}

/* require(name): package.loaded, then package.preload (not for eutaxy's
 * names), then the project's and eutaxy's Lua files, as text but for
 * eutaxy's own modules, which load from the build's bytecode (luac.h).
 * package.path is not read: the folders are the host's. A module of
 * eutaxy's gets eutaxy.core as its third argument. */
static int s_require(lua_State *L) {
  size_t len;
  const char *name = luaL_checklstring(L, 1, &len), *path;
  int lib = is_eutaxy(name);
  if (strlen(name) != len) return luaL_error(L, "module name contains a zero byte");
  lua_settop(L, 1);
  lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);  /* 2 */
  if (lua_getfield(L, 2, name) != LUA_TNIL && lua_toboolean(L, -1)) return 1;
  lua_pop(L, 1);
  if (!lib) {
    lua_getfield(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    if (lua_getfield(L, -1, name) != LUA_TNIL) {
      lua_remove(L, -2);
      lua_pushvalue(L, 1);
      lua_pushliteral(L, ":preload:");
      lua_call(L, 2, 1);
      lua_pushliteral(L, ":preload:");  /* 3 */
      lua_insert(L, -2);
      goto loaded;
    }
    lua_pop(L, 2);
    if (strcmp(name, "cjson") == 0) {
      lua_pushliteral(L, ":host:");
      push_cjson(L);
      goto loaded;
    }
  }
  path = find_module(L, name, lib);  /* 3 */
  if (eu_isolate_loadfile(L, path) != LUA_OK)
    return luaL_error(L, "error loading module '%s' from file '%s':\n\t%s", name, path, lua_tostring(L, -1));
  lua_pushvalue(L, 1);
  lua_pushvalue(L, 3);
  if (lib) lua_rawgetp(L, LUA_REGISTRYINDEX, &core_key);
  lua_call(L, lib ? 3 : 2, 1);
loaded:  /* 1 name, 2 loaded, 3 where, 4 what the loader returned */
  if (!lua_isnil(L, 4)) lua_setfield(L, 2, name);
  else lua_pop(L, 1);
  if (lua_getfield(L, 2, name) == LUA_TNIL) {
    lua_pushboolean(L, 1);
    lua_copy(L, -1, -2);
    lua_setfield(L, 2, name);
  }
  lua_insert(L, 3);
  return 2;
}

/* core.loadfile(path): the runtime's way to load the worker, through the
 * cache of compiled chunks; text files only. */
static int s_core_loadfile(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  if (eu_isolate_loadfile(L, path) != LUA_OK) {
    luaL_pushfail(L);
    lua_insert(L, -2);
    return 2;
  }
  return 1;
}

/* ---- opening ---------------------------------------------------------- */

static void wrap_global(lua_State *L, const char *name, lua_CFunction f) {
  lua_getglobal(L, name);
  lua_pushcclosure(L, f, 1);
  lua_setglobal(L, name);
}

void eu_sandbox_open(lua_State *L, const eu_sandbox_opts *o) {
  static const luaL_Reg libs[] = {
    {LUA_GNAME, luaopen_base}, {LUA_COLIBNAME, luaopen_coroutine}, {LUA_TABLIBNAME, luaopen_table},
    {LUA_STRLIBNAME, luaopen_string}, {LUA_MATHLIBNAME, luaopen_math}, {LUA_UTF8LIBNAME, luaopen_utf8},
    {LUA_OSLIBNAME, luaopen_os}, {NULL, NULL}
  };
  const luaL_Reg *lib;
  for (lib = libs; lib->func; lib++) {
    luaL_requiref(L, lib->name, lib->func, 1);
    lua_pop(L, 1);
  }
  eu_determ_meter(eu_sandbox_charge);
  /* the whole hook from the start: every thread created later copies it */
  lua_sethook(L, cpu_hook, hook_mask(), EU_HOOK_STEP);

  lua_pushnil(L);
  lua_setglobal(L, "dofile");
  lua_pushnil(L);
  lua_setglobal(L, "loadfile");
  lua_pushcfunction(L, s_tostring);
  lua_setglobal(L, "tostring");
  lua_pushcfunction(L, s_pcall);
  lua_setglobal(L, "pcall");
  lua_pushcfunction(L, s_xpcall);
  lua_setglobal(L, "xpcall");
  wrap_global(L, "load", s_load);
  lua_register(L, "setmetatable", s_setmetatable);
  lua_getglobal(L, "collectgarbage");
  lua_pushinteger(L, C_GC);
  lua_pushcclosure(L, charged, 2);
  lua_setglobal(L, "collectgarbage");

  lua_getglobal(L, LUA_COLIBNAME);
  lua_pushcfunction(L, s_resume);
  lua_setfield(L, -2, "resume");
  lua_pushcfunction(L, s_wrap);
  lua_setfield(L, -2, "wrap");
  lua_pop(L, 1);

  lua_getglobal(L, LUA_STRLIBNAME);
  lua_pushnil(L);
  lua_setfield(L, -2, "dump");
  eu_pattern_open(L, lua_gettop(L));
  lua_getfield(L, -1, "format");
  lua_pushcclosure(L, s_format, 1);
  lua_setfield(L, -2, "format");
  charge_field(L, "rep", C_REP);
  charge_field(L, "byte", C_BYTE);
  lua_pop(L, 1);

  lua_getglobal(L, LUA_TABLIBNAME);
  charge_field(L, "concat", C_CONCAT);
  charge_field(L, "insert", C_INSERT);
  charge_field(L, "remove", C_REMOVE);
  charge_field(L, "move", C_MOVE);
  charge_field(L, "sort", C_SORT);
  charge_field(L, "unpack", C_UNPACK);
  lua_pop(L, 1);

  lua_getglobal(L, LUA_UTF8LIBNAME);
  charge_field(L, "len", C_UTF8);
  charge_field(L, "codepoint", C_UTF8);
  charge_field(L, "offset", C_OFFSET);
  lua_pop(L, 1);

  /* debug: traceback alone, which error handlers use */
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, luaopen_debug);
  lua_call(L, 0, 1);
  lua_getfield(L, -1, "traceback");
  lua_setfield(L, -3, "traceback");
  lua_pop(L, 1);
  lua_pushvalue(L, -1);
  lua_setglobal(L, LUA_DBLIBNAME);
  lua_setfield(L, -2, LUA_DBLIBNAME);

  /* package: loaded and preload; path only says where require looks */
  lua_createtable(L, 0, 3);
  lua_pushvalue(L, -2);
  lua_setfield(L, -2, "loaded");
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_setfield(L, -2, "preload");
  lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s/?.lua;%s/?/init.lua", o->projectdir, o->projectdir, o->libdir,
                  o->libdir);
  lua_setfield(L, -2, "path");
  lua_pushvalue(L, -1);
  lua_setglobal(L, LUA_LOADLIBNAME);
  lua_setfield(L, -2, LUA_LOADLIBNAME);
  lua_pop(L, 1);
  lua_pushstring(L, o->libdir);
  lua_pushstring(L, o->projectdir);
  lua_pushcclosure(L, s_require, 2);
  lua_setglobal(L, "require");

  /* eutaxy.core, kept where only the require above reaches it */
  if (o->open_core) {
    lua_pushcfunction(L, o->open_core);
    lua_call(L, 0, 1);
    lua_pushcfunction(L, s_core_loadfile);
    lua_setfield(L, -2, "loadfile");
    lua_rawsetp(L, LUA_REGISTRYINDEX, &core_key);
  }
}
