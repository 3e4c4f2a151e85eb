/*
 * test_agenda.c: the agenda (agenda.c) through its C API: migrations,
 * participants' due times, the one alarm that follows them, and the named
 * alarms and durable operations kept in the object's database.
 *
 * Each test opens its own in-memory store, runs its calls in turns it
 * commits or rolls back itself, as the world would, and closes the store.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "agenda.h"
#include "eutaxy.h"
#include "store.h"
#include "test.h"
#include "test_sql.h"

static eu_store *open_store(void) {
  eu_store *s = NULL;
  char err[EU_ERRLEN];
  ASSERT_OK(eu_store_open(&s, NULL, err, sizeof err));
  ASSERT_OK(eu_alarms_migrate(s));
  ASSERT_OK(eu_durable_migrate(s));
  ASSERT_OK(eu_store_commit(s));
  return s;
}

static int64_t next_due(eu_store *s) {
  int has;
  int64_t due;
  ASSERT_OK(eu_agenda_next(s, &has, &due));
  return has ? due : -1;
}

static void test_migrations_are_versioned_and_idempotent(void) {
  eu_store *s = open_store();
  int version;
  ASSERT_OK(eu_agenda_version(s, "agenda", &version));
  ASSERT_EQ(version, 1);
  ASSERT_OK(eu_agenda_version(s, "alarms", &version));
  ASSERT_EQ(version, 1);
  ASSERT_OK(eu_agenda_version(s, "durable", &version));
  ASSERT_EQ(version, 1);
  /* Again: nothing to do, and a current database is not even written to. */
  ASSERT_OK(eu_agenda_migrate(s));
  ASSERT_OK(eu_alarms_migrate(s));
  ASSERT_OK(eu_durable_migrate(s));
  ASSERT(!eu_store_in_turn(s));
  ASSERT_EQ(sql_scalar(s, "SELECT count(*) FROM eutaxy_migrations"), 3);
  eu_store_close(s);
}

static void test_migrations_apply_only_the_new_steps(void) {
  static const char *const steps[] = {
    "CREATE TABLE t_cap(a INTEGER)",
    "ALTER TABLE t_cap ADD COLUMN b INTEGER",
  };
  eu_store *s = open_store();
  int version;
  ASSERT_OK(eu_agenda_migrate_capability(s, "cap", steps, 1));
  ASSERT_OK(eu_agenda_migrate_capability(s, "cap", steps, 1));
  ASSERT_OK(eu_agenda_version(s, "cap", &version));
  ASSERT_EQ(version, 1);
  ASSERT_OK(eu_agenda_migrate_capability(s, "cap", steps, 2));  /* the ALTER alone runs */
  ASSERT_OK(eu_agenda_version(s, "cap", &version));
  ASSERT_EQ(version, 2);
  ASSERT_EQ(sql_scalar(s, "SELECT count(*) FROM pragma_table_info('t_cap')"), 2);
  ASSERT_OK(eu_store_commit(s));
  /* A database newer than the code is refused, not downgraded. */
  ASSERT_EQ(eu_agenda_migrate_capability(s, "cap", steps, 1), EU_EINVAL);
  ASSERT_CONTAINS(eu_store_errmsg(s), "newer than this eutaxy knows");
  eu_store_close(s);
}

static void test_a_failed_migration_leaves_nothing(void) {
  static const char *const steps[] = {
    "CREATE TABLE t_bad(a INTEGER)",
    "CREATE TABLE t_bad(a INTEGER)",  /* fails: the first step must go too */
  };
  eu_store *s = open_store();
  int version;
  ASSERT_EQ(eu_agenda_migrate_capability(s, "bad", steps, 2), EU_ESQL);
  ASSERT_CONTAINS(eu_store_errmsg(s), "already exists");
  ASSERT_OK(eu_agenda_version(s, "bad", &version));
  ASSERT_EQ(version, 0);
  ASSERT_EQ(sql_scalar(s, "SELECT count(*) FROM sqlite_schema WHERE name = 't_bad'"), 0);
  ASSERT_OK(eu_store_rollback(s));
  eu_store_close(s);
}

