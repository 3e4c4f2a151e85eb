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
 * Before the tree, a sweep: the first run with a fault left (every
 * decision its first branch) shows the fault points of the first schedule;
 * each point is then tried once with each kind it offers, one run each,
 * breadth-first, and so on for the points those runs reach while they still
 * have a fault to spend. A budget that allows one run per point and kind
 * ends with each of them tried, however deep the tree under the first
 * schedule is. The tree does not count those runs again: a run is named by
 * its order decisions and the faults it took (run_key), whatever its cap;
 * and it plays them back from the sweep's logs rather than run them again
 * where its reducer would make the same decisions (reuse, below).
 *
 * Shards split the runs by their faults. A run's fault set (each fault's
 * point, kind and causal past: reduce.h) is the same in every order of its
 * steps, so a shard that
 * owns a set by its hash owns every run of it, however reordered, and
 * partial-order reduction stays sound within a shard: a fault that would be
 * the last a run may take is a branch only in the shard that owns the set it
 * completes. Runs with fewer faults are every shard's way to its own, and
 * counted by none but at their own cap; the fault-free tree is the first
 * shard's. Without faults in play there are no sets to split by: every
 * shard grows the same frontier instead, sampling a random run under each
 * node (Knuth's estimate of its subtree's size: the product of the branch
 * counts on the way down) and splitting the node it estimates largest, 32
 * nodes a shard, and takes its own, largest first to the least loaded
 * shard; reduction then starts at each subtree's root.
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

void eu_choices_free(eu_choices *ch) {
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
  eu_prng_seed(&c->rng, seed);
}

void eu_chooser_free(eu_chooser *c) {
  eu_choices_free(&c->path);
  eu_choices_free(&c->prefix);
  free(c->labels);
  c->labels = NULL;
  free(c->allow);
  c->allow = NULL;
  eu_reducer_free(c->red);
  c->red = NULL;
}

void eu_chooser_begin(eu_chooser *c, eu_world *w) {
  c->path.len = 0;
  c->mismatch = c->past_end = c->blocked = 0;
  c->struck = 0;
  c->fault_set = 0;
  c->world = w;
  if (c->red) eu_reducer_begin_run(c->red);
  if (c->log) eu_buf_reset(c->log);
}

/* The log of a run's calls (eu_chooser.log): entries of a tag byte and
 * their arguments, as the calls made them. */
enum { LOG_STEP = 'S', LOG_CHOOSE = 'C', LOG_END = 'E' };

static void log_put(eu_chooser *c, const void *p, size_t n) {
  if (c->log && eu_buf_put(c->log, p, n) != EU_OK) c->log = NULL;  /* lost: the run is not kept */
}

int eu_chooser_step(void *ud, const eu_tie *ties, int n, int64_t at) {
  eu_chooser *c = ud;
  if (c->log) {
    unsigned char tag = LOG_STEP;
    int k = n > EU_MAX_ARITY ? EU_MAX_ARITY : n;
    log_put(c, &tag, 1);
    log_put(c, &k, sizeof k);
    log_put(c, &at, sizeof at);
    log_put(c, ties, (size_t)k * sizeof *ties);
  }
  if (!c->red) return 0;
  if (eu_reducer_step(c->red, ties, n, at, c->path.len)) {
    c->blocked = 1;
    return 1;
  }
  return 0;
}

void eu_chooser_step_end(void *ud, const eu_fp *fp) {
  eu_chooser *c = ud;
  if (c->log) {
    unsigned char tag = LOG_END;
    log_put(c, &tag, 1);
    log_put(c, fp, sizeof *fp);
  }
  if (c->red) eu_reducer_step_end(c->red, fp);
}

int eu_chooser_steps(const eu_chooser *c) {
  return c->red != NULL || (c->log != NULL && c->log_steps);
}

int eu_trail_keep(eu_trail *t, const eu_chooser *c) {
  int len = c->path.len;
  if (choices_copy(&t->path, &c->path) != EU_OK) return EU_ENOMEM;
  if (len > t->cap) {
    uint64_t *a = realloc(t->allow, (size_t)len * sizeof *a), *l;
    if (!a) return EU_ENOMEM;
    t->allow = a;
    if (!(l = realloc(t->labels, (size_t)len * sizeof *l))) return EU_ENOMEM;
    t->labels = l;
    t->cap = len;
  }
  if (len) memcpy(t->allow, c->allow, (size_t)len * sizeof *t->allow);
  t->has_labels = c->labels_on;
  eu_buf_reset(&t->log);
  t->has_log = c->log != NULL && eu_buf_put(&t->log, c->log->p, c->log->n) == EU_OK;
  if (len && t->has_labels) {
    int n = len < c->caplabels ? len : c->caplabels;  /* order decisions past the last fault note none */
    if (n > 0) memcpy(t->labels, c->labels, (size_t)n * sizeof *t->labels);
    memset(t->labels + n, 0, (size_t)(len - n) * sizeof *t->labels);
  }
  return EU_OK;
}

void eu_trail_free(eu_trail *t) {
  eu_choices_free(&t->path);
  eu_buf_free(&t->log);
  free(t->allow);
  free(t->labels);
  memset(t, 0, sizeof *t);
}

