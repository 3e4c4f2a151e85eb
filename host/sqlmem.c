/*
 * sqlmem.c: SQLite's memory, counted per object (see sqlmem.h).
 *
 * The allocator wraps whatever SQLite had when it was installed (its own
 * methods, or the fault simulation's wrapper around them), so a faultsim
 * sweep counts the same allocations with or without it.
 *
 * SQLite may allocate on any thread, and a block may be freed on another
 * than the one that made it: once the process says so (eu_sqlmem_share,
 * before SQLite runs on a second thread) the meter's counts change with
 * atomic operations; until then, as in a check, plainly, since a locked
 * add at every allocation and free is a cost with nothing to guard
 * against. The current meter is per thread. In the host a store's
 * SQLite calls run on the thread of its world, but for serve's opening of
 * an object's file on the thread pool, after which the connection and its
 * meter move to the world's thread: one thread at a time touches a meter.
 *
 * Debian's SQLite is built without its lookaside (SQLITE_OMIT_LOOKASIDE),
 * so every small block it wants for a statement (a column's text, a
 * savepoint's bitmap, a record) is a malloc and a free. Each thread keeps
 * its freed blocks of up to SPARE_MAX bytes for its next ones of the same
 * size class, a few of each, as the lookaside would: the meters count
 * what SQLite asked for either way. Under the fault simulation every
 * allocation goes to the wrapped allocator, to be counted and failed
 * there; under a sanitizer too, to keep its checks on every block.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "faultsim.h"
#include "sqlmem.h"

/* The header before each block: 16 bytes keep SQLite's 8-byte alignment. */
typedef struct blk {
  eu_sqlmem *owner;
  size_t size;
} blk;

#define HDR ((int)sizeof(blk))

static sqlite3_mem_methods orig;
static int installed;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static _Thread_local eu_sqlmem *current;
static int shared;  /* SQLite may run on more than one thread */

static void add(size_t *to, size_t n) {
  if (shared) __atomic_add_fetch(to, n, __ATOMIC_RELAXED);
  else *to += n;
}

static void sub(size_t *from, size_t n) {
  if (shared) __atomic_sub_fetch(from, n, __ATOMIC_RELAXED);
  else *from -= n;
}

static void unref(eu_sqlmem *m) {
  long left = shared ? __atomic_sub_fetch(&m->refs, 1, __ATOMIC_ACQ_REL) : --m->refs;
  if (left == 0) free(m);
}

static uint64_t refusals;

uint64_t eu_sqlmem_refusals(void) { return __atomic_load_n(&refusals, __ATOMIC_RELAXED); }

/* Whether the meter must refuse n more bytes. */
static int refuses(eu_sqlmem *m, size_t n) {
  size_t used;
  if (m->charging && (m->charged > m->charge_max || n > m->charge_max - m->charged)) {
    m->over = 1;
    __atomic_add_fetch(&refusals, 1, __ATOMIC_RELAXED);
    return 1;
  }
  if (!m->enforce || !m->limit) return 0;
  used = (shared ? __atomic_load_n(&m->live, __ATOMIC_RELAXED) : m->live) + (m->also ? *m->also : 0);
  if (used <= m->limit && n <= m->limit - used) return 0;
  m->refused = 1;
  __atomic_add_fetch(&refusals, 1, __ATOMIC_RELAXED);
  return 1;
}

static void count(eu_sqlmem *m, size_t n) {
  add(&m->live, n);
  if (m->charging) m->charged += n;
}

/* Spare blocks: a list a size class, 16 bytes apart, each block made
 * with its class's whole size, so any request of the class fits it. */
#if defined(__SANITIZE_ADDRESS__)
#define SPARES 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SPARES 0
#endif
#endif
#ifndef SPARES
#define SPARES 1
#endif
#define SPARE_MAX 1024
#define SPARE_BYTES ((size_t)64 * 1024)  /* kept at most, a thread */

typedef struct spares {
  blk *head[SPARE_MAX / 16];
  size_t bytes;
} spares;

static _Thread_local spares spare;
static pthread_key_t spare_key;
static int spare_keyed;

static size_t class_size(size_t n) { return n == 0 ? 16 : (n + 15) & ~(size_t)15; }

/* Whether n is a spare's size; the fault simulation is on or off for the
 * whole process (main reads it first), so a block is one from its making. */
static int spare_size(size_t n) { return SPARES && n <= SPARE_MAX && !eu_faultsim_active; }

