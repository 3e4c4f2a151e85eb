/*
 * isolate.c: building and closing a lua_State as an isolate.
 *
 * The allocator counts every byte so one object cannot take the process's
 * memory; past the limit an allocation fails and Lua raises its ordinary
 * "not enough memory" inside the isolate, which ends that invocation only.
 * Bytes the object uses elsewhere (its SQLite memory, eu_isolate_count_also)
 * count toward the same limit. What user code can reach, and the CPU
 * limit, are sandbox.c's.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lualib.h>

#include "buf.h"
#include "eutaxy.h"
#include "faultsim.h"
#include "isolate.h"
#include "luac.h"
#include "sandbox.h"

/* Small blocks come from size classes of 16 bytes up to EU_SMALL, carved
 * from chunks the isolate owns and kept on free lists: a Lua state makes and
 * frees many small objects, and an isolate is closed all at once, so this
 * is much cheaper than malloc for each. Sanitizer builds use malloc for
 * everything, so that ASan sees every block; an isolate in an arena (the
 * checker's kept world) uses the arena's classes in every build. */
#define EU_SMALL 512
#define EU_CLASSES (EU_SMALL / 16)
#define EU_CHUNK (64 * 1024)

typedef struct slab_chunk {
  struct slab_chunk *next;
} slab_chunk;

struct eu_isolate {
  lua_State *L;
  eu_arena *arena;     /* where the whole isolate lives, or NULL */
  size_t mem, mem_limit;
  void *free_list[EU_CLASSES];
  char *bump, *bump_end;
  slab_chunk *chunks;
  const size_t *also;  /* bytes used elsewhere by the same object, or NULL */
  eu_meter meter;
  size_t reserve;    /* how far past mem_limit the host's own work may go */
  void *ud;
  void (*log)(void *ud, const char *msg, size_t len);
  /* the owner's, here rather than the owner's address in the heap's
   * closures, so that an image of the heap serves another owner */
  eu_determ_hooks hooks;
  int fix_code;  /* chunks loaded now keep their code in the arena's fixed blocks */
  int loading;   /* a chunk of bytecode is being loaded */
};

/* The extra space of every thread holds the isolate: lua_newthread copies it. */
eu_isolate *eu_isolate_of(lua_State *L) {
  eu_isolate *iso;
  memcpy(&iso, lua_getextraspace(L), sizeof iso);
  return iso;
}

void *eu_isolate_ud(lua_State *L) {
  eu_isolate *iso = eu_isolate_of(L);
  return iso ? iso->ud : NULL;
}

lua_State *eu_isolate_L(eu_isolate *iso) {
  return iso->L;
}

size_t eu_isolate_mem(eu_isolate *iso) {
  return iso->mem;
}

const size_t *eu_isolate_mem_ptr(eu_isolate *iso) {
  return &iso->mem;
}

void eu_isolate_count_also(eu_isolate *iso, const size_t *also) {
  iso->also = also;
}

eu_meter *eu_isolate_meter(eu_isolate *iso) {
  return &iso->meter;
}

static uint64_t refusals;

uint64_t eu_isolate_refusals(void) { return __atomic_load_n(&refusals, __ATOMIC_RELAXED); }

/* Whether growing a block by old -> nsize stays within the limit. */
static int within(eu_isolate *iso, size_t old, size_t nsize) {
  size_t used = iso->mem - old + nsize + (iso->also ? *iso->also : 0);
  if (used <= iso->mem_limit + iso->reserve) return 1;
  __atomic_add_fetch(&refusals, 1, __ATOMIC_RELAXED);
  return 0;
}

/* The isolate's heap: resizes a block of old bytes to n (n 0 frees it,
 * ptr NULL makes one), returning NULL and keeping ptr when out of memory.
 * An arena's when the isolate has one; else malloc's (sanitizer builds)
 * or size classes carved from chunks. */
#if defined(EU_PLAIN_MALLOC)

static void *heap(eu_isolate *iso, void *ptr, size_t old, size_t n) {
  if (iso->arena) return eu_arena_realloc(iso->arena, ptr, old, n);
  if (n == 0) {
    free(ptr);
    return NULL;
  }
  return realloc(ptr, n);
}

static void free_chunks(eu_isolate *iso) { (void)iso; }

#else

