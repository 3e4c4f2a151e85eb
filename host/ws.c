/*
 * ws.c: the WebSocket layer (ws.h).
 *
 * Owns each connection's wslay frame context, the message being assembled,
 * the control frame being read and the output buffer. Must not touch
 * sockets, libuv or the clock.
 *
 * Why wslay's frame API and not its event API (wslay_event_*), which would
 * assemble messages and answer pings and closes by itself: Debian's wslay
 * (1.1.1) gets the close handshake wrong in ways no callback can repair.
 * It checks a close reason's UTF-8 on each piece of the frame as it
 * arrives, skipping the first two bytes of every piece, so whether a close
 * frame is refused with 1007 depends on how its bytes were cut: a valid
 * "é" split between two reads is refused, an invalid byte fed alone is
 * echoed back. It takes a 1-byte close payload for one without a code
 * instead of a protocol error, and answers a bad frame header (a control
 * frame over 125 bytes or fragmented) with a close frame without a code
 * instead of 1002. So wslay parses and unmasks the frames and writes ours
 * (wslay_frame_recv, wslay_frame_send), and this file keeps the rules of
 * the messages: which opcode may follow which, sizes, UTF-8, the close
 * codes, pongs and the close handshake.
 *
 * wslay reads through a callback: eu_ws_feed lends it the fed bytes, which
 * it copies into its own buffer (4 KiB) and hands back a frame's payload
 * in pieces, unmasked; when the bytes are used up it answers "want read".
 * It writes through a callback too, into the output buffer, where room for
 * the whole frame is reserved first, so a frame is written whole or not at
 * all.
 */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <wslay/wslay.h>

#include "eutaxy.h"
#include "sha1.h"
#include "utf8.h"
#include "ws.h"

/* The assembly buffer is given back after a message larger than this, so
 * idle connections do not each keep their largest message. */
#define KEEP_CAP (64 * 1024)

#define MAX_CONTROL 125   /* a control frame's payload (RFC 6455, 5.5) */
#define MAX_HEADER 14     /* a frame header: 2 bytes, 8 of length, 4 of mask */

struct eu_ws_conn {
  wslay_frame_context_ptr fr;
  eu_ws_callbacks cb;
  void *ud;
  size_t max_message;
  const char *in;         /* the fed bytes wslay has not taken yet */
  size_t in_n;
  eu_buf out;
  eu_buf msg;             /* the data message being received, its fragments joined */
  size_t msg_whole;       /* bytes of a text msg checked as whole UTF-8 sequences */
  int msg_op;             /* WSLAY_TEXT_FRAME or WSLAY_BINARY_FRAME while a message is open, else 0 */
  int in_frame;           /* a frame has begun and its payload is not all read */
  uint64_t frame_got;     /* payload bytes of that frame read so far */
  char ctl[MAX_CONTROL + 1];  /* the payload of a control frame, NUL after it */
  size_t ctl_n;
  int close_sent;         /* our close frame is out: nothing more is written */
  int close_received;     /* the peer's close frame arrived: nothing more is read */
  int code;               /* 0, or the negative code every feed returns from now on */
  int status;             /* the close code the connection failed with */
  const char *reason;
};

static ssize_t on_recv(uint8_t *buf, size_t len, int flags, void *ud) {
  eu_ws_conn *c = ud;
  size_t n = len < c->in_n ? len : c->in_n;
  if (n == 0) return -1;  /* wslay answers WSLAY_ERR_WANT_READ */
  memcpy(buf, c->in, n);
  c->in += n;
  c->in_n -= n;
  return (ssize_t)n;
}

static ssize_t on_send(const uint8_t *data, size_t len, int flags, void *ud) {
  eu_ws_conn *c = ud;
  if (eu_buf_put(&c->out, data, len) != EU_OK) return -1;  /* never: write_frame reserved the room */
  return (ssize_t)len;
}

static const struct wslay_frame_callbacks frame_callbacks = { on_send, on_recv, NULL };

/* Appends one unfragmented, unmasked frame, whole or not at all. */
static int write_frame(eu_ws_conn *c, int opcode, const char *p, size_t n) {
  struct wslay_frame_iocb io;
  size_t start = c->out.n;
  ssize_t r;
  if (n > SIZE_MAX - MAX_HEADER || eu_buf_reserve(&c->out, MAX_HEADER + n) != EU_OK) return EU_ENOMEM;
  memset(&io, 0, sizeof io);
  io.fin = 1;
  io.opcode = (uint8_t)opcode;
  io.payload_length = n;
  io.data = (const uint8_t *)p;
  io.data_length = n;
  r = wslay_frame_send(c->fr, &io);
  assert(r >= 0 && (size_t)r == n);
  if (r < 0 || (size_t)r != n) {
    c->out.n = start;
    c->out.p[start] = '\0';
    return EU_ENOMEM;
  }
  return EU_OK;
}

