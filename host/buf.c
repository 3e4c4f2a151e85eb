/*
 * buf.c: the growable byte buffer, eu_err and eu_env_int.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "eutaxy.h"

int eu_err(char *err, size_t errlen, int code, const char *fmt, ...) {
  if (err && errlen > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return code;
}

int eu_env_int(const char *name, int64_t least, int64_t most, int64_t *v, char *err, size_t errlen) {
  const char *s = getenv(name);
  char *end;
  long long n;
  if (!s || !*s) return EU_OK;
  errno = 0;
  n = strtoll(s, &end, 10);
  if (errno || *end || n < least || n > most)
    return eu_err(err, errlen, EU_EINVAL, "%s must be a whole number from %" PRId64 " to %" PRId64 ", got \"%.40s\"",
                  name, least, most, s);
  *v = n;
  return EU_OK;
}

void eu_buf_init(eu_buf *b) {
  b->p = NULL;
  b->n = b->cap = 0;
  b->alloc = NULL;
  b->ud = NULL;
}

void eu_buf_init_with(eu_buf *b, void *(*alloc)(void *ud, void *p, size_t old, size_t n), void *ud) {
  eu_buf_init(b);
  b->alloc = alloc;
  b->ud = ud;
}

void eu_buf_free(eu_buf *b) {
  if (b->alloc) {
    if (b->p) b->alloc(b->ud, b->p, b->cap, 0);
  } else {
    free(b->p);
  }
  b->p = NULL;
  b->n = b->cap = 0;
}

void eu_buf_reset(eu_buf *b) {
  b->n = 0;
  if (b->p) b->p[0] = '\0';
}

int eu_buf_reserve(eu_buf *b, size_t extra) {
  size_t need, cap;
  char *p;
  if (extra > SIZE_MAX - b->n - 1) return EU_ENOMEM;
  need = b->n + extra + 1;  /* +1 keeps room for the terminating NUL */
  if (need <= b->cap) return EU_OK;
  cap = b->cap ? b->cap : 64;
  while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
  p = b->alloc ? b->alloc(b->ud, b->p, b->p ? b->cap : 0, cap) : realloc(b->p, cap);
  if (!p) return EU_ENOMEM;
  b->p = p;
  b->cap = cap;
  return EU_OK;
}

int eu_buf_put(eu_buf *b, const void *p, size_t n) {
  if (eu_buf_reserve(b, n) != EU_OK) return EU_ENOMEM;
  if (n) memcpy(b->p + b->n, p, n);
  b->n += n;
  b->p[b->n] = '\0';
  return EU_OK;
}

int eu_buf_putc(eu_buf *b, int c) {
  char ch = (char)c;
  return eu_buf_put(b, &ch, 1);
}

int eu_buf_puts(eu_buf *b, const char *s) {
  return eu_buf_put(b, s, strlen(s));
}

int eu_buf_vprintf(eu_buf *b, const char *fmt, va_list ap) {
  va_list ap2;
  int len;
  va_copy(ap2, ap);
  len = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (len < 0) return EU_EINVAL;
  if (eu_buf_reserve(b, (size_t)len) != EU_OK) return EU_ENOMEM;
  vsnprintf(b->p + b->n, (size_t)len + 1, fmt, ap);
  b->n += (size_t)len;
  return EU_OK;
}

int eu_buf_printf(eu_buf *b, const char *fmt, ...) {
  va_list ap;
  int rc;
  va_start(ap, fmt);
  rc = eu_buf_vprintf(b, fmt, ap);
  va_end(ap);
  return rc;
}

char *eu_varint(char *p, uint64_t v) {
  do {
    unsigned char byte = v & 0x7f;
    v >>= 7;
    *p++ = (char)(byte | (v ? 0x80 : 0));
  } while (v);
  return p;
}

uint64_t eu_zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }

int eu_buf_putu(eu_buf *b, uint64_t v) {
  char tmp[EU_VARINT_MAX];
  return eu_buf_put(b, tmp, (size_t)(eu_varint(tmp, v) - tmp));
}

int eu_buf_puti(eu_buf *b, int64_t v) { return eu_buf_putu(b, eu_zigzag(v)); }

char *eu_buf_take(eu_buf *b, size_t *n) {
  char *p = b->p;
  if (n) *n = b->n;
  eu_buf_init(b);
  return p;
}

void eu_hex64(uint64_t v, char out[16]) {
  static const char digits[] = "0123456789abcdef";
  int i;
  for (i = 15; i >= 0; i--, v >>= 4) out[i] = digits[v & 15];
}

size_t eu_dec64(int64_t v, char out[20]) {
  char tmp[20];
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  size_t n = 0, k = 0;
  do {
    tmp[n++] = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  if (v < 0) out[k++] = '-';
  while (n) out[k++] = tmp[--n];
  return k;
}

int eu_bytes_cmp(const void *a, size_t an, const void *b, size_t bn) {
  int c = memcmp(a, b, an < bn ? an : bn);
  if (c) return c;
  return an < bn ? -1 : an > bn;
}

int eu_span_cmp(const void *a, const void *b) {
  const eu_span *x = a, *y = b;
  return eu_bytes_cmp(x->p, x->n, y->p, y->n);
}
