/*
 * store.c: one object's SQLite database (see store.h).
 *
 * Owns the connection and everything prepared on it: the cache of user
 * statements, the host's own statements (transaction control, KV, alarm),
 * the authorizer and the savepoint depth. Must not know about Lua: lstore.c
 * turns these calls into the storage API.
 *
 * User SQL is policed by SQLite's authorizer, not by looking at its text:
 * SQLite tells the authorizer what a statement does when it compiles it, and
 * again whenever it recompiles a cached statement after a schema change. The
 * authorizer lets the host's own statements through (s->internal, set only
 * around them), but only what they do themselves: an access SQLite reports
 * from inside a trigger or a view is the user's, whoever fired it, and is
 * judged by the user's rules. When it refuses, it writes why, so the user
 * reads that reason instead of SQLite's bare "not authorized". The one thing
 * the authorizer is not told is the new name of ALTER TABLE ... RENAME TO:
 * that one is read from the statement's text (alter_new_name).
 *
 * Limits. SQLite's memory is counted per store (sqlmem.c): the store's
 * meter is current on its thread around every SQLite call it makes, and
 * refuses past the object's limit while user SQL runs. The same meter adds
 * up what a user statement allocates, which is charged as steps (see
 * EU_STORE_BYTES_PER_STEP). The database's size is bounded with
 * max_page_count, which only the host sets (user pragmas are an allowlist).
 *
 * The clock and the random source. SQLite reads 'now' (date('now'),
 * CURRENT_TIMESTAMP, a column's DEFAULT of it) from its VFS, and random()
 * and randomblob() from a PRNG of the process seeded from /dev/urandom: two
 * runs of one schedule would write different rows. A database in memory
 * opens on a VFS that is the default one but for the time, which it takes
 * from the clock of the store current on the thread (ENTER), and every
 * connection has random() and randomblob() of its own, which draw from the
 * store's source; a store without sources (eu_store_set_sources) reads
 * the machine's clock and SQLite's PRNG, as SQLite would.
 *
 * A statement can be left half-stepped when a Lua error unwinds past its
 * user (a memory error while building a result). Nothing here depends on a
 * statement being reset by whoever used it: every statement is reset before
 * it is used, and every busy one before the turn ends.
 */
#include <assert.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "eutaxy.h"
#include "faultsim.h"
#include "sqlmem.h"
#include "store.h"

#define EU_STMT_CACHE 64

/* SQLite VM steps one step of a user statement may take. The isolate's CPU
 * limit counts Lua instructions and cannot see inside SQLite: without this
 * a runaway query (a recursive CTE without LIMIT) hangs its object and the
 * world. The progress handler counts while eu_store_step runs, so the
 * host's own statements are never stopped. */
#define EU_STORE_MAX_STEPS 200000000LL
#define EU_STORE_STEP_CHECK 10000
/* VM steps do not see the work a function does inside one step:
 * hex(zeroblob(1000000)) over 20,000 rows ran 44 s in few steps. What such
 * work allocates is charged instead, one step per 4 bytes (hex() writes
 * about 1.4 bytes a nanosecond, a VM step takes a few), so the same
 * statement always stops at the same point. */
#define EU_STORE_BYTES_PER_STEP 4

/* The longest string, BLOB or row (Cloudflare's limit): fanout payloads
 * and KV values are encoded values well below it. */
#define EU_STORE_MAX_LENGTH 2000000

/* The host's own statements, prepared once (on first use) and kept. One
 * savepoint name serves every depth: RELEASE and ROLLBACK TO act on the most
 * recent savepoint of that name, which is the innermost. */
enum {
  IS_BEGIN, IS_COMMIT, IS_ROLLBACK,
  IS_SAVEPOINT, IS_RELEASE, IS_ROLLBACK_TO,
  IS_TURN_BEGIN, IS_TURN_RELEASE, IS_TURN_ROLLBACK,
  IS_CK_BEGIN, IS_CK_RELEASE, IS_CK_ROLLBACK,
  IS_ALARM_GET, IS_ALARM_SET, IS_ALARM_DEL,
  IS_KV_GET, IS_KV_PUT, IS_KV_DEL, IS_KV_DEL_ALL, IS_KV_LIST, IS_KV_LIST_REV,
  IS_FK_DEFERRED, IS_FK_DEFER, IS_FK_UNDEFER, IS_PAGE_COUNT, IS_PAGE_SIZE,
  IS_COUNT
};

/* The KV range uses a zero-length BLOB as "no upper bound": every TEXT key
 * sorts before every BLOB, and the bound keeps the primary-key range scan. */
static const char *const eu_isql[IS_COUNT] = {
  "BEGIN DEFERRED",
  "COMMIT",
  "ROLLBACK",
  "SAVEPOINT eu_sp",
  "RELEASE eu_sp",
  "ROLLBACK TO eu_sp",
  "SAVEPOINT eu_turn",
  "RELEASE eu_turn",
  "ROLLBACK TO eu_turn",
  "SAVEPOINT eu_ck",
  "RELEASE eu_ck",
  "ROLLBACK TO eu_ck",
  "SELECT at, retry FROM _eutaxy_alarm WHERE id = 1",
  "INSERT OR REPLACE INTO _eutaxy_alarm(id, at, retry) VALUES (1, ?1, ?2)",
  "DELETE FROM _eutaxy_alarm",
  "SELECT value FROM _eutaxy_kv WHERE key = ?1",
  "INSERT OR REPLACE INTO _eutaxy_kv(key, value) VALUES (?1, ?2)",
  "DELETE FROM _eutaxy_kv WHERE key = ?1",
  "DELETE FROM _eutaxy_kv",
  "SELECT key, value FROM _eutaxy_kv WHERE key >= ?1 AND key < ?2 ORDER BY key LIMIT ?3",
  "SELECT key, value FROM _eutaxy_kv WHERE key >= ?1 AND key < ?2 ORDER BY key DESC LIMIT ?3",
  "PRAGMA defer_foreign_keys",
  "PRAGMA defer_foreign_keys = ON",
  "PRAGMA defer_foreign_keys = OFF",
  "PRAGMA page_count",
  "PRAGMA page_size",
};

#define EU_KV "_eutaxy_kv"
#define EU_ALARM "_eutaxy_alarm"
#define EU_KV_TABLE \
  "CREATE TABLE IF NOT EXISTS " EU_KV "(" \
  "  key TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;"
#define EU_ALARM_TABLE \
  "CREATE TABLE IF NOT EXISTS " EU_ALARM "(" \
  "  id INTEGER PRIMARY KEY CHECK (id = 1), at INTEGER NOT NULL," \
  "  retry INTEGER NOT NULL DEFAULT 0);"
static const char eu_schema[] = EU_KV_TABLE EU_ALARM_TABLE;

typedef struct eu_cached {
  char *sql;           /* the key: the text from the statement to the end of the query */
  size_t len;
  uint64_t hash;
  const char *seen;    /* where that text was at its last use: the caller's string, most often the same */
  uint64_t used;       /* s->tick at the last use, for least-recently-used eviction */
  sqlite3_stmt *st;
} eu_cached;

struct eu_store {
  sqlite3 *db;
  int64_t (*now_ms)(void *ud);  /* the SQL's clock (eu_store_set_sources), or NULL */
  uint64_t (*random)(void *ud);
  void *src_ud;
  int internal;        /* the authorizer lets everything through */
  int denied;          /* the authorizer refused since the last prepare or step */
  int depth;           /* open savepoints */
  int baseline;        /* a run's outer transaction is open: turns are savepoints in it */
  int lost_code;       /* the failure after which SQLite ended that transaction itself, or 0 */
  char lost_msg[256];  /* and its message */
  int txn_open;        /* outside baseline mode: touch began the turn's transaction */
  int turn;            /* in baseline mode: a turn's savepoint is open */
  /* In baseline mode: the database is as its innermost checkpoint's
   * savepoint began (nothing written since it began, or since a rollback to
   * it), so a turn can end on that savepoint rather than open its own
   * (turn_on_ck): its writes join the checkpoint's as a released turn
   * savepoint's would, and ROLLBACK TO the checkpoint undoes just them. */
  int ck_fresh;
  int turn_on_ck;
  int alarm_dirty;
  /* Whether a statement may be mid-way (stepped to a row and neither
   * stepped to its end nor reset): 0 none, 1 at most row_of, 2 maybe
   * more. row_of is only compared, never used: it may be finalized. */
  int rows_open;
  const sqlite3_stmt *row_of;
  /* The alarm row as the host last read or wrote it, while alarm_known: it
   * changes only by the host's own statements (user SQL cannot reach
   * _eutaxy_alarm), so anything else that can change it forgets it
   * (forget_alarm): a rollback, a failure SQLite may end a transaction
   * on, a reopened or restored database, the host's other SQL. */
  int alarm_known, alarm_has, alarm_retry;
  int64_t alarm_at;
  /* In baseline mode, the alarm row as each open checkpoint's savepoint
   * began, oldest first: its dirty flag and what was known of it. A
   * return to a checkpoint brings them back. */
  struct ck_alarm { int dirty, known, has, retry; int64_t at; } *ck_alarm;
  int nck_alarm, ck_alarm_cap;
  sqlite3_int64 turn_changes;  /* sqlite3_total_changes64 when the turn began */
  int turn_writer;     /* the turn ran a user statement that is not read-only (DDL changes no row) */
  uint64_t tick;
  int ncache;
  sqlite3_stmt *is[IS_COUNT];
  eu_cached cache[EU_STMT_CACHE];
  eu_cached *ext;      /* the engines' statements (eu_store_internal_prepare) */
  int next, extcap;
  char deny[512];      /* why the authorizer refused */
  char errmsg[EU_ERRLEN];
  int stepping;        /* eu_store_step is running a user statement */
  long long steps;     /* its VM steps so far */
  int over_steps;      /* it ran past EU_STORE_MAX_STEPS, allocations counted */
  const char *text;    /* the user statement being compiled, for alter_new_name */
  size_t textlen;
  sqlite3_stmt *text_of;  /* or the one stepping, whose text is read when asked for */
  eu_sqlmem *mem;      /* SQLite's bytes for this store (sqlmem.h) */
  eu_store_limits lim;
  int file;            /* backed by a file (not in memory) */
  int in_memory;       /* its file's database, in memory until written (eu_store_open_image) */
  const char *closed;  /* the gate is closed: why; NULL when open */
  /* Parking (eu_store_park): what reopening the connection needs */
  char *path;          /* the file; NULL in memory or once an image is restored */
  char *first, *then;  /* the host's SQL around the store's own tables (eu_store_open_with) */
  int parked;          /* the connection is closed; the next use reopens it */
  int sticky;          /* user SQL made temporary tables, views or triggers, which a reopen loses */
  /* The store's own tables (_eutaxy_kv, _eutaxy_alarm) are made by the
   * first write that needs each (EU_STORE_LAZY_TABLES), so a reader asks
   * SQLite whether they are there: a rollback may take one away. 0: made
   * with the connection, outside any transaction, so always there. */
  int lazy;
  int set_settings;    /* user SQL set one of eu_settings: park reads them back */
  int settings;        /* their values at the last park, a bit each */
  int batching;        /* a touch outside a batch begins one (eu_store_batching) */
  eu_store_wal_fn wal_fn;
  void *wal_ud;
  void (*wake_fn)(void *ud, eu_store *s);
  void *wake_ud;
};

/* The cost of the user statement so far, in steps. */
static long long cost(eu_store *s) {
  return s->steps + (long long)(s->mem->charged / EU_STORE_BYTES_PER_STEP);
}

static int on_progress(void *ud) {
  eu_store *s = ud;
  if (!s->stepping) return 0;
  s->steps += EU_STORE_STEP_CHECK;
  /* What the allocator may still charge before the limit: it refuses past
   * that, so one huge allocation between two checks is stopped too. */
  s->mem->charge_max = s->steps >= EU_STORE_MAX_STEPS ? 0
    : (uint64_t)(EU_STORE_MAX_STEPS - s->steps) * EU_STORE_BYTES_PER_STEP;
  if (cost(s) <= EU_STORE_MAX_STEPS) return 0;
  s->over_steps = 1;
  return 1;  /* nonzero interrupts the statement */
}

/* The store whose clock is SQLite's on this thread, while it runs a call. */
static _Thread_local eu_store *clock_of;

static eu_store *enter_clock(eu_store *s) {
  eu_store *prev = clock_of;
  clock_of = s;
  return prev;
}

/* SQLite calls under the store's meter and clock: each public entry that
 * reaches SQLite brackets its calls with these. */
#define ENTER(s) eu_sqlmem *prev_mem_ = eu_sqlmem_enter((s)->mem); eu_store *prev_clock_ = enter_clock(s)
#define LEAVE() (eu_sqlmem_leave(prev_mem_), (void)(clock_of = prev_clock_))

/* The VFS of databases in memory: the default VFS's own methods (they take
 * what they need from the struct, which is a copy), but for the time. The
 * Julian day of the Unix epoch, in ms: 2440587.5 days. */
