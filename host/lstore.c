/*
 * lstore.c: the storage API as Lua sees it (see lstore.h).
 *
 * Owns the translation between Lua values and the store: bindings, result
 * tables, KV values (one eu_clone_encode value each), option checking and
 * the error messages user code reads. Must not run SQL itself: store.c
 * owns the connection and its policy.
 *
 * Errors are raised with lua_error on a plain string, so no C position is
 * prefixed; lua/eutaxy/storage.lua adds the user's own.
 *
 * Lua errors unwind with longjmp, so nothing here holds malloc'd memory
 * across a call that can raise: the one buffer lives in the functions'
 * shared upvalue, a userdata whose __gc frees it. Building a result
 * allocates, and an allocation can run a __gc finalizer of user code
 * between two rows of a statement in progress. Such a finalizer could reset
 * that statement, or evict it from the cache, under our feet; so while rows
 * are read the functions refuse to run (the busy flag), and the reading
 * runs under lua_pcall so that the flag is always lowered again.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "clone.h"
#include "eutaxy.h"
#include "lstore.h"
#include "sandbox.h"
#include "utf8.h"

typedef struct eu_lstate {
  eu_store *s;
  eu_buf scratch;  /* encoded values on their way to the store */
  int busy;        /* rows are being read: see the top of the file */
} eu_lstate;

#define LSTATE_MT "eutaxy.lstore"

/* Raising */

/* Raises the value at the top; a message gets the position of the Lua
 * code level calls up (none for level 0), as error(message, level) gives
 * it: storage.lua's methods that call a function here directly pass 2,
 * their caller's line. */
static int raise_top(lua_State *L, int level) {
  if (level > 0 && lua_type(L, -1) == LUA_TSTRING) {
    luaL_where(L, level);
    lua_insert(L, -2);
    lua_concat(L, 2);
  }
  return lua_error(L);
}

/* A message from fmt, raised as raise_top does; level 0 for none. */
static int raise_at(lua_State *L, int level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  lua_pushvfstring(L, fmt, ap);
  va_end(ap);
  return raise_top(L, level);
}

static int raise_store(lua_State *L, eu_store *s) {
  lua_pushstring(L, eu_store_errmsg(s));
  return lua_error(L);
}

static eu_lstate *lstate_at(lua_State *L, const char *fname, int level) {
  eu_lstate *ls = lua_touserdata(L, lua_upvalueindex(1));
  if (ls->busy)
    raise_at(L, level, "%s: storage cannot be used from a __gc finalizer that runs "
             "while another storage call reads rows", fname);
  if (!eu_store_available(ls->s)) raise_at(L, level, "%s: %s", fname, eu_store_errmsg(ls->s));
  return ls;
}

static eu_lstate *lstate(lua_State *L, const char *fname) { return lstate_at(L, fname, 0); }

/* Runs fn under lua_pcall with ud, the value at idx and the storage
 * functions' shared state (their upvalue) as its arguments. */
static int protect(lua_State *L, lua_CFunction fn, void *ud, int idx, int nresults) {
  idx = lua_absindex(L, idx);
  lua_pushcfunction(L, fn);
  lua_pushlightuserdata(L, ud);
  lua_pushvalue(L, idx);
  lua_pushvalue(L, lua_upvalueindex(1));
  return lua_pcall(L, 3, nresults, 0);
}

/* sql:exec */

typedef struct exec_ctx {
  eu_store *s;
  sqlite3_stmt *st;
  int cursor;          /* the result is a cursor (l_query) */
} exec_ctx;

static void push_column(lua_State *L, sqlite3_stmt *st, int i) {
  const void *p;
  int n;
  switch (sqlite3_column_type(st, i)) {
  case SQLITE_INTEGER:
    lua_pushinteger(L, (lua_Integer)sqlite3_column_int64(st, i));
    break;
  case SQLITE_FLOAT:
    lua_pushnumber(L, (lua_Number)sqlite3_column_double(st, i));
    break;
  case SQLITE_TEXT:
    p = sqlite3_column_text(st, i);
    n = sqlite3_column_bytes(st, i);
    lua_pushlstring(L, p ? p : "", p ? (size_t)n : 0);
    break;
  case SQLITE_BLOB:
    p = sqlite3_column_blob(st, i);  /* NULL for a zero-length blob */
    n = sqlite3_column_bytes(st, i);
    lua_pushlstring(L, p ? p : "", p ? (size_t)n : 0);
    break;
  default:
    lua_pushnil(L);
    break;
  }
}

