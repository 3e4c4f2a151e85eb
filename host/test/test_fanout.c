/*
 * test_fanout.c: the fanout engine (fanout.c) through its C API: migrations,
 * enqueue and deduplication, claims and their leases, settlements and their
 * compare-and-set, dead letters, memos, the pending count, and the fanout's
 * due time in the agenda and the object's alarm.
 *
 * Each test opens its own in-memory store, runs its calls in turns it
 * commits or rolls back itself, as the world would, and closes the store.
 * Failures are injected with triggers that RAISE(ABORT) at a chosen
 * statement, so every write is shown to be all or nothing.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "agenda.h"
#include "eutaxy.h"
#include "fanout.h"
#include "store.h"
#include "test.h"
#include "test_sql.h"

#define T0 INT64_C(1767225600000)

static eu_store *open_store(void) {
  eu_store *s = NULL;
  char err[EU_ERRLEN];
  ASSERT_OK(eu_store_open(&s, NULL, err, sizeof err));
  ASSERT_OK(eu_fanout_migrate(s));
  ASSERT_OK(eu_store_commit(s));
  return s;
}

static uint64_t counter(void *ud) {
  uint64_t *n = ud;
  return ++*n * UINT64_C(0x9e3779b97f4a7c15);
}

static uint64_t rnd;

static void exec(eu_store *s, const char *sql) {
  ASSERT_OK(eu_store_touch(s));
  ASSERT_OK(eu_store_exec_internal(s, sql));
}

static int64_t pending(eu_store *s) {
  int64_t n;
  ASSERT_OK(eu_fanout_pending(s, &n));
  /* the counter always agrees with the rows it counts */
  ASSERT_EQ(n, sql_scalar(s, "SELECT count(*) FROM eutaxy_fanout_deliveries"));
  return n;
}

static const char *const ABC[] = { "a", "b", "c" };

/* Enqueues one message of payload for the targets; returns the conflict. */
static int enqueue1(eu_store *s, const char *key, const char *id, const char *payload,
                    const char *const *targets, int nt, int64_t now, eu_fanout_enqueued *out) {
  eu_fanout_input in;
  eu_fanout_enqueued o;
  int conflict = -1;
  in.key = key;
  in.id = id;
  in.payload = payload;
  in.len = strlen(payload);
  ASSERT_OK(eu_fanout_enqueue(s, &in, 1, targets, nt, now, now, counter, &rnd, out ? out : &o, &conflict));
  return conflict;
}

/* What a claim gave, copied out of the engine's buffer. */
typedef struct got {
  int n;
  char id[8][64], key[8][32], gen[8][40], reason[8][16], error[8][64];
  int attempt[8], terminal[8], dead[8];
  int64_t seq[8], lease[8];
} got;

static int collect(void *ud, const eu_fanout_delivery *d) {
  got *g = ud;
  int i = g->n++;
  ASSERT(i < 8);
  snprintf(g->id[i], sizeof g->id[i], "%s", d->id);
  snprintf(g->key[i], sizeof g->key[i], "%s", d->message_key);
  snprintf(g->gen[i], sizeof g->gen[i], "%s", d->generation);
  snprintf(g->reason[i], sizeof g->reason[i], "%s", d->reason ? d->reason : "");
  snprintf(g->error[i], sizeof g->error[i], "%s", d->last_error ? d->last_error : "");
  g->attempt[i] = d->attempt;
  g->terminal[i] = d->terminal;
  g->dead[i] = d->dead_letter;
  g->seq[i] = d->seq;
  g->lease[i] = d->next_attempt_at;
  return 0;
}

static got claim(eu_store *s, const char *target, int64_t now, int max_batch, int max_attempts) {
  got g;
  eu_buf buf;
  memset(&g, 0, sizeof g);
  eu_buf_init(&buf);
  ASSERT(eu_fanout_claim(s, target, now, max_batch, max_attempts, 1000, collect, &g, &buf) >= 0);
  eu_buf_free(&buf);
  return g;
}

static eu_fanout_ref ref_of(const got *g, int i) {
  eu_fanout_ref r;
  r.id = g->id[i];
  r.generation = g->gen[i];
  r.attempt = g->attempt[i];
  return r;
}

/* ---- tests ----------------------------------------------------------- */