#define UNIX_EPOCH_JD_MS 210866760000000LL

static sqlite3_vfs clock_vfs;
static sqlite3_vfs *clock_base;
static pthread_once_t clock_once = PTHREAD_ONCE_INIT;

static int clock_now64(sqlite3_vfs *v, sqlite3_int64 *t) {
  eu_store *s = clock_of;
  (void)v;
  if (!s || !s->now_ms) return clock_base->xCurrentTimeInt64(clock_base, t);
  *t = UNIX_EPOCH_JD_MS + s->now_ms(s->src_ud);
  return SQLITE_OK;
}

static int clock_now(sqlite3_vfs *v, double *t) {
  sqlite3_int64 ms;
  int rc = clock_now64(v, &ms);
  *t = (double)ms / 86400000.0;
  return rc;
}

static void install_clock(void) {
  sqlite3_vfs *base = sqlite3_vfs_find(NULL);
  if (!base || base->iVersion < 2 || !base->xCurrentTimeInt64) return;
  clock_vfs = *base;
  clock_vfs.pNext = NULL;
  clock_vfs.zName = "eutaxy-clock";
  clock_vfs.xCurrentTime = clock_now;
  clock_vfs.xCurrentTimeInt64 = clock_now64;
  clock_base = base;
  if (sqlite3_vfs_register(&clock_vfs, 0) != SQLITE_OK) clock_base = NULL;
}

/* The VFS a database in memory opens on: the clock's, once installed. */
static const char *memory_vfs(void) {
  pthread_once(&clock_once, install_clock);
  return clock_base ? clock_vfs.zName : NULL;
}

/* 64 bits of the store's source, or of SQLite's PRNG when it has none. */
static uint64_t draw(eu_store *s) {
  uint64_t r;
  if (s->random) return s->random(s->src_ud);
  sqlite3_randomness((int)sizeof r, &r);
  return r;
}

/* random(): 64 random bits. */
static void sql_random(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  (void)argv;
  sqlite3_result_int64(ctx, (sqlite3_int64)draw(sqlite3_user_data(ctx)));
}

/* randomblob(N): N bytes of it, one when N is less than 1, as SQLite's. */
static void sql_randomblob(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  eu_store *s = sqlite3_user_data(ctx);
  sqlite3_int64 n = sqlite3_value_int64(argv[0]), i;
  unsigned char *b;
  (void)argc;
  if (n < 1) n = 1;
  if (n > sqlite3_limit(sqlite3_context_db_handle(ctx), SQLITE_LIMIT_LENGTH, -1)) {
    sqlite3_result_error_toobig(ctx);
    return;
  }
  if (!(b = sqlite3_malloc64((sqlite3_uint64)n))) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  for (i = 0; i < n; i += 8) {
    uint64_t r = draw(s);
    memcpy(b + i, &r, n - i < 8 ? (size_t)(n - i) : 8);
  }
  sqlite3_result_blob64(ctx, b, (sqlite3_uint64)n, sqlite3_free);
}

/* random() and randomblob() drawing from the store's source, made once a
 * connection: making or dropping a function expires every statement
 * prepared on it. */
static int link_random(eu_store *s) {
  int rc = sqlite3_create_function_v2(s->db, "random", 0, SQLITE_UTF8, s, sql_random, NULL, NULL, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_create_function_v2(s->db, "randomblob", 1, SQLITE_UTF8, s, sql_randomblob, NULL, NULL, NULL);
  return rc;
}

/* Error messages */

static const struct { int code; const char *name; } eu_codes[] = {
  /* extended codes first, so the most precise name wins */
  { SQLITE_CONSTRAINT_CHECK, "SQLITE_CONSTRAINT_CHECK" },
  { SQLITE_CONSTRAINT_FOREIGNKEY, "SQLITE_CONSTRAINT_FOREIGNKEY" },
  { SQLITE_CONSTRAINT_NOTNULL, "SQLITE_CONSTRAINT_NOTNULL" },
  { SQLITE_CONSTRAINT_PRIMARYKEY, "SQLITE_CONSTRAINT_PRIMARYKEY" },
  { SQLITE_CONSTRAINT_UNIQUE, "SQLITE_CONSTRAINT_UNIQUE" },
  { SQLITE_CONSTRAINT_TRIGGER, "SQLITE_CONSTRAINT_TRIGGER" },
  { SQLITE_CONSTRAINT_DATATYPE, "SQLITE_CONSTRAINT_DATATYPE" },
  { SQLITE_CONSTRAINT_ROWID, "SQLITE_CONSTRAINT_ROWID" },
  { SQLITE_ERROR_MISSING_COLLSEQ, "SQLITE_ERROR_MISSING_COLLSEQ" },
  { SQLITE_READONLY_DBMOVED, "SQLITE_READONLY_DBMOVED" },
  { SQLITE_ABORT_ROLLBACK, "SQLITE_ABORT_ROLLBACK" },
  { SQLITE_ERROR, "SQLITE_ERROR" },
  { SQLITE_INTERNAL, "SQLITE_INTERNAL" },
  { SQLITE_PERM, "SQLITE_PERM" },
  { SQLITE_ABORT, "SQLITE_ABORT" },
  { SQLITE_BUSY, "SQLITE_BUSY" },
  { SQLITE_LOCKED, "SQLITE_LOCKED" },
  { SQLITE_NOMEM, "SQLITE_NOMEM" },
  { SQLITE_READONLY, "SQLITE_READONLY" },
  { SQLITE_INTERRUPT, "SQLITE_INTERRUPT" },
  { SQLITE_IOERR, "SQLITE_IOERR" },
  { SQLITE_CORRUPT, "SQLITE_CORRUPT" },
  { SQLITE_NOTFOUND, "SQLITE_NOTFOUND" },
  { SQLITE_FULL, "SQLITE_FULL" },
  { SQLITE_CANTOPEN, "SQLITE_CANTOPEN" },
  { SQLITE_PROTOCOL, "SQLITE_PROTOCOL" },
  { SQLITE_SCHEMA, "SQLITE_SCHEMA" },
  { SQLITE_TOOBIG, "SQLITE_TOOBIG" },
  { SQLITE_CONSTRAINT, "SQLITE_CONSTRAINT" },
  { SQLITE_MISMATCH, "SQLITE_MISMATCH" },
  { SQLITE_MISUSE, "SQLITE_MISUSE" },
  { SQLITE_AUTH, "SQLITE_AUTH" },
  { SQLITE_RANGE, "SQLITE_RANGE" },
  { SQLITE_NOTADB, "SQLITE_NOTADB" },
};

static const char *code_name(int rc) {
  size_t i;
  for (i = 0; i < sizeof eu_codes / sizeof eu_codes[0]; i++)
    if (eu_codes[i].code == rc) return eu_codes[i].name;
  for (i = 0; i < sizeof eu_codes / sizeof eu_codes[0]; i++)
    if (eu_codes[i].code == (rc & 0xff)) return eu_codes[i].name;
  return "SQLITE_ERROR";
}

static int full(eu_store *s);

/* Records why SQLite failed with rc: the authorizer's reason if it was the
 * one refusing, else SQLite's own message and the code's name. */
/* After SQLITE_FULL, NOMEM, INTERRUPT or IOERR in a statement that writes
 * and has no statement journal, SQLite ends the whole transaction, not the
 * statement alone: in baseline mode every turn since begin is then lost,
 * and what lost them decides whose failure that is (eu_store_lost_code). */
static void forget_alarm(eu_store *s) { s->alarm_known = 0; }

static void know_alarm(eu_store *s, int has, int64_t at, int retry) {
  s->alarm_known = 1;
  s->alarm_has = has;
  s->alarm_at = at;
  s->alarm_retry = retry;
}

/* What was known of the alarm row as the innermost open checkpoint began,
 * after a rollback to it. */
static void recall_alarm(eu_store *s) {
  const struct ck_alarm *a = s->nck_alarm > 0 ? &s->ck_alarm[s->nck_alarm - 1] : NULL;
  if (a && a->known) know_alarm(s, a->has, a->at, a->retry);
  else forget_alarm(s);
}

static int fail(eu_store *s, int code, const char *msg);

/* Keeps the alarm row as a new checkpoint begins. */
static int keep_ck_alarm(eu_store *s) {
  struct ck_alarm *a = s->ck_alarm;
  if (s->nck_alarm == s->ck_alarm_cap) {
    int cap = s->ck_alarm_cap ? s->ck_alarm_cap * 2 : 16;
    if (!(a = realloc(s->ck_alarm, (size_t)cap * sizeof *a))) return fail(s, EU_ENOMEM, "out of memory");
    s->ck_alarm = a;
    s->ck_alarm_cap = cap;
  }
  a[s->nck_alarm].dirty = s->alarm_dirty;
  a[s->nck_alarm].known = s->alarm_known;
  a[s->nck_alarm].has = s->alarm_has;
  a[s->nck_alarm].at = s->alarm_at;
  a[s->nck_alarm].retry = s->alarm_retry;
  s->nck_alarm++;
  return EU_OK;
}

static void note_lost(eu_store *s, int rc) {
  forget_alarm(s);
  if (s->baseline && !s->lost_code && sqlite3_get_autocommit(s->db)) {
    s->lost_code = rc & 0xff;
    snprintf(s->lost_msg, sizeof s->lost_msg, "%.250s", s->errmsg);
  }
}

static int describe_sql(eu_store *s, int rc);

static int fail_sql(eu_store *s, int rc) {
  int code = describe_sql(s, rc);
  note_lost(s, rc);
  return code;
}

/* Writes the message of a failure rc of SQLite's; returns the host's code. */
static int describe_sql(eu_store *s, int rc) {
  if ((rc & 0xff) == SQLITE_NOMEM && s->mem->refused) {
    /* The object's limit, not the machine's: no note for the checker. */
    s->mem->refused = 0;
    snprintf(s->errmsg, sizeof s->errmsg,
             "memory limit exceeded: the object may use %zu MiB, its SQL included",
             s->lim.mem_limit >> 20);
    return EU_ESQL;
  }
  if ((rc & 0xff) == SQLITE_FULL) return full(s);
  if (rc == SQLITE_NOMEM) {
    eu_faultsim_note_oom();  /* the machine's failure: a checker run cannot rest on it */
    snprintf(s->errmsg, sizeof s->errmsg, "out of memory (SQLITE_NOMEM)");
    return EU_ENOMEM;
  }
  /* denied is cleared before each prepare and step: a refusal during one
   * is why it failed (a refused function reports SQLITE_ERROR, not AUTH). */
  if (s->denied)
    snprintf(s->errmsg, sizeof s->errmsg, "%s", s->deny);
  else
    snprintf(s->errmsg, sizeof s->errmsg, "%s (%s)", sqlite3_errmsg(s->db), code_name(rc));
  return EU_ESQL;
}

static int fail(eu_store *s, int code, const char *msg) {
  snprintf(s->errmsg, sizeof s->errmsg, "%s", msg);
  return code;
}

static int wake(eu_store *s);

/* The authorizer */

/* Every name the engines use: the store's and serve's (_eutaxy_*) and the
 * durability engines' (eutaxy_*, fanout.c and agenda.c). */
static int is_reserved(const char *name) {
  return name && (sqlite3_strnicmp(name, "_eutaxy_", 8) == 0 ||
                  sqlite3_strnicmp(name, "eutaxy_", 7) == 0);
}

/* The store's own tables, which user SQL may not even read (the engines'
 * tables can be read, as the checker's invariants and users' dashboards
 * do). */
static int is_hidden(const char *name) {
  return name && sqlite3_strnicmp(name, "_eutaxy_", 8) == 0;
}

static int deny(eu_store *s, const char *fmt, ...)
#if defined(__GNUC__)
  __attribute__((format(printf, 2, 3)))
#endif
  ;

static int deny(eu_store *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->deny, sizeof s->deny, fmt, ap);
  va_end(ap);
  s->denied = 1;
  return SQLITE_DENY;
}

/* Pragmas. An object may use the ones that read its own schema and data
 * and the ones that set how its own SQL behaves (those Cloudflare's D1 and
 * SQLite-backed Durable Objects allow, and a few read-only counters);
 * everything else is the host's: the journal and syncing, the size of the
 * database, caches and memory, and settings of the whole process such as
 * hard_heap_limit (which made the next commit of every object fail). */
static const char *const eu_pragmas_free[] = {
  "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo",
  "foreign_key_list", "foreign_key_check", "integrity_check", "quick_check",
  "foreign_keys", "defer_foreign_keys", "case_sensitive_like", "recursive_triggers",
  "reverse_unordered_selects", "ignore_check_constraints", "legacy_alter_table",
  "optimize", "user_version", "data_version", "page_count", "freelist_count",
};
/* Readable, not settable. */
static const char *const eu_pragmas_read[] = { "page_size", "max_page_count" };

