/*
 * lcheck.c: core.explore, the checker's C side as Lua sees it.
 *
 * The scenario's Lua side (lua/eutaxy/checker.lua) hands over the worker,
 * the drive events, the bounds, a setup function and a check function. This
 * file builds the starting state once, in a template world, and keeps a
 * snapshot of every object's database; each run is then a new world with
 * those databases restored, the explorer's chooser plugged in, the drive
 * run to the end, and the check function called on what is left.
 *
 * What only a report needs (the trace, the event log, the faults, the
 * violation's rows) is kept for replays alone, so exploration runs do no
 * formatting at all. What exploration does keep is coverage: every fault
 * point the counted schedules reached, and which kinds of fault struck there.
 *
 * A scenario's always and sometimes properties are looked at between
 * turns, not only at the end: the world tells this file of every turn that
 * committed a write (on_commit), and the turn function is called on the
 * state at that moment. An always that fails stops the run there, so the
 * violation (and a replay's trace) ends at the turn that broke it. The
 * sometimes probes reached are kept for the whole exploration, merged from
 * parallel workers as coverage is. A scenario with neither has no hook:
 * its runs do nothing between turns.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lualib.h>

#include "clone.h"
#include "drive.h"
#include "eutaxy.h"
#include "explore.h"
#include "fault.h"
#include "faultsim.h"
#include "holds.h"
#include "isolate.h"
#include "lcore.h"
#include "linecov.h"
#include "sandbox.h"
#include "sqlmem.h"
#include "store.h"
#include "world.h"

typedef struct snapshot {
  int ns;
  char hex[65];
  char *name;
  unsigned char *image;
  size_t len;
} snapshot;

/* An object's database, kept across runs in baseline mode. */
typedef struct pooled {
  int ns;
  char hex[65];
  eu_store *store;
} pooled;

/* A fault point as coverage counts it. Its key is the fault label without
 * delivery and firing numbers ("req-1 effect #0 (DO:POOL acquire)" for
 * "req-1#2 effect #0 (DO:POOL acquire)"): one place in the code, however
 * often a run comes back to it. */
typedef struct point {
  char *key;
  long reached;           /* counted schedules that reached it */
  unsigned kinds;         /* kinds it has */
  unsigned open;          /* kinds it offered while the run could still inject a fault */
  unsigned spent;         /* kinds it offered after the run had injected all its cap (above 0) */
  unsigned tried;         /* kinds that struck there */
  int seen;               /* this run: reached */
  unsigned run_kinds, run_open, run_spent, run_tried;
} point;

/* What the kept world's checkpoints may hold, past which a run's deeper
 * steps are run again when a later run needs them rather than kept. */
#define EU_CHECKPOINT_BUDGET ((size_t)256 << 20)
#define EU_CHECKPOINTS_DENSE 64
/* The kept world is built again when its stores' journals have grown past
 * this, and past four times what they held after its first run. */
#define EU_JOURNAL_SLACK ((size_t)16 << 20)
#define EU_JOURNAL_EVERY 256

/* A fault point noted by the run in progress: applied to the points when
 * the run ends, so that a run that starts at a checkpoint has what the
 * decisions before it noted (see the restorer below). */
typedef struct pnote {
  int point;              /* index in points */
  unsigned kinds;
  int open;               /* the run could still inject a fault there */
  int before;             /* faults the run struck before it */
  int struck;
} pnote;

/* What a checkpoint of the kept world needs besides the world: the
 * chooser's place, the reducer's, the drive's state, the notes so far. */
typedef struct rck {
  int pathlen, struck;
  long checks;              /* the run's turn checks before it */
  uint64_t fault_set;
  eu_reducer_pos rpos;
  int has_rpos;
  size_t log_len;           /* the run's log by then (eu_chooser.log), or (size_t)-1 */
  eu_buf drive;
  int nnotes;
  long rstep;
} rck;

/* An end-of-run property the host decides when it holds (holds.h). The
 * binding, name and query are strings of the options table, which outlives
 * the search; the property has its own (eu_prop_own). */
typedef struct decided {
  const char *binding, *name, *sql;
  size_t namelen, sqllen;
  char hex[65];             /* worked out from the name at the first run if not given */
  eu_prop p;
  int lead;                 /* the first of those over the same object's same rows: one pass reads them */
} decided;

typedef struct xctx {
  lua_State *L;
  int check_idx;            /* the check function, on L's stack */
  decided *decided;         /* when every end-of-run property is one: a run */
  int ndecided;             /* where they all hold needs no call of check */
  eu_world_opts wo;
  eu_spares *spares;        /* wo.spares: arenas left by the worlds gone */
  eu_buf spares_key;        /* what their boot images were built for (take_spares) */
  eu_binding *bindings;
  char *vars;               /* wo.vars: the env's vars, encoded */
  int *alarm_caps;
  const char **crons;       /* the worker's cron triggers, strings of the options table */
  eu_drive drive;
  eu_drive_event *events;
  int websockets;       /* some event is a WebSocket client: answers change with turns */
  snapshot *snaps;
  int nsnaps;
  pooled *pool;
  int npool, cappool;
  int keep;                 /* keep the last run's trace, faults and violation */
  int determinism;          /* run every schedule twice and compare */
  const char *target;       /* shrinking: only a violation of this invariant counts */
  eu_buf trace, faults, timeline;
  int violation_ref, answers_ref;
  point *points;
  int npoints, cappoints;
  long by_kind[EU_FAULT_NKINDS], run_by_kind[EU_FAULT_NKINDS];  /* faults struck, counted runs / this run */
  int covering;             /* noting coverage: off while shrinking */
  int turn_idx;             /* the turn function, on L's stack; 0: no always or sometimes */
  int nalways;              /* always properties */
  int nprobes;              /* sometimes probes, in the scenario's order */
  unsigned char *reached;   /* [nprobes]: reached in this exploration */
  int nreached;
  int probing;              /* noting sometimes: off while shrinking and replaying */
  long turn_checks;         /* calls of the turn function */
  long run_checks;          /* of them, by the run in progress */
  /* this run, for the turn function */
  const eu_drive_answer *run_answers;
  uint64_t run_events;
  int run_ref;              /* the run table the turn function gets, made at its first call */
  int run_answered;         /* answers in it */
  int broke_ref;            /* an always's violation after a turn: the run stopped there */
  char turn_err[EU_ERRLEN]; /* the turn function raised: the run stopped there */
  int run_cap;              /* the fault cap of the run in progress */
  const eu_search *search;  /* the search under way, if any */
  pnote *notes;             /* this run's fault points */
  int nnotes, capnotes;
  point *mark;              /* the points' counts as search_mark found them */
  int nmark, capmark;
  long mark_by_kind[EU_FAULT_NKINDS];
  /* The restorer: one world kept for the whole search, with a checkpoint
   * before every step of the last run (world.h). A run whose decisions
   * start as the last one's did starts at the deepest checkpoint they
   * share, rewound; nothing before it runs again. */
  int restore;              /* keep a world (off: every run builds its own) */
  eu_world *rw;
  eu_drive_state rst;
  eu_drive_answer *ranswers;
  uint64_t rw_events;       /* what the kept world was made for */
  int rw_trace;
  int rcap, rlabels, rown_k, rown_n;  /* what its checkpoints past the first were made under */
  unsigned long rred;
  eu_trail rtrail;          /* the decisions of the run they belong to */
  rck *rcks;
  int nrcks, caprcks;
  eu_chooser *rch;          /* the chooser of the run in progress */
  int rskip;                /* the run starts at a checkpoint it need not take again */
  int rbroken;              /* a checkpoint failed: the world is not kept */
  long rebuilt, rewound, rsteps;  /* worlds built for runs, runs rewound, checkpoints taken */
  long recounted;           /* watched runs run again counted (0 or 1 a process) */
  int rfirst;               /* no step of the kept world has run yet */
  int rsteps_on;            /* its last run's steps were reported (eu_chooser_steps) */
  size_t rjournal;          /* its stores' journals after its first run, or (size_t)-1 before */
  long rstep;               /* steps of the run that could have had a checkpoint */
  eu_drive rdrive;          /* the drive of the kept world's runs */
  int restore_given_up;     /* an arena ran out: the rest of the search builds its worlds */
  int cpu_watch;            /* runs may go uncounted, watched (sandbox.h): off once one ran long */
  int watching;             /* the run under way is watched */
  eu_store **private;       /* stores of a run outside the kept world */
  int nprivate, capprivate;
} xctx;

static const char *opt_str(lua_State *L, int t, const char *field) {
  const char *s;
  lua_getfield(L, t, field);
  s = lua_tostring(L, -1);
  lua_pop(L, 1);  /* the options table keeps it alive */
  return s;
}

static lua_Integer opt_int(lua_State *L, int t, const char *field, lua_Integer dflt) {
  lua_Integer v;
  int isnum;
  lua_getfield(L, t, field);
  v = lua_tointegerx(L, -1, &isnum);
  lua_pop(L, 1);
  return isnum ? v : dflt;
}

static int opt_bool(lua_State *L, int t, const char *field) {
  int b;
  lua_getfield(L, t, field);
  b = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return b;
}

static void drop_world(xctx *x);

/* ---- spares -------------------------------------------------------------
 *
 * A check explores more than once in one process (the search, then the
 * violation's replay with its trace), each time in worlds of the same
 * scenario: the arenas and boot images one exploration's worlds leave are
 * the next one's, when what a boot image holds was built from the same
 * options (the worker's module, eutaxy's, the project's folder, the
 * bindings and their modules, the vars, the seed). */
static eu_spares *left_spares;
static eu_buf left_key;

/* The options a boot image is built from, as bytes; EU_OK or EU_ENOMEM. */
static int spares_key(xctx *x, eu_buf *b) {
  const eu_world_opts *o = &x->wo;
  int i, rc;
  eu_buf_reset(b);
  rc = eu_buf_printf(b, "%s%c%s%c%s%c%llu%c%d%c", o->entry, 0, o->libdir, 0, o->projectdir ? o->projectdir : "",
                     0, (unsigned long long)o->seed, 0, o->nbindings, 0);
  for (i = 0; rc == EU_OK && i < o->nbindings; i++)
    rc = eu_buf_printf(b, "%s%c%s%c%s%c", o->bindings[i].name, 0, o->bindings[i].class_name, 0,
                       o->bindings[i].entry ? o->bindings[i].entry : "", 0);
  if (rc == EU_OK && o->vars) rc = eu_buf_put(b, o->vars, o->vars_len);
  return rc;
}

