/*
 * test_ws.c: the WebSocket layer (ws.c) fed bytes directly: no sockets, no
 * clock. The client's frames are built here by hand, masked as a browser
 * masks them, and the server's frames are decoded here by hand, so neither
 * side of a test goes through wslay.
 *
 * A session renders as one line of text: what the callbacks saw, the
 * frames the layer wrote, how the last feed ended and whether the
 * connection is done. Each session is fed whole, cut in two at every byte
 * and one byte at a time, and must render the same every way.
 *
 * Also SHA-1 (sha1.c) against FIPS 180-4's examples and UTF-8 (utf8.c)
 * against RFC 3629's table, which the handshake and the text checks use.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "eutaxy.h"
#include "http.h"
#include "sha1.h"
#include "test.h"
#include "utf8.h"
#include "ws.h"

enum { CONT = 0x0, TEXT = 0x1, BINARY = 0x2, CLOSE = 0x8, PING = 0x9, PONG = 0xa };

/* Bytes as printable text: ASCII as it is, anything else as \xHH. */
static void put_escaped(eu_buf *b, const char *p, size_t n) {
  size_t i;
  for (i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)p[i];
    if (ch >= 0x20 && ch < 0x7f && ch != '\\') ASSERT_OK(eu_buf_putc(b, ch));
    else ASSERT_OK(eu_buf_printf(b, "\\x%02x", ch));
  }
}

/* Client frames */

static unsigned mask_seed;

/* Appends a client frame: the length in its shortest form, masked with a
 * key that changes from frame to frame (masked 0: sent in the clear). */
static void frame_rsv(eu_buf *b, int fin, int rsv, int op, int masked, const char *p, size_t n) {
  unsigned char key[4];
  size_t i;
  ASSERT_OK(eu_buf_putc(b, (fin ? 0x80 : 0) | rsv << 4 | op));
  if (n < 126) {
    ASSERT_OK(eu_buf_putc(b, (masked ? 0x80 : 0) | (int)n));
  } else if (n < 65536) {
    ASSERT_OK(eu_buf_putc(b, (masked ? 0x80 : 0) | 126));
    ASSERT_OK(eu_buf_putc(b, (int)(n >> 8)));
    ASSERT_OK(eu_buf_putc(b, (int)(n & 0xff)));
  } else {
    ASSERT_OK(eu_buf_putc(b, (masked ? 0x80 : 0) | 127));
    for (i = 0; i < 8; i++) ASSERT_OK(eu_buf_putc(b, (int)(((uint64_t)n >> (56 - 8 * i)) & 0xff)));
  }
  for (i = 0; i < 4; i++) key[i] = (unsigned char)(0x5a + 37 * (mask_seed + i));
  mask_seed++;
  if (masked) ASSERT_OK(eu_buf_put(b, key, 4));
  for (i = 0; i < n; i++) ASSERT_OK(eu_buf_putc(b, masked ? p[i] ^ key[i % 4] : p[i]));
}

static void frame(eu_buf *b, int fin, int op, const char *p, size_t n) {
  frame_rsv(b, fin, 0, op, 1, p, n);
}

static void frame_s(eu_buf *b, int fin, int op, const char *s) {
  frame(b, fin, op, s, strlen(s));
}

/* A close frame with a code and a reason. */
static void close_frame(eu_buf *b, int code, const char *reason, size_t n) {
  char p[256];
  p[0] = (char)(code >> 8);
  p[1] = (char)(code & 0xff);
  memcpy(p + 2, reason, n);
  frame(b, 1, CLOSE, p, 2 + n);
}

/* Server frames */

/* Renders the server's frames, checking each is one a client accepts from a
 * server: unmasked, not fragmented, no reserved bits, the length in its
 * shortest form, a control frame within 125 bytes. */
static void render_output(eu_buf *r, const eu_buf *out) {
  const unsigned char *p = (const unsigned char *)out->p;
  size_t at = 0, n = out->n;
  while (at < n) {
    int op;
    uint64_t len;
    size_t hdr = 2, i;
    ASSERT(n - at >= 2);
    ASSERT_EQ(p[at] & 0xf0, 0x80);  /* FIN, no RSV */
    ASSERT_EQ(p[at + 1] & 0x80, 0);  /* a server does not mask */
    op = p[at] & 0x0f;
    len = p[at + 1] & 0x7f;
    if (len == 126) {
      ASSERT(n - at >= 4);
      len = (uint64_t)p[at + 2] << 8 | p[at + 3];
      ASSERT(len >= 126);
      hdr = 4;
    } else if (len == 127) {
      ASSERT(n - at >= 10);
      len = 0;
      for (i = 0; i < 8; i++) len = len << 8 | p[at + 2 + i];
      ASSERT(len >= 65536 && len < (1ull << 63));
      hdr = 10;
    }
    ASSERT(n - at - hdr >= len);
    at += hdr;
    switch (op) {
      case TEXT: ASSERT_OK(eu_buf_puts(r, "text(")); break;
      case BINARY: ASSERT_OK(eu_buf_puts(r, "binary(")); break;
      case PING: ASSERT_OK(eu_buf_puts(r, "ping(")); break;
      case PONG: ASSERT_OK(eu_buf_puts(r, "pong(")); break;
      case CLOSE: ASSERT_OK(eu_buf_puts(r, "close(")); break;
      default: ASSERT(!"an opcode a server never sends");
    }
    if (op >= CLOSE) ASSERT(len <= 125);
    if (op == CLOSE && len > 0) {
      ASSERT(len >= 2);
      ASSERT_OK(eu_buf_printf(r, "%d", p[at] << 8 | p[at + 1]));
      if (len > 2) ASSERT_OK(eu_buf_putc(r, ' '));
      put_escaped(r, out->p + at + 2, (size_t)len - 2);
    } else if (len > 64) {
      ASSERT_OK(eu_buf_printf(r, "%llu bytes", (unsigned long long)len));
    } else {
      put_escaped(r, out->p + at, (size_t)len);
    }
    ASSERT_OK(eu_buf_puts(r, ") "));
    at += (size_t)len;
  }
}