static const char *const eu_pragmas_journal[] = {
  "journal_mode", "synchronous", "locking_mode", "wal_autocheckpoint", "wal_checkpoint",
  "journal_size_limit", "fullfsync", "checkpoint_fullfsync", "cache_spill",
};
static const char *const eu_pragmas_process[] = {
  "hard_heap_limit", "soft_heap_limit", "temp_store_directory", "data_store_directory",
  "threads", "shrink_memory",
};
static const char *const eu_pragmas_limits[] = {
  "cache_size", "mmap_size", "max_page_count", "page_size", "temp_store", "auto_vacuum",
  "incremental_vacuum", "default_cache_size",
};

static int in_list(const char *name, const char *const *list, size_t n) {
  size_t i;
  for (i = 0; i < n; i++)
    if (sqlite3_stricmp(name, list[i]) == 0) return 1;
  return 0;
}

#define IN_LIST(name, list) in_list(name, list, sizeof list / sizeof list[0])

/* name is the pragma, arg its argument (NULL when it only reads). */
static int pragma_allowed(eu_store *s, const char *name, const char *arg) {
  if (IN_LIST(name, eu_pragmas_free)) return SQLITE_OK;
  if (!arg && IN_LIST(name, eu_pragmas_read)) return SQLITE_OK;
  if (IN_LIST(name, eu_pragmas_journal))
    return deny(s, "PRAGMA %s is not allowed in sql:exec: the host owns the journal and its syncing", name);
  if (IN_LIST(name, eu_pragmas_process))
    return deny(s, "PRAGMA %s is not allowed in sql:exec: it is a setting of the whole process, "
                "which every object shares", name);
  if (IN_LIST(name, eu_pragmas_limits))
    return deny(s, "PRAGMA %s is not allowed in sql:exec: the host sets the object's memory "
                "and storage%s", name, arg && IN_LIST(name, eu_pragmas_read) ? " (it may be read)" : "");
  {
    char may[400] = "";
    size_t i, n = 0;
    for (i = 0; i < sizeof eu_pragmas_free / sizeof eu_pragmas_free[0] && n < sizeof may; i++)
      n += (size_t)snprintf(may + n, sizeof may - n, "%s%s", i ? ", " : "", eu_pragmas_free[i]);
    return deny(s, "PRAGMA %s is not allowed in sql:exec; an object may use %s, and read page_size "
                "and max_page_count", name, may);
  }
}

/* The settings of a connection that user SQL may change (of
 * eu_pragmas_free), each with the query that reads it as 0 or 1: park keeps
 * them for the reopened connection. case_sensitive_like has no reading
 * form; LIKE itself tells. */
static const char *const eu_settings[][2] = {
  { "foreign_keys", "PRAGMA foreign_keys" },
  { "recursive_triggers", "PRAGMA recursive_triggers" },
  { "reverse_unordered_selects", "PRAGMA reverse_unordered_selects" },
  { "ignore_check_constraints", "PRAGMA ignore_check_constraints" },
  { "legacy_alter_table", "PRAGMA legacy_alter_table" },
  { "case_sensitive_like", "SELECT 'a' NOT LIKE 'A'" },
};

#define EU_NSETTINGS ((int)(sizeof eu_settings / sizeof eu_settings[0]))

static int is_setting(const char *name) {
  int i;
  for (i = 0; i < EU_NSETTINGS; i++)
    if (sqlite3_stricmp(name, eu_settings[i][0]) == 0) return 1;
  return 0;
}

/* ALTER TABLE ... RENAME TO: the authorizer is told the old name only, so
 * the new one is read from the statement's text with a tokenizer of the
 * little SQL that can come before it (names quoted four ways, comments). */

typedef struct sql_tok {
  const char *p;
  size_t n;
} sql_tok;

static int ident_char(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '_' || c == '$' || c >= 0x80;
}