static int size_class(size_t n) { return (int)((n + 15) / 16) - 1; }

static void *small_get(eu_isolate *iso, size_t n) {
  int c = size_class(n);
  size_t size = ((size_t)c + 1) * 16;
  void *p = iso->free_list[c];
  if (p) {
    memcpy(&iso->free_list[c], p, sizeof(void *));
    return p;
  }
  if ((size_t)(iso->bump_end - iso->bump) < size) {
    slab_chunk *k = malloc(EU_CHUNK);
    if (!k) return NULL;
    k->next = iso->chunks;
    iso->chunks = k;
    iso->bump = (char *)k + 16;  /* blocks stay 16-byte aligned */
    iso->bump_end = (char *)k + EU_CHUNK;
  }
  p = iso->bump;
  iso->bump += size;
  return p;
}

static void small_put(eu_isolate *iso, void *p, size_t n) {
  int c = size_class(n);
  memcpy(p, &iso->free_list[c], sizeof(void *));
  iso->free_list[c] = p;
}

static void *heap(eu_isolate *iso, void *ptr, size_t old, size_t n) {
  void *p;
  if (iso->arena) return eu_arena_realloc(iso->arena, ptr, old, n);
  if (n == 0) {
    if (ptr && old <= EU_SMALL) small_put(iso, ptr, old);
    else free(ptr);
    return NULL;
  }
  if (ptr && old > EU_SMALL && n > EU_SMALL) return realloc(ptr, n);
  if (ptr && old <= EU_SMALL && n <= EU_SMALL && size_class(old) == size_class(n)) return ptr;
  p = n <= EU_SMALL ? small_get(iso, n) : malloc(n);
  if (p && ptr) {
    memcpy(p, ptr, old < n ? old : n);
    if (old <= EU_SMALL) small_put(iso, ptr, old);
    else free(ptr);
  }
  return p;
}

static void free_chunks(eu_isolate *iso) {
  while (iso->chunks) {
    slab_chunk *k = iso->chunks;
    iso->chunks = k->next;
    free(k);
  }
}

#endif

static void *alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  eu_isolate *iso = ud;
  size_t old = ptr ? osize : 0;
  void *p;
  if (nsize == 0) {
    if (ptr) heap(iso, ptr, old, 0);
    iso->mem -= old;
    return NULL;
  }
  if (!ptr && osize == LUA_TSTRING) eu_sandbox_charge_alloc(&iso->meter, nsize);
  if (nsize > old) {
    if (!within(iso, old, nsize)) return NULL;  /* the user's limit */
    if (eu_faultsim_alloc()) {
      eu_faultsim_note_oom();
      return NULL;
    }
  }
  /* What Lua makes while it loads bytecode, but for its objects (whose
   * headers the collector writes), are the functions' arrays of code,
   * constants and debug information: never written again. */
  if (!ptr && osize == 0 && iso->loading) p = eu_arena_alloc_fixed(iso->arena, nsize);
  else p = heap(iso, ptr, old, nsize);
  if (p) iso->mem = iso->mem - old + nsize;
  else eu_faultsim_note_oom();  /* the machine's */
  return p;
}

static int l_print(lua_State *L) {
  eu_isolate *iso = eu_isolate_of(L);
  int n = lua_gettop(L), i;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (i = 1; i <= n; i++) {
    if (i > 1) luaL_addchar(&b, '\t');
    eu_sandbox_tolstring(L, i, NULL);
    luaL_addvalue(&b);
  }
  luaL_pushresult(&b);
  if (iso->log) {
    size_t len;
    const char *s = lua_tolstring(L, -1, &len);
    iso->log(iso->ud, s, len);
  }
  return 0;
}

/* ---- compiled chunks ---------------------------------------------------
 *
 * Every isolate loads the same modules, and a checker builds thousands of
 * isolates a second: parsing the sources each time would be most of the
 * work. A file is parsed once, in a Lua state of its own, and its bytecode
 * kept (debug information included, so errors still name file and line);
 * every isolate loads the bytecode. eutaxy's own modules come with the
 * build's bytecode (luac.h), which the first isolate loads and keeps
 * instead of parsing.
 * The cache lives as long as the process: a project's files do not change
 * under a running check. */

typedef struct chunk {
  char *path;
  char *code;
  size_t len;
  struct chunk *next;
} chunk;

