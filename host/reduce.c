/*
 * reduce.c: footprints, sleep sets and race reversal (see reduce.h).
 *
 * The reducer sees a run as the world does it: a step begins with the
 * events tied at its time (eu_reducer_step), one is taken (by the
 * chooser's decision, or because it was alone), and the step ends with its
 * footprint (eu_reducer_step_end). What it keeps of the search is one node
 * per order decision on the current path; the chooser keeps the path.
 *
 * Soundness rests on three things the world guarantees: an event's identity
 * names the same event in every run that reaches it, whatever order other
 * steps took; a step's footprint lists everything it read or wrote that
 * another step could see; and events of different virtual times never
 * race, since the clock only moves once nothing earlier is due. Where the
 * reducer cannot tell (an event identity that repeats among ties, a window
 * of one instant too long to analyse, a reversal whose first event was not
 * offered), the decision falls back to every branch.
 */
#include <stdlib.h>
#include <string.h>

#include "eutaxy.h"
#include "explore.h"
#include "prng.h"
#include "reduce.h"

#define EU_RACE_WINDOW 4096   /* steps of one instant the race analysis takes on */

/* ---- footprints ------------------------------------------------------- */

void eu_fp_clear(eu_fp *f) {
  f->n = 0;
  f->all = 0;
}

void eu_fp_add(eu_fp *f, uint64_t res, int write) {
  int i;
  if (f->all) return;
  for (i = 0; i < f->n; i++)
    if (f->res[i] == res) {
      if (write) f->write[i] = 1;
      return;
    }
  if (f->n == EU_FP_MAX) {
    f->all = 1;
    return;
  }
  f->res[f->n] = res;
  f->write[f->n] = (unsigned char)(write != 0);
  f->n++;
}

void eu_fp_merge(eu_fp *into, const eu_fp *f) {
  int i;
  if (f->all) into->all = 1;
  for (i = 0; i < f->n && !into->all; i++) eu_fp_add(into, f->res[i], f->write[i]);
}

int eu_fp_conflict(const eu_fp *a, const eu_fp *b) {
  int i, j;
  if (a->all || b->all) return 1;
  for (i = 0; i < a->n; i++)
    for (j = 0; j < b->n; j++)
      if (a->res[i] == b->res[j] && (a->write[i] || b->write[j])) return 1;
  return 0;
}

uint64_t eu_fp_object(int ns, const char *hex) {
  /* the top bit keeps objects apart from the named resources */
  return eu_hash64(hex, strlen(hex), (uint64_t)ns * 0x9e3779b97f4a7c15u + 7) | ((uint64_t)1 << 63);
}

/* ---- the reducer ------------------------------------------------------ */

typedef eu_sleeper sleeper;
typedef eu_sleepset sleepset;

/* An order decision on the current path. */
typedef struct rnode {
  int n;
  uint64_t ids[EU_MAX_ARITY];
  eu_fp fps[EU_MAX_ARITY];   /* each explored branch's step, over every run through it */
  uint64_t done, backtrack;
  int full;                  /* every branch, no sleep set */
  int cur;                   /* the branch the current run took */
  sleepset sleep;            /* the sleep set it was reached with */
} rnode;

typedef struct rstep {
  uint64_t id;
  int creator;
  int64_t at;
  int pos;                   /* its decision's path position, or -1 */
  eu_fp fp;
} rstep;

struct eu_reducer {
  unsigned long serial;      /* tells reducers apart, whatever their addresses */
  int full_above;
  rnode **nodes;
  int capnodes;
  rstep *steps;
  int nsteps, capsteps;
  rstep *kept;               /* while a run is played back: the steps of the */
  int nkept, capkept;        /* run before it, which checkpoints' marks name */
  sleepset sleep;            /* the current one */
  eu_tie ties[EU_MAX_ARITY];
  int nties, pos;
  int64_t at;
  long races;
  uint64_t *bits;            /* race analysis scratch */
  size_t capbits;
};