/* The next token from *p; 0 at the end or at an unterminated quote or comment. */
static int next_tok(const char **p, const char *end, sql_tok *t) {
  const char *q = *p;
  for (;;) {
    while (q < end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r' || *q == '\f')) q++;
    if (q + 1 < end && q[0] == '-' && q[1] == '-') {
      while (q < end && *q != '\n') q++;
    } else if (q + 1 < end && q[0] == '/' && q[1] == '*') {
      q += 2;
      while (q + 1 < end && !(q[0] == '*' && q[1] == '/')) q++;
      if (q + 1 >= end) return 0;
      q += 2;
    } else {
      break;
    }
  }
  if (q >= end) return 0;
  t->p = q;
  if (*q == '"' || *q == '\'' || *q == '`' || *q == '[') {
    char close = *q == '[' ? ']' : *q;
    q++;
    for (;;) {
      if (q >= end) return 0;
      if (*q == close) {
        if (close != ']' && q + 1 < end && q[1] == close) { q += 2; continue; }
        q++;
        break;
      }
      q++;
    }
  } else if (ident_char((unsigned char)*q)) {
    while (q < end && ident_char((unsigned char)*q)) q++;
  } else {
    q++;
  }
  t->n = (size_t)(q - t->p);
  *p = q;
  return 1;
}

static int tok_is(const sql_tok *t, const char *kw) {
  return t->n == strlen(kw) && sqlite3_strnicmp(t->p, kw, (int)t->n) == 0;
}

/* The name a token spells, unquoted, into out (cut to outlen - 1 bytes). */
static void tok_name(const sql_tok *t, char *out, size_t outlen) {
  size_t i = 0, j = 0, n = t->n;
  const char *p = t->p;
  char q = 0;
  if (n >= 2 && (*p == '"' || *p == '\'' || *p == '`' || *p == '[')) {
    q = *p == '[' ? ']' : *p;
    p++;
    n -= 2;
  }
  for (; i < n && j + 1 < outlen; i++) {
    out[j++] = p[i];
    if (q && q != ']' && p[i] == q) i++;  /* a doubled quote is one */
  }
  out[j] = '\0';
}

static int is_name_tok(const sql_tok *t) {
  unsigned char c = (unsigned char)*t->p;
  return ident_char(c) || c == '"' || c == '\'' || c == '`' || c == '[';
}

/* 1 and the new name for ALTER TABLE [schema.]name RENAME TO new, 0 for any
 * other ALTER TABLE, -1 when the text does not read as one. */
static int alter_new_name(const char *sql, size_t len, char *out, size_t outlen) {
  const char *p = sql, *end = sql + len;
  sql_tok t;
  if (!next_tok(&p, end, &t) || !tok_is(&t, "ALTER")) return -1;
  if (!next_tok(&p, end, &t) || !tok_is(&t, "TABLE")) return -1;
  if (!next_tok(&p, end, &t) || !is_name_tok(&t)) return -1;
  if (!next_tok(&p, end, &t)) return -1;
  if (t.n == 1 && *t.p == '.') {
    if (!next_tok(&p, end, &t) || !is_name_tok(&t)) return -1;
    if (!next_tok(&p, end, &t)) return -1;
  }
  if (!tok_is(&t, "RENAME")) return 0;
  /* RENAME TO is the table; RENAME [COLUMN] a TO b is a column, as
   * SQLite's grammar reads it. */
  if (!next_tok(&p, end, &t)) return -1;
  if (!tok_is(&t, "TO")) return 0;
  if (!next_tok(&p, end, &t) || !is_name_tok(&t)) return -1;
  tok_name(&t, out, outlen);
  return 1;
}

static int authorize(void *ud, int action, const char *a, const char *b,
                     const char *dbname, const char *trigger) {
  eu_store *s = ud;
  const char *table = NULL, *name = NULL;
  char renamed[256];
  (void)dbname;
  /* The host's own statement, but not what a user's trigger or view does
   * on its behalf. */
  if (s->internal && !trigger) return SQLITE_OK;
  /* What lives in the connection rather than the file: a store that has
   * temporary objects is never parked; settings are carried over. */
  switch (action) {
  case SQLITE_CREATE_TEMP_TABLE: case SQLITE_CREATE_TEMP_INDEX:
  case SQLITE_CREATE_TEMP_TRIGGER: case SQLITE_CREATE_TEMP_VIEW:
    s->sticky = 1;
    break;
  case SQLITE_CREATE_VTABLE:
    if (dbname && sqlite3_stricmp(dbname, "temp") == 0) s->sticky = 1;
    break;
  case SQLITE_PRAGMA:
    if (b && is_setting(a)) s->set_settings = 1;
    break;
  default:
    break;
  }
  switch (action) {
  case SQLITE_TRANSACTION:  /* a is BEGIN, COMMIT or ROLLBACK */
    if (strcmp(a, "BEGIN") == 0)
      return deny(s, "%s is not allowed in sql:exec: each turn of an invocation "
                  "is one implicit transaction; use storage:transactionSync(fn)", a);
    if (strcmp(a, "COMMIT") == 0)
      return deny(s, "%s is not allowed in sql:exec: the turn commits when the "
                  "invocation yields or returns; use storage:transactionSync(fn)", a);
    return deny(s, "%s is not allowed in sql:exec: raise an error to roll back "
                "the turn, or use storage:transactionSync(fn)", a);
  case SQLITE_SAVEPOINT:    /* a is BEGIN, RELEASE or ROLLBACK */
    return deny(s, "%s is not allowed in sql:exec: use storage:transactionSync(fn)",
                strcmp(a, "BEGIN") == 0 ? "SAVEPOINT"
                : strcmp(a, "RELEASE") == 0 ? "RELEASE" : "ROLLBACK TO");
  case SQLITE_ATTACH:
    return deny(s, "%s is not allowed in sql:exec: an object has one database", "ATTACH");
  case SQLITE_DETACH:
    return deny(s, "%s is not allowed in sql:exec: an object has one database", "DETACH");
  case SQLITE_PRAGMA:  /* a is the pragma, b its argument or NULL */
    return pragma_allowed(s, a, b);
  case SQLITE_FUNCTION:  /* b is the name; this build lets fts3_tokenizer take a raw pointer */
    if (sqlite3_stricmp(b, "fts3_tokenizer") == 0)
      return deny(s, "the function %s is not allowed in sql:exec", b);
    return SQLITE_OK;
  case SQLITE_READ:  /* a is the table, b the column */
    if (is_hidden(a)) return deny(s, "table %s is reserved for eutaxy", a);
    /* A table-valued pragma (pragma_table_info('t')) reads a table named
     * after it, and follows the pragmas' list. */
    if (a && sqlite3_strnicmp(a, "pragma_", 7) == 0) return pragma_allowed(s, a + 7, NULL);
    return SQLITE_OK;
  case SQLITE_ANALYZE:  /* reads every row of the table, writes only statistics */
    if (is_hidden(a)) return deny(s, "table %s is reserved for eutaxy", a);
    return SQLITE_OK;
  case SQLITE_INSERT: case SQLITE_UPDATE: case SQLITE_DELETE:
  case SQLITE_CREATE_TABLE: case SQLITE_CREATE_TEMP_TABLE:
  case SQLITE_DROP_TABLE: case SQLITE_DROP_TEMP_TABLE:
  case SQLITE_CREATE_VTABLE: case SQLITE_DROP_VTABLE:
    table = a;
    break;
  case SQLITE_ALTER_TABLE:  /* a is the database, b the table */
    table = b;
    if (is_reserved(table)) break;
    if (!s->text && s->text_of && (s->text = sqlite3_sql(s->text_of)) != NULL)
      s->textlen = strlen(s->text);
    if (!s->text) return deny(s, "ALTER TABLE %s is not allowed here", b);
    switch (alter_new_name(s->text, s->textlen, renamed, sizeof renamed)) {
    case 1:
      if (is_reserved(renamed)) return deny(s, "the name %s is reserved for eutaxy", renamed);
      break;
    case 0:
      break;
    default:
      return deny(s, "ALTER TABLE %s: cannot tell what the statement renames", b);
    }
    break;
  case SQLITE_CREATE_INDEX: case SQLITE_CREATE_TEMP_INDEX:
  case SQLITE_CREATE_TRIGGER: case SQLITE_CREATE_TEMP_TRIGGER:
    name = a;
    table = b;
    break;
  case SQLITE_DROP_INDEX: case SQLITE_DROP_TEMP_INDEX:
  case SQLITE_DROP_TRIGGER: case SQLITE_DROP_TEMP_TRIGGER:
    /* The engines' own are all named eutaxy_*: an index or trigger of the
     * user's on an engine table (made before the tables were reserved, and
     * now failing the engine's writes) can still be dropped. */
    name = a;
    break;
  case SQLITE_CREATE_VIEW: case SQLITE_CREATE_TEMP_VIEW:
  case SQLITE_DROP_VIEW: case SQLITE_DROP_TEMP_VIEW:
    name = a;
    break;
  default:
    break;
  }
  if (is_reserved(table)) return deny(s, "table %s is reserved for eutaxy", table);
  if (is_reserved(name)) return deny(s, "the name %s is reserved for eutaxy", name);
  return SQLITE_OK;
}

/* The host's statements */

/* Compiles host statement which, once per connection. */
static int is_compile(eu_store *s, int which) {
  int rc, saved = s->internal;
  if (s->is[which]) return EU_OK;
  ENTER(s);
  s->internal = 1;
  s->denied = 0;
  rc = sqlite3_prepare_v3(s->db, eu_isql[which], -1, SQLITE_PREPARE_PERSISTENT, &s->is[which], NULL);
  s->internal = saved;
  LEAVE();
  return rc == SQLITE_OK ? EU_OK : fail_sql(s, rc);
}

/* What a step of st that returned rc did to rows_open (a reset ends it as
 * SQLITE_DONE does). */
static void note_step(eu_store *s, const sqlite3_stmt *st, int rc) {
  if (rc != SQLITE_ROW) {
    if (s->rows_open == 1 && s->row_of == st) s->rows_open = 0;
  } else if (!s->rows_open) {
    s->rows_open = 1;
    s->row_of = st;
  } else if (s->row_of != st) {
    s->rows_open = 2;
  }
}

/* sqlite3_reset, keeping rows_open. */
static void end_stmt(eu_store *s, sqlite3_stmt *st) {
  sqlite3_reset(st);
  note_step(s, st, SQLITE_DONE);
}

static int is_prepare(eu_store *s, int which, sqlite3_stmt **out) {
  sqlite3_stmt *st;
  int rc;
  *out = NULL;
  if (which == IS_ROLLBACK || which == IS_ROLLBACK_TO || which == IS_TURN_ROLLBACK || which == IS_CK_ROLLBACK)
    forget_alarm(s);
  if ((rc = wake(s)) < 0) return rc;
  if ((st = s->is[which]) != NULL) {
    end_stmt(s, st);
    sqlite3_clear_bindings(st);
  } else if ((rc = is_compile(s, which)) < 0) {
    return rc;
  }
  *out = s->is[which];
  return EU_OK;
}

/* SQL that may write is about to run: outside a turn, the database will no
 * longer be as the checkpoint's savepoint began (ck_fresh). */
static void may_write(eu_store *s) {
  if (!s->turn) s->ck_fresh = 0;
}

/* Internal mode covers the step too: SQLite recompiles a statement after a
 * schema change, and the authorizer sees it again then. */
static int is_step(eu_store *s, sqlite3_stmt *st) {
  int rc, saved = s->internal;
  if (s->ck_fresh && !sqlite3_stmt_readonly(st)) may_write(s);
  ENTER(s);
  s->internal = 1;
  s->denied = 0;
  rc = sqlite3_step(st);
  s->internal = saved;
  note_step(s, st, rc);
  if (rc == SQLITE_ROW || rc == SQLITE_DONE) {
    LEAVE();
    return rc == SQLITE_ROW;
  }
  rc = fail_sql(s, rc);
  end_stmt(s, st);
  LEAVE();
  return rc;
}

/* Runs a host statement; *v, when asked for, is the first column of its
 * first row (0 for none): what a host pragma answers. */
static int is_integer(eu_store *s, int which, int64_t *v) {
  sqlite3_stmt *st = NULL;
  int rc = is_prepare(s, which, &st);
  if (rc < 0) return rc;
  rc = is_step(s, st);
  if (v) *v = rc == 1 ? sqlite3_column_int64(st, 0) : 0;
  end_stmt(s, st);
  return rc < 0 ? rc : EU_OK;
}

static int is_run(eu_store *s, int which) { return is_integer(s, which, NULL); }

/* Ends every statement left mid-way, so that COMMIT, ROLLBACK or a restore
 * is not refused over a read in progress. */
static void reset_busy(eu_store *s) {
  sqlite3_stmt *st = NULL;
  if (!s->db) return;
#ifndef NDEBUG
  /* a build with assertions checks what rows_open answers */
  while (!s->rows_open && (st = sqlite3_next_stmt(s->db, st)) != NULL) assert(!sqlite3_stmt_busy(st));
#endif
  if (!s->rows_open) return;
  while ((st = sqlite3_next_stmt(s->db, st)) != NULL)
    if (sqlite3_stmt_busy(st)) sqlite3_reset(st);
  s->rows_open = 0;
}

/* The statements finalize_all would finalize. */
static int own_statements(const eu_store *s) {
  int i, n = s->ncache + s->next;
  for (i = 0; i < IS_COUNT; i++) n += s->is[i] != NULL;
  return n;
}

/* Lets go of the store's statements without finalizing them: they go with
 * the connection (eu_store_close_handed). */
static void forget_all(eu_store *s) {
  int i;
  for (i = 0; i < s->ncache; i++) free(s->cache[i].sql);
  s->ncache = 0;
  for (i = 0; i < s->next; i++) free(s->ext[i].sql);
  s->next = 0;
  for (i = 0; i < IS_COUNT; i++) s->is[i] = NULL;
}

static void finalize_all(eu_store *s) {
  int i;
  for (i = 0; i < s->ncache; i++) {
    sqlite3_finalize(s->cache[i].st);
    free(s->cache[i].sql);
  }
  s->ncache = 0;
  for (i = 0; i < s->next; i++) {
    sqlite3_finalize(s->ext[i].st);
    free(s->ext[i].sql);
  }
  s->next = 0;
  for (i = 0; i < IS_COUNT; i++) {
    sqlite3_finalize(s->is[i]);
    s->is[i] = NULL;
  }
}

/* Opening and closing */

int eu_store_exec_internal(eu_store *s, const char *sql) {
  char *msg = NULL;
  int rc, saved = s->internal;
  if ((rc = wake(s)) < 0) return rc;
  forget_alarm(s);
  may_write(s);
  ENTER(s);
  s->internal = 1;
  rc = sqlite3_exec(s->db, sql, NULL, NULL, &msg);
  s->internal = saved;
  LEAVE();
  if (rc != SQLITE_OK) {
    if ((rc & 0xff) == SQLITE_FULL) {
      sqlite3_free(msg);
      return full(s);
    }
    if (rc == SQLITE_NOMEM) {
      eu_faultsim_note_oom();
      rc = fail(s, EU_ENOMEM, "out of memory (SQLITE_NOMEM)");
    } else {
      snprintf(s->errmsg, sizeof s->errmsg, "%s (%s)", msg ? msg : sqlite3_errstr(rc),
               code_name(sqlite3_extended_errcode(s->db)));
      rc = EU_ESQL;
    }
    sqlite3_free(msg);
    return rc;
  }
  return EU_OK;
}

int eu_store_open(eu_store **out, const char *path, char *err, size_t errlen) {
  return eu_store_open_with(out, path, NULL, NULL, 0, err, errlen);
}

static int apply_quota(eu_store *s, int page);
static int image_page_size(const unsigned char *img, size_t len);
static int apply_settings(eu_store *s);

/* Makes main the database img (a whole one, as sqlite3_serialize gives),
 * in memory. A WAL database's header says so (the file format's version
 * bytes, 18 and 19: 2), which memory cannot hold: its copy is marked a
 * rollback one. The copy has room for as much again: SQLite grows a full
 * one by reallocating it, a copy of the whole database at the first page
 * a new table or row adds. */
static int deserialize(eu_store *s, const unsigned char *img, size_t len) {
  size_t room = len <= SIZE_MAX / 2 ? 2 * len : len;
  unsigned char *copy = sqlite3_malloc64(room);
  int rc, saved = s->internal;
  if (!copy) return SQLITE_NOMEM;
  memcpy(copy, img, len);
  if (len >= 100 && copy[18] == 2 && copy[19] == 2) copy[18] = copy[19] = 1;
  s->internal = 1;  /* deserialize reopens main with an ATTACH of its own */
  rc = sqlite3_deserialize(s->db, "main", copy, (sqlite3_int64)len, (sqlite3_int64)room,
                           SQLITE_DESERIALIZE_FREEONCLOSE | SQLITE_DESERIALIZE_RESIZEABLE);
  s->internal = saved;
  return rc;  /* on failure SQLite freed copy */
}

/* Opens s->db and sets it up as every use of it expects, the first time
 * and at each reopening after a park: the store's policing and limits, the
 * host's SQL around the store's own tables, the quota, the settings a park
 * kept and the wal hook. img, when not NULL, is what an in-memory store's
 * database starts as (eu_store_open_image), made by a store: it has the
 * tables, and what first and then made. */
static int connect(eu_store *s, const unsigned char *img, size_t len, char *err, size_t errlen) {
  const char *where = s->path ? s->path : "an in-memory database", *why = NULL;
  int on_disk = s->path && !s->in_memory, rc;
  const char *vfs = on_disk ? NULL : memory_vfs();
  forget_alarm(s);
  s->ck_fresh = s->turn_on_ck = 0;
  {
    ENTER(s);
    /* A store belongs to one world, which runs on one thread. */
    rc = sqlite3_open_v2(on_disk ? s->path : ":memory:", &s->db,
                         SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, vfs);
    LEAVE();
  }
  if (rc != SQLITE_OK) why = s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc);
  else if (img && (rc = deserialize(s, img, len)) != SQLITE_OK) {
    if ((sqlite3_errcode(s->db) & 0xff) == SQLITE_NOMEM) rc = SQLITE_NOMEM;  /* its ATTACH's */
    why = rc == SQLITE_NOMEM ? sqlite3_errstr(rc) : sqlite3_errmsg(s->db);
  }
  if (rc != SQLITE_OK) {
    rc = rc == SQLITE_NOMEM ? EU_ENOMEM : EU_ESQL;
    eu_err(err, errlen, rc, "cannot open %s: %s", where, why);
    sqlite3_close(s->db);
    s->db = NULL;
    return rc;
  }
  sqlite3_extended_result_codes(s->db, 1);
  sqlite3_limit(s->db, SQLITE_LIMIT_LENGTH, EU_STORE_MAX_LENGTH);
  /* Defensive mode keeps user SQL from corrupting the file on purpose
   * (writable_schema and the like). */
  sqlite3_db_config(s->db, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)NULL);
  /* as PRAGMA foreign_keys = ON does, without a statement to compile */
  sqlite3_db_config(s->db, SQLITE_DBCONFIG_ENABLE_FKEY, 1, (int *)NULL);
  sqlite3_set_authorizer(s->db, authorize, s);
  sqlite3_progress_handler(s->db, EU_STORE_STEP_CHECK, on_progress, s);
  if (link_random(s) != SQLITE_OK) {
    rc = fail(s, EU_ENOMEM, "out of memory (random() and randomblob())");
  } else if (img) {  /* made by a store, with first and then: its tables are there */
    rc = EU_OK;
  } else {
    rc = s->first ? eu_store_exec_internal(s, s->first) : EU_OK;
    if (rc >= 0 && !s->lazy) rc = eu_store_exec_internal(s, eu_schema);
    if (rc >= 0 && s->then) rc = eu_store_exec_internal(s, s->then);
  }
  if (rc >= 0 && s->lim.max_bytes > 0) rc = apply_quota(s, img ? image_page_size(img, len) : 0);
  if (rc >= 0 && s->set_settings) rc = apply_settings(s);
  if (rc < 0) {
    eu_err(err, errlen, rc, "cannot set up %s: %s", where, s->errmsg);
    finalize_all(s);
    sqlite3_close_v2(s->db);
    s->db = NULL;
    return rc;
  }
  if (s->wal_fn) sqlite3_wal_hook(s->db, s->wal_fn, s->wal_ud);
  return EU_OK;
}

static char *copy_text(const char *p, int *failed) {
  char *c;
  if (!p) return NULL;
  if (!(c = malloc(strlen(p) + 1))) *failed = 1;
  else strcpy(c, p);
  return c;
}

static void free_store(eu_store *s) {
  eu_sqlmem_release(s->mem);
  free(s->ck_alarm);
  free(s->path);
  free(s->first);
  free(s->then);
  free(s->ext);
  free(s);
}

static int open_store(eu_store **out, const char *path, const unsigned char *img, size_t len,
                      const char *first, const char *then, unsigned flags, char *err, size_t errlen) {
  eu_store *s;
  int rc, failed = 0;
  *out = NULL;
  /* Before the first connection of the process: SQLite takes an allocator
   * only before it initializes. Where it cannot (SQLite was used first),
   * the store works without counting its SQL. */
  eu_sqlmem_install();
  s = calloc(1, sizeof *s);
  if (!s) return eu_err(err, errlen, EU_ENOMEM, "out of memory");
  s->mem = eu_sqlmem_new();
  s->file = path != NULL;
  s->in_memory = img != NULL;
  s->lazy = (flags & EU_STORE_LAZY_TABLES) != 0;
  s->path = copy_text(path, &failed);
  s->first = copy_text(first, &failed);
  s->then = copy_text(then, &failed);
  if (!s->mem || failed) {
    free_store(s);
    return eu_err(err, errlen, EU_ENOMEM, "out of memory");
  }
  if ((rc = connect(s, img, len, err, errlen)) < 0) {
    free_store(s);
    return rc;
  }
  *out = s;
  return EU_OK;
}

