/*
 * lagenda.c: the agenda, named alarms and durable operations as Lua sees
 * them (see lagenda.h): eutaxy.core.durability().agenda, the table of C
 * functions lua/eutaxy/scheduler.lua builds its API on.
 *
 * Owns the translation between Lua values and agenda.c: payloads and
 * results are one eu_clone_encode value each; the time is the world's
 * virtual clock and every random draw (jitter, generations) comes from the
 * world's PRNG, so a run is the same on every replay. Must not run SQL
 * itself: agenda.c owns the tables.
 *
 * Errors are raised with lua_error on a plain string; scheduler.lua checks
 * arguments first and names the user's call.
 *
 * Lua errors unwind with longjmp, so nothing here holds malloc'd memory
 * across a call that can raise: the buffers live in the functions' shared
 * upvalue, a userdata whose __gc frees them. Building a result allocates,
 * and an allocation can run a __gc finalizer of user code that calls one of
 * these functions and reuses the buffers. So a result is first copied, in
 * one piece, into a Lua string (nothing runs between the C call and that
 * copy), and the fields are read from the string.
 */
#include <stdint.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "agenda.h"
#include "clone.h"
#include "eutaxy.h"
#include "lagenda.h"
#include "world.h"

typedef struct eu_lagenda {
  eu_store *s;
  eu_buf scratch;  /* encoded values on their way in */
  eu_buf rows;     /* items on their way out */
  eu_buf list;     /* alarms:pending(): every item, packed */
} eu_lagenda;

#define LAGENDA_MT "eutaxy.lagenda"

static int raise_store(lua_State *L, eu_store *s);

/* Every function reaches the store through here, so none runs while the
 * store's gate is closed (the object is being reset). */
static eu_lagenda *self(lua_State *L) {
  eu_lagenda *a = lua_touserdata(L, lua_upvalueindex(1));
  if (!eu_store_available(a->s)) raise_store(L, a->s);
  return a;
}

static int raise_store(lua_State *L, eu_store *s) {
  lua_pushstring(L, eu_store_errmsg(s));
  return lua_error(L);
}

static eu_world *world(lua_State *L) {
  eu_world *w = eu_world_of(L);
  if (!w) luaL_error(L, "the scheduler runs inside an object of a world");
  return w;
}

static int64_t now(lua_State *L) { return eu_world_now(world(L)); }

static uint64_t draw(lua_State *L) { return eu_world_random(world(L)); }

/* A time or delay in ms: an integer, or a float that fits one (truncated). */
static int64_t check_ms(lua_State *L, int idx) {
  lua_Number f;
  if (lua_isinteger(L, idx)) return (int64_t)lua_tointeger(L, idx);
  f = luaL_checknumber(L, idx);
  if (!(f >= -0x1p62 && f < 0x1p62)) luaL_argerror(L, idx, "a time in ms that fits an integer");
  return (int64_t)f;
}

static int opt_attempts(lua_State *L, int idx) {
  lua_Integer n = luaL_optinteger(L, idx, 0);
  luaL_argcheck(L, n >= 0 && n <= 1000000, idx, "attempts must be between 1 and 1000000");
  return (int)n;
}

/* Encodes the value at idx into scratch. */
static void encode(lua_State *L, eu_lagenda *a, int idx, const char *what) {
  char err[EU_ERRLEN];
  eu_buf_reset(&a->scratch);
  if (eu_clone_encode(L, idx, 1, &a->scratch, err, sizeof err) < 0)
    luaL_error(L, "%s: %s", what, err);
}

/* Pushes the encoded value p..p+n, or nil for none. */
static void push_decoded(lua_State *L, const char *p, size_t n, const char *what) {
  char err[EU_ERRLEN];
  int got = 0;
  if (!p) {
    lua_pushnil(L);
    return;
  }
  if (eu_clone_decode(L, p, n, &got, err, sizeof err) < 0)
    luaL_error(L, "%s does not decode: %s", what, err);
  if (got != 1) {
    lua_pop(L, got);
    luaL_error(L, "%s does not decode: %d values", what, got);
  }
}

/* Copies buf into a Lua string (left on the stack) and returns where in it
 * the byte at p of buf now is. */
typedef struct snap { const char *from, *to; } snap;

static snap snapshot(lua_State *L, eu_buf *b) {
  snap sn;
  sn.from = b->p;
  sn.to = lua_pushlstring(L, b->p ? b->p : "", b->n);
  return sn;
}