static void test_migrations_are_versioned_and_idempotent(void) {
  eu_store *s = open_store();
  int version;
  ASSERT_OK(eu_agenda_version(s, "fanout", &version));
  ASSERT_EQ(version, 2);
  ASSERT_OK(eu_agenda_version(s, "agenda", &version));
  ASSERT_EQ(version, 1);
  ASSERT_EQ(sql_scalar(s, "SELECT next_seq FROM eutaxy_fanout_seq"), 0);
  ASSERT_OK(eu_fanout_migrate(s));  /* current: nothing to do */
  ASSERT_OK(eu_store_commit(s));
  /* A database at version 1 (no memos yet) gets the memos and no more. */
  exec(s, "DROP TABLE eutaxy_fanout_memos; UPDATE eutaxy_migrations SET version = 1 WHERE capability = 'fanout';"
          "UPDATE eutaxy_fanout_seq SET next_seq = 7");
  ASSERT_OK(eu_store_commit(s));
  ASSERT_OK(eu_fanout_migrate(s));
  ASSERT_OK(eu_store_commit(s));
  ASSERT_OK(eu_agenda_version(s, "fanout", &version));
  ASSERT_EQ(version, 2);
  ASSERT_EQ(sql_scalar(s, "SELECT count(*) FROM eutaxy_fanout_memos"), 0);
  ASSERT_EQ(sql_scalar(s, "SELECT next_seq FROM eutaxy_fanout_seq"), 7);
  /* A database from a newer eutaxy is refused, not rewritten. */
  exec(s, "UPDATE eutaxy_migrations SET version = 9 WHERE capability = 'fanout'");
  ASSERT_OK(eu_store_commit(s));
  ASSERT_EQ(eu_fanout_migrate(s), EU_EINVAL);
  ASSERT_CONTAINS(eu_store_errmsg(s), "newer");
  eu_store_rollback(s);
  eu_store_close(s);
}

static void test_enqueue_writes_a_manifest_and_a_delivery_per_target(void) {
  eu_store *s = open_store();
  eu_fanout_enqueued o;
  ASSERT_EQ(enqueue1(s, "k-1", "m-1", "body", ABC, 3, T0, &o), 0);
  ASSERT_EQ(o.fresh, 1);
  ASSERT_EQ(o.seq, 0);
  ASSERT_EQ(o.created_at, T0);
  ASSERT_EQ(strlen(o.generation), 36);
  ASSERT_EQ(sql_scalar(s, "SELECT remaining FROM eutaxy_fanout_messages WHERE key = 'k-1'"), 3);
  ASSERT_EQ(sql_scalar(s, "SELECT count(*) FROM eutaxy_fanout_messages WHERE targets = '[\"a\",\"b\",\"c\"]'"), 1);
  ASSERT_EQ(sql_scalar(s, "SELECT count(*) FROM eutaxy_fanout_deliveries WHERE message_key = 'k-1'"
                      " AND attempt = 0 AND phase = 'delivery' AND next_attempt_at = 1767225600000"), 3);
  ASSERT_EQ(sql_scalar(s, "SELECT count(*) FROM eutaxy_fanout_deliveries WHERE id = '[\"k-1\",\"b\"]'"), 1);
  ASSERT_EQ(pending(s), 3);
  /* due now: the agenda and the alarm say so, in the same turn */
  ASSERT_EQ(sql_scalar(s, "SELECT due FROM eutaxy_agenda WHERE participant = 'fanout'"), T0);
  ASSERT_EQ(alarm_at(s), T0);
  ASSERT_EQ(enqueue1(s, "k-2", "m-2", "body", ABC, 2, T0 + 5, &o), 0);
  ASSERT_EQ(o.seq, 1);
  ASSERT_EQ(pending(s), 5);
  ASSERT_OK(eu_store_commit(s));
  eu_store_close(s);
}

static void test_a_rolled_back_turn_takes_the_enqueue_and_its_count_back(void) {
  eu_store *s = open_store();
  ASSERT_EQ(enqueue1(s, "k-1", "m-1", "x", ABC, 3, T0, NULL), 0);
  ASSERT_OK(eu_store_commit(s));
  ASSERT_EQ(enqueue1(s, "k-2", "m-2", "x", ABC, 3, T0, NULL), 0);
  ASSERT_EQ(pending(s), 6);
  ASSERT_OK(eu_store_rollback(s));
  ASSERT_EQ(pending(s), 3);
  ASSERT_EQ(sql_scalar(s, "SELECT count(*) FROM eutaxy_fanout_messages"), 1);
  eu_store_close(s);
}