static blk *take_spare(size_t n) {
  blk *b;
  size_t c;
  if (!spare_size(n)) return NULL;
  c = class_size(n);
  if (!(b = spare.head[c / 16 - 1])) return NULL;
  spare.head[c / 16 - 1] = *(blk **)(b + 1);
  spare.bytes -= c;
  return b;
}

static int put_spare(blk *b) {
  size_t c;
  if (!spare_size(b->size) || !spare_keyed) return 0;
  c = class_size(b->size);
  if (spare.bytes + c > SPARE_BYTES) return 0;
  /* the key's value only marks the thread for drop_spares at its exit */
  if (!spare.bytes && pthread_setspecific(spare_key, &spare) != 0) return 0;
  *(blk **)(b + 1) = spare.head[c / 16 - 1];
  spare.head[c / 16 - 1] = b;
  spare.bytes += c;
  return 1;
}

/* At a thread's exit, its spares go back to the wrapped allocator. */
static void drop_spares(void *unused) {
  size_t i;
  (void)unused;
  for (i = 0; i < SPARE_MAX / 16; i++)
    while (spare.head[i]) {
      blk *b = spare.head[i];
      spare.head[i] = *(blk **)(b + 1);
      orig.xFree(b);
    }
  spare.bytes = 0;
}

/* A block of n bytes on meter m, which has let them through. */
static void *new_block(eu_sqlmem *m, int n) {
  blk *b;
  if (!(b = take_spare((size_t)n)))
    b = orig.xMalloc((int)(spare_size((size_t)n) ? class_size((size_t)n) : (size_t)n) + HDR);
  if (!b) return NULL;
  b->owner = m;
  b->size = (size_t)n;
  if (m) {
    if (shared) __atomic_add_fetch(&m->refs, 1, __ATOMIC_RELAXED);
    else m->refs++;
    count(m, (size_t)n);
  }
  return b + 1;
}

static void *m_malloc(int n) {
  eu_sqlmem *m = current;
  if (n < 0 || n > 0x7fffffff - HDR) return NULL;
  if (m && refuses(m, (size_t)n)) return NULL;
  return new_block(m, n);
}

static void m_free(void *p) {
  blk *b;
  if (!p) return;
  b = (blk *)p - 1;
  if (b->owner) {
    eu_sqlmem *m = b->owner;
    sub(&m->live, b->size);
    unref(m);
  }
  if (!put_spare(b)) orig.xFree(b);
}

/* A block keeps its first owner when it grows: the bytes belong to the
 * object whose statement made it. */
static void *m_realloc(void *p, int n) {
  blk *b, *nb;
  eu_sqlmem *m;
  size_t old;
  if (!p) return m_malloc(n);
  if (n < 0 || n > 0x7fffffff - HDR) return NULL;
  b = (blk *)p - 1;
  m = b->owner;
  old = b->size;
  if (m && (size_t)n > old && refuses(m, (size_t)n - old)) return NULL;
  if (spare_size(old) || spare_size((size_t)n)) {
    /* A block of a class stays one: it fits any size of its class, and
     * moves to a new block, on its meter, for a size of another. */
    void *q;
    if (spare_size(old) && spare_size((size_t)n) && class_size((size_t)n) == class_size(old)) {
      b->size = (size_t)n;
      if (m && (size_t)n >= old) count(m, (size_t)n - old);
      else if (m) sub(&m->live, old - (size_t)n);
      return p;
    }
    if (!(q = new_block(m, n))) return NULL;
    memcpy(q, p, old < (size_t)n ? old : (size_t)n);
    m_free(p);
    return q;
  }
  nb = orig.xRealloc(b, n + HDR);
  if (!nb) return NULL;
  nb->size = (size_t)n;
  if (m) {
    if ((size_t)n >= old) count(m, (size_t)n - old);
    else sub(&m->live, old - (size_t)n);
  }
  return nb + 1;
}

static int m_size(void *p) { return p ? (int)((blk *)p - 1)->size : 0; }
static int m_roundup(int n) { return orig.xRoundup(n); }
static int m_init(void *ud) { return orig.xInit(ud); }
static void m_shutdown(void *ud) { orig.xShutdown(ud); }

/* The page cache, uncounted. Its pages are the database itself (all of it,
 * for an in-memory store) and its size is the host's (cache_size), bounded
 * by the quota: counting them would make an object's memory limit a limit
 * on its data, and different under check than under serve. So every call
 * into SQLite's own page cache runs with no meter current. */
static sqlite3_pcache_methods2 pc_orig;

#define NO_METER(call) do { eu_sqlmem *m_ = current; current = NULL; call; current = m_; } while (0)

