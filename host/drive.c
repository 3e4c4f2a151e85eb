/*
 * drive.c: submitting a scenario's events and collecting their answers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lua.h>

#include "clone.h"
#include "drive.h"
#include "eutaxy.h"
#include "fault.h"

/* 1: an answer, 0: an error out of user code, -1: lost (the caller saw a
 * connection drop: retryable). */
static int classify(eu_world *w, const char *data, size_t len) {
  lua_State *S;
  int n = 0, kind = 0;
  if (eu_clone_leads_true(data, len)) return 1;  /* the host encoded it: no need to read on */
  S = eu_world_scratch(w);
  lua_settop(S, 0);
  if (eu_clone_decode(S, data, len, &n, NULL, 0) != EU_OK || n < 1) return 0;
  if (lua_toboolean(S, 1)) {
    kind = 1;
  } else if (n >= 2 && lua_istable(S, 2)) {
    lua_getfield(S, 2, "retryable");
    kind = lua_toboolean(S, -1) ? -1 : 0;
  }
  lua_settop(S, 0);
  return kind;
}

/* A WebSocket client's answer: the socket of a 101 response, or 0. */
static int64_t upgraded(eu_world *w, const char *data, size_t len) {
  lua_State *S = eu_world_scratch(w);
  int n = 0;
  int64_t sock = 0;
  lua_settop(S, 0);
  if (eu_clone_decode(S, data, len, &n, NULL, 0) == EU_OK && n >= 2 && lua_toboolean(S, 1) && lua_istable(S, 2)) {
    lua_getfield(S, 2, "status");
    lua_getfield(S, 2, "webSocket");
    if (lua_tointeger(S, -2) == 101 && lua_isinteger(S, -1)) sock = (int64_t)lua_tointeger(S, -1);
  }
  lua_settop(S, 0);
  return sock;
}

/* Submits one delivery, at once when now (its arrival was the last step);
 * 0 when an injected fault lost the call before it arrived (the client sees
 * the connection drop). */
static int submit(eu_world *w, const eu_drive_event *e, int delivery, int now, char *err,
                  size_t errlen) {
  eu_object *target = NULL;
  char *payload;
  int slot, fault = EU_FAULT_NONE;
  if (e->kind == EU_CALL_RPC) {
    char label[160];
    target = eu_world_object_by_name(w, e->binding, e->name);
    if (!target)
      return eu_err(err, errlen, EU_EINVAL, "%s: no durable object binding named %s", e->label, e->binding);
    /* The drive's own calls to objects can fail as any call can. */
    snprintf(label, sizeof label, "%.30s#%d (DO:%.40s %.60s)", e->label, delivery, e->binding, e->method);
    fault = eu_world_fault(w, EU_FAULT_BIT(EU_FAULT_RPC_FAIL) | EU_FAULT_BIT(EU_FAULT_AMBIGUOUS), label);
    if (fault == EU_FAULT_RPC_FAIL) return 0;
  }
  payload = malloc(e->len ? e->len : 1);
  if (!payload) return eu_err(err, errlen, EU_ENOMEM, "out of memory");
  memcpy(payload, e->payload, e->len);
  if (now)
    slot = eu_world_submit_arrived(w, e->kind, target, e->kind == EU_CALL_RPC ? e->method : "fetch",
                                   payload, e->len, e->label, delivery, fault == EU_FAULT_AMBIGUOUS);
  else
    slot = eu_world_submit(w, e->kind, target, e->kind == EU_CALL_RPC ? e->method : "fetch", payload,
                           e->len, e->label, delivery);
  if (!slot) return eu_err(err, errlen, EU_ENOMEM, "out of memory submitting %s", e->label);
  if (!now && fault == EU_FAULT_AMBIGUOUS) eu_world_slot_lose_answer(w, slot);
  return slot;
}

/* Delivers event i (its deliveries count already set), resending at once
 * while a fault loses it before it arrives and the client has retries left.
 * slots[i] is the slot in flight, or 0 when the last delivery was lost and
 * its answer (none) is final. */
static int deliver(eu_world *w, const eu_drive *d, int i, int now, eu_drive_answer *answers,
                   int *slots, char *err, size_t errlen) {
  for (;;) {
    int rc = submit(w, &d->events[i], answers[i].deliveries, now, err, errlen);
    if (rc < 0) return rc;
    slots[i] = rc;
    if (rc > 0) return EU_OK;
    if (answers[i].deliveries > d->retries) return EU_OK;  /* lost, and the client gives up */
    answers[i].deliveries++;
  }
}

