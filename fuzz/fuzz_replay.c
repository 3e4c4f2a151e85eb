/*
 * fuzz_replay.c: `eutaxy check --replay` schedule strings (host/explore.c).
 *
 * The input, up to its first NUL, is the schedule string; the bytes after
 * it are the scenario it is replayed against. A string the parser accepts
 * must format back to a canonical string that parses to the same schedule
 * and formats to itself. Then eu_search_run replays it over a fake
 * scenario whose decisions have the arities the remaining bytes give: the
 * replay must end with a verdict, or with the error that the schedule does
 * not fit, never walk outside the recorded decisions.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eutaxy.h"
#include "explore.h"
#include "fuzz.h"

#define CHECK(cond, ...)                                    \
  do {                                                      \
    if (!(cond)) {                                          \
      fprintf(stderr, "fuzz_replay: %s: ", #cond);          \
      fprintf(stderr, __VA_ARGS__);                         \
      fprintf(stderr, "\n");                                \
      abort();                                              \
    }                                                       \
  } while (0)

typedef struct scenario {
  const uint8_t *arity;  /* one byte per decision; the run ends with them */
  size_t n;
  int violate;
} scenario;

static int run(void *ud, eu_chooser *ch, uint64_t events, int fault_cap, int *faults, char *err,
               size_t errlen) {
  scenario *s = ud;
  size_t i;
  (void)events;
  (void)err;
  (void)errlen;
  eu_chooser_begin(ch, NULL);
  *faults = 0;
  for (i = 0; i < s->n; i++) {
    int n = 1 + s->arity[i] % 70, pick = eu_chooser_choose(ch, 0, n, "decision");
    CHECK(pick >= 0 && pick < n && pick < EU_MAX_ARITY, "chose %d of %d", pick, n);
    if (pick > 0 && *faults < fault_cap) ++*faults;
  }
  return s->violate;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *nul = memchr(data, 0, size);
  size_t slen = nul ? (size_t)(nul - data) : size;
  char *s = malloc(slen + 1), *canon, *again, err[EU_ERRLEN];
  size_t clen = 3 * slen + 64;
  int cap, cap2, rc, i;
  uint64_t events, events2;
  eu_choices ch, ch2;
  eu_search search;
  scenario sc;
  if (!s) return 0;
  memcpy(s, data, slen);
  s[slen] = '\0';
  memset(&ch, 0, sizeof ch);
  memset(&ch2, 0, sizeof ch2);
  rc = eu_schedule_parse(s, &cap, &events, &ch, err, sizeof err);
  if (rc != EU_OK) {
    CHECK(rc == EU_ECORRUPT, "parse failed with %d: %s", rc, err);
    CHECK(strstr(err, "schedule") != NULL, "unclear message: %s", err);
    eu_choices_free(&ch);
    free(s);
    return 0;
  }
  CHECK(cap >= 0 && cap <= 1000, "fault cap %d", cap);
  for (i = 0; i < ch.len; i++) CHECK(ch.c[i] < EU_MAX_ARITY, "decision %d is %d", i, ch.c[i]);
  canon = malloc(clen);
  again = malloc(clen);
  if (!canon || !again) abort();
  CHECK(eu_schedule_format(canon, clen, cap, events, &ch) == EU_OK, "a parsed schedule does not format");
  rc = eu_schedule_parse(canon, &cap2, &events2, &ch2, err, sizeof err);
  CHECK(rc == EU_OK, "the canonical form \"%s\" does not parse: %s", canon, err);
  CHECK(cap2 == cap && events2 == events && ch2.len == ch.len &&
        (ch.len == 0 || memcmp(ch.c, ch2.c, (size_t)ch.len) == 0),
        "\"%s\" and its canonical form \"%s\" differ", s, canon);
  CHECK(eu_schedule_format(again, clen, cap2, events2, &ch2) == EU_OK && strcmp(canon, again) == 0,
        "the canonical form is not stable: \"%s\", then \"%s\"", canon, again);
  /* a buffer too small: refused, and still a C string */
  if (strlen(canon) > 1) {
    size_t small = strlen(canon) / 2 + 1;
    CHECK(eu_schedule_format(again, small, cap, events, &ch) == EU_EINVAL && strlen(again) < small,
          "a format past its buffer");
  }

  sc.arity = nul ? nul + 1 : (const uint8_t *)"";
  sc.n = nul ? size - slen - 1 : 0;
  sc.violate = sc.n > 0 && sc.arity[0] & 1;
  eu_search_init(&search);
  search.mode = EU_MODE_REPLAY;
  search.replay = s;
  search.events = sc.n > 1 ? ~(uint64_t)0 >> (sc.arity[1] % 64) : ~(uint64_t)0;
  search.max_faults = 1;
  rc = eu_search_run(&search, run, &sc, err, sizeof err);
  if (rc == EU_OK) {
    CHECK(search.verdict == (sc.violate ? EU_VIOLATED : EU_BOUNDED), "verdict %d", search.verdict);
    CHECK(search.runs == 1, "a replay of %ld runs", search.runs);
    CHECK((size_t)ch.len == sc.n, "a replay of %d decisions fit a run of %zu", ch.len, sc.n);
    CHECK(strncmp(search.schedule, s, sizeof search.schedule - 1) == 0, "the replay reports another schedule");
  } else {
    CHECK(rc == EU_EINVAL && strstr(err, "schedule") != NULL, "replay failed with %d: %s", rc, err);
  }
  eu_choices_free(&ch);
  eu_choices_free(&ch2);
  free(canon);
  free(again);
  free(s);
  return 0;
}
