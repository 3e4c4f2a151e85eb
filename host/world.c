/*
 * world.c: objects, tasks, turns and the dispatch loop.
 *
 * A task is one invocation: the coroutine that runs fetch, an RPC method, an
 * alarm handler, the worker's scheduled() for a cron, or a function handed
 * to ctx.waitUntil once its invocation has answered, inside an isolate. It
 * runs a *turn* at a time: from its start or a wake-up to its next yield
 * point or its end. A turn's writes are one transaction, committed when the
 * turn ends at a yield point or a return and rolled back when it raises.
 * Only one turn runs at a time in a world, which is how the input gate
 * holds: storage calls never yield, so no other invocation can see a turn
 * half done.
 *
 * Tasks and objects are named by integer ids in events, never by pointers,
 * so an event for a task that an object reset has killed is simply dropped
 * when it comes due.
 *
 * This file must not know what Lua code runs: the isolate side (runtime.lua)
 * is reached through one function, dispatch(kind, ...), per isolate.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lualib.h>

#include "arena.h"
#include "clone.h"
#include "cron.h"
#include "eutaxy.h"
#include "fault.h"
#include "heapprint.h"
#include "isolate.h"
#include "prng.h"
#include "sandbox.h"
#include "sched.h"
#include "store.h"
#include "world.h"

enum { EU_EV_START = 1, EU_EV_RESUME, EU_EV_ALARM, EU_EV_CRASH, EU_EV_ARRIVE, EU_EV_CRON, EU_EV_GATE,
       EU_EV_WS_IN, EU_EV_WS_DUE };
enum { EU_TASK_FETCH = 1, EU_TASK_RPC, EU_TASK_ALARM, EU_TASK_SCHEDULED, EU_TASK_WAIT_UNTIL, EU_TASK_BLOCK,
       EU_TASK_BRANCH, EU_TASK_WS, EU_TASK_VISIT };

/* How long ctx.blockConcurrencyWhile may keep an object's input gate shut:
 * past it, as on Cloudflare, the object is reset. */
#define EU_GATE_TIMEOUT_MS 30000

enum { EU_BREAK_NONE = 0, EU_BREAK_GATE, EU_BREAK_ABORT };
enum { EU_WAIT_NONE = 0, EU_WAIT_CALL, EU_WAIT_SLEEP, EU_WAIT_ALL, EU_WAIT_WOKEN, EU_WAIT_OUTBOUND, EU_WAIT_HOST };

#define EU_LABEL 128
#define EU_FORMAT_MAX 160   /* bytes of a value shown in the trace */

/* What an object was at a checkpoint since which it has been touched. */
typedef struct ck_img {
  int depth;          /* the checkpoint */
  int had;            /* it had an isolate then: img holds its arena */
  void *img;
  size_t len, cap;
} ck_img;

typedef struct ck_mark {
  int depth;          /* a savepoint of its store was made at this checkpoint */
} ck_mark;

#define KEPT_HEAP 1
#define KEPT_STORE 2

struct eu_object {
  int index;          /* position in w->objects; events name objects by it */
  int ns;             /* binding index; -1 for the worker */
  char hex[65];
  char *name;         /* NULL for an id made by newUniqueId; bytes, NUL-terminated */
  size_t namelen;     /* its length: a name may hold NUL bytes */
  char tag[96];       /* how the trace names it: DO:POOL(pool) */
  eu_store *store;    /* opened on first use, kept across resets */
  int store_lent;     /* from the world's store provider: not ours to close */
  int opening;        /* the host opens its store (store_opener): its events are held */
  eu_isolate *iso;    /* NULL until constructed, and again after a reset */
  int dispatch_ref;   /* runtime dispatch function in iso */
  int wire_error_ref; /* runtime.wire_error in iso */
  int64_t alarm_gen;  /* bumped whenever the alarm is rescheduled */
  int alarm_running;
  int alarm_firings;  /* this run: for alarm_caps and fault labels */
  int alarm_redeliveries;
  int64_t last_active;  /* virtual ms of its last turn, for a host that evicts */
  int resident;         /* has an isolate or an open store: counted in nresident */
  uint64_t res;         /* its resource for reduction: eu_fp_object, or EU_RES_WORKER */
  int asked;            /* alarms run on request (eu_world_run_alarm), for their identity */
  eu_world *w;
  /* checkpoints (eu_world_checkpoint): the arena its isolate lives in, and
   * its images and store savepoints, oldest first; images past nimgs keep
   * their buffers for the next */
  eu_arena *arena;
  unsigned ck_seen;     /* the checkpoint serial its heap was last saved at */
  unsigned ck_marked;   /* and its store */
  int ck_kept;          /* KEPT_*: untouched since a rewind kept its last image or mark */
  ck_img *imgs;
  int nimgs, capimgs;
  ck_mark *marks;
  int nmarks, capmarks;
  /* its arena once the runtime was loaded, before anything of the object:
   * the next build of its isolate starts there */
  void *boot_img;
  size_t boot_len;
  int boot_wire_ref;
  /* berths (eu_world_opts.berths): the one its isolate lives in, or -1;
   * packed, its heap as a delta from the berth's base while another
   * object's is awake there (NULL while its own is), with what its
   * isolate's struct said of its memory, for the store's limits */
  int berth;
  unsigned char *packed;
  size_t packed_len, packed_mem, packed_limit;
  /* The input gate (ctx.blockConcurrencyWhile): the task it is shut for
   * (0 when open), how deep its calls nest, the generation its time-out
   * names; init asked for functions to run before anything else. breaking:
   * the object is reset once the turn running ends (EU_BREAK_*), and
   * break_error says why, to the calls it held or (abort) every caller. */
  int64_t gate;
  int gate_depth;
  int64_t gate_gen;
  int init_block;
  int breaking;
  char break_error[192];
  /* setWebSocketAutoResponse: strings the world keeps (w->kept), so that a
   * rewind may put back any of them; NULL for none */
  const char *auto_req, *auto_resp;
  size_t auto_req_len, auto_resp_len;
  /* its sockets, a chain of ids in the order accepted (eu_sock.next); the
   * closed ones leave it when it is next walked (ws_prune) */
  int64_t ws_head, ws_tail;
};

/* A WebSocket an object accepted (world.h). Its buffers hold records
 * (eu_ws_record_put): inbox, what the client sent that the object has not
 * been handed yet (the first has an EU_EV_WS_IN queued); script, what a
 * scripted client sends later; early, what the object sent before the
 * client connected; got, what the client received, when the world keeps it. */
typedef struct eu_sock {
  int64_t id;
  int64_t next;         /* the id of its object's next socket, or 0 */
  int obj;              /* the object's index */
  int state;            /* EU_WS_* */
  uint64_t ident;       /* for reduction: from the accepting task */
  int64_t auto_at;      /* ms since 1970 of its last auto-response, 0 for none */
  int delivered;        /* client events handed to the object: their identities */
  int in_queued;        /* an EU_EV_WS_IN is queued for the inbox's first */
  int due_queued;       /* an EU_EV_WS_DUE is queued for the script's first */
  char client[32];
  eu_buf tags;          /* each NUL-terminated */
  eu_buf attach;        /* encoded; empty for none */
  eu_buf inbox, script, early, got;
} eu_sock;

struct eu_task {
  int64_t id;
  int kind;
  eu_object *obj;
  lua_State *co;      /* NULL until the task starts */
  int coref;
  int64_t origin_task;  /* the task waiting for our answer, or 0 */
  int origin_slot;      /* the slot waiting for our answer, or 0 */
  int waiting;
  int alarm_retry;
  int root;             /* the drive event or alarm firing it serves */
  int effect;           /* which outgoing call of its root created it, or -1 */
  int lose_answer;      /* fault: the answer never reaches the caller (2: nor does an error, the caller times out) */
  int crash_caller;     /* fault: the caller crashes right after the answer */
  int alarm_lost;       /* fault: the alarm's completion is lost */
  int cron;             /* a scheduled invocation: which cron (index in the world's) */
  int cron_retry;       /* its retry, 0 for the firing itself */
  int64_t cron_due;     /* controller.scheduledTime: when the firing was due */
  int64_t sock;         /* a WebSocket event's socket, its op and close code */
  int ws_op, ws_code;
  int cron_lost;        /* fault: its outcome is lost */
  int cron_asked;       /* started by eu_world_run_cron: not retried */
  int no_retry;         /* its handler called controller:noRetry() */
  int visit_failed;     /* runInDurableObject: its last request failed, so its turn is rolled back */
  /* A waitUntil: its function, a registry reference in its isolate until it
   * starts; the task whose end starts it (0 once that ended); the slot
   * whose answer, once taken, starts it instead (opts.hold_wait_until). */
  int fnref;
  int64_t after;
  int after_slot;
  int deferred;         /* waitUntils it asked for: their identities and labels */
  /* eutaxy.all: a branch's invocation (0 for none) and whether its end was
   * counted there; an invocation's branches still running, and whether one
   * of them raised */
  int64_t parent;
  int counted;
  int branches;
  int branch_failed;
  /* Identity for reduction (reduce.h): derived from the task that made it
   * and how many calls that task had made, so it is the same in every run,
   * whatever other objects did meanwhile. */
  uint64_t ident;
  int calls;            /* calls it made: its callees' identities */
  int wakes;            /* wake-ups queued for it: their identities */
  uint64_t origin_ident, origin_res;  /* the calling task's, for an answer it may not live to see */
  char method[64];
  char wait_point[EU_LABEL + 128];  /* the fault point of its current yield, when reset may strike there */
  char label[EU_LABEL];
  eu_task *next;        /* in the live list */
};

/* What a fault label names: a drive event and its delivery, or an alarm
 * firing. Every outgoing call under it is an effect, numbered from 0. */
typedef struct eu_root {
  char event[64];
  int delivery;
  char sub[48];         /* a waitUntil's: " waitUntil #2", after the delivery */
  int effects;
  int sleeps;
  int waits;            /* waitUntils asked for under it, each a root of its own */
  int alls;             /* eutaxy.all calls made under it, each branch a root of its own */
} eu_root;

/* A cron's invocations in a run, for labels and the cron-lost bound. */
typedef struct cron_count {
  int runs;             /* firings and retries */
  int redeliveries;     /* of them, run again because an outcome was lost */
} cron_count;

typedef struct eu_slot {
  int used, done;
  char *data;
  size_t len;
} eu_slot;

/* An arena a rewind took back, or a world gone left, with the image of the
 * runtime its last object's build loaded: the next build of an object of
 * the same binding (whose image holds what that binding loads) starts
 * there. */
typedef struct spare {
  eu_arena *arena;
  void *boot_img;
  size_t boot_len;
  int boot_wire_ref;
  int ns;
} spare;

struct eu_spares {
  spare *s;
  int n, cap;
};

struct eu_world {
  eu_world_opts o;
  char *libdir, *entry, *projectdir;
  eu_binding *bindings;
  int nbindings;
  char *vars;         /* o->vars, copied; NULL for none */
  eu_sched sched;
  eu_prng prng;
  eu_determ_hooks hooks;
  eu_object **objects;
  int nobjects, capobjects;
  int *index;         /* open addressing over (ns, hex): object index + 1, 0 free */
  int nresident;      /* objects with an isolate or an open store */
  size_t index_mask;
  eu_object *worker;
  eu_cron *crons;     /* the worker's cron triggers, parsed */
  char **cron_exprs;  /* as the config wrote them: controller.cron */
  int64_t *cron_last; /* the last due time of each that a run fires (max_crons), or INT64_MAX */
  cron_count *cron_counts;
  int ncrons;
  eu_task *tasks;     /* live tasks, newest first */
  struct held *held;  /* events kept from objects whose input gate is shut, in arrival order */
  int nheld, capheld;
  int64_t next_task;
  eu_task *running;
  eu_slot *slots;
  int nslots;
  lua_State *scratch; /* builds host-made values (errors, alarm info) for encoding */
  eu_buf trace;
  eu_root *roots;
  int nroots, caproots;
  int faults_used;
  unsigned fault_kinds_used;
  eu_buf fault_log;
  eu_buf events;      /* the event log (eu_world_events), kept with the trace */
  int capped, stopped;
  int closing;        /* eu_world_free: tasks end without starting what waits for them */
  int arrived;        /* the tag + 1 of the arrival the last step dispatched, or 0 */
  char *uncaught;
  char *undeclared;  /* eu_world_note_undeclared */
  /* reduction: the step in progress and what it touched */
  int step, step_open;
  eu_fp fp;
  uint64_t draws, step_draws;     /* PRNG draws, in all and when the step began */
  uint64_t worker_print;          /* the worker's fingerprint after its last turn */
  int worker_printed;
  /* before its first turn of a run, the worker's heap is the one the world
   * started with (what it holds for tasks is left out of a print), in every
   * run a kept world rewinds to its start: printed once, not rewound */
  uint64_t worker_print0;
  /* checkpoints: the world between steps, each a copy of its own state;
   * objects save theirs when first touched after one (save_object) */
  int ck_on, ck_depth, ck_broken;
  int in_arenas;  /* isolates live in arenas and keep boot images: ck_on, or spares */
  unsigned ck_serial;
  struct wck *cks;
  int ncks, capcks;
  eu_spares spares;  /* arenas of objects a rewind forgot, for the next ones */
  struct berth *berths;  /* eu_world_opts.berths of them, made as needed */
  int nberths;
  uint64_t berth_clock;
  /* no base (a berth's, or a boot image) has the worker module: loading
   * it did something an object could tell (clock_reads, draws, prints),
   * or failed */
  int plain_base;
  uint64_t clock_reads, prints;
  unsigned char *pack_buf;  /* where a delta is made, before it is copied to its size */
  size_t pack_cap;
  size_t ck_bytes;    /* held by images and checkpoints' blobs */
  /* WebSockets: socket id - 1 indexes socks; what the turn running sent, as
   * records each after its socket's id; ids for eu_world_ws_list; strings
   * objects' auto-responses point into, kept until the world is freed */
  eu_sock **socks;
  int nsocks, capsocks;
  eu_buf ws_sent;
  int64_t *ws_ids;
  int capws_ids;
  char **kept;
  int nkept, capkept;
  /* faults a spec armed (eu_world_arm_fault), in the order armed, and the
   * union of their kinds: the fault points of those kinds are reached even
   * when the run injects none */
  eu_fault_arm *arms;
  int narms, caparms, arm_ids;
  unsigned armed_kinds;
};

/* An arena where the heaps of many objects take turns (eu_world_opts.berths):
 * one is awake in it, the others are packed as deltas from base, the arena
 * once the runtime was loaded, which every object in it started from. */
typedef struct berth {
  eu_arena *arena;
  eu_object *o;       /* awake in it, or NULL */
  void *base;
  size_t base_len;
  int base_wire_ref;
  size_t clean_to;    /* with no object awake: the arena is base up to here */
  uint64_t used;      /* berth_clock when an object last woke or was built in it */
} berth;

typedef struct held {
  eu_event ev;
  int obj;            /* the object whose gate keeps it */
} held;

typedef struct wck {
  eu_world w;         /* the world's own fields */
  eu_buf blob;        /* objects, tasks, slots, roots, queued events, the uncaught error */
} wck;

/* ---- helpers ---------------------------------------------------------- */


/* s into out (n bytes), cut to fit: snprintf's "%s" without its parser,
 * for the labels every step copies. */
static void copy_label(char *out, size_t n, const char *s) {
  size_t len = strnlen(s, n - 1);
  memcpy(out, s, len);
  out[len] = '\0';
}

/* A copy of n bytes, NUL-terminated. */
static char *dupmem(const char *p, size_t n) {
  char *d = malloc(n + 1);
  if (d) {
    memcpy(d, p, n);
    d[n] = '\0';
  }
  return d;
}

static char *dupstr(const char *s) {
  size_t n;
  char *p;
  if (!s) return NULL;
  n = strlen(s) + 1;
  p = malloc(n);
  if (p) memcpy(p, s, n);
  return p;
}

#define TRACING(w) (!(w)->o.no_trace)

static void save_object(eu_world *w, eu_object *o);
static void save_store(eu_world *w, eu_object *o);
static eu_store *open_store(eu_world *w, eu_object *o, char *err, size_t errlen);
static void store_mark(eu_world *w, eu_object *o);
static eu_arena *take_arena(eu_world *w, eu_object *o);
static void forget_saves(eu_world *w, eu_object *o);
static struct berth *take_berth(eu_world *w, eu_object *o);
static void leave_berth(eu_world *w, eu_object *o);
static void wake_heap(eu_world *w, eu_object *o);

/* Called after an object's isolate or store came or went. */
static void note_resident(eu_world *w, eu_object *o) {
  int now = o->ns >= 0 && (o->iso != NULL || o->store != NULL);
  if (now != o->resident) w->nresident += now ? 1 : -1;
  o->resident = now;
}

static void vtrace(eu_world *w, const char *fmt, va_list ap) {
  int64_t t = w->sched.now;
  if (!TRACING(w)) return;
  eu_buf_printf(&w->trace, "%6" PRId64 ".%03ds  ", t / 1000, (int)(t % 1000));
  eu_buf_vprintf(&w->trace, fmt, ap);
  eu_buf_putc(&w->trace, '\n');
}

static void trace(eu_world *w, const char *fmt, ...)
#if defined(__GNUC__)
  __attribute__((format(printf, 2, 3)))
#endif
  ;

static void trace(eu_world *w, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vtrace(w, fmt, ap);
  va_end(ap);
}

/* One field of the event log: tabs and newlines separate fields and
 * records, so they become spaces wherever user text carries them. */
static void put_field(eu_buf *b, const char *s) {
  size_t start = b->n, i;
  eu_buf_puts(b, s ? s : "");
  for (i = start; i < b->n; i++)
    if (b->p[i] == '\t' || b->p[i] == '\n' || b->p[i] == '\r') b->p[i] = ' ';
}

static void record(eu_world *w, const char *kind, const char *from, const char *to, const char *fmt, ...)
#if defined(__GNUC__)
  __attribute__((format(printf, 5, 6)))
#endif
  ;

static void record(eu_world *w, const char *kind, const char *from, const char *to, const char *fmt, ...) {
  eu_buf text;
  va_list ap;
  if (!TRACING(w)) return;
  eu_buf_init(&text);
  va_start(ap, fmt);
  eu_buf_vprintf(&text, fmt, ap);
  va_end(ap);
  eu_buf_printf(&w->events, "%" PRId64 "\t%s\t", w->sched.now, kind);
  put_field(&w->events, from);
  eu_buf_putc(&w->events, '\t');
  put_field(&w->events, to);
  eu_buf_putc(&w->events, '\t');
  put_field(&w->events, text.p);
  eu_buf_putc(&w->events, '\n');
  eu_buf_free(&text);
}

const eu_buf *eu_world_events(eu_world *w) { return &w->events; }

void eu_world_log(eu_world *w, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vtrace(w, fmt, ap);
  va_end(ap);
}

/* A short rendering of encoded values for the trace. An answer starts with
 * its ok flag, which the trace line says in words already: skip_ok drops it. */
static const char *fmtvals(eu_buf *tmp, const char *p, size_t n, int skip_ok) {
  eu_buf_reset(tmp);
  if (eu_clone_format(p, n, tmp, EU_FORMAT_MAX) != EU_OK) eu_buf_puts(tmp, "?");
  if (!tmp->p) eu_buf_puts(tmp, "");
  if (skip_ok) {
    if (strcmp(tmp->p, "true") == 0) return "nothing";
    if (strncmp(tmp->p, "true, ", 6) == 0) return tmp->p + 6;
  }
  return tmp->p;
}

/* A request or a response as a trace shows it: "POST /projects/p-1/lease",
 * "200 {"slot":"r-1"}". Falls back to the plain rendering. */
static const char *fmtfetch(eu_world *w, eu_buf *tmp, const char *p, size_t n, int answer) {
  lua_State *S = w->scratch;
  int count = 0;
  const char *s;
  size_t len;
  lua_settop(S, 0);
  if (eu_clone_decode(S, p, n, &count, NULL, 0) != EU_OK || count < 1) goto plain;
  if (answer) {
    if (count < 2 || !lua_toboolean(S, 1) || !lua_istable(S, 2)) goto plain;
    lua_remove(S, 1);
  }
  if (!lua_istable(S, 1)) goto plain;
  eu_buf_reset(tmp);
  lua_getfield(S, 1, answer ? "status" : "method");
  lua_getfield(S, 1, answer ? "body" : "url");
  if (answer) {
    eu_buf_printf(tmp, "%d", (int)lua_tointeger(S, -2));
    s = lua_tolstring(S, -1, &len);
    if (s && len) eu_buf_printf(tmp, " %.*s%s", (int)(len > 120 ? 120 : len), s, len > 120 ? "..." : "");
  } else {
    s = lua_tostring(S, -1);
    if (s && strncmp(s, "http://localhost/", 17) == 0) s += 16;
    eu_buf_printf(tmp, "fetch %s %s", lua_tostring(S, -2) ? lua_tostring(S, -2) : "?", s ? s : "?");
  }
  lua_settop(S, 0);
  return tmp->p ? tmp->p : "";
plain:
  lua_settop(S, 0);
  return fmtvals(tmp, p, n, answer);
}

static int64_t now_abs(void *ud) {
  eu_world *w = ud;
  w->clock_reads++;
  return w->o.start_ms + w->sched.now;
}

static int64_t elapsed(void *ud) {
  eu_world *w = ud;
  w->clock_reads++;
  return w->sched.now;
}

static uint64_t rnd(void *ud) {
  ((eu_world *)ud)->draws++;
  return eu_prng_next(&((eu_world *)ud)->prng);
}

int64_t eu_world_now(eu_world *w) { return now_abs(w); }
int64_t eu_world_elapsed(eu_world *w) { return w->sched.now; }
const eu_buf *eu_world_trace(eu_world *w) { return &w->trace; }
uint64_t eu_world_random(eu_world *w) {
  w->draws++;
  return eu_prng_next(&w->prng);
}
int eu_object_has_isolate(eu_object *o) { return o->iso != NULL; }
int eu_object_index(eu_object *o) { return o->index; }
int eu_world_nbindings(eu_world *w) { return w->nbindings; }

const char *eu_world_binding_name(eu_world *w, int ns) {
  return ns >= 0 && ns < w->nbindings ? w->bindings[ns].name : NULL;
}

int eu_world_is_service(eu_world *w, int ns) {
  return ns >= 0 && ns < w->nbindings && w->bindings[ns].entry != NULL;
}

const char *eu_world_services(eu_world *w, eu_buf *out) {
  int i, n = 0;
  for (i = 0; i < w->nbindings; i++) {
    if (!w->bindings[i].entry) continue;
    if (n++) eu_buf_puts(out, ", ");
    eu_buf_puts(out, w->bindings[i].name);
  }
  if (!n) eu_buf_puts(out, "none");
  eu_buf_putc(out, 0);
  return out->p;
}

int eu_world_binding(eu_world *w, const char *name) {
  int i;
  for (i = 0; i < w->nbindings; i++)
    if (strcmp(w->bindings[i].name, name) == 0) return i;
  return -1;
}

int eu_world_choose(eu_world *w, int kind, int n, const char *label) {
  int i;
  if (n <= 1) return 0;
  if (w->o.choose) {
    i = w->o.choose(w->o.choose_ud, kind, n, label);
    return i >= 0 && i < n ? i : 0;
  }
  if (kind == EU_CHOICE_FAULT) return 0;  /* no faults unless a chooser asks for them */
  return (int)eu_prng_below(&w->prng, (uint64_t)n);
}

/* ---- faults ----------------------------------------------------------- */

const char *eu_fault_name(int kind) {
  static const char *const names[EU_FAULT_NKINDS] = {
    "none", "rpc-fail", "ambiguous", "caller-crash", "alarm-fail", "alarm-lost", "reset", "resend",
    "delivery-fail", "delivery-timeout", "cron-fail", "cron-lost", "overloaded",
    "fetch-timeout", "hibernate", "ws-drop", "ws-close"
  };
  return kind >= 0 && kind < EU_FAULT_NKINDS ? names[kind] : NULL;
}

int eu_fault_parse(const char *name) {
  int k;
  for (k = 1; k < EU_FAULT_NKINDS; k++)
    if (strcmp(eu_fault_name(k), name) == 0) return k;
  return 0;
}

/* The lifeline a fault point is on, for the event log when the caller does
 * not say: the running invocation's, or the drive event's ("req-1" of
 * "req-1#1 ..."). */
static const char *fault_lifeline(eu_world *w, const char *label, char *out, size_t n) {
  size_t len = strcspn(label, "# ");
  if (w->running) return w->running->obj->tag;
  snprintf(out, n, "%.*s", (int)(len < n ? len : n - 1), label);
  return out;
}

/* Where a fault point is, for the faults a spec armed (eu_fault_arm). */
typedef struct fault_site {
  const eu_object *obj;  /* the object struck; NULL for the worker */
  const char *method;    /* the invocation there */
  int when;              /* EU_ARM_BEFORE, EU_ARM_WAITING, or EU_ARM_ANY */
  unsigned also;         /* kinds only an armed fault may take here: a bound of the run keeps the chooser off them */
} fault_site;

static void note_armed_kinds(eu_world *w) {
  int i;
  w->armed_kinds = 0;
  for (i = 0; i < w->narms; i++) w->armed_kinds |= EU_FAULT_BIT(w->arms[i].kind);
}

/* The kind of the first armed fault that the point offers and matches, now
 * disarmed, or EU_FAULT_NONE. A match still to let pass counts one down. */
static int strike_armed(eu_world *w, unsigned kinds, const fault_site *at) {
  const eu_object *o = at ? at->obj : NULL;
  const char *method = at ? at->method : NULL;
  int i, k;
  if (at) kinds |= at->also;
  for (i = 0; i < w->narms; i++) {
    eu_fault_arm *a = &w->arms[i];
    if (!(kinds & EU_FAULT_BIT(a->kind))) continue;
    if (a->ns >= 0 && (!o || o->ns != a->ns)) continue;
    if (a->hex[0] && (!o || strcmp(o->hex, a->hex) != 0)) continue;
    if (a->method[0] && (!method || strcmp(method, a->method) != 0)) continue;
    if (a->when != EU_ARM_ANY && (!at || at->when != a->when)) continue;
    if (a->skip > 0) {
      a->skip--;
      continue;
    }
    k = a->kind;
    memmove(a, a + 1, (size_t)(w->narms - i - 1) * sizeof *a);
    w->narms--;
    note_armed_kinds(w);
    return k;
  }
  return EU_FAULT_NONE;
}

int eu_world_arm_fault(eu_world *w, const eu_fault_arm *a, int *id) {
  if (a->kind <= EU_FAULT_NONE || a->kind >= EU_FAULT_NKINDS || w->o.checkpoints) return EU_EINVAL;
  if (w->narms == w->caparms) {
    int cap = w->caparms ? w->caparms * 2 : 8;
    eu_fault_arm *p = realloc(w->arms, (size_t)cap * sizeof *p);
    if (!p) return EU_ENOMEM;
    w->arms = p;
    w->caparms = cap;
  }
  w->arms[w->narms] = *a;
  w->arms[w->narms].hex[sizeof a->hex - 1] = '\0';
  w->arms[w->narms].method[sizeof a->method - 1] = '\0';
  *id = w->arms[w->narms].id = ++w->arm_ids;
  w->narms++;
  note_armed_kinds(w);
  return EU_OK;
}

