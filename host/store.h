/*
 * store.h: one object's SQLite database.
 *
 * Owns the connection, the prepared-statement cache, the authorizer that
 * keeps user SQL away from transactions and from the host's own tables
 * (named _eutaxy_*), the turn transaction, the KV table and the alarm row.
 * Knows nothing of isolates, scheduling or RPC: the world decides when a
 * turn begins and ends; the store only does it.
 *
 * The turn transaction is begun lazily by the first storage call of a turn
 * (eu_store_touch) and ended by the world with eu_store_commit or
 * eu_store_rollback at the turn's end.
 */
#ifndef EUTAXY_STORE_H
#define EUTAXY_STORE_H

#include <stdint.h>
#include <sqlite3.h>
#include "buf.h"

typedef struct eu_store eu_store;

/* path NULL opens a private in-memory database. */
int eu_store_open(eu_store **out, const char *path, char *err, size_t errlen);
void eu_store_close(eu_store *s);
sqlite3 *eu_store_db(eu_store *s);
/* The message of the last failure on s (SQLite's text where SQLite failed). */
const char *eu_store_errmsg(eu_store *s);

/* Runs SQL with no bindings and no results, bypassing the authorizer:
 * schemas and rows the host itself sets up. */
int eu_store_exec_internal(eu_store *s, const char *sql);

/* Turn transaction. touch begins one if none is open. */
int eu_store_touch(eu_store *s);
int eu_store_in_turn(eu_store *s);
int eu_store_commit(eu_store *s);
int eu_store_rollback(eu_store *s);

/* Nested all-or-nothing unit inside a turn (transactionSync). */
int eu_store_savepoint(eu_store *s);
int eu_store_release(eu_store *s);
int eu_store_rollback_to(eu_store *s);   /* rolls back to and releases the savepoint */

/* The alarm row. has=0 when no alarm is set. retry is the retry count of a
 * failed alarm waiting for its next attempt (0 for an alarm set by user code). */
int eu_store_get_alarm(eu_store *s, int *has, int64_t *at, int *retry);
int eu_store_set_alarm(eu_store *s, int64_t at, int retry);
int eu_store_delete_alarm(eu_store *s);
/* Set whenever user code wrote the alarm since the flag was last cleared. */
int eu_store_alarm_dirty(eu_store *s);
void eu_store_clear_alarm_dirty(eu_store *s);

/* Whole-database image, for the checker to restore a run's starting state
 * fast (sqlite3_serialize / sqlite3_deserialize). */
int eu_store_snapshot(eu_store *s, unsigned char **data, size_t *len);
int eu_store_restore(eu_store *s, const unsigned char *data, size_t len);

#endif
