/*
 * test_store.c: the store (store.c) through its C API, and through the Lua
 * binding (lstore.c, lua/eutaxy/storage.lua) as user code sees it.
 *
 * Each test opens its own in-memory store and closes everything it opened.
 * The Lua tests run snippets in a fresh lua_State whose allocator can be
 * told to fail, for the fault-injection tests at the end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "eutaxy.h"
#include "test.h"
#include "test_sql.h"
#include "lstore.h"
#include "store.h"



/* Helpers for the C tests */

/* The flags open_store gives: the tests of the key-value pairs and the
 * alarm run again with EU_STORE_LAZY_TABLES (the lazy_ ones below). */
static unsigned open_flags;

static eu_store *open_store(void) {
  eu_store *s = NULL;
  char err[EU_ERRLEN];
  ASSERT_OK(eu_store_open_with(&s, NULL, NULL, NULL, open_flags, err, sizeof err));
  ASSERT(s != NULL);
  return s;
}

/* The first column of the one row sql gives, as an integer. */
static sqlite3_int64 scalar(eu_store *s, const char *sql) {
  sqlite3_stmt *st;
  sqlite3_int64 v;
  ASSERT_OK(eu_store_touch(s));
  ASSERT_OK(eu_store_prepare(s, sql, strlen(sql), &st));
  ASSERT(st != NULL);
  ASSERT_EQ(eu_store_step(s, st), 1);
  v = sqlite3_column_int64(st, 0);
  eu_store_reset(s, st);
  return v;
}

