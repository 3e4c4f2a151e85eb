/*
 * explore.c: depth-first, random and replay choosers; the search by
 * increasing fault count; sharding; shrinking; parallel workers.
 *
 * Exploration is stateless: nothing of a run is kept but its decisions.
 * Each run starts from the scenario's first state and follows a prefix of
 * decisions; backtracking turns the last decision that still has an
 * untried branch to its next branch and cuts what came after. The tree is
 * done when no decision has a branch left.
 *
 * A shard is decided by the first EU_SHARD_DEPTH decisions of a run, so a
 * whole subtree belongs to one shard: a run that leaves its shard is stopped
 * there and its subtree skipped, and N shards explore disjoint parts whose
 * counts add up to the whole.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "eutaxy.h"
#include "explore.h"
#include "world.h"

static const char digits[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

int64_t eu_monotonic_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- choice sequences ------------------------------------------------- */

static int choices_push(eu_choices *ch, int c, int n, int kind) {
  if (ch->len == ch->cap) {
    int cap = ch->cap ? ch->cap * 2 : 64;
    unsigned char *a = realloc(ch->c, (size_t)cap), *b, *k;
    if (!a) return EU_ENOMEM;
    ch->c = a;
    b = realloc(ch->n, (size_t)cap);
    if (!b) return EU_ENOMEM;
    ch->n = b;
    k = realloc(ch->k, (size_t)cap);
    if (!k) return EU_ENOMEM;
    ch->k = k;
    ch->cap = cap;
  }
  ch->c[ch->len] = (unsigned char)c;
  ch->n[ch->len] = (unsigned char)n;
  ch->k[ch->len] = (unsigned char)(kind == EU_CHOICE_ORDER);
  ch->len++;
  return EU_OK;
}

static void choices_free(eu_choices *ch) {
  free(ch->c);
  free(ch->n);
  free(ch->k);
  memset(ch, 0, sizeof *ch);
}

static int choices_copy(eu_choices *dst, const eu_choices *src) {
  int i;
  dst->len = 0;
  for (i = 0; i < src->len; i++)
    if (choices_push(dst, src->c[i], src->n[i], src->k[i] ? EU_CHOICE_ORDER : EU_CHOICE_FAULT) != EU_OK)
      return EU_ENOMEM;
  return EU_OK;
}

/* ---- the chooser ------------------------------------------------------ */

void eu_chooser_init(eu_chooser *c, int mode, uint64_t seed) {
  memset(c, 0, sizeof *c);
  c->mode = mode;
  c->shard_n = 1;
  eu_prng_seed(&c->rng, seed);
}

void eu_chooser_free(eu_chooser *c) {
  choices_free(&c->path);
  choices_free(&c->prefix);
  eu_reducer_free(c->red);
  c->red = NULL;
}

void eu_chooser_begin(eu_chooser *c, eu_world *w) {
  c->path.len = 0;
  c->out_of_shard = c->mismatch = c->past_end = c->blocked = 0;
  c->world = w;
  if (c->red) eu_reducer_begin_run(c->red);
}

int eu_chooser_step(void *ud, const eu_tie *ties, int n, int64_t at) {
  eu_chooser *c = ud;
  if (!c->red || c->out_of_shard) return 0;
  if (eu_reducer_step(c->red, ties, n, at, c->path.len)) {
    c->blocked = 1;
    return 1;
  }
  return 0;
}

void eu_chooser_step_end(void *ud, const eu_fp *fp) {
  eu_chooser *c = ud;
  if (c->red) eu_reducer_step_end(c->red, fp);
}

static uint64_t shard_hash(const eu_choices *p, int depth) {
  unsigned char buf[EU_SHARD_DEPTH];
  int i;
  for (i = 0; i < depth && i < p->len; i++) buf[i] = p->c[i];
  return eu_hash64(buf, (size_t)i, (uint64_t)depth);
}

int eu_chooser_in_shard(eu_chooser *c) {
  int depth = c->path.len < EU_SHARD_DEPTH ? c->path.len : EU_SHARD_DEPTH;
  if (c->shard_n <= 1) return 1;
  return (int)(shard_hash(&c->path, depth) % (uint64_t)c->shard_n) == c->shard_k;
}