/* The names of a result's fields, kept as user values of the functions'
 * shared state (push_state): setting a field by a string made once costs
 * less than by a C string, which Lua looks up every time. */
enum { KEY_ROWS = 1, KEY_CURSOR_ROWS, KEY_NAMES, KEY_READ, KEY_WRITTEN, KEY_POS, NKEYS };
static const char *const key_names[NKEYS] = { NULL, "rows", "_rows", "columnNames", "rowsRead",
                                              "rowsWritten", "_pos" };

/* t[key k] = the value on top, popped; the keys are those of the state at index state. */
static void set_key(lua_State *L, int t, int state, int k) {
  lua_getiuservalue(L, state, k);
  lua_insert(L, -2);
  lua_rawset(L, t);
}

/* Protected, with the arguments protect gives it (x, then the Cursor class
 * or the query kept alive, then the state): steps the prepared, bound
 * statement to its end and leaves the result table: { rows, columnNames,
 * rowsRead, rowsWritten }, or, when the context asks for one, a cursor of
 * the class with _rows and _pos (storage.lua's Cursor) in place of rows.
 * Column names are read after the first step, because the step may
 * recompile a cached statement (SELECT * after ALTER TABLE). */
static int exec_rows(lua_State *L) {
  exec_ctx *x = lua_touserdata(L, 1);
  sqlite3 *db = eu_store_db(x->s);
  sqlite3_int64 before = sqlite3_total_changes64(db), written;
  lua_Integer nrows = 0;
  int rc, i, ncol;
  lua_settop(L, 3);
  lua_createtable(L, 0, 5);  /* 4: the result */
  lua_newtable(L);           /* 5: rows */
  rc = eu_store_step(x->s, x->st);
  ncol = sqlite3_column_count(x->st);
  for (; rc == 1; rc = eu_store_step(x->s, x->st)) {
    lua_createtable(L, ncol, 1);
    for (i = 0; i < ncol; i++) {
      if (sqlite3_column_type(x->st, i) == SQLITE_NULL) continue;  /* a hole */
      push_column(L, x->st, i);
      lua_rawseti(L, -2, i + 1);
    }
    lua_rawseti(L, 5, ++nrows);
  }
  if (rc < 0) return raise_store(L, x->s);
  written = sqlite3_total_changes64(db) - before;
  set_key(L, 4, 3, x->cursor ? KEY_CURSOR_ROWS : KEY_ROWS);
  lua_createtable(L, ncol, 0);
  for (i = 0; i < ncol; i++) {
    const char *name = sqlite3_column_name(x->st, i);
    lua_pushstring(L, name ? name : "");
    lua_rawseti(L, -2, i + 1);
  }
  set_key(L, 4, 3, KEY_NAMES);
  lua_pushinteger(L, nrows + (lua_Integer)written);
  set_key(L, 4, 3, KEY_READ);
  lua_pushinteger(L, (lua_Integer)written);
  set_key(L, 4, 3, KEY_WRITTEN);
  if (x->cursor) {
    lua_pushinteger(L, 0);
    set_key(L, 4, 3, KEY_POS);
    lua_pushvalue(L, 2);
    lua_setmetatable(L, 4);
  }
  return 1;
}

/* Row objects (storage.lua's as_object, which stays the definition): the
 * row at stack index row as a table keyed by the names at names, in
 * order, so a later column of a name wins and a NULL one takes the name
 * away. 0, pushing nothing, for anything but a table of ncol strings and a
 * table row, for as_object to say what is wrong. */
static int push_object(lua_State *L, int names, int row, lua_Integer ncol) {
  lua_Integer i;
  if (lua_type(L, row) != LUA_TTABLE) return 0;
  lua_createtable(L, 0, ncol > 64 ? 64 : (int)ncol);
  for (i = 1; i <= ncol; i++) {
    lua_rawgeti(L, names, i);
    lua_rawgeti(L, row, i);
    lua_rawset(L, -3);
  }
  return 1;
}

