/*
 * sched.c: a binary min-heap of events keyed by (at, seq).
 */
#include <stdlib.h>
#include <string.h>

#include "eutaxy.h"
#include "sched.h"

static int before(const eu_event *x, const eu_event *y) {
  return x->at < y->at || (x->at == y->at && x->seq < y->seq);
}

static void sift_up(eu_event *h, size_t i) {
  eu_event e = h[i];
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!before(&e, &h[parent])) break;
    h[i] = h[parent];
    i = parent;
  }
  h[i] = e;
}

static void sift_down(eu_event *h, size_t n, size_t i) {
  eu_event e = h[i];
  for (;;) {
    size_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && before(&h[child + 1], &h[child])) child++;
    if (!before(&h[child], &e)) break;
    h[i] = h[child];
    i = child;
  }
  h[i] = e;
}

void eu_sched_init(eu_sched *s) {
  memset(s, 0, sizeof *s);
}

void eu_sched_free(eu_sched *s) {
  size_t i;
  for (i = 0; i < s->n; i++) free(s->heap[i].data);
  free(s->heap);
  eu_sched_init(s);
}

static int insert(eu_sched *s, const eu_event *ev) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 64;
    eu_event *h = realloc(s->heap, cap * sizeof *h);
    if (!h) return EU_ENOMEM;
    s->heap = h;
    s->cap = cap;
  }
  s->heap[s->n] = *ev;
  sift_up(s->heap, s->n++);
  return EU_OK;
}

int eu_sched_push(eu_sched *s, eu_event *ev) {
  if (ev->at < s->now) ev->at = s->now;
  ev->seq = s->next_seq++;
  return insert(s, ev);
}

int eu_sched_giveback(eu_sched *s, const eu_event *ev) {
  return insert(s, ev);  /* keeps its seq: its place among the ties is unchanged */
}

int64_t eu_sched_next_time(const eu_sched *s) {
  return s->n ? s->heap[0].at : INT64_MAX;
}

size_t eu_sched_count(const eu_sched *s) {
  return s->n;
}

size_t eu_sched_ties(eu_sched *s, eu_event *out, size_t max) {
  size_t k = 0;
  int64_t t;
  if (s->n == 0) return 0;
  t = s->heap[0].at;
  while (k < max && s->n > 0 && s->heap[0].at == t) {
    out[k++] = s->heap[0];
    s->heap[0] = s->heap[--s->n];
    if (s->n) sift_down(s->heap, s->n, 0);
  }
  if (t > s->now) s->now = t;
  return k;
}