int eu_chooser_choose(void *ud, int kind, int n, const char *label) {
  eu_chooser *c = ud;
  int i = c->path.len, pick;
  (void)kind;
  (void)label;
  if (n > EU_MAX_ARITY) n = EU_MAX_ARITY;  /* further ties wait for the next decision */
  if (c->out_of_shard) return 0;
  if (c->red && kind == EU_CHOICE_ORDER && c->mode == EU_MODE_DFS) {
    int blocked = 0, replay = i < c->prefix.len ? c->prefix.c[i] : -1;
    if (replay >= n) {
      c->mismatch = 1;
      replay = 0;
    }
    pick = eu_reducer_choose(c->red, replay, &blocked);
    if (blocked) {
      c->blocked = 1;
      if (c->world) eu_world_stop(c->world);
      return 0;
    }
  } else if (i < c->prefix.len) {
    pick = c->prefix.c[i];
    if (pick >= n) {
      c->mismatch = 1;  /* the tree changed under a replayed schedule */
      pick = 0;
    }
  } else if (c->mode == EU_MODE_REPLAY) {
    c->past_end = 1;
    pick = 0;
  } else if (c->mode == EU_MODE_RANDOM) {
    pick = (int)eu_prng_below(&c->rng, (uint64_t)n);
  } else {
    pick = 0;
  }
  if (choices_push(&c->path, pick, n, kind) != EU_OK) {
    c->mismatch = 1;
    if (c->world) eu_world_stop(c->world);
    return 0;
  }
  if (c->shard_n > 1 && c->path.len == EU_SHARD_DEPTH && !eu_chooser_in_shard(c)) {
    c->out_of_shard = 1;
    if (c->world) eu_world_stop(c->world);
  }
  return pick;
}

int eu_chooser_backtrack(eu_chooser *c) {
  int i = c->path.len - 1;
  if (c->red) {
    int branch = 0;
    i = eu_reducer_backtrack(c->red, c->path.k, c->path.n, c->path.c, c->path.len, &branch);
    if (i < 0) return 0;
    if (choices_copy(&c->prefix, &c->path) != EU_OK) return 0;
    c->prefix.len = i + 1;
    c->prefix.c[i] = (unsigned char)branch;
    return 1;
  }
  while (i >= 0 && c->path.c[i] + 1 >= c->path.n[i]) i--;
  if (i < 0) return 0;
  if (choices_copy(&c->prefix, &c->path) != EU_OK) return 0;
  c->prefix.len = i + 1;
  c->prefix.c[i]++;
  return 1;
}

/* ---- schedule strings ------------------------------------------------- */

int eu_schedule_format(char *out, size_t n, int fault_cap, uint64_t events, const eu_choices *ch) {
  size_t pos;
  int i, first = 1;
  pos = (size_t)snprintf(out, n, "%d:", fault_cap);
  for (i = 0; i < EU_MAX_EVENTS && pos < n; i++) {
    if (!(events & ((uint64_t)1 << i))) continue;
    pos += (size_t)snprintf(out + pos, n - pos, first ? "%d" : ".%d", i + 1);
    first = 0;
  }
  if (first && pos < n) pos += (size_t)snprintf(out + pos, n - pos, "-");
  if (pos < n) out[pos++] = ':';
  for (i = 0; i < ch->len && pos + 1 < n; i++) out[pos++] = digits[ch->c[i]];
  if (pos >= n || i < ch->len) {  /* a schedule cut short would replay another run */
    if (n) out[n - 1] = '\0';
    return EU_EINVAL;
  }
  out[pos] = '\0';
  return EU_OK;
}

