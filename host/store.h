/*
 * store.h: one object's SQLite database.
 *
 * Owns the connection, the prepared-statement cache, the authorizer that
 * keeps user SQL away from transactions, from the pragmas that are the
 * host's, and from the host's own tables (named _eutaxy_* and eutaxy_*),
 * the object's limits on SQL memory, SQL time and database size, the gate
 * that shuts storage while the object is reset, the turn transaction, the
 * KV table and the alarm row. Knows nothing of isolates, scheduling or RPC:
 * the world decides when a turn begins and ends and what the limits are;
 * the store only holds to them.
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
/* As eu_store_open, running first (SQL with no bindings and no results)
 * before the store lays out its own tables, and then after them: how a
 * host sets the journal and its syncing before anything is written, and
 * adds its own tables. Either may be NULL. Both run again whenever a
 * parked store reopens its connection. flags: EU_STORE_LAZY_TABLES or 0. */
int eu_store_open_with(eu_store **out, const char *path, const char *first, const char *then,
                       unsigned flags, char *err, size_t errlen);
/* The store's own tables (the key-value pairs', the alarm's) are made by
 * the first write that needs each, not with the connection: a new
 * database holds none of them until then, and opening a file does not
 * compile their CREATE TABLE IF NOT EXISTS. Reading one that is not there
 * reads nothing. */
#define EU_STORE_LAZY_TABLES 1u
/* A store whose file, path, does not exist yet, so that making it costs
 * nothing until it must be durable: its database starts as img in memory,
 * and stays there until the host writes it out (eu_store_image) and says
 * so (eu_store_image_written). img is a whole database, as
 * sqlite3_serialize gives one, of a store opened with the same first,
 * then and flags: its tables and what first and then made are taken as there, and
 * they do not run (a WAL database's image is opened as a rollback one).
 * The store is meanwhile as any other, but cannot be parked. */
int eu_store_open_image(eu_store **out, const char *path, const unsigned char *img, size_t len,
                        const char *first, const char *then, unsigned flags, char *err, size_t errlen);
void eu_store_close(eu_store *s);
/* Whether the store's database is in memory, its file not yet written. */
int eu_store_in_memory(eu_store *s);
/* The in-memory database as committed: *p is SQLite's own memory, valid
 * until the store's next use. Refused while a transaction is open. */
int eu_store_image(eu_store *s, const unsigned char **p, size_t *len);
/* The image eu_store_image gave is now the store's file: the store lets
 * go of the in-memory database, and its next use opens the file, running
 * first and then as a parked store's reopening does. The connection that
 * held the database is *closing's, to close with eu_store_close_handed on
 * any thread: the store's statements are left in it, to be finalized
 * there rather than on the store's. Refused where eu_store_park is
 * (temporary tables, views or triggers, or a statement the store did not
 * prepare), the store staying in memory. */
int eu_store_image_written(eu_store *s, sqlite3 **closing);
/* Finalizes the statements left in a connection eu_store_image_written
 * handed over and closes it; NULL is nothing to close. */
void eu_store_close_handed(sqlite3 *db);
/* Replaces eu_store_open_with's then for the store's next reopenings. */
int eu_store_set_then(eu_store *s, const char *then);
/* The connection; NULL while the store is parked. */
sqlite3 *eu_store_db(eu_store *s);

/* Parking: a host with many stores keeps only some connections (and their
 * descriptors and memory) open. eu_store_park closes a file-backed store's
 * connection, keeping everything the store is (its limits, gate, alarm
 * flag, memory meter, the settings user SQL changed, wal hook); its next
 * use (any call that reaches SQLite) reopens it and runs eu_store_open_with's
 * SQL again, so the eu_store pointer stays valid throughout. Closing never
 * checkpoints: the WAL stays for the next opening. Refused (EU_EINVAL,
 * eu_store_errmsg says why; the store stays open) while a transaction or a
 * statement is open, for a store in memory or restored from an image, and
 * for one holding temporary tables, views or triggers, which would be lost.
 *
 * on_wake's fn runs before a parked store reopens (a host making room in
 * its budget of descriptors); reopening may still fail, which fails the
 * call that needed it with "cannot open PATH: ...". */
