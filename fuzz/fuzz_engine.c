/*
 * fuzz_engine.c: the durability engines (host/fanout.c, host/agenda.c)
 * reading rows that break their invariants.
 *
 * Each input gets a fresh in-memory store with fanout, named-alarm and
 * durable-operation work in it, its engine tables remade without their
 * constraints (as a damaged or foreign database might hold them). The
 * input then interleaves corruptions (an UPDATE of a chosen column of a
 * chosen table to NULL, an integer, a float, text or a blob) with engine
 * calls: claims, acks, retries, dead letters, postponements, memos, alarm
 * and operation takes and settlements, the due times. Every call must end
 * with a result or a clear error (a message the store keeps); a crash, a
 * hang (libFuzzer's timeout) or a leak is a finding.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "agenda.h"
#include "buf.h"
#include "eutaxy.h"
#include "fanout.h"
#include "fuzz.h"
#include "store.h"

static const char *const tables[] = {
  "eutaxy_fanout_messages", "eutaxy_fanout_deliveries", "eutaxy_fanout_seq", "eutaxy_fanout_memos",
  "eutaxy_agenda", "eutaxy_alarms", "eutaxy_durable_ops", "eutaxy_migrations",
};
static const char *const columns[][13] = {
  { "key", "id", "payload", "targets", "remaining", "seq", "created_at", "generation_id" },
  { "id", "message_key", "target_id", "seq", "phase", "attempt", "next_attempt_at", "last_error",
    "last_error_name", "created_at", "generation_id", "dead_lettered_at", "dead_letter_reason" },
  { "id", "next_seq", "pending" },
  { "delivery_id", "key", "generation_id", "value", "created_at" },
  { "participant", "key", "due" },
  { "name", "due", "payload", "created_at", "scheduled_at", "attempt", "max_attempts", "generation",
    "last_error" },
  { "id", "handler", "payload", "status", "attempt", "next_attempt_at", "result", "last_error",
    "created_at", "settled_at", "max_attempts" },
  { "capability", "version" },
};
/* The unique keys the engines' upserts name, kept when a table is remade. */
static const char *const keys[] = {
  "key", "id", "id", "delivery_id, key", "participant, key", "name", "id", "capability",
};
#define NTABLES (int)(sizeof tables / sizeof tables[0])

static uint64_t rnd(void *ud) {
  fz *f = ud;
  return fz_u64(f);
}

static void must(eu_store *s, int rc, const char *what) {
  if (rc < 0 && !eu_store_errmsg(s)[0]) {
    fprintf(stderr, "fuzz_engine: %s failed (%d) with no message\n", what, rc);
    abort();
  }
}

static void setup(eu_store *s, fz *f) {
  const char *targets[] = { "a", "b" };
  eu_fanout_input in[3] = { { "k1", "m1", "p1", 2 }, { "k2", "m2", "p2", 2 }, { "k3", "m3", "", 0 } };
  eu_fanout_enqueued o[3];
  char sql[512];
  int i, conflict;
  if (eu_fanout_migrate(s) < 0 || eu_alarms_migrate(s) < 0 || eu_durable_migrate(s) < 0 ||
      eu_fanout_enqueue(s, in, 3, targets, 2, 100, 100, rnd, f, o, &conflict) < 0 ||
      eu_alarms_schedule(s, "tick", 200, "x", 1, 3, 1, 100) < 0 ||
      eu_alarms_schedule(s, "tock", 300, NULL, 0, 0, 2, 100) < 0 ||
      eu_durable_register(s, "op", "h", "y", 1, 2, 100) < 0 || eu_store_commit(s) < 0) {
    fprintf(stderr, "fuzz_engine: setup: %s\n", eu_store_errmsg(s));
    abort();
  }
  for (i = 0; i < NTABLES; i++) {
    snprintf(sql, sizeof sql, "CREATE TABLE eu_loose AS SELECT * FROM %s; DROP TABLE %s;"
             "ALTER TABLE eu_loose RENAME TO %s; CREATE UNIQUE INDEX %s_key ON %s(%s)",
             tables[i], tables[i], tables[i], tables[i], tables[i], keys[i]);
    if (eu_store_exec_internal(s, sql) < 0) {
      fprintf(stderr, "fuzz_engine: loosening %s: %s\n", tables[i], eu_store_errmsg(s));
      abort();
    }
  }
}

/* UPDATE of one column of one table (every row, or the first) to a value
 * the input picks. */
static void corrupt(eu_store *s, fz *f) {
  int t = (int)(fz_u8(f) % NTABLES), c, n = 0, rc;
  char sql[256];
  sqlite3_stmt *st;
  size_t got;
  const char *p;
  while (n < 13 && columns[t][n]) n++;
  c = (int)(fz_u8(f) % (unsigned)n);
  if (fz_u8(f) & 1)
    snprintf(sql, sizeof sql, "UPDATE %s SET %s = ?1", tables[t], columns[t][c]);
  else
    snprintf(sql, sizeof sql, "UPDATE %s SET %s = ?1 WHERE rowid = (SELECT min(rowid) FROM %s)",
             tables[t], columns[t][c], tables[t]);
  if (eu_store_internal_prepare(s, sql, &st) < 0) return;
  switch (fz_u8(f) % 8) {
  case 0: sqlite3_bind_null(st, 1); break;
  case 1: sqlite3_bind_int64(st, 1, (int64_t)fz_u64(f)); break;
  case 2: sqlite3_bind_int64(st, 1, (int64_t)(fz_u8(f) % 8) - 2); break;
  case 3: sqlite3_bind_int64(st, 1, fz_u8(f) & 1 ? INT64_MAX : INT64_MIN); break;
  case 4: sqlite3_bind_double(st, 1, (double)(int64_t)fz_u64(f) / 7.0); break;
  case 5:
    p = fz_bytes(f, fz_u8(f) % 24, &got);
    sqlite3_bind_text(st, 1, p, (int)got, SQLITE_TRANSIENT);
    break;
  case 6:
    p = fz_bytes(f, fz_u8(f) % 24, &got);
    sqlite3_bind_blob(st, 1, p, (int)got, SQLITE_TRANSIENT);
    break;
  default: {
    static const char *const words[] = { "delivery", "dead_letter", "pending", "done", "failed",
                                         "explicit", "exhausted", "fanout", "alarms", "" };
    sqlite3_bind_text(st, 1, words[fz_u8(f) % 10], -1, SQLITE_STATIC);
  }
  }
  if ((rc = eu_store_touch(s)) >= 0) rc = eu_store_internal_step(s, st);
  eu_store_reset(s, st);
  (void)rc;
}

