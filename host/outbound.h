/*
 * outbound.h: HTTP and HTTPS requests out of `eutaxy serve`, on its loop.
 *
 * Owns libcurl's multi handle and the libuv handles that drive it: a poll
 * per socket curl asks to watch and one timer for curl's timeouts, as
 * curl's own multi-uv.c example does it. Nothing here blocks or starts a
 * thread of its own: a request is added to the multi handle and its result
 * comes back through a callback from the loop. (curl resolves names that
 * are not addresses on a resolver thread of its own; an address such as
 * 127.0.0.1 is never resolved.)
 *
 * It knows nothing of worlds, isolates or Lua: serve.c turns an isolate's
 * wire request into an eu_outbound_request and the result back into a wire
 * response or error.
 *
 * The outbound handle is long-lived; each request is one-shot. Certificates
 * are verified against the system's store, plus a CA file if one is given;
 * there is no way to turn verification off. No proxy is used, and bodies
 * arrive as the server sent them (no decompression).
 */
#ifndef EUTAXY_OUTBOUND_H
#define EUTAXY_OUTBOUND_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "http.h"

#define EU_OUTBOUND_TIMEOUT_MS 30000
#define EU_OUTBOUND_MAX_BYTES (16u << 20)   /* of a response's body */
#define EU_OUTBOUND_MAX_HEAD (256u << 10)   /* of a response's header lines */
#define EU_OUTBOUND_MAX_REDIRECTS 20

typedef struct eu_outbound eu_outbound;

typedef struct eu_outbound_opts {
  int64_t timeout_ms;       /* the whole exchange, redirects included; 0: the default */
  size_t max_bytes;         /* of a response's body; 0: the default */
  const char *ca_file;      /* PEM certificates of CAs to trust besides the system's; NULL: none */
} eu_outbound_opts;

/* What to do with a redirect (3xx with a Location), as fetch's `redirect`. */
enum { EU_REDIRECT_FOLLOW = 0, EU_REDIRECT_MANUAL, EU_REDIRECT_ERROR };

typedef struct eu_outbound_request {
  const char *method;       /* sent as it is: "GET", "POST", "PATCH", ... */
  const char *url;          /* absolute, http: or https: */
  const eu_http_header *headers;  /* sent as given, but Content-Length and
                                   * Transfer-Encoding, which follow the body */
  size_t nheaders;
  const char *body;         /* NULL: none */
  size_t body_len;
  int redirect;             /* EU_REDIRECT_* */
} eu_outbound_request;

/* How a request ended: a response, or a failure (error_name not NULL). */
typedef struct eu_outbound_result {
  const char *error_name;   /* "TimeoutError", "NetworkError"; NULL for a response */
  const char *message;      /* names the method, the URL and what failed */
  int retryable;            /* the failure may pass if tried again (a timeout, a refused connection) */
  int status;               /* the final response's, after the redirects followed */
  const char *status_text;  /* its reason phrase; "" when it had none (HTTP/2) */
  const eu_http_header *headers;  /* its header lines in order, names lowercased */
  size_t nheaders;
  const char *body;
  size_t body_len;
} eu_outbound_result;

/* Called once per request, from the loop, with its result; what r points
 * to is valid during the call only. It may send new requests, not close the
 * handle. */
typedef void (*eu_outbound_cb)(void *ud, const eu_outbound_result *r);

/* A handle on loop, or EU_ENOMEM / EU_EINVAL with a message (curl would not start). */
int eu_outbound_new(eu_outbound **out, uv_loop_t *loop, const eu_outbound_opts *o, char *err, size_t errlen);

/* Starts a request; its strings are copied. cb is called later, never from
 * within this call. EU_EINVAL with a message for a request that cannot be
 * sent (a scheme other than http: or https:, a NUL in the URL), EU_ENOMEM. */
int eu_outbound_send(eu_outbound *ob, const eu_outbound_request *req, eu_outbound_cb cb, void *ud,
                     char *err, size_t errlen);

/* Requests sent and not yet ended. */
int eu_outbound_pending(eu_outbound *ob);

/* Abandons every request in flight (their callbacks are not called) and
 * closes the handles; the handle is freed once the loop has closed them. */
void eu_outbound_close(eu_outbound *ob);

#endif
