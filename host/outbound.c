/*
 * outbound.c: libcurl's multi-socket interface driven by a libuv loop.
 *
 * curl tells us which sockets to watch (on_socket) and when to call it back
 * (on_timer_set); a uv_poll_t per socket and one uv_timer_t do the watching
 * and call curl_multi_socket_action, after which every finished transfer is
 * collected (collect) and its callback called. A transfer keeps the
 * response's header lines and body as they arrive, within their limits;
 * past the body's limit it is stopped and nothing of the body is kept.
 *
 * Redirects are curl's to follow (fetch's default, up to 20), only to
 * http: and https:. The headers curl would add on its own (Accept,
 * Expect, a form Content-Type) are taken off, so a request goes out with
 * the headers it was given and those HTTP needs (Host, Content-Length).
 *
 * libcurl is loaded when the first outbound handle is made (load_curl), not
 * linked: with what it pulls in (TLS, Kerberos, LDAP, ...) it is some thirty
 * libraries, whose loading and relocation would cost every other command
 * (check, test, the CLI) more than its whole run of a small scenario.
 */
#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "buf.h"
#include "eutaxy.h"
#include "outbound.h"

#define EU_OUTBOUND_SHOWN_URL 300   /* bytes of a URL shown in a message */

typedef struct sock sock;
typedef struct xfer xfer;

struct eu_outbound {
  uv_loop_t *loop;
  CURLM *multi;
  uv_timer_t timer;
  eu_outbound_opts o;
  char *ca_file;
  xfer *xfers;              /* in flight */
  sock *socks;              /* watched */
  int npending;
  int handles;              /* uv handles not yet closed: the timer and the polls */
  int closing;
};

/* A socket curl asked us to watch. */
struct sock {
  uv_poll_t poll;
  curl_socket_t fd;
  eu_outbound *ob;
  sock *prev, *next;
};

struct xfer {
  CURL *easy;
  eu_outbound *ob;
  struct curl_slist *slist;
  char *url, *method, *body;
  char shown[EU_OUTBOUND_SHOWN_URL];  /* the URL without its credentials, for messages */
  size_t body_len;
  int redirect;
  eu_buf head;              /* the last response's header lines: name NUL value NUL, ... */
  size_t nheaders;
  char status_text[128];
  eu_buf rbody;             /* the last response's body */
  int too_large, head_too_large, nomem;
  char errbuf[CURL_ERROR_SIZE];
  eu_outbound_cb cb;
  void *ud;
  xfer *prev, *next;
};

/* ---- libcurl, loaded on first use -------------------------------------- */

static struct {
  int loaded;
  CURLcode (*global_init)(long);
  void (*global_cleanup)(void);
  CURL *(*easy_init)(void);
  void (*easy_cleanup)(CURL *);
  CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
  CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
  const char *(*easy_strerror)(CURLcode);
  struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
  void (*slist_free_all)(struct curl_slist *);
  CURLM *(*multi_init)(void);
  CURLMcode (*multi_cleanup)(CURLM *);
  CURLMcode (*multi_setopt)(CURLM *, CURLMoption, ...);
  CURLMcode (*multi_assign)(CURLM *, curl_socket_t, void *);
  CURLMcode (*multi_add_handle)(CURLM *, CURL *);
  CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
  CURLMcode (*multi_socket_action)(CURLM *, curl_socket_t, int, int *);
  CURLMsg *(*multi_info_read)(CURLM *, int *);
  const char *(*multi_strerror)(CURLMcode);
} cu;

/* Every entry is looked up before any is kept, so a libcurl without one of
 * them leaves cu unloaded. The library stays loaded for the process. */
