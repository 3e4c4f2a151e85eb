/*
 * cron.h: cron expressions as Cloudflare's Cron Triggers take them, and
 * when one is next due.
 *
 * Five fields, minute hour day-of-month month day-of-week, in UTC. Each
 * takes `*`, a value, a range `a-b`, a step `*\/n`, `a/n` or `a-b/n`, and
 * lists of those; a range or a stepped range whose start is past its end
 * wraps around (FRI-MON). Months are 1-12 or JAN-DEC, days of the week
 * 1-7 (1 is Sunday) or SUN-SAT, names in any case. As Quartz (and
 * Cloudflare) do, the day-of-month field also takes L (the last day),
 * L-n, LW (the last weekday), L-nW and nW (the weekday nearest day n), and
 * the day-of-week field L (Saturday), dL (the last d of the month) and d#n
 * (its n-th). When both day fields are restricted a day matches either, as
 * in standard cron; a `*` in one leaves the other alone to decide.
 *
 * The grammar and its meaning follow Cloudflare's own parser (saffron), so
 * an expression Cloudflare refuses is refused here, with the field and the
 * reason. This file knows nothing of worlds or clocks: times are ms since
 * 1970, UTC.
 */
#ifndef EUTAXY_CRON_H
#define EUTAXY_CRON_H

#include <stddef.h>
#include <stdint.h>

/* How a day field matches: its set of values, or one of the forms with L, W or #. */
enum {
  EU_CRON_ANY = 0,         /* `*` */
  EU_CRON_SET,             /* values, ranges and steps: the bits */
  EU_CRON_LAST,            /* day of month: L, or L-n (arg n) */
  EU_CRON_LAST_WEEKDAY,    /* day of month: LW, or L-nW (arg n) */
  EU_CRON_NEAREST_WEEKDAY, /* day of month: nW (arg n) */
  EU_CRON_LAST_OF,         /* day of week: dL (arg d, 0 for Sunday) */
  EU_CRON_NTH              /* day of week: d#n (arg d, nth n) */
};

typedef struct eu_cron {
  uint64_t minutes;        /* bit m: minute m, 0-59 */
  uint32_t hours;          /* bit h: hour h, 0-23 */
  uint32_t days;           /* bit d: day of the month d, 1-31 (EU_CRON_SET) */
  uint16_t months;         /* bit m: month m, 1-12 */
  uint8_t weekdays;        /* bit w: w days after Sunday (EU_CRON_SET) */
  unsigned char day_kind, day_arg;
  unsigned char weekday_kind, weekday_arg, nth;
} eu_cron;

/* Parses expr. EU_OK, or EU_EINVAL with a message naming the field and why:
 * `minute field "*\/61": a step must be from 1 to 59`. An expression that
 * no date matches (`0 0 30 2 *`) is refused too. */
int eu_cron_parse(eu_cron *c, const char *expr, char *err, size_t errlen);

/* The first time c is due strictly after after_ms (ms since 1970, UTC): a
 * whole minute. -1 if it never is (not for a parsed expression). */
int64_t eu_cron_next(const eu_cron *c, int64_t after_ms);

/* ms since 1970 as "2026-01-01T00:05:00Z" (seconds and no fraction: cron
 * times are whole minutes). */
void eu_cron_iso(int64_t ms, char out[24]);

#endif