static void test_next_is_the_earliest_due_time(void) {
  eu_store *s = open_store();
  ASSERT_EQ(next_due(s), -1);
  ASSERT_OK(eu_agenda_set(s, "fanout", "email", 300));
  ASSERT_OK(eu_agenda_set(s, "fanout", "ledger", 200));
  ASSERT_OK(eu_agenda_set(s, "other", "", 250));
  ASSERT_EQ(next_due(s), 200);
  ASSERT_OK(eu_agenda_set(s, "fanout", "ledger", 400));  /* a participant's key is one row */
  ASSERT_EQ(next_due(s), 250);
  ASSERT_OK(eu_agenda_clear(s, "other", ""));
  ASSERT_EQ(next_due(s), 300);
  ASSERT_OK(eu_agenda_clear(s, "fanout", "email"));
  ASSERT_OK(eu_agenda_clear(s, "fanout", "ledger"));
  ASSERT_OK(eu_agenda_clear(s, "fanout", "never-set"));
  ASSERT_EQ(next_due(s), -1);
  ASSERT_OK(eu_store_commit(s));
  eu_store_close(s);
}

static int collect_due(void *ud, const char *participant, int64_t due) {
  char *out = ud;
  char line[64];
  snprintf(line, sizeof line, "%s=%lld;", participant, (long long)due);
  strcat(out, line);
  return 0;
}

static void test_due_lists_each_participant_with_work_due(void) {
  eu_store *s = open_store();
  char out[128] = "";
  ASSERT_OK(eu_agenda_set(s, "fanout", "email", 300));
  ASSERT_OK(eu_agenda_set(s, "fanout", "ledger", 200));
  ASSERT_OK(eu_agenda_set(s, "alarms", "", 250));
  ASSERT_OK(eu_agenda_set(s, "durable", "", 900));
  ASSERT_OK(eu_agenda_due(s, 300, collect_due, out));
  ASSERT_STR_EQ(out, "alarms=250;fanout=200;");
  out[0] = '\0';
  ASSERT_OK(eu_agenda_due(s, 199, collect_due, out));
  ASSERT_STR_EQ(out, "");
  ASSERT_OK(eu_store_commit(s));
  eu_store_close(s);
}

static void test_reconcile_keeps_the_alarm_at_the_earliest(void) {
  eu_store *s = open_store();
  int has, retry;
  int64_t at;
  ASSERT_OK(eu_agenda_set(s, "a", "", 500));
  ASSERT_OK(eu_agenda_reconcile(s));
  ASSERT_EQ(alarm_at(s), 500);
  ASSERT_OK(eu_agenda_set(s, "b", "", 100));
  ASSERT_OK(eu_agenda_reconcile(s));
  ASSERT_EQ(alarm_at(s), 100);
  /* A later or earlier alarm set by someone else is moved back to the agenda's. */
  ASSERT_OK(eu_store_set_alarm(s, 50, 0));
  ASSERT_OK(eu_agenda_reconcile(s));
  ASSERT_EQ(alarm_at(s), 100);
  /* An alarm already right keeps its retry count and is not marked as moved. */
  ASSERT_OK(eu_store_set_alarm(s, 100, 3));
  eu_store_clear_alarm_dirty(s);
  ASSERT_OK(eu_agenda_reconcile(s));
  ASSERT_OK(eu_store_get_alarm(s, &has, &at, &retry));
  ASSERT_EQ(retry, 3);
  ASSERT(!eu_store_alarm_dirty(s));
  ASSERT_OK(eu_agenda_clear(s, "a", ""));
  ASSERT_OK(eu_agenda_clear(s, "b", ""));
  ASSERT_OK(eu_agenda_reconcile(s));
  ASSERT_EQ(alarm_at(s), -1);
  ASSERT_OK(eu_store_commit(s));
  eu_store_close(s);
}