int eu_world_armed(eu_world *w, const eu_fault_arm **arms) {
  *arms = w->arms;
  return w->narms;
}

void eu_world_disarm(eu_world *w) {
  w->narms = 0;
  w->armed_kinds = 0;
}

/* Whether a fault point offering one of kinds is worth reaching: the run
 * may inject one of them, or a spec armed one. */
static int may_fault(eu_world *w, unsigned kinds) {
  return ((w->o.faults | w->armed_kinds) & kinds) != 0;
}

/* Fault k strikes at label: the log, the trace and the event log say so. */
static int struck(eu_world *w, int k, const char *label, const char *lifeline, int armed) {
  char who[64];
  w->faults_used++;
  w->fault_kinds_used |= EU_FAULT_BIT(k);
  eu_buf_printf(&w->fault_log, "%s at %s\n", eu_fault_name(k), label);
  trace(w, "fault  %s at %s%s", eu_fault_name(k), label, armed ? " (armed by the spec)" : "");
  if (TRACING(w))
    record(w, "fault", lifeline ? lifeline : fault_lifeline(w, label, who, sizeof who), NULL,
           "%s at %s", eu_fault_name(k), label);
  return k;
}

/* A fault point: the choice between no fault and each kind in kinds that the
 * run may still inject, after any fault a spec armed for it. label says
 * where ("req-1#1 effect #0 (DO:POOL acquire)"), lifeline who is hit there
 * (NULL: see fault_lifeline), at what an armed fault matches (NULL: nothing
 * of an object's). */
static int fault_on(eu_world *w, unsigned kinds, const char *label, const char *lifeline, const fault_site *at) {
  int options[EU_FAULT_NKINDS], n = 1, k, i, open = w->faults_used < w->o.max_faults;
  if (w->narms && (k = strike_armed(w, kinds, at)) != EU_FAULT_NONE) return struck(w, k, label, lifeline, 1);
  options[0] = EU_FAULT_NONE;
  kinds &= w->o.faults;
  if (!open) {
    /* reached all the same: coverage shows the faults a bound kept away */
    if (w->o.fault_point && kinds) w->o.fault_point(w->o.fault_point_ud, label, kinds, 0, EU_FAULT_NONE);
    return EU_FAULT_NONE;
  }
  for (k = 1; k < EU_FAULT_NKINDS; k++)
    if (kinds & EU_FAULT_BIT(k)) options[n++] = k;
  if (n == 1) return EU_FAULT_NONE;
  i = eu_world_choose(w, EU_CHOICE_FAULT, n, label);
  k = i > 0 && i < n ? options[i] : EU_FAULT_NONE;
  if (w->o.fault_point) w->o.fault_point(w->o.fault_point_ud, label, kinds, 1, k);
  if (k == EU_FAULT_NONE) return EU_FAULT_NONE;
  return struck(w, k, label, lifeline, 0);
}

/* A fault point of Lua code of the host's (the fanout runner) or of the
 * drive: an armed fault matches the object whose invocation runs. */
int eu_world_fault(eu_world *w, unsigned kinds, const char *label) {
  fault_site site;
  memset(&site, 0, sizeof site);
  if (w->running && w->running->obj->ns >= 0) {
    site.obj = w->running->obj;
    site.method = w->running->method;
  }
  return fault_on(w, kinds, label, NULL, &site);
}

int eu_world_faults_used(eu_world *w) { return w->faults_used; }
const eu_buf *eu_world_fault_log(eu_world *w) { return &w->fault_log; }
unsigned eu_world_fault_kinds_used(eu_world *w) { return w->fault_kinds_used; }
int eu_world_capped(eu_world *w) { return w->capped; }
void eu_world_stop(eu_world *w) { w->stopped = 1; }
int eu_world_stopped(eu_world *w) { return w->stopped; }
int eu_world_idle(eu_world *w) { return eu_sched_count(&w->sched) == 0; }
lua_State *eu_world_scratch(eu_world *w) { return w->scratch; }
const char *eu_world_uncaught(eu_world *w) { return w->uncaught; }
const char *eu_world_undeclared(eu_world *w) { return w->undeclared; }

void eu_world_note_undeclared(eu_world *w, const char *message) {
  if (!w->undeclared) w->undeclared = dupstr(message);
}

static void note_uncaught(eu_world *w, const char *who, const char *name, const char *message) {
  size_t n;
  /* only the first is kept: which one that is depends on the order */
  if (w->step_open) eu_fp_add(&w->fp, EU_RES_UNCAUGHT, 1);
  if (w->uncaught) return;
  n = strlen(who) + strlen(name) + strlen(message) + 16;
  if ((w->uncaught = malloc(n)) != NULL) snprintf(w->uncaught, n, "%s raised %s: %s", who, name, message);
}

static int new_root(eu_world *w, const char *event, int delivery) {
  if (w->nroots == w->caproots) {
    int cap = w->caproots ? w->caproots * 2 : 16;
    eu_root *r = realloc(w->roots, (size_t)cap * sizeof *r);
    if (!r) return -1;
    w->roots = r;
    w->caproots = cap;
  }
  copy_label(w->roots[w->nroots].event, sizeof w->roots[w->nroots].event, event);
  w->roots[w->nroots].delivery = delivery;
  w->roots[w->nroots].sub[0] = '\0';
  w->roots[w->nroots].effects = 0;
  w->roots[w->nroots].sleeps = 0;
  w->roots[w->nroots].waits = 0;
  w->roots[w->nroots].alls = 0;
  return w->nroots++;
}

/* "req-1#1 effect #0 (DO:POOL acquire)" */
static void fault_label(eu_world *w, char *out, size_t n, int root, int effect, int ns,
                        const char *method) {
  const eu_root *r = root >= 0 && root < w->nroots ? &w->roots[root] : NULL;
  const char *who = ns >= 0 ? w->bindings[ns].name : "worker";
  const char *kind = eu_world_is_service(w, ns) ? "service " : "DO:";
  int len;
  if (effect >= 0)
    len = snprintf(out, n, "%s#%d%s effect #%d (%s%s %s)", r ? r->event : "?", r ? r->delivery : 0,
                   r ? r->sub : "", effect, kind, who, method);
  else  /* a drive event delivered to an object directly */
    len = snprintf(out, n, "%s#%d%s (%s%s %s)", r ? r->event : "?", r ? r->delivery : 0, r ? r->sub : "", kind,
                   who, method);
  if (len >= (int)n && n > 4) memcpy(out + n - 4, "...", 4);  /* a label cut short says so */
}

/* The fault point of a task's yield: reset may strike while it waits there.
 * "req-1#1 while the worker waits for effect #0 (DO:POOL acquire)",
 * "alarm DO:SHOP(s)#1 while DO:SHOP(s) sleeps 500ms (sleep #0)". A sleep
 * is numbered in its root as calls are. */
static void wait_point(eu_world *w, eu_task *t, int effect, int ns, const char *method, int64_t ms) {
  eu_root *r = t->root >= 0 && t->root < w->nroots ? &w->roots[t->root] : NULL;
  const char *who = t->obj->ns >= 0 ? t->obj->tag : "the worker";
  if (method)
    snprintf(t->wait_point, sizeof t->wait_point, "%.40s#%d%.40s while %.30s waits for effect #%d (%s%.30s %.20s)",
             r ? r->event : "?", r ? r->delivery : 0, r ? r->sub : "", who, effect,
             eu_world_is_service(w, ns) ? "service " : "DO:", ns >= 0 ? w->bindings[ns].name : "worker", method);
  else
    snprintf(t->wait_point, sizeof t->wait_point, "%.40s#%d%.40s while %.30s sleeps %" PRId64 "ms (sleep #%d)",
             r ? r->event : "?", r ? r->delivery : 0, r ? r->sub : "", who, ms, r ? r->sleeps++ : 0);
}

/* ---- ids -------------------------------------------------------------- */

static void hexify(const uint64_t v[4], char hex[65]) {
  int i;
  for (i = 0; i < 4; i++) eu_hex64(v[i], hex + 16 * i);
  hex[64] = '\0';
}

int eu_world_id_from_name(eu_world *w, int ns, const char *name, size_t len, char hex[65]) {
  /* An id depends on the namespace's class and the name only, so it is the
   * same in every run and every process: serve names files after it. */
  uint64_t v[4];
  eu_buf b;
  int i;
  if (ns < 0 || ns >= w->nbindings) return EU_EINVAL;
  eu_buf_init(&b);
  if (eu_buf_puts(&b, w->bindings[ns].class_name) || eu_buf_putc(&b, 0) || eu_buf_put(&b, name, len)) {
    eu_buf_free(&b);
    return EU_ENOMEM;
  }
  for (i = 0; i < 4; i++) v[i] = eu_hash64(b.p, b.n, (uint64_t)i * 0x9e3779b97f4a7c15ULL);
  eu_buf_free(&b);
  hexify(v, hex);
  return EU_OK;
}

void eu_world_new_unique_id(eu_world *w, char hex[65]) {
  uint64_t v[4];
  int i;
  for (i = 0; i < 4; i++) v[i] = eu_prng_next(&w->prng);
  w->draws++;
  hexify(v, hex);
}

/* An id crossing into or out of an isolate of w (clone.h's id check): one
 * of a Durable Object binding of w, whose name, when it has one, gives its
 * hex. Any other was made by hand, and would lie to its receiver. */
int eu_world_check_id(lua_State *L, const char *binding, const char *hex, const char *name, size_t namelen,
                      char *why, size_t whylen) {
  eu_world *w = eu_world_of(L);
  char want[65];
  int ns;
  if (!w) return 0;
  ns = eu_world_binding(w, binding);
  if (ns < 0 || w->bindings[ns].entry) {
    snprintf(why, whylen, "no Durable Object binding is named %.60s", binding);
    return 1;
  }
  if (!name) return 0;
  if (eu_world_id_from_name(w, ns, name, namelen, want) != EU_OK) {
    snprintf(why, whylen, "out of memory");
    return 1;
  }
  if (strcmp(want, hex) != 0) {
    snprintf(why, whylen, "the name \"%.48s\" does not give the id %.64s", name, hex);
    return 1;
  }
  return 0;
}

/* ---- objects ---------------------------------------------------------- */

static size_t object_hash(int ns, const char *hex) {
  return (size_t)eu_hash64(hex, 64, (uint64_t)(ns + 1));
}

static eu_object *find_object(eu_world *w, int ns, const char *hex) {
  size_t i;
  if (!w->index) return NULL;
  for (i = object_hash(ns, hex) & w->index_mask; w->index[i]; i = (i + 1) & w->index_mask) {
    eu_object *o = w->objects[w->index[i] - 1];
    if (o->ns == ns && strcmp(o->hex, hex) == 0) return o;
  }
  return NULL;
}

/* Keeps the index at most half full; a server may know millions of ids. */
static int index_object(eu_world *w, eu_object *o) {
  size_t i;
  if ((size_t)w->nobjects * 2 >= w->index_mask) {
    size_t cap = w->index ? (w->index_mask + 1) * 2 : 64;
    int *a = calloc(cap, sizeof *a), k;
    if (!a) return EU_ENOMEM;
    free(w->index);
    w->index = a;
    w->index_mask = cap - 1;
    for (k = 0; k < w->nobjects; k++)
      if (w->objects[k] != o && w->objects[k]->ns >= 0) index_object(w, w->objects[k]);
  }
  for (i = object_hash(o->ns, o->hex) & w->index_mask; w->index[i]; i = (i + 1) & w->index_mask)
    ;
  w->index[i] = o->index + 1;
  return EU_OK;
}

static eu_object *add_object(eu_world *w, int ns, const char *hex, const char *name, size_t namelen) {
  eu_object *o;
  if (w->nobjects == w->capobjects) {
    int cap = w->capobjects ? w->capobjects * 2 : 16;
    eu_object **a = realloc(w->objects, (size_t)cap * sizeof *a);
    if (!a) return NULL;
    w->objects = a;
    w->capobjects = cap;
  }
  o = calloc(1, sizeof *o);
  if (!o) return NULL;
  o->index = w->nobjects;
  o->ns = ns;
  o->w = w;
  o->dispatch_ref = o->wire_error_ref = LUA_NOREF;
  o->berth = -1;
  snprintf(o->hex, sizeof o->hex, "%s", hex);
  if (name && !(o->name = dupmem(name, namelen))) {
    free(o);
    return NULL;
  }
  o->namelen = namelen;
  o->res = ns < 0 ? EU_RES_WORKER : eu_fp_object(ns, hex);
  if (ns < 0)
    snprintf(o->tag, sizeof o->tag, "worker");
  else if (w->bindings[ns].entry)
    snprintf(o->tag, sizeof o->tag, "service(%.48s)", w->bindings[ns].name);
  else if (name)
    snprintf(o->tag, sizeof o->tag, "DO:%s(%.48s)", w->bindings[ns].name, name);
  else
    snprintf(o->tag, sizeof o->tag, "DO:%s(%.12s)", w->bindings[ns].name, hex);
  w->objects[w->nobjects++] = o;
  if (ns >= 0 && index_object(w, o) != EU_OK) {
    w->nobjects--;
    free(o->name);
    free(o);
    return NULL;
  }
  return o;
}

eu_object *eu_world_object(eu_world *w, int ns, const char *hex, const char *name, char *err,
                           size_t errlen) {
  return eu_world_object_named(w, ns, hex, name, name ? strlen(name) : 0, err, errlen);
}

eu_object *eu_world_object_named(eu_world *w, int ns, const char *hex, const char *name,
                                 size_t namelen, char *err, size_t errlen) {
  eu_object *o;
  if (ns < 0 || ns >= w->nbindings) {
    eu_err(err, errlen, EU_EINVAL, "no durable object binding number %d", ns);
    return NULL;
  }
  if (strlen(hex) != 64 || strspn(hex, "0123456789abcdef") != 64) {
    eu_err(err, errlen, EU_EINVAL, "invalid durable object id \"%.80s\": 64 hex digits expected",
           hex);
    return NULL;
  }
  o = find_object(w, ns, hex);
  if (o && (!name || o->name)) return o;
  /* The name is recorded now, and becomes the object's ctx.id.name: it is
   * only ever told with its id, never chosen, so it must be the one its id
   * was made from. Later calls cannot change it, so they are not hashed. */
  if (name) {
    char want[65];
    int rc = eu_world_id_from_name(w, ns, name, namelen, want);
    if (rc != EU_OK) {
      eu_err(err, errlen, rc, "out of memory");
      return NULL;
    }
    if (strcmp(want, hex) != 0) {
      eu_err(err, errlen, EU_EINVAL, "the name \"%.48s\" does not give the id %s", name, hex);
      return NULL;
    }
  }
  if (o) {  /* an id seen first by value, now by name */
    o->name = dupmem(name, namelen);
    o->namelen = o->name ? namelen : 0;
    if (!w->bindings[ns].entry) snprintf(o->tag, sizeof o->tag, "DO:%s(%.48s)", w->bindings[ns].name, name);
    return o;
  }
  o = add_object(w, ns, hex, name, namelen);
  if (!o) eu_err(err, errlen, EU_ENOMEM, "out of memory");
  return o;
}

int eu_world_nobjects(eu_world *w) { return w->nobjects - 1; }
eu_object *eu_world_object_at(eu_world *w, int i) {
  return i >= 0 && i + 1 < w->nobjects ? w->objects[i + 1] : NULL;  /* [0] is the worker */
}
const char *eu_object_binding(eu_world *w, eu_object *o) { return eu_world_binding_name(w, o->ns); }
const char *eu_object_name(eu_object *o) { return o->name; }
const char *eu_object_hex(eu_object *o) { return o->hex; }
eu_store *eu_object_store_if_open(eu_object *o) { return o->store; }

eu_object *eu_world_object_by_name(eu_world *w, const char *binding, const char *name) {
  int ns = eu_world_binding(w, binding);
  char hex[65];
  if (ns < 0 || eu_world_id_from_name(w, ns, name, strlen(name), hex) != EU_OK) return NULL;
  return eu_world_object(w, ns, hex, name, NULL, 0);
}

/* An object's isolate and store count each other's memory toward the one
 * limit, and the store holds its database to max_object_bytes. Called
 * whenever either is made or the isolate goes, so that neither keeps a
 * pointer into a closed isolate. Fails only where the quota's pragma does
 * (an I/O error): eu_store_errmsg says why. */
static int link_limits(eu_world *w, eu_object *o) {
  eu_store_limits l;
  if (!o->store) return EU_OK;
  /* the object's SQL reads the world's clock and draws from its PRNG, as its Lua does */
  eu_store_set_sources(o->store, now_abs, rnd, w);
  l.max_bytes = w->o.max_object_bytes;
  if (o->packed) {  /* its isolate's struct is in the packed heap */
    l.mem_limit = o->packed_limit;
    l.mem_also = &o->packed_mem;
    return eu_store_set_limits(o->store, &l);
  }
  l.mem_limit = o->iso ? eu_isolate_mem_limit(o->iso) : 0;
  l.mem_also = o->iso ? eu_isolate_mem_ptr(o->iso) : NULL;
  if (o->iso) eu_isolate_count_also(o->iso, eu_store_mem_ptr(o->store));
  return eu_store_set_limits(o->store, &l);
}

/* The object's store leaves the world: closed when it is the world's own,
 * given back to the provider that lent it without the world's clock and
 * PRNG as its sources. */
static void put_store(eu_object *o) {
  if (!o->store) return;
  if (o->store_lent) eu_store_set_sources(o->store, NULL, NULL, NULL);
  else eu_store_close(o->store);
}

/* Closing an isolate outside an arena runs the host's finalizers (the
 * sandbox refuses user ones); the gate keeps anything from writing storage
 * outside a turn meanwhile. */
static void close_isolate(eu_world *w, eu_object *o) {
  if (!o->iso) return;
  if (o->packed) {
    /* A heap in an arena reaches nothing outside it, and closes by being
     * dropped (eu_isolate_close): a packed one goes as it is, not woken
     * into a berth (packing the heap awake there) to be dropped. */
    save_store(w, o);
    free(o->packed);
    o->packed = NULL;
  } else {
    save_object(w, o);
    if (o->store) eu_store_gate(o->store, 0);
    eu_isolate_close(o->iso);
  }
  leave_berth(w, o);
  o->iso = NULL;
  o->dispatch_ref = o->wire_error_ref = LUA_NOREF;
  if (o->store) {
    link_limits(w, o);  /* the quota is the same: nothing that can fail runs */
    eu_store_gate(o->store, 1);
  }
}

eu_store *eu_object_store(eu_world *w, eu_object *o, char *err, size_t errlen) {
  if (o->ns < 0) {
    eu_err(err, errlen, EU_EINVAL, "the worker has no storage");
    return NULL;
  }
  save_object(w, o);
  return open_store(w, o, err, errlen);
}

eu_store *eu_object_store_outside(eu_world *w, eu_object *o, char *err, size_t errlen) {
  if (o->ns < 0 || !o->store) return eu_object_store(w, o, err, errlen);
  save_store(w, o);
  note_resident(w, o);
  return o->store;
}

eu_store *eu_object_store_read(eu_world *w, eu_object *o, char *err, size_t errlen) {
  if (o->ns < 0 || !o->store) return eu_object_store(w, o, err, errlen);
  return o->store;
}

static eu_store *open_store(eu_world *w, eu_object *o, char *err, size_t errlen) {
  if (!o->store) {
    if (w->o.store_provider) {
      o->store = w->o.store_provider(w->o.store_ud, o->ns, o->hex, err, errlen);
      o->store_lent = o->store != NULL;
      if (!o->store) return NULL;
      if (w->ck_on && w->ncks > 0) {  /* as it was before the run used it */
        store_mark(w, o);
        o->ck_marked = w->ck_serial;
      }
    } else if (eu_store_open(&o->store, NULL, err, errlen) != EU_OK) {
      return NULL;
    }
    if (link_limits(w, o) != EU_OK) {
      eu_err(err, errlen, EU_ESQL, "%s", eu_store_errmsg(o->store));
      return NULL;
    }
  }
  note_resident(w, o);
  return o->store;
}

static int release_all(eu_world *w, eu_object *o, const char *why, int remote, int retryable,
                       int kept);

void eu_world_store_opened(eu_world *w, eu_object *o, eu_store *s, const char *err) {
  char why[EU_ERRLEN];
  int n;
  o->opening = 0;
  why[0] = '\0';
  if (!s) {
    snprintf(why, sizeof why, "%s", err && *err ? err : "the object's database could not be opened");
  } else if (!o->store) {
    o->store = s;
    o->store_lent = 1;
    if (link_limits(w, o) != EU_OK) snprintf(why, sizeof why, "%s", eu_store_errmsg(s));
    note_resident(w, o);
  }
  n = release_all(w, o, why[0] ? why : NULL, 0, 1, 1);
  if (n && !why[0]) trace(w, "%s  database open: %d held event%s go%s on", o->tag, n, n == 1 ? "" : "s", n == 1 ? "es" : "");
}

static void log_print(void *ud, const char *msg, size_t len) {
  eu_object *o = ud;
  eu_world *w = o->w;
  const char *who = w->running ? w->running->label : o->tag;
  w->prints++;
  trace(w, "%s  print: %.*s", who, (int)(len > 400 ? 400 : len), msg);
  if (w->o.echo_log) fprintf(stderr, "[%s] %.*s\n", o->tag, (int)len, msg);
}

static int traceback(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (msg) luaL_traceback(L, L, msg, 1);
  else lua_pushvalue(L, 1);  /* an error table travels as it is */
  return 1;
}

/* Builds the object's isolate and its instance, through runtime.boot. */
/* construct's steps in the new isolate run under lua_pcall: each of them
 * allocates, and a failed allocation must fail the construction, not abort
 * the process. push_boot(args) requires the runtime, keeps its wire_error
 * and returns boot with its seven arguments. */
typedef struct boot_args {
  eu_world *w;
  eu_object *o;
  int berthed;  /* the isolate is a berth's: its base is being made */
  int base;     /* what load_runtime loads is kept as a base or boot image */
  int impure;   /* the worker module's preload did what an object could tell */
} boot_args;

/* load_runtime(args): requires the runtime and keeps its wire_error. */
static int load_runtime(lua_State *L) {
  boot_args *a = lua_touserdata(L, 1);
  lua_settop(L, 0);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "eutaxy.runtime");
  lua_call(L, 1, 1);
  lua_getfield(L, 1, "wire_error");
  a->o->wire_error_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  if (a->base) {
    eu_world *w = a->w;
    uint64_t reads = w->clock_reads, draws = w->draws, prints = w->prints;
    int rc;
    /* storage, which nearly every object uses (the worker does not), in
     * the base rather than loaded by each isolate; a berth's base is what
     * packing an object compares its heap with, so the rest waits to be
     * needed */
    if (a->o->ns >= 0) {
      lua_getglobal(L, "require");
      lua_pushliteral(L, "eutaxy.storage");
      lua_call(L, 1, 0);
    } else {
      /* and HTTP and JSON, which a worker's fetch uses: loaded now, their
       * code is in the fixed blocks instead of in every image of the worker */
      lua_getglobal(L, "require");
      lua_pushliteral(L, "eutaxy.http");
      lua_call(L, 1, 0);
      lua_getglobal(L, "require");
      lua_pushliteral(L, "eutaxy.json");
      lua_call(L, 1, 0);
    }
    /* and the worker module, when loading it in each isolate would have
     * done just what this load does; a service's module is its own */
    if (w->plain_base || (a->o->ns >= 0 && w->bindings[a->o->ns].entry)) return 0;
    lua_getfield(L, 1, "preload");
    lua_pushstring(L, w->entry);
    eu_isolate_arm(L, w->o.cpu_limit);
    rc = lua_pcall(L, 1, 0, 0);
    eu_isolate_arm(L, 0);
    if (rc != LUA_OK || w->clock_reads != reads || w->draws != draws || w->prints != prints) a->impure = 1;
  }
  return 0;
}

/* Loads the runtime into iso (load_runtime, under lua_pcall): its code goes
 * to the arena's fixed blocks, the same in every image of the arena
 * (eu_isolate_fix_code). The pcall's status; an error message on top. */
static int run_load_runtime(eu_isolate *iso, boot_args *a) {
  lua_State *L = eu_isolate_L(iso);
  int rc;
  lua_pushcfunction(L, load_runtime);
  lua_pushlightuserdata(L, a);
  eu_isolate_fix_code(iso, 1);
  rc = lua_pcall(L, 1, 0, 0);
  eu_isolate_fix_code(iso, 0);
  return rc;
}

static int push_boot(lua_State *L) {
  boot_args *a = lua_touserdata(L, 1);
  eu_world *w = a->w;
  eu_object *o = a->o;
  const char *service = o->ns >= 0 ? w->bindings[o->ns].entry : NULL;
  int i, n = 0;
  lua_settop(L, 0);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "eutaxy.runtime");
  lua_call(L, 1, 1);
  lua_getfield(L, 1, "boot");
  lua_pushstring(L, o->ns < 0 ? "worker" : service ? "service" : "object");
  lua_pushstring(L, service ? service : w->entry);
  lua_createtable(L, w->nbindings, 0);
  for (i = 0; i < w->nbindings; i++) {
    if (w->bindings[i].entry) continue;  /* a service is no binding of env */
    lua_createtable(L, 0, 2);
    lua_pushstring(L, w->bindings[i].name);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, w->bindings[i].class_name);
    lua_setfield(L, -2, "class_name");
    lua_rawseti(L, -2, ++n);
  }
  if (o->ns >= 0) {
    lua_pushstring(L, w->bindings[o->ns].name);
    lua_pushstring(L, o->hex);
    if (o->name) lua_pushlstring(L, o->name, o->namelen);
    else lua_pushnil(L);
  } else {
    lua_pushnil(L);
    lua_pushnil(L);
    lua_pushnil(L);
  }
  if (w->vars) {
    char err[EU_ERRLEN];
    int nvals = 0;
    if (eu_clone_decode(L, w->vars, w->o.vars_len, &nvals, err, sizeof err) != EU_OK)
      return luaL_error(L, "the env's vars: %s", err);
    if (nvals != 1) return luaL_error(L, "the env's vars are %d values, not one", nvals);
  } else {
    lua_pushnil(L);
  }
  return 8;
}

/* keep_ref(value, &ref): a registry reference to value in *ref. */
static int keep_ref(lua_State *L) {
  int *ref = lua_touserdata(L, 2);
  lua_settop(L, 1);
  *ref = luaL_ref(L, LUA_REGISTRYINDEX);
  return 0;
}

