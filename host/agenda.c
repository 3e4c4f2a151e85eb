/*
 * agenda.c: the object's scheduler (see agenda.h): the agenda of
 * participants' due times, the one alarm that follows it, and the two
 * participants that live here, named alarms and durable operations.
 *
 * Owns the tables eutaxy_agenda, eutaxy_alarms, eutaxy_durable_ops and
 * eutaxy_migrations, and their migrations. Runs its SQL through the store's
 * internal statements, in the caller's turn: it never commits, it only
 * opens a savepoint around each call that writes more than one row, so a
 * call is all or nothing and the turn's end decides the rest. Must not know
 * about Lua or the world: the time, the PRNG's draws and the generations
 * are given by the caller (lagenda.c), so the C tests can give their own.
 *
 * Why the alarm is reconciled inside every call rather than once at the
 * end of a turn: a turn may be rolled back, and then the alarm row goes
 * back with the work that moved it; and a turn that commits carries an
 * alarm that already agrees with every participant's rows.
 */
#include <stdio.h>
#include <string.h>

#include "agenda.h"
#include "eutaxy.h"

/* ---- statements ------------------------------------------------------ */

/* ---- what the engine reads ------------------------------------------- */

/* Every value read from the engine's tables is checked (store.h,
 * eu_store_check_int): a row that breaks the engine's invariants is that
 * object's error, never a crash or a row that comes due forever. */
#define COL_NULL EU_COL_NULL
#define check_int(s, st, i, flags, lo, hi, table, row) \
  eu_store_check_int((s), "agenda", (st), (i), (flags), (lo), (hi), (table), (row))
#define check_text(s, st, i, flags, table, row) \
  eu_store_check_text((s), "agenda", (st), (i), (flags), (table), (row))

/* Times and counts the engine can add to without overflowing. */
#define TIME_MAX (INT64_C(1) << 53)
#define COUNT_MAX INT64_C(1000000000)

static int prep(eu_store *s, const char *sql, sqlite3_stmt **st) {
  return eu_store_internal_prepare(s, sql, st);
}

/* A bind SQLite refused (a value past its length limit, memory). */
static int bound(eu_store *s, sqlite3_stmt *st, int rc) {
  if (rc == SQLITE_OK) return EU_OK;
  eu_store_reset(s, st);
  return eu_store_error(s, rc == SQLITE_NOMEM ? EU_ENOMEM : EU_ESQL,
                        "cannot bind a value: %s", sqlite3_errstr(rc));
}

static int bind_text(eu_store *s, sqlite3_stmt *st, int i, const char *text) {
  int rc = text ? sqlite3_bind_text(st, i, text, -1, SQLITE_STATIC) : sqlite3_bind_null(st, i);
  return bound(s, st, rc);
}

static int bind_blob(eu_store *s, sqlite3_stmt *st, int i, const void *p, size_t n) {
  int rc = p && n ? sqlite3_bind_blob64(st, i, p, n, SQLITE_STATIC) : sqlite3_bind_null(st, i);
  return bound(s, st, rc);
}

/* Steps a statement that gives no rows, and gives it back. */
static int done(eu_store *s, sqlite3_stmt *st) {
  int rc = eu_store_internal_step(s, st);
  eu_store_reset(s, st);
  return rc < 0 ? rc : EU_OK;
}

/* The one integer a query gives; *has = 0 for no row or NULL. Every
 * such integer is a time or a version, which the engine adds to. */
static int scalar(eu_store *s, sqlite3_stmt *st, int *has, int64_t *v) {
  int rc = eu_store_internal_step(s, st);
  *has = 0;
  *v = 0;
  if (rc == 1) {
    const char *q = sqlite3_sql(st);
    rc = check_int(s, st, 0, COL_NULL, -TIME_MAX, TIME_MAX, q && strstr(q, "eutaxy_migrations") ?
                   "eutaxy_migrations" : q && strstr(q, "eutaxy_alarms") ? "eutaxy_alarms"
                   : q && strstr(q, "eutaxy_durable_ops") ? "eutaxy_durable_ops" : "eutaxy_agenda", NULL);
    if (rc == EU_OK) rc = 1;
  }
  if (rc == 1 && sqlite3_column_type(st, 0) != SQLITE_NULL) {
    *has = 1;
    *v = sqlite3_column_int64(st, 0);
  }
  eu_store_reset(s, st);
  return rc < 0 ? rc : EU_OK;
}

