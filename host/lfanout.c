/*
 * lfanout.c: the fanout engine as Lua sees it inside an object's isolate
 * (see lfanout.h; eutaxy.core.durability().fanout).
 *
 * Owns the translation between Lua values and the engine (fanout.c): message
 * bodies and memoized results become eu_clone_encode bytes on the way in and
 * Lua values again on the way out, claimed rows become tables, and the
 * world's clock and PRNG are read here, so the engine stays free of Lua and
 * of the world. Decides nothing about delivery: lua/eutaxy/fanout.lua is the
 * runner, and it calls these functions with plain arguments:
 *
 *   migrate()
 *   enqueue(entries, targets, first_at) -> true, { {fresh=, generation=, seq=, createdAt=}, ... }, pending
 *                                        | false, error_name, message   (a definite rejection)
 *       entries = { {key=, id=, body=}, ... }; targets sorted and distinct
 *   claim(target, max_batch, max_attempts, lease_ms) -> { row, ... }   (committed)
 *       row = { id=, key=, messageId=, target=, generation=, body=, seq=, createdAt=,
 *               nextAttemptAt=, attempt=, phase=, terminal=, reason=, lastError=,
 *               lastErrorName=, deadLetteredAt= }
 *   remove(id, generation, attempt, dead_letter) -> removed
 *   remove_many({ {id, generation, attempt}, ... }) -> { removed, ... }
 *   retry(id, generation, attempt, next_at, error_name, error) -> done
 *   dead_letter(id, generation, attempt, reason, at, retry_at, error_name, error) -> done (committed)
 *   postpone(target, until) -> count
 *   memo_get(id, generation, key) -> found, values...
 *   memo_put(id, generation, attempt, key, values...) -> stored
 *   pending() -> count;  next_due() -> ms | nil;  targets() -> { name, ... }
 *   backoff(attempt) -> ms, the default retry delay with the world's jitter
 *
 * A storage failure raises the store's message: the runner must never take
 * a failure to write for a definite answer.
 *
 * Lua errors unwind with longjmp, so nothing here holds malloc'd memory
 * across a call that can raise: buffers live in the functions' shared
 * upvalue, a userdata whose __gc frees them, and per-call arrays are
 * userdata too.
 */
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "clone.h"
#include "eutaxy.h"
#include "fanout.h"
#include "lfanout.h"
#include "world.h"

typedef struct lfanout {
  eu_store *s;
  eu_buf buf;   /* claimed rows, memo values, target names */
  eu_buf enc;   /* values on their way to the store */
} lfanout;

#define LFANOUT_MT "eutaxy.lfanout"

static int raise_store(lua_State *L, eu_store *s);

/* Every function reaches the store through here, so none runs while the
 * store's gate is closed (the object is being reset). */
static lfanout *self(lua_State *L) {
  lfanout *f = lua_touserdata(L, lua_upvalueindex(1));
  if (!eu_store_available(f->s)) raise_store(L, f->s);
  return f;
}

/* Every function but migrate first makes sure the tables are there (a
 * current database costs two reads): a fanout made in a turn that was
 * rolled back later would otherwise find them gone. */
static lfanout *ready(lua_State *L) {
  lfanout *f = self(L);
  if (eu_fanout_migrate(f->s) < 0) raise_store(L, f->s);
  return f;
}

static int raise_store(lua_State *L, eu_store *s) {
  lua_pushstring(L, eu_store_errmsg(s));
  return lua_error(L);
}

static int64_t now_of(lua_State *L) {
  eu_world *w = eu_world_of(L);
  return w ? eu_world_now(w) : 0;
}

static uint64_t world_random(void *ud) {
  return eu_world_random(ud);
}

/* A string argument the engine can take as a C string. */
static const char *check_cstr(lua_State *L, int idx, const char *what) {
  size_t n;
  const char *p = luaL_checklstring(L, idx, &n);
  if (strlen(p) != n) luaL_error(L, "fanout: %s must not contain a NUL byte", what);
  return p;
}

