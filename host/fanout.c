/*
 * fanout.c: durable fanout, the storage engine (see fanout.h).
 *
 * Owns the fanout tables and every statement on them: migrations, enqueue
 * with deduplication, claims, settlements, memos, the pending count and the
 * fanout's due time in the agenda. Must not call user code or know about
 * Lua: the runner (lua/eutaxy/fanout.lua) decides what to deliver and how a
 * failure is retried; this file only makes each decision durable, all or
 * nothing, and refuses a stale one.
 *
 * Why the pieces are shaped as they are:
 *
 * - A delivery row is the unit of work. Its attempt counter and generation
 *   are the compare-and-set key of every settlement, so an attempt whose
 *   lease ran out (and was claimed again) can never settle the newer one,
 *   and a key enqueued again after its manifest went (a new generation) is
 *   never settled by an attempt of the old one.
 * - A claim is the lease: it counts the attempt and moves next_attempt_at to
 *   when the lease ends, in one transaction for the whole batch, committed
 *   before the callback runs. Nothing is written when the callback hangs or
 *   the isolate dies; the row simply comes due again.
 * - Claims read through two indexes, first deliveries by (target, attempt,
 *   seq) and retries by (target, next_attempt_at), so a pass costs its batch,
 *   never the backlog; the fanout's due time is MIN(next_attempt_at) on a
 *   third. Enqueue writes one manifest, one row per target and the counter
 *   row: its cost does not depend on how much is pending either.
 * - The pending count lives in the counter row and changes in the same
 *   transaction as the rows it counts, so a turn that is rolled back after
 *   an enqueue returned (the caller raised later) rolls the count back too.
 *
 * Statements are the store's internal ones (eu_store_internal_prepare):
 * outside the authorizer and kept by the store across isolates.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agenda.h"
#include "eutaxy.h"
#include "fanout.h"

/* How long a failed dead-letter sink waits before it is tried again, and
 * how long a target that is no longer configured has its work put off. */
#define FANOUT_INFRA_RETRY_MS 60000

/* ---- migrations ------------------------------------------------------- */

/* steps[i] takes the capability from version i to i + 1. */
static const char *const fanout_steps[] = {
  /* 1: manifests, deliveries, the sequence and pending counter */
  "CREATE TABLE IF NOT EXISTS eutaxy_fanout_messages("
  "  key TEXT PRIMARY KEY,"
  "  id TEXT NOT NULL,"
  "  payload BLOB NOT NULL,"
  "  targets TEXT NOT NULL,"
  "  remaining INTEGER NOT NULL CHECK (remaining >= 0),"
  "  seq INTEGER NOT NULL,"
  "  created_at INTEGER NOT NULL,"
  "  generation_id TEXT NOT NULL);"
  "CREATE TABLE IF NOT EXISTS eutaxy_fanout_deliveries("
  "  id TEXT PRIMARY KEY,"
  "  message_key TEXT NOT NULL,"
  "  target_id TEXT NOT NULL,"
  "  seq INTEGER NOT NULL,"
  "  phase TEXT NOT NULL DEFAULT 'delivery' CHECK (phase IN ('delivery', 'dead_letter')),"
  "  attempt INTEGER NOT NULL DEFAULT 0 CHECK (attempt >= 0),"
  "  next_attempt_at INTEGER NOT NULL,"
  "  last_error TEXT,"
  "  last_error_name TEXT,"
  "  created_at INTEGER NOT NULL,"
  "  generation_id TEXT NOT NULL,"
  "  dead_lettered_at INTEGER,"
  "  dead_letter_reason TEXT CHECK (dead_letter_reason IN ('explicit', 'exhausted')));"
  "CREATE INDEX IF NOT EXISTS eutaxy_fanout_deliveries_first"
  "  ON eutaxy_fanout_deliveries(target_id, attempt, seq);"
  "CREATE INDEX IF NOT EXISTS eutaxy_fanout_deliveries_retry"
  "  ON eutaxy_fanout_deliveries(target_id, next_attempt_at) WHERE attempt > 0;"
  "CREATE INDEX IF NOT EXISTS eutaxy_fanout_deliveries_due"
  "  ON eutaxy_fanout_deliveries(next_attempt_at);"
  "CREATE TABLE IF NOT EXISTS eutaxy_fanout_seq("
  "  id INTEGER PRIMARY KEY CHECK (id = 1),"
  "  next_seq INTEGER NOT NULL,"
  "  pending INTEGER NOT NULL);"
  "INSERT OR IGNORE INTO eutaxy_fanout_seq(id, next_seq, pending) VALUES (1, 0, 0);",
  /* 2: memoized callback results */
  "CREATE TABLE IF NOT EXISTS eutaxy_fanout_memos("
  "  delivery_id TEXT NOT NULL,"
  "  key TEXT NOT NULL,"
  "  generation_id TEXT NOT NULL,"
  "  value BLOB NOT NULL,"
  "  created_at INTEGER NOT NULL,"
  "  PRIMARY KEY (delivery_id, key)) WITHOUT ROWID;",
};

int eu_fanout_migrate(eu_store *s) {
  int rc, agenda = -1, fanout = -1;
  /* The common case, a database already current, reads two rows and
   * writes nothing (before the first migration the reads fail). */
  if (eu_agenda_version(s, "agenda", &agenda) == EU_OK && agenda >= 1 &&
      eu_agenda_version(s, "fanout", &fanout) == EU_OK &&
      fanout == (int)(sizeof fanout_steps / sizeof fanout_steps[0]))
    return EU_OK;
  if ((rc = eu_store_savepoint(s)) < 0) return rc;
  /* Fanout is a participant of the agenda: its table must be there too. */
  if ((rc = eu_agenda_migrate(s)) < 0 ||
      (rc = eu_agenda_migrate_capability(s, "fanout", fanout_steps,
                                         (int)(sizeof fanout_steps / sizeof fanout_steps[0]))) < 0) {
    char msg[EU_ERRLEN];
    snprintf(msg, sizeof msg, "%s", eu_store_errmsg(s));
    eu_store_rollback_to(s);
    return eu_store_error(s, rc, "fanout: migrating its tables: %s", msg);
  }
  return eu_store_release(s);
}