static void take_spares(lua_State *L, xctx *x) {
  if (spares_key(x, &x->spares_key) != EU_OK) eu_buf_free(&x->spares_key);  /* no key: not left to another */
  if (left_spares && x->spares_key.n && left_key.n == x->spares_key.n &&
      memcmp(left_key.p, x->spares_key.p, left_key.n) == 0) {
    x->spares = left_spares;
    left_spares = NULL;
  } else if (!(x->spares = eu_spares_new())) {
    luaL_error(L, "out of memory");
  }
  x->wo.spares = x->spares;
}

/* After the exploration: its spares are the next one's (those of another
 * scenario go), until the command is over (eu_check_release). */
static void leave_spares(xctx *x) {
  if (x->spares && !x->spares_key.n) {
    eu_spares_free(x->spares);
    x->spares = NULL;
  }
  if (x->spares) {
    eu_spares_free(left_spares);
    left_spares = x->spares;
    x->spares = NULL;
    eu_buf_reset(&left_key);
    if (eu_buf_put(&left_key, x->spares_key.p, x->spares_key.n) != EU_OK) {
      eu_spares_free(left_spares);
      left_spares = NULL;
    }
  }
  eu_buf_free(&x->spares_key);
}

void eu_check_release(void) {
  eu_spares_free(left_spares);
  left_spares = NULL;
  eu_buf_free(&left_key);
}

static void free_ctx(xctx *x) {
  int i;
  for (i = 0; i < x->ndecided; i++) eu_prop_free(&x->decided[i].p);
  free(x->decided);
  drop_world(x);
  leave_spares(x);
  for (i = 0; i < x->caprcks; i++) {
    eu_buf_free(&x->rcks[i].drive);
    eu_reducer_pos_free(&x->rcks[i].rpos);
  }
  free(x->rcks);
  eu_trail_free(&x->rtrail);
  free(x->notes);
  free(x->mark);
  for (i = 0; i < x->nprivate; i++) eu_store_close(x->private[i]);
  free(x->private);
  for (i = 0; i < x->npool; i++) eu_store_close(x->pool[i].store);
  free(x->pool);
  for (i = 0; i < x->nsnaps; i++) {
    free(x->snaps[i].name);
    free(x->snaps[i].image);
  }
  free(x->snaps);
  if (x->events)
    for (i = 0; i < x->drive.n; i++) {
      free((char *)x->events[i].payload);
      free((char *)x->events[i].script);
    }
  free(x->events);
  free(x->bindings);
  free(x->vars);
  free(x->alarm_caps);
  free(x->crons);
  eu_buf_free(&x->trace);
  eu_buf_free(&x->faults);
  eu_buf_free(&x->timeline);
  for (i = 0; i < x->npoints; i++) free(x->points[i].key);
  free(x->points);
  free(x->reached);
  if (x->run_ref != LUA_NOREF) luaL_unref(x->L, LUA_REGISTRYINDEX, x->run_ref);
  if (x->broke_ref != LUA_NOREF) luaL_unref(x->L, LUA_REGISTRYINDEX, x->broke_ref);
  if (x->violation_ref != LUA_NOREF) luaL_unref(x->L, LUA_REGISTRYINDEX, x->violation_ref);
  if (x->answers_ref != LUA_NOREF) luaL_unref(x->L, LUA_REGISTRYINDEX, x->answers_ref);
}

/* The xctx lives in a userdata whose __gc frees it, so a Lua error anywhere
 * below leaks nothing. */
static int ctx_gc(lua_State *L) {
  free_ctx(lua_touserdata(L, 1));
  return 0;
}

/* ---- reading the options ---------------------------------------------- */

/* decided: { {binding=, name=, hex=, sql=, property=}, ... }, or absent. */
static void read_decided(lua_State *L, xctx *x) {
  int n, i, j;
  lua_getfield(L, 1, "decided");
  n = lua_istable(L, -1) ? (int)lua_rawlen(L, -1) : 0;
  if (n > 0 && !(x->decided = calloc((size_t)n, sizeof *x->decided))) luaL_error(L, "out of memory");
  for (i = 0; i < n; i++) {
    decided *d = &x->decided[i];
    int t;
    const char *hex;
    lua_rawgeti(L, -1, i + 1);
    t = lua_gettop(L);
    d->binding = opt_str(L, t, "binding");
    lua_getfield(L, t, "name");
    d->name = lua_tolstring(L, -1, &d->namelen);
    lua_getfield(L, t, "sql");
    d->sql = lua_tolstring(L, -1, &d->sqllen);
    hex = opt_str(L, t, "hex");
    lua_getfield(L, t, "property");
    if (!d->binding || !d->sql || (!hex && !d->name) || (hex && strlen(hex) != 64) ||
        !eu_prop_read(L, -1, &d->p))
      luaL_error(L, "core.explore: decided[%d] is not a property the host decides", i + 1);
    /* the scenario's code may change the invariant's table while the search runs */
    if (eu_prop_own(&d->p) != EU_OK) luaL_error(L, "out of memory");
    x->ndecided = i + 1;
    if (hex) memcpy(d->hex, hex, 65);
    d->lead = i;
    for (j = 0; j < i && d->lead == i; j++) {
      const decided *e = &x->decided[j];
      if (e->lead == j && strcmp(e->binding, d->binding) == 0 && e->sqllen == d->sqllen &&
          memcmp(e->sql, d->sql, d->sqllen) == 0 &&
          (hex ? e->hex[0] && strcmp(e->hex, d->hex) == 0
               : !e->hex[0] && e->name && e->namelen == d->namelen && memcmp(e->name, d->name, d->namelen) == 0))
        d->lead = j;
    }
    lua_settop(L, t - 1);
  }
  lua_pop(L, 1);
}

