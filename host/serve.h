/*
 * serve.h: `eutaxy serve`, the worker and its objects as a real HTTP server.
 *
 * Owns the listening socket, the connections, the wall clock the world runs
 * on, the objects' database files under the state directory, and the shutdown
 * on SIGINT/SIGTERM. The HTTP bytes are http.c's, the objects and turns are
 * world.c's, outbound requests outbound.c's: this file only carries requests
 * from one to the other and answers from the other back, in order per
 * connection.
 */
#ifndef EUTAXY_SERVE_H
#define EUTAXY_SERVE_H

#include <stdint.h>
#include <stddef.h>
#include <lua.h>

#include "world.h"

typedef struct eu_serve_opts {
  const char *entry;        /* the worker module's file */
  const char *projectdir;
  const char *libdir;
  const eu_binding *bindings;
  int nbindings;
  const char *vars;         /* the env's vars, encoded (world.h); NULL for none */
  size_t vars_len;
  const char *host;         /* NULL: 127.0.0.1 */
  int port;                 /* 0: any free port */
  const char *state;        /* NULL: .eutaxy/state; created if missing */
  int quiet;                /* no request log */
  int durability_process;   /* commits survive the process, not a power loss: no syncs */
  int max_resident;         /* objects with an isolate or a file open; 0: the default */
  int max_awake;            /* resident objects whose heaps are unpacked (eu_world_opts.berths) and
                             * databases open at once; 0: the default, <0: every one */
  int64_t evict_after_ms;   /* idle objects are evicted after this; 0: the default, <0: never */
  int64_t header_timeout_ms;  /* a request must arrive whole within this; 0: the default */
  int64_t idle_timeout_ms;    /* a connection with nothing asked is closed after this; 0: the default */
  int max_connections;      /* 0: from the descriptor limit */
  int64_t cpu_limit;        /* VM instructions per turn; 0: the world's default */
  size_t mem_limit;         /* bytes per isolate, its SQLite memory included; 0: the default */
  int64_t max_object_bytes; /* the size an object's database may reach; 0: the default */
  const char *const *crons; /* the worker's cron triggers, fired on the clock */
  int ncrons;
  int64_t test_clock;       /* for tests: a clock of its own that starts here (ms since 1970) and
                               moves only when POST /__eutaxy/clock?advance=MS asks; 0: the wall clock */
  int64_t fetch_timeout_ms; /* an outbound eutaxy.fetch's whole exchange; 0: the default (30 s) */
  size_t fetch_max_bytes;   /* of an outbound fetch's response body; 0: the default (16 MiB) */
  const char *ca_file;      /* PEM certificates of CAs outbound fetches trust besides the system's */
  size_t ws_max_message;    /* the largest WebSocket message a client may send; 0: the default (32 MiB) */
} eu_serve_opts;

#define EU_SERVE_MAX_RESIDENT 1000
#define EU_SERVE_MAX_AWAKE 256
#define EU_SERVE_EVICT_AFTER_MS 60000
#define EU_SERVE_HEADER_TIMEOUT_MS 10000
#define EU_SERVE_IDLE_TIMEOUT_MS 60000
/* The most --fetch-max-bytes may be: a response must fit in one value
 * crossing into an isolate (clone.h), with room for its headers. */
#define EU_SERVE_FETCH_MAX_BYTES (INT64_C(32) << 20)

/* Runs until SIGINT or SIGTERM, then finishes the requests in flight, closes
 * every database and returns 0; or returns a negative EU_E* code with a
 * message if the server could not start. */
int eu_serve_run(const eu_serve_opts *o, char *err, size_t errlen);

/* Adds core.serve(options) to the table on the top of the stack. */
int eu_open_serve(lua_State *L);

#endif