static void test_a_rolled_back_turn_takes_the_alarm_back(void) {
  eu_store *s = open_store();
  ASSERT_OK(eu_agenda_set(s, "a", "", 700));
  ASSERT_OK(eu_agenda_reconcile(s));
  ASSERT_OK(eu_store_commit(s));
  ASSERT_OK(eu_agenda_set(s, "a", "", 10));
  ASSERT_OK(eu_agenda_reconcile(s));
  ASSERT_EQ(alarm_at(s), 10);
  ASSERT_OK(eu_store_rollback(s));
  ASSERT_EQ(alarm_at(s), 700);
  ASSERT_EQ(next_due(s), 700);
  eu_store_close(s);
}

static void test_backoff_doubles_up_to_five_minutes_with_jitter_below(void) {
  int attempt;
  uint64_t r;
  for (attempt = 1; attempt <= 40; attempt++) {
    int64_t base = attempt >= 20 ? 300000 : (INT64_C(1000) << (attempt - 1));
    if (base > 300000) base = 300000;
    for (r = 0; r < 2000; r += 7) {
      int64_t d = eu_agenda_backoff(attempt, r * 0x9e3779b97f4a7c15ULL);
      ASSERT(d <= base);
      ASSERT(d >= base - base / 5);
    }
  }
  ASSERT_EQ(eu_agenda_backoff(1, 0), 1000);
  ASSERT_EQ(eu_agenda_backoff(3, 0), 4000);
  ASSERT_EQ(eu_agenda_backoff(0, 0), 1000);
  ASSERT_EQ(eu_agenda_backoff(12, 0), 300000);
  ASSERT(eu_agenda_backoff(2, 123) != eu_agenda_backoff(2, 124));
}

static int collect(void *ud, const eu_agenda_item *it) {
  char *names = ud;
  strcat(names, it->key);
  strcat(names, ";");
  return 0;
}

static void test_scheduling_a_name_again_replaces_it(void) {
  eu_store *s = open_store();
  eu_buf b;
  char names[64] = "";
  eu_buf_init(&b);
  ASSERT_OK(eu_alarms_schedule(s, "report", 5000, "p1", 2, 0, 11, 0));
  ASSERT_OK(eu_alarms_schedule(s, "cleanup", 3000, NULL, 0, 0, 12, 0));
  ASSERT_EQ(alarm_at(s), 3000);
  ASSERT_OK(eu_alarms_schedule(s, "report", 2000, "p2", 2, 0, 13, 0));
  ASSERT_EQ(alarm_at(s), 2000);
  ASSERT_EQ(sql_scalar(s, "SELECT count(*) FROM eutaxy_alarms"), 2);
  ASSERT_OK(eu_alarms_list(s, collect, names, &b));
  ASSERT_STR_EQ(names, "report;cleanup;");
  ASSERT_EQ(eu_alarms_cancel(s, "report"), 1);
  ASSERT_EQ(eu_alarms_cancel(s, "report"), 0);
  ASSERT_EQ(alarm_at(s), 3000);
  ASSERT_EQ(eu_alarms_cancel(s, "cleanup"), 1);
  ASSERT_EQ(alarm_at(s), -1);
  ASSERT_EQ(next_due(s), -1);
  ASSERT_OK(eu_store_commit(s));
  eu_buf_free(&b);
  eu_store_close(s);
}