static int load_curl(char *err, size_t errlen) {
  static const char *const names[] = {
    "curl_global_init", "curl_global_cleanup", "curl_easy_init", "curl_easy_cleanup",
    "curl_easy_setopt", "curl_easy_getinfo", "curl_easy_strerror", "curl_slist_append",
    "curl_slist_free_all", "curl_multi_init", "curl_multi_cleanup", "curl_multi_setopt",
    "curl_multi_assign", "curl_multi_add_handle", "curl_multi_remove_handle",
    "curl_multi_socket_action", "curl_multi_info_read", "curl_multi_strerror"
  };
  void *fn[sizeof names / sizeof names[0]];
  void *lib;
  size_t i;
  if (cu.loaded) return EU_OK;
  if (!(lib = dlopen(EU_LIBCURL, RTLD_NOW | RTLD_LOCAL)))
    return eu_err(err, errlen, EU_EINVAL, "outbound fetch needs libcurl: %s", dlerror());
  for (i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!(fn[i] = dlsym(lib, names[i])))
      return eu_err(err, errlen, EU_EINVAL, "outbound fetch: %s has no %s", EU_LIBCURL, names[i]);
  i = 0;
  /* Function pointers from dlsym: POSIX guarantees the conversion. */
#define TAKE(f) memcpy(&cu.f, &fn[i++], sizeof cu.f)
  TAKE(global_init); TAKE(global_cleanup); TAKE(easy_init); TAKE(easy_cleanup);
  TAKE(easy_setopt); TAKE(easy_getinfo); TAKE(easy_strerror); TAKE(slist_append);
  TAKE(slist_free_all); TAKE(multi_init); TAKE(multi_cleanup); TAKE(multi_setopt);
  TAKE(multi_assign); TAKE(multi_add_handle); TAKE(multi_remove_handle);
  TAKE(multi_socket_action); TAKE(multi_info_read); TAKE(multi_strerror);
#undef TAKE
  cu.loaded = 1;
  return EU_OK;
}

/* ---- handles ---------------------------------------------------------- */

static void maybe_free(eu_outbound *ob) {
  if (!ob->closing || ob->handles > 0) return;
  free(ob->ca_file);
  free(ob);
  cu.global_cleanup();
}

static void on_timer_closed(uv_handle_t *h) {
  eu_outbound *ob = h->data;
  ob->handles--;
  maybe_free(ob);
}

static void on_sock_closed(uv_handle_t *h) {
  sock *k = h->data;
  eu_outbound *ob = k->ob;
  free(k);
  ob->handles--;
  maybe_free(ob);
}

static void close_sock(eu_outbound *ob, sock *k) {
  if (k->prev) k->prev->next = k->next;
  else ob->socks = k->next;
  if (k->next) k->next->prev = k->prev;
  uv_close((uv_handle_t *)&k->poll, on_sock_closed);
}

static void free_xfer(xfer *x) {
  if (x->easy) cu.easy_cleanup(x->easy);
  cu.slist_free_all(x->slist);
  free(x->url);
  free(x->method);
  free(x->body);
  eu_buf_free(&x->head);
  eu_buf_free(&x->rbody);
  free(x);
}

static void unlink_xfer(eu_outbound *ob, xfer *x) {
  if (x->prev) x->prev->next = x->next;
  else ob->xfers = x->next;
  if (x->next) x->next->prev = x->prev;
  ob->npending--;
}

/* ---- ended transfers --------------------------------------------------- */