/* The number of names at idx, or -1 when one of them is no string. */
static lua_Integer column_names(lua_State *L, int idx) {
  lua_Integer n, i;
  if (lua_type(L, idx) != LUA_TTABLE) return -1;
  n = (lua_Integer)lua_rawlen(L, idx);
  for (i = 1; i <= n; i++) {
    int t = lua_rawgeti(L, idx, i);
    lua_pop(L, 1);
    if (t != LUA_TSTRING) return -1;
  }
  return n;
}

/* row_object(names, row) -> the object, or nothing */
static int row_object(lua_State *L, int metered) {
  lua_Integer ncol = column_names(L, 1);
  if (ncol < 0) return 0;
  if (metered) eu_sandbox_charge(L, ncol + 1, "cursor:next");
  return push_object(L, 1, 2, ncol);
}

/* row_objects(names, rows, from) -> { the objects of rows[from], rows[from + 1], ... }, or nothing */
static int row_objects(lua_State *L, int metered) {
  int isint;
  lua_Integer ncol = column_names(L, 1), from = lua_tointegerx(L, 3, &isint), n, i;
  if (ncol < 0 || lua_type(L, 2) != LUA_TTABLE || !isint) return 0;
  n = (lua_Integer)luaL_len(L, 2);
  if (metered && n >= from) eu_sandbox_charge(L, (n - from + 1) * (ncol + 1), "cursor:toArray");
  lua_createtable(L, n >= from && n - from < 1024 ? (int)(n - from + 1) : 0, 0);
  for (i = from; i <= n; i++) {
    lua_rawgeti(L, 2, i);
    if (!push_object(L, 1, lua_gettop(L), ncol)) return 0;
    lua_rawseti(L, -3, i - from + 1);
    lua_pop(L, 1);
  }
  return 1;
}

int eu_sql_row_object(lua_State *L) { return row_object(L, 0); }
int eu_sql_row_object_metered(lua_State *L) { return row_object(L, 1); }
int eu_sql_row_objects(lua_State *L) { return row_objects(L, 0); }
int eu_sql_row_objects_metered(lua_State *L) { return row_objects(L, 1); }

static int bind_arg(lua_State *L, sqlite3_stmt *st, int i, int idx) {
  size_t n;
  const char *p;
  switch (lua_type(L, idx)) {
  case LUA_TBOOLEAN:
    return sqlite3_bind_int(st, i, lua_toboolean(L, idx));
  case LUA_TNUMBER:
    if (lua_isinteger(L, idx)) return sqlite3_bind_int64(st, i, (sqlite3_int64)lua_tointeger(L, idx));
    return sqlite3_bind_double(st, i, (double)lua_tonumber(L, idx));
  case LUA_TSTRING:
    /* The argument stays on the stack until the statement is reset. */
    p = lua_tolstring(L, idx, &n);
    if (eu_utf8_valid(p, n))
      return sqlite3_bind_text64(st, i, p, n, SQLITE_STATIC, SQLITE_UTF8);
    return sqlite3_bind_blob64(st, i, p, n, SQLITE_STATIC);
  default:
    return sqlite3_bind_null(st, i);
  }
}

/* sql:exec with the query at q and its bindings after it: the result
 * table, or a cursor of the class at 1 when cursor is set. Errors carry
 * the position level calls up (raise_top). */
static int run_exec(lua_State *L, int q, int cursor, int level) {
  eu_lstate *ls = lstate_at(L, "sql:exec", level);
  exec_ctx x;
  size_t len;
  const char *sql;
  int i, nb, np, status;
  if (lua_type(L, q) != LUA_TSTRING)
    return raise_at(L, level, "sql:exec: the query must be a string, got %s", luaL_typename(L, q));
  sql = lua_tolstring(L, q, &len);
  nb = lua_gettop(L) - q;
  for (i = 1; i <= nb; i++) {
    int t = lua_type(L, q + i);
    if (t != LUA_TNIL && t != LUA_TBOOLEAN && t != LUA_TNUMBER && t != LUA_TSTRING)
      return raise_at(L, level, "sql:exec: cannot bind a %s (parameter %d)", lua_typename(L, t), i);
  }
  x.s = ls->s;
  x.cursor = cursor;
  if (eu_store_touch(x.s) < 0 || eu_store_prepare(x.s, sql, len, &x.st) < 0)
    return raise_at(L, level, "%s", eu_store_errmsg(x.s));
  if (!x.st) return raise_at(L, level, "sql:exec: the query holds no SQL statement");
  np = sqlite3_bind_parameter_count(x.st);
  if (np != nb) {
    eu_store_reset(x.s, x.st);
    return raise_at(L, level, "sql:exec: the statement takes %d binding%s, got %d", np, np == 1 ? "" : "s", nb);
  }
  for (i = 1; i <= nb; i++) {
    int rc = bind_arg(L, x.st, i, q + i);
    if (rc != SQLITE_OK) {
      eu_store_reset(x.s, x.st);
      return raise_at(L, level, "sql:exec: cannot bind parameter %d: %s", i, sqlite3_errstr(rc));
    }
  }
  ls->busy = 1;
  status = protect(L, exec_rows, &x, cursor ? 1 : q, 1);
  ls->busy = 0;
  eu_store_reset(x.s, x.st);
  if (status != LUA_OK) return raise_top(L, level);
  return 1;
}

