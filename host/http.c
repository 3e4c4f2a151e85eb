/*
 * http.c: the HTTP/1.1 message layer (http.h).
 *
 * Owns each connection's http_parser and the buffers a request is assembled
 * in; writes responses into a buffer the caller owns. Must not touch sockets,
 * libuv, the clock or any global setting of http_parser (its max header size
 * is process-wide, so the head limit is counted here instead).
 *
 * Why requests are delivered outside http_parser_execute: the parser is
 * paused in on_message_complete and the request handed to the caller from
 * eu_http_feed, between two runs of the parser. The caller's code then never
 * runs inside the parser, a request that closes the connection stops the
 * parsing exactly at its end, and pipelined requests come out one by one.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <http_parser.h>

#include "eutaxy.h"
#include "http.h"

/* Buffers larger than this are given back after each request, so thousands
 * of idle connections do not each keep their largest body. */
#define KEEP_CAP (64 * 1024)

/* Where a header's strings lie in c->strs while it is being assembled. */
typedef struct hdr_span {
  size_t name_off, name_len, value_off, value_len;
} hdr_span;

enum { IN_NONE, IN_FIELD, IN_VALUE };

struct eu_http_conn {
  http_parser p;
  eu_http_limits lim;
  eu_buf url;
  eu_buf strs;        /* header names and values, then path and query, NUL after each */
  eu_buf body;
  hdr_span *spans;
  size_t nspans, spancap;
  eu_http_header *hdrs;  /* the spans as pointers, built when a request is delivered */
  size_t hdrcap;
  size_t head_bytes;
  int hstate;         /* IN_NONE, IN_FIELD, IN_VALUE */
  int trailing;       /* after the headers: trailer fields are counted, not kept */
  int busy;           /* a request has begun and is not complete */
  int ready;          /* a request is complete and waits to be delivered */
  int keep_alive;
  int closing;
  int code;           /* 0, or the negative code every feed returns from now on */
  int status;         /* the status to answer a failed connection with */
  const char *reason;
  int taken;          /* an upgrade took the connection over: bytes go to rest */
  eu_buf rest;
};

/* Marks the connection failed; returns 1 so a parser callback can return it. */
static int fail(eu_http_conn *c, int code, int status, const char *reason) {
  if (!c->code) {
    c->code = code;
    c->status = status;
    c->reason = reason;
  }
  return 1;
}

/* RFC 9110 tchar. http_parser as Debian builds it (not strict) lets a space
 * into a header name; "Bad Name: v" must be refused, not passed on. */
static int all_tchar(const char *s, size_t n) {
  size_t i;
  for (i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch <= 32 || ch >= 127 || strchr("\"(),/:;<=>?@[\\]{}", ch)) return 0;
  }
  return 1;
}

static int add_head(eu_http_conn *c, size_t n) {
  if (n > c->lim.max_head - c->head_bytes) {
    c->head_bytes = c->lim.max_head;
    return fail(c, EU_EINVAL, 431, "request header fields too large");
  }
  c->head_bytes += n;
  return 0;
}

static int nomem(eu_http_conn *c) {
  return fail(c, EU_ENOMEM, 500, "out of memory");
}

static void reset_request(eu_http_conn *c) {
  eu_buf *bufs[3];
  int i;
  bufs[0] = &c->url;
  bufs[1] = &c->strs;
  bufs[2] = &c->body;
  for (i = 0; i < 3; i++) {
    if (bufs[i]->cap > KEEP_CAP) eu_buf_free(bufs[i]);
    else eu_buf_reset(bufs[i]);
  }
  c->nspans = 0;
  c->head_bytes = 0;
  c->hstate = IN_NONE;
  c->trailing = 0;
  c->ready = 0;
}

/* Closes the header being assembled: NUL after its name and value, value
 * without trailing whitespace (http_parser drops only the leading one). */