int eu_store_open_with(eu_store **out, const char *path, const char *first, const char *then,
                       unsigned flags, char *err, size_t errlen) {
  return open_store(out, path, NULL, 0, first, then, flags, err, errlen);
}

int eu_store_open_image(eu_store **out, const char *path, const unsigned char *img, size_t len,
                        const char *first, const char *then, unsigned flags, char *err, size_t errlen) {
  if (!path || !img || len < 100)
    return eu_err(err, errlen, EU_EINVAL, "an in-memory store needs its file's path and a database image");
  return open_store(out, path, img, len, first, then, flags, err, errlen);
}

void eu_store_close(eu_store *s) {
  if (!s) return;
  finalize_all(s);
  sqlite3_close_v2(s->db);  /* v2: never leaves the connection open over a straggler */
  /* The meter goes with the last block counted on it, which may outlive s. */
  free_store(s);
}

/* Parking */

/* Reads the settings user SQL changed, for apply_settings to give the next
 * connection. */
static int read_settings(eu_store *s) {
  int i, v = 0;
  for (i = 0; i < EU_NSETTINGS; i++) {
    sqlite3_stmt *st = NULL;
    int rc, saved = s->internal;
    ENTER(s);
    s->internal = 1;
    rc = sqlite3_prepare_v2(s->db, eu_settings[i][1], -1, &st, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_step(st);
    if (rc == SQLITE_ROW && sqlite3_column_int(st, 0)) v |= 1 << i;
    sqlite3_finalize(st);
    s->internal = saved;
    LEAVE();
    if (rc != SQLITE_ROW) return fail_sql(s, rc == SQLITE_DONE ? SQLITE_ERROR : rc);
  }
  s->settings = v;
  return EU_OK;
}

static int apply_settings(eu_store *s) {
  char sql[512];
  size_t n = 0;
  int i;
  for (i = 0; i < EU_NSETTINGS; i++)
    n += (size_t)snprintf(sql + n, sizeof sql - n, "PRAGMA %s = %d;", eu_settings[i][0],
                          (s->settings >> i) & 1);
  return eu_store_exec_internal(s, sql);
}

/* Refuses (EU_EINVAL) what needs the committed database while a transaction is open. */
static int refuse_in_transaction(eu_store *s) {
  if (s->baseline || s->txn_open || !sqlite3_get_autocommit(s->db))
    return fail(s, EU_EINVAL, "a transaction is open");
  return EU_OK;
}

/* Closes the connection, or hands it to *handed for the caller to close. */
static int park(eu_store *s, sqlite3 **handed) {
  sqlite3_stmt *st = NULL;
  int rc, n = 0;
  if (s->parked) return EU_OK;
  if (!s->path) return fail(s, EU_EINVAL, "only a store backed by its file can be parked");
  if (s->in_memory) return fail(s, EU_EINVAL, "the store's database is in memory until its file is written");
  if (s->sticky)
    return fail(s, EU_EINVAL, "the store holds temporary tables, views or triggers, which live in its connection");
  if ((rc = refuse_in_transaction(s)) < 0) return rc;
  while ((st = sqlite3_next_stmt(s->db, st)) != NULL) {
    if (sqlite3_stmt_busy(st)) return fail(s, EU_EINVAL, "a statement is running");
    n++;
  }
  if (s->set_settings && (rc = read_settings(s)) < 0) return rc;
  if (handed) {
    /* a statement someone else prepared: the connection stays open (the
     * settings' statements are finalized by now) */
    if (n != own_statements(s)) return fail(s, EU_EINVAL, "a statement of the store is still prepared");
    /* finalized where the connection is closed, which may be another thread */
    forget_all(s);
  } else {
    finalize_all(s);
  }
  /* The WAL stays as it is for the next opening: a checkpoint here would
   * write and sync the database on the caller's thread. */
  sqlite3_db_config(s->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)NULL);
  if (!handed && sqlite3_close(s->db) != SQLITE_OK)
    return fail(s, EU_EINVAL, "a statement of the store is still prepared");
  if (handed) *handed = s->db;
  s->db = NULL;
  s->parked = 1;
  s->depth = 0;
  return EU_OK;
}

int eu_store_park(eu_store *s) { return park(s, NULL); }

int eu_store_parked(eu_store *s) { return s->parked; }

int eu_store_in_memory(eu_store *s) { return s->in_memory; }

int eu_store_image(eu_store *s, const unsigned char **p, size_t *len) {
  sqlite3_int64 sz = 0;
  int saved = s->internal;
  *p = NULL;
  *len = 0;
  if (!s->in_memory) return fail(s, EU_EINVAL, "the store's database is in its file");
  if (refuse_in_transaction(s) < 0) return EU_EINVAL;
  s->internal = 1;  /* serialize asks SQLite for the page count with a PRAGMA */
  *p = sqlite3_serialize(s->db, "main", &sz, SQLITE_SERIALIZE_NOCOPY);
  s->internal = saved;
  if (!*p) return fail(s, EU_ENOMEM, "cannot read the in-memory database whole");
  *len = (size_t)sz;
  return EU_OK;
}

int eu_store_set_then(eu_store *s, const char *then) {
  int failed = 0;
  char *c = copy_text(then, &failed);
  if (failed) return fail(s, EU_ENOMEM, "out of memory");
  free(s->then);
  s->then = c;
  return EU_OK;
}

void eu_store_close_handed(sqlite3 *db) {
  sqlite3_stmt *st;
  if (!db) return;
  while ((st = sqlite3_next_stmt(db, NULL)) != NULL) sqlite3_finalize(st);
  sqlite3_close(db);
}

int eu_store_image_written(eu_store *s, sqlite3 **closing) {
  int rc;
  *closing = NULL;
  if (!s->in_memory) return fail(s, EU_EINVAL, "the store's database is in its file");
  s->in_memory = 0;
  if ((rc = park(s, closing)) < 0) s->in_memory = 1;
  return rc;
}

/* Reopens a parked store's connection for its next use. */
static int wake(eu_store *s) {
  char err[EU_ERRLEN];
  int rc;
  if (!s->parked) return EU_OK;
  if (s->wake_fn) s->wake_fn(s->wake_ud, s);
  s->parked = 0;
  if ((rc = connect(s, NULL, 0, err, sizeof err)) < 0) {
    s->parked = 1;
    return fail(s, rc, err);
  }
  return EU_OK;
}

void eu_store_on_wake(eu_store *s, void (*fn)(void *ud, eu_store *s), void *ud) {
  s->wake_fn = fn;
  s->wake_ud = ud;
}

void eu_store_wal_hook(eu_store *s, eu_store_wal_fn fn, void *ud) {
  s->wal_fn = fn;
  s->wal_ud = ud;
  if (s->db) sqlite3_wal_hook(s->db, fn, ud);
}

void eu_store_batching(eu_store *s, int on) { s->batching = on; }

int eu_store_in_baseline(eu_store *s) { return s->baseline; }

sqlite3 *eu_store_db(eu_store *s) { return s->db; }

const char *eu_store_errmsg(eu_store *s) { return s->errmsg; }

int eu_store_error(eu_store *s, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->errmsg, sizeof s->errmsg, fmt, ap);
  va_end(ap);
  return code;
}

/* What the engines read */

static int bad_column(eu_store *s, const char *engine, sqlite3_stmt *st, int i, const char *table,
                      const char *row, const char *why) {
  const char *name = sqlite3_column_name(st, i);
  return eu_store_error(s, EU_ECORRUPT, "%s: a row of %s (%s) breaks its invariants: column %s %s",
                        engine, table, row && row[0] ? row : "the row read", name ? name : "?", why);
}

int eu_store_check_int(eu_store *s, const char *engine, sqlite3_stmt *st, int i, int flags,
                       int64_t lo, int64_t hi, const char *table, const char *row) {
  int64_t v;
  switch (sqlite3_column_type(st, i)) {
  case SQLITE_NULL:
    return flags & EU_COL_NULL ? EU_OK : bad_column(s, engine, st, i, table, row, "is NULL");
  case SQLITE_INTEGER:
    v = sqlite3_column_int64(st, i);
    if (v < lo || v > hi) return bad_column(s, engine, st, i, table, row, "is out of range");
    return EU_OK;
  default:
    return bad_column(s, engine, st, i, table, row, "is not an integer");
  }
}

int eu_store_check_text(eu_store *s, const char *engine, sqlite3_stmt *st, int i, int flags,
                        const char *table, const char *row) {
  switch (sqlite3_column_type(st, i)) {
  case SQLITE_NULL:
    return flags & EU_COL_NULL ? EU_OK : bad_column(s, engine, st, i, table, row, "is NULL");
  case SQLITE_TEXT:
    return EU_OK;
  default:
    return bad_column(s, engine, st, i, table, row, "is not text");
  }
}

/* SQLITE_FULL: the object's quota, or the disk. SQLite says the same for
 * both, so the disk is asked: a disk that still has room for a few pages
 * did not fill; with a quota set, the quota did. */
static int full(eu_store *s) {
  if (s->lim.max_bytes > 0) {
    int quota = 1;
    const char *path = s->file ? sqlite3_db_filename(s->db, "main") : NULL;
    struct statvfs v;
    if (path && path[0] && statvfs(path, &v) == 0 &&
        (uint64_t)v.f_bavail * v.f_frsize < UINT64_C(1) << 20)
      quota = 0;
    if (quota)
      return eu_store_error(s, EU_EFULL, "the object's storage is full: its database may hold "
                            "%lld bytes (--max-object-bytes)", (long long)s->lim.max_bytes);
  }
  return eu_store_error(s, EU_EFULL, "the disk is full (SQLITE_FULL)");
}

/* The page size an image's header gives (bytes 16 and 17; 1 is 65536), or
 * 0 where it gives none. */
static int image_page_size(const unsigned char *img, size_t len) {
  int page;
  if (len < 100) return 0;
  page = img[16] << 8 | img[17];
  return page == 1 ? 65536 : page >= 512 && (page & (page - 1)) == 0 ? page : 0;
}

/* Applies max_bytes as a page count; a restore or reopen of main sets it
 * back to SQLite's default, so this runs after those too. page is the
 * database's page size, or 0 to ask SQLite. */
static int apply_quota(eu_store *s, int page) {
  char sql[96];
  int64_t pages = 0x7fffffff;  /* no quota: SQLite's largest */
  if (s->lim.max_bytes > 0) {
    if (page <= 0) {
      sqlite3_stmt *st = NULL;
      int rc, saved = s->internal;
      ENTER(s);
      s->internal = 1;
      rc = sqlite3_prepare_v2(s->db, "PRAGMA page_size", -1, &st, NULL);
      if (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) page = sqlite3_column_int(st, 0);
      sqlite3_finalize(st);
      s->internal = saved;
      LEAVE();
    }
    if (page <= 0) page = 4096;
    pages = s->lim.max_bytes / page;
    if (pages < 1) pages = 1;
    if (pages > 0x7fffffff) pages = 0x7fffffff;
  }
  snprintf(sql, sizeof sql, "PRAGMA max_page_count = %lld", (long long)pages);
  return eu_store_exec_internal(s, sql);
}

int eu_store_set_limits(eu_store *s, const eu_store_limits *l) {
  int64_t before = s->lim.max_bytes;  /* a world sets them at every build: the pragma only on a change */
  int rc;
  if (l->max_bytes < 0) return fail(s, EU_EINVAL, "max_bytes must not be negative");
  s->lim = *l;
  s->mem->limit = l->mem_limit;
  s->mem->also = l->mem_also;
  if (l->max_bytes == before || s->parked) return EU_OK;  /* a parked store's comes with its reopening */
  if ((rc = apply_quota(s, 0)) < 0) s->lim.max_bytes = before;  /* tried again at the next call */
  return rc;
}

const size_t *eu_store_mem_ptr(eu_store *s) { return &s->mem->live; }

void eu_store_set_sources(eu_store *s, int64_t (*now_ms)(void *ud), uint64_t (*random)(void *ud), void *ud) {
  s->now_ms = now_ms;
  s->random = random;
  s->src_ud = ud;
}

size_t eu_store_journal_bytes(eu_store *s) {
  int stmt = 0, schema = 0, high;
  size_t kept;
  if (!s->db) return 0;
  sqlite3_db_status(s->db, SQLITE_DBSTATUS_STMT_USED, &stmt, &high, 0);
  sqlite3_db_status(s->db, SQLITE_DBSTATUS_SCHEMA_USED, &schema, &high, 0);
  kept = (size_t)stmt + (size_t)schema;
  return s->mem->live > kept ? s->mem->live - kept : 0;
}

void eu_store_gate(eu_store *s, int open) {
  eu_store_gate_with(s, open, NULL);
}

void eu_store_gate_with(eu_store *s, int open, const char *why) {
  s->closed = open ? NULL : why ? why : "storage is not available: the object is being reset";
}

int eu_store_available(eu_store *s) {
  if (!s->closed) return 1;
  fail(s, EU_EINVAL, s->closed);
  return 0;
}