/* A count read straight from the connection, outside the turn's statements. */
static int count_raw(eu_store *s, const char *sql) {
  sqlite3_stmt *st;
  int n = -1;
  ASSERT_EQ(sqlite3_prepare_v2(eu_store_db(s), sql, -1, &st, NULL), SQLITE_OK);
  if (sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  return n;
}

static void refused(eu_store *s, const char *sql, const char *reason) {
  int rc = sql_run(s, sql);
  if (rc != EU_ESQL) fprintf(stderr, "not refused (%d): %s\n", rc, sql);
  ASSERT_EQ(rc, EU_ESQL);
  ASSERT_CONTAINS(eu_store_errmsg(s), reason);
}

/* How many of the store's own tables the database holds. */
static int host_tables(eu_store *s) {
  return count_raw(s, "SELECT count(*) FROM sqlite_master WHERE name IN ('_eutaxy_kv', '_eutaxy_alarm')");
}

/* C API */

static void test_open_creates_host_tables(void) {
  eu_store *s = open_store();
  ASSERT_EQ(host_tables(s), 2);
  ASSERT_EQ(count_raw(s, "PRAGMA foreign_keys"), 1);
  ASSERT(!eu_store_in_turn(s));
  eu_store_close(s);
}

static void test_open_reports_a_bad_path(void) {
  eu_store *s = (eu_store *)1;
  char err[EU_ERRLEN] = "";
  ASSERT_EQ(eu_store_open(&s, "/nonexistent-dir/x/y.db", err, sizeof err), EU_ESQL);
  ASSERT(s == NULL);
  ASSERT_CONTAINS(err, "cannot open /nonexistent-dir/x/y.db");
}

static void test_turn_commits_and_rolls_back(void) {
  eu_store *s = open_store();
  ASSERT_OK(eu_store_commit(s));    /* no turn: nothing to do */
  ASSERT_OK(eu_store_rollback(s));
  ASSERT_EQ(sql_run(s, "CREATE TABLE t(x)"), 0);
  ASSERT(eu_store_in_turn(s));
  ASSERT_OK(eu_store_commit(s));
  ASSERT(!eu_store_in_turn(s));
  ASSERT_EQ(sql_run(s, "INSERT INTO t VALUES (1)"), 0);
  ASSERT_OK(eu_store_commit(s));
  ASSERT_EQ(sql_run(s, "INSERT INTO t VALUES (2)"), 0);
  ASSERT_EQ(scalar(s, "SELECT count(*) FROM t"), 2);
  ASSERT_OK(eu_store_rollback(s));
  ASSERT(!eu_store_in_turn(s));
  ASSERT_EQ(count_raw(s, "SELECT count(*) FROM t"), 1);
  eu_store_close(s);
}

static void test_failed_commit_rolls_back(void) {
  eu_store *s = open_store();
  ASSERT_EQ(sql_run(s, "CREATE TABLE p(id INTEGER PRIMARY KEY);"
                   "CREATE TABLE c(p INTEGER REFERENCES p(id) DEFERRABLE INITIALLY DEFERRED)"), 0);
  ASSERT_OK(eu_store_commit(s));
  ASSERT_EQ(sql_run(s, "INSERT INTO c VALUES (42)"), 0);  /* checked at COMMIT only */
  refused(s, "BEGIN", "BEGIN is not allowed");  /* an old refusal is not the commit's reason */
  ASSERT_EQ(eu_store_commit(s), EU_ESQL);
  ASSERT_CONTAINS(eu_store_errmsg(s), "FOREIGN KEY constraint failed (SQLITE_CONSTRAINT_FOREIGNKEY)");
  ASSERT(!eu_store_in_turn(s));
  ASSERT_EQ(count_raw(s, "SELECT count(*) FROM c"), 0);
  eu_store_close(s);
}

static void test_authorizer_refuses_transactions_and_attach(void) {
  eu_store *s = open_store();
  refused(s, "BEGIN", "BEGIN is not allowed in sql:exec: each turn of an invocation is one "
                      "implicit transaction; use storage:transactionSync(fn)");
  refused(s, "begin immediate transaction", "BEGIN is not allowed in sql:exec");
  refused(s, "COMMIT", "COMMIT is not allowed in sql:exec");
  refused(s, "END", "COMMIT is not allowed in sql:exec");
  refused(s, "ROLLBACK", "ROLLBACK is not allowed in sql:exec");
  refused(s, "SAVEPOINT a", "SAVEPOINT is not allowed in sql:exec: use storage:transactionSync(fn)");
  refused(s, "RELEASE a", "RELEASE is not allowed in sql:exec");
  refused(s, "ROLLBACK TO a", "ROLLBACK TO is not allowed in sql:exec");
  refused(s, "ATTACH ':memory:' AS other", "ATTACH is not allowed in sql:exec");
  refused(s, "DETACH other", "DETACH is not allowed in sql:exec");
  refused(s, "SELECT fts3_tokenizer('simple')", "the function fts3_tokenizer is not allowed");
  /* The refusal does not depend on the text: a comment changes nothing. */
  refused(s, "/* hello */ BEGIN", "BEGIN is not allowed");
  ASSERT(eu_store_in_turn(s));  /* the turn itself is untouched */
  eu_store_close(s);
}

static void test_authorizer_reserves_host_tables(void) {
  eu_store *s = open_store();
  ASSERT_EQ(sql_run(s, "CREATE TABLE mine(x)"), 0);
  refused(s, "SELECT * FROM _eutaxy_kv", "table _eutaxy_kv is reserved for eutaxy");
  refused(s, "SELECT count(*) FROM _EUTAXY_KV", "is reserved for eutaxy");
  refused(s, "SELECT x FROM mine WHERE x IN (SELECT key FROM _eutaxy_kv)", "table _eutaxy_kv is reserved");
  refused(s, "INSERT INTO _eutaxy_alarm(id, at) VALUES (1, 5)", "table _eutaxy_alarm is reserved");
  refused(s, "UPDATE _eutaxy_alarm SET at = 1", "table _eutaxy_alarm is reserved");
  refused(s, "DELETE FROM _eutaxy_kv", "table _eutaxy_kv is reserved");
  refused(s, "DROP TABLE _eutaxy_kv", "table _eutaxy_kv is reserved");
  refused(s, "ALTER TABLE _eutaxy_kv RENAME TO kv", "table _eutaxy_kv is reserved");
  refused(s, "CREATE INDEX i ON _eutaxy_kv(value)", "table _eutaxy_kv is reserved");
  refused(s, "CREATE TABLE _eutaxy_mine(x)", "table _eutaxy_mine is reserved");
  refused(s, "CREATE INDEX _eutaxy_i ON mine(x)", "the name _eutaxy_i is reserved");
  /* SQLite checks a view's reads where the view is used, not where it is made. */
  ASSERT_EQ(sql_run(s, "CREATE VIEW v AS SELECT * FROM _eutaxy_kv"), 0);
  refused(s, "SELECT * FROM v", "table _eutaxy_kv is reserved");
  refused(s, "SELECT count(*) FROM v", "table _eutaxy_kv is reserved");
  refused(s, "CREATE TRIGGER tr AFTER INSERT ON _eutaxy_kv BEGIN SELECT 1; END", "table _eutaxy_kv is reserved");
  /* A trigger of the user's own reaches the host table only through the
   * statement that fires it, which the authorizer sees whole. */
  if (sql_run(s, "CREATE TRIGGER tr AFTER INSERT ON mine BEGIN DELETE FROM _eutaxy_kv; END") == 0)
    refused(s, "INSERT INTO mine VALUES (1)", "table _eutaxy_kv is reserved");
  else
    ASSERT_CONTAINS(eu_store_errmsg(s), "table _eutaxy_kv is reserved");
  eu_store_close(s);
}

static void test_internal_sql_bypasses_the_authorizer(void) {
  eu_store *s = open_store();
  const void *val;
  size_t vlen;
  ASSERT_OK(eu_store_exec_internal(s, "INSERT INTO _eutaxy_kv VALUES ('k', x'01')"));
  ASSERT_EQ(eu_store_kv_get(s, "k", 1, &val, &vlen), 1);
  ASSERT(vlen == 1 && *(const char *)val == 1);
  ASSERT_EQ(eu_store_exec_internal(s, "SELEC"), EU_ESQL);
  ASSERT_CONTAINS(eu_store_errmsg(s), "syntax error (SQLITE_ERROR)");
  /* and user SQL is policed again afterwards */
  refused(s, "SELECT * FROM _eutaxy_kv", "reserved");
  eu_store_close(s);
}

static void test_syntax_error_carries_sqlite_text(void) {
  eu_store *s = open_store();
  ASSERT_EQ(sql_run(s, "SELEC 1"), EU_ESQL);
  ASSERT_CONTAINS(eu_store_errmsg(s), "near \"SELEC\": syntax error (SQLITE_ERROR)");
  ASSERT_EQ(sql_run(s, "CREATE TABLE u(x UNIQUE); INSERT INTO u VALUES (1); INSERT INTO u VALUES (1)"), EU_ESQL);
  ASSERT_CONTAINS(eu_store_errmsg(s), "UNIQUE constraint failed: u.x (SQLITE_CONSTRAINT_UNIQUE)");
  eu_store_close(s);
}

static void test_multi_statement_prepares_the_last(void) {
  eu_store *s = open_store();
  sqlite3_stmt *st;
  const char *sql = "CREATE TABLE a(x); INSERT INTO a VALUES (1); INSERT INTO a VALUES (2);\n"
                    "SELECT sum(x) FROM a WHERE x > ?; -- trailing comment\n";
  ASSERT_OK(eu_store_touch(s));
  ASSERT_OK(eu_store_prepare(s, sql, strlen(sql), &st));
  ASSERT(st != NULL);
  ASSERT_EQ(sqlite3_bind_parameter_count(st), 1);
  sqlite3_bind_int(st, 1, 0);
  ASSERT_EQ(eu_store_step(s, st), 1);
  ASSERT_EQ(sqlite3_column_int(st, 0), 3);
  eu_store_reset(s, st);
  ASSERT_OK(eu_store_prepare(s, "  ;; -- nothing\n", 16, &st));
  ASSERT(st == NULL);
  eu_store_close(s);
}

static void test_statement_cache_reuses_and_evicts(void) {
  eu_store *s = open_store();
  sqlite3_stmt *a, *b, *st = NULL;
  char sql[64];
  int i, n = 0;
  ASSERT_OK(eu_store_touch(s));
  ASSERT_OK(eu_store_prepare(s, "SELECT 1", 8, &a));
  eu_store_reset(s, a);
  ASSERT_OK(eu_store_prepare(s, "SELECT 1", 8, &b));
  eu_store_reset(s, b);
  ASSERT(a == b);
  for (i = 0; i < 200; i++) {
    snprintf(sql, sizeof sql, "SELECT %d + 1", i);
    ASSERT_EQ(scalar(s, sql), i + 1);
  }
  for (i = 0; i < 200; i += 7) {  /* the evicted ones come back */
    snprintf(sql, sizeof sql, "SELECT %d + 1", i);
    ASSERT_EQ(scalar(s, sql), i + 1);
  }
  while ((st = sqlite3_next_stmt(eu_store_db(s), st)) != NULL) n++;
  ASSERT(n <= 64 + 16);  /* the cache, and the host's statements */
  eu_store_close(s);
}

static void test_cached_statement_survives_schema_change(void) {
  eu_store *s = open_store();
  ASSERT_EQ(sql_run(s, "CREATE TABLE t(a); INSERT INTO t VALUES (1)"), 0);
  ASSERT_EQ(sql_run(s, "SELECT * FROM t"), 1);
  ASSERT_EQ(sql_run(s, "ALTER TABLE t ADD COLUMN b"), 0);
  ASSERT_EQ(sql_run(s, "SELECT * FROM t"), 1);
  /* a recompiled statement is checked again by the authorizer */
  ASSERT_EQ(sql_run(s, "CREATE VIEW v AS SELECT * FROM t"), 0);
  ASSERT_EQ(sql_run(s, "SELECT * FROM v"), 1);
  eu_store_close(s);
}

static void test_savepoints_nest(void) {
  eu_store *s = open_store();
  ASSERT_EQ(eu_store_release(s), EU_EINVAL);
  ASSERT_EQ(eu_store_rollback_to(s), EU_EINVAL);
  ASSERT_EQ(sql_run(s, "CREATE TABLE t(x)"), 0);
  ASSERT_OK(eu_store_savepoint(s));
  ASSERT_EQ(sql_run(s, "INSERT INTO t VALUES (1)"), 0);
  ASSERT_OK(eu_store_savepoint(s));
  ASSERT_EQ(sql_run(s, "INSERT INTO t VALUES (2)"), 0);
  ASSERT_OK(eu_store_savepoint(s));
  ASSERT_EQ(sql_run(s, "INSERT INTO t VALUES (3)"), 0);
  ASSERT_OK(eu_store_release(s));
  ASSERT_OK(eu_store_rollback_to(s));  /* 2 and 3 go */
  ASSERT_EQ(scalar(s, "SELECT group_concat(x) FROM t"), 1);
  ASSERT_OK(eu_store_release(s));
  ASSERT_EQ(eu_store_release(s), EU_EINVAL);
  ASSERT(eu_store_in_turn(s));  /* the savepoints lived inside the turn */
  ASSERT_OK(eu_store_commit(s));
  ASSERT_EQ(count_raw(s, "SELECT count(*) FROM t"), 1);
  /* a savepoint outside a turn opens the turn, and release does not end it */
  ASSERT_OK(eu_store_savepoint(s));
  ASSERT_EQ(sql_run(s, "INSERT INTO t VALUES (4)"), 0);
  ASSERT_OK(eu_store_release(s));
  ASSERT(eu_store_in_turn(s));
  ASSERT_OK(eu_store_rollback(s));
  ASSERT_EQ(count_raw(s, "SELECT count(*) FROM t"), 1);
  eu_store_close(s);
}

static void test_alarm_row_and_dirty_flag(void) {
  eu_store *s = open_store();
  int has, retry;
  int64_t at;
  ASSERT_OK(eu_store_get_alarm(s, &has, &at, &retry));
  ASSERT_EQ(has, 0);
  ASSERT(!eu_store_in_turn(s));  /* the host reads the alarm between turns */
  ASSERT(!eu_store_alarm_dirty(s));
  ASSERT_OK(eu_store_set_alarm(s, 1700000000123LL, 0));
  ASSERT(eu_store_in_turn(s));  /* a write goes in the turn */
  ASSERT(eu_store_alarm_dirty(s));
  eu_store_clear_alarm_dirty(s);
  ASSERT_OK(eu_store_set_alarm(s, 5000, 3));
  ASSERT_OK(eu_store_get_alarm(s, &has, &at, &retry));
  ASSERT(has && at == 5000 && retry == 3);
  ASSERT_OK(eu_store_commit(s));
  eu_store_clear_alarm_dirty(s);
  ASSERT_OK(eu_store_delete_alarm(s));
  ASSERT(eu_store_alarm_dirty(s));
  ASSERT_OK(eu_store_get_alarm(s, &has, &at, &retry));
  ASSERT_EQ(has, 0);
  ASSERT_OK(eu_store_rollback(s));  /* the delete is undone, the flag stays */
  ASSERT(eu_store_alarm_dirty(s));
  ASSERT_OK(eu_store_get_alarm(s, &has, &at, &retry));
  ASSERT(has && at == 5000);
  eu_store_close(s);
}

/* The alarm row the store remembers goes back with every way the row does. */
static void test_alarm_read_after_every_undo(void) {
  eu_store *s = open_store();
  int has, retry;
  int64_t at;
  ASSERT_OK(eu_store_set_alarm(s, 1000, 0));
  ASSERT_OK(eu_store_commit(s));
  /* transactionSync's function failed */
  ASSERT_OK(eu_store_savepoint(s));
  ASSERT_OK(eu_store_set_alarm(s, 2000, 1));
  ASSERT_OK(eu_store_get_alarm(s, &has, &at, &retry));
  ASSERT(has && at == 2000 && retry == 1);
  ASSERT_OK(eu_store_rollback_to(s));
  ASSERT_OK(eu_store_get_alarm(s, &has, &at, &retry));
  ASSERT(has && at == 1000 && retry == 0);
  ASSERT_OK(eu_store_commit(s));
  /* a checkpoint gone back to */
  ASSERT_OK(eu_store_baseline_begin(s));
  ASSERT_OK(eu_store_checkpoint(s));
  ASSERT_OK(eu_store_delete_alarm(s));
  ASSERT_OK(eu_store_commit(s));
  ASSERT_OK(eu_store_get_alarm(s, &has, &at, &retry));
  ASSERT_EQ(has, 0);
  ASSERT_OK(eu_store_checkpoint_back(s, 1, 0));
  ASSERT_OK(eu_store_get_alarm(s, &has, &at, &retry));
  ASSERT(has && at == 1000);
  /* the run's transaction ended without a commit */
  ASSERT_OK(eu_store_set_alarm(s, 3000, 0));
  ASSERT_OK(eu_store_commit(s));
  ASSERT_OK(eu_store_baseline_end(s));
  ASSERT_OK(eu_store_get_alarm(s, &has, &at, &retry));
  ASSERT(has && at == 1000);
  /* the host's own SQL */
  ASSERT_OK(eu_store_exec_internal(s, "DELETE FROM _eutaxy_alarm"));
  ASSERT_OK(eu_store_get_alarm(s, &has, &at, &retry));
  ASSERT_EQ(has, 0);
  eu_store_close(s);
}

typedef struct collect {
  char keys[256];
  int n, stop_after;
} collect;

static int collect_each(void *ud, const char *key, size_t klen, const void *val, size_t vlen) {
  collect *c = ud;
  strncat(c->keys, key, klen);
  strcat(c->keys, ",");
  (void)val;
  ASSERT_EQ(vlen, 1);
  return ++c->n == c->stop_after ? 99 : 0;
}

static void test_kv_in_c(void) {
  eu_store *s = open_store();
  const void *val;
  size_t vlen;
  eu_kv_range r = { NULL, 0, NULL, 0, -1, 0 };
  collect c;
  const char *keys[] = { "b", "a", "ab", "c\xff", "c" };
  int i;
  ASSERT_EQ(eu_store_kv_get(s, "a", 1, &val, &vlen), 0);
  for (i = 0; i < 5; i++) ASSERT_OK(eu_store_kv_put(s, keys[i], strlen(keys[i]), "v", 1));
  ASSERT_OK(eu_store_kv_put(s, "empty", 5, "", 0));
  ASSERT_EQ(eu_store_kv_get(s, "empty", 5, &val, &vlen), 1);
  ASSERT_EQ(vlen, 0);
  ASSERT_EQ(eu_store_kv_delete(s, "empty", 5), 1);
  ASSERT_EQ(eu_store_kv_delete(s, "empty", 5), 0);
  ASSERT_EQ(eu_store_kv_get(s, "ab", 2, &val, &vlen), 1);
  ASSERT(vlen == 1 && memcmp(val, "v", 1) == 0);
  memset(&c, 0, sizeof c);
  ASSERT_OK(eu_store_kv_list(s, &r, collect_each, &c));
  ASSERT(strcmp(c.keys, "a,ab,b,c,c\xff,") == 0);  /* bytewise */
  memset(&c, 0, sizeof c);
  r.reverse = 1;
  r.limit = 2;
  ASSERT_OK(eu_store_kv_list(s, &r, collect_each, &c));
  ASSERT(strcmp(c.keys, "c\xff,c,") == 0);
  memset(&c, 0, sizeof c);
  r.reverse = 0;
  r.limit = -1;
  r.lo = "ab";
  r.lolen = 2;
  r.hi = "c";
  r.hilen = 1;
  c.stop_after = 5;
  ASSERT_OK(eu_store_kv_list(s, &r, collect_each, &c));
  ASSERT(strcmp(c.keys, "ab,b,") == 0);
  memset(&c, 0, sizeof c);
  c.stop_after = 1;
  ASSERT_EQ(eu_store_kv_list(s, &r, collect_each, &c), 99);
  ASSERT_OK(eu_store_kv_delete_all(s));
  memset(&c, 0, sizeof c);
  r.lo = r.hi = NULL;
  ASSERT_OK(eu_store_kv_list(s, &r, collect_each, &c));
  ASSERT_EQ(c.n, 0);
  eu_store_close(s);
}

/* The object's own tables, views and the like, counted straight from the schema. */
static int user_objects(eu_store *s) {
  return count_raw(s, "SELECT count(*) FROM sqlite_schema WHERE name NOT LIKE '\\_eutaxy\\_%' ESCAPE '\\' "
                      "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'");
}

static void test_delete_all_drops_everything_but_the_host_tables(void) {
  eu_store *s = open_store();
  const void *val;
  size_t vlen;
  int has, retry;
  int64_t at;
  ASSERT_OK(sql_run(s, "CREATE TABLE \"odd \"\"name\" (x); CREATE INDEX i ON \"odd \"\"name\"(x);"
                       "CREATE VIEW v AS SELECT 1; CREATE TEMP TABLE tmp (y); INSERT INTO tmp VALUES (1);"
                       "CREATE TABLE p (id INTEGER PRIMARY KEY); CREATE TABLE c (p REFERENCES p(id));"
                       "INSERT INTO p VALUES (1); INSERT INTO c VALUES (1)"));
  ASSERT_OK(eu_store_exec_internal(s, "CREATE TABLE eutaxy_engine (z)"));
  ASSERT_OK(eu_store_kv_put(s, "k", 1, "v", 1));
  ASSERT_OK(eu_store_set_alarm(s, 1000, 0));
  ASSERT_OK(eu_store_commit(s));
  eu_store_clear_alarm_dirty(s);
  ASSERT_EQ(user_objects(s), 6);
  ASSERT_OK(eu_store_delete_all(s));
  ASSERT(eu_store_turn_wrote(s));
  ASSERT(eu_store_alarm_dirty(s));
  ASSERT_OK(eu_store_commit(s));
  ASSERT_EQ(user_objects(s), 0);
  ASSERT_EQ(count_raw(s, "SELECT count(*) FROM sqlite_temp_schema"), 0);
  ASSERT_EQ(eu_store_kv_get(s, "k", 1, &val, &vlen), 0);
  ASSERT_OK(eu_store_get_alarm(s, &has, &at, &retry));
  ASSERT_EQ(has, 0);
  /* nothing left to drop: a deleteAll that changes nothing writes nothing */
  ASSERT_OK(eu_store_delete_all(s));
  ASSERT(!eu_store_turn_wrote(s));
  ASSERT_OK(eu_store_commit(s));
  eu_store_close(s);
}

/* EU_STORE_LAZY_TABLES: no host table until a write needs it; reads of
 * one that is not there read nothing; a rollback of the write that made
 * one takes it away, and the reads see that. */
static void test_lazy_tables_come_with_their_first_write(void) {
  eu_store *s;
  const void *val;
  size_t vlen;
  eu_kv_range r = { NULL, 0, NULL, 0, -1, 0 };
  collect c;
  int has, retry;
  int64_t at;
  open_flags = EU_STORE_LAZY_TABLES;
  s = open_store();
  open_flags = 0;
  ASSERT_EQ(host_tables(s), 0);
  ASSERT_OK(eu_store_get_alarm(s, &has, &at, &retry));
  ASSERT_EQ(has, 0);
  ASSERT_EQ(eu_store_kv_get(s, "a", 1, &val, &vlen), 0);
  ASSERT_EQ(eu_store_kv_delete(s, "a", 1), 0);
  memset(&c, 0, sizeof c);
  ASSERT_OK(eu_store_kv_list(s, &r, collect_each, &c));
  ASSERT_EQ(c.n, 0);
  ASSERT_OK(eu_store_kv_delete_all(s));
  ASSERT_OK(eu_store_delete_alarm(s));
  ASSERT(eu_store_alarm_dirty(s));
  ASSERT_OK(eu_store_delete_all(s));
  ASSERT_OK(eu_store_commit(s));
  ASSERT_EQ(host_tables(s), 0);  /* none of that made one */
  /* a write makes its table, in its turn: a rollback takes both */
  ASSERT_OK(eu_store_set_alarm(s, 1000, 2));
  ASSERT_OK(eu_store_kv_put(s, "a", 1, "v", 1));
  ASSERT_EQ(host_tables(s), 2);
  ASSERT_OK(eu_store_rollback(s));
  ASSERT_EQ(host_tables(s), 0);
  ASSERT_OK(eu_store_get_alarm(s, &has, &at, &retry));
  ASSERT_EQ(has, 0);
  ASSERT_EQ(eu_store_kv_get(s, "a", 1, &val, &vlen), 0);
  /* and the statements prepared while it was there work when it is made again */
  ASSERT_OK(eu_store_savepoint(s));
  ASSERT_OK(eu_store_set_alarm(s, 2000, 0));
  ASSERT_OK(eu_store_rollback_to(s));
  ASSERT_OK(eu_store_get_alarm(s, &has, &at, &retry));
  ASSERT_EQ(has, 0);
  ASSERT_OK(eu_store_set_alarm(s, 3000, 1));
  ASSERT_OK(eu_store_kv_put(s, "b", 1, "w", 1));
  ASSERT_OK(eu_store_commit(s));
  ASSERT_OK(eu_store_get_alarm(s, &has, &at, &retry));
  ASSERT(has && at == 3000 && retry == 1);
  ASSERT_EQ(eu_store_kv_get(s, "b", 1, &val, &vlen), 1);
  ASSERT(vlen == 1 && memcmp(val, "w", 1) == 0);
  eu_store_close(s);
}

/* The tests of the pairs and the alarm, on a store that makes its tables lazily. */
#define LAZY(fn) \
  static void lazy_##fn(void) { \
    open_flags = EU_STORE_LAZY_TABLES; \
    fn(); \
    open_flags = 0; \
  }