static void test_the_same_work_again_is_a_no_op(void) {
  eu_store *s = open_store();
  eu_fanout_enqueued o1, o2;
  ASSERT_EQ(enqueue1(s, "k", "m", "x", ABC, 3, T0, &o1), 0);
  ASSERT_EQ(enqueue1(s, "k", "m", "x", ABC, 3, T0 + 10, &o2), 0);
  ASSERT_EQ(o2.fresh, 0);
  ASSERT_STR_EQ(o2.generation, o1.generation);
  ASSERT_EQ(o2.created_at, T0);
  ASSERT_EQ(pending(s), 3);
  ASSERT_EQ(sql_scalar(s, "SELECT next_seq FROM eutaxy_fanout_seq"), 1);
  eu_store_close(s);
}

static void test_the_same_key_with_other_work_refuses_the_whole_batch(void) {
  eu_store *s = open_store();
  eu_fanout_input in[2];
  eu_fanout_enqueued out[2];
  int conflict;
  ASSERT_EQ(enqueue1(s, "k", "m", "x", ABC, 3, T0, NULL), 0);
  ASSERT_OK(eu_store_commit(s));
  /* another payload, another id, other targets: each is other work */
  ASSERT_EQ(enqueue1(s, "k", "m", "y", ABC, 3, T0, NULL), 1);
  ASSERT_CONTAINS(eu_store_errmsg(s), "deduplication key \"k\" already identifies different work");
  ASSERT_EQ(enqueue1(s, "k", "other", "x", ABC, 3, T0, NULL), 1);
  ASSERT_EQ(enqueue1(s, "k", "m", "x", ABC, 2, T0, NULL), 1);
  /* a fresh message before the conflict in the same batch is not kept */
  in[0].key = "k-new"; in[0].id = "m-new"; in[0].payload = "z"; in[0].len = 1;
  in[1].key = "k"; in[1].id = "m"; in[1].payload = "y"; in[1].len = 1;
  ASSERT_OK(eu_fanout_enqueue(s, in, 2, ABC, 3, T0, T0, counter, &rnd, out, &conflict));
  ASSERT_EQ(conflict, 2);
  ASSERT_EQ(sql_scalar(s, "SELECT count(*) FROM eutaxy_fanout_messages"), 1);
  ASSERT_EQ(pending(s), 3);
  ASSERT_EQ(sql_scalar(s, "SELECT next_seq FROM eutaxy_fanout_seq"), 1);
  eu_store_close(s);
}

static void test_enqueue_refuses_bad_input(void) {
  eu_store *s = open_store();
  static const char *const unsorted[] = { "b", "a" };
  static const char *const twice[] = { "a", "a" };
  eu_fanout_input in = { "", "m", "x", 1 };
  eu_fanout_enqueued o;
  int conflict;
  ASSERT_EQ(eu_fanout_enqueue(s, &in, 1, ABC, 3, T0, T0, counter, &rnd, &o, &conflict), EU_EINVAL);
  in.key = "k";
  ASSERT_EQ(eu_fanout_enqueue(s, &in, 1, unsorted, 2, T0, T0, counter, &rnd, &o, &conflict), EU_EINVAL);
  ASSERT_EQ(eu_fanout_enqueue(s, &in, 1, twice, 2, T0, T0, counter, &rnd, &o, &conflict), EU_EINVAL);
  ASSERT_EQ(eu_fanout_enqueue(s, &in, 1, ABC, 0, T0, T0, counter, &rnd, &o, &conflict), EU_EINVAL);
  ASSERT_EQ(pending(s), 0);
  eu_store_close(s);
}

static void test_a_failure_inside_enqueue_writes_nothing(void) {
  eu_store *s = open_store();
  eu_fanout_input in[2] = { { "k-1", "m-1", "x", 1 }, { "k-2", "m-2", "x", 1 } };
  eu_fanout_enqueued out[2];
  int conflict;
  ASSERT_EQ(enqueue1(s, "k-0", "m-0", "x", ABC, 3, T0 - 100, NULL), 0);
  ASSERT_OK(eu_store_commit(s));
  /* the second message's last delivery row fails */
  exec(s, "CREATE TRIGGER boom BEFORE INSERT ON eutaxy_fanout_deliveries"
          " WHEN NEW.id = '[\"k-2\",\"c\"]' BEGIN SELECT RAISE(ABORT, 'injected'); END");
  ASSERT_EQ(eu_fanout_enqueue(s, in, 2, ABC, 3, T0, T0, counter, &rnd, out, &conflict), EU_ESQL);
  ASSERT_CONTAINS(eu_store_errmsg(s), "injected");
  ASSERT_EQ(conflict, 0);
  ASSERT_EQ(sql_scalar(s, "SELECT count(*) FROM eutaxy_fanout_messages"), 1);
  ASSERT_EQ(pending(s), 3);
  ASSERT_EQ(sql_scalar(s, "SELECT next_seq FROM eutaxy_fanout_seq"), 1);
  ASSERT_EQ(alarm_at(s), T0 - 100);
  ASSERT_OK(eu_store_commit(s));
  eu_store_close(s);
}

