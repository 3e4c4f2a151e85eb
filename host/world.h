/*
 * world.h: a world of one worker and its objects, driven by the scheduler.
 *
 * The world owns the objects (each an isolate and a store), the tasks (an
 * invocation of fetch, an RPC method, an alarm, a cron's scheduled() or a
 * ctx.waitUntil function, each a coroutine in its isolate), the event
 * queue and the trace. It decides when a turn begins and ends: a task runs
 * from one yield point to the next, and its writes
 * are committed at the yield (the output gate) or rolled back if it raises.
 *
 * Every nondeterministic decision goes through eu_world_choose, answered by
 * the chooser the world was made with (random by seed when none is given).
 *
 * What callers outside any isolate (specs, the checker's drive, the HTTP
 * server) submit becomes a *slot*: a call whose answer the caller collects
 * once the world has run far enough.
 */
#ifndef EUTAXY_WORLD_H
#define EUTAXY_WORLD_H

#include <stdint.h>
#include <lua.h>

#include "buf.h"
#include "reduce.h"
#include "store.h"

typedef struct eu_world eu_world;
typedef struct eu_object eu_object;

typedef struct eu_binding {
  const char *name;        /* env.NAME; a service's origin ("https://payments.example") */
  const char *class_name;  /* the class the worker module exports; a service's origin */
  const char *entry;       /* NULL for a Durable Object class; a service's module, whose
                            * fetch(request, env, ctx) answers eutaxy.fetch to its origin */
} eu_binding;

/* Kinds of decision, so a chooser (and a schedule string) can tell them apart. */
enum {
  EU_CHOICE_ORDER = 0,   /* which of several due events goes first */
  EU_CHOICE_FAULT = 1    /* whether (and which) fault strikes at a fault point */
};

/* Returns an index in [0, n). label says where the decision is made. */
typedef int (*eu_choose_fn)(void *ud, int kind, int n, const char *label);

/* Isolates' arenas kept from worlds gone, each with the image of the
 * runtime as its last build loaded it (before any object's code ran), for
 * the next worlds of the same scenario and options to build their isolates
 * from (eu_world_opts.spares): the checker's setup world leaves them to its
 * kept worlds. */
typedef struct eu_spares eu_spares;
eu_spares *eu_spares_new(void);
void eu_spares_free(eu_spares *s);

