/*
 * utf8.c: strict UTF-8 validation (utf8.h).
 *
 * RFC 3629's table of well-formed sequences: the lead byte fixes the length
 * and the range the second byte may take (narrower after E0, ED, F0 and F4,
 * which is what excludes overlong forms, surrogates and code points past
 * U+10FFFF); every later byte is 80..BF.
 */
#include "utf8.h"

int eu_utf8_prefix(const char *s, size_t n, size_t *whole) {
  const unsigned char *p = (const unsigned char *)s;
  size_t i = 0;
  while (i < n) {
    unsigned c = p[i];
    unsigned lo = 0x80, hi = 0xbf;
    size_t len, k;
    if (c < 0x80) {
      i++;
      continue;
    }
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    } else {
      return 0;
    }
    for (k = 1; k < len && i + k < n; k++) {
      unsigned b = p[i + k];
      if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xbf)) return 0;
    }
    if (k < len) break;  /* the bytes so far begin a valid sequence */
    i += len;
  }
  *whole = i;
  return 1;
}

int eu_utf8_valid(const char *p, size_t n) {
  size_t whole;
  return eu_utf8_prefix(p, n, &whole) && whole == n;
}