/* Rolls back to the savepoint the call opened, keeping the failure's message. */
static int undo(eu_store *s, int rc) {
  char msg[EU_ERRLEN];
  snprintf(msg, sizeof msg, "%s", eu_store_errmsg(s));
  eu_store_rollback_to(s);
  return eu_store_error(s, rc, "%s", msg);
}

/* Ends the call's savepoint: released when rc is a result, undone when it failed. */
static int finish(eu_store *s, int rc) {
  int r;
  if (rc < 0) return undo(s, rc);
  r = eu_store_release(s);
  return r < 0 ? r : rc;
}

/* ---- migrations ------------------------------------------------------ */

int eu_agenda_version(eu_store *s, const char *capability, int *version) {
  sqlite3_stmt *st;
  int64_t v;
  int rc, has;
  *version = 0;
  if ((rc = prep(s, "SELECT version FROM eutaxy_migrations WHERE capability = ?1", &st)) < 0)
    return rc;
  if ((rc = bind_text(s, st, 1, capability)) < 0) return rc;
  if ((rc = scalar(s, st, &has, &v)) < 0) return rc;
  if (has && (v < 0 || v > 1000))
    return eu_store_error(s, EU_ECORRUPT, "agenda: a row of eutaxy_migrations (%s) breaks its "
                          "invariants: column version is out of range", capability);
  *version = has ? (int)v : 0;
  return EU_OK;
}

static int migrate_steps(eu_store *s, const char *capability, const char *const *steps,
                         int nsteps) {
  sqlite3_stmt *st;
  int rc, i, version;
  rc = eu_store_exec_internal(s,
    "CREATE TABLE IF NOT EXISTS eutaxy_migrations("
    "  capability TEXT PRIMARY KEY, version INTEGER NOT NULL) WITHOUT ROWID");
  if (rc < 0) return rc;
  if ((rc = eu_agenda_version(s, capability, &version)) < 0) return rc;
  if (version > nsteps)
    return eu_store_error(s, EU_EINVAL, "the database's %s tables are at version %d, newer "
                          "than this eutaxy knows (%d)", capability, version, nsteps);
  if (version == nsteps) return EU_OK;
  for (i = version; i < nsteps; i++)
    if ((rc = eu_store_exec_internal(s, steps[i])) < 0) return rc;
  if ((rc = prep(s, "INSERT OR REPLACE INTO eutaxy_migrations(capability, version) "
                    "VALUES (?1, ?2)", &st)) < 0)
    return rc;
  if ((rc = bind_text(s, st, 1, capability)) < 0) return rc;
  sqlite3_bind_int(st, 2, nsteps);
  return done(s, st);
}

int eu_agenda_migrate_capability(eu_store *s, const char *capability,
                                 const char *const *steps, int nsteps) {
  int rc, version = -1;
  /* The common case, a database already current, reads one row and writes
   * nothing. Before the first migration the table is missing and the read
   * fails: then the slow path makes it. */
  if (eu_agenda_version(s, capability, &version) == EU_OK && version == nsteps) return EU_OK;
  if ((rc = eu_store_savepoint(s)) < 0) return rc;
  return finish(s, migrate_steps(s, capability, steps, nsteps));
}

static const char *const agenda_steps[] = {
  "CREATE TABLE eutaxy_agenda("
  "  participant TEXT NOT NULL, key TEXT NOT NULL, due INTEGER NOT NULL,"
  "  PRIMARY KEY (participant, key)) WITHOUT ROWID;"
  "CREATE INDEX eutaxy_agenda_by_due ON eutaxy_agenda(due);",
};

static const char *const alarms_steps[] = {
  "CREATE TABLE eutaxy_alarms("
  "  name TEXT PRIMARY KEY, due INTEGER NOT NULL, payload BLOB, created_at INTEGER NOT NULL,"
  "  scheduled_at INTEGER NOT NULL, attempt INTEGER NOT NULL DEFAULT 0,"
  "  max_attempts INTEGER NOT NULL, generation INTEGER NOT NULL, last_error TEXT);"
  "CREATE INDEX eutaxy_alarms_by_due ON eutaxy_alarms(due, name);",
};

static const char *const durable_steps[] = {
  "CREATE TABLE eutaxy_durable_ops("
  "  id TEXT PRIMARY KEY, handler TEXT NOT NULL, payload BLOB, status TEXT NOT NULL"
  "    CHECK (status IN ('pending', 'done', 'failed')),"
  "  attempt INTEGER NOT NULL DEFAULT 0, next_attempt_at INTEGER, result BLOB,"
  "  last_error TEXT, created_at INTEGER NOT NULL, settled_at INTEGER,"
  "  max_attempts INTEGER NOT NULL);"
  "CREATE INDEX eutaxy_durable_ops_pending ON eutaxy_durable_ops(status, next_attempt_at, id);",
};