typedef struct eu_world_opts {
  const char *libdir;       /* eutaxy's Lua modules */
  const char *entry;        /* the worker module's file */
  const char *projectdir;   /* modules of the project are found here */
  const eu_binding *bindings;
  int nbindings;
  /* The vars and secrets env carries besides the bindings: one table,
   * encoded (eu_clone_encode), decoded into each isolate as it is built, so
   * that no two isolates share a value. NULL for none. */
  const char *vars;
  size_t vars_len;
  uint64_t seed;
  int64_t start_ms;         /* the virtual clock's epoch, ms since 1970 */
  int64_t cpu_limit;        /* VM instructions per turn; 0 for the default */
  size_t mem_limit;         /* bytes per isolate, its object's SQLite memory included; 0 for the default */
  int64_t max_object_bytes; /* the size an object's database may reach; 0 for the default */
  eu_choose_fn choose;      /* NULL: random by seed */
  void *choose_ud;
  int echo_log;             /* also write print() output of isolates to stderr */
  int no_trace;             /* keep no trace: exploration runs faster without one */
  int gc_pause;             /* the isolates' garbage-collector pause, percent; 0: Lua's default */
  /* Faults (fault.h): which kinds may strike, how many per run, how often one
   * event may be run again by a fault, and how many times each object's alarm
   * may fire (per binding; 0 or NULL for no cap). */
  unsigned faults;
  int max_faults;
  int max_redeliveries;
  const int *alarm_caps;
  /* The worker's cron triggers (wrangler.jsonc's triggers.crons): each is
   * fired as the worker's scheduled(controller, env, ctx) whenever it is
   * due after the start, so the worker must export one. max_crons bounds
   * the firings of a run: above 0, the first max_crons in time order, all
   * crons together (crons due the same minute in this order); below 0, each
   * cron once, when it is first due; 0, no bound. */
  const char *const *crons;
  int ncrons;
  int max_crons;
  /* Told of every fault point a run reaches: the kinds it has (after
   * `faults`), whether the run could still inject one there (0 once
   * max_faults are spent), and the kind that struck or EU_FAULT_NONE. */
  void (*fault_point)(void *ud, const char *label, unsigned kinds, int open, int struck);
  void *fault_point_ud;
  /* Told after every turn whose commit wrote something (eu_store_turn_wrote):
   * the object's trace tag ("DO:POOL(pool)") and the task's label
   * ("req-2>POOL.acquire"). Nothing is called after a read-only turn. The
   * world is between turns: the hook may read any object's committed state
   * (an object's store with no turn open) and may stop the world. */
  void (*on_commit)(void *ud, eu_world *w, const char *object, const char *task);
  void *on_commit_ud;
  /* For partial-order reduction (reduce.h): told as each step begins, with
   * the events tied at its time in the order the chooser is offered them
   * (returning 1 stops the run there: every way on is covered elsewhere),
   * and as it ends, with what it touched. A step is one dispatched event
   * and what the caller of eu_world_step does before the next one (the
   * drive's admissions and resends, eu_world_touch). The worker's isolate
   * is fingerprinted around each of its turns only while on_step is set. */
  int (*on_step)(void *ud, const eu_tie *ties, int n, int64_t at);
  void (*on_step_end)(void *ud, const eu_fp *fp);
  void *step_ud;
  /* Where objects' databases come from. NULL: a private in-memory database
   * per object, closed with the world. A provider's stores stay the
   * provider's: the world never closes them. */
  eu_store *(*store_provider)(void *ud, int ns, const char *hex, char *err, size_t errlen);
  void *store_ud;
  /* A host whose stores take long to open (serve) may open them off the
   * world's thread: asked when a call reaches an object that has no store,
   * it returns 1 once it began, and the world holds every event of the
   * object until the host hands the store over (eu_world_store_opened), or
   * 0 to have store_provider asked now. NULL: never. */
  int (*store_opener)(void *ud, eu_object *o, int ns, const char *hex);
  /* Where an eutaxy.fetch goes that no service of the world answers. NULL:
   * nowhere, and the fetch raises (check, specs). A host on the network
   * (serve) is handed the waiting task's id and its wire request (encoded,
   * one value; the hook owns the bytes from then on, and frees them even
   * when it fails), and resumes the task with eu_world_resume_outbound once
   * the answer is in. Returns EU_OK, or an error whose message the fetch
   * raises. */
  int (*outbound)(void *ud, int64_t task, char *payload, size_t len, char *err, size_t errlen);
  void *outbound_ud;
  /* Keep checkpoints (eu_world_checkpoint): objects' isolates live in
   * arenas, and their stores must come from a provider in baseline mode. */
  int checkpoints;
  /* Where the arenas of isolates come from, when a world gone left some,
   * and go back to with the world (NULL: made and deleted with it). Set,
   * isolates live in arenas with boot images, as with checkpoints; not
   * with berths. */
  eu_spares *spares;
  /* Keep idle objects' heaps small (serve): objects' isolates live in this
   * many arenas, one awake in each; the heaps of the others are packed as
   * deltas from what every isolate of their arena started from, and woken
   * when next used. 0: each isolate has a heap of its own. Not with
   * checkpoints. */
  int berths;
  /* A waitUntil asked for by an invocation that answers a slot starts once
   * that answer is taken (serve: as the response leaves), not as soon as
   * the invocation ends. */
  int hold_wait_until;
  /* Where what objects send on their WebSockets goes (eu_world_ws_*):
   * called as each turn that sent commits, in the order sent, with op
   * EU_WS_TEXT, EU_WS_BINARY, EU_WS_CLOSE (a close frame: code, reason in
   * data) or EU_WS_DROP (the object was reset: the connection goes without
   * a close frame). NULL: the world keeps what each client received, for
   * eu_world_ws_seen (check, specs). */
  void (*ws_out)(void *ud, int64_t sock, int op, int code, const char *data, size_t len);
  void *ws_ud;
} eu_world_opts;

