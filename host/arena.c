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
  if (to > a->limit) to = a->limit;
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
  if (size > a->limit - a->top) return NULL;
  p = (char *)a + a->top;
  a->top += size;
  if (a->top > a->ready) populate(a, a->top);
  return p;
}

void eu_arena_free(eu_arena *a, void *p, size_t n) {
  int c;
  if (!p) return;
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
  if (class_of(old) == class_of(n)) return p;
  if (!(q = eu_arena_alloc(a, n))) return NULL;
  memcpy(q, p, old < n ? old : n);
  eu_arena_free(a, p, old);
  return q;
}

size_t eu_arena_used(const eu_arena *a) { return a->top; }

void eu_arena_save(const eu_arena *a, void *to) { memcpy(to, a, a->top); }

void eu_arena_load(eu_arena *a, const void *from, size_t len) {
  size_t limit = a->limit, ready = a->ready;
  memcpy(a, from, len);
  a->limit = limit;
  a->ready = ready;
}

void eu_prefault(void *p, size_t n) {
  uintptr_t from = ((uintptr_t)p + 4095) & ~(uintptr_t)4095, to = ((uintptr_t)p + n) & ~(uintptr_t)4095;
  if (to > from) madvise((void *)from, to - from, MADV_POPULATE_WRITE);
}

void *eu_arena_first(eu_arena *a) { return (char *)a + HEADER; }

int eu_arena_owns(const eu_arena *a, const void *p) {
  return (const char *)p >= (const char *)a + HEADER && (const char *)p < (const char *)a + a->top;
}
