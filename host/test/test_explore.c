/*
 * test_explore.c: schedule strings, depth-first backtracking, shards, the
 * search by fault count and shrinking, on a toy run function: no world.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "eutaxy.h"
#include "explore.h"
#include "test.h"

static void test_formats_and_parses_schedules(void) {
  eu_choices ch = { 0 }, back = { 0 };
  unsigned char c[] = { 0, 1, 2, 35, 61 }, n[] = { 2, 2, 3, 40, 62 };
  char s[128], err[EU_ERRLEN];
  int cap;
  uint64_t events;
  ch.c = c;
  ch.n = n;
  ch.len = 5;
  ASSERT_OK(eu_schedule_format(s, sizeof s, 2, 0x5, &ch));
  ASSERT_STR_EQ(s, "2:1.3:012zZ");
  ASSERT_OK(eu_schedule_parse(s, &cap, &events, &back, err, sizeof err));
  ASSERT_EQ(cap, 2);
  ASSERT_EQ(events, 0x5);
  ASSERT_EQ(back.len, 5);
  ASSERT(memcmp(back.c, c, 5) == 0);
  ASSERT_OK(eu_schedule_format(s, sizeof s, 0, 0, &back));
  ASSERT_STR_EQ(s, "0:-:012zZ");
  eu_choices_free(&back);
}

static void test_refuses_malformed_schedules(void) {
  const char *bad[] = { "", "x", "1", "1:", "1:0:", "1:1", "1:65:0", "1:1..2:0", "1:1:0!", "-1:1:0" };
  eu_choices ch = { 0 };
  char err[EU_ERRLEN];
  int cap;
  uint64_t events;
  size_t i;
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ASSERT(eu_schedule_parse(bad[i], &cap, &events, &ch, err, sizeof err) < 0);
    ASSERT_CONTAINS(err, "schedule");
  }
  eu_choices_free(&ch);
}

/* A toy run: three binary decisions; a "fault" is choosing 1; the run
 * violates when decisions 0 and 2 are both 1 and event 2 is kept. */
typedef struct toy {
  int runs;
  int seen[8];
  int last;     /* the last run's schedule, as an index into seen */
} toy;

static int toy_run(void *ud, eu_chooser *ch, uint64_t events, int cap, int *faults, char *err, size_t errlen) {
  toy *t = ud;
  int d[3], i, used = 0, idx;
  (void)err;
  (void)errlen;
  eu_chooser_begin(ch, NULL);
  for (i = 0; i < 3; i++) {
    int n = used < cap ? 2 : 1;
    d[i] = n > 1 ? eu_chooser_choose(ch, 1, n, "toy") : 0;
    used += d[i];
  }
  *faults = used;
  t->runs++;
  idx = d[0] * 4 + d[1] * 2 + d[2];
  t->last = idx;
  return d[0] && d[2] && (events & 2);
}

/* The search's on_counted: the run just done counts as a schedule. */
static void toy_counted(void *ud) {
  toy *t = ud;
  t->seen[t->last]++;
}

static void test_explores_every_schedule_once_by_fault_count(void) {
  eu_search s;
  toy t = { 0 };
  char err[EU_ERRLEN];
  int i;
  eu_search_init(&s);
  s.events = 1;  /* without event 2 nothing violates */
  s.max_faults = 3;
  s.on_counted = toy_counted;
  ASSERT_OK(eu_search_run(&s, toy_run, &t, err, sizeof err));
  ASSERT_EQ(s.verdict, EU_BOUNDED);
  ASSERT_EQ(s.counted[0], 1);
  ASSERT_EQ(s.counted[1], 3);
  ASSERT_EQ(s.counted[2], 3);
  ASSERT_EQ(s.counted[3], 1);
  for (i = 0; i < 8; i++) ASSERT_EQ(t.seen[i], 1);
}

static void test_finds_the_violation_with_the_fewest_faults(void) {
  eu_search s;
  toy t = { 0 };
  char err[EU_ERRLEN];
  eu_search_init(&s);
  s.events = 3;
  s.max_faults = 3;
  ASSERT_OK(eu_search_run(&s, toy_run, &t, err, sizeof err));
  ASSERT_EQ(s.verdict, EU_VIOLATED);
  ASSERT_EQ(s.faults, 2);
  ASSERT_STR_EQ(s.schedule, "2:1.2:101");
}

static void test_shards_add_up_to_the_whole(void) {
  long total = 0, whole;
  int k, i, seen[8] = { 0 };
  char err[EU_ERRLEN];
  eu_search s;
  toy t = { 0 };
  eu_search_init(&s);
  s.events = 1;
  s.max_faults = 3;
  ASSERT_OK(eu_search_run(&s, toy_run, &t, err, sizeof err));
  whole = s.counted[0] + s.counted[1] + s.counted[2] + s.counted[3];
  for (k = 0; k < 3; k++) {
    toy part = { 0 };
    eu_search_init(&s);
    s.events = 1;
    s.max_faults = 3;
    s.shard_k = k;
    s.shard_n = 3;
    s.on_counted = toy_counted;
    ASSERT_OK(eu_search_run(&s, toy_run, &part, err, sizeof err));
    ASSERT_EQ(s.verdict, EU_BOUNDED);
    total += s.counted[0] + s.counted[1] + s.counted[2] + s.counted[3];
    for (i = 0; i < 8; i++) seen[i] += part.seen[i] > 0;
  }
  ASSERT_EQ(total, whole);
  for (i = 0; i < 8; i++) ASSERT_EQ(seen[i], 1);  /* each schedule in exactly one shard */
}