static int is_redirect(long status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

static const char *header_of(xfer *x, const char *name) {
  const char *p = x->head.p, *end = x->head.p + x->head.n;
  while (p && p < end) {
    const char *value = p + strlen(p) + 1;
    if (strcmp(p, name) == 0) return value;
    p = value + strlen(value) + 1;
  }
  return NULL;
}

/* The failure of a transfer curl ended with rc: its name, whether to retry,
 * and what failed, into msg. */
static const char *failure(xfer *x, CURLcode rc, int *retryable, char *msg, size_t n) {
  const char *detail = x->errbuf[0] ? x->errbuf : cu.easy_strerror(rc);
  eu_outbound_opts *o = &x->ob->o;
  *retryable = 0;
  if (rc == CURLE_OPERATION_TIMEDOUT) {
    *retryable = 1;
    snprintf(msg, n, "no answer within %lld ms (--fetch-timeout)", (long long)o->timeout_ms);
    return "TimeoutError";
  }
  if (x->too_large || rc == CURLE_FILESIZE_EXCEEDED) {
    snprintf(msg, n, "the response's body is larger than %zu bytes (--fetch-max-bytes); it was not kept",
             o->max_bytes);
  } else if (x->head_too_large) {
    snprintf(msg, n, "the response's header lines are larger than %u bytes", EU_OUTBOUND_MAX_HEAD);
  } else if (x->nomem) {
    *retryable = 1;
    snprintf(msg, n, "out of memory for the response");
  } else {
    switch (rc) {
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_INVALIDCERTSTATUS:
      snprintf(msg, n, "the server's certificate is not trusted: %s (serve's --ca-file trusts a CA of your own)",
               detail);
      break;
    case CURLE_TOO_MANY_REDIRECTS:
      snprintf(msg, n, "more than %d redirects", EU_OUTBOUND_MAX_REDIRECTS);
      break;
    case CURLE_UNSUPPORTED_PROTOCOL:
      snprintf(msg, n, "redirected to a URL that is not http: or https: (%s)", detail);
      break;
    case CURLE_URL_MALFORMAT:
      snprintf(msg, n, "invalid URL (%s)", detail);
      break;
    case CURLE_COULDNT_RESOLVE_HOST:
      *retryable = 1;
      snprintf(msg, n, "cannot resolve the host (%s)", detail);
      break;
    case CURLE_COULDNT_CONNECT:
      *retryable = 1;
      snprintf(msg, n, "cannot connect (%s)", detail);
      break;
    default:
      *retryable = 1;
      snprintf(msg, n, "%s", detail);
      break;
    }
  }
  return "NetworkError";
}

/* Calls x's callback with its result, then frees it. */
static void finish_xfer(eu_outbound *ob, xfer *x, CURLcode rc) {
  eu_outbound_result r;
  eu_http_header *hs = NULL;
  char what[CURL_ERROR_SIZE + 200], msg[sizeof what + EU_OUTBOUND_SHOWN_URL + 40];
  long status = 0;
  const char *location;
  memset(&r, 0, sizeof r);
  unlink_xfer(ob, x);
  cu.multi_remove_handle(ob->multi, x->easy);
  cu.easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
  what[0] = '\0';
  if (rc != CURLE_OK) {
    r.error_name = failure(x, rc, &r.retryable, what, sizeof what);
  } else if (x->redirect == EU_REDIRECT_ERROR && is_redirect(status) && (location = header_of(x, "location"))) {
    r.error_name = "NetworkError";
    snprintf(what, sizeof what, "redirected (%ld to %.200s) where redirect is \"error\"", status, location);
  } else if (status < 200 || status > 599) {
    r.error_name = "NetworkError";
    snprintf(what, sizeof what, "answered with status %ld, which no Response has (200-599)", status);
  } else if (x->nheaders && !(hs = calloc(x->nheaders, sizeof *hs))) {
    r.error_name = "NetworkError";
    r.retryable = 1;
    snprintf(what, sizeof what, "out of memory for the response");
  }
  if (r.error_name) {
    snprintf(msg, sizeof msg, "%s %s: %s", x->method, x->shown, what);
    r.message = msg;
  } else {
    const char *p = x->head.p;
    size_t i;
    for (i = 0; i < x->nheaders; i++) {
      hs[i].name = p;
      hs[i].name_len = strlen(p);
      p += hs[i].name_len + 1;
      hs[i].value = p;
      hs[i].value_len = strlen(p);
      p += hs[i].value_len + 1;
    }
    r.status = (int)status;
    r.status_text = x->status_text;
    r.headers = hs;
    r.nheaders = x->nheaders;
    r.body = x->rbody.p ? x->rbody.p : "";
    r.body_len = x->rbody.n;
  }
  x->cb(x->ud, &r);
  free(hs);
  free_xfer(x);
}

/* Hands every transfer curl has ended to its callback. */
static void collect(eu_outbound *ob) {
  CURLMsg *m;
  int left;
  while (!ob->closing && (m = cu.multi_info_read(ob->multi, &left)) != NULL) {
    char *x = NULL;
    if (m->msg != CURLMSG_DONE) continue;
    cu.easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &x);
    if (x) finish_xfer(ob, (xfer *)x, m->data.result);
  }
}