/* User statements */

static uint64_t hash_text(const char *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;  /* FNV-1a */
  while (n--) h = (h ^ (unsigned char)*p++) * 0x100000001b3ULL;
  return h;
}

/* The entry of the n in a kept for the text p (len bytes), or NULL, with
 * *h the text's hash then. First by where the text was last seen, without
 * hashing it: a query is most often a constant of the calling function,
 * the same string at each call. The text is compared either way: another
 * string may have come to the same place since. */
static eu_cached *find_kept(eu_cached *kept, int n, const char *p, size_t len, uint64_t *h) {
  int i;
  for (i = 0; i < n; i++)
    if (kept[i].seen == p && kept[i].len == len && memcmp(kept[i].sql, p, len) == 0) return &kept[i];
  *h = hash_text(p, len);
  for (i = 0; i < n; i++)
    if (kept[i].hash == *h && kept[i].len == len && memcmp(kept[i].sql, p, len) == 0) {
      kept[i].seen = p;
      return &kept[i];
    }
  return NULL;
}

/* Takes st into the cache, or finalizes it and fails. */
static int cache_add(eu_store *s, const char *p, size_t n, uint64_t h, sqlite3_stmt *st) {
  eu_cached *c;
  char *key = malloc(n + 1);
  if (!key) {
    sqlite3_finalize(st);
    return fail(s, EU_ENOMEM, "out of memory");
  }
  memcpy(key, p, n);
  key[n] = '\0';
  if (s->ncache < EU_STMT_CACHE) {
    c = &s->cache[s->ncache++];
  } else {
    int i;
    c = &s->cache[0];
    for (i = 1; i < s->ncache; i++)
      if (s->cache[i].used < c->used) c = &s->cache[i];
    sqlite3_finalize(c->st);
    free(c->sql);
  }
  c->sql = key;
  c->len = n;
  c->hash = h;
  c->seen = p;
  c->used = ++s->tick;
  c->st = st;
  return EU_OK;
}

/* Skips what SQLite skips between statements: white space, comments and
 * empty statements. */
static const char *skip_blank(const char *p, const char *end) {
  while (p < end) {
    if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\f' || *p == ';') {
      p++;
    } else if (*p == '-' && p + 1 < end && p[1] == '-') {
      while (p < end && *p != '\n') p++;
    } else if (*p == '/' && p + 1 < end && p[1] == '*') {
      p += 2;
      while (p < end && !(*p == '*' && p + 1 < end && p[1] == '/')) p++;
      p = p < end ? p + 2 : end;
    } else {
      break;
    }
  }
  return p;
}

/* Runs a statement that is not the last of its query: no bindings, rows
 * discarded. Takes st and finalizes it. */
static int run_discard(eu_store *s, sqlite3_stmt *st) {
  int rc;
  do rc = eu_store_step(s, st); while (rc == 1);
  sqlite3_finalize(st);
  return rc;
}

int eu_store_prepare(eu_store *s, const char *sql, size_t len, sqlite3_stmt **out) {
  const char *p = sql, *end = sql + len;
  int rc0;
  *out = NULL;
  if (len > (size_t)0x7fffffff) return fail(s, EU_EINVAL, "the query is too long");
  if ((rc0 = wake(s)) < 0) return rc0;
  /* SQLite stops reading at a NUL, and what follows would never run. */
  if (memchr(sql, '\0', len)) return fail(s, EU_EINVAL, "the query contains a NUL byte");
  for (;;) {
    sqlite3_stmt *st = NULL;
    const char *tail;
    eu_cached *c;
    uint64_t h = 0;
    int rc;
    p = skip_blank(p, end);
    if (p == end) return EU_OK;
    /* Only a statement that reaches the end of the query is cached, so a
     * hit is always the last statement. */
    if ((c = find_kept(s->cache, s->ncache, p, (size_t)(end - p), &h)) != NULL) {
      c->used = ++s->tick;
      end_stmt(s, c->st);
      sqlite3_clear_bindings(c->st);
      *out = c->st;
      return EU_OK;
    }
    s->denied = 0;
    s->text = p;
    s->textlen = (size_t)(end - p);
    s->mem->enforce = 1;
    {
      ENTER(s);
      rc = sqlite3_prepare_v3(s->db, p, (int)(end - p), SQLITE_PREPARE_PERSISTENT, &st, &tail);
      LEAVE();
    }
    s->mem->enforce = 0;
    s->text = NULL;
    if (rc != SQLITE_OK) return fail_sql(s, rc);
    if (!st) {  /* nothing SQLite calls a statement; skip_blank should have seen it */
      if (tail <= p) return EU_OK;
      p = tail;
      continue;
    }
    if (skip_blank(tail, end) == end) {
      rc = cache_add(s, p, (size_t)(end - p), h, st);
      if (rc < 0) return rc;
      *out = st;
      return EU_OK;
    }
    rc = run_discard(s, st);
    if (rc < 0) return rc;
    p = tail;
  }
}

int eu_store_step(eu_store *s, sqlite3_stmt *st) {
  eu_sqlmem *m = s->mem;
  int rc;
  ENTER(s);
  s->denied = 0;
  s->steps = 0;
  s->over_steps = 0;
  s->stepping = 1;
  /* A recompile after a schema change shows the authorizer the text again. */
  s->text_of = st;
  m->enforce = 1;
  m->refused = m->over = 0;
  m->charged = 0;
  m->charge_max = (uint64_t)EU_STORE_MAX_STEPS * EU_STORE_BYTES_PER_STEP;
  m->charging = 1;
  if (!sqlite3_stmt_readonly(st)) {
    s->turn_writer = 1;
    may_write(s);
  }
  rc = sqlite3_step(st);
  note_step(s, st, rc);
  m->charging = 0;
  m->enforce = 0;
  s->stepping = 0;
  s->text = NULL;
  s->text_of = NULL;
  if (rc == SQLITE_ROW || rc == SQLITE_DONE) {
    LEAVE();
    return rc == SQLITE_ROW;
  }
  if (s->over_steps || (m->over && (rc & 0xff) == SQLITE_NOMEM)) {
    int sqlite_rc = rc;
    m->over = m->refused = 0;
    rc = fail(s, EU_ESQL, "the statement ran past the CPU limit (more than 200,000,000 SQLite steps), "
              "counting a step for each 4 bytes it allocates");
    note_lost(s, sqlite_rc);
  } else {
    rc = fail_sql(s, rc);
  }
  end_stmt(s, st);
  LEAVE();
  return rc;
}

void eu_store_reset(eu_store *s, sqlite3_stmt *st) {
  end_stmt(s, st);
  sqlite3_clear_bindings(st);
}

/* The engines' statements */

/* Few and fixed (each engine's SQL is a set of literals), so a linear
 * search is enough (find_kept). They live as long as the host's own: a restore
 * finalizes them with the rest, and the next prepare makes them again. */
int eu_store_internal_prepare(eu_store *s, const char *sql, sqlite3_stmt **out) {
  size_t n = strlen(sql);
  uint64_t h = 0;
  sqlite3_stmt *st = NULL;
  eu_cached *c;
  char *key;
  int rc, saved;
  *out = NULL;
  if ((rc = wake(s)) < 0) return rc;
  if ((c = find_kept(s->ext, s->next, sql, n, &h)) != NULL) {
    end_stmt(s, c->st);
    sqlite3_clear_bindings(c->st);
    *out = c->st;
    return EU_OK;
  }
  if (s->next == s->extcap) {
    int cap = s->extcap ? s->extcap * 2 : 16;
    eu_cached *p = realloc(s->ext, (size_t)cap * sizeof *p);
    if (!p) return fail(s, EU_ENOMEM, "out of memory");
    s->ext = p;
    s->extcap = cap;
  }
  key = malloc(n + 1);
  if (!key) return fail(s, EU_ENOMEM, "out of memory");
  memcpy(key, sql, n + 1);
  saved = s->internal;
  {
    ENTER(s);
    s->internal = 1;
    s->denied = 0;
    rc = sqlite3_prepare_v3(s->db, sql, (int)n, SQLITE_PREPARE_PERSISTENT, &st, NULL);
    s->internal = saved;
    LEAVE();
  }
  if (rc != SQLITE_OK || !st) {
    free(key);
    sqlite3_finalize(st);
    return rc != SQLITE_OK ? fail_sql(s, rc) : fail(s, EU_EINVAL, "no SQL statement to prepare");
  }
  c = &s->ext[s->next++];
  c->sql = key;
  c->len = n;
  c->hash = h;
  c->seen = sql;
  c->used = 0;
  c->st = st;
  *out = st;
  return EU_OK;
}

int eu_store_internal_step(eu_store *s, sqlite3_stmt *st) {
  forget_alarm(s);
  return is_step(s, st);
}

/* The turn */

/* Baseline mode (the checker): one outer transaction spans a whole run, a
 * turn is a savepoint in it, and ending the baseline rolls everything back,
 * so the next run starts from the same database without reopening it or
 * preparing its statements again. SQLite can end a transaction by itself
 * after some failures; then the baseline is lost and the store says so. */
/* COMMIT, all or nothing: a refused COMMIT (a deferred foreign key, say)
 * leaves the transaction open, and its writes must not leak into the next
 * one, so it is rolled back, keeping the COMMIT's message. */
static int commit_all(eu_store *s) {
  int rc = is_run(s, IS_COMMIT);
  if (rc < 0 && !sqlite3_get_autocommit(s->db)) {
    char msg[EU_ERRLEN];
    memcpy(msg, s->errmsg, sizeof msg);
    is_run(s, IS_ROLLBACK);
    memcpy(s->errmsg, msg, sizeof msg);
  }
  return rc;
}

int eu_store_prepare_turns(eu_store *s) {
  static const int which[] = { IS_BEGIN, IS_COMMIT, IS_ROLLBACK, IS_TURN_BEGIN, IS_TURN_RELEASE,
                               IS_TURN_ROLLBACK };
  size_t i;
  int rc;
  if ((rc = wake(s)) < 0) return rc;
  for (i = 0; i < sizeof which / sizeof which[0]; i++)
    if ((rc = is_compile(s, which[i])) < 0) return rc;
  return EU_OK;
}

int eu_store_baseline_begin(eu_store *s) {
  int rc;
  if (s->baseline) return EU_OK;
  if ((rc = wake(s)) < 0) return rc;
  if (!sqlite3_get_autocommit(s->db)) return fail(s, EU_EINVAL, "a transaction is open");
  rc = is_run(s, IS_BEGIN);
  if (rc < 0) return rc;
  s->baseline = 1;
  s->lost_code = 0;
  s->txn_open = 0;
  s->turn = s->turn_on_ck = s->ck_fresh = 0;
  s->depth = 0;
  s->nck_alarm = 0;
  return EU_OK;
}

int eu_store_baseline_end(eu_store *s) {
  int rc = EU_OK;
  if (!s->baseline) return EU_OK;
  reset_busy(s);
  if (!sqlite3_get_autocommit(s->db)) rc = is_run(s, IS_ROLLBACK);
  s->baseline = s->turn = s->turn_on_ck = s->ck_fresh = s->depth = 0;
  s->alarm_dirty = 0;
  s->nck_alarm = 0;
  return rc;
}

int eu_store_baseline_commit(eu_store *s) {
  int rc = EU_OK;
  if (!s->baseline) return EU_OK;
  reset_busy(s);
  if (s->turn) rc = fail(s, EU_EINVAL, "a turn is open");
  else if (sqlite3_get_autocommit(s->db) && s->lost_code)
    rc = eu_store_error(s, s->lost_code == SQLITE_FULL ? EU_EFULL : EU_ESQL,
                        "the batch's transaction was rolled back by SQLite after: %s", s->lost_msg);
  else if (sqlite3_get_autocommit(s->db)) {
    char last[256];
    snprintf(last, sizeof last, "%.250s", s->errmsg[0] ? s->errmsg : "none");
    rc = eu_store_error(s, EU_ESQL, "the batch's transaction was rolled back by SQLite (the last error: %s)", last);
  }
  else rc = commit_all(s);
  s->baseline = s->turn = s->turn_on_ck = s->ck_fresh = s->depth = 0;
  s->nck_alarm = 0;
  return rc;
}

int eu_store_checkpoint(eu_store *s) {
  if (!s->baseline || s->turn || s->depth) return fail(s, EU_EINVAL, "a checkpoint needs a run's transaction and no turn");
  if (sqlite3_get_autocommit(s->db)) return fail(s, EU_ESQL, "the run's transaction was rolled back by SQLite");
  if (keep_ck_alarm(s) < 0) return EU_ENOMEM;
  if (is_run(s, IS_CK_BEGIN) < 0) {
    s->nck_alarm--;
    return EU_ESQL;
  }
  s->ck_fresh = 1;
  return EU_OK;
}

