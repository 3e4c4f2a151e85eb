/*
 * fuzz.h: what the fuzz targets share.
 *
 * A fuzz input is read as a stream of choices (fz_*): every read past the
 * end gives zeros, so any input, even an empty one, is a whole run and the
 * fuzzer's mutations change decisions rather than break the format.
 *
 * The targets that run Lua use fz_lua_new: a state whose allocations are
 * capped, as an isolate's are (a memory error is a clean Lua error), and
 * whose instructions are counted. Past the budget the code under test is
 * looping, which is a bug the fuzzer must report: the hook aborts, so
 * libFuzzer keeps the input, instead of raising an error that the code
 * under test could catch and hide.
 */
#ifndef EUTAXY_FUZZ_H
#define EUTAXY_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

typedef struct fz {
  const uint8_t *p;
  size_t n;
} fz;

static inline unsigned fz_u8(fz *f) {
  if (f->n == 0) return 0;
  f->n--;
  return *f->p++;
}

static inline uint64_t fz_u64(fz *f) {
  uint64_t v = 0;
  int i;
  for (i = 0; i < 8; i++) v |= (uint64_t)fz_u8(f) << (8 * i);
  return v;
}

/* Up to want bytes of the input, fewer at its end; *got says how many. */
static inline const char *fz_bytes(fz *f, size_t want, size_t *got) {
  const char *p = (const char *)f->p;
  *got = want < f->n ? want : f->n;
  f->p += *got;
  f->n -= *got;
  return p;
}

/* The memory an isolate may use (isolate.c's cap). */
#define FZ_LUA_MEM (128u * 1024 * 1024)
/* Instructions one call may run: far beyond any honest run on a fuzz input. */
#define FZ_LUA_STEPS 200000000L

static size_t fz_lua_used;
static long fz_lua_steps;
static const char *fz_lua_what = "a Lua call";

static inline void *fz_lua_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  (void)ud;
  if (ptr == NULL) osize = 0;
  if (nsize == 0) {
    free(ptr);
    fz_lua_used -= osize;
    return NULL;
  }
  if (nsize > osize && nsize - osize > FZ_LUA_MEM - fz_lua_used) return NULL;
  ptr = realloc(ptr, nsize);
  if (ptr) fz_lua_used = fz_lua_used - osize + nsize;
  return ptr;
}

/* Lua code is invisible to the compiler's coverage, so the hook counts the
 * Lua lines run, as edges from the previous line, in libFuzzer's extra
 * counters: the fuzzer then keeps inputs that reach new Lua code. */
static uint8_t fz_lua_cov[1 << 16] __attribute__((section("__libfuzzer_extra_counters")));
static uintptr_t fz_lua_prev;

static inline void fz_lua_line(lua_State *L, lua_Debug *ar) {
  uintptr_t here;
  if (!lua_getinfo(L, "S", ar)) return;
  here = ((uintptr_t)ar->source * 31u) ^ ((uintptr_t)ar->currentline * 0x9e3779b1u);
  fz_lua_cov[(here ^ (fz_lua_prev >> 1)) & 0xffff]++;
  fz_lua_prev = here;
}

static inline void fz_lua_hook(lua_State *L, lua_Debug *ar) {
  if (ar->event == LUA_HOOKLINE) {
    fz_lua_line(L, ar);
    return;
  }
  fz_lua_steps += 1000;
  if (fz_lua_steps > FZ_LUA_STEPS) {
    fprintf(stderr, "fuzz: %s ran more than %ld Lua instructions: a runaway loop\n", fz_lua_what,
            FZ_LUA_STEPS);
    abort();
  }
}

/* A fresh budget for the next call. */
static inline void fz_lua_budget(const char *what) {
  fz_lua_steps = 0;
  fz_lua_what = what;
}

static inline int fz_lua_panic(lua_State *L) {
  fprintf(stderr, "fuzz: unprotected Lua error: %s\n", lua_tostring(L, -1));
  abort();
  return 0;
}

/* The standard libraries, and require finding the repository's lua/ first. */
static inline lua_State *fz_lua_new(void) {
  lua_State *L = lua_newstate(fz_lua_alloc, NULL);
  if (!L) return NULL;
  lua_atpanic(L, fz_lua_panic);
  luaL_openlibs(L);
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "path");
  lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", EUTAXY_LUADIR, EUTAXY_LUADIR, lua_tostring(L, -1));
  lua_setfield(L, -3, "path");
  lua_pop(L, 2);
  lua_sethook(L, fz_lua_hook, LUA_MASKCOUNT | LUA_MASKLINE, 1000);
  return L;
}

/* Runs a Lua file of fuzz/ (a target's driver) and leaves what it returns. */
static inline void fz_lua_driver(lua_State *L, const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", EUTAXY_FUZZDIR, name);
  fz_lua_budget(name);
  if (luaL_dofile(L, path) != LUA_OK) {
    fprintf(stderr, "fuzz: cannot load %s: %s\n", path, lua_tostring(L, -1));
    abort();
  }
}

#endif