int eu_chooser_resume(eu_chooser *c, const eu_trail *t, int len, int struck, uint64_t fault_set, size_t log_len) {
  int i;
  if (c->log) {
    eu_buf_reset(c->log);
    if (!t->has_log || log_len > t->log.n || (log_len && eu_buf_put(c->log, t->log.p, log_len) != EU_OK))
      c->log = NULL;
  }
  if (len > t->path.len || (c->labels_on && len > 0 && !t->has_labels)) return EU_EINVAL;
  if (len > c->capallow) {
    uint64_t *a = realloc(c->allow, (size_t)len * sizeof *a);
    if (!a) return EU_ENOMEM;
    c->allow = a;
    c->capallow = len;
  }
  if (c->labels_on && len > c->caplabels) {
    uint64_t *a = realloc(c->labels, (size_t)len * sizeof *a);
    if (!a) return EU_ENOMEM;
    c->labels = a;
    c->caplabels = len;
  }
  c->path.len = 0;
  for (i = 0; i < len; i++)
    if (choices_push(&c->path, t->path.c[i], t->path.n[i], t->path.k[i] ? EU_CHOICE_ORDER : EU_CHOICE_FAULT) != EU_OK)
      return EU_ENOMEM;
  if (len) memcpy(c->allow, t->allow, (size_t)len * sizeof *c->allow);
  if (len && c->labels_on) memcpy(c->labels, t->labels, (size_t)len * sizeof *c->labels);
  c->struck = struck;
  c->fault_set = fault_set;
  return EU_OK;
}

/* A fault point as coverage names it: its label without the delivery and
 * firing numbers ("req-1 effect #0 (DO:POOL acquire)"), hashed. */
static uint64_t point_hash(const char *label) {
  uint64_t h = 0xcbf29ce484222325u;
  const char *p = label ? label : "";
  while (*p) {
    if (*p == '#' && p > label && p[-1] != ' ' && p[1] >= '0' && p[1] <= '9') {
      for (p++; *p >= '0' && *p <= '9'; p++) {}
      continue;
    }
    h = (h ^ (unsigned char)*p++) * 0x100000001b3u;
  }
  return h;
}

static int note_label(eu_chooser *c, int i, const char *label) {
  if (i >= c->caplabels) {
    int cap = c->caplabels ? c->caplabels * 2 : 64;
    while (cap <= i) cap *= 2;  /* order decisions between two faults note nothing */
    uint64_t *a = realloc(c->labels, (size_t)cap * sizeof *a);
    if (!a) return EU_ENOMEM;
    c->labels = a;
    c->caplabels = cap;
  }
  c->labels[i] = point_hash(label);
  return EU_OK;
}

/* A fault struck: its point (the whole label, deliveries and firings
 * included: the same in every order of the run's steps) and its kind. A
 * run's fault set is the sum of its marks, whatever order they struck in. */
static uint64_t fault_mark(const char *label, int pick, uint64_t past) {
  const char *p = label ? label : "";
  return eu_mix64(eu_mix64(eu_hash64(p, strlen(p), 0xfa17), (uint64_t)pick), past);
}

/* Where the fault strikes in the run's partial order (reduce.h): it tells
 * apart runs with the same faults, so that shards split them finer. */
static uint64_t fault_past(eu_chooser *c) {
  if (!c->red || !c->world) return 0;
  return eu_reducer_past(c->red, eu_world_step_fp(c->world));
}

static int owner_of(uint64_t fault_set, int n) {
  return (int)(eu_mix64(fault_set, 0x5a4du) % (uint64_t)n);
}

/* The branches decision i may take. With ownership split (own_n > 1), a
 * fault that would be the run's last under its cap is taken only by the
 * shard that owns the run's whole fault set: every run with cap faults
 * belongs to one shard, by a set that no reordering of its steps changes. */
static int note_allowed(eu_chooser *c, int i, int kind, int n, const char *label, uint64_t past) {
  uint64_t m = n >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << n) - 1);
  int b;
  if (i >= c->capallow) {
    int cap = c->capallow ? c->capallow * 2 : 64;
    while (cap <= i) cap *= 2;
    uint64_t *a = realloc(c->allow, (size_t)cap * sizeof *a);
    if (!a) return EU_ENOMEM;
    c->allow = a;
    c->capallow = cap;
  }
  if (kind == EU_CHOICE_FAULT && c->own_n > 1 && c->struck + 1 == c->cap)
    for (b = 1; b < n; b++)
      if (owner_of(c->fault_set + fault_mark(label, b, past), c->own_n) != c->own_k) m &= ~((uint64_t)1 << b);
  c->allow[i] = m;
  return EU_OK;
}

int eu_chooser_choose(void *ud, int kind, int n, const char *label) {
  eu_chooser *c = ud;
  int i = c->path.len, pick;
  uint64_t past = kind == EU_CHOICE_FAULT && c->own_n > 1 ? fault_past(c) : 0;
  if (n > EU_MAX_ARITY) n = EU_MAX_ARITY;  /* further ties wait for the next decision */
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
  if (choices_push(&c->path, pick, n, kind) != EU_OK ||
      (c->labels_on && kind == EU_CHOICE_FAULT && note_label(c, i, label) != EU_OK) ||
      note_allowed(c, i, kind, n, label, past) != EU_OK) {
    c->mismatch = 1;
    if (c->world) eu_world_stop(c->world);
    return 0;
  }
  if (kind == EU_CHOICE_FAULT && pick > 0) {
    c->struck++;
    c->fault_set += fault_mark(label, pick, past);
  }
  if (c->log) {
    unsigned char tag = LOG_CHOOSE;
    int len = label ? (int)strlen(label) : -1;
    log_put(c, &tag, 1);
    log_put(c, &kind, sizeof kind);
    log_put(c, &n, sizeof n);
    log_put(c, &pick, sizeof pick);
    log_put(c, &len, sizeof len);
    if (len > 0) log_put(c, label, (size_t)len);
  }
  return pick;
}