/* ---- curl on the loop -------------------------------------------------- */

static void on_poll(uv_poll_t *h, int status, int events) {
  sock *k = h->data;
  eu_outbound *ob = k->ob;
  int flags = 0, running;
  if (status < 0) flags |= CURL_CSELECT_ERR;
  if (events & UV_READABLE) flags |= CURL_CSELECT_IN;
  if (events & UV_WRITABLE) flags |= CURL_CSELECT_OUT;
  cu.multi_socket_action(ob->multi, k->fd, flags, &running);
  collect(ob);
}

static void on_timeout(uv_timer_t *t) {
  eu_outbound *ob = t->data;
  int running;
  cu.multi_socket_action(ob->multi, CURL_SOCKET_TIMEOUT, 0, &running);
  collect(ob);
}

/* CURLMOPT_TIMERFUNCTION: call curl back in ms (-1: never). The timer
 * fires from the loop, never from within this call. */
static int on_timer_set(CURLM *multi, long ms, void *userp) {
  eu_outbound *ob = userp;
  (void)multi;
  if (ob->closing) return 0;
  if (ms < 0) uv_timer_stop(&ob->timer);
  else uv_timer_start(&ob->timer, on_timeout, (uint64_t)ms, 0);
  return 0;
}

/* CURLMOPT_SOCKETFUNCTION: watch fd for what curl wants, or stop watching. */
static int on_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp) {
  eu_outbound *ob = userp;
  sock *k = socketp;
  int events = 0;
  (void)easy;
  if (what == CURL_POLL_REMOVE) {
    if (k) {
      if (!ob->closing) cu.multi_assign(ob->multi, fd, NULL);
      close_sock(ob, k);
    }
    return 0;
  }
  if (ob->closing) return -1;
  if (!k) {
    if (!(k = calloc(1, sizeof *k))) return -1;
    if (uv_poll_init_socket(ob->loop, &k->poll, fd) != 0) {
      free(k);
      return -1;
    }
    k->fd = fd;
    k->ob = ob;
    k->poll.data = k;
    k->next = ob->socks;
    if (ob->socks) ob->socks->prev = k;
    ob->socks = k;
    ob->handles++;
    cu.multi_assign(ob->multi, fd, k);
  }
  if (what & CURL_POLL_IN) events |= UV_READABLE;
  if (what & CURL_POLL_OUT) events |= UV_WRITABLE;
  uv_poll_start(&k->poll, events, on_poll);
  return 0;
}

/* ---- a transfer's response --------------------------------------------- */

static int is_token(const char *p, size_t n) {
  size_t i;
  if (n == 0) return 0;
  for (i = 0; i < n; i++)
    if (!isalnum((unsigned char)p[i]) && !strchr("!#$%&'*+-.^_`|~", p[i])) return 0;
  return 1;
}

/* A header line of a response ("HTTP/1.1 200 OK", "Name: value", a
 * continuation, the blank line). A status line begins a new response (a
 * redirect followed, a 100 Continue): what came before is forgotten. */