static int construct(eu_world *w, eu_object *o, char *err, size_t errlen) {
  eu_isolate_opts io;
  boot_args a;
  lua_State *L;
  berth *b = NULL;
  const void *boot;
  size_t boot_len;
  int rc, boot_ref;
  memset(&io, 0, sizeof io);
  save_object(w, o);
  if (w->o.berths > 0 && o->ns >= 0 && !w->ck_on) {
    if (!(b = take_berth(w, o)))
      return eu_err(err, errlen, EU_ENOMEM, "out of address space for an isolate's arena");
    io.arena = o->arena;
    boot = b->base;
    boot_len = b->base_len;
    boot_ref = b->base_wire_ref;
  } else {
    if (w->in_arenas && !o->arena && !(o->arena = take_arena(w, o)))
      return eu_err(err, errlen, EU_ENOMEM, "out of address space for an isolate's arena");
    io.arena = w->in_arenas ? o->arena : NULL;
    boot = o->boot_img;
    boot_len = o->boot_len;
    boot_ref = o->boot_wire_ref;
  }
  io.libdir = w->libdir;
  io.projectdir = w->projectdir;
  io.mem_limit = w->o.mem_limit;
  io.hooks = &w->hooks;
  io.open_core = eu_world_open_core;
  io.log = log_print;
  io.ud = o;
  a.w = w;
  a.o = o;
  a.berthed = b != NULL;
  /* in an arena, the boot image an object's isolate is built again from
   * after a reset, or in the next world (and its checkpoints' images) */
  a.base = b != NULL || io.arena != NULL;
  a.impure = 0;
  if (io.arena && boot) {
    /* the same isolate as the last build had made by now, at the same
     * address; a berth whose last heap was packed is that already */
    if (!b || b->clean_to < boot_len) eu_arena_load(o->arena, boot, boot_len);
    if (b) b->clean_to = 0;
    o->iso = eu_isolate_in(o->arena);
    eu_isolate_set_owner(o->iso, o, &w->hooks);  /* the image may be another object's or world's */
    o->wire_error_ref = boot_ref;
  } else if ((rc = eu_isolate_new(&o->iso, &io, err, errlen)) != EU_OK) {
    leave_berth(w, o);
    return rc;
  }
  if (link_limits(w, o) != EU_OK) {
    eu_err(err, errlen, EU_ESQL, "%s", eu_store_errmsg(o->store));
    close_isolate(w, o);
    return EU_ESQL;
  }
  L = eu_isolate_L(o->iso);
  if (!io.arena || !boot) {
    rc = run_load_runtime(o->iso, &a);
    if (rc == LUA_OK && a.impure) {
      /* the worker module stays out of every base: again without it */
      w->plain_base = 1;
      eu_isolate_close(o->iso);
      if ((rc = eu_isolate_new(&o->iso, &io, err, errlen)) != EU_OK) {
        o->iso = NULL;
        leave_berth(w, o);
        return rc;
      }
      link_limits(w, o);
      L = eu_isolate_L(o->iso);
      rc = run_load_runtime(o->iso, &a);
    }
    if (rc != LUA_OK) {
      lua_pushcfunction(L, traceback);
      lua_insert(L, -2);
      goto fail;
    }
    if (b) {
      /* Generational: a collection leaves old objects' bytes as they were,
       * so a heap stays close to the base it grew from. */
      lua_gc(L, LUA_GCGEN, 0, 0);
      lua_gc(L, LUA_GCCOLLECT);
      eu_isolate_count_also(o->iso, NULL);  /* the base is no object's */
      if ((b->base = malloc(eu_arena_used(o->arena))) != NULL) {
        b->base_len = eu_arena_used(o->arena);
        eu_arena_save(o->arena, b->base);
        b->base_wire_ref = o->wire_error_ref;
      }
      link_limits(w, o);
    } else if (io.arena && (o->boot_img = malloc(eu_arena_used(o->arena))) != NULL) {
      o->boot_len = eu_arena_used(o->arena);
      eu_arena_save(o->arena, o->boot_img);
      o->boot_wire_ref = o->wire_error_ref;
    }
  }
  lua_pushcfunction(L, traceback);
  lua_pushcfunction(L, push_boot);
  lua_pushlightuserdata(L, &a);
  if ((rc = lua_pcall(L, 1, 8, 1)) != LUA_OK) goto fail;
  /* Loading the module and the constructor are user code: the same limit as a turn. */
  eu_isolate_arm(L, w->o.cpu_limit);
  rc = lua_pcall(L, 7, 1, 1);
  eu_isolate_arm(L, 0);
  if (rc != LUA_OK) goto fail;
  lua_pushcfunction(L, keep_ref);
  lua_insert(L, -2);
  lua_pushlightuserdata(L, &o->dispatch_ref);
  if ((rc = lua_pcall(L, 2, 0, 0)) != LUA_OK) goto fail;
  lua_settop(L, 0);
  note_resident(w, o);
  lua_gc(L, LUA_GCRESTART);
  if (w->o.gc_pause > 0) lua_gc(L, LUA_GCINC, w->o.gc_pause, 0, 0);
  return EU_OK;
fail:
  o->init_block = 0;  /* what init asked for went with it */
  if (rc == LUA_ERRMEM)  /* Lua's bare "not enough memory" */
    eu_err(err, errlen, EU_ELUA, "%s: memory limit exceeded while the %s was built: the isolate may use %zu MiB",
           w->entry, o->ns < 0 ? "worker" : "object", eu_isolate_mem_limit(o->iso) >> 20);
  else
    eu_err(err, errlen, EU_ELUA, "%s", lua_tostring(L, -1) ? lua_tostring(L, -1) : "error object is not a string");
  close_isolate(w, o);
  return EU_ELUA;
}

/* ---- host-made values ------------------------------------------------- */

/* Encodes the n values on the scratch state's stack, and empties it. */
static int encode_scratch(eu_world *w, int n, char **data, size_t *len) {
  lua_State *S = w->scratch;
  eu_buf b;
  int rc;
  eu_buf_init(&b);
  rc = eu_clone_encode(S, 1, n, &b, NULL, 0);
  lua_settop(S, 0);
  if (rc != EU_OK) {
    eu_buf_free(&b);
    return rc;
  }
  *data = eu_buf_take(&b, len);
  return EU_OK;
}

/* Encodes (false, { name, message, remote, retryable, overloaded }) for an
 * answer that no user code produced. */
static int error_payload_of(eu_world *w, const char *name, const char *message, int remote,
                            int retryable, int overloaded, char **data, size_t *len) {
  lua_State *S = w->scratch;
  lua_settop(S, 0);
  lua_pushboolean(S, 0);
  lua_createtable(S, 0, 5);
  lua_pushstring(S, name);
  lua_setfield(S, -2, "name");
  lua_pushstring(S, message);
  lua_setfield(S, -2, "message");
  lua_pushboolean(S, remote);
  lua_setfield(S, -2, "remote");
  lua_pushboolean(S, retryable);
  lua_setfield(S, -2, "retryable");
  lua_pushboolean(S, overloaded);
  lua_setfield(S, -2, "overloaded");
  return encode_scratch(w, 2, data, len);
}

static int error_payload(eu_world *w, const char *name, const char *message, int remote,
                         int retryable, char **data, size_t *len) {
  return error_payload_of(w, name, message, remote, retryable, 0, data, len);
}

static int ok_payload(eu_world *w, char **data, size_t *len) {
  lua_settop(w->scratch, 0);
  lua_pushboolean(w->scratch, 1);
  return encode_scratch(w, 1, data, len);
}

/* ---- tasks ------------------------------------------------------------ */

static eu_task *find_task(eu_world *w, int64_t id) {
  eu_task *t;
  for (t = w->tasks; t; t = t->next)
    if (t->id == id) return t;
  return NULL;
}

static eu_task *new_task(eu_world *w, int kind, eu_object *obj, const char *method,
                         const char *label) {
  eu_task *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->id = ++w->next_task;
  t->kind = kind;
  t->obj = obj;
  t->coref = LUA_NOREF;
  t->fnref = LUA_NOREF;
  t->root = -1;
  t->effect = -1;
  copy_label(t->method, sizeof t->method, method ? method : "");
  copy_label(t->label, sizeof t->label, label);
  t->next = w->tasks;
  w->tasks = t;
  return t;
}

static int push_event(eu_world *w, int kind, int64_t at, int64_t a, int64_t b, char *data,
                      size_t len);

/* Starts a waitUntil whose wait is over, or drops it when it cannot be queued. */
static void free_task(eu_world *w, eu_task *t);
static void start_wait_until(eu_world *w, eu_task *u) {
  if (push_event(w, EU_EV_START, w->sched.now, u->id, 0, NULL, 0) != EU_OK) {
    trace(w, "%s  dropped: out of memory", u->label);
    free_task(w, u);
  }
}

/* t ends: the waitUntils it asked for start, in the order it asked for
 * them, or, under hold_wait_until, once the answer of its slot is taken. */
static void release_wait_untils(eu_world *w, eu_task *t) {
  for (;;) {
    eu_task *u, *first = NULL;
    for (u = w->tasks; u; u = u->next)
      if (u->after == t->id && (!first || u->id < first->id)) first = u;
    if (!first) return;
    first->after = 0;
    if (w->o.hold_wait_until && t->origin_slot) first->after_slot = t->origin_slot;
    else start_wait_until(w, first);
  }
}

static void open_gate(eu_world *w, eu_object *o, int fail);
static void branch_ended(eu_world *w, eu_task *b, int ok, const char *data, size_t len);

static void free_task(eu_world *w, eu_task *t) {
  eu_task **pp;
  if (!w->closing && t->deferred) release_wait_untils(w, t);
  if (!w->closing && t->kind == EU_TASK_BRANCH) branch_ended(w, t, 0, NULL, 0);
  /* a gate its holder leaves shut opens, unless it broke (break_gate) */
  if (!w->closing && t->obj->gate == t->id && !t->obj->breaking) open_gate(w, t->obj, 0);
  for (pp = &w->tasks; *pp; pp = &(*pp)->next)
    if (*pp == t) {
      *pp = t->next;
      break;
    }
  if (t->coref != LUA_NOREF && t->obj->iso) {
    save_object(w, t->obj);
    luaL_unref(eu_isolate_L(t->obj->iso), LUA_REGISTRYINDEX, t->coref);
  }
  if (t->fnref != LUA_NOREF && t->obj->iso) {
    save_object(w, t->obj);
    luaL_unref(eu_isolate_L(t->obj->iso), LUA_REGISTRYINDEX, t->fnref);
  }
  if (w->running == t) w->running = NULL;
  free(t);
}

/* What an event is called in every run (reduce.h), and what it touches:
 * a task's events by the task's identity and their count, an alarm by its
 * object and generation, an arrival by its drive event. An answer or a
 * crash for a task a reset has ended is named by the task that sent it. */
static void identify(eu_world *w, eu_event *ev, const eu_task *from) {
  eu_task *t;
  switch (ev->kind) {
  case EU_EV_START:
  case EU_EV_RESUME:
  case EU_EV_CRASH:
    if ((t = find_task(w, ev->a)) != NULL) {
      ev->id = eu_mix64(t->ident, ev->kind == EU_EV_START ? 1 : (uint64_t)(16 + 2 * t->wakes++ + (ev->kind == EU_EV_CRASH)));
      ev->res = t->obj->res;
    } else if (from) {
      ev->id = eu_mix64(from->ident, ev->kind == EU_EV_CRASH ? 0xc4a5u : 0xa115u);
      ev->res = from->origin_res;
    }
    break;
  case EU_EV_ALARM:
    if (ev->a >= 0 && ev->a < w->nobjects) {
      ev->res = w->objects[ev->a]->res;
      ev->id = eu_mix64(ev->res, eu_mix64(0xa1a3u, (uint64_t)ev->b));
    }
    break;
  case EU_EV_ARRIVE:
    ev->id = eu_mix64(0xa77u, (uint64_t)ev->a);
    ev->res = EU_RES_DRIVE;
    break;
  case EU_EV_GATE:
    if (ev->a >= 0 && ev->a < w->nobjects) {
      ev->res = w->objects[ev->a]->res;
      ev->id = eu_mix64(ev->res, eu_mix64(0x6a7eu, (uint64_t)ev->b));
    }
    break;
  case EU_EV_CRON:
    /* a cron's firing is named by the cron, its due time and its retry */
    ev->id = eu_mix64(0xc407u, eu_mix64((uint64_t)ev->a, (uint64_t)ev->b));
    ev->res = EU_RES_WORKER;
    break;
  }
  ev->creator = w->step_open ? w->step : -1;
}

static int push_event_from(eu_world *w, int kind, int64_t at, int64_t a, int64_t b, char *data,
                           size_t len, const eu_task *from) {
  eu_event ev;
  int rc;
  memset(&ev, 0, sizeof ev);
  ev.at = at;
  ev.kind = kind;
  ev.a = a;
  ev.b = b;
  ev.data = data;
  ev.len = len;
  identify(w, &ev, from);
  rc = eu_sched_push(&w->sched, &ev);
  if (rc != EU_OK) free(data);
  return rc;
}

static int push_event(eu_world *w, int kind, int64_t at, int64_t a, int64_t b, char *data,
                      size_t len) {
  return push_event_from(w, kind, at, a, b, data, len, NULL);
}

static int error_payload(eu_world *w, const char *name, const char *message, int remote,
                         int retryable, char **data, size_t *len);

#define EU_LOST_MESSAGE "Network connection lost."
/* How long a caller waits for a service outside that never answers
 * (fetch-timeout): serve's --fetch-timeout default. */
#define EU_FETCH_TIMEOUT_MS 30000
#define EU_OVERLOADED_MESSAGE "Durable Object is overloaded. Too many requests queued."

/* Sends a finished task's answer to whoever waits for it. Takes data. */
/* Who waits for t's answer: the calling invocation's lifeline, or the drive
 * event's (the client of "req-1"). */
static const char *caller_lifeline(eu_world *w, eu_task *t) {
  eu_task *c;
  if (t->origin_task && (c = find_task(w, t->origin_task)) != NULL) return c->obj->tag;
  if (t->origin_slot && t->root >= 0 && t->root < w->nroots) return w->roots[t->root].event;
  return NULL;
}

/* The answer in the event log; lost says it never arrives. */
static void record_answer(eu_world *w, eu_task *t, const char *data, size_t len, int lost) {
  const char *to = caller_lifeline(w, t);
  eu_buf tmp;
  if (!TRACING(w) || !to) return;
  eu_buf_init(&tmp);
  record(w, lost ? "lost" : "answer", t->obj->tag, to, "%s",
         t->kind == EU_TASK_FETCH ? fmtfetch(w, &tmp, data, len, 1) : fmtvals(&tmp, data, len, 1));
  eu_buf_free(&tmp);
}

static void answer(eu_world *w, eu_task *t, char *data, size_t len) {
  record_answer(w, t, data, len, t->lose_answer);
  if (t->lose_answer == 2) {  /* its caller has timed out, or will */
    free(data);
    t->lose_answer = 0;
    trace(w, "%s  its answer never comes back", t->label);
    return;
  }
  if (t->lose_answer) {
    /* The work is done and committed; the caller sees what it would see if
     * the call had never arrived. */
    free(data);
    data = NULL;
    t->lose_answer = 0;
    trace(w, "%s  its answer is lost", t->label);
    if (error_payload(w, "Error", EU_LOST_MESSAGE, 0, 1, &data, &len) != EU_OK) return;
  }
  if (t->origin_task) {
    if (t->crash_caller) {
      free(data);
      push_event_from(w, EU_EV_CRASH, w->sched.now, t->origin_task, 0, NULL, 0, t);
      return;
    }
    push_event_from(w, EU_EV_RESUME, w->sched.now, t->origin_task, 0, data, len, t);
  } else if (t->origin_slot > 0 && t->origin_slot <= w->nslots &&
             w->slots[t->origin_slot - 1].used) {
    eu_slot *s = &w->slots[t->origin_slot - 1];
    eu_world_touch(w, EU_RES_DRIVE, 0);  /* the drive collects it in this step, and says what that writes */
    free(s->data);
    s->data = data;
    s->len = len;
    s->done = 1;
  } else {
    free(data);
  }
}

static void answer_error(eu_world *w, eu_task *t, const char *name, const char *message,
                         int remote, int retryable) {
  char *data = NULL;
  size_t len = 0;
  if (error_payload(w, name, message, remote, retryable, &data, &len) == EU_OK)
    answer(w, t, data, len);
}

/* ---- alarms ----------------------------------------------------------- */

static void reconcile_alarm(eu_world *w, eu_object *o) {
  int has = 0, retry = 0;
  int64_t at = 0;
  if (!o->store) return;
  save_object(w, o);
  o->alarm_gen++;
  if (eu_store_get_alarm(o->store, &has, &at, &retry) != EU_OK) return;
  if (!has || o->alarm_running) return;
  push_event(w, EU_EV_ALARM, at - w->o.start_ms, o->index, o->alarm_gen, NULL, 0);
}

/* After a turn: commit or roll back, then follow the alarm if user code
 * moved it. t is the task whose turn it was (NULL for none). */
static void ws_flush(eu_world *w, int ok);

static int end_turn(eu_world *w, eu_object *o, eu_task *t, int ok, char *err, size_t errlen) {
  int rc = EU_OK, wrote = 0;
  save_object(w, o);
  if (!o->store || !eu_store_in_turn(o->store)) {
    if (w->ws_sent.n) ws_flush(w, ok);
    return EU_OK;
  }
  if (ok) {
    wrote = w->o.on_commit && eu_store_turn_wrote(o->store);
    rc = eu_store_commit(o->store);
    if (rc != EU_OK) {
      wrote = 0;
      eu_err(err, errlen, rc, "commit failed: %s", eu_store_errmsg(o->store));
      eu_store_rollback(o->store);
    }
  } else {
    eu_store_rollback(o->store);
  }
  if (w->ws_sent.n) ws_flush(w, ok && rc == EU_OK);
  if (eu_store_alarm_dirty(o->store)) {
    eu_store_clear_alarm_dirty(o->store);
    if (ok && rc == EU_OK) {
      int has = 0, retry = 0;
      int64_t at = 0;
      if (eu_store_get_alarm(o->store, &has, &at, &retry) == EU_OK) {
        if (has) trace(w, "%s  alarm set for %+.3fs", o->tag, (double)(at - now_abs(w)) / 1000.0);
        else trace(w, "%s  alarm deleted", o->tag);
        if (has) record(w, "note", o->tag, NULL, "alarm set for %+.3fs", (double)(at - now_abs(w)) / 1000.0);
        else record(w, "note", o->tag, NULL, "alarm deleted");
      }
    }
    reconcile_alarm(w, o);
  }
  if (wrote) w->o.on_commit(w->o.on_commit_ud, w, o->tag, t ? t->label : o->tag);
  return rc;
}

/* An alarm handler failed: put it back on the retry ladder, or drop it. */
static void alarm_failed(eu_world *w, eu_object *o, int failed_retry) {
  int retry = failed_retry + 1;
  save_object(w, o);
  if (!o->store) return;
  if (eu_store_touch(o->store) != EU_OK) return;
  if (retry <= EU_ALARM_MAX_RETRIES) {
    int64_t delay = (int64_t)1000 << retry;  /* 2, 4, 8, 16, 32, 64 s */
    eu_store_set_alarm(o->store, now_abs(w) + delay, retry);
    trace(w, "%s  alarm retry %d of %d in %" PRId64 "s", o->tag, retry, EU_ALARM_MAX_RETRIES,
          delay / 1000);
    record(w, "note", o->tag, NULL, "alarm retry %d in %" PRId64 "s", retry, delay / 1000);
  } else {
    eu_store_delete_alarm(o->store);
    trace(w, "%s  alarm dropped after %d retries", o->tag, EU_ALARM_MAX_RETRIES);
  }
  eu_store_commit(o->store);
  eu_store_clear_alarm_dirty(o->store);
}

/* ---- crons ------------------------------------------------------------- */

/* A cron event names the cron and the retry in a, and when the firing was
 * due (ms since 1970) in b: the retries of a firing keep its due time, as
 * controller.scheduledTime. */
#define CRON_A(i, retry) ((int64_t)(i) | (int64_t)(retry) << 16)

static int queue_cron(eu_world *w, int i, int retry, int64_t due, int64_t at) {
  return push_event(w, EU_EV_CRON, at - w->o.start_ms, CRON_A(i, retry), due, NULL, 0);
}

/* A cron invocation did not succeed. Cloudflare's runtime reports a failed
 * scheduled() as one to retry unless the handler called
 * controller.noRetry(), and documents no schedule for the retries: eutaxy
 * retries it on the ladder of alarms, 2, 4, 8, 16, 32 and 64 s, then drops
 * that firing (the next ones come as due). An outcome that was lost is
 * retried whatever the handler asked: the platform never heard it. A run
 * asked for (eu_world_run_cron) is not retried. */
static void cron_failed(eu_world *w, eu_task *t, int lost) {
  int retry = t->cron_retry + 1;
  const char *expr = w->cron_exprs[t->cron];
  if (t->cron_asked) return;
  if (t->no_retry && !lost) {
    trace(w, "%s  not retried: its handler called controller:noRetry()", t->label);
    record(w, "note", w->worker->tag, NULL, "%s not retried (noRetry)", t->label);
    if (w->o.echo_log) fprintf(stderr, "[cron %s] not retried: the handler called noRetry()\n", expr);
    return;
  }
  if (retry > EU_ALARM_MAX_RETRIES) {
    trace(w, "%s  dropped after %d retries", t->label, EU_ALARM_MAX_RETRIES);
    record(w, "note", w->worker->tag, NULL, "%s dropped after %d retries", t->label, EU_ALARM_MAX_RETRIES);
    if (w->o.echo_log) fprintf(stderr, "[cron %s] dropped after %d retries\n", expr, EU_ALARM_MAX_RETRIES);
    return;
  }
  {
    int64_t delay = (int64_t)1000 << retry;
    trace(w, "%s  retry %d of %d in %" PRId64 "s", t->label, retry, EU_ALARM_MAX_RETRIES, delay / 1000);
    record(w, "note", w->worker->tag, NULL, "%s retry %d in %" PRId64 "s", t->label, retry, delay / 1000);
    if (w->o.echo_log)
      fprintf(stderr, "[cron %s] retry %d of %d in %" PRId64 "s\n", expr, retry, EU_ALARM_MAX_RETRIES, delay / 1000);
    queue_cron(w, t->cron, retry, t->cron_due, now_abs(w) + delay);
  }
}

/* ---- the input gate ---------------------------------------------------
 *
 * ctx.blockConcurrencyWhile(fn) shuts its object's input gate for the task
 * that calls it until fn returns: fn may wait (calls, sleeps, fetches), and
 * meanwhile no other event reaches the object, neither a new call, nor the
 * answer another of its invocations waits for, nor its alarm. Such events
 * are held, in the order they came, and go on once the gate opens. If fn
 * raises, the object is reset as on Cloudflare: the calls held never start
 * and get its error, and every invocation in flight ends. A gate shut for
 * longer than EU_GATE_TIMEOUT_MS resets the object the same way (a call fn
 * makes back into its own object would otherwise wait forever). In init,
 * the runtime keeps the functions given to it and they run as the object's
 * first task (EU_TASK_BLOCK), the gate shut for them, before whatever made
 * the object is delivered. */

static int room(void **a, int n, int *cap, size_t size);

/* The object whose shut gate keeps ev from being delivered now, or NULL. */
static eu_object *gated(eu_world *w, const eu_event *ev) {
  eu_task *t;
  eu_object *o;
  switch (ev->kind) {
  case EU_EV_START:
  case EU_EV_RESUME:
  case EU_EV_CRASH:
    if (!(t = find_task(w, ev->a))) return NULL;
    o = t->obj;
    if (o->opening) return o;
    if (!o->gate) return NULL;
    /* the holder, and the branches of eutaxy.all it started, pass */
    for (; t; t = t->parent ? find_task(w, t->parent) : NULL)
      if (t->id == o->gate) return NULL;
    return o;
  case EU_EV_ALARM:
    if (ev->a < 0 || ev->a >= w->nobjects) return NULL;
    o = w->objects[ev->a];
    return o->gate || o->opening ? o : NULL;
  case EU_EV_WS_IN:
    if (ev->a < 1 || ev->a > w->nsocks) return NULL;
    o = w->objects[w->socks[ev->a - 1]->obj];
    return o->gate || o->opening ? o : NULL;
  default:
    return NULL;
  }
}

/* Keeps ev, its payload included, until o's gate opens. */
static int hold(eu_world *w, eu_object *o, const eu_event *ev) {
  if (!room((void **)&w->held, w->nheld, &w->capheld, sizeof *w->held)) return EU_ENOMEM;
  w->held[w->nheld].ev = *ev;
  w->held[w->nheld].obj = o->index;
  w->nheld++;
  return EU_OK;
}

static void finish(eu_world *w, eu_task *t, int ok, char *data, size_t len);

/* An event o held goes on now, as a new event; or, given an error (why),
 * a call that never started ends with it instead: the broken gate's, or
 * that of the store that could not be opened (the flags as answer_error's).
 * A gate's events go on at the time it opens, tied with one another and
 * with whatever else is due then (a chooser orders them, or the PRNG).
 * Kept (a store was opening), an event goes back where it was in the queue,
 * its time and its place among ties unchanged: the events held go on in
 * the order they came, before anything that came after them, as if the
 * opening had taken no time. */
static void release_held(eu_world *w, eu_event *ev, const char *why, int remote, int retryable,
                         int kept) {
  eu_task *t = ev->kind != EU_EV_ALARM ? find_task(w, ev->a) : NULL;
  if (why && ev->kind == EU_EV_START && t && !t->co) {
    free(ev->data);
    trace(w, "%s  ends: %s", t->label, why);
    answer_error(w, t, "Error", why, remote, retryable);
    finish(w, t, 0, NULL, 0);
    return;
  }
  if (kept) {  /* back where it was in the queue: its time and its place among ties */
    if (eu_sched_giveback(&w->sched, ev) != EU_OK) free(ev->data);
    return;
  }
  ev->id = eu_mix64(ev->id, 0x6a7eu);  /* another event than the one held, in every run */
  ev->creator = w->step_open ? w->step : -1;
  ev->at = w->sched.now;
  if (eu_sched_push(&w->sched, ev) != EU_OK) free(ev->data);
}

/* What o held goes on, in the order it came (why, kept: see release_held); how many. */
static int release_all(eu_world *w, eu_object *o, const char *why, int remote, int retryable,
                       int kept) {
  int i, n = 0;
  for (;;) {
    held h;
    for (i = 0; i < w->nheld && w->held[i].obj != o->index; i++) {}
    if (i == w->nheld) break;
    h = w->held[i];
    memmove(&w->held[i], &w->held[i + 1], (size_t)(w->nheld - i - 1) * sizeof *w->held);
    w->nheld--;
    n++;
    release_held(w, &h.ev, why, remote, retryable, kept);
  }
  return n;
}

/* Opens o's gate: what it held goes on (fail: the calls held end with its error). */
static void open_gate(eu_world *w, eu_object *o, int fail) {
  int n;
  o->gate = 0;
  o->gate_depth = 0;
  n = release_all(w, o, fail ? o->break_error : NULL, 1, 0, 0);
  if (n && !fail) trace(w, "%s  input gate open: %d held event%s go%s on", o->tag, n, n == 1 ? "" : "s", n == 1 ? "es" : "");
}