static const char *moved(snap sn, const char *p) {
  return p ? sn.to + (p - sn.from) : NULL;
}

static void set_string(lua_State *L, const char *field, const char *v) {
  if (!v) return;
  lua_pushstring(L, v);
  lua_setfield(L, -2, field);
}

static void set_integer(lua_State *L, const char *field, int64_t v) {
  lua_pushinteger(L, (lua_Integer)v);
  lua_setfield(L, -2, field);
}

/* Pushes an item as { key, handler, payload, due, scheduledAt, generation,
 * attempt, maxAttempts, lastError, exhausted }. Its pointers must not point
 * into the agenda's buffers (see the top of the file). */
static void push_item(lua_State *L, const eu_agenda_item *it) {
  lua_createtable(L, 0, 10);
  set_string(L, "key", it->key);
  set_string(L, "handler", it->handler);
  set_string(L, "lastError", it->last_error);
  push_decoded(L, it->payload, it->len, "a stored payload");
  lua_setfield(L, -2, "payload");
  set_integer(L, "due", it->due);
  set_integer(L, "scheduledAt", it->scheduled_at);
  set_integer(L, "generation", it->generation);
  set_integer(L, "attempt", it->attempt);
  set_integer(L, "maxAttempts", it->max_attempts);
  lua_pushboolean(L, it->exhausted);
  lua_setfield(L, -2, "exhausted");
}

/* Pushes the item whose bytes are in the rows buffer, read from a snapshot. */
static void push_taken(lua_State *L, eu_lagenda *a, const eu_agenda_item *it) {
  eu_agenda_item copy = *it;
  snap sn = snapshot(L, &a->rows);
  copy.key = moved(sn, it->key);
  copy.handler = moved(sn, it->handler);
  copy.payload = moved(sn, it->payload);
  copy.last_error = moved(sn, it->last_error);
  push_item(L, &copy);
  lua_remove(L, -2);  /* the snapshot */
}

static const char *const settle_names[] = { "stale", "done", "retry", "failed" };

/* Every function first makes sure its tables are there: a database already
 * current costs one read per capability. A helper made in a turn that was
 * rolled back later would otherwise find its tables gone. */
static eu_lagenda *ready(lua_State *L, int (*migrate)(eu_store *)) {
  eu_lagenda *a = self(L);
  if (migrate(a->s) < 0) raise_store(L, a->s);
  return a;
}

/* ---- the agenda ------------------------------------------------------ */

/* migrate(): the agenda's, the alarms' and the durable operations' tables. */
static int l_migrate(lua_State *L) {
  eu_lagenda *a = self(L);
  if (eu_alarms_migrate(a->s) < 0 || eu_durable_migrate(a->s) < 0) return raise_store(L, a->s);
  return 0;
}

/* set(participant, key, due) */
static int l_set(lua_State *L) {
  eu_lagenda *a = ready(L, eu_agenda_migrate);
  const char *p = luaL_checkstring(L, 1), *k = luaL_checkstring(L, 2);
  if (eu_agenda_set(a->s, p, k, check_ms(L, 3)) < 0) return raise_store(L, a->s);
  return 0;
}

/* clear(participant, key) */
static int l_clear(lua_State *L) {
  eu_lagenda *a = ready(L, eu_agenda_migrate);
  if (eu_agenda_clear(a->s, luaL_checkstring(L, 1), luaL_checkstring(L, 2)) < 0)
    return raise_store(L, a->s);
  return 0;
}

/* next() -> due | nil */
static int l_next(lua_State *L) {
  eu_lagenda *a = ready(L, eu_agenda_migrate);
  int has;
  int64_t due;
  if (eu_agenda_next(a->s, &has, &due) < 0) return raise_store(L, a->s);
  if (has) lua_pushinteger(L, (lua_Integer)due);
  else lua_pushnil(L);
  return 1;
}

/* Packs a participant and its due time into the rows buffer (no Lua while
 * the query steps). */
static int pack_due(void *ud, const char *participant, int64_t due) {
  eu_buf *b = ud;
  if (eu_buf_puts(b, participant) < 0 || eu_buf_putc(b, '\0') < 0 || eu_buf_put(b, &due, sizeof due) < 0)
    return EU_ENOMEM;
  return 0;
}

