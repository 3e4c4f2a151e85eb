/*
 * sim.unique and sim.everyRow over a result's rows, as holds.h says. The
 * values are compared as check.lua compares the Lua values the rows become
 * (lstore.c's push_column): an INTEGER is a Lua integer, a REAL a float,
 * TEXT and BLOB both strings; equal numbers are equal whatever their
 * subtypes, strings are compared bytewise, and every number sorts before
 * every string.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "buf.h"
#include "eutaxy.h"
#include "holds.h"
#include "world.h"

enum { EU_OP_NOTNULL, EU_OP_ISNULL, EU_OP_EQ, EU_OP_NE, EU_OP_LT, EU_OP_LE, EU_OP_GT, EU_OP_GE };

static const char *const op_names[] = {"notNull", "isNull", "eq", "ne", "lt", "le", "gt", "ge", NULL};

/* A string field of the table at idx, or NULL. */
static const char *string_field(lua_State *L, int idx, const char *k, size_t *n) {
  const char *s = NULL;
  if (lua_getfield(L, idx, k) == LUA_TSTRING) s = lua_tolstring(L, -1, n);
  lua_pop(L, 1);
  return s;
}

static int read_cond(lua_State *L, int idx, eu_cond *c) {
  size_t n;
  const char *op;
  int i;
  if (!(c->column = string_field(L, idx, "column", &n)) || !(op = string_field(L, idx, "op", &n))) return 0;
  for (i = 0; op_names[i] && strcmp(op_names[i], op) != 0; i++) {}
  if (!op_names[i]) return 0;
  c->op = i;
  if (c->op == EU_OP_NOTNULL || c->op == EU_OP_ISNULL) return 1;
  c->type = lua_getfield(L, idx, "value");
  if (c->type == LUA_TSTRING) {
    c->s = lua_tolstring(L, -1, &c->n);
  } else if (c->type == LUA_TNUMBER) {
    c->isint = lua_isinteger(L, -1);
    if (c->isint) c->i = lua_tointeger(L, -1);
    else c->f = lua_tonumber(L, -1);
    if (!c->isint && isnan(c->f)) c->type = LUA_TNIL;
  }
  lua_pop(L, 1);
  return c->type == LUA_TSTRING || c->type == LUA_TNUMBER;
}

int eu_prop_read(lua_State *L, int idx, eu_prop *p) {
  size_t n;
  const char *kind;
  int ok = 1, i;
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) != LUA_TTABLE || !(kind = string_field(L, idx, "kind", &n))) return 0;
  memset(p, 0, sizeof *p);
  if (strcmp(kind, "unique") == 0) {
    p->unique = 1;
    p->n = 1;
    return (p->c[0].column = string_field(L, idx, "column", &n)) != NULL;
  }
  if (strcmp(kind, "everyRow") != 0) return 0;
  if (lua_getfield(L, idx, "conditions") != LUA_TTABLE) {
    lua_pop(L, 1);
    return 0;
  }
  n = lua_rawlen(L, -1);
  if (n < 1 || n > EU_PROP_CONDS) ok = 0;
  p->n = (int)n;
  for (i = 0; ok && i < p->n; i++) {
    ok = lua_rawgeti(L, -1, i + 1) == LUA_TTABLE && read_cond(L, lua_gettop(L), &p->c[i]);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return ok;
}

static char *own(char **at, const char *s, size_t n) {
  char *p = *at;
  memcpy(p, s, n);
  p[n] = '\0';
  *at += n + 1;
  return p;
}

int eu_prop_own(eu_prop *p) {
  size_t need = 0;
  char *at;
  int j;
  for (j = 0; j < p->n; j++) {
    need += strlen(p->c[j].column) + 1;
    if (p->c[j].s) need += p->c[j].n + 1;
  }
  if (!(p->owned = at = malloc(need ? need : 1))) return EU_ENOMEM;
  for (j = 0; j < p->n; j++) {
    p->c[j].column = own(&at, p->c[j].column, strlen(p->c[j].column));
    if (p->c[j].s) p->c[j].s = own(&at, p->c[j].s, p->c[j].n);
  }
  return EU_OK;
}

void eu_prop_free(eu_prop *p) {
  free(p->owned);
  p->owned = NULL;
}

/* ---- comparing as Lua does -------------------------------------------- */

#define TWO63 9223372036854775808.0