/* Shuts o's gate for t, and sets its time-out. */
static void shut_gate(eu_world *w, eu_object *o, eu_task *t) {
  o->gate = t->id;
  o->gate_depth = 1;
  o->gate_gen++;
  push_event(w, EU_EV_GATE, w->sched.now + EU_GATE_TIMEOUT_MS, o->index, o->gate_gen, NULL, 0);
}

static void reset_object(eu_world *w, eu_object *o, const char *why, int remote, int retryable);

/* blockConcurrencyWhile's function raised or ran too long, or ctx.abort was
 * called: the calls the gate held get the error, and the object is reset,
 * with that error to every caller of an invocation in flight on an abort. */
static void break_object(eu_world *w, eu_object *o) {
  int abort = o->breaking == EU_BREAK_ABORT;
  trace(w, "%s  %s%s", o->tag, abort ? "aborted: " : "", o->break_error);
  record(w, "note", o->tag, NULL, "%s%.150s", abort ? "aborted: " : "", o->break_error);
  if (abort && w->o.echo_log) fprintf(stderr, "[%s] aborted: %s\n", o->tag, o->break_error);
  o->breaking = EU_BREAK_NONE;
  open_gate(w, o, 1);
  if (abort) reset_object(w, o, o->break_error, 1, 0);
  else reset_object(w, o, NULL, 0, 1);
}

int eu_world_gate(lua_State *L, int op, const char *why) {
  eu_object *o = eu_isolate_ud(L);
  eu_world *w = o ? o->w : NULL;
  eu_task *t = w ? w->running : NULL;
  if (!o || o->ns < 0) return EU_EINVAL;
  if (op == EU_GATE_INIT) {
    if (t) return EU_EINVAL;
    o->init_block = 1;
    return EU_OK;
  }
  if (!t || t->obj != o || (o->gate && o->gate != t->id)) return EU_EINVAL;
  switch (op) {
  case EU_GATE_SHUT:
    if (!o->gate) {
      shut_gate(w, o, t);
      trace(w, "%s  blockConcurrencyWhile: %s takes no other event until it returns", t->label, o->tag);
    } else {
      o->gate_depth++;
    }
    return EU_OK;
  case EU_GATE_OPEN:
    if (!o->gate) return EU_EINVAL;
    if (--o->gate_depth <= 0) open_gate(w, o, 0);
    return EU_OK;
  case EU_GATE_FAIL:
    if (!o->gate) return EU_EINVAL;
    if (!o->breaking) {
      snprintf(o->break_error, sizeof o->break_error, "the object was reset: blockConcurrencyWhile's function raised %.120s",
               why ? why : "an error");
      o->breaking = EU_BREAK_GATE;
    }
    return EU_OK;
  }
  return EU_EINVAL;
}

int eu_world_abort(lua_State *L, const char *reason) {
  eu_object *o = eu_isolate_ud(L);
  eu_world *w = o ? o->w : NULL;
  eu_task *t = w ? w->running : NULL;
  if (!o || o->ns < 0 || !t || t->obj != o) return EU_EINVAL;
  if (o->breaking != EU_BREAK_ABORT)
    snprintf(o->break_error, sizeof o->break_error, "%s", reason && *reason ? reason : "the object was aborted");
  o->breaking = EU_BREAK_ABORT;
  return EU_OK;
}

/* ---- running turns ---------------------------------------------------- */

static void finish(eu_world *w, eu_task *t, int ok, char *data, size_t len) {
  eu_object *o = t->obj;
  if (t->kind == EU_TASK_BRANCH) branch_ended(w, t, ok, data, len);
  if (t->kind == EU_TASK_ALARM) {
    o->alarm_running = 0;
    if (ok && t->alarm_lost) {
      /* Committed, but the platform never learnt it finished: it runs again. */
      trace(w, "%s  its completion is lost: it will run again", t->label);
      record(w, "note", o->tag, NULL, "alarm's completion lost: it runs again");
      o->alarm_redeliveries++;
      ok = 0;
    }
    if (!ok) alarm_failed(w, o, t->alarm_retry);
    reconcile_alarm(w, o);
  } else if (t->kind == EU_TASK_SCHEDULED) {
    int lost = ok && t->cron_lost;
    if (lost) {
      /* It ran, but the platform never learnt how it went: it runs again. */
      trace(w, "%s  its outcome is lost: it will run again", t->label);
      record(w, "note", o->tag, NULL, "%s's outcome lost: it runs again", t->label);
      w->cron_counts[t->cron].redeliveries++;
    }
    if (!ok || lost) cron_failed(w, t, lost);
  }
  if (data) answer(w, t, data, len);  /* NULL: answered already (answer_error) */
  free_task(w, t);
}

/* The task's coroutine raised (or broke a rule): roll back, answer with the error. */
/* "file:line: " of the innermost Lua frame of co, or "". */
static void push_where(lua_State *L, lua_State *co) {
  lua_Debug ar;
  int level;
  for (level = 0; lua_getstack(co, level, &ar); level++) {
    if (lua_getinfo(co, "Sl", &ar) && ar.currentline > 0) {
      lua_pushfstring(L, "%s:%d: ", ar.short_src, ar.currentline);
      return;
    }
  }
  lua_pushliteral(L, "");
}

/* memory_message(co, mib): the message of a memory error raised in co. */
static int memory_message(lua_State *L) {
  lua_State *co = lua_touserdata(L, 1);
  lua_Integer mib = lua_tointeger(L, 2);
  push_where(L, co);
  lua_pushfstring(L, "memory limit exceeded: the isolate may use %I MiB", mib);
  lua_concat(L, 2);
  return 1;
}

/* traceback_of(co, msg): co's traceback under msg, or nil when msg is not a string. */
static int traceback_of(lua_State *L) {
  lua_State *co = lua_touserdata(L, 1);
  if (lua_type(L, 2) == LUA_TSTRING) luaL_traceback(L, co, lua_tostring(L, 2), 0);
  else lua_pushnil(L);
  return 1;
}

static void fail(eu_world *w, eu_task *t, lua_State *co) {
  eu_object *o = t->obj;
  lua_State *L = eu_isolate_L(o->iso);
  eu_buf b, tmp;
  char *data;
  size_t len;
  int rc;
  end_turn(w, o, NULL, 0, NULL, 0);
  /* The invocation may have filled the isolate: reporting needs a little
   * memory past the limit, and must not raise outside a protected call. */
  eu_isolate_reserve(o->iso, 1);
  lua_settop(L, 0);
  lua_rawgeti(L, LUA_REGISTRYINDEX, o->wire_error_ref);
  lua_xmove(co, L, 1);  /* the error value */
  if (lua_status(co) == LUA_ERRMEM) {
    /* Lua's own "not enough memory" says neither where nor which limit;
     * the better message needs memory, and stays Lua's when there is none. */
    lua_pushcfunction(L, memory_message);
    lua_pushlightuserdata(L, co);
    lua_pushinteger(L, (lua_Integer)(eu_isolate_mem_limit(o->iso) >> 20));
    if (lua_pcall(L, 2, 1, 0) == LUA_OK) lua_replace(L, -2);
    else lua_pop(L, 1);
  }
  lua_pushcfunction(L, traceback_of);
  lua_pushlightuserdata(L, co);
  lua_pushvalue(L, -3);
  rc = lua_pcall(L, 2, 1, 0);
  if (rc != LUA_OK) {
    lua_pop(L, 1);
    lua_pushnil(L);
  }
  rc = lua_pcall(L, 2, 1, 0);
  if (rc != LUA_OK) {
    lua_settop(L, 0);
    eu_isolate_reserve(o->iso, 0);
    answer_error(w, t, "Error", rc == LUA_ERRMEM ? "an error value that could not be reported: "
                 "out of memory" : "an error value that could not be reported", 1, 0);
    trace(w, "%s  raised an error that could not be reported", t->label);
    finish(w, t, 0, NULL, 0);
    return;
  }
  lua_pushboolean(L, 0);
  lua_insert(L, -2);
  eu_buf_init(&b);
  rc = eu_clone_encode(L, -2, 2, &b, NULL, 0);
  lua_getfield(L, -1, "name");
  lua_getfield(L, -2, "message");
  trace(w, "%s  raised %s: %.300s", t->label, lua_tostring(L, -2) ? lua_tostring(L, -2) : "Error",
        lua_tostring(L, -1) ? lua_tostring(L, -1) : "?");
  record(w, "note", o->tag, NULL, "raised %s: %.120s", lua_tostring(L, -2) ? lua_tostring(L, -2) : "Error",
         lua_tostring(L, -1) ? lua_tostring(L, -1) : "?");
  if ((t->kind == EU_TASK_FETCH && t->origin_slot) || t->kind == EU_TASK_ALARM || t->kind == EU_TASK_SCHEDULED ||
      t->kind == EU_TASK_WAIT_UNTIL || t->kind == EU_TASK_WS)
    note_uncaught(w, t->kind == EU_TASK_FETCH ? "fetch" : t->label,
                  lua_tostring(L, -2) ? lua_tostring(L, -2) : "Error",
                  lua_tostring(L, -1) ? lua_tostring(L, -1) : "?");
  if (t->kind == EU_TASK_SCHEDULED && w->o.echo_log)
    fprintf(stderr, "[cron %s] scheduled() raised %s: %s\n", w->cron_exprs[t->cron],
            lua_tostring(L, -2) ? lua_tostring(L, -2) : "Error", lua_tostring(L, -1) ? lua_tostring(L, -1) : "?");
  if (t->kind == EU_TASK_WS && w->o.echo_log)
    fprintf(stderr, "[%s] %s raised %s: %s\n", o->tag, t->method,
            lua_tostring(L, -2) ? lua_tostring(L, -2) : "Error", lua_tostring(L, -1) ? lua_tostring(L, -1) : "?");
  if (t->kind == EU_TASK_WAIT_UNTIL && w->o.echo_log)
    fprintf(stderr, "[%s] waitUntil raised %s: %s\n", o->tag,
            lua_tostring(L, -2) ? lua_tostring(L, -2) : "Error", lua_tostring(L, -1) ? lua_tostring(L, -1) : "?");
  lua_settop(L, 0);
  eu_isolate_reserve(o->iso, 0);
  if (rc != EU_OK) {
    eu_buf_free(&b);
    answer_error(w, t, "Error", "an error value that could not be cloned", 1, 0);
    finish(w, t, 0, NULL, 0);
    return;
  }
  data = eu_buf_take(&b, &len);
  (void)tmp;
  finish(w, t, 0, data, len);
}

/* Its turn committed, t waits at a yield point, where its object may be
 * reset (a deploy, a limit, a machine lost): every invocation in flight in
 * it ends, and the calls they wait for run on at their callees. The
 * worker's request ends alone: its client went away, and the answer it
 * would have sent is lost. */
static void strike_waiting(eu_world *w, eu_task *t) {
  char label[sizeof t->wait_point];
  fault_site site;
  memcpy(label, t->wait_point, sizeof label);
  t->wait_point[0] = '\0';
  memset(&site, 0, sizeof site);
  site.obj = t->obj->ns >= 0 ? t->obj : NULL;
  site.method = t->method;
  site.when = EU_ARM_WAITING;
  if (fault_on(w, EU_FAULT_BIT(EU_FAULT_RESET), label, t->obj->tag, &site) != EU_FAULT_RESET) return;
  if (t->obj->ns >= 0) {
    eu_world_reset(w, t->obj);
    return;
  }
  if (t->kind == EU_TASK_SCHEDULED) {
    /* The machine it ran on went away: the invocation failed. */
    trace(w, "%s  ends: the worker went away while it waited", t->label);
    record(w, "note", t->obj->tag, NULL, "%s ends: the worker went away", t->label);
    answer_error(w, t, "Error", "the scheduled invocation ended: the worker went away while it waited", 0, 1);
    cron_failed(w, t, 0);
    free_task(w, t);
    return;
  }
  trace(w, "%s  ends: its client went away while it waited", t->label);
  record(w, "note", t->obj->tag, NULL, "%s ends: its client went away", t->label);
  if (t->origin_slot > 0 && t->origin_slot <= w->nslots && w->slots[t->origin_slot - 1].used) {
    eu_slot *s = &w->slots[t->origin_slot - 1];
    eu_world_touch(w, EU_RES_DRIVE, 0);  /* the drive collects it in this step, and says what that writes */
    free(s->data);
    s->data = NULL;  /* no answer: the client is gone */
    s->len = 0;
    s->done = 1;
  } else {
    answer_error(w, t, "Error", "the invocation ended: its client went away", 0, 1);
  }
  free_task(w, t);
}

static void turn(eu_world *w, eu_task *t, int nargs);
static int busy(eu_world *w, eu_object *o);

/* A turn, and after it, if the invocation ended while others of its object
 * still wait at yield points, the choice of a reset there: their wait goes
 * on past this turn's commit. (An invocation that yields is struck at its
 * own yield; one that ends with none left waiting, before the next call.) */
static void run_turn(eu_world *w, eu_task *t, int nargs) {
  eu_object *o = t->obj;
  int64_t id = t->id;
  char label[EU_LABEL + 120], method[sizeof t->method];
  fault_site site;
  label[0] = '\0';
  memcpy(method, t->method, sizeof method);  /* t may be gone after its turn */
  if (o->ns >= 0 && may_fault(w, EU_FAULT_BIT(EU_FAULT_RESET))) {
    char who[EU_LABEL];
    if (t->kind == EU_TASK_ALARM) snprintf(who, sizeof who, "%s", t->label);
    else fault_label(w, who, sizeof who, t->root, t->effect, o->ns, t->method);
    snprintf(label, sizeof label, "%.120s ended while %.60s waits", who, o->tag);
  }
  turn(w, t, nargs);
  if (o->breaking) {
    break_object(w, o);
    return;
  }
  if (!label[0] || w->stopped || find_task(w, id) || !o->iso || !busy(w, o)) return;
  memset(&site, 0, sizeof site);
  site.obj = o;
  site.method = method;
  site.when = EU_ARM_WAITING;
  if (fault_on(w, EU_FAULT_BIT(EU_FAULT_RESET), label, o->tag, &site) == EU_FAULT_RESET) eu_world_reset(w, o);
}

/* A coroutine of a task: its stack belongs to one invocation. */
static int task_thread(void *ud, lua_State *th) {
  eu_world *w = ud;
  eu_task *t;
  for (t = w->tasks; t; t = t->next)
    if (t->co == th) return 1;
  return 0;
}

static void turn_body(eu_world *w, eu_task *t, int nargs);
static void visit_replied(eu_world *w, eu_task *t);

/* Under reduction, a worker turn writes the worker's isolate only when
 * what outlives it changed (heapprint.h); any other is a read. */
static void turn(eu_world *w, eu_task *t, int nargs) {
  eu_object *o = t->obj;
  uint64_t print;
  if (!w->step_open || o != w->worker || !o->iso) {
    turn_body(w, t, nargs);
    return;
  }
  if (!w->worker_printed) {
    if (!w->worker_print0) w->worker_print0 = eu_heapprint(eu_isolate_L(o->iso), task_thread, w);
    w->worker_print = w->worker_print0;
    w->worker_printed = 1;
  }
  turn_body(w, t, nargs);
  print = eu_heapprint(eu_isolate_L(o->iso), task_thread, w);
  if (print == 0 || print != w->worker_print) eu_fp_add(&w->fp, EU_RES_WORKER, 1);
  w->worker_print = print;
}

static void turn_body(eu_world *w, eu_task *t, int nargs) {
  lua_State *co = t->co;
  eu_object *o = t->obj;
  int status, nres = 0;
  char err[EU_ERRLEN];
  w->running = t;
  o->last_active = now_abs(w);
  eu_isolate_arm(co, w->o.cpu_limit);
  status = lua_resume(co, NULL, nargs, &nres);
  eu_sandbox_turn_over();
  w->running = NULL;
  if (o->breaking && (status == LUA_OK || status == LUA_YIELD || o->breaking == EU_BREAK_ABORT)) {
    /* blockConcurrencyWhile's function raised and the error was caught, or
     * the invocation called ctx.abort: it ends with that error all the
     * same, and the object is reset (run_turn). */
    lua_settop(co, 0);
    t->waiting = EU_WAIT_NONE;
    end_turn(w, o, NULL, 0, NULL, 0);
    trace(w, "%s  ends: %s", t->label, o->break_error);
    answer_error(w, t, "Error", o->break_error, 1, 0);
    finish(w, t, 0, NULL, 0);
    return;
  }
  if (status == LUA_YIELD) {
    if (t->waiting == EU_WAIT_NONE) {
      const char *stop = eu_isolate_stopped(o->iso);  /* the CPU limit */
      lua_settop(co, 0);
      lua_pushstring(co, stop ? stop : "coroutine.yield() cannot suspend an invocation: only RPC calls, "
                                       "stub:fetch and eutaxy.sleep wait");
      fail(w, t, co);
      return;
    }
    lua_settop(co, 0);
    /* a request of runInDurableObject's function that failed leaves nothing behind */
    if (end_turn(w, o, t, !t->visit_failed, err, sizeof err) != EU_OK) {
      /* The output gate could not open: the invocation cannot go on. */
      t->waiting = EU_WAIT_NONE;
      trace(w, "%s  %s", t->label, err);
      answer_error(w, t, "Error", err, 0, 1);
      finish(w, t, 0, NULL, 0);
      return;
    }
    if (t->kind == EU_TASK_VISIT && t->waiting == EU_WAIT_HOST) visit_replied(w, t);
    if (t->wait_point[0] && !w->stopped) strike_waiting(w, t);
    return;
  }
  if (status != LUA_OK) {
    fail(w, t, co);
    return;
  }
  /* Returned: answer true and the results (a cron's firing has no one to
   * answer: what its handler returns is dropped, whatever it is). */
  if ((t->kind == EU_TASK_SCHEDULED || t->kind == EU_TASK_WAIT_UNTIL || t->kind == EU_TASK_BLOCK ||
       t->kind == EU_TASK_BRANCH || t->kind == EU_TASK_WS) && !t->origin_slot) {
    lua_settop(co, 0);
    nres = 0;
  }
  {
    eu_buf b, tmp;
    char *data;
    size_t len;
    int rc;
    lua_pushboolean(co, 1);
    lua_rotate(co, -(nres + 1), 1);
    eu_buf_init(&b);
    rc = eu_clone_encode(co, -(nres + 1), nres + 1, &b, err, sizeof err);
    if (rc != EU_OK) {
      /* again without the ok flag, so the message counts results from 1 */
      eu_buf_reset(&b);
      eu_clone_encode(co, -nres, nres, &b, err, sizeof err);
    }
    lua_settop(co, 0);
    if (end_turn(w, o, t, 1, err, sizeof err) != EU_OK) {
      eu_buf_free(&b);
      trace(w, "%s  %s", t->label, err);
      answer_error(w, t, "Error", err, 0, 1);
      finish(w, t, 0, NULL, 0);
      return;
    }
    if (rc != EU_OK) {
      char msg[EU_ERRLEN + 64];
      eu_buf_free(&b);
      snprintf(msg, sizeof msg, "the result of %s cannot be cloned: %.400s",
               t->method[0] ? t->method : "the invocation", err);
      trace(w, "%s  raised DataCloneError: %s", t->label, msg);
      answer_error(w, t, "DataCloneError", msg, 1, 0);
      finish(w, t, 0, NULL, 0);
      return;
    }
    data = eu_buf_take(&b, &len);
    eu_buf_init(&tmp);
    if (TRACING(w)) {
      if (t->kind == EU_TASK_ALARM) {
        trace(w, "%s  done", t->label);
        record(w, "note", o->tag, NULL, "alarm done");
      } else if (t->kind == EU_TASK_SCHEDULED || t->kind == EU_TASK_WAIT_UNTIL || t->kind == EU_TASK_BLOCK ||
                 t->kind == EU_TASK_BRANCH || t->kind == EU_TASK_WS || t->kind == EU_TASK_VISIT) {
        trace(w, "%s  done", t->label);
        record(w, "note", o->tag, NULL, "%s done", t->label);
      }
      else if (t->kind == EU_TASK_FETCH) trace(w, "%s  answered %s", t->label, fmtfetch(w, &tmp, data, len, 1));
      else trace(w, "%s  returned %s", t->label, fmtvals(&tmp, data, len, 1));
    }
    eu_buf_free(&tmp);
    finish(w, t, 1, data, len);
  }
}

static const char *kind_name(int kind) {
  switch (kind) {
  case EU_TASK_FETCH: return "fetch";
  case EU_TASK_ALARM: return "alarm";
  case EU_TASK_SCHEDULED: return "scheduled";
  case EU_TASK_WAIT_UNTIL: return "run";
  case EU_TASK_BRANCH: return "run";
  case EU_TASK_BLOCK: return "block";
  case EU_TASK_WS: return "ws";
  case EU_TASK_VISIT: return "visit";
  default: return "call";
  }
}

/* EU_EV_START: construct the object if needed, start the coroutine. */
/* Whether an invocation is under way in the object (started, not finished). */
static int busy(eu_world *w, eu_object *o) {
  eu_task *t;
  for (t = w->tasks; t; t = t->next)
    if (t->obj == o && t->co) return 1;
  return 0;
}

/* Building a task's arguments allocates in its isolate, between turns,
 * outside any Lua call: a failed allocation there would abort the process.
 * So it runs as a C function under lua_pcall on the isolate's main thread,
 * which then hands the values to the task's coroutine. */
typedef struct decode_job {
  eu_task *t;
  const char *data;
  size_t len;
  int n, rc;
  char *err;
  size_t errlen;
} decode_job;

/* A new coroutine for the task, with dispatch, the kind of the task and its
 * arguments (the alarm's info, or data decoded) on it; j->n arguments. */
static int push_task(lua_State *L) {
  decode_job *j = lua_touserdata(L, 1);
  eu_task *t = j->t;
  lua_State *co;
  int ref;
  lua_settop(L, 0);
  co = lua_newthread(L);
  lua_rawgeti(L, LUA_REGISTRYINDEX, t->obj->dispatch_ref);
  lua_pushstring(L, kind_name(t->kind));
  j->n = 0;
  if (t->kind == EU_TASK_ALARM) {
    lua_createtable(L, 0, 2);
    lua_pushinteger(L, t->alarm_retry);
    lua_setfield(L, -2, "retryCount");
    lua_pushboolean(L, t->alarm_retry > 0);
    lua_setfield(L, -2, "isRetry");
    j->n = 1;
  } else if (t->kind == EU_TASK_SCHEDULED) {
    lua_pushstring(L, t->obj->w->cron_exprs[t->cron]);
    lua_pushinteger(L, (lua_Integer)t->cron_due);
    j->n = 2;
  } else if (t->kind == EU_TASK_WS) {
    /* the socket, then the message and whether it is binary, or the close's
     * code, reason and whether it was clean */
    lua_pushinteger(L, (lua_Integer)t->sock);
    if (t->ws_op == EU_WS_TEXT || t->ws_op == EU_WS_BINARY) {
      lua_pushliteral(L, "message");
      lua_pushlstring(L, j->data ? j->data : "", j->len);
      lua_pushboolean(L, t->ws_op == EU_WS_BINARY);
      j->n = 4;
    } else if (t->ws_op == EU_WS_ERROR) {
      lua_pushliteral(L, "error");
      lua_pushlstring(L, j->data ? j->data : "", j->len);
      j->n = 3;
    } else {
      lua_pushliteral(L, "close");
      lua_pushinteger(L, t->ws_code);
      lua_pushlstring(L, j->data ? j->data : "", j->len);
      lua_pushboolean(L, t->ws_op == EU_WS_CLOSE);
      j->n = 5;
    }
  } else if (t->kind == EU_TASK_WAIT_UNTIL || t->kind == EU_TASK_BRANCH) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, t->fnref);  /* the function, now the coroutine's */
    luaL_unref(L, LUA_REGISTRYINDEX, t->fnref);
    t->fnref = LUA_NOREF;
    j->n = 1;
  } else if (j->data) {
    j->rc = eu_clone_decode(L, j->data, j->len, &j->n, j->err, j->errlen);
    if (j->rc != EU_OK) return 0;
  }
  if (!lua_checkstack(co, j->n + 2)) return luaL_error(L, "not enough memory");
  lua_xmove(L, co, j->n + 2);
  ref = luaL_ref(L, LUA_REGISTRYINDEX);  /* the thread, left alone at 1 */
  t->co = co;
  t->coref = ref;
  return 0;
}

/* The values of a suspended task's resumption, on its coroutine; j->n of
 * them. Data that does not decode resumes it with false and the message. */
static int push_resume(lua_State *L) {
  decode_job *j = lua_touserdata(L, 1);
  lua_settop(L, 0);
  if (eu_clone_decode(L, j->data, j->len, &j->n, j->err, j->errlen) != EU_OK) {
    lua_settop(L, 0);
    lua_pushboolean(L, 0);
    lua_pushstring(L, j->err);
    j->n = 2;
  }
  if (!lua_checkstack(j->t->co, j->n)) return luaL_error(L, "not enough memory");
  lua_xmove(L, j->t->co, j->n);
  return 0;
}

/* Runs push (push_task or push_resume) under lua_pcall on L. EU_OK with
 * *n values, a decoding error, or EU_ENOMEM when Lua raised (the only
 * thing it can raise there), each with err set. */
static int protected_decode(lua_State *L, lua_CFunction push, eu_task *t, const char *data,
                            size_t len, int *n, char *err, size_t errlen) {
  decode_job j;
  j.t = t;
  j.data = data;
  j.len = len;
  j.n = 0;
  j.rc = EU_OK;
  j.err = err;
  j.errlen = errlen;
  lua_pushcfunction(L, push);
  lua_pushlightuserdata(L, &j);
  if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
    j.rc = eu_err(err, errlen, EU_ENOMEM, "out of memory starting or resuming %s: %s",
                  t->label, lua_tostring(L, -1) ? lua_tostring(L, -1) : "not enough memory");
    lua_pop(L, 1);
  }
  *n = j.n;
  return j.rc;
}

static void start_task(eu_world *w, eu_task *t, const char *data, size_t len);

/* init gave blockConcurrencyWhile functions: they run first, as a task of
 * their own with the gate shut for it, and t's start is held behind them.
 * 0 when that cannot be arranged (memory): t then starts at once. */
static int hold_for_init(eu_world *w, eu_object *o, eu_task *t, const char *data, size_t len) {
  eu_event ev;
  eu_task *u;
  char label[EU_LABEL];
  o->init_block = 0;
  memset(&ev, 0, sizeof ev);
  ev.kind = EU_EV_START;
  ev.a = t->id;
  ev.at = w->sched.now;
  ev.id = eu_mix64(t->ident, 1);
  ev.res = o->res;
  ev.creator = w->step_open ? w->step : -1;
  ev.len = len;
  if (data && !(ev.data = dupmem(data, len))) return 0;
  snprintf(label, sizeof label, "%.100s init", o->tag);
  if (!(u = new_task(w, EU_TASK_BLOCK, o, "blockConcurrencyWhile", label))) {
    free(ev.data);
    return 0;
  }
  u->ident = eu_mix64(t->ident, 0xb10cu);
  u->root = t->root;
  u->effect = t->effect;
  if (hold(w, o, &ev) != EU_OK) {
    free(ev.data);
    free_task(w, u);
    return 0;
  }
  shut_gate(w, o, u);
  trace(w, "%s  held: init's blockConcurrencyWhile runs first", t->label);
  start_task(w, u, NULL, 0);
  return 1;
}

