/*
 * explore.h: choosers, schedules and the search over them.
 *
 * A run of a scenario asks the chooser at every decision (eu_world_choose):
 * which due event goes first, whether a fault strikes. The sequence of its
 * answers is the run's *schedule*: replaying it gives the same run. The
 * explorer walks the tree of schedules depth-first (each run follows a
 * prefix, then takes the first branch at every new decision; backtracking
 * moves to the next unexplored branch), or draws branches at random, or
 * follows a recorded schedule.
 *
 * The search runs the tree once per fault count, 0 faults, then at most 1,
 * and so on, so the first violation found has the fewest faults; or, with
 * eu_search.flat, the fault-free tree and then one with the search's cap,
 * counting each run at its own count, and by count again only once a
 * violation is found, for the one the trees by count find. It knows
 * nothing of worlds or invariants: a run function does a whole run and says
 * whether it violated.
 *
 * A schedule string is "F:E:C": F the fault cap the run had, E the drive
 * events it kept (1-based, dot-separated, or "-" for none), C one base-62
 * digit per decision. "1:1:0010".
 */
#ifndef EUTAXY_EXPLORE_H
#define EUTAXY_EXPLORE_H

#include <stdint.h>

#include "buf.h"
#include "prng.h"
#include "reduce.h"

typedef struct eu_world eu_world;

enum { EU_MODE_DFS = 0, EU_MODE_RANDOM, EU_MODE_REPLAY };

#define EU_MAX_ARITY 62       /* decisions offer at most this many branches */
#define EU_MAX_EVENTS 64

typedef struct eu_choices {
  unsigned char *c, *n;   /* the branch taken, and how many there were */
  unsigned char *k;       /* 1 for an order decision, 0 for a fault */
  int len, cap;
} eu_choices;

typedef struct eu_chooser {
  int mode;
  eu_choices path;        /* this run's decisions */
  eu_choices prefix;      /* decisions the run must follow first (dfs, replay) */
  eu_prng rng;            /* random mode */
  int mismatch;           /* replay: the schedule does not fit the scenario */
  int past_end;           /* replay: the run wanted more decisions than recorded */
  eu_world *world;        /* the run's world, stopped when the run leaves the shard */
  eu_reducer *red;        /* dfs with partial-order reduction (reduce.h), or NULL */
  int labels_on;          /* keep the fault points of the path's decisions (the sweep) */
  int cap;                /* the run's fault cap, for ownership */
  int own_k, own_n;       /* own_n > 1: take only runs whose fault set shard own_k owns */
  int struck;             /* faults the run took so far */
  uint64_t fault_set;     /* their marks, summed: the same in any order */
  uint64_t *allow;        /* [i]: the branches decision i may take */
  int capallow;
  uint64_t *labels;       /* [i]: the point of fault decision i, hashed */
  int caplabels;
  int blocked;            /* the reducer stopped the run: every way on was covered */
  /* When set, the run's calls on the chooser (its steps, decisions and
   * footprints) are appended here, to be played back to another chooser in
   * place of the run (explore.c: reuse); with log_steps the world reports
   * its steps to the chooser as it does to a reducer's. */
  eu_buf *log;
  int log_steps;
} eu_chooser;

/* Frees a sequence's arrays and empties it. */
void eu_choices_free(eu_choices *ch);

void eu_chooser_init(eu_chooser *c, int mode, uint64_t seed);
void eu_chooser_free(eu_chooser *c);
/* Before a run: the path is emptied, the prefix kept. */
void eu_chooser_begin(eu_chooser *c, eu_world *w);
/* The world's eu_choose_fn. */
int eu_chooser_choose(void *ud, int kind, int n, const char *label);
/* The world's on_step and on_step_end, for a chooser with a reducer. */
int eu_chooser_step(void *ud, const eu_tie *ties, int n, int64_t at);
void eu_chooser_step_end(void *ud, const eu_fp *fp);
/* Whether the world must report its steps (on_step, on_step_end). */
int eu_chooser_steps(const eu_chooser *c);
/* After a dfs run: moves the prefix to the next branch, never above
 * position floor (the root of the subtree explored); 0 when it is done. */
int eu_chooser_backtrack(eu_chooser *c, int floor);

/* A run's decisions, kept so that a later run with the same start can
 * begin at a checkpoint of it (a world rewound there) instead of running up
 * to it again: eu_chooser_resume, after eu_chooser_begin, takes the first
 * len decisions as made, with the faults struck by then, and the first
 * log_len bytes of the run's log for a chooser that logs ((size_t)-1: the
 * run kept none, and the new run's log would lack its start: none is kept). */