/* Where an event stands in the run: not yet arrived, arrived and waiting for
 * room under max_concurrent, or admitted (or not in the run at all). */
enum { EU_AHEAD = 0, EU_WAITING, EU_ADMITTED };

/* Admits event i: its first delivery. */
static int admit(eu_world *w, const eu_drive *d, int i, int now, eu_drive_answer *answers,
                 int *slots, int *state, int *inflight, int *left, char *err, size_t errlen) {
  int rc;
  eu_world_touch(w, EU_RES_DRIVE, 1);
  state[i] = EU_ADMITTED;
  (*left)--;
  answers[i].deliveries = 1;
  if ((rc = deliver(w, d, i, now, answers, slots, err, errlen)) < 0) return rc;
  if (slots[i]) (*inflight)++;
  return EU_OK;
}

void eu_drive_state_free(eu_drive_state *st) {
  free(st->slots);
  free(st->resends);
  free(st->state);
  memset(st, 0, sizeof *st);
}

int eu_drive_begin(eu_world *w, const eu_drive *d, eu_drive_state *st, eu_drive_answer *answers,
                   char *err, size_t errlen) {
  size_t n = (size_t)(d->n > 0 ? d->n : 1);
  int i;
  memset(st, 0, sizeof *st);
  st->answers = answers;
  st->slots = calloc(n, sizeof *st->slots);
  st->resends = calloc(n, sizeof *st->resends);
  st->state = calloc(n, sizeof *st->state);
  if (!st->slots || !st->resends || !st->state) return eu_err(err, errlen, EU_ENOMEM, "out of memory");
  memset(answers, 0, (size_t)d->n * sizeof *answers);
  for (i = 0; i < d->n; i++) {
    if (!(d->mask & ((uint64_t)1 << i))) {
      st->state[i] = EU_ADMITTED;
      continue;
    }
    st->left++;
    if (d->events[i].at <= 0) st->state[i] = EU_WAITING;
    else if (eu_world_arrival(w, d->events[i].at, i) != EU_OK) return eu_err(err, errlen, EU_ENOMEM, "out of memory");
  }
  return EU_OK;
}

int eu_drive_waiting(const eu_drive *d, const eu_drive_state *st) {
  int i;
  for (i = 0; i < d->n; i++)
    if (st->state[i] == EU_WAITING) return 1;
  return 0;
}

int eu_drive_save(const eu_drive *d, const eu_drive_state *st, eu_buf *into) {
  size_t n = (size_t)d->n;
  int i;
  if (eu_buf_put(into, &st->inflight, sizeof st->inflight) != EU_OK ||
      eu_buf_put(into, &st->left, sizeof st->left) != EU_OK ||
      eu_buf_put(into, &st->steps, sizeof st->steps) != EU_OK ||
      eu_buf_put(into, st->slots, n * sizeof *st->slots) != EU_OK ||
      eu_buf_put(into, st->resends, n * sizeof *st->resends) != EU_OK ||
      eu_buf_put(into, st->state, n * sizeof *st->state) != EU_OK ||
      eu_buf_put(into, st->answers, n * sizeof *st->answers) != EU_OK)
    return EU_ENOMEM;
  for (i = 0; i < d->n; i++)
    if (st->answers[i].data && eu_buf_put(into, st->answers[i].data, st->answers[i].len) != EU_OK)
      return EU_ENOMEM;
  return EU_OK;
}

int eu_drive_load(const eu_drive *d, eu_drive_state *st, const char *p) {
  size_t n = (size_t)d->n;
  int i, rc = EU_OK;
  for (i = 0; i < d->n; i++) free(st->answers[i].data);
  memcpy(&st->inflight, p, sizeof st->inflight);
  p += sizeof st->inflight;
  memcpy(&st->left, p, sizeof st->left);
  p += sizeof st->left;
  memcpy(&st->steps, p, sizeof st->steps);
  p += sizeof st->steps;
  memcpy(st->slots, p, n * sizeof *st->slots);
  p += n * sizeof *st->slots;
  memcpy(st->resends, p, n * sizeof *st->resends);
  p += n * sizeof *st->resends;
  memcpy(st->state, p, n * sizeof *st->state);
  p += n * sizeof *st->state;
  memcpy(st->answers, p, n * sizeof *st->answers);
  p += n * sizeof *st->answers;
  for (i = 0; i < d->n; i++) {
    char *data;
    if (!st->answers[i].data) continue;
    if (!(data = malloc(st->answers[i].len ? st->answers[i].len : 1))) {
      st->answers[i].data = NULL;
      rc = EU_ENOMEM;
      continue;
    }
    memcpy(data, p, st->answers[i].len);
    p += st->answers[i].len;
    st->answers[i].data = data;
  }
  return rc;
}