#define EU_DEFAULT_START_MS INT64_C(1767225600000)  /* 2026-01-01T00:00:00Z */
#define EU_DEFAULT_CPU_LIMIT INT64_C(200000000)
#define EU_DEFAULT_MAX_OBJECT_BYTES (INT64_C(1) << 30)
#define EU_ALARM_MAX_RETRIES 6

int eu_world_new(eu_world **out, const eu_world_opts *o, char *err, size_t errlen);
void eu_world_free(eu_world *w);

int64_t eu_world_now(eu_world *w);       /* virtual ms since 1970 */
int64_t eu_world_elapsed(eu_world *w);   /* virtual ms since the world started */
const eu_buf *eu_world_trace(eu_world *w);
/* The event log, kept when the trace is: what a picture of the run needs.
 * One record a line, fields split by tabs: virtual ms since the start, kind,
 * from, to, text. Kinds: send (a client's request to the worker or an
 * object), call, dropped (a call lost before it arrived), answer, lost (an
 * answer that never arrives), fault, alarm (a firing of an alarm or a cron),
 * note. from and to are lifelines: a drive event ("req-1"), "worker", an
 * object ("DO:POOL(pool)"); to is empty for what happens on one lifeline. */
const eu_buf *eu_world_events(eu_world *w);
int eu_world_choose(eu_world *w, int kind, int n, const char *label);
uint64_t eu_world_random(eu_world *w);
int eu_world_binding(eu_world *w, const char *name);   /* index, or -1 */
int eu_world_is_service(eu_world *w, int ns);
/* The services' origins, ", "-separated, for a message ("none" when there are none). */
const char *eu_world_services(eu_world *w, eu_buf *out);

/* Objects: found or made by namespace and 64-hex id; name may be NULL. */
int eu_world_id_from_name(eu_world *w, int ns, const char *name, size_t len, char hex[65]);
void eu_world_new_unique_id(eu_world *w, char hex[65]);
eu_object *eu_world_object(eu_world *w, int ns, const char *hex, const char *name, char *err, size_t errlen);
/* As eu_world_object, with a name of namelen bytes (names are bytes: a NUL
 * inside one is part of it). */
eu_object *eu_world_object_named(eu_world *w, int ns, const char *hex, const char *name,
                                 size_t namelen, char *err, size_t errlen);
eu_store *eu_object_store(eu_world *w, eu_object *o, char *err, size_t errlen);
/* The same store, for a reader outside the object between steps (the
 * checker's w:exec and w:kv): its isolate is not touched, so a checkpoint
 * keeps the store's state for it and not its heap. */
eu_store *eu_object_store_outside(eu_world *w, eu_object *o, char *err, size_t errlen);
/* The same store, for a reader outside the object between steps that
 * writes nothing (holds.h's eu_holds): a checkpoint need not keep it. */
eu_store *eu_object_store_read(eu_world *w, eu_object *o, char *err, size_t errlen);
int eu_world_reset(eu_world *w, eu_object *o);
int eu_object_has_isolate(eu_object *o);
/* Its place among the world's objects: fixed for its life, 0 for the worker. */
int eu_object_index(eu_object *o);

/* Slots. The payload of a call is encoded values (eu_clone_encode):
 * for EU_CALL_RPC the method name then the arguments, for EU_CALL_FETCH one
 * wire request. A slot's answer is encoded values too: true and the results,
 * or false and a wire error. */
enum { EU_CALL_FETCH = 1, EU_CALL_RPC = 2 };
/* event names the drive event ("req-1"), delivery counts its deliveries from 1:
 * fault labels say "ambiguous at req-1#1 effect #0 (DO:POOL acquire)". */
int eu_world_submit(eu_world *w, int kind, eu_object *target, const char *method, char *payload,
                    size_t len, const char *event, int delivery);
