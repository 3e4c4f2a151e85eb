/*
 * fanout.h: durable fanout, the storage engine (DESIGN.md: "Durable fanout").
 *
 * A message is enqueued once for a frozen set of named targets and then
 * delivered to each target independently, at least once, with retries, a
 * claim that doubles as a lease, and a dead-letter step. This engine owns the
 * tables and every transaction on them; the runner that calls the targets'
 * callbacks is Lua (lua/eutaxy/fanout.lua, through lfanout.c).
 *
 * Tables (eu_fanout_migrate, capability "fanout" in eutaxy_migrations):
 *   eutaxy_fanout_messages(key PK, id, payload, targets, remaining, seq,
 *                          created_at, generation_id)
 *       the manifest: one per deduplication key while any target is pending;
 *       targets is the frozen sorted target set as a JSON array.
 *   eutaxy_fanout_deliveries(id PK, message_key, target_id, seq, phase, attempt,
 *                            next_attempt_at, last_error, last_error_name,
 *                            created_at, generation_id, dead_lettered_at,
 *                            dead_letter_reason)
 *       one per message and target until it settles; id is the JSON array
 *       [key, target]; phase 'delivery' or 'dead_letter'; reason 'explicit'
 *       or 'exhausted'.
 *   eutaxy_fanout_seq(id = 1, next_seq, pending)
 *       the enqueue sequence and the count of delivery rows, kept in the
 *       same transactions as the rows it counts.
 *   eutaxy_fanout_memos(delivery_id, key, generation_id, value, created_at)
 *       memoized callback results, kept across a delivery's retries.
 *
 * Every write runs in a savepoint of the current turn (all or nothing) and
 * ends by keeping the "fanout" participant of the agenda at the earliest
 * next_attempt_at and reconciling the object's alarm (agenda.h), in the same
 * transaction. Claims and dead-letter decisions go further: they commit the
 * turn before returning, because the caller is about to run code outside the
 * database (a target's callback, the dead-letter sink) and the decision must
 * survive whatever that code does.
 *
 * Functions return 0 (or a count, where said) or a negative EU_E* code;
 * eu_store_errmsg(s) then says why.
 */
#ifndef EUTAXY_FANOUT_H
#define EUTAXY_FANOUT_H

#include <stdint.h>

#include "buf.h"
#include "store.h"

#define EU_FANOUT_PARTICIPANT "fanout"

/* Creates or upgrades the tables (and the agenda's), in one savepoint of the
 * current turn. A database already current is left alone. */
int eu_fanout_migrate(eu_store *s);

/* One message of an enqueue. key and id are non-empty; payload is the body
 * as eu_clone_encode bytes (compared bytewise for deduplication). */
typedef struct eu_fanout_input {
  const char *key;
  const char *id;
  const char *payload;
  size_t len;
} eu_fanout_input;

/* What enqueue did with one input. */
typedef struct eu_fanout_enqueued {
  int fresh;              /* 1 registered now, 0 a duplicate of a pending manifest */
  char generation[37];    /* the manifest's generation (a UUID) */
  int64_t seq;
  int64_t created_at;
} eu_fanout_enqueued;

/* Draws the generation ids of new manifests (the world's PRNG). */
typedef uint64_t (*eu_fanout_random)(void *ud);

/* Enqueues n messages for ntargets sorted, distinct target names, in one
 * savepoint: a manifest and one delivery row per target for each new key,
 * due at first_at. A key whose pending manifest has the same id, payload
 * and targets is a duplicate and changes nothing. A key that identifies
 * different work refuses the whole batch: nothing is written, *conflict is
 * its index + 1, eu_store_errmsg says why, and the call still returns 0. */
int eu_fanout_enqueue(eu_store *s, const eu_fanout_input *in, int n,
                      const char *const *targets, int ntargets, int64_t now, int64_t first_at,
                      eu_fanout_random random, void *rud,
                      eu_fanout_enqueued *out, int *conflict);

/* A delivery as a claim gives it. Strings point into the caller's buffer and
 * stay valid until its next use; optional ones are NULL when absent. */
