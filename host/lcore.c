/*
 * lcore.c: eutaxy.core, the C functions under eutaxy's Lua API.
 *
 * It has two faces. Inside an isolate (eu_world_open_core) it gives the
 * runtime its yield points (call, sleep), the virtual clock, ids, uuids and
 * the object's storage. In a host Lua state (busted, `eutaxy run`) it gives
 * worlds: a "eutaxy.World" userdata built like liolib's FILE*, with a
 * methods table as __index, luaL_checkudata in every method and a clear
 * error on a closed world.
 *
 * Calls that wait return (ok, ...) instead of raising, so the Lua side
 * raises at the user's line with the error value it wants.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <lauxlib.h>
#include <lualib.h>

#include "clone.h"
#include "eutaxy.h"
#include "lstore.h"
#include "fault.h"
#include "holds.h"
#include "ljson.h"
#include "lurl.h"
#include "lagenda.h"
#include "lcron.h"
#include "llinecov.h"
#include "lcore.h"
#include "serve.h"
#include "lfanout.h"
#include "world.h"

/* ---- inside an isolate ------------------------------------------------ */

static int c_now(lua_State *L) {
  eu_world *w = eu_world_of(L);
  lua_pushinteger(L, (lua_Integer)eu_world_now(w));
  return 1;
}

/* "file:line: " of the user's code that called a yield point: the first
 * frame with a line above eutaxy's wrapper (level 1); a tail call or a C
 * function in between is skipped. */
static void user_where(lua_State *L) {
  lua_Debug ar;
  int level;
  for (level = 2; lua_getstack(L, level, &ar); level++) {
    if (lua_getinfo(L, "Sl", &ar) && ar.currentline > 0) {
      lua_pushfstring(L, "%s:%d: ", ar.short_src, ar.currentline);
      return;
    }
  }
  lua_pushliteral(L, "");
}

static eu_task *need_task(lua_State *L, const char *what) {
  eu_task *t = eu_world_running(L);
  if (!t) {
    if (eu_world_of(L) && lua_isyieldable(L)) {
      user_where(L);
      lua_pushfstring(L, "%s cannot run inside a coroutine of your own: call it from the invocation itself", what);
      lua_concat(L, 2);
      lua_error(L);
    }
    luaL_error(L, "%s can only run inside an invocation (fetch, an RPC method or alarm), "
                  "not while a module loads or an object is constructed", what);
  }
  /* Checked before the call is sent or the timer set: a yield that fails
   * would leave them behind, to wake a task that no longer waits. */
  if (!lua_isyieldable(L)) {
    user_where(L);
    lua_pushfstring(L, "%s cannot wait inside a function called from C (a table.sort comparator, a "
                       "string.gsub replacement, transactionSync's function, a metamethod a library calls)",
                    what);
    lua_concat(L, 2);
    lua_error(L);
  }
  return t;
}

static int c_sleep(lua_State *L) {
  lua_Integer ms = luaL_checkinteger(L, 1);
  eu_task *t = need_task(L, "eutaxy.sleep");
  luaL_argcheck(L, ms >= 0, 1, "a time to sleep must not be negative");
  if (eu_task_sleep(t, (int64_t)ms) != EU_OK) return luaL_error(L, "eutaxy.sleep: out of memory");
  return lua_yield(L, 0);
}

/* call(ns, hex, name|nil, method, ...) -> yields; resumed with (ok, ...) */
static int c_call(lua_State *L) {
  eu_world *w = eu_world_of(L);
  const char *nsname = luaL_checkstring(L, 1);
  const char *hex = luaL_checkstring(L, 2);
  size_t namelen = 0;
  const char *name = luaL_optlstring(L, 3, NULL, &namelen);
  const char *method = luaL_checkstring(L, 4);
  int ns = eu_world_binding(w, nsname);
  int first = strcmp(method, "fetch") == 0 ? 5 : 4;
  eu_task *t = need_task(L, "an RPC call");
  char err[EU_ERRLEN];
  eu_buf b;
  char *payload;
  size_t len;
  if (ns < 0) return luaL_error(L, "no durable object binding named %s", nsname);
  eu_buf_init(&b);
  if (eu_clone_encode(L, first, lua_gettop(L) - first + 1, &b, err, sizeof err) != EU_OK) {
    eu_buf_free(&b);
    lua_pushboolean(L, 0);
    lua_pushfstring(L, "DataCloneError: the arguments of %s cannot be cloned: %s", method, err);
    return 2;
  }
  payload = eu_buf_take(&b, &len);
  if (eu_task_call(t, ns, hex, name, namelen, payload, len, method) != EU_OK) {
    lua_pushboolean(L, 0);
    lua_pushfstring(L, "cannot call %s on %s %s", method, nsname, hex);
    return 2;
  }
  return lua_yield(L, 0);
}

/* fetch(origin, wire request) -> yields; resumed with (ok, wire response | wire error).
 * An origin that is no service the world was given (sim.service) goes out
 * to the network in a world that has a way out (serve); in one that has
 * none, and when the request cannot go out, nil and a message, without
 * yielding: the caller raises it where the user called. */
static int c_fetch(lua_State *L) {
  eu_world *w = eu_world_of(L);
  const char *origin = luaL_checkstring(L, 1);
  int ns = eu_world_binding(w, origin);
  eu_task *t = need_task(L, "eutaxy.fetch");
  char err[EU_ERRLEN], hex[65];
  eu_buf b;
  char *payload;
  size_t len;
  luaL_checktype(L, 2, LUA_TTABLE);
  if (!eu_world_is_service(w, ns) && eu_world_has_outbound(w)) {
    eu_buf_init(&b);
    if (eu_clone_encode(L, 2, 1, &b, err, sizeof err) != EU_OK) {
      eu_buf_free(&b);
      return luaL_error(L, "eutaxy.fetch: the request cannot be sent: %s", err);
    }
    payload = eu_buf_take(&b, &len);
    if (eu_task_outbound(t, payload, len, err, sizeof err) != EU_OK) {
      lua_pushnil(L);
      lua_pushfstring(L, "eutaxy.fetch: %s", err);
      return 2;
    }
    return lua_yield(L, 0);
  }
  if (!eu_world_is_service(w, ns)) {
    eu_buf_init(&b);
    lua_pushnil(L);
    lua_pushfstring(L, "eutaxy.fetch: no service answers %s in this world (services: %s). In eutaxy check "
                    "and in specs, outbound calls reach only the services a scenario declares (sim.service) "
                    "or a world is given (services); under eutaxy serve they go out to the network",
                    origin, eu_world_services(w, &b));
    eu_buf_free(&b);
    eu_world_note_undeclared(w, lua_tostring(L, -1));
    return 2;
  }
  if (eu_world_id_from_name(w, ns, origin, strlen(origin), hex) != EU_OK)
    return luaL_error(L, "eutaxy.fetch: out of memory");
  eu_buf_init(&b);
  if (eu_clone_encode(L, 2, 1, &b, err, sizeof err) != EU_OK) {
    eu_buf_free(&b);
    return luaL_error(L, "eutaxy.fetch: the request cannot be sent: %s", err);
  }
  payload = eu_buf_take(&b, &len);
  if (eu_task_call(t, ns, hex, origin, strlen(origin), payload, len, "fetch") != EU_OK) {
    lua_pushboolean(L, 0);
    lua_pushfstring(L, "cannot fetch from %s", origin);
    return 2;
  }
  return lua_yield(L, 0);
}