#define CHUNK_BUCKETS 64
static chunk *chunks[CHUNK_BUCKETS];

static unsigned hash_path(const char *s) {
  unsigned h = 2166136261u;
  while (*s) h = (h ^ (unsigned char)*s++) * 16777619u;
  return h % CHUNK_BUCKETS;
}

static int dump_writer(lua_State *L, const void *p, size_t sz, void *ud) {
  eu_buf *b = ud;
  (void)L;
  return eu_buf_put(b, p, sz) == EU_OK ? 0 : 1;
}

/* Keeps code (malloc'd, now the cache's) as path's bytecode; without the
 * memory to, frees it (NULL): the next isolate loads the file again. */
static chunk *keep(const char *path, unsigned h, char *code, size_t len) {
  chunk *c = calloc(1, sizeof *c);
  if (!c || !(c->path = strdup(path))) {
    free(c);
    free(code);
    return NULL;
  }
  c->code = code;
  c->len = len;
  c->next = chunks[h];
  chunks[h] = c;
  return c;
}

static int load_kept(eu_isolate *iso, lua_State *L, const chunk *c) {
  int rc;
  iso->loading = iso->fix_code;
  rc = luaL_loadbufferx(L, c->code, c->len, c->path, "b");
  iso->loading = 0;
  return rc;
}

/* The parser's state has the isolate's memory limit, so that a file too
 * big for the isolate fails there, not in the host, and fails where the
 * fault simulation says, as the isolate's allocations do. */
typedef struct parse_budget {
  size_t used, limit;
} parse_budget;

static void *parse_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  parse_budget *b = ud;
  size_t old = ptr ? osize : 0;
  void *p;
  if (nsize == 0) {
    free(ptr);
    b->used -= old;
    return NULL;
  }
  if (nsize > old && (nsize - old > b->limit - b->used || eu_faultsim_alloc())) return NULL;
  if (!(p = realloc(ptr, nsize))) return NULL;
  b->used = b->used - old + nsize;
  return p;
}

/* Parses the Lua file at path in a Lua state of its own and keeps its
 * bytecode; NULL when it does not parse or there is no memory to. */
static chunk *parse_apart(const char *path, unsigned h, size_t limit) {
  parse_budget budget = { 0, limit };
  lua_State *P = lua_newstate(parse_alloc, &budget);
  eu_buf b;
  char *code;
  size_t len;
  int rc;
  if (!P) return NULL;
  if (luaL_loadfilex(P, path, "t") != LUA_OK) {
    lua_close(P);
    return NULL;
  }
  eu_buf_init(&b);
  rc = lua_dump(P, dump_writer, &b, 0);
  lua_close(P);
  if (rc != 0 || !(code = eu_buf_take(&b, &len))) {
    eu_buf_free(&b);
    return NULL;
  }
  return keep(path, h, code, len);
}

/* Loads the Lua file at path (cached), pushing the chunk or an error message. */
int eu_isolate_loadfile(lua_State *L, const char *path) {
  eu_isolate *iso = eu_isolate_of(L);
  chunk *c;
  unsigned h = hash_path(path);
  char *code;
  size_t len;
  int rc;
  for (c = chunks[h]; c; c = c->next)
    if (strcmp(c->path, path) == 0) return load_kept(iso, L, c);
  if ((code = eu_luac_read(path, &len)) != NULL) {
    iso->loading = iso->fix_code;
    rc = eu_luac_load(L, code, len, path);
    iso->loading = 0;
    if (rc == LUA_OK) {
      keep(path, h, code, len);
      return LUA_OK;
    }
    free(code);
  }
  /* The parser's work stays out of the isolate: even the first isolate to
   * load a file loads its bytecode, as every later one does, so that its
   * heap holds what theirs do and its code can go to the fixed blocks. */
  if ((c = parse_apart(path, h, iso->mem_limit)) != NULL) return load_kept(iso, L, c);
  /* a file that does not parse (the message is the isolate's to show), or
   * no memory for the bytecode */
  return luaL_loadfilex(L, path, "t") != LUA_OK ? LUA_ERRSYNTAX : LUA_OK;
}

void eu_isolate_cache_clear(void) {
  int i;
  eu_sandbox_cache_clear();
  for (i = 0; i < CHUNK_BUCKETS; i++) {
    while (chunks[i]) {
      chunk *c = chunks[i];
      chunks[i] = c->next;
      free(c->path);
      free(c->code);
      free(c);
    }
  }
}

