/*
 * cron.c: parsing cron expressions and finding when one is next due.
 *
 * A parsed expression is bit sets (minutes, hours, days of the month,
 * months, days of the week) and, for the day fields, the L/W/# forms that
 * depend on the month. The next due time is found a day at a time on the
 * proleptic Gregorian calendar (Howard Hinnant's civil_from_days, no libc
 * time functions, so no time zone or locale can creep in), months
 * outside the set skipped whole. The calendar repeats every 400 years,
 * which bounds the search: an expression with no match in that span has
 * none at all.
 */
#include <stdio.h>
#include <string.h>

#include "cron.h"
#include "eutaxy.h"

#define EU_CRON_CYCLE_DAYS 146097   /* 400 Gregorian years */

typedef struct field {
  const char *name;      /* how errors name it */
  int lo, hi;            /* its values */
  const char *const *names;  /* names of lo, lo + 1, ...: JAN, SUN; NULL for none */
  const char *values;    /* how errors say what it takes */
} field;

static const char *const month_names[] = {
  "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"
};
static const char *const day_names[] = { "SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT" };

static const field fields[5] = {
  { "minute", 0, 59, NULL, "0-59" },
  { "hour", 0, 23, NULL, "0-23" },
  { "day-of-month", 1, 31, NULL, "1-31" },
  { "month", 1, 12, month_names, "1-12 or JAN-DEC" },
  { "day-of-week", 1, 7, day_names, "1-7 (1 is Sunday) or SUN-SAT" },
};

enum { F_MINUTE, F_HOUR, F_DOM, F_MONTH, F_DOW };

/* ---- the calendar ------------------------------------------------------ */