int eu_schedule_parse(const char *s, int *fault_cap, uint64_t *events, eu_choices *ch, char *err,
                      size_t errlen) {
  const char *p = s, *q;
  char *end;
  long v;
  ch->len = 0;
  *events = 0;
  v = strtol(p, &end, 10);
  if (end == p || *end != ':' || v < 0 || v > 1000)
    return eu_err(err, errlen, EU_ECORRUPT, "schedule \"%.60s\": it starts with the fault count, e.g. 1:1.2:0010", s);
  *fault_cap = (int)v;
  p = end + 1;
  if (*p == '-') {
    p++;
  } else {
    for (;;) {
      v = strtol(p, &end, 10);
      if (end == p || v < 1 || v > EU_MAX_EVENTS)
        return eu_err(err, errlen, EU_ECORRUPT, "schedule \"%.60s\": events are numbers from 1 to %d, separated by dots", s, EU_MAX_EVENTS);
      *events |= (uint64_t)1 << (v - 1);
      p = end;
      if (*p != '.') break;
      p++;
    }
  }
  if (*p != ':') return eu_err(err, errlen, EU_ECORRUPT, "schedule \"%.60s\": expected ':' before the decisions", s);
  for (p++; *p; p++) {
    q = strchr(digits, *p);
    if (!q || !*p)
      return eu_err(err, errlen, EU_ECORRUPT, "schedule \"%.60s\": '%c' is not a decision (0-9, a-z, A-Z)", s, *p);
    if (choices_push(ch, (int)(q - digits), EU_MAX_ARITY, EU_CHOICE_FAULT) != EU_OK)
      return eu_err(err, errlen, EU_ENOMEM, "out of memory");
  }
  return EU_OK;
}

/* ---- progress --------------------------------------------------------- */

/* A parallel worker's counters, in memory shared with the parent. */
enum { LIVE_SCHEDULES = 0, LIVE_FAULTS, LIVE_N };

static long schedules_of(const eu_search *s) {
  long n = 0;
  int i;
  for (i = 0; i < 16; i++) n += s->counted[i];
  return n;
}

static void draw(eu_search *s, long schedules, long faults) {
  int64_t now = eu_monotonic_ms(), elapsed = now - s->started_ms;
  char budget[48] = "";
  if (s->deadline_ms) {
    int64_t left = s->deadline_ms > now ? s->deadline_ms - now : 0;
    snprintf(budget, sizeof budget, ", budget left %.1fs", (double)left / 1000.0);
  }
  /* \r and erase-to-end-of-line: the line is drawn over itself */
  fprintf(stderr, "\r\033[Kexploring: %ld schedules, %.0f/s, %ld faults tried, %.1fs elapsed%s",
          schedules, elapsed > 0 ? (double)schedules * 1000.0 / (double)elapsed : 0.0, faults,
          (double)elapsed / 1000.0, budget);
  fflush(stderr);
  s->drawn_ms = now;
  s->drew = 1;
}

/* After each counted run: shared counters for the parent, the line at most 4 times a second. */
static void tick(eu_search *s) {
  if (s->live) {
    s->live[LIVE_SCHEDULES] = schedules_of(s);
    s->live[LIVE_FAULTS] = s->faults_tried;
  }
  if (s->progress && eu_monotonic_ms() - s->drawn_ms >= 250) draw(s, schedules_of(s), s->faults_tried);
}

void eu_search_progress_end(eu_search *s) {
  if (!s->drew) return;
  fputs("\r\033[K", stderr);
  fflush(stderr);
  s->drew = 0;
}

/* ---- the search ------------------------------------------------------- */

void eu_search_init(eu_search *s) {
  memset(s, 0, sizeof *s);
  s->shard_n = 1;
}

static void count(eu_search *s, void *ud, int faults) {
  int i = faults < 15 ? faults : 15;
  s->counted[i]++;
  s->faults_tried += faults;
  if (s->on_counted) s->on_counted(ud);
  tick(s);
}

static int expired(const eu_search *s) {
  return s->deadline_ms && eu_monotonic_ms() > s->deadline_ms;
}

static int found(eu_search *s, eu_chooser *c, int cap, int faults, char *err, size_t errlen) {
  s->verdict = EU_VIOLATED;
  s->faults = faults;
  if (eu_schedule_format(s->schedule, sizeof s->schedule, cap, s->events, &c->path) != EU_OK)
    return eu_err(err, errlen, EU_EINVAL, "a violating schedule of %d decisions is too long to report",
                  c->path.len);
  return EU_OK;
}