static void test_an_alarm_is_taken_once_and_settled(void) {
  eu_store *s = open_store();
  eu_agenda_item it;
  eu_buf b;
  eu_buf_init(&b);
  ASSERT_OK(eu_alarms_schedule(s, "tick", 1000, "xyz", 3, 0, 42, 0));
  ASSERT_EQ(eu_alarms_take(s, 999, 0, &it, &b), 0);  /* not due yet */
  ASSERT_EQ(eu_alarms_take(s, 1000, 0, &it, &b), 1);
  ASSERT_STR_EQ(it.key, "tick");
  ASSERT_EQ(it.len, 3);
  ASSERT(memcmp(it.payload, "xyz", 3) == 0);
  ASSERT_EQ(it.scheduled_at, 1000);
  ASSERT_EQ(it.generation, 42);
  ASSERT_EQ(it.attempt, 1);
  ASSERT_EQ(it.max_attempts, EU_AGENDA_MAX_ATTEMPTS);
  ASSERT(!it.exhausted);
  /* Claimed: moved to when a retry would come, so it is not taken again now. */
  ASSERT_EQ(eu_alarms_take(s, 1000, 0, &it, &b), 0);
  ASSERT_EQ(alarm_at(s), 2000);
  /* A stale attempt or an older generation changes nothing. */
  ASSERT_EQ(eu_alarms_settle(s, "tick", 42, 2, NULL, 1000, 0), EU_SETTLE_STALE);
  ASSERT_EQ(eu_alarms_settle(s, "tick", 41, 1, NULL, 1000, 0), EU_SETTLE_STALE);
  ASSERT_EQ(eu_alarms_settle(s, "tick", 42, 1, NULL, 1000, 0), EU_SETTLE_DONE);
  ASSERT_EQ(sql_scalar(s, "SELECT count(*) FROM eutaxy_alarms"), 0);
  ASSERT_EQ(alarm_at(s), -1);
  ASSERT_OK(eu_store_commit(s));
  eu_buf_free(&b);
  eu_store_close(s);
}

static void test_a_handler_rescheduling_its_own_name_keeps_the_new_one(void) {
  eu_store *s = open_store();
  eu_agenda_item it;
  eu_buf b;
  eu_buf_init(&b);
  ASSERT_OK(eu_alarms_schedule(s, "tick", 1000, NULL, 0, 0, 1, 0));
  ASSERT_EQ(eu_alarms_take(s, 1000, 0, &it, &b), 1);
  ASSERT_OK(eu_alarms_schedule(s, "tick", 61000, NULL, 0, 0, 2, 1000));
  ASSERT_EQ(eu_alarms_settle(s, "tick", 1, 1, NULL, 1000, 0), EU_SETTLE_STALE);
  ASSERT_EQ(sql_scalar(s, "SELECT due FROM eutaxy_alarms WHERE name = 'tick'"), 61000);
  ASSERT_EQ(alarm_at(s), 61000);
  ASSERT_OK(eu_store_commit(s));
  eu_buf_free(&b);
  eu_store_close(s);
}

static void test_a_failing_alarm_is_retried_then_dropped(void) {
  eu_store *s = open_store();
  eu_agenda_item it;
  eu_buf b;
  eu_buf_init(&b);
  ASSERT_OK(eu_alarms_schedule(s, "flaky", 0, NULL, 0, 2, 7, 0));
  ASSERT_EQ(eu_alarms_take(s, 0, 0, &it, &b), 1);
  ASSERT_EQ(eu_alarms_settle(s, "flaky", 7, 1, "boom", 10, 1000), EU_SETTLE_RETRY);
  ASSERT_EQ(alarm_at(s), 1010);
  ASSERT_EQ(eu_alarms_take(s, 1010, 0, &it, &b), 1);
  ASSERT_EQ(it.attempt, 2);
  ASSERT_STR_EQ(it.last_error, "boom");
  ASSERT_EQ(it.scheduled_at, 0);
  ASSERT_EQ(eu_alarms_settle(s, "flaky", 7, 2, "boom again", 1020, 2000), EU_SETTLE_FAILED);
  ASSERT_EQ(sql_scalar(s, "SELECT count(*) FROM eutaxy_alarms"), 0);
  ASSERT_EQ(alarm_at(s), -1);
  ASSERT_OK(eu_store_commit(s));
  eu_buf_free(&b);
  eu_store_close(s);
}