#define NSTEPS(a) ((int)(sizeof a / sizeof a[0]))

int eu_agenda_migrate(eu_store *s) {
  return eu_agenda_migrate_capability(s, "agenda", agenda_steps, NSTEPS(agenda_steps));
}

int eu_alarms_migrate(eu_store *s) {
  int rc = eu_agenda_migrate(s);
  return rc < 0 ? rc : eu_agenda_migrate_capability(s, "alarms", alarms_steps, NSTEPS(alarms_steps));
}

int eu_durable_migrate(eu_store *s) {
  int rc = eu_agenda_migrate(s);
  return rc < 0 ? rc : eu_agenda_migrate_capability(s, "durable", durable_steps, NSTEPS(durable_steps));
}

/* ---- the agenda ------------------------------------------------------ */

int eu_agenda_set(eu_store *s, const char *participant, const char *key, int64_t due) {
  sqlite3_stmt *st;
  int rc;
  if ((rc = eu_store_touch(s)) < 0) return rc;
  if ((rc = prep(s, "INSERT OR REPLACE INTO eutaxy_agenda(participant, key, due) "
                    "VALUES (?1, ?2, ?3)", &st)) < 0)
    return rc;
  if ((rc = bind_text(s, st, 1, participant)) < 0 || (rc = bind_text(s, st, 2, key)) < 0) return rc;
  sqlite3_bind_int64(st, 3, due);
  return done(s, st);
}

int eu_agenda_clear(eu_store *s, const char *participant, const char *key) {
  sqlite3_stmt *st;
  int rc;
  if ((rc = eu_store_touch(s)) < 0) return rc;
  if ((rc = prep(s, "DELETE FROM eutaxy_agenda WHERE participant = ?1 AND key = ?2", &st)) < 0)
    return rc;
  if ((rc = bind_text(s, st, 1, participant)) < 0 || (rc = bind_text(s, st, 2, key)) < 0) return rc;
  return done(s, st);
}

int eu_agenda_next(eu_store *s, int *has, int64_t *due) {
  sqlite3_stmt *st;
  int rc;
  *has = 0;
  *due = 0;
  if ((rc = prep(s, "SELECT min(due) FROM eutaxy_agenda", &st)) < 0) return rc;
  return scalar(s, st, has, due);
}

/* The alarm is written only when it differs, so an alarm already right
 * keeps its retry count and is not marked as moved. */
int eu_agenda_reconcile(eu_store *s) {
  int rc, has, alarm, retry;
  int64_t due, at;
  if ((rc = eu_store_touch(s)) < 0) return rc;
  if ((rc = eu_agenda_next(s, &has, &due)) < 0) return rc;
  if ((rc = eu_store_get_alarm(s, &alarm, &at, &retry)) < 0) return rc;
  if (has) return alarm && at == due ? EU_OK : eu_store_set_alarm(s, due, 0);
  return alarm ? eu_store_delete_alarm(s) : EU_OK;
}

int eu_agenda_due(eu_store *s, int64_t t, eu_agenda_each_due each, void *ud) {
  sqlite3_stmt *st;
  int rc;
  if ((rc = prep(s, "SELECT participant, min(due) FROM eutaxy_agenda WHERE due <= ?1"
                    " GROUP BY participant ORDER BY participant", &st)) < 0)
    return rc;
  sqlite3_bind_int64(st, 1, t);
  while ((rc = eu_store_internal_step(s, st)) == 1) {
    const char *p;
    if ((rc = check_text(s, st, 0, 0, "eutaxy_agenda", NULL)) < 0 ||
        (rc = check_int(s, st, 1, 0, -TIME_MAX, TIME_MAX, "eutaxy_agenda",
                        (const char *)sqlite3_column_text(st, 0))) < 0)
      break;
    p = (const char *)sqlite3_column_text(st, 0);
    if ((rc = each(ud, p ? p : "", sqlite3_column_int64(st, 1))) != 0) break;
  }
  eu_store_reset(s, st);
  return rc;
}

/* Sets the participant's one agenda row from the earliest due time the
 * query gives (or clears it), then reconciles the alarm. */
