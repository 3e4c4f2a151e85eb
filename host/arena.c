/*
 * arena.c: the fixed-address heap (see arena.h).
 *
 * Blocks of up to 512 bytes come in classes 16 bytes apart, larger ones in
 * powers of two; a freed block goes on its class's list, and a new one is
 * cut from the top. A Lua state's frees are mostly of the sizes it asks for
 * next, and a checker's isolate lives for one exploration, so what the
 * classes waste matters less than that nothing of the allocator's state is
 * outside the range.
 */
#include <assert.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "arena.h"

#define SMALL 512
#define NSMALL (SMALL / 16)
#define NCLASS (NSMALL + 48)

struct eu_arena {
  size_t top;             /* bytes from the arena's start in use, this header included */
  size_t limit;           /* bytes reserved */
  size_t ready;           /* bytes whose pages were asked for at once (populate) */
  size_t fixed;           /* where the fixed blocks begin, from the arena's start (limit: none) */
  size_t fixed_ready;     /* from where up the fixed blocks' pages were asked for at once */
  int sealed;             /* the fixed blocks are read-only */
  void *free[NCLASS];
};

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#define POPULATE ((size_t)64 * 1024)

/* Pages asked for a run at a time cost a fraction of pages taken one
 * fault at a time (on a virtual machine, tens of microseconds each); where
 * the kernel cannot (before Linux 5.14), the faults come one by one. */
static void populate(eu_arena *a, size_t upto) {
  size_t from = a->ready, to = (upto + POPULATE - 1) / POPULATE * POPULATE;
  if (to > a->fixed) to = a->fixed & ~(size_t)4095;
  if (to <= from) return;
  madvise((char *)a + from, to - from, MADV_POPULATE_WRITE);
  a->ready = to;
}

static int class_of(size_t n) {
  int c = NSMALL;
  size_t size = (size_t)SMALL * 2;
  if (n <= SMALL) return n == 0 ? 0 : (int)((n + 15) / 16) - 1;
  while (size < n) {
    size <<= 1;
    c++;
  }
  return c;
}

static size_t class_size(int c) {
  return c < NSMALL ? ((size_t)c + 1) * 16 : (size_t)SMALL * 2 << (c - NSMALL);
}

#define HEADER ((sizeof(eu_arena) + 15) & ~(size_t)15)

eu_arena *eu_arena_new(size_t limit) {
  size_t size;
  void *p;
  /* Classes round a block up to twice its size, and a freed block serves
   * its own class only: a heap that moves through many sizes needs room
   * past its limit. The range costs address space, not memory. */
  if (limit > (SIZE_MAX - HEADER) / 4 - 4096) return NULL;
  size = (HEADER + limit * 4 + 4095) & ~(size_t)4095;
  p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return NULL;
  ((eu_arena *)p)->limit = size;
  ((eu_arena *)p)->ready = 4096;
  ((eu_arena *)p)->fixed = size;
  ((eu_arena *)p)->fixed_ready = size;
  eu_arena_clear(p);
  return p;
}

void eu_arena_delete(eu_arena *a) {
  if (a) munmap(a, a->limit);
}

void eu_arena_clear(eu_arena *a) {
  a->top = HEADER;
  memset(a->free, 0, sizeof a->free);
}

void eu_arena_clear_all(eu_arena *a) {
  if (a->sealed) mprotect((char *)a + a->fixed, a->limit - a->fixed, PROT_READ | PROT_WRITE);
  a->sealed = 0;
  a->fixed = a->fixed_ready = a->limit;
  eu_arena_clear(a);
}

void *eu_arena_alloc_fixed(eu_arena *a, size_t n) {
  size_t size = (n + 15) & ~(size_t)15;
  if (a->sealed || n == 0 || size > a->fixed - a->top || a->fixed - a->top - size < a->limit / 2)
    return eu_arena_alloc(a, n);
  a->fixed -= size;
  /* the fixed blocks grow down: their pages are asked for as the heap's are */
  if (a->fixed < a->fixed_ready) {
    size_t from = a->fixed / POPULATE * POPULATE;
    if (from < a->ready) from = a->ready;
    if (from < a->fixed_ready) eu_prefault((char *)a + from, a->fixed_ready - from);
    a->fixed_ready = from;
  }
  return (char *)a + a->fixed;
}