static int sleep_push(sleepset *s, uint64_t id, const eu_fp *fp) {
  if (s->n == s->cap) {
    int cap = s->cap ? s->cap * 2 : 8;
    sleeper *a = realloc(s->s, (size_t)cap * sizeof *a);
    if (!a) return EU_ENOMEM;
    s->s = a;
    s->cap = cap;
  }
  s->s[s->n].id = id;
  s->s[s->n].fp = *fp;
  s->n++;
  return EU_OK;
}

static int sleep_copy(sleepset *dst, const sleepset *src) {
  int i;
  dst->n = 0;
  for (i = 0; i < src->n; i++)
    if (sleep_push(dst, src->s[i].id, &src->s[i].fp) != EU_OK) return EU_ENOMEM;
  return EU_OK;
}

static int asleep(const sleepset *s, uint64_t id) {
  int i;
  for (i = 0; i < s->n; i++)
    if (s->s[i].id == id) return 1;
  return 0;
}

int eu_reducer_new(eu_reducer **out, int full_above) {
  static unsigned long serial;
  eu_reducer *r = calloc(1, sizeof *r);
  if (!r) return EU_ENOMEM;
  r->serial = ++serial;
  r->full_above = full_above;
  r->pos = -1;
  *out = r;
  return EU_OK;
}

static void free_node(rnode *n) {
  if (!n) return;
  free(n->sleep.s);
  free(n);
}

void eu_reducer_free(eu_reducer *r) {
  int i;
  if (!r) return;
  for (i = 0; i < r->capnodes; i++) free_node(r->nodes[i]);
  free(r->nodes);
  free(r->steps);
  free(r->kept);
  free(r->sleep.s);
  free(r->bits);
  free(r);
}

static void swap_steps(eu_reducer *r) {
  rstep *a = r->steps;
  int n = r->nsteps, cap = r->capsteps;
  r->steps = r->kept;
  r->nsteps = r->nkept;
  r->capsteps = r->capkept;
  r->kept = a;
  r->nkept = n;
  r->capkept = cap;
}

void eu_reducer_play_begin(eu_reducer *r) { swap_steps(r); }
void eu_reducer_play_end(eu_reducer *r) { swap_steps(r); }

long eu_reducer_races(const eu_reducer *r) { return r->races; }

void eu_reducer_begin_run(eu_reducer *r) {
  r->nsteps = 0;
  r->sleep.n = 0;
  r->nties = 0;
  r->pos = -1;
}

unsigned long eu_reducer_serial(const eu_reducer *r) { return r ? r->serial : 0; }

int eu_reducer_mark(const eu_reducer *r, eu_reducer_pos *at) {
  at->nsteps = r->nsteps;
  at->pos = r->pos;
  at->nties = r->nties;
  at->at = r->at;
  return sleep_copy(&at->sleep, &r->sleep);
}

int eu_reducer_rewind(eu_reducer *r, const eu_reducer_pos *at) {
  if (at->nsteps > r->capsteps) return EU_EINVAL;  /* the steps before it are still there */
  r->nsteps = at->nsteps;
  r->pos = at->pos;
  r->nties = at->nties;
  r->at = at->at;
  return sleep_copy(&r->sleep, &at->sleep);
}

void eu_reducer_pos_free(eu_reducer_pos *at) {
  free(at->sleep.s);
  memset(at, 0, sizeof *at);
}

static rstep *push_step(eu_reducer *r, uint64_t id, int creator, int pos) {
  rstep *s;
  if (r->nsteps == r->capsteps) {
    int cap = r->capsteps ? r->capsteps * 2 : 256;
    rstep *a = realloc(r->steps, (size_t)cap * sizeof *a);
    if (!a) return NULL;
    r->steps = a;
    r->capsteps = cap;
  }
  s = &r->steps[r->nsteps++];
  s->id = id;
  s->creator = creator;
  s->at = r->at;
  s->pos = pos;
  eu_fp_clear(&s->fp);
  return s;
}

