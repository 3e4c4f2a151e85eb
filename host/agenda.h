/*
 * agenda.h: the object's one alarm, shared (DESIGN.md: "the scheduler").
 *
 * An object has one alarm; fanout, named alarms and durable operations each
 * want to be woken at their own times. Each of them (a *participant*) keeps
 * its next due time in the agenda table of the object's database, and the
 * agenda keeps the object's alarm at the earliest of them. Reconciling is
 * done in the same transaction as the work that changed the times, so the
 * alarm can never point past pending work.
 *
 * Tables (created by eu_agenda_migrate, versioned in eutaxy_migrations):
 *   eutaxy_agenda(participant TEXT, key TEXT, due INTEGER, PRIMARY KEY (participant, key))
 *   eutaxy_alarms(name TEXT PRIMARY KEY, due INTEGER, payload BLOB, created_at INTEGER)
 *   eutaxy_durable_ops(id TEXT PRIMARY KEY, handler TEXT, payload BLOB, status TEXT,
 *                      attempt INTEGER, next_attempt_at INTEGER, result BLOB,
 *                      last_error TEXT, created_at INTEGER, settled_at INTEGER)
 *   eutaxy_migrations(capability TEXT PRIMARY KEY, version INTEGER)
 * The names carry no leading underscore: invariants read them.
 * Beyond those columns, eutaxy_alarms keeps scheduled_at (the time asked
 * for; due moves on retries), attempt, max_attempts, generation (which
 * scheduling of the name it is) and last_error; eutaxy_durable_ops keeps
 * max_attempts.
 *
 * Named alarms and durable operations are the two participants this file
 * runs itself ("alarms" and "durable", key ""); fanout is another
 * (fanout.c). The functions below that change due times keep their
 * participant's agenda row and the object's alarm up to date in the same
 * transaction.
 *
 * An attempt is *claimed* (taken) before its handler runs: the attempt is
 * counted and the item's due time moved to when a retry would come, so an
 * attempt that never settles (the object was reset, the invocation died) is
 * retried, and after max_attempts given up. Settling compares the attempt
 * (and an alarm's generation), so a stale attempt never settles a newer one.
 */
#ifndef EUTAXY_AGENDA_H
#define EUTAXY_AGENDA_H

#include <stdint.h>

#include "buf.h"
#include "store.h"

/* Applies the capability's migrations up to the newest, in one transaction;
 * a database already at that version is left alone. */
int eu_agenda_migrate(eu_store *s);

/* A participant's next due time (ms since 1970), or none (eu_agenda_clear). */
int eu_agenda_set(eu_store *s, const char *participant, const char *key, int64_t due);
int eu_agenda_clear(eu_store *s, const char *participant, const char *key);
/* The earliest due time of every participant; *has = 0 when nothing is pending. */
int eu_agenda_next(eu_store *s, int *has, int64_t *due);
/* Sets (or deletes) the object's alarm to eu_agenda_next, in the current turn. */
int eu_agenda_reconcile(eu_store *s);
/* Calls each(ud, participant, due) for every participant with work due at
 * or before t (due is its earliest), in participant order, until each
 * returns nonzero, which is then returned. each must not use s. */
typedef int (*eu_agenda_each_due)(void *ud, const char *participant, int64_t due);
int eu_agenda_due(eu_store *s, int64_t t, eu_agenda_each_due each, void *ud);

/* Applies a capability's migrations: steps[i] takes it from version i to
 * i + 1 (SQL run outside the authorizer). In one savepoint of the current
 * turn; the versions already applied are skipped. For every engine that
 * keeps tables in the object's database (eu_agenda_migrate is the agenda's;
 * the alarms' and durable operations' run through eu_alarms_migrate and
 * eu_durable_migrate). */
int eu_agenda_migrate_capability(eu_store *s, const char *capability,
                                 const char *const *steps, int nsteps);
/* The version a capability is at (0: none applied). */
int eu_agenda_version(eu_store *s, const char *capability, int *version);

/* The retry policy the engines share. An attempt that failed waits
 * min(1000 * 2^(attempt-1), 300000) ms, less up to a fifth of it drawn
 * from random (the world's PRNG), so retries spread but never come early
 * by more than that. */
