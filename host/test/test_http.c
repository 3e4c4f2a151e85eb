/*
 * test_http.c: the HTTP/1.1 message layer (http.c) fed bytes directly: no
 * sockets, no clock. Each request a test feeds is rendered by the callback
 * into one line of text ("METHOD path?query|headers|body|ka"), so whole
 * sequences of requests compare as strings, and a request cut at every byte
 * boundary must render exactly as it does in one piece.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "eutaxy.h"
#include "http.h"
#include "test.h"

/* What the callback saw: one rendered line per request. */
typedef struct seen {
  eu_buf text;
  int count;
  int stop_at;  /* the callback fails on this request (1-based); 0 never */
} seen;

static int collect(void *ud, const eu_http_request *r) {
  seen *s = ud;
  size_t i;
  s->count++;
  if (s->stop_at && s->count == s->stop_at) return EU_EINVAL;
  ASSERT_EQ(strlen(r->path), r->path_len);
  ASSERT_EQ(strlen(r->query), r->query_len);
  ASSERT_EQ(r->body[r->body_len], '\0');
  ASSERT_OK(eu_buf_printf(&s->text, "%s %s?%s|", r->method, r->path, r->query));
  for (i = 0; i < r->nheaders; i++) {
    ASSERT_EQ(strlen(r->headers[i].name), r->headers[i].name_len);
    ASSERT_EQ(strlen(r->headers[i].value), r->headers[i].value_len);
    ASSERT_OK(eu_buf_printf(&s->text, "%s=%s;", r->headers[i].name, r->headers[i].value));
  }
  ASSERT_OK(eu_buf_putc(&s->text, '|'));
  ASSERT_OK(eu_buf_put(&s->text, r->body, r->body_len));
  ASSERT_OK(eu_buf_printf(&s->text, "|%d.%d|%s\n", r->http_major, r->http_minor,
                          r->keep_alive ? "ka" : "close"));
  return 0;
}

/* Feeds msg in one piece to a fresh connection; returns the feed's code and
 * leaves what was seen in *s (caller frees s->text) and the status in *status. */
static int feed_all(const char *msg, size_t len, const eu_http_limits *lim, seen *s, int *status) {
  eu_http_conn *c;
  int rc;
  ASSERT_OK(eu_http_conn_new(&c, lim));
  rc = eu_http_feed(c, msg, len, collect, s);
  if (status) *status = eu_http_conn_error(c, NULL);
  eu_http_conn_free(c);
  return rc;
}

/* Renders msg fed in one piece. */
static char *render(const char *msg) {
  seen s = {0};
  eu_buf_init(&s.text);
  ASSERT_OK(feed_all(msg, strlen(msg), NULL, &s, NULL));
  ASSERT_OK(eu_buf_puts(&s.text, ""));
  return eu_buf_take(&s.text, NULL);
}

/* The status a message ends with, fed in one piece. */
static int status_of(const char *msg, size_t len, const eu_http_limits *lim) {
  seen s = {0};
  int status = 0;
  eu_buf_init(&s.text);
  ASSERT(feed_all(msg, len, lim, &s, &status) < 0);
  eu_buf_free(&s.text);
  return status;
}

static void test_a_simple_get(void) {
  char *t = render("GET /hello?x=1&y=2 HTTP/1.1\r\nHost: example.com\r\n\r\n");
  ASSERT_STR_EQ(t, "GET /hello?x=1&y=2|host=example.com;||1.1|ka\n");
  free(t);
  t = render("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n");
  ASSERT_STR_EQ(t, "OPTIONS *?|host=h;||1.1|ka\n");
  free(t);
  t = render("GET http://example.com/a/b?q=1#frag HTTP/1.1\r\n\r\n");  /* absolute form */
  ASSERT_STR_EQ(t, "GET /a/b?q=1|||1.1|ka\n");
  free(t);
}

