/*
 * fuzz_ws.c: the WebSocket layer of `eutaxy serve` (host/ws.c).
 *
 * The first bytes pick the setup (the message limit, whether the message
 * callback echoes, closes or fails, whether the server closes first) and a
 * seed for how to cut the rest. The rest is what a client sends: as it is,
 * or (mode bit 0x10) read as frames that this target masks and frames
 * itself, so the fuzzer reaches past the header checks into messages,
 * fragments and the close handshake.
 *
 * The bytes are fed twice: whole, and in pieces of 1 to 64 bytes. The two
 * runs must agree byte for byte, on what the callbacks saw, on the bytes
 * written and on how the connection ended: how bytes happen to arrive must
 * change nothing. Each run is checked against ws.h's promises: text is
 * valid UTF-8, no message is over the limit, every frame written is one a
 * client accepts from a server, nothing follows our close frame, a failure
 * says why with one of its four codes, and a done connection takes no more.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "eutaxy.h"
#include "fuzz.h"
#include "utf8.h"
#include "ws.h"

#define CHECK(cond, ...)                                    \
  do {                                                      \
    if (!(cond)) {                                          \
      fprintf(stderr, "fuzz_ws: %s: ", #cond);              \
      fprintf(stderr, __VA_ARGS__);                         \
      fprintf(stderr, "\n");                                \
      abort();                                              \
    }                                                       \
  } while (0)

typedef struct run {
  eu_ws_conn *c;
  size_t max;
  int echo, close_on, fail_on;
  int messages, closes;
  eu_buf log;   /* what the callbacks saw, to compare two runs */
} run;

static int on_message(void *ud, int binary, const char *p, size_t n) {
  run *r = ud;
  CHECK(n <= r->max, "a message of %zu bytes past the limit of %zu", n, r->max);
  CHECK(p[n] == '\0', "a message not NUL-terminated");
  CHECK(binary || eu_utf8_valid(p, n), "a text message that is not UTF-8");
  CHECK(r->closes == 0, "a message after the peer's close");
  r->messages++;
  eu_buf_printf(&r->log, "m%d %zu:", binary, n);
  eu_buf_put(&r->log, p, n);
  if (r->echo) eu_ws_send(r->c, binary, p, n, NULL, 0);
  if (r->close_on == r->messages) eu_ws_close(r->c, 4000, "enough", 6, NULL, 0);
  return r->fail_on == r->messages ? EU_EINVAL : 0;
}

static void on_closed(void *ud, int code, const char *reason, size_t n) {
  run *r = ud;
  CHECK(r->closes == 0, "a second close");
  CHECK(code == EU_WS_NO_CODE || (code >= 1000 && code <= 4999), "close code %d", code);
  CHECK(n <= EU_WS_MAX_REASON && eu_utf8_valid(reason, n), "a bad close reason");
  r->closes++;
  eu_buf_printf(&r->log, "c%d %zu:", code, n);
  eu_buf_put(&r->log, reason, n);
}

/* Every frame of out is one a client accepts from a server, and none
 * follows a close frame. */
static void check_output(const eu_buf *out) {
  const unsigned char *p = (const unsigned char *)out->p;
  size_t at = 0;
  int closed = 0;
  while (at < out->n) {
    uint64_t len;
    size_t hdr = 2, i;
    int op;
    CHECK(!closed, "a frame after our close frame");
    CHECK(out->n - at >= 2, "a cut frame header");
    CHECK((p[at] & 0xf0) == 0x80 && !(p[at + 1] & 0x80), "a fragmented, reserved or masked frame");
    op = p[at] & 0x0f;
    CHECK(op == 1 || op == 2 || op == 8 || op == 9 || op == 10, "opcode %d written", op);
    len = p[at + 1] & 0x7f;
    if (len == 126) {
      CHECK(out->n - at >= 4, "a cut frame header");
      len = (uint64_t)p[at + 2] << 8 | p[at + 3];
      hdr = 4;
    } else if (len == 127) {
      CHECK(out->n - at >= 10, "a cut frame header");
      for (len = 0, i = 0; i < 8; i++) len = len << 8 | p[at + 2 + i];
      hdr = 10;
    }
    CHECK(len <= out->n - at - hdr, "a frame longer than the output");
    if (op >= 8) CHECK(len <= 125, "a control frame of %llu bytes", (unsigned long long)len);
    if (op == 8) {
      CHECK(len != 1, "a close frame of 1 byte");
      closed = 1;
    }
    if (op == 1) CHECK(eu_utf8_valid(out->p + at + hdr, (size_t)len), "text written that is not UTF-8");
    at += hdr + (size_t)len;
  }
}

typedef struct outcome {
  int rc, status, done;
} outcome;

