/*
 * reduce.h: partial-order reduction of the schedule search.
 *
 * A run is a sequence of *steps*: the world dispatches one due event (a
 * call's start, a wake-up, an alarm, an arrival), and the drive does what
 * that step finished. When several events are due at once the chooser picks
 * one; without reduction every pick is a branch of the search. Most of
 * those orders are the same behaviour: two steps that touch nothing in
 * common commute, and every order of them ends in the same state having
 * passed through the same states of each object.
 *
 * What a step touches is its *footprint*: resources, each read or written.
 * An object (its isolate and its database) is written by every step of it;
 * the worker's isolate is read by every worker step, and written only by
 * one that changed what outlives a request (eu_isolate_fingerprint); the
 * world's PRNG, the drive (answers, admissions, resends) and the first
 * uncaught error are resources of their own. Two steps are dependent when
 * their footprints share a resource that one of them writes.
 *
 * The search is source-set DPOR with sleep sets (Abdulla, Aronis, Jonsson,
 * Sagonas, "Optimal Dynamic Partial Order Reduction", POPL 2014, its
 * Algorithm 1). Each decision between tied events keeps the events it
 * offered, a backtrack set (branches to explore), a done set, and the sleep
 * set it was reached with: events whose every continuation an earlier
 * branch covered, which stay asleep while the steps taken are independent
 * of them. After each complete run, every race (two dependent steps at the
 * same virtual time, the first not ordered before the second by anything
 * else) adds to the first one's decision a branch that starts the reversed
 * order, unless one already does. Fault decisions are not reduced: each is
 * a full branch of the tree, as without reduction.
 *
 * Events are named across runs by an identity the world derives from
 * causality (which task made which call, and how many it made before),
 * never from counters that depend on the order of other objects' steps.
 */
#ifndef EUTAXY_REDUCE_H
#define EUTAXY_REDUCE_H

#include <stdint.h>

#define EU_FP_MAX 8

/* Resources other than objects; an object's is eu_fp_object(ns, hex). */
#define EU_RES_DRIVE ((uint64_t)1)
#define EU_RES_WORKER ((uint64_t)2)
#define EU_RES_PRNG ((uint64_t)3)
#define EU_RES_UNCAUGHT ((uint64_t)4)
#define EU_RES_ANSWER(i) ((uint64_t)0x100 + (uint64_t)(i))  /* drive event i's answer */

typedef struct eu_fp {
  uint64_t res[EU_FP_MAX];
  unsigned char write[EU_FP_MAX];
  int n;
  int all;     /* touched more than it can list: dependent on every step */
} eu_fp;

void eu_fp_clear(eu_fp *f);
void eu_fp_add(eu_fp *f, uint64_t res, int write);
void eu_fp_merge(eu_fp *into, const eu_fp *f);
int eu_fp_conflict(const eu_fp *a, const eu_fp *b);
uint64_t eu_fp_object(int ns, const char *hex);

/* An event due now, as a step is offered it. */
typedef struct eu_tie {
  uint64_t id;      /* its identity (see above) */
  int creator;      /* the step of this run that queued it, or -1 */
} eu_tie;

typedef struct eu_reducer eu_reducer;

/* full_above: decisions at path positions below it branch every way and
 * start no sleep set (a shard's top, which other shards share). */
int eu_reducer_new(eu_reducer **out, int full_above);
void eu_reducer_free(eu_reducer *r);
void eu_reducer_begin_run(eu_reducer *r);

/* A step begins with n tied events; pos is the chooser's path position
 * its decision will take when n > 1. Returns 1 when the run is blocked:
 * every event it may take sleeps, so every continuation is covered. */
int eu_reducer_step(eu_reducer *r, const eu_tie *ties, int n, int64_t at, int pos);
/* The decision of the step just begun (n > 1): the branch to take. replay
 * is the branch the path prefix dictates, or -1 at a new decision; *blocked
 * is set when no branch is awake. */
int eu_reducer_choose(eu_reducer *r, int replay, int *blocked);
/* The step's footprint, once it is over. */
void eu_reducer_step_end(eu_reducer *r, const eu_fp *fp);
/* After a complete run: reverses its races into backtrack sets. */
int eu_reducer_end_run(eu_reducer *r);
/* Where the next run branches: the deepest decision at floor or below it
 * with a branch left. kinds/arity/choice describe the path (kinds[i] 1 for
 * an order decision), allow (or NULL) the branches each fault decision may
 * take; returns the position, with *branch the branch to take, or -1 when
 * the subtree is done. Decisions below the position are forgotten. */
int eu_reducer_backtrack(eu_reducer *r, const unsigned char *kinds, const unsigned char *arity,
                         const unsigned char *choice, const uint64_t *allow, int len, int floor,
                         int *branch);
/* The causal past of the step in progress, which has touched partial so
 * far: the steps of its instant that happen before it, by the events they
 * queued or what they touched, with the number of steps of earlier
 * instants; hashed. Every order of the run's independent steps gives it the
 * same past. */
uint64_t eu_reducer_past(eu_reducer *r, const eu_fp *partial);
/* Where a run stands, for a checker that returns to a checkpoint of the
 * run instead of replaying it: mark before a step, rewind to the mark in a
 * later run whose path is the same up to there. */
typedef struct eu_sleeper {
  uint64_t id;
  eu_fp fp;
} eu_sleeper;

typedef struct eu_sleepset {
  eu_sleeper *s;
  int n, cap;
} eu_sleepset;

typedef struct eu_reducer_pos {
  int nsteps, pos, nties;
  int64_t at;
  eu_sleepset sleep;
} eu_reducer_pos;
int eu_reducer_mark(const eu_reducer *r, eu_reducer_pos *at);
unsigned long eu_reducer_serial(const eu_reducer *r);  /* 0 for NULL */
int eu_reducer_rewind(eu_reducer *r, const eu_reducer_pos *at);
void eu_reducer_pos_free(eu_reducer_pos *at);

/* A run played back from a log of its calls (explore.c) rather than run:
 * between these, its steps go elsewhere than the steps of the run before
 * it, which the marks of a checkpoint of that run point into. */
void eu_reducer_play_begin(eu_reducer *r);
void eu_reducer_play_end(eu_reducer *r);

/* Counters for the report: races reversed, runs blocked by sleep sets. */
long eu_reducer_races(const eu_reducer *r);

#endif