static int end_header(eu_http_conn *c) {
  hdr_span *h;
  if (c->hstate == IN_NONE || c->trailing) {
    c->hstate = IN_NONE;
    return 0;
  }
  h = &c->spans[c->nspans - 1];
  if (c->hstate == IN_FIELD) {  /* a header with an empty value */
    if (eu_buf_putc(&c->strs, 0) != EU_OK) return nomem(c);
    h->value_off = c->strs.n;
    h->value_len = 0;
  }
  while (h->value_len > 0 &&
         (c->strs.p[h->value_off + h->value_len - 1] == ' ' ||
          c->strs.p[h->value_off + h->value_len - 1] == '\t'))
    h->value_len--;
  c->strs.n = h->value_off + h->value_len;
  if (eu_buf_putc(&c->strs, 0) != EU_OK) return nomem(c);
  c->hstate = IN_NONE;
  return 0;
}

static int on_message_begin(http_parser *p) {
  eu_http_conn *c = p->data;
  reset_request(c);
  c->busy = 1;
  return 0;
}

static int on_url(http_parser *p, const char *at, size_t len) {
  eu_http_conn *c = p->data;
  if (add_head(c, len)) return 1;
  if (eu_buf_put(&c->url, at, len) != EU_OK) return nomem(c);
  return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t len) {
  eu_http_conn *c = p->data;
  size_t i;
  if (c->hstate != IN_FIELD) {
    if (end_header(c)) return 1;
    if (add_head(c, 4)) return 1;
    if (!c->trailing) {
      hdr_span *h;
      if (c->nspans >= c->lim.max_headers)
        return fail(c, EU_EINVAL, 431, "too many header fields");
      if (c->nspans == c->spancap) {
        size_t cap = c->spancap ? c->spancap * 2 : 16;
        hdr_span *s = realloc(c->spans, cap * sizeof *s);
        if (!s) return nomem(c);
        c->spans = s;
        c->spancap = cap;
      }
      h = &c->spans[c->nspans++];
      h->name_off = c->strs.n;
      h->name_len = h->value_off = h->value_len = 0;
    }
    c->hstate = IN_FIELD;
  }
  if (add_head(c, len)) return 1;
  if (!all_tchar(at, len)) return fail(c, EU_EINVAL, 400, "invalid character in header name");
  if (c->trailing) return 0;
  if (eu_buf_reserve(&c->strs, len) != EU_OK) return nomem(c);
  for (i = 0; i < len; i++) {
    char ch = at[i];
    c->strs.p[c->strs.n++] = (ch >= 'A' && ch <= 'Z') ? (char)(ch - 'A' + 'a') : ch;
  }
  c->strs.p[c->strs.n] = '\0';
  c->spans[c->nspans - 1].name_len += len;
  return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len) {
  eu_http_conn *c = p->data;
  if (add_head(c, len)) return 1;
  if (c->trailing) {
    c->hstate = IN_VALUE;
    return 0;
  }
  if (c->hstate == IN_FIELD) {
    if (eu_buf_putc(&c->strs, 0) != EU_OK) return nomem(c);
    c->spans[c->nspans - 1].value_off = c->strs.n;
    c->hstate = IN_VALUE;
  }
  if (eu_buf_put(&c->strs, at, len) != EU_OK) return nomem(c);
  c->spans[c->nspans - 1].value_len += len;
  return 0;
}

static int on_headers_complete(http_parser *p) {
  eu_http_conn *c = p->data;
  if (end_header(c)) return -1;
  c->trailing = 1;
  /* Here 1 would tell http_parser "no body" and complete the request; a
   * refusal must be a callback error (-1) so the request is never delivered. */
  if (p->http_major != 1) {
    fail(c, EU_EINVAL, 505, "HTTP version not supported");
    return -1;
  }
  if (p->method == HTTP_CONNECT) {
    fail(c, EU_EINVAL, 400, "CONNECT is not supported");
    return -1;
  }
  if ((p->flags & F_CONTENTLENGTH) && p->content_length > c->lim.max_body) {
    fail(c, EU_EINVAL, 413, "request body too large");
    return -1;
  }
  c->keep_alive = http_should_keep_alive(p);
  return 0;
}