static int search_dfs(eu_search *s, eu_run_fn fn, void *ud, char *err, size_t errlen) {
  eu_chooser c;
  int cap, rc = EU_OK;
  for (cap = s->min_faults; cap <= s->max_faults; cap++) {
    eu_chooser_init(&c, EU_MODE_DFS, 0);
    c.shard_k = s->shard_k;
    c.shard_n = s->shard_n;
    /* A shard's first decisions are shared with other shards, whose runs it
     * never sees: they branch every way, and reduction starts below them. */
    if (s->reduce && eu_reducer_new(&c.red, s->shard_n > 1 ? EU_SHARD_DEPTH : 0) != EU_OK) {
      eu_chooser_free(&c);
      return eu_err(err, errlen, EU_ENOMEM, "out of memory");
    }
    do {
      int faults = 0, v;
      if (expired(s)) {
        s->verdict = EU_INCONCLUSIVE;
        eu_chooser_free(&c);
        return EU_OK;
      }
      v = fn(ud, &c, s->events, cap, &faults, err, errlen);
      s->runs++;
      if (v < 0) {
        eu_chooser_free(&c);
        return v;
      }
      if (c.out_of_shard || !eu_chooser_in_shard(&c)) continue;
      if (c.blocked) {
        s->blocked++;
        continue;
      }
      if (c.red && v != 1 && eu_reducer_end_run(c.red) != EU_OK) {
        eu_chooser_free(&c);
        return eu_err(err, errlen, EU_ENOMEM, "out of memory");
      }
      /* A run with fewer faults than the cap was checked at its own count. */
      if (faults < cap && cap > s->min_faults) continue;
      count(s, ud, faults);
      if (v == 1) {
        rc = found(s, &c, cap, faults, err, errlen);
        eu_chooser_free(&c);
        return rc;
      }
    } while (eu_chooser_backtrack(&c));
    if (c.red) s->races += eu_reducer_races(c.red);
    eu_chooser_free(&c);
  }
  s->verdict = EU_BOUNDED;
  return EU_OK;
}

static int search_random(eu_search *s, eu_run_fn fn, void *ud, char *err, size_t errlen) {
  eu_chooser c;
  long i;
  eu_chooser_init(&c, EU_MODE_RANDOM, s->random_seed);
  for (i = 0; i < s->random_runs; i++) {
    int faults = 0, v;
    if (expired(s)) break;
    v = fn(ud, &c, s->events, s->max_faults, &faults, err, errlen);
    s->runs++;
    if (v < 0) {
      eu_chooser_free(&c);
      return v;
    }
    count(s, ud, faults);
    if (v == 1) {
      v = found(s, &c, s->max_faults, faults, err, errlen);
      eu_chooser_free(&c);
      return v;
    }
  }
  eu_chooser_free(&c);
  /* Random runs never prove anything: no violation is not BOUNDED. */
  s->verdict = EU_INCONCLUSIVE;
  return EU_OK;
}

static int search_replay(eu_search *s, eu_run_fn fn, void *ud, char *err, size_t errlen) {
  eu_chooser c;
  int cap, faults = 0, v;
  uint64_t events;
  eu_chooser_init(&c, EU_MODE_REPLAY, 0);
  if ((v = eu_schedule_parse(s->replay, &cap, &events, &c.prefix, err, errlen)) != EU_OK) {
    eu_chooser_free(&c);
    return v;
  }
  if (events & ~s->events) {
    eu_chooser_free(&c);
    return eu_err(err, errlen, EU_EINVAL, "schedule \"%.60s\" names a drive event the scenario does not have", s->replay);
  }
  s->events = events;
  v = fn(ud, &c, events, cap, &faults, err, errlen);
  s->runs++;
  if (v >= 0 && (c.mismatch || c.past_end || c.path.len != c.prefix.len)) {
    eu_chooser_free(&c);
    return eu_err(err, errlen, EU_EINVAL,
                  "schedule \"%.60s\" does not fit this scenario: it was recorded against other code or bounds",
                  s->replay);
  }
  if (v < 0) {
    eu_chooser_free(&c);
    return v;
  }
  count(s, ud, faults);
  s->faults = faults;
  snprintf(s->schedule, sizeof s->schedule, "%s", s->replay);
  s->verdict = v == 1 ? EU_VIOLATED : EU_BOUNDED;
  eu_chooser_free(&c);
  return EU_OK;
}

