/*
 * fuzz_http.c: the request path of `eutaxy serve` (host/http.c).
 *
 * The first bytes pick the limits (the defaults, or small ones so the
 * refusals are reached) and a seed for how to cut the rest, the bytes a
 * client sends. The bytes are fed twice: whole, and in pieces of 1 to 64
 * bytes. Each outcome must be requests delivered and then, at most, one
 * clean refusal with a status the server can answer. And the two feeds must
 * agree, request for request and on whether the connection failed: how
 * bytes happen to arrive must change nothing else.
 *
 * Each delivered request is checked against http.h's promises (path,
 * query, lowercase NUL-terminated header names, a body within its limit)
 * and answered with eu_http_write_response, echoing its headers and body,
 * as a handler might. The response, when the writer accepts it, is parsed
 * back by http_parser and must frame exactly that body.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <http_parser.h>

#include "buf.h"
#include "eutaxy.h"
#include "fuzz.h"
#include "http.h"

#define CHECK(cond, ...)                                    \
  do {                                                      \
    if (!(cond)) {                                          \
      fprintf(stderr, "fuzz_http: %s: ", #cond);            \
      fprintf(stderr, __VA_ARGS__);                         \
      fprintf(stderr, "\n");                                \
      abort();                                              \
    }                                                       \
  } while (0)

typedef struct feed_ctx {
  eu_http_limits lim;
  eu_buf log;      /* every delivered request, serialized, to compare two feeds */
  int requests;
  int refuse_at;   /* the handler fails the n-th request (0: never) */
} feed_ctx;

/* A response parsed back: its body must be the one written. */
typedef struct reparse {
  eu_buf body;
  int complete;
} reparse;

static int rp_body(http_parser *p, const char *at, size_t len) {
  reparse *r = p->data;
  return eu_buf_put(&r->body, at, len) != EU_OK;
}

static int rp_complete(http_parser *p) {
  reparse *r = p->data;
  r->complete = 1;
  return 0;
}

static void check_response(const eu_buf *out, const char *body, size_t len, int status, int keep_alive) {
  http_parser p;
  http_parser_settings s;
  reparse r;
  size_t n;
  memset(&s, 0, sizeof s);
  s.on_body = rp_body;
  s.on_message_complete = rp_complete;
  eu_buf_init(&r.body);
  r.complete = 0;
  http_parser_init(&p, HTTP_RESPONSE);
  p.data = &r;
  n = http_parser_execute(&p, &s, out->p, out->n);
  CHECK(HTTP_PARSER_ERRNO(&p) == HPE_OK, "the response does not parse: %s\n%.*s",
        http_errno_description(HTTP_PARSER_ERRNO(&p)), (int)out->n, out->p);
  if (!r.complete && !keep_alive) http_parser_execute(&p, &s, NULL, 0);  /* close-delimited */
  CHECK(n == out->n, "the response has %zu bytes past its end", out->n - n);
  CHECK(r.complete, "the response is not complete");
  CHECK((int)p.status_code == status, "status %d written, %d read", status, (int)p.status_code);
  CHECK(r.body.n == len && (len == 0 || memcmp(r.body.p, body, len) == 0),
        "a body of %zu bytes written, %zu read", len, r.body.n);
  eu_buf_free(&r.body);
}

static void check_request(const feed_ctx *x, const eu_http_request *req) {
  size_t i, j;
  CHECK(req->method && *req->method, "no method");
  CHECK(req->path && req->path_len > 0 && req->path[req->path_len] == '\0', "a bad path");
  CHECK(strlen(req->path) <= req->path_len, "the path's length is wrong");
  CHECK(req->query && req->query[req->query_len] == '\0', "a bad query");
  CHECK(req->body && req->body[req->body_len] == '\0', "the body is not NUL-terminated");
  CHECK(req->body_len <= x->lim.max_body, "a body of %zu bytes past the limit of %zu", req->body_len,
        x->lim.max_body);
  CHECK(req->nheaders <= x->lim.max_headers, "%zu headers past the limit of %zu", req->nheaders,
        x->lim.max_headers);
  CHECK(req->http_major == 1, "HTTP/%d delivered", req->http_major);
  for (i = 0; i < req->nheaders; i++) {
    const eu_http_header *h = &req->headers[i];
    CHECK(h->name[h->name_len] == '\0' && h->value[h->value_len] == '\0', "a header is not NUL-terminated");
    CHECK(h->name_len > 0, "a header with no name");
    for (j = 0; j < h->name_len; j++)
      CHECK(!(h->name[j] >= 'A' && h->name[j] <= 'Z'), "header name %s is not lowercase", h->name);
    CHECK(h->value_len == 0 || (h->value[h->value_len - 1] != ' ' && h->value[h->value_len - 1] != '\t'),
          "header value with trailing whitespace");
  }
  if (req->nheaders > 0) CHECK(eu_http_header_get(req, req->headers[0].name) == req->headers[0].value,
                               "header_get does not find the first header");
}

static void log_request(feed_ctx *x, const eu_http_request *req) {
  size_t i;
  eu_buf_printf(&x->log, "%s %zu:", req->method, req->url_len);
  eu_buf_put(&x->log, req->url, req->url_len);
  eu_buf_printf(&x->log, " %d.%d ka=%d h=%zu", req->http_major, req->http_minor, req->keep_alive,
                req->nheaders);
  for (i = 0; i < req->nheaders; i++) {
    eu_buf_printf(&x->log, " %zu:", req->headers[i].name_len);
    eu_buf_put(&x->log, req->headers[i].name, req->headers[i].name_len);
    eu_buf_printf(&x->log, "=%zu:", req->headers[i].value_len);
    eu_buf_put(&x->log, req->headers[i].value, req->headers[i].value_len);
  }
  eu_buf_printf(&x->log, " b=%zu:", req->body_len);
  eu_buf_put(&x->log, req->body, req->body_len);
  eu_buf_putc(&x->log, '\n');
}