/* A drive event due later: an arrival queued at `at` (virtual ms since the
 * start), so that it ties with whatever else is due then and the clock can
 * jump to it. The step that dispatches it makes eu_world_arrived return tag;
 * the caller then submits the call (or keeps it waiting). */
int eu_world_arrival(eu_world *w, int64_t at, int tag);
int eu_world_arrived(eu_world *w);   /* the tag of the last step's arrival, or -1 */
/* As eu_world_submit, for a call whose arrival the last step dispatched: it
 * starts at once, so arriving and starting are one event of the queue.
 * lose_answer: as eu_world_slot_lose_answer, in effect before the call runs. */
int eu_world_submit_arrived(eu_world *w, int kind, eu_object *target, const char *method,
                            char *payload, size_t len, const char *event, int delivery,
                            int lose_answer);
/* The answer of the slot's call will be lost (the call still runs): a fault
 * of the drive's own calls. */
void eu_world_slot_lose_answer(eu_world *w, int slot);
/* Starts the object's alarm now if one is set; returns the slot, or 0 if none is set. */
int eu_world_run_alarm(eu_world *w, eu_object *o);
/* Starts the worker's scheduled() for expr, one of opts.crons, now (its
 * scheduledTime is now); returns the slot, whose answer is the handler's
 * results or its error. A run asked for is not retried when it fails.
 * EU_EINVAL for an expression the world has no cron of, EU_ENOMEM. */
int eu_world_run_cron(eu_world *w, const char *expr, char *err, size_t errlen);
/* runInDurableObject (testing.lua): an invocation of o that a function of
 * the host drives, one request at a time. eu_world_visit queues it and
 * returns the slot that answers once it has started (true and the class's
 * name, or false and the error that kept it from starting); *task names it.
 * eu_world_visit_step hands the waiting invocation a request (encoded
 * values; taken) and returns the slot of the reply, or 0, the request
 * dropped, when it waits for none (it ended, or a reset ended it), or
 * EU_ENOMEM. Each
 * request runs as a turn of the invocation: committed when it replies, rolled
 * back when the reply is an error; the request ("end") ends the invocation. */
int eu_world_visit(eu_world *w, eu_object *o, const char *event, int64_t *task);
int eu_world_visit_step(eu_world *w, int64_t task, char *payload, size_t len);
/* A call from the host's own code (a spec's) to an object: as
 * eu_world_submit, and a fault point as an object's call is (rpc-fail,
 * ambiguous, overloaded), where only a fault armed for it strikes in a world
 * with no fault kinds. */
int eu_world_submit_host(eu_world *w, int kind, eu_object *target, const char *method, char *payload,
                         size_t len, const char *event);
int eu_world_slot_done(eu_world *w, int slot);
/* The answer; the slot is released. */
int eu_world_slot_take(eu_world *w, int slot, char **data, size_t *len);

/* WebSockets, with the Hibernation API. An object accepts a socket
 * (ctx:acceptWebSocket) and answers the upgrade with its client end (a 101
 * response whose webSocket is the socket's id). The socket is the world's,
 * not the isolate's: it outlives the object's hibernation (its isolate
 * closed while it is idle: eviction, or the hibernate fault) with its tags
 * and attachment, and closes when the object is reset (the client sees
 * 1006). The host on the client's side connects the socket once it has
 * taken the 101 answer, hands it the client's messages and its close, and
 * hears what the object sends through opts.ws_out.
 *
 * What a client sends reaches the object in order, one event at a time:
 * webSocketMessage(ws, message, isBinary), or webSocketClose(ws, code,
 * reason, wasClean) for its close, each an invocation of its own. What the
 * object sends leaves when the turn that sent it commits (the output
 * gate), and is dropped with a turn that raises. */
enum { EU_WS_TEXT = 1, EU_WS_BINARY, EU_WS_CLOSE, EU_WS_DROP, EU_WS_ERROR };
#define EU_WS_MAX_PER_OBJECT 32768   /* Cloudflare's limit of hibernatable sockets per object */
#define EU_WS_MAX_TAGS 10
#define EU_WS_MAX_TAG 256
#define EU_WS_MAX_ATTACHMENT 2048
#define EU_WS_MAX_AUTO 2048           /* an auto-response's request or response */
/* A client's script: records (eu_ws_record_put) the world sends for it once
 * the socket is connected, each as soon as it is due and what it sent
 * before has been delivered: at, virtual ms since the start (0: at once).
 * A record with op EU_WS_CLOSE or EU_WS_DROP ends the script. */