static void test_an_alarm_whose_last_attempt_never_settled_is_given_up(void) {
  eu_store *s = open_store();
  eu_agenda_item it;
  eu_buf b;
  eu_buf_init(&b);
  ASSERT_OK(eu_alarms_schedule(s, "crashy", 0, NULL, 0, 1, 7, 0));
  ASSERT_EQ(eu_alarms_take(s, 0, 0, &it, &b), 1);
  ASSERT(!it.exhausted);
  /* No settle: the invocation died. When it comes due again it is dropped. */
  ASSERT_EQ(alarm_at(s), 1000);
  ASSERT_EQ(eu_alarms_take(s, 1000, 0, &it, &b), 1);
  ASSERT(it.exhausted);
  ASSERT_STR_EQ(it.key, "crashy");
  ASSERT_EQ(eu_alarms_take(s, 1000, 0, &it, &b), 0);
  ASSERT_EQ(alarm_at(s), -1);
  ASSERT_OK(eu_store_commit(s));
  eu_buf_free(&b);
  eu_store_close(s);
}

static void test_an_operation_registers_once(void) {
  eu_store *s = open_store();
  ASSERT_EQ(eu_durable_register(s, "op-1", "charge", "P", 1, 0, 100), 1);
  ASSERT_EQ(alarm_at(s), 100);
  ASSERT_EQ(eu_durable_register(s, "op-1", "charge", "P", 1, 0, 200), 0);
  ASSERT_EQ(eu_durable_register(s, "op-1", "refund", "P", 1, 0, 200), 2);
  ASSERT_EQ(eu_durable_register(s, "op-1", "charge", "Q", 1, 0, 200), 3);
  ASSERT_EQ(eu_durable_register(s, "op-1", "charge", NULL, 0, 0, 200), 3);
  ASSERT_EQ(sql_scalar(s, "SELECT count(*) FROM eutaxy_durable_ops"), 1);
  ASSERT_EQ(sql_scalar(s, "SELECT next_attempt_at FROM eutaxy_durable_ops"), 100);
  ASSERT_EQ(eu_durable_register(s, NULL, "charge", NULL, 0, 0, 0), EU_EINVAL);
  ASSERT_OK(eu_store_commit(s));
  eu_store_close(s);
}

static void test_an_operation_runs_and_keeps_its_result(void) {
  eu_store *s = open_store();
  eu_agenda_item it;
  eu_durable_state st;
  eu_buf b;
  eu_buf_init(&b);
  ASSERT_EQ(eu_durable_register(s, "op-1", "charge", "P", 1, 0, 100), 1);
  ASSERT_EQ(eu_durable_get(s, "op-1", &st, &b), 1);
  ASSERT_STR_EQ(st.status, "pending");
  ASSERT_EQ(st.attempts, 0);
  ASSERT_EQ(eu_durable_get(s, "op-2", &st, &b), 0);
  ASSERT_EQ(eu_durable_take(s, 100, 0, &it, &b), 1);
  ASSERT_STR_EQ(it.key, "op-1");
  ASSERT_STR_EQ(it.handler, "charge");
  ASSERT_EQ(it.attempt, 1);
  ASSERT_EQ(it.len, 1);
  ASSERT_EQ(eu_durable_take(s, 100, 0, &it, &b), 0);
  ASSERT_EQ(eu_durable_settle(s, "op-1", 1, "R", 1, NULL, 150, 0), EU_SETTLE_DONE);
  ASSERT_EQ(eu_durable_settle(s, "op-1", 1, "R", 1, NULL, 150, 0), EU_SETTLE_STALE);
  ASSERT_EQ(eu_durable_get(s, "op-1", &st, &b), 1);
  ASSERT_STR_EQ(st.status, "done");
  ASSERT_EQ(st.rlen, 1);
  ASSERT(st.result[0] == 'R');
  ASSERT(st.error == NULL);
  ASSERT_EQ(st.attempts, 1);
  ASSERT_EQ(st.settled_at, 150);
  ASSERT_EQ(alarm_at(s), -1);
  /* Registering it again after it ran is still a no-op. */
  ASSERT_EQ(eu_durable_register(s, "op-1", "charge", "P", 1, 0, 300), 0);
  ASSERT_EQ(alarm_at(s), -1);
  ASSERT_OK(eu_store_commit(s));
  eu_buf_free(&b);
  eu_store_close(s);
}