/* A close frame's payload: the code in network order, then the reason;
 * nothing at all for EU_WS_NO_CODE. */
static int write_close(eu_ws_conn *c, int code, const char *reason, size_t n) {
  char p[MAX_CONTROL];
  if (code == EU_WS_NO_CODE) return write_frame(c, WSLAY_CONNECTION_CLOSE, NULL, 0);
  assert(n <= EU_WS_MAX_REASON);
  p[0] = (char)(code >> 8);
  p[1] = (char)(code & 0xff);
  if (n) memcpy(p + 2, reason, n);
  return write_frame(c, WSLAY_CONNECTION_CLOSE, p, 2 + n);
}

/* The codes a close frame may carry (RFC 6455, 7.4.1, and IANA's registry):
 * 1004 is reserved, and 1005, 1006 and 1015 only report what happened. */
static int close_code_ok(int code) {
  return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
         (code >= 3000 && code <= 4999);
}

/* Fails the connection: the first failure's code stays, and a close frame
 * saying why goes out unless ours already has. Returns 0 so a check can
 * return it. */
static int fail(eu_ws_conn *c, int code, int status, const char *reason) {
  if (c->code) return 0;
  c->code = code;
  c->status = status;
  c->reason = reason;
  if (!c->close_sent) {
    write_close(c, status, reason, strlen(reason));  /* out of memory: the TCP close says it */
    c->close_sent = 1;
  }
  return 0;
}

static void reset_message(eu_ws_conn *c) {
  if (c->msg.cap > KEEP_CAP) eu_buf_free(&c->msg);
  else eu_buf_reset(&c->msg);
  c->msg_whole = 0;
  c->msg_op = 0;
}

/* The checks a frame's header calls for, once wslay has read it; 0 when
 * they failed the connection. */
static int begin_frame(eu_ws_conn *c, const struct wslay_frame_iocb *io) {
  if (!io->mask) return fail(c, EU_EINVAL, 1002, "unmasked frame from the client");
  if (io->rsv) return fail(c, EU_EINVAL, 1002, "reserved bits set without an extension");
  switch (io->opcode) {
    case WSLAY_CONTINUATION_FRAME:
      if (!c->msg_op) return fail(c, EU_EINVAL, 1002, "continuation frame without a message to continue");
      break;
    case WSLAY_TEXT_FRAME:
    case WSLAY_BINARY_FRAME:
      if (c->msg_op) return fail(c, EU_EINVAL, 1002, "new message inside a fragmented one");
      c->msg_op = io->opcode;
      break;
    case WSLAY_CONNECTION_CLOSE:
    case WSLAY_PING:
    case WSLAY_PONG:
      c->ctl_n = 0;  /* wslay has checked it is whole and at most 125 bytes */
      break;
    default:
      return fail(c, EU_EINVAL, 1002, "reserved opcode");
  }
  /* before any of its payload is kept: the message, this frame included,
   * must fit, whatever the frames before it held */
  if (!wslay_is_ctrl_frame(io->opcode) && io->payload_length > c->max_message - c->msg.n)
    return fail(c, EU_EINVAL, 1009, "message too big");
  c->in_frame = 1;
  c->frame_got = 0;
  return 1;
}

/* Checks the text received so far; final when the message is complete, so
 * an unfinished sequence at its end is an error too. */
static int check_text(eu_ws_conn *c, int final) {
  size_t whole;
  if (!eu_utf8_prefix(c->msg.p + c->msg_whole, c->msg.n - c->msg_whole, &whole) ||
      (final && c->msg_whole + whole != c->msg.n))
    return fail(c, EU_EINVAL, 1007, "text message is not valid UTF-8");
  c->msg_whole += whole;
  return 1;
}

static void end_message(eu_ws_conn *c) {
  int binary = c->msg_op == WSLAY_BINARY_FRAME, rc;
  if (!binary && !check_text(c, 1)) return;
  rc = c->cb.message(c->ud, binary, c->msg.p ? c->msg.p : "", c->msg.n);
  reset_message(c);
  if (rc != 0) fail(c, rc < 0 ? rc : EU_EINVAL, 1011, "message handler failed");
}

