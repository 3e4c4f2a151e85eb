/*
 * test_sandbox.c: an object's failures and limits stay its own (issue 12):
 * the engine's rights against a user's trigger, the database quota and a
 * full disk, the SQL memory meter and its limit, the gate, and engine rows
 * that break their invariants.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "agenda.h"
#include "eutaxy.h"
#include "fanout.h"
#include "faultsim.h"
#include "lstore.h"
#include "sqlmem.h"
#include "store.h"
#include "test.h"
#include "test_sql.h"

static eu_store *open_store(const char *path) {
  eu_store *s = NULL;
  char err[EU_ERRLEN];
  ASSERT_OK(eu_store_open(&s, path, err, sizeof err));
  return s;
}

static uint64_t random_zero(void *ud) {
  (void)ud;
  return 0;
}

static void enqueue_one(eu_store *s, const char *key) {
  const char *targets[] = { "a" };
  eu_fanout_input in = { key, key, "body", 4 };
  eu_fanout_enqueued o;
  int conflict;
  ASSERT_OK(eu_fanout_migrate(s));
  ASSERT_OK(eu_fanout_enqueue(s, &in, 1, targets, 1, 100, 100, random_zero, NULL, &o, &conflict));
}

/* Remakes table with its columns but none of its constraints, as a
 * database from elsewhere might hold it, so that any value can be put in. */
static void loosen(eu_store *s, const char *table) {
  char sql[512];
  snprintf(sql, sizeof sql, "CREATE TABLE eu_loose AS SELECT * FROM %s; DROP TABLE %s;"
           "ALTER TABLE eu_loose RENAME TO %s", table, table, table);
  ASSERT_OK(eu_store_exec_internal(s, sql));
}

static void test_a_user_trigger_runs_with_the_users_rights(void) {
  eu_store *s = open_store(NULL);
  ASSERT_OK(eu_agenda_migrate(s));
  ASSERT_OK(eu_store_commit(s));
  /* as a database written before the tables were reserved may hold */
  ASSERT_OK(eu_store_exec_internal(s, "CREATE TRIGGER old AFTER INSERT ON eutaxy_agenda BEGIN "
                                      "INSERT INTO _eutaxy_kv VALUES ('stolen', x'00'); END"));
  ASSERT(eu_agenda_set(s, "p", "", 5) < 0);
  ASSERT_CONTAINS(eu_store_errmsg(s), "table _eutaxy_kv is reserved for eutaxy");
  ASSERT_OK(eu_store_rollback(s));
  ASSERT_EQ(sql_scalar(s, "SELECT count(*) FROM _eutaxy_kv"), 0);
  /* the user can still drop it, and the engine works again */
  ASSERT_EQ(sql_run(s, "DROP TRIGGER old"), 0);
  ASSERT_OK(eu_agenda_set(s, "p", "", 5));
  ASSERT_OK(eu_store_commit(s));
  ASSERT(sql_run(s, "DROP INDEX eutaxy_agenda_by_due") < 0);
  ASSERT_CONTAINS(eu_store_errmsg(s), "the name eutaxy_agenda_by_due is reserved for eutaxy");
  ASSERT_OK(eu_store_rollback(s));
  eu_store_close(s);
}

/* An in-memory store held to 64 KiB, with an empty table t committed. */
static eu_store *small_store(void) {
  eu_store *s = open_store(NULL);
  eu_store_limits l = { 0, NULL, 64 * 1024 };
  ASSERT_OK(eu_store_set_limits(s, &l));
  ASSERT_EQ(sql_run(s, "CREATE TABLE t(x)"), 0);
  ASSERT_OK(eu_store_commit(s));
  return s;
}

/* Single-row writes in the turn until one fails: its code. */
static int fill(eu_store *s) {
  int i, rc = 0;
  for (i = 0; i < 100 && rc >= 0; i++) rc = sql_run(s, "INSERT INTO t VALUES (randomblob(4000))");
  return rc;
}

static void test_the_quota_fails_the_write_and_the_store_goes_on(void) {
  eu_store *s = small_store();
  ASSERT_EQ(fill(s), EU_EFULL);
  ASSERT_STR_EQ(eu_store_errmsg(s), "the object's storage is full: its database may hold 65536 bytes "
                                    "(--max-object-bytes)");
  ASSERT_OK(eu_store_rollback(s));
  ASSERT_EQ(sql_run(s, "INSERT INTO t VALUES (1)"), 0);
  ASSERT_OK(eu_store_commit(s));
  ASSERT_EQ(sql_scalar(s, "SELECT count(*) FROM t"), 1);
  /* user SQL cannot lift it */
  ASSERT(sql_run(s, "PRAGMA max_page_count = 100000") < 0);
  ASSERT_OK(eu_store_rollback(s));
  eu_store_close(s);
}