/* Sessions */

typedef struct rec {
  eu_ws_conn *c;
  eu_buf log;
  int echo;          /* the message callback sends each message back */
  int close_on;      /* it calls eu_ws_close(1000, "bye") on this message (1-based) */
  int fail_on;       /* it fails on this message */
  int messages;
} rec;

static int on_message(void *ud, int binary, const char *p, size_t n) {
  rec *r = ud;
  ASSERT_EQ(p[n], '\0');
  r->messages++;
  ASSERT_OK(eu_buf_puts(&r->log, binary ? "binary[" : "text["));
  if (n > 64) ASSERT_OK(eu_buf_printf(&r->log, "%zu bytes", n));
  else put_escaped(&r->log, p, n);
  ASSERT_OK(eu_buf_puts(&r->log, "] "));
  if (r->echo) {
    int rc = eu_ws_send(r->c, binary, p, n, NULL, 0);
    ASSERT(rc == EU_OK || rc == EU_EINVAL);  /* refused once our close is out */
  }
  if (r->close_on == r->messages) ASSERT_OK(eu_ws_close(r->c, 1000, "bye", 3, NULL, 0));
  if (r->fail_on == r->messages) return EU_EINVAL;
  return 0;
}

static void on_closed(void *ud, int code, const char *reason, size_t n) {
  rec *r = ud;
  ASSERT_EQ(reason[n], '\0');
  ASSERT_OK(eu_buf_printf(&r->log, "closed[%d", code));
  if (n) ASSERT_OK(eu_buf_putc(&r->log, ' '));
  put_escaped(&r->log, reason, n);
  ASSERT_OK(eu_buf_puts(&r->log, "] "));
}

static const eu_ws_callbacks callbacks = { on_message, on_closed };

/* How a session is set up: its message limit, its callback's behaviour,
 * and whether the server closes first. */
typedef struct setup {
  size_t max;
  int echo, close_on, fail_on;
  int close_first;
} setup;

static void rec_open(rec *r, const setup *s) {
  memset(r, 0, sizeof *r);
  eu_buf_init(&r->log);
  ASSERT_OK(eu_ws_conn_new(&r->c, s ? s->max : 0, &callbacks, r));
  if (s) {
    r->echo = s->echo;
    r->close_on = s->close_on;
    r->fail_on = s->fail_on;
    if (s->close_first) ASSERT_OK(eu_ws_close(r->c, 1001, "going", 5, NULL, 0));
  }
}

/* Renders the end of a session and frees it: "log | output | rc status done". */
static char *rec_close(rec *r, int rc) {
  eu_buf t;
  const char *why;
  int status = eu_ws_conn_error(r->c, &why);
  eu_buf_init(&t);
  ASSERT_OK(eu_buf_put(&t, r->log.p ? r->log.p : "", r->log.n));
  ASSERT_OK(eu_buf_puts(&t, "| "));
  render_output(&t, eu_ws_output(r->c));
  ASSERT_OK(eu_buf_printf(&t, "| %d %d %s", rc, status, eu_ws_done(r->c) ? "done" : "open"));
  ASSERT_EQ(status != 0, rc != 0);
  ASSERT_EQ(why != NULL, status != 0);
  if (rc) {
    size_t before = eu_ws_output(r->c)->n;
    ASSERT(eu_ws_done(r->c));
    ASSERT_EQ(eu_ws_feed(r->c, "\x81\x80\0\0\0\0", 6), rc);  /* a failed connection stays failed */
    ASSERT_EQ(eu_ws_output(r->c)->n, before);
  }
  eu_ws_conn_free(r->c);
  eu_buf_free(&r->log);
  return eu_buf_take(&t, NULL);
}

/* Feeds in pieces: cut 0 feeds whole, a cut in (0, n) feeds two pieces,
 * SIZE_MAX one byte at a time. A feed that fails ends the session. */
static char *run_cut(const eu_buf *in, const setup *s, size_t cut) {
  rec r;
  int rc = 0;
  size_t i;
  rec_open(&r, s);
  if (cut == SIZE_MAX) {
    for (i = 0; i < in->n && rc == 0; i++) rc = eu_ws_feed(r.c, in->p + i, 1);
  } else {
    rc = eu_ws_feed(r.c, in->p, cut);
    if (rc == 0) rc = eu_ws_feed(r.c, in->p + cut, in->n - cut);
  }
  return rec_close(&r, rc);
}

/* The session as in is fed whole; it must render as want, and the same
 * when in is cut at any byte or fed byte by byte. */
static void expect(const eu_buf *in, const setup *s, const char *want) {
  size_t cut;
  char *got = run_cut(in, s, in->n);
  ASSERT_STR_EQ(got, want);
  free(got);
  for (cut = 0; cut < in->n; cut++) {
    got = run_cut(in, s, cut);
    ASSERT_STR_EQ(got, want);
    free(got);
  }
  got = run_cut(in, s, SIZE_MAX);
  ASSERT_STR_EQ(got, want);
  free(got);
}

/* SHA-1 and UTF-8 */

static void check_sha1(const char *p, size_t n, const char *hex) {
  unsigned char d[EU_SHA1_LEN];
  char got[2 * EU_SHA1_LEN + 1];
  size_t i;
  eu_sha1(p, n, d);
  for (i = 0; i < EU_SHA1_LEN; i++) snprintf(got + 2 * i, 3, "%02x", d[i]);
  ASSERT_STR_EQ(got, hex);
}