/* exec(query, ...) -> { rows, columnNames, rowsRead, rowsWritten } */
static int l_exec(lua_State *L) {
  return run_exec(L, 1, 0, 0);
}

/* query(Cursor, query, ...) -> a Cursor: what storage.lua's sql:exec
 * returns, made here rather than copied from exec's table. sql:exec calls
 * it directly, so its errors name the line that called sql:exec. */
static int l_query(lua_State *L) {
  if (lua_type(L, 1) != LUA_TTABLE)
    return raise_at(L, 2, "sql:exec: the cursor class must be a table, got %s", luaL_typename(L, 1));
  return run_exec(L, 2, 1, 2);
}

/* KV */

static const char *check_key(lua_State *L, int idx, const char *fname, size_t *len) {
  if (lua_type(L, idx) != LUA_TSTRING)
    raise_at(L, 0, "%s: the key must be a string, got %s", fname, luaL_typename(L, idx));
  return lua_tolstring(L, idx, len);
}

/* Every element of the array at idx must be a string; returns how many. */
static lua_Integer check_keys(lua_State *L, int idx, const char *fname) {
  lua_Integer i, n = (lua_Integer)lua_rawlen(L, idx);
  for (i = 1; i <= n; i++) {
    int t = lua_rawgeti(L, idx, i);
    lua_pop(L, 1);
    if (t != LUA_TSTRING)
      raise_at(L, 0, "%s: keys must be strings, got a %s at position %d", fname,
            lua_typename(L, t), (int)i);
  }
  return n;
}

/* Pushes the value encoded in val. */
static void push_value(lua_State *L, const char *fname, const char *key,
                       const void *val, size_t vlen) {
  char err[EU_ERRLEN];
  int n = 0;
  if (eu_clone_decode(L, val, vlen, &n, err, sizeof err) < 0)
    raise_at(L, 0, "%s: the value of key '%s' does not decode: %s", fname, key, err);
  if (n != 1) {
    lua_pop(L, n);
    raise_at(L, 0, "%s: the value of key '%s' does not decode: %d values", fname, key, n);
  }
}

/* Pushes the value stored at key, or nothing and returns 0. */
static int get_one(lua_State *L, eu_store *s, const char *key, size_t klen) {
  const void *val;
  size_t vlen;
  int rc = eu_store_kv_get(s, key, klen, &val, &vlen);
  if (rc < 0) raise_store(L, s);
  if (rc == 0) return 0;
  /* Copied first: pushing the copy can run a finalizer, which might reuse
   * the statement val points into, but only once the bytes are copied. */
  lua_pushlstring(L, val, vlen);
  push_value(L, "storage:get", key, lua_tostring(L, -1), vlen);
  lua_remove(L, -2);
  return 1;
}

static int l_get(lua_State *L) {
  eu_lstate *ls = lstate(L, "storage:get");
  size_t klen;
  const char *key;
  lua_Integer i, n;
  if (lua_type(L, 1) == LUA_TTABLE) {
    n = check_keys(L, 1, "storage:get");
    lua_newtable(L);
    for (i = 1; i <= n; i++) {
      lua_rawgeti(L, 1, i);
      key = lua_tolstring(L, -1, &klen);
      if (get_one(L, ls->s, key, klen)) lua_rawset(L, -3);
      else lua_pop(L, 1);
    }
    return 1;
  }
  if (lua_type(L, 1) != LUA_TSTRING)
    return raise_at(L, 0, "storage:get: the key must be a string or an array of strings, got %s",
                 luaL_typename(L, 1));
  key = lua_tolstring(L, 1, &klen);
  if (!get_one(L, ls->s, key, klen)) lua_pushnil(L);
  return 1;
}

