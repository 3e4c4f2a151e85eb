/*
 * serve.h: `eutaxy serve`, the worker and its objects as a real HTTP server.
 *
 * Owns the listening socket, the connections, the wall clock the world runs
 * on, the objects' database files under the state directory, and the shutdown
 * on SIGINT/SIGTERM. The HTTP bytes are http.c's, the objects and turns are
 * world.c's: this file only carries requests from one to the other and
 * answers from the other back, in order per connection.
 */
#ifndef EUTAXY_SERVE_H
#define EUTAXY_SERVE_H

#include <lua.h>

#include "world.h"

typedef struct eu_serve_opts {
  const char *entry;        /* the worker module's file */
  const char *projectdir;
  const char *libdir;
  const eu_binding *bindings;
  int nbindings;
  const char *host;         /* NULL: 127.0.0.1 */
  int port;                 /* 0: any free port */
  const char *state;        /* NULL: .eutaxy/state; created if missing */
  int quiet;                /* no request log */
} eu_serve_opts;

/* Runs until SIGINT or SIGTERM, then finishes the requests in flight, closes
 * every database and returns 0; or returns a negative EU_E* code with a
 * message if the server could not start. */
int eu_serve_run(const eu_serve_opts *o, char *err, size_t errlen);

/* Adds core.serve(options) to the table on the top of the stack. */
int eu_open_serve(lua_State *L);

#endif
