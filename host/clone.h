/*
 * clone.h: values crossing between isolates.
 *
 * Nothing but encoded bytes ever crosses from one lua_State to another: an
 * RPC's arguments and result, an error's fields, a KV value in storage. The
 * encoding is deterministic: a table's keys are written in eu_keycmp order,
 * so the same value always gives the same bytes, in any process.
 *
 * Encodable: nil, booleans, integers, floats, strings, and tables of those
 * (keys of type boolean, number or string). Metatables are not carried.
 * Functions, userdata, threads, cycles and nesting deeper than
 * EU_CLONE_MAXDEPTH are refused with a message naming where the value sits,
 * e.g. "cannot clone a function (at args[2].onDone)".
 *
 * Decoding trusts nothing: malformed bytes give EU_ECORRUPT, never a crash.
 */
#ifndef EUTAXY_CLONE_H
#define EUTAXY_CLONE_H

#include <lua.h>
#include "buf.h"

#define EU_CLONE_MAXDEPTH 100

/* Appends to b the n values at L[idx], L[idx+1], ... L[idx+n-1]. The stack is unchanged. */
int eu_clone_encode(lua_State *L, int idx, int n, eu_buf *b, char *err, size_t errlen);
/* Pushes the values that p..p+len holds; *nout gets how many. Checks the stack. */
int eu_clone_decode(lua_State *L, const char *p, size_t len, int *nout, char *err, size_t errlen);
/* Appends a readable, deterministic rendering (Lua-literal-like) of the encoded
 * values, separated by ", ", cut with "..." past maxlen bytes. */
int eu_clone_format(const char *p, size_t len, eu_buf *out, size_t maxlen);

/* The total order of keys that pairs, next and the encoder use:
 * numbers (by value; integers and floats compared exactly), then strings
 * (bytewise), then false, true, then other types in a fixed order of type.
 * Returns <0, 0, >0. Does not call metamethods. */
int eu_keycmp(lua_State *L, int a, int b);

#endif