static size_t on_header(char *p, size_t size, size_t n, void *ud) {
  xfer *x = ud;
  size_t len = size * n, k;
  const char *colon, *v, *end;
  while (len > 0 && (p[len - 1] == '\r' || p[len - 1] == '\n')) len--;
  if (len >= 5 && memcmp(p, "HTTP/", 5) == 0) {
    const char *sp = memchr(p, ' ', len), *reason = NULL;
    eu_buf_reset(&x->head);
    eu_buf_reset(&x->rbody);
    x->nheaders = 0;
    x->status_text[0] = '\0';
    if (sp) reason = memchr(sp + 1, ' ', len - (size_t)(sp + 1 - p));
    if (reason) {
      k = len - (size_t)(reason + 1 - p);
      if (k >= sizeof x->status_text) k = sizeof x->status_text - 1;
      memcpy(x->status_text, reason + 1, k);
      x->status_text[k] = '\0';
      if (strlen(x->status_text) != k) x->status_text[0] = '\0';  /* a NUL in it */
    }
    return size * n;
  }
  if (len == 0) return size * n;
  if (x->head.n + len + 2 > EU_OUTBOUND_MAX_HEAD) {
    x->head_too_large = 1;
    return 0;
  }
  if (memchr(p, '\0', len) || memchr(p, '\r', len)) return size * n;  /* no Headers value holds these: dropped */
  if (p[0] == ' ' || p[0] == '\t') {
    /* obsolete line folding: the line goes on the last value */
    if (x->nheaders == 0) return size * n;
    for (v = p, end = p + len; v < end && (*v == ' ' || *v == '\t'); v++)
      ;
    x->head.n--;  /* the last value's NUL */
    if (eu_buf_putc(&x->head, ' ') != EU_OK || eu_buf_put(&x->head, v, (size_t)(end - v)) != EU_OK ||
        eu_buf_putc(&x->head, 0) != EU_OK) {
      x->nomem = 1;
      return 0;
    }
    return size * n;
  }
  if (!(colon = memchr(p, ':', len)) || !is_token(p, (size_t)(colon - p))) return size * n;
  for (v = colon + 1, end = p + len; v < end && (*v == ' ' || *v == '\t'); v++)
    ;
  while (end > v && (end[-1] == ' ' || end[-1] == '\t')) end--;
  if (eu_buf_reserve(&x->head, len + 2) != EU_OK) {
    x->nomem = 1;
    return 0;
  }
  for (k = 0; p + k < colon; k++) eu_buf_putc(&x->head, tolower((unsigned char)p[k]));
  eu_buf_putc(&x->head, 0);
  eu_buf_put(&x->head, v, (size_t)(end - v));
  eu_buf_putc(&x->head, 0);
  x->nheaders++;
  return size * n;
}

static size_t on_body(char *p, size_t size, size_t n, void *ud) {
  xfer *x = ud;
  size_t len = size * n;
  if (len > x->ob->o.max_bytes - x->rbody.n) {
    x->too_large = 1;
    eu_buf_free(&x->rbody);
    return 0;  /* curl stops the transfer */
  }
  if (eu_buf_put(&x->rbody, p, len) != EU_OK) {
    x->nomem = 1;
    return 0;
  }
  return len;
}

/* ---- sending ------------------------------------------------------------ */

static char *dup_n(const char *p, size_t n) {
  char *d = malloc(n + 1);
  if (d) {
    if (n) memcpy(d, p, n);
    d[n] = '\0';
  }
  return d;
}

/* url without "user:password@", cut to fit: what a message may show. */
static void shown_url(char *out, size_t n, const char *url) {
  const char *at, *rest = strstr(url, "://");
  size_t host = rest ? strcspn(rest + 3, "/?#") : 0;
  if (rest && (at = memchr(rest + 3, '@', host)) != NULL)
    snprintf(out, n, "%.*s%s", (int)(rest + 3 - url), url, at + 1);
  else
    snprintf(out, n, "%s", url);
}

static int add_header(struct curl_slist **l, const char *line) {
  struct curl_slist *t = cu.slist_append(*l, line);
  if (!t) return EU_ENOMEM;
  *l = t;
  return EU_OK;
}

/* The header lines for curl: the request's, then the empty ones that take
 * off what curl would add by itself. A header with an empty value is
 * written "Name;", curl's way of sending one. */