static void start_task(eu_world *w, eu_task *t, const char *data, size_t len) {
  eu_object *o = t->obj;
  lua_State *L;
  int n = 0, rc, fault;
  unsigned kinds;
  char err[EU_ERRLEN];
  save_object(w, o);
  if ((t->kind == EU_TASK_WAIT_UNTIL || t->kind == EU_TASK_BRANCH) && !o->iso) {  /* its function went with the isolate */
    trace(w, "%s  dropped: its object was reset", t->label);
    free_task(w, t);
    return;
  }
  /* Between invocations an object may be reset: in-memory state lost. A
   * waitUntil's function lives in the isolate: a reset before it starts is
   * one at the end of the invocation that asked for it. */
  if (o->iso && o->ns >= 0 && may_fault(w, EU_FAULT_BIT(EU_FAULT_RESET) | EU_FAULT_BIT(EU_FAULT_HIBERNATE)) &&
      !busy(w, o) && t->kind != EU_TASK_WAIT_UNTIL && t->kind != EU_TASK_BLOCK && t->kind != EU_TASK_BRANCH) {
    char label[EU_LABEL];
    fault_site site;
    if (t->kind == EU_TASK_ALARM || t->kind == EU_TASK_VISIT) snprintf(label, sizeof label, "%s", t->label);
    else fault_label(w, label, sizeof label, t->root, t->effect, o->ns, t->method);
    kinds = EU_FAULT_BIT(EU_FAULT_RESET);
    if (eu_world_ws_live(w, o)) kinds |= EU_FAULT_BIT(EU_FAULT_HIBERNATE);
    memset(&site, 0, sizeof site);
    site.obj = o;
    site.method = t->method;
    site.when = EU_ARM_BEFORE;
    fault = fault_on(w, kinds, label, o->tag, &site);
    if (fault == EU_FAULT_RESET) {
      eu_world_reset(w, o);
      if (t->kind == EU_TASK_WS) {
        /* its socket went with the reset: the event has no one to reach */
        trace(w, "%s  dropped: its object was reset", t->label);
        free_task(w, t);
        return;
      }
    } else if (fault == EU_FAULT_HIBERNATE) {
      trace(w, "%s  hibernates: in-memory state lost, its WebSockets stay open", o->tag);
      record(w, "note", o->tag, NULL, "hibernates: in-memory state lost, WebSockets kept");
      eu_world_touch(w, o->res, 1);
      close_isolate(w, o);
      note_resident(w, o);
    }
  }
  if (!o->iso) {
    if (o->ns >= 0 && !eu_object_store(w, o, err, sizeof err)) {
      trace(w, "%s  %s", t->label, err);
      answer_error(w, t, "Error", err, 0, 1);
      finish(w, t, 0, NULL, 0);
      return;
    }
    if (construct(w, o, err, sizeof err) != EU_OK) {
      end_turn(w, o, NULL, 0, NULL, 0);
      trace(w, "%s  constructing %s failed: %s", t->label, o->tag, err);
      answer_error(w, t, "Error", err, 1, 0);
      finish(w, t, 0, NULL, 0);
      return;
    }
  }
  /* What init wrote is its own unit, committed before the first invocation runs. */
  if (end_turn(w, o, t, 1, err, sizeof err) != EU_OK) {
    trace(w, "%s  %s", t->label, err);
    answer_error(w, t, "Error", err, 0, 1);
    finish(w, t, 0, NULL, 0);
    return;
  }
  if (o->init_block && hold_for_init(w, o, t, data, len)) return;
  L = eu_isolate_L(o->iso);
  rc = protected_decode(L, push_task, t, data, len, &n, err, sizeof err);
  if (rc != EU_OK) {
    trace(w, "%s  %s", t->label, err);
    answer_error(w, t, "Error", err, 0, rc == EU_ENOMEM);
    finish(w, t, 0, NULL, 0);
    return;
  }
  if (t->kind == EU_TASK_ALARM) {
    /* getAlarm() is nil while the handler runs, unless it sets a new one. */
    if (eu_store_touch(o->store) == EU_OK) {
      eu_store_delete_alarm(o->store);
      eu_store_clear_alarm_dirty(o->store);
    }
  }
  run_turn(w, t, n + 1);
}

static void resume_task(eu_world *w, eu_task *t, const char *data, size_t len) {
  int n = 0;
  char err[EU_ERRLEN];
  save_object(w, t->obj);
  t->waiting = EU_WAIT_NONE;
  if (protected_decode(eu_isolate_L(t->obj->iso), push_resume, t, data, len, &n, err,
                       sizeof err) != EU_OK) {
    /* Not even the error can be handed over: the invocation cannot go on. */
    trace(w, "%s  %s", t->label, err);
    answer_error(w, t, "Error", err, 0, 1);
    finish(w, t, 0, NULL, 0);
    return;
  }
  run_turn(w, t, n);
}

static void fire_alarm(eu_world *w, eu_object *o, int64_t gen) {
  int has = 0, retry = 0, fault, cap;
  unsigned kinds;
  fault_site site;
  int64_t at = 0;
  eu_task *t;
  char label[EU_LABEL];
  if (gen != o->alarm_gen || o->alarm_running) return;
  save_object(w, o);
  if (!o->store) {
    /* Evicted since the alarm was scheduled: its database comes back. */
    char err[EU_ERRLEN];
    if (!eu_object_store(w, o, err, sizeof err)) {
      trace(w, "%s  alarm not fired: %s", o->tag, err);
      if (w->o.echo_log) fprintf(stderr, "[%s] alarm not fired: %s\n", o->tag, err);
      return;
    }
  }
  if (eu_store_get_alarm(o->store, &has, &at, &retry) != EU_OK || !has) return;
  if (at > now_abs(w)) {
    reconcile_alarm(w, o);
    return;
  }
  cap = w->o.alarm_caps && o->ns >= 0 ? w->o.alarm_caps[o->ns] : 0;
  if (cap > 0 && o->alarm_firings >= cap) {
    /* A bound of the run, not a behaviour of the object: the alarm stays set. */
    w->capped = 1;
    trace(w, "%s  alarm not fired: alarmsPerObject (%d) reached", o->tag, cap);
    return;
  }
  o->alarm_firings++;
  snprintf(label, sizeof label, "alarm %.100s#%d", o->tag, o->alarm_firings);
  t = new_task(w, EU_TASK_ALARM, o, "alarm", label);
  if (!t) return;
  t->ident = eu_mix64(o->res, eu_mix64(0xa1a4u, (uint64_t)o->alarm_firings));
  {
    /* labels read "alarm DO:POOL(pool)#2 effect #0": the firing is the delivery */
    char event[EU_LABEL];
    snprintf(event, sizeof event, "alarm %.100s", o->tag);
    t->root = new_root(w, event, o->alarm_firings);
  }
  t->alarm_retry = retry;
  o->alarm_running = 1;
  if (retry) trace(w, "%s  fires (retry %d)", label, retry);
  else trace(w, "%s  fires", label);
  if (retry) record(w, "alarm", o->tag, NULL, "alarm #%d fires (retry %d)", o->alarm_firings, retry);
  else record(w, "alarm", o->tag, NULL, "alarm #%d fires", o->alarm_firings);
  kinds = EU_FAULT_BIT(EU_FAULT_ALARM_FAIL);
  if (o->alarm_redeliveries < w->o.max_redeliveries) kinds |= EU_FAULT_BIT(EU_FAULT_ALARM_LOST);
  memset(&site, 0, sizeof site);
  site.obj = o;
  site.method = "alarm";
  site.also = EU_FAULT_BIT(EU_FAULT_ALARM_LOST);
  fault = fault_on(w, kinds, label, o->tag, &site);
  if (fault == EU_FAULT_ALARM_FAIL) {
    /* It threw before its first commit: nothing it did is kept. */
    o->alarm_running = 0;
    alarm_failed(w, o, retry);
    free_task(w, t);
    reconcile_alarm(w, o);
    return;
  }
  t->alarm_lost = fault == EU_FAULT_ALARM_LOST;
  start_task(w, t, NULL, 0);
}

/* A new scheduled invocation of cron i, due at due (ms since 1970). */
static eu_task *cron_task(eu_world *w, int i, int retry, int64_t due) {
  char label[EU_LABEL], event[32];
  int runs = ++w->cron_counts[i].runs;
  eu_task *t;
  snprintf(event, sizeof event, "cron-%d", i + 1);
  snprintf(label, sizeof label, "%s#%d", event, runs);
  if (!(t = new_task(w, EU_TASK_SCHEDULED, w->worker, "scheduled", label))) return NULL;
  /* labels read "cron-1#2 effect #0": the invocation is the delivery */
  t->root = new_root(w, event, runs);
  t->cron = i;
  t->cron_retry = retry;
  t->cron_due = due;
  return t;
}

/* Cron i is due (again, for a retry): the worker's scheduled() runs, its
 * next firing is queued, and the firing is a fault point. */
static void fire_cron(eu_world *w, int i, int retry, int64_t due) {
  char iso[24];
  const char *expr;
  int64_t next;
  unsigned kinds;
  int fault;
  eu_task *t;
  fault_site site;
  if (i < 0 || i >= w->ncrons) return;
  expr = w->cron_exprs[i];
  /* the next firing is due whatever becomes of this one */
  if (retry == 0 && (next = eu_cron_next(&w->crons[i], due)) >= 0 && next <= w->cron_last[i])
    queue_cron(w, i, 0, next, next);
  if (!(t = cron_task(w, i, retry, due))) return;
  t->ident = eu_mix64(eu_mix64(0xc408u + (uint64_t)i, (uint64_t)due), (uint64_t)retry);
  eu_cron_iso(due, iso);
  if (retry) trace(w, "%s  fires: %s, due %s (retry %d)", t->label, expr, iso, retry);
  else trace(w, "%s  fires: %s, due %s", t->label, expr, iso);
  if (retry) record(w, "alarm", w->worker->tag, NULL, "%s fires: %s (retry %d)", t->label, expr, retry);
  else record(w, "alarm", w->worker->tag, NULL, "%s fires: %s", t->label, expr);
  kinds = EU_FAULT_BIT(EU_FAULT_CRON_FAIL);
  if (w->cron_counts[i].redeliveries < w->o.max_redeliveries) kinds |= EU_FAULT_BIT(EU_FAULT_CRON_LOST);
  memset(&site, 0, sizeof site);
  site.method = "scheduled";
  site.also = EU_FAULT_BIT(EU_FAULT_CRON_LOST);
  fault = fault_on(w, kinds, t->label, w->worker->tag, &site);
  if (fault == EU_FAULT_CRON_FAIL) {
    /* The platform failed before the handler ran: nothing of it happened. */
    cron_failed(w, t, 0);
    free_task(w, t);
    return;
  }
  t->cron_lost = fault == EU_FAULT_CRON_LOST;
  start_task(w, t, NULL, 0);
}

static void ws_dispatch_in(eu_world *w, int64_t id);
static void ws_dispatch_due(eu_world *w, int64_t id);

static void dispatch(eu_world *w, eu_event *ev) {
  eu_task *t;
  eu_object *g;
  if (ev->kind == EU_EV_START && w->o.store_opener && (t = find_task(w, ev->a)) != NULL) {
    /* a call to an object with no store: the host may open it elsewhere */
    eu_object *o = t->obj;
    if (o->ns >= 0 && !o->store && !o->iso && !o->opening && w->o.store_opener(w->o.store_ud, o, o->ns, o->hex))
      o->opening = 1;
  }
  if ((g = gated(w, ev)) != NULL) {
    t = ev->kind != EU_EV_ALARM ? find_task(w, ev->a) : NULL;
    if (hold(w, g, ev) == EU_OK) {
      ev->data = NULL;  /* the held event's now */
      trace(w, "%s  held: %s %s", t ? t->label : g->tag, g->tag,
            g->opening ? "is opening its database" : "is in blockConcurrencyWhile");
    }
    return;
  }
  switch (ev->kind) {
  case EU_EV_START:
    if ((t = find_task(w, ev->a)) != NULL) start_task(w, t, ev->data, ev->len);
    break;
  case EU_EV_RESUME:
    /* A task that a reset killed is gone: its wake-up has no one to wake. */
    if ((t = find_task(w, ev->a)) != NULL && t->co) resume_task(w, t, ev->data, ev->len);
    break;
  case EU_EV_ALARM:
    if (ev->a >= 0 && ev->a < w->nobjects) fire_alarm(w, w->objects[ev->a], ev->b);
    break;
  case EU_EV_CRASH:
    /* The caller crashes right after the answer came: an object loses its
     * isolate with everything in flight; a worker invocation just dies. */
    if ((t = find_task(w, ev->a)) != NULL && t->co) {
      trace(w, "%s  crashes right after the answer", t->label);
      record(w, "note", t->obj->tag, NULL, "crashes right after the answer");
      if (t->obj->ns >= 0) {
        eu_world_reset(w, t->obj);
      } else {
        answer_error(w, t, "Error", "the worker crashed", 0, 1);
        if (t->kind == EU_TASK_SCHEDULED) cron_failed(w, t, 0);
        free_task(w, t);
      }
    }
    break;
  case EU_EV_ARRIVE:
    /* The drive starts what arrived: it alone knows whether a call may be in flight now. */
    w->arrived = (int)ev->a + 1;
    break;
  case EU_EV_CRON:
    fire_cron(w, (int)(ev->a & 0xffff), (int)(ev->a >> 16), ev->b);
    break;
  case EU_EV_WS_IN:
    ws_dispatch_in(w, ev->a);
    break;
  case EU_EV_WS_DUE:
    ws_dispatch_due(w, ev->a);
    break;
  case EU_EV_GATE:
    if (ev->a >= 0 && ev->a < w->nobjects) {
      eu_object *o = w->objects[ev->a];
      int due = o->gate && o->gate_gen == ev->b;  /* else it opened since */
      eu_world_touch(w, o->res, due);
      if (!due) break;
      snprintf(o->break_error, sizeof o->break_error,
               "the object was reset: blockConcurrencyWhile's function ran past %d s", EU_GATE_TIMEOUT_MS / 1000);
      o->breaking = EU_BREAK_GATE;
      break_object(w, o);
    }
    break;
  }
}

#define EU_MAX_TIES 64

void eu_world_touch(eu_world *w, uint64_t res, int write) {
  if (w->step_open) eu_fp_add(&w->fp, res, write);
}

void eu_world_observe(eu_world *w, eu_object *o) {
  if (w->step_open) eu_fp_add(&w->fp, o->res, 0);
}

const eu_fp *eu_world_step_fp(eu_world *w) { return w->step_open ? &w->fp : NULL; }

void eu_world_end_step(eu_world *w) {
  if (!w->step_open) return;
  w->step_open = 0;
  if (w->draws != w->step_draws) eu_fp_add(&w->fp, EU_RES_PRNG, 1);
  w->o.on_step_end(w->o.step_ud, &w->fp);
}

/* Tells the reducer a step begins: 1 when it says the run stops here. */
static int begin_step(eu_world *w, const eu_event *ties, size_t n) {
  eu_tie t[EU_MAX_TIES];
  size_t i;
  for (i = 0; i < n; i++) {
    t[i].id = ties[i].id;
    t[i].creator = ties[i].creator;
  }
  if (w->o.on_step(w->o.step_ud, t, (int)n, ties[0].at)) return 1;
  w->step++;
  w->step_open = 1;
  w->step_draws = w->draws;
  eu_fp_clear(&w->fp);
  return 0;
}

int eu_world_step(eu_world *w, char *err, size_t errlen) {
  eu_event ties[EU_MAX_TIES];
  size_t n, i, pick = 0;
  w->arrived = 0;
  eu_world_end_step(w);
  n = eu_sched_ties(&w->sched, ties, EU_MAX_TIES);
  if (n == 0) return 0;
  if (w->o.on_step && begin_step(w, ties, n)) w->stopped = 1;
  if (n > 1 && !w->stopped) pick = (size_t)eu_world_choose(w, EU_CHOICE_ORDER, (int)n, "order");
  for (i = 0; i < n; i++) {
    if (i == pick && !w->stopped) continue;
    if (eu_sched_giveback(&w->sched, &ties[i]) != EU_OK) {
      free(ties[i].data);
      return eu_err(err, errlen, EU_ENOMEM, "out of memory in the scheduler");
    }
  }
  if (w->stopped) {
    /* The chooser gave up on the run at this decision: nothing more runs. */
    w->step_open = 0;
    return 0;
  }
  /* The worker's isolate is written only by a turn that changes what
   * outlives it: turn() decides. A gate's time-out only reads its object
   * when the gate opened since: dispatch says. */
  if (ties[pick].kind != EU_EV_GATE) eu_world_touch(w, ties[pick].res, ties[pick].res != EU_RES_WORKER);
  dispatch(w, &ties[pick]);
  free(ties[pick].data);
  /* A turn run uncounted ran long: the run is to be run again, counted. */
  if (eu_sandbox_watch_wanted()) w->stopped = 1;
  return 1;
}

/* ---- yield points ----------------------------------------------------- */

eu_world *eu_world_of(lua_State *L) {
  eu_object *o = eu_isolate_ud(L);
  return o ? o->w : NULL;
}

eu_object *eu_world_self(lua_State *L) {
  eu_object *o = eu_isolate_ud(L);
  return o && o->ns >= 0 ? o : NULL;
}

eu_task *eu_world_running(lua_State *L) {
  eu_world *w = eu_world_of(L);
  if (!w || !w->running || w->running->co != L) return NULL;
  return w->running;
}

/* Whether a reset may strike while t waits. A branch of eutaxy.all in the
 * worker has no client of its own to go away: its request's is the one its
 * invocation waits with. */
static int resettable_wait(eu_world *w, eu_task *t) {
  return may_fault(w, EU_FAULT_BIT(EU_FAULT_RESET)) && !(t->kind == EU_TASK_BRANCH && t->obj->ns < 0);
}

/* ---- eutaxy.all --------------------------------------------------------
 *
 * eutaxy.all{ f1, f2, ... } runs each function as a branch of the
 * invocation: a task of its own in the same isolate, queued at once, with
 * a root of its own (its calls and sleeps are numbered apart from its
 * siblings', whatever their order) and its own turns, which interleave with
 * everything else. The invocation waits (EU_WAIT_ALL) until every branch
 * has ended, or one reports that its function raised (eu_task_all_failed),
 * or one ends without returning (a limit, a crash): then it is resumed
 * once, and the runtime returns the results or raises the first error.
 * Branches still running go on, their results dropped, as promises do. */

/* Wakes p, waiting for its branches, with data (NULL: true). */
static void wake_all(eu_world *w, eu_task *p, char *data, size_t len) {
  if (!data && ok_payload(w, &data, &len) != EU_OK) return;
  p->waiting = EU_WAIT_WOKEN;
  push_event(w, EU_EV_RESUME, w->sched.now, p->id, 0, data, len);
}

/* b ended: ok, or not, with its error as data (or none, killed). */
static void branch_ended(eu_world *w, eu_task *b, int ok, const char *data, size_t len) {
  eu_task *p;
  if (b->counted) return;
  b->counted = 1;
  if (!b->parent || !(p = find_task(w, b->parent)) || p->waiting != EU_WAIT_ALL) return;
  p->branches--;
  if (!ok) {
    char *copy = NULL;
    size_t clen = 0;
    if (data) {
      if ((copy = malloc(len ? len : 1)) != NULL) memcpy(copy, data, len);
      clen = len;
    }
    if (!copy && error_payload(w, "Error", "a function of eutaxy.all ended before it returned", 0, 1, &copy,
                               &clen) != EU_OK)
      return;
    wake_all(w, p, copy, clen);
  } else if (p->branch_failed || p->branches == 0) {
    wake_all(w, p, NULL, 0);
  }
}

int eu_task_all(eu_task *t, const int *refs, int n) {
  eu_world *w = t->obj->w;
  int i, k = 1, delivery = 0, root;
  char event[64], sub[48], label[EU_LABEL];
  eu_task *b;
  if (t->root >= 0 && t->root < w->nroots) {
    k = ++w->roots[t->root].alls;
    delivery = w->roots[t->root].delivery;
    snprintf(event, sizeof event, "%s", w->roots[t->root].event);
  } else {
    snprintf(event, sizeof event, "%.50s", t->label);
  }
  for (i = 0; i < n; i++) {
    const char *base = t->root >= 0 && t->root < w->nroots ? w->roots[t->root].sub : "";
    if (snprintf(sub, sizeof sub, "%s all #%d.%d", base, k, i + 1) >= (int)sizeof sub)
      snprintf(sub, sizeof sub, " all #%d.%d", k, i + 1);  /* nested too deep to name the path */
    if ((root = new_root(w, event, delivery)) < 0) return EU_ENOMEM;
    snprintf(w->roots[root].sub, sizeof w->roots[root].sub, "%s", sub);
    snprintf(label, sizeof label, "%.90s all #%d.%d", t->label, k, i + 1);
    if (!(b = new_task(w, EU_TASK_BRANCH, t->obj, "all", label))) return EU_ENOMEM;
    b->ident = eu_mix64(eu_mix64(t->ident, 0xa110u + (uint64_t)k), (uint64_t)i);
    b->parent = t->id;
    b->fnref = refs[i];
    b->root = root;
    if (push_event(w, EU_EV_START, w->sched.now, b->id, 0, NULL, 0) != EU_OK) {
      b->fnref = LUA_NOREF;  /* the caller lets go of the rest */
      free_task(w, b);
      return EU_ENOMEM;
    }
  }
  t->waiting = EU_WAIT_ALL;
  t->branches = n;
  t->branch_failed = 0;
  trace(w, "%s  eutaxy.all #%d: %d function%s side by side", t->label, k, n, n == 1 ? "" : "s");
  return EU_OK;
}

int eu_task_all_failed(eu_task *b) {
  eu_task *p;
  if (b->kind != EU_TASK_BRANCH) return EU_EINVAL;
  if (b->parent && (p = find_task(b->obj->w, b->parent)) != NULL) p->branch_failed = 1;
  return EU_OK;
}

int eu_task_call(eu_task *t, int ns, const char *hex, const char *name, size_t namelen,
                 char *payload, size_t len, const char *method) {
  eu_world *w = t->obj->w;
  eu_object *target;
  eu_task *callee;
  char label[EU_LABEL];
  int kind = strcmp(method, "fetch") == 0 ? EU_TASK_FETCH : EU_TASK_RPC;
  int effect, fault;
  target = eu_world_object_named(w, ns, hex, name, namelen, NULL, 0);
  if (!target) {
    free(payload);
    return EU_EINVAL;
  }
  effect = t->root >= 0 ? w->roots[t->root].effects++ : 0;
  t->waiting = EU_WAIT_CALL;
  if (resettable_wait(w, t)) wait_point(w, t, effect, ns, method, 0);
  if (TRACING(w)) {
    eu_buf tmp;
    eu_buf_init(&tmp);
    trace(w, "%s  calls %s %s", t->label, target->tag,
          kind == EU_TASK_FETCH ? fmtfetch(w, &tmp, payload, len, 0) : fmtvals(&tmp, payload, len, 0));
    eu_buf_free(&tmp);
  }
  fault = EU_FAULT_NONE;
  if (w->o.faults || w->narms) {
    /* A service outside is no Durable Object: it is never overloaded so. */
    unsigned kinds = EU_FAULT_BIT(EU_FAULT_RPC_FAIL) | EU_FAULT_BIT(EU_FAULT_AMBIGUOUS) |
                     EU_FAULT_BIT(EU_FAULT_CALLER_CRASH);
    fault_site site;
    kinds |= EU_FAULT_BIT(eu_world_is_service(w, ns) ? EU_FAULT_FETCH_TIMEOUT : EU_FAULT_OVERLOADED);
    fault_label(w, label, sizeof label, t->root, effect, ns, method);
    memset(&site, 0, sizeof site);
    site.obj = target;
    site.method = method;
    fault = fault_on(w, kinds, label, t->obj->tag, &site);
  }
  if (TRACING(w)) {
    eu_buf tmp;
    eu_buf_init(&tmp);
    record(w, fault == EU_FAULT_RPC_FAIL || fault == EU_FAULT_OVERLOADED ? "dropped" : "call", t->obj->tag,
           target->tag, "%s", kind == EU_TASK_FETCH ? fmtfetch(w, &tmp, payload, len, 0) : fmtvals(&tmp, payload, len, 0));
    eu_buf_free(&tmp);
  }
  if (fault == EU_FAULT_RPC_FAIL || fault == EU_FAULT_OVERLOADED) {
    /* Lost on the way, or refused by an object too busy to take it: the
     * target's code never runs. Cloudflare marks an overload not to be
     * retried: trying again only adds to it. */
    char *data;
    size_t dlen;
    int rc;
    free(payload);
    if (fault == EU_FAULT_OVERLOADED)
      rc = error_payload_of(w, "Error", EU_OVERLOADED_MESSAGE, 0, 0, 1, &data, &dlen);
    else
      rc = error_payload(w, "Error", EU_LOST_MESSAGE, 0, 1, &data, &dlen);
    if (rc != EU_OK) return rc;
    return push_event(w, EU_EV_RESUME, w->sched.now, t->id, 0, data, dlen);
  }
  if (eu_world_is_service(w, ns)) {  /* "req-1>ORDERS.pay>payments.example" */
    const char *host = strstr(w->bindings[ns].name, "://");
    snprintf(label, sizeof label, "%.40s>%.40s", t->label, host ? host + 3 : w->bindings[ns].name);
  } else {
    snprintf(label, sizeof label, "%.40s>%.20s.%.30s", t->label, w->bindings[ns].name, method);
  }
  callee = new_task(w, kind, target, method, label);
  if (!callee) {
    free(payload);
    return EU_ENOMEM;
  }
  callee->origin_task = t->id;
  callee->ident = eu_mix64(t->ident, 0x100 + (uint64_t)t->calls++);
  callee->origin_ident = t->ident;
  callee->origin_res = t->obj->res;
  callee->root = t->root;
  callee->effect = effect;
  callee->lose_answer = fault == EU_FAULT_AMBIGUOUS ? 1 : fault == EU_FAULT_FETCH_TIMEOUT ? 2 : 0;
  callee->crash_caller = fault == EU_FAULT_CALLER_CRASH;
  if (fault == EU_FAULT_FETCH_TIMEOUT) {
    /* The service gets the request and applies it; the caller hears
     * nothing and gives up on its own, whatever the service does. */
    char *data;
    size_t dlen;
    char msg[EU_LABEL + 80];
    int rc;
    snprintf(msg, sizeof msg, "The request to %s timed out after %d ms.", w->bindings[ns].name, EU_FETCH_TIMEOUT_MS);
    if ((rc = error_payload(w, "TimeoutError", msg, 0, 1, &data, &dlen)) != EU_OK) {
      free(payload);
      return rc;
    }
    if ((rc = push_event(w, EU_EV_RESUME, w->sched.now + EU_FETCH_TIMEOUT_MS, t->id, 0, data, dlen)) != EU_OK) {
      free(payload);
      return rc;
    }
  }
  /* The method name travels first in the payload for an RPC; fetch carries the request only. */
  return push_event(w, EU_EV_START, w->sched.now, callee->id, 0, payload, len);
}