/* all(fns) -> yields; resumed with true, or false and a wire error: the
 * functions of the list run as branches of the invocation, side by side
 * (eu_task_all). */
static int c_all(lua_State *L) {
  eu_task *t = need_task(L, "eutaxy.all");
  int n, i, *refs;
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  n = (int)luaL_len(L, 1);
  luaL_argcheck(L, n > 0 && n <= 1000, 1, "from 1 to 1000 functions expected");
  for (i = 1; i <= n; i++)
    if (lua_geti(L, 1, i) != LUA_TFUNCTION) return luaL_error(L, "eutaxy.all: element %d is no function", i);
  lua_settop(L, 1);
  refs = lua_newuserdatauv(L, (size_t)n * sizeof *refs, 0);
  for (i = 0; i < n; i++) {
    lua_geti(L, 1, i + 1);
    refs[i] = luaL_ref(L, LUA_REGISTRYINDEX);
  }
  if (eu_task_all(t, refs, n) != EU_OK) return luaL_error(L, "eutaxy.all: out of memory");
  return lua_yield(L, 0);
}

/* all_failed(): in a branch of eutaxy.all, its function raised. */
static int c_all_failed(lua_State *L) {
  eu_task *t = eu_world_running(L);
  if (!t || eu_task_all_failed(t) != EU_OK) return luaL_error(L, "all_failed() belongs to a branch of eutaxy.all");
  return 0;
}

/* no_retry(): controller:noRetry() of the scheduled invocation running. */
static int c_no_retry(lua_State *L) {
  eu_task *t = eu_world_running(L);
  if (!t || eu_task_no_retry(t) != EU_OK)
    return luaL_error(L, "noRetry() belongs to the controller of a scheduled invocation, while it runs");
  return 0;
}

/* wait_until(fn): ctx.waitUntil; fn runs once the invocation running has
 * answered, as an invocation of its own. */
static int c_wait_until(lua_State *L) {
  int ref, rc;
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_settop(L, 1);
  ref = luaL_ref(L, LUA_REGISTRYINDEX);
  if ((rc = eu_world_wait_until(L, ref)) != EU_OK) {
    luaL_unref(L, LUA_REGISTRYINDEX, ref);
    if (rc == EU_ENOMEM) return luaL_error(L, "waitUntil: out of memory");
    return luaL_error(L, "waitUntil can only be called while an invocation runs (fetch, an RPC method, alarm, "
                         "scheduled), not while a module loads or an object is constructed");
  }
  return 0;
}

/* gate(op [, why]): ctx.blockConcurrencyWhile's input gate: "shut", "open",
 * "fail" (its function raised: why says what), "init" (from init). */
static int c_gate(lua_State *L) {
  static const char *const ops[] = { "shut", "open", "fail", "init", NULL };
  static const int codes[] = { EU_GATE_SHUT, EU_GATE_OPEN, EU_GATE_FAIL, EU_GATE_INIT };
  int op = luaL_checkoption(L, 1, NULL, ops);
  if (eu_world_gate(L, codes[op], luaL_optstring(L, 2, NULL)) != EU_OK)
    return luaL_error(L, "blockConcurrencyWhile can only be called from the object's init or while one of its "
                         "invocations runs");
  return 0;
}

/* abort(reason): ctx.abort. Where the invocation can yield it is suspended
 * for good, so nothing catches it; where it cannot, reason is raised, and
 * the invocation ends with it all the same (eu_world_abort). */
static int c_abort(lua_State *L) {
  const char *reason = luaL_optstring(L, 1, NULL);
  eu_task *t = eu_world_running(L);
  if (eu_world_abort(L, reason) != EU_OK)
    return luaL_error(L, "abort can only be called while one of the object's invocations runs");
  if (t && lua_isyieldable(L)) return lua_yield(L, 0);
  lua_pushstring(L, reason ? reason : "the object was aborted");
  return lua_error(L);
}

static int c_in_invocation(lua_State *L) {
  lua_pushboolean(L, eu_world_running(L) != NULL);
  return 1;
}

static int c_uuid(lua_State *L) {
  eu_world *w = eu_world_of(L);
  uint64_t hi = eu_world_random(w), lo = eu_world_random(w);
  char h[32], s[36];
  hi = (hi & ~UINT64_C(0xf000)) | UINT64_C(0x4000);                      /* version 4 */
  lo = (lo & ~(UINT64_C(0xc) << 60)) | (UINT64_C(0x8) << 60);            /* variant 10 */
  /* 8-4-4-4-12 hex digits: hi's 16, then lo's */
  eu_hex64(hi, h);
  eu_hex64(lo, h + 16);
  memcpy(s, h, 8);
  s[8] = '-';
  memcpy(s + 9, h + 8, 4);
  s[13] = '-';
  memcpy(s + 14, h + 12, 4);
  s[18] = '-';
  memcpy(s + 19, h + 16, 4);
  s[23] = '-';
  memcpy(s + 24, h + 20, 12);
  lua_pushlstring(L, s, sizeof s);
  return 1;
}

static int check_ns(lua_State *L, eu_world *w, int idx) {
  const char *nsname = luaL_checkstring(L, idx);
  int ns = eu_world_binding(w, nsname);
  if (ns < 0) luaL_error(L, "no durable object binding named %s", nsname);
  return ns;
}

static int c_id_from_name(lua_State *L) {
  eu_world *w = eu_world_of(L);
  int ns = check_ns(L, w, 1);
  char hex[65];
  size_t len;
  const char *name = luaL_checklstring(L, 2, &len);
  eu_world_id_from_name(w, ns, name, len, hex);
  lua_pushstring(L, hex);
  return 1;
}

static int c_new_unique_id(lua_State *L) {
  eu_world *w = eu_world_of(L);
  char hex[65];
  check_ns(L, w, 1);
  eu_world_new_unique_id(w, hex);
  lua_pushstring(L, hex);
  return 1;
}

static int c_storage(lua_State *L) {
  eu_world *w = eu_world_of(L);
  eu_object *o = eu_world_self(L);
  char err[EU_ERRLEN];
  eu_store *s;
  if (!o) return luaL_error(L, "the worker has no storage: only durable objects do");
  s = eu_object_store(w, o, err, sizeof err);
  if (!s) return luaL_error(L, "%s", err);
  eu_lstore_push(L, s);
  return 1;
}

/* durability() -> { agenda = {...}, fanout = {...} }, bound to this object's store. */
static int c_durability(lua_State *L) {
  eu_world *w = eu_world_of(L);
  eu_object *o = eu_world_self(L);
  char err[EU_ERRLEN];
  eu_store *s;
  if (!o) return luaL_error(L, "the worker has no storage: fanout, alarms and durable operations live in objects");
  s = eu_object_store(w, o, err, sizeof err);
  if (!s) return luaL_error(L, "%s", err);
  lua_createtable(L, 0, 2);
  eu_lagenda_push(L, s);
  lua_setfield(L, -2, "agenda");
  eu_lfanout_push(L, s);
  lua_setfield(L, -2, "fanout");
  return 1;
}

/* fault({ "delivery-fail", ... }, label) -> the kind that strikes, or nil.
 * A fault point offered by Lua code of the host (the fanout runner). */