static void test_a_claim_takes_first_deliveries_in_order_then_due_retries(void) {
  eu_store *s = open_store();
  char key[16];
  got g, r;
  int i;
  for (i = 0; i < 5; i++) {
    snprintf(key, sizeof key, "k-%d", i);
    ASSERT_EQ(enqueue1(s, key, key, "x", ABC, 1, T0 + i, NULL), 0);
  }
  ASSERT_OK(eu_store_commit(s));
  g = claim(s, "a", T0 + 10, 2, 5);
  ASSERT_EQ(g.n, 2);
  ASSERT_STR_EQ(g.key[0], "k-0");
  ASSERT_STR_EQ(g.key[1], "k-1");
  ASSERT_EQ(g.attempt[0], 1);
  ASSERT_EQ(g.lease[0], T0 + 10 + 1000);
  /* k-0 fails and is due again at +20 */
  ASSERT_EQ(eu_fanout_retry(s, &(eu_fanout_ref){ g.id[0], g.gen[0], 1 }, T0 + 20, "Error", "nope"), 1);
  ASSERT_OK(eu_store_commit(s));
  /* not yet due: the first deliveries come first anyway */
  r = claim(s, "a", T0 + 20, 4, 5);
  ASSERT_EQ(r.n, 4);
  ASSERT_STR_EQ(r.key[0], "k-2");
  ASSERT_STR_EQ(r.key[1], "k-3");
  ASSERT_STR_EQ(r.key[2], "k-4");
  ASSERT_STR_EQ(r.key[3], "k-0");  /* then the due retry, its second attempt */
  ASSERT_EQ(r.attempt[3], 2);
  ASSERT_STR_EQ(r.error[3], "nope");
  /* nothing else is due until the leases end */
  ASSERT_EQ(claim(s, "a", T0 + 30, 10, 5).n, 0);
  ASSERT_EQ(claim(s, "a", T0 + 1010, 10, 5).n, 1);  /* k-1's lease ended first */
  eu_store_close(s);
}

static void test_a_claim_is_committed_before_it_returns(void) {
  eu_store *s = open_store();
  got g;
  ASSERT_EQ(enqueue1(s, "k", "m", "x", ABC, 3, T0, NULL), 0);
  ASSERT_OK(eu_store_commit(s));
  g = claim(s, "b", T0, 10, 5);
  ASSERT_EQ(g.n, 1);
  /* whatever happens to the turn that follows, the attempt stays counted */
  ASSERT_OK(eu_store_rollback(s));
  ASSERT_EQ(sql_scalar(s, "SELECT attempt FROM eutaxy_fanout_deliveries WHERE target_id = 'b'"), 1);
  ASSERT_EQ(sql_scalar(s, "SELECT next_attempt_at FROM eutaxy_fanout_deliveries WHERE target_id = 'b'"), T0 + 1000);
  /* and the fanout is still due now for a and c */
  ASSERT_EQ(alarm_at(s), T0);
  eu_store_close(s);
}

static void test_a_claim_that_fails_claims_nothing(void) {
  eu_store *s = open_store();
  eu_buf buf;
  ASSERT_EQ(enqueue1(s, "k-1", "m", "x", ABC, 1, T0, NULL), 0);
  ASSERT_EQ(enqueue1(s, "k-2", "m", "x", ABC, 1, T0, NULL), 0);
  ASSERT_OK(eu_store_commit(s));
  exec(s, "CREATE TRIGGER boom BEFORE UPDATE OF attempt ON eutaxy_fanout_deliveries"
          " WHEN NEW.message_key = 'k-2' BEGIN SELECT RAISE(ABORT, 'injected'); END");
  ASSERT_OK(eu_store_commit(s));
  eu_buf_init(&buf);
  ASSERT_EQ(eu_fanout_claim(s, "a", T0, 10, 5, 1000, NULL, NULL, &buf), EU_ESQL);
  eu_buf_free(&buf);
  ASSERT_EQ(sql_scalar(s, "SELECT max(attempt) FROM eutaxy_fanout_deliveries"), 0);
  eu_store_close(s);
}