static int put_one(lua_State *L, eu_lstate *ls, const char *key, size_t klen, int vidx,
                   char *err, size_t errlen) {
  int rc;
  eu_buf_reset(&ls->scratch);
  rc = eu_clone_encode(L, vidx, 1, &ls->scratch, err, errlen);
  if (rc < 0) return rc;
  rc = eu_store_kv_put(ls->s, key, klen, ls->scratch.p, ls->scratch.n);
  if (rc < 0) eu_err(err, errlen, rc, "%s", eu_store_errmsg(ls->s));
  return rc;
}

/* Protected, inside a savepoint: writes every pair of the table (argument
 * 2), in key order so that the first failure is the same in every run. */
static int put_many(lua_State *L) {
  eu_lstate *ls = lua_touserdata(L, 1);
  char err[EU_ERRLEN];
  eu_span *keys;
  size_t i, n = 0;
  lua_settop(L, 2);
  lua_pushnil(L);
  while (lua_next(L, 2)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) != LUA_TSTRING)
      return raise_at(L, 0, "storage:put: the keys of an entries table must be strings");
    n++;
  }
  /* A userdata, so the array goes with the garbage if a later step raises;
   * the strings it points to are kept reachable by the array at 4, whatever
   * a finalizer does to the entries table meanwhile. */
  keys = lua_newuserdatauv(L, n ? n * sizeof *keys : 1, 0);
  lua_createtable(L, (int)n, 0);
  i = 0;
  lua_pushnil(L);
  while (i < n && lua_next(L, 2)) {
    lua_pop(L, 1);
    keys[i].p = lua_tolstring(L, -1, &keys[i].n);
    lua_pushvalue(L, -1);
    lua_rawseti(L, 4, (lua_Integer)++i);
  }
  n = i;
  lua_settop(L, 4);
  if (n) qsort(keys, n, sizeof *keys, eu_span_cmp);
  for (i = 0; i < n; i++) {
    lua_pushlstring(L, keys[i].p, keys[i].n);
    lua_rawget(L, 2);
    if (put_one(L, ls, keys[i].p, keys[i].n, -1, err, sizeof err) < 0)
      return raise_at(L, 0, "storage:put: key '%s': %s", keys[i].p, err);
    lua_pop(L, 1);
  }
  return 0;
}

static int l_put(lua_State *L) {
  eu_lstate *ls = lstate(L, "storage:put");
  char err[EU_ERRLEN];
  size_t klen;
  const char *key;
  int status;
  if (lua_type(L, 1) == LUA_TTABLE) {
    if (eu_store_savepoint(ls->s) < 0) return raise_store(L, ls->s);
    status = protect(L, put_many, ls, 1, 0);
    if (status != LUA_OK) {
      eu_store_rollback_to(ls->s);
      return lua_error(L);
    }
    if (eu_store_release(ls->s) < 0) return raise_store(L, ls->s);
    return 0;
  }
  key = check_key(L, 1, "storage:put", &klen);
  if (lua_isnoneornil(L, 2)) return raise_at(L, 0, "storage:put: value is nil; use delete");
  if (put_one(L, ls, key, klen, 2, err, sizeof err) < 0)
    return raise_at(L, 0, "storage:put: %s", err);
  return 0;
}