int eu_ws_record_put(eu_buf *b, int op, int code, int64_t at, const char *data, size_t len);
/* The record at *p (of the n bytes left), advancing *p; 0 at the end. */
int eu_ws_record_get(const char **p, size_t *n, int *op, int *code, int64_t *at, const char **data, size_t *len);
/* The client client ("ws-1", for traces and fault labels) took the 101
 * answer for sock: the socket is open; what the object sent before goes to
 * it now, then the script, if any (len 0 for none). EU_EINVAL, with err, for
 * a socket no object accepted or one connected already. */
int eu_world_ws_connect(eu_world *w, int64_t sock, const char *client, const char *script, size_t len,
                        char *err, size_t errlen);
/* A client's message (EU_WS_TEXT, EU_WS_BINARY), its close frame
 * (EU_WS_CLOSE with code, reason in data), its going without one
 * (EU_WS_DROP, which the object sees as code 1006), or an error on the
 * connection (EU_WS_ERROR: the host closed it with code, the message in
 * data; the object sees webSocketError(ws, message)). EU_EINVAL for a
 * socket that is not open. */
int eu_world_ws_client(eu_world *w, int64_t sock, int op, int code, const char *data, size_t len);
/* What the world knows of sock, for a client it keeps (no opts.ws_out):
 * got, the records it received (op, code, data; at is the virtual time). */
typedef struct eu_ws_seen {
  int state;                  /* EU_WS_PENDING, EU_WS_OPEN, EU_WS_CLOSING, EU_WS_CLOSED */
  const char *object;         /* the tag of the object that accepted it */
  const char *client;         /* "" until connected */
  const char *got;
  size_t got_len;
} eu_ws_seen;
enum { EU_WS_PENDING = 0, EU_WS_OPEN, EU_WS_CLOSING, EU_WS_CLOSED };
int eu_world_ws_seen(eu_world *w, int64_t sock, eu_ws_seen *out);
/* Whether o has sockets not closed: an object a host may hibernate. */
int eu_world_ws_live(eu_world *w, eu_object *o);

/* Runs events until the slot is done (or nothing is left to run: EU_EINVAL). */
int eu_world_run_until_done(eu_world *w, int slot, char *err, size_t errlen);
/* Runs every event due up to now + ms, then moves the clock to now + ms. */
int eu_world_advance(eu_world *w, int64_t ms, char *err, size_t errlen);
/* Runs one batch of due events; returns 1 if it ran something, 0 if the queue is empty. */
int eu_world_step(eu_world *w, char *err, size_t errlen);
/* The virtual time (ms since 1970) of the earliest queued event, or INT64_MAX
 * when nothing is queued: a host on the wall clock sleeps until then. */
int64_t eu_world_next_due(eu_world *w);
/* Schedules the alarm stored in o's database (its store must be open): for a
 * host that opens an object's stored state at start-up, such as serve. An
 * alarm already due fires at the next step. */
void eu_world_wake(eu_world *w, eu_object *o);

/* Objects that exist, in the order they came to be (the worker is not one). */
int eu_world_nobjects(eu_world *w);
eu_object *eu_world_object_at(eu_world *w, int i);
const char *eu_object_binding(eu_world *w, eu_object *o);
const char *eu_object_name(eu_object *o);   /* NULL for an id made by newUniqueId */
const char *eu_object_hex(eu_object *o);
eu_store *eu_object_store_if_open(eu_object *o);

/* The store store_opener began to open for o, on the world's thread: s
 * (the host's, as store_provider's are), or NULL with err saying why it
 * could not be opened. The events o held go on, in the order they came;
 * without a store, the calls among them end with err instead. */
void eu_world_store_opened(eu_world *w, eu_object *o, eu_store *s, const char *err);