static outcome feed(run *r, const char *p, size_t len, uint64_t cuts, int close_first) {
  static const eu_ws_callbacks cb = { on_message, on_closed };
  outcome o;
  if (eu_ws_conn_new(&r->c, r->max, &cb, r) != EU_OK) abort();
  if (close_first) eu_ws_close(r->c, 1001, "going", 5, NULL, 0);
  o.rc = 0;
  while (len > 0) {
    size_t n = cuts ? 1 + (size_t)(cuts % 64) : len;
    if (n > len) n = len;
    cuts = cuts ? cuts / 3 + (cuts % 5) * 0x9e3779b97f4a7c15ull : 0;
    o.rc = eu_ws_feed(r->c, p, n);
    p += n;
    len -= n;
    if (o.rc != 0) break;
  }
  o.status = eu_ws_conn_error(r->c, NULL);
  o.done = eu_ws_done(r->c);
  CHECK((o.rc != 0) == (o.status != 0), "feed %d with status %d", o.rc, o.status);
  if (o.rc) CHECK(o.status == 1002 || o.status == 1007 || o.status == 1009 || o.status == 1011,
                  "failed with %d", o.status);
  if (o.rc || r->closes) CHECK(o.done, "a failed or closed connection not done");
  check_output(eu_ws_output(r->c));
  if (o.done) {
    size_t n = eu_ws_output(r->c)->n;
    CHECK(eu_ws_feed(r->c, "\x81\x81\0\0\0\0x", 7) == o.rc, "a done connection changed its answer");
    CHECK(eu_ws_output(r->c)->n == n, "a done connection wrote more");
  }
  return o;
}

/* Mode 0x10: the input as frames, masked here. Each is a first byte (FIN,
 * RSV, opcode as sent), a length byte (0..125 as is; 126 and 127 take the
 * next two bytes as a longer length, in the shortest form), a byte whose
 * low bit sends the frame unmasked, and the payload. */
static void build_frames(fz *f, eu_buf *b) {
  while (f->n > 0) {
    unsigned b0 = fz_u8(f), l = fz_u8(f), flags = fz_u8(f), i;
    unsigned char key[4];
    size_t len = l & 0x7f, got;
    const char *p;
    if (len >= 126) len = 126 + (fz_u8(f) | fz_u8(f) << 8);
    p = fz_bytes(f, len, &got);
    eu_buf_putc(b, (int)b0);
    if (got < 126) {
      eu_buf_putc(b, (flags & 1 ? 0 : 0x80) | (int)got);
    } else {
      eu_buf_putc(b, (flags & 1 ? 0 : 0x80) | 126);
      eu_buf_putc(b, (int)(got >> 8));
      eu_buf_putc(b, (int)(got & 0xff));
    }
    for (i = 0; i < 4; i++) key[i] = (unsigned char)(flags * 7 + i * 61);
    if (!(flags & 1)) eu_buf_put(b, key, 4);
    for (i = 0; i < got; i++) eu_buf_putc(b, flags & 1 ? p[i] : p[i] ^ key[i % 4]);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz f;
  run a, b;
  outcome oa, ob;
  eu_buf in;
  uint64_t cuts;
  unsigned mode, limit;
  int close_first;
  f.p = data;
  f.n = size;
  mode = fz_u8(&f);
  limit = fz_u8(&f);
  memset(&a, 0, sizeof a);
  a.max = mode & 1 ? 1 + limit * 4 : EU_WS_MAX_MESSAGE;  /* small, so 1009 can be reached */
  a.echo = (mode >> 1) & 1;
  a.close_on = (mode >> 2) & 1 ? 1 + (limit & 3) : 0;
  a.fail_on = (mode >> 3) & 1 ? 1 + (limit >> 6) : 0;
  close_first = (mode >> 5) & 1;
  cuts = fz_u64(&f) | 1;
  eu_buf_init(&in);
  if (mode & 0x10) {
    build_frames(&f, &in);
  } else {
    size_t n;
    const char *p = fz_bytes(&f, f.n, &n);
    eu_buf_put(&in, p, n);
  }
  b = a;
  eu_buf_init(&a.log);
  eu_buf_init(&b.log);
  oa = feed(&a, in.p ? in.p : "", in.n, 0, close_first);
  ob = feed(&b, in.p ? in.p : "", in.n, cuts, close_first);
  CHECK(oa.rc == ob.rc && oa.status == ob.status && oa.done == ob.done,
        "whole: rc %d status %d done %d, in pieces: rc %d status %d done %d", oa.rc, oa.status, oa.done,
        ob.rc, ob.status, ob.done);
  CHECK(a.log.n == b.log.n && (a.log.n == 0 || memcmp(a.log.p, b.log.p, a.log.n) == 0),
        "the callbacks saw different things whole and in pieces");
  {
    const eu_buf *x = eu_ws_output(a.c), *y = eu_ws_output(b.c);
    CHECK(x->n == y->n && (x->n == 0 || memcmp(x->p, y->p, x->n) == 0),
          "different bytes written whole and in pieces");
  }
  eu_ws_conn_free(a.c);
  eu_ws_conn_free(b.c);
  eu_buf_free(&a.log);
  eu_buf_free(&b.log);
  eu_buf_free(&in);
  return 0;
}