static int l_delete(lua_State *L) {
  eu_lstate *ls = lstate(L, "storage:delete");
  size_t klen;
  const char *key;
  lua_Integer i, n, count = 0;
  int rc;
  if (lua_type(L, 1) == LUA_TTABLE) {
    n = check_keys(L, 1, "storage:delete");
    /* All or nothing; nothing in the loop raises before the release. */
    if (eu_store_savepoint(ls->s) < 0) return raise_store(L, ls->s);
    for (i = 1; i <= n; i++) {
      lua_rawgeti(L, 1, i);
      key = lua_tolstring(L, -1, &klen);
      rc = eu_store_kv_delete(ls->s, key, klen);
      lua_pop(L, 1);
      if (rc < 0) {
        lua_pushstring(L, eu_store_errmsg(ls->s));
        eu_store_rollback_to(ls->s);
        return lua_error(L);
      }
      count += rc;
    }
    if (eu_store_release(ls->s) < 0) return raise_store(L, ls->s);
    lua_pushinteger(L, count);
    return 1;
  }
  key = check_key(L, 1, "storage:delete", &klen);
  rc = eu_store_kv_delete(ls->s, key, klen);
  if (rc < 0) return raise_store(L, ls->s);
  lua_pushboolean(L, rc);
  return 1;
}

static int l_delete_all(lua_State *L) {
  eu_lstate *ls = lstate(L, "storage:deleteAll");
  if (eu_store_delete_all(ls->s) < 0) return raise_store(L, ls->s);
  return 0;
}

typedef struct list_ctx {
  lua_State *L;
  eu_store *s;
  eu_kv_range r;
  lua_Integer n;
  char err[EU_ERRLEN];
} list_ctx;

static int list_each(void *ud, const char *key, size_t klen, const void *val, size_t vlen) {
  list_ctx *x = ud;
  lua_State *L = x->L;
  int n = 0;
  lua_createtable(L, 0, 2);
  lua_pushlstring(L, key, klen);
  lua_setfield(L, -2, "key");
  if (eu_clone_decode(L, val, vlen, &n, x->err, sizeof x->err) < 0 || n != 1) {
    lua_pushstring(L, key);
    lua_pushstring(L, n != 1 && x->err[0] == '\0' ? "not one value" : x->err);
    return EU_ECORRUPT;
  }
  lua_setfield(L, -2, "value");
  lua_rawseti(L, 3, ++x->n);
  return 0;
}

/* Protected: leaves the array of pairs. */
static int list_rows(lua_State *L) {
  list_ctx *x = lua_touserdata(L, 1);
  int rc;
  x->L = L;
  x->n = 0;
  x->err[0] = '\0';
  lua_settop(L, 2);
  lua_newtable(L);  /* 3 */
  rc = eu_store_kv_list(x->s, &x->r, list_each, x);
  if (rc == EU_ECORRUPT)
    return raise_at(L, 0, "storage:list: the value of key '%s' does not decode: %s",
                 lua_tostring(L, -2), lua_tostring(L, -1));
  if (rc < 0) return raise_store(L, x->s);
  lua_settop(L, 3);
  return 1;
}

/* The string option name of the table at idx, or NULL; leaves it pushed. */
static const char *opt_string(lua_State *L, int idx, const char *name, size_t *len) {
  int t = lua_getfield(L, idx, name);
  if (t == LUA_TNIL) return NULL;
  if (t != LUA_TSTRING)
    raise_at(L, 0, "storage:list: option %s must be a string, got %s", name, lua_typename(L, t));
  return lua_tolstring(L, -1, len);
}

static int bytes_cmp(const char *a, size_t an, const char *b, size_t bn) {
  int c = memcmp(a, b, an < bn ? an : bn);
  if (c != 0) return c;
  return an < bn ? -1 : an > bn;
}

/* Raises the lower bound of r to the inclusive key k. */
static void lower_to(eu_kv_range *r, const char *k, size_t n) {
  if (!r->lo || bytes_cmp(k, n, r->lo, r->lolen) > 0) {
    r->lo = k;
    r->lolen = n;
  }
}

/* Lowers the upper bound of r to the exclusive key k. */
static void upper_to(eu_kv_range *r, const char *k, size_t n) {
  if (!r->hi || bytes_cmp(k, n, r->hi, r->hilen) < 0) {
    r->hi = k;
    r->hilen = n;
  }
}