static void test_a_stale_attempt_never_settles_a_newer_one(void) {
  eu_store *s = open_store();
  eu_fanout_ref old;
  got g1, g2;
  ASSERT_EQ(enqueue1(s, "k", "m", "x", ABC, 1, T0, NULL), 0);
  ASSERT_OK(eu_store_commit(s));
  g1 = claim(s, "a", T0, 10, 5);
  old = ref_of(&g1, 0);
  /* its lease ends without a settlement: a second attempt claims it */
  g2 = claim(s, "a", T0 + 1000, 10, 5);
  ASSERT_EQ(g2.attempt[0], 2);
  ASSERT_EQ(eu_fanout_remove(s, &old, 0), 0);
  ASSERT_EQ(eu_fanout_retry(s, &old, T0, "Error", "late"), 0);
  ASSERT_EQ(eu_fanout_dead_letter(s, &old, "explicit", T0, T0, NULL, NULL), 0);
  ASSERT_EQ(sql_scalar(s, "SELECT count(*) FROM eutaxy_fanout_deliveries WHERE attempt = 2 AND phase = 'delivery'"
                      " AND last_error IS NULL"), 1);
  /* nor does another generation of the same key */
  old = ref_of(&g2, 0);
  old.generation = "00000000-0000-4000-8000-000000000000";
  ASSERT_EQ(eu_fanout_remove(s, &old, 0), 0);
  old = ref_of(&g2, 0);
  ASSERT_EQ(eu_fanout_remove(s, &old, 0), 1);
  ASSERT_EQ(eu_fanout_remove(s, &old, 0), 0);  /* settled once */
  eu_store_close(s);
}

static void test_the_manifest_goes_with_its_last_delivery(void) {
  eu_store *s = open_store();
  got a, b;
  eu_fanout_ref r;
  eu_fanout_enqueued o;
  ASSERT_EQ(enqueue1(s, "k", "m", "x", ABC, 2, T0, NULL), 0);
  ASSERT_OK(eu_store_commit(s));
  a = claim(s, "a", T0, 10, 5);
  b = claim(s, "b", T0, 10, 5);
  r = ref_of(&a, 0);
  ASSERT_EQ(eu_fanout_remove(s, &r, 0), 1);
  ASSERT_EQ(sql_scalar(s, "SELECT remaining FROM eutaxy_fanout_messages WHERE key = 'k'"), 1);
  /* still pending: the same work is still a no-op, other work still refused */
  ASSERT_EQ(enqueue1(s, "k", "m", "x", ABC, 2, T0, &o), 0);
  ASSERT_EQ(o.fresh, 0);
  ASSERT_EQ(enqueue1(s, "k", "m", "other", ABC, 2, T0, NULL), 1);
  r = ref_of(&b, 0);
  ASSERT_EQ(eu_fanout_remove(s, &r, 0), 1);
  ASSERT_EQ(sql_scalar(s, "SELECT count(*) FROM eutaxy_fanout_messages"), 0);
  ASSERT_EQ(pending(s), 0);
  /* nothing left: the fanout leaves the agenda and the alarm goes */
  ASSERT_EQ(sql_scalar(s, "SELECT count(*) FROM eutaxy_agenda WHERE participant = 'fanout'"), 0);
  ASSERT_EQ(alarm_at(s), -1);
  /* the key is free again: the same key is new work now */
  ASSERT_EQ(enqueue1(s, "k", "m", "other", ABC, 2, T0 + 1, &o), 0);
  ASSERT_EQ(o.fresh, 1);
  eu_store_close(s);
}