typedef struct kept {
  char id[128], gen[64];
  int attempt, has;
} kept;

static int keep(void *ud, const eu_fanout_delivery *d) {
  kept *k = ud;
  if (!d->id || !d->generation) abort();  /* the engine promised both */
  snprintf(k->id, sizeof k->id, "%s", d->id);
  snprintf(k->gen, sizeof k->gen, "%s", d->generation);
  k->attempt = d->attempt;
  k->has = 1;
  return 0;
}

static int each_due(void *ud, const char *participant, int64_t due) {
  (void)ud; (void)due;
  if (!participant) abort();
  return 0;
}

static int each_target(void *ud, const char *target) {
  (void)ud;
  if (!target) abort();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[EU_ERRLEN];
  eu_store *s;
  eu_buf buf;
  fz f = { data, size };
  kept k;
  eu_agenda_item it;
  eu_durable_state ds;
  int64_t now = 1000, v;
  int steps, has, rc = 0;
  memset(&k, 0, sizeof k);
  if (eu_store_open(&s, NULL, err, sizeof err) != EU_OK) {
    fprintf(stderr, "fuzz_engine: %s\n", err);
    abort();
  }
  eu_buf_init(&buf);
  setup(s, &f);
  for (steps = 0; steps < 64 && f.n > 0; steps++) {
    eu_fanout_ref r = { k.id, k.gen, k.attempt };
    unsigned op = fz_u8(&f) % 16;
    now += fz_u8(&f) * 100;
    switch (op) {
    case 0: case 1: case 2: corrupt(s, &f); continue;
    case 3: rc = eu_fanout_claim(s, fz_u8(&f) & 1 ? "a" : "b", now, 1 + fz_u8(&f) % 4, 1 + fz_u8(&f) % 4,
                                 1000, keep, &k, &buf); break;
    case 4: if (k.has) rc = eu_fanout_remove(s, &r, fz_u8(&f) & 1); break;
    case 5: if (k.has) rc = eu_fanout_retry(s, &r, now + 500, "E", "failed"); break;
    case 6: if (k.has) rc = eu_fanout_dead_letter(s, &r, "explicit", now, now + 100, NULL, NULL); break;
    case 7: rc = eu_fanout_postpone(s, "a", now, now + 1000); break;
    case 8:
      if (k.has && (rc = eu_fanout_memo_put(s, &r, "m", "v", 1, now)) >= 0)
        rc = eu_fanout_memo_get(s, k.id, k.gen, "m", &buf);
      break;
    case 9:
      if ((rc = eu_fanout_next_due(s, &has, &v)) >= 0 && (rc = eu_fanout_pending(s, &v)) >= 0)
        rc = eu_fanout_targets(s, each_target, NULL, &buf);
      break;
    case 10:
      if ((rc = eu_agenda_next(s, &has, &v)) >= 0 && (rc = eu_agenda_due(s, now, each_due, NULL)) >= 0)
        rc = eu_agenda_reconcile(s);
      break;
    case 11:
      rc = eu_alarms_take(s, now, fz_u64(&f), &it, &buf);
      if (rc == 1 && it.key) {
        char name[64];
        int64_t gen = it.generation;
        int attempt = it.attempt;
        snprintf(name, sizeof name, "%s", it.key);
        rc = eu_alarms_settle(s, name, gen, attempt, fz_u8(&f) & 1 ? "boom" : NULL, now, 100);
      }
      break;
    case 12:
      rc = eu_durable_take(s, now, fz_u64(&f), &it, &buf);
      if (rc == 1 && it.key) {
        int attempt = it.attempt;
        rc = eu_durable_settle(s, "op", attempt, "r", 1, fz_u8(&f) & 1 ? "boom" : NULL, now, 100);
      }
      if (rc >= 0) rc = eu_durable_get(s, "op", &ds, &buf);
      break;
    case 13: {
      const char *targets[] = { "a", "b" };
      eu_fanout_input in = { "k4", "m4", "p", 1 };
      eu_fanout_enqueued o;
      int conflict;
      rc = eu_fanout_enqueue(s, &in, 1, targets, 2, now, now, rnd, &f, &o, &conflict);
      break;
    }
    case 14: rc = eu_store_commit(s); if (rc < 0) eu_store_rollback(s); break;
    default: rc = eu_store_rollback(s); break;
    }
    must(s, rc, "an engine call");
  }
  eu_store_rollback(s);
  eu_buf_free(&buf);
  eu_store_close(s);
  return 0;
}