/* Eviction, for a host that keeps only some objects resident (serve). An
 * object with no invocation queued, running or waiting, and no alarm
 * running, is evictable: eu_world_evict closes its isolate and lets go of
 * its store (closing it unless it came from the store provider, which then
 * closes it itself). The object stays known: its next call or its alarm
 * builds it again and asks for its store anew. last_active is the virtual
 * time of its last turn. */
int eu_world_evictable(eu_world *w, eu_object *o);
int eu_world_evict(eu_world *w, eu_object *o);
/* As eu_world_evict, keeping the store open: the object hibernates (its
 * isolate goes, its WebSockets stay), as the platform does with an idle one. */
int eu_world_hibernate(eu_world *w, eu_object *o);
int64_t eu_object_last_active(eu_object *o);
int eu_world_nresident(eu_world *w);   /* objects with an isolate or a store open */

/* The step in progress touches res (reduce.h): what a caller of
 * eu_world_step does between steps belongs to the step before. */
void eu_world_touch(eu_world *w, uint64_t res, int write);
/* An observer outside any task read o's committed state (a property
 * looked at between turns): a read of o by the step in progress. */
void eu_world_observe(eu_world *w, eu_object *o);
/* Ends the step in progress, if one is: at the end of a run. */
void eu_world_end_step(eu_world *w);
/* What the step in progress touched so far, or NULL outside a step. */
const eu_fp *eu_world_step_fp(eu_world *w);

/* Checkpoints, for a checker that returns to a state instead of running up
 * to it again (a world made with opts.checkpoints). eu_world_checkpoint
 * keeps the world as it is between two steps, as checkpoint number
 * eu_world_checkpoints() - 1; eu_world_rewind(j) returns the whole world
 * (objects' isolates and databases, tasks, the queue, the clock, the PRNG,
 * the trace) to checkpoint j and forgets the later ones. A rewind that
 * fails (SQLite ended a run's transaction by itself, memory) leaves a
 * world that can only be freed. eu_world_retarget gives a rewound world
 * the next run's chooser, fault cap, trace and step hooks. */
int eu_world_checkpoint(eu_world *w);
int eu_world_checkpoints(eu_world *w);
int eu_world_rewind(eu_world *w, int j);
/* Bytes the checkpoints hold (objects' images, the world's copies). */
size_t eu_world_checkpoint_bytes(eu_world *w);
/* Whether the next step can hold a decision with what is queued now: a
 * fault is left, or more than one event is due first. (What a caller adds
 * to the queue before the step is its own to count.) */
int eu_world_decisions_ahead(eu_world *w);
void eu_world_retarget(eu_world *w, const eu_world_opts *o);

/* Faults and bounds of the run so far. */
int eu_world_fault(eu_world *w, unsigned kinds, const char *label);  /* a fault point; 0 or the kind */
int eu_world_faults_used(eu_world *w);
const eu_buf *eu_world_fault_log(eu_world *w);  /* one "<kind> at <where>" line per fault */
/* Faults a spec arms (world:faults in testing.lua). An armed fault strikes
 * once, at the first fault point that offers its kind and matches, whatever
 * the world's chooser, its fault kinds and its bounds; the points it passes
 * over choose as they would without it. Matching, field by field (an empty
 * or negative field matches anything):
 *   ns, hex   the object struck: a call's target, the alarm's object, the
 *             object reset or hibernated, a WebSocket's object
 *   method    the invocation there: the call's method (fetch for stub:fetch),
 *             "alarm", the invocation starting, waiting or just ended where a
 *             reset strikes, "webSocketMessage"
 *   when      for reset and hibernate: EU_ARM_BEFORE, between invocations as
 *             one starts; EU_ARM_WAITING, while an invocation waits at a yield
 *             point (or another of the object's has just ended)
 *   skip      matching points to let pass before it strikes */
