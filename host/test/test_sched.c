/*
 * test_sched.c: the event queue orders by time, then by scheduling order,
 * and hands every tie to its caller.
 */
#include <stdint.h>
#include <stdlib.h>

#include "eutaxy.h"
#include "sched.h"
#include "test.h"

static void push(eu_sched *s, int64_t at, int64_t a) {
  eu_event ev = { 0 };
  ev.at = at;
  ev.a = a;
  ASSERT_OK(eu_sched_push(s, &ev));
}

static void test_orders_by_time_then_by_scheduling(void) {
  eu_sched s;
  eu_event out[8];
  int64_t seen[6];
  int i = 0;
  eu_sched_init(&s);
  push(&s, 30, 1);
  push(&s, 10, 2);
  push(&s, 20, 3);
  push(&s, 10, 4);
  push(&s, 0, 5);
  push(&s, 30, 6);
  while (eu_sched_count(&s) > 0) {
    size_t n = eu_sched_ties(&s, out, 8), k;
    for (k = 0; k < n; k++) seen[i++] = out[k].a;
  }
  ASSERT_EQ(i, 6);
  ASSERT_EQ(seen[0], 5);
  ASSERT_EQ(seen[1], 2);
  ASSERT_EQ(seen[2], 4);
  ASSERT_EQ(seen[3], 3);
  ASSERT_EQ(seen[4], 1);
  ASSERT_EQ(seen[5], 6);
  ASSERT_EQ(s.now, 30);
  eu_sched_free(&s);
}

static void test_gives_every_tie_and_takes_back_the_rest(void) {
  eu_sched s;
  eu_event out[8];
  size_t n;
  eu_sched_init(&s);
  push(&s, 5, 1);
  push(&s, 5, 2);
  push(&s, 5, 3);
  push(&s, 9, 4);
  n = eu_sched_ties(&s, out, 8);
  ASSERT_EQ(n, 3);
  ASSERT_EQ(out[0].a, 1);
  ASSERT_EQ(out[2].a, 3);
  /* the caller runs the second and gives the others back: their order stays */
  ASSERT_OK(eu_sched_giveback(&s, &out[0]));
  ASSERT_OK(eu_sched_giveback(&s, &out[2]));
  n = eu_sched_ties(&s, out, 8);
  ASSERT_EQ(n, 2);
  ASSERT_EQ(out[0].a, 1);
  ASSERT_EQ(out[1].a, 3);
  ASSERT_EQ(eu_sched_next_time(&s), 9);
  eu_sched_free(&s);
}

static void test_moves_an_event_in_the_past_to_now(void) {
  eu_sched s;
  eu_event out[2];
  eu_sched_init(&s);
  push(&s, 100, 1);
  ASSERT_EQ(eu_sched_ties(&s, out, 2), 1);
  push(&s, 40, 2);
  ASSERT_EQ(eu_sched_next_time(&s), 100);
  eu_sched_free(&s);
}

static void test_frees_payloads_left_in_the_queue(void) {
  eu_sched s;
  eu_event ev = { 0 };
  eu_sched_init(&s);
  ev.data = malloc(32);
  ev.len = 32;
  ASSERT_OK(eu_sched_push(&s, &ev));
  eu_sched_free(&s);  /* LeakSanitizer reports it if not */
  ASSERT_EQ(eu_sched_count(&s), 0);
}

static void test_keeps_order_across_many_events(void) {
  eu_sched s;
  eu_event out[4];
  int64_t last_at = -1, i;
  uint64_t last_seq = 0;
  eu_sched_init(&s);
  for (i = 0; i < 5000; i++) push(&s, (i * 7919) % 97, i);
  while (eu_sched_count(&s) > 0) {
    size_t n = eu_sched_ties(&s, out, 1);
    ASSERT_EQ(n, 1);
    ASSERT(out[0].at > last_at || (out[0].at == last_at && out[0].seq > last_seq));
    last_at = out[0].at;
    last_seq = out[0].seq;
  }
  eu_sched_free(&s);
}

static const eu_test tests[] = {
  { "orders by time, then by scheduling order", test_orders_by_time_then_by_scheduling },
  { "gives every tie and takes back the rest", test_gives_every_tie_and_takes_back_the_rest },
  { "moves an event in the past to now", test_moves_an_event_in_the_past_to_now },
  { "frees payloads left in the queue", test_frees_payloads_left_in_the_queue },
  { "keeps its order across many events", test_keeps_order_across_many_events },
};

int main(void) { return test_main(tests, sizeof tests / sizeof tests[0]); }