int eu_drive_go(eu_world *w, const eu_drive *d, eu_drive_state *st, int *settled,
                int (*at_step)(void *ud), void *ud, char *err, size_t errlen) {
  eu_drive_answer *answers = st->answers;
  int *slots = st->slots, *resends = st->resends, *state = st->state, i, rc = EU_OK;
  *settled = 1;
  for (;;) {
    int stepped, arrived;
    if (at_step && (rc = at_step(ud)) != EU_OK) return rc;
    for (i = 0; i < d->n && st->inflight < d->max_concurrent; i++)
      if (state[i] == EU_WAITING &&
          (rc = admit(w, d, i, 0, answers, slots, state, &st->inflight, &st->left, err, errlen)) < 0)
        return rc;
    rc = EU_OK;
    if (eu_world_stopped(w)) break;
    stepped = eu_world_step(w, err, errlen);
    if (stepped < 0) return stepped;
    if (eu_world_stopped(w)) break;
    if ((arrived = eu_world_arrived(w)) >= 0 && arrived < d->n && state[arrived] == EU_AHEAD) {
      /* Nothing that arrived earlier is waiting while there is room: the
       * admissions above took it. */
      if (st->inflight < d->max_concurrent) {
        rc = admit(w, d, arrived, 1, answers, slots, state, &st->inflight, &st->left, err, errlen);
        if (rc < 0) return rc;
      } else {
        state[arrived] = EU_WAITING;
        eu_world_touch(w, EU_RES_DRIVE, 1);
        eu_world_log(w, "%s  arrives; waits while %d %s in flight (maxConcurrentInvocations)",
                     d->events[arrived].label, st->inflight, st->inflight == 1 ? "is" : "are");
      }
    }
    for (i = 0; i < d->n; i++) {
      char *data;
      size_t len;
      int kind, again = 0;
      if (!slots[i] || !eu_world_slot_done(w, slots[i])) continue;
      /* Collecting an answer commutes with collecting another's: only an
       * admission it makes room for (above, next time round) or an arrival
       * that finds no room depends on it. */
      eu_world_touch(w, EU_RES_DRIVE, d->answers_shared);
      eu_world_touch(w, EU_RES_ANSWER(i), 1);
      eu_world_slot_take(w, slots[i], &data, &len);
      slots[i] = 0;
      kind = classify(w, data, len);
      if (answers[i].deliveries <= d->retries) {
        if (kind < 0) {
          again = 1;  /* the client saw the connection drop and tries again */
        } else if (resends[i] < d->max_redeliveries) {
          char label[64];
          snprintf(label, sizeof label, "%s#%d", d->events[i].label, answers[i].deliveries);
          again = eu_world_fault(w, EU_FAULT_BIT(EU_FAULT_RESEND), label) == EU_FAULT_RESEND;
          if (again) resends[i]++;
        }
      }
      if (again) {
        free(data);
        answers[i].deliveries++;
        if ((rc = deliver(w, d, i, 0, answers, slots, err, errlen)) < 0) return rc;
        rc = EU_OK;
        if (slots[i]) continue;
        st->inflight--;  /* lost before it arrived, with no retry left: deliver recorded it */
        continue;
      }
      answers[i].data = data;
      answers[i].len = len;
      st->inflight--;
      if (d->events[i].websocket && (answers[i].sock = upgraded(w, data, len)) != 0 &&
          (rc = eu_world_ws_connect(w, answers[i].sock, d->events[i].label, d->events[i].script,
                                    d->events[i].script_len, err, errlen)) != EU_OK)
        return rc;
    }
    if (!stepped) {
      if (st->inflight == 0 && st->left == 0) break;
      if (st->inflight > 0) return eu_err(err, errlen, EU_EINVAL, "a drive event never finished: nothing is left to run");
    }
    if (++st->steps > d->max_events) {
      *settled = 0;
      break;
    }
  }
  return rc;
}

int eu_drive_run(eu_world *w, const eu_drive *d, eu_drive_answer *answers, int *settled, char *err,
                 size_t errlen) {
  eu_drive_state st;
  int rc;
  *settled = 1;
  rc = eu_drive_begin(w, d, &st, answers, err, errlen);
  if (rc == EU_OK) rc = eu_drive_go(w, d, &st, settled, NULL, NULL, err, errlen);
  eu_drive_state_free(&st);
  return rc;
}