static int on_body(http_parser *p, const char *at, size_t len) {
  eu_http_conn *c = p->data;
  if (len > c->lim.max_body - c->body.n)
    return fail(c, EU_EINVAL, 413, "request body too large");
  if (eu_buf_put(&c->body, at, len) != EU_OK) return nomem(c);
  return 0;
}

/* A chunk announced larger than the room left is refused before it arrives. */
static int on_chunk_header(http_parser *p) {
  eu_http_conn *c = p->data;
  if (p->content_length > c->lim.max_body - c->body.n)
    return fail(c, EU_EINVAL, 413, "request body too large");
  return 0;
}

static int on_message_complete(http_parser *p) {
  eu_http_conn *c = p->data;
  if (end_header(c)) return 1;  /* a trailer, if the body was chunked */
  c->ready = 1;
  c->busy = 0;
  http_parser_pause(p, 1);
  return 0;
}

static const http_parser_settings settings = {
  on_message_begin, on_url, NULL, on_header_field, on_header_value,
  on_headers_complete, on_body, on_message_complete, on_chunk_header, NULL
};

/* Path and query of the request target: origin form "/p?q", "*", or the
 * absolute form a proxy would send ("http://h/p?q"). */
static int split_url(eu_http_conn *c, size_t *path_off, size_t *path_len,
                     size_t *query_off, size_t *query_len) {
  const char *u = c->url.p ? c->url.p : "";
  size_t n = c->url.n, ps = 0, pl, qs = 0, ql = 0, i;
  if (n > 0 && u[0] != '/' && !(n == 1 && u[0] == '*')) {
    struct http_parser_url pu;
    http_parser_url_init(&pu);
    if (n > 0xffff || http_parser_parse_url(u, n, 0, &pu) != 0)
      return fail(c, EU_EINVAL, 400, "invalid request target");
    if (pu.field_set & (1 << UF_PATH)) {
      ps = pu.field_data[UF_PATH].off;
      n = ps + pu.field_data[UF_PATH].len;
    } else {
      ps = n = 0;
    }
    if (pu.field_set & (1 << UF_QUERY)) {
      qs = pu.field_data[UF_QUERY].off;
      ql = pu.field_data[UF_QUERY].len;
    }
    pl = n - ps;
  } else {
    for (i = 0; i < n && u[i] != '?' && u[i] != '#'; i++) {}
    pl = i;
    if (i < n && u[i] == '?') {
      qs = i + 1;
      for (i = qs; i < n && u[i] != '#'; i++) {}
      ql = i - qs;
    }
  }
  *path_off = c->strs.n;
  *path_len = pl ? pl : 1;
  if (eu_buf_put(&c->strs, pl ? u + ps : "/", *path_len) != EU_OK ||
      eu_buf_putc(&c->strs, 0) != EU_OK)
    return nomem(c);
  *query_off = c->strs.n;
  *query_len = ql;
  if (eu_buf_put(&c->strs, u + qs, ql) != EU_OK || eu_buf_putc(&c->strs, 0) != EU_OK)
    return nomem(c);
  return 0;
}