/* ---- helpers ---------------------------------------------------------- */

/* ---- what the engine reads ------------------------------------------- */

/* Every value read from the engine's tables is checked (store.h,
 * eu_store_check_int): a row that breaks the engine's invariants is that
 * object's error, never a crash or a row that comes due forever. */
#define COL_NULL EU_COL_NULL
#define check_int(s, st, i, flags, lo, hi, table, row) \
  eu_store_check_int((s), "fanout", (st), (i), (flags), (lo), (hi), (table), (row))
#define check_text(s, st, i, flags, table, row) \
  eu_store_check_text((s), "fanout", (st), (i), (flags), (table), (row))

/* Times and counts the engine can add to without overflowing. */
#define TIME_MAX (INT64_C(1) << 53)
#define COUNT_MAX INT64_C(1000000000)

/* Prepares one of this file's statements. */
static int prep(eu_store *s, const char *sql, sqlite3_stmt **st) {
  return eu_store_internal_prepare(s, sql, st);
}

static int bind_rc(eu_store *s, int rc) {
  if (rc == SQLITE_OK) return EU_OK;
  return eu_store_error(s, rc == SQLITE_NOMEM ? EU_ENOMEM : EU_ESQL, "fanout: binding a value: %s",
                        sqlite3_errstr(rc));
}

static int bind_text(eu_store *s, sqlite3_stmt *st, int i, const char *v) {
  return bind_rc(s, v ? sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC) : sqlite3_bind_null(st, i));
}

static int bind_blob(eu_store *s, sqlite3_stmt *st, int i, const void *p, size_t n) {
  return bind_rc(s, n ? sqlite3_bind_blob64(st, i, p, n, SQLITE_STATIC) : sqlite3_bind_zeroblob(st, i, 0));
}

static int bind_int(eu_store *s, sqlite3_stmt *st, int i, int64_t v) {
  return bind_rc(s, sqlite3_bind_int64(st, i, v));
}

/* Steps a statement that returns no row we need, and resets it. */
static int run(eu_store *s, sqlite3_stmt *st) {
  int rc;
  while ((rc = eu_store_internal_step(s, st)) == 1) {}
  eu_store_reset(s, st);
  return rc;
}

/* Steps to the first row: 1 (left on the row: reset it after reading), 0
 * (reset), or <0. */
static int first_row(eu_store *s, sqlite3_stmt *st) {
  int rc = eu_store_internal_step(s, st);
  if (rc != 1) eu_store_reset(s, st);
  return rc;
}

/* Ends a failed write: rolls its savepoint back, keeping the first message. */
static int undo(eu_store *s, int rc) {
  char msg[EU_ERRLEN];
  snprintf(msg, sizeof msg, "%s", eu_store_errmsg(s));
  eu_store_rollback_to(s);
  return eu_store_error(s, rc, "%s", msg);
}

/* Appends v to b as a JSON string. */
static int json_string(eu_buf *b, const char *v) {
  const unsigned char *p = (const unsigned char *)v;
  int rc = eu_buf_putc(b, '"');
  for (; rc == EU_OK && *p; p++) {
    if (*p == '"' || *p == '\\') {
      rc = eu_buf_putc(b, '\\');
      if (rc == EU_OK) rc = eu_buf_putc(b, *p);
    } else if (*p < 0x20) {
      rc = eu_buf_printf(b, "\\u%04x", *p);
    } else {
      rc = eu_buf_putc(b, *p);
    }
  }
  return rc == EU_OK ? eu_buf_putc(b, '"') : rc;
}

/* A delivery's id: the JSON array [key, target]. */
static int delivery_id(eu_buf *b, const char *key, const char *target) {
  int rc;
  eu_buf_reset(b);
  rc = eu_buf_putc(b, '[');
  if (rc == EU_OK) rc = json_string(b, key);
  if (rc == EU_OK) rc = eu_buf_putc(b, ',');
  if (rc == EU_OK) rc = json_string(b, target);
  if (rc == EU_OK) rc = eu_buf_putc(b, ']');
  return rc;
}

static void uuid_of(char out[37], uint64_t hi, uint64_t lo) {
  hi = (hi & ~UINT64_C(0xf000)) | UINT64_C(0x4000);            /* version 4 */
  lo = (lo & ~(UINT64_C(0xc) << 60)) | (UINT64_C(0x8) << 60);  /* variant 10 */
  snprintf(out, 37, "%08x-%04x-%04x-%04x-%012llx", (unsigned)(hi >> 32),
           (unsigned)((hi >> 16) & 0xffff), (unsigned)(hi & 0xffff), (unsigned)(lo >> 48),
           (unsigned long long)(lo & UINT64_C(0xffffffffffff)));
}

int eu_fanout_next_due(eu_store *s, int *has, int64_t *due) {
  sqlite3_stmt *st;
  int rc;
  *has = 0;
  *due = 0;
  if ((rc = prep(s, "SELECT MIN(next_attempt_at) FROM eutaxy_fanout_deliveries", &st)) < 0) return rc;
  rc = first_row(s, st);
  if (rc == 1) {
    rc = check_int(s, st, 0, COL_NULL, -TIME_MAX, TIME_MAX, "eutaxy_fanout_deliveries", "next_attempt_at");
    if (rc == EU_OK && sqlite3_column_type(st, 0) != SQLITE_NULL) {
      *has = 1;
      *due = sqlite3_column_int64(st, 0);
    }
    eu_store_reset(s, st);
  }
  return rc < 0 ? rc : EU_OK;
}

/* Keeps the fanout's agenda row at its earliest work and the object's alarm
 * at the agenda's earliest, in the current transaction. Most settlements
 * leave the earliest time where it was (a settled row was leased into the
 * future): then the row is not written again. The alarm is reconciled
 * every time: the world deletes it while an alarm runs. */
