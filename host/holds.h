/*
 * The checker's built-in properties over a table, sim.unique and
 * sim.everyRow, decided in C over the rows of a SELECT * without making a
 * Lua table of each row (lua/eutaxy/check.lua has their definitions).
 *
 * Only a pass is final. When a property fails here, or cannot be decided
 * here (a column it names is not in the result, the query fails, memory
 * runs out), the checker evaluates it in Lua, which raises the error or
 * says why it failed. So what is here must never pass where check.lua
 * fails: spec/holds_differential_spec.lua compares the two on random
 * tables.
 */
#ifndef EUTAXY_HOLDS_H
#define EUTAXY_HOLDS_H

#include <lua.h>

#include "store.h"

#define EU_PROP_CONDS 16

typedef struct eu_cond {
  const char *column;
  int op;           /* EU_OP_* */
  int type;         /* of the value compared with: LUA_TNUMBER or LUA_TSTRING */
  int isint;
  lua_Integer i;
  double f;
  const char *s;
  size_t n;
} eu_cond;

typedef struct eu_prop {
  int unique;       /* sim.unique on c[0].column; else sim.everyRow */
  int n;
  eu_cond c[EU_PROP_CONDS];
  char *owned;      /* its strings, when eu_prop_own copied them */
} eu_prop;

/* Reads the property at idx (an invariant table from check.lua): 1, or 0
 * when it is not of a kind decided here (or has more conditions than
 * EU_PROP_CONDS). Its strings point into the Lua values, which the caller
 * keeps on the stack while p is used. */
int eu_prop_read(lua_State *L, int idx, eu_prop *p);

/* Copies p's strings to memory p owns, for a property kept while Lua code
 * may change the tables it was read from: EU_OK or EU_ENOMEM. */
int eu_prop_own(eu_prop *p);
void eu_prop_free(eu_prop *p);

/* Steps st (prepared, a read-only SELECT *) to its end and resets it.
 * 1 when every row meets p, 0 when one does not or the answer is not
 * known here. */
int eu_holds_eval(eu_store *s, sqlite3_stmt *st, const eu_prop *p);
/* The same for the n properties ps over one pass of st's rows: 1 when
 * every row meets every one of them. */
int eu_holds_eval_all(eu_store *s, sqlite3_stmt *st, const eu_prop *const *ps, int n);

/* The same over sql's rows in o's store, read between steps by one outside
 * the object (the checker): 0 also when the store cannot be read, or is in
 * the middle of a turn. Writes nothing, so a checkpoint need not keep the
 * store for it; the read counts as an observation of o (eu_world_observe). */
typedef struct eu_world eu_world;
typedef struct eu_object eu_object;
int eu_holds(eu_world *w, eu_object *o, const char *sql, size_t len, const eu_prop *p);
int eu_holds_all(eu_world *w, eu_object *o, const char *sql, size_t len, const eu_prop *const *ps, int n);

#endif