static void read_world(lua_State *L, xctx *x) {
  int n, i;
  memset(&x->wo, 0, sizeof x->wo);
  x->wo.entry = opt_str(L, 1, "entry");
  x->wo.libdir = opt_str(L, 1, "libdir");
  x->wo.projectdir = opt_str(L, 1, "projectdir");
  x->wo.seed = (uint64_t)opt_int(L, 1, "seed", 0);
  if (!x->wo.entry || !x->wo.libdir) luaL_error(L, "core.explore: entry and libdir are required");
  lua_getfield(L, 1, "bindings");
  n = lua_istable(L, -1) ? (int)luaL_len(L, -1) : 0;
  x->bindings = calloc((size_t)(n ? n : 1), sizeof *x->bindings);
  x->alarm_caps = calloc((size_t)(n ? n : 1), sizeof *x->alarm_caps);
  if (!x->bindings || !x->alarm_caps) luaL_error(L, "out of memory");
  for (i = 0; i < n; i++) {
    lua_geti(L, -1, i + 1);
    x->bindings[i].name = opt_str(L, lua_gettop(L), "name");
    x->bindings[i].class_name = opt_str(L, lua_gettop(L), "class_name");
    x->bindings[i].entry = opt_str(L, lua_gettop(L), "entry");  /* a service's module */
    x->alarm_caps[i] = (int)opt_int(L, lua_gettop(L), "alarms", 0);
    if (!x->bindings[i].name || !x->bindings[i].class_name)
      luaL_error(L, "core.explore: bindings[%d] needs name and class_name", i + 1);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  lua_getfield(L, 1, "vars");
  if (lua_istable(L, -1)) {
    char err[EU_ERRLEN];
    const char *p;
    size_t len;
    if (eu_clone_push_encoded(L, -1, err, sizeof err) != EU_OK) luaL_error(L, "core.explore: vars: %s", err);
    p = lua_tolstring(L, -1, &len);
    if (!(x->vars = malloc(len))) luaL_error(L, "out of memory");
    memcpy(x->vars, p, len);
    x->wo.vars = x->vars;
    x->wo.vars_len = len;
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  x->wo.bindings = x->bindings;
  x->wo.nbindings = n;
  x->wo.alarm_caps = x->alarm_caps;
  x->wo.max_redeliveries = (int)opt_int(L, 1, "maxRedeliveries", 2);
  lua_getfield(L, 1, "crons");
  n = lua_istable(L, -1) ? (int)luaL_len(L, -1) : 0;
  if (!(x->crons = calloc((size_t)(n ? n : 1), sizeof *x->crons))) luaL_error(L, "out of memory");
  for (i = 0; i < n; i++) {
    lua_geti(L, -1, i + 1);
    if (!(x->crons[i] = lua_tostring(L, -1))) luaL_error(L, "core.explore: crons[%d] must be a string", i + 1);
    lua_pop(L, 1);  /* the options table keeps it alive */
  }
  lua_pop(L, 1);
  x->wo.crons = x->crons;
  x->wo.ncrons = n;
  x->wo.max_crons = (int)opt_int(L, 1, "maxCrons", 0);
  lua_getfield(L, 1, "faults");
  if (lua_istable(L, -1)) {
    n = (int)luaL_len(L, -1);
    for (i = 0; i < n; i++) {
      int k;
      lua_geti(L, -1, i + 1);
      k = lua_isstring(L, -1) ? eu_fault_parse(lua_tostring(L, -1)) : 0;
      if (!k) luaL_error(L, "core.explore: unknown fault kind %s", luaL_tolstring(L, -1, NULL));
      x->wo.faults |= EU_FAULT_BIT(k);
      lua_pop(L, 1);
    }
  } else {
    x->wo.faults = EU_FAULT_ALL;
  }
  lua_pop(L, 1);
}

/* A WebSocket client's script at idx: { op = "text"|"binary"|"close"|"drop",
 * data, code, at }, ... into records. */
static void read_script(lua_State *L, xctx *x, eu_drive_event *e, int idx) {
  static const char *const ops[] = { "text", "binary", "close", "drop", NULL };
  static const int codes[] = { EU_WS_TEXT, EU_WS_BINARY, EU_WS_CLOSE, EU_WS_DROP };
  int i, n = (int)luaL_len(L, idx);
  eu_buf b;
  eu_buf_init(&b);
  e->websocket = 1;
  x->websockets = 1;
  for (i = 1; i <= n; i++) {
    const char *data;
    size_t len = 0;
    int op, code, item;
    lua_geti(L, idx, i);
    item = lua_gettop(L);
    lua_getfield(L, item, "op");
    op = codes[luaL_checkoption(L, -1, NULL, ops)];
    lua_getfield(L, item, "data");
    data = lua_tolstring(L, -1, &len);
    lua_getfield(L, item, "code");
    code = (int)luaL_optinteger(L, -1, op == EU_WS_DROP ? 1006 : op == EU_WS_CLOSE ? 1000 : 0);
    lua_getfield(L, item, "at");
    if (eu_ws_record_put(&b, op, code, (int64_t)luaL_optinteger(L, -1, 0), data ? data : "", data ? len : 0) != EU_OK) {
      eu_buf_free(&b);
      luaL_error(L, "out of memory");
    }
    lua_settop(L, item - 1);
  }
  e->script = eu_buf_take(&b, &e->script_len);
}

static void read_events(lua_State *L, xctx *x) {
  int n, i;
  char err[EU_ERRLEN];
  lua_getfield(L, 1, "events");
  n = lua_istable(L, -1) ? (int)luaL_len(L, -1) : 0;
  if (n > EU_MAX_EVENTS) luaL_error(L, "core.explore: at most %d drive events", EU_MAX_EVENTS);
  x->events = calloc((size_t)(n ? n : 1), sizeof *x->events);
  if (!x->events) luaL_error(L, "out of memory");
  x->drive.events = x->events;
  for (i = 0; i < n; i++) {
    eu_drive_event *e = &x->events[i];
    const char *kind, *label;
    eu_buf b;
    int t, nvals;
    lua_geti(L, -1, i + 1);
    t = lua_gettop(L);
    kind = opt_str(L, t, "kind");
    label = opt_str(L, t, "label");
    e->kind = kind && strcmp(kind, "rpc") == 0 ? EU_CALL_RPC : EU_CALL_FETCH;
    snprintf(e->label, sizeof e->label, "%s", label ? label : "event");
    e->binding = opt_str(L, t, "binding");
    e->name = opt_str(L, t, "name");
    e->method = opt_str(L, t, "method");
    e->at = (int64_t)opt_int(L, t, "at", 0);
    if (e->at < 0) luaL_error(L, "core.explore: events[%d].at must be a non-negative integer", i + 1);
    if (e->kind == EU_CALL_RPC && (!e->binding || !e->name || !e->method))
      luaL_error(L, "core.explore: events[%d] needs binding, name and method", i + 1);
    /* fetch: one wire request; rpc: the method name, then the arguments */
    if (e->kind == EU_CALL_RPC) {
      lua_pushstring(L, e->method);
      lua_getfield(L, t, "args");
      nvals = 1;
      if (lua_istable(L, -1)) {
        int a, na = (int)luaL_len(L, -1);
        luaL_checkstack(L, na, "too many arguments");
        for (a = 1; a <= na; a++) lua_geti(L, t + 2, a);
        lua_remove(L, t + 2);
        nvals += na;
      } else {
        lua_pop(L, 1);
      }
    } else {
      lua_getfield(L, t, "request");
      nvals = 1;
    }
    eu_buf_init(&b);
    if (eu_clone_encode(L, t + 1, nvals, &b, err, sizeof err) != EU_OK) {
      eu_buf_free(&b);
      luaL_error(L, "%s: %s", e->label, err);
    }
    e->payload = eu_buf_take(&b, &e->len);
    lua_settop(L, t);
    lua_getfield(L, t, "script");
    if (lua_istable(L, -1)) read_script(L, x, e, lua_gettop(L));
    lua_settop(L, t - 1);
  }
  lua_pop(L, 1);
  x->drive.n = n;
  x->drive.retries = (int)opt_int(L, 1, "retries", 0);
  x->drive.max_concurrent = (int)opt_int(L, 1, "maxConcurrent", 1);
  if (x->drive.max_concurrent < 1) x->drive.max_concurrent = 1;
  x->drive.max_redeliveries = x->wo.max_redeliveries;
  x->drive.max_events = (long)opt_int(L, 1, "maxEvents", 100000);
}

/* The template world: setup(world) seeds the objects, their databases are kept. */
static void build_snapshots(lua_State *L, xctx *x) {
  eu_world *w;
  eu_world_opts o = x->wo;
  char err[EU_ERRLEN];
  int i, n;
  o.no_trace = 1;
  o.faults = 0;
  if (eu_world_new(&w, &o, err, sizeof err) != EU_OK) luaL_error(L, "%s", err);
  lua_getfield(L, 1, "setup");
  if (lua_isfunction(L, -1)) {
    eu_lworld_push(L, w, 1);
    if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
      eu_world_free(w);
      lua_error(L);
    }
  } else {
    lua_pop(L, 1);
  }
  n = eu_world_nobjects(w);
  x->snaps = calloc((size_t)(n ? n : 1), sizeof *x->snaps);
  if (!x->snaps) {
    eu_world_free(w);
    luaL_error(L, "out of memory");
  }
  for (i = 0; i < n; i++) {
    eu_object *obj = eu_world_object_at(w, i);
    eu_store *s = eu_object_store_if_open(obj);
    snapshot *sn = &x->snaps[x->nsnaps];
    if (!s) continue;
    sn->ns = eu_world_binding(w, eu_object_binding(w, obj));
    snprintf(sn->hex, sizeof sn->hex, "%s", eu_object_hex(obj));
    if (eu_object_name(obj) && !(sn->name = strdup(eu_object_name(obj)))) break;
    if (eu_store_snapshot(s, &sn->image, &sn->len) != EU_OK) {
      char msg[EU_ERRLEN + 200];
      /* the object, its binding's name and its store go with the world */
      snprintf(msg, sizeof msg, "cannot snapshot the setup of %s: %s", eu_object_binding(w, obj),
               eu_store_errmsg(s));
      free(sn->name);
      sn->name = NULL;
      eu_world_free(w);
      luaL_error(L, "%s", msg);
    }
    x->nsnaps++;
  }
  eu_world_free(w);
}

/* ---- the store pool ----------------------------------------------------
 *
 * Each object's database is opened once per exploration, from its setup
 * snapshot, and every run works inside an outer transaction that is rolled
 * back when the run ends: no run reopens a database or prepares its
 * statements again. */

/* A new database with the object's setup in it, or NULL. */
static eu_store *open_setup(xctx *x, int ns, const char *hex, char *err, size_t errlen) {
  eu_store *s;
  int i;
  if (eu_store_open(&s, NULL, err, errlen) != EU_OK) return NULL;
  for (i = 0; i < x->nsnaps; i++) {
    snapshot *sn = &x->snaps[i];
    if (sn->ns == ns && strcmp(sn->hex, hex) == 0 && eu_store_restore(s, sn->image, sn->len) != EU_OK) {
      eu_err(err, errlen, EU_ESQL, "restoring the setup: %s", eu_store_errmsg(s));
      eu_store_close(s);
      return NULL;
    }
  }
  return s;
}

static eu_store *provide_store(void *ud, int ns, const char *hex, char *err, size_t errlen) {
  xctx *x = ud;
  pooled *p;
  int i;
  for (i = 0; i < x->npool; i++)
    if (x->pool[i].ns == ns && strcmp(x->pool[i].hex, hex) == 0) {
      if (eu_store_baseline_begin(x->pool[i].store) != EU_OK) {
        eu_err(err, errlen, EU_ESQL, "%s", eu_store_errmsg(x->pool[i].store));
        return NULL;
      }
      return x->pool[i].store;
    }
  if (x->npool == x->cappool) {
    int cap = x->cappool ? x->cappool * 2 : 8;
    pooled *a = realloc(x->pool, (size_t)cap * sizeof *a);
    if (!a) {
      eu_err(err, errlen, EU_ENOMEM, "out of memory");
      return NULL;
    }
    x->pool = a;
    x->cappool = cap;
  }
  p = &x->pool[x->npool];
  memset(p, 0, sizeof *p);
  p->ns = ns;
  snprintf(p->hex, sizeof p->hex, "%s", hex);
  if (!(p->store = open_setup(x, ns, hex, err, errlen))) return NULL;
  if (eu_store_baseline_begin(p->store) != EU_OK) {
    eu_err(err, errlen, EU_ESQL, "%s", eu_store_errmsg(p->store));
    eu_store_close(p->store);
    return NULL;
  }
  x->npool++;
  return p->store;
}

/* After a run: every database back to its setup. One whose transaction
 * SQLite ended by itself is dropped and opened afresh next time. */
static void rewind_pool(xctx *x) {
  int i = 0;
  while (i < x->npool) {
    if (eu_store_baseline_lost(x->pool[i].store) || eu_store_baseline_end(x->pool[i].store) != EU_OK) {
      eu_store_close(x->pool[i].store);
      x->pool[i] = x->pool[--x->npool];
      continue;
    }
    i++;
  }
}

/* ---- coverage --------------------------------------------------------- */

static void point_key(const char *label, char *out, size_t n) {
  size_t j = 0;
  const char *p = label;
  while (*p && j + 1 < n) {
    /* "#<digits>" right after a name is a delivery or firing number; "effect #0" stays */
    if (*p == '#' && p > label && p[-1] != ' ' && p[1] >= '0' && p[1] <= '9') {
      for (p++; *p >= '0' && *p <= '9'; p++) {}
      continue;
    }
    out[j++] = (*p == '\t' || *p == '\n' || *p == '\r') ? ' ' : *p;
    p++;
  }
  out[j] = '\0';
}

static point *find_point(xctx *x, const char *key) {
  int i;
  point *pt;
  for (i = 0; i < x->npoints; i++)
    if (strcmp(x->points[i].key, key) == 0) return &x->points[i];
  if (x->npoints == x->cappoints) {
    int cap = x->cappoints ? x->cappoints * 2 : 16;
    point *a = realloc(x->points, (size_t)cap * sizeof *a);
    if (!a) return NULL;
    x->points = a;
    x->cappoints = cap;
  }
  pt = &x->points[x->npoints];
  memset(pt, 0, sizeof *pt);
  if (!(pt->key = strdup(key))) return NULL;
  x->npoints++;
  return pt;
}

/* The world's fault_point hook: noted for this run, kept if the run is counted. */
static void note_point(void *ud, const char *label, unsigned kinds, int open, int struck) {
  xctx *x = ud;
  char key[256];
  point *pt;
  pnote *n;
  if (!x->covering) return;
  point_key(label, key, sizeof key);
  if (!(pt = find_point(x, key))) return;
  if (x->nnotes == x->capnotes) {
    int cap = x->capnotes ? x->capnotes * 2 : 64;
    pnote *a = realloc(x->notes, (size_t)cap * sizeof *a);
    if (!a) return;
    x->notes = a;
    x->capnotes = cap;
  }
  n = &x->notes[x->nnotes];
  n->point = (int)(pt - x->points);
  n->kinds = kinds;
  n->open = open;
  n->before = x->nnotes ? n[-1].before + (n[-1].struck != 0) : 0;
  n->struck = struck;
  x->nnotes++;
}

/* The run's notes, onto the points (forget_run first). A point is open
 * where the run could still strike a fault, and spent where it could not
 * for its cap (but in the fault-free tree). The one tree (eu_search.flat)
 * runs a run of f faults under a higher cap, where the trees by count
 * count it under the cap f: it is noted as there, open where a fault of
 * its f was still to strike and spent past its last. */
static void apply_notes(xctx *x, int faults) {
  int i, flat = x->search && x->search->flat_now;
  for (i = 0; i < x->nnotes; i++) {
    const pnote *n = &x->notes[i];
    point *pt = &x->points[n->point];
    int open = flat ? n->open && n->before < faults : n->open;
    pt->seen = 1;
    pt->run_kinds |= n->kinds;
    if (open) pt->run_open |= n->kinds;
    else if (flat ? faults > 0 : x->run_cap > 0) pt->run_spent |= n->kinds;
    if (n->struck) {
      pt->run_tried |= EU_FAULT_BIT(n->struck);
      x->run_by_kind[n->struck]++;
    }
  }
}

static void forget_run(xctx *x) {
  int i;
  memset(x->run_by_kind, 0, sizeof x->run_by_kind);
  for (i = 0; i < x->npoints; i++) {
    x->points[i].seen = 0;
    x->points[i].run_kinds = x->points[i].run_open = x->points[i].run_spent = x->points[i].run_tried = 0;
  }
}

/* What the counted runs noted so far, kept (search_mark) and put back
 * (search_back): the one tree's runs are set aside when the trees by
 * count must search again. The points found since stay, counted by none. */
static int search_mark(void *ud) {
  xctx *x = ud;
  if (x->npoints > x->capmark) {
    point *a = realloc(x->mark, (size_t)x->npoints * sizeof *a);
    if (!a) return EU_ENOMEM;
    x->mark = a;
    x->capmark = x->npoints;
  }
  if (x->npoints) memcpy(x->mark, x->points, (size_t)x->npoints * sizeof *x->mark);
  x->nmark = x->npoints;
  memcpy(x->mark_by_kind, x->by_kind, sizeof x->by_kind);
  return EU_OK;
}

static void search_back(void *ud) {
  xctx *x = ud;
  int i;
  for (i = 0; i < x->npoints; i++) {
    point *pt = &x->points[i];
    const point *m = i < x->nmark ? &x->mark[i] : NULL;
    pt->reached = m ? m->reached : 0;
    pt->kinds = m ? m->kinds : 0;
    pt->open = m ? m->open : 0;
    pt->spent = m ? m->spent : 0;
    pt->tried = m ? m->tried : 0;
  }
  memcpy(x->by_kind, x->mark_by_kind, sizeof x->by_kind);
}

static void keep_run(void *ud) {
  xctx *x = ud;
  int i;
  for (i = 0; i < EU_FAULT_NKINDS; i++) x->by_kind[i] += x->run_by_kind[i];
  for (i = 0; i < x->npoints; i++) {
    point *pt = &x->points[i];
    if (!pt->seen) continue;
    pt->reached++;
    pt->kinds |= pt->run_kinds;
    pt->open |= pt->run_open;
    pt->spent |= pt->run_spent;
    pt->tried |= pt->run_tried;
  }
  forget_run(x);
}

/* A parallel worker's notes: a first line of faults by kind (and the
 * worlds it built and the runs it rewound), a second of
 * turn checks and the sometimes probes reached (their indices), then
 * coverage, one point a line: reached, kinds, open, spent, tried, key;
 * under --coverage, the lines counted last, each file's starting with
 * '@' where a point's line starts with its count (eu_linecov_export). */
static int export_points(void *ud, eu_buf *out) {
  xctx *x = ud;
  int i;
  for (i = 0; i < EU_FAULT_NKINDS; i++)
    if (eu_buf_printf(out, "%ld ", x->by_kind[i]) != EU_OK) return EU_ENOMEM;
  if (eu_buf_printf(out, "%ld %ld %ld\n", x->rebuilt, x->rewound, x->recounted) != EU_OK) return EU_ENOMEM;
  if (eu_buf_printf(out, "%ld", x->turn_checks) != EU_OK) return EU_ENOMEM;
  for (i = 0; i < x->nprobes; i++)
    if (x->reached[i] && eu_buf_printf(out, " %d", i) != EU_OK) return EU_ENOMEM;
  if (eu_buf_putc(out, '\n') != EU_OK) return EU_ENOMEM;
  for (i = 0; i < x->npoints; i++) {
    point *pt = &x->points[i];
    if (pt->reached == 0) continue;
    if (eu_buf_printf(out, "%ld %u %u %u %u %s\n", pt->reached, pt->kinds, pt->open, pt->spent, pt->tried,
                      pt->key) != EU_OK)
      return EU_ENOMEM;
  }
  return eu_linecov_on ? eu_linecov_export(out) : EU_OK;
}

static int merge_points(void *ud, const char *p, size_t n) {
  xctx *x = ud;
  const char *end = p + n;
  int k;
  for (k = 0; k < EU_FAULT_NKINDS; k++) {
    char *next;
    long v = strtol(p, &next, 10);
    if (next == p || next > end) return EU_ECORRUPT;
    x->by_kind[k] += v;
    p = next;
  }
  {
    char *next;
    long built = strtol(p, &next, 10), rewound, recounted;
    if (next == p || next > end) return EU_ECORRUPT;
    p = next;
    rewound = strtol(p, &next, 10);
    if (next == p || next > end) return EU_ECORRUPT;
    p = next;
    recounted = strtol(p, &next, 10);
    if (next == p || next > end) return EU_ECORRUPT;
    p = next;
    x->rebuilt += built;
    x->rewound += rewound;
    x->recounted += recounted;
  }
  if (p >= end || *p != '\n') return EU_ECORRUPT;
  p++;
  {
    char *next;
    x->turn_checks += strtol(p, &next, 10);
    if (next == p || next > end) return EU_ECORRUPT;
    for (p = next; p < end && *p == ' '; p = next) {
      long probe = strtol(p, &next, 10);
      if (next == p + 1 || next > end || probe < 0 || probe >= x->nprobes) return EU_ECORRUPT;
      if (!x->reached[probe]) x->nreached++;
      x->reached[probe] = 1;
    }
    if (p >= end || *p != '\n') return EU_ECORRUPT;
    p++;
  }
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    char line[300];
    long reached;
    unsigned kinds, open, spent, tried;
    int at = 0;
    point *pt;
    if (*p == '@') return eu_linecov_merge(p, (size_t)(end - p));
    if (!nl) return EU_ECORRUPT;
    snprintf(line, sizeof line, "%.*s", (int)(nl - p), p);
    p = nl + 1;
    if (sscanf(line, "%ld %u %u %u %u %n", &reached, &kinds, &open, &spent, &tried, &at) != 5 || !at)
      return EU_ECORRUPT;
    if (!(pt = find_point(x, line + at))) return EU_ENOMEM;
    pt->reached += reached;
    pt->kinds |= kinds;
    pt->open |= open;
    pt->spent |= spent;
    pt->tried |= tried;
  }
  return EU_OK;
}

