/*
 * buf.h: a growable byte buffer.
 *
 * Owns nothing but its bytes. Used for serialized values, traces and
 * messages. Every append returns 0 or EU_ENOMEM; after a failed append the
 * buffer is unchanged and still valid.
 */
#ifndef EUTAXY_BUF_H
#define EUTAXY_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

typedef struct eu_buf {
  char *p;     /* the bytes; NUL-terminated whenever n < cap, so text can be read as a C string */
  size_t n;    /* bytes used */
  size_t cap;  /* bytes allocated */
  /* Where the bytes come from, as lua_Alloc: NULL for malloc. A buffer of
   * an isolate's takes its bytes from the isolate's heap, so that an image
   * of the heap holds it too (arena.h). */
  void *(*alloc)(void *ud, void *p, size_t old, size_t n);
  void *ud;
} eu_buf;

void eu_buf_init(eu_buf *b);
/* A buffer whose bytes come from alloc (eu_buf_take is not for it). */
void eu_buf_init_with(eu_buf *b, void *(*alloc)(void *ud, void *p, size_t old, size_t n), void *ud);
void eu_buf_free(eu_buf *b);
void eu_buf_reset(eu_buf *b);                 /* n = 0, keeps the allocation */
int eu_buf_reserve(eu_buf *b, size_t extra);  /* room for extra more bytes (and a NUL) */
int eu_buf_put(eu_buf *b, const void *p, size_t n);
int eu_buf_putc(eu_buf *b, int c);
int eu_buf_puts(eu_buf *b, const char *s);
int eu_buf_printf(eu_buf *b, const char *fmt, ...)
#if defined(__GNUC__)
  __attribute__((format(printf, 2, 3)))
#endif
  ;
int eu_buf_vprintf(eu_buf *b, const char *fmt, va_list ap);

/* Bytes against bytes as memcmp, the shorter first where one begins the
 * other: <0, 0 or >0 (SQLite's BINARY order, and Lua's in the C locale). */
int eu_bytes_cmp(const void *a, size_t an, const void *b, size_t bn);

/* Bytes another owns (a Lua string, say), and qsort's comparator of two
 * spans by eu_bytes_cmp. */
typedef struct eu_span {
  const char *p;
  size_t n;
} eu_span;
int eu_span_cmp(const void *a, const void *b);
/* Digits as printf's "%016" PRIx64 and "%lld" write them, without its
 * parsing of a format: eu_hex64 writes 16 lowercase hex digits (no NUL),
 * eu_dec64 up to 20 characters and returns how many. */
void eu_hex64(uint64_t v, char out[16]);
size_t eu_dec64(int64_t v, char out[20]);
/* Unsigned LEB128 and zigzag signed varints, as the value encoding uses them.
 * eu_varint writes v's bytes at p, which has room for EU_VARINT_MAX, and
 * returns their end; eu_zigzag is a signed value's unsigned form. */
#define EU_VARINT_MAX 10
char *eu_varint(char *p, uint64_t v);
uint64_t eu_zigzag(int64_t v);
int eu_buf_putu(eu_buf *b, uint64_t v);
int eu_buf_puti(eu_buf *b, int64_t v);
/* Hands the bytes over: *n gets the length, the buffer becomes empty. */
char *eu_buf_take(eu_buf *b, size_t *n);

#endif