int eu_reducer_step(eu_reducer *r, const eu_tie *ties, int n, int64_t at, int pos) {
  r->at = at;
  if (n > EU_MAX_ARITY) n = EU_MAX_ARITY;  /* further ties wait, as the chooser has them */
  if (n <= 1) {
    r->pos = -1;
    if (n == 1 && asleep(&r->sleep, ties[0].id)) return 1;
    /* A step that cannot be recorded is dependent on everything. */
    if (!push_step(r, n == 1 ? ties[0].id : 0, n == 1 ? ties[0].creator : -1, -1)) return 0;
    return 0;
  }
  memcpy(r->ties, ties, (size_t)n * sizeof *ties);
  r->nties = n;
  r->pos = pos;
  return 0;
}

static rnode *node_at(eu_reducer *r, int pos) {
  if (pos >= r->capnodes) {
    int cap = r->capnodes ? r->capnodes : 64, i;
    rnode **a;
    while (cap <= pos) cap *= 2;
    a = realloc(r->nodes, (size_t)cap * sizeof *a);
    if (!a) return NULL;
    for (i = r->capnodes; i < cap; i++) a[i] = NULL;
    r->nodes = a;
    r->capnodes = cap;
  }
  if (!r->nodes[pos]) r->nodes[pos] = calloc(1, sizeof(rnode));
  return r->nodes[pos];
}

static int same_ties(const rnode *nd, const eu_tie *ties, int n) {
  int i;
  if (nd->n != n) return 0;
  for (i = 0; i < n; i++)
    if (nd->ids[i] != ties[i].id) return 0;
  return 1;
}

static void init_node(eu_reducer *r, rnode *nd, int pos) {
  int i, j;
  nd->n = r->nties;
  for (i = 0; i < nd->n; i++) {
    nd->ids[i] = r->ties[i].id;
    eu_fp_clear(&nd->fps[i]);
  }
  nd->done = nd->backtrack = 0;
  nd->full = pos < r->full_above;
  for (i = 0; i < nd->n && !nd->full; i++)
    for (j = 0; j < i; j++)
      if (nd->ids[i] == nd->ids[j]) nd->full = 1;  /* identities that cannot tell branches apart */
  if (nd->full) nd->backtrack = nd->n >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << nd->n) - 1);
}

int eu_reducer_choose(eu_reducer *r, int replay, int *blocked) {
  rnode *nd = node_at(r, r->pos);
  int pick = 0;
  *blocked = 0;
  if (!nd) {
    /* No node, no reduction here: the chooser's own branch, recorded as a step of everything. */
    rstep *s = push_step(r, r->ties[replay > 0 ? replay : 0].id, -1, -1);
    if (s) s->fp.all = 1;
    return replay > 0 ? replay : 0;
  }
  if (replay < 0 || !same_ties(nd, r->ties, r->nties)) {
    init_node(r, nd, r->pos);
    if (replay < 0) {
      for (pick = 0; pick < nd->n && !nd->full && asleep(&r->sleep, nd->ids[pick]); pick++) {}
      if (pick == nd->n) {
        *blocked = 1;
        return 0;
      }
    }
  }
  if (replay >= 0) pick = replay < nd->n ? replay : 0;
  if (nd->full) nd->sleep.n = 0;
  else if (sleep_copy(&nd->sleep, &r->sleep) != EU_OK) {
    nd->full = 1;
    nd->sleep.n = 0;
    nd->backtrack = nd->n >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << nd->n) - 1);
  }
  nd->backtrack |= (uint64_t)1 << pick;
  nd->cur = pick;
  if (!push_step(r, r->ties[pick].id, r->ties[pick].creator, r->pos)) nd->full = 1;
  return pick;
}