typedef struct eu_fanout_delivery {
  const char *id;             /* the row's id: ["key","target"] */
  const char *message_key;
  const char *message_id;
  const char *target;
  const char *generation;
  const char *payload;
  size_t len;
  const char *last_error;
  const char *last_error_name;
  const char *reason;         /* dead_letter_reason */
  int64_t seq;
  int64_t created_at;
  int64_t next_attempt_at;    /* claimed: the lease's end */
  int64_t dead_lettered_at;   /* 0 when not dead-lettered */
  int attempt;                /* claimed: this attempt, from 1; terminal: attempts made */
  int dead_letter;            /* the row is in the dead-letter phase */
  int terminal;               /* not claimed: its next step is the dead-letter one */
} eu_fanout_delivery;

typedef int (*eu_fanout_each)(void *ud, const eu_fanout_delivery *d);

/* The largest batch a claim takes. */
#define EU_FANOUT_MAX_BATCH 10000

/* Claims target's next batch at now: first deliveries in sequence order,
 * then due retries, at most max_batch in all. A claimed row's attempt is
 * counted and its next_attempt_at becomes now + lease_ms (an attempt that
 * never settles is retried when the lease ends); a row in the dead-letter
 * phase or out of attempts is returned as terminal, unclaimed. The claim is
 * committed (the turn ends; the next write begins another) before each is
 * called for every row, in order; each returns nonzero to stop and may
 * raise a Lua error. Returns how many rows it found, or <0. */
int eu_fanout_claim(eu_store *s, const char *target, int64_t now, int max_batch,
                    int max_attempts, int64_t lease_ms, eu_fanout_each each, void *ud,
                    eu_buf *buf);

/* Which attempt of which delivery settles: the compare-and-set key. A stale
 * ref (another generation, another attempt) changes nothing. */
typedef struct eu_fanout_ref {
  const char *id;
  const char *generation;
  int attempt;
} eu_fanout_ref;

/* Removes the delivery (ack, or the end of its dead-letter step when
 * dead_letter is set), its memos, and its share of the manifest, which goes
 * with its last delivery. 1 removed, 0 stale. */
int eu_fanout_remove(eu_store *s, const eu_fanout_ref *r, int dead_letter);
/* The same for n deliveries in one savepoint; removed[i] gets 1 or 0.
 * Returns how many were removed. */
int eu_fanout_remove_many(eu_store *s, const eu_fanout_ref *r, int n, int *removed);
/* Schedules the next attempt at next_at with the error that ended this one.
 * 1 done, 0 stale. */
int eu_fanout_retry(eu_store *s, const eu_fanout_ref *r, int64_t next_at, const char *error_name,
                    const char *error);
/* Moves the delivery into the dead-letter phase (reason "explicit" or
 * "exhausted", decided at at; a row already there keeps its first decision)
 * and makes it due again at retry_at in case the sink fails; commits the
 * turn. 1 done, 0 stale. */
int eu_fanout_dead_letter(eu_store *s, const eu_fanout_ref *r, const char *reason, int64_t at,
                          int64_t retry_at, const char *error_name, const char *error);
/* Moves every delivery of target due at now to until (a target that is no
 * longer configured keeps its work without keeping the alarm busy).
 * Returns how many. */
int eu_fanout_postpone(eu_store *s, const char *target, int64_t now, int64_t until);

/* Memos: 1 with the value's bytes in out (replacing what it held), or 0. */
int eu_fanout_memo_get(eu_store *s, const char *delivery_id, const char *generation,
                       const char *key, eu_buf *out);
/* 1 stored, 0 stale (the attempt no longer owns the delivery). */
int eu_fanout_memo_put(eu_store *s, const eu_fanout_ref *r, const char *key, const void *val,
                       size_t len, int64_t now);

/* Delivery rows not yet settled, O(1). */
int eu_fanout_pending(eu_store *s, int64_t *pending);
/* The earliest next_attempt_at; *has = 0 when nothing is pending. */
int eu_fanout_next_due(eu_store *s, int *has, int64_t *due);
/* Calls each(ud, target) for every target that has deliveries, in order
 * (one index probe per target, not a scan), after reading them all into
 * buf: each may raise. */
int eu_fanout_targets(eu_store *s, int (*each)(void *ud, const char *target), void *ud,
                      eu_buf *buf);

/* The default retry delay of an attempt that failed: eu_agenda_backoff. */
int64_t eu_fanout_backoff(int attempt, uint64_t random);

#endif