static void test_sha1_gives_the_fips_180_examples(void) {
  static char a[1000000];
  check_sha1("abc", 3, "a9993e364706816aba3e25717850c26c9cd0d89d");
  check_sha1("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56,
             "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
  check_sha1("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopq"
             "klmnopqrlmnopqrsmnopqrstnopqrstu", 112, "a49b2446a02c645bf419f995b67091253a04a259");
  check_sha1("", 0, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  memset(a, 'a', sizeof a);
  check_sha1(a, sizeof a, "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
  /* around the padding's edges: the length fits in the last block or not */
  check_sha1(a, 55, "c1c8bbdc22796e28c0e15163d20899b65621d65a");
  check_sha1(a, 56, "c2db330f6083854c99d4b5bfb6e8f29f201be699");
  check_sha1(a, 63, "03f09f5b158a7a8cdad920bddc29b81c18a551f5");
  check_sha1(a, 64, "0098ba824b5c16427bd7a1122a5a442a25ec644d");
  check_sha1(a, 119, "ee971065aaa017e0632a8ca6c77bb3bf8b1dfc56");
  check_sha1(a, 120, "f34c1488385346a55709ba056ddd08280dd4c6d6");
}

static void test_utf8_takes_what_rfc_3629_allows(void) {
  static const char *const valid[] = {
    "", "plain", "\xc2\x80", "\xdf\xbf", "\xe0\xa0\x80", "\xed\x9f\xbf", "\xee\x80\x80",
    "\xef\xbf\xbf", "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
  };
  static const char *const invalid[] = {
    "\x80", "\xbf", "\xc0\x80", "\xc1\xbf", "\xe0\x80\x80", "\xe0\x9f\xbf", "\xed\xa0\x80",
    "\xed\xbf\xbf", "\xf0\x80\x80\x80", "\xf0\x8f\xbf\xbf", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80",
    "\xff", "\xfe", "\xc3\x28", "\xe2\x28\xa1", "\xe2\x82\x28", "a\xc3",
  };
  size_t i, whole;
  for (i = 0; i < sizeof valid / sizeof valid[0]; i++) ASSERT(eu_utf8_valid(valid[i], strlen(valid[i])));
  for (i = 0; i < sizeof invalid / sizeof invalid[0]; i++)
    ASSERT(!eu_utf8_valid(invalid[i], strlen(invalid[i])));
  /* a sequence cut short at the end may still be completed by more bytes */
  ASSERT(eu_utf8_prefix("ab\xe2\x82", 4, &whole));
  ASSERT_EQ(whole, 2);
  ASSERT(eu_utf8_prefix("\xf0\x9f", 2, &whole));
  ASSERT_EQ(whole, 0);
  ASSERT(eu_utf8_prefix("ab", 2, &whole));
  ASSERT_EQ(whole, 2);
  /* but not when its bytes so far already rule that out */
  ASSERT(!eu_utf8_prefix("ab\xe0\x80", 4, &whole));
  ASSERT(!eu_utf8_prefix("\xed\xa0", 2, &whole));
  ASSERT(!eu_utf8_prefix("\xf4\x90", 2, &whole));
  ASSERT(!eu_utf8_prefix("\xc3\x28", 2, &whole));
}

/* The opening handshake */

typedef struct hs {
  const eu_http_header *headers;
  size_t nheaders;
  eu_buf out;
  int status, rc, requests;
  char err[EU_ERRLEN];
} hs;

static int on_upgrade(void *ud, const eu_http_request *req) {
  hs *h = ud;
  h->requests++;
  h->rc = eu_ws_handshake(req, h->headers, h->nheaders, &h->out, &h->status, h->err, sizeof h->err);
  return 0;
}

/* Parses request with the HTTP layer and answers it with the handshake;
 * returns the response (caller frees) and leaves the status in *status. */
static char *handshake(const char *request, const eu_http_header *headers, size_t nheaders,
                       int *status, int *rc, char *err) {
  eu_http_conn *c;
  hs h;
  memset(&h, 0, sizeof h);
  h.headers = headers;
  h.nheaders = nheaders;
  eu_buf_init(&h.out);
  ASSERT_OK(eu_http_conn_new(&c, NULL));
  ASSERT_OK(eu_http_feed(c, request, strlen(request), on_upgrade, &h));
  ASSERT_EQ(h.requests, 1);
  eu_http_conn_free(c);
  *status = h.status;
  *rc = h.rc;
  if (err) strcpy(err, h.err);
  ASSERT_OK(eu_buf_puts(&h.out, ""));
  return eu_buf_take(&h.out, NULL);
}

static void test_the_handshake_answers_rfc_6455s_example(void) {
  /* RFC 6455, 1.2 and 1.3: the example key and the accept key it gives */
  static const eu_http_header chosen[] = { { "Sec-WebSocket-Protocol", 22, "chat", 4 } };
  int status, rc;
  char *t = handshake("GET /chat HTTP/1.1\r\nHost: server.example.com\r\nUpgrade: websocket\r\n"
                      "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                      "Origin: http://example.com\r\nSec-WebSocket-Protocol: chat, superchat\r\n"
                      "Sec-WebSocket-Version: 13\r\n\r\n",
                      chosen, 1, &status, &rc, NULL);
  ASSERT_OK(rc);
  ASSERT_EQ(status, 101);
  ASSERT_STR_EQ(t, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
                   "Sec-WebSocket-Protocol: chat\r\n\r\n");
  free(t);
}

static void test_the_handshake_reads_tokens_in_any_case_and_in_lists(void) {
  /* the caller's framing and upgrade headers give way to the layer's */
  static const eu_http_header mine[] = {
    { "Connection", 10, "close", 5 }, { "upgrade", 7, "h2c", 3 }, { "Content-Length", 14, "9", 1 },
    { "Sec-WebSocket-Extensions", 24, "permessage-deflate", 18 }, { "X-Served-By", 11, "eutaxy", 6 },
  };
  int status, rc;
  char *t = handshake("GET /ws?room=1 HTTP/1.1\r\nHost: h\r\nconnection: keep-alive\r\n"
                      "CONNECTION: x, UPGRADE\r\nUpgrade: h2c, WebSocket\r\n"
                      "sec-websocket-key: AQIDBAUGBwgJCgsMDQ4PEA==\r\nSEC-WEBSOCKET-VERSION: 13\r\n\r\n",
                      mine, 5, &status, &rc, NULL);
  ASSERT_OK(rc);
  ASSERT_EQ(status, 101);
  ASSERT_STR_EQ(t, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Accept: C/0nmHhBztSRGR1CwL6Tf4ZjwpY=\r\n"
                   "X-Served-By: eutaxy\r\n\r\n");
  free(t);
}

static void check_refused(const char *request, int want_status, const char *want_err) {
  int status, rc;
  char err[EU_ERRLEN];
  char *t = handshake(request, NULL, 0, &status, &rc, err);
  ASSERT_EQ(rc, EU_EINVAL);
  ASSERT_EQ(status, want_status);
  ASSERT_CONTAINS(err, want_err);
  ASSERT_CONTAINS(t, "Connection: close\r\n");
  ASSERT_CONTAINS(t, want_err);  /* the body says why */
  if (want_status == 426) {
    ASSERT(strncmp(t, "HTTP/1.1 426 Upgrade Required\r\n", 31) == 0);
    ASSERT_CONTAINS(t, "\r\nSec-WebSocket-Version: 13\r\n");
  } else {
    ASSERT(strncmp(t, "HTTP/1.1 400 Bad Request\r\n", 26) == 0);
    ASSERT(!strstr(t, "Sec-WebSocket-Version"));
  }
  free(t);
}

#define UPGRADE_HEADERS "Host: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
#define KEY "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
#define V13 "Sec-WebSocket-Version: 13\r\n"

static void test_the_handshake_refuses_what_is_no_upgrade(void) {
  check_refused("POST / HTTP/1.1\r\n" UPGRADE_HEADERS KEY V13 "Content-Length: 0\r\n\r\n", 400, "GET");
  check_refused("GET / HTTP/1.0\r\n" UPGRADE_HEADERS KEY V13 "\r\n", 400, "HTTP/1.1");
  check_refused("GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\n" KEY V13 "\r\n", 400, "Upgrade");
  check_refused("GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websockets\r\nConnection: Upgrade\r\n" KEY V13 "\r\n",
                400, "Upgrade");
  check_refused("GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: keep-alive\r\n" KEY V13
                "\r\n", 400, "Connection");
  check_refused("GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: upgraded\r\n" KEY V13
                "\r\n", 400, "Connection");
  check_refused("GET / HTTP/1.1\r\n" UPGRADE_HEADERS V13 "\r\n", 400, "Sec-WebSocket-Key");
  check_refused("GET / HTTP/1.1\r\n" UPGRADE_HEADERS KEY KEY V13 "\r\n", 400, "Sec-WebSocket-Key");
  check_refused("GET / HTTP/1.1\r\n" UPGRADE_HEADERS "Sec-WebSocket-Key: dGhlIHNhbXBsZQ==\r\n" V13 "\r\n",
                400, "Sec-WebSocket-Key");  /* 10 bytes */
  check_refused("GET / HTTP/1.1\r\n" UPGRADE_HEADERS "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=\r\n" V13
                "\r\n", 400, "Sec-WebSocket-Key");
  check_refused("GET / HTTP/1.1\r\n" UPGRADE_HEADERS "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQAA\r\n" V13
                "\r\n", 400, "Sec-WebSocket-Key");
  check_refused("GET / HTTP/1.1\r\n" UPGRADE_HEADERS "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25j*Q==\r\n" V13
                "\r\n", 400, "Sec-WebSocket-Key");
  /* the version first: a client of an older draft learns the one we speak */
  check_refused("GET / HTTP/1.1\r\n" UPGRADE_HEADERS "\r\n", 426, "Sec-WebSocket-Version");
  check_refused("GET / HTTP/1.1\r\n" UPGRADE_HEADERS KEY "Sec-WebSocket-Version: 8\r\n\r\n", 426,
                "Sec-WebSocket-Version");
  check_refused("GET / HTTP/1.1\r\n" UPGRADE_HEADERS KEY "Sec-WebSocket-Version: 8, 13\r\n\r\n", 426,
                "Sec-WebSocket-Version");
}

static void test_the_handshake_refuses_a_header_that_breaks_the_framing(void) {
  static const eu_http_header bad[] = { { "X-Ok", 4, "fine", 4 }, { "X-Bad", 5, "a\r\nInjected: 1", 14 } };
  static const eu_http_header bad_name[] = { { "Bad Name", 8, "v", 1 } };
  int status, rc;
  char err[EU_ERRLEN];
  char *t = handshake("GET / HTTP/1.1\r\n" UPGRADE_HEADERS KEY V13 "\r\n", bad, 2, &status, &rc, err);
  ASSERT_EQ(rc, EU_EINVAL);
  ASSERT_EQ(status, 500);
  ASSERT(strncmp(t, "HTTP/1.1 500 Internal Server Error\r\n", 36) == 0);
  ASSERT(!strstr(t, "Injected"));
  free(t);
  t = handshake("GET / HTTP/1.1\r\n" UPGRADE_HEADERS KEY V13 "\r\n", bad_name, 1, &status, &rc, err);
  ASSERT_EQ(status, 500);
  free(t);
}

/* Messages */

static void test_text_and_binary_messages_come_out_whole(void) {
  eu_buf in;
  eu_buf_init(&in);
  frame_s(&in, 1, TEXT, "hello");
  frame(&in, 1, BINARY, "\x00\x01\xff", 3);
  frame_s(&in, 1, TEXT, "");
  frame_s(&in, 1, TEXT, "caf\xc3\xa9 \xe2\x82\xac");
  frame(&in, 1, BINARY, "", 0);
  expect(&in, NULL, "text[hello] binary[\\x00\\x01\\xff] text[] text[caf\\xc3\\xa9 \\xe2\\x82\\xac] binary[] "
                    "| | 0 0 open");
  eu_buf_free(&in);
}

static void test_long_messages_take_the_longer_length_forms(void) {
  static char big[70000];
  eu_buf in;
  char *got;
  size_t i;
  for (i = 0; i < sizeof big; i++) big[i] = (char)('a' + i % 26);
  eu_buf_init(&in);
  frame(&in, 1, TEXT, big, 126);     /* the 16-bit length */
  frame(&in, 1, BINARY, big, 65535);
  frame(&in, 1, TEXT, big, 65536);   /* the 64-bit length */
  frame(&in, 1, BINARY, big, sizeof big);
  got = run_cut(&in, NULL, in.n);
  ASSERT_STR_EQ(got, "text[126 bytes] binary[65535 bytes] text[65536 bytes] binary[70000 bytes] | | 0 0 open");
  free(got);
  got = run_cut(&in, NULL, SIZE_MAX);
  ASSERT_STR_EQ(got, "text[126 bytes] binary[65535 bytes] text[65536 bytes] binary[70000 bytes] | | 0 0 open");
  free(got);
  for (i = 1; i < 20; i++) {  /* cuts in each frame's header */
    got = run_cut(&in, NULL, 128 + 4 + i);
    ASSERT_STR_EQ(got, "text[126 bytes] binary[65535 bytes] text[65536 bytes] binary[70000 bytes] | | 0 0 open");
    free(got);
  }
  eu_buf_free(&in);
}

static int check_big(void *ud, int binary, const char *p, size_t n) {
  size_t i;
  ASSERT_EQ(n, 70000);
  for (i = 0; i < n; i++) ASSERT_EQ(p[i], (char)('a' + i % 26));
  *(int *)ud += 1;
  return 0;
}

static void test_a_long_message_keeps_its_bytes(void) {
  static char big[70000];
  static const eu_ws_callbacks cb = { check_big, NULL };
  eu_ws_conn *c;
  eu_buf in;
  size_t i;
  int seen = 0;
  for (i = 0; i < sizeof big; i++) big[i] = (char)('a' + i % 26);
  eu_buf_init(&in);
  frame(&in, 0, BINARY, big, 4000);
  frame(&in, 0, CONT, big + 4000, 60000);
  frame(&in, 1, CONT, big + 64000, 6000);
  ASSERT_OK(eu_ws_conn_new(&c, 0, &cb, &seen));
  for (i = 0; i < in.n; i += 1000) ASSERT_OK(eu_ws_feed(c, in.p + i, in.n - i < 1000 ? in.n - i : 1000));
  ASSERT_EQ(seen, 1);
  eu_ws_conn_free(c);
  eu_buf_free(&in);
}

static void test_fragments_are_joined_into_one_message(void) {
  eu_buf in;
  eu_buf_init(&in);
  frame_s(&in, 0, TEXT, "Hel");
  frame_s(&in, 0, CONT, "");
  frame_s(&in, 0, CONT, "lo, ");
  frame_s(&in, 1, CONT, "world");
  frame(&in, 0, BINARY, "\x01", 1);
  frame(&in, 1, CONT, "\x02", 1);
  frame_s(&in, 0, TEXT, "");
  frame_s(&in, 1, CONT, "");
  /* a character cut between two fragments */
  frame_s(&in, 0, TEXT, "\xe2");
  frame_s(&in, 0, CONT, "\x82");
  frame_s(&in, 1, CONT, "\xac!");
  expect(&in, NULL, "text[Hello, world] binary[\\x01\\x02] text[] text[\\xe2\\x82\\xac!] | | 0 0 open");
  eu_buf_free(&in);
}

static void test_a_ping_inside_a_fragmented_message_is_answered(void) {
  eu_buf in;
  eu_buf_init(&in);
  frame_s(&in, 1, PING, "first");
  frame_s(&in, 0, TEXT, "Hel");
  frame_s(&in, 1, PING, "in between");
  frame_s(&in, 1, PONG, "ignored");
  frame_s(&in, 0, CONT, "l");
  frame_s(&in, 1, PING, "");
  frame_s(&in, 1, CONT, "o");
  expect(&in, NULL, "text[Hello] | pong(first) pong(in between) pong() | 0 0 open");
  eu_buf_free(&in);
}

static void test_pongs_are_ignored(void) {
  eu_buf in;
  char p[125];
  memset(p, 'p', sizeof p);
  eu_buf_init(&in);
  frame_s(&in, 1, PONG, "unsolicited");
  frame(&in, 1, PONG, p, sizeof p);
  frame_s(&in, 1, PONG, "");
  expect(&in, NULL, "| | 0 0 open");
  eu_buf_free(&in);
}

static void test_the_message_callback_can_answer_and_close(void) {
  setup s = { 0, 1, 2, 0, 0 };
  eu_buf in;
  eu_buf_init(&in);
  frame_s(&in, 1, TEXT, "one");
  frame(&in, 1, BINARY, "two", 3);
  frame_s(&in, 1, TEXT, "three");  /* after our close: delivered, not echoed */
  frame_s(&in, 1, PING, "no pong after our close");
  close_frame(&in, 1000, "", 0);
  expect(&in, &s, "text[one] binary[two] text[three] closed[1000] | text(one) binary(two) close(1000 bye) "
                  "| 0 0 done");
  eu_buf_free(&in);
}

static void test_a_failing_message_callback_closes_with_1011(void) {
  setup s = { 0, 0, 0, 2, 0 };
  eu_buf in;
  eu_buf_init(&in);
  frame_s(&in, 1, TEXT, "one");
  frame_s(&in, 1, TEXT, "two");
  frame_s(&in, 1, TEXT, "three");
  expect(&in, &s, "text[one] text[two] | close(1011 message handler failed) | -2 1011 done");
  eu_buf_free(&in);
}

/* Protocol errors */

/* in, after a message that must still be delivered, fails the connection
 * with code and reason. */
static void expect_failure(const eu_buf *bad, const setup *s, int code, const char *reason) {
  eu_buf in;
  char want[256];
  eu_buf_init(&in);
  frame_s(&in, 1, TEXT, "before");
  ASSERT_OK(eu_buf_put(&in, bad->p, bad->n));
  frame_s(&in, 1, TEXT, "after");  /* never read */
  snprintf(want, sizeof want, "text[before] | close(%d %s) | -2 %d done", code, reason, code);
  expect(&in, s, want);
  eu_buf_free(&in);
}

static void test_protocol_errors_close_with_1002(void) {
  static const int bad_codes[] = { 0, 1, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535 };
  char p[200];
  eu_buf b;
  size_t i;
  memset(p, 'x', sizeof p);
  eu_buf_init(&b);
  frame_rsv(&b, 1, 0, TEXT, 0, "clear", 5);
  expect_failure(&b, NULL, 1002, "unmasked frame from the client");
  for (i = 1; i < 8; i++) {
    eu_buf_reset(&b);
    frame_rsv(&b, 1, (int)i, TEXT, 1, "x", 1);
    expect_failure(&b, NULL, 1002, "reserved bits set without an extension");
  }
  eu_buf_reset(&b);
  frame_rsv(&b, 1, 4, PING, 1, "", 0);
  expect_failure(&b, NULL, 1002, "reserved bits set without an extension");
  for (i = 3; i < 16; i++) {
    if (i >= CLOSE && i <= PONG) continue;
    eu_buf_reset(&b);
    frame(&b, 1, (int)i, "x", 1);
    expect_failure(&b, NULL, 1002, "reserved opcode");
  }
  eu_buf_reset(&b);
  frame_s(&b, 1, CONT, "orphan");
  expect_failure(&b, NULL, 1002, "continuation frame without a message to continue");
  eu_buf_reset(&b);
  frame_s(&b, 0, TEXT, "open");
  frame_s(&b, 1, TEXT, "again");
  expect_failure(&b, NULL, 1002, "new message inside a fragmented one");
  eu_buf_reset(&b);
  frame_s(&b, 0, TEXT, "open");
  frame(&b, 1, BINARY, "again", 5);
  expect_failure(&b, NULL, 1002, "new message inside a fragmented one");
  /* control frames: at most 125 bytes, never fragmented */
  eu_buf_reset(&b);
  frame(&b, 1, PING, p, 126);
  expect_failure(&b, NULL, 1002, "invalid frame header");
  eu_buf_reset(&b);
  frame(&b, 1, CLOSE, p, 126);
  expect_failure(&b, NULL, 1002, "invalid frame header");
  eu_buf_reset(&b);
  frame(&b, 1, PONG, p, 200);
  expect_failure(&b, NULL, 1002, "invalid frame header");
  eu_buf_reset(&b);
  frame_s(&b, 0, PING, "half");
  expect_failure(&b, NULL, 1002, "invalid frame header");
  eu_buf_reset(&b);
  frame_s(&b, 0, TEXT, "open");
  frame_s(&b, 0, PING, "half");
  expect_failure(&b, NULL, 1002, "invalid frame header");
  /* lengths not in their shortest form, and one past 2^63 */
  eu_buf_reset(&b);
  ASSERT_OK(eu_buf_put(&b, "\x82\xfe\x00\x05\x00\x00\x00\x00xxxxx", 13));
  expect_failure(&b, NULL, 1002, "invalid frame header");
  eu_buf_reset(&b);
  ASSERT_OK(eu_buf_put(&b, "\x82\xff\x00\x00\x00\x00\x00\x00\xff\xff\x00\x00\x00\x00", 14));
  expect_failure(&b, NULL, 1002, "invalid frame header");
  eu_buf_reset(&b);
  ASSERT_OK(eu_buf_put(&b, "\x82\xff\x80\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00", 14));
  expect_failure(&b, NULL, 1002, "invalid frame header");
  /* close frames: a 1-byte payload, codes no endpoint may send */
  eu_buf_reset(&b);
  frame(&b, 1, CLOSE, "\x03", 1);
  expect_failure(&b, NULL, 1002, "close frame with a 1-byte payload");
  for (i = 0; i < sizeof bad_codes / sizeof bad_codes[0]; i++) {
    eu_buf_reset(&b);
    close_frame(&b, bad_codes[i], "why", 3);
    expect_failure(&b, NULL, 1002, "invalid close code");
  }
  eu_buf_free(&b);
}

static void test_text_that_is_not_utf8_closes_with_1007(void) {
  static const char *const bad[] = { "\xff", "ok\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "end\xe2\x82" };
  eu_buf b;
  size_t i;
  eu_buf_init(&b);
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    eu_buf_reset(&b);
    frame_s(&b, 1, TEXT, bad[i]);
    expect_failure(&b, NULL, 1007, "text message is not valid UTF-8");
  }
  /* across fragments: a character left unfinished, and one broken at once */
  eu_buf_reset(&b);
  frame_s(&b, 0, TEXT, "\xe2\x82");
  frame_s(&b, 1, CONT, "");
  expect_failure(&b, NULL, 1007, "text message is not valid UTF-8");
  eu_buf_reset(&b);
  frame_s(&b, 0, TEXT, "fine");
  frame_s(&b, 0, CONT, "\xe2\x28");
  expect_failure(&b, NULL, 1007, "text message is not valid UTF-8");
  /* a close reason: valid or not however its bytes are cut */
  eu_buf_reset(&b);
  close_frame(&b, 1000, "caf\xff", 4);
  expect_failure(&b, NULL, 1007, "close reason is not valid UTF-8");
  eu_buf_reset(&b);
  close_frame(&b, 1000, "\xc3", 1);
  expect_failure(&b, NULL, 1007, "close reason is not valid UTF-8");
  eu_buf_free(&b);
}

static void test_binary_is_not_read_as_text(void) {
  eu_buf in;
  eu_buf_init(&in);
  frame(&in, 0, BINARY, "\xff\xe2", 2);
  frame(&in, 1, CONT, "\x82", 1);
  expect(&in, NULL, "binary[\\xff\\xe2\\x82] | | 0 0 open");
  eu_buf_free(&in);
}

static void test_a_message_over_the_limit_closes_with_1009(void) {
  setup s = { 10, 0, 0, 0, 0 };
  char p[125];
  eu_buf b;
  memset(p, 'x', sizeof p);
  eu_buf_init(&b);
  /* exactly the limit, twice: the limit is a message's, control frames aside */
  frame(&b, 1, TEXT, p, 10);
  frame(&b, 0, BINARY, p, 4);
  frame(&b, 1, PING, p, 20);
  frame(&b, 1, CONT, p, 6);
  expect(&b, &s, "text[xxxxxxxxxx] binary[xxxxxxxxxx] | pong(xxxxxxxxxxxxxxxxxxxx) | 0 0 open");
  eu_buf_reset(&b);
  frame(&b, 1, TEXT, p, 11);
  expect_failure(&b, &s, 1009, "message too big");
  /* growing over it fragment by fragment */
  eu_buf_reset(&b);
  frame(&b, 0, BINARY, p, 6);
  frame(&b, 0, CONT, p, 0);
  frame(&b, 1, CONT, p, 5);
  expect_failure(&b, &s, 1009, "message too big");
  /* a length far past it is refused before its payload is kept */
  eu_buf_reset(&b);
  ASSERT_OK(eu_buf_put(&b, "\x82\xff\x40\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00z", 15));
  expect_failure(&b, NULL, 1009, "message too big");
  eu_buf_free(&b);
}

/* The close handshake */

static void test_the_peers_close_is_answered_and_ends_the_connection(void) {
  eu_buf in;
  eu_buf_init(&in);
  frame_s(&in, 1, TEXT, "hi");
  close_frame(&in, 1000, "bye \xe2\x82\xac", 7);
  frame_s(&in, 1, TEXT, "after the close: ignored");
  expect(&in, NULL, "text[hi] closed[1000 bye \\xe2\\x82\\xac] | close(1000) | 0 0 done");
  eu_buf_reset(&in);
  frame(&in, 1, CLOSE, "", 0);
  expect(&in, NULL, "closed[1005] | close() | 0 0 done");
  eu_buf_reset(&in);
  close_frame(&in, 4999, "", 0);
  expect(&in, NULL, "closed[4999] | close(4999) | 0 0 done");
  eu_buf_reset(&in);
  close_frame(&in, 1012, "restart", 7);  /* registered with IANA after RFC 6455 */
  expect(&in, NULL, "closed[1012 restart] | close(1012) | 0 0 done");
  eu_buf_free(&in);
}

static void test_a_close_received_ends_sending_too(void) {
  rec r;
  eu_buf in;
  char err[EU_ERRLEN];
  eu_buf_init(&in);
  close_frame(&in, 1001, "", 0);
  rec_open(&r, NULL);
  ASSERT_OK(eu_ws_feed(r.c, in.p, in.n));
  ASSERT(eu_ws_done(r.c));
  eu_buf_reset(eu_ws_output(r.c));
  ASSERT_EQ(eu_ws_send(r.c, 0, "late", 4, err, sizeof err), EU_EINVAL);
  ASSERT_CONTAINS(err, "closing or closed");
  ASSERT_EQ(eu_ws_ping(r.c, "", 0, err, sizeof err), EU_EINVAL);
  ASSERT_OK(eu_ws_close(r.c, 1000, "", 0, err, sizeof err));  /* closing twice is no error */
  ASSERT_EQ(eu_ws_output(r.c)->n, 0);
  ASSERT_OK(eu_ws_feed(r.c, in.p, in.n));  /* nothing more is read */
  ASSERT_EQ(eu_ws_output(r.c)->n, 0);
  free(rec_close(&r, 0));
  eu_buf_free(&in);
}

static void test_closing_first_waits_for_the_peers_close(void) {
  setup s = { 0, 0, 0, 0, 1 };
  eu_buf in;
  eu_buf_init(&in);
  expect(&in, &s, "| close(1001 going) | 0 0 open");
  frame_s(&in, 1, TEXT, "in flight");
  frame_s(&in, 1, PING, "unanswered");
  expect(&in, &s, "text[in flight] | close(1001 going) | 0 0 open");
  close_frame(&in, 1001, "ok", 2);
  expect(&in, &s, "text[in flight] closed[1001 ok] | close(1001 going) | 0 0 done");
  /* an error of the peer's after our close fails it without a second close frame */
  eu_buf_reset(&in);
  frame_s(&in, 1, TEXT, "\xff");
  expect(&in, &s, "| close(1001 going) | -2 1007 done");
  eu_buf_free(&in);
}

static void test_close_checks_its_code_and_reason(void) {
  static const int bad_codes[] = { -1, 0, 999, 1004, 1006, 1015, 1016, 2999, 5000 };
  static const int good_codes[] = { 1000, 1003, 1007, 1011, 1014, 3000, 4999 };
  char reason[124], err[EU_ERRLEN];
  eu_buf want;
  rec r;
  size_t i;
  memset(reason, 'r', sizeof reason);
  for (i = 0; i < sizeof bad_codes / sizeof bad_codes[0]; i++) {
    rec_open(&r, NULL);
    ASSERT_EQ(eu_ws_close(r.c, bad_codes[i], "", 0, err, sizeof err), EU_EINVAL);
    ASSERT_CONTAINS(err, "invalid close code");
    free(rec_close(&r, 0));
  }
  rec_open(&r, NULL);
  ASSERT_EQ(eu_ws_close(r.c, 1000, reason, 124, err, sizeof err), EU_EINVAL);
  ASSERT_CONTAINS(err, "at most 123 bytes");
  ASSERT_EQ(eu_ws_close(r.c, 1000, "\xc3", 1, err, sizeof err), EU_EINVAL);
  ASSERT_CONTAINS(err, "UTF-8");
  ASSERT_EQ(eu_ws_close(r.c, EU_WS_NO_CODE, "x", 1, err, sizeof err), EU_EINVAL);
  ASSERT_CONTAINS(err, "without a code");
  ASSERT_EQ(eu_ws_output(r.c)->n, 0);  /* a refused close writes nothing and closes nothing */
  ASSERT_OK(eu_ws_send(r.c, 0, "still open", 10, err, sizeof err));
  ASSERT_OK(eu_ws_close(r.c, 1000, reason, 123, err, sizeof err));
  ASSERT_OK(eu_ws_close(r.c, 1000, "twice", 5, err, sizeof err));
  eu_buf_init(&want);
  ASSERT_OK(eu_buf_puts(&want, "| text(still open) close(1000 "));
  ASSERT_OK(eu_buf_put(&want, reason, 123));
  ASSERT_OK(eu_buf_puts(&want, ") | 0 0 open"));
  {
    char *got = rec_close(&r, 0);
    ASSERT_STR_EQ(got, want.p);
    free(got);
  }
  eu_buf_free(&want);
  for (i = 0; i < sizeof good_codes / sizeof good_codes[0]; i++) {
    char *got, w[64];
    rec_open(&r, NULL);
    ASSERT_OK(eu_ws_close(r.c, good_codes[i], "", 0, err, sizeof err));
    got = rec_close(&r, 0);
    snprintf(w, sizeof w, "| close(%d) | 0 0 open", good_codes[i]);
    ASSERT_STR_EQ(got, w);
    free(got);
  }
  rec_open(&r, NULL);
  ASSERT_OK(eu_ws_close(r.c, EU_WS_NO_CODE, NULL, 0, err, sizeof err));
  {
    char *got = rec_close(&r, 0);
    ASSERT_STR_EQ(got, "| close() | 0 0 open");
    free(got);
  }
}

static void test_send_and_ping_write_frames_a_client_reads(void) {
  static char big[65536];
  char err[EU_ERRLEN];
  char *got;
  rec r;
  memset(big, 'b', sizeof big);
  rec_open(&r, NULL);
  ASSERT_OK(eu_ws_send(r.c, 0, "", 0, err, sizeof err));
  ASSERT_OK(eu_ws_send(r.c, 0, "caf\xc3\xa9", 5, err, sizeof err));
  ASSERT_OK(eu_ws_send(r.c, 1, "\xff\x00", 2, err, sizeof err));
  ASSERT_OK(eu_ws_send(r.c, 1, big, 125, err, sizeof err));
  ASSERT_OK(eu_ws_send(r.c, 1, big, 126, err, sizeof err));
  ASSERT_OK(eu_ws_send(r.c, 0, big, 65535, err, sizeof err));
  ASSERT_OK(eu_ws_send(r.c, 1, big, 65536, err, sizeof err));
  ASSERT_OK(eu_ws_ping(r.c, "are you there", 13, err, sizeof err));
  ASSERT_OK(eu_ws_ping(r.c, big, 125, err, sizeof err));
  ASSERT_EQ(eu_ws_send(r.c, 0, "\xff", 1, err, sizeof err), EU_EINVAL);
  ASSERT_CONTAINS(err, "UTF-8");
  ASSERT_EQ(eu_ws_ping(r.c, big, 126, err, sizeof err), EU_EINVAL);
  ASSERT_CONTAINS(err, "125");
  got = rec_close(&r, 0);
  ASSERT_STR_EQ(got, "| text() text(caf\\xc3\\xa9) binary(\\xff\\x00) binary(125 bytes) binary(126 bytes) "
                     "text(65535 bytes) binary(65536 bytes) ping(are you there) ping(125 bytes) | 0 0 open");
  free(got);
}

static void test_the_output_is_the_servers_to_take(void) {
  rec r;
  eu_buf *out;
  char *p, *got;
  size_t n;
  rec_open(&r, NULL);
  ASSERT_OK(eu_ws_send(r.c, 0, "one", 3, NULL, 0));
  out = eu_ws_output(r.c);
  p = eu_buf_take(out, &n);  /* as a server hands the bytes to a write */
  ASSERT_EQ(n, 5);
  ASSERT(memcmp(p, "\x81\x03one", 5) == 0);
  free(p);
  ASSERT_OK(eu_ws_send(r.c, 0, "two", 3, NULL, 0));
  got = rec_close(&r, 0);
  ASSERT_STR_EQ(got, "| text(two) | 0 0 open");
  free(got);
}

int main(void) {
  static const eu_test tests[] = {
    { "sha1 gives the FIPS 180 examples", test_sha1_gives_the_fips_180_examples },
    { "utf8 takes what RFC 3629 allows", test_utf8_takes_what_rfc_3629_allows },
    { "the handshake answers RFC 6455's example", test_the_handshake_answers_rfc_6455s_example },
    { "the handshake reads tokens in any case and in lists", test_the_handshake_reads_tokens_in_any_case_and_in_lists },
    { "the handshake refuses what is no upgrade", test_the_handshake_refuses_what_is_no_upgrade },
    { "the handshake refuses a header that breaks the framing", test_the_handshake_refuses_a_header_that_breaks_the_framing },
    { "text and binary messages come out whole", test_text_and_binary_messages_come_out_whole },
    { "long messages take the longer length forms", test_long_messages_take_the_longer_length_forms },
    { "a long message keeps its bytes", test_a_long_message_keeps_its_bytes },
    { "fragments are joined into one message", test_fragments_are_joined_into_one_message },
    { "a ping inside a fragmented message is answered", test_a_ping_inside_a_fragmented_message_is_answered },
    { "pongs are ignored", test_pongs_are_ignored },
    { "the message callback can answer and close", test_the_message_callback_can_answer_and_close },
    { "a failing message callback closes with 1011", test_a_failing_message_callback_closes_with_1011 },
    { "protocol errors close with 1002", test_protocol_errors_close_with_1002 },
    { "text that is not UTF-8 closes with 1007", test_text_that_is_not_utf8_closes_with_1007 },
    { "binary is not read as text", test_binary_is_not_read_as_text },
    { "a message over the limit closes with 1009", test_a_message_over_the_limit_closes_with_1009 },
    { "the peer's close is answered and ends the connection", test_the_peers_close_is_answered_and_ends_the_connection },
    { "a close received ends sending too", test_a_close_received_ends_sending_too },
    { "closing first waits for the peer's close", test_closing_first_waits_for_the_peers_close },
    { "close checks its code and reason", test_close_checks_its_code_and_reason },
    { "send and ping write frames a client reads", test_send_and_ping_write_frames_a_client_reads },
    { "the output is the server's to take", test_the_output_is_the_servers_to_take },
  };
  return test_main(tests, sizeof tests / sizeof tests[0]);
}