void eu_reducer_step_end(eu_reducer *r, const eu_fp *fp) {
  rstep *s;
  rnode *nd = NULL;
  sleepset next = { NULL, 0, 0 };
  int i, ok = 1;
  if (r->nsteps == 0) return;
  s = &r->steps[r->nsteps - 1];
  s->fp = *fp;
  if (s->pos >= 0 && s->pos < r->capnodes) nd = r->nodes[s->pos];
  if (nd) eu_fp_merge(&nd->fps[nd->cur], fp);
  /* What stays asleep: what slept here, and the branches this decision
   * explored before, while this step does not touch what they do. */
  for (i = 0; i < r->sleep.n && ok; i++)
    if (r->sleep.s[i].id != s->id && !eu_fp_conflict(&r->sleep.s[i].fp, fp))
      ok = sleep_push(&next, r->sleep.s[i].id, &r->sleep.s[i].fp) == EU_OK;
  if (nd && !nd->full)
    for (i = 0; i < nd->n && ok; i++)
      if (i != nd->cur && (nd->done >> i & 1) && !eu_fp_conflict(&nd->fps[i], fp))
        ok = sleep_push(&next, nd->ids[i], &nd->fps[i]) == EU_OK;
  free(r->sleep.s);
  if (!ok) next.n = 0;  /* an empty sleep set only costs runs */
  r->sleep = next;
}

uint64_t eu_reducer_past(eu_reducer *r, const eu_fp *partial) {
  int m = r->nsteps - 1, a, k, j;
  unsigned char *mark;
  uint64_t h = 0;
  if (m < 0 || !partial) return 0;
  for (a = m; a > 0 && r->steps[a - 1].at == r->steps[m].at; a--) {}
  if (m - a > EU_RACE_WINDOW || !(mark = calloc((size_t)(m - a + 1), 1))) return (uint64_t)a;
  for (k = a; k < m; k++)
    if (r->steps[m].creator == k || eu_fp_conflict(&r->steps[k].fp, partial)) mark[k - a] = 1;
  for (k = m - 1; k >= a; k--) {
    if (!mark[k - a]) continue;
    h += eu_hash64(&r->steps[k].id, sizeof r->steps[k].id, 0x9a57);
    for (j = a; j < k; j++)
      if (!mark[j - a] && (r->steps[k].creator == j || eu_fp_conflict(&r->steps[j].fp, &r->steps[k].fp)))
        mark[j - a] = 1;
  }
  free(mark);
  return h ^ ((uint64_t)a * 0x9e3779b97f4a7c15u);
}

/* ---- race reversal ---------------------------------------------------- */

#define BIT(v, i) ((v)[(i) >> 6] >> ((i) & 63) & 1)
#define SET(v, i) ((v)[(i) >> 6] |= (uint64_t)1 << ((i) & 63))

static void make_full(rnode *nd) {
  nd->full = 1;
  nd->backtrack = nd->n >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << nd->n) - 1);
}

static int branch_of(const rnode *nd, uint64_t id) {
  int b;
  for (b = 0; b < nd->n; b++)
    if (nd->ids[b] == id) return b;
  return -1;
}

/* The reversal of the race between steps j and i (a <= j < i < a + w):
 * the initials of notdep(j).i must meet j's backtrack set. */
static void reverse(eu_reducer *r, int a, int j, int i, const uint64_t *pred, size_t words) {
  rnode *nd = r->nodes[r->steps[j].pos];
  int k, found = 0, first = -1;
  if (!nd || nd->full) return;
  for (k = j + 1; k <= i; k++) {
    const uint64_t *pk = pred + (size_t)(k - a) * words;
    int m, initial = 1, b;
    if (k < i && BIT(pk, j - a)) continue;  /* after j: not in notdep(j) */
    for (m = j + 1; m < k && initial; m++) {
      const uint64_t *pm = pred + (size_t)(m - a) * words;
      if (BIT(pm, j - a)) continue;  /* m is not in v */
      if (BIT(pk, m - a)) initial = 0;
    }
    if (!initial) continue;
    b = branch_of(nd, r->steps[k].id);
    if (b < 0) {
      make_full(nd);  /* a reversal that starts with an event not offered there */
      return;
    }
    if (nd->backtrack >> b & 1) {
      found = 1;
      break;
    }
    if (first < 0 && !asleep(&nd->sleep, nd->ids[b])) first = b;
  }
  if (found || first < 0) return;
  nd->backtrack |= (uint64_t)1 << first;
  r->races++;
}