int eu_world_wait_until(lua_State *L, int fnref) {
  eu_object *o = eu_isolate_ud(L);
  eu_world *w = o ? o->w : NULL;
  eu_task *t = w ? w->running : NULL, *u;
  char label[EU_LABEL], event[64], sub[48];
  int delivery = 0, k = 1, root;
  if (!t || t->obj != o) return EU_EINVAL;
  /* A root of its own, numbered in its asker's: the calls and sleeps of
   * waitUntils running side by side are numbered apart, whatever their order. */
  if (t->root >= 0 && t->root < w->nroots) {
    eu_root *r = &w->roots[t->root];
    k = ++r->waits;
    delivery = r->delivery;
    snprintf(event, sizeof event, "%s", r->event);
    if (snprintf(sub, sizeof sub, "%s waitUntil #%d", r->sub, k) >= (int)sizeof sub)
      snprintf(sub, sizeof sub, " waitUntil #%d", k);  /* nested too deep to name the path */
  } else {
    snprintf(event, sizeof event, "%.50s", t->label);
    snprintf(sub, sizeof sub, " waitUntil #%d", k);
  }
  if ((root = new_root(w, event, delivery)) < 0) return EU_ENOMEM;
  snprintf(w->roots[root].sub, sizeof w->roots[root].sub, "%s", sub);
  snprintf(label, sizeof label, "%.100s waitUntil #%d", t->label, k);
  if (!(u = new_task(w, EU_TASK_WAIT_UNTIL, o, "waitUntil", label))) {
    w->nroots--;
    return EU_ENOMEM;
  }
  u->ident = eu_mix64(t->ident, 0x3000 + (uint64_t)t->deferred++);
  u->after = t->id;
  u->fnref = fnref;
  u->root = root;
  trace(w, "%s  waitUntil #%d: runs after the answer", t->label, k);
  return EU_OK;
}

int eu_task_no_retry(eu_task *t) {
  if (t->kind != EU_TASK_SCHEDULED) return EU_EINVAL;
  t->no_retry = 1;
  return EU_OK;
}

int eu_task_sleep(eu_task *t, int64_t ms) {
  eu_world *w = t->obj->w;
  char *data;
  size_t len;
  int rc = ok_payload(w, &data, &len);
  if (rc != EU_OK) return rc;
  t->waiting = EU_WAIT_SLEEP;
  if (resettable_wait(w, t)) wait_point(w, t, 0, -1, NULL, ms > 0 ? ms : 0);
  trace(w, "%s  sleeps %" PRId64 "ms", t->label, ms);
  record(w, "note", t->obj->tag, NULL, "sleeps %" PRId64 "ms", ms);
  return push_event(w, EU_EV_RESUME, w->sched.now + (ms > 0 ? ms : 0), t->id, 0, data, len);
}

int eu_world_has_outbound(eu_world *w) { return w->o.outbound != NULL; }

/* Its turn commits at this yield as at an RPC; the host holds the request
 * until that commit is durable, and wakes t with the answer. */
int eu_task_outbound(eu_task *t, char *payload, size_t len, char *err, size_t errlen) {
  eu_world *w = t->obj->w;
  int rc;
  if (!w->o.outbound) {
    free(payload);
    return eu_err(err, errlen, EU_EINVAL, "this world makes no outbound calls");
  }
  if (t->root >= 0) w->roots[t->root].effects++;
  if (TRACING(w)) {
    eu_buf tmp;
    eu_buf_init(&tmp);
    trace(w, "%s  calls the network %s", t->label, fmtfetch(w, &tmp, payload, len, 0));
    eu_buf_free(&tmp);
  }
  rc = w->o.outbound(w->o.outbound_ud, t->id, payload, len, err, errlen);
  if (rc == EU_OK) t->waiting = EU_WAIT_OUTBOUND;
  return rc;
}

int eu_world_resume_outbound(eu_world *w, int64_t task, char *data, size_t len) {
  eu_task *t = find_task(w, task);
  if (!t || !t->co || t->waiting != EU_WAIT_OUTBOUND) {
    free(data);
    return EU_EINVAL;
  }
  return push_event(w, EU_EV_RESUME, w->sched.now, task, 0, data, len);
}

/* ---- slots ------------------------------------------------------------ */

static int new_slot(eu_world *w) {
  int i;
  for (i = 0; i < w->nslots; i++)
    if (!w->slots[i].used) break;
  if (i == w->nslots) {
    eu_slot *s = realloc(w->slots, (size_t)(w->nslots + 8) * sizeof *s);
    if (!s) return 0;
    memset(s + w->nslots, 0, 8 * sizeof *s);
    w->slots = s;
    w->nslots += 8;
  }
  memset(&w->slots[i], 0, sizeof w->slots[i]);
  w->slots[i].used = 1;
  return i + 1;
}

/* now: the task starts at once rather than at a later step; lose: its answer
 * will be lost, as eu_world_slot_lose_answer, before it can run. */
static int submit(eu_world *w, int kind, eu_object *target, const char *method, char *payload,
                  size_t len, const char *event, int delivery, int now, int lose) {
  eu_task *t;
  int slot;
  char label[EU_LABEL];
  if (!target) target = w->worker;
  slot = new_slot(w);
  if (!slot) {
    free(payload);
    return 0;
  }
  if (delivery > 1) snprintf(label, sizeof label, "%.60s#%d", event, delivery);
  else snprintf(label, sizeof label, "%.60s", event);
  t = new_task(w, kind == EU_CALL_FETCH ? EU_TASK_FETCH : EU_TASK_RPC, target,
               kind == EU_CALL_FETCH ? "fetch" : method, label);
  if (!t) {
    w->slots[slot - 1].used = 0;
    free(payload);
    return 0;
  }
  t->origin_slot = slot;
  t->ident = eu_mix64(eu_hash64(event, strlen(event), 0x5eed), (uint64_t)delivery);
  t->root = new_root(w, event, delivery);
  t->lose_answer = lose;
  if (TRACING(w)) {
    eu_buf tmp;
    eu_buf_init(&tmp);
    trace(w, "%s  %s %s", label, target->tag,
          kind == EU_CALL_FETCH ? fmtfetch(w, &tmp, payload, len, 0) : fmtvals(&tmp, payload, len, 0));
    record(w, "send", event, target->tag, "%s%s", tmp.p ? tmp.p : "", delivery > 1 ? " (again)" : "");
    eu_buf_free(&tmp);
  }
  if (now) {
    start_task(w, t, payload, len);
    free(payload);
  } else if (push_event(w, EU_EV_START, w->sched.now, t->id, 0, payload, len) != EU_OK) {
    free_task(w, t);
    w->slots[slot - 1].used = 0;
    return 0;
  }
  return slot;
}

int eu_world_submit(eu_world *w, int kind, eu_object *target, const char *method, char *payload,
                    size_t len, const char *event, int delivery) {
  return submit(w, kind, target, method, payload, len, event, delivery, 0, 0);
}

int eu_world_submit_arrived(eu_world *w, int kind, eu_object *target, const char *method,
                            char *payload, size_t len, const char *event, int delivery,
                            int lose_answer) {
  return submit(w, kind, target, method, payload, len, event, delivery, 1, lose_answer);
}

int eu_world_arrival(eu_world *w, int64_t at, int tag) {
  return push_event(w, EU_EV_ARRIVE, at, tag, 0, NULL, 0);
}

int eu_world_arrived(eu_world *w) { return w->arrived - 1; }

int eu_world_run_alarm(eu_world *w, eu_object *o) {
  int has = 0, retry = 0, slot;
  int64_t at = 0;
  eu_task *t;
  char label[EU_LABEL];
  save_object(w, o);
  if (!o->store || o->alarm_running) return 0;
  if (eu_store_get_alarm(o->store, &has, &at, &retry) != EU_OK || !has) return 0;
  slot = new_slot(w);
  if (!slot) return 0;
  snprintf(label, sizeof label, "alarm %.100s", o->tag);
  t = new_task(w, EU_TASK_ALARM, o, "alarm", label);
  if (!t) {
    w->slots[slot - 1].used = 0;
    return 0;
  }
  t->origin_slot = slot;
  t->ident = eu_mix64(o->res, eu_mix64(0xa5c3u, (uint64_t)++o->asked));
  t->root = new_root(w, label, 1);
  t->alarm_retry = retry;
  o->alarm_running = 1;
  o->alarm_gen++;  /* the scheduled firing is this one */
  trace(w, "%s  runs now (asked for)", label);
  if (w->narms) {
    /* A spec may have armed alarm-fail or alarm-lost for the alarm it runs. */
    fault_site site;
    int fault;
    memset(&site, 0, sizeof site);
    site.obj = o;
    site.method = "alarm";
    site.also = EU_FAULT_BIT(EU_FAULT_ALARM_FAIL) | EU_FAULT_BIT(EU_FAULT_ALARM_LOST);
    fault = fault_on(w, 0, label, o->tag, &site);
    if (fault == EU_FAULT_ALARM_FAIL) {
      o->alarm_running = 0;
      alarm_failed(w, o, retry);
      answer_error(w, t, "Error", "the alarm failed before it committed (alarm-fail): it is retried on the backoff "
                   "ladder", 0, 1);
      free_task(w, t);
      reconcile_alarm(w, o);
      return slot;
    }
    t->alarm_lost = fault == EU_FAULT_ALARM_LOST;
  }
  start_task(w, t, NULL, 0);
  return slot;
}

int eu_world_submit_host(eu_world *w, int kind, eu_object *target, const char *method, char *payload,
                         size_t len, const char *event) {
  int fault = EU_FAULT_NONE, slot, rc;
  if (target && target->ns >= 0 && (w->o.faults || w->narms)) {
    unsigned kinds = EU_FAULT_BIT(EU_FAULT_RPC_FAIL) | EU_FAULT_BIT(EU_FAULT_AMBIGUOUS) |
                     EU_FAULT_BIT(EU_FAULT_OVERLOADED);
    char label[EU_LABEL];
    fault_site site;
    snprintf(label, sizeof label, "%.40s#1 (%s%.30s %.40s)", event, eu_world_is_service(w, target->ns) ? "service " : "DO:",
             w->bindings[target->ns].name, method);
    memset(&site, 0, sizeof site);
    site.obj = target;
    site.method = method;
    fault = fault_on(w, kinds, label, event, &site);
  }
  if (fault == EU_FAULT_RPC_FAIL || fault == EU_FAULT_OVERLOADED) {
    /* Lost on the way, or refused: the target's code never runs. */
    char *data;
    size_t dlen;
    free(payload);
    if (!(slot = new_slot(w))) return 0;
    if (fault == EU_FAULT_OVERLOADED) rc = error_payload_of(w, "Error", EU_OVERLOADED_MESSAGE, 0, 0, 1, &data, &dlen);
    else rc = error_payload(w, "Error", EU_LOST_MESSAGE, 0, 1, &data, &dlen);
    if (rc != EU_OK) {
      w->slots[slot - 1].used = 0;
      return 0;
    }
    trace(w, "%s  %s %s: %s", event, target->tag, method,
          fault == EU_FAULT_OVERLOADED ? "refused, overloaded" : "lost before it arrived");
    w->slots[slot - 1].data = data;
    w->slots[slot - 1].len = dlen;
    w->slots[slot - 1].done = 1;
    return slot;
  }
  return submit(w, kind, target, method, payload, len, event, 1, 0, fault == EU_FAULT_AMBIGUOUS);
}

/* ---- runInDurableObject ------------------------------------------------
 *
 * A spec's function runs in the spec's own Lua state, never in the isolate:
 * a function cannot cross into one (its upvalues would not come along, and
 * bytecode is no sandbox's to load). What the function does to the object,
 * reading or setting a field, calling a method, using storage, goes to one
 * invocation of the object as a request, which runtime.lua carries out as a
 * turn of that invocation and answers (eu_task_visit_reply). Between
 * requests the invocation waits (EU_WAIT_HOST) as at a yield point: its turn
 * is committed, and other events may reach the object meanwhile, as they
 * may while any invocation awaits a call. */

int eu_world_visit(eu_world *w, eu_object *o, const char *event, int64_t *task) {
  eu_task *t;
  int slot = new_slot(w);
  if (!slot) return 0;
  t = new_task(w, EU_TASK_VISIT, o, "runInDurableObject", event);
  if (!t) {
    w->slots[slot - 1].used = 0;
    return 0;
  }
  t->origin_slot = slot;
  t->ident = eu_mix64(eu_hash64(event, strlen(event), 0x5eed), 0x7151u);
  t->root = new_root(w, event, 1);
  trace(w, "%s  %s runInDurableObject", event, o->tag);
  record(w, "send", event, o->tag, "runInDurableObject");
  if (push_event(w, EU_EV_START, w->sched.now, t->id, 0, NULL, 0) != EU_OK) {
    free_task(w, t);
    w->slots[slot - 1].used = 0;
    return 0;
  }
  *task = t->id;
  return slot;
}

int eu_world_visit_step(eu_world *w, int64_t task, char *payload, size_t len) {
  eu_task *t = find_task(w, task);
  int slot;
  if (!t || t->kind != EU_TASK_VISIT || t->waiting != EU_WAIT_HOST || !t->co) {
    free(payload);
    return 0;
  }
  if (!(slot = new_slot(w))) {
    free(payload);
    return EU_ENOMEM;
  }
  if (push_event(w, EU_EV_RESUME, w->sched.now, t->id, 0, payload, len) != EU_OK) {
    w->slots[slot - 1].used = 0;
    return EU_ENOMEM;
  }
  t->origin_slot = slot;
  t->waiting = EU_WAIT_WOKEN;
  return slot;
}

int eu_task_visit_reply(eu_task *t, int ok, char *payload, size_t len) {
  eu_world *w = t->obj->w;
  eu_slot *s;
  if (t->kind != EU_TASK_VISIT || !t->origin_slot || t->origin_slot > w->nslots ||
      !w->slots[t->origin_slot - 1].used) {
    free(payload);
    return EU_EINVAL;
  }
  /* The reply waits in its slot for the turn to commit (visit_replied): a
   * commit that fails answers with its error instead. */
  s = &w->slots[t->origin_slot - 1];
  free(s->data);
  s->data = payload;
  s->len = len;
  t->visit_failed = !ok;
  t->waiting = EU_WAIT_HOST;
  return EU_OK;
}

/* The turn of t's request has ended: its reply goes to the host. */
static void visit_replied(eu_world *w, eu_task *t) {
  if (t->origin_slot > 0 && t->origin_slot <= w->nslots && w->slots[t->origin_slot - 1].used)
    w->slots[t->origin_slot - 1].done = 1;
  t->origin_slot = 0;
  t->visit_failed = 0;
}

int eu_world_run_cron(eu_world *w, const char *expr, char *err, size_t errlen) {
  eu_task *t;
  int i, slot;
  for (i = 0; i < w->ncrons; i++)
    if (strcmp(w->cron_exprs[i], expr) == 0) break;
  if (i == w->ncrons) {
    eu_buf list;
    int k;
    eu_buf_init(&list);
    for (k = 0; k < w->ncrons; k++) eu_buf_printf(&list, "%s\"%s\"", k ? ", " : "", w->cron_exprs[k]);
    eu_err(err, errlen, EU_EINVAL, "no cron \"%.100s\" in triggers.crons (%s%.300s)", expr,
           w->ncrons ? "it lists " : "it lists none", list.p ? list.p : "");
    eu_buf_free(&list);
    return EU_EINVAL;
  }
  if (!(slot = new_slot(w))) return eu_err(err, errlen, EU_ENOMEM, "out of memory");
  if (!(t = cron_task(w, i, 0, now_abs(w)))) {
    w->slots[slot - 1].used = 0;
    return eu_err(err, errlen, EU_ENOMEM, "out of memory");
  }
  t->origin_slot = slot;
  t->cron_asked = 1;
  t->ident = eu_mix64(0xc5a7u + (uint64_t)i, (uint64_t)w->cron_counts[i].runs);
  trace(w, "%s  runs now (asked for): %s", t->label, w->cron_exprs[i]);
  record(w, "alarm", w->worker->tag, NULL, "%s runs now: %s", t->label, w->cron_exprs[i]);
  start_task(w, t, NULL, 0);
  return slot;
}

void eu_world_slot_lose_answer(eu_world *w, int slot) {
  eu_task *t;
  for (t = w->tasks; t; t = t->next)
    if (t->origin_slot == slot) t->lose_answer = 1;
}

int eu_world_slot_done(eu_world *w, int slot) {
  return slot > 0 && slot <= w->nslots && w->slots[slot - 1].used && w->slots[slot - 1].done;
}

int eu_world_slot_take(eu_world *w, int slot, char **data, size_t *len) {
  eu_slot *s;
  if (!eu_world_slot_done(w, slot)) return EU_EINVAL;
  s = &w->slots[slot - 1];
  *data = s->data;
  *len = s->len;
  memset(s, 0, sizeof *s);
  for (;;) {  /* the waitUntils held for this answer, in the order they were asked for */
    eu_task *u, *first = NULL;
    for (u = w->tasks; u; u = u->next)
      if (u->after_slot == slot && (!first || u->id < first->id)) first = u;
    if (!first) break;
    first->after_slot = 0;
    start_wait_until(w, first);
  }
  return EU_OK;
}

#define EU_MAX_EVENTS_PER_CALL 10000000

int eu_world_run_until_done(eu_world *w, int slot, char *err, size_t errlen) {
  long steps = 0;
  while (!eu_world_slot_done(w, slot)) {
    int rc = eu_world_step(w, err, errlen);
    if (rc < 0) return rc;
    if (rc == 0)
      return eu_err(err, errlen, EU_EINVAL, "the call never finished: nothing is left to run");
    if (++steps > EU_MAX_EVENTS_PER_CALL)
      return eu_err(err, errlen, EU_EINVAL,
                    "the call did not finish after %d events; is something waiting in a loop?",
                    EU_MAX_EVENTS_PER_CALL);
  }
  return EU_OK;
}

int eu_world_advance(eu_world *w, int64_t ms, char *err, size_t errlen) {
  int64_t target = w->sched.now + (ms > 0 ? ms : 0);
  long steps = 0;
  while (eu_sched_next_time(&w->sched) <= target) {
    int rc = eu_world_step(w, err, errlen);
    if (rc < 0) return rc;
    if (++steps > EU_MAX_EVENTS_PER_CALL)
      return eu_err(err, errlen, EU_EINVAL, "advance ran %d events without reaching its time",
                    EU_MAX_EVENTS_PER_CALL);
  }
  if (w->sched.now < target) w->sched.now = target;
  return EU_OK;
}

int64_t eu_world_next_due(eu_world *w) {
  int64_t t = eu_sched_next_time(&w->sched);
  return t == INT64_MAX ? t : w->o.start_ms + t;
}

void eu_world_wake(eu_world *w, eu_object *o) {
  if (o->ns >= 0) reconcile_alarm(w, o);
}

/* ---- WebSockets --------------------------------------------------------- */

#define WS_REC_HEAD (1 + 2 + 8 + 4)

int eu_ws_record_put(eu_buf *b, int op, int code, int64_t at, const char *data, size_t len) {
  unsigned char head[WS_REC_HEAD];
  uint16_t c = (uint16_t)code;
  uint32_t n = (uint32_t)len;
  if (len > UINT32_MAX) return EU_EINVAL;
  head[0] = (unsigned char)op;
  memcpy(head + 1, &c, 2);
  memcpy(head + 3, &at, 8);
  memcpy(head + 11, &n, 4);
  if (eu_buf_put(b, head, sizeof head) != EU_OK || (len && eu_buf_put(b, data, len) != EU_OK)) return EU_ENOMEM;
  return EU_OK;
}

int eu_ws_record_get(const char **p, size_t *n, int *op, int *code, int64_t *at, const char **data, size_t *len) {
  uint16_t c;
  uint32_t l;
  if (*n < WS_REC_HEAD) return 0;
  *op = (unsigned char)(*p)[0];
  memcpy(&c, *p + 1, 2);
  memcpy(at, *p + 3, 8);
  memcpy(&l, *p + 11, 4);
  if (*n - WS_REC_HEAD < l) return 0;
  *code = c;
  *data = *p + WS_REC_HEAD;
  *len = l;
  *p += WS_REC_HEAD + l;
  *n -= WS_REC_HEAD + l;
  return 1;
}

/* The first record of b taken off (its bytes moved down). */
static void ws_shift(eu_buf *b) {
  const char *p = b->p;
  size_t n = b->n, len;
  int op, code;
  int64_t at;
  const char *data;
  if (!eu_ws_record_get(&p, &n, &op, &code, &at, &data, &len)) {
    b->n = 0;
    return;
  }
  memmove(b->p, p, n);
  b->n = n;
}

static eu_sock *ws_find(eu_world *w, int64_t id) {
  return id >= 1 && id <= w->nsocks ? w->socks[id - 1] : NULL;
}

/* What the client of s touches when it receives: its own resource. */
static uint64_t ws_client_res(const eu_sock *s) { return eu_mix64(0xc11e47u, s->ident); }

static const char *ws_op_name(int op) {
  switch (op) {
  case EU_WS_TEXT: return "text";
  case EU_WS_BINARY: return "binary";
  case EU_WS_CLOSE: return "close";
  case EU_WS_ERROR: return "error";
  default: return "drop";
  }
}

/* One thing the object sent reaches the client of s (or waits for it to connect). */
static void ws_deliver(eu_world *w, eu_sock *s, int op, int code, const char *data, size_t len) {
  if (s->state == EU_WS_PENDING) {
    eu_ws_record_put(&s->early, op, code, w->sched.now, data, len);
    return;
  }
  eu_world_touch(w, ws_client_res(s), 1);
  if (TRACING(w)) {
    if (op == EU_WS_CLOSE) record(w, "answer", w->objects[s->obj]->tag, s->client, "close %d %.*s", code, (int)(len > 80 ? 80 : len), data);
    else if (op == EU_WS_DROP) record(w, "lost", w->objects[s->obj]->tag, s->client, "connection dropped (1006)");
    else record(w, "answer", w->objects[s->obj]->tag, s->client, "%s %.*s", ws_op_name(op), (int)(len > 80 ? 80 : len), data);
  }
  if (w->o.ws_out) w->o.ws_out(w->o.ws_ud, s->id, op, code, data, len);
  else eu_ws_record_put(&s->got, op, code, w->sched.now, data, len);
}

static void ws_queue_in(eu_world *w, eu_sock *s) {
  eu_object *o = w->objects[s->obj];
  eu_event ev;
  if (s->in_queued || s->inbox.n == 0) return;
  memset(&ev, 0, sizeof ev);
  ev.kind = EU_EV_WS_IN;
  ev.at = w->sched.now;
  ev.a = s->id;
  ev.b = s->delivered;
  ev.id = eu_mix64(s->ident, 0x1b0u + (uint64_t)s->delivered);
  ev.res = o->res;
  ev.creator = w->step_open ? w->step : -1;
  if (eu_sched_push(&w->sched, &ev) == EU_OK) s->in_queued = 1;
}

/* The script's next record: into the inbox once due, or an event for when it is. */
static void ws_queue_due(eu_world *w, eu_sock *s) {
  const char *p = s->script.p, *data;
  size_t n = s->script.n, len;
  int op, code;
  int64_t at;
  eu_event ev;
  while (!s->due_queued && eu_ws_record_get(&p, &n, &op, &code, &at, &data, &len)) {
    if (at > w->sched.now) {
      memset(&ev, 0, sizeof ev);
      ev.kind = EU_EV_WS_DUE;
      ev.at = at;
      ev.a = s->id;
      ev.id = eu_mix64(s->ident, 0xd0e0000u + (uint64_t)s->delivered);
      ev.res = ws_client_res(s);
      ev.creator = w->step_open ? w->step : -1;
      if (eu_sched_push(&w->sched, &ev) == EU_OK) s->due_queued = 1;
      return;
    }
    eu_ws_record_put(&s->inbox, op, code, w->sched.now, data, len);
    ws_shift(&s->script);
    p = s->script.p;
    n = s->script.n;
    if (op == EU_WS_CLOSE || op == EU_WS_DROP) s->script.n = 0;
  }
  ws_queue_in(w, s);
}

/* The object let go of s, or lost it: nothing more comes from its client. */
static void ws_closed(eu_sock *s) {
  s->state = EU_WS_CLOSED;
  s->inbox.n = 0;
  s->script.n = 0;
  eu_buf_reset(&s->attach);
}

/* Takes o's closed sockets out of its chain, so that walking it costs what
 * its open sockets do; returns how many are left. */
static int ws_prune(eu_world *w, eu_object *o) {
  int64_t *link = &o->ws_head, last = 0;
  int n = 0;
  while (*link) {
    eu_sock *s = ws_find(w, *link);
    if (s->state == EU_WS_CLOSED) {
      *link = s->next;
      continue;
    }
    last = s->id;
    link = &s->next;
    n++;
  }
  o->ws_tail = last;
  return n;
}

int eu_world_ws_live(eu_world *w, eu_object *o) { return ws_prune(w, o) > 0; }

/* The object is reset: every socket it has closes, and its client sees the connection drop. */
static void ws_reset(eu_world *w, eu_object *o) {
  eu_sock *s;
  int64_t id;
  for (id = o->ws_head; id; id = s->next) {
    s = ws_find(w, id);
    if (s->state == EU_WS_CLOSED) continue;
    if (s->state != EU_WS_PENDING) ws_deliver(w, s, EU_WS_DROP, 1006, NULL, 0);
    ws_closed(s);
  }
  o->ws_head = o->ws_tail = 0;
}

/* What the turn of o that ends sent: to the clients if it committed, else nowhere. */
static void ws_flush(eu_world *w, int ok) {
  const char *p = w->ws_sent.p, *data;
  size_t n = w->ws_sent.n, len;
  int op, code;
  int64_t id, at;
  w->ws_sent.n = 0;
  while (ok && n >= 8) {
    eu_sock *s;
    memcpy(&id, p, 8);
    p += 8;
    n -= 8;
    if (!eu_ws_record_get(&p, &n, &op, &code, &at, &data, &len)) break;
    if (!(s = ws_find(w, id)) || s->state == EU_WS_CLOSED) continue;
    if (op == EU_WS_CLOSE) {
      /* the client answers a close frame with its own (a scripted one at once) */
      ws_deliver(w, s, op, code, data, len);
      if (s->state != EU_WS_PENDING) {
        s->state = EU_WS_CLOSING;
        s->script.n = 0;
        if (!w->o.ws_out) {
          eu_ws_record_put(&s->inbox, EU_WS_CLOSE, code, w->sched.now, data, len);
          ws_queue_in(w, s);
        }
      }
      continue;
    }
    ws_deliver(w, s, op, code, data, len);
  }
}

