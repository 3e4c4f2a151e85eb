/*
 * test_sql.h: reading a store in tests that work on the engines' tables.
 */
#ifndef EUTAXY_TEST_SQL_H
#define EUTAXY_TEST_SQL_H

#include <sqlite3.h>
#include <string.h>

#include "store.h"
#include "test.h"

/* The first column of the only row a host statement returns. */
static inline int64_t sql_scalar(eu_store *s, const char *sql) {
  sqlite3_stmt *st;
  int64_t n;
  ASSERT_OK(eu_store_internal_prepare(s, sql, &st));
  ASSERT_EQ(eu_store_internal_step(s, st), 1);
  n = sqlite3_column_int64(st, 0);
  eu_store_reset(s, st);
  return n;
}

/* Runs user SQL with no bindings in the turn, as exec does: the rows it
 * gave, or a negative code. */
static inline int sql_run(eu_store *s, const char *sql) {
  sqlite3_stmt *st;
  int rc, rows = 0;
  if ((rc = eu_store_touch(s)) < 0) return rc;
  if ((rc = eu_store_prepare(s, sql, strlen(sql), &st)) < 0) return rc;
  if (!st) return 0;
  while ((rc = eu_store_step(s, st)) == 1) rows++;
  if (rc < 0) return rc;
  eu_store_reset(s, st);
  return rows;
}

/* The object's alarm: its time, or -1 when none is set. */
static inline int64_t alarm_at(eu_store *s) {
  int has, retry;
  int64_t at;
  ASSERT_OK(eu_store_get_alarm(s, &has, &at, &retry));
  return has ? at : -1;
}

#endif