static int sync_agenda(eu_store *s) {
  sqlite3_stmt *st;
  int has, rc, same = 0;
  int64_t due;
  if ((rc = eu_fanout_next_due(s, &has, &due)) < 0) return rc;
  if ((rc = prep(s, "SELECT due FROM eutaxy_agenda WHERE participant = '" EU_FANOUT_PARTICIPANT "'"
                    " AND key = ''", &st)) < 0) return rc;
  if ((rc = first_row(s, st)) < 0) return rc;
  if (rc == 1) {
    rc = check_int(s, st, 0, 0, INT64_MIN, INT64_MAX, "eutaxy_agenda", EU_FANOUT_PARTICIPANT);
    same = has && sqlite3_column_int64(st, 0) == due;
    eu_store_reset(s, st);
    if (rc < 0) return rc;
  } else {
    same = !has;
  }
  if (!same) {
    rc = has ? eu_agenda_set(s, EU_FANOUT_PARTICIPANT, "", due)
             : eu_agenda_clear(s, EU_FANOUT_PARTICIPANT, "");
    if (rc < 0) return rc;
  }
  return eu_agenda_reconcile(s);
}

/* Ends a write that must be durable before the caller goes on: releases its
 * savepoint, commits the turn and begins the next, so that the world ends a
 * turn (and follows the alarm it may have moved) at the next yield. */
static int release_and_commit(eu_store *s) {
  int rc = eu_store_release(s);
  if (rc < 0) return rc;
  if ((rc = eu_store_commit(s)) < 0) return rc;
  return eu_store_touch(s);
}

static int adjust_pending(eu_store *s, int64_t delta) {
  sqlite3_stmt *st;
  int rc;
  if (delta == 0) return EU_OK;
  if ((rc = prep(s, "UPDATE eutaxy_fanout_seq SET pending = pending + ?1 WHERE id = 1", &st)) < 0) return rc;
  if ((rc = bind_int(s, st, 1, delta)) < 0) return rc;
  return run(s, st);
}

/* ---- enqueue ---------------------------------------------------------- */

/* The frozen target set: a JSON array of the sorted names. */
static int targets_json(eu_buf *b, const char *const *targets, int n) {
  int i, rc = eu_buf_putc(b, '[');
  for (i = 0; rc == EU_OK && i < n; i++) {
    if (i > 0) rc = eu_buf_putc(b, ',');
    if (rc == EU_OK) rc = json_string(b, targets[i]);
  }
  return rc == EU_OK ? eu_buf_putc(b, ']') : rc;
}

/* Compares the pending manifest of in->key with in: 1 the same work, 0
 * none pending, 2 different work, <0. Fills o from the manifest when one
 * is there. */
static int find_manifest(eu_store *s, const eu_fanout_input *in, const char *targets,
                         eu_fanout_enqueued *o) {
  sqlite3_stmt *st;
  int rc, same;
  const void *p;
  size_t n;
  if ((rc = prep(s, "SELECT id, payload, targets, generation_id, seq, created_at "
                    "FROM eutaxy_fanout_messages WHERE key = ?1", &st)) < 0) return rc;
  if ((rc = bind_text(s, st, 1, in->key)) < 0) return rc;
  if ((rc = first_row(s, st)) <= 0) return rc;
  if ((rc = check_text(s, st, 0, 0, "eutaxy_fanout_messages", in->key)) < 0 ||
      (rc = check_text(s, st, 2, 0, "eutaxy_fanout_messages", in->key)) < 0 ||
      (rc = check_text(s, st, 3, 0, "eutaxy_fanout_messages", in->key)) < 0 ||
      (rc = check_int(s, st, 4, 0, 0, INT64_MAX, "eutaxy_fanout_messages", in->key)) < 0 ||
      (rc = check_int(s, st, 5, 0, -TIME_MAX, TIME_MAX, "eutaxy_fanout_messages", in->key)) < 0) {
    eu_store_reset(s, st);
    return rc;
  }
  p = sqlite3_column_blob(st, 1);
  n = (size_t)sqlite3_column_bytes(st, 1);
  same = strcmp((const char *)sqlite3_column_text(st, 0), in->id) == 0 &&
         n == in->len && (n == 0 || memcmp(p, in->payload, n) == 0) &&
         strcmp((const char *)sqlite3_column_text(st, 2), targets) == 0;
  snprintf(o->generation, sizeof o->generation, "%s", (const char *)sqlite3_column_text(st, 3));
  o->seq = sqlite3_column_int64(st, 4);
  o->created_at = sqlite3_column_int64(st, 5);
  eu_store_reset(s, st);
  return same ? 1 : 2;
}

static int next_seq(eu_store *s, int64_t pending, int64_t *seq) {
  sqlite3_stmt *st;
  int rc;
  if ((rc = prep(s, "UPDATE eutaxy_fanout_seq SET next_seq = next_seq + 1, pending = pending + ?1 "
                    "WHERE id = 1 RETURNING next_seq - 1", &st)) < 0) return rc;
  if ((rc = bind_int(s, st, 1, pending)) < 0) return rc;
  rc = first_row(s, st);
  if (rc == 0) return eu_store_error(s, EU_ECORRUPT, "fanout: the sequence row is missing");
  if (rc < 0) return rc;
  rc = check_int(s, st, 0, 0, 0, INT64_MAX - 1, "eutaxy_fanout_seq", "1");
  *seq = sqlite3_column_int64(st, 0);
  eu_store_reset(s, st);
  return rc;
}