static const char *field_cstr(lua_State *L, int t, const char *field, const char *what) {
  size_t n;
  const char *p;
  lua_getfield(L, t, field);
  if (lua_type(L, -1) != LUA_TSTRING) luaL_error(L, "fanout: %s must be a string", what);
  p = lua_tolstring(L, -1, &n);
  if (n == 0 || strlen(p) != n) luaL_error(L, "fanout: %s must be a non-empty string without NUL bytes", what);
  lua_pop(L, 1);  /* the entry keeps it alive */
  return p;
}

static void set_str(lua_State *L, const char *field, const char *v) {
  if (!v) return;
  lua_pushstring(L, v);
  lua_setfield(L, -2, field);
}

static void set_int(lua_State *L, const char *field, int64_t v) {
  lua_pushinteger(L, (lua_Integer)v);
  lua_setfield(L, -2, field);
}

/* ---- the functions ------------------------------------------------------ */

static int l_migrate(lua_State *L) {
  lfanout *f = self(L);
  if (eu_fanout_migrate(f->s) < 0) return raise_store(L, f->s);
  return 0;
}

static int l_enqueue(lua_State *L) {
  lfanout *f = ready(L);
  eu_world *w = eu_world_of(L);
  eu_fanout_input *in;
  eu_fanout_enqueued *out;
  const char **targets;
  size_t *offs;
  char err[EU_ERRLEN];
  int n, nt, i, conflict = 0, rc;
  int64_t pending = 0;
  lua_Integer first_at;
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_checktype(L, 2, LUA_TTABLE);
  first_at = luaL_checkinteger(L, 3);
  if (!w) return luaL_error(L, "fanout: enqueue runs inside an object");
  n = (int)luaL_len(L, 1);
  nt = (int)luaL_len(L, 2);
  if (n < 0 || nt <= 0) return luaL_error(L, "fanout: enqueue needs entries and targets");
  /* userdata, so that an error below leaks nothing */
  in = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *in, 0);
  out = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *out, 0);
  offs = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *offs, 0);
  targets = lua_newuserdatauv(L, (size_t)nt * sizeof *targets, 0);
  for (i = 0; i < nt; i++) {
    lua_geti(L, 2, i + 1);
    if (lua_type(L, -1) != LUA_TSTRING) return luaL_error(L, "fanout: target names must be strings");
    targets[i] = lua_tostring(L, -1);
    lua_pop(L, 1);  /* the targets table keeps it */
  }
  eu_buf_reset(&f->enc);
  for (i = 0; i < n; i++) {
    lua_geti(L, 1, i + 1);
    if (!lua_istable(L, -1)) return luaL_error(L, "fanout: entry %d must be a table", i + 1);
    in[i].key = field_cstr(L, -1, "key", "a deduplication key");
    in[i].id = field_cstr(L, -1, "id", "a message id");
    lua_getfield(L, -1, "body");
    offs[i] = f->enc.n;
    if (eu_clone_encode(L, -1, 1, &f->enc, err, sizeof err) != EU_OK) {
      lua_pushboolean(L, 0);
      lua_pushliteral(L, "DataCloneError");
      lua_pushfstring(L, "the body of message %s cannot be stored: %s", in[i].id, err);
      return 3;
    }
    in[i].len = f->enc.n - offs[i];
    lua_pop(L, 2);
  }
  /* The encoded bodies do not move any more. */
  for (i = 0; i < n; i++) in[i].payload = f->enc.p + offs[i];
  rc = eu_fanout_enqueue(f->s, in, n, targets, nt, eu_world_now(w), (int64_t)first_at,
                         world_random, w, out, &conflict);
  if (rc < 0) return raise_store(L, f->s);
  if (conflict) {
    lua_pushboolean(L, 0);
    lua_pushliteral(L, "FanoutEnqueueError");
    lua_pushstring(L, eu_store_errmsg(f->s));
    return 3;
  }
  if (eu_fanout_pending(f->s, &pending) < 0) return raise_store(L, f->s);
  lua_pushboolean(L, 1);
  lua_createtable(L, n, 0);
  for (i = 0; i < n; i++) {
    lua_createtable(L, 0, 4);
    lua_pushboolean(L, out[i].fresh);
    lua_setfield(L, -2, "fresh");
    set_str(L, "generation", out[i].generation);
    set_int(L, "seq", out[i].seq);
    set_int(L, "createdAt", out[i].created_at);
    lua_rawseti(L, -2, i + 1);
  }
  lua_pushinteger(L, (lua_Integer)pending);
  return 3;
}