/* Debian's http_parser (2.9.4), which reads the responses back here, takes
 * any header name that begins with "transfer-encoding" ("transfer-encodingx")
 * for Transfer-Encoding; such headers are not echoed, or every response
 * that has one would look misframed to it. */
static size_t echoable(const eu_http_request *req, eu_http_header *out) {
  size_t i, n = 0;
  for (i = 0; i < req->nheaders; i++)
    if (strncmp(req->headers[i].name, "transfer-encoding", 17) != 0) out[n++] = req->headers[i];
  return n;
}

static int on_request(void *ud, const eu_http_request *req) {
  feed_ctx *x = ud;
  eu_buf out;
  eu_http_header *echo;
  size_t necho;
  int status = 200 + (int)(req->body_len % 7) * 50, rc;  /* 200, 250, ... 500: with and without bodies */
  check_request(x, req);
  log_request(x, req);
  x->requests++;
  if (x->refuse_at && x->requests == x->refuse_at) return 1;
  echo = malloc((req->nheaders + 1) * sizeof *echo);
  if (!echo) abort();
  necho = echoable(req, echo);
  eu_buf_init(&out);
  /* the request's headers as the response's: the writer must refuse what
   * could break its framing, and frame everything else */
  rc = eu_http_write_response(&out, status, NULL, echo, necho, req->body, req->body_len, req->keep_alive);
  free(echo);
  if (rc == EU_OK) check_response(&out, req->body, req->body_len, status, req->keep_alive);
  else CHECK(rc == EU_EINVAL && out.n == 0, "the writer failed with %d, leaving %zu bytes", rc, out.n);
  /* the body as a reason phrase, and a status that takes no body */
  eu_buf_reset(&out);
  rc = eu_http_write_response(&out, 204, req->body, NULL, 0, NULL, 0, 1);
  if (rc == EU_OK) check_response(&out, "", 0, 204, 1);
  eu_buf_free(&out);
  return 0;
}

typedef struct outcome {
  int rc, status, requests, closing;
} outcome;

static outcome feed(feed_ctx *x, const char *p, size_t len, uint64_t cuts) {
  eu_http_conn *c;
  outcome o;
  int status;
  const char *reason;
  if (eu_http_conn_new(&c, &x->lim) != EU_OK) abort();
  x->requests = 0;
  o.rc = 0;
  while (len > 0) {
    size_t n = cuts ? 1 + (size_t)(cuts % 64) : len;
    if (n > len) n = len;
    cuts = cuts ? cuts / 3 + (cuts % 5) * 0x9e3779b97f4a7c15ull : 0;
    o.rc = eu_http_feed(c, p, n, on_request, x);
    p += n;
    len -= n;
    if (o.rc != 0) break;
  }
  status = eu_http_conn_error(c, &reason);
  if (o.rc != 0) {
    CHECK(status == 400 || status == 413 || status == 431 || status == 500 || status == 505,
          "a refusal answered with %d", status);
    CHECK(reason && *reason, "a refusal without a reason");
    CHECK(eu_http_feed(c, "GET / HTTP/1.1\r\n\r\n", 18, on_request, x) == o.rc,
          "a failed connection took more bytes");
  } else {
    CHECK(status == 0, "status %d without a failed feed", status);
  }
  o.status = status;
  o.requests = x->requests;
  o.closing = eu_http_conn_closing(c);
  eu_http_conn_free(c);
  return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz f;
  feed_ctx a, b;
  outcome oa, ob;
  uint64_t cuts;
  size_t len;
  const char *p;
  unsigned mode;
  f.p = data;
  f.n = size;
  mode = fz_u8(&f);
  memset(&a, 0, sizeof a);
  if (mode & 1) {  /* small limits, so every refusal can be reached */
    a.lim.max_head = 16 + fz_u8(&f);
    a.lim.max_body = fz_u8(&f);
    a.lim.max_headers = 1 + fz_u8(&f) % 8;
  }
  a.refuse_at = (mode >> 1) & 3;
  cuts = fz_u64(&f) | 1;
  p = fz_bytes(&f, f.n, &len);
  {
    eu_http_conn *probe;  /* the limits as the connection completes them */
    if (eu_http_conn_new(&probe, &a.lim) != EU_OK) abort();
    eu_http_conn_free(probe);
    if (!a.lim.max_head) a.lim.max_head = EU_HTTP_MAX_HEAD;
    if (!a.lim.max_body) a.lim.max_body = EU_HTTP_MAX_BODY;
    if (!a.lim.max_headers) a.lim.max_headers = EU_HTTP_MAX_HEADERS;
  }
  b = a;
  eu_buf_init(&a.log);
  eu_buf_init(&b.log);
  oa = feed(&a, p, len, 0);
  ob = feed(&b, p, len, cuts);
  CHECK(oa.requests == ob.requests, "whole: %d requests, in pieces: %d", oa.requests, ob.requests);
  CHECK(a.log.n == b.log.n && (a.log.n == 0 || memcmp(a.log.p, b.log.p, a.log.n) == 0),
        "the requests differ between a whole feed and one in pieces");
  /* A request both malformed and too large may be refused for either,
   * depending on which the parser meets first in the bytes it has. */
  CHECK((oa.status == 0) == (ob.status == 0), "whole: status %d, in pieces: %d", oa.status, ob.status);
  CHECK(oa.closing == ob.closing, "whole: closing %d, in pieces: %d", oa.closing, ob.closing);
  eu_buf_free(&a.log);
  eu_buf_free(&b.log);
  return 0;
}
