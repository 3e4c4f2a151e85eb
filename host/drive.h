/*
 * drive.h: what the checker sends into a world, and what comes back.
 *
 * The drive submits a scenario's events (HTTP requests to the worker, or
 * RPC calls to objects) with at most max_concurrent of them in flight,
 * resends one whose answer was lost while the client has retries left, and
 * offers a fault point where a client resends even though the answer came
 * ("resend at req-1#1"). Then it runs the world until nothing is left to run.
 * It owns no world state: events name objects by binding and name.
 *
 * An event with `at` arrives at that virtual time, as an event of the
 * world's queue (eu_world_arrival). The limit admits events in list order
 * among those that have arrived: one due later holds no place in the queue,
 * so a later-listed event that arrives first goes first; an arrival that
 * finds max_concurrent in flight waits for one of them to finish.
 */
#ifndef EUTAXY_DRIVE_H
#define EUTAXY_DRIVE_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "world.h"

typedef struct eu_drive_event {
  int kind;             /* EU_CALL_FETCH or EU_CALL_RPC */
  char label[24];       /* "req-1" */
  const char *binding;  /* EU_CALL_RPC: the target object */
  const char *name;
  const char *method;
  const char *payload;  /* encoded: a wire request, or the method's arguments */
  size_t len;
  int64_t at;           /* virtual ms after the start at which it arrives */
  /* A WebSocket client: the request is an upgrade, and once its answer is
   * 101 with a socket, the client connects and sends script (records,
   * eu_ws_record_put; script_len 0 for none). */
  int websocket;
  const char *script;
  size_t script_len;
} eu_drive_event;

typedef struct eu_drive_answer {
  int deliveries;       /* how many times it was delivered */
  char *data;           /* the last delivery's answer (encoded ok, value...), or NULL */
  size_t len;
  int64_t sock;         /* a WebSocket client's socket once connected, else 0 */
} eu_drive_answer;

typedef struct eu_drive {
  const eu_drive_event *events;
  int n;
  uint64_t mask;        /* which events run (bit i: event i) */
  int retries;          /* client resends per event */
  int max_concurrent;
  int max_redeliveries;
  long max_events;      /* a run that needs more has not settled */
  int answers_shared;   /* something reads every answer between turns (a property):
                           collecting one writes them all (reduce.h) */
} eu_drive;

/* A drive under way: where each event stands, and the answers so far. */
typedef struct eu_drive_state {
  int *slots, *resends, *state;
  int inflight, left;
  long steps;
  eu_drive_answer *answers;   /* the caller's, d->n of them */
} eu_drive_state;

/* The run in two parts, for a checker that keeps checkpoints: begin queues
 * the events that arrive later; go runs to the end, calling at_step (if
 * not NULL) before each step, where the world and the drive are between
 * two steps; a non-zero return from it ends the run with that code. save
 * appends the state to a buffer and load puts it back (answers' data
 * included: load frees what they held). */
int eu_drive_begin(eu_world *w, const eu_drive *d, eu_drive_state *st, eu_drive_answer *answers,
                   char *err, size_t errlen);
int eu_drive_go(eu_world *w, const eu_drive *d, eu_drive_state *st, int *settled,
                int (*at_step)(void *ud), void *ud, char *err, size_t errlen);
int eu_drive_save(const eu_drive *d, const eu_drive_state *st, eu_buf *into);
/* Whether an event waits to be admitted (the next step may admit it). */
int eu_drive_waiting(const eu_drive *d, const eu_drive_state *st);
int eu_drive_load(const eu_drive *d, eu_drive_state *st, const char *p);
void eu_drive_state_free(eu_drive_state *st);

/* Runs the drive to the end. answers has d->n entries; their data are the
 * caller's to free. *settled is 0 if the run was cut at max_events. */
int eu_drive_run(eu_world *w, const eu_drive *d, eu_drive_answer *answers, int *settled, char *err,
                 size_t errlen);

#endif