static void test_an_operation_is_retried_then_fails(void) {
  eu_store *s = open_store();
  eu_agenda_item it;
  eu_durable_state st;
  eu_buf b;
  eu_buf_init(&b);
  ASSERT_EQ(eu_durable_register(s, "op", "h", NULL, 0, 2, 0), 1);
  ASSERT_EQ(eu_durable_take(s, 0, 0, &it, &b), 1);
  ASSERT_EQ(eu_durable_settle(s, "op", 1, NULL, 0, "first", 5, 1000), EU_SETTLE_RETRY);
  ASSERT_EQ(alarm_at(s), 1005);
  ASSERT_EQ(eu_durable_get(s, "op", &st, &b), 1);
  ASSERT_STR_EQ(st.status, "pending");
  ASSERT_STR_EQ(st.error, "first");
  ASSERT_EQ(eu_durable_take(s, 1004, 0, &it, &b), 0);
  ASSERT_EQ(eu_durable_take(s, 1005, 0, &it, &b), 1);
  ASSERT_EQ(it.attempt, 2);
  ASSERT_EQ(eu_durable_settle(s, "op", 2, NULL, 0, "second", 1010, 2000), EU_SETTLE_FAILED);
  ASSERT_EQ(eu_durable_get(s, "op", &st, &b), 1);
  ASSERT_STR_EQ(st.status, "failed");
  ASSERT_STR_EQ(st.error, "second");
  ASSERT_EQ(st.attempts, 2);
  ASSERT_EQ(alarm_at(s), -1);
  ASSERT_OK(eu_store_commit(s));
  eu_buf_free(&b);
  eu_store_close(s);
}

static void test_an_operation_whose_last_attempt_never_settled_fails(void) {
  eu_store *s = open_store();
  eu_agenda_item it;
  eu_durable_state st;
  eu_buf b;
  eu_buf_init(&b);
  ASSERT_EQ(eu_durable_register(s, "op", "h", NULL, 0, 1, 0), 1);
  ASSERT_EQ(eu_durable_take(s, 0, 0, &it, &b), 1);
  ASSERT_OK(eu_store_commit(s));  /* the claim is durable; the handler never settles */
  ASSERT_EQ(alarm_at(s), 1000);
  ASSERT_EQ(eu_durable_take(s, 1000, 0, &it, &b), 1);
  ASSERT(it.exhausted);
  ASSERT_EQ(eu_durable_get(s, "op", &st, &b), 1);
  ASSERT_STR_EQ(st.status, "failed");
  ASSERT_CONTAINS(st.error, "never finished");
  ASSERT_EQ(alarm_at(s), -1);
  ASSERT_OK(eu_store_commit(s));
  eu_buf_free(&b);
  eu_store_close(s);
}

static void test_alarms_and_operations_share_the_one_alarm(void) {
  eu_store *s = open_store();
  eu_agenda_item it;
  eu_buf b;
  eu_buf_init(&b);
  ASSERT_OK(eu_alarms_schedule(s, "a", 9000, NULL, 0, 0, 1, 0));
  ASSERT_EQ(eu_durable_register(s, "op", "h", NULL, 0, 0, 4000), 1);
  ASSERT_OK(eu_agenda_set(s, "fanout", "t", 6000));
  ASSERT_OK(eu_agenda_reconcile(s));
  ASSERT_EQ(alarm_at(s), 4000);
  ASSERT_EQ(eu_durable_take(s, 4000, 0, &it, &b), 1);
  ASSERT_EQ(eu_durable_settle(s, "op", 1, NULL, 0, NULL, 4000, 0), EU_SETTLE_DONE);
  ASSERT_EQ(alarm_at(s), 6000);
  ASSERT_OK(eu_agenda_clear(s, "fanout", "t"));
  ASSERT_OK(eu_agenda_reconcile(s));
  ASSERT_EQ(alarm_at(s), 9000);
  ASSERT_OK(eu_store_commit(s));
  eu_buf_free(&b);
  eu_store_close(s);
}