static void test_removing_many_is_one_unit(void) {
  eu_store *s = open_store();
  eu_fanout_ref refs[3];
  int removed[3];
  got g;
  ASSERT_EQ(enqueue1(s, "k-1", "m-1", "x", ABC, 1, T0, NULL), 0);
  ASSERT_EQ(enqueue1(s, "k-2", "m-2", "x", ABC, 1, T0, NULL), 0);
  ASSERT_EQ(enqueue1(s, "k-3", "m-3", "x", ABC, 1, T0, NULL), 0);
  ASSERT_OK(eu_store_commit(s));
  g = claim(s, "a", T0, 10, 5);
  ASSERT_EQ(g.n, 3);
  refs[0] = ref_of(&g, 0);
  refs[1] = ref_of(&g, 1);
  refs[2] = ref_of(&g, 2);
  refs[1].attempt = 7;  /* stale: left alone, the others go */
  ASSERT_EQ(eu_fanout_remove_many(s, refs, 3, removed), 2);
  ASSERT(removed[0] && !removed[1] && removed[2]);
  ASSERT_EQ(pending(s), 1);
  ASSERT_OK(eu_store_commit(s));
  /* a failure in the middle takes every removal of the call back */
  exec(s, "CREATE TRIGGER boom BEFORE DELETE ON eutaxy_fanout_messages BEGIN SELECT RAISE(ABORT, 'injected'); END");
  ASSERT_EQ(enqueue1(s, "k-4", "m-4", "x", ABC, 1, T0, NULL), 0);
  ASSERT_OK(eu_store_commit(s));
  g = claim(s, "a", T0 + 2000, 10, 5);
  ASSERT_EQ(g.n, 2);
  refs[0] = ref_of(&g, 0);
  refs[1] = ref_of(&g, 1);
  ASSERT_EQ(eu_fanout_remove_many(s, refs, 2, removed), EU_ESQL);
  ASSERT_EQ(pending(s), 2);
  eu_store_close(s);
}

static void test_a_retry_moves_the_delivery_and_records_why(void) {
  eu_store *s = open_store();
  eu_fanout_ref r;
  got g;
  ASSERT_EQ(enqueue1(s, "k", "m", "x", ABC, 1, T0, NULL), 0);
  ASSERT_OK(eu_store_commit(s));
  g = claim(s, "a", T0, 10, 5);
  r = ref_of(&g, 0);
  ASSERT_EQ(eu_fanout_retry(s, &r, T0 + 4000, "TypeError", "bad body"), 1);
  ASSERT_EQ(sql_scalar(s, "SELECT next_attempt_at FROM eutaxy_fanout_deliveries"), T0 + 4000);
  ASSERT_EQ(sql_scalar(s, "SELECT count(*) FROM eutaxy_fanout_deliveries WHERE last_error = 'bad body'"
                      " AND last_error_name = 'TypeError' AND attempt = 1"), 1);
  ASSERT_EQ(alarm_at(s), T0 + 4000);
  ASSERT_EQ(claim(s, "a", T0 + 3999, 10, 5).n, 0);
  ASSERT_EQ(claim(s, "a", T0 + 4000, 10, 5).n, 1);
  eu_store_close(s);
}

static void test_attempts_run_out_into_the_dead_letter_step(void) {
  eu_store *s = open_store();
  got g;
  ASSERT_EQ(enqueue1(s, "k", "m", "x", ABC, 1, T0, NULL), 0);
  ASSERT_OK(eu_store_commit(s));
  g = claim(s, "a", T0, 10, 2);
  ASSERT_EQ(g.attempt[0], 1);
  g = claim(s, "a", T0 + 1000, 10, 2);
  ASSERT_EQ(g.attempt[0], 2);
  ASSERT_EQ(g.terminal[0], 0);
  /* the second lease ends too: no attempt is left, none is counted */
  g = claim(s, "a", T0 + 2000, 10, 2);
  ASSERT_EQ(g.n, 1);
  ASSERT_EQ(g.terminal[0], 1);
  ASSERT_EQ(g.attempt[0], 2);
  ASSERT_EQ(sql_scalar(s, "SELECT attempt FROM eutaxy_fanout_deliveries"), 2);
  eu_store_close(s);
}

static void test_a_dead_letter_is_committed_and_keeps_its_first_decision(void) {
  eu_store *s = open_store();
  eu_fanout_ref r;
  got g;
  ASSERT_EQ(enqueue1(s, "k", "m", "x", ABC, 1, T0, NULL), 0);
  ASSERT_OK(eu_store_commit(s));
  g = claim(s, "a", T0, 10, 5);
  r = ref_of(&g, 0);
  ASSERT_EQ(eu_fanout_dead_letter(s, &r, "explicit", T0 + 1, T0 + 60001, NULL, NULL), 1);
  ASSERT_OK(eu_store_rollback(s));  /* the sink's turn fails: the decision stays */
  ASSERT_EQ(sql_scalar(s, "SELECT count(*) FROM eutaxy_fanout_deliveries WHERE phase = 'dead_letter'"
                      " AND dead_letter_reason = 'explicit' AND dead_lettered_at = 1767225600001"), 1);
  ASSERT_EQ(alarm_at(s), T0 + 60001);
  /* the sink failed: the step comes back as terminal, never as a delivery */
  g = claim(s, "a", T0 + 60001, 10, 5);
  ASSERT_EQ(g.n, 1);
  ASSERT_EQ(g.terminal[0], 1);
  ASSERT_EQ(g.dead[0], 1);
  ASSERT_STR_EQ(g.reason[0], "explicit");
  ASSERT_EQ(g.attempt[0], 1);
  r = ref_of(&g, 0);
  ASSERT_EQ(eu_fanout_dead_letter(s, &r, "exhausted", T0 + 70000, T0 + 120001, "Error", "sink down"), 1);
  ASSERT_EQ(sql_scalar(s, "SELECT count(*) FROM eutaxy_fanout_deliveries WHERE dead_letter_reason = 'explicit'"
                      " AND dead_lettered_at = 1767225600001 AND last_error = 'sink down'"), 1);
  /* a consumer's ack cannot take a dead letter back; the step's end can */
  ASSERT_EQ(eu_fanout_remove(s, &r, 0), 0);
  ASSERT_EQ(eu_fanout_remove(s, &r, 1), 1);
  ASSERT_EQ(pending(s), 0);
  ASSERT_EQ(eu_fanout_dead_letter(s, &r, "sideways", T0, T0, NULL, NULL), EU_EINVAL);
  eu_store_close(s);
}

