/*
 * isolate.c: building and closing a lua_State as an isolate.
 *
 * The allocator counts every byte so one object cannot take the process's
 * memory; past the limit an allocation fails and Lua raises its ordinary
 * "not enough memory" inside the isolate, which ends that invocation only.
 */
#include <dlfcn.h>
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

/* Small blocks come from size classes of 16 bytes up to EU_SMALL, carved
 * from chunks the isolate owns and kept on free lists: a Lua state makes and
 * frees many small objects, and an isolate is closed all at once, so this
 * is much cheaper than malloc for each. Sanitizer builds use malloc for
 * everything, so that ASan sees every block. */
#define EU_SMALL 512
#define EU_CLASSES (EU_SMALL / 16)
#define EU_CHUNK (64 * 1024)

typedef struct slab_chunk {
  struct slab_chunk *next;
} slab_chunk;

struct eu_isolate {
  lua_State *L;
  size_t mem, mem_limit;
  void *free_list[EU_CLASSES];
  char *bump, *bump_end;
  slab_chunk *chunks;
  int64_t budget;    /* VM instructions left to the running turn */
  int64_t limit;     /* the turn's whole budget, for the message */
  int stopped;       /* the hook suspended the turn: stop_msg says why */
  char stop_msg[320];
  size_t reserve;    /* how far past mem_limit the host's own work may go */
  void *ud;
  void (*log)(void *ud, const char *msg, size_t len);
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

#if defined(EU_PLAIN_MALLOC)

static void *alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  eu_isolate *iso = ud;
  size_t old = ptr ? osize : 0;
  void *p;
  if (nsize == 0) {
    free(ptr);
    iso->mem -= old;
    return NULL;
  }
  if (nsize > old) {
    if (iso->mem - old + nsize > iso->mem_limit + iso->reserve) return NULL;  /* the user's limit */
    if (eu_faultsim_alloc()) {
      eu_faultsim_note_oom();
      return NULL;
    }
  }
  p = realloc(ptr, nsize);
  if (p) iso->mem = iso->mem - old + nsize;
  else eu_faultsim_note_oom();  /* the machine's */
  return p;
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

static void *alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  eu_isolate *iso = ud;
  size_t old = ptr ? osize : 0;
  void *p;
  if (nsize == 0) {
    if (ptr) {
      if (old <= EU_SMALL) small_put(iso, ptr, old);
      else free(ptr);
    }
    iso->mem -= old;
    return NULL;
  }
  if (nsize > old) {
    if (iso->mem - old + nsize > iso->mem_limit + iso->reserve) return NULL;  /* the user's limit */
    if (eu_faultsim_alloc()) {
      eu_faultsim_note_oom();
      return NULL;
    }
  }
  if (ptr && old > EU_SMALL && nsize > EU_SMALL) {
    p = realloc(ptr, nsize);
  } else if (ptr && old <= EU_SMALL && nsize <= EU_SMALL && size_class(old) == size_class(nsize)) {
    p = ptr;
  } else {
    p = nsize <= EU_SMALL ? small_get(iso, nsize) : malloc(nsize);
    if (p && ptr) {
      memcpy(p, ptr, old < nsize ? old : nsize);
      if (old <= EU_SMALL) small_put(iso, ptr, old);
      else free(ptr);
    }
  }
  if (p) iso->mem = iso->mem - old + nsize;
  else eu_faultsim_note_oom();  /* the machine's */
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

static int l_print(lua_State *L) {
  eu_isolate *iso = eu_isolate_of(L);
  int n = lua_gettop(L), i;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (i = 1; i <= n; i++) {
    if (i > 1) luaL_addchar(&b, '\t');
    luaL_tolstring(L, i, NULL);
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
 * work. The first isolate that loads a file keeps its bytecode (debug
 * information included, so errors still name file and line); the others
 * load the bytecode. The cache lives as long as the process: a project's
 * files do not change under a running check. */

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

/* Where a module was found, by package.path and name: the search tries
 * files that do not exist, which costs a system call each. */
typedef struct found {
  char *key;   /* package.path, NUL, name */
  size_t klen;
  char *path;
  struct found *next;
} found;

static found *founds[CHUNK_BUCKETS];

static unsigned hash_bytes(const char *s, size_t n) {
  unsigned h = 2166136261u;
  while (n--) h = (h ^ (unsigned char)*s++) * 16777619u;
  return h % CHUNK_BUCKETS;
}

static const char *found_path(const char *key, size_t klen) {
  found *f;
  for (f = founds[hash_bytes(key, klen)]; f; f = f->next)
    if (f->klen == klen && memcmp(f->key, key, klen) == 0) return f->path;
  return NULL;
}

static void remember_path(const char *key, size_t klen, const char *path) {
  found *f = calloc(1, sizeof *f);
  unsigned h = hash_bytes(key, klen);
  if (!f || !(f->key = malloc(klen)) || !(f->path = strdup(path))) {
    if (f) free(f->key);
    free(f);
    return;
  }
  memcpy(f->key, key, klen);
  f->klen = klen;
  f->next = founds[h];
  founds[h] = f;
}

typedef struct copen {
  char *key;   /* package.cpath, NUL, name */
  size_t klen;
  lua_CFunction open;
  struct copen *next;
} copen;

static copen *copens[CHUNK_BUCKETS];

static int dump_writer(lua_State *L, const void *p, size_t sz, void *ud) {
  eu_buf *b = ud;
  (void)L;
  return eu_buf_put(b, p, sz) == EU_OK ? 0 : 1;
}

/* Loads the Lua file at path (cached), pushing the chunk or an error message. */
int eu_isolate_loadfile(lua_State *L, const char *path) {
  chunk *c;
  unsigned h = hash_path(path);
  eu_buf b;
  for (c = chunks[h]; c; c = c->next)
    if (strcmp(c->path, path) == 0) return luaL_loadbufferx(L, c->code, c->len, path, "b");
  if (luaL_loadfilex(L, path, "t") != LUA_OK) return LUA_ERRSYNTAX;
  eu_buf_init(&b);
  c = calloc(1, sizeof *c);
  if (c && (c->path = strdup(path)) != NULL && lua_dump(L, dump_writer, &b, 0) == 0) {
    c->code = eu_buf_take(&b, &c->len);
    c->next = chunks[h];
    chunks[h] = c;
  } else {
    if (c) free(c->path);
    free(c);
    eu_buf_free(&b);
  }
  return LUA_OK;
}

void eu_isolate_cache_clear(void) {
  int i;
  for (i = 0; i < CHUNK_BUCKETS; i++) {
    while (copens[i]) {
      copen *c = copens[i];
      copens[i] = c->next;
      free(c->key);
      free(c);
    }
    while (founds[i]) {
      found *f = founds[i];
      founds[i] = f->next;
      free(f->key);
      free(f->path);
      free(f);
    }
    while (chunks[i]) {
      chunk *c = chunks[i];
      chunks[i] = c->next;
      free(c->path);
      free(c->code);
      free(c);
    }
  }
}

/* package.searchers[2], with the caches: finds name on package.path. */
static int searcher(lua_State *L) {
  const char *name = luaL_checkstring(L, 1), *path, *key;
  size_t klen;
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "path");
  lua_pushliteral(L, "\0");
  lua_pushvalue(L, 1);
  lua_concat(L, 3);
  key = lua_tolstring(L, -1, &klen);
  path = found_path(key, klen);
  if (path) {
    lua_pushstring(L, path);
  } else {
    lua_getfield(L, -2, "searchpath");
    lua_pushstring(L, name);
    lua_getfield(L, -4, "path");
    lua_call(L, 2, 2);
    if (lua_isnil(L, -2)) return 1;  /* the message of searchpath: where it looked */
    lua_pop(L, 1);
    remember_path(key, klen, lua_tostring(L, -1));
  }
  path = lua_tostring(L, -1);
  if (eu_isolate_loadfile(L, path) != LUA_OK)
    return luaL_error(L, "error loading module '%s' from file '%s':\n\t%s", name, path, lua_tostring(L, -1));
  lua_pushstring(L, path);
  return 2;
}

/* package.searchers[3] with a cache: C modules (lua-cjson) are opened once
 * per process; every later isolate gets the same luaopen_ function without
 * a file system search or a dlopen. */
static int csearcher(lua_State *L) {
  const char *name = luaL_checkstring(L, 1), *key, *path, *mark;
  size_t klen;
  copen *c;
  unsigned h;
  void *lib;
  lua_CFunction open;
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "cpath");
  lua_pushliteral(L, "\0");
  lua_pushvalue(L, 1);
  lua_concat(L, 3);
  key = lua_tolstring(L, -1, &klen);
  h = hash_bytes(key, klen);
  for (c = copens[h]; c; c = c->next)
    if (c->klen == klen && memcmp(c->key, key, klen) == 0) {
      lua_pushcfunction(L, c->open);
      lua_pushliteral(L, ":cached");
      return 2;
    }
  lua_getfield(L, -2, "searchpath");
  lua_pushvalue(L, 1);
  lua_getfield(L, -4, "cpath");
  lua_call(L, 2, 2);
  if (lua_isnil(L, -2)) return 1;
  path = lua_tostring(L, -2);
  lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) return luaL_error(L, "error loading module '%s' from file '%s':\n\t%s", name, path, dlerror());
  mark = strchr(name, '-');  /* "a-b" opens as luaopen_b, as Lua's own searcher does */
  lua_pushstring(L, mark ? mark + 1 : name);
  lua_pushliteral(L, "luaopen_");
  lua_insert(L, -2);
  lua_concat(L, 2);
  luaL_gsub(L, lua_tostring(L, -1), ".", "_");
  open = (lua_CFunction)(uintptr_t)dlsym(lib, lua_tostring(L, -1));
  if (!open) return luaL_error(L, "error loading module '%s' from file '%s':\n\tno %s", name, path, lua_tostring(L, -1));
  c = calloc(1, sizeof *c);
  if (c && (c->key = malloc(klen)) != NULL) {  /* the library stays open: c keeps its function */
    memcpy(c->key, key, klen);
    c->klen = klen;
    c->open = open;
    c->next = copens[h];
    copens[h] = c;
  } else {
    free(c);
  }
  lua_pushcfunction(L, open);
  lua_pushstring(L, path);
  return 2;
}