static void push_kinds(lua_State *L, unsigned bits) {
  int k, n = 0;
  lua_newtable(L);
  for (k = 1; k < EU_FAULT_NKINDS; k++)
    if (bits & EU_FAULT_BIT(k)) {
      lua_pushstring(L, eu_fault_name(k));
      lua_rawseti(L, -2, ++n);
    }
}

/* { { point =, reached =, kinds = {...}, open = {...}, spent = {...}, tried = {...} }, ... } in the order first seen */
static void push_coverage(lua_State *L, xctx *x) {
  int i, n = 0;
  lua_newtable(L);
  for (i = 0; i < x->npoints; i++) {
    point *pt = &x->points[i];
    if (pt->reached == 0) continue;
    lua_createtable(L, 0, 6);
    lua_pushstring(L, pt->key);
    lua_setfield(L, -2, "point");
    lua_pushinteger(L, pt->reached);
    lua_setfield(L, -2, "reached");
    push_kinds(L, pt->kinds);
    lua_setfield(L, -2, "kinds");
    push_kinds(L, pt->open);
    lua_setfield(L, -2, "open");
    push_kinds(L, pt->spent);
    lua_setfield(L, -2, "spent");
    push_kinds(L, pt->tried);
    lua_setfield(L, -2, "tried");
    lua_rawseti(L, -2, ++n);
  }
}

/* The event log as records: { t =, kind =, from =, to =, text = }. */
static void push_timeline(lua_State *L, const eu_buf *b) {
  static const char *const fields[] = { "t", "kind", "from", "to", "text" };
  const char *p = b->p ? b->p : "", *end = p + b->n;
  int n = 0;
  lua_newtable(L);
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    int f;
    if (!nl) nl = end;
    lua_createtable(L, 0, 5);
    for (f = 0; f < 5; f++) {
      const char *tab = f < 4 ? memchr(p, '\t', (size_t)(nl - p)) : NULL;
      const char *stop = tab ? tab : nl;
      if (f == 0) lua_pushinteger(L, strtoll(p, NULL, 10));
      else lua_pushlstring(L, p, (size_t)(stop - p));
      lua_setfield(L, -2, fields[f]);
      p = tab ? tab + 1 : stop;
    }
    lua_rawseti(L, -2, ++n);
    p = nl + 1;
  }
}

/* ---- one run ---------------------------------------------------------- */

/* Pushes the answers as the check function sees them. Mid-run (so_far) an
 * event without an answer is still in flight, not lost: it is left out. */
static void push_answers(lua_State *L, xctx *x, eu_world *w, const eu_drive_answer *answers, uint64_t events,
                         int so_far) {
  int i, n = 0;
  lua_createtable(L, x->drive.n, 0);
  for (i = 0; i < x->drive.n; i++) {
    int count = 0;
    if (!(events & ((uint64_t)1 << i))) continue;
    if (so_far && !answers[i].data) continue;
    lua_createtable(L, 0, 6);
    lua_pushstring(L, x->events[i].label);
    lua_setfield(L, -2, "event");
    lua_pushinteger(L, i + 1);
    lua_setfield(L, -2, "index");
    lua_pushinteger(L, answers[i].deliveries);
    lua_setfield(L, -2, "deliveries");
    if (answers[i].data &&
        eu_clone_decode(L, answers[i].data, answers[i].len, &count, NULL, 0) == EU_OK && count >= 1) {
      int base = lua_gettop(L) - count;  /* the answer's table; then ok, value... */
      int ok = lua_toboolean(L, base + 1);
      if (count >= 2) {
        lua_pushvalue(L, base + 2);
        lua_setfield(L, base, ok ? "value" : "error");
      }
      lua_settop(L, base);
      lua_pushboolean(L, ok);
      lua_setfield(L, base, "ok");
    } else {
      lua_pushboolean(L, 1);
      lua_setfield(L, -2, "lost");
    }
    if (answers[i].sock) {
      eu_push_ws_seen(L, w, answers[i].sock);
      lua_setfield(L, -2, "websocket");
    }
    lua_rawseti(L, -2, ++n);
  }
}