static void test_memos_last_across_retries_and_go_with_the_delivery(void) {
  eu_store *s = open_store();
  eu_fanout_ref r;
  eu_buf v;
  got g;
  eu_buf_init(&v);
  ASSERT_EQ(enqueue1(s, "k", "m", "x", ABC, 2, T0, NULL), 0);
  ASSERT_OK(eu_store_commit(s));
  g = claim(s, "a", T0, 10, 5);
  r = ref_of(&g, 0);
  ASSERT_EQ(eu_fanout_memo_get(s, r.id, r.generation, "charge", &v), 0);
  ASSERT_EQ(eu_fanout_memo_put(s, &r, "charge", "42", 2, T0), 1);
  ASSERT_EQ(eu_fanout_retry(s, &r, T0 + 10, "Error", "later"), 1);
  ASSERT_OK(eu_store_commit(s));
  g = claim(s, "a", T0 + 10, 10, 5);
  ASSERT_EQ(g.attempt[0], 2);
  ASSERT_EQ(eu_fanout_memo_get(s, r.id, r.generation, "charge", &v), 1);
  ASSERT_EQ(v.n, 2);
  ASSERT(memcmp(v.p, "42", 2) == 0);
  /* the old attempt may not write one any more; the current one may */
  ASSERT_EQ(eu_fanout_memo_put(s, &r, "other", "1", 1, T0), 0);
  r = ref_of(&g, 0);
  ASSERT_EQ(eu_fanout_memo_put(s, &r, "other", "", 0, T0), 1);
  ASSERT_EQ(eu_fanout_memo_get(s, r.id, r.generation, "other", &v), 1);
  ASSERT_EQ(v.n, 0);
  /* memos are per delivery: b has none */
  ASSERT_EQ(eu_fanout_memo_get(s, "[\"k\",\"b\"]", r.generation, "charge", &v), 0);
  ASSERT_EQ(eu_fanout_remove(s, &r, 0), 1);
  ASSERT_EQ(sql_scalar(s, "SELECT count(*) FROM eutaxy_fanout_memos"), 0);
  eu_buf_free(&v);
  eu_store_close(s);
}

static int list_target(void *ud, const char *target) {
  eu_buf *b = ud;
  eu_buf_puts(b, target);
  eu_buf_putc(b, ';');
  return 0;
}

static void test_targets_postpone_and_the_next_due_time(void) {
  eu_store *s = open_store();
  static const char *const xy[] = { "gone", "x\"y" };
  eu_buf buf, names;
  int has;
  int64_t due;
  eu_buf_init(&buf);
  eu_buf_init(&names);
  ASSERT_OK(eu_fanout_next_due(s, &has, &due));
  ASSERT_EQ(has, 0);
  ASSERT_EQ(eu_fanout_targets(s, list_target, &names, &buf), 0);
  ASSERT_EQ(enqueue1(s, "k-1", "m", "x", ABC, 3, T0 + 5, NULL), 0);
  ASSERT_EQ(enqueue1(s, "k-2", "m", "x", xy, 2, T0, NULL), 0);
  ASSERT_EQ(eu_fanout_targets(s, list_target, &names, &buf), 5);
  ASSERT_STR_EQ(names.p, "a;b;c;gone;x\"y;");
  ASSERT_EQ(sql_scalar(s, "SELECT count(*) FROM eutaxy_fanout_deliveries WHERE id = '[\"k-2\",\"x\\\"y\"]'"), 1);
  ASSERT_OK(eu_fanout_next_due(s, &has, &due));
  ASSERT(has && due == T0);
  ASSERT_EQ(eu_fanout_postpone(s, "gone", T0, T0 + 60000), 1);
  ASSERT_EQ(eu_fanout_postpone(s, "x\"y", T0, T0 + 60000), 1);
  ASSERT_OK(eu_fanout_next_due(s, &has, &due));
  ASSERT_EQ(due, T0 + 5);
  ASSERT_EQ(alarm_at(s), T0 + 5);
  eu_buf_free(&buf);
  eu_buf_free(&names);
  eu_store_close(s);
}