static void end_close(eu_ws_conn *c) {
  int code = EU_WS_NO_CODE;
  const char *reason = "";
  size_t n = 0;
  if (c->ctl_n == 1) {
    fail(c, EU_EINVAL, 1002, "close frame with a 1-byte payload");
    return;
  }
  if (c->ctl_n >= 2) {
    code = (unsigned char)c->ctl[0] << 8 | (unsigned char)c->ctl[1];
    if (!close_code_ok(code)) {
      fail(c, EU_EINVAL, 1002, "invalid close code");
      return;
    }
    reason = c->ctl + 2;
    n = c->ctl_n - 2;
    if (!eu_utf8_valid(reason, n)) {
      fail(c, EU_EINVAL, 1007, "close reason is not valid UTF-8");
      return;
    }
  }
  c->close_received = 1;
  if (!c->close_sent) {
    /* the answer echoes the code (RFC 6455, 5.5.1), not the reason */
    if (write_close(c, code, NULL, 0) != EU_OK) fail(c, EU_ENOMEM, 1011, "out of memory");
    c->close_sent = 1;
  }
  if (c->cb.closed) c->cb.closed(c->ud, code, reason, n);
}

static void end_frame(eu_ws_conn *c, const struct wslay_frame_iocb *io) {
  c->in_frame = 0;
  switch (io->opcode) {
    case WSLAY_PING:
      if (!c->close_sent && write_frame(c, WSLAY_PONG, c->ctl, c->ctl_n) != EU_OK)
        fail(c, EU_ENOMEM, 1011, "out of memory");
      break;
    case WSLAY_PONG:
      break;
    case WSLAY_CONNECTION_CLOSE:
      end_close(c);
      break;
    default:
      if (io->fin) end_message(c);
      break;
  }
}

/* A piece of a frame, as wslay_frame_recv hands it: the frame's header
 * with some of its payload (none for an empty frame). */
static void take(eu_ws_conn *c, const struct wslay_frame_iocb *io) {
  if (!c->in_frame && !begin_frame(c, io)) return;
  if (wslay_is_ctrl_frame(io->opcode)) {
    assert(c->ctl_n + io->data_length <= MAX_CONTROL);
    memcpy(c->ctl + c->ctl_n, io->data, io->data_length);
    c->ctl_n += io->data_length;
    c->ctl[c->ctl_n] = '\0';
  } else {
    if (eu_buf_put(&c->msg, io->data, io->data_length) != EU_OK) {
      fail(c, EU_ENOMEM, 1011, "out of memory");
      return;
    }
    /* as it arrives, so a message that cannot be text fails at once */
    if (c->msg_op == WSLAY_TEXT_FRAME && !check_text(c, 0)) return;
  }
  c->frame_got += io->data_length;
  if (c->frame_got == io->payload_length) end_frame(c, io);
}

int eu_ws_conn_new(eu_ws_conn **out, size_t max_message, const eu_ws_callbacks *cb, void *ud) {
  eu_ws_conn *c = calloc(1, sizeof *c);
  *out = NULL;
  if (!c) return EU_ENOMEM;
  if (wslay_frame_context_init(&c->fr, &frame_callbacks, c) != 0) {
    free(c);
    return EU_ENOMEM;
  }
  c->cb = *cb;
  c->ud = ud;
  c->max_message = max_message ? max_message : EU_WS_MAX_MESSAGE;
  eu_buf_init(&c->out);
  eu_buf_init(&c->msg);
  *out = c;
  return EU_OK;
}

void eu_ws_conn_free(eu_ws_conn *c) {
  if (!c) return;
  wslay_frame_context_free(c->fr);
  eu_buf_free(&c->out);
  eu_buf_free(&c->msg);
  free(c);
}

int eu_ws_feed(eu_ws_conn *c, const char *p, size_t n) {
  c->in = p;
  c->in_n = n;
  while (!c->code && !c->close_received) {
    struct wslay_frame_iocb io;
    ssize_t r;
    memset(&io, 0, sizeof io);
    r = wslay_frame_recv(c->fr, &io);
    if (r == WSLAY_ERR_WANT_READ) break;  /* every fed byte is in wslay's buffer */
    if (r < 0) {
      /* a control frame fragmented or over 125 bytes, or a length not in
       * its shortest form or over 2^63 */
      fail(c, EU_EINVAL, 1002, "invalid frame header");
      break;
    }
    take(c, &io);
  }
  c->in = NULL;
  c->in_n = 0;
  return c->code;
}