static int c_fault(lua_State *L) {
  eu_world *w = eu_world_of(L);
  const char *label = luaL_checkstring(L, 2);
  unsigned kinds = 0;
  int i, n, k;
  luaL_checktype(L, 1, LUA_TTABLE);
  n = (int)luaL_len(L, 1);
  for (i = 1; i <= n; i++) {
    lua_geti(L, 1, i);
    k = lua_isstring(L, -1) ? eu_fault_parse(lua_tostring(L, -1)) : 0;
    if (!k) return luaL_error(L, "unknown fault kind %s", luaL_tolstring(L, -1, NULL));
    kinds |= EU_FAULT_BIT(k);
    lua_pop(L, 1);
  }
  k = eu_world_fault(w, kinds, label);
  if (k) lua_pushstring(L, eu_fault_name(k));
  else lua_pushnil(L);
  return 1;
}

/* visit_reply(ok, ...): runInDurableObject's invocation answers the request
 * it ran (ok false: it failed, and its turn is rolled back) and yields until
 * the next, which it returns. A reply that cannot be cloned is not sent:
 * nil and why come back at once. */
static int c_visit_reply(lua_State *L) {
  eu_task *t = eu_world_running(L);
  char err[EU_ERRLEN];
  eu_buf b;
  char *payload;
  size_t len;
  int ok = lua_toboolean(L, 1);
  if (!t || !lua_isyieldable(L)) return luaL_error(L, "visit_reply belongs to a runInDurableObject invocation");
  eu_buf_init(&b);
  if (eu_clone_encode(L, 1, lua_gettop(L), &b, err, sizeof err) != EU_OK) {
    eu_buf_free(&b);
    lua_pushnil(L);
    lua_pushstring(L, err);
    return 2;
  }
  payload = eu_buf_take(&b, &len);
  if (eu_task_visit_reply(t, ok, payload, len) != EU_OK)
    return luaL_error(L, "visit_reply belongs to a runInDurableObject invocation");
  return lua_yield(L, 0);
}

/* id_class(Id): the class whose tables cross as ids (clone.h), in this state. */
static int c_id_class(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  eu_clone_set_id_class(L, 1);
  return 0;
}

/* ---- WebSockets (ctx:acceptWebSocket and the rest: runtime.lua) ---------- */

/* ws_accept(tags): the new socket's id. The tags are checked here. */
static int c_ws_accept(lua_State *L) {
  const char *tags[EU_WS_MAX_TAGS];
  size_t lens[EU_WS_MAX_TAGS];
  char why[EU_ERRLEN];
  int64_t id;
  int n = 0, i;
  if (!lua_isnoneornil(L, 1)) {
    luaL_checktype(L, 1, LUA_TTABLE);
    n = (int)luaL_len(L, 1);
    if (n > EU_WS_MAX_TAGS) return luaL_error(L, "acceptWebSocket: at most %d tags, got %d", EU_WS_MAX_TAGS, n);
    for (i = 0; i < n; i++) {
      lua_rawgeti(L, 1, i + 1);
      if (lua_type(L, -1) != LUA_TSTRING)
        return luaL_error(L, "acceptWebSocket: tag %d is a %s, not a string", i + 1, luaL_typename(L, -1));
      tags[i] = lua_tolstring(L, -1, &lens[i]);
      if (lens[i] > EU_WS_MAX_TAG)
        return luaL_error(L, "acceptWebSocket: tag %d is %d bytes long, over %d", i + 1, (int)lens[i], EU_WS_MAX_TAG);
      if (memchr(tags[i], '\0', lens[i])) return luaL_error(L, "acceptWebSocket: tag %d holds a NUL byte", i + 1);
      lua_pop(L, 1);  /* the string stays in the table */
    }
  }
  if (eu_world_ws_accept(L, tags, lens, n, &id, why, sizeof why) != EU_OK) return luaL_error(L, "%s", why);
  lua_pushinteger(L, (lua_Integer)id);
  return 1;
}

/* ws_send(id, data, binary) and ws_send(id, nil, nil, code, reason): a message, or the close. */
static int c_ws_send(lua_State *L) {
  int64_t id = (int64_t)luaL_checkinteger(L, 1);
  char why[EU_ERRLEN];
  size_t len = 0;
  const char *data;
  int rc;
  if (lua_isnoneornil(L, 2)) {
    int code = (int)luaL_checkinteger(L, 4);
    data = luaL_optlstring(L, 5, "", &len);
    rc = eu_world_ws_send(L, id, EU_WS_CLOSE, code, data, len, why, sizeof why);
  } else {
    data = luaL_checklstring(L, 2, &len);
    rc = eu_world_ws_send(L, id, lua_toboolean(L, 3) ? EU_WS_BINARY : EU_WS_TEXT, 0, data, len, why, sizeof why);
  }
  if (rc != EU_OK) return luaL_error(L, "%s", why);
  return 0;
}

/* ws_state(id): readyState (0 connecting, 1 open, 2 closing, 3 closed). */
static int c_ws_state(lua_State *L) {
  const char *tags, *attach;
  size_t tl, al;
  int64_t auto_at;
  int state;
  if (eu_world_ws_get(L, (int64_t)luaL_checkinteger(L, 1), &state, &tags, &tl, &attach, &al, &auto_at) != EU_OK)
    return luaL_error(L, "the WebSocket is not one this object accepted");
  lua_pushinteger(L, state == EU_WS_PENDING ? 0 : state == EU_WS_OPEN ? 1 : state == EU_WS_CLOSING ? 2 : 3);
  return 1;
}

/* ws_tags(id): a new list of its tags. */
static int c_ws_tags(lua_State *L) {
  const char *tags, *attach, *p;
  size_t tl, al;
  int64_t auto_at;
  int state, i = 0;
  if (eu_world_ws_get(L, (int64_t)luaL_checkinteger(L, 1), &state, &tags, &tl, &attach, &al, &auto_at) != EU_OK)
    return luaL_error(L, "getTags: the WebSocket is not one this object accepted");
  lua_createtable(L, 2, 0);
  for (p = tags; p < tags + tl; p += strlen(p) + 1) {
    lua_pushstring(L, p);
    lua_rawseti(L, -2, ++i);
  }
  return 1;
}

/* ws_attach(id, value): serializeAttachment, a copy of value cloned. */
static int c_ws_attach(lua_State *L) {
  int64_t id = (int64_t)luaL_checkinteger(L, 1);
  char err[EU_ERRLEN], *data = NULL;
  size_t len = 0;
  eu_buf b;
  luaL_checkany(L, 2);
  if (!lua_isnil(L, 2)) {
    eu_buf_init(&b);
    if (eu_clone_encode(L, 2, 1, &b, err, sizeof err) != EU_OK) {
      eu_buf_free(&b);
      lua_pushfstring(L, "serializeAttachment: %s", err);
      return lua_error(L);
    }
    if (b.n > EU_WS_MAX_ATTACHMENT) {
      size_t n = b.n;
      eu_buf_free(&b);
      return luaL_error(L, "serializeAttachment: the value is %d bytes serialized, over the limit of %d",
                        (int)n, EU_WS_MAX_ATTACHMENT);
    }
    data = eu_buf_take(&b, &len);
  }
  if (eu_world_ws_attach(L, id, data, len) != EU_OK)
    return luaL_error(L, "serializeAttachment: the WebSocket is not one this object accepted");
  return 0;
}