enum { EU_ARM_ANY = 0, EU_ARM_BEFORE, EU_ARM_WAITING };
typedef struct eu_fault_arm {
  int kind;           /* EU_FAULT_*, not EU_FAULT_NONE */
  int ns;             /* -1: any */
  char hex[65];       /* "": any */
  char method[64];    /* "": any */
  int when;
  int skip;
  int id;             /* set by eu_world_arm_fault */
} eu_fault_arm;
/* Arms a copy of a and sets *id to name it. EU_EINVAL for a bad kind or a
 * world that keeps checkpoints (a checker's), EU_ENOMEM. */
int eu_world_arm_fault(eu_world *w, const eu_fault_arm *a, int *id);
/* The armed faults that have not struck, in the order armed; *arms is the
 * world's, valid until the next call that arms, strikes or disarms. */
int eu_world_armed(eu_world *w, const eu_fault_arm **arms);
void eu_world_disarm(eu_world *w);
unsigned eu_world_fault_kinds_used(eu_world *w);
int eu_world_capped(eu_world *w);               /* an alarm did not fire because of alarm_caps */
void eu_world_stop(eu_world *w);                /* the chooser gave up on this run */
int eu_world_stopped(eu_world *w);
int eu_world_idle(eu_world *w);                 /* nothing is queued */
lua_State *eu_world_scratch(eu_world *w);       /* a plain state for host-made values */
eu_object *eu_world_object_by_name(eu_world *w, const char *binding, const char *name);
/* An uncaught error out of a worker's fetch or an alarm handler, for the
 * checker to report: the first one of the run, or NULL. */
const char *eu_world_uncaught(eu_world *w);
/* The first eutaxy.fetch to an origin that is no service of the world: a
 * scenario that leaves a service out is wrong whatever the schedule, so the
 * checker stops there. Kept across rewinds (it is no state of a run). */
void eu_world_note_undeclared(eu_world *w, const char *message);
const char *eu_world_undeclared(eu_world *w);

/* Opens eutaxy.core inside an isolate of this world (for eu_isolate_opts). */
int eu_world_open_core(lua_State *L);
/* The id check (clone.h) of the isolates of a world: an id must be of one of
 * its Durable Object bindings, with a name that gives its hex, if any. */
int eu_world_check_id(lua_State *L, const char *binding, const char *hex, const char *name, size_t namelen,
                      char *why, size_t whylen);
/* ctx.blockConcurrencyWhile, from the isolate L: EU_GATE_SHUT shuts the
 * object's input gate for the invocation running (again, deeper, if it is
 * shut for it already), EU_GATE_OPEN opens what it shut, EU_GATE_FAIL says
 * its function raised (why: "Name: message"), so the invocation ends with
 * that error whatever catches it and the object is reset; EU_GATE_INIT, from
 * init, says init gave functions to run before anything is delivered
 * (runtime's dispatch("block")). EU_EINVAL when L's object cannot do that now. */
enum { EU_GATE_SHUT = 1, EU_GATE_OPEN, EU_GATE_FAIL, EU_GATE_INIT };
int eu_world_gate(lua_State *L, int op, const char *why);
/* ctx.abort(reason), from the isolate L while one of its object's
 * invocations runs: once the turn running ends (at a yield, a return or an
 * error, whatever catches it), the invocation ends, and the object is reset
 * with reason (or "the object was aborted") as the error of every caller of
 * an invocation in flight and of every call its gate held. EU_EINVAL
 * outside an invocation of an object. */
int eu_world_abort(lua_State *L, const char *reason);

#endif

/* For the isolate bindings (lcore.c): the task running in L, and the two
 * yield points. Each returns 0 after arranging the wake-up; the binding then
 * yields the task's coroutine. */
typedef struct eu_task eu_task;
eu_task *eu_world_running(lua_State *L);
eu_world *eu_world_of(lua_State *L);
eu_object *eu_world_self(lua_State *L);   /* the object whose isolate L is; NULL in the worker */
int eu_task_call(eu_task *t, int ns, const char *hex, const char *name, size_t namelen, char *payload,
                 size_t len, const char *method);
int eu_task_sleep(eu_task *t, int64_t ms);
/* The reply of a runInDurableObject invocation (eu_world_visit) to its
 * request (encoded values; taken), from its isolate: ok 0 says the request
 * failed, and the turn is rolled back. The binding then yields until the next
 * request. EU_EINVAL for a task that is no such invocation. */
