/*
 * test_cron.c: cron expressions as Cloudflare takes them, refused with the
 * field and the reason, and their next due times across the edges of
 * months, years and weeks.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cron.h"
#include "eutaxy.h"
#include "test.h"

/* ms since 1970 of "YYYY-MM-DDTHH:MM", counted the slow way: a check on
 * cron.c's calendar arithmetic, not a copy of it. */
static int64_t at(const char *iso) {
  static const int mdays[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
  int y, mo, d, h, mi, i;
  int64_t days = 0;
  ASSERT(sscanf(iso, "%d-%d-%dT%d:%d", &y, &mo, &d, &h, &mi) == 5);
  for (i = 1970; i < y; i++) days += (i % 4 == 0 && (i % 100 != 0 || i % 400 == 0)) ? 366 : 365;
  for (i = 1; i < mo; i++) days += mdays[i - 1] + (i == 2 && y % 4 == 0 && (y % 100 != 0 || y % 400 == 0));
  days += d - 1;
  return ((days * 24 + h) * 60 + mi) * 60000;
}

/* The next due time of expr after `after`, as "YYYY-MM-DDTHH:MM:SSZ". */
static const char *next(const char *expr, const char *after) {
  static char out[24];
  char err[EU_ERRLEN];
  eu_cron c;
  int64_t t;
  if (eu_cron_parse(&c, expr, err, sizeof err) != EU_OK) {
    fprintf(stderr, "%s: %s\n", expr, err);
    ASSERT(0);
  }
  t = eu_cron_next(&c, at(after));
  ASSERT(t >= 0);
  ASSERT(t % 60000 == 0);
  eu_cron_iso(t, out);
  return out;
}

static const char *refused(const char *expr) {
  static char err[EU_ERRLEN];
  eu_cron c;
  err[0] = '\0';
  ASSERT_EQ(eu_cron_parse(&c, expr, err, sizeof err), EU_EINVAL);
  return err;
}

static void test_every_minute_is_due_at_the_next_whole_minute(void) {
  ASSERT_STR_EQ(next("* * * * *", "2026-01-01T00:00"), "2026-01-01T00:01:00Z");
  ASSERT_STR_EQ(next("* * * * *", "2026-01-01T23:59"), "2026-01-02T00:00:00Z");
  /* strictly after: a time that is due itself gives the one after it */
  ASSERT_STR_EQ(next("0 0 * * *", "2026-01-01T00:00"), "2026-01-02T00:00:00Z");
}

static void test_seconds_past_a_minute_round_up(void) {
  eu_cron c;
  char err[EU_ERRLEN], iso[24];
  ASSERT_OK(eu_cron_parse(&c, "*/5 * * * *", err, sizeof err));
  eu_cron_iso(eu_cron_next(&c, at("2026-01-01T00:03") + 10500), iso);
  ASSERT_STR_EQ(iso, "2026-01-01T00:05:00Z");
  eu_cron_iso(eu_cron_next(&c, at("2026-01-01T00:05") + 1), iso);
  ASSERT_STR_EQ(iso, "2026-01-01T00:10:00Z");
}

static void test_lists_ranges_and_steps(void) {
  ASSERT_STR_EQ(next("5,20-22 * * * *", "2026-01-01T00:06"), "2026-01-01T00:20:00Z");
  ASSERT_STR_EQ(next("5,20-22 * * * *", "2026-01-01T00:22"), "2026-01-01T01:05:00Z");
  ASSERT_STR_EQ(next("1-10/4 * * * *", "2026-01-01T00:05"), "2026-01-01T00:09:00Z");
  ASSERT_STR_EQ(next("1-10/4 * * * *", "2026-01-01T00:09"), "2026-01-01T01:01:00Z");
  ASSERT_STR_EQ(next("30/15 * * * *", "2026-01-01T00:31"), "2026-01-01T00:45:00Z");
  ASSERT_STR_EQ(next("0 */6 * * *", "2026-01-01T07:00"), "2026-01-01T12:00:00Z");
  /* a range past its end wraps around, its step going on across the wrap */
  ASSERT_STR_EQ(next("50-10/10 * * * *", "2026-01-01T00:51"), "2026-01-01T01:00:00Z");
  ASSERT_STR_EQ(next("50-10/10 * * * *", "2026-01-01T01:10"), "2026-01-01T01:50:00Z");
  ASSERT_STR_EQ(next("0 22-2 * * *", "2026-01-01T03:00"), "2026-01-01T22:00:00Z");
}

static void test_months_and_days_roll_over_their_ends(void) {
  ASSERT_STR_EQ(next("0 0 1 * *", "2026-01-31T12:00"), "2026-02-01T00:00:00Z");
  /* April has no 31st: the next 31st is in May */
  ASSERT_STR_EQ(next("0 12 31 * *", "2026-04-01T00:00"), "2026-05-31T12:00:00Z");
  ASSERT_STR_EQ(next("0 0 1 1 *", "2026-06-01T00:00"), "2027-01-01T00:00:00Z");
  ASSERT_STR_EQ(next("59 23 31 12 *", "2026-12-31T23:58"), "2026-12-31T23:59:00Z");
  /* the 29th of February comes in leap years only; 2100 is none */
  ASSERT_STR_EQ(next("0 0 29 2 *", "2026-01-01T00:00"), "2028-02-29T00:00:00Z");
  ASSERT_STR_EQ(next("0 0 29 2 *", "2096-03-01T00:00"), "2104-02-29T00:00:00Z");
  ASSERT_STR_EQ(next("0 0 * feb,Mar *", "2026-01-15T00:00"), "2026-02-01T00:00:00Z");
  ASSERT_STR_EQ(next("0 0 1 NOV-FEB *", "2026-03-01T00:00"), "2026-11-01T00:00:00Z");
}

static void test_days_of_the_week_count_from_sunday_as_one(void) {
  /* 2026-01-01 is a Thursday */
  ASSERT_STR_EQ(next("0 17 * * 1", "2026-01-01T00:00"), "2026-01-04T17:00:00Z");
  ASSERT_STR_EQ(next("0 17 * * sun", "2026-01-01T00:00"), "2026-01-04T17:00:00Z");
  ASSERT_STR_EQ(next("10 7 * * MON-FRI", "2026-01-02T08:00"), "2026-01-05T07:10:00Z");
  ASSERT_STR_EQ(next("10 7 * * 2-6", "2026-01-02T08:00"), "2026-01-05T07:10:00Z");
  ASSERT_STR_EQ(next("0 0 * * FRI-MON", "2026-01-05T01:00"), "2026-01-09T00:00:00Z");
  ASSERT_STR_EQ(next("0 0 * * 7", "2026-01-01T00:00"), "2026-01-03T00:00:00Z");
  /* a week that runs over the end of a month and of a year */
  ASSERT_STR_EQ(next("0 9 * * TUE", "2026-12-30T10:00"), "2027-01-05T09:00:00Z");
}

static void test_both_day_fields_restricted_match_either(void) {
  /* the 13th, or any Friday: Friday the 2nd comes first */
  ASSERT_STR_EQ(next("0 0 13 * FRI", "2026-01-01T00:00"), "2026-01-02T00:00:00Z");
  ASSERT_STR_EQ(next("0 0 13 * FRI", "2026-01-09T12:00"), "2026-01-13T00:00:00Z");
  /* a * in one leaves the other alone */
  ASSERT_STR_EQ(next("0 0 13 * *", "2026-01-01T00:00"), "2026-01-13T00:00:00Z");
  ASSERT_STR_EQ(next("0 0 * * FRI", "2026-01-02T12:00"), "2026-01-09T00:00:00Z");
  /* a step is a restriction, as on Cloudflare */
  ASSERT_STR_EQ(next("0 0 */10 * MON", "2026-01-01T12:00"), "2026-01-05T00:00:00Z");
}

static void test_last_and_nearest_weekday_forms(void) {
  /* January 2026 ends on a Saturday, February 2026 on a Saturday too */
  ASSERT_STR_EQ(next("0 0 L * *", "2026-01-01T00:00"), "2026-01-31T00:00:00Z");
  ASSERT_STR_EQ(next("0 0 L 2 *", "2027-03-01T00:00"), "2028-02-29T00:00:00Z");
  ASSERT_STR_EQ(next("0 0 L-2 * *", "2026-02-01T00:00"), "2026-02-26T00:00:00Z");
  ASSERT_STR_EQ(next("59 23 LW * *", "2026-01-01T00:00"), "2026-01-30T23:59:00Z");
  ASSERT_STR_EQ(next("59 23 LW * *", "2026-01-31T00:00"), "2026-02-27T23:59:00Z");
  /* the 15th of February 2026 is a Sunday: the nearest weekday is Monday */
  ASSERT_STR_EQ(next("0 9 15W * *", "2026-02-01T00:00"), "2026-02-16T09:00:00Z");
  /* the 1st of August 2026 is a Saturday: W does not leave the month */
  ASSERT_STR_EQ(next("0 0 1W * *", "2026-07-15T00:00"), "2026-08-03T00:00:00Z");
  /* the last Friday of January 2026, and the second Monday */
  ASSERT_STR_EQ(next("0 18 * * 6L", "2026-01-01T00:00"), "2026-01-30T18:00:00Z");
  ASSERT_STR_EQ(next("0 18 * * FRIL", "2026-01-01T00:00"), "2026-01-30T18:00:00Z");
  ASSERT_STR_EQ(next("0 10 * * MON#2", "2026-01-01T00:00"), "2026-01-12T10:00:00Z");
  ASSERT_STR_EQ(next("0 0 * * L", "2026-01-01T00:00"), "2026-01-03T00:00:00Z");
  /* a fifth Monday of February comes with a leap year that starts it on one */
  ASSERT_STR_EQ(next("0 0 * 2 MON#5", "2026-01-01T00:00"), "2044-02-29T00:00:00Z");
}

static void test_refuses_bad_expressions_naming_the_field(void) {
  ASSERT_CONTAINS(refused(""), "empty");
  ASSERT_CONTAINS(refused("* * * *"), "expected 5 fields");
  ASSERT_CONTAINS(refused("0 * * * * *"), "got 6");
  ASSERT_CONTAINS(refused(" * * * * *"), "starts or ends with a space");
  ASSERT_STR_EQ(refused("60 * * * *"), "minute field \"60\": 60 is out of range: it takes 0-59");
  ASSERT_STR_EQ(refused("*/0 * * * *"), "minute field \"*/0\": a step must be from 1 to 59");
  ASSERT_STR_EQ(refused("*/60 * * * *"), "minute field \"*/60\": a step must be from 1 to 59");
  ASSERT_CONTAINS(refused("* 24 * * *"), "hour field \"24\": 24 is out of range: it takes 0-23");
  ASSERT_CONTAINS(refused("* * 0 * *"), "day-of-month field \"0\"");
  ASSERT_CONTAINS(refused("* * * 13 *"), "month field \"13\"");
  ASSERT_CONTAINS(refused("* * * JANUARY *"), "month field \"JANUARY\": unexpected text");
  ASSERT_STR_EQ(refused("* * * * 0"),
                "day-of-week field \"0\": 0 is out of range: it takes 1-7 (1 is Sunday) or SUN-SAT");
  ASSERT_CONTAINS(refused("* * * * 8"), "day-of-week field \"8\"");
  ASSERT_CONTAINS(refused("* * ? * *"), "? is Quartz's");
  ASSERT_CONTAINS(refused("*,5 * * * *"), "* cannot be part of a list");
  ASSERT_CONTAINS(refused("1,,2 * * * *"), "empty item");
  ASSERT_CONTAINS(refused("1- * * * *"), "a value is missing");
  ASSERT_CONTAINS(refused("5/ * * * *"), "a step needs a number");
  ASSERT_CONTAINS(refused("* * 32W * *"), "nW takes a day from 1 to 31");
  ASSERT_CONTAINS(refused("* * L-31 * *"), "L-n takes n from 1 to 30");
  ASSERT_CONTAINS(refused("* * 1,LW * *"), "stand alone");
  ASSERT_CONTAINS(refused("* * * * MON#6"), "d#n takes n from 1 to 5");
  ASSERT_CONTAINS(refused("* * * * 1-5L"), "dL takes one day");
  ASSERT_CONTAINS(refused("0 0 30 2 *"), "never due");
  ASSERT_CONTAINS(refused("0 0 31 4,6,9,11 *"), "never due");
}

static void test_prints_times_as_utc(void) {
  char iso[24];
  eu_cron_iso(0, iso);
  ASSERT_STR_EQ(iso, "1970-01-01T00:00:00Z");
  eu_cron_iso(INT64_C(1767225600000), iso);
  ASSERT_STR_EQ(iso, "2026-01-01T00:00:00Z");
  eu_cron_iso(at("2028-02-29T23:59") + 59000, iso);
  ASSERT_STR_EQ(iso, "2028-02-29T23:59:59Z");
}

int main(void) {
  static const eu_test tests[] = {
    { "every minute is due at the next whole minute", test_every_minute_is_due_at_the_next_whole_minute },
    { "seconds past a minute round up", test_seconds_past_a_minute_round_up },
    { "lists, ranges and steps", test_lists_ranges_and_steps },
    { "months and days roll over their ends", test_months_and_days_roll_over_their_ends },
    { "days of the week count from Sunday as 1", test_days_of_the_week_count_from_sunday_as_one },
    { "both day fields restricted match either", test_both_day_fields_restricted_match_either },
    { "L, W and # forms", test_last_and_nearest_weekday_forms },
    { "refuses bad expressions naming the field", test_refuses_bad_expressions_naming_the_field },
    { "prints times as UTC", test_prints_times_as_utc },
  };
  return test_main(tests, sizeof tests / sizeof tests[0]);
}