LAZY(test_alarm_row_and_dirty_flag)
LAZY(test_alarm_read_after_every_undo)
LAZY(test_kv_in_c)
LAZY(test_delete_all_drops_everything_but_the_host_tables)

/* What the checker relies on to rewind a run past a deleteAll. */
static void test_delete_all_is_undone_by_a_checkpoint(void) {
  eu_store *s = open_store();
  ASSERT_OK(sql_run(s, "CREATE TABLE t (x); INSERT INTO t VALUES (1), (2)"));
  ASSERT_OK(eu_store_set_alarm(s, 1000, 0));
  ASSERT_OK(eu_store_commit(s));
  ASSERT_OK(eu_store_baseline_begin(s));
  ASSERT_OK(eu_store_checkpoint(s));
  ASSERT_OK(eu_store_delete_all(s));
  ASSERT_OK(eu_store_commit(s));
  ASSERT_OK(sql_run(s, "CREATE TABLE t (other)"));
  ASSERT_OK(eu_store_commit(s));
  ASSERT_OK(eu_store_checkpoint_back(s, 1, 0));
  ASSERT_EQ(scalar(s, "SELECT sum(x) FROM t"), 3);
  ASSERT_EQ(alarm_at(s), 1000);
  ASSERT_OK(eu_store_rollback(s));
  ASSERT_OK(eu_store_baseline_end(s));
  eu_store_close(s);
}

/* A return to a checkpoint brings back the alarm row as that checkpoint
 * began, whichever marks above it go: its dirty flag, and the answer,
 * from what the store knew then, without reading the row (a build with
 * assertions reads it too, and checks the answer). */
static void test_alarm_as_each_checkpoint_began(void) {
  eu_store *s = open_store();
  int has, retry;
  int64_t at;
  ASSERT_OK(eu_store_baseline_begin(s));
  ASSERT_OK(eu_store_set_alarm(s, 1000, 0));
  ASSERT_OK(eu_store_commit(s));
  eu_store_clear_alarm_dirty(s);
  ASSERT_OK(eu_store_checkpoint(s));                /* 1: 1000, clean */
  ASSERT_OK(eu_store_set_alarm(s, 2000, 1));
  ASSERT_OK(eu_store_commit(s));
  ASSERT_OK(eu_store_checkpoint(s));                /* 2: 2000, retry 1 */
  ASSERT_OK(eu_store_set_alarm(s, 3000, 0));
  ASSERT_OK(eu_store_commit(s));
  ASSERT_OK(eu_store_checkpoint(s));                /* 3: 3000 */
  ASSERT_OK(eu_store_delete_alarm(s));
  ASSERT_OK(eu_store_commit(s));
  eu_store_clear_alarm_dirty(s);
  ASSERT_OK(eu_store_checkpoint_back(s, 2, 1));     /* back to 2, kept */
  ASSERT(eu_store_alarm_dirty(s));                  /* as 2 began: set since 1 */
  ASSERT_OK(eu_store_get_alarm(s, &has, &at, &retry));
  ASSERT(has && at == 2000 && retry == 1);
  ASSERT_OK(eu_store_set_alarm(s, 4000, 0));
  ASSERT_OK(eu_store_commit(s));
  ASSERT_OK(eu_store_checkpoint(s));                /* 3 again: 4000 */
  ASSERT_OK(eu_store_delete_alarm(s));
  ASSERT_OK(eu_store_commit(s));
  ASSERT_OK(eu_store_checkpoint_back(s, 1, 1));     /* 3, kept */
  ASSERT_OK(eu_store_get_alarm(s, &has, &at, &retry));
  ASSERT(has && at == 4000 && retry == 0);
  ASSERT_OK(eu_store_set_alarm(s, 5000, 0));        /* a turn on the fresh mark, rolled back */
  ASSERT_OK(eu_store_rollback(s));
  ASSERT_OK(eu_store_get_alarm(s, &has, &at, &retry));
  ASSERT(has && at == 4000);
  ASSERT_OK(eu_store_checkpoint_back(s, 3, 0));     /* 1, forgotten */
  ASSERT(!eu_store_alarm_dirty(s));                 /* as 1 began */
  ASSERT_OK(eu_store_get_alarm(s, &has, &at, &retry));
  ASSERT(has && at == 1000 && retry == 0);
  ASSERT_OK(eu_store_delete_alarm(s));
  ASSERT_OK(eu_store_commit(s));
  ASSERT_OK(eu_store_checkpoint(s));                /* 1 again: none */
  ASSERT_OK(eu_store_set_alarm(s, 6000, 2));
  ASSERT_OK(eu_store_commit(s));
  ASSERT_OK(eu_store_checkpoint_back(s, 1, 0));
  ASSERT_OK(eu_store_get_alarm(s, &has, &at, &retry));
  ASSERT_EQ(has, 0);
  ASSERT_OK(eu_store_baseline_end(s));
  ASSERT_OK(eu_store_get_alarm(s, &has, &at, &retry));
  ASSERT_EQ(has, 0);  /* the baseline's start: no alarm */
  eu_store_close(s);
}

/* A mark kept by checkpoint_back is a mark again: a later return to it,
 * after more writes, finds the same state, and the marks made before it
 * still count (the world keeps the checkpoint it rewinds to). */
static void test_checkpoint_back_keeps_the_mark(void) {
  eu_store *s = open_store();
  ASSERT_OK(sql_run(s, "CREATE TABLE t (x); INSERT INTO t VALUES (1)"));
  ASSERT_OK(eu_store_commit(s));
  ASSERT_OK(eu_store_baseline_begin(s));
  ASSERT_OK(eu_store_checkpoint(s));             /* 1: sum 1 */
  ASSERT_OK(sql_run(s, "INSERT INTO t VALUES (10)"));
  ASSERT_OK(eu_store_commit(s));
  ASSERT_OK(eu_store_checkpoint(s));             /* 2: sum 11 */
  ASSERT_OK(sql_run(s, "INSERT INTO t VALUES (100)"));
  ASSERT_OK(eu_store_commit(s));
  ASSERT_OK(eu_store_checkpoint(s));             /* 3: sum 111 */
  ASSERT_OK(sql_run(s, "INSERT INTO t VALUES (1000)"));
  ASSERT_OK(eu_store_commit(s));
  ASSERT_OK(eu_store_checkpoint_back(s, 2, 1));     /* back to 2, kept */
  ASSERT_EQ(scalar(s, "SELECT sum(x) FROM t"), 11);
  ASSERT_OK(sql_run(s, "INSERT INTO t VALUES (5)"));
  ASSERT_OK(eu_store_commit(s));
  ASSERT_OK(eu_store_checkpoint_back(s, 1, 1));     /* 2 again */
  ASSERT_EQ(scalar(s, "SELECT sum(x) FROM t"), 11);
  ASSERT_OK(sql_run(s, "INSERT INTO t VALUES (7)"));
  ASSERT_OK(eu_store_commit(s));
  ASSERT_OK(eu_store_checkpoint_back(s, 2, 0));     /* 1, forgotten */
  ASSERT_EQ(scalar(s, "SELECT sum(x) FROM t"), 1);
  ASSERT_OK(eu_store_rollback(s));
  ASSERT_OK(eu_store_baseline_end(s));
  ASSERT_EQ(scalar(s, "SELECT sum(x) FROM t"), 1);
  eu_store_close(s);
}