/* The sometimes probes a check just reached: a list of their indices (from
 * 1) at idx, or nil. */
static void note_reached(xctx *x, int idx) {
  lua_State *L = x->L;
  int i, n;
  if (!x->probing || !lua_istable(L, idx)) return;
  n = (int)luaL_len(L, idx);
  for (i = 1; i <= n; i++) {
    lua_Integer k;
    lua_geti(L, idx, i);
    k = lua_tointeger(L, -1) - 1;
    lua_pop(L, 1);
    if (k >= 0 && k < x->nprobes && !x->reached[k]) {
      x->reached[k] = 1;
      x->nreached++;
    }
  }
}

/* Whether a violation at idx is one the search looks for (shrinking looks
 * for one invariant only). */
static int counts_as_violation(xctx *x, int idx) {
  int v;
  if (!lua_istable(x->L, idx)) return 0;
  if (!x->target) return 1;
  lua_getfield(x->L, idx, "invariant");
  v = lua_isstring(x->L, -1) && strcmp(lua_tostring(x->L, -1), x->target) == 0;
  lua_pop(x->L, 1);
  return v;
}

typedef struct turn_args {
  xctx *x;
  eu_world *w;
  const char *object, *task;
} turn_args;

/* push_turn(args): the table the turn function gets, made once a run and
 * brought up to date: the world, the answers so far, the turn's object,
 * task and virtual time. Under lua_pcall, as push_run. */
static int push_turn(lua_State *L) {
  turn_args *a = lua_touserdata(L, 1);
  xctx *x = a->x;
  int i, answered = 0;
  lua_pop(L, 1);
  if (x->run_ref == LUA_NOREF) {
    lua_createtable(L, 0, 5);
    eu_lworld_push(L, a->w, 1);
    lua_setfield(L, -2, "world");
    x->run_answered = -1;
    lua_pushvalue(L, -1);
    x->run_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  } else {
    lua_rawgeti(L, LUA_REGISTRYINDEX, x->run_ref);
  }
  for (i = 0; i < x->drive.n; i++) answered += x->run_answers[i].data != NULL;
  if (answered != x->run_answered || x->websockets) {
    push_answers(L, x, a->w, x->run_answers, x->run_events, 1);
    lua_setfield(L, -2, "answers");
    x->run_answered = answered;
  }
  lua_pushstring(L, a->object);
  lua_setfield(L, -2, "object");
  lua_pushstring(L, a->task);
  lua_setfield(L, -2, "task");
  lua_pushinteger(L, eu_world_elapsed(a->w));
  lua_setfield(L, -2, "at");
  lua_pushboolean(L, x->probing);
  lua_setfield(L, -2, "probing");
  return 1;
}

/* The world's on_commit hook: the turn function on the state after a turn
 * that wrote. A violation or an error stops the run at this turn. */
static void check_turn(void *ud, eu_world *w, const char *object, const char *task) {
  xctx *x = ud;
  lua_State *L = x->L;
  int top = lua_gettop(L);
  turn_args a;
  if (eu_world_stopped(w) || x->broke_ref != LUA_NOREF || x->turn_err[0]) return;
  if (x->nalways == 0 && (!x->probing || x->nreached == x->nprobes)) return;
  if (x->covering) {
    x->turn_checks++;
    x->run_checks++;
  }
  /* What the properties read is read by this step (reduce.h): the objects
   * through w:exec, the answers so far here. */
  eu_world_touch(w, EU_RES_DRIVE, 0);
  a.x = x;
  a.w = w;
  a.object = object;
  a.task = task;
  lua_pushvalue(L, x->turn_idx);
  lua_pushcfunction(L, push_turn);
  lua_pushlightuserdata(L, &a);
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
    eu_err(x->turn_err, sizeof x->turn_err, EU_ENOMEM, "out of memory before the check: %s",
           lua_tostring(L, -1) ? lua_tostring(L, -1) : "?");
    lua_settop(L, top);
    eu_world_stop(w);
    return;
  }
  if (lua_pcall(L, 1, 2, 0) != LUA_OK) {
    eu_err(x->turn_err, sizeof x->turn_err, EU_ELUA, "%s",
           lua_tostring(L, -1) ? lua_tostring(L, -1) : "the check raised");
    lua_settop(L, top);
    eu_world_stop(w);
    return;
  }
  note_reached(x, -1);
  lua_pop(L, 1);
  if (counts_as_violation(x, -1)) {
    lua_getfield(L, -1, "invariant");
    eu_world_log(w, "%s  always %s fails after this turn: the run stops here", task,
                 lua_tostring(L, -1) ? lua_tostring(L, -1) : "?");
    lua_pop(L, 1);
    x->broke_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    eu_world_stop(w);
  }
  lua_settop(L, top);
}

/* After a run: what the turn function kept of it goes. */
static void end_turns(xctx *x) {
  if (x->run_ref != LUA_NOREF) {
    lua_rawgeti(x->L, LUA_REGISTRYINDEX, x->run_ref);
    lua_getfield(x->L, -1, "world");
    eu_lworld_release(x->L, -1);
    lua_pop(x->L, 2);
    luaL_unref(x->L, LUA_REGISTRYINDEX, x->run_ref);
    x->run_ref = LUA_NOREF;
  }
  if (x->broke_ref != LUA_NOREF) luaL_unref(x->L, LUA_REGISTRYINDEX, x->broke_ref);
  x->broke_ref = LUA_NOREF;
  x->turn_err[0] = '\0';
}

/* An always broke after a turn: the run's violation, kept as evaluate keeps one. */
static int broken(xctx *x) {
  lua_State *L = x->L;
  if (x->keep) {
    if (x->violation_ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, x->violation_ref);
    if (x->answers_ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, x->answers_ref);
    lua_rawgeti(L, LUA_REGISTRYINDEX, x->broke_ref);
    x->violation_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_rawgeti(L, LUA_REGISTRYINDEX, x->run_ref);
    lua_getfield(L, -1, "answers");
    x->answers_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_pop(L, 1);
  }
  return 1;
}

typedef struct run_args {
  xctx *x;
  eu_world *w;
  const eu_drive_answer *answers;
  uint64_t events;
  int settled;
  struct lazy_answers *lazy;
} run_args;

/* run.answers is made when the check first reads it: a check whose
 * properties read only tables (an HTTP drive's, most often) decodes no
 * answer. The run table holds this under lazy_key; a is cleared when the
 * check returns, since the answers it points at are the run's. */
typedef struct lazy_answers {
  const run_args *a;
} lazy_answers;

static const char lazy_key = 'a';

/* __index(run, key) of every run table. */
static int run_index(lua_State *L) {
  lazy_answers *z;
  if (lua_type(L, 2) != LUA_TSTRING || strcmp(lua_tostring(L, 2), "answers") != 0) return 0;
  lua_rawgetp(L, 1, &lazy_key);
  z = lua_touserdata(L, -1);
  if (!z) return 0;
  if (!z->a) return luaL_error(L, "run.answers read after the check of its run returned");
  push_answers(L, z->a->x, z->a->w, z->a->answers, z->a->events, 0);
  lua_pushliteral(L, "answers");
  lua_pushvalue(L, -2);
  lua_rawset(L, 1);
  return 1;
}

/* push_run(args): the run table check(run) gets. It is built under
 * lua_pcall: the search calls evaluate between C frames that own the world
 * and the answers, and a failed allocation raising past them would leak
 * them. (The world it holds is borrowed: a table left behind frees nothing.) */
static int push_run(lua_State *L) {
  run_args *a = lua_touserdata(L, 1);
  lua_pop(L, 1);
  lua_createtable(L, 0, 6);
  eu_lworld_push(L, a->w, 1);
  lua_setfield(L, -2, "world");
  a->lazy = lua_newuserdatauv(L, sizeof *a->lazy, 0);
  a->lazy->a = a;
  lua_rawsetp(L, -2, &lazy_key);
  if (luaL_newmetatable(L, "eutaxy.check.run")) {
    lua_pushcfunction(L, run_index);
    lua_setfield(L, -2, "__index");
  }
  lua_setmetatable(L, -2);
  lua_pushboolean(L, a->x->probing);
  lua_setfield(L, -2, "probing");
  if (eu_world_uncaught(a->w)) {
    lua_pushstring(L, eu_world_uncaught(a->w));
    lua_setfield(L, -2, "uncaught");
  }
  if (eu_world_undeclared(a->w)) {
    lua_pushstring(L, eu_world_undeclared(a->w));
    lua_setfield(L, -2, "undeclared");
  }
  lua_pushboolean(L, a->settled);
  lua_setfield(L, -2, "settled");
  lua_pushboolean(L, eu_world_capped(a->w));
  lua_setfield(L, -2, "capped");
  return 1;
}

/* get_answers(run): run.answers. */
static int get_answers(lua_State *L) {
  lua_getfield(L, 1, "answers");
  return 1;
}

/* Whether every decided property holds at the end of the run in w: 0
 * when one fails or the host cannot tell. Those over the same rows are
 * decided in one pass over them. */
static int decided_hold(xctx *x, eu_world *w) {
  char err[EU_ERRLEN];
  const eu_prop *ps[16];
  int i, j, n;
  for (i = 0; i < x->ndecided; i++) {
    decided *d = &x->decided[i];
    int ns = eu_world_binding(w, d->binding);
    eu_object *o;
    if (d->lead != i) continue;
    if (ns < 0 || (!d->hex[0] && eu_world_id_from_name(w, ns, d->name, d->namelen, d->hex) != EU_OK)) return 0;
    if (!(o = eu_world_object_named(w, ns, d->hex, d->name, d->namelen, err, sizeof err))) return 0;
    n = 0;
    for (j = i; j < x->ndecided; j++) {
      if (x->decided[j].lead != i) continue;
      ps[n++] = &x->decided[j].p;
      if (n == (int)(sizeof ps / sizeof ps[0])) {
        if (!eu_holds_all(w, o, d->sql, d->sqllen, ps, n)) return 0;
        n = 0;
      }
    }
    if (n > 0 && !eu_holds_all(w, o, d->sql, d->sqllen, ps, n)) return 0;
  }
  return 1;
}

/* Calls check(run); returns 1 violated, 0 held, <0 if check raised. A run
 * that settled, where nothing was uncaught or undeclared and every
 * property is one the host decides and holds, has held without the call
 * (the options' decided says when that is so); check raises no error there. */