static int boot(lua_State *L) {
  const eu_isolate_opts *o = lua_touserdata(L, 1);
  eu_sandbox_opts so;
  /* Booting only allocates; collecting while it does is wasted work. The
   * owner restarts the collector once the isolate's program is loaded. */
  lua_gc(L, LUA_GCSTOP);
  so.libdir = o->libdir;
  so.projectdir = o->projectdir ? o->projectdir : ".";
  so.open_core = o->open_core;
  eu_sandbox_open(L, &so);
  eu_determ_open(L, o->hooks ? &eu_isolate_of(L)->hooks : NULL);
  lua_pushcfunction(L, l_print);
  lua_setglobal(L, "print");
  return 0;
}

int eu_isolate_new(eu_isolate **out, const eu_isolate_opts *o, char *err, size_t errlen) {
  eu_isolate *iso;
  lua_State *L;
  *out = NULL;
  if (o->arena) {
    eu_arena_clear_all(o->arena);
    if ((iso = eu_arena_alloc(o->arena, sizeof *iso)) != NULL) memset(iso, 0, sizeof *iso);
  } else {
    iso = calloc(1, sizeof *iso);
  }
  if (!iso) return eu_err(err, errlen, EU_ENOMEM, "out of memory creating an isolate");
  iso->arena = o->arena;
  iso->mem_limit = o->mem_limit ? o->mem_limit : EU_ISOLATE_MEM_DEFAULT;
  iso->ud = o->ud;
  iso->log = o->log;
  if (o->hooks) iso->hooks = *o->hooks;
  L = lua_newstate(alloc, iso);
  if (!L) {
    if (!iso->arena) {
      free_chunks(iso);
      free(iso);
    }
    return eu_err(err, errlen, EU_ENOMEM, "out of memory creating an isolate");
  }
  iso->L = L;
  memcpy(lua_getextraspace(L), &iso, sizeof iso);
  lua_pushcfunction(L, boot);
  lua_pushlightuserdata(L, (void *)o);
  if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
    eu_err(err, errlen, EU_ELUA, "creating an isolate: %s", lua_tostring(L, -1));
    eu_isolate_close(iso);
    return EU_ELUA;
  }
  *out = iso;
  return EU_OK;
}

eu_isolate *eu_isolate_in(eu_arena *a) { return eu_arena_first(a); }

void eu_isolate_fix_code(eu_isolate *iso, int on) {
  iso->fix_code = on && iso->arena;
  if (!on && iso->arena) eu_arena_seal(iso->arena);
}

void eu_isolate_set_owner(eu_isolate *iso, void *ud, const eu_determ_hooks *hooks) {
  iso->ud = ud;
  if (hooks) iso->hooks = *hooks;
}

size_t eu_isolate_mem_limit(eu_isolate *iso) {
  return iso->mem_limit;
}

void eu_isolate_reserve(eu_isolate *iso, int on) {
  iso->reserve = on ? EU_ISOLATE_RESERVE : 0;
}

/* Closing runs no user code: the sandbox refuses __gc, and the turns'
 * to-be-closed variables live on their coroutines, which lua_close frees
 * without running. What the host runs meanwhile gets one turn's budget.
 *
 * An isolate in an arena is its arena's heap, and nothing in the heap
 * reaches outside it: the host's finalizers (lstore.c, lagenda.c,
 * lfanout.c) free only buffers in the heap's own allocator, and lua-cjson
 * keeps no buffer between calls (sandbox.c). So clearing the arena closes
 * it; lua_close would only walk every object, freeing nothing the
 * clearing does not. */
void eu_isolate_close(eu_isolate *iso) {
  if (!iso) return;
  if (iso->arena) {
    eu_arena_clear(iso->arena);
    return;
  }
  if (iso->L) {
    eu_sandbox_arm(iso->L, 0);
    lua_close(iso->L);
  }
  free_chunks(iso);
  free(iso);
}

const char *eu_isolate_stopped(eu_isolate *iso) {
  return iso->meter.stopped ? iso->meter.msg : NULL;
}

void eu_isolate_arm(lua_State *co, int64_t limit) {
  eu_sandbox_arm(co, limit);
}
