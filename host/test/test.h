/*
 * test.h: the assertions every C test uses. A failed one names the file
 * and line and ends the test program with a non-zero status.
 */
#ifndef EUTAXY_TEST_H
#define EUTAXY_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ASSERT(c) do { \
    if (!(c)) { \
      fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__, #c); \
      abort(); \
    } \
  } while (0)
#define ASSERT_OK(expr) ASSERT((expr) == EU_OK)
#define ASSERT_EQ(a, b) ASSERT((a) == (b))
#define ASSERT_STR_EQ(a, b) do { \
    const char *a_ = (a), *b_ = (b); \
    if (!a_ || strcmp(a_, b_) != 0) { \
      fprintf(stderr, "%s:%d: expected \"%s\", got \"%s\"\n", __FILE__, __LINE__, b_, a_ ? a_ : "(null)"); \
      abort(); \
    } \
  } while (0)
#define ASSERT_CONTAINS(s, sub) do { \
    const char *s_ = (s), *sub_ = (sub); \
    if (!s_ || !strstr(s_, sub_)) { \
      fprintf(stderr, "%s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, __LINE__, s_ ? s_ : "(null)", sub_); \
      abort(); \
    } \
  } while (0)

/* A table of tests, run in order by test_main. */
typedef struct eu_test { const char *name; void (*fn)(void); } eu_test;

static inline int test_main(const eu_test *tests, size_t n) {
  size_t i;
  for (i = 0; i < n; i++) {
    tests[i].fn();
    printf("ok %zu - %s\n", i + 1, tests[i].name);
  }
  printf("%zu passed, 0 failed\n", n);
  return 0;
}

#endif