/* due(t) -> { participant = due, ... } for the participants with work due at or before t. */
static int l_due(lua_State *L) {
  eu_lagenda *a = ready(L, eu_agenda_migrate);
  int64_t t = check_ms(L, 1);
  const char *p, *end;
  snap sn;
  int rc;
  eu_buf_reset(&a->rows);
  rc = eu_agenda_due(a->s, t, pack_due, &a->rows);
  if (rc == EU_ENOMEM) return luaL_error(L, "the scheduler: out of memory");
  if (rc < 0) return raise_store(L, a->s);
  lua_newtable(L);
  sn = snapshot(L, &a->rows);
  p = sn.to;
  end = sn.to + a->rows.n;
  while (p < end) {
    size_t n = strlen(p);
    int64_t due;
    memcpy(&due, p + n + 1, sizeof due);
    lua_pushinteger(L, (lua_Integer)due);
    lua_setfield(L, -3, p);
    p += n + 1 + sizeof due;
  }
  lua_pop(L, 1);
  return 1;
}

/* reconcile(): the object's alarm to the earliest due time. */
static int l_reconcile(lua_State *L) {
  eu_lagenda *a = ready(L, eu_agenda_migrate);
  if (eu_agenda_reconcile(a->s) < 0) return raise_store(L, a->s);
  return 0;
}

/* backoff(attempt) -> ms, the default policy's delay with the world's jitter. */
static int l_backoff(lua_State *L) {
  lua_Integer attempt = luaL_checkinteger(L, 1);
  if (attempt > 1000000) attempt = 1000000;
  lua_pushinteger(L, (lua_Integer)eu_agenda_backoff((int)attempt, draw(L)));
  return 1;
}

/* commit(): commits the turn now and opens the next, so that what was
 * claimed survives whatever the handlers about to run do to the invocation.
 * The next turn is opened at once so the world still sees a turn end, and
 * follows the alarm, at the invocation's next yield or return. */
static int l_commit(lua_State *L) {
  eu_lagenda *a = self(L);
  if (eu_store_in_turn(a->s) && eu_store_commit(a->s) < 0) return raise_store(L, a->s);
  if (eu_store_touch(a->s) < 0) return raise_store(L, a->s);
  return 0;
}

/* unit_begin(): a savepoint around a handler, so that a handler that
 * raises takes back what it wrote since its last yield point, as an
 * invocation that raises does. */
static int l_unit_begin(lua_State *L) {
  eu_lagenda *a = self(L);
  if (eu_store_savepoint(a->s) < 0) return raise_store(L, a->s);
  return 0;
}

/* unit_end(ok) -> whether the savepoint was still open. A yield point in
 * the handler ended the turn, and the savepoint with it; everything written
 * since then is the handler's (nothing else runs in the invocation while it
 * does), so a failure rolls back the turn under way instead. */
static int l_unit_end(lua_State *L) {
  eu_lagenda *a = self(L);
  int ok = lua_toboolean(L, 1);
  int rc = ok ? eu_store_release(a->s) : eu_store_rollback_to(a->s);
  if (rc == EU_EINVAL) {  /* no savepoint open: a turn ended inside the unit */
    if (!ok && eu_store_rollback(a->s) < 0) return raise_store(L, a->s);
    lua_pushboolean(L, 0);
    return 1;
  }
  if (rc < 0) return raise_store(L, a->s);
  lua_pushboolean(L, 1);
  return 1;
}

/* ---- named alarms ---------------------------------------------------- */

/* alarm_schedule(name, due, payload, maxAttempts|nil) */
static int l_alarm_schedule(lua_State *L) {
  eu_lagenda *a = ready(L, eu_alarms_migrate);
  const char *name = luaL_checkstring(L, 1);
  int64_t due = check_ms(L, 2);
  int max = opt_attempts(L, 4);
  int64_t generation = (int64_t)(draw(L) >> 2);  /* positive, and fits a Lua integer */
  encode(L, a, 3, "alarms:schedule: the payload cannot be stored");
  if (eu_alarms_schedule(a->s, name, due, a->scratch.p, a->scratch.n, max, generation, now(L)) < 0)
    return raise_store(L, a->s);
  return 0;
}

/* alarm_cancel(name) -> whether one was pending */
static int l_alarm_cancel(lua_State *L) {
  eu_lagenda *a = ready(L, eu_alarms_migrate);
  int rc = eu_alarms_cancel(a->s, luaL_checkstring(L, 1));
  if (rc < 0) return raise_store(L, a->s);
  lua_pushboolean(L, rc);
  return 1;
}

/* alarms:pending() packs every item into the list buffer while the query
 * steps (no Lua then), and builds the tables after: an item, then its key,
 * last error and payload. */