static int refresh(eu_store *s, const char *participant, const char *earliest) {
  sqlite3_stmt *st;
  int64_t due;
  int rc, has;
  if ((rc = prep(s, earliest, &st)) < 0) return rc;
  if ((rc = scalar(s, st, &has, &due)) < 0) return rc;
  rc = has ? eu_agenda_set(s, participant, "", due) : eu_agenda_clear(s, participant, "");
  return rc < 0 ? rc : eu_agenda_reconcile(s);
}

static int refresh_alarms(eu_store *s) {
  return refresh(s, "alarms", "SELECT min(due) FROM eutaxy_alarms");
}

static int refresh_durable(eu_store *s) {
  return refresh(s, "durable",
                 "SELECT min(next_attempt_at) FROM eutaxy_durable_ops WHERE status = 'pending'");
}

/* ---- the retry policy ------------------------------------------------ */

int64_t eu_agenda_backoff(int attempt, uint64_t random) {
  int64_t base = EU_AGENDA_MAX_DELAY_MS;
  if (attempt < 1) attempt = 1;
  if (attempt < 20) {  /* past that the shift would only overflow: it is capped anyway */
    base = INT64_C(1000) << (attempt - 1);
    if (base > EU_AGENDA_MAX_DELAY_MS) base = EU_AGENDA_MAX_DELAY_MS;
  }
  return base - (int64_t)(random % (uint64_t)(base / 5 + 1));
}

static int max_or_default(int max_attempts) {
  return max_attempts > 0 ? max_attempts : EU_AGENDA_MAX_ATTEMPTS;
}

/* ---- copying rows out ------------------------------------------------ */

/* Column i appended to b (text with its NUL); the offset, or -1 for NULL. */
static int64_t copy_column(sqlite3_stmt *st, int i, eu_buf *b, int *rc) {
  int64_t off = (int64_t)b->n;
  const void *p;
  int n;
  if (sqlite3_column_type(st, i) == SQLITE_NULL) return -1;
  p = sqlite3_column_blob(st, i);
  n = sqlite3_column_bytes(st, i);
  if (*rc == EU_OK && n > 0) *rc = eu_buf_put(b, p, (size_t)n);
  if (*rc == EU_OK) *rc = eu_buf_putc(b, '\0');
  return off;
}

static const char *at_offset(eu_buf *b, int64_t off) {
  return off < 0 ? NULL : b->p + off;
}

/* The columns every item query gives, in this order. */
#define ALARM_COLUMNS \
  "name, due, payload, scheduled_at, generation, attempt, max_attempts, last_error"
#define OP_COLUMNS \
  "id, next_attempt_at, payload, created_at, 0, attempt, max_attempts, last_error, handler"

/* Fills it from the row st is on; the bytes go into b. */
static int read_item(eu_store *s, sqlite3_stmt *st, int is_op, eu_agenda_item *it, eu_buf *b) {
  const char *T = is_op ? "eutaxy_durable_ops" : "eutaxy_alarms", *row;
  int64_t key, payload, error, handler = -1;
  int rc = EU_OK;
  memset(it, 0, sizeof *it);
  if ((rc = check_text(s, st, 0, 0, T, NULL)) < 0) return rc;
  row = (const char *)sqlite3_column_text(st, 0);
  if ((rc = check_int(s, st, 1, 0, -TIME_MAX, TIME_MAX, T, row)) < 0 ||
      (rc = check_int(s, st, 3, 0, -TIME_MAX, TIME_MAX, T, row)) < 0 ||
      (rc = check_int(s, st, 4, 0, INT64_MIN, INT64_MAX, T, row)) < 0 ||
      (rc = check_int(s, st, 5, 0, 0, COUNT_MAX, T, row)) < 0 ||
      (rc = check_int(s, st, 6, 0, 1, COUNT_MAX, T, row)) < 0 ||
      (rc = check_text(s, st, 7, COL_NULL, T, row)) < 0 ||
      (is_op && (rc = check_text(s, st, 8, 0, T, row)) < 0))
    return rc;
  eu_buf_reset(b);
  key = copy_column(st, 0, b, &rc);
  payload = copy_column(st, 2, b, &rc);
  error = copy_column(st, 7, b, &rc);
  if (is_op) handler = copy_column(st, 8, b, &rc);
  if (rc < 0) return eu_store_error(s, EU_ENOMEM, "out of memory");
  it->key = at_offset(b, key);
  it->payload = at_offset(b, payload);
  it->len = payload < 0 ? 0 : (size_t)sqlite3_column_bytes(st, 2);
  it->last_error = at_offset(b, error);
  it->handler = at_offset(b, handler);
  it->due = sqlite3_column_int64(st, 1);
  it->scheduled_at = sqlite3_column_int64(st, 3);
  it->generation = sqlite3_column_int64(st, 4);
  it->attempt = sqlite3_column_int(st, 5);
  it->max_attempts = sqlite3_column_int(st, 6);
  return EU_OK;
}