typedef struct eu_trail {
  eu_choices path;
  uint64_t *allow, *labels;
  int cap, has_labels;
  eu_buf log;
  int has_log;
} eu_trail;
int eu_trail_keep(eu_trail *t, const eu_chooser *c);
void eu_trail_free(eu_trail *t);
int eu_chooser_resume(eu_chooser *c, const eu_trail *t, int len, int struck, uint64_t fault_set, size_t log_len);

/* Schedule strings. events is a mask of kept events (bit i: event i+1). */
int eu_schedule_format(char *out, size_t n, int fault_cap, uint64_t events, const eu_choices *ch);
int eu_schedule_parse(const char *s, int *fault_cap, uint64_t *events, eu_choices *ch, char *err,
                      size_t errlen);

/* One run: returns 1 if it violated, 0 if not, <0 on an error of the
 * scenario (message in err). *faults gets the faults the run injected. */
typedef int (*eu_run_fn)(void *ud, eu_chooser *ch, uint64_t events, int fault_cap, int *faults,
                         char *err, size_t errlen);

enum { EU_BOUNDED = 0, EU_VIOLATED = 1, EU_INCONCLUSIVE = 3 };

typedef struct eu_search {
  /* what to search */
  int mode;
  uint64_t events;        /* drive events in play */
  int max_faults;
  int64_t deadline_ms;    /* monotonic clock; 0: none */
  long random_runs;       /* random mode */
  uint64_t random_seed;
  int shard_k, shard_n;
  const char *replay;     /* replay mode */
  int reduce;             /* dfs: partial-order reduction (reduce.h) */
  int sweep;              /* dfs: try every fault point with every kind first */
  int min_faults;         /* start the fault count here (shrinking reuses what it knows) */
  /* dfs: a run of the tree that the sweep ran already, at the same cap, is
   * played back from the sweep's log of it instead of run again. Only where
   * a run is a function of its decisions alone: the run function's owner
   * says so (not with turn checks, whose footprints depend on what earlier
   * runs reached), and not in shards. */
  int reuse;
  /* dfs: after the fault-free tree, one tree at max_faults instead of one a
   * fault count (explore.c): a run with fewer faults than the cap is not run
   * again at every higher count. Not in shards, whose runs are split by count. */
  int flat;
  int flat_now;           /* the one tree is under way: the fewest faults it counts, else 0 */
  /* The run function's owner may keep what it notes of each run (coverage):
   * on_counted says the run just done counts as a schedule; a parallel worker
   * sends what export writes, and the parent hands it to merge. Each may be NULL. */
  void (*on_counted)(void *ud);
  int (*export_notes)(void *ud, eu_buf *out);
  int (*merge_notes)(void *ud, const char *p, size_t n);
  /* mark keeps what the counted runs noted so far; back puts it back, as
   * the one tree's counts are set aside. Both or neither. */
  int (*mark)(void *ud);
  void (*back)(void *ud);
  /* A live line on stderr (the caller decides it is a terminal): schedules,
   * rate, faults tried, elapsed, budget left; at most 4 redraws a second.
   * Wall-clock UI only: nothing of it reaches the result. */
  int progress;
  int64_t started_ms, drawn_ms;   /* the progress line's clock */
  int drew;
  volatile long *live;            /* a parallel worker's counters, shared with the parent */
  /* what it found */
  int verdict;
  long runs;              /* runs executed, skipped duplicates included */
  long counted[16];       /* distinct schedules checked, by fault count (last: more) */
  long faults_tried;      /* faults injected over the counted schedules */
  long blocked;           /* runs the reduction stopped: covered by others */
  long races;             /* races it reversed */
  long split_runs;        /* runs a shard spent on the frontier */
  long swept;             /* runs of the sweep (counted among the schedules too) */
  long reused;            /* runs played back from the sweep's logs (among runs) */
  char schedule[4096];    /* the violating schedule */
  int faults;             /* its fault count */
} eu_search;

void eu_search_init(eu_search *s);
/* Returns 0 (verdict set) or <0 on a scenario error. */
int eu_search_run(eu_search *s, eu_run_fn fn, void *ud, char *err, size_t errlen);
/* The same search split over jobs processes (fork), results added up. */
int eu_search_parallel(eu_search *s, int jobs, eu_run_fn fn, void *ud, char *err, size_t errlen);
/* Minimises s's violation: drops drive events that are not needed (last
 * first), re-searching from 0 faults each time, so faults that are not
 * needed go too. Updates s->schedule and s->faults; *runs gets the runs spent. */
int eu_search_shrink(eu_search *s, eu_run_fn fn, void *ud, long *runs, char *err, size_t errlen);
int64_t eu_monotonic_ms(void);
/* Clears the progress line if one was drawn. */
void eu_search_progress_end(eu_search *s);

#endif