/* i against f (not NaN), exactly: <0, 0, >0. */
static int cmp_int_float(sqlite3_int64 i, double f) {
  double fl;
  sqlite3_int64 k;
  if (f >= TWO63) return -1;
  if (f < -TWO63) return 1;
  fl = floor(f);
  k = (sqlite3_int64)fl;  /* in range: -2^63 <= fl < 2^63 */
  if (i != k) return i < k ? -1 : 1;
  return fl == f ? 0 : -1;
}

/* check.lua's compare(value, cond.value) for the column i of st's row,
 * which is not NULL. */
static int compare(sqlite3_stmt *st, int i, int type, const eu_cond *c) {
  if (type == SQLITE_INTEGER || type == SQLITE_FLOAT) {
    if (c->type == LUA_TSTRING) return -1;
    if (type == SQLITE_INTEGER) {
      sqlite3_int64 v = sqlite3_column_int64(st, i);
      if (c->isint) return v == c->i ? 0 : v < c->i ? -1 : 1;
      return cmp_int_float(v, c->f);
    } else {
      double v = sqlite3_column_double(st, i);
      if (c->isint) return -cmp_int_float(c->i, v);
      return v == c->f ? 0 : v < c->f ? -1 : 1;
    }
  }
  if (c->type == LUA_TNUMBER) return 1;
  if (type == SQLITE_TEXT) {
    const unsigned char *p = sqlite3_column_text(st, i);
    return eu_bytes_cmp(p ? (const void *)p : "", p ? (size_t)sqlite3_column_bytes(st, i) : 0, c->s, c->n);
  } else {
    const void *p = sqlite3_column_blob(st, i);
    return eu_bytes_cmp(p ? p : "", p ? (size_t)sqlite3_column_bytes(st, i) : 0, c->s, c->n);
  }
}

/* check.lua's holds(value, cond) for column col of st's row. */
static int meets(sqlite3_stmt *st, const eu_cond *c, int col) {
  int type = sqlite3_column_type(st, col), r;
  if (c->op == EU_OP_NOTNULL) return type != SQLITE_NULL;
  if (c->op == EU_OP_ISNULL) return type == SQLITE_NULL;
  if (type == SQLITE_NULL) return 0;
  if (type == SQLITE_FLOAT && isnan(sqlite3_column_double(st, col))) return 0;
  r = compare(st, col, type, c);
  switch (c->op) {
  case EU_OP_EQ: return r == 0;
  case EU_OP_NE: return r != 0;
  case EU_OP_LT: return r < 0;
  case EU_OP_LE: return r <= 0;
  case EU_OP_GT: return r > 0;
  default: return r >= 0;
  }
}

/* ---- unique ------------------------------------------------------------ */

/* A value as a key of a Lua table: a float with an integer's value is
 * that integer. A string's bytes are in the keys' byte buffer. */
typedef struct key {
  int kind;  /* 0 integer, 1 float, 2 string */
  sqlite3_int64 i;
  double f;
  size_t n, at;
  const char *p;  /* the bytes, once the buffer stops moving */
} key;

static int key_cmp(const void *pa, const void *pb) {
  const key *a = pa, *b = pb;
  if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
  if (a->kind == 0) return a->i == b->i ? 0 : a->i < b->i ? -1 : 1;
  if (a->kind == 1) return a->f == b->f ? 0 : a->f < b->f ? -1 : 1;
  return eu_bytes_cmp(a->p, a->n, b->p, b->n);
}

/* Adds column i of st's row to keys (an array of key) and bytes; 0 when
 * memory ran out. */
static int add_key(eu_buf *keys, eu_buf *bytes, sqlite3_stmt *st, int i) {
  int type = sqlite3_column_type(st, i);
  key k;
  if (type == SQLITE_NULL) return 1;
  memset(&k, 0, sizeof k);
  if (type == SQLITE_INTEGER) {
    k.i = sqlite3_column_int64(st, i);
  } else if (type == SQLITE_FLOAT) {
    double f = sqlite3_column_double(st, i);
    if (isnan(f)) return 1;  /* v == v is false: not counted */
    if (floor(f) == f && f >= -TWO63 && f < TWO63) {
      k.i = (sqlite3_int64)f;
    } else {
      k.kind = 1;
      k.f = f;
    }
  } else {
    const void *p = type == SQLITE_TEXT ? (const void *)sqlite3_column_text(st, i) : sqlite3_column_blob(st, i);
    k.kind = 2;
    k.n = p ? (size_t)sqlite3_column_bytes(st, i) : 0;
    k.at = bytes->n;
    if (k.n && eu_buf_put(bytes, p, k.n) != EU_OK) return 0;
  }
  return eu_buf_put(keys, &k, sizeof k) == EU_OK;
}