static int evaluate(xctx *x, eu_world *w, const eu_drive_answer *answers, uint64_t events,
                    int settled, char *err, size_t errlen) {
  lua_State *L = x->L;
  int top = lua_gettop(L), v = 0;
  run_args a;
  if (x->ndecided && settled && !x->keep && !eu_world_uncaught(w) && !eu_world_undeclared(w) &&
      decided_hold(x, w))
    return 0;
  a.x = x;
  a.w = w;
  a.answers = answers;
  a.events = events;
  a.settled = settled;
  a.lazy = NULL;
  lua_pushcfunction(L, push_run);
  lua_pushlightuserdata(L, &a);
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
    eu_err(err, errlen, EU_ENOMEM, "out of memory before the check: %s",
           lua_tostring(L, -1) ? lua_tostring(L, -1) : "?");
    if (a.lazy) a.lazy->a = NULL;
    lua_settop(L, top);
    return EU_ENOMEM;
  }
  /* the run table stays at top + 1, to release its world after the call */
  lua_pushvalue(L, x->check_idx);
  lua_pushvalue(L, top + 1);
  if (lua_pcall(L, 1, 2, 0) != LUA_OK) {
    eu_err(err, errlen, EU_ELUA, "%s", lua_tostring(L, -1) ? lua_tostring(L, -1) : "the check raised");
    v = EU_ELUA;
  } else {
    note_reached(x, -1);
    lua_pop(L, 1);
    v = counts_as_violation(x, -1);
  }
  if (v >= 0 && x->keep) {
    /* the answers, made now if the check did not read them (under
     * lua_pcall, as push_run: making them allocates) */
    lua_pushcfunction(L, get_answers);
    lua_pushvalue(L, top + 1);
    if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
      v = eu_err(err, errlen, EU_ENOMEM, "out of memory after the check: %s",
                 lua_tostring(L, -1) ? lua_tostring(L, -1) : "?");
    } else {
      if (x->violation_ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, x->violation_ref);
      if (x->answers_ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, x->answers_ref);
      x->answers_ref = luaL_ref(L, LUA_REGISTRYINDEX);
      x->violation_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    }
  }
  a.lazy->a = NULL;
  lua_getfield(L, top + 1, "world");
  eu_lworld_release(L, -1);
  lua_settop(L, top);
  return v;
}

/* ---- the restorer ------------------------------------------------------ */

/* A store of its own for a run outside the kept world (the fresh run
 * --check-determinism compares a rewound one with): the setup's snapshot,
 * closed when the run ends. */
static eu_store *provide_private(void *ud, int ns, const char *hex, char *err, size_t errlen) {
  xctx *x = ud;
  eu_store *s, **a;
  if (x->nprivate == x->capprivate) {
    int cap = x->capprivate ? x->capprivate * 2 : 8;
    if (!(a = realloc(x->private, (size_t)cap * sizeof *a))) {
      eu_err(err, errlen, EU_ENOMEM, "out of memory");
      return NULL;
    }
    x->private = a;
    x->capprivate = cap;
  }
  if (!(s = open_setup(x, ns, hex, err, errlen))) return NULL;
  x->private[x->nprivate++] = s;
  return s;
}

static void drop_world(xctx *x) {
  int i;
  if (!x->rw) return;
  eu_world_free(x->rw);
  x->rw = NULL;
  eu_drive_state_free(&x->rst);
  if (x->ranswers)
    for (i = 0; i < x->drive.n; i++) free(x->ranswers[i].data);
  free(x->ranswers);
  x->ranswers = NULL;
  x->nrcks = 0;
  x->rbroken = 0;
  rewind_pool(x);
}

/* The drive's hook before each step: a checkpoint of the kept world. */
static int keep_step(xctx *x) {
  eu_chooser *ch = x->rch;
  rck *k;
  if (x->rskip) {
    x->rskip = 0;  /* the checkpoint the run started at */
    return EU_OK;
  }
  if (x->rbroken) return EU_OK;
  /* A step with no decision in it is never where a run starts: the next
   * checkpoint has the same decisions before it. And past the budget the
   * deeper steps are run again rather than kept. */
  if ((!eu_world_decisions_ahead(x->rw) && !eu_drive_waiting(&x->rdrive, &x->rst)) ||
      eu_world_checkpoint_bytes(x->rw) > EU_CHECKPOINT_BUDGET)
    return EU_OK;
  /* A deep run keeps every step's checkpoint up to EU_CHECKPOINTS_DENSE,
   * then one in 2, 4, 8, ... steps, doubling every EU_CHECKPOINTS_DENSE / 2
   * checkpoints: a run that starts there runs a few steps again, and a
   * deep search keeps memory and savepoints in proportion. */
  x->rstep++;
  if (x->nrcks >= EU_CHECKPOINTS_DENSE) {
    int shift = 1 + (x->nrcks - EU_CHECKPOINTS_DENSE) / (EU_CHECKPOINTS_DENSE / 2);
    if (shift > 20) shift = 20;
    if (x->rstep % (1L << shift) != 0) return EU_OK;
  }
  if (x->nrcks == x->caprcks) {
    int cap = x->caprcks ? x->caprcks * 2 : 32, i;
    rck *a = realloc(x->rcks, (size_t)cap * sizeof *a);
    if (!a) {
      x->rbroken = 1;
      return EU_OK;
    }
    for (i = x->caprcks; i < cap; i++) {
      memset(&a[i], 0, sizeof a[i]);
      eu_buf_init(&a[i].drive);
    }
    x->rcks = a;
    x->caprcks = cap;
  }
  k = &x->rcks[x->nrcks];
  k->pathlen = ch->path.len;
  k->struck = ch->struck;
  k->fault_set = ch->fault_set;
  k->nnotes = x->nnotes;
  k->checks = x->run_checks;
  k->rstep = x->rstep;
  k->has_rpos = ch->red != NULL;
  /* before the world's first step a run has logged nothing, logging or not */
  k->log_len = ch->log ? ch->log->n : x->rfirst ? 0 : (size_t)-1;
  eu_buf_reset(&k->drive);
  if (eu_world_checkpoint(x->rw) != EU_OK || (ch->red && eu_reducer_mark(ch->red, &k->rpos) != EU_OK) ||
      eu_drive_save(&x->rdrive, &x->rst, &k->drive) != EU_OK) {
    x->rbroken = 1;
    return EU_OK;
  }
  x->nrcks++;
  x->rsteps++;
  return EU_OK;
}

static int at_step(void *ud) {
  xctx *x = ud;
  int rc = keep_step(x);
  x->rfirst = 0;
  return rc;
}

/* The checkpoint a run with this chooser starts at: the deepest one whose
 * decisions so far its prefix repeats, or the first (before any step)
 * when the last run's were made under another cap, reducer or shard, or
 * with its steps reported where this one's are not, or the other way. */
static int pick_checkpoint(xctx *x, const eu_chooser *ch, int cap) {
  int common = 0, j;
  const eu_choices *old = &x->rtrail.path;
  if (cap != x->rcap || ch->labels_on != x->rlabels || ch->own_k != x->rown_k || ch->own_n != x->rown_n ||
      eu_reducer_serial(ch->red) != x->rred || eu_chooser_steps(ch) != x->rsteps_on)
    return 0;
  while (common < ch->prefix.len && common < old->len && ch->prefix.c[common] == old->c[common]) common++;
  for (j = x->nrcks - 1; j > 0 && x->rcks[j].pathlen > common; j--) {}
  return j;
}

/* Whether the pool's databases hold so much journal that the kept world
 * is better built again. A savepoint rolled back to stays open, and SQLite
 * takes back the journal written under it only when it is released or the
 * transaction ends: a long search under one checkpoint piles it up, each
 * rewind plays it back, and an object's memory limit counts it. Building
 * the world again ends the pool's transactions. SQLite counts a
 * database's statements by walking them, so the journals are looked at
 * after the first run and then every EU_JOURNAL_EVERY rewinds. */
static int journal_piled(xctx *x) {
  size_t n = 0;
  int i;
  if (x->rjournal != (size_t)-1 && x->rewound % EU_JOURNAL_EVERY != 0) return 0;
  for (i = 0; i < x->npool; i++) n += eu_store_journal_bytes(x->pool[i].store);
  if (x->rjournal == (size_t)-1) {
    x->rjournal = n;
    return 0;
  }
  return n > EU_JOURNAL_SLACK && (n - EU_JOURNAL_SLACK) / 4 > x->rjournal;
}

/* The kept world, at the checkpoint the run starts from, or a new one. */
static int start_kept(xctx *x, eu_chooser *ch, const eu_world_opts *o, uint64_t events, int cap,
                      int trace, char *err, size_t errlen) {
  int j = -1, rc;
  if (x->rw && (x->rbroken || x->nrcks == 0 || x->rw_events != events || x->rw_trace != trace || journal_piled(x)))
    drop_world(x);
  if (x->rw) {
    j = pick_checkpoint(x, ch, cap);
    if (eu_world_rewind(x->rw, j) != EU_OK || eu_drive_load(&x->rdrive, &x->rst, x->rcks[j].drive.p) != EU_OK) {
      drop_world(x);
      j = -1;
    }
  }
  if (j < 0) {
    eu_world_opts ko = *o;
    ko.checkpoints = 1;
    x->rdrive = x->drive;
    x->rdrive.mask = events;
    x->rdrive.answers_shared = x->turn_idx != 0;
    if ((rc = eu_world_new(&x->rw, &ko, err, errlen)) != EU_OK) {
      x->rw = NULL;
      rewind_pool(x);
      return rc;
    }
    if (!(x->ranswers = calloc((size_t)(x->drive.n ? x->drive.n : 1), sizeof *x->ranswers)) ||
        (rc = eu_drive_begin(x->rw, &x->rdrive, &x->rst, x->ranswers, err, errlen)) != EU_OK) {
      drop_world(x);
      return eu_err(err, errlen, EU_ENOMEM, "out of memory");
    }
    x->rw_events = events;
    x->rw_trace = trace;
    x->run_checks = 0;
    x->rstep = 0;
    x->nrcks = 0;
    x->rskip = 0;
    x->rfirst = 1;
    x->rjournal = (size_t)-1;
    x->nnotes = 0;
    x->rebuilt++;
    eu_chooser_begin(ch, x->rw);
  } else {
    const rck *k = &x->rcks[j];
    eu_world_retarget(x->rw, o);
    eu_chooser_begin(ch, x->rw);
    if (eu_chooser_resume(ch, &x->rtrail, k->pathlen, k->struck, k->fault_set, k->log_len) != EU_OK ||
        (j > 0 && ch->red && k->has_rpos && eu_reducer_rewind(ch->red, &k->rpos) != EU_OK)) {
      drop_world(x);
      return start_kept(x, ch, o, events, cap, trace, err, errlen);
    }
    x->nnotes = k->nnotes;
    /* the checks before the checkpoint, as a run built for it makes them:
     * none once only sometimes probes are looked at and all are reached */
    x->run_checks = k->checks;
    x->rstep = k->rstep;
    if (x->covering && (x->nalways > 0 || (x->probing && x->nreached < x->nprobes))) x->turn_checks += k->checks;
    x->nrcks = j + 1;
    x->rskip = 1;
    x->rewound++;
  }
  x->rcap = cap;
  x->rlabels = ch->labels_on;
  x->rown_k = ch->own_k;
  x->rown_n = ch->own_n;
  x->rred = eu_reducer_serial(ch->red);
  x->rsteps_on = eu_chooser_steps(ch);
  return EU_OK;
}