static int analyse_window(eu_reducer *r, int a, int w) {
  size_t words = ((size_t)w + 63) / 64, need = 2 * (size_t)w * words;
  uint64_t *pred, *succ;
  int i, j;
  if (w > EU_RACE_WINDOW) {
    for (i = a; i < a + w; i++)
      if (r->steps[i].pos >= 0 && r->nodes[r->steps[i].pos]) make_full(r->nodes[r->steps[i].pos]);
    return EU_OK;
  }
  if (need > r->capbits) {
    uint64_t *b = realloc(r->bits, need * sizeof *b);
    if (!b) return EU_ENOMEM;
    r->bits = b;
    r->capbits = need;
  }
  pred = r->bits;
  succ = r->bits + (size_t)w * words;
  memset(r->bits, 0, need * sizeof *r->bits);
  /* happens-before within the instant: queued by, or dependent on, an earlier step */
  for (i = 0; i < w; i++) {
    uint64_t *pi = pred + (size_t)i * words;
    const rstep *si = &r->steps[a + i];
    for (j = 0; j < i; j++) {
      const rstep *sj = &r->steps[a + j];
      if (si->creator == a + j || eu_fp_conflict(&sj->fp, &si->fp)) {
        const uint64_t *pj = pred + (size_t)j * words;
        size_t x;
        for (x = 0; x < words; x++) pi[x] |= pj[x];
        SET(pi, j);
      }
    }
  }
  for (i = 0; i < w; i++)
    for (j = 0; j < i; j++)
      if (BIT(pred + (size_t)i * words, j)) SET(succ + (size_t)j * words, i);
  for (i = 1; i < w; i++) {
    const rstep *si = &r->steps[a + i];
    const uint64_t *pi = pred + (size_t)i * words;
    for (j = 0; j < i; j++) {
      const rstep *sj = &r->steps[a + j];
      const uint64_t *sjs = succ + (size_t)j * words;
      size_t x;
      int between = 0;
      if (sj->pos < 0 || si->creator == a + j || !eu_fp_conflict(&sj->fp, &si->fp)) continue;
      /* j ⋖ i: no step between them is after j and before i */
      for (x = 0; x < words && !between; x++) {
        uint64_t m = sjs[x] & pi[x];
        if (m) {
          int k;
          for (k = (int)x * 64; k < (int)(x + 1) * 64 && k < w; k++)
            if ((m >> (k & 63) & 1) && k > j && k < i) {
              between = 1;
              break;
            }
        }
      }
      if (!between) reverse(r, a, a + j, a + i, pred, words);
    }
  }
  return EU_OK;
}

int eu_reducer_end_run(eu_reducer *r) {
  int a = 0, rc = EU_OK;
  while (a < r->nsteps && rc == EU_OK) {
    int b = a;
    while (b < r->nsteps && r->steps[b].at == r->steps[a].at) b++;
    if (b - a > 1) rc = analyse_window(r, a, b - a);
    a = b;
  }
  return rc;
}

int eu_reducer_backtrack(eu_reducer *r, const unsigned char *kinds, const unsigned char *arity,
                         const unsigned char *choice, const uint64_t *allow, int len, int floor,
                         int *branch) {
  int q, k;
  for (q = len - 1; q >= floor; q--) {
    rnode *nd = kinds[q] && q < r->capnodes ? r->nodes[q] : NULL;
    if (nd) {
      uint64_t avail;
      nd->done |= (uint64_t)1 << choice[q];
      avail = nd->backtrack & ~nd->done;
      for (k = 0; k < nd->n; k++)
        if ((avail >> k & 1) && (nd->full || !asleep(&nd->sleep, nd->ids[k]))) {
          *branch = k;
          goto found;
        }
    } else {
      for (k = choice[q] + 1; k < arity[q]; k++)
        if (!allow || allow[q] >> k & 1) {
          *branch = k;
          goto found;
        }
    }
  }
  return -1;
found:
  for (k = q + 1; k < r->capnodes; k++) {
    free_node(r->nodes[k]);
    r->nodes[k] = NULL;
  }
  return q;
}