/* A checkpoint's savepoint journals the pages written under it, and the
 * store counts that journal (eu_store_journal_bytes), apart from its
 * statements and schema; a return to the checkpoint keeps it, and the end
 * of the run's transaction gives it all back. */
static void test_journal_bytes(void) {
  eu_store *s = open_store();
  size_t before;
  int i;
  ASSERT_OK(sql_run(s, "CREATE TABLE t (a INTEGER PRIMARY KEY, b TEXT)"));
  ASSERT_OK(sql_run(s, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 400) "
                       "INSERT INTO t SELECT x, printf('%0200d', x) FROM c"));
  ASSERT_OK(eu_store_commit(s));
  ASSERT_EQ(scalar(s, "SELECT count(*) FROM t"), 400);  /* a statement prepared and kept */
  ASSERT_OK(eu_store_commit(s));
  before = eu_store_journal_bytes(s);
  ASSERT_OK(eu_store_baseline_begin(s));
  ASSERT_OK(eu_store_checkpoint(s));
  for (i = 0; i < 4; i++) {
    ASSERT_OK(sql_run(s, "UPDATE t SET b = b || 'x'"));
    ASSERT_OK(eu_store_commit(s));
    ASSERT_OK(eu_store_checkpoint(s));
  }
  /* every page of t, at least once: 400 rows of 200 bytes */
  ASSERT(eu_store_journal_bytes(s) > before + 80000);
  ASSERT_OK(eu_store_checkpoint_back(s, 5, 1));  /* the first, kept */
  ASSERT_EQ(scalar(s, "SELECT max(length(b)) FROM t"), 200);
  ASSERT_OK(eu_store_rollback(s));
  ASSERT(eu_store_journal_bytes(s) > before + 80000);
  ASSERT_OK(eu_store_baseline_end(s));
  ASSERT(eu_store_journal_bytes(s) < before + 16384);
  eu_store_close(s);
}

/* The first turn after a checkpoint, or after a return to a kept one, ends
 * on the checkpoint's savepoint instead of one of its own: rolled back, it
 * leaves the database as the checkpoint began and the mark still there;
 * committed, its writes go with the mark's. The turn after it has a
 * savepoint of its own again, as has one after a write outside any turn,
 * which a rollback must not take away. */
static void test_turns_on_a_fresh_checkpoint(void) {
  eu_store *s = open_store();
  ASSERT_OK(sql_run(s, "CREATE TABLE t (x); INSERT INTO t VALUES (1)"));
  ASSERT_OK(eu_store_commit(s));
  ASSERT_OK(eu_store_baseline_begin(s));
  ASSERT_OK(eu_store_checkpoint(s));
  ASSERT_OK(sql_run(s, "INSERT INTO t VALUES (10)"));
  ASSERT_OK(eu_store_rollback(s));
  ASSERT_EQ(count_raw(s, "SELECT sum(x) FROM t"), 1);
  ASSERT_OK(sql_run(s, "INSERT INTO t VALUES (100)"));   /* on the mark again */
  ASSERT_OK(eu_store_commit(s));
  ASSERT_OK(sql_run(s, "INSERT INTO t VALUES (1000)"));  /* a savepoint of its own */
  ASSERT_OK(eu_store_rollback(s));
  ASSERT_EQ(count_raw(s, "SELECT sum(x) FROM t"), 101);
  ASSERT_OK(eu_store_checkpoint_back(s, 1, 1));          /* kept: the mark is the database */
  ASSERT_EQ(count_raw(s, "SELECT sum(x) FROM t"), 1);
  ASSERT_OK(sql_run(s, "INSERT INTO t VALUES (5)"));
  ASSERT_OK(eu_store_rollback(s));
  ASSERT_EQ(count_raw(s, "SELECT sum(x) FROM t"), 1);
  ASSERT_OK(eu_store_exec_internal(s, "INSERT INTO t VALUES (50)"));  /* outside any turn */
  ASSERT_OK(sql_run(s, "INSERT INTO t VALUES (7)"));
  ASSERT_OK(eu_store_rollback(s));
  ASSERT_EQ(count_raw(s, "SELECT sum(x) FROM t"), 51);
  ASSERT_OK(eu_store_checkpoint_back(s, 1, 0));          /* forgotten: no mark left */
  ASSERT_EQ(count_raw(s, "SELECT sum(x) FROM t"), 1);
  ASSERT_OK(sql_run(s, "INSERT INTO t VALUES (3)"));
  ASSERT_OK(eu_store_rollback(s));
  ASSERT_EQ(count_raw(s, "SELECT sum(x) FROM t"), 1);
  ASSERT_OK(eu_store_baseline_end(s));
  ASSERT_EQ(count_raw(s, "SELECT sum(x) FROM t"), 1);
  eu_store_close(s);
}

static void test_delete_all_is_one_unit(void) {
  eu_store *s = open_store();
  ASSERT_OK(sql_run(s, "CREATE TABLE t (x); INSERT INTO t VALUES (1)"));
  ASSERT_OK(eu_store_commit(s));
  /* in a savepoint rolled back, as transactionSync undoes it */
  ASSERT_OK(eu_store_savepoint(s));
  ASSERT_OK(eu_store_delete_all(s));
  ASSERT_EQ(user_objects(s), 0);
  ASSERT_OK(eu_store_rollback_to(s));
  ASSERT_EQ(scalar(s, "SELECT x FROM t"), 1);
  ASSERT_OK(eu_store_commit(s));
  eu_store_close(s);
}

static void test_delete_all_drops_children_before_their_parents(void) {
  eu_store *s = open_store();
  char sql[160];
  int i;
  /* a01 refers to a00, a02 to a01, ...: listed by name, every parent
   * comes before its child, and SQLite refuses its drop until the child
   * has gone, a pass later */
  ASSERT_OK(sql_run(s, "CREATE TABLE a00 (id INTEGER PRIMARY KEY); INSERT INTO a00 VALUES (1)"));
  for (i = 1; i < 40; i++) {
    snprintf(sql, sizeof sql, "CREATE TABLE a%02d (id INTEGER PRIMARY KEY, up REFERENCES a%02d(id));"
             "INSERT INTO a%02d VALUES (1, 1)", i, i - 1, i);
    ASSERT_OK(sql_run(s, sql));
  }
  ASSERT_OK(eu_store_commit(s));
  ASSERT_OK(eu_store_delete_all(s));
  ASSERT_EQ(user_objects(s), 0);
  ASSERT_OK(eu_store_commit(s));
  eu_store_close(s);
}

static void test_database_size_is_page_count_times_page_size(void) {
  eu_store *s = open_store();
  int64_t before, after;
  ASSERT_OK(eu_store_database_size(s, &before));
  ASSERT_EQ(before, count_raw(s, "PRAGMA page_count") * count_raw(s, "PRAGMA page_size"));
  ASSERT_OK(sql_run(s, "CREATE TABLE b (x); INSERT INTO b VALUES (zeroblob(100000))"));
  ASSERT_OK(eu_store_database_size(s, &after));
  ASSERT(after >= before + 100000);
  ASSERT_OK(eu_store_rollback(s));
  ASSERT_OK(eu_store_database_size(s, &after));
  ASSERT_EQ(after, before);
  ASSERT_OK(eu_store_commit(s));
  eu_store_close(s);
}

/* Parking */

/* A file-backed store as serve opens one: WAL in exclusive mode, a table
 * of the host's made after the store's, a wal hook counting commits and a
 * wake hook counting reopenings. */
static char park_dir[] = "/tmp/eutaxy-park-XXXXXX";
static int park_commits, park_wakes;

static int count_commit(void *ud, sqlite3 *db, const char *name, int pages) {
  (void)ud; (void)db; (void)name; (void)pages;
  park_commits++;
  return SQLITE_OK;
}

static void count_wake(void *ud, eu_store *s) {
  ASSERT(ud == s);
  ASSERT(eu_store_parked(s));
  park_wakes++;
}

static eu_store *open_parkable(const char *name) {
  eu_store *s = NULL;
  char err[EU_ERRLEN], path[96];
  static int made;  /* mkdtemp's name may end in an X too */
  if (!made) {
    ASSERT(mkdtemp(park_dir) != NULL);
    made = 1;
  }
  snprintf(path, sizeof path, "%s/%s", park_dir, name);
  remove(path);
  ASSERT_OK(eu_store_open_with(&s, path, "PRAGMA locking_mode = EXCLUSIVE; PRAGMA journal_mode = WAL;",
                               "CREATE TABLE IF NOT EXISTS _eutaxy_host(x); PRAGMA synchronous = OFF;",
                               0, err, sizeof err));
  eu_store_wal_hook(s, count_commit, NULL);
  eu_store_on_wake(s, count_wake, s);
  park_commits = park_wakes = 0;
  return s;
}

static void end_turn(eu_store *s) {
  ASSERT_OK(eu_store_commit(s));
}

static void test_park_closes_the_connection_and_the_next_use_reopens_it(void) {
  eu_store *s = open_parkable("a.db");
  eu_store_limits l = { 0, NULL, 64 * 4096 };
  ASSERT_OK(eu_store_set_limits(s, &l));
  ASSERT_EQ(sql_run(s, "CREATE TABLE t(x)"), 0);
  ASSERT_EQ(sql_run(s, "INSERT INTO t VALUES (1), (2)"), 0);
  ASSERT_EQ(sql_run(s, "PRAGMA recursive_triggers = ON"), 0);
  ASSERT_OK(eu_store_set_alarm(s, 1234, 0));
  end_turn(s);
  ASSERT_EQ(park_commits, 1);
  ASSERT(*eu_store_mem_ptr(s) > 0);

  ASSERT_OK(eu_store_park(s));
  ASSERT(eu_store_parked(s));
  ASSERT(eu_store_db(s) == NULL);
  ASSERT_EQ(*eu_store_mem_ptr(s), 0);  /* the connection's memory went with it */
  ASSERT(!eu_store_in_turn(s));
  ASSERT_OK(eu_store_park(s));         /* parking a parked store is no error */
  ASSERT_EQ(park_wakes, 0);

  ASSERT_EQ(scalar(s, "SELECT sum(x) FROM t"), 3);  /* the next use reopens it */
  ASSERT_EQ(park_wakes, 1);
  ASSERT(!eu_store_parked(s));
  ASSERT_EQ(alarm_at(s), 1234);
  ASSERT_EQ(scalar(s, "PRAGMA recursive_triggers"), 1);  /* user SQL's setting came along */
  ASSERT_EQ(scalar(s, "PRAGMA max_page_count"), 64);     /* and the quota */
  ASSERT_EQ(scalar(s, "PRAGMA foreign_keys"), 1);
  ASSERT_EQ(sql_scalar(s, "SELECT count(*) FROM sqlite_master WHERE name = '_eutaxy_host'"), 1);
  ASSERT_EQ(sql_scalar(s, "PRAGMA synchronous"), 0);     /* the host's SQL ran again */
  ASSERT_EQ(sql_run(s, "INSERT INTO t VALUES (3)"), 0);
  end_turn(s);
  ASSERT_EQ(park_commits, 2);                            /* the wal hook too */
  eu_store_close(s);
}