int eu_store_park(eu_store *s);
int eu_store_parked(eu_store *s);
void eu_store_on_wake(eu_store *s, void (*fn)(void *ud, eu_store *s), void *ud);
/* sqlite3_wal_hook's, kept across parks. */
typedef int (*eu_store_wal_fn)(void *ud, sqlite3 *db, const char *name, int pages);
void eu_store_wal_hook(eu_store *s, eu_store_wal_fn fn, void *ud);
/* The message of the last failure on s (SQLite's text where SQLite failed). */
const char *eu_store_errmsg(eu_store *s);
/* Records a failure of code on s that eu_store_errmsg will give (for the
 * engines built on the store: a bind SQLite refused, a misuse); returns code. */
int eu_store_error(eu_store *s, int code, const char *fmt, ...)
#if defined(__GNUC__)
  __attribute__((format(printf, 3, 4)))
#endif
  ;

/* An object's limits; zero fields hold nothing back.
 *
 * mem_limit bounds the bytes SQLite holds for the store (its statements,
 * sorts, strings and schema, not its page cache) plus *mem_also (the
 * isolate's live bytes) while user SQL runs: an allocation past it fails
 * the statement with "memory limit exceeded: the object may use N MiB, its
 * SQL included". eu_store_mem_ptr gives the store's live count for the
 * isolate to add to its own; it stays valid while the store is open.
 *
 * max_bytes bounds the database file (PRAGMA max_page_count, which user SQL
 * cannot change): a write past it fails with EU_EFULL and "the object's
 * storage is full: its database may hold N bytes (--max-object-bytes)". */
typedef struct eu_store_limits {
  size_t mem_limit;
  const size_t *mem_also;
  int64_t max_bytes;
} eu_store_limits;
int eu_store_set_limits(eu_store *s, const eu_store_limits *l);
const size_t *eu_store_mem_ptr(eu_store *s);
/* The clock and the random source of the store's SQL: 'now' in the date
 * and time functions (CURRENT_TIMESTAMP and a column's DEFAULT of it
 * included) is now_ms's, in ms since the Unix epoch, and random() and
 * randomblob() draw from random; ud goes to both. NULL for either, the
 * machine's. The clock holds for a database in memory; one in a file keeps
 * the machine's (eutaxy serve's, whose worlds keep the wall clock). A
 * world gives its own, so that one schedule's SQL writes the same rows in
 * every run of it, and takes them back when the store leaves it. */
void eu_store_set_sources(eu_store *s, int64_t (*now_ms)(void *ud), uint64_t (*random)(void *ud), void *ud);

/* The bytes of the store's count that are neither its statements nor its
 * schema: its journals, for the most part. Savepoints rolled back to and
 * kept (eu_store_checkpoint_back) leave journal SQLite does not take back
 * until the transaction ends, and an object's limit counts it. */
size_t eu_store_journal_bytes(eu_store *s);

/* The gate (open when the store opens). While it is closed every storage
 * call that user code reaches (sql:exec, KV, alarms, transactionSync, the
 * fanout and agenda functions) fails with "storage is not available: the
 * object is being reset", or with why when eu_store_gate_with gives one (a
 * literal or a string that outlives the closing). A world closes it while
 * it resets the object, so a __gc finalizer that runs then cannot write. */
void eu_store_gate(eu_store *s, int open);
void eu_store_gate_with(eu_store *s, int open, const char *why);
/* 1 when the gate is open; else 0, and eu_store_errmsg says why. */
int eu_store_available(eu_store *s);

/* Runs SQL with no bindings and no results, bypassing the authorizer:
 * schemas and rows the host itself sets up. */
int eu_store_exec_internal(eu_store *s, const char *sql);

/* User SQL, under the authorizer. eu_store_prepare runs every statement of
 * sql but the last (no bindings, rows discarded) and prepares the last one,
 * which stays the store's: it is cached by its text (64 statements, least
 * recently used evicted). Bind its parameters, step it with eu_store_step,
 * give it back with eu_store_reset; never finalize it. *out is NULL when sql
 * holds no statement. A statement abandoned mid-way (a Lua error unwound
 * past it) is reset at its next use or at the end of the turn. */
