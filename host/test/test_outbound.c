/*
 * test_outbound.c: outbound requests (outbound.c) against a server in this
 * process, on the same loop: a loopback listener that keeps the bytes each
 * request brings and answers with the bytes a test gives it (or never, or
 * after closing). So what goes out and how each answer comes back are seen
 * byte for byte, with no other process.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "eutaxy.h"
#include "outbound.h"
#include "test.h"

/* The server: one answer for every connection, sent once a whole request
 * (head and Content-Length body) has come; NULL answers nothing. */
typedef struct server {
  uv_tcp_t tcp;
  int port;
  const char *answer;
  eu_buf got;               /* the bytes of the last request */
} server;

typedef struct peer {
  uv_tcp_t tcp;
  server *srv;
  eu_buf in;
  int answered;
} peer;

/* What a request ended with. */
typedef struct outcome {
  int done;
  char error_name[32];
  char message[1024];
  int retryable, status;
  char status_text[64];
  eu_buf headers;           /* "name=value;" each */
  eu_buf body;
} outcome;

static uv_loop_t loop;
static char buf[64 * 1024];

static void on_alloc(uv_handle_t *h, size_t n, uv_buf_t *b) {
  (void)h;
  (void)n;
  *b = uv_buf_init(buf, sizeof buf);
}

static void on_peer_closed(uv_handle_t *h) {
  peer *p = h->data;
  eu_buf_free(&p->in);
  free(p);
}

static void on_written(uv_write_t *w, int status) {
  peer *p = w->data;
  (void)status;
  free(w);
  uv_close((uv_handle_t *)&p->tcp, on_peer_closed);
}

/* Whether in holds a whole request: its head and as much body as it says. */
static int whole(const eu_buf *in) {
  const char *end = in->p ? strstr(in->p, "\r\n\r\n") : NULL, *cl;
  size_t need;
  if (!end) return 0;
  need = (size_t)(end + 4 - in->p);
  if ((cl = strstr(in->p, "Content-Length: ")) != NULL && cl < end) need += (size_t)atol(cl + 16);
  return in->n >= need;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
  peer *p = s->data;
  if (n < 0) {
    if (!uv_is_closing((uv_handle_t *)s)) uv_close((uv_handle_t *)s, on_peer_closed);
    return;
  }
  ASSERT_OK(eu_buf_put(&p->in, b->base, (size_t)n));
  if (p->answered || !whole(&p->in)) return;
  p->answered = 1;
  eu_buf_reset(&p->srv->got);
  ASSERT_OK(eu_buf_put(&p->srv->got, p->in.p, p->in.n));
  if (p->srv->answer) {
    uv_write_t *w = malloc(sizeof *w);
    uv_buf_t out = uv_buf_init((char *)p->srv->answer, (unsigned)strlen(p->srv->answer));
    ASSERT(w);
    w->data = p;
    ASSERT_EQ(uv_write(w, s, &out, 1, on_written), 0);
  }
}

static void on_connection(uv_stream_t *l, int status) {
  peer *p = calloc(1, sizeof *p);
  ASSERT(p && status == 0);
  p->srv = l->data;
  eu_buf_init(&p->in);
  uv_tcp_init(&loop, &p->tcp);
  p->tcp.data = p;
  ASSERT_EQ(uv_accept(l, (uv_stream_t *)&p->tcp), 0);
  uv_read_start((uv_stream_t *)&p->tcp, on_alloc, on_read);
}

static void server_start(server *s, const char *answer) {
  struct sockaddr_in addr;
  struct sockaddr_storage bound;
  int len = sizeof bound;
  memset(s, 0, sizeof *s);
  s->answer = answer;
  eu_buf_init(&s->got);
  uv_tcp_init(&loop, &s->tcp);
  s->tcp.data = s;
  uv_ip4_addr("127.0.0.1", 0, &addr);
  ASSERT_EQ(uv_tcp_bind(&s->tcp, (const struct sockaddr *)&addr, 0), 0);
  ASSERT_EQ(uv_listen((uv_stream_t *)&s->tcp, 16, on_connection), 0);
  uv_tcp_getsockname(&s->tcp, (struct sockaddr *)&bound, &len);
  s->port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
}

static void server_stop(server *s) {
  uv_close((uv_handle_t *)&s->tcp, NULL);
  eu_buf_free(&s->got);
}

static void on_result(void *ud, const eu_outbound_result *r) {
  outcome *o = ud;
  size_t i;
  o->done = 1;
  if (r->error_name) {
    snprintf(o->error_name, sizeof o->error_name, "%s", r->error_name);
    snprintf(o->message, sizeof o->message, "%s", r->message);
    o->retryable = r->retryable;
    return;
  }
  o->status = r->status;
  snprintf(o->status_text, sizeof o->status_text, "%s", r->status_text);
  for (i = 0; i < r->nheaders; i++)
    ASSERT_OK(eu_buf_printf(&o->headers, "%.*s=%.*s;", (int)r->headers[i].name_len, r->headers[i].name,
                            (int)r->headers[i].value_len, r->headers[i].value));
  ASSERT_OK(eu_buf_put(&o->body, r->body, r->body_len));
}