static void test_park_is_refused_while_a_reopen_would_lose_something(void) {
  eu_store *s = open_store(), *f;
  unsigned char *img;
  size_t len;
  ASSERT_EQ(eu_store_park(s), EU_EINVAL);  /* in memory: the database is the connection */
  ASSERT_CONTAINS(eu_store_errmsg(s), "backed by its file");
  eu_store_close(s);

  f = open_parkable("b.db");
  ASSERT_EQ(sql_run(f, "CREATE TABLE t(x)"), 0);
  ASSERT_EQ(eu_store_park(f), EU_EINVAL);  /* a turn is open */
  ASSERT_CONTAINS(eu_store_errmsg(f), "a transaction is open");
  ASSERT(!eu_store_parked(f));
  end_turn(f);
  ASSERT_OK(eu_store_snapshot(f, &img, &len));
  ASSERT_EQ(sql_run(f, "CREATE TEMP TABLE scratch(y)"), 0);
  end_turn(f);
  ASSERT_EQ(eu_store_park(f), EU_EINVAL);
  ASSERT_CONTAINS(eu_store_errmsg(f), "temporary tables");
  eu_store_close(f);

  f = open_parkable("c.db");
  ASSERT_OK(eu_store_restore(f, img, len));
  ASSERT_EQ(eu_store_park(f), EU_EINVAL);  /* the image is in memory now */
  free(img);
  eu_store_close(f);
}

static void test_batching_begins_the_batch_at_the_first_touch(void) {
  eu_store *s = open_parkable("d.db");
  eu_store_batching(s, 1);
  ASSERT(!eu_store_in_baseline(s));
  ASSERT_EQ(sql_run(s, "CREATE TABLE t(x)"), 0);
  ASSERT(eu_store_in_baseline(s));
  end_turn(s);
  ASSERT_EQ(sql_run(s, "INSERT INTO t VALUES (1)"), 0);  /* a second turn of the same batch */
  end_turn(s);
  ASSERT_EQ(park_commits, 0);
  ASSERT_EQ(eu_store_park(s), EU_EINVAL);   /* the batch is open */
  ASSERT_OK(eu_store_baseline_commit(s));
  ASSERT_EQ(park_commits, 1);               /* the two turns were one commit */
  ASSERT_OK(eu_store_park(s));
  ASSERT_EQ(sql_run(s, "INSERT INTO t VALUES (2)"), 0);  /* wakes, and a new batch begins */
  ASSERT_EQ(park_wakes, 1);
  ASSERT(eu_store_in_baseline(s));
  end_turn(s);
  ASSERT_OK(eu_store_baseline_commit(s));
  ASSERT_EQ(scalar(s, "SELECT count(*) FROM t"), 2);
  end_turn(s);
  ASSERT_OK(eu_store_baseline_commit(s));
  eu_store_close(s);
}

static int count_statements(eu_store *s) {
  sqlite3_stmt *st = NULL;
  int n = 0;
  while ((st = sqlite3_next_stmt(eu_store_db(s), st)) != NULL) n++;
  return n;
}

/* What a batch and its turns run is prepared ahead: none of it is parsed
 * later, on the thread that runs the turns. */
static void test_prepare_turns_leaves_a_batch_nothing_to_prepare(void) {
  eu_store *s = open_parkable("h.db");
  int n;
  eu_store_batching(s, 1);
  ASSERT_OK(eu_store_prepare_turns(s));
  n = count_statements(s);
  ASSERT_OK(eu_store_touch(s));     /* the batch and a turn begin */
  ASSERT_OK(eu_store_commit(s));
  ASSERT_OK(eu_store_touch(s));
  ASSERT_OK(eu_store_rollback(s));  /* a turn rolled back */
  ASSERT_OK(eu_store_baseline_commit(s));
  ASSERT_OK(eu_store_touch(s));     /* a second batch */
  ASSERT_OK(eu_store_commit(s));
  ASSERT_OK(eu_store_baseline_commit(s));
  ASSERT_EQ(count_statements(s), n);
  ASSERT_OK(eu_store_prepare_turns(s));  /* again: nothing to do */
  ASSERT_EQ(count_statements(s), n);
  eu_store_close(s);
}

static void test_a_failed_reopen_fails_the_call_and_the_store_goes_on(void) {
  eu_store *s = open_parkable("e.db");
  char path[96];
  ASSERT_EQ(sql_run(s, "CREATE TABLE t(x)"), 0);
  end_turn(s);
  ASSERT_OK(eu_store_park(s));
  /* the file's directory is made unreadable by taking the file's place with a directory */
  snprintf(path, sizeof path, "%s/e.db", park_dir);
  ASSERT_EQ(rename(path, "/tmp/eutaxy-park-moved.db"), 0);
  ASSERT_EQ(mkdir(path, 0700), 0);
  ASSERT_EQ(eu_store_touch(s), EU_ESQL);
  ASSERT_CONTAINS(eu_store_errmsg(s), "cannot open");
  ASSERT(eu_store_parked(s));
  ASSERT_EQ(rmdir(path), 0);
  ASSERT_EQ(rename("/tmp/eutaxy-park-moved.db", path), 0);
  ASSERT_EQ(scalar(s, "SELECT count(*) FROM t"), 0);  /* the next use opens it */
  end_turn(s);
  eu_store_close(s);
}

/* A store whose database is an image in memory until the host writes it
 * to its file, as serve makes a new object's. */
static eu_store *open_image(const char *name, unsigned char **blank, size_t *blank_len) {
  static const char first[] = "PRAGMA locking_mode = EXCLUSIVE; PRAGMA journal_mode = WAL;";
  static const char then[] = "CREATE TABLE IF NOT EXISTS _eutaxy_host(x); PRAGMA synchronous = OFF;";
  eu_store *b, *s = NULL;
  char err[EU_ERRLEN], path[96];
  ASSERT_OK(eu_store_open_with(&b, NULL, first, then, 0, err, sizeof err));
  ASSERT_OK(eu_store_snapshot(b, blank, blank_len));
  eu_store_close(b);
  (*blank)[18] = (*blank)[19] = 2;  /* marked a WAL database, as a host's file would be */
  snprintf(path, sizeof path, "%s/%s", park_dir, name);
  remove(path);
  ASSERT_OK(eu_store_open_image(&s, path, *blank, *blank_len, first, then, 0, err, sizeof err));
  eu_store_wal_hook(s, count_commit, NULL);
  eu_store_on_wake(s, count_wake, s);
  park_commits = park_wakes = 0;
  return s;
}

static void test_an_image_stays_in_memory_until_its_file_is_written(void) {
  eu_store *s;
  unsigned char *blank, *copy;
  const unsigned char *img;
  size_t blank_len, len;
  sqlite3 *closing = (sqlite3 *)1;
  sqlite3_stmt *foreign;
  char path[96];
  FILE *f;
  s = open_image("f.db", &blank, &blank_len);
  snprintf(path, sizeof path, "%s/f.db", park_dir);
  ASSERT(eu_store_in_memory(s));
  ASSERT_EQ(sql_scalar(s, "SELECT count(*) FROM _eutaxy_host"), 0);  /* the image's tables */
  ASSERT_EQ(scalar(s, "PRAGMA foreign_keys"), 1);                     /* the connection's settings */
  end_turn(s);
  ASSERT_EQ(sql_run(s, "CREATE TABLE t(x)"), 0);
  ASSERT_EQ(sql_run(s, "INSERT INTO t VALUES (1), (2)"), 0);
  ASSERT_EQ(eu_store_image(s, &img, &len), EU_EINVAL);  /* a turn is open */
  ASSERT_CONTAINS(eu_store_errmsg(s), "a transaction is open");
  end_turn(s);
  ASSERT(access(path, F_OK) != 0);                      /* nothing is written */
  ASSERT_EQ(eu_store_park(s), EU_EINVAL);
  ASSERT_CONTAINS(eu_store_errmsg(s), "in memory");

  ASSERT_OK(eu_store_image(s, &img, &len));
  ASSERT(len > 100 && (copy = malloc(len)) != NULL);
  memcpy(copy, img, len);
  copy[18] = copy[19] = 2;
  ASSERT((f = fopen(path, "wb")) != NULL);
  ASSERT_EQ(fwrite(copy, 1, len, f), len);
  ASSERT_EQ(fclose(f), 0);
  free(copy);
  ASSERT_OK(eu_store_image_written(s, &closing));
  ASSERT(closing != NULL);
  ASSERT(sqlite3_next_stmt(closing, NULL) != NULL);      /* the store's statements, finalized by: */
  eu_store_close_handed(closing);
  ASSERT(eu_store_parked(s));
  ASSERT(!eu_store_in_memory(s));
  ASSERT_EQ(eu_store_image(s, &img, &len), EU_EINVAL);

  ASSERT_EQ(scalar(s, "SELECT sum(x) FROM t"), 3);     /* the next use opens the file */
  ASSERT_EQ(park_wakes, 1);
  ASSERT_EQ(sql_scalar(s, "PRAGMA synchronous"), 0);   /* first and then ran */
  end_turn(s);
  ASSERT_OK(eu_store_set_then(s, "PRAGMA synchronous = FULL;"));
  ASSERT_OK(eu_store_park(s));
  ASSERT_EQ(sql_run(s, "INSERT INTO t VALUES (3)"), 0);
  ASSERT_EQ(sql_scalar(s, "PRAGMA synchronous"), 2);   /* the new then */
  end_turn(s);
  ASSERT_EQ(park_commits, 1);                          /* into the file's WAL */
  eu_store_close(s);
  free(blank);

  /* one that cannot be parked stays in memory */
  s = open_image("g.db", &blank, &blank_len);
  ASSERT_EQ(sql_run(s, "CREATE TEMP TABLE scratch(y)"), 0);
  end_turn(s);
  ASSERT_OK(eu_store_image(s, &img, &len));
  ASSERT_EQ(eu_store_image_written(s, &closing), EU_EINVAL);
  ASSERT_CONTAINS(eu_store_errmsg(s), "temporary tables");
  ASSERT(closing == NULL);
  ASSERT(eu_store_in_memory(s));
  ASSERT_EQ(scalar(s, "SELECT count(*) FROM scratch"), 0);
  end_turn(s);
  eu_store_close(s);
  free(blank);

  /* nor one whose connection holds a statement the store did not prepare */
  s = open_image("g.db", &blank, &blank_len);
  ASSERT_EQ(sql_run(s, "CREATE TABLE t(x)"), 0);
  end_turn(s);
  ASSERT_EQ(sqlite3_prepare_v2(eu_store_db(s), "SELECT 1", -1, &foreign, NULL), SQLITE_OK);
  ASSERT_OK(eu_store_image(s, &img, &len));
  ASSERT_EQ(eu_store_image_written(s, &closing), EU_EINVAL);
  ASSERT_CONTAINS(eu_store_errmsg(s), "still prepared");
  ASSERT(closing == NULL);
  ASSERT(eu_store_in_memory(s));
  sqlite3_finalize(foreign);
  ASSERT_OK(eu_store_image(s, &img, &len));
  ASSERT_OK(eu_store_image_written(s, &closing));
  eu_store_close_handed(closing);
  eu_store_close(s);
  free(blank);
}