/* A single-row write past the quota makes SQLite end the whole turn: a
 * later call of that turn must not write outside it, nor the turn commit. */
static void test_a_turn_sqlite_ended_can_only_end(void) {
  eu_store *s = small_store();
  ASSERT_EQ(sql_run(s, "INSERT INTO t VALUES (1)"), 0);
  ASSERT_EQ(fill(s), EU_EFULL);
  ASSERT(sqlite3_get_autocommit(eu_store_db(s)));  /* SQLite ended the transaction */
  ASSERT(eu_store_in_turn(s));
  ASSERT(sql_run(s, "INSERT INTO t VALUES (2)") < 0);
  ASSERT(strstr(eu_store_errmsg(s), "the turn can only end") != NULL);
  ASSERT(eu_store_commit(s) < 0);
  ASSERT_EQ(sql_scalar(s, "SELECT count(*) FROM t"), 0);
  /* the next turn is whole again */
  ASSERT_EQ(sql_run(s, "INSERT INTO t VALUES (3)"), 0);
  ASSERT_OK(eu_store_commit(s));
  ASSERT_EQ(sql_scalar(s, "SELECT count(*) FROM t"), 1);
  eu_store_close(s);
}

/* A VFS over the default one whose writes fail with SQLITE_FULL on demand:
 * the disk filling up under a commit. */
static sqlite3_vfs full_vfs, *real_vfs;
static int disk_full;
static sqlite3_io_methods full_methods;
static const sqlite3_io_methods *real_methods;

typedef struct full_file {
  sqlite3_file base;
  sqlite3_file *real;
} full_file;

static int ff_write(sqlite3_file *f, const void *p, int n, sqlite3_int64 off) {
  full_file *ff = (full_file *)f;
  if (disk_full) return SQLITE_FULL;
  return ff->real->pMethods->xWrite(ff->real, p, n, off);
}

#define PASS(name, proto, args) \
  static int ff_##name proto { full_file *ff = (full_file *)f; return ff->real->pMethods->x##name args; }
PASS(Read, (sqlite3_file *f, void *p, int n, sqlite3_int64 off), (ff->real, p, n, off))
PASS(Truncate, (sqlite3_file *f, sqlite3_int64 n), (ff->real, n))
PASS(Sync, (sqlite3_file *f, int flags), (ff->real, flags))
PASS(FileSize, (sqlite3_file *f, sqlite3_int64 *n), (ff->real, n))
PASS(Lock, (sqlite3_file *f, int l), (ff->real, l))
PASS(Unlock, (sqlite3_file *f, int l), (ff->real, l))
PASS(CheckReservedLock, (sqlite3_file *f, int *r), (ff->real, r))
PASS(FileControl, (sqlite3_file *f, int op, void *a), (ff->real, op, a))
PASS(SectorSize, (sqlite3_file *f), (ff->real))
PASS(DeviceCharacteristics, (sqlite3_file *f), (ff->real))

static int ff_close(sqlite3_file *f) {
  full_file *ff = (full_file *)f;
  int rc = ff->real->pMethods ? ff->real->pMethods->xClose(ff->real) : SQLITE_OK;
  return rc;
}

static int fv_open(sqlite3_vfs *v, sqlite3_filename name, sqlite3_file *f, int flags, int *out) {
  full_file *ff = (full_file *)f;
  int rc;
  (void)v;
  ff->real = (sqlite3_file *)(ff + 1);
  rc = real_vfs->xOpen(real_vfs, name, ff->real, flags, out);
  if (rc != SQLITE_OK || !ff->real->pMethods) {
    f->pMethods = NULL;
    return rc;
  }
  real_methods = ff->real->pMethods;
  full_methods = (sqlite3_io_methods){ 1, ff_close, ff_Read, ff_write, ff_Truncate, ff_Sync,
    ff_FileSize, ff_Lock, ff_Unlock, ff_CheckReservedLock, ff_FileControl, ff_SectorSize,
    ff_DeviceCharacteristics, NULL, NULL, NULL, NULL, NULL, NULL };
  f->pMethods = &full_methods;
  return SQLITE_OK;
}