static void test_the_request_gives_url_method_and_header_lookup(void) {
  static const char msg[] = "DELETE /x/y?z#f HTTP/1.1\r\nX-A: 1\r\nX-A: 2\r\n\r\n";
  eu_http_conn *c;
  seen s = {0};
  eu_buf_init(&s.text);
  ASSERT_OK(eu_http_conn_new(&c, NULL));
  ASSERT(!eu_http_conn_busy(c));
  ASSERT_OK(eu_http_feed(c, msg, 10, collect, &s));
  ASSERT(eu_http_conn_busy(c));  /* half a request: the header timeout applies */
  ASSERT_OK(eu_http_feed(c, msg + 10, sizeof msg - 11, collect, &s));
  ASSERT(!eu_http_conn_busy(c));
  ASSERT(!eu_http_conn_closing(c));
  ASSERT_EQ(eu_http_conn_error(c, NULL), 0);
  ASSERT_STR_EQ(s.text.p, "DELETE /x/y?z|x-a=1;x-a=2;||1.1|ka\n");
  eu_http_conn_free(c);
  eu_buf_free(&s.text);
}

static int check_lookup(void *ud, const eu_http_request *r) {
  ASSERT_STR_EQ(r->url, "/p?q");
  ASSERT_STR_EQ(eu_http_header_get(r, "x-a"), "first");
  ASSERT(eu_http_header_get(r, "X-A") == NULL);  /* names are looked up lowercase */
  ASSERT(eu_http_header_get(r, "missing") == NULL);
  *(int *)ud += 1;
  return 0;
}

static void test_header_get_finds_the_first_value(void) {
  static const char msg[] = "GET /p?q HTTP/1.1\r\nX-A: first\r\nx-a: second\r\n\r\n";
  eu_http_conn *c;
  int n = 0;
  ASSERT_OK(eu_http_conn_new(&c, NULL));
  ASSERT_OK(eu_http_feed(c, msg, sizeof msg - 1, check_lookup, &n));
  ASSERT_EQ(n, 1);
  eu_http_conn_free(c);
}

static void test_a_post_with_content_length(void) {
  char *t = render("POST /submit HTTP/1.1\r\nContent-Length: 11\r\n\r\nhello world");
  ASSERT_STR_EQ(t, "POST /submit?|content-length=11;|hello world|1.1|ka\n");
  free(t);
}