static int insert_manifest(eu_store *s, const eu_fanout_input *in, const char *targets, int ntargets,
                           const eu_fanout_enqueued *o) {
  sqlite3_stmt *st;
  int rc;
  if ((rc = prep(s, "INSERT INTO eutaxy_fanout_messages"
                    "(key, id, payload, targets, remaining, seq, created_at, generation_id) "
                    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)", &st)) < 0) return rc;
  if ((rc = bind_text(s, st, 1, in->key)) < 0 || (rc = bind_text(s, st, 2, in->id)) < 0 ||
      (rc = bind_blob(s, st, 3, in->payload, in->len)) < 0 ||
      (rc = bind_text(s, st, 4, targets)) < 0 || (rc = bind_int(s, st, 5, ntargets)) < 0 ||
      (rc = bind_int(s, st, 6, o->seq)) < 0 || (rc = bind_int(s, st, 7, o->created_at)) < 0 ||
      (rc = bind_text(s, st, 8, o->generation)) < 0) {
    eu_store_reset(s, st);
    return rc;
  }
  return run(s, st);
}

static int insert_delivery(eu_store *s, const char *id, const eu_fanout_input *in, const char *target,
                           const eu_fanout_enqueued *o, int64_t first_at) {
  sqlite3_stmt *st;
  int rc;
  if ((rc = prep(s, "INSERT INTO eutaxy_fanout_deliveries"
                    "(id, message_key, target_id, seq, phase, attempt, next_attempt_at, created_at,"
                    " generation_id) VALUES (?1, ?2, ?3, ?4, 'delivery', 0, ?5, ?6, ?7) "
                    "ON CONFLICT(id) DO NOTHING", &st)) < 0) return rc;
  if ((rc = bind_text(s, st, 1, id)) < 0 || (rc = bind_text(s, st, 2, in->key)) < 0 ||
      (rc = bind_text(s, st, 3, target)) < 0 || (rc = bind_int(s, st, 4, o->seq)) < 0 ||
      (rc = bind_int(s, st, 5, first_at)) < 0 || (rc = bind_int(s, st, 6, o->created_at)) < 0 ||
      (rc = bind_text(s, st, 7, o->generation)) < 0) {
    eu_store_reset(s, st);
    return rc;
  }
  if ((rc = run(s, st)) < 0) return rc;
  if (sqlite3_changes(eu_store_db(s)) != 1)
    return eu_store_error(s, EU_ECORRUPT, "fanout: delivery %s exists without its manifest", id);
  return EU_OK;
}

int eu_fanout_enqueue(eu_store *s, const eu_fanout_input *in, int n,
                      const char *const *targets, int ntargets, int64_t now, int64_t first_at,
                      eu_fanout_random random, void *rud,
                      eu_fanout_enqueued *out, int *conflict) {
  eu_buf tjson, id;
  int i, j, rc, fresh = 0;
  *conflict = 0;
  if (n < 0 || ntargets <= 0) return eu_store_error(s, EU_EINVAL, "fanout: enqueue needs at least one target");
  for (j = 1; j < ntargets; j++)
    if (strcmp(targets[j - 1], targets[j]) >= 0)
      return eu_store_error(s, EU_EINVAL, "fanout: enqueue targets must be sorted and distinct");
  for (i = 0; i < n; i++)
    if (!in[i].key || !in[i].key[0] || !in[i].id || !in[i].id[0])
      return eu_store_error(s, EU_EINVAL, "fanout: message ids and deduplication keys must be non-empty");
  eu_buf_init(&tjson);
  eu_buf_init(&id);
  if (targets_json(&tjson, targets, ntargets) < 0) {
    eu_buf_free(&tjson);
    return eu_store_error(s, EU_ENOMEM, "out of memory");
  }
  if ((rc = eu_store_savepoint(s)) < 0) goto done;
  for (i = 0; i < n; i++) {
    eu_fanout_enqueued *o = &out[i];
    memset(o, 0, sizeof *o);
    rc = find_manifest(s, &in[i], tjson.p, o);
    if (rc < 0) break;
    if (rc == 1) continue;  /* the same work, still pending: nothing to do */
    if (rc == 2) {
      *conflict = i + 1;
      rc = undo(s, EU_OK);
      eu_store_error(s, EU_EINVAL, "deduplication key \"%s\" already identifies different work",
                     in[i].key);
      goto done;
    }
    o->fresh = 1;
    o->created_at = now;
    uuid_of(o->generation, random(rud), random(rud));
    if ((rc = next_seq(s, ntargets, &o->seq)) < 0) break;
    if ((rc = insert_manifest(s, &in[i], tjson.p, ntargets, o)) < 0) break;
    for (j = 0; j < ntargets && rc == EU_OK; j++) {
      if (delivery_id(&id, in[i].key, targets[j]) < 0) rc = eu_store_error(s, EU_ENOMEM, "out of memory");
      else rc = insert_delivery(s, id.p, &in[i], targets[j], o, first_at);
    }
    if (rc < 0) break;
    fresh++;
  }
  if (rc >= 0 && fresh > 0) rc = sync_agenda(s);
  if (rc < 0) rc = undo(s, rc);
  else rc = eu_store_release(s);
done:
  eu_buf_free(&tjson);
  eu_buf_free(&id);
  return rc;
}

/* ---- claims ----------------------------------------------------------- */

/* The columns every claim query reads, in this order. The manifest comes
 * along by a left join, so a delivery without one is seen, not skipped. */
#define DELIVERY_COLUMNS \
  "SELECT d.id, d.message_key, m.id, d.target_id, d.generation_id, m.payload, d.last_error," \
  " d.last_error_name, d.dead_letter_reason, d.seq, d.created_at, d.next_attempt_at," \
  " d.dead_lettered_at, d.attempt, d.phase, m.generation_id" \
  " FROM eutaxy_fanout_deliveries d LEFT JOIN eutaxy_fanout_messages m ON m.key = d.message_key "

enum { C_ID, C_KEY, C_MID, C_TARGET, C_GEN, C_PAYLOAD, C_ERR, C_ERRNAME, C_REASON, C_NSTR };

/* A claimed row while the batch is read: strings as offsets into the
 * buffer, which may move as it grows. */
typedef struct claim_rec {
  eu_fanout_delivery d;
  size_t off[C_NSTR];
  size_t len[C_NSTR];
  int has[C_NSTR];
  int skip;          /* another claim took it first */
} claim_rec;

/* Checks the claim query's row against the delivery's invariants. */
static int check_delivery(eu_store *s, sqlite3_stmt *st) {
  static const char T[] = "eutaxy_fanout_deliveries";
  const char *id;
  const unsigned char *phase;
  int rc;
  if ((rc = check_text(s, st, C_ID, 0, T, NULL)) < 0) return rc;
  id = (const char *)sqlite3_column_text(st, C_ID);
  if (!id) return eu_store_error(s, EU_ENOMEM, "out of memory");
  if ((rc = check_text(s, st, C_KEY, 0, T, id)) < 0 || (rc = check_text(s, st, C_TARGET, 0, T, id)) < 0 ||
      (rc = check_text(s, st, C_GEN, 0, T, id)) < 0 || (rc = check_text(s, st, C_ERR, COL_NULL, T, id)) < 0 ||
      (rc = check_text(s, st, C_ERRNAME, COL_NULL, T, id)) < 0 ||
      (rc = check_text(s, st, C_REASON, COL_NULL, T, id)) < 0 ||
      (rc = check_int(s, st, 9, 0, 0, INT64_MAX, T, id)) < 0 ||
      (rc = check_int(s, st, 10, 0, -TIME_MAX, TIME_MAX, T, id)) < 0 ||
      (rc = check_int(s, st, 11, 0, -TIME_MAX, TIME_MAX, T, id)) < 0 ||
      (rc = check_int(s, st, 12, COL_NULL, -TIME_MAX, TIME_MAX, T, id)) < 0 ||
      (rc = check_int(s, st, 13, 0, 0, COUNT_MAX, T, id)) < 0 ||
      (rc = check_text(s, st, 14, 0, T, id)) < 0 ||
      (rc = check_text(s, st, 15, COL_NULL, "eutaxy_fanout_messages", id)) < 0)
    return rc;
  if (sqlite3_column_type(st, C_MID) != SQLITE_NULL &&
      (rc = check_text(s, st, C_MID, 0, "eutaxy_fanout_messages", id)) < 0)
    return rc;
  phase = sqlite3_column_text(st, 14);
  if (!phase || (strcmp((const char *)phase, "delivery") != 0 && strcmp((const char *)phase, "dead_letter") != 0))
    return eu_store_error(s, EU_ECORRUPT, "fanout: a row of %s (%s) breaks its invariants: column %s is "
                          "neither 'delivery' nor 'dead_letter'", T, id && id[0] ? id : "the row read",
                          sqlite3_column_name(st, 14) ? sqlite3_column_name(st, 14) : "?");
  return EU_OK;
}

static int copy_row(eu_store *s, sqlite3_stmt *st, eu_buf *buf, size_t at) {
  claim_rec r;
  int c, rc;
  if ((rc = check_delivery(s, st)) < 0) return rc;
  memset(&r, 0, sizeof r);
  for (c = 0; c < C_NSTR; c++) {
    const void *p = c == C_PAYLOAD ? sqlite3_column_blob(st, c) : (const void *)sqlite3_column_text(st, c);
    size_t n = (size_t)sqlite3_column_bytes(st, c);
    if (sqlite3_column_type(st, c) == SQLITE_NULL) continue;
    r.has[c] = 1;
    r.off[c] = buf->n;
    r.len[c] = n;
    if (eu_buf_put(buf, p ? p : "", n) < 0 || eu_buf_putc(buf, '\0') < 0)
      return eu_store_error(s, EU_ENOMEM, "out of memory");
  }
  if (!r.has[C_MID] || sqlite3_column_type(st, 15) == SQLITE_NULL ||
      strcmp((const char *)sqlite3_column_text(st, 15), (const char *)sqlite3_column_text(st, C_GEN)) != 0)
    return eu_store_error(s, EU_ECORRUPT, "fanout: delivery %s is missing its message manifest",
                          (const char *)sqlite3_column_text(st, C_ID));
  r.d.seq = sqlite3_column_int64(st, 9);
  r.d.created_at = sqlite3_column_int64(st, 10);
  r.d.next_attempt_at = sqlite3_column_int64(st, 11);
  r.d.dead_lettered_at = sqlite3_column_int64(st, 12);
  r.d.attempt = sqlite3_column_int(st, 13);
  r.d.dead_letter = strcmp((const char *)sqlite3_column_text(st, 14), "dead_letter") == 0;
  memcpy(buf->p + at, &r, sizeof r);
  return EU_OK;
}

/* Reads up to limit rows of a claim query into recs [*nrec, ...). */
static int read_batch(eu_store *s, const char *sql, const char *target, int64_t now, int limit,
                      eu_buf *buf, int *nrec) {
  sqlite3_stmt *st;
  int rc;
  if ((rc = prep(s, sql, &st)) < 0) return rc;
  if ((rc = bind_text(s, st, 1, target)) < 0 || (rc = bind_int(s, st, 2, now)) < 0 ||
      (rc = bind_int(s, st, 3, limit)) < 0) {
    eu_store_reset(s, st);
    return rc;
  }
  while ((rc = eu_store_internal_step(s, st)) == 1) {
    if ((rc = copy_row(s, st, buf, (size_t)*nrec * sizeof(claim_rec))) < 0) break;
    ++*nrec;
  }
  eu_store_reset(s, st);
  return rc;
}

/* Counts the attempt and takes the lease, if the row is still as read. */
static int claim_one(eu_store *s, claim_rec *r, const char *id, const char *gen, int64_t lease_at) {
  sqlite3_stmt *st;
  int rc;
  if ((rc = prep(s, "UPDATE eutaxy_fanout_deliveries SET attempt = attempt + 1, next_attempt_at = ?4 "
                    "WHERE id = ?1 AND generation_id = ?2 AND attempt = ?3 AND phase = 'delivery' "
                    "RETURNING attempt", &st)) < 0) return rc;
  if ((rc = bind_text(s, st, 1, id)) < 0 || (rc = bind_text(s, st, 2, gen)) < 0 ||
      (rc = bind_int(s, st, 3, r->d.attempt)) < 0 || (rc = bind_int(s, st, 4, lease_at)) < 0) {
    eu_store_reset(s, st);
    return rc;
  }
  rc = first_row(s, st);
  if (rc < 0) return rc;
  if (rc == 0) {
    r->skip = 1;
    return EU_OK;
  }
  if ((rc = check_int(s, st, 0, 0, 0, COUNT_MAX, "eutaxy_fanout_deliveries", id)) < 0) {
    eu_store_reset(s, st);
    return rc;
  }
  r->d.attempt = sqlite3_column_int(st, 0);
  r->d.next_attempt_at = lease_at;
  eu_store_reset(s, st);
  return EU_OK;
}

int eu_fanout_claim(eu_store *s, const char *target, int64_t now, int max_batch,
                    int max_attempts, int64_t lease_ms, eu_fanout_each each, void *ud,
                    eu_buf *buf) {
  claim_rec *recs;
  int nrec = 0, i, c, rc;
  size_t head;
  if (max_batch <= 0 || max_batch > EU_FANOUT_MAX_BATCH || max_attempts <= 0 || lease_ms < 0)
    return eu_store_error(s, EU_EINVAL, "fanout: a claim takes 1 to %d deliveries and at least one attempt",
                          EU_FANOUT_MAX_BATCH);
  /* The records first, then their strings. */
  eu_buf_reset(buf);
  head = (size_t)max_batch * sizeof(claim_rec);
  if (eu_buf_reserve(buf, head) < 0) return eu_store_error(s, EU_ENOMEM, "out of memory");
  buf->n = head;
  if ((rc = eu_store_savepoint(s)) < 0) return rc;
  /* First deliveries in sequence order, then retries as they came due. */
  rc = read_batch(s, DELIVERY_COLUMNS
                  "WHERE d.target_id = ?1 AND d.attempt = 0 AND d.phase = 'delivery'"
                  " AND d.next_attempt_at <= ?2 ORDER BY d.seq LIMIT ?3",
                  target, now, max_batch, buf, &nrec);
  if (rc >= 0 && nrec < max_batch)
    rc = read_batch(s, DELIVERY_COLUMNS
                    "WHERE d.target_id = ?1 AND d.attempt > 0 AND d.next_attempt_at <= ?2"
                    " ORDER BY d.next_attempt_at, d.seq LIMIT ?3",
                    target, now, max_batch - nrec, buf, &nrec);
  for (i = 0; rc >= 0 && i < nrec; i++) {
    claim_rec *r = (claim_rec *)buf->p + i;
    if (r->d.dead_letter || r->d.attempt >= max_attempts) {
      r->d.terminal = 1;  /* its next step is the dead letter; no attempt is counted */
      continue;
    }
    rc = claim_one(s, r, buf->p + r->off[C_ID], buf->p + r->off[C_GEN], now + lease_ms);
  }
  if (rc >= 0 && nrec > 0) rc = sync_agenda(s);
  if (rc < 0) return undo(s, rc);
  if ((rc = release_and_commit(s)) < 0) return rc;
  /* Durable now: hand the rows over. */
  recs = (claim_rec *)buf->p;
  for (i = 0; i < nrec; i++) {
    claim_rec *r = &recs[i];
    const char **f[C_NSTR];
    if (r->skip) continue;
    f[C_ID] = &r->d.id; f[C_KEY] = &r->d.message_key; f[C_MID] = &r->d.message_id;
    f[C_TARGET] = &r->d.target; f[C_GEN] = &r->d.generation; f[C_PAYLOAD] = &r->d.payload;
    f[C_ERR] = &r->d.last_error; f[C_ERRNAME] = &r->d.last_error_name; f[C_REASON] = &r->d.reason;
    for (c = 0; c < C_NSTR; c++) *f[c] = r->has[c] ? buf->p + r->off[c] : NULL;
    r->d.len = r->len[C_PAYLOAD];
  }
  for (i = 0; i < nrec; i++)
    if (!recs[i].skip && each && each(ud, &recs[i].d) != 0) break;
  return nrec;
}

/* ---- settlements ------------------------------------------------------ */

/* Removes one delivery the ref still owns; *gone gets 1 or 0. No savepoint,
 * no agenda: the callers wrap it. */
static int remove_one(eu_store *s, const eu_fanout_ref *r, int dead_letter, int *gone) {
  sqlite3_stmt *st;
  char *key = NULL;
  int rc, remaining = -1;
  *gone = 0;
  if ((rc = prep(s, "DELETE FROM eutaxy_fanout_deliveries "
                    "WHERE id = ?1 AND generation_id = ?2 AND attempt = ?3"
                    " AND (phase = 'delivery' OR ?4) RETURNING message_key", &st)) < 0) return rc;
  if ((rc = bind_text(s, st, 1, r->id)) < 0 || (rc = bind_text(s, st, 2, r->generation)) < 0 ||
      (rc = bind_int(s, st, 3, r->attempt)) < 0 || (rc = bind_int(s, st, 4, dead_letter != 0)) < 0) {
    eu_store_reset(s, st);
    return rc;
  }
  if ((rc = first_row(s, st)) <= 0) return rc;
  if ((rc = check_text(s, st, 0, 0, "eutaxy_fanout_deliveries", r->id)) < 0) {
    eu_store_reset(s, st);
    return rc;
  }
  key = strdup((const char *)sqlite3_column_text(st, 0));
  rc = run(s, st);  /* to its end: the delete is done when the statement is */
  if (!key) return eu_store_error(s, EU_ENOMEM, "out of memory");
  if (rc < 0) goto out;
  if ((rc = prep(s, "DELETE FROM eutaxy_fanout_memos WHERE delivery_id = ?1", &st)) < 0) goto out;
  if ((rc = bind_text(s, st, 1, r->id)) < 0 || (rc = run(s, st)) < 0) goto out;
  if ((rc = prep(s, "UPDATE eutaxy_fanout_messages SET remaining = remaining - 1 "
                    "WHERE key = ?1 AND generation_id = ?2 RETURNING remaining", &st)) < 0) goto out;
  if ((rc = bind_text(s, st, 1, key)) < 0 || (rc = bind_text(s, st, 2, r->generation)) < 0) goto out;
  if ((rc = first_row(s, st)) < 0) goto out;
  if (rc == 1) {
    if ((rc = check_int(s, st, 0, 0, 0, COUNT_MAX, "eutaxy_fanout_messages", key)) < 0) {
      eu_store_reset(s, st);
      goto out;
    }
    remaining = sqlite3_column_int(st, 0);
    if ((rc = run(s, st)) < 0) goto out;
  }
  if (remaining < 0) {
    rc = eu_store_error(s, EU_ECORRUPT, "fanout: delivery %s is missing its message manifest", r->id);
    goto out;
  }
  if (remaining == 0) {
    /* the last target settled: the key is free to identify new work */
    if ((rc = prep(s, "DELETE FROM eutaxy_fanout_messages WHERE key = ?1", &st)) < 0) goto out;
    if ((rc = bind_text(s, st, 1, key)) < 0 || (rc = run(s, st)) < 0) goto out;
  }
  *gone = 1;
  rc = EU_OK;
out:
  free(key);
  return rc;
}

/* Removes the deliveries the refs still own, in one savepoint, with the
 * pending count and the agenda. */
static int remove_batch(eu_store *s, const eu_fanout_ref *r, int n, int *removed, int dead_letter) {
  int i, rc, gone = 0;
  if ((rc = eu_store_savepoint(s)) < 0) return rc;
  for (i = 0; i < n; i++) {
    if ((rc = remove_one(s, &r[i], dead_letter, &removed[i])) < 0) return undo(s, rc);
    gone += removed[i];
  }
  if (gone > 0 && ((rc = adjust_pending(s, -gone)) < 0 || (rc = sync_agenda(s)) < 0)) return undo(s, rc);
  if ((rc = eu_store_release(s)) < 0) return rc;
  return gone;
}

int eu_fanout_remove(eu_store *s, const eu_fanout_ref *r, int dead_letter) {
  int gone = 0;
  int rc = remove_batch(s, r, 1, &gone, dead_letter);
  return rc < 0 ? rc : gone;
}

int eu_fanout_remove_many(eu_store *s, const eu_fanout_ref *r, int n, int *removed) {
  if (n <= 0) return 0;
  return remove_batch(s, r, n, removed, 0);
}

/* Runs an UPDATE keyed by a ref (?1 id, ?2 generation, ?3 attempt) whose
 * other parameters bind binds; returns the rows it changed. */
static int update_ref(eu_store *s, const char *sql, const eu_fanout_ref *r,
                      int (*binds)(eu_store *, sqlite3_stmt *, const void *), const void *ud) {
  sqlite3_stmt *st;
  int rc;
  if ((rc = prep(s, sql, &st)) < 0) return rc;
  if ((rc = bind_text(s, st, 1, r->id)) < 0 || (rc = bind_text(s, st, 2, r->generation)) < 0 ||
      (rc = bind_int(s, st, 3, r->attempt)) < 0 || (rc = binds(s, st, ud)) < 0) {
    eu_store_reset(s, st);
    return rc;
  }
  if ((rc = run(s, st)) < 0) return rc;
  return sqlite3_changes(eu_store_db(s));
}

typedef struct retry_args {
  int64_t next_at;
  const char *name, *error;
} retry_args;

static int bind_retry(eu_store *s, sqlite3_stmt *st, const void *ud) {
  const retry_args *a = ud;
  int rc;
  if ((rc = bind_int(s, st, 4, a->next_at)) < 0 || (rc = bind_text(s, st, 5, a->error)) < 0) return rc;
  return bind_text(s, st, 6, a->name);
}

int eu_fanout_retry(eu_store *s, const eu_fanout_ref *r, int64_t next_at, const char *error_name,
                    const char *error) {
  retry_args a;
  int rc, n;
  a.next_at = next_at;
  a.name = error_name;
  a.error = error;
  if ((rc = eu_store_savepoint(s)) < 0) return rc;
  n = update_ref(s, "UPDATE eutaxy_fanout_deliveries SET next_attempt_at = ?4, last_error = ?5,"
                    " last_error_name = ?6 WHERE id = ?1 AND generation_id = ?2 AND attempt = ?3"
                    " AND phase = 'delivery'", r, bind_retry, &a);
  if (n < 0) return undo(s, n);
  if (n > 0 && (rc = sync_agenda(s)) < 0) return undo(s, rc);
  if ((rc = eu_store_release(s)) < 0) return rc;
  return n > 0;
}

typedef struct dead_args {
  const char *reason;
  int64_t at, retry_at;
  const char *name, *error;
} dead_args;

static int bind_dead(eu_store *s, sqlite3_stmt *st, const void *ud) {
  const dead_args *a = ud;
  int rc;
  if ((rc = bind_int(s, st, 4, a->at)) < 0 || (rc = bind_text(s, st, 5, a->reason)) < 0 ||
      (rc = bind_int(s, st, 6, a->retry_at)) < 0 || (rc = bind_text(s, st, 7, a->error)) < 0)
    return rc;
  return bind_text(s, st, 8, a->name);
}

int eu_fanout_dead_letter(eu_store *s, const eu_fanout_ref *r, const char *reason, int64_t at,
                          int64_t retry_at, const char *error_name, const char *error) {
  dead_args a;
  int rc, n;
  if (!reason || (strcmp(reason, "explicit") != 0 && strcmp(reason, "exhausted") != 0))
    return eu_store_error(s, EU_EINVAL, "fanout: a dead letter's reason is explicit or exhausted");
  a.reason = reason;
  a.at = at;
  a.retry_at = retry_at;
  a.name = error_name;
  a.error = error;
  if ((rc = eu_store_savepoint(s)) < 0) return rc;
  /* A row already in the phase (its sink failed before) keeps the first
   * decision: when and why it was dead-lettered. */
  n = update_ref(s, "UPDATE eutaxy_fanout_deliveries SET phase = 'dead_letter',"
                    " dead_lettered_at = COALESCE(dead_lettered_at, ?4),"
                    " dead_letter_reason = COALESCE(dead_letter_reason, ?5),"
                    " next_attempt_at = ?6,"
                    " last_error = COALESCE(?7, last_error),"
                    " last_error_name = COALESCE(?8, last_error_name)"
                    " WHERE id = ?1 AND generation_id = ?2 AND attempt = ?3", r, bind_dead, &a);
  if (n < 0) return undo(s, n);
  if (n > 0 && (rc = sync_agenda(s)) < 0) return undo(s, rc);
  /* Durable before the sink runs: nothing the sink or a reset does can turn
   * the decision back into a consumer delivery. */
  if ((rc = release_and_commit(s)) < 0) return rc;
  return n > 0;
}

int eu_fanout_postpone(eu_store *s, const char *target, int64_t now, int64_t until) {
  sqlite3_stmt *st;
  int rc, n;
  if ((rc = eu_store_savepoint(s)) < 0) return rc;
  if ((rc = prep(s, "UPDATE eutaxy_fanout_deliveries SET next_attempt_at = ?3 "
                    "WHERE target_id = ?1 AND next_attempt_at <= ?2", &st)) < 0) return undo(s, rc);
  if ((rc = bind_text(s, st, 1, target)) < 0 || (rc = bind_int(s, st, 2, now)) < 0 ||
      (rc = bind_int(s, st, 3, until)) < 0) {
    eu_store_reset(s, st);
    return undo(s, rc);
  }
  if ((rc = run(s, st)) < 0) return undo(s, rc);
  n = sqlite3_changes(eu_store_db(s));
  if (n > 0 && (rc = sync_agenda(s)) < 0) return undo(s, rc);
  if ((rc = eu_store_release(s)) < 0) return rc;
  return n;
}

/* ---- memos ------------------------------------------------------------ */

int eu_fanout_memo_get(eu_store *s, const char *delivery_id, const char *generation,
                       const char *key, eu_buf *out) {
  sqlite3_stmt *st;
  int rc;
  eu_buf_reset(out);
  if ((rc = prep(s, "SELECT value FROM eutaxy_fanout_memos "
                    "WHERE delivery_id = ?1 AND key = ?2 AND generation_id = ?3", &st)) < 0) return rc;
  if ((rc = bind_text(s, st, 1, delivery_id)) < 0 || (rc = bind_text(s, st, 2, key)) < 0 ||
      (rc = bind_text(s, st, 3, generation)) < 0) {
    eu_store_reset(s, st);
    return rc;
  }
  if ((rc = first_row(s, st)) <= 0) return rc;
  rc = eu_buf_put(out, sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0));
  eu_store_reset(s, st);
  return rc < 0 ? eu_store_error(s, EU_ENOMEM, "out of memory") : 1;
}

int eu_fanout_memo_put(eu_store *s, const eu_fanout_ref *r, const char *key, const void *val,
                       size_t len, int64_t now) {
  sqlite3_stmt *st;
  int rc;
  if ((rc = eu_store_savepoint(s)) < 0) return rc;
  /* Only the attempt that owns the delivery may record a result for it. */
  if ((rc = prep(s, "SELECT 1 FROM eutaxy_fanout_deliveries "
                    "WHERE id = ?1 AND generation_id = ?2 AND attempt = ?3", &st)) < 0) return undo(s, rc);
  if ((rc = bind_text(s, st, 1, r->id)) < 0 || (rc = bind_text(s, st, 2, r->generation)) < 0 ||
      (rc = bind_int(s, st, 3, r->attempt)) < 0) {
    eu_store_reset(s, st);
    return undo(s, rc);
  }
  if ((rc = first_row(s, st)) < 0) return undo(s, rc);
  if (rc == 0) {
    eu_store_rollback_to(s);
    return 0;
  }
  eu_store_reset(s, st);
  if ((rc = prep(s, "INSERT OR REPLACE INTO eutaxy_fanout_memos"
                    "(delivery_id, key, generation_id, value, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                 &st)) < 0) return undo(s, rc);
  if ((rc = bind_text(s, st, 1, r->id)) < 0 || (rc = bind_text(s, st, 2, key)) < 0 ||
      (rc = bind_text(s, st, 3, r->generation)) < 0 || (rc = bind_blob(s, st, 4, val, len)) < 0 ||
      (rc = bind_int(s, st, 5, now)) < 0) {
    eu_store_reset(s, st);
    return undo(s, rc);
  }
  if ((rc = run(s, st)) < 0) return undo(s, rc);
  if ((rc = eu_store_release(s)) < 0) return rc;
  return 1;
}

/* ---- reading ---------------------------------------------------------- */

int eu_fanout_pending(eu_store *s, int64_t *pending) {
  sqlite3_stmt *st;
  int rc;
  *pending = 0;
  if ((rc = prep(s, "SELECT pending FROM eutaxy_fanout_seq WHERE id = 1", &st)) < 0) return rc;
  if ((rc = first_row(s, st)) <= 0) return rc;
  rc = check_int(s, st, 0, 0, INT64_MIN / 2, INT64_MAX / 2, "eutaxy_fanout_seq", "1");
  *pending = sqlite3_column_int64(st, 0);
  eu_store_reset(s, st);
  return rc;
}

int eu_fanout_targets(eu_store *s, int (*each)(void *ud, const char *target), void *ud, eu_buf *buf) {
  sqlite3_stmt *st;
  size_t off = 0;
  int rc, n = 0;
  eu_buf_reset(buf);
  /* A loose index scan: each probe finds the next target after the last,
   * so the cost is the number of targets, not of deliveries. */
  for (;;) {
    if (n == 0) {
      if ((rc = prep(s, "SELECT MIN(target_id) FROM eutaxy_fanout_deliveries", &st)) < 0) return rc;
    } else {
      if ((rc = prep(s, "SELECT MIN(target_id) FROM eutaxy_fanout_deliveries WHERE target_id > ?1",
                     &st)) < 0) return rc;
      if ((rc = bind_text(s, st, 1, buf->p + off)) < 0) {
        eu_store_reset(s, st);
        return rc;
      }
    }
    if ((rc = first_row(s, st)) < 0) return rc;
    if (rc == 0 || sqlite3_column_type(st, 0) == SQLITE_NULL) {
      if (rc == 1) eu_store_reset(s, st);
      break;
    }
    if ((rc = check_text(s, st, 0, 0, "eutaxy_fanout_deliveries", "target_id")) < 0) {
      eu_store_reset(s, st);
      return rc;
    }
    off = buf->n;
    rc = eu_buf_put(buf, sqlite3_column_text(st, 0), (size_t)sqlite3_column_bytes(st, 0));
    if (rc == EU_OK) rc = eu_buf_putc(buf, '\0');
    eu_store_reset(s, st);
    if (rc < 0) return eu_store_error(s, EU_ENOMEM, "out of memory");
    n++;
  }
  if (each) {
    const char *p = buf->p;
    int i;
    for (i = 0; i < n; i++) {
      if (each(ud, p) != 0) break;
      p += strlen(p) + 1;
    }
  }
  return n;
}

int64_t eu_fanout_backoff(int attempt, uint64_t random) {
  return eu_agenda_backoff(attempt, random);
}