static void test_a_commit_the_disk_refuses_is_rolled_back_and_the_store_goes_on(void) {
  char dir[] = "/tmp/eutaxy-full-XXXXXX", path[64];
  eu_store *s;
  ASSERT(mkdtemp(dir) != NULL);
  snprintf(path, sizeof path, "%s/db", dir);
  real_vfs = sqlite3_vfs_find(NULL);
  full_vfs = *real_vfs;
  full_vfs.zName = "eutaxy-test-full";
  full_vfs.szOsFile = (int)sizeof(full_file) + real_vfs->szOsFile;
  full_vfs.xOpen = fv_open;
  ASSERT_EQ(sqlite3_vfs_register(&full_vfs, 1), SQLITE_OK);
  s = open_store(path);
  ASSERT_EQ(sql_run(s, "CREATE TABLE t(x)"), 0);
  ASSERT_OK(eu_store_commit(s));
  ASSERT_EQ(sql_run(s, "INSERT INTO t VALUES (1)"), 0);
  disk_full = 1;
  ASSERT_EQ(eu_store_commit(s), EU_EFULL);
  ASSERT_STR_EQ(eu_store_errmsg(s), "the disk is full (SQLITE_FULL)");
  disk_full = 0;
  ASSERT(!eu_store_in_turn(s));
  ASSERT_EQ(sql_scalar(s, "SELECT count(*) FROM t"), 0);
  ASSERT_EQ(sql_run(s, "INSERT INTO t VALUES (2)"), 0);
  ASSERT_OK(eu_store_commit(s));
  ASSERT_EQ(sql_scalar(s, "SELECT sum(x) FROM t"), 2);
  eu_store_close(s);
  sqlite3_vfs_unregister(&full_vfs);
  unlink(path);
  rmdir(dir);
}

static void test_sql_memory_is_counted_to_the_store_that_made_it(void) {
  eu_store *a = open_store(NULL), *b = open_store(NULL);
  const size_t *ma = eu_store_mem_ptr(a), *mb = eu_store_mem_ptr(b);
  size_t a0, b0;
  sqlite3_stmt *st;
  const char *sql = "SELECT hex(randomblob(500000))";
  ASSERT(eu_sqlmem_installed());
  ASSERT_OK(eu_store_touch(a));
  ASSERT_OK(eu_store_prepare(a, sql, strlen(sql), &st));
  a0 = *ma;
  b0 = *mb;
  ASSERT_EQ(eu_store_step(a, st), 1);
  ASSERT(*ma >= a0 + 1000000);   /* the row's value, live while a is on it */
  ASSERT_EQ(*mb, b0);
  eu_store_reset(a, st);         /* freed, whoever frees it */
  ASSERT(*ma < a0 + 100000);
  eu_store_close(b);
  eu_store_close(a);
}

/* Freed small blocks are kept for the next ones of their size (sqlmem.c's
 * spares): whether a block is new or kept, grown in place or moved, the
 * meter counts what SQLite holds, and a growth is judged by what it adds. */
static void test_sql_blocks_kept_for_reuse_are_counted_as_new(void) {
  eu_sqlmem *m = eu_sqlmem_new(), *prev;
  char *p, *q;
  int i;
  ASSERT(eu_sqlmem_installed() && m);
  prev = eu_sqlmem_enter(m);
  for (i = 0; i < 3; i++) {  /* new, then kept ones */
    p = sqlite3_malloc(104);
    ASSERT(p);
    ASSERT_EQ(m->live, 104);
    ASSERT_EQ(m->refs, 2);
    memset(p, 'a', 104);
    sqlite3_free(p);
    ASSERT_EQ(m->live, 0);
    ASSERT_EQ(m->refs, 1);
  }
  p = sqlite3_malloc(104);
  memset(p, 'b', 104);
  p = sqlite3_realloc(p, 112);   /* the same size class */
  ASSERT_EQ(m->live, 112);
  p = sqlite3_realloc(p, 2000);  /* past the kept sizes */
  ASSERT_EQ(m->live, 2000);
  ASSERT(p[0] == 'b' && p[103] == 'b');
  p = sqlite3_realloc(p, 48);    /* back among them */
  ASSERT_EQ(m->live, 48);
  ASSERT(p[0] == 'b' && p[47] == 'b');
  /* near the limit, a growth to another class needs only the bytes it adds */
  m->limit = 1000;
  m->enforce = 1;
  q = sqlite3_realloc(p, 904);
  ASSERT(q);
  p = sqlite3_realloc(q, 952);
  ASSERT(p);
  ASSERT_EQ(m->live, 952);
  ASSERT(!m->refused);
  ASSERT(!sqlite3_realloc(p, 1048));  /* past it */
  ASSERT(m->refused);
  ASSERT_EQ(m->live, 952);
  m->enforce = 0;
  sqlite3_free(p);
  ASSERT_EQ(m->live, 0);
  ASSERT_EQ(m->refs, 1);
  eu_sqlmem_leave(prev);
  eu_sqlmem_release(m);
}

static void test_the_memory_limit_refuses_user_sql_as_the_objects_failure(void) {
  eu_store *s = open_store(NULL);
  size_t isolate = 7u << 20;
  eu_store_limits l = { 8u << 20, &isolate, 0 };
  uint64_t ooms = eu_faultsim_ooms();
  ASSERT_OK(eu_store_set_limits(s, &l));
  ASSERT_EQ(sql_run(s, "SELECT length(hex(randomblob(900000)))"), EU_ESQL);
  ASSERT_STR_EQ(eu_store_errmsg(s), "memory limit exceeded: the object may use 8 MiB, its SQL included");
  ASSERT_EQ(eu_faultsim_ooms(), ooms);  /* not the machine's out of memory */
  isolate = 0;
  ASSERT_EQ(sql_run(s, "SELECT length(hex(randomblob(900000)))"), 1);
  ASSERT_OK(eu_store_commit(s));
  eu_store_close(s);
}