/* Builds a row's table and appends it to the array at the top - 0. */
static int push_row(void *ud, const eu_fanout_delivery *d) {
  lua_State *L = ud;
  char err[EU_ERRLEN];
  int n = 0;
  lua_createtable(L, 0, 16);
  set_str(L, "id", d->id);
  set_str(L, "key", d->message_key);
  set_str(L, "messageId", d->message_id);
  set_str(L, "target", d->target);
  set_str(L, "generation", d->generation);
  set_str(L, "reason", d->reason);
  set_str(L, "lastError", d->last_error);
  set_str(L, "lastErrorName", d->last_error_name);
  set_int(L, "seq", d->seq);
  set_int(L, "createdAt", d->created_at);
  set_int(L, "nextAttemptAt", d->next_attempt_at);
  if (d->dead_lettered_at) set_int(L, "deadLetteredAt", d->dead_lettered_at);
  set_int(L, "attempt", d->attempt);
  lua_pushstring(L, d->dead_letter ? "dead_letter" : "delivery");
  lua_setfield(L, -2, "phase");
  lua_pushboolean(L, d->terminal);
  lua_setfield(L, -2, "terminal");
  if (eu_clone_decode(L, d->payload ? d->payload : "", d->len, &n, err, sizeof err) != EU_OK)
    return luaL_error(L, "fanout: the body of message %s does not decode: %s", d->message_id, err);
  if (n != 1) {
    lua_pop(L, n);
    lua_pushnil(L);
  }
  lua_setfield(L, -2, "body");
  lua_rawseti(L, -2, (lua_Integer)luaL_len(L, -2) + 1);
  return 0;
}

static int l_claim(lua_State *L) {
  lfanout *f = ready(L);
  const char *target = check_cstr(L, 1, "a target name");
  lua_Integer max_batch = luaL_checkinteger(L, 2);
  lua_Integer max_attempts = luaL_checkinteger(L, 3);
  lua_Integer lease = luaL_checkinteger(L, 4);
  luaL_argcheck(L, max_batch > 0 && max_batch <= EU_FANOUT_MAX_BATCH, 2, "a batch size from 1 to 10000");
  luaL_argcheck(L, max_attempts > 0 && max_attempts <= 1000000000, 3, "an attempt count from 1");
  luaL_argcheck(L, lease >= 0, 4, "a lease must not be negative");
  lua_newtable(L);
  if (eu_fanout_claim(f->s, target, now_of(L), (int)max_batch, (int)max_attempts, (int64_t)lease,
                      push_row, L, &f->buf) < 0)
    return raise_store(L, f->s);
  return 1;
}

static void check_ref(lua_State *L, int idx, eu_fanout_ref *r) {
  lua_Integer attempt;
  r->id = check_cstr(L, idx, "a delivery id");
  r->generation = check_cstr(L, idx + 1, "a generation");
  attempt = luaL_checkinteger(L, idx + 2);
  luaL_argcheck(L, attempt >= 0 && attempt <= 1000000000, idx + 2, "an attempt number");
  r->attempt = (int)attempt;
}

