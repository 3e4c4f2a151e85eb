/*
 * sqlmem.c: SQLite's memory, counted per object (see sqlmem.h).
 *
 * The allocator wraps whatever SQLite had when it was installed (its own
 * methods, or the fault simulation's wrapper around them), so a faultsim
 * sweep counts the same allocations with or without it.
 *
 * SQLite may allocate on any thread, and a block may be freed on another
 * than the one that made it: the meter's counts change with atomic
 * operations, and the current meter is per thread. In the host a store's
 * SQLite calls run on the thread of its world, but for serve's opening of
 * an object's file on the thread pool, after which the connection and its
 * meter move to the world's thread: one thread at a time touches a meter.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

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

static void unref(eu_sqlmem *m) {
  if (__atomic_sub_fetch(&m->refs, 1, __ATOMIC_ACQ_REL) == 0) free(m);
}

/* Whether the meter must refuse n more bytes. */
static int refuses(eu_sqlmem *m, size_t n) {
  size_t used;
  if (m->charging && (m->charged > m->charge_max || n > m->charge_max - m->charged)) {
    m->over = 1;
    return 1;
  }
  if (!m->enforce || !m->limit) return 0;
  used = __atomic_load_n(&m->live, __ATOMIC_RELAXED) + (m->also ? *m->also : 0);
  if (used <= m->limit && n <= m->limit - used) return 0;
  m->refused = 1;
  return 1;
}

static void count(eu_sqlmem *m, size_t n) {
  __atomic_add_fetch(&m->live, n, __ATOMIC_RELAXED);
  if (m->charging) m->charged += n;
}

static void *m_malloc(int n) {
  eu_sqlmem *m = current;
  blk *b;
  if (n < 0 || n > 0x7fffffff - HDR) return NULL;
  if (m && refuses(m, (size_t)n)) return NULL;
  b = orig.xMalloc(n + HDR);
  if (!b) return NULL;
  b->owner = m;
  b->size = (size_t)n;
  if (m) {
    __atomic_add_fetch(&m->refs, 1, __ATOMIC_RELAXED);
    count(m, (size_t)n);
  }
  return b + 1;
}

static void m_free(void *p) {
  blk *b;
  if (!p) return;
  b = (blk *)p - 1;
  if (b->owner) {
    eu_sqlmem *m = b->owner;
    __atomic_sub_fetch(&m->live, b->size, __ATOMIC_RELAXED);
    unref(m);
  }
  orig.xFree(b);
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
  nb = orig.xRealloc(b, n + HDR);
  if (!nb) return NULL;
  nb->size = (size_t)n;
  if (m) {
    if ((size_t)n >= old) count(m, (size_t)n - old);
    else __atomic_sub_fetch(&m->live, old - (size_t)n, __ATOMIC_RELAXED);
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