static int l_list(lua_State *L) {
  eu_lstate *ls = lstate(L, "storage:list");
  list_ctx x;
  const char *start, *after, *end, *prefix;
  size_t slen = 0, alen = 0, elen = 0, plen = 0;
  int t, status;
  memset(&x, 0, sizeof x);
  x.s = ls->s;
  x.r.limit = -1;
  t = lua_type(L, 1);
  if (t == LUA_TNONE || t == LUA_TNIL) {
    lua_settop(L, 0);
    lua_newtable(L);
  } else if (t != LUA_TTABLE) {
    return raise_at(L, 0, "storage:list: options must be a table, got %s", lua_typename(L, t));
  }
  lua_settop(L, 1);
  /* Each string stays pushed, so the bounds can point into it. */
  start = opt_string(L, 1, "start", &slen);
  after = opt_string(L, 1, "startAfter", &alen);
  end = opt_string(L, 1, "end", &elen);
  prefix = opt_string(L, 1, "prefix", &plen);
  if (start && after) return raise_at(L, 0, "storage:list: options start and startAfter cannot both be given");
  t = lua_getfield(L, 1, "limit");
  if (t != LUA_TNIL) {
    lua_Integer lim;
    if (t != LUA_TNUMBER)
      return raise_at(L, 0, "storage:list: option limit must be a positive integer, got %s", lua_typename(L, t));
    if (!lua_isinteger(L, -1)) {
      lua_Number f = lua_tonumber(L, -1);
      if (!(f >= 1 && f < 0x1p63 && floor(f) == f))
        return raise_at(L, 0, "storage:list: option limit must be a positive integer, got %f", f);
      lim = (lua_Integer)f;
    } else {
      lim = lua_tointeger(L, -1);
    }
    if (lim < 1) return raise_at(L, 0, "storage:list: option limit must be a positive integer, got %I", lim);
    x.r.limit = lim;
  }
  t = lua_getfield(L, 1, "reverse");
  if (t != LUA_TNIL && t != LUA_TBOOLEAN)
    return raise_at(L, 0, "storage:list: option reverse must be a boolean, got %s", lua_typename(L, t));
  x.r.reverse = lua_toboolean(L, -1);
  if (start) lower_to(&x.r, start, slen);
  if (after) {  /* the first key after k is k followed by a zero byte */
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addlstring(&b, after, alen);
    luaL_addchar(&b, '\0');
    luaL_pushresult(&b);
    after = lua_tolstring(L, -1, &alen);
    lower_to(&x.r, after, alen);
  }
  if (end) upper_to(&x.r, end, elen);
  if (prefix && plen) {
    /* Keys with the prefix run from the prefix up to, not including, the
     * prefix with its last byte below 0xff increased and the rest dropped. */
    size_t n = plen;
    lower_to(&x.r, prefix, plen);
    while (n > 0 && (unsigned char)prefix[n - 1] == 0xff) n--;
    if (n > 0) {
      char *p;
      luaL_Buffer b;
      p = luaL_buffinitsize(L, &b, n);
      memcpy(p, prefix, n);
      p[n - 1] = (char)((unsigned char)p[n - 1] + 1);
      luaL_pushresultsize(&b, n);
      p = (char *)lua_tolstring(L, -1, &n);
      upper_to(&x.r, p, n);
    }
  }
  if (x.r.lo && x.r.hi && bytes_cmp(x.r.lo, x.r.lolen, x.r.hi, x.r.hilen) >= 0) {
    lua_newtable(L);  /* an empty range; an upper bound below the lower one is no error */
    return 1;
  }
  ls->busy = 1;
  status = protect(L, list_rows, &x, 1, 1);
  ls->busy = 0;
  if (status != LUA_OK) return lua_error(L);
  return 1;
}

/* Alarm */

static int l_get_alarm(lua_State *L) {
  eu_lstate *ls = lstate(L, "storage:getAlarm");
  int has, retry;
  int64_t at;
  if (eu_store_touch(ls->s) < 0 || eu_store_get_alarm(ls->s, &has, &at, &retry) < 0)
    return raise_store(L, ls->s);
  if (has) lua_pushinteger(L, (lua_Integer)at);
  else lua_pushnil(L);
  return 1;
}

static int l_set_alarm(lua_State *L) {
  eu_lstate *ls = lstate(L, "storage:setAlarm");
  int64_t at;
  if (lua_type(L, 1) != LUA_TNUMBER)
    return raise_at(L, 0, "storage:setAlarm: the time must be a number of ms since the epoch, got %s",
                 luaL_typename(L, 1));
  if (lua_isinteger(L, 1)) {
    at = (int64_t)lua_tointeger(L, 1);
  } else {
    lua_Number f = floor(lua_tonumber(L, 1));
    if (!(f >= -0x1p63 && f < 0x1p63))  /* also refuses NaN */
      return raise_at(L, 0, "storage:setAlarm: the time must be a finite number of ms "
                      "that fits an integer, got %f", f);
    at = (int64_t)f;
  }
  if (eu_store_set_alarm(ls->s, at, 0) < 0) return raise_store(L, ls->s);
  return 0;
}