int eu_store_checkpoint_back(eu_store *s, int n, int keep) {
  int rc = EU_OK;
  if (!s->baseline || sqlite3_get_autocommit(s->db)) return fail(s, EU_ESQL, "the run's transaction was rolled back by SQLite");
  reset_busy(s);
  s->ck_fresh = 0;
  /* The marks above the one gone back to are released first, each folding
   * into the one before it, so that one ROLLBACK TO undoes them all: SQLite
   * plays the pages back once, not once a mark. ROLLBACK TO leaves its
   * savepoint open: the kept mark, which is the database again. */
  for (; n > 1 && rc == EU_OK; n--)
    if (is_run(s, IS_CK_RELEASE) < 0) rc = EU_ESQL;
    else if (s->nck_alarm > 0) s->nck_alarm--;
  if (n == 1 && rc == EU_OK) {
    if (is_run(s, IS_CK_ROLLBACK) < 0 || (!keep && is_run(s, IS_CK_RELEASE) < 0)) {
      rc = EU_ESQL;
    } else {
      s->ck_fresh = keep;
      recall_alarm(s);
      /* the flag as the checkpoint began (no record of it: dirty, so the host reads the row) */
      s->alarm_dirty = s->nck_alarm > 0 ? s->ck_alarm[s->nck_alarm - 1].dirty : 1;
      if (!keep && s->nck_alarm > 0) s->nck_alarm--;
    }
  }
  s->turn = s->turn_on_ck = s->depth = s->txn_open = 0;
  return rc;
}

int eu_store_lost_code(eu_store *s) {
  return eu_store_baseline_lost(s) ? s->lost_code : 0;
}

int eu_store_baseline_lost(eu_store *s) {
  return s->baseline && sqlite3_get_autocommit(s->db);
}

/* After a failure that made SQLite end the transaction (note_lost), the
 * turn's earlier writes are gone: a later call of the same turn must not
 * run outside any transaction, where its writes would commit alone, and
 * the turn must not commit as if whole. Both are refused until it ends. */
static const char turn_lost[] = "the turn's transaction was rolled back by SQLite after an error in it "
                                "(a full database, a memory or SQL limit): the turn can only end";

int eu_store_touch(eu_store *s) {
  int rc;
  if ((rc = wake(s)) < 0) return rc;
  if (s->batching && !s->baseline && (rc = eu_store_baseline_begin(s)) < 0) return rc;
  if (s->baseline) {
    if (sqlite3_get_autocommit(s->db))
      return fail(s, EU_ESQL, s->turn ? turn_lost : "the run's transaction was rolled back by SQLite");
    if (s->turn) return EU_OK;
    if (s->ck_fresh) {
      s->ck_fresh = 0;
      s->turn_on_ck = 1;
    } else {
      rc = is_run(s, IS_TURN_BEGIN);
      if (rc < 0) return rc;
      s->turn_on_ck = 0;
    }
    s->turn = 1;
    s->depth = 0;
    s->turn_changes = sqlite3_total_changes64(s->db);
    s->turn_writer = 0;
    return EU_OK;
  }
  if (!sqlite3_get_autocommit(s->db)) return EU_OK;
  if (s->txn_open) return fail(s, EU_ESQL, turn_lost);
  s->depth = 0;
  rc = is_run(s, IS_BEGIN);
  if (rc == EU_OK) {
    s->txn_open = 1;
    s->turn_changes = sqlite3_total_changes64(s->db);
    s->turn_writer = 0;
  }
  return rc;
}

int eu_store_turn_wrote(eu_store *s) {
  if (!eu_store_in_turn(s)) return 0;
  return s->turn_writer || sqlite3_total_changes64(s->db) != s->turn_changes;
}

int eu_store_in_turn(eu_store *s) {
  if (s->baseline) return s->turn;
  return s->txn_open || (s->db && !sqlite3_get_autocommit(s->db));
}

int eu_store_commit(eu_store *s) {
  int rc;
  if (s->baseline) {
    int on_ck = s->turn_on_ck;
    if (!s->turn) return EU_OK;
    reset_busy(s);
    s->turn = s->turn_on_ck = 0;
    s->depth = 0;
    if (sqlite3_get_autocommit(s->db)) return fail(s, EU_ESQL, "the run's transaction was rolled back by SQLite");
    return on_ck ? EU_OK : is_run(s, IS_TURN_RELEASE);
  }
  if (!s->db || sqlite3_get_autocommit(s->db)) {
    s->depth = 0;
    if (!s->txn_open) return EU_OK;
    s->txn_open = 0;
    return fail(s, EU_ESQL, turn_lost);
  }
  reset_busy(s);
  rc = commit_all(s);
  s->depth = 0;
  s->txn_open = 0;
  return rc;
}

int eu_store_rollback(eu_store *s) {
  int rc;
  if (s->baseline) {
    int on_ck = s->turn_on_ck;
    if (!s->turn) return EU_OK;
    reset_busy(s);
    s->turn = s->turn_on_ck = 0;
    s->depth = 0;
    if (sqlite3_get_autocommit(s->db)) return EU_OK;
    if (on_ck) {
      /* ROLLBACK TO leaves the checkpoint's savepoint open, as it began */
      rc = is_run(s, IS_CK_ROLLBACK);
      if (rc == EU_OK) {
        s->ck_fresh = 1;
        recall_alarm(s);
      }
      return rc;
    }
    rc = is_run(s, IS_TURN_ROLLBACK);
    if (rc < 0) return rc;
    return is_run(s, IS_TURN_RELEASE);
  }
  s->depth = 0;
  s->txn_open = 0;
  if (!s->db || sqlite3_get_autocommit(s->db)) return EU_OK;
  reset_busy(s);
  rc = is_run(s, IS_ROLLBACK);
  s->depth = 0;
  return rc;
}

int eu_store_savepoint(eu_store *s) {
  int rc = eu_store_touch(s);
  if (rc < 0) return rc;
  rc = is_run(s, IS_SAVEPOINT);
  if (rc < 0) return rc;
  s->depth++;
  return EU_OK;
}

/* SQLite rolls a whole transaction back by itself after some failures
 * (SQLITE_FULL, SQLITE_IOERR, ...): then no savepoint is left to end. */
static int check_depth(eu_store *s) {
  if (s->depth > 0 && sqlite3_get_autocommit(s->db)) {
    s->depth = 0;
    return fail(s, EU_ESQL, "the transaction was rolled back by SQLite inside transactionSync");
  }
  if (s->depth == 0) return fail(s, EU_EINVAL, "no savepoint is open");
  return EU_OK;
}

int eu_store_release(eu_store *s) {
  int rc = check_depth(s);
  if (rc < 0) return rc;
  rc = is_run(s, IS_RELEASE);
  if (rc < 0) return rc;
  s->depth--;
  return EU_OK;
}

int eu_store_rollback_to(eu_store *s) {
  int rc = check_depth(s);
  if (rc < 0) return rc;
  reset_busy(s);
  rc = is_run(s, IS_ROLLBACK_TO);
  if (rc < 0) return rc;
  rc = is_run(s, IS_RELEASE);
  if (rc < 0) return rc;
  s->depth--;
  return EU_OK;
}

/* The store's own tables, where they are made when first written (lazy) */

/* Whether the store's own table name is there: 1, 0, or an error. */
static int has_table(eu_store *s, const char *name) {
  int rc;
  if (!s->lazy) return 1;
  if ((rc = wake(s)) < 0) return rc;
  {
    ENTER(s);
    /* with no column named, SQLITE_OK when the table is there and SQLITE_ERROR when not */
    rc = sqlite3_table_column_metadata(s->db, "main", name, NULL, NULL, NULL, NULL, NULL, NULL);
    LEAVE();
  }
  if (rc == SQLITE_OK) return 1;
  if (rc == SQLITE_ERROR) return 0;
  return fail_sql(s, rc);
}

/* Makes the store's own table name, by sql, where it is not there yet: in
 * the write's transaction, so a rollback of the write takes it too. */
static int need_table(eu_store *s, const char *name, const char *sql) {
  int rc = has_table(s, name);
  if (rc < 0) return rc;
  return rc ? EU_OK : eu_store_exec_internal(s, sql);
}

/* The KV table */

static int bind_key(eu_store *s, sqlite3_stmt *st, int i, const char *key, size_t klen) {
  int rc = sqlite3_bind_text64(st, i, key, klen, SQLITE_STATIC, SQLITE_UTF8);
  return rc == SQLITE_OK ? EU_OK : fail_sql(s, rc);
}

int eu_store_kv_get(eu_store *s, const char *key, size_t klen,
                    const void **val, size_t *vlen) {
  sqlite3_stmt *st = NULL;
  int rc;
  if ((rc = eu_store_touch(s)) < 0) return rc;
  if ((rc = has_table(s, EU_KV)) <= 0) return rc;  /* 0: not found */
  if ((rc = is_prepare(s, IS_KV_GET, &st)) < 0) return rc;
  if ((rc = bind_key(s, st, 1, key, klen)) < 0) return rc;
  rc = is_step(s, st);
  if (rc == 1) {
    /* Left on its row: the bytes stay valid until the statement's next use. */
    *val = sqlite3_column_blob(st, 0);
    *vlen = (size_t)sqlite3_column_bytes(st, 0);
    return 1;
  }
  end_stmt(s, st);
  return rc;
}

int eu_store_kv_put(eu_store *s, const char *key, size_t klen,
                    const void *val, size_t vlen) {
  sqlite3_stmt *st = NULL;
  int rc;
  if ((rc = eu_store_touch(s)) < 0) return rc;
  if ((rc = need_table(s, EU_KV, EU_KV_TABLE)) < 0) return rc;
  if ((rc = is_prepare(s, IS_KV_PUT, &st)) < 0) return rc;
  if ((rc = bind_key(s, st, 1, key, klen)) < 0) return rc;
  /* A NULL pointer would bind NULL, which the table refuses. */
  rc = vlen ? sqlite3_bind_blob64(st, 2, val, vlen, SQLITE_STATIC) : sqlite3_bind_zeroblob(st, 2, 0);
  if (rc != SQLITE_OK) return fail_sql(s, rc);
  rc = is_step(s, st);
  end_stmt(s, st);
  return rc < 0 ? rc : EU_OK;
}

int eu_store_kv_delete(eu_store *s, const char *key, size_t klen) {
  sqlite3_stmt *st = NULL;
  int rc;
  if ((rc = eu_store_touch(s)) < 0) return rc;
  if ((rc = has_table(s, EU_KV)) <= 0) return rc;  /* 0: nothing deleted */
  if ((rc = is_prepare(s, IS_KV_DEL, &st)) < 0) return rc;
  if ((rc = bind_key(s, st, 1, key, klen)) < 0) return rc;
  rc = is_step(s, st);
  end_stmt(s, st);
  if (rc < 0) return rc;
  return sqlite3_changes(s->db) > 0;
}

/* Deletes every pair, in the turn the caller has begun. */
static int clear_kv(eu_store *s) {
  int rc = has_table(s, EU_KV);
  return rc <= 0 ? rc : is_run(s, IS_KV_DEL_ALL);
}

int eu_store_kv_delete_all(eu_store *s) {
  int rc = eu_store_touch(s);
  return rc < 0 ? rc : clear_kv(s);
}

int eu_store_kv_list(eu_store *s, const eu_kv_range *r, eu_kv_each each, void *ud) {
  sqlite3_stmt *st = NULL;
  int rc;
  if ((rc = eu_store_touch(s)) < 0) return rc;
  if ((rc = has_table(s, EU_KV)) <= 0) return rc;  /* 0: no pairs */
  if ((rc = is_prepare(s, r->reverse ? IS_KV_LIST_REV : IS_KV_LIST, &st)) < 0) return rc;
  if ((rc = bind_key(s, st, 1, r->lo ? r->lo : "", r->lo ? r->lolen : 0)) < 0) return rc;
  rc = r->hi ? sqlite3_bind_text64(st, 2, r->hi, r->hilen, SQLITE_STATIC, SQLITE_UTF8)
             : sqlite3_bind_zeroblob(st, 2, 0);
  if (rc == SQLITE_OK) rc = sqlite3_bind_int64(st, 3, r->limit < 0 ? -1 : r->limit);
  if (rc != SQLITE_OK) return fail_sql(s, rc);
  /* each runs outside internal mode: is_step sets it around the step only,
   * so a Lua error raised by each cannot leave the authorizer open. */
  while ((rc = is_step(s, st)) == 1) {
    rc = each(ud, (const char *)sqlite3_column_text(st, 0), (size_t)sqlite3_column_bytes(st, 0),
              sqlite3_column_blob(st, 1), (size_t)sqlite3_column_bytes(st, 1));
    if (rc != 0) break;
  }
  end_stmt(s, st);
  return rc;
}

/* The alarm */