/* Steps st to its first row and reads it: 1 and *it, 0 for no row. */
static int first_item(eu_store *s, sqlite3_stmt *st, int is_op, eu_agenda_item *it, eu_buf *b) {
  int rc = eu_store_internal_step(s, st);
  if (rc == 1 && (rc = read_item(s, st, is_op, it, b)) == EU_OK) rc = 1;
  eu_store_reset(s, st);
  return rc;
}

/* ---- named alarms ---------------------------------------------------- */

int eu_alarms_schedule(eu_store *s, const char *name, int64_t due, const void *payload,
                       size_t len, int max_attempts, int64_t generation, int64_t now) {
  sqlite3_stmt *st;
  int rc;
  if ((rc = eu_store_savepoint(s)) < 0) return rc;
  rc = prep(s, "INSERT OR REPLACE INTO eutaxy_alarms(name, due, payload, created_at, scheduled_at,"
               " attempt, max_attempts, generation, last_error)"
               " VALUES (?1, ?2, ?3, ?4, ?2, 0, ?5, ?6, NULL)", &st);
  if (rc == EU_OK && (rc = bind_text(s, st, 1, name)) == EU_OK &&
      (rc = bind_blob(s, st, 3, payload, len)) == EU_OK) {
    sqlite3_bind_int64(st, 2, due);
    sqlite3_bind_int64(st, 4, now);
    sqlite3_bind_int(st, 5, max_or_default(max_attempts));
    sqlite3_bind_int64(st, 6, generation);
    rc = done(s, st);
  }
  if (rc == EU_OK) rc = refresh_alarms(s);
  return finish(s, rc);
}

int eu_alarms_cancel(eu_store *s, const char *name) {
  sqlite3_stmt *st;
  int rc, removed = 0;
  if ((rc = eu_store_savepoint(s)) < 0) return rc;
  rc = prep(s, "DELETE FROM eutaxy_alarms WHERE name = ?1", &st);
  if (rc == EU_OK && (rc = bind_text(s, st, 1, name)) == EU_OK && (rc = done(s, st)) == EU_OK) {
    removed = sqlite3_changes(eu_store_db(s)) > 0;
    rc = refresh_alarms(s);
  }
  return finish(s, rc < 0 ? rc : removed);
}

int eu_alarms_list(eu_store *s, eu_agenda_each each, void *ud, eu_buf *buf) {
  sqlite3_stmt *st;
  eu_agenda_item it;
  int rc;
  if ((rc = prep(s, "SELECT " ALARM_COLUMNS " FROM eutaxy_alarms ORDER BY due, name", &st)) < 0)
    return rc;
  while ((rc = eu_store_internal_step(s, st)) == 1) {
    if ((rc = read_item(s, st, 0, &it, buf)) < 0) break;
    if ((rc = each(ud, &it)) != 0) break;
  }
  eu_store_reset(s, st);
  return rc;
}

/* Deletes the alarm if it is still the given scheduling of the name. */
static int delete_alarm_row(eu_store *s, const char *name, int64_t generation) {
  sqlite3_stmt *st;
  int rc;
  if ((rc = prep(s, "DELETE FROM eutaxy_alarms WHERE name = ?1 AND generation = ?2", &st)) < 0)
    return rc;
  if ((rc = bind_text(s, st, 1, name)) < 0) return rc;
  sqlite3_bind_int64(st, 2, generation);
  return done(s, st);
}