int eu_store_prepare(eu_store *s, const char *sql, size_t len, sqlite3_stmt **out);
/* 1 for a row, 0 when done, EU_ESQL (eu_store_errmsg says why) or EU_EFULL
 * (the database reached max_bytes, or the disk is full) on failure, after
 * which the statement has been reset.
 *
 * A statement may take 200,000,000 steps; each 4 bytes it allocates (in
 * functions such as hex() or group_concat(), which run long in few VM
 * steps) count as one more, so it stops at the same point in every run. */
int eu_store_step(eu_store *s, sqlite3_stmt *st);
void eu_store_reset(eu_store *s, sqlite3_stmt *st);

/* The host's own SQL beyond the store's (the durability engines' tables):
 * one statement, prepared outside the authorizer and kept by the store,
 * found again by its text. Bind it, step it with eu_store_internal_step
 * (also outside the authorizer: SQLite may recompile it), give it back with
 * eu_store_reset; never finalize it. It is valid until the store restores
 * an image or closes. Neither touches the turn: writers call eu_store_touch. */
int eu_store_internal_prepare(eu_store *s, const char *sql, sqlite3_stmt **out);
int eu_store_internal_step(eu_store *s, sqlite3_stmt *st);  /* as eu_store_step */

/* What the engines built on the store (fanout, agenda) read from their own
 * tables is checked as it is read: a row may still break their invariants
 * (a database written by an older eutaxy, a damaged file), and a bad value
 * must be that object's error, never a crash on a NULL or a loop. Column i
 * of st must be an integer within [lo, hi], or text; NULL only with
 * EU_COL_NULL. Else EU_ECORRUPT, with "ENGINE: a row of TABLE (ROW) breaks
 * its invariants: column NAME is ..." for eu_store_errmsg. */
#define EU_COL_NULL 1
int eu_store_check_int(eu_store *s, const char *engine, sqlite3_stmt *st, int i, int flags,
                       int64_t lo, int64_t hi, const char *table, const char *row);
int eu_store_check_text(eu_store *s, const char *engine, sqlite3_stmt *st, int i, int flags,
                        const char *table, const char *row);

/* Turn transaction. touch begins one if none is open. A commit (here,
 * eu_store_baseline_commit, eu_store_release) that SQLite refuses with
 * SQLITE_FULL returns EU_EFULL; the transaction is then rolled back whole
 * and the store goes on as if the turn had raised. */
int eu_store_touch(eu_store *s);
int eu_store_in_turn(eu_store *s);
/* Whether the open turn has changed anything so far: a row (user SQL, KV,
 * the alarm, the engines' tables) or, by a statement that is not
 * read-only, the schema. 0 outside a turn. A read-only turn commits
 * nothing a reader could see, so a checker need not look after it. */
int eu_store_turn_wrote(eu_store *s);
int eu_store_commit(eu_store *s);
int eu_store_rollback(eu_store *s);

/* Baseline mode, for the checker and for serve: begin opens an outer
 * transaction in which every turn is a savepoint (the first turn after a
 * checkpoint, below, ends on the checkpoint's own); end rolls back to where
 * begin was, keeping the
 * connection and its prepared statements. lost says SQLite ended the outer
 * transaction by itself (the store must then be opened afresh). */
int eu_store_baseline_begin(eu_store *s);
/* Prepares the host's statements of a baseline and its turns ahead, so
 * that a store opened on one thread does not parse them in its first
 * turns on another. */
int eu_store_prepare_turns(eu_store *s);
/* Checkpoints inside a run's transaction, for a checker that returns to a
 * state instead of running up to it again: eu_store_checkpoint marks the
 * database as it is (no turn may be open); eu_store_checkpoint_back(n)
 * returns it to the n-th latest mark and forgets those n marks, with the
 * alarm row (its dirty flag, and what the store knew of it) as it was
 * then; with keep, the n-th stays, as if made again just now. Either
 * fails once SQLite has ended the run's transaction by itself. */
int eu_store_checkpoint(eu_store *s);
int eu_store_checkpoint_back(eu_store *s, int n, int keep);
int eu_store_baseline_end(eu_store *s);
int eu_store_baseline_lost(eu_store *s);
/* When lost: the SQLite primary code (SQLITE_FULL, SQLITE_NOMEM,
 * SQLITE_INTERRUPT, SQLITE_IOERR, ...) of the failure after which SQLite
 * ended the transaction; 0 if not lost or not known. */