static void test_park_cleanup(void) {
  const char *names[] = { "a.db", "b.db", "c.db", "d.db", "e.db", "f.db", "g.db", "h.db" };
  const char *tails[] = { "", "-wal", "-journal" };
  char path[128];
  size_t i, j;
  for (i = 0; i < sizeof names / sizeof names[0]; i++)
    for (j = 0; j < sizeof tails / sizeof tails[0]; j++) {
      snprintf(path, sizeof path, "%s/%s%s", park_dir, names[i], tails[j]);
      remove(path);
    }
  ASSERT_EQ(rmdir(park_dir), 0);
}

static void test_snapshot_and_restore_round_trip(void) {
  eu_store *s = open_store();
  unsigned char *img, junk[4096];
  size_t len;
  int has, retry;
  int64_t at;
  ASSERT_EQ(sql_run(s, "CREATE TABLE t(x); INSERT INTO t VALUES (1), (2)"), 0);
  ASSERT_OK(eu_store_kv_put(s, "k", 1, "v", 1));
  ASSERT_OK(eu_store_set_alarm(s, 77, 0));
  ASSERT_EQ(eu_store_snapshot(s, &img, &len), EU_EINVAL);  /* inside a turn */
  ASSERT_OK(eu_store_commit(s));
  ASSERT_OK(eu_store_snapshot(s, &img, &len));
  ASSERT(len > 0);
  ASSERT_EQ(scalar(s, "SELECT count(*) FROM t"), 2);  /* cached before the restore */
  ASSERT_EQ(sql_run(s, "DELETE FROM t; DROP TABLE t; CREATE TABLE other(y)"), 0);
  ASSERT_OK(eu_store_kv_delete_all(s));
  ASSERT_OK(eu_store_delete_alarm(s));
  ASSERT_OK(eu_store_commit(s));
  ASSERT_EQ(sql_run(s, "INSERT INTO other VALUES (1)"), 0);  /* a turn left open */
  ASSERT_OK(eu_store_restore(s, img, len));
  ASSERT(!eu_store_in_turn(s));
  ASSERT_EQ(scalar(s, "SELECT count(*) FROM t"), 2);
  ASSERT_EQ(sql_run(s, "SELECT * FROM other"), EU_ESQL);
  ASSERT_CONTAINS(eu_store_errmsg(s), "no such table: other");
  ASSERT_OK(eu_store_get_alarm(s, &has, &at, &retry));
  ASSERT(has && at == 77);
  refused(s, "SELECT * FROM _eutaxy_kv", "reserved");  /* the authorizer survives */
  /* the restored image is resizable: it can grow */
  ASSERT_EQ(sql_run(s, "INSERT INTO t SELECT randomblob(1000) FROM t, t t2, t t3"), 0);
  ASSERT_OK(eu_store_commit(s));
  /* an image that is not a database */
  memset(junk, 'x', sizeof junk);
  ASSERT(eu_store_restore(s, junk, sizeof junk) < 0);
  ASSERT_OK(eu_store_restore(s, img, len));
  ASSERT_EQ(scalar(s, "SELECT count(*) FROM t"), 2);
  eu_store_rollback(s);
  free(img);
  eu_store_close(s);
}

/* The Lua binding */

typedef struct alloc_ctl {
  long count;    /* growing allocations since armed */
  long fail_at;  /* 0: never fail; n: fail the nth */
} alloc_ctl;

/* Lua assumes shrinking never fails, so only growth is made to fail. */
static void *test_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  alloc_ctl *a = ud;
  if (nsize == 0) {
    free(ptr);
    return NULL;
  }
  if (a->fail_at > 0 && (ptr == NULL || nsize > osize) && ++a->count >= a->fail_at) return NULL;
  return realloc(ptr, nsize);
}

typedef struct fixture {
  eu_store *s;
  lua_State *L;
  alloc_ctl alloc;
} fixture;

/* The source tree's lua/ folder, found from this file's path, so the test
 * runs from any build tree. */
static const char *luadir(void) {
  static char dir[4096];
  const char *tail = strstr(__FILE__, "host/test/test_store.c");
  size_t n = tail ? (size_t)(tail - __FILE__) : 0;
  snprintf(dir, sizeof dir, "%.*slua", (int)n, __FILE__);
  return dir;
}

static const char prelude[] =
  "local fns, luadir = ...\n"
  "package.path = luadir .. '/?.lua;' .. package.path\n"
  "storage = require('eutaxy.storage').new(fns)\n"
  "sql = storage.sql\n"
  "function eq(got, want, what)\n"
  "  if got ~= want then\n"
  "    error((what or 'value') .. ': expected ' .. tostring(want) .. ', got ' .. tostring(got), 2)\n"
  "  end\n"
  "end\n"
  "function fails(fn, text)\n"
  "  local ok, err = pcall(fn)\n"
  "  if ok then error('expected an error containing: ' .. text, 2) end\n"
  "  if not tostring(err):find(text, 1, true) then\n"
  "    error('error \"' .. tostring(err) .. '\" does not contain \"' .. text .. '\"', 2)\n"
  "  end\n"
  "  return err\n"
  "end\n";

static void lua_open_fixture(fixture *f) {
  f->s = open_store();
  f->alloc.count = 0;
  f->alloc.fail_at = 0;
  f->L = lua_newstate(test_alloc, &f->alloc);
  ASSERT(f->L != NULL);
  luaL_openlibs(f->L);
  ASSERT_EQ(luaL_loadbuffer(f->L, prelude, sizeof prelude - 1, "=prelude"), LUA_OK);
  eu_lstore_push(f->L, f->s);
  lua_pushstring(f->L, luadir());
  if (lua_pcall(f->L, 2, 0, 0) != LUA_OK) {
    fprintf(stderr, "prelude: %s\n", lua_tostring(f->L, -1));
    abort();
  }
}

static void lua_close_fixture(fixture *f) {
  lua_close(f->L);
  eu_store_close(f->s);
}

/* Runs chunk (named "test", so positions read test:LINE:) and fails the
 * test with Lua's message if it raises. */
#define LUA_RUN(f, chunk) lua_run((f), (chunk), __LINE__)
static void lua_run(fixture *f, const char *chunk, int line) {
  if (luaL_loadbuffer(f->L, chunk, strlen(chunk), "=test") != LUA_OK ||
      lua_pcall(f->L, 0, 0, 0) != LUA_OK) {
    fprintf(stderr, "%s:%d: Lua failed: %s\n", __FILE__, line, lua_tostring(f->L, -1));
    abort();
  }
}

static void test_lua_exec_runs_every_statement_and_binds_the_last(void) {
  fixture f;
  lua_open_fixture(&f);
  LUA_RUN(&f,
    "local c = sql:exec([[CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT);\n"
    "  INSERT INTO t(name) VALUES ('a');\n"
    "  INSERT INTO t(name) VALUES (?) RETURNING id]], 'b')\n"
    "eq(c:one().id, 2, 'returned id')\n"
    "eq(sql:exec('SELECT count(*) AS n FROM t'):one().n, 2)\n");
  lua_close_fixture(&f);
}

static void test_lua_exec_binds_each_type(void) {
  fixture f;
  lua_open_fixture(&f);
  LUA_RUN(&f,
    "local row = sql:exec('SELECT typeof(?) a, typeof(?) b, typeof(?) c, typeof(?) d, typeof(?) e,'\n"
    "  .. ' typeof(?) f, ?, ?, ?, ?, ?, ?', nil, true, 42, 1.5, 'text', '\\xff\\xfe',\n"
    "  nil, false, -7, 0.25, 'héllo', '\\0\\xff'):raw()[1]\n"
    "eq(row[1], 'null'); eq(row[2], 'integer'); eq(row[3], 'integer')\n"
    "eq(row[4], 'real'); eq(row[5], 'text'); eq(row[6], 'blob')\n"
    "eq(row[7], nil); eq(row[8], 0); eq(math.type(row[9]), 'integer'); eq(row[9], -7)\n"
    "eq(math.type(row[10]), 'float'); eq(row[10], 0.25); eq(row[11], 'héllo')\n"
    "eq(row[12], '\\0\\xff', 'a blob round trip'); eq(row.n, 12)\n"
    "eq(sql:exec('SELECT 9223372036854775807 AS big'):one().big, math.maxinteger)\n");
  lua_close_fixture(&f);
}

static void test_lua_exec_refuses_bad_bindings(void) {
  fixture f;
  lua_open_fixture(&f);
  LUA_RUN(&f,
    "fails(function() sql:exec('SELECT ?, ?', 1, {}) end, 'sql:exec: cannot bind a table (parameter 2)')\n"
    "fails(function() sql:exec('SELECT ?', print) end, 'sql:exec: cannot bind a function (parameter 1)')\n"
    "fails(function() sql:exec('SELECT ?, ?', 1, 2, 3) end, 'sql:exec: the statement takes 2 bindings, got 3')\n"
    "fails(function() sql:exec('SELECT ?') end, 'sql:exec: the statement takes 1 binding, got 0')\n"
    "fails(function() sql:exec('') end, 'sql:exec: the query holds no SQL statement')\n"
    "fails(function() sql:exec('  -- just a comment\\n;') end, 'no SQL statement')\n"
    "fails(function() sql:exec(nil) end, 'sql:exec: the query must be a string, got nil')\n"
    "fails(function() sql:exec('SELECT 1;\\0DROP TABLE x') end, 'the query contains a NUL byte')\n");
  lua_close_fixture(&f);
}

static void test_lua_cursor_api(void) {
  fixture f;
  lua_open_fixture(&f);
  LUA_RUN(&f,
    "sql:exec('CREATE TABLE t(id INTEGER, name TEXT, note TEXT)')\n"
    "local c = sql:exec('INSERT INTO t VALUES (1, \\'a\\', NULL), (2, \\'b\\', \\'x\\'), (3, \\'c\\', NULL)')\n"
    "eq(c.rowsWritten, 3); eq(c.rowsRead, 3); eq(#c.columnNames, 0); eq(c:next(), nil)\n"
    "c = sql:exec('SELECT id, name, note FROM t ORDER BY id')\n"
    "eq(table.concat(c.columnNames, ','), 'id,name,note'); eq(c.rowsRead, 3); eq(c.rowsWritten, 0)\n"
    "local first = c:next()\n"
    "eq(first.id, 1); eq(first.name, 'a'); eq(first.note, nil)\n"
    "local rest = c:toArray()\n"
    "eq(#rest, 2); eq(rest[1].note, 'x'); eq(rest[2].id, 3)\n"
    "eq(c:next(), nil); eq(#c:toArray(), 0)\n"
    "local raw = sql:exec('SELECT id, note, name FROM t ORDER BY id'):raw()\n"
    "eq(#raw, 3); eq(raw[1].n, 3); eq(raw[1][2], nil); eq(raw[1][3], 'a'); eq(raw[2][2], 'x')\n"
    "local ids = {}\n"
    "for row in sql:exec('SELECT id FROM t ORDER BY id DESC'):rows() do ids[#ids + 1] = row.id end\n"
    "eq(table.concat(ids, ','), '3,2,1')\n"
    "c = sql:exec('SELECT id FROM t ORDER BY id')\n"
    "c:next(); c:next()\n"
    "eq(c:one().id, 3, 'one() takes the one remaining row')\n"
    "c = sql:exec('UPDATE t SET note = ? WHERE id >= 2', 'y')\n"
    "eq(c.rowsWritten, 2); eq(c.rowsRead, 2)\n"
    "eq(sql:exec('SELECT 1.0 AS f'):one().f, 1.0); eq(math.type(sql:exec('SELECT 1.0 AS f'):one().f), 'float')\n");
  lua_close_fixture(&f);
}