/* A client event of s reaches its object: EU_EV_WS_IN. */
static void ws_dispatch_in(eu_world *w, int64_t id) {
  eu_sock *s = ws_find(w, id);
  eu_object *o;
  eu_task *t;
  const char *p, *data;
  size_t n, len;
  int op, code, k;
  int64_t at;
  char label[EU_LABEL], event[64], root[80];
  if (!s) return;
  s->in_queued = 0;
  p = s->inbox.p;
  n = s->inbox.n;
  if (s->state == EU_WS_CLOSED || !eu_ws_record_get(&p, &n, &op, &code, &at, &data, &len)) return;
  o = w->objects[s->obj];
  eu_world_touch(w, ws_client_res(s), 1);
  k = ++s->delivered;
  snprintf(event, sizeof event, "%.40s", s->client[0] ? s->client : "ws");
  if ((op == EU_WS_TEXT || op == EU_WS_BINARY) && !w->o.ws_out) {
    /* a scripted client may go instead of sending */
    unsigned kinds = EU_FAULT_BIT(EU_FAULT_WS_DROP) | EU_FAULT_BIT(EU_FAULT_WS_CLOSE);
    int fault;
    fault_site site;
    snprintf(label, sizeof label, "%.40s before message #%d to %.50s", event, k, o->tag);
    memset(&site, 0, sizeof site);
    site.obj = o;
    site.method = "webSocketMessage";
    fault = fault_on(w, kinds, label, s->client, &site);
    if (fault == EU_FAULT_WS_DROP || fault == EU_FAULT_WS_CLOSE) {
      eu_buf_reset(&s->inbox);
      s->script.n = 0;
      if (fault == EU_FAULT_WS_DROP) eu_ws_record_put(&s->inbox, EU_WS_DROP, 1006, w->sched.now, NULL, 0);
      else eu_ws_record_put(&s->inbox, EU_WS_CLOSE, 1001, w->sched.now, "going away", 10);
      p = s->inbox.p;
      n = s->inbox.n;
      eu_ws_record_get(&p, &n, &op, &code, &at, &data, &len);
    }
  }
  if ((op == EU_WS_TEXT) && o->auto_req && len == o->auto_req_len && memcmp(data, o->auto_req, len) == 0) {
    /* the host answers, and the object is not woken */
    trace(w, "%s  message #%d: auto-response", event, k);
    s->auto_at = now_abs(w);
    ws_deliver(w, s, EU_WS_TEXT, 0, o->auto_resp, o->auto_resp_len);
    ws_shift(&s->inbox);
    ws_queue_in(w, s);
    ws_queue_due(w, s);
    return;
  }
  if (op == EU_WS_TEXT || op == EU_WS_BINARY) snprintf(label, sizeof label, "%.40s message #%d", event, k);
  else snprintf(label, sizeof label, "%.40s %s", event, op == EU_WS_ERROR ? "error" : "close");
  t = new_task(w, EU_TASK_WS, o, op == EU_WS_TEXT || op == EU_WS_BINARY ? "webSocketMessage"
                                 : op == EU_WS_ERROR ? "webSocketError" : "webSocketClose", label);
  if (!t) return;
  t->ident = eu_mix64(s->ident, 0x1b0u + (uint64_t)k);
  /* its calls' labels read "req-1 message#2 effect #0" */
  snprintf(root, sizeof root, "%s %s", event, op == EU_WS_TEXT || op == EU_WS_BINARY ? "message"
                                                : op == EU_WS_ERROR ? "error" : "close");
  t->root = new_root(w, root, k);
  t->sock = s->id;
  t->ws_op = op;
  t->ws_code = op == EU_WS_DROP ? 1006 : code;
  if (TRACING(w)) {
    if (op == EU_WS_TEXT || op == EU_WS_BINARY) {
      trace(w, "%s  %s %s %.*s", label, o->tag, ws_op_name(op), (int)(len > 80 ? 80 : len), data);
      record(w, "send", event, o->tag, "%s %.*s", ws_op_name(op), (int)(len > 80 ? 80 : len), data);
    } else {
      const char *what = op == EU_WS_DROP ? "connection dropped" : op == EU_WS_ERROR ? "error, closed with" : "close";
      trace(w, "%s  %s %s %d", label, o->tag, what, t->ws_code);
      record(w, "send", event, o->tag, "%s %d", what, t->ws_code);
    }
  }
  if (op == EU_WS_CLOSE || op == EU_WS_DROP || op == EU_WS_ERROR) {
    /* the socket is closed; its attachment goes with it, the handler still runs */
    char *reason = dupmem(data, len);
    s->state = EU_WS_CLOSED;
    s->inbox.n = 0;
    s->script.n = 0;
    start_task(w, t, reason, len);
    free(reason);
    return;
  }
  {
    char *msg = dupmem(data, len);
    ws_shift(&s->inbox);
    ws_queue_in(w, s);
    ws_queue_due(w, s);
    start_task(w, t, msg, len);
    free(msg);
  }
}

/* EU_EV_WS_DUE: the scripted client's next record is due. */
static void ws_dispatch_due(eu_world *w, int64_t id) {
  eu_sock *s = ws_find(w, id);
  if (!s) return;
  s->due_queued = 0;
  if (s->state == EU_WS_CLOSED) return;
  eu_world_touch(w, w->objects[s->obj]->res, 1);
  ws_queue_due(w, s);
}

int eu_world_ws_connect(eu_world *w, int64_t id, const char *client, const char *script, size_t len,
                        char *err, size_t errlen) {
  eu_sock *s = ws_find(w, id);
  const char *p, *data;
  size_t n, dlen;
  int op, code;
  int64_t at;
  if (!s || (s->state != EU_WS_PENDING && s->client[0]))
    return eu_err(err, errlen, EU_EINVAL, "%s: the 101 answer names no WebSocket an object accepted and "
                  "no client has connected to", client);
  save_object(w, w->objects[s->obj]);
  if (s->state == EU_WS_CLOSED) {
    /* its object was reset before the client came: the connection drops */
    snprintf(s->client, sizeof s->client, "%s", client);
    ws_deliver(w, s, EU_WS_DROP, 1006, NULL, 0);
    return EU_OK;
  }
  eu_world_touch(w, w->objects[s->obj]->res, 1);
  eu_world_touch(w, ws_client_res(s), 1);
  s->state = EU_WS_OPEN;
  snprintf(s->client, sizeof s->client, "%s", client);
  trace(w, "%s  connected to %s (WebSocket %lld)", s->client, w->objects[s->obj]->tag, (long long)s->id);
  p = s->early.p;
  n = s->early.n;
  while (eu_ws_record_get(&p, &n, &op, &code, &at, &data, &dlen)) {
    ws_deliver(w, s, op, code, data, dlen);
    if (op == EU_WS_CLOSE) s->state = EU_WS_CLOSING;
  }
  eu_buf_free(&s->early);
  if (s->state == EU_WS_CLOSING && !w->o.ws_out) {
    eu_ws_record_put(&s->inbox, EU_WS_CLOSE, 1000, w->sched.now, NULL, 0);
    ws_queue_in(w, s);
    return EU_OK;
  }
  if (len && eu_buf_put(&s->script, script, len) != EU_OK) return eu_err(err, errlen, EU_ENOMEM, "out of memory");
  ws_queue_due(w, s);
  return EU_OK;
}

int eu_world_ws_client(eu_world *w, int64_t id, int op, int code, const char *data, size_t len) {
  eu_sock *s = ws_find(w, id);
  if (!s || (s->state != EU_WS_OPEN && s->state != EU_WS_CLOSING)) return EU_EINVAL;
  eu_world_touch(w, w->objects[s->obj]->res, 1);
  if (eu_ws_record_put(&s->inbox, op, code, w->sched.now, data, len) != EU_OK) return EU_ENOMEM;
  ws_queue_in(w, s);
  return EU_OK;
}

int eu_world_ws_seen(eu_world *w, int64_t id, eu_ws_seen *out) {
  eu_sock *s = ws_find(w, id);
  if (!s) return EU_EINVAL;
  out->state = s->state;
  out->object = w->objects[s->obj]->tag;
  out->client = s->client;
  out->got = s->got.p ? s->got.p : "";
  out->got_len = s->got.n;
  return EU_OK;
}

/* The socket id of L's object, or NULL with why. */
static eu_sock *ws_own(lua_State *L, int64_t id, char *why, size_t whylen) {
  eu_world *w = eu_world_of(L);
  eu_object *o = eu_world_self(L);
  eu_sock *s = w ? ws_find(w, id) : NULL;
  if (!o || o->ns < 0) {
    eu_err(why, whylen, EU_EINVAL, "only a Durable Object has WebSockets");
    return NULL;
  }
  if (!s || s->obj != o->index) {
    eu_err(why, whylen, EU_EINVAL, "the WebSocket is not one this object accepted");
    return NULL;
  }
  return s;
}

int eu_world_ws_accept(lua_State *L, const char *const *tags, const size_t *lens, int n, int64_t *out,
                       char *why, size_t whylen) {
  eu_world *w = eu_world_of(L);
  eu_object *o = eu_world_self(L);
  eu_task *t = eu_world_running(L);
  eu_sock *s;
  int i;
  if (!w || !o || o->ns < 0) return eu_err(why, whylen, EU_EINVAL, "only a Durable Object can accept a WebSocket");
  if (ws_prune(w, o) >= EU_WS_MAX_PER_OBJECT)
    return eu_err(why, whylen, EU_EINVAL, "an object may hold %d WebSockets at once", EU_WS_MAX_PER_OBJECT);
  if (!room((void **)&w->socks, w->nsocks, &w->capsocks, sizeof *w->socks) || !(s = calloc(1, sizeof *s)))
    return eu_err(why, whylen, EU_ENOMEM, "not enough memory");
  save_object(w, o);
  s->id = w->nsocks + 1;
  s->obj = o->index;
  s->state = EU_WS_PENDING;
  s->ident = eu_mix64(t ? t->ident : o->res, 0x50c0000u + (uint64_t)(t ? t->calls++ : s->id));
  for (i = 0; i < n; i++)
    if (eu_buf_put(&s->tags, tags[i], lens[i]) != EU_OK || eu_buf_put(&s->tags, "", 1) != EU_OK) {
      eu_buf_free(&s->tags);
      free(s);
      return eu_err(why, whylen, EU_ENOMEM, "not enough memory");
    }
  w->socks[w->nsocks++] = s;
  if (o->ws_tail) ws_find(w, o->ws_tail)->next = s->id;
  else o->ws_head = s->id;
  o->ws_tail = s->id;
  trace(w, "%s  accepts WebSocket %lld", o->tag, (long long)s->id);
  *out = s->id;
  return EU_OK;
}

int eu_world_ws_send(lua_State *L, int64_t id, int op, int code, const char *data, size_t len, char *why,
                     size_t whylen) {
  eu_world *w = eu_world_of(L);
  eu_sock *s = ws_own(L, id, why, whylen);
  if (!s) return EU_EINVAL;
  if (s->state == EU_WS_CLOSED || s->state == EU_WS_CLOSING)
    return eu_err(why, whylen, EU_EINVAL, "the WebSocket is %s", s->state == EU_WS_CLOSED ? "closed" : "closing");
  if (!eu_world_running(L)) return eu_err(why, whylen, EU_EINVAL, "a WebSocket sends only from an invocation");
  if (eu_buf_put(&w->ws_sent, &id, 8) != EU_OK || eu_ws_record_put(&w->ws_sent, op, code, 0, data, len) != EU_OK)
    return eu_err(why, whylen, EU_ENOMEM, "not enough memory");
  return EU_OK;
}

int eu_world_ws_get(lua_State *L, int64_t id, int *state, const char **tags, size_t *tags_len,
                    const char **attach, size_t *attach_len, int64_t *auto_at) {
  char why[64];
  eu_sock *s = ws_own(L, id, why, sizeof why);
  if (!s) return EU_EINVAL;
  *state = s->state;
  *tags = s->tags.p ? s->tags.p : "";
  *tags_len = s->tags.n;
  *attach = s->attach.p;
  *attach_len = s->attach.n;
  *auto_at = s->auto_at;
  return EU_OK;
}

int eu_world_ws_attach(lua_State *L, int64_t id, char *attach, size_t len) {
  char why[64];
  eu_sock *s = ws_own(L, id, why, sizeof why);
  int rc = EU_OK;
  if (!s) {
    free(attach);
    return EU_EINVAL;
  }
  save_object(eu_world_of(L), eu_world_self(L));
  eu_buf_reset(&s->attach);
  if (attach && eu_buf_put(&s->attach, attach, len) != EU_OK) rc = EU_ENOMEM;
  free(attach);
  return rc;
}

int eu_world_ws_list(lua_State *L, const char *tag, const int64_t **ids, int *n) {
  eu_world *w = eu_world_of(L);
  eu_object *o = eu_world_self(L);
  int64_t id;
  *n = 0;
  *ids = NULL;
  if (!w || !o) return EU_EINVAL;
  ws_prune(w, o);
  for (id = o->ws_head; id; id = ws_find(w, id)->next) {
    eu_sock *s = ws_find(w, id);
    if (tag) {
      const char *p = s->tags.p, *end = s->tags.p + s->tags.n;
      int has = 0;
      while (p && p < end && !has) {
        has = strcmp(p, tag) == 0;
        p += strlen(p) + 1;
      }
      if (!has) continue;
    }
    if (!room((void **)&w->ws_ids, *n, &w->capws_ids, sizeof *w->ws_ids)) return EU_ENOMEM;
    w->ws_ids[(*n)++] = s->id;
  }
  *ids = w->ws_ids;
  return EU_OK;
}

int eu_world_ws_auto(lua_State *L, const char *req, size_t req_len, const char *resp, size_t resp_len) {
  eu_world *w = eu_world_of(L);
  eu_object *o = eu_world_self(L);
  char *a = NULL, *b = NULL;
  if (!w || !o || o->ns < 0) return EU_EINVAL;
  if (req && (!room((void **)&w->kept, w->nkept, &w->capkept, sizeof *w->kept) ||
              !(a = dupmem(req, req_len)) || !(w->kept[w->nkept++] = a) ||
              !room((void **)&w->kept, w->nkept, &w->capkept, sizeof *w->kept) ||
              !(b = dupmem(resp, resp_len)) || !(w->kept[w->nkept++] = b)))
    return EU_ENOMEM;
  save_object(w, o);
  o->auto_req = a;
  o->auto_req_len = req_len;
  o->auto_resp = b;
  o->auto_resp_len = resp_len;
  return EU_OK;
}

/* Checkpoints: every socket, its buffers after it. */
static int ws_save(eu_world *w, eu_buf *blob) {
  int i;
  for (i = 0; i < w->nsocks; i++) {
    eu_sock *s = w->socks[i];
    const eu_buf *bufs[6];
    int k;
    bufs[0] = &s->tags; bufs[1] = &s->attach; bufs[2] = &s->inbox;
    bufs[3] = &s->script; bufs[4] = &s->early; bufs[5] = &s->got;
    if (eu_buf_put(blob, s, sizeof *s) != EU_OK) return EU_ENOMEM;
    for (k = 0; k < 6; k++)
      if (bufs[k]->n && eu_buf_put(blob, bufs[k]->p, bufs[k]->n) != EU_OK) return EU_ENOMEM;
  }
  return EU_OK;
}

static void ws_free(eu_sock *s) {
  eu_buf_free(&s->tags);
  eu_buf_free(&s->attach);
  eu_buf_free(&s->inbox);
  eu_buf_free(&s->script);
  eu_buf_free(&s->early);
  eu_buf_free(&s->got);
  free(s);
}

/* Puts back nsocks sockets from *p; 0 when memory ran out. */
static int ws_load(eu_world *w, const char **p, int nsocks) {
  int i, ok = 1;
  while (w->nsocks > nsocks) ws_free(w->socks[--w->nsocks]);
  for (i = 0; i < nsocks; i++) {
    eu_sock *s = w->socks[i], saved;
    eu_buf *bufs[6];
    size_t lens[6];
    int k;
    memcpy(&saved, *p, sizeof saved);
    *p += sizeof saved;
    lens[0] = saved.tags.n; lens[1] = saved.attach.n; lens[2] = saved.inbox.n;
    lens[3] = saved.script.n; lens[4] = saved.early.n; lens[5] = saved.got.n;
    bufs[0] = &s->tags; bufs[1] = &s->attach; bufs[2] = &s->inbox;
    bufs[3] = &s->script; bufs[4] = &s->early; bufs[5] = &s->got;
    for (k = 0; k < 6; k++) {
      eu_buf_reset(bufs[k]);
      if (lens[k] && eu_buf_put(bufs[k], *p, lens[k]) != EU_OK) ok = 0;
      *p += lens[k];
    }
    s->id = saved.id;
    s->next = saved.next;
    s->obj = saved.obj;
    s->state = saved.state;
    s->ident = saved.ident;
    s->auto_at = saved.auto_at;
    s->delivered = saved.delivered;
    s->in_queued = saved.in_queued;
    s->due_queued = saved.due_queued;
    memcpy(s->client, saved.client, sizeof s->client);
  }
  return ok;
}

/* ---- reset ------------------------------------------------------------ */

int eu_world_reset(eu_world *w, eu_object *o) {
  if (o->ns < 0) return EU_EINVAL;
  reset_object(w, o, NULL, 0, 1);
  return EU_OK;
}

/* The reset: why (NULL for a reset of the platform's) is what the callers
 * of the invocations in flight get. */
static void reset_object(eu_world *w, eu_object *o, const char *why, int remote, int retryable) {
  eu_task *t, *next;
  int alarm = 0, alarm_retry = 0;
  save_object(w, o);
  if (w->step_open) eu_fp_add(&w->fp, o->res, 1);
  trace(w, "%s  reset: in-memory state lost, storage kept", o->tag);
  record(w, "note", o->tag, NULL, "reset: in-memory state lost");
  /* A waitUntil or a branch not started yet goes with the isolate its function is in. */
  for (t = w->tasks; t; t = next) {
    next = t->next;
    if (t->obj != o || (t->kind != EU_TASK_WAIT_UNTIL && t->kind != EU_TASK_BRANCH) || t->co) continue;
    trace(w, "%s  dropped: its object was reset", t->label);
    free_task(w, t);
  }
  /* Every invocation in flight in the object is interrupted; its caller sees
   * a retryable failure, as after an object is evicted. */
  for (t = w->tasks; t; t = next) {
    next = t->next;
    if (t->obj != o || !t->co) continue;  /* a call not yet delivered still arrives */
    trace(w, "%s  ends: its object was reset", t->label);
    answer_error(w, t, "Error", why ? why : "the object was reset while the invocation was running",
                 why ? remote : 0, why ? retryable : 1);
    if (t->kind == EU_TASK_ALARM) {
      alarm = 1;
      alarm_retry = t->alarm_retry;
    }
    free_task(w, t);
  }
  if (o->store && eu_store_in_turn(o->store)) eu_store_rollback(o->store);
  /* An alarm that did not run to its end did not succeed: it is retried,
   * unless what it committed set the next alarm already. */
  if (alarm && o->store) {
    int has = 0, retry = 0;
    int64_t at = 0;
    if (eu_store_get_alarm(o->store, &has, &at, &retry) == EU_OK && !has) alarm_failed(w, o, alarm_retry);
  }
  close_isolate(w, o);
  ws_reset(w, o);
  o->auto_req = o->auto_resp = NULL;
  o->alarm_running = 0;
  o->init_block = 0;
  o->breaking = EU_BREAK_NONE;
  if (o->gate) open_gate(w, o, 0);  /* its holder is gone */
  note_resident(w, o);
  reconcile_alarm(w, o);
}

/* ---- eviction --------------------------------------------------------- */

int64_t eu_object_last_active(eu_object *o) { return o->last_active; }

int eu_world_evictable(eu_world *w, eu_object *o) {
  eu_task *t;
  if (o->ns < 0 || o->alarm_running || (o->store && eu_store_in_turn(o->store))) return 0;
  for (t = w->tasks; t; t = t->next)
    if (t->obj == o) return 0;
  return 1;
}

int eu_world_evict(eu_world *w, eu_object *o) {
  if (!eu_world_evictable(w, o)) return EU_EINVAL;
  close_isolate(w, o);
  put_store(o);
  o->store = NULL;
  o->store_lent = 0;
  note_resident(w, o);
  return EU_OK;
}

int eu_world_hibernate(eu_world *w, eu_object *o) {
  if (!eu_world_evictable(w, o)) return EU_EINVAL;
  if (o->iso) trace(w, "%s  hibernates: in-memory state lost, its WebSockets stay open", o->tag);
  close_isolate(w, o);
  note_resident(w, o);
  return EU_OK;
}

int eu_world_nresident(eu_world *w) { return w->nresident; }

/* ---- checkpoints -------------------------------------------------------
 *
 * A checkpoint is the world between two steps: its own fields, objects,
 * tasks, slots and queued events copied into a blob, and, kept lazily,
 * each object as it was: the first time an object is touched after a
 * checkpoint (save_object), its isolate's arena is copied and its store
 * gets a savepoint. An object not touched since a checkpoint is still what
 * it was then, so a rewind only puts back the objects that have an image
 * or a savepoint from that checkpoint on. */

/* Room for one more element in *a (n of *cap used), new ones zeroed;
 * 0 when memory ran out. */
static int room(void **a, int n, int *cap, size_t size) {
  int c;
  void *p;
  if (n < *cap) return 1;
  c = *cap ? *cap * 2 : 8;
  if (!(p = realloc(*a, (size_t)c * size))) return 0;
  memset((char *)p + (size_t)*cap * size, 0, (size_t)(c - *cap) * size);
  *a = p;
  *cap = c;
  return 1;
}

static void store_mark(eu_world *w, eu_object *o) {
  if (!room((void **)&o->marks, o->nmarks, &o->capmarks, sizeof *o->marks)) {
    w->ck_broken = 1;
    return;
  }
  if (eu_store_checkpoint(o->store) != EU_OK) {
    w->ck_broken = 1;
    return;
  }
  o->marks[o->nmarks].depth = w->ck_depth;
  o->nmarks++;
}

/* Called before anything reads or writes o's store in a step. A mark a
 * rewind kept, untouched since, is the store as it is now: it becomes this
 * checkpoint's mark instead of a new one. */
static void save_store(eu_world *w, eu_object *o) {
  int kept = o->ck_kept & KEPT_STORE;
  o->ck_kept &= ~KEPT_STORE;
  if (!w->ck_on || w->ncks == 0 || o->ck_marked == w->ck_serial) return;
  o->ck_marked = w->ck_serial;
  if (kept) o->marks[o->nmarks - 1].depth = w->ck_depth;
  else if (o->store) store_mark(w, o);
}

/* Called before anything reads or writes o's isolate or store in a step;
 * an image a rewind kept serves as save_store's mark does. */
static void save_object(eu_world *w, eu_object *o) {
  ck_img *e;
  int kept = o->ck_kept & KEPT_HEAP;
  if (o->packed) wake_heap(w, o);
  save_store(w, o);
  o->ck_kept &= ~KEPT_HEAP;
  if (!w->ck_on || w->ncks == 0 || o->ck_seen == w->ck_serial) return;
  o->ck_seen = w->ck_serial;
  if (kept) {
    o->imgs[o->nimgs - 1].depth = w->ck_depth;
    return;
  }
  if (!room((void **)&o->imgs, o->nimgs, &o->capimgs, sizeof *o->imgs)) {
    w->ck_broken = 1;
    return;
  }
  e = &o->imgs[o->nimgs];
  e->depth = w->ck_depth;
  e->had = o->iso != NULL;
  if (e->had) {
    size_t n = eu_arena_used(o->arena);
    if (n > e->cap) {
      void *img = realloc(e->img, n);
      if (!img) {
        w->ck_broken = 1;
        return;
      }
      w->ck_bytes += n - e->cap;
      e->img = img;
      e->cap = n;
      eu_prefault(img, n);
    }
    eu_arena_save(o->arena, e->img);
    e->len = n;
  }
  o->nimgs++;
}

/* A spare of s for an object of binding ns, its image dropped if it was
 * another binding's; 0 when s has none. */
static int take_spare(eu_spares *s, int ns, spare *out) {
  int i, k = s->n - 1;
  if (s->n == 0) return 0;
  for (i = s->n - 1; i >= 0; i--)
    if (s->s[i].ns == ns) {
      k = i;
      break;
    }
  *out = s->s[k];
  s->s[k] = s->s[--s->n];
  if (out->ns != ns) {
    free(out->boot_img);
    out->boot_img = NULL;
    out->boot_len = 0;
    out->boot_wire_ref = LUA_NOREF;
  }
  return 1;
}

/* Keeps a spare in s; 0 when there is no room for it. */
static int put_spare(eu_spares *s, const spare *sp) {
  if (s->n == s->cap) {
    int cap = s->cap ? s->cap * 2 : 8;
    spare *a = realloc(s->s, (size_t)cap * sizeof *a);
    if (!a) return 0;
    s->s = a;
    s->cap = cap;
  }
  s->s[s->n++] = *sp;
  return 1;
}

/* Moves o's arena and boot image into s; 0 when there is no room for them. */
static int spare_arena(eu_spares *s, eu_object *o) {
  spare sp;
  sp.arena = o->arena;
  sp.boot_img = o->boot_img;
  sp.boot_len = o->boot_len;
  sp.boot_wire_ref = o->boot_wire_ref;
  sp.ns = o->ns;
  if (!put_spare(s, &sp)) return 0;
  o->arena = NULL;
  o->boot_img = NULL;
  return 1;
}

eu_spares *eu_spares_new(void) {
  return calloc(1, sizeof(eu_spares));
}

static void clear_spares(eu_spares *s) {
  int i;
  for (i = 0; i < s->n; i++) {
    eu_arena_delete(s->s[i].arena);
    free(s->s[i].boot_img);
  }
  free(s->s);
  memset(s, 0, sizeof *s);
}

void eu_spares_free(eu_spares *s) {
  if (!s) return;
  clear_spares(s);
  free(s);
}

/* An arena for o, with its boot image when a forgotten object or a world
 * gone left one. */
static eu_arena *take_arena(eu_world *w, eu_object *o) {
  spare t;
  if (take_spare(&w->spares, o->ns, &t) || (w->o.spares && take_spare(w->o.spares, o->ns, &t))) {
    o->boot_img = t.boot_img;
    o->boot_len = t.boot_len;
    o->boot_wire_ref = t.boot_wire_ref;
    return t.arena;
  }
  return eu_arena_new((w->o.mem_limit ? w->o.mem_limit : EU_ISOLATE_MEM_DEFAULT) + EU_ISOLATE_RESERVE);
}

/* ---- berths -------------------------------------------------------------
 *
 * With eu_world_opts.berths, objects' isolates live in that many arenas, and
 * the heaps of objects in one berth take turns in it: one is awake, the
 * others packed, each as a delta from the berth's base (arena.h), which
 * costs a small part of the heap. An object keeps its berth while its
 * isolate lives, since a heap is at home only at its own addresses; a new
 * isolate takes a free berth, or the one used least recently. Waking a
 * packed heap packs the one awake in its berth: that happens between
 * turns, where no Lua code of either object is running. */