static int deliver(eu_http_conn *c, eu_http_on_request on_request, void *ud) {
  eu_http_request r;
  size_t po, pl, qo, ql, i;
  int rc;
  if (split_url(c, &po, &pl, &qo, &ql)) return c->code;
  if (c->nspans > c->hdrcap) {
    eu_http_header *h = realloc(c->hdrs, c->nspans * sizeof *h);
    if (!h) {
      nomem(c);
      return c->code;
    }
    c->hdrs = h;
    c->hdrcap = c->nspans;
  }
  /* strs no longer grows: its pointers are stable from here */
  for (i = 0; i < c->nspans; i++) {
    c->hdrs[i].name = c->strs.p + c->spans[i].name_off;
    c->hdrs[i].name_len = c->spans[i].name_len;
    c->hdrs[i].value = c->strs.p + c->spans[i].value_off;
    c->hdrs[i].value_len = c->spans[i].value_len;
  }
  memset(&r, 0, sizeof r);
  r.method = http_method_str((enum http_method)c->p.method);
  r.url = c->url.p ? c->url.p : "";
  r.url_len = c->url.n;
  r.path = c->strs.p + po;
  r.path_len = pl;
  r.query = c->strs.p + qo;
  r.query_len = ql;
  r.headers = c->hdrs;
  r.nheaders = c->nspans;
  r.body = c->body.p ? c->body.p : "";
  r.body_len = c->body.n;
  r.http_major = c->p.http_major;
  r.http_minor = c->p.http_minor;
  r.keep_alive = c->keep_alive;
  rc = on_request(ud, &r);
  if (rc == EU_HTTP_TAKEN && c->p.upgrade) {
    reset_request(c);
    return rc;
  }
  if (rc != 0) {
    fail(c, rc < 0 ? rc : EU_EINVAL, 500, "request handler failed");
    return c->code;
  }
  reset_request(c);
  if (!c->keep_alive) c->closing = 1;
  return 0;
}

int eu_http_conn_new(eu_http_conn **out, const eu_http_limits *limits) {
  eu_http_conn *c = calloc(1, sizeof *c);
  *out = NULL;
  if (!c) return EU_ENOMEM;
  if (limits) c->lim = *limits;
  if (!c->lim.max_head) c->lim.max_head = EU_HTTP_MAX_HEAD;
  if (!c->lim.max_body) c->lim.max_body = EU_HTTP_MAX_BODY;
  if (!c->lim.max_headers) c->lim.max_headers = EU_HTTP_MAX_HEADERS;
  eu_buf_init(&c->url);
  eu_buf_init(&c->strs);
  eu_buf_init(&c->body);
  http_parser_init(&c->p, HTTP_REQUEST);
  c->p.data = c;
  *out = c;
  return EU_OK;
}

void eu_http_conn_free(eu_http_conn *c) {
  if (!c) return;
  eu_buf_free(&c->url);
  eu_buf_free(&c->strs);
  eu_buf_free(&c->body);
  eu_buf_free(&c->rest);
  free(c->spans);
  free(c->hdrs);
  free(c);
}

int eu_http_feed(eu_http_conn *c, const char *data, size_t len,
                 eu_http_on_request on_request, void *ud) {
  if (c->code) return c->code;
  if (c->taken) {
    if (len && eu_buf_put(&c->rest, data, len) != EU_OK) nomem(c);
    return c->code;
  }
  while (len > 0 && !c->closing) {
    size_t n = http_parser_execute(&c->p, &settings, data, len);
    enum http_errno e = HTTP_PARSER_ERRNO(&c->p);
    data += n;
    len -= n;
    if (e == HPE_PAUSED) {
      int rc;
      http_parser_pause(&c->p, 0);
      if (!c->ready) continue;
      rc = deliver(c, on_request, ud);
      if (rc == EU_HTTP_TAKEN && c->p.upgrade) {
        c->taken = 1;
        if (len && eu_buf_put(&c->rest, data, len) != EU_OK) nomem(c);
        return c->code;
      }
      if (rc != 0) return rc;
      if (c->p.upgrade) {
        /* The server speaks no other protocol: an Upgrade is ignored and
         * the bytes after the request are HTTP again. */
        http_parser_init(&c->p, HTTP_REQUEST);
        c->p.data = c;
      }
      continue;
    }
    if (e != HPE_OK) {
      if (e == HPE_HEADER_OVERFLOW) fail(c, EU_EINVAL, 431, "request header fields too large");
      else fail(c, EU_EINVAL, 400, http_errno_description(e));
      return c->code;
    }
    if (c->code) return c->code;
    if (n == 0) {  /* no progress without an error: refuse rather than spin */
      fail(c, EU_EINVAL, 400, "unparsable request");
      return c->code;
    }
  }
  return c->code;
}