/* loadfile(path [, mode [, env]]), cached for a path given as a string. */
static int l_loadfile(lua_State *L) {
  const char *path = luaL_optstring(L, 1, NULL);
  int env = !lua_isnone(L, 3) ? 3 : 0;
  if (!path || (!lua_isnoneornil(L, 2) && strcmp(lua_tostring(L, 2), "bt") != 0)) {
    lua_pushvalue(L, lua_upvalueindex(1));  /* Lua's own loadfile */
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
  }
  if (eu_isolate_loadfile(L, path) != LUA_OK) {
    luaL_pushfail(L);
    lua_insert(L, -2);
    return 2;
  }
  if (env) {
    lua_pushvalue(L, env);
    if (!lua_setupvalue(L, -2, 1)) lua_pop(L, 1);
  }
  return 1;
}

static void set_path(lua_State *L, const char *field, const char *projectdir,
                     const char *libdir, const char *ext) {
  lua_getglobal(L, "package");
  if (ext[0] == 'l') {
    lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s/?.lua;%s/?/init.lua;%s", projectdir, projectdir,
                    libdir, libdir, LUA_PATH_DEFAULT);
  } else {
    lua_pushstring(L, LUA_CPATH_DEFAULT);
  }
  lua_setfield(L, -2, field);
  lua_pop(L, 1);
}