static void test_lua_one_refuses_zero_or_many_rows(void) {
  fixture f;
  lua_open_fixture(&f);
  LUA_RUN(&f,
    "sql:exec('CREATE TABLE t(x); INSERT INTO t VALUES (1), (2)')\n"
    "local err = fails(function() sql:exec('SELECT x FROM t WHERE x > 5'):one() end,\n"
    "  'cursor:one(): expected exactly one row, got 0')\n"
    "eq(err:sub(1, 7), 'test:2:', 'the position is the caller\\'s')\n"
    "fails(function() sql:exec('SELECT x FROM t'):one() end,\n"
    "  'cursor:one(): expected exactly one row, got more than one')\n");
  lua_close_fixture(&f);
}

static void test_lua_sql_errors_carry_sqlite_text_and_the_user_position(void) {
  fixture f;
  lua_open_fixture(&f);
  LUA_RUN(&f,
    "local err = fails(function() sql:exec('SELEC 1') end, 'near \"SELEC\": syntax error (SQLITE_ERROR)')\n"
    "eq(err, 'test:1: near \"SELEC\": syntax error (SQLITE_ERROR)')\n"
    "fails(function() sql:exec('SELECT * FROM nope') end, 'no such table: nope (SQLITE_ERROR)')\n"
    "local ok, e = pcall(sql.exec, sql, 'SELEC')\n"
    "eq(ok, false); eq(type(e), 'string')\n");
  lua_close_fixture(&f);
}

static void test_lua_refuses_transactions_and_host_tables(void) {
  fixture f;
  lua_open_fixture(&f);
  LUA_RUN(&f,
    "local err = fails(function() sql:exec('BEGIN') end,\n"
    "  'BEGIN is not allowed in sql:exec: each turn of an invocation is one implicit transaction;'\n"
    "  .. ' use storage:transactionSync(fn)')\n"
    "eq(err:find('not authorized', 1, true), nil, 'SQLite\\'s bare message is replaced')\n"
    "fails(function() sql:exec('SAVEPOINT s') end, 'SAVEPOINT is not allowed in sql:exec')\n"
    "fails(function() sql:exec('COMMIT') end, 'COMMIT is not allowed')\n"
    "fails(function() sql:exec(\"ATTACH 'x.db' AS x\") end, 'ATTACH is not allowed')\n"
    "fails(function() sql:exec('SELECT * FROM _eutaxy_kv') end, 'table _eutaxy_kv is reserved for eutaxy')\n"
    "fails(function() sql:exec('CREATE TABLE t(x); SELECT * FROM _eutaxy_alarm') end,\n"
    "  'table _eutaxy_alarm is reserved for eutaxy')\n"
    "storage:put('secret', 1)\n"
    "fails(function() sql:exec('SELECT value FROM _eutaxy_kv WHERE key = ?', 'secret') end, 'reserved')\n");
  lua_close_fixture(&f);
}

static void test_lua_writes_follow_the_turn(void) {
  fixture f;
  lua_open_fixture(&f);
  LUA_RUN(&f, "sql:exec('CREATE TABLE t(x)')");
  ASSERT(eu_store_in_turn(f.s));  /* exec began the turn */
  ASSERT_OK(eu_store_commit(f.s));
  LUA_RUN(&f, "sql:exec('INSERT INTO t VALUES (1)'); storage:put('k', 'v')");
  ASSERT_OK(eu_store_rollback(f.s));
  LUA_RUN(&f,
    "eq(sql:exec('SELECT count(*) n FROM t'):one().n, 0, 'rolled back rows')\n"
    "eq(storage:get('k'), nil, 'rolled back key')\n"
    "sql:exec('INSERT INTO t VALUES (2)'); storage:put('k', 'w')\n");
  ASSERT_OK(eu_store_commit(f.s));
  ASSERT_OK(eu_store_rollback(f.s));
  LUA_RUN(&f,
    "eq(sql:exec('SELECT x FROM t'):one().x, 2)\n"
    "eq(storage:get('k'), 'w')\n");
  lua_close_fixture(&f);
}

static void test_lua_transaction_sync(void) {
  fixture f;
  lua_open_fixture(&f);
  LUA_RUN(&f,
    "sql:exec('CREATE TABLE t(x)')\n"
    "local a, b = storage:transactionSync(function(p, q)\n"
    "  sql:exec('INSERT INTO t VALUES (1)'); return p + q, 'done'\n"
    "end, 2, 3)\n"
    "eq(a, 5); eq(b, 'done')\n"
    "local boom = setmetatable({}, { __tostring = function() return 'boom' end })\n"
    "local ok, err = pcall(storage.transactionSync, storage, function()\n"
    "  sql:exec('INSERT INTO t VALUES (2)'); storage:put('k', 1); error(boom)\n"
    "end)\n"
    "eq(ok, false); eq(err, boom, 'the same error value')\n"
    "ok, err = pcall(storage.transactionSync, storage, function() error('plain') end)\n"
    "eq(err, 'test:11: plain', 'a message passes through as raised')\n"
    "eq(sql:exec('SELECT group_concat(x) g FROM t'):one().g, '1')\n"
    "eq(storage:get('k'), nil)\n"
    "storage:transactionSync(function()\n"
    "  sql:exec('INSERT INTO t VALUES (3)')\n"
    "  pcall(storage.transactionSync, storage, function() sql:exec('INSERT INTO t VALUES (4)'); error('inner') end)\n"
    "  storage:transactionSync(function() sql:exec('INSERT INTO t VALUES (5)') end)\n"
    "end)\n"
    "eq(sql:exec('SELECT group_concat(x) g FROM t'):one().g, '1,3,5', 'nested')\n"
    "fails(function() storage:transactionSync(42) end, 'storage:transactionSync: expected a function, got number')\n"
    "local co = coroutine.create(function()\n"
    "  return storage:transactionSync(function() sql:exec('INSERT INTO t VALUES (6)'); coroutine.yield() end)\n"
    "end)\n"
    "local resumed, msg = coroutine.resume(co)\n"
    "eq(resumed, false); assert(msg:find('attempt to yield across a C-call boundary', 1, true), msg)\n"
    "eq(sql:exec('SELECT count(*) n FROM t WHERE x = 6'):one().n, 0, 'a yield rolls back')\n");
  ASSERT_OK(eu_store_commit(f.s));  /* every savepoint was ended */
  ASSERT_EQ(count_raw(f.s, "SELECT count(*) FROM t"), 3);
  lua_close_fixture(&f);
}

static void test_lua_kv_get_put_delete(void) {
  fixture f;
  lua_open_fixture(&f);
  LUA_RUN(&f,
    "eq(storage:get('missing'), nil)\n"
    "storage:put('n', 42); storage:put('f', 1.5); storage:put('b', false)\n"
    "storage:put('t', { list = { 1, 2, 3 }, name = 'x', nested = { ok = true } })\n"
    "eq(storage:get('n'), 42); eq(math.type(storage:get('n')), 'integer')\n"
    "eq(storage:get('f'), 1.5); eq(storage:get('b'), false)\n"
    "local t = storage:get('t')\n"
    "eq(t.name, 'x'); eq(#t.list, 3); eq(t.nested.ok, true)\n"
    "local got = storage:get({ 'n', 'missing', 'b' })\n"
    "eq(got.n, 42); eq(got.b, false); eq(got.missing, nil)\n"
    "storage:put('n', 'replaced'); eq(storage:get('n'), 'replaced')\n"
    "eq(storage:delete('n'), true); eq(storage:delete('n'), false)\n"
    "eq(storage:delete({ 'f', 'b', 'nope', 'f' }), 2)\n"
    "storage:put({ x = 1, y = { 2 }, z = 'three' })\n"
    "eq(storage:get('x'), 1); eq(storage:get('y')[1], 2); eq(storage:get('z'), 'three')\n"
    "local err = fails(function() storage:put('k', nil) end, 'storage:put: value is nil; use delete')\n"
    "eq(err:match('^test:(%d+): '), '15', 'the position is the caller\\'s')\n"
    "fails(function() storage:put('k') end, 'value is nil')\n"
    "fails(function() storage:put(1, 'v') end, 'storage:put: the key must be a string, got number')\n"
    "fails(function() storage:get(true) end, 'storage:get: the key must be a string or an array of strings, got boolean')\n"
    "fails(function() storage:get({ 'a', 2 }) end, 'storage:get: keys must be strings, got a number at position 2')\n"
    "fails(function() storage:delete(nil) end, 'storage:delete: the key must be a string, got nil')\n"
    "fails(function() storage:put('fn', print) end, 'storage:put: cannot clone a function')\n"
    "fails(function() storage:put({ [1] = 'v' }) end, 'storage:put: the keys of an entries table must be strings')\n"
    "fails(function() storage:put({ a = 1, b = print, c = 3 }) end, \"storage:put: key 'b': cannot clone a function\")\n"
    "eq(storage:get('a'), nil, 'a failed put writes nothing'); eq(storage:get('c'), nil)\n"
    "storage:deleteAll()\n"
    "eq(#storage:list(), 0)\n");
  lua_close_fixture(&f);
}

static void test_lua_kv_list_options(void) {
  fixture f;
  lua_open_fixture(&f);
  LUA_RUN(&f,
    "for _, k in ipairs({ 'a', 'b1', 'b2', 'b3', 'c', 'b\\xff', 'b\\xff\\xff', 'ba' }) do storage:put(k, k:upper()) end\n"
    "local function keys(opts)\n"
    "  local out = {}\n"
    "  for i, pair in ipairs(storage:list(opts)) do out[i] = pair.key end\n"
    "  return table.concat(out, ',')\n"
    "end\n"
    "eq(storage:list()[1].key, 'a'); eq(storage:list()[1].value, 'A')\n"
    "eq(keys(), 'a,b1,b2,b3,ba,b\\xff,b\\xff\\xff,c')\n"
    "eq(keys({ prefix = 'b' }), 'b1,b2,b3,ba,b\\xff,b\\xff\\xff')\n"
    "eq(keys({ prefix = 'b\\xff' }), 'b\\xff,b\\xff\\xff')\n"
    "eq(keys({ prefix = 'zz' }), '')\n"
    "eq(keys({ start = 'b2' }), 'b2,b3,ba,b\\xff,b\\xff\\xff,c')\n"
    "eq(keys({ startAfter = 'b2' }), 'b3,ba,b\\xff,b\\xff\\xff,c')\n"
    "eq(keys({ ['end'] = 'b2' }), 'a,b1')\n"
    "eq(keys({ start = 'b1', ['end'] = 'b3' }), 'b1,b2')\n"
    "eq(keys({ prefix = 'b', start = 'b2', ['end'] = 'bz' }), 'b2,b3,ba')\n"
    "eq(keys({ limit = 2 }), 'a,b1')\n"
    "eq(keys({ limit = 2.0 }), 'a,b1')\n"
    "eq(keys({ reverse = true }), 'c,b\\xff\\xff,b\\xff,ba,b3,b2,b1,a')\n"
    "eq(keys({ reverse = true, limit = 2, prefix = 'b' }), 'b\\xff\\xff,b\\xff')\n"
    "eq(keys({ start = 'c', ['end'] = 'a' }), '')\n"
    "fails(function() storage:list({ prefix = 1 }) end, 'storage:list: option prefix must be a string, got number')\n"
    "fails(function() storage:list({ ['end'] = true }) end, 'storage:list: option end must be a string, got boolean')\n"
    "fails(function() storage:list({ limit = 0 }) end, 'storage:list: option limit must be a positive integer, got 0')\n"
    "fails(function() storage:list({ limit = 1.5 }) end, 'option limit must be a positive integer')\n"
    "fails(function() storage:list({ limit = 'x' }) end, 'option limit must be a positive integer, got string')\n"
    "fails(function() storage:list({ reverse = 1 }) end, 'storage:list: option reverse must be a boolean, got number')\n"
    "fails(function() storage:list({ start = 'a', startAfter = 'b' }) end, 'start and startAfter cannot both be given')\n"
    "fails(function() storage:list('a') end, 'storage:list: options must be a table, got string')\n");
  lua_close_fixture(&f);
}