static int all_different(eu_buf *keys, const eu_buf *bytes) {
  key *k = (key *)(void *)keys->p;
  size_t n = keys->n / sizeof *k, i;
  if (n < 2) return 1;
  for (i = 0; i < n; i++) k[i].p = bytes->p ? bytes->p + k[i].at : "";
  qsort(k, n, sizeof *k, key_cmp);
  for (i = 1; i < n; i++)
    if (key_cmp(&k[i - 1], &k[i]) == 0) return 0;
  return 1;
}

/* ---- the rows ---------------------------------------------------------- */

/* Each condition's column in col, the last of that exact name (a Lua row
 * keeps the last value set under a name); 0 when one is missing. */
static int find_columns(sqlite3_stmt *st, const eu_prop *p, int *col) {
  int ncol = sqlite3_column_count(st), i, j;
  for (j = 0; j < p->n; j++) {
    col[j] = -1;
    for (i = 0; i < ncol; i++) {
      const char *name = sqlite3_column_name(st, i);
      if (name && strcmp(name, p->c[j].column) == 0) col[j] = i;
    }
    if (col[j] < 0) return 0;
  }
  return 1;
}

/* What one property of a pass needs: its columns, and for sim.unique the
 * keys seen so far. */
typedef struct pass {
  const eu_prop *p;
  int col[EU_PROP_CONDS];
  eu_buf keys, bytes;
} pass;

int eu_holds_eval_all(eu_store *s, sqlite3_stmt *st, const eu_prop *const *ps, int n) {
  pass few[4], *pa = few;
  int rc, holds = 1, i, j;
  if (n < 1 || !sqlite3_stmt_readonly(st)) {
    eu_store_reset(s, st);
    return 0;
  }
  if (n > (int)(sizeof few / sizeof few[0]) && !(pa = malloc((size_t)n * sizeof *pa))) {
    eu_store_reset(s, st);
    return 0;
  }
  for (i = 0; i < n; i++) {
    pa[i].p = ps[i];
    eu_buf_init(&pa[i].keys);
    eu_buf_init(&pa[i].bytes);
  }
  /* the names after the first step, which may recompile the statement */
  rc = eu_store_step(s, st);
  for (i = 0; i < n && holds; i++)
    if (rc < 0 || !find_columns(st, pa[i].p, pa[i].col)) holds = 0;
  for (; holds && rc == 1; rc = eu_store_step(s, st))
    for (i = 0; i < n && holds; i++) {
      const eu_prop *p = pa[i].p;
      if (p->unique) holds = add_key(&pa[i].keys, &pa[i].bytes, st, pa[i].col[0]);
      else
        for (j = 0; j < p->n && holds; j++) holds = meets(st, &p->c[j], pa[i].col[j]);
    }
  if (rc < 0) holds = 0;
  for (i = 0; i < n; i++) {
    if (holds && pa[i].p->unique) holds = all_different(&pa[i].keys, &pa[i].bytes);
    eu_buf_free(&pa[i].keys);
    eu_buf_free(&pa[i].bytes);
  }
  eu_store_reset(s, st);
  if (pa != few) free(pa);
  return holds;
}

int eu_holds_eval(eu_store *s, sqlite3_stmt *st, const eu_prop *p) {
  return eu_holds_eval_all(s, st, &p, 1);
}

int eu_holds_all(eu_world *w, eu_object *o, const char *sql, size_t len, const eu_prop *const *ps, int n) {
  char err[EU_ERRLEN];
  eu_store *s;
  sqlite3_stmt *st = NULL;
  if (!(s = eu_object_store_read(w, o, err, sizeof err)) || eu_store_in_turn(s) ||
      eu_store_prepare(s, sql, len, &st) != EU_OK || !st)
    return 0;
  eu_world_observe(w, o);
  return eu_holds_eval_all(s, st, ps, n);
}

int eu_holds(eu_world *w, eu_object *o, const char *sql, size_t len, const eu_prop *p) {
  return eu_holds_all(w, o, sql, len, &p, 1);
}