static int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d) {
  int64_t era;
  unsigned doe, yoe, doy, mp;
  z += 719468;
  era = floor_div(z, EU_CRON_CYCLE_DAYS);
  doe = (unsigned)(z - era * EU_CRON_CYCLE_DAYS);
  yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

static unsigned days_in_month(int64_t y, unsigned m) {
  static const unsigned char n[13] = { 0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
  if (m == 2 && y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)) return 29;
  return n[m];
}

/* 0 for Sunday: 1970-01-01 was a Thursday. */
static unsigned weekday(int64_t days) {
  return (unsigned)((days % 7 + 7 + 4) % 7);
}

void eu_cron_iso(int64_t ms, char out[24]) {
  int64_t day = floor_div(ms, 86400000), y;
  int64_t rest = ms - day * 86400000;
  unsigned m, d;
  civil_from_days(day, &y, &m, &d);
  snprintf(out, 24, "%04lld-%02u-%02uT%02d:%02d:%02dZ", (long long)y, m, d, (int)(rest / 3600000),
           (int)(rest / 60000 % 60), (int)(rest / 1000 % 60));
}

/* ---- matching a day ------------------------------------------------------ */

/* The weekday day d of a month whose first is first falls on nearest.
 * Saturday moves back a day and Sunday on a day, never out of the month. */
static unsigned nearest_weekday(unsigned d, unsigned first, unsigned last) {
  unsigned w = (first + d - 1) % 7;
  if (w == 6) return d == 1 ? 3 : d - 1;
  if (w == 0) return d == last ? d - 2 : d + 1;
  return d;
}

static int day_of_month_matches(const eu_cron *c, unsigned d, unsigned first, unsigned last) {
  unsigned t;
  switch (c->day_kind) {
  case EU_CRON_SET:
    return (c->days >> d) & 1;
  case EU_CRON_LAST:
    return last > c->day_arg && d == last - c->day_arg;
  case EU_CRON_LAST_WEEKDAY:
    if (last <= c->day_arg) return 0;
    t = last - c->day_arg;
    if (c->day_arg == 0) {  /* LW: back to Friday from a weekend */
      unsigned w = (first + t - 1) % 7;
      t = w == 6 ? t - 1 : w == 0 ? t - 2 : t;
    } else {
      t = nearest_weekday(t, first, last);
    }
    return d == t;
  case EU_CRON_NEAREST_WEEKDAY:
    return c->day_arg <= last && d == nearest_weekday(c->day_arg, first, last);
  default:
    return 1;
  }
}

static int day_of_week_matches(const eu_cron *c, unsigned d, unsigned first, unsigned last) {
  unsigned w = (first + d - 1) % 7;
  switch (c->weekday_kind) {
  case EU_CRON_SET:
    return (c->weekdays >> w) & 1;
  case EU_CRON_LAST_OF:
    return w == c->weekday_arg && d + 7 > last;
  case EU_CRON_NTH:
    return w == c->weekday_arg && (d - 1) / 7 + 1 == c->nth;
  default:
    return 1;
  }
}

/* As standard cron: with both day fields restricted a day matches either. */
static int day_matches(const eu_cron *c, unsigned d, unsigned first, unsigned last) {
  int dom = c->day_kind != EU_CRON_ANY, dow = c->weekday_kind != EU_CRON_ANY;
  if (dom && dow) return day_of_month_matches(c, d, first, last) || day_of_week_matches(c, d, first, last);
  if (dom) return day_of_month_matches(c, d, first, last);
  if (dow) return day_of_week_matches(c, d, first, last);
  return 1;
}

/* The first minute of the day at or after start (minutes since midnight)
 * that the hour and minute fields take, or -1. */
static int first_time(const eu_cron *c, int start) {
  int h;
  for (h = start / 60; h < 24; h++) {
    uint64_t mins = c->minutes;
    int m;
    if (!((c->hours >> h) & 1)) continue;
    if (h == start / 60) mins &= ~((UINT64_C(1) << (start % 60)) - 1);
    for (m = 0; m < 60; m++)
      if ((mins >> m) & 1) return h * 60 + m;
  }
  return -1;
}

int64_t eu_cron_next(const eu_cron *c, int64_t after_ms) {
  int64_t minute = floor_div(after_ms, 60000) + 1;
  int64_t day = floor_div(minute, 1440), end = day + EU_CRON_CYCLE_DAYS + 31, y;
  int start = (int)(minute - day * 1440);
  unsigned m, d, last, first;
  civil_from_days(day, &y, &m, &d);
  while (day < end) {
    last = days_in_month(y, m);
    if ((c->months >> m) & 1) {
      first = weekday(day - (d - 1));
      for (; d <= last; d++, day++, start = 0) {
        int t;
        if (!day_matches(c, d, first, last)) continue;
        if ((t = first_time(c, start)) >= 0) return (day * 1440 + t) * 60000;
      }
    } else {
      day += last - d + 1;
    }
    start = 0;
    d = 1;
    if (++m > 12) {
      m = 1;
      y++;
    }
  }
  return -1;
}

/* ---- parsing ------------------------------------------------------------- */

typedef struct parser {
  const field *f;
  const char *text;  /* the field's text, for errors */
  size_t len;
  char *err;
  size_t errlen;
} parser;

static int bad(parser *p, const char *fmt, const char *arg) {
  char why[160];
  snprintf(why, sizeof why, fmt, arg);
  return eu_err(p->err, p->errlen, EU_EINVAL, "%s field \"%.*s\": %s", p->f->name, (int)p->len, p->text, why);
}

static int upper(int ch) {
  return ch >= 'a' && ch <= 'z' ? ch - 'a' + 'A' : ch;
}

/* A value at *s (digits, or a name of the field): its number, *s past it. */
static int value(parser *p, const char **s, const char *end, int *v) {
  const char *q = *s;
  char what[16];
  if (q < end && *q >= '0' && *q <= '9') {
    int n = 0;
    for (; q < end && *q >= '0' && *q <= '9'; q++)
      if ((n = n * 10 + (*q - '0')) > 9999) n = 9999;
    snprintf(what, sizeof what, "%d", n);
    if (n < p->f->lo || n > p->f->hi) {
      char why[96];
      snprintf(why, sizeof why, "%s is out of range: it takes %s", what, p->f->values);
      return bad(p, "%s", why);
    }
    *v = n;
    *s = q;
    return EU_OK;
  }
  if (p->f->names && end - q >= 3) {
    int i;
    for (i = 0; i <= p->f->hi - p->f->lo; i++) {
      const char *name = p->f->names[i];
      if (upper(q[0]) == name[0] && upper(q[1]) == name[1] && upper(q[2]) == name[2]) {
        *v = p->f->lo + i;
        *s = q + 3;
        return EU_OK;
      }
    }
  }
  if (q == end) return bad(p, "a value is missing: it takes %s", p->f->values);
  if (*q == '?') return bad(p, "%s", "? is Quartz's, not Cloudflare's: use *");
  if (*q == 'L' || *q == 'W' || *q == '#')
    return bad(p, "%s", "L, W and # stand alone in their field, not in a list or a range");
  snprintf(what, sizeof what, "%.*s", (int)(end - q > 8 ? 8 : end - q), q);
  {
    char why[128];
    snprintf(why, sizeof why, "\"%s\" is not a value: it takes %s", what, p->f->values);
    return bad(p, "%s", why);
  }
}

/* A step after '/': from 1 to the span of the field. */
static int step(parser *p, const char **s, const char *end, int *n) {
  const char *q = *s;
  int v = 0, most = p->f->hi - p->f->lo;
  char why[64];
  if (q == end || *q < '0' || *q > '9') return bad(p, "%s", "a step needs a number after /");
  for (; q < end && *q >= '0' && *q <= '9'; q++)
    if ((v = v * 10 + (*q - '0')) > 9999) v = 9999;
  if (v < 1 || v > most) {
    snprintf(why, sizeof why, "a step must be from 1 to %d", most);
    return bad(p, "%s", why);
  }
  *n = v;
  *s = q;
  return EU_OK;
}

/* Adds from..to by every step-th value, wrapping past the top when from > to. */
static void add_range(const field *f, uint64_t *bits, int from, int to, int every) {
  int span = f->hi - f->lo + 1, count = (to - from + span) % span + 1, k;
  for (k = 0; k < count; k += every) *bits |= UINT64_C(1) << (f->lo + (from - f->lo + k) % span);
}

/* One item of a list: *, *\/n, a, a-b, a/n or a-b/n. */
static int item(parser *p, const char *s, const char *end, uint64_t *bits) {
  int from, to, every = 1, rc;
  if (s == end) return bad(p, "%s", "a list has an empty item");
  if (*s == '*') {
    s++;
    if (s == end) return bad(p, "%s", "* cannot be part of a list");
    if (*s != '/') return bad(p, "%s", "* can only be followed by a step, as in */5");
    s++;
    if ((rc = step(p, &s, end, &every)) != EU_OK) return rc;
    if (s != end) return bad(p, "%s", "unexpected text after the step");
    add_range(p->f, bits, p->f->lo, p->f->hi, every);
    return EU_OK;
  }
  if ((rc = value(p, &s, end, &from)) != EU_OK) return rc;
  to = from;
  if (s < end && *s == '-') {
    s++;
    if ((rc = value(p, &s, end, &to)) != EU_OK) return rc;
    if (s < end && *s == '/') {
      s++;
      if ((rc = step(p, &s, end, &every)) != EU_OK) return rc;
    }
  } else if (s < end && *s == '/') {
    s++;
    to = p->f->hi;
    if ((rc = step(p, &s, end, &every)) != EU_OK) return rc;
  }
  if (s != end) {
    if (*s == 'L' || *s == 'W' || *s == '#')
      return bad(p, "%s", "L, W and # stand alone in their field, not in a list or a range");
    return bad(p, "%s", "unexpected text: a list is values, ranges a-b and steps /n separated by commas");
  }
  add_range(p->f, bits, from, to, every);
  return EU_OK;
}

/* A field of values, ranges and steps: `*` gives *any, anything else the bits. */
static int set(parser *p, uint64_t *bits, int *any) {
  const char *s = p->text, *end = p->text + p->len;
  *bits = 0;
  *any = p->len == 1 && *s == '*';
  if (*any) {
    add_range(p->f, bits, p->f->lo, p->f->hi, 1);
    return EU_OK;
  }
  while (s <= end) {
    const char *comma = memchr(s, ',', (size_t)(end - s));
    int rc;
    if (!comma) comma = end;
    if ((rc = item(p, s, comma, bits)) != EU_OK) return rc;
    s = comma + 1;
  }
  return EU_OK;
}

static int small_number(const char *s, const char *end, int *v) {
  int n = 0;
  if (s == end) return 0;
  for (; s < end; s++) {
    if (*s < '0' || *s > '9') return 0;
    if ((n = n * 10 + (*s - '0')) > 9999) n = 9999;
  }
  *v = n;
  return 1;
}

static int day_of_month(parser *p, eu_cron *c) {
  const char *s = p->text, *end = p->text + p->len;
  uint64_t bits;
  int any, n, rc;
  if (*s == 'L') {
    c->day_kind = EU_CRON_LAST;
    s++;
    if (s < end && *s == 'W') {
      c->day_kind = EU_CRON_LAST_WEEKDAY;
      s++;
    } else if (s < end && *s == '-') {
      const char *w = end[-1] == 'W' ? end - 1 : end;
      if (!small_number(s + 1, w, &n) || n < 1 || n > 30)
        return bad(p, "%s", "L-n takes n from 1 to 30 (days before the last), as in L-3 or L-3W");
      c->day_arg = (unsigned char)n;
      if (w != end) c->day_kind = EU_CRON_LAST_WEEKDAY;
      s = end;
    }
    if (s != end) return bad(p, "%s", "after L only W or -n may follow: L, LW, L-3, L-3W");
    return EU_OK;
  }
  if (end[-1] == 'W' && small_number(s, end - 1, &n)) {
    if (n < 1 || n > 31) return bad(p, "%s", "nW takes a day from 1 to 31");
    c->day_kind = EU_CRON_NEAREST_WEEKDAY;
    c->day_arg = (unsigned char)n;
    return EU_OK;
  }
  if ((rc = set(p, &bits, &any)) != EU_OK) return rc;
  c->day_kind = any ? EU_CRON_ANY : EU_CRON_SET;
  c->days = (uint32_t)bits;
  return EU_OK;
}

static int day_of_week(parser *p, eu_cron *c) {
  const char *s = p->text, *end = p->text + p->len, *mark;
  uint64_t bits;
  int any, d, n, rc;
  if (p->len == 1 && *s == 'L') {  /* the last day of the week */
    c->weekday_kind = EU_CRON_SET;
    c->weekdays = 1u << 6;
    return EU_OK;
  }
  if ((mark = memchr(s, '#', p->len)) != NULL || end[-1] == 'L') {
    const char *q = s;
    if ((rc = value(p, &q, mark ? mark : end - 1, &d)) != EU_OK) return rc;
    if (q != (mark ? mark : end - 1))
      return bad(p, "%s", mark ? "d#n takes one day before the #, as in MON#2"
                                : "dL takes one day before the L, as in FRIL or 6L");
    c->weekday_arg = (unsigned char)(d - 1);
    if (!mark) {
      c->weekday_kind = EU_CRON_LAST_OF;
      return EU_OK;
    }
    if (!small_number(mark + 1, end, &n) || n < 1 || n > 5)
      return bad(p, "%s", "d#n takes n from 1 to 5, as in MON#2");
    c->weekday_kind = EU_CRON_NTH;
    c->nth = (unsigned char)n;
    return EU_OK;
  }
  if ((rc = set(p, &bits, &any)) != EU_OK) return rc;
  c->weekday_kind = any ? EU_CRON_ANY : EU_CRON_SET;
  c->weekdays = (uint8_t)(bits >> 1);
  return EU_OK;
}

static int is_space(int ch) {
  return ch == ' ' || ch == '\t';
}

int eu_cron_parse(eu_cron *c, const char *expr, char *err, size_t errlen) {
  const char *s = expr, *start[6];
  size_t len[6];
  int n = 0, i, rc;
  memset(c, 0, sizeof *c);
  if (!*s) return eu_err(err, errlen, EU_EINVAL, "the expression is empty");
  if (is_space(*s) || is_space(s[strlen(s) - 1]))
    return eu_err(err, errlen, EU_EINVAL, "the expression starts or ends with a space");
  while (*s) {
    const char *q = s;
    while (*q && !is_space(*q)) q++;
    if (n < 6) {
      start[n] = s;
      len[n] = (size_t)(q - s);
    }
    n++;
    while (is_space(*q)) q++;
    s = q;
  }
  if (n != 5)
    return eu_err(err, errlen, EU_EINVAL,
                  "expected 5 fields (minute hour day-of-month month day-of-week) separated by spaces, got %d", n);
  for (i = 0; i < 5; i++) {
    parser p;
    uint64_t bits;
    int any;
    p.f = &fields[i];
    p.text = start[i];
    p.len = len[i];
    p.err = err;
    p.errlen = errlen;
    if (memchr(p.text, '\n', p.len) || memchr(p.text, '\r', p.len))
      return bad(&p, "%s", "a line break is not part of a cron expression");
    switch (i) {
    case F_DOM:
      rc = day_of_month(&p, c);
      break;
    case F_DOW:
      rc = day_of_week(&p, c);
      break;
    default:
      rc = set(&p, &bits, &any);
      if (i == F_MINUTE) c->minutes = bits;
      else if (i == F_HOUR) c->hours = (uint32_t)bits;
      else c->months = (uint16_t)bits;
      break;
    }
    if (rc != EU_OK) return rc;
  }
  if (eu_cron_next(c, 0) < 0)
    return eu_err(err, errlen, EU_EINVAL, "it is never due: no month in it has the days it names");
  return EU_OK;
}