static void outcome_init(outcome *o) {
  memset(o, 0, sizeof *o);
  eu_buf_init(&o->headers);
  eu_buf_init(&o->body);
  ASSERT_OK(eu_buf_puts(&o->headers, ""));
  ASSERT_OK(eu_buf_puts(&o->body, ""));
}

static void outcome_free(outcome *o) {
  eu_buf_free(&o->headers);
  eu_buf_free(&o->body);
}

static eu_outbound *ob;

/* The handle a test's requests go through, with opts (NULL: the defaults). */
static void open_outbound(const eu_outbound_opts *opts) {
  eu_outbound_opts none;
  char err[EU_ERRLEN];
  memset(&none, 0, sizeof none);
  ASSERT_OK(eu_outbound_new(&ob, &loop, opts ? opts : &none, err, sizeof err));
}

/* Sends req and runs the loop until it ends. */
static void run(const eu_outbound_request *req, outcome *o) {
  char err[EU_ERRLEN];
  outcome_init(o);
  ASSERT_OK(eu_outbound_send(ob, req, on_result, o, err, sizeof err));
  ASSERT_EQ(o->done, 0);  /* never from within the send */
  ASSERT_EQ(eu_outbound_pending(ob), 1);
  while (!o->done) uv_run(&loop, UV_RUN_ONCE);
  ASSERT_EQ(eu_outbound_pending(ob), 0);
}

/* Closes the handle and the server; the loop ends once every handle has closed. */
static void finish(server *s) {
  eu_outbound_close(ob);
  ob = NULL;
  if (s) server_stop(s);
  uv_run(&loop, UV_RUN_DEFAULT);
}

static eu_outbound_request get(const char *url) {
  eu_outbound_request r;
  memset(&r, 0, sizeof r);
  r.method = "GET";
  r.url = url;
  return r;
}

static void test_a_response_comes_back_whole(void) {
  server s;
  outcome o;
  char url[64];
  eu_outbound_request req;
  server_start(&s, "HTTP/1.1 203 Quite Fine\r\nContent-Length: 5\r\nX-One: a\r\nx-one: b\r\n"
                   "X-Fold: first\r\n  second\r\nBad Name: dropped\r\nX-Empty:\r\n\r\nhello");
  snprintf(url, sizeof url, "http://127.0.0.1:%d/path?q=1", s.port);
  req = get(url);
  open_outbound(NULL);
  run(&req, &o);
  ASSERT_STR_EQ(o.error_name, "");
  ASSERT_EQ(o.status, 203);
  ASSERT_STR_EQ(o.status_text, "Quite Fine");
  ASSERT_STR_EQ(o.headers.p, "content-length=5;x-one=a;x-one=b;x-fold=first second;x-empty=;");
  ASSERT_STR_EQ(o.body.p, "hello");
  ASSERT_CONTAINS(s.got.p, "GET /path?q=1 HTTP/1.1\r\n");
  outcome_free(&o);
  finish(&s);
}

static void test_a_request_goes_out_as_given(void) {
  static const eu_http_header hs[] = {
    {"X-Token", 7, "t-1", 3}, {"Content-Length", 14, "999", 3}, {"X-Blank", 7, "", 0},
  };
  server s;
  outcome o;
  char url[64], body[2000];
  eu_outbound_request req;
  memset(body, 'b', sizeof body);
  server_start(&s, "HTTP/1.1 204 No Content\r\n\r\n");
  snprintf(url, sizeof url, "http://127.0.0.1:%d/p", s.port);
  memset(&req, 0, sizeof req);
  req.method = "PATCH";
  req.url = url;
  req.headers = hs;
  req.nheaders = 3;
  req.body = body;
  req.body_len = sizeof body;
  open_outbound(NULL);
  run(&req, &o);
  ASSERT_EQ(o.status, 204);
  ASSERT_CONTAINS(s.got.p, "PATCH /p HTTP/1.1\r\n");
  ASSERT_CONTAINS(s.got.p, "\r\nX-Token: t-1\r\n");
  ASSERT_CONTAINS(s.got.p, "\r\nX-Blank:\r\n");
  ASSERT_CONTAINS(s.got.p, "\r\nContent-Length: 2000\r\n");
  ASSERT(!strstr(s.got.p, ": 999\r\n"));  /* the given length's value, not the Host's port */
  ASSERT(!strstr(s.got.p, "Accept"));
  ASSERT(!strstr(s.got.p, "Expect"));
  ASSERT(!strstr(s.got.p, "Content-Type"));
  outcome_free(&o);
  finish(&s);
}