static int pc_init(void *a) { int rc; NO_METER(rc = pc_orig.xInit(a)); return rc; }
static void pc_shutdown(void *a) { NO_METER(pc_orig.xShutdown(a)); }
static sqlite3_pcache *pc_create(int sz, int extra, int purgeable) {
  sqlite3_pcache *c;
  NO_METER(c = pc_orig.xCreate(sz, extra, purgeable));
  return c;
}
static void pc_cachesize(sqlite3_pcache *c, int n) { NO_METER(pc_orig.xCachesize(c, n)); }
static int pc_pagecount(sqlite3_pcache *c) { return pc_orig.xPagecount(c); }
static sqlite3_pcache_page *pc_fetch(sqlite3_pcache *c, unsigned key, int create) {
  sqlite3_pcache_page *p;
  NO_METER(p = pc_orig.xFetch(c, key, create));
  return p;
}
static void pc_unpin(sqlite3_pcache *c, sqlite3_pcache_page *p, int discard) {
  NO_METER(pc_orig.xUnpin(c, p, discard));
}
static void pc_rekey(sqlite3_pcache *c, sqlite3_pcache_page *p, unsigned from, unsigned to) {
  NO_METER(pc_orig.xRekey(c, p, from, to));
}
static void pc_truncate(sqlite3_pcache *c, unsigned limit) { NO_METER(pc_orig.xTruncate(c, limit)); }
static void pc_destroy(sqlite3_pcache *c) { NO_METER(pc_orig.xDestroy(c)); }
static void pc_shrink(sqlite3_pcache *c) { NO_METER(pc_orig.xShrink(c)); }

static void install_pcache(void) {
  sqlite3_pcache_methods2 p;
  if (sqlite3_config(SQLITE_CONFIG_GETPCACHE2, &pc_orig) != SQLITE_OK) return;
  p = pc_orig;
  p.xInit = pc_init;
  p.xShutdown = pc_shutdown;
  p.xCreate = pc_create;
  p.xCachesize = pc_cachesize;
  p.xPagecount = pc_pagecount;
  p.xFetch = pc_fetch;
  p.xUnpin = pc_unpin;
  p.xRekey = pc_rekey;
  p.xTruncate = pc_truncate;
  p.xDestroy = pc_destroy;
  p.xShrink = pc_shrink;
  sqlite3_config(SQLITE_CONFIG_PCACHE2, &p);
}

static void install_once(void) {
  sqlite3_mem_methods m;
  if (sqlite3_config(SQLITE_CONFIG_GETMALLOC, &orig) != SQLITE_OK) return;
  memset(&m, 0, sizeof m);
  m.xMalloc = m_malloc;
  m.xFree = m_free;
  m.xRealloc = m_realloc;
  m.xSize = m_size;
  m.xRoundup = m_roundup;
  m.xInit = m_init;
  m.xShutdown = m_shutdown;
  m.pAppData = orig.pAppData;
  /* Refused once SQLite is initialized: then it keeps its allocator. */
  installed = sqlite3_config(SQLITE_CONFIG_MALLOC, &m) == SQLITE_OK;
  if (!installed) return;
  spare_keyed = pthread_key_create(&spare_key, drop_spares) == 0;
  /* No page cache made ahead: SQLite's default hands each connection 20
   * pages (about 87 KB) at its first page, where a small object's
   * database has a handful. Pages come one at a time instead, each an
   * allocation of its own through pc_fetch, still uncounted. */
  sqlite3_config(SQLITE_CONFIG_PAGECACHE, (void *)NULL, 0, 0);
  /* The meters count what each object holds; SQLite's own count of the
   * process's memory (a global mutex taken at every allocation) serves
   * nothing here. */
  sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
  install_pcache();
}

int eu_sqlmem_install(void) {
  pthread_once(&once, install_once);
  return installed ? 0 : -1;
}

int eu_sqlmem_installed(void) { return installed; }

void eu_sqlmem_share(void) { shared = 1; }

eu_sqlmem *eu_sqlmem_new(void) {
  eu_sqlmem *m = calloc(1, sizeof *m);
  if (m) m->refs = 1;
  return m;
}

void eu_sqlmem_release(eu_sqlmem *m) {
  if (!m) return;
  m->enforce = m->charging = 0;
  m->also = NULL;
  unref(m);
}

eu_sqlmem *eu_sqlmem_enter(eu_sqlmem *m) {
  eu_sqlmem *prev = current;
  current = m;
  return prev;
}

void eu_sqlmem_leave(eu_sqlmem *prev) { current = prev; }