static int take_alarm(eu_store *s, int64_t now, uint64_t random, eu_agenda_item *it, eu_buf *buf) {
  sqlite3_stmt *st;
  int rc;
  if ((rc = prep(s, "SELECT " ALARM_COLUMNS " FROM eutaxy_alarms WHERE due <= ?1"
                    " ORDER BY due, name LIMIT 1", &st)) < 0)
    return rc;
  sqlite3_bind_int64(st, 1, now);
  if ((rc = first_item(s, st, 0, it, buf)) <= 0) return rc;
  if (it->attempt >= it->max_attempts) {
    /* Its last attempt was claimed and never settled: it is given up. */
    it->exhausted = 1;
    rc = delete_alarm_row(s, it->key, it->generation);
  } else {
    it->attempt++;
    rc = prep(s, "UPDATE eutaxy_alarms SET attempt = ?3, due = ?4"
                 " WHERE name = ?1 AND generation = ?2", &st);
    if (rc == EU_OK && (rc = bind_text(s, st, 1, it->key)) == EU_OK) {
      sqlite3_bind_int64(st, 2, it->generation);
      sqlite3_bind_int(st, 3, it->attempt);
      sqlite3_bind_int64(st, 4, now + eu_agenda_backoff(it->attempt, random));
      rc = done(s, st);
    }
  }
  if (rc == EU_OK) rc = refresh_alarms(s);
  return rc < 0 ? rc : 1;
}

int eu_alarms_take(eu_store *s, int64_t now, uint64_t random, eu_agenda_item *it, eu_buf *buf) {
  int rc;
  if ((rc = eu_store_savepoint(s)) < 0) return rc;
  return finish(s, take_alarm(s, now, random, it, buf));
}

static int settle_alarm(eu_store *s, const char *name, int64_t generation, int attempt,
                        const char *error, int64_t now, int64_t delay) {
  sqlite3_stmt *st;
  int rc, outcome;
  if ((rc = prep(s, "SELECT attempt, max_attempts FROM eutaxy_alarms"
                    " WHERE name = ?1 AND generation = ?2", &st)) < 0)
    return rc;
  if ((rc = bind_text(s, st, 1, name)) < 0) return rc;
  sqlite3_bind_int64(st, 2, generation);
  rc = eu_store_internal_step(s, st);
  if (rc == 1 && (check_int(s, st, 0, 0, 0, COUNT_MAX, "eutaxy_alarms", name) < 0 ||
                  check_int(s, st, 1, 0, 1, COUNT_MAX, "eutaxy_alarms", name) < 0)) {
    rc = EU_ECORRUPT;
    outcome = EU_SETTLE_STALE;
  } else if (rc == 1) {
    int current = sqlite3_column_int(st, 0), max = sqlite3_column_int(st, 1);
    if (current != attempt) outcome = EU_SETTLE_STALE;
    else if (!error) outcome = EU_SETTLE_DONE;
    else outcome = attempt >= max ? EU_SETTLE_FAILED : EU_SETTLE_RETRY;
  } else {
    outcome = EU_SETTLE_STALE;
  }
  eu_store_reset(s, st);
  if (rc < 0 || outcome == EU_SETTLE_STALE) return rc < 0 ? rc : outcome;
  if (outcome == EU_SETTLE_RETRY) {
    rc = prep(s, "UPDATE eutaxy_alarms SET due = ?3, last_error = ?4"
                 " WHERE name = ?1 AND generation = ?2", &st);
    if (rc == EU_OK && (rc = bind_text(s, st, 1, name)) == EU_OK &&
        (rc = bind_text(s, st, 4, error)) == EU_OK) {
      sqlite3_bind_int64(st, 2, generation);
      sqlite3_bind_int64(st, 3, now + (delay > 0 ? delay : 0));
      rc = done(s, st);
    }
  } else {
    rc = delete_alarm_row(s, name, generation);
  }
  if (rc == EU_OK) rc = refresh_alarms(s);
  return rc < 0 ? rc : outcome;
}

int eu_alarms_settle(eu_store *s, const char *name, int64_t generation, int attempt,
                     const char *error, int64_t now, int64_t delay) {
  int rc;
  if ((rc = eu_store_savepoint(s)) < 0) return rc;
  return finish(s, settle_alarm(s, name, generation, attempt, error, now, delay));
}

/* ---- durable operations ---------------------------------------------- */

static int same_bytes(const void *a, size_t an, const void *b, size_t bn) {
  return an == bn && (an == 0 || memcmp(a, b, an) == 0);
}