int eu_search_run(eu_search *s, eu_run_fn fn, void *ud, char *err, size_t errlen) {
  if (!s->started_ms) s->started_ms = eu_monotonic_ms();
  switch (s->mode) {
  case EU_MODE_RANDOM: return search_random(s, fn, ud, err, errlen);
  case EU_MODE_REPLAY: return search_replay(s, fn, ud, err, errlen);
  default: return search_dfs(s, fn, ud, err, errlen);
  }
}

/* ---- shrinking -------------------------------------------------------- */

int eu_search_shrink(eu_search *s, eu_run_fn fn, void *ud, long *runs, char *err, size_t errlen) {
  int i, rc;
  *runs = 0;
  if (s->verdict != EU_VIOLATED) return EU_OK;
  /* Later events first: a counterexample keeps the earliest events it needs. */
  for (i = EU_MAX_EVENTS - 1; i >= 0; i--) {
    eu_search t;
    uint64_t bit = (uint64_t)1 << i;
    if (!(s->events & bit) || s->events == bit) continue;
    eu_search_init(&t);
    t.mode = EU_MODE_DFS;
    t.events = s->events & ~bit;
    t.max_faults = s->faults;
    t.deadline_ms = s->deadline_ms;
    t.reduce = s->reduce;
    rc = eu_search_run(&t, fn, ud, err, errlen);
    *runs += t.runs;
    if (rc < 0) return rc;
    if (t.verdict == EU_VIOLATED) {
      s->events = t.events;
      s->faults = t.faults;
      memcpy(s->schedule, t.schedule, sizeof s->schedule);
    }
  }
  return EU_OK;
}

/* ---- parallel workers ------------------------------------------------- */

/* What a worker sends back: fixed fields, then the schedule. */
typedef struct wire_result {
  int rc, verdict, faults;
  long runs, counted[16], faults_tried, blocked, races;
  uint64_t notes_len;     /* bytes of the run function's notes that follow */
  char schedule[4096];
  char err[EU_ERRLEN];
} wire_result;

static int write_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n) {
    ssize_t k = write(fd, c, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    c += k;
    n -= (size_t)k;
  }
  return 0;
}

