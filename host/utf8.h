/*
 * utf8.h: strict UTF-8 (RFC 3629) validation.
 *
 * What counts as text wherever the host must tell text from bytes: the
 * storage binds valid UTF-8 as TEXT and the rest as BLOB (lstore.c), and a
 * WebSocket text message or close reason must be valid UTF-8 (ws.c). No
 * overlong forms, no surrogates (U+D800..U+DFFF), nothing past U+10FFFF.
 */
#ifndef EUTAXY_UTF8_H
#define EUTAXY_UTF8_H

#include <stddef.h>

/* 1 when the n bytes at p are valid UTF-8, else 0. */
int eu_utf8_valid(const char *p, size_t n);

/* For text that arrives in pieces: 1 when the n bytes at p are valid UTF-8
 * up to, at most, an unfinished sequence at their end that more bytes could
 * still complete; *whole then gets the length before that sequence (n when
 * there is none). 0 as soon as no continuation could make them valid. */
int eu_utf8_prefix(const char *p, size_t n, size_t *whole);

#endif