static void test_replays_a_schedule_and_refuses_one_that_does_not_fit(void) {
  eu_search s;
  toy t = { 0 };
  char err[EU_ERRLEN];
  eu_search_init(&s);
  s.mode = EU_MODE_REPLAY;
  s.events = 3;
  s.replay = "2:1.2:101";
  ASSERT_OK(eu_search_run(&s, toy_run, &t, err, sizeof err));
  ASSERT_EQ(s.verdict, EU_VIOLATED);
  ASSERT_EQ(t.runs, 1);
  eu_search_init(&s);
  s.mode = EU_MODE_REPLAY;
  s.events = 3;
  s.replay = "2:1.2:1";  /* too short: the run wants more decisions */
  ASSERT(eu_search_run(&s, toy_run, &t, err, sizeof err) < 0);
  ASSERT_CONTAINS(err, "does not fit");
}

static void test_shrinks_away_events_that_are_not_needed(void) {
  eu_search s;
  toy t = { 0 };
  long runs;
  char err[EU_ERRLEN];
  eu_search_init(&s);
  s.events = 0xf;  /* events 1..4; only event 2 matters */
  s.max_faults = 3;
  ASSERT_OK(eu_search_run(&s, toy_run, &t, err, sizeof err));
  ASSERT_EQ(s.verdict, EU_VIOLATED);
  ASSERT_OK(eu_search_shrink(&s, toy_run, &t, &runs, err, sizeof err));
  ASSERT_EQ(s.events, 2);
  ASSERT_STR_EQ(s.schedule, "2:2:101");
  ASSERT(runs > 0);
}

static void test_random_runs_never_prove(void) {
  eu_search s;
  toy t = { 0 };
  char err[EU_ERRLEN];
  eu_search_init(&s);
  s.mode = EU_MODE_RANDOM;
  s.events = 1;
  s.max_faults = 3;
  s.random_runs = 50;
  s.random_seed = 7;
  ASSERT_OK(eu_search_run(&s, toy_run, &t, err, sizeof err));
  ASSERT_EQ(s.verdict, EU_INCONCLUSIVE);
  ASSERT_EQ(t.runs, 50);
}

/* What a run function's owner keeps of counted runs (as lcheck.c keeps
 * coverage): here, how often each schedule was counted. */
typedef struct noted {
  toy t;        /* first: the run function is toy_run */
  long kept[8];
} noted;

static void keep_last(void *ud) {
  noted *n = ud;
  n->kept[n->t.last]++;
}

static int export_kept(void *ud, eu_buf *out) {
  noted *n = ud;
  int i;
  for (i = 0; i < 8; i++) eu_buf_printf(out, "%ld\n", n->kept[i]);
  return EU_OK;
}

static int merge_kept(void *ud, const char *p, size_t len) {
  noted *n = ud;
  int i;
  char *end;
  ASSERT_EQ(p[len], '\0');  /* handed over as text */
  for (i = 0; i < 8; i++) {
    n->kept[i] += strtol(p, &end, 10);
    if (*end != '\n') return EU_ECORRUPT;
    p = end + 1;
  }
  return EU_OK;
}

static void test_parallel_workers_hand_their_notes_back(void) {
  eu_search s;
  noted one = { 0 }, par = { 0 };
  char err[EU_ERRLEN];
  long faults_tried;
  int i;
  eu_search_init(&s);
  s.events = 1;
  s.max_faults = 3;
  s.on_counted = keep_last;
  ASSERT_OK(eu_search_run(&s, toy_run, &one, err, sizeof err));
  faults_tried = s.faults_tried;
  ASSERT_EQ(faults_tried, 0 * 1 + 1 * 3 + 2 * 3 + 3 * 1);
  for (i = 0; i < 8; i++) ASSERT_EQ(one.kept[i], 1);
  eu_search_init(&s);
  s.events = 1;
  s.max_faults = 3;
  s.on_counted = keep_last;
  s.export_notes = export_kept;
  s.merge_notes = merge_kept;
  ASSERT_OK(eu_search_parallel(&s, 3, toy_run, &par, err, sizeof err));
  ASSERT_EQ(s.verdict, EU_BOUNDED);
  ASSERT_EQ(s.faults_tried, faults_tried);
  for (i = 0; i < 8; i++) ASSERT_EQ(par.kept[i], 1);  /* every schedule counted once, by some worker */
}

static const eu_test tests[] = {
  { "formats and parses schedules", test_formats_and_parses_schedules },
  { "refuses malformed schedules", test_refuses_malformed_schedules },
  { "explores every schedule once, by fault count", test_explores_every_schedule_once_by_fault_count },
  { "finds the violation with the fewest faults", test_finds_the_violation_with_the_fewest_faults },
  { "shards add up to the whole", test_shards_add_up_to_the_whole },
  { "replays a schedule and refuses one that does not fit", test_replays_a_schedule_and_refuses_one_that_does_not_fit },
  { "shrinks away events that are not needed", test_shrinks_away_events_that_are_not_needed },
  { "random runs never prove", test_random_runs_never_prove },
  { "parallel workers hand their notes back", test_parallel_workers_hand_their_notes_back },
};

int main(void) { return test_main(tests, sizeof tests / sizeof tests[0]); }