/* ws_attachment(id): deserializeAttachment, a new copy (nil for none). */
static int c_ws_attachment(lua_State *L) {
  const char *tags, *attach;
  size_t tl, al;
  int64_t auto_at;
  int state, n = 0;
  char err[EU_ERRLEN];
  if (eu_world_ws_get(L, (int64_t)luaL_checkinteger(L, 1), &state, &tags, &tl, &attach, &al, &auto_at) != EU_OK)
    return luaL_error(L, "deserializeAttachment: the WebSocket is not one this object accepted");
  lua_settop(L, 1);
  if (!al) return 0;
  if (eu_clone_decode(L, attach, al, &n, err, sizeof err) != EU_OK) return luaL_error(L, "deserializeAttachment: %s", err);
  return n;
}

/* ws_list(tag): the ids of the object's sockets not closed, with tag if given. */
static int c_ws_list(lua_State *L) {
  const char *tag = luaL_optstring(L, 1, NULL);
  const int64_t *ids;
  int n, i;
  if (eu_world_ws_list(L, tag, &ids, &n) != EU_OK) return luaL_error(L, "getWebSockets: only a Durable Object has WebSockets");
  lua_createtable(L, n, 0);
  for (i = 0; i < n; i++) {
    lua_pushinteger(L, (lua_Integer)ids[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* ws_auto(request, response) or ws_auto(): setWebSocketAutoResponse. */
static int c_ws_auto(lua_State *L) {
  size_t ql = 0, rl = 0;
  const char *q = luaL_optlstring(L, 1, NULL, &ql), *r = q ? luaL_checklstring(L, 2, &rl) : NULL;
  if (ql > EU_WS_MAX_AUTO || rl > EU_WS_MAX_AUTO)
    return luaL_error(L, "setWebSocketAutoResponse: a request or response may be %d bytes long", EU_WS_MAX_AUTO);
  if (eu_world_ws_auto(L, q, ql, r, rl) != EU_OK) return luaL_error(L, "setWebSocketAutoResponse: only a Durable Object can set one");
  return 0;
}

/* ws_auto_at(id): when the host last answered the socket's auto-response request, or nil. */
static int c_ws_auto_at(lua_State *L) {
  const char *tags, *attach;
  size_t tl, al;
  int64_t auto_at;
  int state;
  if (eu_world_ws_get(L, (int64_t)luaL_checkinteger(L, 1), &state, &tags, &tl, &attach, &al, &auto_at) != EU_OK)
    return luaL_error(L, "getWebSocketAutoResponseTimestamp: the WebSocket is not one this object accepted");
  if (!auto_at) return 0;
  lua_pushinteger(L, (lua_Integer)auto_at);
  return 1;
}

static const luaL_Reg isolate_funcs[] = {
  {"abort", c_abort},
  {"all", c_all},
  {"all_failed", c_all_failed},
  {"durability", c_durability},
  {"fault", c_fault},
  {"now", c_now},
  {"sleep", c_sleep},
  {"call", c_call},
  {"fetch", c_fetch},
  {"gate", c_gate},
  {"id_class", c_id_class},
  {"in_invocation", c_in_invocation},
  {"json_encoder", eu_json_encoder_metered},
  {"url_split", eu_url_split_metered},
  {"url_href", eu_url_href_metered},
  {"row_object", eu_sql_row_object_metered},
  {"row_objects", eu_sql_row_objects_metered},
  {"no_retry", c_no_retry},
  {"uuid", c_uuid},
  {"visit_reply", c_visit_reply},
  {"wait_until", c_wait_until},
  {"id_from_name", c_id_from_name},
  {"new_unique_id", c_new_unique_id},
  {"storage", c_storage},
  {"ws_accept", c_ws_accept},
  {"ws_attach", c_ws_attach},
  {"ws_attachment", c_ws_attachment},
  {"ws_auto", c_ws_auto},
  {"ws_auto_at", c_ws_auto_at},
  {"ws_list", c_ws_list},
  {"ws_send", c_ws_send},
  {"ws_state", c_ws_state},
  {"ws_tags", c_ws_tags},
  {NULL, NULL}
};

int eu_world_open_core(lua_State *L) {
  eu_clone_set_id_check(L, eu_world_check_id);
  luaL_newlib(L, isolate_funcs);
  lua_pushboolean(L, 1);
  lua_setfield(L, -2, "isolate");
  return 1;
}

/* ---- worlds, for the host --------------------------------------------- */

#define WORLD_MT "eutaxy.World"

typedef struct lworld {
  eu_world *w;
  int calls, fetches, visits;
  int borrowed;  /* lent by the checker for one run: closing it is not ours to do */
} lworld;

static lworld *check_world(lua_State *L) {
  lworld *lw = luaL_checkudata(L, 1, WORLD_MT);
  if (!lw->w) luaL_error(L, "the world is closed");
  return lw;
}

static const char *opt_string(lua_State *L, int t, const char *field, int required) {
  const char *s;
  lua_getfield(L, t, field);
  if (lua_isnil(L, -1) && !required) {
    lua_pop(L, 1);
    return NULL;
  }
  if (lua_type(L, -1) != LUA_TSTRING) luaL_error(L, "eutaxy.core.world: option %s must be a string", field);
  s = lua_tostring(L, -1);
  lua_pop(L, 1);  /* still referenced by the options table */
  return s;
}

/* The array of strings at field of the table at t, for the world to copy:
 * a userdata left on the stack (so an error cannot leak it), the strings
 * kept alive by the table. */
static const char **string_list(lua_State *L, int t, const char *field, int *n) {
  const char **list;
  int i;
  lua_getfield(L, t, field);
  *n = lua_istable(L, -1) ? (int)luaL_len(L, -1) : 0;
  list = lua_newuserdatauv(L, (size_t)(*n ? *n : 1) * sizeof *list, 0);
  for (i = 0; i < *n; i++) {
    lua_geti(L, -2, i + 1);
    if (lua_type(L, -1) != LUA_TSTRING) luaL_error(L, "eutaxy.core.world: %s[%d] must be a string", field, i + 1);
    list[i] = lua_tostring(L, -1);
    lua_pop(L, 1);
  }
  lua_remove(L, -2);
  return list;
}

/* core.world{ entry=, libdir=, projectdir=, bindings = { {name=, class_name=, entry=}, ... },
 *             vars = { NAME = value, ... }, crons = { "*\/5 * * * *", ... }, seed=, start=,
 *             cpuLimit=, memLimit=, echo= } */
static int l_world(lua_State *L) {
  eu_world_opts o;
  eu_binding *b = NULL;
  lworld *lw;
  char err[EU_ERRLEN];
  int i, n, rc, top;
  luaL_checktype(L, 1, LUA_TTABLE);
  memset(&o, 0, sizeof o);
  o.entry = opt_string(L, 1, "entry", 1);
  o.libdir = opt_string(L, 1, "libdir", 1);
  o.projectdir = opt_string(L, 1, "projectdir", 0);
  lua_getfield(L, 1, "seed");
  o.seed = (uint64_t)luaL_optinteger(L, -1, 0);
  lua_getfield(L, 1, "start");
  o.start_ms = (int64_t)luaL_optinteger(L, -1, 0);
  lua_getfield(L, 1, "cpuLimit");
  o.cpu_limit = (int64_t)luaL_optinteger(L, -1, 0);
  lua_getfield(L, 1, "memLimit");
  o.mem_limit = (size_t)luaL_optinteger(L, -1, 0);
  lua_getfield(L, 1, "echo");
  o.echo_log = lua_toboolean(L, -1);
  lua_pop(L, 5);
  o.crons = string_list(L, 1, "crons", &o.ncrons);
  lua_getfield(L, 1, "bindings");
  n = lua_istable(L, -1) ? (int)luaL_len(L, -1) : 0;
  lw = lua_newuserdatauv(L, sizeof *lw, 0);
  memset(lw, 0, sizeof *lw);
  luaL_setmetatable(L, WORLD_MT);
  top = lua_gettop(L);
  if (n > 0) {
    /* a userdata, so a Lua error below cannot leak it; the strings stay
     * reachable through the options table */
    b = lua_newuserdatauv(L, (size_t)n * sizeof *b, 0);
    for (i = 0; i < n; i++) {
      lua_geti(L, -3, i + 1);
      if (!lua_istable(L, -1)) return luaL_error(L, "eutaxy.core.world: bindings[%d] must be a table", i + 1);
      lua_getfield(L, -1, "name");
      lua_getfield(L, -2, "class_name");
      if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
        return luaL_error(L, "eutaxy.core.world: bindings[%d] needs name and class_name", i + 1);
      b[i].name = lua_tostring(L, -2);
      b[i].class_name = lua_tostring(L, -1);
      lua_getfield(L, -3, "entry");  /* a service's module */
      if (!lua_isnil(L, -1) && lua_type(L, -1) != LUA_TSTRING)
        return luaL_error(L, "eutaxy.core.world: bindings[%d].entry must be a string", i + 1);
      b[i].entry = lua_tostring(L, -1);
      lua_pop(L, 4);
    }
  }
  o.bindings = b;
  o.nbindings = n;
  lua_getfield(L, 1, "vars");
  if (lua_istable(L, -1)) {
    if (eu_clone_push_encoded(L, -1, err, sizeof err) != EU_OK)
      return luaL_error(L, "eutaxy.core.world: vars: %s", err);
    o.vars = lua_tolstring(L, -1, &o.vars_len);
  } else if (!lua_isnil(L, -1)) {
    return luaL_error(L, "eutaxy.core.world: vars must be a table");
  }
  rc = eu_world_new(&lw->w, &o, err, sizeof err);
  if (rc != EU_OK) return luaL_error(L, "%s", err);
  lua_settop(L, top);  /* the world on top: the bindings, vars and crons were copied */
  return 1;
}

/* Runs a submitted slot to its end and pushes its answer values. */
static int finish_slot(lua_State *L, eu_world *w, int slot) {
  char err[EU_ERRLEN];
  char *data;
  size_t len;
  int n = 0, rc;
  if (!slot) return luaL_error(L, "out of memory submitting a call");
  rc = eu_world_run_until_done(w, slot, err, sizeof err);
  if (rc != EU_OK) return luaL_error(L, "%s", err);
  eu_world_slot_take(w, slot, &data, &len);
  if (!data) return 0;  /* no answer: the client went away (a reset struck the worker's request) */
  rc = eu_clone_decode(L, data, len, &n, err, sizeof err);
  free(data);
  if (rc != EU_OK) return luaL_error(L, "%s", err);
  return n;
}

static eu_object *check_object(lua_State *L, eu_world *w, int idx) {
  int ns = check_ns(L, w, idx);
  const char *hex = luaL_checkstring(L, idx + 1);
  size_t namelen = 0;
  const char *name = luaL_optlstring(L, idx + 2, NULL, &namelen);
  char err[EU_ERRLEN];
  eu_object *o = eu_world_object_named(w, ns, hex, name, namelen, err, sizeof err);
  if (!o) luaL_error(L, "%s", err);
  return o;
}

/* w:call(ns, hex, name, method, ...) -> ok, ... */
static int w_call(lua_State *L) {
  lworld *lw = check_world(L);
  eu_object *o = check_object(L, lw->w, 2);
  const char *method = luaL_checkstring(L, 5);
  char err[EU_ERRLEN], label[32];
  eu_buf b;
  char *payload;
  size_t len;
  eu_buf_init(&b);
  if (eu_clone_encode(L, 5, lua_gettop(L) - 4, &b, err, sizeof err) != EU_OK) {
    eu_buf_free(&b);
    lua_pushboolean(L, 0);
    lua_pushfstring(L, "DataCloneError: the arguments of %s cannot be cloned: %s", method, err);
    return 2;
  }
  payload = eu_buf_take(&b, &len);
  snprintf(label, sizeof label, "call-%d", ++lw->calls);
  return finish_slot(L, lw->w, eu_world_submit_host(lw->w, EU_CALL_RPC, o, method, payload, len, label));
}

/* w:fetch(wire_request [, ns, hex, name]) -> ok, wire_response | error.
 * Without a target the request goes to the worker. */
static int w_fetch(lua_State *L) {
  lworld *lw = check_world(L);
  eu_object *target = lua_isnoneornil(L, 3) ? NULL : check_object(L, lw->w, 3);
  char err[EU_ERRLEN], label[32];
  eu_buf b;
  char *payload;
  size_t len;
  luaL_checktype(L, 2, LUA_TTABLE);
  eu_buf_init(&b);
  if (eu_clone_encode(L, 2, 1, &b, err, sizeof err) != EU_OK) {
    eu_buf_free(&b);
    return luaL_error(L, "the request cannot be cloned: %s", err);
  }
  payload = eu_buf_take(&b, &len);
  snprintf(label, sizeof label, "req-%d", ++lw->fetches);
  return finish_slot(L, lw->w, eu_world_submit_host(lw->w, EU_CALL_FETCH, target, "fetch", payload, len, label));
}

static int w_advance(lua_State *L) {
  lworld *lw = check_world(L);
  lua_Integer ms = luaL_checkinteger(L, 2);
  char err[EU_ERRLEN];
  luaL_argcheck(L, ms >= 0, 2, "time only moves forward");
  if (eu_world_advance(lw->w, (int64_t)ms, err, sizeof err) != EU_OK) return luaL_error(L, "%s", err);
  lua_pushinteger(L, (lua_Integer)eu_world_now(lw->w));
  return 1;
}

static int w_now(lua_State *L) {
  lworld *lw = check_world(L);
  lua_pushinteger(L, (lua_Integer)eu_world_now(lw->w));
  return 1;
}

static int w_elapsed(lua_State *L) {
  lworld *lw = check_world(L);
  lua_pushinteger(L, (lua_Integer)eu_world_elapsed(lw->w));
  return 1;
}

/* w:run_alarm(ns, hex, name) -> false when no alarm is set, else true, ok, err */
static int w_run_alarm(lua_State *L) {
  lworld *lw = check_world(L);
  eu_object *o = check_object(L, lw->w, 2);
  int slot = eu_world_run_alarm(lw->w, o);
  if (!slot) {
    lua_pushboolean(L, 0);
    return 1;
  }
  lua_pushboolean(L, 1);
  return 1 + finish_slot(L, lw->w, slot);
}

/* w:run_cron(expr) -> ok, ... (the handler's results, or false and its error) */
static int w_run_cron(lua_State *L) {
  lworld *lw = check_world(L);
  const char *expr = luaL_checkstring(L, 2);
  char err[EU_ERRLEN];
  int slot = eu_world_run_cron(lw->w, expr, err, sizeof err);
  if (slot < 0) {
    lua_pushstring(L, err);  /* no position of ours: the spec's line is the one to show */
    return lua_error(L);
  }
  return finish_slot(L, lw->w, slot);
}

static int w_reset(lua_State *L) {
  lworld *lw = check_world(L);
  eu_object *o = check_object(L, lw->w, 2);
  eu_world_reset(lw->w, o);
  return 0;
}

/* w:hibernate(ns, hex, name) -> whether the object was idle, and its isolate closed
 * (its store and WebSockets kept) */
static int w_hibernate(lua_State *L) {
  lworld *lw = check_world(L);
  eu_object *o = check_object(L, lw->w, 2);
  lua_pushboolean(L, eu_world_hibernate(lw->w, o) == EU_OK);
  return 1;
}

/* w:exec(ns, hex, name, sql, ...) -> result table, committed at once */
static int w_exec(lua_State *L) {
  lworld *lw = check_world(L);
  eu_object *o = check_object(L, lw->w, 2);
  char err[EU_ERRLEN];
  eu_store *s = eu_object_store_outside(lw->w, o, err, sizeof err);
  int n = lua_gettop(L) - 4;
  if (!s) return luaL_error(L, "%s", err);
  if (eu_store_in_turn(s)) return luaL_error(L, "the object is in the middle of a turn");
  eu_world_observe(lw->w, o);
  eu_lstore_push_fn(L, s, "exec");
  lua_rotate(L, 5, 1);  /* exec below sql and its bindings */
  if (lua_pcall(L, n, 1, 0) != LUA_OK) {
    eu_store_rollback(s);
    return lua_error(L);
  }
  if (eu_store_commit(s) != EU_OK) return luaL_error(L, "commit failed: %s", eu_store_errmsg(s));
  return 1;
}

/* w:holds(ns, hex, name, sql, property, ...) -> true when each property,
 * a sim.unique or sim.everyRow, holds over the rows of sql (a SELECT *),
 * all of them decided in one pass over the rows; false when one fails or
 * is not decided here (holds.h). Writes nothing. */
static int w_holds(lua_State *L) {
  lworld *lw = check_world(L);
  eu_object *o = check_object(L, lw->w, 2);
  size_t len;
  const char *sql = luaL_checklstring(L, 5, &len);
  eu_prop p[16];
  const eu_prop *ps[16];
  int n = lua_gettop(L) - 5, i, ok = 1;
  luaL_argcheck(L, n >= 1, 6, "a property expected");
  luaL_argcheck(L, n <= 16, 22, "at most 16 properties");
  for (i = 0; i < n && ok; i++) {
    ok = eu_prop_read(L, 6 + i, &p[i]);
    ps[i] = &p[i];
  }
  lua_pushboolean(L, ok && eu_holds_all(lw->w, o, sql, len, ps, n));
  return 1;
}

static int w_id_from_name(lua_State *L) {
  lworld *lw = check_world(L);
  int ns = check_ns(L, lw->w, 2);
  char hex[65];
  size_t len;
  const char *name = luaL_checklstring(L, 3, &len);
  eu_world_id_from_name(lw->w, ns, name, len, hex);
  lua_pushstring(L, hex);
  return 1;
}

static int w_new_unique_id(lua_State *L) {
  lworld *lw = check_world(L);
  char hex[65];
  check_ns(L, lw->w, 2);
  eu_world_new_unique_id(lw->w, hex);
  lua_pushstring(L, hex);
  return 1;
}

static int w_has_isolate(lua_State *L) {
  lworld *lw = check_world(L);
  eu_object *o = check_object(L, lw->w, 2);
  lua_pushboolean(L, eu_object_has_isolate(o));
  return 1;
}

static int w_trace(lua_State *L) {
  lworld *lw = check_world(L);
  const eu_buf *t = eu_world_trace(lw->w);
  lua_pushlstring(L, t->p ? t->p : "", t->n);
  return 1;
}

static int w_close(lua_State *L) {
  lworld *lw = luaL_checkudata(L, 1, WORLD_MT);
  if (!lw->borrowed) eu_world_free(lw->w);
  lw->w = NULL;
  return 0;
}

/* w:kv_put(ns, hex, name, key, value): seeds an object's key-value storage. */
static int w_kv_put(lua_State *L) {
  lworld *lw = check_world(L);
  eu_object *o = check_object(L, lw->w, 2);
  size_t klen;
  const char *key = luaL_checklstring(L, 5, &klen);
  char err[EU_ERRLEN];
  eu_store *s = eu_object_store_outside(lw->w, o, err, sizeof err);
  eu_buf b;
  int rc;
  if (!s) return luaL_error(L, "%s", err);
  luaL_checkany(L, 6);
  eu_buf_init(&b);
  if (eu_clone_encode(L, 6, 1, &b, err, sizeof err) != EU_OK) {
    eu_buf_free(&b);
    return luaL_error(L, "the value of %s cannot be stored: %s", key, err);
  }
  rc = eu_store_kv_put(s, key, klen, b.p, b.n);
  eu_buf_free(&b);
  if (rc < 0 || eu_store_commit(s) != EU_OK) {
    eu_store_rollback(s);
    return luaL_error(L, "storing %s: %s", key, eu_store_errmsg(s));
  }
  return 0;
}

/* w:kv(ns, hex, name) -> { [key] = value, ... }: an object's key-value
 * storage, committed state only (nothing can be in a turn between steps). */
static int w_kv(lua_State *L) {
  lworld *lw = check_world(L);
  eu_object *o = check_object(L, lw->w, 2);
  char err[EU_ERRLEN];
  eu_store *s = eu_object_store_outside(lw->w, o, err, sizeof err);
  lua_Integer i, n;
  int rc;
  if (!s) return luaL_error(L, "%s", err);
  if (eu_store_in_turn(s)) return luaL_error(L, "the object is in the middle of a turn");
  eu_world_observe(lw->w, o);
  eu_lstore_push_fn(L, s, "list");
  rc = lua_pcall(L, 0, 1, 0);
  if (rc != LUA_OK) {
    eu_store_rollback(s);
    return lua_error(L);
  }
  if (eu_store_commit(s) != EU_OK) return luaL_error(L, "commit failed: %s", eu_store_errmsg(s));
  n = luaL_len(L, -1);
  lua_createtable(L, 0, (int)n);
  for (i = 1; i <= n; i++) {
    lua_geti(L, -2, i);
    lua_getfield(L, -1, "key");
    lua_getfield(L, -2, "value");
    lua_settable(L, -4);
    lua_pop(L, 1);
  }
  return 1;
}

/* w:objects([binding]) -> { { binding =, hex =, name = }, ... }: the objects
 * the world has made (of binding, if given), in the order they came to be. */
static int w_objects(lua_State *L) {
  lworld *lw = check_world(L);
  int ns = lua_isnoneornil(L, 2) ? -1 : check_ns(L, lw->w, 2);
  int i, n = eu_world_nobjects(lw->w), k = 0;
  lua_newtable(L);
  for (i = 0; i < n; i++) {
    eu_object *o = eu_world_object_at(lw->w, i);
    const char *binding = eu_object_binding(lw->w, o);
    if (ns >= 0 && strcmp(binding, eu_world_binding_name(lw->w, ns)) != 0) continue;
    lua_createtable(L, 0, 3);
    lua_pushstring(L, binding);
    lua_setfield(L, -2, "binding");
    lua_pushstring(L, eu_object_hex(o));
    lua_setfield(L, -2, "hex");
    if (eu_object_name(o)) {
      lua_pushstring(L, eu_object_name(o));
      lua_setfield(L, -2, "name");
    }
    lua_rawseti(L, -2, ++k);
  }
  return 1;
}

/* w:visit(ns, hex, name) -> task, ok, class name | task, false, error:
 * starts runInDurableObject's invocation and runs until it waits. */
static int w_visit(lua_State *L) {
  lworld *lw = check_world(L);
  eu_object *o = check_object(L, lw->w, 2);
  char label[32];
  int64_t task = 0;
  int slot;
  snprintf(label, sizeof label, "run-%d", ++lw->visits);
  slot = eu_world_visit(lw->w, o, label, &task);
  lua_settop(L, 1);
  lua_pushinteger(L, (lua_Integer)task);
  return 1 + finish_slot(L, lw->w, slot);
}

/* w:visit_step(task, ...) -> ok, ... (the reply), or nothing when the
 * invocation waits for no request (it ended, or a reset ended it). */
static int w_visit_step(lua_State *L) {
  lworld *lw = check_world(L);
  int64_t task = (int64_t)luaL_checkinteger(L, 2);
  char err[EU_ERRLEN];
  eu_buf b;
  char *payload;
  size_t len;
  int slot;
  eu_buf_init(&b);
  if (eu_clone_encode(L, 3, lua_gettop(L) - 2, &b, err, sizeof err) != EU_OK) {
    eu_buf_free(&b);
    lua_pushboolean(L, 0);
    lua_pushfstring(L, "DataCloneError: what the function sends into the object cannot be cloned: %s", err);
    return 2;
  }
  payload = eu_buf_take(&b, &len);
  slot = eu_world_visit_step(lw->w, task, payload, len);
  if (slot == 0) return 0;
  if (slot < 0) return luaL_error(L, "out of memory");
  lua_settop(L, 1);
  return finish_slot(L, lw->w, slot);
}

/* w:arm_fault(kind, ns|nil, hex|nil, method|nil, when, skip) -> id */
static int w_arm_fault(lua_State *L) {
  static const char *const whens[] = { "any", "before", "waiting", NULL };
  lworld *lw = check_world(L);
  eu_fault_arm a;
  int id = 0, rc;
  memset(&a, 0, sizeof a);
  a.kind = eu_fault_parse(luaL_checkstring(L, 2));
  luaL_argcheck(L, a.kind != 0, 2, "not a fault kind");
  a.ns = lua_isnoneornil(L, 3) ? -1 : check_ns(L, lw->w, 3);
  snprintf(a.hex, sizeof a.hex, "%s", luaL_optstring(L, 4, ""));
  snprintf(a.method, sizeof a.method, "%s", luaL_optstring(L, 5, ""));
  a.when = luaL_checkoption(L, 6, "any", whens);
  a.skip = (int)luaL_optinteger(L, 7, 0);
  luaL_argcheck(L, a.skip >= 0, 7, "must not be negative");
  if ((rc = eu_world_arm_fault(lw->w, &a, &id)) != EU_OK)
    return luaL_error(L, rc == EU_ENOMEM ? "out of memory" : "this world cannot take armed faults");
  lua_pushinteger(L, id);
  return 1;
}

/* w:armed() -> { id, ... }: the armed faults that have not struck, in the order armed */
static int w_armed(lua_State *L) {
  lworld *lw = check_world(L);
  const eu_fault_arm *arms;
  int i, n = eu_world_armed(lw->w, &arms);
  lua_createtable(L, n, 0);
  for (i = 0; i < n; i++) {
    lua_pushinteger(L, arms[i].id);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static int w_disarm(lua_State *L) {
  lworld *lw = check_world(L);
  eu_world_disarm(lw->w);
  return 0;
}

void eu_lworld_push(lua_State *L, eu_world *w, int borrowed) {
  lworld *lw = lua_newuserdatauv(L, sizeof *lw, 0);
  memset(lw, 0, sizeof *lw);
  lw->w = w;
  lw->borrowed = borrowed;
  luaL_setmetatable(L, WORLD_MT);
}

void eu_lworld_release(lua_State *L, int idx) {
  lworld *lw = luaL_testudata(L, idx, WORLD_MT);
  if (lw) lw->w = NULL;
}

static int w_tostring(lua_State *L) {
  lworld *lw = luaL_checkudata(L, 1, WORLD_MT);
  lua_pushstring(L, lw->w ? "eutaxy.World" : "eutaxy.World (closed)");
  return 1;
}

/* w:ws_connect(sock, client): the client took the 101 answer; runs what is due now. */
static int w_ws_connect(lua_State *L) {
  lworld *lw = check_world(L);
  int64_t sock = (int64_t)luaL_checkinteger(L, 2);
  const char *client = luaL_checkstring(L, 3);
  char err[EU_ERRLEN];
  if (eu_world_ws_connect(lw->w, sock, client, NULL, 0, err, sizeof err) != EU_OK ||
      eu_world_advance(lw->w, 0, err, sizeof err) != EU_OK)
    return luaL_error(L, "%s", err);
  return 0;
}

/* w:ws_client(sock, "text"|"binary", data) or (sock, "close", code, reason) or (sock, "drop"):
 * what the client sends; runs what is due now. False when the socket is not open. */
static int w_ws_client(lua_State *L) {
  static const char *const ops[] = { "text", "binary", "close", "drop", "error", NULL };
  static const int codes[] = { EU_WS_TEXT, EU_WS_BINARY, EU_WS_CLOSE, EU_WS_DROP, EU_WS_ERROR };
  lworld *lw = check_world(L);
  int64_t sock = (int64_t)luaL_checkinteger(L, 2);
  int op = codes[luaL_checkoption(L, 3, NULL, ops)], code = 0, rc;
  const char *data = NULL;
  size_t len = 0;
  char err[EU_ERRLEN];
  if (op == EU_WS_CLOSE || op == EU_WS_ERROR) {
    code = (int)luaL_optinteger(L, 4, op == EU_WS_ERROR ? 1002 : 1000);
    data = luaL_optlstring(L, 5, "", &len);
  } else if (op == EU_WS_DROP) {
    code = 1006;
  } else {
    data = luaL_checklstring(L, 4, &len);
  }
  rc = eu_world_ws_client(lw->w, sock, op, code, data, len);
  if (rc == EU_EINVAL) {
    lua_pushboolean(L, 0);
    return 1;
  }
  if (rc != EU_OK || eu_world_advance(lw->w, 0, err, sizeof err) != EU_OK)
    return luaL_error(L, "%s", rc != EU_OK ? "out of memory" : err);
  lua_pushboolean(L, 1);
  return 1;
}

/* Pushes what the world knows of sock: { state, object, client, received = { {type, data | code, reason}, ... } }. */
void eu_push_ws_seen(lua_State *L, eu_world *w, int64_t sock) {
  static const char *const states[] = { "connecting", "open", "closing", "closed" };
  eu_ws_seen s;
  const char *p, *data;
  size_t n, len;
  int op, code, i = 0;
  int64_t at;
  if (eu_world_ws_seen(w, sock, &s) != EU_OK) {
    lua_pushnil(L);
    return;
  }
  lua_createtable(L, 0, 4);
  lua_pushstring(L, states[s.state]);
  lua_setfield(L, -2, "state");
  lua_pushstring(L, s.object);
  lua_setfield(L, -2, "object");
  lua_pushstring(L, s.client);
  lua_setfield(L, -2, "client");
  lua_newtable(L);
  p = s.got;
  n = s.got_len;
  while (eu_ws_record_get(&p, &n, &op, &code, &at, &data, &len)) {
    lua_createtable(L, 0, 3);
    lua_pushstring(L, op == EU_WS_TEXT ? "text" : op == EU_WS_BINARY ? "binary" : op == EU_WS_CLOSE ? "close" : "drop");
    lua_setfield(L, -2, "type");
    if (op == EU_WS_TEXT || op == EU_WS_BINARY) {
      lua_pushlstring(L, data, len);
      lua_setfield(L, -2, "data");
    } else {
      lua_pushinteger(L, code);
      lua_setfield(L, -2, "code");
      lua_pushlstring(L, data, len);
      lua_setfield(L, -2, "reason");
    }
    lua_pushinteger(L, (lua_Integer)at);
    lua_setfield(L, -2, "at");
    lua_rawseti(L, -2, ++i);
  }
  lua_setfield(L, -2, "received");
}

static int w_ws_seen(lua_State *L) {
  lworld *lw = check_world(L);
  eu_push_ws_seen(L, lw->w, (int64_t)luaL_checkinteger(L, 2));
  return 1;
}

static const luaL_Reg world_methods[] = {
  {"call", w_call},
  {"fetch", w_fetch},
  {"advance", w_advance},
  {"now", w_now},
  {"elapsed", w_elapsed},
  {"run_alarm", w_run_alarm},
  {"run_cron", w_run_cron},
  {"reset", w_reset},
  {"hibernate", w_hibernate},
  {"exec", w_exec},
  {"holds", w_holds},
  {"id_from_name", w_id_from_name},
  {"new_unique_id", w_new_unique_id},
  {"has_isolate", w_has_isolate},
  {"trace", w_trace},
  {"kv_put", w_kv_put},
  {"kv", w_kv},
  {"objects", w_objects},
  {"visit", w_visit},
  {"visit_step", w_visit_step},
  {"arm_fault", w_arm_fault},
  {"armed", w_armed},
  {"disarm", w_disarm},
  {"ws_connect", w_ws_connect},
  {"ws_client", w_ws_client},
  {"ws_seen", w_ws_seen},
  {"close", w_close},
  {NULL, NULL}
};

static const luaL_Reg world_meta[] = {
  {"__gc", w_close},
  {"__close", w_close},
  {"__tostring", w_tostring},
  {"__index", NULL},
  {NULL, NULL}
};

/* fnv1a64(s): FNV-1a 64 of the bytes of s, as 16 lower-case hex digits
 * (eutaxy.fingerprint hashes every file a check can load). */
static int l_fnv1a64(lua_State *L) {
  size_t n, i;
  const unsigned char *p = (const unsigned char *)luaL_checklstring(L, 1, &n);
  uint64_t h = 0xcbf29ce484222325u;
  for (i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3u;
  {
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
    lua_pushstring(L, hex);
  }
  return 1;
}

/* The folders from the one first listed down to the one being listed: a
 * symbolic link back to one of them is a cycle, not more files. */
typedef struct ancestry {
  dev_t dev;
  ino_t ino;
  const struct ancestry *up;
} ancestry;

/* Appends to the table at the top the .lua files under dir (prefix names
 * them relative to the folder first listed), following symbolic links and
 * skipping names that start with a dot. */
static int list_lua(lua_State *L, const char *dir, const char *prefix, const ancestry *up, lua_Integer *n) {
  DIR *d;
  struct dirent *e;
  struct stat self;
  ancestry here;
  const ancestry *a;
  if (stat(dir, &self) != 0) return -1;
  for (a = up; a; a = a->up)
    if (a->dev == self.st_dev && a->ino == self.st_ino) return 0;
  here.dev = self.st_dev;
  here.ino = self.st_ino;
  here.up = up;
  if (!(d = opendir(dir))) return -1;
  while ((e = readdir(d)) != NULL) {
    struct stat st;
    size_t len = strlen(e->d_name);
    int lua = len > 4 && strcmp(e->d_name + len - 4, ".lua") == 0;
    char *path, *rel;
    if (e->d_name[0] == '.') continue;
    /* what the folder's entry says is a file needs no stat of its own: a
     * link, a folder, or an entry of no known type does */
    if (e->d_type == DT_REG && !lua) continue;
    if (e->d_type != DT_REG && e->d_type != DT_DIR && e->d_type != DT_LNK && e->d_type != DT_UNKNOWN) continue;
    path = malloc(strlen(dir) + len + 2);
    rel = malloc(strlen(prefix) + len + 2);
    if (!path || !rel) {
      free(path);
      free(rel);
      closedir(d);
      return -1;
    }
    sprintf(path, "%s/%s", dir, e->d_name);
    sprintf(rel, "%s%s%s", prefix, *prefix ? "/" : "", e->d_name);
    if (e->d_type == DT_REG) {
      lua_pushstring(L, rel);
      lua_rawseti(L, -2, ++*n);
    } else if (stat(path, &st) == 0) {
      if (S_ISDIR(st.st_mode)) {
        list_lua(L, path, rel, &here, n);
      } else if (S_ISREG(st.st_mode) && lua) {
        lua_pushstring(L, rel);
        lua_rawseti(L, -2, ++*n);
      }
    }
    free(path);
    free(rel);
  }
  closedir(d);
  return 0;
}

/* lua_files(dir): the .lua files under dir (recursively, links followed,
 * hidden names skipped), relative to dir, in no particular order; or nil
 * and a message when dir cannot be listed. */
static int l_lua_files(lua_State *L) {
  const char *dir = luaL_checkstring(L, 1);
  lua_Integer n = 0;
  lua_newtable(L);
  if (list_lua(L, dir, "", NULL, &n) != 0) {
    luaL_pushfail(L);
    lua_pushfstring(L, "cannot list %s: %s", dir, strerror(errno));
    return 2;
  }
  return 1;
}

static const luaL_Reg host_funcs[] = {
  {"world", l_world},
  {"id_class", c_id_class},
  {"fnv1a64", l_fnv1a64},
  {"json_encoder", eu_json_encoder},
  {"url_split", eu_url_split},
  {"url_href", eu_url_href},
  {"row_object", eu_sql_row_object},
  {"row_objects", eu_sql_row_objects},
  {"lua_files", l_lua_files},
  {NULL, NULL}
};

int eu_open_check(lua_State *L);

int eu_open_core_host(lua_State *L) {
  luaL_newmetatable(L, WORLD_MT);
  luaL_setfuncs(L, world_meta, 0);
  luaL_newlib(L, world_methods);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
  luaL_newlib(L, host_funcs);
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "isolate");
  lua_pushstring(L, EU_VERSION);
  lua_setfield(L, -2, "version");
  eu_open_check(L);  /* adds explore to the module table */
  eu_open_serve(L);  /* adds serve */
  eu_open_cron(L);   /* adds cron_check and cron_next */
  eu_open_linecov(L);  /* adds coverage_start, coverage_finish, ... */
  return 1;
}