static int register_op(eu_store *s, const char *id, const char *handler, const void *payload,
                       size_t len, int max_attempts, int64_t now) {
  sqlite3_stmt *st;
  int rc;
  if ((rc = prep(s, "SELECT handler, payload FROM eutaxy_durable_ops WHERE id = ?1", &st)) < 0)
    return rc;
  if ((rc = bind_text(s, st, 1, id)) < 0) return rc;
  rc = eu_store_internal_step(s, st);
  if (rc == 1) {
    const char *h = (const char *)sqlite3_column_text(st, 0);
    const void *p = sqlite3_column_blob(st, 1);
    size_t n = (size_t)sqlite3_column_bytes(st, 1);
    if (!h || strcmp(h, handler) != 0) rc = 2;
    else rc = same_bytes(p, n, payload, payload ? len : 0) ? 0 : 3;
    eu_store_reset(s, st);
    return rc;
  }
  eu_store_reset(s, st);
  if (rc < 0) return rc;
  rc = prep(s, "INSERT INTO eutaxy_durable_ops(id, handler, payload, status, attempt,"
               " next_attempt_at, created_at, max_attempts)"
               " VALUES (?1, ?2, ?3, 'pending', 0, ?4, ?4, ?5)", &st);
  if (rc == EU_OK && (rc = bind_text(s, st, 1, id)) == EU_OK &&
      (rc = bind_text(s, st, 2, handler)) == EU_OK &&
      (rc = bind_blob(s, st, 3, payload, len)) == EU_OK) {
    sqlite3_bind_int64(st, 4, now);
    sqlite3_bind_int(st, 5, max_or_default(max_attempts));
    rc = done(s, st);
  }
  if (rc == EU_OK) rc = refresh_durable(s);
  return rc < 0 ? rc : 1;
}

int eu_durable_register(eu_store *s, const char *id, const char *handler, const void *payload,
                        size_t len, int max_attempts, int64_t now) {
  int rc;
  if (!id || !handler) return eu_store_error(s, EU_EINVAL, "an operation needs an id and a handler");
  if ((rc = eu_store_savepoint(s)) < 0) return rc;
  return finish(s, register_op(s, id, handler, payload, len, max_attempts, now));
}

/* Marks the operation failed (or, with no error, done with result). */
static int settle_op_row(eu_store *s, const char *id, const char *status, const void *result,
                         size_t rlen, const char *error, int64_t now) {
  sqlite3_stmt *st;
  int rc;
  if ((rc = prep(s, "UPDATE eutaxy_durable_ops SET status = ?2, result = ?3, last_error = ?4,"
                    " settled_at = ?5, next_attempt_at = NULL WHERE id = ?1", &st)) < 0)
    return rc;
  if ((rc = bind_text(s, st, 1, id)) < 0 || (rc = bind_text(s, st, 2, status)) < 0 ||
      (rc = bind_blob(s, st, 3, result, rlen)) < 0 || (rc = bind_text(s, st, 4, error)) < 0)
    return rc;
  sqlite3_bind_int64(st, 5, now);
  return done(s, st);
}

static int take_op(eu_store *s, int64_t now, uint64_t random, eu_agenda_item *it, eu_buf *buf) {
  sqlite3_stmt *st;
  int rc;
  if ((rc = prep(s, "SELECT " OP_COLUMNS " FROM eutaxy_durable_ops"
                    " WHERE status = 'pending' AND next_attempt_at <= ?1"
                    " ORDER BY next_attempt_at, id LIMIT 1", &st)) < 0)
    return rc;
  sqlite3_bind_int64(st, 1, now);
  if ((rc = first_item(s, st, 1, it, buf)) <= 0) return rc;
  if (it->attempt >= it->max_attempts) {
    char msg[EU_ERRLEN];
    it->exhausted = 1;
    snprintf(msg, sizeof msg, "gave up after %d attempts: the last one never finished%s%.400s",
             it->attempt, it->last_error ? "; the error before it: " : "",
             it->last_error ? it->last_error : "");
    rc = settle_op_row(s, it->key, "failed", NULL, 0, msg, now);
  } else {
    it->attempt++;
    rc = prep(s, "UPDATE eutaxy_durable_ops SET attempt = ?2, next_attempt_at = ?3"
                 " WHERE id = ?1", &st);
    if (rc == EU_OK && (rc = bind_text(s, st, 1, it->key)) == EU_OK) {
      sqlite3_bind_int(st, 2, it->attempt);
      sqlite3_bind_int64(st, 3, now + eu_agenda_backoff(it->attempt, random));
      rc = done(s, st);
    }
  }
  if (rc == EU_OK) rc = refresh_durable(s);
  return rc < 0 ? rc : 1;
}

int eu_durable_take(eu_store *s, int64_t now, uint64_t random, eu_agenda_item *it, eu_buf *buf) {
  int rc;
  if ((rc = eu_store_savepoint(s)) < 0) return rc;
  return finish(s, take_op(s, now, random, it, buf));
}