#define EU_AGENDA_MAX_ATTEMPTS 5
#define EU_AGENDA_MAX_DELAY_MS 300000
int64_t eu_agenda_backoff(int attempt, uint64_t random);

/* An alarm or operation as taken or listed. Strings and payload point into
 * the buffer the caller gave, valid until its next use. */
typedef struct eu_agenda_item {
  const char *key;          /* the alarm's name or the operation's id */
  const char *handler;      /* operations: the handler's name; alarms: NULL */
  const char *payload;      /* an encoded value (eu_clone_encode), or NULL */
  size_t len;
  const char *last_error;   /* the previous attempt's error, or NULL */
  int64_t due;              /* when it is (or was) due */
  int64_t scheduled_at;     /* alarms: the time asked for; operations: registration */
  int64_t generation;       /* alarms: which scheduling of the name */
  int attempt;              /* taken: this attempt, from 1; listed: attempts made */
  int max_attempts;
  int exhausted;            /* taken: its last attempt never settled; it is given up, do not run it */
} eu_agenda_item;

typedef int (*eu_agenda_each)(void *ud, const eu_agenda_item *it);

/* What settling an attempt did. */
enum {
  EU_SETTLE_STALE = 0,   /* the attempt is not the item's current one: nothing changed */
  EU_SETTLE_DONE = 1,    /* succeeded: an alarm is gone, an operation keeps its result */
  EU_SETTLE_RETRY = 2,   /* failed: retried at now + delay */
  EU_SETTLE_FAILED = 3   /* failed with no attempt left: an alarm is dropped, an operation failed */
};

/* Named alarms. schedule replaces the name's pending occurrence (a new
 * generation, attempts from 0); max_attempts <= 0 means the default. */
int eu_alarms_migrate(eu_store *s);
int eu_alarms_schedule(eu_store *s, const char *name, int64_t due, const void *payload,
                       size_t len, int max_attempts, int64_t generation, int64_t now);
int eu_alarms_cancel(eu_store *s, const char *name);  /* 1 removed, 0 none pending, <0 */
/* Pending alarms by due time then name. each must not use s; nonzero stops. */
int eu_alarms_list(eu_store *s, eu_agenda_each each, void *ud, eu_buf *buf);
/* Claims the earliest alarm due at now: 1 and *it, or 0 when none is due.
 * random draws its lease (eu_agenda_backoff). */
int eu_alarms_take(eu_store *s, int64_t now, uint64_t random, eu_agenda_item *it, eu_buf *buf);
/* error NULL: the attempt succeeded. Otherwise it is retried at now + delay
 * while attempts are left. Returns an EU_SETTLE_* outcome or <0. */
int eu_alarms_settle(eu_store *s, const char *name, int64_t generation, int attempt,
                     const char *error, int64_t now, int64_t delay);

/* Durable operations: status 'pending', 'done' or 'failed'. */
int eu_durable_migrate(eu_store *s);
/* 1 registered (due now), 0 already registered with the same handler and
 * payload (nothing changes), 2 the id is taken by another handler, 3 by
 * the same handler with another payload. */
int eu_durable_register(eu_store *s, const char *id, const char *handler, const void *payload,
                        size_t len, int max_attempts, int64_t now);
int eu_durable_take(eu_store *s, int64_t now, uint64_t random, eu_agenda_item *it, eu_buf *buf);
/* error NULL: done, with result (an encoded value, or NULL for none). */
int eu_durable_settle(eu_store *s, const char *id, int attempt, const void *result, size_t rlen,
                      const char *error, int64_t now, int64_t delay);

typedef struct eu_durable_state {
  const char *status;       /* "pending", "done", "failed" */
  const char *result;       /* done: the encoded result, or NULL */
  size_t rlen;
  const char *error;        /* the last error, or NULL */
  int attempts;
  int64_t created_at, settled_at;  /* settled_at 0 while pending */
} eu_durable_state;
/* 1 and *st, or 0 for an id never registered. */
int eu_durable_get(eu_store *s, const char *id, eu_durable_state *st, eu_buf *buf);

#endif