/* One run: in the kept world (kept), or in a world of its own. */
/* run_world_body's answer for a watched run stopped to be run again with
 * every instruction counted (sandbox.h). */
#define RUN_RECOUNT (-100)

static int run_world(xctx *x, eu_chooser *ch, uint64_t events, int cap, int *faults, int trace,
                     int kept, char *err, size_t errlen);

/* A world of its own, its run over. */
static void free_run_world(xctx *x, eu_world *w, const eu_drive *d, eu_drive_answer *answers) {
  int i;
  for (i = 0; i < d->n; i++) free(answers[i].data);
  free(answers);
  eu_world_free(w);
  if (x->restore) {
    for (i = 0; i < x->nprivate; i++) eu_store_close(x->private[i]);
    x->nprivate = 0;
  } else {
    rewind_pool(x);
  }
}

static int run_world_body(xctx *x, eu_chooser *ch, uint64_t events, int cap, int *faults, int trace,
                          int kept, char *err, size_t errlen) {
  eu_world_opts o = x->wo;
  eu_world *w = NULL;
  eu_drive d = x->drive;
  eu_drive_answer *answers = NULL;
  uint64_t ooms, refusals;
  long checks = x->turn_checks;
  int rc, settled = 1;
  o.choose = eu_chooser_choose;
  o.choose_ud = ch;
  o.max_faults = cap;
  o.no_trace = !trace;
  /* A world built for one run collects as the kept world does (Lua's
   * default pace): when garbage goes is what a weak table shows, and how
   * much of it the memory limit counts, so a schedule must meet the same
   * collections in either. */
  o.gc_pause = 200;
  o.store_provider = kept || !x->restore ? provide_store : provide_private;
  o.store_ud = x;
  o.fault_point = note_point;
  o.fault_point_ud = x;
  if (x->turn_idx) {
    o.on_commit = check_turn;
    o.on_commit_ud = x;
  }
  if (eu_chooser_steps(ch)) {
    o.on_step = eu_chooser_step;
    o.on_step_end = eu_chooser_step_end;
    o.step_ud = ch;
  }
  x->run_cap = cap;
  forget_run(x);
  ooms = eu_faultsim_ooms();
  refusals = eu_sqlmem_refusals() + eu_isolate_refusals();
  if (kept) {
    if ((rc = start_kept(x, ch, &o, events, cap, trace, err, errlen)) != EU_OK) return rc;
    w = x->rw;
    d = x->rdrive;
    answers = x->ranswers;
    x->run_answers = answers;
    x->run_events = events;
    x->rch = ch;
    rc = eu_drive_go(w, &d, &x->rst, &settled, at_step, x, err, errlen);
    x->rch = NULL;
  } else {
    x->nnotes = 0;
    x->run_checks = 0;
    if ((rc = eu_world_new(&w, &o, err, errlen)) != EU_OK) return rc;
    x->rebuilt++;
    answers = calloc((size_t)(d.n ? d.n : 1), sizeof *answers);
    if (!answers) {
      eu_world_free(w);
      return eu_err(err, errlen, EU_ENOMEM, "out of memory");
    }
    eu_chooser_begin(ch, w);
    d.mask = events;
    d.answers_shared = x->turn_idx != 0;
    x->run_answers = answers;
    x->run_events = events;
    rc = eu_drive_run(w, &d, answers, &settled, err, errlen);
  }
  eu_world_end_step(w);
  if (x->watching) {
    x->watching = 0;
    if (eu_sandbox_watch_end()) {
      /* Nothing of this run counts: not its checks, notes or answers. */
      end_turns(x);
      if (kept) drop_world(x);
      else free_run_world(x, w, &d, answers);
      return RUN_RECOUNT;
    }
  }
  if (rc >= 0 && x->turn_err[0]) rc = eu_err(err, errlen, EU_ELUA, "%s", x->turn_err);
  else if (rc >= 0 && x->broke_ref != LUA_NOREF) rc = broken(x);
  else if (rc >= 0 && !eu_world_stopped(w)) rc = evaluate(x, w, answers, events, settled, err, errlen);
  end_turns(x);
  /* The machine failed the run, not the scenario: no verdict can rest on it. */
  if (eu_faultsim_ooms() != ooms)
    rc = eu_err(err, errlen, EU_ENOMEM, "out of memory: the host could not allocate while it "
                "ran a schedule, so the run shows nothing about the scenario");
  *faults = eu_world_faults_used(w);
  if (trace) {
    eu_buf_reset(&x->trace);
    eu_buf_reset(&x->faults);
    eu_buf_reset(&x->timeline);
    eu_buf_put(&x->timeline, eu_world_events(w)->p, eu_world_events(w)->n);
    eu_buf_put(&x->trace, eu_world_trace(w)->p, eu_world_trace(w)->n);
    eu_buf_put(&x->faults, eu_world_fault_log(w)->p, eu_world_fault_log(w)->n);
  }
  forget_run(x);
  apply_notes(x, *faults);
  if (kept) {
    /* An arena ran out of room (its classes keep what was freed for
     * blocks of the same size): the host's shortfall, not the scenario's;
     * every later run is built for itself too. Or an object ran into a
     * memory limit in the kept world, whose databases hold more than a
     * world built for the schedule would (the journal of every
     * checkpoint's savepoint, statements earlier runs prepared), which the
     * limit counts: whether a built world runs into it is what counts, and
     * the kept world is built again for the next run, its checkpoints past
     * that point made in a state no built world reaches. Either way the
     * schedule runs again in a world built for it, and only that run's
     * checks count. */
    int short_arena = eu_faultsim_ooms() != ooms && !eu_faultsim_active;
    if (short_arena || eu_sqlmem_refusals() + eu_isolate_refusals() != refusals) {
      drop_world(x);
      if (short_arena) {
        x->restore = 0;
        x->restore_given_up = 1;
      }
      x->turn_checks = checks;
      return run_world(x, ch, events, cap, faults, trace, 0, err, errlen);
    }
    if (eu_trail_keep(&x->rtrail, ch) != EU_OK) x->rbroken = 1;
    if (rc < 0 || x->rbroken) drop_world(x);
    return rc;
  }
  free_run_world(x, w, &d, answers);
  return rc;
}

/* One run (run_world_body), watched while x->cpu_watch; a run that asked
 * to be counted runs again counted, and so does every later one. */
static int run_world(xctx *x, eu_chooser *ch, uint64_t events, int cap, int *faults, int trace,
                     int kept, char *err, size_t errlen) {
  long checks = x->turn_checks;
  int rc;
  x->watching = x->cpu_watch && eu_sandbox_watch_begin();
  rc = run_world_body(x, ch, events, cap, faults, trace, kept, err, errlen);
  if (x->watching) {
    /* it ended before its drive did (a world that could not be built):
     * a turn of it stopped by the watch may be why */
    x->watching = 0;
    if (eu_sandbox_watch_end()) {
      if (kept) drop_world(x);
      rc = RUN_RECOUNT;
    }
  }
  if (rc != RUN_RECOUNT) return rc;
  x->recounted++;
  x->cpu_watch = 0;
  x->turn_checks = checks;
  return run_world(x, ch, events, cap, faults, trace, kept, err, errlen);
}

/* The first line where two traces differ, for the report. */
static void first_difference(const eu_buf *a, const eu_buf *b, char *out, size_t n) {
  size_t i = 0, line = 0, start = 0, ea, eb;
  const char *pa = a->p ? a->p : "", *pb = b->p ? b->p : "";
  while (i < a->n && i < b->n && pa[i] == pb[i]) {
    if (pa[i] == '\n') {
      line++;
      start = i + 1;
    }
    i++;
  }
  for (ea = start; ea < a->n && pa[ea] != '\n'; ea++) {}
  for (eb = start; eb < b->n && pb[eb] != '\n'; eb++) {}
  snprintf(out, n, "line %zu of the trace:\n  first run:  %.*s\n  second run: %.*s", line + 1,
           (int)(ea - start > 300 ? 300 : ea - start), pa + start,
           (int)(eb - start > 300 ? 300 : eb - start), pb + start);
}

static int run_once(void *ud, eu_chooser *ch, uint64_t events, int cap, int *faults, char *err,
                    size_t errlen) {
  xctx *x = ud;
  eu_chooser again;
  eu_buf trace1, faults1;
  int v1, v2, f2 = 0;
  if (!x->determinism) return run_world(x, ch, events, cap, faults, x->keep, x->restore, err, errlen);
  /* Once with a trace (in the kept world, rewound, when there is one), then
   * the same decisions again in a world built for it: any difference is
   * the host's bug. */
  v1 = run_world(x, ch, events, cap, faults, 1, x->restore, err, errlen);
  if (v1 < 0 || ch->blocked) return v1;
  trace1 = x->trace;
  faults1 = x->faults;
  eu_buf_init(&x->trace);
  eu_buf_init(&x->faults);
  eu_chooser_init(&again, EU_MODE_REPLAY, 0);
  again.prefix = ch->path;
  v2 = run_world(x, &again, events, cap, &f2, 1, 0, err, errlen);
  again.prefix.c = again.prefix.n = again.prefix.k = NULL;  /* borrowed from ch */
  again.prefix.len = again.prefix.cap = 0;
  if (v2 >= 0 && (v1 != v2 || f2 != *faults || again.mismatch || again.path.len != ch->path.len ||
                  trace1.n != x->trace.n || memcmp(trace1.p, x->trace.p, trace1.n) != 0 ||
                  faults1.n != x->faults.n || memcmp(faults1.p, x->faults.p, faults1.n) != 0)) {
    char diff[1024], schedule[512];
    first_difference(&trace1, &x->trace, diff, sizeof diff);
    eu_schedule_format(schedule, sizeof schedule, cap, events, &ch->path);
    v2 = eu_err(err, errlen, EU_ENONDET, "schedule %s ran twice and differed at %s", schedule, diff);
  }
  eu_chooser_free(&again);
  eu_buf_free(&trace1);
  eu_buf_free(&faults1);
  return v2 < 0 ? v2 : v1;
}