static const char *opt_cstr(lua_State *L, int idx, const char *what) {
  return lua_isnoneornil(L, idx) ? NULL : check_cstr(L, idx, what);
}

static int l_remove(lua_State *L) {
  lfanout *f = ready(L);
  eu_fanout_ref r;
  int rc;
  check_ref(L, 1, &r);
  rc = eu_fanout_remove(f->s, &r, lua_toboolean(L, 4));
  if (rc < 0) return raise_store(L, f->s);
  lua_pushboolean(L, rc > 0);
  return 1;
}

static int l_remove_many(lua_State *L) {
  lfanout *f = ready(L);
  eu_fanout_ref *refs;
  int *removed;
  int n, i;
  luaL_checktype(L, 1, LUA_TTABLE);
  n = (int)luaL_len(L, 1);
  refs = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *refs, 0);
  removed = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *removed, 0);
  for (i = 0; i < n; i++) {
    int top = lua_gettop(L);
    lua_geti(L, 1, i + 1);
    luaL_checktype(L, -1, LUA_TTABLE);
    lua_geti(L, top + 1, 1);
    lua_geti(L, top + 1, 2);
    lua_geti(L, top + 1, 3);
    check_ref(L, top + 2, &refs[i]);
    lua_settop(L, top);  /* the refs table keeps the strings */
  }
  if (eu_fanout_remove_many(f->s, refs, n, removed) < 0) return raise_store(L, f->s);
  lua_createtable(L, n, 0);
  for (i = 0; i < n; i++) {
    lua_pushboolean(L, removed[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static int l_retry(lua_State *L) {
  lfanout *f = ready(L);
  eu_fanout_ref r;
  int rc;
  check_ref(L, 1, &r);
  rc = eu_fanout_retry(f->s, &r, (int64_t)luaL_checkinteger(L, 4), opt_cstr(L, 5, "an error name"),
                       opt_cstr(L, 6, "an error message"));
  if (rc < 0) return raise_store(L, f->s);
  lua_pushboolean(L, rc > 0);
  return 1;
}

static int l_dead_letter(lua_State *L) {
  lfanout *f = ready(L);
  eu_fanout_ref r;
  int rc;
  check_ref(L, 1, &r);
  rc = eu_fanout_dead_letter(f->s, &r, check_cstr(L, 4, "a reason"), (int64_t)luaL_checkinteger(L, 5),
                             (int64_t)luaL_checkinteger(L, 6), opt_cstr(L, 7, "an error name"),
                             opt_cstr(L, 8, "an error message"));
  if (rc < 0) return raise_store(L, f->s);
  lua_pushboolean(L, rc > 0);
  return 1;
}

static int l_postpone(lua_State *L) {
  lfanout *f = ready(L);
  int rc = eu_fanout_postpone(f->s, check_cstr(L, 1, "a target name"), now_of(L),
                              (int64_t)luaL_checkinteger(L, 2));
  if (rc < 0) return raise_store(L, f->s);
  lua_pushinteger(L, rc);
  return 1;
}

static int l_memo_get(lua_State *L) {
  lfanout *f = ready(L);
  char err[EU_ERRLEN];
  int rc, n = 0;
  rc = eu_fanout_memo_get(f->s, check_cstr(L, 1, "a delivery id"), check_cstr(L, 2, "a generation"),
                          check_cstr(L, 3, "a memo key"), &f->buf);
  if (rc < 0) return raise_store(L, f->s);
  lua_pushboolean(L, rc > 0);
  if (rc == 0) return 1;
  /* Copied first: decoding allocates, and the buffer is shared. */
  lua_pushlstring(L, f->buf.p ? f->buf.p : "", f->buf.n);
  if (eu_clone_decode(L, lua_tostring(L, -1), lua_rawlen(L, -1), &n, err, sizeof err) != EU_OK)
    return luaL_error(L, "fanout: a memoized value does not decode: %s", err);
  lua_remove(L, -(n + 1));
  return 1 + n;
}

static int l_memo_put(lua_State *L) {
  lfanout *f = ready(L);
  eu_fanout_ref r;
  const char *key;
  char err[EU_ERRLEN];
  int rc, n;
  check_ref(L, 1, &r);
  key = check_cstr(L, 4, "a memo key");
  n = lua_gettop(L) - 4;
  eu_buf_reset(&f->enc);
  if (eu_clone_encode(L, 5, n, &f->enc, err, sizeof err) != EU_OK)
    return luaL_error(L, "DataCloneError: the result memoized as %s cannot be stored: %s", key, err);
  rc = eu_fanout_memo_put(f->s, &r, key, f->enc.p, f->enc.n, now_of(L));
  if (rc < 0) return raise_store(L, f->s);
  lua_pushboolean(L, rc > 0);
  return 1;
}

static int l_pending(lua_State *L) {
  lfanout *f = ready(L);
  int64_t n;
  if (eu_fanout_pending(f->s, &n) < 0) return raise_store(L, f->s);
  lua_pushinteger(L, (lua_Integer)n);
  return 1;
}

static int l_next_due(lua_State *L) {
  lfanout *f = ready(L);
  int has;
  int64_t due;
  if (eu_fanout_next_due(f->s, &has, &due) < 0) return raise_store(L, f->s);
  if (has) lua_pushinteger(L, (lua_Integer)due);
  else lua_pushnil(L);
  return 1;
}

static int push_target(void *ud, const char *target) {
  lua_State *L = ud;
  lua_pushstring(L, target);
  lua_rawseti(L, -2, (lua_Integer)luaL_len(L, -2) + 1);
  return 0;
}

static int l_targets(lua_State *L) {
  lfanout *f = ready(L);
  lua_newtable(L);
  if (eu_fanout_targets(f->s, push_target, L, &f->buf) < 0) return raise_store(L, f->s);
  return 1;
}

static int l_backoff(lua_State *L) {
  eu_world *w = eu_world_of(L);
  lua_Integer attempt = luaL_checkinteger(L, 1);
  luaL_argcheck(L, attempt >= 1 && attempt <= 1000000000, 1, "an attempt number from 1");
  lua_pushinteger(L, (lua_Integer)eu_fanout_backoff((int)attempt, w ? eu_world_random(w) : 0));
  return 1;
}

static int l_gc(lua_State *L) {
  lfanout *f = lua_touserdata(L, 1);
  eu_buf_free(&f->buf);
  eu_buf_free(&f->enc);
  return 0;
}

static const luaL_Reg lfanout_funcs[] = {
  { "migrate", l_migrate },
  { "enqueue", l_enqueue },
  { "claim", l_claim },
  { "remove", l_remove },
  { "remove_many", l_remove_many },
  { "retry", l_retry },
  { "dead_letter", l_dead_letter },
  { "postpone", l_postpone },
  { "memo_get", l_memo_get },
  { "memo_put", l_memo_put },
  { "pending", l_pending },
  { "next_due", l_next_due },
  { "targets", l_targets },
  { "backoff", l_backoff },
  { NULL, NULL }
};

void eu_lfanout_push(lua_State *L, eu_store *s) {
  lfanout *f;
  lua_Alloc f_alloc;
  void *f_ud;
  lua_createtable(L, 0, sizeof lfanout_funcs / sizeof lfanout_funcs[0] - 1);
  f = lua_newuserdatauv(L, sizeof *f, 0);
  f->s = s;
  f_alloc = lua_getallocf(L, &f_ud);  /* the isolate's heap: its images hold the buffers too */
  eu_buf_init_with(&f->buf, f_alloc, f_ud);
  eu_buf_init_with(&f->enc, f_alloc, f_ud);
  if (luaL_newmetatable(L, LFANOUT_MT)) {
    lua_pushcfunction(L, l_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  luaL_setfuncs(L, lfanout_funcs, 1);
}