int eu_task_visit_reply(eu_task *t, int ok, char *payload, size_t len);
/* ctx.waitUntil(fn) of the invocation running in L's isolate: fnref, a
 * registry reference to fn in that isolate (the world's from now on), runs
 * as an invocation of its own once the asking one has ended and answered,
 * through dispatch("waitUntil", fn); its result goes nowhere, and an error
 * it raises is traced (logged under echo_log) and counted as uncaught. A
 * reset of the object before it starts drops it. EU_EINVAL outside an
 * invocation of that isolate (a module loading, init), EU_ENOMEM. */
int eu_world_wait_until(lua_State *L, int fnref);
/* eutaxy.all: refs, n registry references to functions in t's isolate (the
 * world's from now on), each run as a branch of t, side by side; t waits
 * until every one has ended or one reports failing, and is then resumed
 * with true, or with false and an error when a branch ended without
 * returning. EU_ENOMEM (the references not yet taken are the caller's). */
int eu_task_all(eu_task *t, const int *refs, int n);
/* The function of the branch b raised: its invocation is resumed once b ends. */
int eu_task_all_failed(eu_task *b);
/* eutaxy.fetch out of the world (opts.outbound): t waits until the host
 * resumes it. Takes payload. */
int eu_task_outbound(eu_task *t, char *payload, size_t len, char *err, size_t errlen);
int eu_world_has_outbound(eu_world *w);
/* Resumes the task that waits for an outbound fetch with its answer
 * (encoded values: true and a wire response, or false and a wire error);
 * takes data. EU_EINVAL, data dropped, when no task waits for it any more
 * (a reset ended it). */
int eu_world_resume_outbound(eu_world *w, int64_t task, char *data, size_t len);
/* The WebSocket calls of the isolate L's object (ctx:acceptWebSocket and the
 * rest, runtime.lua): each returns EU_OK, or EU_EINVAL with why (the
 * binding raises it). accept makes a socket for the object with the tags
 * (n of them, checked by the caller against the limits above) and gives its
 * id. send queues op (EU_WS_TEXT, EU_WS_BINARY or EU_WS_CLOSE) for the
 * commit of the turn running. */
int eu_world_ws_accept(lua_State *L, const char *const *tags, const size_t *lens, int n, int64_t *sock,
                       char *why, size_t whylen);
int eu_world_ws_send(lua_State *L, int64_t sock, int op, int code, const char *data, size_t len, char *why,
                     size_t whylen);
/* The socket's state (EU_WS_*), tags (NUL after each) and attachment
 * (encoded values, len 0 for none), when it is L's object's; else EU_EINVAL. */
int eu_world_ws_get(lua_State *L, int64_t sock, int *state, const char **tags, size_t *tags_len,
                    const char **attach, size_t *attach_len, int64_t *auto_at);
/* Takes attach (encoded, at most EU_WS_MAX_ATTACHMENT bytes; NULL for none). */
int eu_world_ws_attach(lua_State *L, int64_t sock, char *attach, size_t len);
/* The ids of L's object's sockets that are not closed, in the order they were
 * accepted; with tag, those that have it. *n is how many; ids is the world's,
 * valid until the next call. */
int eu_world_ws_list(lua_State *L, const char *tag, const int64_t **ids, int *n);
/* setWebSocketAutoResponse: a client message equal to req is answered with
 * resp by the host, without waking the object (NULL: none). */
int eu_world_ws_auto(lua_State *L, const char *req, size_t req_len, const char *resp, size_t resp_len);
/* controller:noRetry() of a scheduled invocation: it is not retried if it
 * fails. EU_EINVAL for a task that is no scheduled invocation. */
int eu_task_no_retry(eu_task *t);
const char *eu_world_binding_name(eu_world *w, int ns);
int eu_world_nbindings(eu_world *w);
void eu_world_log(eu_world *w, const char *fmt, ...)
#if defined(__GNUC__)
  __attribute__((format(printf, 2, 3)))
#endif
  ;
