/*
 * ws.h: the WebSocket (RFC 6455) layer of `eutaxy serve`, server side.
 *
 * Owns the opening handshake's answer and the bytes of one WebSocket
 * connection after it: frames read (with wslay's frame parser) and
 * assembled into messages, pings answered, the close handshake, and the
 * frames written. It must not touch sockets, libuv, clocks or anything
 * global, as http.h does not: a connection is fed the bytes that arrived,
 * in any split, and hands back whole messages through callbacks and the
 * bytes to write in a buffer, so every behaviour can be tested (and
 * fuzzed) one byte at a time. The server decides when to read, write,
 * time out and close the TCP connection.
 *
 * A connection (eu_ws_conn) is a long-lived handle. Its life:
 * - open: eu_ws_feed delivers messages, eu_ws_send sends them;
 * - the peer closes first: its close frame is answered with one of ours
 *   (its code echoed) and reported to the closed callback; done;
 * - we close first (eu_ws_close): nothing more is sent (pings go
 *   unanswered), messages that still arrive are delivered (a server that
 *   wants a browser's behaviour drops them), and the peer's close frame is
 *   reported; done. A peer that never answers is the server's timeout;
 * - the peer breaks the protocol: the connection fails. A close frame with
 *   the code that says why goes out (1002 protocol error, 1007 text that is
 *   not UTF-8, 1009 a message too big, 1011 our own failure), eu_ws_feed
 *   returns a negative code and eu_ws_conn_error says which close code;
 *   done.
 * Once done, flush the output and close the TCP connection; a connection
 * that ends without a close frame is the server's 1006 to report.
 */
#ifndef EUTAXY_WS_H
#define EUTAXY_WS_H

#include <stddef.h>

#include "buf.h"
#include "http.h"

/* The largest message received by default: Cloudflare's limit since 2025.
 * A larger one (its frames counted as they arrive) fails with 1009. */
#define EU_WS_MAX_MESSAGE (32 * 1024 * 1024)

/* The longest close reason: a control frame's 125 bytes less the code. */
#define EU_WS_MAX_REASON 123

/* The code the closed callback gets for a close frame without one. */
#define EU_WS_NO_CODE 1005

typedef struct eu_ws_conn eu_ws_conn;

/* What a connection reports while it is fed. Both are called from
 * eu_ws_feed; their pointers are valid during the call only and point to
 * NUL-terminated bytes. A callback may call eu_ws_send, eu_ws_ping and
 * eu_ws_close on the connection, but must not feed or free it. */
typedef struct eu_ws_callbacks {
  /* A whole message, its fragments joined; a text one (binary 0) is valid
   * UTF-8. Returns 0 to go on; anything else stops the feed, which returns
   * that value, and fails the connection with 1011. */
  int (*message)(void *ud, int binary, const char *data, size_t len);
  /* The peer's close frame: its code (EU_WS_NO_CODE when it had none) and
   * reason (valid UTF-8). Called once, whoever closed first; the layer has
   * answered it when it needed an answer. May be NULL. */
  void (*closed)(void *ud, int code, const char *reason, size_t len);
} eu_ws_callbacks;

/* The opening handshake, once the server has decided to accept an upgrade
 * request: checks that req is one (GET, HTTP/1.1 or later, "Upgrade:
 * websocket", a Connection header listing "upgrade", Sec-WebSocket-Version
 * 13, one Sec-WebSocket-Key that is the base64 of 16 bytes; names and
 * tokens in any case) and appends to out the "101 Switching Protocols"
 * head with its Sec-WebSocket-Accept and the caller's headers (a chosen
 * Sec-WebSocket-Protocol, say; their Upgrade, Connection,
 * Sec-WebSocket-Accept, Sec-WebSocket-Extensions, Content-Length and
 * Transfer-Encoding are dropped: the layer writes the first three and
 * negotiates no extension). *status gets 101 and it returns 0. Otherwise
 * it returns EU_EINVAL (or EU_ENOMEM), writes why into err, and out gets a
 * whole refusal with "Connection: close" instead: 426 with
 * "Sec-WebSocket-Version: 13" for a missing or other version, 400 for any
 * other fault of the request, 500 for a caller's header that could break
 * the framing (as eu_http_write_response refuses it); *status says which.
 * After a refusal, flush out and close. */
int eu_ws_handshake(const eu_http_request *req, const eu_http_header *headers, size_t nheaders,
                    eu_buf *out, int *status, char *err, size_t errlen);

/* A connection after a successful handshake. max_message 0 takes
 * EU_WS_MAX_MESSAGE. cb is copied. Returns 0 or EU_ENOMEM. */
int eu_ws_conn_new(eu_ws_conn **out, size_t max_message, const eu_ws_callbacks *cb, void *ud);
void eu_ws_conn_free(eu_ws_conn *c);

/* Reads n bytes that arrived, delivering every message and close frame
 * they complete, and appends to the output what they call for (pongs, the
 * answer to a close, a failing close). Returns 0, or a negative code once
 * the connection has failed: EU_EINVAL when the peer broke the protocol,
 * EU_ENOMEM, or the message callback's value; a failed connection returns
 * that code from every later feed. Bytes fed once the connection is done
 * are ignored. */
int eu_ws_feed(eu_ws_conn *c, const char *p, size_t n);

/* Appends a message (text when binary is 0) to the output, as one frame.
 * Returns 0, EU_ENOMEM, or EU_EINVAL (with a message in err) for text that
 * is not valid UTF-8 or a connection whose close frame is already out. */
int eu_ws_send(eu_ws_conn *c, int binary, const char *p, size_t n, char *err, size_t errlen);

/* Appends a ping of at most 125 bytes; the peer's pong is ignored. Returns
 * as eu_ws_send does. */
int eu_ws_ping(eu_ws_conn *c, const char *p, size_t n, char *err, size_t errlen);

/* Starts the close handshake: appends a close frame with code and reason
 * (at most EU_WS_MAX_REASON bytes of UTF-8); EU_WS_NO_CODE sends a close
 * frame without a code, and then without a reason. A code must be one an
 * endpoint may send: 1000-1003, 1007-1014 or 3000-4999. Nothing is sent
 * after it. Returns 0, EU_ENOMEM, or EU_EINVAL (with a message in err) for
 * a bad code or reason. When a close frame is already out (the answer to
 * the peer's, a failure's, an earlier eu_ws_close) it appends nothing and
 * returns 0: closing twice is no error. */
int eu_ws_close(eu_ws_conn *c, int code, const char *reason, size_t n, char *err, size_t errlen);

/* The bytes to write, in order. The server takes them as it likes
 * (eu_buf_take, or write and eu_buf_reset) and the layer appends after what
 * is left. */
eu_buf *eu_ws_output(eu_ws_conn *c);

/* 1 once nothing more will be read or written: the close handshake is
 * complete or the connection failed. Flush the output, then close. */
int eu_ws_done(const eu_ws_conn *c);

/* Why a connection failed, as a close code (1002, 1007, 1009, 1011), or 0
 * when it has not failed; *reason (if not NULL) gets a short reason. The
 * failing close frame carries both, unless a close frame of ours was out
 * before the failure. */
int eu_ws_conn_error(const eu_ws_conn *c, const char **reason);

#endif