static int read_all(int fd, void *p, size_t n) {
  char *c = p;
  while (n) {
    ssize_t k = read(fd, c, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    c += k;
    n -= (size_t)k;
  }
  return 0;
}

/* The parent's progress line while the workers run: it waits for their
 * answers a quarter of a second at a time and draws the sum of their counters. */
static void watch_workers(eu_search *s, const int *fds, int jobs, volatile long *live) {
  struct pollfd p[64];
  int j, left = jobs;
  for (j = 0; j < jobs; j++) {
    p[j].fd = fds[j];
    p[j].events = POLLIN;
    p[j].revents = 0;
  }
  while (left > 0) {
    long schedules = 0, faults = 0;
    int k = poll(p, (nfds_t)jobs, 250);
    if (k < 0 && errno != EINTR) return;
    for (j = 0; j < jobs; j++) {
      if (p[j].fd >= 0 && p[j].revents) {
        p[j].fd = -1;  /* its answer is there: poll ignores it from now on */
        left--;
      }
      schedules += live[j * LIVE_N + LIVE_SCHEDULES];
      faults += live[j * LIVE_N + LIVE_FAULTS];
    }
    draw(s, schedules, faults);
  }
}

static int read_notes(int fd, uint64_t len, eu_search *s, void *ud) {
  char *p;
  int rc = 0;
  if (len == 0) return 0;
  if (len > ((uint64_t)1 << 30) || !(p = malloc((size_t)len + 1))) return -1;
  p[len] = '\0';  /* merge_notes may parse it as text */
  if (read_all(fd, p, (size_t)len) != 0) rc = -1;
  else if (s->merge_notes && s->merge_notes(ud, p, (size_t)len) != EU_OK) rc = -1;
  free(p);
  return rc;
}

int eu_search_parallel(eu_search *s, int jobs, eu_run_fn fn, void *ud, char *err, size_t errlen) {
  pid_t pids[64];
  int fds[64], j, i, rc = EU_OK, best = -1;
  wire_result r[64];
  volatile long *live = NULL;
  size_t live_size;
  if (jobs <= 1 || s->mode == EU_MODE_REPLAY) return eu_search_run(s, fn, ud, err, errlen);
  if (jobs > 64) jobs = 64;
  if (!s->started_ms) s->started_ms = eu_monotonic_ms();
  live_size = (size_t)jobs * LIVE_N * sizeof(long);
  if (s->progress) {
    void *m = mmap(NULL, live_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m != MAP_FAILED) {
      live = m;
      memset(m, 0, live_size);
    }
  }
  fflush(NULL);
  for (j = 0; j < jobs; j++) {
    int p[2];
    if (pipe(p) != 0) return eu_err(err, errlen, EU_EINVAL, "pipe: %s", strerror(errno));
    pids[j] = fork();
    if (pids[j] < 0) return eu_err(err, errlen, EU_EINVAL, "fork: %s", strerror(errno));
    if (pids[j] == 0) {
      wire_result w;
      eu_search t = *s;
      eu_buf notes;
      close(p[0]);
      memset(&w, 0, sizeof w);
      eu_buf_init(&notes);
      t.progress = 0;  /* the parent draws the line */
      t.live = live ? live + j * LIVE_N : NULL;
      if (t.mode == EU_MODE_RANDOM) {
        /* each worker draws its own share of the runs from its own stream */
        t.random_seed = s->random_seed * 1000003u + (uint64_t)j;
        t.random_runs = s->random_runs / jobs + (j < s->random_runs % jobs);
      } else {
        t.shard_k = s->shard_k * jobs + j;
        t.shard_n = s->shard_n * jobs;
      }
      w.rc = eu_search_run(&t, fn, ud, w.err, sizeof w.err);
      w.verdict = t.verdict;
      w.faults = t.faults;
      w.runs = t.runs;
      w.blocked = t.blocked;
      w.races = t.races;
      memcpy(w.counted, t.counted, sizeof w.counted);
      memcpy(w.schedule, t.schedule, sizeof w.schedule);
      w.faults_tried = t.faults_tried;
      if (s->export_notes && s->export_notes(ud, &notes) == EU_OK) w.notes_len = notes.n;
      write_all(p[1], &w, sizeof w);
      if (w.notes_len) write_all(p[1], notes.p, notes.n);
      eu_buf_free(&notes);
      close(p[1]);
      _exit(0);
    }
    close(p[1]);
    fds[j] = p[0];
  }
  if (live) watch_workers(s, fds, jobs, live);
  for (j = 0; j < jobs; j++) {
    int status;
    if (read_all(fds[j], &r[j], sizeof r[j]) != 0 || read_notes(fds[j], r[j].notes_len, s, ud) != 0) {
      memset(&r[j], 0, sizeof r[j]);
      r[j].rc = EU_EINVAL;
      snprintf(r[j].err, sizeof r[j].err, "worker %d of %d died", j + 1, jobs);
    }
    close(fds[j]);
    while (waitpid(pids[j], &status, 0) < 0 && errno == EINTR) {}
  }
  s->verdict = EU_BOUNDED;
  for (j = 0; j < jobs; j++) {
    if (r[j].rc < 0 && rc == EU_OK) {
      rc = r[j].rc;
      eu_err(err, errlen, rc, "%s", r[j].err);
    }
    s->runs += r[j].runs;
    s->blocked += r[j].blocked;
    s->races += r[j].races;
    s->faults_tried += r[j].faults_tried;
    for (i = 0; i < 16; i++) s->counted[i] += r[j].counted[i];
    if (r[j].verdict == EU_VIOLATED && (best < 0 || r[j].faults < r[best].faults)) best = j;
    if (r[j].verdict == EU_INCONCLUSIVE && s->verdict == EU_BOUNDED) s->verdict = EU_INCONCLUSIVE;
  }
  if (live) munmap((void *)live, live_size);
  if (best >= 0) {
    s->verdict = EU_VIOLATED;
    s->faults = r[best].faults;
    memcpy(s->schedule, r[best].schedule, sizeof s->schedule);
  }
  return rc;
}