static void test_statements_survive_a_restore(void) {
  eu_store *s = open_store();
  unsigned char *img;
  size_t len;
  ASSERT_OK(eu_alarms_schedule(s, "a", 10, NULL, 0, 0, 1, 0));
  ASSERT_OK(eu_store_commit(s));
  ASSERT_OK(eu_store_snapshot(s, &img, &len));
  ASSERT_OK(eu_alarms_schedule(s, "b", 5, NULL, 0, 0, 2, 0));
  ASSERT_OK(eu_store_commit(s));
  ASSERT_OK(eu_store_restore(s, img, len));
  free(img);
  ASSERT_EQ(alarm_at(s), 10);
  ASSERT_EQ(eu_alarms_cancel(s, "b"), 0);
  ASSERT_EQ(eu_alarms_cancel(s, "a"), 1);
  ASSERT_EQ(alarm_at(s), -1);
  ASSERT_OK(eu_store_commit(s));
  eu_store_close(s);
}

static void test_a_failure_inside_a_call_undoes_all_of_it(void) {
  eu_store *s = open_store();
  ASSERT_OK(eu_alarms_schedule(s, "a", 10, NULL, 0, 0, 1, 0));
  ASSERT_OK(eu_store_commit(s));
  /* The agenda row cannot be written: the alarm row written before it goes too. */
  ASSERT_OK(eu_store_exec_internal(s,
    "CREATE TRIGGER no_agenda BEFORE UPDATE ON eutaxy_agenda BEGIN SELECT raise(ABORT, 'agenda refused'); END;"
    "CREATE TRIGGER no_agenda_insert BEFORE INSERT ON eutaxy_agenda BEGIN SELECT raise(ABORT, 'agenda refused'); END;"));
  ASSERT_EQ(eu_alarms_schedule(s, "b", 5, NULL, 0, 0, 2, 0), EU_ESQL);
  ASSERT_CONTAINS(eu_store_errmsg(s), "agenda refused");
  ASSERT_EQ(sql_scalar(s, "SELECT count(*) FROM eutaxy_alarms"), 1);
  ASSERT_EQ(alarm_at(s), 10);
  ASSERT_OK(eu_store_commit(s));
  eu_store_close(s);
}

static const eu_test tests[] = {
  { "migrations are versioned and idempotent", test_migrations_are_versioned_and_idempotent },
  { "migrations apply only the new steps", test_migrations_apply_only_the_new_steps },
  { "a failed migration leaves nothing", test_a_failed_migration_leaves_nothing },
  { "next is the earliest due time", test_next_is_the_earliest_due_time },
  { "due lists each participant with work due", test_due_lists_each_participant_with_work_due },
  { "reconcile keeps the alarm at the earliest", test_reconcile_keeps_the_alarm_at_the_earliest },
  { "a rolled-back turn takes the alarm back", test_a_rolled_back_turn_takes_the_alarm_back },
  { "backoff doubles up to five minutes with jitter below",
    test_backoff_doubles_up_to_five_minutes_with_jitter_below },
  { "scheduling a name again replaces it", test_scheduling_a_name_again_replaces_it },
  { "an alarm is taken once and settled", test_an_alarm_is_taken_once_and_settled },
  { "a handler rescheduling its own name keeps the new one",
    test_a_handler_rescheduling_its_own_name_keeps_the_new_one },
  { "a failing alarm is retried then dropped", test_a_failing_alarm_is_retried_then_dropped },
  { "an alarm whose last attempt never settled is given up",
    test_an_alarm_whose_last_attempt_never_settled_is_given_up },
  { "an operation registers once", test_an_operation_registers_once },
  { "an operation runs and keeps its result", test_an_operation_runs_and_keeps_its_result },
  { "an operation is retried then fails", test_an_operation_is_retried_then_fails },
  { "an operation whose last attempt never settled fails",
    test_an_operation_whose_last_attempt_never_settled_fails },
  { "alarms and operations share the one alarm", test_alarms_and_operations_share_the_one_alarm },
  { "statements survive a restore", test_statements_survive_a_restore },
  { "a failure inside a call undoes all of it", test_a_failure_inside_a_call_undoes_all_of_it },
};

int main(void) {
  return test_main(tests, sizeof tests / sizeof tests[0]);
}
