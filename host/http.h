/*
 * http.h: the HTTP/1.1 message layer of `eutaxy serve` (issue 5).
 *
 * Owns the bytes of one connection's requests and the bytes of the responses
 * it writes: parsing with http_parser, request framing (Content-Length and
 * chunked bodies), keep-alive, pipelining, size limits, and response framing.
 * It must not touch sockets, libuv, clocks or anything global: a connection
 * is fed bytes and hands back whole requests, so every behaviour can be
 * tested (and fuzzed) one byte at a time. The server around it decides when
 * to read, write, time out and close.
 *
 * A connection (eu_http_conn) is a long-lived handle. eu_http_feed gives it
 * the bytes that arrived, in any split; each request completed by them is
 * delivered to the callback, in order. After an error the feed returns a
 * negative EU_E* code, eu_http_conn_error says which status to answer with,
 * and the connection only refuses from then on: answer, then close it.
 */
#ifndef EUTAXY_HTTP_H
#define EUTAXY_HTTP_H

#include <stddef.h>

#include "buf.h"

/* Defaults for the limits; a zero field of eu_http_limits takes these. */
#define EU_HTTP_MAX_HEAD (16 * 1024)      /* request line and headers: 431 beyond */
#define EU_HTTP_MAX_BODY (1024 * 1024)    /* body, once assembled: 413 beyond */
#define EU_HTTP_MAX_HEADERS 100           /* header lines: 431 beyond */

typedef struct eu_http_limits {
  /* Bytes of the URL, the header names and values, plus 4 per header line
   * (separator and line end). Whitespace the parser skips is bounded by
   * http_parser's own 80 KiB limit, also answered with 431. Trailers of a
   * chunked body count here too. */
  size_t max_head;
  size_t max_body;
  size_t max_headers;
} eu_http_limits;

/* One header. In a request, name is lowercased and both strings are
 * NUL-terminated; for eu_http_write_response only the lengths count. */
typedef struct eu_http_header {
  const char *name;
  size_t name_len;
  const char *value;
  size_t value_len;
} eu_http_header;

/* A complete request. Every pointer is valid during the callback only. */
typedef struct eu_http_request {
  const char *method;              /* "GET", "POST", ... */
  const char *url;                 /* the request target as sent */
  size_t url_len;
  const char *path;                /* "/a/b" (the target up to '?' or '#'); "*" for OPTIONS * */
  size_t path_len;
  const char *query;               /* after '?', without it; "" when none */
  size_t query_len;
  const eu_http_header *headers;   /* in the order sent, repeated names kept */
  size_t nheaders;
  const char *body;                /* assembled (chunks joined); NUL-terminated */
  size_t body_len;
  int http_major, http_minor;
  int keep_alive;                  /* 1.1 unless "Connection: close"; 1.0 only with "keep-alive" */
} eu_http_request;

/* Called for each complete request. Returns 0 to go on; anything else stops
 * the feed, which returns that value, and fails the connection (500), but
 * EU_HTTP_TAKEN. It must not feed or free the connection. */
typedef int (*eu_http_on_request)(void *ud, const eu_http_request *req);

/* What on_request returns for a request with an Upgrade header that may
 * take the connection over (a WebSocket upgrade): no more requests are
 * read, and the bytes after it, those of later feeds too, are kept for the
 * new protocol (eu_http_conn_rest). For a request without Upgrade it is an
 * error as any other value is. */
#define EU_HTTP_TAKEN 1

typedef struct eu_http_conn eu_http_conn;

/* limits may be NULL (all defaults). Returns 0 or EU_ENOMEM. */
int eu_http_conn_new(eu_http_conn **out, const eu_http_limits *limits);
void eu_http_conn_free(eu_http_conn *c);

/* Parses len bytes, delivering every request they complete. Returns 0, or
 * a negative code once the connection has failed: EU_EINVAL for a request
 * to refuse (malformed, too large), EU_ENOMEM, or the callback's value. A
 * failed connection refuses every later feed with the same code. Bytes after
 * a request that does not keep the connection alive are ignored. */
int eu_http_feed(eu_http_conn *c, const char *data, size_t len,
                 eu_http_on_request on_request, void *ud);

/* The bytes after a request on_request took the connection over with, or
 * NULL when none did: the caller may take them (and reset the buffer). */
eu_buf *eu_http_conn_rest(eu_http_conn *c);

/* The status to answer a failed connection with (400, 413, 431, 500, 505),
 * or 0 when it has not failed; *reason (if not NULL) gets a short reason. */
int eu_http_conn_error(const eu_http_conn *c, const char **reason);

/* 1 while a request has begun and is not complete (the header timeout
 * applies), 0 between requests (the idle timeout applies). */
int eu_http_conn_busy(const eu_http_conn *c);

/* 1 once a request asked to close the connection: the server answers the
 * requests it has and closes. */
int eu_http_conn_closing(const eu_http_conn *c);

/* The first value of a header (name lowercase), or NULL. */
const char *eu_http_header_get(const eu_http_request *req, const char *name);

/* The standard reason phrase of a status, or "" for one it does not know. */
const char *eu_http_reason(int status);

/* 1 when a header can be written in a response: its name a token (RFC
 * 9110), its value free of CR, LF and NUL, which could end it early. */
int eu_http_header_ok(const eu_http_header *h);

/* Appends one response to out: "HTTP/1.1 <status> <reason>", the caller's
 * headers in order, Content-Length, "Connection: close" unless keep_alive,
 * a blank line and the body. reason NULL takes the standard phrase. The
 * layer frames the message itself, so Content-Length, Transfer-Encoding and
 * Connection headers of the caller are dropped; it adds no Date (a caller
 * that wants one passes it). 1xx, 204 and 304 get no Content-Length and
 * must have no body. Returns 0, EU_ENOMEM, or EU_EINVAL for a status out of
 * 100..999, a body where none is allowed, or a reason, name or value that
 * could break the framing (CR, LF, NUL; a name that is not a token); out is
 * then unchanged. */
int eu_http_write_response(eu_buf *out, int status, const char *reason,
                           const eu_http_header *headers, size_t nheaders,
                           const char *body, size_t len, int keep_alive);

#endif