static void test_a_chunked_body_is_assembled(void) {
  char *t = render("POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                   "5\r\nhello\r\n1;ext=1\r\n \r\n5\r\nworld\r\n0\r\nX-Trailer: t\r\n\r\n");
  /* the trailer is not a header of the request */
  ASSERT_STR_EQ(t, "POST /c?|transfer-encoding=chunked;|hello world|1.1|ka\n");
  free(t);
}

static void test_pipelined_requests_come_out_in_order(void) {
  char *t = render("GET /1 HTTP/1.1\r\n\r\n"
                   "POST /2 HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"
                   "PUT /3 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nxy\r\n0\r\n\r\n"
                   "GET /4 HTTP/1.1\r\n\r\n");
  ASSERT_STR_EQ(t, "GET /1?|||1.1|ka\n"
                   "POST /2?|content-length=3;|abc|1.1|ka\n"
                   "PUT /3?|transfer-encoding=chunked;|xy|1.1|ka\n"
                   "GET /4?|||1.1|ka\n");
  free(t);
}

/* Feeds msg as two pieces cut at every byte, and as single bytes; each
 * way must render exactly as the whole. */
static void check_every_split(const char *msg) {
  size_t len = strlen(msg), cut, i;
  char *whole = render(msg);
  ASSERT(whole[0] != '\0');
  for (cut = 0; cut <= len; cut++) {
    eu_http_conn *c;
    seen s = {0};
    eu_buf_init(&s.text);
    ASSERT_OK(eu_http_conn_new(&c, NULL));
    ASSERT_OK(eu_http_feed(c, msg, cut, collect, &s));
    ASSERT_OK(eu_http_feed(c, msg + cut, len - cut, collect, &s));
    ASSERT_OK(eu_buf_puts(&s.text, ""));
    ASSERT_STR_EQ(s.text.p, whole);
    eu_http_conn_free(c);
    eu_buf_free(&s.text);
  }
  {
    eu_http_conn *c;
    seen s = {0};
    eu_buf_init(&s.text);
    ASSERT_OK(eu_http_conn_new(&c, NULL));
    for (i = 0; i < len; i++) ASSERT_OK(eu_http_feed(c, msg + i, 1, collect, &s));
    ASSERT_OK(eu_buf_puts(&s.text, ""));
    ASSERT_STR_EQ(s.text.p, whole);
    eu_http_conn_free(c);
    eu_buf_free(&s.text);
  }
  free(whole);
}

static void test_a_request_split_at_any_byte_is_the_same(void) {
  check_every_split("GET /a?b=c HTTP/1.1\r\nHost: x\r\nAccept: */*\r\nX-Long-Name:   spaced value  \r\n\r\n");
  check_every_split("POST /p HTTP/1.1\r\nContent-Length: 10\r\nContent-Type: text/plain\r\n\r\n0123456789");
  check_every_split("POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "a\r\n0123456789\r\n3\r\nabc\r\n0\r\nTrailer-A: 1\r\n\r\n");
  check_every_split("GET /1 HTTP/1.1\r\n\r\nPOST /2 HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi"
                    "GET /3 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
                    "GET /4 HTTP/1.1\r\nConnection: close\r\n\r\n");
}

/* A refused message is refused with the same status, and after the same
 * requests, however it is cut. */
static void check_every_split_fails(const char *msg, const eu_http_limits *lim, int status) {
  size_t len = strlen(msg), cut;
  for (cut = 0; cut <= len; cut++) {
    eu_http_conn *c;
    seen s = {0};
    int rc;
    eu_buf_init(&s.text);
    ASSERT_OK(eu_http_conn_new(&c, lim));
    rc = eu_http_feed(c, msg, cut, collect, &s);
    if (rc == EU_OK) rc = eu_http_feed(c, msg + cut, len - cut, collect, &s);
    ASSERT_EQ(rc, EU_EINVAL);
    ASSERT_EQ(eu_http_conn_error(c, NULL), status);
    ASSERT_EQ(s.count, 1);
    eu_http_conn_free(c);
    eu_buf_free(&s.text);
  }
}

static void test_a_refusal_split_at_any_byte_is_the_same(void) {
  eu_http_limits lim = {0};
  lim.max_head = 40;
  lim.max_body = 8;
  lim.max_headers = 3;
  check_every_split_fails("GET /ok HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nBad Name: v\r\n\r\n", &lim, 400);
  check_every_split_fails("GET /ok HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n", &lim, 431);
  check_every_split_fails("GET /ok HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nX: 0123456789012345678901234567890123456789\r\n\r\n", &lim, 431);
  check_every_split_fails("GET /ok HTTP/1.1\r\n\r\nPOST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                          "5\r\n01234\r\n5\r\n56789\r\n0\r\n\r\n", &lim, 413);
}

static void test_header_names_are_lowercased_and_repeats_kept(void) {
  char *t = render("GET / HTTP/1.1\r\nHOST: h\r\nSet-Thing: a\r\nX-Empty:\r\n"
                   "set-thing: b\r\nSeT-ThInG: c\r\nValue-Case: MiXeD\r\n\r\n");
  ASSERT_STR_EQ(t, "GET /?|host=h;set-thing=a;x-empty=;set-thing=b;set-thing=c;value-case=MiXeD;||1.1|ka\n");
  free(t);
}

static void test_keep_alive_follows_the_version_and_connection(void) {
  char *t;
  t = render("GET / HTTP/1.1\r\n\r\n");
  ASSERT_STR_EQ(t, "GET /?|||1.1|ka\n");
  free(t);
  t = render("GET / HTTP/1.1\r\nConnection: close\r\n\r\n");
  ASSERT_STR_EQ(t, "GET /?|connection=close;||1.1|close\n");
  free(t);
  t = render("GET / HTTP/1.0\r\n\r\n");
  ASSERT_STR_EQ(t, "GET /?|||1.0|close\n");
  free(t);
  t = render("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
  ASSERT_STR_EQ(t, "GET /?|connection=Keep-Alive;||1.0|ka\n");
  free(t);
}

static void test_bytes_after_a_closing_request_are_ignored(void) {
  static const char msg[] = "GET /1 HTTP/1.1\r\nConnection: close\r\n\r\nGET /2 HTTP/1.1\r\n\r\n";
  eu_http_conn *c;
  seen s = {0};
  eu_buf_init(&s.text);
  ASSERT_OK(eu_http_conn_new(&c, NULL));
  ASSERT_OK(eu_http_feed(c, msg, sizeof msg - 1, collect, &s));
  ASSERT_EQ(s.count, 1);
  ASSERT(eu_http_conn_closing(c));
  ASSERT_OK(eu_http_feed(c, "garbage", 7, collect, &s));
  ASSERT_EQ(s.count, 1);
  ASSERT_EQ(eu_http_conn_error(c, NULL), 0);
  eu_http_conn_free(c);
  eu_buf_free(&s.text);
}

static void test_an_upgrade_is_ignored_and_http_goes_on(void) {
  char *t = render("GET /ws HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
                   "GET /next HTTP/1.1\r\n\r\n");
  ASSERT_STR_EQ(t, "GET /ws?|connection=Upgrade;upgrade=websocket;||1.1|ka\n"
                   "GET /next?|||1.1|ka\n");
  free(t);
}

static int take_upgrade(void *ud, const eu_http_request *r) {
  int *n = ud;
  (*n)++;
  return eu_http_header_get(r, "upgrade") ? EU_HTTP_TAKEN : 0;
}

/* A request taken over keeps every byte after it, in any split, for the new protocol. */
static void test_an_upgrade_taken_over_keeps_the_bytes_after_it(void) {
  static const char in[] = "GET /a HTTP/1.1\r\n\r\nGET /ws HTTP/1.1\r\nConnection: Upgrade\r\n"
                           "Upgrade: websocket\r\n\r\n\x81\x85" "abcdGET / HTTP/1.1\r\n\r\n";
  size_t split, head = strlen("GET /a HTTP/1.1\r\n\r\nGET /ws HTTP/1.1\r\nConnection: Upgrade\r\n"
                              "Upgrade: websocket\r\n\r\n");
  for (split = 0; split < sizeof in - 1; split++) {
    eu_http_conn *c;
    eu_buf *rest;
    int n = 0;
    ASSERT_OK(eu_http_conn_new(&c, NULL));
    ASSERT_OK(eu_http_feed(c, in, split, take_upgrade, &n));
    ASSERT_OK(eu_http_feed(c, in + split, sizeof in - 1 - split, take_upgrade, &n));
    ASSERT_EQ(n, 2);
    rest = eu_http_conn_rest(c);
    ASSERT(rest != NULL);
    ASSERT_EQ(rest->n, sizeof in - 1 - head);
    ASSERT(memcmp(rest->p, in + head, rest->n) == 0);
    eu_http_conn_free(c);
  }
}

static void test_garbage_is_a_400(void) {
  static const char *const bad[] = {
    "\x01\x02\x03 nonsense\r\n\r\n",
    "GET\r\n\r\n",
    "GET / HTTP/1.1\r\nNo colon here\r\n\r\n",
    "GET / HTTP/1.1\r\nBad Name: v\r\n\r\n",
    "GET / HTTP/1.1\r\nX: a\rb\r\n\r\n",
    "GET /a b HTTP/1.1\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: h\r\n\r\nGET /2 HTTP/1.1\r\nX{}: v\r\n\r\n",
    "POST / HTTP/1.1\r\nContent-Length: abc\r\n\r\n",
    "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx",
    "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
    "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    "CONNECT example.com:443 HTTP/1.1\r\n\r\n",
  };
  size_t i;
  for (i = 0; i < sizeof bad / sizeof bad[0]; i++) ASSERT_EQ(status_of(bad[i], strlen(bad[i]), NULL), 400);
  ASSERT_EQ(status_of("GET / HTTP/2.0\r\n\r\n", 18, NULL), 505);
}

static void test_a_failed_connection_refuses_every_later_feed(void) {
  static const char good[] = "GET / HTTP/1.1\r\n\r\n";
  eu_http_conn *c;
  seen s = {0};
  const char *reason = NULL;
  eu_buf_init(&s.text);
  ASSERT_OK(eu_http_conn_new(&c, NULL));
  ASSERT_OK(eu_http_feed(c, good, sizeof good - 1, collect, &s));
  ASSERT_EQ(eu_http_feed(c, "BLAH BLAH\r\n", 11, collect, &s), EU_EINVAL);
  ASSERT_EQ(eu_http_conn_error(c, &reason), 400);
  ASSERT(reason && reason[0]);
  ASSERT_EQ(eu_http_feed(c, good, sizeof good - 1, collect, &s), EU_EINVAL);
  ASSERT_EQ(eu_http_feed(c, NULL, 0, collect, &s), EU_EINVAL);
  ASSERT_EQ(s.count, 1);
  eu_http_conn_free(c);
  eu_buf_free(&s.text);
}

static void test_a_failing_callback_stops_the_feed(void) {
  static const char msg[] = "GET /1 HTTP/1.1\r\n\r\nGET /2 HTTP/1.1\r\n\r\nGET /3 HTTP/1.1\r\n\r\n";
  seen s = {0};
  int status = 0;
  eu_buf_init(&s.text);
  s.stop_at = 2;
  ASSERT_EQ(feed_all(msg, sizeof msg - 1, NULL, &s, &status), EU_EINVAL);
  ASSERT_EQ(s.count, 2);
  ASSERT_EQ(status, 500);
  eu_buf_free(&s.text);
}

static void test_large_heads_are_a_431(void) {
  eu_buf m;
  size_t i;
  eu_http_limits lim = {0};
  eu_buf_init(&m);
  /* one header value beyond the default 16 KiB */
  ASSERT_OK(eu_buf_puts(&m, "GET / HTTP/1.1\r\nX-Big: "));
  for (i = 0; i < 17 * 1024; i++) ASSERT_OK(eu_buf_putc(&m, 'a'));
  ASSERT_OK(eu_buf_puts(&m, "\r\n\r\n"));
  ASSERT_EQ(status_of(m.p, m.n, NULL), 431);
  /* a URL beyond it */
  eu_buf_reset(&m);
  ASSERT_OK(eu_buf_puts(&m, "GET /"));
  for (i = 0; i < 17 * 1024; i++) ASSERT_OK(eu_buf_putc(&m, 'u'));
  ASSERT_OK(eu_buf_puts(&m, " HTTP/1.1\r\n\r\n"));
  ASSERT_EQ(status_of(m.p, m.n, NULL), 431);
  /* a head just under a small limit passes, one byte more does not */
  lim.max_head = 1 + 3 + 1 + 4;  /* url "/", name "x-a", value "1", 4 for the line */
  ASSERT_EQ(status_of("GET / HTTP/1.1\r\nx-ab: 1\r\n\r\n", 27, &lim), 431);
  {
    seen s = {0};
    eu_buf_init(&s.text);
    ASSERT_OK(feed_all("GET / HTTP/1.1\r\nx-a: 1\r\n\r\n", 26, &lim, &s, NULL));
    ASSERT_EQ(s.count, 1);
    eu_buf_free(&s.text);
  }
  /* 101 headers against the default 100 */
  eu_buf_reset(&m);
  ASSERT_OK(eu_buf_puts(&m, "GET / HTTP/1.1\r\n"));
  for (i = 0; i < 101; i++) ASSERT_OK(eu_buf_printf(&m, "H%zu: v\r\n", i));
  ASSERT_OK(eu_buf_puts(&m, "\r\n"));
  ASSERT_EQ(status_of(m.p, m.n, NULL), 431);
  /* exactly 100 is fine */
  {
    seen s = {0};
    eu_buf_init(&s.text);
    eu_buf_reset(&m);
    ASSERT_OK(eu_buf_puts(&m, "GET / HTTP/1.1\r\n"));
    for (i = 0; i < 100; i++) ASSERT_OK(eu_buf_printf(&m, "H%zu: v\r\n", i));
    ASSERT_OK(eu_buf_puts(&m, "\r\n"));
    ASSERT_OK(feed_all(m.p, m.n, NULL, &s, NULL));
    ASSERT_EQ(s.count, 1);
    eu_buf_free(&s.text);
  }
  /* whitespace the limit does not count is still bounded, by http_parser */
  eu_buf_reset(&m);
  ASSERT_OK(eu_buf_puts(&m, "GET / HTTP/1.1\r\nX: "));
  for (i = 0; i < 90 * 1024; i++) ASSERT_OK(eu_buf_putc(&m, ' '));
  ASSERT_OK(eu_buf_puts(&m, "v\r\n\r\n"));
  ASSERT_EQ(status_of(m.p, m.n, NULL), 431);
  eu_buf_free(&m);
}

static void test_large_bodies_are_a_413(void) {
  eu_buf m;
  eu_http_limits lim = {0};
  size_t i;
  eu_http_conn *c;
  seen s = {0};
  eu_buf_init(&m);
  eu_buf_init(&s.text);
  /* announced by Content-Length: refused before any of it arrives */
  ASSERT_EQ(status_of("POST / HTTP/1.1\r\nContent-Length: 1048577\r\n\r\n", 44, NULL), 413);
  lim.max_body = 10;
  ASSERT_EQ(status_of("POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n", 39, &lim), 413);
  /* a request refused at its headers is never delivered, not even without its body */
  ASSERT(feed_all("POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n", 39, &lim, &s, NULL) < 0);
  ASSERT(feed_all("GET / HTTP/2.0\r\n\r\n", 18, NULL, &s, NULL) < 0);
  ASSERT_EQ(s.count, 0);
  ASSERT_OK(feed_all("POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789", 49, &lim, &s, NULL));
  ASSERT_EQ(s.count, 1);
  /* chunked: a chunk that announces too much, and small chunks that add up */
  ASSERT_EQ(status_of("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nb\r\n", 50, &lim), 413);
  ASSERT_OK(eu_buf_puts(&m, "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"));
  for (i = 0; i < 6; i++) ASSERT_OK(eu_buf_puts(&m, "2\r\nab\r\n"));
  ASSERT_OK(eu_buf_puts(&m, "0\r\n\r\n"));
  ASSERT_EQ(status_of(m.p, m.n, &lim), 413);
  /* the default 1 MiB, chunked, fed in pieces as a socket would */
  ASSERT_OK(eu_http_conn_new(&c, NULL));
  eu_buf_reset(&m);
  ASSERT_OK(eu_buf_puts(&m, "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"));
  ASSERT_OK(eu_http_feed(c, m.p, m.n, collect, &s));
  eu_buf_reset(&m);
  ASSERT_OK(eu_buf_puts(&m, "4000\r\n"));  /* 16 KiB chunks */
  for (i = 0; i < 0x4000; i++) ASSERT_OK(eu_buf_putc(&m, 'z'));
  ASSERT_OK(eu_buf_puts(&m, "\r\n"));
  for (i = 0; i < 64; i++) ASSERT_OK(eu_http_feed(c, m.p, m.n, collect, &s));  /* exactly 1 MiB */
  ASSERT_EQ(eu_http_feed(c, m.p, m.n, collect, &s), EU_EINVAL);
  ASSERT_EQ(eu_http_conn_error(c, NULL), 413);
  ASSERT_EQ(s.count, 1);
  eu_http_conn_free(c);
  eu_buf_free(&m);
  eu_buf_free(&s.text);
}

static void test_a_large_body_is_delivered_whole(void) {
  eu_buf m;
  seen s = {0};
  size_t i;
  eu_buf_init(&m);
  eu_buf_init(&s.text);
  ASSERT_OK(eu_buf_puts(&m, "PUT / HTTP/1.1\r\nContent-Length: 200000\r\n\r\n"));
  for (i = 0; i < 200000; i++) ASSERT_OK(eu_buf_putc(&m, (char)('a' + i % 26)));
  ASSERT_OK(eu_buf_puts(&m, "GET /after HTTP/1.1\r\n\r\n"));
  ASSERT_OK(feed_all(m.p, m.n, NULL, &s, NULL));
  ASSERT_EQ(s.count, 2);
  ASSERT_EQ(s.text.n, strlen("PUT /?|content-length=200000;|") + 200000 + strlen("|1.1|ka\n") +
                      strlen("GET /after?|||1.1|ka\n"));
  eu_buf_free(&m);
  eu_buf_free(&s.text);
}

static int count_only(void *ud, const eu_http_request *r) {
  (void)r;
  *(int *)ud += 1;
  return 0;
}

/* Mutated requests fed in random pieces: every outcome is a request or a
 * refusal with a status this layer gives, and never a crash or a leak
 * (run under ASan). Fixed seed: the same bytes every run. */
static void test_mutated_input_is_served_or_refused(void) {
  static const char *const seeds[] = {
    "GET /a?b=c HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n",
    "POST /p HTTP/1.1\r\nContent-Length: 5\r\n\r\nhelloGET / HTTP/1.0\r\n\r\n",
    "PUT /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nT: 1\r\n\r\n",
  };
  static const char alphabet[] = "\r\n :;/?#0123456789aAfF\t\x00\x7f\xff-";
  uint32_t x = 12345;
  char buf[256];
  int round, served = 0, refused = 0;
  eu_http_limits lim = {0};
  lim.max_head = 64;
  lim.max_body = 4;
  lim.max_headers = 3;
  for (round = 0; round < 20000; round++) {
    const char *seed = seeds[round % 3];
    size_t len = strlen(seed), i, at;
    int k, rc = 0, status, requests = 0;
    eu_http_conn *c;
    memcpy(buf, seed, len);
    for (k = 0; k < 1 + round % 4; k++) {
      x = x * 1103515245u + 12345u;
      i = (x >> 8) % len;
      x = x * 1103515245u + 12345u;
      buf[i] = alphabet[(x >> 8) % (sizeof alphabet - 1)];
    }
    ASSERT_OK(eu_http_conn_new(&c, round % 2 ? &lim : NULL));
    for (at = 0; at < len && rc == 0;) {
      size_t n;
      x = x * 1103515245u + 12345u;
      n = 1 + (x >> 8) % 16;
      if (n > len - at) n = len - at;
      rc = eu_http_feed(c, buf + at, n, count_only, &requests);
      at += n;
    }
    status = eu_http_conn_error(c, NULL);
    if (rc == 0) ASSERT_EQ(status, 0);
    else ASSERT(rc == EU_EINVAL && (status == 400 || status == 413 || status == 431 || status == 505));
    served += requests;
    refused += rc != 0;
    eu_http_conn_free(c);
  }
  ASSERT(served > 1000 && refused > 1000);  /* the mutations reach both outcomes */
}

static eu_http_header hdr(const char *name, const char *value) {
  eu_http_header h;
  h.name = name;
  h.name_len = strlen(name);
  h.value = value;
  h.value_len = strlen(value);
  return h;
}

static void test_the_response_writer_gives_exact_bytes(void) {
  eu_buf out;
  eu_http_header h[4];
  eu_buf_init(&out);
  ASSERT_OK(eu_http_write_response(&out, 200, NULL, NULL, 0, "hi", 2, 1));
  ASSERT_STR_EQ(out.p, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi");
  eu_buf_reset(&out);
  h[0] = hdr("Content-Type", "text/plain");
  h[1] = hdr("Date", "Sun, 29 Nov 2026 09:00:00 GMT");
  h[2] = hdr("content-length", "999");  /* the layer frames the message itself */
  h[3] = hdr("Connection", "keep-alive");
  ASSERT_OK(eu_http_write_response(&out, 404, NULL, h, 4, "nope\n", 5, 0));
  ASSERT_STR_EQ(out.p, "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\n"
                       "Date: Sun, 29 Nov 2026 09:00:00 GMT\r\n"
                       "Content-Length: 5\r\nConnection: close\r\n\r\nnope\n");
  /* responses append: two pipelined answers in one buffer */
  eu_buf_reset(&out);
  ASSERT_OK(eu_http_write_response(&out, 201, "Made", NULL, 0, NULL, 0, 1));
  ASSERT_OK(eu_http_write_response(&out, 204, NULL, NULL, 0, NULL, 0, 1));
  ASSERT_OK(eu_http_write_response(&out, 599, NULL, NULL, 0, "", 0, 1));
  ASSERT_STR_EQ(out.p, "HTTP/1.1 201 Made\r\nContent-Length: 0\r\n\r\n"
                       "HTTP/1.1 204 No Content\r\n\r\n"
                       "HTTP/1.1 599 \r\nContent-Length: 0\r\n\r\n");
  ASSERT_STR_EQ(eu_http_reason(413), "Content Too Large");
  ASSERT_STR_EQ(eu_http_reason(431), "Request Header Fields Too Large");
  ASSERT_STR_EQ(eu_http_reason(500), "Internal Server Error");
  eu_buf_free(&out);
}

static void test_the_response_writer_refuses_what_breaks_framing(void) {
  eu_buf out;
  eu_http_header h[2];
  eu_buf_init(&out);
  ASSERT_OK(eu_buf_puts(&out, "before"));
  h[0] = hdr("X-Ok", "v");
  h[1] = hdr("X-Evil", "a\r\nSet-Cookie: x=1");
  ASSERT_EQ(eu_http_write_response(&out, 200, NULL, h, 2, "", 0, 1), EU_EINVAL);
  h[1] = hdr("Bad Name", "v");
  ASSERT_EQ(eu_http_write_response(&out, 200, NULL, h, 2, "", 0, 1), EU_EINVAL);
  h[1] = hdr("", "v");
  ASSERT_EQ(eu_http_write_response(&out, 200, NULL, h, 2, "", 0, 1), EU_EINVAL);
  ASSERT_EQ(eu_http_write_response(&out, 200, "OK\r\nX: y", NULL, 0, "", 0, 1), EU_EINVAL);
  ASSERT_EQ(eu_http_write_response(&out, 99, NULL, NULL, 0, "", 0, 1), EU_EINVAL);
  ASSERT_EQ(eu_http_write_response(&out, 1000, NULL, NULL, 0, "", 0, 1), EU_EINVAL);
  ASSERT_EQ(eu_http_write_response(&out, 204, NULL, NULL, 0, "x", 1, 1), EU_EINVAL);
  ASSERT_EQ(eu_http_write_response(&out, 304, NULL, NULL, 0, "x", 1, 1), EU_EINVAL);
  ASSERT_STR_EQ(out.p, "before");  /* unchanged */
  eu_buf_free(&out);
}

/* What the writer writes, the parser reads back as the same message. */
static void test_a_written_response_has_the_framing_it_announces(void) {
  eu_buf out;
  eu_http_header h = hdr("X-Req", "1");
  const char *p;
  eu_buf_init(&out);
  ASSERT_OK(eu_http_write_response(&out, 200, NULL, &h, 1, "abc\r\n\r\nxyz", 10, 1));
  p = strstr(out.p, "\r\n\r\n");
  ASSERT(p != NULL);
  ASSERT_EQ(out.n - (size_t)(p + 4 - out.p), 10);
  ASSERT_CONTAINS(out.p, "Content-Length: 10\r\n");
  eu_buf_free(&out);
}

int main(void) {
  static const eu_test tests[] = {
    {"a simple GET gives method, path and query", test_a_simple_get},
    {"the request keeps the URL, and busy says a request is half read", test_the_request_gives_url_method_and_header_lookup},
    {"header_get finds the first value of a lowercase name", test_header_get_finds_the_first_value},
    {"a POST body comes whole by Content-Length", test_a_post_with_content_length},
    {"a chunked body is assembled and trailers are dropped", test_a_chunked_body_is_assembled},
    {"pipelined requests in one feed come out in order", test_pipelined_requests_come_out_in_order},
    {"a request split at any byte is the same request", test_a_request_split_at_any_byte_is_the_same},
    {"a refusal split at any byte is the same refusal", test_a_refusal_split_at_any_byte_is_the_same},
    {"header names are lowercased and repeated headers kept", test_header_names_are_lowercased_and_repeats_kept},
    {"keep-alive follows the version and Connection", test_keep_alive_follows_the_version_and_connection},
    {"bytes after a closing request are ignored", test_bytes_after_a_closing_request_are_ignored},
    {"an Upgrade is ignored and HTTP goes on", test_an_upgrade_is_ignored_and_http_goes_on},
    {"an upgrade taken over keeps the bytes after it", test_an_upgrade_taken_over_keeps_the_bytes_after_it},
    {"garbage is a 400, another HTTP version a 505", test_garbage_is_a_400},
    {"a failed connection refuses every later feed", test_a_failed_connection_refuses_every_later_feed},
    {"a failing callback stops the feed with a 500", test_a_failing_callback_stops_the_feed},
    {"a large head or too many headers is a 431", test_large_heads_are_a_431},
    {"a large body is a 413, by Content-Length or chunked", test_large_bodies_are_a_413},
    {"a large body within the limit is delivered whole", test_a_large_body_is_delivered_whole},
    {"mutated input is served or refused, never a crash", test_mutated_input_is_served_or_refused},
    {"the response writer gives exact bytes", test_the_response_writer_gives_exact_bytes},
    {"the response writer refuses what would break framing", test_the_response_writer_refuses_what_breaks_framing},
    {"a written response has the framing it announces", test_a_written_response_has_the_framing_it_announces},
  };
  return test_main(tests, sizeof tests / sizeof tests[0]);
}