int eu_chooser_backtrack(eu_chooser *c, int floor) {
  int i = c->path.len - 1;
  if (c->red) {
    int branch = 0;
    i = eu_reducer_backtrack(c->red, c->path.k, c->path.n, c->path.c, c->allow, c->path.len, floor, &branch);
    if (i < 0) return 0;
    if (choices_copy(&c->prefix, &c->path) != EU_OK) return 0;
    c->prefix.len = i + 1;
    c->prefix.c[i] = (unsigned char)branch;
    return 1;
  }
  for (; i >= floor; i--) {
    int b;
    for (b = c->path.c[i] + 1; b < c->path.n[i]; b++)
      if (!c->allow || c->allow[i] >> b & 1) break;
    if (b < c->path.n[i]) {
      if (choices_copy(&c->prefix, &c->path) != EU_OK) return 0;
      c->prefix.len = i + 1;
      c->prefix.c[i] = (unsigned char)b;
      return 1;
    }
  }
  return 0;
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

/* Whether a run of the tree at cap with this many faults is counted there:
 * a run with fewer faults than the cap was counted at its own count's tree,
 * but for the first tree's; the one tree (eu_search.flat) counts every run
 * with at least its first count. */
static int counted_at(const eu_search *s, int cap, int faults) {
  if (s->flat_now) return faults >= s->flat_now;
  return faults == cap || cap <= s->min_faults;
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

/* ---- run keys ---------------------------------------------------------- */

/* A run by its order decisions and the faults it took, each with the
 * number of fault points before it: the same run at a higher cap, where the
 * points after its last fault are decisions answered "none", has the same key. */
static uint64_t run_key(const eu_choices *p) {
  uint64_t h = 0x84222325cbf29ce4u;
  int i, ordinal = 0;
  for (i = 0; i < p->len; i++) {
    if (p->k[i]) {
      h = eu_mix64(h, 0x100u + p->c[i]);
    } else {
      if (p->c[i]) h = eu_mix64(h, ((uint64_t)ordinal << 16) | 0x8000u | p->c[i]);
      ordinal++;
    }
  }
  return h;
}

typedef struct keyset {
  uint64_t *slot;
  size_t mask, n;
} keyset;

/* 1 if k is new, 0 if there, <0 out of memory. 0 is never a key. */
static int keyset_add(keyset *ks, uint64_t k) {
  size_t i;
  if (!k) k = 1;
  if (2 * (ks->n + 1) > ks->mask + 1) {
    size_t cap = ks->mask ? 2 * (ks->mask + 1) : 256, j;
    uint64_t *a = calloc(cap, sizeof *a);
    if (!a) return EU_ENOMEM;
    for (j = 0; ks->slot && j <= ks->mask; j++)
      if (ks->slot[j]) {
        for (i = ks->slot[j] & (cap - 1); a[i]; i = (i + 1) & (cap - 1)) {}
        a[i] = ks->slot[j];
      }
    free(ks->slot);
    ks->slot = a;
    ks->mask = cap - 1;
  }
  for (i = k & ks->mask; ks->slot[i]; i = (i + 1) & ks->mask)
    if (ks->slot[i] == k) return 0;
  ks->slot[i] = k;
  ks->n++;
  return 1;
}

static int keyset_has(const keyset *ks, uint64_t k) {
  size_t i;
  if (!k) k = 1;
  if (!ks->slot) return 0;
  for (i = k & ks->mask; ks->slot[i]; i = (i + 1) & ks->mask)
    if (ks->slot[i] == k) return 1;
  return 0;
}

/* ---- the sweep ---------------------------------------------------------- */

typedef struct prefixes {
  eu_choices *p;
  int n, cap;
} prefixes;

static int prefixes_push(prefixes *q, const eu_choices *path, int len, int branch) {
  eu_choices *e;
  int i;
  if (q->n == q->cap) {
    int cap = q->cap ? q->cap * 2 : 32;
    eu_choices *a = realloc(q->p, (size_t)cap * sizeof *a);
    if (!a) return EU_ENOMEM;
    q->p = a;
    q->cap = cap;
  }
  e = &q->p[q->n];
  memset(e, 0, sizeof *e);
  for (i = 0; i < len; i++)
    if (choices_push(e, path->c[i], path->n[i], path->k[i] ? EU_CHOICE_ORDER : EU_CHOICE_FAULT) != EU_OK)
      return EU_ENOMEM;
  if (branch >= 0) {
    if (choices_push(e, branch, path->n[len], path->k[len] ? EU_CHOICE_ORDER : EU_CHOICE_FAULT) != EU_OK)
      return EU_ENOMEM;
  }
  q->n++;
  return EU_OK;
}

static void prefixes_free(prefixes *q) {
  int i;
  for (i = 0; i < q->n; i++) eu_choices_free(&q->p[i]);
  free(q->p);
  memset(q, 0, sizeof *q);
}

/* A violation found while another part of the search must still run. */
typedef struct held {
  int on, faults;
  char schedule[4096];
} held;

static int hold(held *h, const eu_chooser *c, int cap, int faults, uint64_t events) {
  if (h->on) return EU_OK;
  if (eu_schedule_format(h->schedule, sizeof h->schedule, cap, events, &c->path) != EU_OK) return EU_EINVAL;
  h->on = 1;
  h->faults = faults;
  return EU_OK;
}

/* ---- reuse --------------------------------------------------------------
 *
 * The tree runs again every run of the sweep at its cap (the sweep has no
 * reducer, and the tree's reducer must see each run of the tree). A run is
 * a function of its decisions: the same calls on its chooser come back
 * while the chooser answers them the same way. So the sweep keeps a log of
 * each run's calls (its steps with their tied events, its decisions with
 * their labels, its footprints), by cap and prefix; when the tree starts a
 * run with that cap and prefix, the log is played to the tree's chooser and
 * reducer as the world would have made the calls, and each of the
 * chooser's answers is compared with the run's. All the same: the tree's
 * run is the logged one, and it is not run. One differs (the reducer took
 * another branch, as its sleep sets may): the play stops and the run is
 * run. The reducer's footprints are the world's own, so the logged runs
 * report their steps as the tree's do (eu_chooser.log_steps). A run the
 * tree would count is run too: counting takes the coverage the run notes,
 * which a log does not hold (the sweep's runs are counted by the sweep). */

#define LOG_BUCKETS 1024
#define LOG_BUDGET ((size_t)64 << 20)  /* bytes of logs kept at once; past it, runs are not logged */

typedef struct runlog {
  int cap, v, faults;
  eu_choices prefix;
  eu_buf calls;
  struct runlog *next;
} runlog;

/* What the sweep keeps for the whole search: the runs it counted, the
 * fault points and kinds some run struck, a violation it found, the logs
 * of its runs. */
typedef struct sweeper {
  keyset runs;      /* run_key of every run the sweep counted: the tree skips them */
  keyset tried;     /* (point, branches, kind) some run struck */
  held h;
  runlog **logs;    /* LOG_BUCKETS chains, or NULL: no reuse */
  size_t log_bytes;
} sweeper;

static unsigned log_bucket(int cap, const eu_choices *prefix) {
  uint64_t h = eu_mix64((uint64_t)cap, prefix->len ? eu_hash64(prefix->c, (size_t)prefix->len, 7) : 0);
  return (unsigned)(h % LOG_BUCKETS);
}

static void free_log(runlog *l) {
  eu_choices_free(&l->prefix);
  eu_buf_free(&l->calls);
  free(l);
}

static void free_logs(sweeper *sw) {
  int i;
  if (!sw->logs) return;
  for (i = 0; i < LOG_BUCKETS; i++)
    while (sw->logs[i]) {
      runlog *l = sw->logs[i];
      sw->logs[i] = l->next;
      free_log(l);
    }
  free(sw->logs);
  sw->logs = NULL;
}

/* Keeps the log c's run made, with its outcome; the run must be whole. */
static void keep_log(sweeper *sw, eu_chooser *c, const eu_choices *prefix, int cap, int v, int faults) {
  runlog *l;
  unsigned b;
  if (!sw->logs || !c->log || c->mismatch || c->blocked || v < 0) return;
  if (!(l = calloc(1, sizeof *l))) return;
  if (choices_copy(&l->prefix, prefix) != EU_OK) {
    free_log(l);
    return;
  }
  l->cap = cap;
  l->v = v;
  l->faults = faults;
  l->calls = *c->log;
  eu_buf_init(c->log);
  b = log_bucket(cap, prefix);
  l->next = sw->logs[b];
  sw->logs[b] = l;
  sw->log_bytes += l->calls.n;
}

/* The log of the run with this cap and prefix, taken out of the store. */
static runlog *take_log(sweeper *sw, int cap, const eu_choices *prefix) {
  runlog **at;
  if (!sw->logs) return NULL;
  for (at = &sw->logs[log_bucket(cap, prefix)]; *at; at = &(*at)->next) {
    runlog *l = *at;
    if (l->cap == cap && l->prefix.len == prefix->len &&
        (prefix->len == 0 || memcmp(l->prefix.c, prefix->c, (size_t)prefix->len) == 0)) {
      *at = l->next;
      sw->log_bytes -= l->calls.n;
      return l;
    }
  }
  return NULL;
}

/* Plays l to c as its run would have made the calls: 1 when c answered as
 * the logged run's chooser did all the way (or its reducer blocked the
 * run on the way, as it would have), 0 when an answer differed. */
static int play_log(eu_chooser *c, const runlog *l) {
  const unsigned char *p = (const unsigned char *)l->calls.p, *end = p + l->calls.n;
  eu_chooser_begin(c, NULL);
  while (p < end) {
    unsigned char tag = *p++;
    if (tag == LOG_STEP) {
      eu_tie ties[EU_MAX_ARITY];
      int k;
      int64_t at;
      memcpy(&k, p, sizeof k);
      p += sizeof k;
      memcpy(&at, p, sizeof at);
      p += sizeof at;
      memcpy(ties, p, (size_t)k * sizeof *ties);
      p += (size_t)k * sizeof *ties;
      if (eu_chooser_step(c, ties, k, at)) return 1;
    } else if (tag == LOG_CHOOSE) {
      int kind, n, pick, len;
      char label[512];
      const char *lp = NULL;
      memcpy(&kind, p, sizeof kind);
      p += sizeof kind;
      memcpy(&n, p, sizeof n);
      p += sizeof n;
      memcpy(&pick, p, sizeof pick);
      p += sizeof pick;
      memcpy(&len, p, sizeof len);
      p += sizeof len;
      if (len >= 0) {
        if ((size_t)len >= sizeof label) return 0;
        memcpy(label, p, (size_t)len);
        label[len] = '\0';
        p += len;
        lp = label;
      }
      if (eu_chooser_choose(c, kind, n, lp) != pick) return c->blocked;
      if (c->blocked) return 1;
      if (c->mismatch) return 0;
    } else if (tag == LOG_END) {
      eu_fp fp;
      memcpy(&fp, p, sizeof fp);
      p += sizeof fp;
      eu_chooser_step_end(c, &fp);
    } else {
      return 0;
    }
  }
  return 1;
}

static uint64_t pair_key(const eu_chooser *c, int i, int b) {
  return eu_mix64(c->labels[i], ((uint64_t)c->path.n[i] << 8) | (uint64_t)b);
}

/* Notes the faults c's run struck as tried, and queues a run for every
 * kind offered at or after position from that no run struck yet (a branch
 * this shard may take: c->allow). */
static int note_pairs(sweeper *sw, const eu_chooser *c, int from, prefixes *q) {
  int i, b;
  for (i = 0; i < c->path.len && i < c->caplabels; i++)
    if (!c->path.k[i] && c->path.c[i] > 0 && keyset_add(&sw->tried, pair_key(c, i, c->path.c[i])) < 0)
      return EU_ENOMEM;
  for (i = from; i < c->path.len && i < c->caplabels; i++) {
    if (c->path.k[i] || c->path.n[i] < 2) continue;
    for (b = 1; b < c->path.n[i]; b++) {
      int fresh;
      if (c->allow && !(c->allow[i] >> b & 1)) continue;
      fresh = keyset_add(&sw->tried, pair_key(c, i, b));
      if (fresh < 0 || (fresh > 0 && prefixes_push(q, &c->path, i, b) != EU_OK)) return EU_ENOMEM;
    }
  }
  return EU_OK;
}

/* Runs the queued prefixes at cap, breadth-first, queueing what each
 * reaches in turn. A run is counted once, by the shard that owns its
 * faults; in a tree only one the tree counts (counted_at),
 * and its violation is found at once, else the first violation is held. */
static int deviations(eu_search *s, eu_run_fn fn, void *ud, sweeper *sw, prefixes *q, int cap,
                      int in_tree, eu_chooser *found_c, int *found_faults, char *err, size_t errlen) {
  int head = 0, rc = EU_OK;
  while (head < q->n && rc == EU_OK && !expired(s) && !*found_faults) {
    eu_chooser c;
    eu_buf calls;
    int faults = 0, v, from = q->p[head].len;
    eu_chooser_init(&c, EU_MODE_DFS, 0);
    eu_buf_init(&calls);
    c.labels_on = 1;
    c.cap = cap;
    /* no tree reaches the cap of a violation the sweep holds */
    if (sw->logs && sw->log_bytes < LOG_BUDGET && !sw->h.on) {
      c.log = &calls;
      c.log_steps = s->reduce;
    }
    if (choices_copy(&c.prefix, &q->p[head++]) != EU_OK) {
      eu_chooser_free(&c);
      return eu_err(err, errlen, EU_ENOMEM, "out of memory");
    }
    v = fn(ud, &c, s->events, cap, &faults, err, errlen);
    s->runs++;
    s->swept++;
    keep_log(sw, &c, &q->p[head - 1], cap, v, faults);
    eu_buf_free(&calls);
    if (v < 0) {
      rc = v;
    } else if ((!in_tree || counted_at(s, cap, faults)) && keyset_add(&sw->runs, run_key(&c.path)) > 0 &&
               (faults ? owner_of(c.fault_set, s->shard_n) : 0) == s->shard_k) {
      count(s, ud, faults);
      if (v == 1 && in_tree) {
        if (choices_copy(&found_c->path, &c.path) != EU_OK) rc = eu_err(err, errlen, EU_ENOMEM, "out of memory");
        *found_faults = faults + 1;
      } else if (v == 1 && hold(&sw->h, &c, cap, faults, s->events) != EU_OK) {
        rc = eu_err(err, errlen, EU_EINVAL, "a violating schedule of %d decisions is too long to report", c.path.len);
      }
    }
    if (rc == EU_OK && note_pairs(sw, &c, from, q) != EU_OK) rc = eu_err(err, errlen, EU_ENOMEM, "out of memory");
    eu_chooser_free(&c);
  }
  return rc;
}

/* Every fault point of the first schedule tried with every kind, then those
 * the runs that did so reach with a fault left: one run per point and kind,
 * breadth-first (see the top of this file). Every shard runs the whole sweep,
 * to know which runs the tree must not count again; it counts its share. */
static int sweep(eu_search *s, eu_run_fn fn, void *ud, sweeper *sw, char *err, size_t errlen) {
  prefixes q = { NULL, 0, 0 };
  eu_choices root = { NULL, NULL, NULL, 0, 0 };
  eu_chooser unused;
  int rc, none = 0;
  if (prefixes_push(&q, &root, 0, -1) != EU_OK) return eu_err(err, errlen, EU_ENOMEM, "out of memory");
  memset(&unused, 0, sizeof unused);
  rc = deviations(s, fn, ud, sw, &q, s->max_faults, 0, &unused, &none, err, errlen);
  prefixes_free(&q);
  return rc;
}

/* ---- the frontier shards split ------------------------------------------ */

typedef struct fnode {
  eu_choices p;
  double est;       /* Knuth's estimate of its subtree's runs */
  int leaf;         /* the subtree is the one run p */
  int arity;        /* branches of the decision below p */
  int kind;         /* and its kind */
  int owner;
} fnode;

#define EU_SAMPLES 2   /* random runs a frontier node's estimate averages */

/* Random runs under node's prefix: its estimate and the decision below it. */
static int sample(eu_search *s, eu_run_fn fn, void *ud, int cap, fnode *node, char *err, size_t errlen) {
  int k;
  node->est = 0;
  for (k = 0; k < EU_SAMPLES; k++) {
    eu_chooser c;
    int faults = 0, v, i;
    double est = 1.0;
    uint64_t seed = eu_mix64(eu_mix64((uint64_t)cap, (uint64_t)k),
                        node->p.len ? eu_hash64(node->p.c, (size_t)node->p.len, 3) : 0);
    eu_chooser_init(&c, EU_MODE_RANDOM, seed);
    if (choices_copy(&c.prefix, &node->p) != EU_OK) {
      eu_chooser_free(&c);
      return eu_err(err, errlen, EU_ENOMEM, "out of memory");
    }
    v = fn(ud, &c, s->events, cap, &faults, err, errlen);
    s->runs++;
    s->split_runs++;
    if (v < 0) {
      eu_chooser_free(&c);
      return v;
    }
    node->leaf = c.path.len <= node->p.len;
    node->arity = node->leaf ? 0 : c.path.n[node->p.len];
    node->kind = node->leaf || c.path.k[node->p.len] ? EU_CHOICE_ORDER : EU_CHOICE_FAULT;
    for (i = node->p.len; i < c.path.len && est < 1e15; i++) est *= c.path.n[i];
    node->est += est / EU_SAMPLES;
    eu_chooser_free(&c);
    if (node->leaf) {
      node->est = 1.0;  /* one run, whatever the draw */
      break;
    }
  }
  return EU_OK;
}

static void free_nodes(fnode *nodes, int n) {
  int i;
  for (i = 0; i < n; i++) eu_choices_free(&nodes[i].p);
  free(nodes);
}

/* The frontier of this cap's tree, every node with its owner. */
static int frontier(eu_search *s, eu_run_fn fn, void *ud, int cap, fnode **out, int *nout, char *err,
                    size_t errlen) {
  int target = 32 * s->shard_n, n = 1, capn = 64, i, rc;
  fnode *nodes = calloc((size_t)capn, sizeof *nodes);
  double *load;
  if (!nodes) return eu_err(err, errlen, EU_ENOMEM, "out of memory");
  if ((rc = sample(s, fn, ud, cap, &nodes[0], err, errlen)) != EU_OK) {
    free_nodes(nodes, n);
    return rc;
  }
  while (n < target && !expired(s)) {
    int big = -1, b;
    for (i = 0; i < n; i++)
      if (!nodes[i].leaf && (big < 0 || nodes[i].est > nodes[big].est)) big = i;
    if (big < 0) break;
    if (n + nodes[big].arity > capn) {
      fnode *a;
      while (n + nodes[big].arity > capn) capn *= 2;
      if (!(a = realloc(nodes, (size_t)capn * sizeof *a))) {
        free_nodes(nodes, n);
        return eu_err(err, errlen, EU_ENOMEM, "out of memory");
      }
      nodes = a;
    }
    /* the node gives way to its children, in place: the list stays in DFS order */
    {
      fnode parent = nodes[big];
      int k = parent.arity;
      memmove(&nodes[big + k], &nodes[big + 1], (size_t)(n - big - 1) * sizeof *nodes);
      n += k - 1;
      for (b = 0; b < k; b++) {
        fnode *child = &nodes[big + b];
        memset(child, 0, sizeof *child);
        if (choices_copy(&child->p, &parent.p) != EU_OK ||
            choices_push(&child->p, b, parent.arity, parent.kind) != EU_OK) {
          eu_choices_free(&parent.p);
          free_nodes(nodes, n);
          return eu_err(err, errlen, EU_ENOMEM, "out of memory");
        }
        if ((rc = sample(s, fn, ud, cap, child, err, errlen)) != EU_OK) {
          eu_choices_free(&parent.p);
          free_nodes(nodes, n);
          return rc;
        }
      }
      eu_choices_free(&parent.p);
    }
  }
  /* largest first, each to the least loaded shard */
  if (!(load = calloc((size_t)s->shard_n, sizeof *load))) {
    free_nodes(nodes, n);
    return eu_err(err, errlen, EU_ENOMEM, "out of memory");
  }
  for (i = 0; i < n; i++) nodes[i].owner = -1;
  for (i = 0; i < n; i++) {
    int big = -1, j, least = 0;
    for (j = 0; j < n; j++)
      if (nodes[j].owner < 0 && (big < 0 || nodes[j].est > nodes[big].est)) big = j;
    for (j = 1; j < s->shard_n; j++)
      if (load[j] < load[least]) least = j;
    nodes[big].owner = least;
    load[least] += nodes[big].est;
  }
  free(load);
  *out = nodes;
  *nout = n;
  return EU_OK;
}

/* The tree's run with c's prefix at cap, played back from the sweep's log
 * of it: 1 when it was, *v and *faults its outcome and, unless it was
 * blocked or violated, its races reversed as after a run; 0 when it must
 * be run; <0 out of memory. The steps of the run before it, which the
 * kept world's checkpoints name, stay as they were. */
static int play_back(eu_search *s, sweeper *sw, eu_chooser *c, int cap, int *v, int *faults) {
  runlog *l = sw ? take_log(sw, cap, &c->prefix) : NULL;
  int played, rc = EU_OK;
  if (!l) return 0;
  if (c->red) eu_reducer_play_begin(c->red);
  played = play_log(c, l);
  /* a run the tree would count is run: counting takes its notes */
  if (played && !c->blocked && counted_at(s, cap, l->faults) &&
      !keyset_has(&sw->runs, run_key(&c->path)))
    played = 0;
  if (played) {
    *v = l->v;
    *faults = l->faults;
    if (c->red && !c->blocked && l->v != 1) rc = eu_reducer_end_run(c->red);
  }
  if (c->red) eu_reducer_play_end(c->red);
  free_log(l);
  return rc != EU_OK ? rc : played;
}

/* ---- the tree ----------------------------------------------------------- */

enum { TREE_DONE = 0, TREE_FOUND, TREE_EXPIRED };

/* The subtree under prefix (the whole tree for an empty one), depth-first. */
static int subtree(eu_search *s, eu_run_fn fn, void *ud, int cap, const eu_choices *prefix,
                   sweeper *sw, int own, int *outcome, char *err, size_t errlen) {
  eu_chooser c;
  int rc = EU_OK, floor = prefix ? prefix->len : 0;
  *outcome = TREE_DONE;
  eu_chooser_init(&c, EU_MODE_DFS, 0);
  c.cap = cap;
  c.labels_on = sw != NULL;
  if (own) {
    c.own_k = s->shard_k;
    c.own_n = s->shard_n;
  }
  if ((prefix && choices_copy(&c.prefix, prefix) != EU_OK) ||
      (s->reduce && eu_reducer_new(&c.red, floor) != EU_OK)) {
    eu_chooser_free(&c);
    return eu_err(err, errlen, EU_ENOMEM, "out of memory");
  }
  do {
    int faults = 0, v = 0, played;
    if (expired(s)) {
      *outcome = TREE_EXPIRED;
      break;
    }
    if ((played = play_back(s, sw, &c, cap, &v, &faults)) < 0) {
      rc = eu_err(err, errlen, played, "out of memory");
      break;
    }
    if (played) s->reused++;
    else v = fn(ud, &c, s->events, cap, &faults, err, errlen);
    s->runs++;
    if (v < 0) {
      rc = v;
      break;
    }
    if (c.blocked) {
      s->blocked++;
      continue;
    }
    if (!played && c.red && v != 1 && (rc = eu_reducer_end_run(c.red)) != EU_OK) {
      rc = eu_err(err, errlen, rc, "out of memory");
      break;
    }
    /* A fault point this run reached that no run struck yet, with a kind
     * it offered: tried now, before the tree goes on, so that a budget that
     * ends the tree still finds every point and kind tried. */
    if (sw && cap > 0 && v != 1) {
      prefixes q = { NULL, 0, 0 };
      eu_chooser hit;
      int hit_faults = 0;
      memset(&hit, 0, sizeof hit);
      rc = note_pairs(sw, &c, 0, &q) != EU_OK ? eu_err(err, errlen, EU_ENOMEM, "out of memory")
         : deviations(s, fn, ud, sw, &q, cap, 1, &hit, &hit_faults, err, errlen);
      prefixes_free(&q);
      if (rc == EU_OK && hit_faults) {
        rc = found(s, &hit, cap, hit_faults - 1, err, errlen);
        *outcome = TREE_FOUND;
      }
      eu_choices_free(&hit.path);
      if (rc != EU_OK || *outcome == TREE_FOUND) break;
    }
    if (!counted_at(s, cap, faults)) continue;
    if (sw && keyset_has(&sw->runs, run_key(&c.path))) continue;
    count(s, ud, faults);
    if (v == 1) {
      rc = found(s, &c, cap, faults, err, errlen);
      *outcome = TREE_FOUND;
      break;
    }
  } while (eu_chooser_backtrack(&c, floor));
  if (c.red) s->races += eu_reducer_races(c.red);
  eu_chooser_free(&c);
  return rc;
}

/* One cap's tree, whole, or this shard's part of it. With faults in play,
 * a shard takes the runs whose fault set it owns (note_allowed), and the
 * fault-free tree is the first shard's; each explores the runs with fewer
 * faults too, uncounted, to reach its own. Without faults, the shards split
 * the frontier's subtrees. */
static int tree(eu_search *s, eu_run_fn fn, void *ud, int cap, sweeper *swept, int *outcome,
                char *err, size_t errlen) {
  fnode *nodes = NULL;
  int n = 0, i, rc;
  if (s->shard_n <= 1) return subtree(s, fn, ud, cap, NULL, swept, 0, outcome, err, errlen);
  if (s->max_faults > 0) {
    *outcome = TREE_DONE;
    if (cap == 0 && s->shard_k != 0) return EU_OK;
    return subtree(s, fn, ud, cap, NULL, swept, cap > 0, outcome, err, errlen);
  }
  *outcome = TREE_DONE;
  if ((rc = frontier(s, fn, ud, cap, &nodes, &n, err, errlen)) != EU_OK) return rc;
  if (expired(s)) *outcome = TREE_EXPIRED;
  for (i = 0; i < n && rc == EU_OK && *outcome == TREE_DONE; i++)
    if (nodes[i].owner == s->shard_k) rc = subtree(s, fn, ud, cap, &nodes[i].p, swept, 0, outcome, err, errlen);
  free_nodes(nodes, n);
  return rc;
}

/* The one tree (eu_search.flat): after the fault-free tree, every run up
 * to the search's cap, each counted at its own fault count as the trees by
 * count count it, so that a search that ends BOUNDED has run each run once.
 * The trees by count run a run of f faults again in every tree above f
 * (to its end: only then are the points known where it could have taken
 * another); the one tree does not, but gives up their order: by the time it
 * finds a violation it may have counted runs with more faults, and the
 * violation may not have the fewest. So then what it counted is set aside
 * and the trees by count search from its first count up to the
 * violation's, and report what they find, as a search by count does; the
 * one tree's violation is held for a budget that runs out first. *top gets
 * the last count they search (-1: none). */
static int flat_tree(eu_search *s, eu_run_fn fn, void *ud, int from, sweeper *sw, int *outcome, int *top,
                     held *h, char *err, size_t errlen) {
  long counted[16], tried = s->faults_tried;
  int rc;
  memcpy(counted, s->counted, sizeof counted);
  if (s->mark && s->mark(ud) != EU_OK) return eu_err(err, errlen, EU_ENOMEM, "out of memory");
  s->flat_now = from;
  rc = tree(s, fn, ud, s->max_faults, sw, outcome, err, errlen);
  s->flat_now = 0;
  *top = -1;
  if (rc != EU_OK || *outcome != TREE_FOUND) return rc;
  h->on = 1;
  h->faults = s->faults;
  memcpy(h->schedule, s->schedule, sizeof h->schedule);
  memcpy(s->counted, counted, sizeof counted);
  s->faults_tried = tried;
  if (s->back) s->back(ud);
  s->verdict = EU_BOUNDED;
  s->schedule[0] = '\0';
  *top = s->faults;
  *outcome = TREE_DONE;
  return EU_OK;
}

static int search_dfs(eu_search *s, eu_run_fn fn, void *ud, char *err, size_t errlen) {
  sweeper sw;
  held flat;
  int cap, top = s->max_faults, rc = EU_OK, outcome = TREE_DONE,
      sweeping = s->sweep && s->max_faults > 0 && s->min_faults == 0, one = s->flat && s->shard_n <= 1;
  memset(&sw, 0, sizeof sw);
  memset(&flat, 0, sizeof flat);
  if (sweeping && s->reuse && s->shard_n <= 1) sw.logs = calloc(LOG_BUCKETS, sizeof *sw.logs);
  if (sweeping) rc = sweep(s, fn, ud, &sw, err, errlen);
  /* A violation the sweep found stands unless one with fewer faults is found first. */
  for (cap = s->min_faults; rc == EU_OK && cap <= top && outcome == TREE_DONE; cap++) {
    if (sw.h.on && cap >= sw.h.faults) break;
    if (expired(s)) {
      outcome = TREE_EXPIRED;
    } else if (one && cap > s->min_faults && cap < s->max_faults && !sw.h.on) {
      one = 0;
      rc = flat_tree(s, fn, ud, cap, sweeping ? &sw : NULL, &outcome, &top, &flat, err, errlen);
      cap--;  /* the trees by count from this one, if it found a violation */
    } else {
      rc = tree(s, fn, ud, cap, sweeping ? &sw : NULL, &outcome, err, errlen);
    }
  }
  free(sw.runs.slot);
  free(sw.tried.slot);
  free_logs(&sw);
  if (rc != EU_OK) return rc;
  if (outcome == TREE_FOUND) return EU_OK;
  if (flat.on) sw.h = flat;
  if (sw.h.on) {
    s->verdict = EU_VIOLATED;
    s->faults = sw.h.faults;
    memcpy(s->schedule, sw.h.schedule, sizeof s->schedule);
    return EU_OK;
  }
  s->verdict = outcome == TREE_EXPIRED ? EU_INCONCLUSIVE : EU_BOUNDED;
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
  long runs, counted[16], faults_tried, blocked, races, split_runs, swept;
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
      w.split_runs = t.split_runs;
      w.swept = t.swept;
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
    s->split_runs += r[j].split_runs;
    s->swept += r[j].swept;
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