void eu_arena_seal(eu_arena *a) {
  size_t from = a->fixed & ~(size_t)4095;
  if (a->sealed || a->fixed == a->limit || from < a->top) return;
  if (mprotect((char *)a + from, a->limit - from, PROT_READ) != 0) return;
  a->fixed = from;
  a->sealed = 1;
}

static int is_fixed(const eu_arena *a, const void *p) {
  return (const char *)p >= (const char *)a + a->fixed;
}

void *eu_arena_alloc(eu_arena *a, size_t n) {
  int c;
  size_t size;
  void *p;
  if (n > a->limit) return NULL;
  c = class_of(n);
  if ((p = a->free[c]) != NULL) {
    memcpy(&a->free[c], p, sizeof p);
    return p;
  }
  size = class_size(c);
  if (size > a->fixed - a->top) return NULL;
  p = (char *)a + a->top;
  a->top += size;
  if (a->top > a->ready) populate(a, a->top);
  return p;
}

void eu_arena_free(eu_arena *a, void *p, size_t n) {
  int c;
  if (!p || is_fixed(a, p)) return;
  c = class_of(n);
  memcpy(p, &a->free[c], sizeof p);
  a->free[c] = p;
}

void *eu_arena_realloc(eu_arena *a, void *p, size_t old, size_t n) {
  void *q;
  if (!p) return eu_arena_alloc(a, n);
  if (n == 0) {
    eu_arena_free(a, p, old);
    return NULL;
  }
  if (class_of(old) == class_of(n) && !is_fixed(a, p)) return p;
  if (!(q = eu_arena_alloc(a, n))) return NULL;
  memcpy(q, p, old < n ? old : n);
  eu_arena_free(a, p, old);
  return q;
}

size_t eu_arena_used(const eu_arena *a) { return a->top; }

void eu_arena_save(const eu_arena *a, void *to) { memcpy(to, a, a->top); }

/* What an arena knows of its range rather than of its heap: a load or a
 * delta leaves it as it is. An image's fixed blocks are the arena's own,
 * the same since it was sealed. */
typedef struct {
  size_t limit, ready, fixed, fixed_ready;
  int sealed;
} range;

static range range_of(const eu_arena *a) {
  range r;
  r.limit = a->limit;
  r.ready = a->ready;
  r.fixed = a->fixed;
  r.fixed_ready = a->fixed_ready;
  r.sealed = a->sealed;
  return r;
}

static void keep_range(eu_arena *a, range r) {
  a->limit = r.limit;
  a->ready = r.ready;
  a->fixed = r.fixed;
  a->fixed_ready = r.fixed_ready;
  a->sealed = r.sealed;
}

void eu_arena_load(eu_arena *a, const void *from, size_t len) {
  range r;
  if (len > a->ready) populate(a, len);
  r = range_of(a);
  assert(((const eu_arena *)from)->fixed == r.fixed);
  memcpy(a, from, len);
  keep_range(a, r);
}

/* A delta is the image's length, then runs over its 8-byte words: how many
 * words are as in base (past base's end, as zero), then how many follow
 * that are not, and those words. Counts are LEB128. A run of changed words
 * takes in a gap of one unchanged word, which costs less than a new run. */
static unsigned char *put_count(unsigned char *p, size_t n) {
  while (n >= 0x80) {
    *p++ = (unsigned char)(n | 0x80);
    n >>= 7;
  }
  *p++ = (unsigned char)n;
  return p;
}

static const unsigned char *get_count(const unsigned char *p, size_t *n) {
  size_t v = 0;
  int shift = 0;
  while (*p & 0x80) {
    v |= (size_t)(*p++ & 0x7f) << shift;
    shift += 7;
  }
  *n = v | (size_t)*p++ << shift;
  return p;
}

static uint64_t word_at(const unsigned char *p, size_t i, size_t nwords) {
  uint64_t v = 0;
  if (i < nwords) memcpy(&v, p + i * 8, 8);
  return v;
}