int eu_ws_send(eu_ws_conn *c, int binary, const char *p, size_t n, char *err, size_t errlen) {
  if (c->close_sent) return eu_err(err, errlen, EU_EINVAL, "the WebSocket is closing or closed");
  if (!binary && !eu_utf8_valid(p, n))
    return eu_err(err, errlen, EU_EINVAL, "a text message must be valid UTF-8");
  if (write_frame(c, binary ? WSLAY_BINARY_FRAME : WSLAY_TEXT_FRAME, p, n) != EU_OK)
    return eu_err(err, errlen, EU_ENOMEM, "out of memory");
  return EU_OK;
}

int eu_ws_ping(eu_ws_conn *c, const char *p, size_t n, char *err, size_t errlen) {
  if (c->close_sent) return eu_err(err, errlen, EU_EINVAL, "the WebSocket is closing or closed");
  if (n > MAX_CONTROL) return eu_err(err, errlen, EU_EINVAL, "a ping carries at most 125 bytes");
  if (write_frame(c, WSLAY_PING, p, n) != EU_OK) return eu_err(err, errlen, EU_ENOMEM, "out of memory");
  return EU_OK;
}

int eu_ws_close(eu_ws_conn *c, int code, const char *reason, size_t n, char *err, size_t errlen) {
  if (code == EU_WS_NO_CODE) {
    if (n > 0) return eu_err(err, errlen, EU_EINVAL, "a close without a code has no reason");
  } else if (!close_code_ok(code)) {
    return eu_err(err, errlen, EU_EINVAL, "invalid close code %d", code);
  }
  if (n > EU_WS_MAX_REASON)
    return eu_err(err, errlen, EU_EINVAL, "a close reason has at most %d bytes", EU_WS_MAX_REASON);
  if (!eu_utf8_valid(reason, n)) return eu_err(err, errlen, EU_EINVAL, "a close reason must be valid UTF-8");
  if (c->close_sent) return EU_OK;
  if (write_close(c, code, reason, n) != EU_OK) return eu_err(err, errlen, EU_ENOMEM, "out of memory");
  c->close_sent = 1;
  return EU_OK;
}

eu_buf *eu_ws_output(eu_ws_conn *c) {
  return &c->out;
}

int eu_ws_done(const eu_ws_conn *c) {
  return c->code != 0 || c->close_received;
}

int eu_ws_conn_error(const eu_ws_conn *c, const char **reason) {
  if (reason) *reason = c->code ? c->reason : NULL;
  return c->code ? c->status : 0;
}

/* The opening handshake */

/* The GUID of RFC 6455, 1.3, that the accept key hashes with the client's. */
static const char ws_guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

static const char b64_digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Base64 (RFC 4648, 4) with padding; out has room for 4 * ceil(n / 3) + 1. */
static void b64_encode(const unsigned char *p, size_t n, char *out) {
  size_t i;
  for (i = 0; i + 2 < n; i += 3) {
    uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
    *out++ = b64_digits[v >> 18];
    *out++ = b64_digits[(v >> 12) & 63];
    *out++ = b64_digits[(v >> 6) & 63];
    *out++ = b64_digits[v & 63];
  }
  if (i < n) {
    uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
    *out++ = b64_digits[v >> 18];
    *out++ = b64_digits[(v >> 12) & 63];
    *out++ = i + 1 < n ? b64_digits[(v >> 6) & 63] : '=';
    *out++ = '=';
  }
  *out = '\0';
}

/* The base64 of 16 bytes: 22 digits and "==". The low bits of the last
 * digit, which no byte reaches, are not looked at, as decoders do not. */
static int key_ok(const char *k) {
  size_t i;
  if (strlen(k) != 24 || k[22] != '=' || k[23] != '=') return 0;
  for (i = 0; i < 22; i++)
    if (!strchr(b64_digits, k[i])) return 0;
  return 1;
}

/* Whether a comma-separated header value lists token, in any case. */
static int list_has(const char *v, const char *token) {
  size_t tl = strlen(token);
  while (*v) {
    const char *e;
    size_t n;
    while (*v == ' ' || *v == '\t' || *v == ',') v++;
    for (e = v; *e && *e != ','; e++) {}
    n = (size_t)(e - v);
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t')) n--;
    if (n == tl && strncasecmp(v, token, n) == 0) return 1;
    v = e;
  }
  return 0;
}