static int build_headers(xfer *x, const eu_outbound_request *req) {
  int accept = 0, expect = 0, ctype = 0;
  size_t i;
  eu_buf line;
  eu_buf_init(&line);
  for (i = 0; i < req->nheaders; i++) {
    const eu_http_header *h = &req->headers[i];
    if ((h->name_len == 14 && strncasecmp(h->name, "content-length", 14) == 0) ||
        (h->name_len == 17 && strncasecmp(h->name, "transfer-encoding", 17) == 0))
      continue;
    accept |= h->name_len == 6 && strncasecmp(h->name, "accept", 6) == 0;
    expect |= h->name_len == 6 && strncasecmp(h->name, "expect", 6) == 0;
    ctype |= h->name_len == 12 && strncasecmp(h->name, "content-type", 12) == 0;
    eu_buf_reset(&line);
    if (eu_buf_put(&line, h->name, h->name_len) != EU_OK ||
        (h->value_len ? eu_buf_puts(&line, ": ") != EU_OK || eu_buf_put(&line, h->value, h->value_len) != EU_OK
                      : eu_buf_putc(&line, ';') != EU_OK) ||
        add_header(&x->slist, line.p) != EU_OK) {
      eu_buf_free(&line);
      return EU_ENOMEM;
    }
  }
  eu_buf_free(&line);
  if ((!accept && add_header(&x->slist, "Accept:") != EU_OK) ||
      (!expect && add_header(&x->slist, "Expect:") != EU_OK) ||
      (!ctype && add_header(&x->slist, "Content-Type:") != EU_OK))
    return EU_ENOMEM;
  return EU_OK;
}

#define SET(opt, v) (rc = rc != CURLE_OK ? rc : cu.easy_setopt(e, opt, v))

static CURLcode configure(eu_outbound *ob, xfer *x) {
  CURL *e = x->easy;
  CURLcode rc = CURLE_OK;
  SET(CURLOPT_URL, x->url);
  SET(CURLOPT_PRIVATE, (void *)x);
  SET(CURLOPT_NOSIGNAL, 1L);
  SET(CURLOPT_PROTOCOLS_STR, "http,https");
  SET(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  SET(CURLOPT_PROXY, "");  /* none, whatever the environment says */
  SET(CURLOPT_TIMEOUT_MS, (long)ob->o.timeout_ms);
  /* a Content-Length past the limit fails at once (a HEAD's says how big, and gets no body) */
  if (strcmp(x->method, "HEAD") != 0) SET(CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)ob->o.max_bytes);
  SET(CURLOPT_ERRORBUFFER, x->errbuf);
  SET(CURLOPT_HEADERFUNCTION, on_header);
  SET(CURLOPT_HEADERDATA, (void *)x);
  SET(CURLOPT_WRITEFUNCTION, on_body);
  SET(CURLOPT_WRITEDATA, (void *)x);
  SET(CURLOPT_HTTPHEADER, x->slist);
  SET(CURLOPT_FOLLOWLOCATION, x->redirect == EU_REDIRECT_FOLLOW ? 1L : 0L);
  SET(CURLOPT_MAXREDIRS, (long)EU_OUTBOUND_MAX_REDIRECTS);
  if (ob->ca_file) SET(CURLOPT_CAINFO, ob->ca_file);
  if (strcmp(x->method, "GET") == 0 && !x->body) {
    SET(CURLOPT_HTTPGET, 1L);
  } else if (strcmp(x->method, "HEAD") == 0 && !x->body) {
    SET(CURLOPT_NOBODY, 1L);
  } else {
    /* POST is curl's own, so that a 301-303 turns it into a GET as fetch does */
    if (strcmp(x->method, "POST") != 0) SET(CURLOPT_CUSTOMREQUEST, x->method);
    if (x->body || strcmp(x->method, "POST") == 0) {
      SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->body_len);
      SET(CURLOPT_POSTFIELDS, x->body ? x->body : "");
    }
  }
  return rc;
}

#undef SET