static int settle_op(eu_store *s, const char *id, int attempt, const void *result, size_t rlen,
                     const char *error, int64_t now, int64_t delay) {
  sqlite3_stmt *st;
  int rc, outcome = EU_SETTLE_STALE;
  if ((rc = prep(s, "SELECT attempt, max_attempts FROM eutaxy_durable_ops"
                    " WHERE id = ?1 AND status = 'pending'", &st)) < 0)
    return rc;
  if ((rc = bind_text(s, st, 1, id)) < 0) return rc;
  rc = eu_store_internal_step(s, st);
  if (rc == 1 && (check_int(s, st, 0, 0, 0, COUNT_MAX, "eutaxy_durable_ops", id) < 0 ||
                  check_int(s, st, 1, 0, 1, COUNT_MAX, "eutaxy_durable_ops", id) < 0)) {
    rc = EU_ECORRUPT;
  } else if (rc == 1 && sqlite3_column_int(st, 0) == attempt) {
    if (!error) outcome = EU_SETTLE_DONE;
    else outcome = attempt >= sqlite3_column_int(st, 1) ? EU_SETTLE_FAILED : EU_SETTLE_RETRY;
  }
  eu_store_reset(s, st);
  if (rc < 0 || outcome == EU_SETTLE_STALE) return rc < 0 ? rc : outcome;
  if (outcome == EU_SETTLE_RETRY) {
    rc = prep(s, "UPDATE eutaxy_durable_ops SET next_attempt_at = ?2, last_error = ?3"
                 " WHERE id = ?1", &st);
    if (rc == EU_OK && (rc = bind_text(s, st, 1, id)) == EU_OK &&
        (rc = bind_text(s, st, 3, error)) == EU_OK) {
      sqlite3_bind_int64(st, 2, now + (delay > 0 ? delay : 0));
      rc = done(s, st);
    }
  } else if (outcome == EU_SETTLE_DONE) {
    rc = settle_op_row(s, id, "done", result, rlen, NULL, now);
  } else {
    rc = settle_op_row(s, id, "failed", NULL, 0, error, now);
  }
  if (rc == EU_OK) rc = refresh_durable(s);
  return rc < 0 ? rc : outcome;
}

int eu_durable_settle(eu_store *s, const char *id, int attempt, const void *result, size_t rlen,
                      const char *error, int64_t now, int64_t delay) {
  int rc;
  if ((rc = eu_store_savepoint(s)) < 0) return rc;
  return finish(s, settle_op(s, id, attempt, result, rlen, error, now, delay));
}

int eu_durable_get(eu_store *s, const char *id, eu_durable_state *out, eu_buf *buf) {
  sqlite3_stmt *st;
  int64_t status, result, error;
  int rc, copied = EU_OK;
  memset(out, 0, sizeof *out);
  if ((rc = prep(s, "SELECT status, result, last_error, attempt, created_at, settled_at"
                    " FROM eutaxy_durable_ops WHERE id = ?1", &st)) < 0)
    return rc;
  if ((rc = bind_text(s, st, 1, id)) < 0) return rc;
  rc = eu_store_internal_step(s, st);
  if (rc == 1 && (check_text(s, st, 0, 0, "eutaxy_durable_ops", id) < 0 ||
                  check_text(s, st, 2, COL_NULL, "eutaxy_durable_ops", id) < 0 ||
                  check_int(s, st, 3, 0, 0, COUNT_MAX, "eutaxy_durable_ops", id) < 0 ||
                  check_int(s, st, 4, 0, -TIME_MAX, TIME_MAX, "eutaxy_durable_ops", id) < 0 ||
                  check_int(s, st, 5, COL_NULL, -TIME_MAX, TIME_MAX, "eutaxy_durable_ops", id) < 0)) {
    rc = EU_ECORRUPT;
  } else if (rc == 1) {
    eu_buf_reset(buf);
    status = copy_column(st, 0, buf, &copied);
    result = copy_column(st, 1, buf, &copied);
    error = copy_column(st, 2, buf, &copied);
    if (copied == EU_OK) {
      out->status = at_offset(buf, status);
      out->result = at_offset(buf, result);
      out->rlen = result < 0 ? 0 : (size_t)sqlite3_column_bytes(st, 1);
      out->error = at_offset(buf, error);
      out->attempts = sqlite3_column_int(st, 3);
      out->created_at = sqlite3_column_int64(st, 4);
      out->settled_at = sqlite3_column_int64(st, 5);
    }
  }
  eu_store_reset(s, st);
  if (copied < 0) return eu_store_error(s, copied, "out of memory");
  return rc;
}