static void test_backoff_doubles_up_to_five_minutes_with_jitter(void) {
  int a;
  for (a = 1; a <= 12; a++) {
    int64_t base = INT64_C(1000) << (a - 1);
    uint64_t r;
    if (base > 300000) base = 300000;
    for (r = 0; r < 2000; r += 7) {
      int64_t d = eu_fanout_backoff(a, r * UINT64_C(0x9e3779b97f4a7c15));
      ASSERT(d <= base && d >= base - base / 5);
    }
  }
  ASSERT(eu_fanout_backoff(1, 0) != eu_fanout_backoff(1, 12345) || eu_fanout_backoff(1, 7) != eu_fanout_backoff(1, 0));
}

static void test_statements_survive_a_restore(void) {
  eu_store *s = open_store();
  unsigned char *img;
  size_t len;
  ASSERT_EQ(enqueue1(s, "k-1", "m", "x", ABC, 3, T0, NULL), 0);
  ASSERT_OK(eu_store_commit(s));
  ASSERT_OK(eu_store_snapshot(s, &img, &len));
  ASSERT_EQ(enqueue1(s, "k-2", "m", "x", ABC, 3, T0, NULL), 0);
  ASSERT_OK(eu_store_commit(s));
  ASSERT_OK(eu_store_restore(s, img, len));
  free(img);
  ASSERT_EQ(pending(s), 3);
  ASSERT_EQ(enqueue1(s, "k-2", "m", "x", ABC, 3, T0, NULL), 0);
  ASSERT_EQ(pending(s), 6);
  ASSERT_OK(eu_store_commit(s));
  eu_store_close(s);
}

static const eu_test tests[] = {
  { "migrations are versioned and idempotent", test_migrations_are_versioned_and_idempotent },
  { "enqueue writes a manifest and a delivery per target",
    test_enqueue_writes_a_manifest_and_a_delivery_per_target },
  { "a rolled-back turn takes the enqueue and its count back",
    test_a_rolled_back_turn_takes_the_enqueue_and_its_count_back },
  { "the same work again is a no-op", test_the_same_work_again_is_a_no_op },
  { "the same key with other work refuses the whole batch",
    test_the_same_key_with_other_work_refuses_the_whole_batch },
  { "enqueue refuses bad input", test_enqueue_refuses_bad_input },
  { "a failure inside enqueue writes nothing", test_a_failure_inside_enqueue_writes_nothing },
  { "a claim takes first deliveries in order, then due retries",
    test_a_claim_takes_first_deliveries_in_order_then_due_retries },
  { "a claim is committed before it returns", test_a_claim_is_committed_before_it_returns },
  { "a claim that fails claims nothing", test_a_claim_that_fails_claims_nothing },
  { "a stale attempt never settles a newer one", test_a_stale_attempt_never_settles_a_newer_one },
  { "the manifest goes with its last delivery", test_the_manifest_goes_with_its_last_delivery },
  { "removing many is one unit", test_removing_many_is_one_unit },
  { "a retry moves the delivery and records why", test_a_retry_moves_the_delivery_and_records_why },
  { "attempts run out into the dead-letter step", test_attempts_run_out_into_the_dead_letter_step },
  { "a dead letter is committed and keeps its first decision",
    test_a_dead_letter_is_committed_and_keeps_its_first_decision },
  { "memos last across retries and go with the delivery",
    test_memos_last_across_retries_and_go_with_the_delivery },
  { "targets, postpone and the next due time", test_targets_postpone_and_the_next_due_time },
  { "backoff doubles up to five minutes with jitter", test_backoff_doubles_up_to_five_minutes_with_jitter },
  { "statements survive a restore", test_statements_survive_a_restore },
};

int main(void) {
  return test_main(tests, sizeof tests / sizeof tests[0]);
}
