/*
 * sha1.h: SHA-1 (FIPS 180-4, section 6.1), one-shot.
 *
 * For the WebSocket opening handshake (ws.c), whose Sec-WebSocket-Accept is
 * the SHA-1 of the client's key and a fixed GUID (RFC 6455, 4.2.2). SHA-1
 * is broken for collision resistance; this is no place to sign or check
 * anything with it.
 */
#ifndef EUTAXY_SHA1_H
#define EUTAXY_SHA1_H

#include <stddef.h>

#define EU_SHA1_LEN 20

/* The digest of the n bytes at p, into out. */
void eu_sha1(const void *p, size_t n, unsigned char out[EU_SHA1_LEN]);

#endif