int eu_store_get_alarm(eu_store *s, int *has, int64_t *at, int *retry) {
  sqlite3_stmt *st = NULL;
  int rc;
  *has = 0;
  *at = 0;
  *retry = 0;
#ifdef NDEBUG
  if (s->alarm_known && !s->parked) {
    *has = s->alarm_has;
    *at = s->alarm_at;
    *retry = s->alarm_retry;
    return EU_OK;
  }
#endif
  /* No touch: the host reads the alarm between turns, and a read must not
   * leave a turn open behind it. Inside a turn it sees the turn's writes. */
  if ((rc = has_table(s, EU_ALARM)) < 0) return rc;
  if (rc == 0) {
    assert(!s->alarm_known || !s->alarm_has);
    know_alarm(s, 0, 0, 0);
    return EU_OK;
  }
  if ((rc = is_prepare(s, IS_ALARM_GET, &st)) < 0) return rc;
  rc = is_step(s, st);
  if (rc == 1) {
    *has = 1;
    *at = sqlite3_column_int64(st, 0);
    *retry = sqlite3_column_int(st, 1);
  }
  end_stmt(s, st);
  if (rc < 0) return rc;
  /* a build with assertions reads the row every time, and checks what it would have answered */
  assert(!s->alarm_known || (s->alarm_has == *has && s->alarm_at == *at && s->alarm_retry == *retry));
  know_alarm(s, *has, *at, *retry);
  return EU_OK;
}

int eu_store_set_alarm(eu_store *s, int64_t at, int retry) {
  sqlite3_stmt *st = NULL;
  int rc;
  if ((rc = eu_store_touch(s)) < 0) return rc;
  if ((rc = need_table(s, EU_ALARM, EU_ALARM_TABLE)) < 0) return rc;
  if ((rc = is_prepare(s, IS_ALARM_SET, &st)) < 0) return rc;
  sqlite3_bind_int64(st, 1, at);
  sqlite3_bind_int(st, 2, retry);
  rc = is_step(s, st);
  end_stmt(s, st);
  if (rc < 0) return rc;
  s->alarm_dirty = 1;
  know_alarm(s, 1, at, retry);
  return EU_OK;
}

int eu_store_delete_alarm(eu_store *s) {
  int rc = eu_store_touch(s);
  if (rc >= 0) rc = has_table(s, EU_ALARM);
  if (rc < 0) return rc;
  if (rc && (rc = is_run(s, IS_ALARM_DEL)) < 0) return rc;
  s->alarm_dirty = 1;
  know_alarm(s, 0, 0, 0);
  return EU_OK;
}

int eu_store_alarm_dirty(eu_store *s) { return s->alarm_dirty; }

void eu_store_clear_alarm_dirty(eu_store *s) { s->alarm_dirty = 0; }

/* deleteAll and the database's size */

/* Appends name to b as a quoted SQL identifier. */
static int put_ident(eu_buf *b, const char *name) {
  int rc = eu_buf_putc(b, '"');
  for (; rc == EU_OK && *name; name++)
    rc = *name == '"' ? eu_buf_puts(b, "\"\"") : eu_buf_putc(b, *name);
  return rc == EU_OK ? eu_buf_putc(b, '"') : rc;
}

/* The drops deleteAll makes are the object's work, so they are held to
 * the limits of one user statement (steps, what it allocates, the
 * object's memory), counted from meter_begin on. */
static void meter_begin(eu_store *s) {
  s->steps = 0;
  s->over_steps = 0;
  s->mem->refused = s->mem->over = 0;
  s->mem->charged = 0;
  s->mem->charge_max = (uint64_t)EU_STORE_MAX_STEPS * EU_STORE_BYTES_PER_STEP;
}

static int exec_metered(eu_store *s, const char *sql) {
  sqlite3_stmt *st = NULL;
  eu_sqlmem *m = s->mem;
  int rc, saved = s->internal;
  ENTER(s);
  s->internal = 1;
  s->denied = 0;
  m->enforce = m->charging = 1;
  s->stepping = 1;
  rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
  if (rc == SQLITE_OK)
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {}
  s->stepping = 0;
  m->enforce = m->charging = 0;
  s->internal = saved;
  if (rc == SQLITE_DONE || rc == SQLITE_OK) {
    sqlite3_finalize(st);
    LEAVE();
    return EU_OK;
  }
  if (s->over_steps || (m->over && (rc & 0xff) == SQLITE_NOMEM)) {
    m->over = m->refused = 0;
    rc = fail(s, EU_ESQL, "storage:deleteAll ran past the CPU limit (more than 200,000,000 SQLite steps, "
              "counting a step for each 4 bytes it allocates)");
    note_lost(s, SQLITE_INTERRUPT);
  } else {
    rc = fail_sql(s, rc);
  }
  sqlite3_finalize(st);
  LEAVE();
  return rc;
}

/* What deleteAll drops, in order: views, then virtual tables (which take
 * their shadow tables with them), then tables, each set by name; never
 * SQLite's own tables (sqlite_*) nor the store's (_eutaxy_*). Each entry
 * of *list is a DROP statement and its NUL. */
static const char drop_list_sql[] =
  "SELECT schema, type = 'view', name FROM ("
  "  SELECT 'main' AS schema, type, name, sql FROM main.sqlite_schema"
  "  UNION ALL SELECT 'temp', type, name, sql FROM temp.sqlite_schema)"
  " WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
  "   AND name NOT LIKE '\\_eutaxy\\_%' ESCAPE '\\'"
  " ORDER BY schema, type = 'table', sql NOT LIKE 'CREATE VIRTUAL TABLE%', name";

static int list_drops(eu_store *s, eu_buf *list, int *n) {
  sqlite3_stmt *st = NULL;
  int rc, saved = s->internal;
  *n = 0;
  {
    ENTER(s);
    s->internal = 1;
    rc = sqlite3_prepare_v2(s->db, drop_list_sql, -1, &st, NULL);
    s->internal = saved;
    LEAVE();
  }
  if (rc != SQLITE_OK) return fail_sql(s, rc);
  while ((rc = is_step(s, st)) == 1) {
    int e = eu_buf_puts(list, sqlite3_column_int(st, 1) ? "DROP VIEW IF EXISTS " : "DROP TABLE IF EXISTS ");
    if (e == EU_OK) e = put_ident(list, (const char *)sqlite3_column_text(st, 0));
    if (e == EU_OK) e = eu_buf_putc(list, '.');
    if (e == EU_OK) e = put_ident(list, (const char *)sqlite3_column_text(st, 2));
    if (e == EU_OK) e = eu_buf_putc(list, 0);
    if (e != EU_OK) {
      rc = fail(s, EU_ENOMEM, "out of memory");
      break;
    }
    (*n)++;
  }
  {
    ENTER(s);
    sqlite3_finalize(st);
    LEAVE();
  }
  return rc < 0 ? rc : EU_OK;
}

/* Drops what list_drops listed, letting SQLite keep the foreign keys: a
 * table whose rows another table still refers to without deferring
 * (RESTRICT, or an immediate NO ACTION) cannot go before that table, so a
 * drop SQLite refuses for a constraint waits for the next pass. Each pass
 * drops at least one table, or what is left refers to itself in a cycle,
 * and is dropped with the foreign keys deferred (*deferring). In this
 * order the rows a drop deletes settle the references they broke, and a
 * reference broken before deleteAll goes with its row. Not so within that
 * cycle: with the keys deferred SQLite counts apart, and setting the
 * pragma back off forgets, what the drops settle, so a reference broken
 * before deleteAll in one of its tables still fails the turn's commit. */
static int drop_listed(eu_store *s, const eu_buf *list, int n, int *dropped, int *deferring) {
  char *done = calloc((size_t)(n ? n : 1), 1);
  int left = n, rc = EU_OK;
  if (!done) return fail(s, EU_ENOMEM, "out of memory");
  while (left > 0 && rc >= 0) {
    const char *p = list->p;
    int i, progress = 0;
    for (i = 0; i < n && rc >= 0; i++, p += strlen(p) + 1) {
      if (done[i]) continue;
      rc = exec_metered(s, p);
      if (rc >= 0) {
        done[i] = 1;
        left--;
        progress = *dropped = 1;
      } else if ((sqlite3_extended_errcode(s->db) & 0xff) == SQLITE_CONSTRAINT) {
        /* A reference (RESTRICT raises as a trigger) or what an ON DELETE
         * action did to a table still there: its turn comes later. */
        rc = EU_OK;
      }
    }
    if (rc >= 0 && !progress && left > 0) {
      if (*deferring) {
        char msg[EU_ERRLEN];
        memcpy(msg, s->errmsg, sizeof msg);
        rc = eu_store_error(s, EU_ESQL, "storage:deleteAll: %s", msg);
      } else if ((rc = is_run(s, IS_FK_DEFER)) >= 0) {
        *deferring = 1;
      }
    }
  }
  free(done);
  return rc;
}

int eu_store_delete_all(eu_store *s) {
  eu_buf list;
  int64_t deferred = 0;
  int rc, n = 0, dropped = 0, deferring = 0;
  if ((rc = eu_store_savepoint(s)) < 0) return rc;
  reset_busy(s);  /* a statement still reading a table would keep it from being dropped */
  meter_begin(s);
  eu_buf_init(&list);
  if ((rc = is_integer(s, IS_FK_DEFERRED, &deferred)) >= 0 && (rc = list_drops(s, &list, &n)) >= 0) {
    if (deferred) deferring = 1;  /* the user's own setting: keys are deferred already */
    rc = drop_listed(s, &list, n, &dropped, &deferring);
    if (deferring && !deferred) {
      char msg[EU_ERRLEN];
      memcpy(msg, s->errmsg, sizeof msg);
      if (is_run(s, IS_FK_UNDEFER) < 0 && rc >= 0) rc = EU_ESQL;
      else memcpy(s->errmsg, msg, sizeof msg);
    }
  }
  eu_buf_free(&list);
  if (rc >= 0) rc = clear_kv(s);
  if (rc >= 0) rc = eu_store_delete_alarm(s);
  if (rc < 0) {
    char msg[EU_ERRLEN];
    memcpy(msg, s->errmsg, sizeof msg);
    eu_store_rollback_to(s);
    memcpy(s->errmsg, msg, sizeof msg);
    return rc;
  }
  /* A DROP need not change a row, so the turn says it wrote. */
  if (dropped) s->turn_writer = 1;
  return eu_store_release(s);
}

int eu_store_database_size(eu_store *s, int64_t *bytes) {
  int64_t pages = 0, size = 0;
  int rc;
  *bytes = 0;
  if ((rc = eu_store_touch(s)) < 0) return rc;
  if ((rc = is_integer(s, IS_PAGE_COUNT, &pages)) < 0 || (rc = is_integer(s, IS_PAGE_SIZE, &size)) < 0)
    return rc;
  *bytes = pages * size;
  return EU_OK;
}

/* Snapshots */

int eu_store_snapshot(eu_store *s, unsigned char **data, size_t *len) {
  sqlite3_int64 sz = 0;
  unsigned char *img, *copy;
  int rc, saved = s->internal;
  *data = NULL;
  *len = 0;
  if (eu_store_in_turn(s))
    return fail(s, EU_EINVAL, "cannot snapshot a store inside a turn: commit or roll back first");
  if ((rc = wake(s)) < 0) return rc;
  s->internal = 1;  /* serialize asks SQLite for the page count with a PRAGMA */
  img = sqlite3_serialize(s->db, "main", &sz, 0);
  s->internal = saved;
  if (!img) return fail(s, EU_ENOMEM, "cannot serialize the database (out of memory)");
  copy = malloc(sz > 0 ? (size_t)sz : 1);
  if (!copy) {
    sqlite3_free(img);
    return fail(s, EU_ENOMEM, "out of memory");
  }
  memcpy(copy, img, (size_t)sz);
  sqlite3_free(img);
  *data = copy;
  *len = (size_t)sz;
  return EU_OK;
}

int eu_store_restore(eu_store *s, const unsigned char *data, size_t len) {
  int rc;
  if (len == 0) return fail(s, EU_EINVAL, "an empty image is not a database");
  if ((rc = wake(s)) < 0) return rc;
  forget_alarm(s);
  rc = eu_store_rollback(s);
  if (rc < 0) return rc;
  s->ck_fresh = 0;
  /* Statements compiled against the old schema go; the host's come back on
   * their next use. */
  finalize_all(s);
  if ((rc = deserialize(s, data, len)) != SQLITE_OK)
    return rc == SQLITE_NOMEM ? fail(s, EU_ENOMEM, "out of memory") : fail_sql(s, rc);
  s->depth = 0;
  /* The database is the image now: the file is no longer the store's. */
  free(s->path);
  s->path = NULL;
  s->in_memory = 0;
  sqlite3_db_config(s->db, SQLITE_DBCONFIG_ENABLE_FKEY, 1, (int *)NULL);  /* as a new connection has */
  /* Reads the new schema, so an image that is not a database fails here. */
  rc = eu_store_exec_internal(s, eu_schema);
  if (rc == EU_OK && s->lim.max_bytes > 0) rc = apply_quota(s, 0);
  return rc == EU_ESQL ? EU_ECORRUPT : rc;
}