static void test_lua_alarm(void) {
  fixture f;
  lua_open_fixture(&f);
  LUA_RUN(&f, "eq(storage:getAlarm(), nil)");
  ASSERT(eu_store_in_turn(f.s));  /* every storage call begins the turn */
  ASSERT(!eu_store_alarm_dirty(f.s));
  LUA_RUN(&f,
    "storage:setAlarm(1500.7)\n"
    "eq(storage:getAlarm(), 1500); eq(math.type(storage:getAlarm()), 'integer')\n"
    "storage:setAlarm(1700000000000)\n"
    "eq(storage:getAlarm(), 1700000000000)\n");
  ASSERT(eu_store_alarm_dirty(f.s));
  eu_store_clear_alarm_dirty(f.s);
  LUA_RUN(&f,
    "fails(function() storage:setAlarm(0/0) end, 'storage:setAlarm: the time must be a finite number')\n"
    "fails(function() storage:setAlarm(math.huge) end, 'must be a finite number')\n"
    "fails(function() storage:setAlarm('1000') end, 'storage:setAlarm: the time must be a number of ms since the epoch, got string')\n"
    "fails(function() storage:setAlarm() end, 'got nil')\n"
    "eq(storage:getAlarm(), 1700000000000)\n");
  ASSERT(!eu_store_alarm_dirty(f.s));
  LUA_RUN(&f, "storage:deleteAlarm(); eq(storage:getAlarm(), nil)");
  ASSERT(eu_store_alarm_dirty(f.s));
  lua_close_fixture(&f);
}

static void test_lua_after_restore(void) {
  fixture f;
  unsigned char *img;
  size_t len;
  lua_open_fixture(&f);
  LUA_RUN(&f, "sql:exec('CREATE TABLE t(x); INSERT INTO t VALUES (1)'); storage:put('k', { 1 })");
  ASSERT_OK(eu_store_commit(f.s));
  ASSERT_OK(eu_store_snapshot(f.s, &img, &len));
  LUA_RUN(&f, "sql:exec('INSERT INTO t VALUES (2)'); storage:put('k', { 2 }); storage:setAlarm(5)");
  ASSERT_OK(eu_store_commit(f.s));
  ASSERT_OK(eu_store_restore(f.s, img, len));
  free(img);
  LUA_RUN(&f,
    "eq(sql:exec('SELECT count(*) n FROM t'):one().n, 1)\n"
    "eq(storage:get('k')[1], 1); eq(storage:getAlarm(), nil)\n");
  lua_close_fixture(&f);
}

/* Many queries, more than the cache holds, still give the right rows. */
static void test_lua_cache_eviction(void) {
  fixture f;
  lua_open_fixture(&f);
  LUA_RUN(&f,
    "sql:exec('CREATE TABLE t(x)')\n"
    "for round = 1, 3 do\n"
    "  for i = 1, 150 do\n"
    "    eq(sql:exec('SELECT ? + ' .. i .. ' AS v', round):one().v, round + i)\n"
    "  end\n"
    "end\n");
  lua_close_fixture(&f);
}

/* A finalizer that runs while rows are read may not touch storage: it could
 * reset or evict the statement being read. Finalizers run often here (the
 * collector is made eager), some in the middle of a result. */
static void test_lua_finalizers_cannot_disturb_a_read(void) {
  fixture f;
  lua_open_fixture(&f);
  LUA_RUN(&f,
    "sql:exec('CREATE TABLE t(x, pad)')\n"
    "for i = 1, 200 do sql:exec('INSERT INTO t VALUES (?, ?)', i, string.rep('p', 50)) end\n"
    "for i = 1, 5 do storage:put('k' .. i, { i, string.rep('q', 50) }) end\n"
    "refused, served = 0, 0\n"
    "local fin = { __gc = function(o)\n"
    "  local ok, err = pcall(sql.exec, sql, 'SELECT ' .. o.i .. ' AS v')\n"
    "  if ok then served = served + 1\n"
    "  elseif tostring(err):find('storage cannot be used from a __gc finalizer', 1, true) then refused = refused + 1\n"
    "  else error(err) end\n"
    "end }\n"
    "collectgarbage('incremental', 0, 100)\n"
    "for round = 1, 60 do\n"
    "  for i = 1, 20 do setmetatable({ i = round * 100 + i }, fin) end\n"
    "  local rows = sql:exec('SELECT x, pad FROM t ORDER BY x'):toArray()\n"
    "  eq(#rows, 200); eq(rows[200].x, 200)\n"
    "  for i = 1, 20 do setmetatable({ i = round * 1000 + i }, fin) end\n"
    "  local pairs_ = storage:list({ prefix = 'k' })\n"
    "  eq(#pairs_, 5); eq(pairs_[5].value[1], 5)\n"
    "end\n"
    "collectgarbage()\n"
    "assert(refused > 0, 'no finalizer ran during a read')\n"
    "assert(served > 0, 'no finalizer ran between reads')\n");
  lua_close_fixture(&f);
}

/* Fault injection, after SQLite's malloc tests: fail the nth allocation of
 * Lua, for n = 1, 2, ... until the body runs through. Whatever n, the error
 * is a memory error, the store stays usable, and a multi-key put is all or
 * nothing. */
static void test_lua_memory_errors_leave_storage_usable(void) {
  static const char body[] =
    "local rows = sql:exec('SELECT x, pad FROM t ORDER BY x'):toArray()\n"
    "assert(#rows == 30)\n"
    "assert(#storage:list() == 3)\n"
    "storage:put({ a1 = { 1, 'x' }, a2 = { 2, 'y' }, a3 = { 3, 'z' }, a4 = 4 })\n"
    "assert(storage:transactionSync(function() return sql:exec('SELECT 7 AS s'):one().s end) == 7)\n";
  static const char check[] =
    "eq(sql:exec('SELECT count(*) AS n FROM t'):one().n, 30)\n"
    "local got = storage:get({ 'a1', 'a2', 'a3', 'a4' })\n"
    "local n = 0\n"
    "for _ in pairs(got) do n = n + 1 end\n"
    "assert(n == 0 or n == 4, 'a put of many keys was cut in half: ' .. n)\n";
  fixture f;
  int n, done = 0, failures = 0;
  lua_open_fixture(&f);
  LUA_RUN(&f,
    "sql:exec('CREATE TABLE t(x, pad)')\n"
    "for i = 1, 30 do sql:exec('INSERT INTO t VALUES (?, ?)', i, string.rep('p', 40)) end\n"
    "for i = 1, 3 do storage:put('k' .. i, { i }) end\n");
  ASSERT_OK(eu_store_commit(f.s));
  for (n = 1; !done && n < 100000; n++) {
    int status;
    ASSERT_EQ(luaL_loadbuffer(f.L, body, sizeof body - 1, "=body"), LUA_OK);
    f.alloc.count = 0;
    f.alloc.fail_at = n;
    status = lua_pcall(f.L, 0, 0, 0);
    f.alloc.fail_at = 0;
    if (status == LUA_OK) {
      done = 1;
    } else {
      const char *msg = lua_tostring(f.L, -1);
      if (!(status == LUA_ERRMEM || (msg && strstr(msg, "not enough memory")))) {
        fprintf(stderr, "allocation %d: unexpected error (%d): %s\n", n, status, msg ? msg : "?");
        abort();
      }
      failures++;
    }
    lua_settop(f.L, 0);
    LUA_RUN(&f, check);
    ASSERT_OK(eu_store_rollback(f.s));
  }
  ASSERT(done);
  ASSERT(failures > 10);
  lua_close_fixture(&f);
}

typedef struct test {
  const char *name;
  void (*fn)(void);
} test;

#define T(name) { #name, name }
static const test tests[] = {
  T(test_open_creates_host_tables),
  T(test_open_reports_a_bad_path),
  T(test_turn_commits_and_rolls_back),
  T(test_failed_commit_rolls_back),
  T(test_authorizer_refuses_transactions_and_attach),
  T(test_authorizer_reserves_host_tables),
  T(test_internal_sql_bypasses_the_authorizer),
  T(test_syntax_error_carries_sqlite_text),
  T(test_multi_statement_prepares_the_last),
  T(test_statement_cache_reuses_and_evicts),
  T(test_cached_statement_survives_schema_change),
  T(test_savepoints_nest),
  T(test_alarm_row_and_dirty_flag),
  T(test_alarm_read_after_every_undo),
  T(test_kv_in_c),
  T(test_delete_all_drops_everything_but_the_host_tables),
  T(test_lazy_tables_come_with_their_first_write),
  T(lazy_test_alarm_row_and_dirty_flag),
  T(lazy_test_alarm_read_after_every_undo),
  T(lazy_test_kv_in_c),
  T(lazy_test_delete_all_drops_everything_but_the_host_tables),
  T(test_delete_all_is_undone_by_a_checkpoint),
  T(test_checkpoint_back_keeps_the_mark),
  T(test_journal_bytes),
  T(test_alarm_as_each_checkpoint_began),
  T(test_turns_on_a_fresh_checkpoint),
  T(test_delete_all_is_one_unit),
  T(test_delete_all_drops_children_before_their_parents),
  T(test_database_size_is_page_count_times_page_size),
  T(test_park_closes_the_connection_and_the_next_use_reopens_it),
  T(test_park_is_refused_while_a_reopen_would_lose_something),
  T(test_batching_begins_the_batch_at_the_first_touch),
  T(test_prepare_turns_leaves_a_batch_nothing_to_prepare),
  T(test_a_failed_reopen_fails_the_call_and_the_store_goes_on),
  T(test_an_image_stays_in_memory_until_its_file_is_written),
  T(test_park_cleanup),
  T(test_snapshot_and_restore_round_trip),
  T(test_lua_exec_runs_every_statement_and_binds_the_last),
  T(test_lua_exec_binds_each_type),
  T(test_lua_exec_refuses_bad_bindings),
  T(test_lua_cursor_api),
  T(test_lua_one_refuses_zero_or_many_rows),
  T(test_lua_sql_errors_carry_sqlite_text_and_the_user_position),
  T(test_lua_refuses_transactions_and_host_tables),
  T(test_lua_writes_follow_the_turn),
  T(test_lua_transaction_sync),
  T(test_lua_kv_get_put_delete),
  T(test_lua_kv_list_options),
  T(test_lua_alarm),
  T(test_lua_after_restore),
  T(test_lua_cache_eviction),
  T(test_lua_finalizers_cannot_disturb_a_read),
  T(test_lua_memory_errors_leave_storage_usable),
};

int main(int argc, char **argv) {
  size_t i, n = sizeof tests / sizeof tests[0], ran = 0;
  setvbuf(stdout, NULL, _IONBF, 0);
  printf("1..%zu\n", n);
  for (i = 0; i < n; i++) {
    if (argc > 1 && !strstr(tests[i].name, argv[1])) continue;
    tests[i].fn();
    printf("ok %zu - %s\n", i + 1, tests[i].name);
    ran++;
  }
  return ran ? 0 : 1;
}