static void test_a_body_past_the_limit_is_refused(void) {
  server s;
  outcome o;
  char url[64];
  eu_outbound_opts opts;
  eu_outbound_request req;
  memset(&opts, 0, sizeof opts);
  opts.max_bytes = 10;
  /* no length said: the body ends when the connection does */
  server_start(&s, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n0123456789abcdef");
  snprintf(url, sizeof url, "http://127.0.0.1:%d/big", s.port);
  req = get(url);
  open_outbound(&opts);
  run(&req, &o);
  ASSERT_STR_EQ(o.error_name, "NetworkError");
  ASSERT_EQ(o.retryable, 0);
  ASSERT_CONTAINS(o.message, "GET http://127.0.0.1:");
  ASSERT_CONTAINS(o.message, "/big: the response's body is larger than 10 bytes");
  outcome_free(&o);
  /* one at the limit is taken */
  s.answer = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789";
  run(&req, &o);
  ASSERT_STR_EQ(o.body.p, "0123456789");
  outcome_free(&o);
  finish(&s);
}

static void test_no_answer_is_a_timeout(void) {
  server s;
  outcome o;
  char url[64];
  eu_outbound_opts opts;
  eu_outbound_request req;
  memset(&opts, 0, sizeof opts);
  opts.timeout_ms = 50;
  server_start(&s, NULL);
  snprintf(url, sizeof url, "http://127.0.0.1:%d/hang", s.port);
  req = get(url);
  open_outbound(&opts);
  run(&req, &o);
  ASSERT_STR_EQ(o.error_name, "TimeoutError");
  ASSERT_EQ(o.retryable, 1);
  ASSERT_CONTAINS(o.message, "/hang: no answer within 50 ms");
  outcome_free(&o);
  finish(&s);
}

static void test_a_refused_connection_is_retryable(void) {
  server s;
  outcome o;
  char url[64];
  eu_outbound_request req;
  server_start(&s, NULL);
  snprintf(url, sizeof url, "http://user:secret@127.0.0.1:%d/x", s.port);
  server_stop(&s);
  uv_run(&loop, UV_RUN_DEFAULT);  /* the port is free again */
  req = get(url);
  open_outbound(NULL);
  run(&req, &o);
  ASSERT_STR_EQ(o.error_name, "NetworkError");
  ASSERT_EQ(o.retryable, 1);
  ASSERT_CONTAINS(o.message, "cannot connect");
  ASSERT(!strstr(o.message, "secret"));
  outcome_free(&o);
  finish(NULL);
}

static void test_another_scheme_is_refused_at_once(void) {
  eu_outbound_request req = get("ftp://127.0.0.1/x");
  char err[EU_ERRLEN];
  open_outbound(NULL);
  ASSERT_EQ(eu_outbound_send(ob, &req, on_result, NULL, err, sizeof err), EU_EINVAL);
  ASSERT_STR_EQ(err, "unsupported scheme in ftp://127.0.0.1/x: only http: and https: are fetched");
  ASSERT_EQ(eu_outbound_pending(ob), 0);
  finish(NULL);
}

static void test_closing_abandons_what_is_in_flight(void) {
  server s;
  outcome o;
  char url[64], err[EU_ERRLEN];
  eu_outbound_request req;
  server_start(&s, NULL);
  snprintf(url, sizeof url, "http://127.0.0.1:%d/hang", s.port);
  req = get(url);
  outcome_init(&o);
  open_outbound(NULL);
  ASSERT_OK(eu_outbound_send(ob, &req, on_result, &o, err, sizeof err));
  while (!s.got.n) uv_run(&loop, UV_RUN_ONCE);  /* the request has arrived */
  finish(&s);
  ASSERT_EQ(o.done, 0);
  outcome_free(&o);
}

int main(void) {
  static const eu_test tests[] = {
    {"a response comes back whole: status, reason, headers in order, body", test_a_response_comes_back_whole},
    {"a request goes out as given, with nothing curl would add", test_a_request_goes_out_as_given},
    {"a body past the limit is refused, one at the limit taken", test_a_body_past_the_limit_is_refused},
    {"no answer within the timeout is a TimeoutError", test_no_answer_is_a_timeout},
    {"a refused connection is retryable and its message shows no password", test_a_refused_connection_is_retryable},
    {"another scheme is refused at once", test_another_scheme_is_refused_at_once},
    {"closing abandons what is in flight", test_closing_abandons_what_is_in_flight},
  };
  int rc;
  uv_loop_init(&loop);
  rc = test_main(tests, sizeof tests / sizeof tests[0]);
  uv_loop_close(&loop);
  return rc;
}