static void test_a_closed_gate_refuses_every_storage_call(void) {
  eu_store *s = open_store(NULL);
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  eu_lstore_push(L, s);
  lua_setglobal(L, "storage");
  eu_store_gate(s, 0);
  ASSERT(!eu_store_available(s));
  ASSERT(luaL_dostring(L, "storage.exec('CREATE TABLE t(x)')") != LUA_OK);
  ASSERT_STR_EQ(lua_tostring(L, -1), "sql:exec: storage is not available: the object is being reset");
  lua_pop(L, 1);
  ASSERT(luaL_dostring(L, "storage.put('k', 1)") != LUA_OK);
  ASSERT_CONTAINS(lua_tostring(L, -1), "storage is not available");
  lua_pop(L, 1);
  eu_store_gate_with(s, 0, "storage is closed for a test");
  ASSERT(luaL_dostring(L, "storage.setAlarm(5)") != LUA_OK);
  ASSERT_STR_EQ(lua_tostring(L, -1), "storage:setAlarm: storage is closed for a test");
  lua_pop(L, 1);
  ASSERT(!eu_store_in_turn(s));
  eu_store_gate(s, 1);
  ASSERT(luaL_dostring(L, "storage.put('k', 1)") == LUA_OK);
  lua_close(L);
  eu_store_close(s);
}

static int count_each(void *ud, const eu_fanout_delivery *d) {
  (void)d;
  ++*(int *)ud;
  return 0;
}

static void test_engine_rows_that_break_invariants_are_clear_errors(void) {
  eu_store *s = open_store(NULL);
  eu_buf buf;
  int n = 0, conflict;
  const char *targets[] = { "a" };
  eu_fanout_input in = { "k", "k", "body", 4 };
  eu_fanout_enqueued o;
  eu_buf_init(&buf);
  enqueue_one(s, "k");
  ASSERT_OK(eu_store_commit(s));
  loosen(s, "eutaxy_fanout_messages");
  loosen(s, "eutaxy_fanout_deliveries");
  ASSERT_OK(eu_store_exec_internal(s, "UPDATE eutaxy_fanout_messages SET id = NULL"));
  ASSERT_EQ(eu_fanout_enqueue(s, &in, 1, targets, 1, 100, 100, random_zero, NULL, &o, &conflict),
            EU_ECORRUPT);
  ASSERT_CONTAINS(eu_store_errmsg(s), "a row of eutaxy_fanout_messages (k) breaks its invariants: column id is NULL");
  ASSERT_OK(eu_store_exec_internal(s, "UPDATE eutaxy_fanout_messages SET id = 'k';"
                                      "UPDATE eutaxy_fanout_deliveries SET phase = NULL, attempt = 1"));
  ASSERT_EQ(eu_fanout_claim(s, "a", 1000, 10, 5, 100, count_each, &n, &buf), EU_ECORRUPT);
  ASSERT_CONTAINS(eu_store_errmsg(s), "column phase is NULL");
  ASSERT_OK(eu_store_exec_internal(s, "UPDATE eutaxy_fanout_deliveries SET phase = 'lost'"));
  ASSERT_EQ(eu_fanout_claim(s, "a", 1000, 10, 5, 100, count_each, &n, &buf), EU_ECORRUPT);
  ASSERT_CONTAINS(eu_store_errmsg(s), "is neither 'delivery' nor 'dead_letter'");
  ASSERT_EQ(n, 0);
  ASSERT_OK(eu_store_rollback(s));
  eu_buf_free(&buf);
  eu_store_close(s);
}

#define T(name) { #name, name }
static const eu_test tests[] = {
  T(test_a_user_trigger_runs_with_the_users_rights),
  T(test_the_quota_fails_the_write_and_the_store_goes_on),
  T(test_a_turn_sqlite_ended_can_only_end),
  T(test_a_commit_the_disk_refuses_is_rolled_back_and_the_store_goes_on),
  T(test_sql_memory_is_counted_to_the_store_that_made_it),
  T(test_sql_blocks_kept_for_reuse_are_counted_as_new),
  T(test_the_memory_limit_refuses_user_sql_as_the_objects_failure),
  T(test_a_closed_gate_refuses_every_storage_call),
  T(test_engine_rows_that_break_invariants_are_clear_errors),
};

int main(void) {
  setvbuf(stdout, NULL, _IONBF, 0);
  return test_main(tests, sizeof tests / sizeof tests[0]);
}