int eu_outbound_send(eu_outbound *ob, const eu_outbound_request *req, eu_outbound_cb cb, void *ud,
                     char *err, size_t errlen) {
  xfer *x;
  CURLcode rc;
  CURLMcode mrc;
  if (ob->closing) return eu_err(err, errlen, EU_EINVAL, "the server is stopping");
  if (strncasecmp(req->url, "http://", 7) != 0 && strncasecmp(req->url, "https://", 8) != 0)
    return eu_err(err, errlen, EU_EINVAL, "unsupported scheme in %.200s: only http: and https: are fetched",
                  req->url);
  if (!(x = calloc(1, sizeof *x))) return eu_err(err, errlen, EU_ENOMEM, "out of memory");
  x->ob = ob;
  x->cb = cb;
  x->ud = ud;
  x->redirect = req->redirect;
  eu_buf_init(&x->head);
  eu_buf_init(&x->rbody);
  shown_url(x->shown, sizeof x->shown, req->url);
  if (!(x->url = dup_n(req->url, strlen(req->url))) || !(x->method = dup_n(req->method, strlen(req->method))) ||
      (req->body && !(x->body = dup_n(req->body, req->body_len))) || build_headers(x, req) != EU_OK ||
      !(x->easy = cu.easy_init())) {
    free_xfer(x);
    return eu_err(err, errlen, EU_ENOMEM, "out of memory");
  }
  x->body_len = req->body ? req->body_len : 0;
  if ((rc = configure(ob, x)) != CURLE_OK) {
    eu_err(err, errlen, EU_EINVAL, "%s %s: %s", x->method, x->shown, cu.easy_strerror(rc));
    free_xfer(x);
    return EU_EINVAL;
  }
  if ((mrc = cu.multi_add_handle(ob->multi, x->easy)) != CURLM_OK) {
    eu_err(err, errlen, EU_ENOMEM, "%s %s: %s", x->method, x->shown, cu.multi_strerror(mrc));
    free_xfer(x);
    return EU_ENOMEM;
  }
  x->next = ob->xfers;
  if (ob->xfers) ob->xfers->prev = x;
  ob->xfers = x;
  ob->npending++;
  return EU_OK;
}

int eu_outbound_pending(eu_outbound *ob) { return ob ? ob->npending : 0; }

/* ---- the handle ---------------------------------------------------------- */

int eu_outbound_new(eu_outbound **out, uv_loop_t *loop, const eu_outbound_opts *o, char *err, size_t errlen) {
  eu_outbound *ob;
  *out = NULL;
  if (load_curl(err, errlen) != EU_OK) return EU_EINVAL;
  if (cu.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
    return eu_err(err, errlen, EU_EINVAL, "libcurl would not start");
  if (!(ob = calloc(1, sizeof *ob))) {
    cu.global_cleanup();
    return eu_err(err, errlen, EU_ENOMEM, "out of memory");
  }
  ob->loop = loop;
  ob->o = *o;
  if (ob->o.timeout_ms <= 0) ob->o.timeout_ms = EU_OUTBOUND_TIMEOUT_MS;
  if (ob->o.max_bytes == 0) ob->o.max_bytes = EU_OUTBOUND_MAX_BYTES;
  ob->o.ca_file = NULL;
  if ((o->ca_file && !(ob->ca_file = dup_n(o->ca_file, strlen(o->ca_file)))) || !(ob->multi = cu.multi_init())) {
    free(ob->ca_file);
    free(ob);
    cu.global_cleanup();
    return eu_err(err, errlen, EU_ENOMEM, "out of memory");
  }
  cu.multi_setopt(ob->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
  cu.multi_setopt(ob->multi, CURLMOPT_SOCKETDATA, (void *)ob);
  cu.multi_setopt(ob->multi, CURLMOPT_TIMERFUNCTION, on_timer_set);
  cu.multi_setopt(ob->multi, CURLMOPT_TIMERDATA, (void *)ob);
  uv_timer_init(loop, &ob->timer);
  ob->timer.data = ob;
  ob->handles = 1;
  *out = ob;
  return EU_OK;
}

void eu_outbound_close(eu_outbound *ob) {
  xfer *x;
  if (!ob || ob->closing) return;
  while ((x = ob->xfers) != NULL) {
    unlink_xfer(ob, x);
    cu.multi_remove_handle(ob->multi, x->easy);
    free_xfer(x);
  }
  ob->closing = 1;
  cu.multi_cleanup(ob->multi);
  ob->multi = NULL;
  while (ob->socks) close_sock(ob, ob->socks);
  uv_close((uv_handle_t *)&ob->timer, on_timer_closed);
}