static int l_delete_alarm(lua_State *L) {
  eu_lstate *ls = lstate(L, "storage:deleteAlarm");
  if (eu_store_delete_alarm(ls->s) < 0) return raise_store(L, ls->s);
  return 0;
}

/* sync: every write of the turn so far commits when the turn ends, before
 * anything it sends leaves (the output gate), so there is nothing to wait
 * for. Like every storage call it is refused while the gate is closed. */
static int l_sync(lua_State *L) {
  lstate(L, "storage:sync");
  return 0;
}

static int l_database_size(lua_State *L) {
  eu_lstate *ls = lstate(L, "storage.sql.databaseSize");
  int64_t bytes;
  if (eu_store_database_size(ls->s, &bytes) < 0) return raise_store(L, ls->s);
  lua_pushinteger(L, (lua_Integer)bytes);
  return 1;
}

/* transactionSync: a plain lua_pcall, not lua_pcallk, on purpose: the
 * savepoint cannot stay open while the invocation is suspended, so a yield
 * inside fn fails with Lua's "attempt to yield across a C-call boundary". */
static int l_transaction_sync(lua_State *L) {
  eu_lstate *ls = lstate(L, "storage:transactionSync");
  if (lua_type(L, 1) != LUA_TFUNCTION)
    return raise_at(L, 0, "storage:transactionSync: expected a function, got %s", luaL_typename(L, 1));
  if (eu_store_savepoint(ls->s) < 0) return raise_store(L, ls->s);
  if (lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0) != LUA_OK) {
    eu_store_rollback_to(ls->s);
    return lua_error(L);  /* the same error value */
  }
  if (eu_store_release(ls->s) < 0) return raise_store(L, ls->s);
  return lua_gettop(L);
}

static int l_gc(lua_State *L) {
  eu_lstate *ls = lua_touserdata(L, 1);
  eu_buf_free(&ls->scratch);
  return 0;
}

static const luaL_Reg eu_lstore_funcs[] = {
  { "exec", l_exec },
  { "query", l_query },
  { "get", l_get },
  { "put", l_put },
  { "delete", l_delete },
  { "list", l_list },
  { "deleteAll", l_delete_all },
  { "getAlarm", l_get_alarm },
  { "setAlarm", l_set_alarm },
  { "deleteAlarm", l_delete_alarm },
  { "transactionSync", l_transaction_sync },
  { "sync", l_sync },
  { "databaseSize", l_database_size },
  { NULL, NULL }
};

/* The userdata the functions share, for s. */
static void push_state(lua_State *L, eu_store *s) {
  eu_lstate *ls;
  lua_Alloc f_alloc;
  void *f_ud;
  int k;
  ls = lua_newuserdatauv(L, sizeof *ls, NKEYS - 1);
  ls->s = s;
  f_alloc = lua_getallocf(L, &f_ud);  /* the isolate's heap: its images hold the buffers too */
  eu_buf_init_with(&ls->scratch, f_alloc, f_ud);
  ls->busy = 0;
  if (luaL_newmetatable(L, LSTATE_MT)) {
    lua_pushcfunction(L, l_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  for (k = 1; k < NKEYS; k++) {
    lua_pushstring(L, key_names[k]);
    lua_setiuservalue(L, -2, k);
  }
}

void eu_lstore_push(lua_State *L, eu_store *s) {
  lua_createtable(L, 0, sizeof eu_lstore_funcs / sizeof eu_lstore_funcs[0] - 1);
  push_state(L, s);
  luaL_setfuncs(L, eu_lstore_funcs, 1);
}

void eu_lstore_push_fn(lua_State *L, eu_store *s, const char *name) {
  const luaL_Reg *r;
  for (r = eu_lstore_funcs; r->name && strcmp(r->name, name) != 0; r++) {}
  if (!r->name) luaL_error(L, "no storage function %s", name);
  push_state(L, s);
  lua_pushcclosure(L, r->func, 1);
}
