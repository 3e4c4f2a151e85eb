/*
 * sched.h: the event queue and the clock of a world.
 *
 * One queue ordered by (time, sequence): deliveries of calls, replies,
 * wake-ups from sleep, alarm firings. The queue knows nothing of what an
 * event means; the world dispatches it. Events due at the same instant are
 * the scheduler's one source of nondeterminism, and the queue hands every
 * such tie to the world's chooser instead of deciding it (eu_sched_ties).
 *
 * Cancelling is done by the world: an event names a task or an object
 * generation, and one whose target has moved on is dropped when it comes due.
 */
#ifndef EUTAXY_SCHED_H
#define EUTAXY_SCHED_H

#include <stddef.h>
#include <stdint.h>

typedef struct eu_event {
  int64_t at;      /* virtual ms since the world started */
  uint64_t seq;    /* order of scheduling: breaks ties deterministically */
  int kind;        /* the world's EU_EV_* */
  int64_t a, b;    /* kind-specific: a task id, an object index, a generation */
  char *data;      /* owned payload (encoded values), or NULL */
  size_t len;
  uint64_t id;     /* the world's identity of the event, the same in every run (reduce.h) */
  uint64_t res;    /* the resource its dispatch touches first: its object, the worker, the drive */
  int creator;     /* the step of the run that queued it, or -1 */
} eu_event;

typedef struct eu_sched {
  eu_event *heap;
  size_t n, cap;
  uint64_t next_seq;
  int64_t now;     /* the clock: time of the event being dispatched */
} eu_sched;

void eu_sched_init(eu_sched *s);
/* Frees every queued event's payload too. */
void eu_sched_free(eu_sched *s);
/* Queues ev (its seq is assigned here; the queue takes ownership of ev->data).
 * An event in the past is due now. */
int eu_sched_push(eu_sched *s, eu_event *ev);
/* Time of the earliest event, or INT64_MAX when the queue is empty. */
int64_t eu_sched_next_time(const eu_sched *s);
/* Moves every event due at the earliest time into out (at most max of them,
 * in seq order) and returns how many; the caller dispatches one and gives
 * the others back with eu_sched_giveback. */
size_t eu_sched_ties(eu_sched *s, eu_event *out, size_t max);
int eu_sched_giveback(eu_sched *s, const eu_event *ev);
size_t eu_sched_count(const eu_sched *s);

#endif