int eu_http_conn_error(const eu_http_conn *c, const char **reason) {
  if (reason) *reason = c->code ? c->reason : NULL;
  return c->code ? c->status : 0;
}

eu_buf *eu_http_conn_rest(eu_http_conn *c) {
  return c->taken ? &c->rest : NULL;
}

int eu_http_conn_busy(const eu_http_conn *c) {
  return c->busy;
}

int eu_http_conn_closing(const eu_http_conn *c) {
  return c->closing;
}

const char *eu_http_header_get(const eu_http_request *req, const char *name) {
  size_t i;
  for (i = 0; i < req->nheaders; i++)
    if (strcmp(req->headers[i].name, name) == 0) return req->headers[i].value;
  return NULL;
}

const char *eu_http_reason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 101: return "Switching Protocols";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 411: return "Length Required";
    case 412: return "Precondition Failed";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 416: return "Range Not Satisfiable";
    case 417: return "Expectation Failed";
    case 422: return "Unprocessable Content";
    case 426: return "Upgrade Required";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    case 507: return "Insufficient Storage";
    default: return "";
  }
}

/* A token (RFC 9110), as a header name must be. */
static int is_token(const char *s, size_t n) {
  return n > 0 && all_tchar(s, n);
}

/* Text that cannot end a line or the message early. */
static int is_safe_text(const char *s, size_t n) {
  size_t i;
  for (i = 0; i < n; i++)
    if (s[i] == '\r' || s[i] == '\n' || s[i] == '\0') return 0;
  return 1;
}

int eu_http_header_ok(const eu_http_header *h) {
  return is_token(h->name, h->name_len) && is_safe_text(h->value, h->value_len);
}

static int name_is(const eu_http_header *h, const char *name) {
  return h->name_len == strlen(name) && strncasecmp(h->name, name, h->name_len) == 0;
}

int eu_http_write_response(eu_buf *out, int status, const char *reason,
                           const eu_http_header *headers, size_t nheaders,
                           const char *body, size_t len, int keep_alive) {
  size_t start = out->n, i;
  int no_body = (status >= 100 && status < 200) || status == 204 || status == 304;
  int rc;
  if (status < 100 || status > 999) return EU_EINVAL;
  if (no_body && len > 0) return EU_EINVAL;
  if (!reason) reason = eu_http_reason(status);
  if (!is_safe_text(reason, strlen(reason))) return EU_EINVAL;
  for (i = 0; i < nheaders; i++)
    if (!eu_http_header_ok(&headers[i])) return EU_EINVAL;
  rc = eu_buf_printf(out, "HTTP/1.1 %d %s\r\n", status, reason);
  for (i = 0; rc == EU_OK && i < nheaders; i++) {
    const eu_http_header *h = &headers[i];
    if (name_is(h, "content-length") || name_is(h, "transfer-encoding") ||
        name_is(h, "connection"))
      continue;
    if ((rc = eu_buf_put(out, h->name, h->name_len)) != EU_OK) break;
    if ((rc = eu_buf_put(out, ": ", 2)) != EU_OK) break;
    if ((rc = eu_buf_put(out, h->value, h->value_len)) != EU_OK) break;
    rc = eu_buf_put(out, "\r\n", 2);
  }
  if (rc == EU_OK && !no_body) rc = eu_buf_printf(out, "Content-Length: %zu\r\n", len);
  if (rc == EU_OK && !keep_alive) rc = eu_buf_puts(out, "Connection: close\r\n");
  if (rc == EU_OK) rc = eu_buf_put(out, "\r\n", 2);
  if (rc == EU_OK && len > 0) rc = eu_buf_put(out, body, len);
  if (rc != EU_OK) {
    out->n = start;
    if (out->p) out->p[start] = '\0';
    return rc;
  }
  return EU_OK;
}
