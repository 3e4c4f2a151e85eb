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
 */
#ifndef EUTAXY_AGENDA_H
#define EUTAXY_AGENDA_H

#include <stdint.h>

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

#endif
