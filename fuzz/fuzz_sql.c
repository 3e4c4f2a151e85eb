/*
 * fuzz_sql.c: the SQL binding and cursor layer (host/lstore.c over
 * host/store.c, wrapped by lua/eutaxy/storage.lua), driven by fuzz/sql.lua.
 *
 * Each input gets a fresh in-memory store and the storage functions an
 * object's isolate gets (eu_lstore_push). The driver turns the input into
 * storage calls and checks each outcome; turns end (commit or rollback)
 * between them, as the world ends them. An error out of the driver, a
 * crash, a leak or a runaway loop is a finding.
 *
 * Fuzzed SQL can ask for unbounded work (a recursive CTE without LIMIT).
 * The store stops a statement past 200,000,000 SQLite steps, seconds of
 * work; here a progress handler of the harness's own replaces the store's
 * and stops one far sooner (an ordinary SQL error), and blobs are capped
 * at 1 MB.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "eutaxy.h"
#include "fuzz.h"
#include "lstore.h"
#include "store.h"

static lua_State *L;
static eu_store *store;
static long sql_steps;

#define SQL_STEPS 2000000L  /* VM instructions per storage call */

static int progress(void *ud) {
  (void)ud;
  sql_steps += 1000;
  return sql_steps > SQL_STEPS;
}

/* budget(): a fresh budget for the next call, in SQLite and in Lua. */
static int l_budget(lua_State *Ls) {
  (void)Ls;
  sql_steps = 0;
  fz_lua_budget("sql.lua");
  return 0;
}

/* end_turn(commit): the world's end of a turn. */
static int l_end_turn(lua_State *Ls) {
  int rc;
  if (!eu_store_in_turn(store)) return 0;
  rc = lua_toboolean(Ls, 1) ? eu_store_commit(store) : eu_store_rollback(store);
  if (rc < 0 && lua_toboolean(Ls, 1)) {
    /* a commit SQLite refuses (a deferred foreign key) is rolled back, as the world does */
    rc = eu_store_rollback(store);
  }
  if (rc < 0) return luaL_error(Ls, "fuzz_sql: the turn does not end: %s", eu_store_errmsg(store));
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[EU_ERRLEN];
  sqlite3 *db;
  if (!L) {
    sqlite3_hard_heap_limit64(512 * 1024 * 1024);
    L = fz_lua_new();
    if (!L) abort();
    fz_lua_driver(L, "sql.lua");
    lua_setglobal(L, "check_sql");
    lua_register(L, "budget", l_budget);
  }
  if (eu_store_open(&store, NULL, err, sizeof err) != EU_OK) {
    fprintf(stderr, "fuzz_sql: %s\n", err);
    abort();
  }
  db = eu_store_db(store);
  sqlite3_limit(db, SQLITE_LIMIT_LENGTH, 1000000);
  sqlite3_progress_handler(db, 1000, progress, NULL);
  sql_steps = 0;
  fz_lua_budget("sql.lua");
  lua_settop(L, 0);
  lua_getglobal(L, "check_sql");
  lua_pushlstring(L, (const char *)data, size);
  eu_lstore_push(L, store);
  lua_pushcfunction(L, l_end_turn);
  if (lua_pcall(L, 3, 0, 0) != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    if (!msg || !strstr(msg, "not enough memory")) {
      fprintf(stderr, "fuzz_sql: %s\n", msg ? msg : "(an error that is not a string)");
      abort();
    }
  }
  lua_settop(L, 0);
  /* finalizers that call storage run now, while the store is open */
  lua_gc(L, LUA_GCCOLLECT, 0);
  lua_gc(L, LUA_GCCOLLECT, 0);
  eu_store_close(store);
  store = NULL;
  return 0;
}