/* Packs o's heap; its berth is free for another's, and is base again. */
static int pack_heap(eu_world *w, eu_object *o) {
  berth *b = &w->berths[o->berth];
  size_t max = eu_arena_delta_max(o->arena), n;
  unsigned char *d;
  if (max > w->pack_cap) {
    free(w->pack_buf);
    w->pack_cap = 0;
    if (!(w->pack_buf = malloc(max))) return EU_ENOMEM;
    w->pack_cap = max;
  }
  n = eu_arena_delta(o->arena, b->base, b->base_len, w->pack_buf);
  if (!(d = malloc(n))) return EU_ENOMEM;
  memcpy(d, w->pack_buf, n);
  o->packed_mem = eu_isolate_mem(o->iso);
  o->packed_limit = eu_isolate_mem_limit(o->iso);
  o->packed = d;
  o->packed_len = n;
  eu_arena_undo_delta(b->arena, b->base, b->base_len, d, n);
  b->clean_to = eu_arena_used(b->arena);
  b->o = NULL;
  link_limits(w, o);  /* the quota is the same: nothing that can fail runs */
  return EU_OK;
}

/* Makes room in berth b: the heap awake there is packed, or, when memory
 * for that ran out, the object is evicted (its isolate closed), as a
 * platform may evict any object. */
static void clear_berth(eu_world *w, berth *b) {
  eu_object *v = b->o;
  if (!v) return;
  if (w->running && w->running->obj == v) {
    fprintf(stderr, "eutaxy: %s's heap was asked to make way while it runs\n", v->tag);
    abort();
  }
  if (pack_heap(w, v) == EU_OK) return;
  trace(w, "%s  evicted: no memory to pack its heap", v->tag);
  close_isolate(w, v);
  note_resident(w, v);
}

static void wake_heap(eu_world *w, eu_object *o) {
  berth *b = &w->berths[o->berth];
  unsigned char *d = o->packed;
  clear_berth(w, b);
  o->packed = NULL;
  eu_arena_apply_delta(b->arena, b->base, b->base_len, b->clean_to, d, o->packed_len);
  free(d);
  b->o = o;
  b->clean_to = 0;
  b->used = ++w->berth_clock;
  link_limits(w, o);
}

static berth *take_berth(eu_world *w, eu_object *o) {
  berth *b = NULL;
  int i;
  if (!w->berths && !(w->berths = calloc((size_t)w->o.berths, sizeof *w->berths))) return NULL;
  for (i = 0; i < w->nberths; i++)
    if (!w->berths[i].o && (!b || w->berths[i].used < b->used)) b = &w->berths[i];
  if (!b && w->nberths < w->o.berths) {
    b = &w->berths[w->nberths];
    if (!(b->arena = eu_arena_new((w->o.mem_limit ? w->o.mem_limit : EU_ISOLATE_MEM_DEFAULT) + EU_ISOLATE_RESERVE)))
      return NULL;
    b->base_wire_ref = LUA_NOREF;
    w->nberths++;
  }
  if (!b) {
    for (i = 0; i < w->nberths; i++)
      if (!b || w->berths[i].used < b->used) b = &w->berths[i];
    clear_berth(w, b);
  }
  b->o = o;
  b->used = ++w->berth_clock;
  o->berth = (int)(b - w->berths);
  o->arena = b->arena;
  return b;
}

/* o's isolate is closed: its berth's arena is another's to use. */
static void leave_berth(eu_world *w, eu_object *o) {
  if (o->berth < 0) return;
  if (w->berths[o->berth].o == o) {
    w->berths[o->berth].o = NULL;
    w->berths[o->berth].clean_to = 0;
  }
  o->berth = -1;
  o->arena = NULL;
}

/* Takes o's arena and boot image back, for the next object's build. */
static void give_arena(eu_world *w, eu_object *o) {
  if (!o->arena) return;
  if (!spare_arena(&w->spares, o)) {
    eu_arena_delete(o->arena);
    o->arena = NULL;
  }
}

static void forget_saves(eu_world *w, eu_object *o) {
  int i;
  free(o->boot_img);
  o->boot_img = NULL;
  for (i = 0; i < o->capimgs; i++) {
    w->ck_bytes -= o->imgs[i].cap;
    free(o->imgs[i].img);
  }
  free(o->imgs);
  free(o->marks);
  o->imgs = NULL;
  o->marks = NULL;
  o->nimgs = o->capimgs = o->nmarks = o->capmarks = 0;
}

int eu_world_checkpoint(eu_world *w) {
  wck *c;
  eu_task *t;
  int i, ntasks = 0;
  size_t k;
  if (!w->ck_on) return EU_OK;
  if (w->ck_broken) return EU_EINVAL;
  if (w->ncks == w->capcks) {
    int cap = w->capcks ? w->capcks * 2 : 32;
    wck *a = realloc(w->cks, (size_t)cap * sizeof *a);
    if (!a) return EU_ENOMEM;
    for (i = w->capcks; i < cap; i++) eu_buf_init(&a[i].blob);
    w->cks = a;
    w->capcks = cap;
  }
  c = &w->cks[w->ncks];
  c->w = *w;
  w->ck_bytes -= c->blob.cap;
  eu_buf_reset(&c->blob);
  for (i = 0; i < w->nobjects; i++)
    if (eu_buf_put(&c->blob, w->objects[i], sizeof(eu_object)) != EU_OK) return EU_ENOMEM;
  for (t = w->tasks; t; t = t->next) ntasks++;
  if (eu_buf_put(&c->blob, &ntasks, sizeof ntasks) != EU_OK) return EU_ENOMEM;
  for (t = w->tasks; t; t = t->next)
    if (eu_buf_put(&c->blob, t, sizeof *t) != EU_OK) return EU_ENOMEM;
  for (i = 0; i < w->nslots; i++)
    if (eu_buf_put(&c->blob, &w->slots[i], sizeof w->slots[i]) != EU_OK ||
        (w->slots[i].data && eu_buf_put(&c->blob, w->slots[i].data, w->slots[i].len) != EU_OK))
      return EU_ENOMEM;
  if (w->nroots && eu_buf_put(&c->blob, w->roots, (size_t)w->nroots * sizeof *w->roots) != EU_OK)
    return EU_ENOMEM;
  if (w->ncrons && eu_buf_put(&c->blob, w->cron_counts, (size_t)w->ncrons * sizeof *w->cron_counts) != EU_OK)
    return EU_ENOMEM;
  for (k = 0; k < w->sched.n; k++)
    if (eu_buf_put(&c->blob, &w->sched.heap[k], sizeof w->sched.heap[k]) != EU_OK ||
        (w->sched.heap[k].data && eu_buf_put(&c->blob, w->sched.heap[k].data, w->sched.heap[k].len) != EU_OK))
      return EU_ENOMEM;
  for (i = 0; i < w->nheld; i++)
    if (eu_buf_put(&c->blob, &w->held[i], sizeof w->held[i]) != EU_OK ||
        (w->held[i].ev.data && eu_buf_put(&c->blob, w->held[i].ev.data, w->held[i].ev.len) != EU_OK))
      return EU_ENOMEM;
  if (ws_save(w, &c->blob) != EU_OK) return EU_ENOMEM;
  if (w->uncaught && eu_buf_puts(&c->blob, w->uncaught) != EU_OK) return EU_ENOMEM;
  w->ck_bytes += c->blob.cap;
  w->ck_depth = w->ncks++;
  w->ck_serial++;
  return EU_OK;
}

int eu_world_checkpoints(eu_world *w) { return w->ck_on ? w->ncks : 0; }

size_t eu_world_checkpoint_bytes(eu_world *w) { return w->ck_bytes; }

int eu_world_decisions_ahead(eu_world *w) {
  int64_t at = eu_sched_next_time(&w->sched);
  size_t i, n = 0;
  if (w->faults_used < w->o.max_faults) return 1;
  for (i = 0; i < w->sched.n && n < 2; i++) n += w->sched.heap[i].at <= at;
  return n > 1;
}

/* A copy of n bytes of the blob, or NULL for none. */
static char *blob_copy(const char **p, size_t n, int *ok) {
  char *d = malloc(n ? n : 1);
  if (!d) *ok = 0;
  else memcpy(d, *p, n);
  *p += n;
  return d;
}

int eu_world_rewind(eu_world *w, int j) {
  const wck *c;
  const eu_world *sw;
  const char *p;
  eu_task **tail;
  int i, ntasks, ok = 1;
  size_t k;
  if (!w->ck_on || w->ck_broken || j < 0 || j >= w->ncks) return EU_EINVAL;
  c = &w->cks[j];
  sw = &c->w;
  /* Every object touched since j, as it was at j. The image it is put back
   * to, and the savepoint its store goes back to, stay as j's: they are
   * what touching the object again after the rewind would make, so the
   * object counts as saved at j already and the run does not copy it again
   * (and while it is not touched, they are what a later checkpoint would
   * make too: save_object). */
  for (i = 0; i < w->nobjects; i++) {
    eu_object *o = w->objects[i];
    int q, m, keep;
    for (q = 0; q < o->nimgs && o->imgs[q].depth < j; q++) {}
    if (q < o->nimgs) {
      keep = !o->packed && i < sw->nobjects;
      if (o->imgs[q].had) eu_arena_load(o->arena, o->imgs[q].img, o->imgs[q].len);
      else if (o->iso) eu_isolate_close(o->iso);
      o->imgs[q].depth = j;
      o->nimgs = q + keep;
      o->ck_kept = keep ? o->ck_kept | KEPT_HEAP : o->ck_kept & ~KEPT_HEAP;
      if (keep) o->ck_seen = w->ck_serial + 1;
    }
    for (m = 0; m < o->nmarks && o->marks[m].depth < j; m++) {}
    if (m < o->nmarks) {
      keep = i < sw->nobjects;
      if (keep) {  /* and its store was open at j: one opened since goes */
        eu_store *at_j;
        memcpy(&at_j, c->blob.p + (size_t)i * sizeof *o + offsetof(eu_object, store), sizeof at_j);
        keep = at_j == o->store;
      }
      if (eu_store_checkpoint_back(o->store, o->nmarks - m, keep) != EU_OK) ok = 0;
      o->marks[m].depth = j;
      o->nmarks = m + keep;
      o->ck_kept = keep ? o->ck_kept | KEPT_STORE : o->ck_kept & ~KEPT_STORE;
      if (keep) o->ck_marked = w->ck_serial + 1;
    }
  }
  /* objects first seen after j: gone again */
  for (i = w->nobjects - 1; i >= sw->nobjects; i--) {
    eu_object *o = w->objects[i];
    put_store(o);
    give_arena(w, o);
    forget_saves(w, o);
    free(o->name);
    free(o);
  }
  p = c->blob.p;
  for (i = 0; i < sw->nobjects; i++) {
    eu_object *o = w->objects[i], so;
    memcpy(&so, p, sizeof so);
    p += sizeof so;
    so.arena = o->arena;
    so.ck_seen = o->ck_seen;
    so.ck_marked = o->ck_marked;
    so.ck_kept = o->ck_kept;
    so.imgs = o->imgs;
    so.nimgs = o->nimgs;
    so.capimgs = o->capimgs;
    so.marks = o->marks;
    so.nmarks = o->nmarks;
    so.capmarks = o->capmarks;
    so.boot_img = o->boot_img;
    so.boot_len = o->boot_len;
    so.boot_wire_ref = o->boot_wire_ref;
    if (o->name != so.name) free(o->name);  /* learnt after j */
    *o = so;
  }
  if (w->nobjects != sw->nobjects) {
    w->nobjects = sw->nobjects;
    memset(w->index, 0, (w->index_mask + 1) * sizeof *w->index);
    for (i = 0; i < w->nobjects; i++)
      if (w->objects[i]->ns >= 0) index_object(w, w->objects[i]);
  }
  for (i = 0; i < w->nobjects; i++)
    if (w->objects[i]->store) link_limits(w, w->objects[i]);
  /* tasks, slots, roots, the queue */
  while (w->tasks) {
    eu_task *t = w->tasks;
    w->tasks = t->next;
    free(t);
  }
  memcpy(&ntasks, p, sizeof ntasks);
  p += sizeof ntasks;
  tail = &w->tasks;
  for (i = 0; i < ntasks; i++) {
    eu_task *t = malloc(sizeof *t);
    if (!t) {
      ok = 0;
      break;
    }
    memcpy(t, p, sizeof *t);
    p += sizeof *t;
    t->next = NULL;
    *tail = t;
    tail = &t->next;
  }
  for (i = 0; i < w->nslots; i++) free(w->slots[i].data);
  for (i = 0; ok && i < sw->nslots; i++) {
    memcpy(&w->slots[i], p, sizeof w->slots[i]);
    p += sizeof w->slots[i];
    if (w->slots[i].data) w->slots[i].data = blob_copy(&p, w->slots[i].len, &ok);
  }
  memcpy(w->roots, p, (size_t)sw->nroots * sizeof *w->roots);
  p += (size_t)sw->nroots * sizeof *w->roots;
  if (w->ncrons) memcpy(w->cron_counts, p, (size_t)w->ncrons * sizeof *w->cron_counts);
  p += (size_t)w->ncrons * sizeof *w->cron_counts;
  for (k = 0; k < w->sched.n; k++) free(w->sched.heap[k].data);
  for (k = 0; ok && k < sw->sched.n; k++) {
    memcpy(&w->sched.heap[k], p, sizeof w->sched.heap[k]);
    p += sizeof w->sched.heap[k];
    if (w->sched.heap[k].data) w->sched.heap[k].data = blob_copy(&p, w->sched.heap[k].len, &ok);
  }
  for (i = 0; i < w->nheld; i++) free(w->held[i].ev.data);
  w->nheld = 0;
  for (i = 0; ok && i < sw->nheld; i++) {
    if (!room((void **)&w->held, i, &w->capheld, sizeof *w->held)) {
      ok = 0;
      break;
    }
    memcpy(&w->held[i], p, sizeof w->held[i]);
    p += sizeof w->held[i];
    if (w->held[i].ev.data) w->held[i].ev.data = blob_copy(&p, w->held[i].ev.len, &ok);
    w->nheld = i + 1;
  }
  if (!ws_load(w, &p, sw->nsocks)) ok = 0;
  w->ws_sent.n = 0;
  free(w->uncaught);
  w->uncaught = sw->uncaught ? dupstr(p) : NULL;
  /* the world's own fields; its options are this run's */
  w->nresident = sw->nresident;
  w->next_task = sw->next_task;
  w->running = NULL;
  w->nslots = sw->nslots;
  w->nroots = sw->nroots;
  w->sched.n = sw->sched.n;
  w->sched.next_seq = sw->sched.next_seq;
  w->sched.now = sw->sched.now;
  w->prng = sw->prng;
  w->trace.n = sw->trace.n;
  w->fault_log.n = sw->fault_log.n;
  w->events.n = sw->events.n;
  if (w->trace.p) w->trace.p[w->trace.n] = '\0';
  if (w->fault_log.p) w->fault_log.p[w->fault_log.n] = '\0';
  if (w->events.p) w->events.p[w->events.n] = '\0';
  w->faults_used = sw->faults_used;
  w->fault_kinds_used = sw->fault_kinds_used;
  w->capped = sw->capped;
  w->stopped = sw->stopped;
  w->arrived = sw->arrived;
  w->step = sw->step;
  w->step_open = sw->step_open;
  w->fp = sw->fp;
  w->draws = sw->draws;
  w->step_draws = sw->step_draws;
  w->worker_print = sw->worker_print;
  w->worker_printed = sw->worker_printed;
  w->ncks = j + 1;
  w->ck_depth = j;
  w->ck_serial++;
  if (!ok) w->ck_broken = 1;
  return ok ? EU_OK : EU_ENOMEM;
}

void eu_world_retarget(eu_world *w, const eu_world_opts *o) {
  w->o.choose = o->choose;
  w->o.choose_ud = o->choose_ud;
  w->o.max_faults = o->max_faults;
  w->o.no_trace = o->no_trace;
  w->o.on_step = o->on_step;
  w->o.on_step_end = o->on_step_end;
  w->o.step_ud = o->step_ud;
}

/* ---- the world -------------------------------------------------------- */

void eu_world_free(eu_world *w) {
  int i;
  if (!w) return;
  w->ck_on = 0;  /* nothing is saved on the way out */
  w->closing = 1;
  while (w->tasks) free_task(w, w->tasks);
  for (i = 0; i < w->nobjects; i++) {
    eu_object *o = w->objects[i];
    close_isolate(w, o);
    put_store(o);
    /* the next world's builds start from this one's boot images */
    if (!(o->arena && o->boot_img && w->o.spares && spare_arena(w->o.spares, o))) eu_arena_delete(o->arena);
    forget_saves(w, o);
    free(o->name);
    free(o);
  }
  for (i = 0; i < w->spares.n; i++)
    if (!(w->spares.s[i].boot_img && w->o.spares && put_spare(w->o.spares, &w->spares.s[i]))) {
      eu_arena_delete(w->spares.s[i].arena);
      free(w->spares.s[i].boot_img);
    }
  free(w->spares.s);
  for (i = 0; i < w->nberths; i++) {
    eu_arena_delete(w->berths[i].arena);
    free(w->berths[i].base);
  }
  free(w->berths);
  free(w->pack_buf);
  for (i = 0; i < w->capcks; i++) eu_buf_free(&w->cks[i].blob);
  free(w->cks);
  free(w->objects);
  free(w->index);
  for (i = 0; i < w->nslots; i++) free(w->slots[i].data);
  free(w->slots);
  for (i = 0; i < w->nheld; i++) free(w->held[i].ev.data);
  free(w->held);
  eu_sched_free(&w->sched);
  if (w->scratch) lua_close(w->scratch);
  for (i = 0; i < w->nbindings; i++) {
    free((char *)w->bindings[i].name);
    free((char *)w->bindings[i].class_name);
    free((char *)w->bindings[i].entry);
  }
  free(w->bindings);
  free(w->vars);
  free(w->libdir);
  free(w->entry);
  free(w->projectdir);
  eu_buf_free(&w->trace);
  eu_buf_free(&w->fault_log);
  eu_buf_free(&w->events);
  free(w->arms);
  for (i = 0; i < w->nsocks; i++) ws_free(w->socks[i]);
  free(w->socks);
  eu_buf_free(&w->ws_sent);
  free(w->ws_ids);
  for (i = 0; i < w->nkept; i++) free(w->kept[i]);
  free(w->kept);
  free(w->roots);
  free(w->uncaught);
  free(w->undeclared);
  free((int *)w->o.alarm_caps);
  for (i = 0; i < w->ncrons; i++) free(w->cron_exprs[i]);
  free(w->cron_exprs);
  free(w->crons);
  free(w->cron_last);
  free(w->cron_counts);
  free(w);
}


/* The crons of o, parsed, and when each stops firing under max_crons: the
 * first max_crons due times after the start, all crons merged in time
 * order, or each cron's first, are the run's. The bound is a horizon, not
 * a count any fault or retry could change. */
static int plan_crons(eu_world *w, const eu_world_opts *o, char *err, size_t errlen) {
  int64_t *next;
  int i, k;
  if (o->ncrons <= 0) return EU_OK;
  w->crons = calloc((size_t)o->ncrons, sizeof *w->crons);
  w->cron_exprs = calloc((size_t)o->ncrons, sizeof *w->cron_exprs);
  w->cron_last = calloc((size_t)o->ncrons, sizeof *w->cron_last);
  w->cron_counts = calloc((size_t)o->ncrons, sizeof *w->cron_counts);
  next = calloc((size_t)o->ncrons, sizeof *next);
  if (!w->crons || !w->cron_exprs || !w->cron_last || !w->cron_counts || !next) {
    free(next);
    return eu_err(err, errlen, EU_ENOMEM, "out of memory");
  }
  for (i = 0; i < o->ncrons; i++) {
    char why[EU_ERRLEN];
    if (!(w->cron_exprs[i] = dupstr(o->crons[i]))) {
      free(next);
      return eu_err(err, errlen, EU_ENOMEM, "out of memory");
    }
    w->ncrons++;
    if (eu_cron_parse(&w->crons[i], o->crons[i], why, sizeof why) != EU_OK) {
      free(next);
      return eu_err(err, errlen, EU_EINVAL, "triggers.crons[%d] \"%.100s\": %s", i + 1, o->crons[i], why);
    }
    next[i] = eu_cron_next(&w->crons[i], w->o.start_ms);
    w->cron_last[i] = o->max_crons > 0 ? -1 : o->max_crons < 0 ? next[i] : INT64_MAX;
  }
  for (k = 0; k < o->max_crons; k++) {
    int first = 0;
    for (i = 1; i < w->ncrons; i++)
      if (next[i] < next[first]) first = i;
    w->cron_last[first] = next[first];
    next[first] = eu_cron_next(&w->crons[first], next[first]);
  }
  free(next);
  return EU_OK;
}

/* Whether the worker module exports a function of that name: its dispatch
 * answers ("exports", name) outside any task. */
static int worker_exports(eu_world *w, const char *name) {
  lua_State *L = eu_isolate_L(w->worker->iso);
  int yes = 0;
  lua_rawgeti(L, LUA_REGISTRYINDEX, w->worker->dispatch_ref);
  lua_pushliteral(L, "exports");
  lua_pushstring(L, name);
  eu_isolate_arm(L, w->o.cpu_limit);  /* a module's metatable is user code */
  if (lua_pcall(L, 2, 1, 0) == LUA_OK) yes = lua_toboolean(L, -1);
  eu_isolate_arm(L, 0);
  lua_settop(L, 0);
  return yes;
}

/* The first firing of every cron that fires at all. */
static int start_crons(eu_world *w, char *err, size_t errlen) {
  int i;
  if (w->ncrons == 0) return EU_OK;
  if (!worker_exports(w, "scheduled"))
    return eu_err(err, errlen, EU_EINVAL,
                  "triggers.crons lists \"%.100s\", but %s exports no scheduled(controller, env, ctx) handler",
                  w->cron_exprs[0], w->entry);
  for (i = 0; i < w->ncrons; i++) {
    int64_t first = eu_cron_next(&w->crons[i], w->o.start_ms);
    if (first <= w->cron_last[i] && queue_cron(w, i, 0, first, first) != EU_OK)
      return eu_err(err, errlen, EU_ENOMEM, "out of memory");
  }
  return EU_OK;
}

int eu_world_new(eu_world **out, const eu_world_opts *o, char *err, size_t errlen) {
  eu_world *w;
  int i, rc;
  *out = NULL;
  if (!o->entry || !o->libdir)
    return eu_err(err, errlen, EU_EINVAL, "a world needs a worker entry and eutaxy's library folder");
  w = calloc(1, sizeof *w);
  if (!w) return eu_err(err, errlen, EU_ENOMEM, "out of memory");
  w->o = *o;
  w->o.alarm_caps = NULL;  /* copied below, once the world can free it */
  w->o.crons = NULL;       /* copied by plan_crons */
  if (!w->o.start_ms) w->o.start_ms = EU_DEFAULT_START_MS;
  {
    /* EUTAXY_CPU_LIMIT (VM instructions per turn) and EUTAXY_MEM_LIMIT (MiB
     * per isolate) replace the defaults in every mode, serve and check
     * included, which have no option of their own for them. */
    int64_t mib = 0;
    rc = w->o.cpu_limit ? EU_OK : eu_env_int("EUTAXY_CPU_LIMIT", 1, INT64_MAX, &w->o.cpu_limit, err, errlen);
    if (rc == EU_OK && !w->o.mem_limit) rc = eu_env_int("EUTAXY_MEM_LIMIT", 1, INT64_C(1) << 20, &mib, err, errlen);
    if (rc != EU_OK) {
      free(w);
      return rc;
    }
    if (!w->o.mem_limit) w->o.mem_limit = (size_t)mib << 20;  /* 0: the isolate's default */
  }
  if (!w->o.cpu_limit) w->o.cpu_limit = EU_DEFAULT_CPU_LIMIT;
  if (w->o.max_object_bytes <= 0) w->o.max_object_bytes = EU_DEFAULT_MAX_OBJECT_BYTES;
  w->libdir = dupstr(o->libdir);
  w->entry = dupstr(o->entry);
  w->projectdir = dupstr(o->projectdir ? o->projectdir : ".");
  w->bindings = calloc((size_t)(o->nbindings > 0 ? o->nbindings : 1), sizeof *w->bindings);
  w->scratch = luaL_newstate();
  eu_sched_init(&w->sched);
  eu_buf_init(&w->trace);
  eu_buf_init(&w->fault_log);
  eu_buf_init(&w->events);
  eu_prng_seed(&w->prng, o->seed);
  w->step = -1;
  w->ck_on = o->checkpoints;
  w->in_arenas = o->checkpoints || (o->spares && o->berths == 0);
  w->hooks.ud = w;
  w->hooks.now_ms = now_abs;
  w->hooks.elapsed_ms = elapsed;
  w->hooks.random = rnd;
  if (!w->libdir || !w->entry || !w->projectdir || !w->bindings || !w->scratch) {
    eu_world_free(w);
    return eu_err(err, errlen, EU_ENOMEM, "out of memory");
  }
  for (i = 0; i < o->nbindings; i++) {
    w->bindings[i].name = dupstr(o->bindings[i].name);
    w->bindings[i].class_name = dupstr(o->bindings[i].class_name);
    w->bindings[i].entry = o->bindings[i].entry ? dupstr(o->bindings[i].entry) : NULL;
    w->nbindings++;
    if (!w->bindings[i].name || !w->bindings[i].class_name || (o->bindings[i].entry && !w->bindings[i].entry)) {
      eu_world_free(w);
      return eu_err(err, errlen, EU_ENOMEM, "out of memory");
    }
  }
  w->o.bindings = NULL;
  if (o->vars && o->vars_len > 0) {
    if (!(w->vars = malloc(o->vars_len))) {
      eu_world_free(w);
      return eu_err(err, errlen, EU_ENOMEM, "out of memory");
    }
    memcpy(w->vars, o->vars, o->vars_len);
  }
  w->o.vars = w->vars;
  w->o.vars_len = w->vars ? o->vars_len : 0;
  if (o->alarm_caps && o->nbindings > 0) {
    int *caps = malloc((size_t)o->nbindings * sizeof *caps);
    if (!caps) {
      eu_world_free(w);
      return eu_err(err, errlen, EU_ENOMEM, "out of memory");
    }
    memcpy(caps, o->alarm_caps, (size_t)o->nbindings * sizeof *caps);
    w->o.alarm_caps = caps;
  } else {
    w->o.alarm_caps = NULL;
  }
  w->worker = add_object(w, -1, "0000000000000000000000000000000000000000000000000000000000000000",
                         NULL, 0);
  if (!w->worker) {
    eu_world_free(w);
    return eu_err(err, errlen, EU_ENOMEM, "out of memory");
  }
  if ((rc = plan_crons(w, o, err, errlen)) != EU_OK) {
    eu_world_free(w);
    return rc;
  }
  /* The worker is built now, so a broken worker file, a missing class or a
   * cron with no handler is reported before anything runs. */
  if ((rc = construct(w, w->worker, err, errlen)) != EU_OK || (rc = start_crons(w, err, errlen)) != EU_OK) {
    eu_world_free(w);
    return rc;
  }
  *out = w;
  return EU_OK;
}