size_t eu_arena_delta_max(const eu_arena *a) {
  size_t n = a->top / 8;
  return 16 + n * 8 + (n / 2 + 1) * 20;  /* every word, and two counts per two words */
}

size_t eu_arena_delta(const eu_arena *a, const void *base, size_t base_len, unsigned char *out) {
  const unsigned char *cur = (const unsigned char *)a, *b = base;
  size_t n = a->top / 8, nb = base_len / 8, i = 0, k;
  unsigned char *p = put_count(out, a->top);
  while (i < n) {
    size_t same = i, from, to;
    uint64_t w;
    while (i + 32 <= n && i + 32 <= nb && memcmp(cur + i * 8, b + i * 8, 256) == 0) i += 32;
    while (i < n) {
      memcpy(&w, cur + i * 8, 8);
      if (w != word_at(b, i, nb)) break;
      i++;
    }
    if (i == n) break;
    from = to = i;
    while (to < n) {
      memcpy(&w, cur + to * 8, 8);
      if (w != word_at(b, to, nb)) {
        to++;
        continue;
      }
      if (to + 1 < n) {  /* a gap of one word joins the run */
        memcpy(&w, cur + (to + 1) * 8, 8);
        if (w != word_at(b, to + 1, nb)) {
          to += 2;
          continue;
        }
      }
      break;
    }
    p = put_count(p, from - same);
    p = put_count(p, to - from);
    for (k = from; k < to; k++) {
      memcpy(p, cur + k * 8, 8);
      p += 8;
    }
    i = to;
  }
  return (size_t)(p - out);
}

/* Copies base, as if zeros followed it, into [from, to) of the arena. */
static void put_base(unsigned char *cur, const unsigned char *base, size_t base_len, size_t from, size_t to) {
  if (from < base_len) {
    memcpy(cur + from, base + from, (to < base_len ? to : base_len) - from);
    from = base_len;
  }
  if (to > from) memset(cur + from, 0, to - from);
}

void eu_arena_apply_delta(eu_arena *a, const void *base, size_t base_len, size_t clean_to,
                          const unsigned char *delta, size_t len) {
  size_t top, i = 0, same, diff;
  const unsigned char *p = delta, *end = delta + len;
  unsigned char *cur = (unsigned char *)a;
  range r;
  p = get_count(p, &top);
  if (top > a->ready) populate(a, top);
  r = range_of(a);
  if (clean_to < top) put_base(cur, base, base_len, clean_to, top);
  while (p < end) {
    p = get_count(p, &same);
    p = get_count(p, &diff);
    i += same;
    memcpy(cur + i * 8, p, diff * 8);
    p += diff * 8;
    i += diff;
  }
  keep_range(a, r);
}

void eu_arena_undo_delta(eu_arena *a, const void *base, size_t base_len, const unsigned char *delta, size_t len) {
  size_t top, i = 0, same, diff;
  const unsigned char *p = delta, *end = delta + len;
  unsigned char *cur = (unsigned char *)a;
  range r = range_of(a);
  p = get_count(p, &top);
  while (p < end) {
    p = get_count(p, &same);
    p = get_count(p, &diff);
    i += same;
    put_base(cur, base, base_len, i * 8, (i + diff) * 8);
    p += diff * 8;
    i += diff;
  }
  keep_range(a, r);
}

void eu_prefault(void *p, size_t n) {
  uintptr_t from = ((uintptr_t)p + 4095) & ~(uintptr_t)4095, to = ((uintptr_t)p + n) & ~(uintptr_t)4095;
  if (to > from) madvise((void *)from, to - from, MADV_POPULATE_WRITE);
}

void *eu_arena_first(eu_arena *a) { return (char *)a + HEADER; }

int eu_arena_owns(const eu_arena *a, const void *p) {
  return ((const char *)p >= (const char *)a + HEADER && (const char *)p < (const char *)a + a->top) ||
         (is_fixed(a, p) && (const char *)p < (const char *)a + a->limit);
}

size_t eu_arena_delta_top(const unsigned char *delta) {
  size_t top;
  get_count(delta, &top);
  return top;
}