/* Whether any of the headers called name (repeated ones are a list too) lists token. */
static int header_lists(const eu_http_request *req, const char *name, const char *token) {
  size_t i;
  for (i = 0; i < req->nheaders; i++)
    if (strcmp(req->headers[i].name, name) == 0 && list_has(req->headers[i].value, token)) return 1;
  return 0;
}

/* The value of the header called name when it is there exactly once, else NULL. */
static const char *header_once(const eu_http_request *req, const char *name) {
  const char *v = NULL;
  size_t i;
  for (i = 0; i < req->nheaders; i++) {
    if (strcmp(req->headers[i].name, name) != 0) continue;
    if (v) return NULL;
    v = req->headers[i].value;
  }
  return v;
}

/* The caller's headers the layer writes itself or must not let through. */
static int header_dropped(const eu_http_header *h) {
  static const char *const names[] = { "upgrade", "connection", "sec-websocket-accept",
                                       "sec-websocket-extensions", "content-length",
                                       "transfer-encoding" };
  size_t i;
  for (i = 0; i < sizeof names / sizeof names[0]; i++)
    if (h->name_len == strlen(names[i]) && strncasecmp(h->name, names[i], h->name_len) == 0) return 1;
  return 0;
}

/* Why req is no upgrade this layer accepts, with the status to answer, or NULL. */
static const char *check_upgrade(const eu_http_request *req, int *status) {
  const char *v;
  *status = 400;
  if (strcmp(req->method, "GET") != 0) return "a WebSocket upgrade must be a GET request";
  if (req->http_major != 1 || req->http_minor < 1) return "a WebSocket upgrade needs HTTP/1.1";
  if (!header_lists(req, "upgrade", "websocket")) return "the Upgrade header does not name websocket";
  if (!header_lists(req, "connection", "upgrade")) return "the Connection header does not list upgrade";
  v = header_once(req, "sec-websocket-version");
  if (!v || strcmp(v, "13") != 0) {
    *status = 426;
    return "Sec-WebSocket-Version must be 13";
  }
  v = header_once(req, "sec-websocket-key");
  if (!v || !key_ok(v)) return "Sec-WebSocket-Key must be one base64 value of 16 bytes";
  return NULL;
}

static int refuse(eu_buf *out, int status, const char *why, int *status_out, char *err, size_t errlen) {
  static const eu_http_header version = { "Sec-WebSocket-Version", 21, "13", 2 };
  char body[160];
  int n = snprintf(body, sizeof body, "%s\n", why);
  *status_out = status;
  if (eu_http_write_response(out, status, NULL, &version, status == 426 ? 1 : 0, body, (size_t)n, 0) != EU_OK)
    return eu_err(err, errlen, EU_ENOMEM, "out of memory");
  return eu_err(err, errlen, EU_EINVAL, "%s", why);
}

int eu_ws_handshake(const eu_http_request *req, const eu_http_header *headers, size_t nheaders,
                    eu_buf *out, int *status, char *err, size_t errlen) {
  char keyed[24 + sizeof ws_guid], accept[29];
  unsigned char digest[EU_SHA1_LEN];
  const char *why = check_upgrade(req, status);
  size_t start = out->n, i;
  int rc;
  if (why) return refuse(out, *status, why, status, err, errlen);
  for (i = 0; i < nheaders; i++)
    if (!eu_http_header_ok(&headers[i]))
      return refuse(out, 500, "a response header that cannot be written", status, err, errlen);
  memcpy(keyed, eu_http_header_get(req, "sec-websocket-key"), 24);
  memcpy(keyed + 24, ws_guid, sizeof ws_guid - 1);
  eu_sha1(keyed, 24 + sizeof ws_guid - 1, digest);
  b64_encode(digest, sizeof digest, accept);
  rc = eu_buf_printf(out, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                          "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n", accept);
  for (i = 0; rc == EU_OK && i < nheaders; i++) {
    if (header_dropped(&headers[i])) continue;
    if ((rc = eu_buf_put(out, headers[i].name, headers[i].name_len)) != EU_OK) break;
    if ((rc = eu_buf_put(out, ": ", 2)) != EU_OK) break;
    if ((rc = eu_buf_put(out, headers[i].value, headers[i].value_len)) != EU_OK) break;
    rc = eu_buf_put(out, "\r\n", 2);
  }
  if (rc == EU_OK) rc = eu_buf_put(out, "\r\n", 2);
  if (rc != EU_OK) {
    out->n = start;
    if (out->p) out->p[start] = '\0';
    *status = 500;
    return eu_err(err, errlen, EU_ENOMEM, "out of memory");
  }
  *status = 101;
  return EU_OK;
}
