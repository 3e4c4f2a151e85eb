/*
 * clone.h: values crossing between isolates.
 *
 * Nothing but encoded bytes ever crosses from one lua_State to another: an
 * RPC's arguments and result, an error's fields, a KV value in storage. The
 * encoding is deterministic: a table's keys are written in eu_keycmp order,
 * so the same value always gives the same bytes, in any process.
 *
 * Encodable: nil, booleans, integers, floats, strings, and tables of those
 * (keys of type boolean, number or string). Metatables are not carried,
 * with one exception: an object's id (eutaxy.Id) crosses as an id, and
 * arrives as one where the state has registered the class
 * (eu_clone_set_id_class). Nothing else is ever made an id: a plain table
 * with the same fields stays a plain table.
 * Functions, userdata, threads, cycles, nesting deeper than
 * EU_CLONE_MAXDEPTH and values whose encoding passes EU_CLONE_MAXBYTES are
 * refused with a message naming where the value sits, e.g. "cannot clone a
 * function (at args[2].onDone)".
 *
 * Decoding trusts nothing: malformed bytes give EU_ECORRUPT, never a crash.
 */
#ifndef EUTAXY_CLONE_H
#define EUTAXY_CLONE_H

#include <lua.h>
#include "buf.h"

#define EU_CLONE_MAXDEPTH 100
/* A table met twice is written twice, so a value that shares tables level
 * after level (for i = 1, 40 do t = { t, t } end) would encode to terabytes.
 * Durable Objects refuse RPC messages past 32 MiB; this is twice that. A
 * build may lower it: the fuzz build does, so its inputs reach it quickly. */
#ifndef EU_CLONE_MAXBYTES
#define EU_CLONE_MAXBYTES (64u << 20)
#endif

/* Ids. The metatable at idx becomes L's id class: a table that has it is
 * encoded as an id (its binding, hex and name fields, nothing else), and an
 * id decodes to a new table { binding =, hex =, name = } that has it. In a
 * state with no class an id decodes to the plain table. Raises on memory. */
void eu_clone_set_id_class(lua_State *L, int idx);
/* Whether an id is one the state's world could have made: 0, or nonzero
 * with the reason in why. Called for every id encoded or decoded in L once
 * set; without it an id need only be well formed (a binding, 64 lowercase
 * hex digits, a name or none). Raises on memory. */
typedef int (*eu_clone_id_check)(lua_State *L, const char *binding, const char *hex, const char *name,
                                 size_t namelen, char *why, size_t whylen);
void eu_clone_set_id_check(lua_State *L, eu_clone_id_check check);

/* Appends to b the n values at L[idx], L[idx+1], ... L[idx+n-1]. The stack is unchanged. */
int eu_clone_encode(lua_State *L, int idx, int n, eu_buf *b, char *err, size_t errlen);
/* Pushes the value at idx encoded, as a Lua string: how a caller keeps
 * encoded bytes alive while a Lua error may still unwind past it. On
 * failure pushes nothing and returns the code, with the message in err. */
int eu_clone_push_encoded(lua_State *L, int idx, char *err, size_t errlen);
/* Pushes the values that p..p+len holds; *nout gets how many. Checks the stack. */
int eu_clone_decode(lua_State *L, const char *p, size_t len, int *nout, char *err, size_t errlen);
/* Whether the encoded values start with true: what a caller that only
 * tells a result from an error needs, read from the first bytes without
 * decoding the rest. */
int eu_clone_leads_true(const char *p, size_t len);
/* Appends a readable, deterministic rendering (Lua-literal-like) of the encoded
 * values, separated by ", ", cut with "..." past maxlen bytes. */
int eu_clone_format(const char *p, size_t len, eu_buf *out, size_t maxlen);

/* The total order of keys that pairs, next and the encoder use:
 * numbers (by value; integers and floats compared exactly), then strings
 * (bytewise), then false, true, then other types in a fixed order of type.
 * Returns <0, 0, >0. Does not call metamethods. */
int eu_keycmp(lua_State *L, int a, int b);

/* A key reduced to what eu_keycmp looks at, so C code can sort many keys
 * without keeping them on the Lua stack (the encoder and determ's pairs do). */
typedef struct eu_key {
  int type;            /* LUA_T* */
  int isint;           /* numbers: 1 for an integer, 0 for a float */
  lua_Integer i;       /* integers; booleans as 0 or 1 */
  lua_Number f;        /* floats */
  const char *s;       /* strings: the bytes, valid while the string is reachable */
  size_t len;
  const void *ref;     /* tables, functions, userdata, threads: identity only */
  size_t pos;          /* the caller's (eu_key_describe leaves it alone) */
} eu_key;

void eu_key_describe(lua_State *L, int idx, eu_key *k);
/* eu_keycmp's order on descriptions: two references of one type compare 0. */
int eu_key_cmp(const eu_key *a, const eu_key *b);
/* Sorts in eu_keycmp order; references of one type, which have no content to
 * order by, follow their address: a fixed order within one process only. */
void eu_key_sort(eu_key *keys, size_t n);

#endif