static int boot(lua_State *L) {
  const eu_isolate_opts *o = lua_touserdata(L, 1);
  luaL_openlibs(L);
  /* Booting only allocates; collecting while it does is wasted work. The
   * owner restarts the collector once the isolate's program is loaded. */
  lua_gc(L, LUA_GCSTOP);
  eu_determ_open(L, o->hooks);
  lua_pushcfunction(L, l_print);
  lua_setglobal(L, "print");
  set_path(L, "path", o->projectdir ? o->projectdir : ".", o->libdir, "lua");
  set_path(L, "cpath", NULL, NULL, "c");
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "searchers");
  lua_pushcfunction(L, searcher);
  lua_rawseti(L, -2, 2);
  lua_pushcfunction(L, csearcher);
  lua_rawseti(L, -2, 3);
  lua_pop(L, 2);
  /* loadfile goes through the cache too; other modes use the original */
  lua_getglobal(L, "loadfile");
  lua_pushcclosure(L, l_loadfile, 1);
  lua_setglobal(L, "loadfile");
  if (o->open_core) {
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    lua_pushcfunction(L, o->open_core);
    lua_setfield(L, -2, "eutaxy.core");
    lua_pop(L, 1);
  }
  return 0;
}

int eu_isolate_new(eu_isolate **out, const eu_isolate_opts *o, char *err, size_t errlen) {
  eu_isolate *iso = calloc(1, sizeof *iso);
  lua_State *L;
  *out = NULL;
  if (!iso) return eu_err(err, errlen, EU_ENOMEM, "out of memory creating an isolate");
  iso->mem_limit = o->mem_limit ? o->mem_limit : EU_ISOLATE_MEM_DEFAULT;
  iso->ud = o->ud;
  iso->log = o->log;
  L = lua_newstate(alloc, iso);
  if (!L) {
    free_chunks(iso);
    free(iso);
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

size_t eu_isolate_mem_limit(eu_isolate *iso) {
  return iso->mem_limit;
}

void eu_isolate_reserve(eu_isolate *iso, int on) {
  iso->reserve = on ? EU_ISOLATE_RESERVE : 0;
}

void eu_isolate_close(eu_isolate *iso) {
  if (!iso) return;
  if (iso->L) lua_close(iso->L);
  free_chunks(iso);
  free(iso);
}

#define EU_HOOK_STEP 10000

/* The message names the line the loop was on: the hook runs in its frame.
 * An error could be caught by a pcall in the loop, which would go on; a
 * yield from a hook cannot be: the owner finds the turn suspended, sees
 * eu_isolate_stopped and ends it. Where no yield can happen (a comparator
 * of table.sort, say) the error is all there is. */
static void cpu_hook(lua_State *L, lua_Debug *ar) {
  eu_isolate *iso = eu_isolate_of(L);
  char where[160] = "";
  iso->budget -= EU_HOOK_STEP;
  if (iso->budget >= 0) return;
  if (lua_getinfo(L, "Sl", ar) && ar->currentline > 0)
    snprintf(where, sizeof where, "%s:%d: ", ar->short_src, ar->currentline);
  snprintf(iso->stop_msg, sizeof iso->stop_msg,
           "%sCPU limit exceeded: more than %lld VM instructions without yielding", where, (long long)iso->limit);
  if (lua_isyieldable(L)) {
    iso->stopped = 1;
    lua_yield(L, 0);
    return;
  }
  lua_pushstring(L, iso->stop_msg);
  lua_error(L);
}

const char *eu_isolate_stopped(eu_isolate *iso) {
  return iso->stopped ? iso->stop_msg : NULL;
}

void eu_isolate_arm(lua_State *co, int64_t limit) {
  eu_isolate *iso = eu_isolate_of(co);
  iso->budget = iso->limit = limit;
  iso->stopped = 0;
  lua_sethook(co, limit > 0 ? cpu_hook : NULL, limit > 0 ? LUA_MASKCOUNT : 0, EU_HOOK_STEP);
}