/* ---- core.explore ----------------------------------------------------- */

static const char *verdict_name(int v) {
  switch (v) {
  case EU_VIOLATED: return "VIOLATED";
  case EU_INCONCLUSIVE: return "INCONCLUSIVE";
  default: return "BOUNDED";
  }
}

static void push_events(lua_State *L, uint64_t events) {
  int i, n = 0;
  lua_newtable(L);
  for (i = 0; i < EU_MAX_EVENTS; i++)
    if (events & ((uint64_t)1 << i)) {
      lua_pushinteger(L, i + 1);
      lua_rawseti(L, -2, ++n);
    }
}

static void set_count(lua_State *L, const char *field, long n) {
  lua_pushinteger(L, n);
  lua_setfield(L, -2, field);
}

static int l_explore(lua_State *L) {
  xctx *x;
  eu_search s;
  const char *mode;
  char err[EU_ERRLEN];
  int64_t t0 = eu_monotonic_ms(), budget;
  long shrink_runs = 0;
  int rc, jobs, i, n, held;
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  lua_getfield(L, 1, "check");
  luaL_argcheck(L, lua_isfunction(L, 2), 1, "check must be a function");
  /* A search frees and takes back the same large blocks all the time
   * (images of isolates, worlds): kept in the heap rather than handed back
   * to the system, they are not faulted in page by page again. */
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  x = lua_newuserdatauv(L, sizeof *x, 0);  /* 3 */
  memset(x, 0, sizeof *x);
  x->violation_ref = x->answers_ref = x->run_ref = x->broke_ref = LUA_NOREF;
  x->L = L;
  x->check_idx = 2;
  lua_newtable(L);
  lua_pushcfunction(L, ctx_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, 3);
  lua_getfield(L, 1, "turn");  /* 4 */
  x->turn_idx = lua_isfunction(L, 4) ? 4 : 0;
  x->nalways = (int)opt_int(L, 1, "always", 0);
  x->nprobes = (int)opt_int(L, 1, "probes", 0);
  if (x->nprobes < 0 || x->nprobes > 100000) luaL_error(L, "core.explore: probes must be a count");
  if (!(x->reached = calloc((size_t)(x->nprobes ? x->nprobes : 1), 1))) luaL_error(L, "out of memory");
  read_world(L, x);
  read_events(L, x);
  read_decided(L, x);
  x->keep = opt_bool(L, 1, "trace");
  x->determinism = opt_bool(L, 1, "checkDeterminism");
  x->target = opt_str(L, 1, "target");
  /* A host fault simulation fails allocations by count: a rewound run
   * allocates less than a built one, so it builds every run. */
  lua_getfield(L, 1, "restore");
  x->restore = (lua_isnil(L, -1) || lua_toboolean(L, -1)) && !eu_faultsim_active;
  lua_pop(L, 1);
  {
    char werr[EU_ERRLEN];
    if (eu_sandbox_watch_config(werr, sizeof werr) != EU_OK) luaL_error(L, "%s", werr);
  }
  x->cpu_watch = 1;
  /* the kept worlds build their isolates from the setup world's boot
   * images, in its arenas */
  if (x->restore) take_spares(L, x);
  build_snapshots(L, x);

  eu_search_init(&s);
  mode = opt_str(L, 1, "mode");
  s.mode = !mode ? EU_MODE_DFS : strcmp(mode, "random") == 0 ? EU_MODE_RANDOM
         : strcmp(mode, "replay") == 0 ? EU_MODE_REPLAY : EU_MODE_DFS;
  s.events = x->drive.n >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << x->drive.n) - 1);
  lua_getfield(L, 1, "eventMask");
  if (lua_istable(L, -1)) {
    uint64_t m = 0;
    for (i = 1; i <= (int)luaL_len(L, -1); i++) {
      lua_geti(L, -1, i);
      m |= (uint64_t)1 << ((lua_tointeger(L, -1) - 1) & 63);
      lua_pop(L, 1);
    }
    s.events &= m;
  }
  lua_pop(L, 1);
  s.max_faults = (int)opt_int(L, 1, "maxFaults", 1);
  s.min_faults = (int)opt_int(L, 1, "minFaults", 0);
  budget = opt_int(L, 1, "budgetMs", 0);
  s.deadline_ms = budget > 0 ? t0 + budget : 0;
  s.random_runs = (long)opt_int(L, 1, "runs", 1000);
  s.random_seed = (uint64_t)opt_int(L, 1, "randomSeed", 1);
  s.shard_k = (int)opt_int(L, 1, "shardK", 0);
  s.shard_n = (int)opt_int(L, 1, "shardN", 1);
  s.replay = opt_str(L, 1, "replay");
  lua_getfield(L, 1, "reduction");
  s.reduce = s.mode == EU_MODE_DFS && (lua_isnil(L, -1) || lua_toboolean(L, -1));
  lua_pop(L, 1);
  s.sweep = s.mode == EU_MODE_DFS;
  s.flat = s.mode == EU_MODE_DFS && !opt_bool(L, 1, "byFaultCount");
  /* Turn checks read what earlier runs reached (the sometimes probes): a
   * run is then not a function of its decisions alone, nor played back. */
  s.reuse = x->restore && !x->turn_idx;
  if (s.mode == EU_MODE_REPLAY && !s.replay) return luaL_error(L, "core.explore: replay needs a schedule");
  jobs = (int)opt_int(L, 1, "jobs", 1);
  s.on_counted = keep_run;
  s.mark = search_mark;
  s.back = search_back;
  s.export_notes = export_points;
  s.merge_notes = merge_points;
  /* the live line is for a person at a terminal, never for a pipe or a file */
  s.progress = s.mode != EU_MODE_REPLAY && opt_bool(L, 1, "progress") && isatty(2);
  x->covering = 1;
  x->probing = s.mode != EU_MODE_REPLAY;

  /* -j's workers are forked with the lines counted so far (building the
   * first world counts some): each starts from none and its notes carry
   * what it counted, added to the counts held here meanwhile */
  held = jobs > 1 && s.mode != EU_MODE_REPLAY && eu_linecov_on;
  if (held && eu_linecov_hold() != EU_OK) {
    eu_linecov_release();
    return luaL_error(L, "out of memory counting coverage");
  }
  x->search = &s;
  rc = eu_search_parallel(&s, jobs, run_once, x, err, sizeof err);
  if (held) eu_linecov_release();
  eu_search_progress_end(&s);
  x->covering = x->probing = 0;
  if (rc == EU_OK && s.verdict == EU_VIOLATED && opt_bool(L, 1, "shrink"))
    rc = eu_search_shrink(&s, run_once, x, &shrink_runs, err, sizeof err);
  x->search = NULL;
  drop_world(x);
  leave_spares(x);  /* now, not when the collector comes to x */

  if (rc != EU_OK) {
    lua_pushnil(L);
    lua_pushstring(L, err);
    lua_pushstring(L, rc == EU_ENONDET ? "nondeterministic" : "error");
    return 3;
  }

  lua_createtable(L, 0, 16);
  lua_pushstring(L, verdict_name(s.verdict));
  lua_setfield(L, -2, "verdict");
  lua_pushinteger(L, s.runs);
  lua_setfield(L, -2, "runs");
  lua_pushinteger(L, shrink_runs);
  lua_setfield(L, -2, "shrinkRuns");
  lua_createtable(L, 16, 0);
  for (i = 0; i < 16; i++) {
    lua_pushinteger(L, s.counted[i]);
    lua_rawseti(L, -2, i + 1);  /* [1] is 0 faults */
  }
  lua_setfield(L, -2, "counted");
  lua_pushinteger(L, eu_monotonic_ms() - t0);
  lua_setfield(L, -2, "elapsedMs");
  lua_pushinteger(L, s.faults_tried);
  lua_setfield(L, -2, "faultsTried");
  push_coverage(L, x);
  lua_setfield(L, -2, "coverage");
  lua_newtable(L);
  for (i = 1; i < EU_FAULT_NKINDS; i++)
    if (x->by_kind[i]) {
      lua_pushinteger(L, x->by_kind[i]);
      lua_setfield(L, -2, eu_fault_name(i));
    }
  lua_setfield(L, -2, "faultsByKind");
  lua_createtable(L, x->nreached, 0);
  for (i = 0, n = 0; i < x->nprobes; i++)
    if (x->reached[i]) {
      lua_pushinteger(L, i + 1);
      lua_rawseti(L, -2, ++n);
    }
  lua_setfield(L, -2, "reached");
  lua_pushinteger(L, x->turn_checks);
  lua_setfield(L, -2, "turnChecks");
  lua_pushboolean(L, s.reduce);
  lua_setfield(L, -2, "reduction");
  set_count(L, "blocked", s.blocked);
  set_count(L, "races", s.races);
  set_count(L, "sweepRuns", s.swept);
  set_count(L, "splitRuns", s.split_runs);
  lua_pushboolean(L, x->restore);
  lua_setfield(L, -2, "restore");
  set_count(L, "worldsBuilt", x->rebuilt);
  set_count(L, "runsRewound", x->rewound);
  set_count(L, "runsReused", s.reused);
  set_count(L, "runsCountedAgain", x->recounted);
  if (s.verdict == EU_VIOLATED || s.mode == EU_MODE_REPLAY) {
    lua_pushstring(L, s.schedule);
    lua_setfield(L, -2, "schedule");
    lua_pushinteger(L, s.faults);
    lua_setfield(L, -2, "faults");
    push_events(L, s.events);
    lua_setfield(L, -2, "events");
  }
  if (x->keep) {
    lua_pushlstring(L, x->trace.p ? x->trace.p : "", x->trace.n);
    lua_setfield(L, -2, "trace");
    lua_pushlstring(L, x->faults.p ? x->faults.p : "", x->faults.n);
    lua_setfield(L, -2, "faultLog");
    push_timeline(L, &x->timeline);
    lua_setfield(L, -2, "timeline");
    lua_rawgeti(L, LUA_REGISTRYINDEX, x->violation_ref);
    lua_setfield(L, -2, "violation");
    lua_rawgeti(L, LUA_REGISTRYINDEX, x->answers_ref);
    lua_setfield(L, -2, "answers");
  }
  return 1;
}

int eu_open_check(lua_State *L) {
  lua_pushcfunction(L, l_explore);
  lua_setfield(L, -2, "explore");
  return 0;
}