int eu_store_lost_code(eu_store *s);
/* Commits the outer transaction instead (a server batching the turns of
 * many requests into one commit); refused while a turn is open. On failure
 * everything since begin is rolled back. Either way baseline mode ends.
 * EU_EFULL when the commit, or a statement before it that made SQLite end
 * the whole transaction, met SQLITE_FULL: the batch is lost for want of
 * space, which is the object's failure, not the host's. */
int eu_store_baseline_commit(eu_store *s);
/* Whether begin has opened the outer transaction and nothing has ended it. */
int eu_store_in_baseline(eu_store *s);
/* Batching: the outer transaction is begun lazily, by the turn's first
 * touch, instead of by eu_store_baseline_begin; a server commits it with
 * eu_store_baseline_commit and the store is parkable until the next turn. */
void eu_store_batching(eu_store *s, int on);

/* Nested all-or-nothing unit inside a turn (transactionSync). */
int eu_store_savepoint(eu_store *s);
int eu_store_release(eu_store *s);
int eu_store_rollback_to(eu_store *s);   /* rolls back to and releases the savepoint */

/* The KV table: keys and values are bytes (lstore stores values as
 * eu_clone_encode output). Keys order bytewise. Each call touches the turn.
 * A value eu_store_kv_get gives stays valid until the next call on s. */
int eu_store_kv_get(eu_store *s, const char *key, size_t klen,
                    const void **val, size_t *vlen);  /* 1 found, 0 absent, <0 */
int eu_store_kv_put(eu_store *s, const char *key, size_t klen,
                    const void *val, size_t vlen);
int eu_store_kv_delete(eu_store *s, const char *key, size_t klen);  /* 1 removed, 0 absent, <0 */
int eu_store_kv_delete_all(eu_store *s);

typedef struct eu_kv_range {
  const char *lo; size_t lolen;  /* first key, inclusive; NULL: from the first key */
  const char *hi; size_t hilen;  /* end key, exclusive; NULL: to the last key */
  int64_t limit;                 /* < 0: no limit */
  int reverse;                   /* descending order (limit keeps the last keys) */
} eu_kv_range;
/* Calls each for every pair in the range, in order, until it returns
 * nonzero, which eu_store_kv_list then returns. each may raise a Lua error. */
typedef int (*eu_kv_each)(void *ud, const char *key, size_t klen,
                          const void *val, size_t vlen);
int eu_store_kv_list(eu_store *s, const eu_kv_range *r, eu_kv_each each, void *ud);

/* deleteAll, as Cloudflare's SQLite-backed objects have it (compatibility
 * date 2026-02-24 and later): every table, view and virtual table of the
 * database (with their indexes and triggers), the engines' tables
 * (eutaxy_*) included, every key-value pair and the alarm, all or nothing,
 * in the turn. The store's hidden tables (_eutaxy_*) stay, emptied of the
 * object's pairs and alarm. */
int eu_store_delete_all(eu_store *s);
/* The database's size in bytes, page_count * page_size, as the turn sees it. */
int eu_store_database_size(eu_store *s, int64_t *bytes);

/* The alarm row. has=0 when no alarm is set. retry is the retry count of a
 * failed alarm waiting for its next attempt (0 for an alarm set by user code).
 * set and delete touch the turn; get does not begin one (the host reads the
 * alarm between turns) but reads inside the turn when one is open. */
int eu_store_get_alarm(eu_store *s, int *has, int64_t *at, int *retry);
int eu_store_set_alarm(eu_store *s, int64_t at, int retry);
int eu_store_delete_alarm(eu_store *s);
/* Set by every set_alarm and delete_alarm (user code's or the host's) since
 * the flag was last cleared; a rollback does not clear it. */
int eu_store_alarm_dirty(eu_store *s);
void eu_store_clear_alarm_dirty(eu_store *s);

/* Whole-database image, for the checker to restore a run's starting state
 * fast (sqlite3_serialize / sqlite3_deserialize). snapshot is refused inside
 * a turn; *data is malloc'd, the caller frees it. restore rolls back an open
 * turn, then holds the image in memory (a file-backed store stops using its
 * file). */
int eu_store_snapshot(eu_store *s, unsigned char **data, size_t *len);
int eu_store_restore(eu_store *s, const unsigned char *data, size_t len);

#endif