typedef struct packed {
  eu_agenda_item it;   /* pointers unused */
  size_t klen, elen;   /* with their NULs; elen 0 for no error */
  int has_payload;
} packed;

static int pack_item(void *ud, const eu_agenda_item *it) {
  eu_lagenda *a = ud;
  packed pk;
  memset(&pk, 0, sizeof pk);
  pk.it = *it;
  pk.it.key = pk.it.handler = pk.it.payload = pk.it.last_error = NULL;
  pk.klen = strlen(it->key) + 1;
  pk.elen = it->last_error ? strlen(it->last_error) + 1 : 0;
  pk.has_payload = it->payload != NULL;
  if (eu_buf_put(&a->list, &pk, sizeof pk) < 0 || eu_buf_put(&a->list, it->key, pk.klen) < 0 ||
      (pk.elen && eu_buf_put(&a->list, it->last_error, pk.elen) < 0) ||
      (it->len && eu_buf_put(&a->list, it->payload, it->len) < 0))
    return EU_ENOMEM;
  return 0;
}

/* alarm_list() -> array of items, by due time then name */
static int l_alarm_list(lua_State *L) {
  eu_lagenda *a = ready(L, eu_alarms_migrate);
  snap sn;
  const char *p, *end;
  lua_Integer i = 0;
  int rc;
  eu_buf_reset(&a->list);
  rc = eu_alarms_list(a->s, pack_item, a, &a->rows);
  if (rc == EU_ENOMEM) return luaL_error(L, "alarms:pending: out of memory");
  if (rc < 0) return raise_store(L, a->s);
  lua_newtable(L);
  sn = snapshot(L, &a->list);
  p = sn.to;
  end = sn.to + a->list.n;
  while (p < end) {
    packed pk;
    memcpy(&pk, p, sizeof pk);
    p += sizeof pk;
    pk.it.key = p;
    p += pk.klen;
    if (pk.elen) pk.it.last_error = p;
    p += pk.elen;
    if (pk.has_payload) pk.it.payload = p;
    p += pk.it.len;
    push_item(L, &pk.it);
    lua_rawseti(L, -3, ++i);
  }
  lua_pop(L, 1);
  return 1;
}

/* alarm_take() -> the earliest due alarm, claimed, or nil */
static int l_alarm_take(lua_State *L) {
  eu_lagenda *a = ready(L, eu_alarms_migrate);
  eu_agenda_item it;
  int rc = eu_alarms_take(a->s, now(L), draw(L), &it, &a->rows);
  if (rc < 0) return raise_store(L, a->s);
  if (rc == 0) return 0;
  push_taken(L, a, &it);
  return 1;
}

/* alarm_settle(name, generation, attempt, error|nil, delay|nil) -> outcome */
static int l_alarm_settle(lua_State *L) {
  eu_lagenda *a = ready(L, eu_alarms_migrate);
  const char *name = luaL_checkstring(L, 1);
  int64_t generation = (int64_t)luaL_checkinteger(L, 2);
  int attempt = (int)luaL_checkinteger(L, 3);
  const char *error = luaL_optstring(L, 4, NULL);
  int64_t delay = lua_isnoneornil(L, 5) ? 0 : check_ms(L, 5);
  int rc;
  if (error && lua_isnoneornil(L, 5)) delay = eu_agenda_backoff(attempt, draw(L));
  rc = eu_alarms_settle(a->s, name, generation, attempt, error, now(L), delay);
  if (rc < 0) return raise_store(L, a->s);
  lua_pushstring(L, settle_names[rc]);
  return 1;
}

/* ---- durable operations ---------------------------------------------- */

/* op_register(id, handler, payload, maxAttempts|nil) -> true registered, false already */
static int l_op_register(lua_State *L) {
  eu_lagenda *a = ready(L, eu_durable_migrate);
  const char *id = luaL_checkstring(L, 1), *handler = luaL_checkstring(L, 2);
  int max = opt_attempts(L, 4), rc;
  encode(L, a, 3, "durable:op: the payload cannot be stored");
  rc = eu_durable_register(a->s, id, handler, a->scratch.p, a->scratch.n, max, now(L));
  if (rc < 0) return raise_store(L, a->s);
  if (rc == 2)
    return luaL_error(L, "durable operation '%s' is already registered with another handler", id);
  if (rc == 3)
    return luaL_error(L, "durable operation '%s' is already registered with another payload", id);
  lua_pushboolean(L, rc == 1);
  return 1;
}

