/*
 * test_reduce.c: partial-order reduction (reduce.h) against the full search,
 * on toy worlds of threads: no Lua, no world.
 *
 * A toy thread is a list of steps, each touching one resource (read or
 * write); a step may also start another thread (its first step becomes due
 * then). Every step of every thread is due at the same instant, so every
 * order of the threads' steps is a schedule. What a schedule *means* is its
 * trace: for each resource, the sequence of (thread, step) that touched it,
 * reads between two writes taken as a set. Two schedules with the same
 * trace are equivalent, and the reduced search must reach every trace the
 * full search reaches, ideally once.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eutaxy.h"
#include "explore.h"
#include "prng.h"
#include "reduce.h"
#include "test.h"
#include "world.h"

#define MAXT 5
#define MAXS 4
#define MAXR 4

typedef struct tstep {
  int res, write;
  int spawns;          /* a thread this step starts, or -1 */
} tstep;

typedef struct tworld {
  int nthreads;
  int nsteps[MAXT];
  tstep steps[MAXT][MAXS];
  int started[MAXT];   /* thread started at the beginning (else spawned) */
  /* what the runs saw */
  uint64_t *traces;
  int ntraces, cap;
  long complete;
} tworld;

static uint64_t mixh(uint64_t a, uint64_t b) {
  uint64_t z = a ^ (b + 0x9e3779b97f4a7c15u + (a << 6) + (a >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  return z ^ (z >> 31);
}

static void note_trace(tworld *t, uint64_t h) {
  int i;
  for (i = 0; i < t->ntraces; i++)
    if (t->traces[i] == h) return;
  if (t->ntraces == t->cap) {
    t->cap = t->cap ? t->cap * 2 : 64;
    t->traces = realloc(t->traces, (size_t)t->cap * sizeof *t->traces);
  }
  t->traces[t->ntraces++] = h;
}

/* One run: the chooser picks among the threads with a step due. */
static int toy_run(void *ud, eu_chooser *ch, uint64_t events, int cap, int *faults, char *err, size_t errlen) {
  tworld *t = ud;
  int pc[MAXT] = { 0 }, alive[MAXT], creator[MAXT], nstep = 0, i;
  /* per resource: the trace so far, and the reads since its last write */
  uint64_t trace[MAXR] = { 0 }, reads[MAXR] = { 0 };
  (void)events;
  (void)cap;
  (void)err;
  (void)errlen;
  *faults = 0;
  eu_chooser_begin(ch, NULL);
  for (i = 0; i < t->nthreads; i++) {
    alive[i] = t->started[i];
    creator[i] = -1;
  }
  for (;;) {
    eu_tie ties[MAXT];
    int who[MAXT], n = 0, pick = 0, th;
    const tstep *st;
    eu_fp fp;
    for (i = 0; i < t->nthreads; i++)
      if (alive[i] && pc[i] < t->nsteps[i]) {
        ties[n].id = mixh((uint64_t)i + 1, (uint64_t)pc[i]);
        ties[n].creator = creator[i];
        who[n++] = i;
      }
    if (n == 0) break;
    if (eu_chooser_step(ch, ties, n, 0)) return 0;  /* blocked: covered elsewhere */
    if (n > 1) {
      pick = eu_chooser_choose(ch, EU_CHOICE_ORDER, n, "order");
      if (ch->blocked) return 0;
    }
    th = who[pick];
    st = &t->steps[th][pc[th]];
    eu_fp_clear(&fp);
    eu_fp_add(&fp, (uint64_t)(st->res + 10), st->write);
    if (st->write) {
      trace[st->res] = mixh(mixh(trace[st->res], reads[st->res]), mixh((uint64_t)th + 1, (uint64_t)pc[th] + 100));
      reads[st->res] = 0;
    } else {
      reads[st->res] += mixh((uint64_t)th + 1, (uint64_t)pc[th] + 200);  /* a set: order-free */
    }
    if (st->spawns >= 0 && !alive[st->spawns]) {
      alive[st->spawns] = 1;
      creator[st->spawns] = nstep;
    }
    pc[th]++;
    /* program order: a thread's next step is queued by the one before */
    if (pc[th] < t->nsteps[th]) creator[th] = nstep;
    eu_chooser_step_end(ch, &fp);
    nstep++;
  }
  {
    uint64_t h = 0;
    for (i = 0; i < MAXR; i++) h = mixh(h, mixh(trace[i], reads[i]));
    note_trace(t, h);
  }
  t->complete++;
  return 0;
}

static void random_world(tworld *t, uint64_t seed) {
  eu_prng r;
  int i, k;
  memset(t, 0, sizeof *t);
  eu_prng_seed(&r, seed);
  t->nthreads = 2 + (int)eu_prng_below(&r, MAXT - 1);
  for (i = 0; i < t->nthreads; i++) {
    t->nsteps[i] = 1 + (int)eu_prng_below(&r, MAXS - 1);
    t->started[i] = i < 2 || eu_prng_below(&r, 3) > 0;
    for (k = 0; k < t->nsteps[i]; k++) {
      t->steps[i][k].res = (int)eu_prng_below(&r, MAXR);
      t->steps[i][k].write = eu_prng_below(&r, 3) > 0;
      t->steps[i][k].spawns = -1;
    }
  }
  /* a thread not started at the beginning is spawned by a step of an earlier one */
  for (i = 0; i < t->nthreads; i++)
    if (!t->started[i]) {
      int by = (int)eu_prng_below(&r, (uint64_t)i);
      int at = (int)eu_prng_below(&r, (uint64_t)t->nsteps[by]);
      if (t->steps[by][at].spawns < 0) t->steps[by][at].spawns = i;
      else t->started[i] = 1;
    }
}

/* Orders of its steps at most: the multinomial of the threads' lengths. */
static double orders(const tworld *t) {
  double r = 1;
  int i, k, total = 0;
  for (i = 0; i < t->nthreads; i++)
    for (k = 1; k <= t->nsteps[i]; k++) r = r * (double)++total / (double)k;
  return r;
}

static long search(tworld *t, int reduce) {
  eu_search s;
  char err[EU_ERRLEN];
  eu_search_init(&s);
  s.events = 1;
  s.max_faults = 0;
  s.reduce = reduce;
  t->ntraces = 0;
  t->complete = 0;
  ASSERT_OK(eu_search_run(&s, toy_run, t, err, sizeof err));
  ASSERT_EQ(s.verdict, EU_BOUNDED);
  return s.counted[0];
}

static int same_traces(const uint64_t *a, int na, const uint64_t *b, int nb) {
  int i, j;
  if (na != nb) return 0;
  for (i = 0; i < na; i++) {
    for (j = 0; j < nb && b[j] != a[i]; j++) {}
    if (j == nb) return 0;
  }
  return 1;
}

static void test_independent_threads_take_one_schedule(void) {
  tworld t;
  int i;
  memset(&t, 0, sizeof t);
  t.nthreads = 3;
  for (i = 0; i < 3; i++) {
    t.nsteps[i] = 3;
    t.started[i] = 1;
    t.steps[i][0].res = t.steps[i][1].res = t.steps[i][2].res = i;
    t.steps[i][0].write = t.steps[i][1].write = t.steps[i][2].write = 1;
    t.steps[i][0].spawns = t.steps[i][1].spawns = t.steps[i][2].spawns = -1;
  }
  ASSERT_EQ(search(&t, 1), 1);
  ASSERT_EQ(t.ntraces, 1);
  ASSERT_EQ(search(&t, 0), 1680);  /* 9! / (3!)^3 */
  free(t.traces);
}

static void test_writers_of_one_resource_take_every_order(void) {
  tworld t;
  int i;
  memset(&t, 0, sizeof t);
  t.nthreads = 3;
  for (i = 0; i < 3; i++) {
    t.nsteps[i] = 1;
    t.started[i] = 1;
    t.steps[i][0].res = 0;
    t.steps[i][0].write = 1;
    t.steps[i][0].spawns = -1;
  }
  ASSERT_EQ(search(&t, 1), 6);
  ASSERT_EQ(t.ntraces, 6);
  /* readers commute */
  for (i = 0; i < 3; i++) t.steps[i][0].write = 0;
  ASSERT_EQ(search(&t, 1), 1);
  free(t.traces);
}

/* The reduced search reaches exactly the traces the full one does, with
 * one schedule each, on 300 random toy worlds (30 under valgrind)
 * small enough to search in full. */
static void test_reaches_every_trace_of_the_full_search(void) {
  uint64_t seed, seeds = getenv("EUTAXY_VALGRIND") ? 30 : 300;
  long fewer = 0, tried = 0;
  for (seed = 1; tried < (long)seeds; seed++) {
    tworld t;
    uint64_t *full;
    int nfull;
    long nreduced, nall;
    random_world(&t, seed);
    if (orders(&t) > 20000) continue;
    tried++;
    nall = search(&t, 0);
    nfull = t.ntraces;
    full = malloc((size_t)(nfull ? nfull : 1) * sizeof *full);
    memcpy(full, t.traces, (size_t)nfull * sizeof *full);
    nreduced = search(&t, 1);
    if (!same_traces(full, nfull, t.traces, t.ntraces))
      fprintf(stderr, "# seed %llu: full %d traces, reduced %d\n", (unsigned long long)seed, nfull, t.ntraces);
    ASSERT(same_traces(full, nfull, t.traces, t.ntraces));
    ASSERT(nreduced <= nall);
    /* on these worlds, one schedule per trace: no run the sleep sets let through is redundant */
    ASSERT_EQ(nreduced, nfull);
    if (nreduced < nall) fewer++;
    free(full);
    free(t.traces);
  }
  ASSERT(fewer > tried / 3);
}

static const eu_test tests[] = {
  { "independent threads take one schedule", test_independent_threads_take_one_schedule },
  { "writers of one resource take every order, readers one", test_writers_of_one_resource_take_every_order },
  { "reaches every trace of the full search on random worlds", test_reaches_every_trace_of_the_full_search },
};

int main(void) { return test_main(tests, sizeof tests / sizeof tests[0]); }