/* op_take() -> the earliest due operation, claimed, or nil */
static int l_op_take(lua_State *L) {
  eu_lagenda *a = ready(L, eu_durable_migrate);
  eu_agenda_item it;
  int rc = eu_durable_take(a->s, now(L), draw(L), &it, &a->rows);
  if (rc < 0) return raise_store(L, a->s);
  if (rc == 0) return 0;
  push_taken(L, a, &it);
  return 1;
}

/* op_settle(id, attempt, true, result) or op_settle(id, attempt, false, error, delay|nil) -> outcome */
static int l_op_settle(lua_State *L) {
  eu_lagenda *a = ready(L, eu_durable_migrate);
  const char *id = luaL_checkstring(L, 1), *error = NULL;
  int attempt = (int)luaL_checkinteger(L, 2), ok = lua_toboolean(L, 3), rc;
  int64_t delay = 0;
  lua_settop(L, 5);
  if (ok) {
    encode(L, a, 4, "the operation's result cannot be stored");
  } else {
    error = luaL_checkstring(L, 4);
    delay = lua_isnil(L, 5) ? eu_agenda_backoff(attempt, draw(L)) : check_ms(L, 5);
  }
  rc = eu_durable_settle(a->s, id, attempt, ok ? a->scratch.p : NULL, ok ? a->scratch.n : 0,
                         error, now(L), delay);
  if (rc < 0) return raise_store(L, a->s);
  lua_pushstring(L, settle_names[rc]);
  return 1;
}

/* op_get(id) -> { status, result, error, attempts, createdAt, settledAt } or nil */
static int l_op_get(lua_State *L) {
  eu_lagenda *a = ready(L, eu_durable_migrate);
  eu_durable_state st;
  snap sn;
  int rc = eu_durable_get(a->s, luaL_checkstring(L, 1), &st, &a->rows);
  if (rc < 0) return raise_store(L, a->s);
  if (rc == 0) return 0;
  sn = snapshot(L, &a->rows);
  lua_createtable(L, 0, 6);
  set_string(L, "status", moved(sn, st.status));
  set_string(L, "error", moved(sn, st.error));
  if (st.result) {
    push_decoded(L, moved(sn, st.result), st.rlen, "the operation's stored result");
    lua_setfield(L, -2, "result");
  }
  set_integer(L, "attempts", st.attempts);
  set_integer(L, "createdAt", st.created_at);
  if (st.settled_at) set_integer(L, "settledAt", st.settled_at);
  lua_remove(L, -2);  /* the snapshot */
  return 1;
}

static int l_gc(lua_State *L) {
  eu_lagenda *a = lua_touserdata(L, 1);
  eu_buf_free(&a->scratch);
  eu_buf_free(&a->rows);
  eu_buf_free(&a->list);
  return 0;
}

static const luaL_Reg eu_lagenda_funcs[] = {
  { "migrate", l_migrate },
  { "set", l_set },
  { "clear", l_clear },
  { "next", l_next },
  { "due", l_due },
  { "reconcile", l_reconcile },
  { "backoff", l_backoff },
  { "commit", l_commit },
  { "unit_begin", l_unit_begin },
  { "unit_end", l_unit_end },
  { "alarm_schedule", l_alarm_schedule },
  { "alarm_cancel", l_alarm_cancel },
  { "alarm_list", l_alarm_list },
  { "alarm_take", l_alarm_take },
  { "alarm_settle", l_alarm_settle },
  { "op_register", l_op_register },
  { "op_take", l_op_take },
  { "op_settle", l_op_settle },
  { "op_get", l_op_get },
  { NULL, NULL }
};

void eu_lagenda_push(lua_State *L, eu_store *s) {
  eu_lagenda *a;
  lua_Alloc f_alloc;
  void *f_ud;
  lua_createtable(L, 0, sizeof eu_lagenda_funcs / sizeof eu_lagenda_funcs[0] - 1);
  a = lua_newuserdatauv(L, sizeof *a, 0);
  a->s = s;
  f_alloc = lua_getallocf(L, &f_ud);  /* the isolate's heap: its images hold the buffers too */
  eu_buf_init_with(&a->scratch, f_alloc, f_ud);
  eu_buf_init_with(&a->rows, f_alloc, f_ud);
  eu_buf_init_with(&a->list, f_alloc, f_ud);
  if (luaL_newmetatable(L, LAGENDA_MT)) {
    lua_pushcfunction(L, l_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  luaL_setfuncs(L, eu_lagenda_funcs, 1);
}
