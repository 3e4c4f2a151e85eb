/*
 * serve.c: `eutaxy serve`, the worker and its objects behind libuv TCP.
 *
 * One world runs every request, as in `check`, but its virtual clock is kept
 * equal to the wall clock: after each batch of requests and on a timer set
 * for the world's next queued event, the world is advanced to now. Sleeps,
 * alarms and cron triggers therefore happen in real time, and an alarm that
 * came due while the server was down is simply in the past: it fires at the
 * first advance. (A cron is due at its next time after the start: one
 * missed while the server was down is not run, as on Cloudflare.)
 *
 * --test-clock gives the server a clock of its own instead, which stands
 * still until POST /__eutaxy/clock?advance=MS moves it on: a test sees a
 * cron or an alarm fire without sleeping for it.
 *
 * Each connection has an eu_http_conn (http.c) that turns bytes into whole
 * requests; each request becomes a slot of the world. Answers leave in the
 * order the requests came, so pipelining works whatever order the world
 * finishes them in.
 *
 * Storage: one SQLite file per object under the state directory, named from
 * a hash of the binding name and the object's 64-hex id (a name never picks
 * a path), in WAL mode. Each file also holds a row naming its object
 * (_eutaxy_serve_object), which is how stored alarms are re-armed at start-up.
 * A new object's database is in memory until the round of syncs that
 * covers its first commit writes it to its file whole.
 *
 * The output gate, with group commit: the world commits every turn into the
 * WAL (synchronous=NORMAL: a write, no fsync), and a wal hook counts the
 * commits. An answer is stamped, when it is found done, with the count of
 * commits made so far; it leaves only once a sync covering that count has
 * finished. The turns of one pump (every request read in one round of the
 * event loop) are savepoints in one transaction per file, committed together
 * at the pump's end. A round of syncs is one fdatasync per file committed to
 * since the last round (or one syncfs when they are many), run on libuv's
 * thread pool, so the world goes on running requests meanwhile; rounds
 * overlap, and a round's commits are durable once it and every older round
 * are done. Under load every sync covers many requests of many objects.
 * --durability=process skips the syncs: a commit then survives the process
 * (it is in the kernel) but not a power loss.
 *
 * Opening an object's file (a new object's, or an evicted one's) runs on
 * the same pool while the world holds the object's calls (store_opener; see
 * "opening files off the loop").
 *
 * Objects come and go: one idle for --evict-after seconds, or the least
 * recently active beyond --max-resident, is evicted (isolate and file
 * closed) and comes back on its next call or alarm. Below that, the files
 * of resident objects are a pool: only as many connections stay open as
 * the descriptor limit leaves room for, the least recently used of the
 * others parked (connection closed, isolate kept) and reopened on their
 * next use (see "the pool of open connections"). And of the resident
 * ones, at most --max-awake have their heaps unpacked; the others' are
 * packed (eu_world_opts.berths), about a tenth of the size, and unpacked
 * on their next event with their in-memory state whole.
 *
 * Outbound fetches: an eutaxy.fetch of the worker or an object is a yield
 * point, as an RPC is; the world hands its wire request here (on_outbound).
 * The output gate holds it as it holds an answer: it leaves (outbound.c,
 * libcurl on this loop) once the commits made before it are durable, so a
 * request never tells the outside about writes a crash could still take
 * back. Its result resumes the waiting invocation as a Response or an
 * error value.
 *
 * WebSockets: a request asking for a WebSocket upgrade (ws.c checks its
 * handshake; a bad one is refused here with 400 or 426) takes the
 * connection over from HTTP, and goes to the worker as any request does.
 * If the answer is 101 with a socket an object accepted, the 101 head
 * leaves, the connection speaks RFC 6455 from then on (ws.c), and the
 * socket is the world's (world.h): the client's messages and close go to
 * it, and what objects send comes back through ws_out. What an object
 * sends is held, as an answer is, until the commits made before it are
 * durable. An object that hibernates is evicted as any idle one is; its
 * sockets stay open here. A restart closes every socket with 1012.
 *
 * This file must not reach into the world's internals or parse HTTP itself.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lualib.h>
#include <uv.h>

#include "clone.h"
#include "eutaxy.h"
#include "faultsim.h"
#include "http.h"
#include "outbound.h"
#include "ws.h"
#include "prng.h"
#include "serve.h"
#include "sqlmem.h"
#include "store.h"
#include "world.h"

/* Linux's, in glibc since 2.14; <unistd.h> declares it only under
 * _GNU_SOURCE, which this project's own sched.h cannot be compiled with. */
extern int syncfs(int fd);

#define EU_SERVE_LOG_PATH 200   /* bytes of a path shown in the request log */
#define EU_SERVE_ROUNDS 4       /* rounds of syncs in flight at once */
#define EU_SERVE_SYNCFS 4       /* files in a round from which one syncfs syncs them all */

typedef struct server server;

static void fail_server(server *s, const char *fmt, const char *path, int e);
static void fail_server_why(server *s, const char *fmt, const char *path, const char *why);

typedef struct served_store {
  int ns;
  char hex[65];
  char *path;
  eu_store *store;
  eu_object *obj;           /* NULL until the world asks for the store */
  server *srv;
  /* The file or its WAL is new: both and their directory entries need a
   * sync. The round that syncs them clears it when it starts: a later
   * round, which ends after it, needs only the WAL's. */
  int fresh;
  int dirty;                /* committed to since its last sync began */
  int syncing;              /* syncs of it in flight: it must not be dropped */
  int wal_pages;            /* pages in the WAL after the last commit */
  int empty_wal;            /* its WAL is new or empty: no commit in it yet (serve_then_empty_wal) */
  int writing;              /* its database, in memory, is being written to its file (take_image) */
  int no_wal;               /* written from memory and parked: its opening makes its WAL */
  int blank;                /* opened from the blank database, and no row names its object yet */
  uint64_t commits;         /* commits into it */
  int slot;                 /* where it is in the server's stores */
  int open;                 /* its connection is open (not parked): it is in the server's open list */
  struct served_store *newer, *older;  /* the open list, most recently used first */
} served_store;

/* A sync of one file, or of the whole file system holding the state
 * directory when a round has many files (one syncfs costs about what one
 * fdatasync does, and covers them all). */
typedef struct sync_job {
  uv_work_t req;
  served_store *ss;         /* the one file; NULL for a syncfs */
  int round;                /* index in the server's ring of rounds */
  int fresh;                /* the file is new: sync the database file too */
  int image;                /* the file is written from memory in the round: it has no WAL */
  int dir;                  /* sync only the state directory (the entries of the round's new files) */
  int dirfd;
  int err;                  /* errno of a failed sync, or 0 */
  server *srv;
  struct sync_job *next;    /* the round's syncs, held by the job that writes its images */
  int ran;                  /* run by the job that wrote the images */
  int n;                    /* files a syncfs covers */
  served_store *many[];
} sync_job;

/* A database in memory on its way to its file. */
typedef struct image {
  served_store *ss;
  unsigned char *data;      /* a copy, so the store goes on meanwhile */
  size_t len;
  uint64_t commits;         /* ss's commits when it was taken */
  int err;                  /* errno of a failed write, or 0 */
  int rc;                   /* SQLite's code of a failed write through its VFS, or SQLITE_OK */
  sqlite3 *closing;         /* the connection that held it, once the store has let go of it */
} image;

/* The databases in memory a round covers, written on the pool before the
 * round's syncs run (see "new objects in memory"). */
typedef struct image_job {
  uv_work_t req;
  server *srv;
  sync_job *syncs;          /* queued once the images are in their files */
  int n;
  image images[];
} image_job;

typedef struct pending {
  int slot;                 /* 0: never submitted, answer 500 */
  int stamped;              /* found done: need is set */
  uint64_t need;            /* commits that must be durable before the answer leaves */
  int lost;                 /* in flight when a batch was lost: answer this status (507, 500) */
  int keep_alive;
  int head;                 /* a HEAD request: headers only */
  char method[16];
  char *path;
  uint64_t t0;              /* uv_hrtime at arrival */
  char *direct;             /* an answer the server makes itself (the test clock's), or NULL */
  int direct_status;
  int clock;                /* the test clock's answer: it waits for the world to catch up (clock_settled) */
  char *raw;                /* a whole response made here (a refused WebSocket handshake), or NULL */
  size_t raw_len;
  char *ws_head;            /* a WebSocket upgrade's 101 head, sent if the worker answers 101 */
  size_t ws_head_len;
  int64_t sock;             /* set by respond: the 101's socket, which the connection becomes */
  struct pending *next;
} pending;

typedef struct conn {
  uv_tcp_t tcp;
  uv_timer_t timer;         /* header and idle timeouts */
  server *srv;
  eu_http_conn *http;
  pending *head, *tail;
  int failed_status;        /* the http layer refused: answer this once the queue is empty */
  int eof;                  /* the client will send nothing more */
  int close_after;          /* close once the writes in flight are done */
  int closing;
  int handles;              /* of tcp and timer, not yet closed */
  int nwrites;
  const char *timed_out;    /* why the connection failed with 408 */
  uint64_t busy_since;      /* loop time a request began arriving; 0 between requests */
  uint64_t last_io;         /* loop time of the last read or write */
  /* A WebSocket: its layer, the world's socket, and whether the world
   * still has it open (it must hear of the connection's end) */
  eu_ws_conn *ws;
  int64_t sock;
  int ws_open;
  int ws_closing;           /* our close frame is out: the peer's close, or the timer, ends it */
  struct conn *prev, *next;
} conn;

/* An outbound fetch of an invocation: held until what it follows is
 * durable, then sent, then answered. */
typedef struct outgoing {
  server *srv;
  int64_t task;             /* the invocation waiting for it */
  char *payload;            /* its wire request, encoded; NULL once sent */
  size_t len;
  int stamped;
  uint64_t need;            /* commits that must be durable before it leaves */
  char what[240];           /* "GET https://..." for the log */
  uint64_t t0;              /* uv_hrtime when it was sent */
  struct outgoing *next;
} outgoing;

typedef struct wreq {
  uv_write_t req;
  conn *c;
  char *data;
} wreq;

struct server {
  eu_serve_opts o;
  uv_loop_t loop;
  uv_tcp_t listener;
  uv_timer_t timer;         /* the world's next event */
  uv_timer_t sweep;         /* idle eviction */
  uv_idle_t idle;           /* one pump after each round of reads */
  uv_signal_t sigint, sigterm;
  int listening, stopping, failed;
  int64_t clock;            /* --test-clock's time, ms since 1970 */
  int accept_waiting;       /* a connection waits in the backlog for a free place */
  int nconns, max_conns;
  eu_world *w;
  lua_State *L;             /* builds wire requests and reads wire responses */
  char state[4096];
  int dirfd;                /* the state directory, for syncing new entries */
  char authority[300];      /* host:port, for a request without a usable Host */
  served_store **stores;    /* the files of resident objects, open or parked */
  int nstores, capstores;
  served_store **by_object; /* the file of each object that has one, by eu_object_index */
  int capby;
  served_store **dirty;     /* the files committed to since the last round of syncs began */
  int ndirty, capdirty;
  char *blank;              /* what a new object's file starts as (make_blank), or NULL */
  size_t blank_len;
  served_store *mru, *lru;  /* the stores whose connection is open */
  int nopen, max_open;      /* how many are, and how many may be */
  int nopening;             /* files being opened on the thread pool (open_elsewhere) */
  struct open_job *to_open; /* of those, the ones not yet handed to the pool, */
  struct open_job **to_open_end;  /* oldest first (open_batches) */
  conn *conns;
  int *orphans;             /* slots of requests whose connection went away */
  int norphans, caporphans;
  uint64_t nrequests;
  uint64_t written;         /* commits into the WAL of any file */
  uint64_t durable;         /* commits known to be on disk */
  /* Rounds of syncs in flight, oldest first in a ring: each makes durable
   * the commits made before it began, once it and every older one are done. */
  struct {
    uint64_t target;
    int pending;            /* its files not yet synced */
  } rounds[EU_SERVE_ROUNDS];
  int round0, nrounds;
  int syncs_in_flight;
  eu_outbound *out;         /* outbound fetches; made at the first */
  outgoing *outgoing;       /* held or sent, oldest first */
  /* WebSockets: connections by socket id (id - 1), and what objects sent,
   * held until durable: records (world.h) each after its socket and the
   * commits it needs, in the order sent */
  conn **ws_conns;
  int capws;
  eu_buf ws_held;
  size_t ws_held_off;       /* what of ws_held is sent */
  size_t ws_held_stamped;   /* what of ws_held has the commits it needs set (stamp_ws_held) */
  uint64_t nws;             /* clients connected: their labels */
  int64_t swept_clock;      /* --test-clock's time at the last eviction */
  int64_t last_emfile;
  char rbuf[64 * 1024];
};

static void pump(server *s);
static void request_pump(server *s);
static void close_conn(struct conn *c);
static void write_ws(struct conn *c);
static void feed_ws(struct conn *c, const char *p, size_t n);
static void send_ws_held(server *s);
static void catch_up(server *s);
static void arm_timer(conn *c);

/* ---- clocks ----------------------------------------------------------- */

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The server's clock: the wall clock, or --test-clock's. */
static int64_t now_ms(server *s) {
  return s->o.test_clock ? s->clock : wall_ms();
}

/* ---- the state directory and its stores ------------------------------- */

static int mkdir_p(const char *path, char *err, size_t errlen) {
  char tmp[4096];
  size_t i, n = strlen(path);
  if (n == 0 || n >= sizeof tmp) return eu_err(err, errlen, EU_EINVAL, "invalid state directory");
  memcpy(tmp, path, n + 1);
  for (i = 1; i <= n; i++) {
    if (tmp[i] != '/' && tmp[i] != '\0') continue;
    tmp[i] = '\0';
    if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
      return eu_err(err, errlen, EU_EINVAL, "cannot create %s: %s", tmp, strerror(errno));
    tmp[i] = path[i];
  }
  return EU_OK;
}

/* The file of an object: a hash of binding and id, never anything a user chose. */
static void store_path(server *s, const char *binding, const char *hex, char *out, size_t n) {
  eu_buf b;
  uint64_t h1 = 0, h2 = 0;
  eu_buf_init(&b);
  if (eu_buf_puts(&b, binding) == EU_OK && eu_buf_putc(&b, 0) == EU_OK && eu_buf_puts(&b, hex) == EU_OK) {
    h1 = eu_hash64(b.p, b.n, UINT64_C(0x736572766531));
    h2 = eu_hash64(b.p, b.n, UINT64_C(0x736572766532));
  }
  eu_buf_free(&b);
  snprintf(out, n, "%s/%016" PRIx64 "%016" PRIx64 ".sqlite", s->state, h1, h2);
}

/* What every opening of a file runs, around the store's own tables. The
 * setup of a new file (the switch to WAL and the tables of the store and
 * of serve) runs with synchronous=OFF: SQLite would otherwise sync the new
 * WAL's header and its directory on this thread, two waits per new object.
 * Nothing is lost by it: no answer leaves before the next round of syncs,
 * which syncs a new file, its WAL and their directory entries with the
 * round's other files (sync_work). So does the first commit into a WAL
 * that is new or empty (serve_then_empty_wal); every later one is under
 * synchronous=NORMAL. */
static const char serve_first[] =
  "PRAGMA locking_mode = EXCLUSIVE;"
  "PRAGMA synchronous = OFF;"
  "PRAGMA journal_mode = WAL;";

#define SERVE_TABLES \
  "CREATE TABLE IF NOT EXISTS _eutaxy_serve_object(" \
  "  id INTEGER PRIMARY KEY CHECK (id = 1), binding TEXT NOT NULL, hex TEXT NOT NULL, name TEXT);"
/* The pages an object reads often stay; the rest are read again from the
 * kernel's cache. SQLite's default (2 MB) would let every resident object
 * hold that much. */
#define SERVE_CACHE "PRAGMA cache_size = -256;"

static const char serve_then[] = SERVE_TABLES "PRAGMA synchronous = NORMAL;" SERVE_CACHE;

/* A WAL that is new or empty (a new file's, or one written whole from
 * memory: see "new objects in memory") gets its header with its first
 * commit, which synchronous=NORMAL would sync on the loop: that commit
 * runs under OFF, and commit_batches sets NORMAL once it is made. */
static const char serve_then_empty_wal[] = SERVE_TABLES "PRAGMA synchronous = OFF;" SERVE_CACHE;

/* Every commit into an object's WAL: the file needs a sync before the
 * answers that follow it leave. It replaces SQLite's automatic checkpoint,
 * which the server runs itself once a sync has covered the pages. */
static int on_wal(void *ud, sqlite3 *db, const char *name, int pages) {
  served_store *ss = ud;
  server *s = ss->srv;
  (void)db; (void)name;
  if (!ss->dirty) {
    if (s->ndirty == s->capdirty) {
      int cap = s->capdirty ? s->capdirty * 2 : 64;
      served_store **a = realloc(s->dirty, (size_t)cap * sizeof *a);
      if (!a) {
        fail_server(s, "cannot sync %s: %s", ss->path, ENOMEM);
        return SQLITE_OK;
      }
      s->dirty = a;
      s->capdirty = cap;
    }
    s->dirty[s->ndirty++] = ss;
  }
  ss->dirty = 1;
  ss->commits++;
  ss->wal_pages = pages;
  ss->srv->written++;
  return SQLITE_OK;
}

/* A commit of a database in memory (see "new objects in memory"), which
 * has no WAL: counted as a commit into one is. */
static int on_commit_in_memory(void *ud) {
  on_wal(ud, NULL, NULL, 0);
  return 0;
}

/* ---- the pool of open connections ------------------------------------
 *
 * Each open store holds two descriptors (its database and its WAL) and its
 * SQLite memory (page cache, WAL index, schema, statements). Only
 * max_open of them stay open, however many objects are resident: when a
 * store is to open beyond that, the least recently used one that has no
 * transaction open is parked (eu_store_park: its connection closed, the
 * eu_store the world and the isolate hold kept), and reopens on its next
 * use. A parked store may still be dirty or in a round of syncs: a sync
 * opens the file by its name (sync_work), and parking never checkpoints,
 * so what was committed stays in the WAL as it was. Stores are parkable
 * between a batch's commit and the next turn (batches begin lazily), so
 * the stores a pump is using stay open; those alone may take the pool past
 * max_open for a moment, within the descriptors fill_defaults holds back. */

static void unlink_open(server *s, served_store *ss) {
  if (!ss->open) return;
  if (ss->newer) ss->newer->older = ss->older;
  else s->mru = ss->older;
  if (ss->older) ss->older->newer = ss->newer;
  else s->lru = ss->newer;
  ss->newer = ss->older = NULL;
  ss->open = 0;
  s->nopen--;
}

/* Puts ss first in the open list: just opened, or just used. */
static void link_open(server *s, served_store *ss) {
  unlink_open(s, ss);
  ss->older = s->mru;
  if (s->mru) s->mru->newer = ss;
  s->mru = ss;
  if (!s->lru) s->lru = ss;
  ss->open = 1;
  s->nopen++;
}

/* Parks the least recently used stores until one more may open. */
static void make_room(server *s) {
  served_store *ss = s->lru, *newer;
  for (; ss && s->nopen + s->nopening >= s->max_open; ss = newer) {
    newer = ss->newer;
    if (!eu_store_in_memory(ss->store) && eu_store_park(ss->store) == EU_OK) unlink_open(s, ss);
  }
}

/* A parked store is about to reopen. */
static void on_wake(void *ud, eu_store *st) {
  served_store *ss = ud;
  (void)st;
  if (ss->no_wal) {  /* the WAL it makes now, and its name, are synced with its first commit */
    ss->no_wal = 0;
    ss->fresh = 1;
  }
  make_room(ss->srv);
  link_open(ss->srv, ss);
}

static void close_served(served_store *ss) {
  unlink_open(ss->srv, ss);
  eu_store_close(ss->store);
  free(ss->path);
  free(ss);
}

/* The size of path+suffix in bytes, or -1 when it does not exist. */
static long long file_size(const char *path, const char *suffix) {
  char p[4300];
  struct stat st;
  snprintf(p, sizeof p, "%s%s", path, suffix);
  return stat(p, &st) == 0 ? (long long)st.st_size : -1;
}

/* A new object's database starts as a copy of a blank one, made once at
 * start-up: a database with the tables of the store and of serve, marked
 * as a WAL database in its header (the file format's version bytes, 18 and
 * 19: 2), so that its file, once written (see "new objects in memory"),
 * opens as one. It is made in memory, by the same SQL as a file. Without
 * one (it could not be made) a new object's file is made by SQLite and set
 * up as an existing one is checked, by the same SQL. */
static void make_blank(server *s) {
  char err[EU_ERRLEN];
  eu_store *st;
  unsigned char *img;
  sqlite3_int64 n = 0;
  if (eu_store_open_with(&st, NULL, serve_first, serve_then, EU_STORE_LAZY_TABLES, err, sizeof err) != EU_OK) return;
  img = sqlite3_serialize(eu_store_db(st), "main", &n, 0);
  eu_store_close(st);
  if (img && n >= 100 && (s->blank = malloc((size_t)n)) != NULL) {
    memcpy(s->blank, img, (size_t)n);
    s->blank[18] = s->blank[19] = 2;
    s->blank_len = (size_t)n;
  }
  sqlite3_free(img);
}

/* What an earlier version left in the state directory: new files made
 * ahead under .spare/, which nothing uses now. */
static void remove_spares(server *s) {
  char dir[4200], p[4500];
  DIR *d;
  struct dirent *e;
  snprintf(dir, sizeof dir, "%s/.spare", s->state);
  if (!(d = opendir(dir))) return;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(dir);
}

/* ---- new objects in memory --------------------------------------------
 *
 * Making a new object's file and opening it is most of what a new object
 * costs, and none of it is needed before the object's first round of
 * syncs. So an object whose file does not exist gets its database in
 * memory instead, made from the blank one (eu_store_open_image), and its
 * file only when a round of syncs is to cover its commits: on the pool,
 * the database is written whole under a name of its own (the file's, with
 * .new) and renamed into place; the round then syncs it and its name with
 * its other files. It has no WAL until it is opened again, and that
 * opening makes one, as it does any missing WAL (open_file): the round
 * after its first commit syncs both and their names. A crash before the
 * round ends may leave the file or not, as for any new file; no answer
 * that depends on it has left. A .new file a crash left is removed at the
 * next start.
 *
 * The store is then parked, so its next use opens the file. One that
 * cannot be (it holds temporary tables) stays in memory, and its database
 * is written whole again for each round that covers a commit of it,
 * renamed over the old one. The writes go through SQLite's VFS, so the
 * fault simulation fails them as it fails any file's I/O. */

/* Takes a copy of ss's database, in memory. 0 when
 * taken, 1 when it cannot be yet (a transaction of it is open), -1 when
 * memory ran out (the server fails). */
static int take_image(server *s, served_store *ss, image *im) {
  const unsigned char *img;
  size_t len;
  memset(im, 0, sizeof *im);
  if (eu_store_image(ss->store, &img, &len) != EU_OK) return 1;
  if (len <= 100 || len > INT32_MAX || !(im->data = malloc(len))) {
    fail_server(s, "cannot write %s: %s", ss->path, ENOMEM);
    return -1;
  }
  memcpy(im->data, img, len);
  im->data[18] = im->data[19] = 2;  /* a WAL database, as the blank one is */
  im->len = len;
  im->ss = ss;
  im->commits = ss->commits;
  ss->writing = 1;
  ss->fresh = 1;  /* the round that covers it syncs the file and its name */
  return 0;
}

/* Writes im beside path and renames it to path: on the pool or the loop,
 * touching nothing of the server's. */
static void put_image(image *im, const char *path) {
  sqlite3_vfs *vfs = sqlite3_vfs_find(NULL);
  sqlite3_file *f;
  char db[4300];
  size_t at, piece;
  sqlite3_int64 size;
  int rc = SQLITE_NOMEM;
  snprintf(db, sizeof db, "%s.new", path);
  if (vfs && (f = calloc(1, (size_t)vfs->szOsFile)) != NULL) {
    rc = vfs->xOpen(vfs, db, f, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_MAIN_DB, NULL);
    /* in pieces: the unix VFS writes at most 128 KB at a time, as no page is larger */
    for (at = 0; rc == SQLITE_OK && at < im->len; at += piece) {
      piece = im->len - at < 65536 ? im->len - at : 65536;
      rc = f->pMethods->xWrite(f, im->data + at, (int)piece, (sqlite3_int64)at);
    }
    /* a .new a failed write left may be longer: a truncation of a file
     * just made is a journal transaction of the filesystem's for nothing */
    if (rc == SQLITE_OK && (rc = f->pMethods->xFileSize(f, &size)) == SQLITE_OK &&
        size > (sqlite3_int64)im->len)
      rc = f->pMethods->xTruncate(f, (sqlite3_int64)im->len);
    if (f->pMethods) f->pMethods->xClose(f);
    free(f);
  }
  if (rc == SQLITE_OK && rename(db, path) == 0) return;
  im->err = rc == SQLITE_OK ? errno : EIO;
  im->rc = rc;
  unlink(db);
}

/* Back on the loop: a store with no commit since its image was taken is
 * in its file now, and parked, so its next use opens the file. The
 * connection that held it in memory is im->closing's, for the caller to
 * close. */
static void image_put(server *s, image *im) {
  served_store *ss = im->ss;
  ss->writing = 0;
  free(im->data);
  im->data = NULL;
  if (im->err) {
    if (im->rc != SQLITE_OK) fail_server_why(s, "cannot write %s: %s", ss->path, sqlite3_errstr(im->rc));
    else fail_server(s, "cannot write %s: %s", ss->path, im->err);
    return;
  }
  if (ss->commits != im->commits || !eu_store_in_memory(ss->store) ||
      eu_store_image_written(ss->store, &im->closing) != EU_OK)
    return;  /* still in memory: the next round covering a commit of it writes it again */
  unlink_open(s, ss);
  ss->wal_pages = 0;
  ss->empty_wal = 1;  /* it reopens with serve_then_empty_wal, as it was opened */
  ss->no_wal = 1;
}

/* Writes ss's database, in memory, on the loop: where no round of syncs
 * follows (--durability process, the end). 0 when written, 1 when it
 * cannot be yet, -1 when it failed. */
static int write_now(server *s, served_store *ss) {
  image im;
  int rc = take_image(s, ss, &im);
  if (rc != 0) return rc;
  put_image(&im, ss->path);
  image_put(s, &im);
  eu_store_close_handed(im.closing);
  return im.err ? -1 : 0;
}

/* A file's record, not yet open. */
static served_store *new_served(server *s, const char *path, char *err, size_t errlen) {
  served_store *ss;
  if (!(ss = calloc(1, sizeof *ss)) || !(ss->path = malloc(strlen(path) + 1))) {
    free(ss);
    eu_err(err, errlen, EU_ENOMEM, "out of memory");
    return NULL;
  }
  strcpy(ss->path, path);
  ss->srv = s;
  ss->ns = -1;
  return ss;
}

/* Opens ss's file, or for a new object (its file does not exist) its
 * database in memory (see "new objects in memory"). The I/O of an
 * opening, touching nothing of the server's but what is read-only once it
 * runs: the loop calls it, or a thread of the pool (open_work). */
static int open_file(served_store *ss, char *err, size_t errlen) {
  server *s = ss->srv;
  int has_db = file_size(ss->path, "") >= 0;
  long long wal;
  if (!has_db && s->blank) {
    ss->fresh = 0;
    ss->blank = 1;
    return eu_store_open_image(&ss->store, ss->path, (const unsigned char *)s->blank, s->blank_len,
                               serve_first, serve_then_empty_wal, EU_STORE_LAZY_TABLES, err, errlen);
  }
  wal = file_size(ss->path, "-wal");
  ss->fresh = !has_db || wal < 0;
  ss->empty_wal = wal <= 0;
  return eu_store_open_with(&ss->store, ss->path, serve_first,
                            ss->empty_wal ? serve_then_empty_wal : serve_then, EU_STORE_LAZY_TABLES, err, errlen);
}

/* Makes ss, open, one of the server's files, on the loop. */
static int keep_served(server *s, served_store *ss, char *err, size_t errlen) {
  if (s->nstores == s->capstores) {
    int cap = s->capstores ? s->capstores * 2 : 16;
    served_store **a = realloc(s->stores, (size_t)cap * sizeof *a);
    if (!a) return eu_err(err, errlen, EU_ENOMEM, "out of memory");
    s->stores = a;
    s->capstores = cap;
  }
  eu_store_batching(ss->store, 1);
  eu_store_wal_hook(ss->store, on_wal, ss);
  if (eu_store_in_memory(ss->store))
    sqlite3_commit_hook(eu_store_db(ss->store), on_commit_in_memory, ss);
  eu_store_on_wake(ss->store, on_wake, ss);
  link_open(s, ss);
  ss->slot = s->nstores;
  s->stores[s->nstores++] = ss;
  return EU_OK;
}

/* Opens (creating if need be) an object's file and keeps it. */
static served_store *open_served(server *s, const char *path, char *err, size_t errlen) {
  served_store *ss = new_served(s, path, err, errlen);
  if (!ss) return NULL;
  make_room(s);
  if (open_file(ss, err, errlen) != EU_OK) {
    free(ss->path);
    free(ss);
    return NULL;
  }
  if (keep_served(s, ss, err, errlen) != EU_OK) {
    eu_store_close(ss->store);
    free(ss->path);
    free(ss);
    return NULL;
  }
  return ss;
}

/* The file of o, or NULL. */
static served_store *served_of(server *s, eu_object *o) {
  int i = o ? eu_object_index(o) : -1;
  return i >= 0 && i < s->capby ? s->by_object[i] : NULL;
}

/* Makes ss the file of o (NULL: o has none). */
static int set_served(server *s, eu_object *o, served_store *ss) {
  int i = eu_object_index(o);
  if (i >= s->capby) {
    int cap = s->capby ? s->capby : 64;
    served_store **a;
    while (cap <= i) cap *= 2;
    if (!(a = realloc(s->by_object, (size_t)cap * sizeof *a))) return EU_ENOMEM;
    memset(a + s->capby, 0, (size_t)(cap - s->capby) * sizeof *a);
    s->by_object = a;
    s->capby = cap;
  }
  s->by_object[i] = ss;
  return EU_OK;
}

/* Closes a kept file; one being synced is never closed. An evicted file
 * (or one start-up only looked into) keeps its WAL, already synced, for its
 * next opening: closing then costs no checkpoint and no sync. */
static void drop_served(server *s, int i, int evicted) {
  served_store *ss = s->stores[i];
  sqlite3 *db = eu_store_db(ss->store);
  int k;
  s->stores[i] = s->stores[--s->nstores];
  s->stores[i]->slot = i;
  if (ss->obj && served_of(s, ss->obj) == ss) set_served(s, ss->obj, NULL);
  if (ss->dirty)
    for (k = 0; k < s->ndirty; k++)
      if (s->dirty[k] == ss) s->dirty[k] = s->dirty[--s->ndirty];
  if (evicted && db) sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)NULL);
  close_served(ss);
}

/* Records which object the file holds (binding, id and, once known, its
 * name). A blank database has no row yet: a plain insert, which costs two
 * fifths of the upsert to compile, makes it. */
static int note_object(eu_store *st, int blank, const char *binding, const char *hex, const char *name) {
  sqlite3_stmt *q;
  int rc = eu_store_internal_prepare(st, blank
    ? "INSERT INTO _eutaxy_serve_object(id, binding, hex, name) VALUES (1, ?1, ?2, ?3)"
    : "INSERT INTO _eutaxy_serve_object(id, binding, hex, name) VALUES (1, ?1, ?2, ?3) "
      "ON CONFLICT(id) DO UPDATE SET name = coalesce(excluded.name, name) "
      "WHERE name IS NOT excluded.name AND excluded.name IS NOT NULL", &q);
  if (rc != EU_OK) return rc;
  /* a binding copies its text, which may find no memory */
  if (sqlite3_bind_text(q, 1, binding, -1, SQLITE_TRANSIENT) != SQLITE_OK ||
      sqlite3_bind_text(q, 2, hex, -1, SQLITE_TRANSIENT) != SQLITE_OK ||
      (name ? sqlite3_bind_text(q, 3, name, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(q, 3)) != SQLITE_OK) {
    eu_store_reset(st, q);
    return eu_store_error(st, EU_ENOMEM, "out of memory");
  }
  rc = eu_store_internal_step(st, q);
  eu_store_reset(st, q);
  return rc < 0 ? rc : EU_OK;
}

/* A store the world uses is in a batch from its first turn of a pump (the
 * store begins it; eu_store_batching): the turns of a pump are savepoints
 * in one transaction, committed together by commit_batches. A new store's
 * row naming its object joins the first batch. */
static eu_store *batched(served_store *ss, char *err, size_t errlen) {
  if (eu_store_baseline_begin(ss->store) != EU_OK) {
    eu_err(err, errlen, EU_ESQL, "cannot begin a transaction in %s: %s", ss->path, eu_store_errmsg(ss->store));
    return NULL;
  }
  return ss->store;
}

/* Records in ss's file which object it holds. The row naming the object is
 * a commit of its own, before any batch; a new file's is its WAL's first
 * (serve_then_empty_wal). */
static int name_file(served_store *ss, const char *binding, const char *name, char *err,
                     size_t errlen) {
  if (note_object(ss->store, ss->blank, binding, ss->hex, name) != EU_OK)
    return eu_err(err, errlen, EU_ESQL, "cannot record the object in %s: %s", ss->path,
                  eu_store_errmsg(ss->store));
  ss->blank = 0;
  return EU_OK;
}

static eu_store *provide_store(void *ud, int ns, const char *hex, char *err, size_t errlen) {
  server *s = ud;
  const char *binding = eu_world_binding_name(s->w, ns);
  eu_object *o = eu_world_object(s->w, ns, hex, NULL, NULL, 0);  /* known already: asks for nothing */
  char path[4200];
  served_store *ss = served_of(s, o);
  if (ss) return ss->store;  /* opened at start-up for its alarm */
  store_path(s, binding, hex, path, sizeof path);
  if (!(ss = open_served(s, path, err, errlen))) return NULL;
  ss->ns = ns;
  snprintf(ss->hex, sizeof ss->hex, "%s", hex);
  ss->obj = o;
  if (!o || set_served(s, o, ss) != EU_OK) {
    eu_err(err, errlen, EU_ENOMEM, "out of memory");
    drop_served(s, s->nstores - 1, 0);
    return NULL;
  }
  if (name_file(ss, binding, o ? eu_object_name(o) : NULL, err, errlen) != EU_OK) {
    drop_served(s, s->nstores - 1, 0);
    return NULL;
  }
  if (!batched(ss, err, errlen)) {
    drop_served(s, s->nstores - 1, 0);
    return NULL;
  }
  return ss->store;
}

/* ---- opening files off the loop --------------------------------------
 *
 * Opening an object's file (an evicted one's coming back) is a stat, the
 * connection's setup (its pragmas, the schema read, the tables checked)
 * and the commit of the row naming the object; a new object's database in
 * memory is made from the blank one (see "new objects in memory") and
 * named, without a file. The world holds the object's events meanwhile
 * (store_opener), so it runs on the thread pool, as the syncs do, up to
 * EU_SERVE_OPENS at once; beyond that the loop opens the file itself
 * (provide_store), which shares the work out when the pool falls behind.
 * Under the fault simulation, whose counts are the loop's, the loop opens
 * every file.
 *
 * The openings asked for before a pump ends go to the pool together, up
 * to EU_SERVE_OPEN_BATCH to a job (open_batches). A job of its own for
 * each woke a thread of the pool for each new object: those wake-ups,
 * and the threads' contention over the pool's queue, were a tenth of the
 * server's CPU when objects were made one after another.
 *
 * The connection changes threads once, when the pool is done with it. The
 * wal hook (or for a database in memory, the commit hook) is the loop's:
 * the pool's opening records only the naming row's commit, and the loop
 * counts that commit (on_wal) when the file is handed over, before any
 * answer of the object is stamped. */
#define EU_SERVE_OPENS 32
#define EU_SERVE_OPEN_BATCH 8   /* openings to a job of the pool */

typedef struct open_job {
  struct open_job *next;    /* in to_open, then in its batch */
  server *srv;
  served_store *ss;
  eu_object *o;
  const char *binding;      /* the world's, read-only */
  char *name;               /* the object's name, or NULL */
  int pages;                /* the naming row's commit: pages in the WAL, or 0 */
  int committed;            /* the naming row's commit, into a database in memory */
  int rc;
  char err[EU_ERRLEN];
} open_job;

static int count_pages(void *ud, sqlite3 *db, const char *name, int pages) {
  open_job *j = ud;
  (void)db; (void)name;
  j->pages = pages;
  return SQLITE_OK;
}

static int count_commit(void *ud) {
  open_job *j = ud;
  j->committed = 1;
  return 0;
}

typedef struct open_batch {
  uv_work_t req;
  server *srv;
  open_job *jobs;
} open_batch;

static void open_one(open_job *j) {
  served_store *ss = j->ss;
  eu_store_limits l;
  if ((j->rc = open_file(ss, j->err, sizeof j->err)) != EU_OK) return;
  /* What the loop would do first, done here: the quota (the world's
   * link_limits then finds it set) and the statements of its turns. What
   * fails here is tried again on the loop, which reports it. */
  memset(&l, 0, sizeof l);
  l.max_bytes = j->srv->o.max_object_bytes;
  (void)eu_store_set_limits(ss->store, &l);
  (void)eu_store_prepare_turns(ss->store);
  eu_store_wal_hook(ss->store, count_pages, j);
  if (eu_store_in_memory(ss->store)) sqlite3_commit_hook(eu_store_db(ss->store), count_commit, j);
  if ((j->rc = name_file(ss, j->binding, j->name, j->err, sizeof j->err)) != EU_OK) {
    eu_store_close(ss->store);
    ss->store = NULL;
  }
}

static void open_one_done(open_job *j, int status) {
  server *s = j->srv;
  served_store *ss = j->ss;
  s->nopening--;
  if (status != 0 && j->rc == EU_OK) {
    j->rc = EU_EINVAL;
    snprintf(j->err, sizeof j->err, "cannot open %s: %s", ss->path, uv_strerror(status));
    eu_store_close(ss->store);
    ss->store = NULL;
  }
  if (j->rc == EU_OK && keep_served(s, ss, j->err, sizeof j->err) != EU_OK) {
    j->rc = EU_ENOMEM;
    eu_store_close(ss->store);
    ss->store = NULL;
  }
  if (j->rc == EU_OK) {
    if (set_served(s, j->o, ss) != EU_OK) {
      j->rc = eu_err(j->err, sizeof j->err, EU_ENOMEM, "out of memory");
    } else {
      if (j->pages || j->committed) on_wal(ss, NULL, NULL, j->pages);
      if (!batched(ss, j->err, sizeof j->err)) j->rc = EU_ESQL;
    }
    if (j->rc != EU_OK) {
      drop_served(s, ss->slot, 0);
      ss = NULL;
    }
  } else {
    free(ss->path);
    free(ss);
    ss = NULL;
  }
  eu_world_store_opened(s->w, j->o, ss ? ss->store : NULL, j->err);
  free(j->name);
  free(j);
}

static void open_work(uv_work_t *req) {
  open_batch *b = req->data;
  open_job *j;
  for (j = b->jobs; j; j = j->next) open_one(j);
}

static void open_done(uv_work_t *req, int status) {
  open_batch *b = req->data;
  open_job *j, *next;
  for (j = b->jobs; j; j = next) {
    next = j->next;
    open_one_done(j, status);
  }
  request_pump(b->srv);
  free(b);
}

/* Hands the openings asked for since the last pump to the pool. One that
 * cannot be handed over fails as an opening of the pool would. */
static void open_batches(server *s) {
  while (s->to_open) {
    open_batch *b = calloc(1, sizeof *b);
    open_job **tail;
    int n = 0;
    if (!b) {
      open_job *j = s->to_open;
      s->to_open = j->next;
      j->next = NULL;
      open_one_done(j, UV_ENOMEM);
      continue;
    }
    b->srv = s;
    b->req.data = b;
    b->jobs = s->to_open;
    for (tail = &b->jobs; *tail && n < EU_SERVE_OPEN_BATCH; tail = &(*tail)->next) n++;
    s->to_open = *tail;
    *tail = NULL;
    if (uv_queue_work(&s->loop, &b->req, open_work, open_done) != 0) open_done(&b->req, UV_EINVAL);
  }
}

/* The world's store_opener: 1 when o's file is opening on the pool. */
static int open_elsewhere(void *ud, eu_object *o, int ns, const char *hex) {
  server *s = ud;
  char path[4200], err[EU_ERRLEN];
  const char *name = eu_object_name(o);
  open_job *j;
  served_store *ss;
  if (s->nopening >= EU_SERVE_OPENS || s->stopping || eu_faultsim_active || served_of(s, o) || ns < 0)
    return 0;
  if (!(j = calloc(1, sizeof *j))) return 0;
  j->binding = eu_world_binding_name(s->w, ns);
  store_path(s, j->binding, hex, path, sizeof path);
  if ((name && !(j->name = strdup(name))) || !(ss = new_served(s, path, err, sizeof err))) {
    free(j->name);
    free(j);
    return 0;
  }
  ss->ns = ns;
  snprintf(ss->hex, sizeof ss->hex, "%s", hex);
  ss->obj = o;
  j->srv = s;
  j->ss = ss;
  j->o = o;
  make_room(s);
  if (!s->to_open) s->to_open_end = &s->to_open;
  *s->to_open_end = j;
  s->to_open_end = &j->next;
  s->nopening++;
  request_pump(s);
  return 1;
}

/* Start-up: every object whose file holds an alarm is made known to the world
 * and its alarm scheduled (one already due fires at the first advance). */
static int rearm_alarms(server *s, char *err, size_t errlen) {
  DIR *d = opendir(s->state);
  struct dirent *e;
  if (!d) return eu_err(err, errlen, EU_EINVAL, "cannot read %s: %s", s->state, strerror(errno));
  while ((e = readdir(d)) != NULL) {
    char path[4200], ebuf[EU_ERRLEN];
    const char *binding = NULL, *hex = NULL, *name = NULL;
    char bcopy[256], hcopy[65], ncopy[512];
    size_t n = strlen(e->d_name);
    sqlite3_stmt *q;
    served_store *ss;
    eu_object *o;
    int has = 0, retry = 0, ns;
    int64_t at = 0;
    if (n == 32 + 11 && strcmp(e->d_name + 32, ".sqlite.new") == 0 &&
        strspn(e->d_name, "0123456789abcdef") == 32) {  /* a write a crash cut short */
      snprintf(path, sizeof path, "%s/%.43s", s->state, e->d_name);
      unlink(path);
      continue;
    }
    if (n != 32 + 7 || strcmp(e->d_name + 32, ".sqlite") != 0 ||
        strspn(e->d_name, "0123456789abcdef") != 32)
      continue;
    snprintf(path, sizeof path, "%s/%.39s", s->state, e->d_name);
    if (!(ss = open_served(s, path, ebuf, sizeof ebuf))) {
      fprintf(stderr, "eutaxy serve: %s\n", ebuf);
      continue;
    }
    ss->fresh = 0;
    if (eu_store_get_alarm(ss->store, &has, &at, &retry) != EU_OK || !has ||
        eu_store_internal_prepare(ss->store, "SELECT binding, hex, name FROM _eutaxy_serve_object WHERE id = 1", &q) != EU_OK) {
      drop_served(s, s->nstores - 1, 1);  /* as it was: no checkpoint, no sync */
      continue;
    }
    if (eu_store_internal_step(ss->store, q) == 1) {
      binding = (const char *)sqlite3_column_text(q, 0);
      hex = (const char *)sqlite3_column_text(q, 1);
      name = (const char *)sqlite3_column_text(q, 2);
      snprintf(bcopy, sizeof bcopy, "%s", binding ? binding : "");
      snprintf(hcopy, sizeof hcopy, "%s", hex ? hex : "");
      snprintf(ncopy, sizeof ncopy, "%s", name ? name : "");
    }
    eu_store_reset(ss->store, q);
    ns = binding ? eu_world_binding(s->w, bcopy) : -1;
    if (ns < 0) {  /* a binding the config no longer has: its alarm sleeps */
      drop_served(s, s->nstores - 1, 1);
      continue;
    }
    ss->ns = ns;
    snprintf(ss->hex, sizeof ss->hex, "%s", hcopy);
    o = eu_world_object(s->w, ns, hcopy, name ? ncopy : NULL, ebuf, sizeof ebuf);
    if (o && (ss->obj = o, set_served(s, o, ss)) != EU_OK) snprintf(ebuf, sizeof ebuf, "out of memory");
    if (!o || served_of(s, o) != ss || !eu_object_store(s->w, o, ebuf, sizeof ebuf)) {
      fprintf(stderr, "eutaxy serve: %s: %s\n", path, ebuf);
      continue;
    }
    eu_world_wake(s->w, o);
  }
  closedir(d);
  return EU_OK;
}

/* ---- the output gate ------------------------------------------------- */

/* Syncs a file through a descriptor of its own: fsync reaches every
 * write to the file, whichever descriptor made it, so the store's
 * connection may be parked meanwhile. */
static int sync_path(const char *path, const char *suffix, int data_only) {
  char p[4300];
  int fd, e = 0;
  snprintf(p, sizeof p, "%s%s", path, suffix);
  if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0) return errno;
  if ((data_only ? fdatasync(fd) : fsync(fd)) != 0) e = errno;
  close(fd);
  return e;
}

static void sync_work(uv_work_t *req) {
  sync_job *j = req->data;
  served_store *ss = j->ss;
  if (j->dir) {  /* the names of the round's new files */
    if (fsync(j->dirfd) != 0) j->err = errno;
  } else if (!ss) {
    if (syncfs(j->dirfd) != 0) j->err = errno;
  } else if (j->image) {
    j->err = sync_path(ss->path, "", 0);
  } else if ((j->err = sync_path(ss->path, "-wal", 1)) == 0 && j->fresh) {
    j->err = sync_path(ss->path, "", 0);  /* a new file: its first pages */
  }
}

static void checkpoint_if_long(served_store *ss) {
  sqlite3 *db = eu_store_db(ss->store);
  if (db && ss->wal_pages >= 1000) {
    sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    ss->wal_pages = 0;
  }
}

/* fmt takes path and why. */
static void fail_server_why(server *s, const char *fmt, const char *path, const char *why) {
  fprintf(stderr, "eutaxy serve: ");
  fprintf(stderr, fmt, path, why);
  fprintf(stderr, "; answering 500 and stopping\n");
  s->failed = 1;
}

static void fail_server(server *s, const char *fmt, const char *path, int e) {
  fail_server_why(s, fmt, path, strerror(e));
}

/* Retires the oldest rounds that are done: what they cover is durable. */
static void retire_rounds(server *s) {
  while (s->nrounds > 0 && s->rounds[s->round0].pending == 0) {
    s->durable = s->rounds[s->round0].target;
    s->round0 = (s->round0 + 1) % EU_SERVE_ROUNDS;
    s->nrounds--;
  }
}

static void synced(server *s, served_store *ss, int err) {
  ss->syncing--;
  if (err) fail_server(s, "cannot sync %s: %s", ss->path, err);
}

/* Frees j, a sync that ended (or was given up), and retires the rounds it
 * completes. */
static void sync_ended(server *s, sync_job *j) {
  int i;
  if (j->dir && j->err) fail_server(s, "cannot sync %s: %s", s->state, j->err);
  if (j->ss) synced(s, j->ss, j->err);
  for (i = 0; i < j->n; i++) synced(s, j->many[i], j->err);
  s->rounds[j->round].pending--;
  s->syncs_in_flight--;
  free(j);
  retire_rounds(s);
}

static void on_synced(uv_work_t *req, int status) {
  sync_job *j = req->data;
  server *s = j->srv;
  if (status != 0 && !j->err) j->err = EIO;
  sync_ended(s, j);
  pump(s);
}

/* Queues j, a sync of round r, or holds it in ij until ij's images are
 * in their files. */
static int queue_sync(server *s, sync_job *j, int r, image_job *ij) {
  j->srv = s;
  j->round = r;
  j->dirfd = s->dirfd;
  j->req.data = j;
  if (ij) {
    j->next = ij->syncs;
    ij->syncs = j;
  } else if (uv_queue_work(&s->loop, &j->req, sync_work, on_synced) != 0) {
    free(j);
    fail_server(s, "cannot sync %s: %s", s->state, EIO);
    return -1;
  }
  s->rounds[r].pending++;
  s->syncs_in_flight++;
  return 0;
}

/* Writes the round's images, then runs its syncs in the same job when
 * every image is in its file: going back to the loop between the two
 * would add a wait for the loop's current pump to the round. */
static void image_work(uv_work_t *req) {
  image_job *ij = req->data;
  sync_job *j;
  int i;
  for (i = 0; i < ij->n; i++) put_image(&ij->images[i], ij->images[i].ss->path);
  for (i = 0; i < ij->n; i++)
    if (ij->images[i].err) return;
  for (j = ij->syncs; j; j = j->next) {
    sync_work(&j->req);
    j->ran = 1;
  }
}

/* Closing the connections that held the images, on the pool. */
static void close_work(uv_work_t *req) {
  image_job *ij = req->data;
  int i;
  for (i = 0; i < ij->n; i++) eu_store_close_handed(ij->images[i].closing);
}

static void close_done(uv_work_t *req, int status) {
  (void)status;
  free(req->data);
}

/* The round's images are in their files and, unless one failed, its syncs
 * have run (image_work); syncs not run go to the pool now, or end unrun
 * when the server has failed. The connections that held the images are
 * closed on the pool. */
static void image_done(uv_work_t *req, int status) {
  image_job *ij = req->data;
  server *s = ij->srv;
  sync_job *j, *next;
  int i, ran = 0;
  for (i = 0; i < ij->n; i++) {
    if (status != 0 && !ij->images[i].err) ij->images[i].err = EIO;
    image_put(s, &ij->images[i]);
  }
  for (j = ij->syncs; j; j = next) {
    next = j->next;
    if (j->ran) {
      sync_ended(s, j);
      ran = 1;
    } else if (s->failed) {
      on_synced(&j->req, 0);  /* not run: no answer it covers can be a success now */
    } else if (uv_queue_work(&s->loop, &j->req, sync_work, on_synced) != 0) {
      j->err = EIO;
      on_synced(&j->req, 0);
    }
  }
  if (eu_faultsim_active || uv_queue_work(&s->loop, &ij->req, close_work, close_done) != 0) {
    close_work(&ij->req);
    free(ij);
  }
  if (ran) pump(s);
}

/* Takes the images of the databases in memory that a round is to cover,
 * in a job for the pool: NULL with *later 0 when there are none, NULL with
 * *later 1 when the round must wait (one cannot be taken yet, or is still
 * being written by an earlier round, which must finish first so that the
 * files move in order). */
static image_job *take_images(server *s, int *later) {
  image_job *ij;
  int i, n = 0, rc;
  *later = 0;
  for (i = 0; i < s->ndirty; i++) {
    served_store *ss = s->dirty[i];
    if (!eu_store_in_memory(ss->store)) continue;
    if (ss->writing) {
      *later = 1;
      return NULL;
    }
    n++;
  }
  if (!n) return NULL;
  if (!(ij = calloc(1, sizeof *ij + (size_t)n * sizeof ij->images[0]))) {
    fail_server(s, "cannot write %s: %s", s->state, ENOMEM);
    *later = 1;
    return NULL;
  }
  ij->srv = s;
  ij->req.data = ij;
  for (i = 0; i < s->ndirty; i++) {
    served_store *ss = s->dirty[i];
    if (!eu_store_in_memory(ss->store)) continue;
    if ((rc = take_image(s, ss, &ij->images[ij->n])) != 0) {
      while (ij->n > 0) {  /* given back: nothing was written */
        image *im = &ij->images[--ij->n];
        im->ss->writing = 0;
        free(im->data);
      }
      free(ij);
      *later = 1;
      return NULL;
    }
    ij->n++;
  }
  return ij;
}


/* Every request in flight when a batch was lost may have had a turn in it:
 * none of them may look like a success. */
static void lose_in_flight(server *s, int status) {
  conn *c;
  pending *p;
  for (c = s->conns; c; c = c->next)
    for (p = c->head; p; p = p->next)
      if (!p->lost) p->lost = status;
}

/* Ends the batch of every store that has one: the turns run since the last
 * pump become one commit per file (the wal hook counts it); the next batch
 * begins with the store's next turn, and until then the store may be
 * parked. A batch that cannot commit loses turns whose answers are
 * still held: none of them may look like a success.
 *
 * A batch lost to the object's own doing is that object's failure: a
 * commit refused for want of space (its --max-object-bytes, or a full
 * disk), or a statement of its code that made SQLite end the whole
 * transaction (past the object's quota, memory or SQL limit). The object
 * is reset (its memory may hold what was lost), the requests in flight
 * answer 507 (space) or 500, and the server goes on. A failure of the disk
 * itself (an I/O error) stops the server, as a failed sync does. */
static void commit_batches(server *s) {
  served_store *ss, *older;
  int rc, lost;
  for (ss = s->mru; ss; ss = older) {  /* a store in a batch is open */
    older = ss->older;
    if (!eu_store_in_baseline(ss->store) || eu_store_in_turn(ss->store)) continue;
    lost = eu_store_lost_code(ss->store);
    rc = eu_store_baseline_commit(ss->store);
    link_open(s, ss);  /* used in this pump */
    if (ss->empty_wal && ss->wal_pages > 0 &&
        eu_store_exec_internal(ss->store, "PRAGMA synchronous = NORMAL") == EU_OK &&
        eu_store_set_then(ss->store, serve_then) == EU_OK)
      ss->empty_wal = 0;
    if (rc == EU_EFULL || (rc != EU_OK && lost && lost != SQLITE_IOERR)) {
      int status = rc == EU_EFULL ? 507 : 500;
      fprintf(stderr, "eutaxy serve: cannot commit %s: %s; answering %d to the requests in flight\n",
              ss->path, eu_store_errmsg(ss->store), status);
      lose_in_flight(s, status);
      if (ss->obj && eu_object_has_isolate(ss->obj)) eu_world_reset(s->w, ss->obj);
    } else if (rc != EU_OK) {
      fprintf(stderr, "eutaxy serve: cannot commit %s: %s\n", ss->path, eu_store_errmsg(ss->store));
      s->failed = 1;
      /* The lost batch counts as a commit that never becomes durable, so
       * the answers stamped after it (its turns') are not successes. */
      s->written++;
    }
    checkpoint_if_long(ss);
  }
}

/* Starts a round of syncs: one per file committed to since the last round
 * began. Rounds overlap (up to EU_SERVE_ROUNDS), so what commits while one
 * is under way need not wait for it to end before its own sync starts. */
static void start_sync(server *s) {
  int i, r, ndirty = 0, nfresh = 0, later;
  image_job *ij;
  uint64_t last;
  if (s->failed || s->durable == s->written) return;
  if (s->o.durability_process) {
    for (i = 0; i < s->ndirty; i++)
      if (eu_store_in_memory(s->dirty[i]->store) && write_now(s, s->dirty[i]) != 0) return;
    for (i = 0; i < s->ndirty; i++) s->dirty[i]->dirty = 0;
    s->ndirty = 0;
    s->durable = s->written;
    return;
  }
  last = s->nrounds ? s->rounds[(s->round0 + s->nrounds - 1) % EU_SERVE_ROUNDS].target : s->durable;
  if (s->nrounds == EU_SERVE_ROUNDS || last == s->written) return;
  ij = take_images(s, &later);
  if (later) return;
  ndirty = s->ndirty;
  s->ndirty = 0;
  r = (s->round0 + s->nrounds) % EU_SERVE_ROUNDS;
  s->rounds[r].target = s->written;
  s->rounds[r].pending = 0;
  s->nrounds++;
  if (ndirty >= EU_SERVE_SYNCFS) {
    sync_job *j = calloc(1, sizeof *j + (size_t)ndirty * sizeof j->many[0]);
    if (!j) {
      fail_server(s, "cannot sync %s: %s", s->state, ENOMEM);
    } else {
      for (i = 0; i < ndirty; i++) {
        s->dirty[i]->dirty = 0;
        s->dirty[i]->fresh = 0;
        s->dirty[i]->syncing++;
        j->many[j->n++] = s->dirty[i];
      }
      queue_sync(s, j, r, ij);
    }
  } else {
    /* Fewer files: one fdatasync each (and an fsync of a new one's
     * database file), side by side on the pool, and one fsync of the
     * directory for the names of all the new ones. */
    for (i = 0; i < ndirty && !s->failed; i++) {
      served_store *ss = s->dirty[i];
      sync_job *j;
      ss->dirty = 0;
      if (!(j = calloc(1, sizeof *j))) {
        fail_server(s, "cannot sync %s: %s", ss->path, ENOMEM);
      } else {
        j->ss = ss;
        j->fresh = ss->fresh;
        j->image = ss->writing;  /* taken by take_images above */
        nfresh += ss->fresh;
        ss->fresh = 0;
        if (queue_sync(s, j, r, ij) == 0) ss->syncing++;
      }
    }
    if (nfresh && !s->failed) {
      sync_job *j = calloc(1, sizeof *j);
      if (!j) fail_server(s, "cannot sync %s: %s", s->state, ENOMEM);
      else {
        j->dir = 1;
        queue_sync(s, j, r, ij);
      }
    }
  }
  /* under the fault simulation, whose counts are the loop's, the loop writes them */
  if (ij && (eu_faultsim_active || uv_queue_work(&s->loop, &ij->req, image_work, image_done) != 0)) {
    image_work(&ij->req);
    image_done(&ij->req, 0);
  }
  retire_rounds(s);  /* a round with nothing dirty is done at once */
}

/* Whether the world has caught up with --test-clock's time: nothing due by
 * then is still queued, and no object's file is opening on the pool (the
 * world holds that object's events meanwhile, so what came due may still be
 * waiting for it after the pump that ran everything else). */
static int clock_settled(server *s) {
  return s->nopening == 0 && eu_world_next_due(s->w) > s->clock;
}

/* Whether p can be answered now: its call is done and what it may depend on is durable. */
static int ready(server *s, pending *p) {
  if (p->slot && !eu_world_slot_done(s->w, p->slot)) return 0;
  if (p->clock && !s->failed && !clock_settled(s)) return 0;
  if (!p->stamped) {
    p->stamped = 1;
    p->need = s->written;
  }
  return s->failed || s->durable >= p->need;
}

/* ---- requests in, answers out ----------------------------------------- */

static int host_usable(const char *h) {
  return h && *h && strlen(h) < 256 &&
         strspn(h, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]") == strlen(h);
}

/* L: [1] the eu_http_request (light userdata), [2] the authority. Pushes the wire request. */
static int build_request(lua_State *L) {
  const eu_http_request *req = lua_touserdata(L, 1);
  const char *authority = lua_tostring(L, 2);
  luaL_Buffer u;
  size_t i;
  lua_createtable(L, 0, 5);
  lua_pushliteral(L, "request");
  lua_setfield(L, -2, "kind");
  lua_pushstring(L, req->method);
  lua_setfield(L, -2, "method");
  if (req->url_len > 0 && req->url[0] == '/') {
    luaL_buffinit(L, &u);
    luaL_addstring(&u, "http://");
    luaL_addstring(&u, authority);
    luaL_addlstring(&u, req->url, req->url_len);
    luaL_pushresult(&u);
  } else if (req->url_len > 7 && strncmp(req->url, "http://", 7) == 0) {
    lua_pushlstring(L, req->url, req->url_len);
  } else {
    lua_pushfstring(L, "http://%s/", authority);
  }
  lua_setfield(L, -2, "url");
  lua_createtable(L, (int)req->nheaders, 0);
  for (i = 0; i < req->nheaders; i++) {
    lua_createtable(L, 2, 0);
    lua_pushlstring(L, req->headers[i].name, req->headers[i].name_len);
    lua_rawseti(L, -2, 1);
    lua_pushlstring(L, req->headers[i].value, req->headers[i].value_len);
    lua_rawseti(L, -2, 2);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "headers");
  if (req->body_len > 0 && strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0) {
    lua_pushlstring(L, req->body, req->body_len);
    lua_setfield(L, -2, "body");
  }
  return 1;
}

/* Encodes the wire request; *payload is malloc'd. */
static int encode_request(server *s, const eu_http_request *req, char **payload, size_t *len) {
  lua_State *L = s->L;
  const char *h = eu_http_header_get(req, "host");
  eu_buf b;
  int rc;
  lua_settop(L, 0);
  lua_pushcfunction(L, build_request);
  lua_pushlightuserdata(L, (void *)req);
  lua_pushstring(L, host_usable(h) ? h : s->authority);
  if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
    lua_settop(L, 0);
    return EU_ENOMEM;
  }
  eu_buf_init(&b);
  rc = eu_clone_encode(L, 1, 1, &b, NULL, 0);
  lua_settop(L, 0);
  if (rc != EU_OK) {
    eu_buf_free(&b);
    return rc;
  }
  *payload = eu_buf_take(&b, len);
  return EU_OK;
}

/* --test-clock's control: GET /__eutaxy/clock says the time, POST
 * /__eutaxy/clock?advance=MS moves it on. The answer leaves once what came
 * due on the way has run (clock_settled) and its writes are durable. */
static int clock_request(server *s, const eu_http_request *req, pending *p) {
  char q[32], *end;
  long long ms = 0;
  int status = 200;
  if (strcmp(req->method, "POST") == 0) {
    snprintf(q, sizeof q, "%.*s", (int)(req->query_len < sizeof q ? req->query_len : sizeof q - 1), req->query);
    errno = 0;
    if (strncmp(q, "advance=", 8) != 0 || q[8] < '0' || q[8] > '9') status = 400;
    else if ((ms = strtoll(q + 8, &end, 10)) > INT64_MAX / 4 || errno || *end) status = 400;
  } else if (strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0) {
    status = 405;
  }
  if (status == 200) {
    s->clock += ms;
    p->clock = 1;
    p->direct = malloc(40);
    if (p->direct) snprintf(p->direct, 40, "{\"now\":%lld}", (long long)s->clock);
  } else {
    p->direct = strdup(status == 405 ? "GET or POST /__eutaxy/clock?advance=MS\n"
                                     : "POST /__eutaxy/clock?advance=MS, MS a whole number of ms\n");
  }
  p->direct_status = status;
  return p->direct ? EU_OK : EU_ENOMEM;
}

/* A request for a WebSocket: "Upgrade: websocket", in any case. */
static int wants_websocket(const eu_http_request *req) {
  const char *u = eu_http_header_get(req, "upgrade");
  return u && strcasecmp(u, "websocket") == 0;
}

/* A WebSocket upgrade takes the connection over (EU_HTTP_TAKEN): a bad
 * handshake is refused here, with the whole response ws.c made; a good one
 * goes to the worker, with the 101 head kept for its answer. */
static int websocket_request(server *s, const eu_http_request *req, pending *p) {
  eu_buf head;
  char err[EU_ERRLEN];
  int status = 0;
  eu_buf_init(&head);
  if (eu_ws_handshake(req, NULL, 0, &head, &status, err, sizeof err) == EU_OK && status == 101) {
    p->ws_head = eu_buf_take(&head, &p->ws_head_len);
    return p->ws_head != NULL;
  }
  if (!s->o.quiet) fprintf(stderr, "eutaxy serve: %s %s: %s\n", req->method, p->path, err);
  p->raw = eu_buf_take(&head, &p->raw_len);
  p->direct_status = status ? status : 500;
  p->keep_alive = 0;
  return 0;
}

static int on_request(void *ud, const eu_http_request *req) {
  conn *c = ud;
  server *s = c->srv;
  pending *p = calloc(1, sizeof *p);
  int upgrade = wants_websocket(req);
  char *payload = NULL, label[32];
  size_t len = 0, plen = req->path_len < EU_SERVE_LOG_PATH ? req->path_len : EU_SERVE_LOG_PATH;
  if (!p || !(p->path = malloc(plen + 1))) {
    free(p);
    return EU_ENOMEM;
  }
  memcpy(p->path, req->path, plen);
  p->path[plen] = '\0';
  snprintf(p->method, sizeof p->method, "%s", req->method);
  p->keep_alive = req->keep_alive;
  p->head = strcmp(req->method, "HEAD") == 0;
  p->t0 = uv_hrtime();
  snprintf(label, sizeof label, "req-%" PRIu64, ++s->nrequests);
  if (s->o.test_clock && req->path_len == 15 && memcmp(req->path, "/__eutaxy/clock", 15) == 0)
    clock_request(s, req, p);
  else if ((!upgrade || websocket_request(s, req, p)) && encode_request(s, req, &payload, &len) == EU_OK)
    p->slot = eu_world_submit(s->w, EU_CALL_FETCH, NULL, "fetch", payload, len, label, 1);
  if (c->tail) c->tail->next = p;
  else c->head = p;
  c->tail = p;
  return upgrade ? EU_HTTP_TAKEN : 0;
}

/* L: [1] the answer's bytes (a string). Returns status, reason, body, then the header pairs. */
static int read_answer(lua_State *L) {
  size_t len, i, nh;
  const char *data = lua_tolstring(L, 1, &len);
  int n = 0, base = lua_gettop(L);
  if (eu_clone_decode(L, data, len, &n, NULL, 0) != EU_OK || n < 2)
    return luaL_error(L, "the answer of fetch does not decode");
  if (!lua_toboolean(L, base + 1)) {
    const char *name, *message, *stack;
    if (!lua_istable(L, base + 2)) return luaL_error(L, "fetch raised %s", luaL_tolstring(L, base + 2, NULL));
    lua_getfield(L, base + 2, "name");
    lua_getfield(L, base + 2, "message");
    lua_getfield(L, base + 2, "stack");
    name = lua_tostring(L, -3);
    message = lua_tostring(L, -2);
    stack = lua_tostring(L, -1);
    if (stack && message && strstr(stack, message)) message = NULL;  /* the traceback repeats it */
    return luaL_error(L, "fetch raised %s: %s%s%s", name ? name : "Error", message ? message : "",
                      message && stack ? "\n" : "", stack ? stack : "");
  }
  if (!lua_istable(L, base + 2)) return luaL_error(L, "fetch answered with no response");
  lua_getfield(L, base + 2, "status");
  if (!lua_isinteger(L, -1)) return luaL_error(L, "fetch answered with a response without a status");
  lua_getfield(L, base + 2, "statusText");
  if (!lua_isstring(L, -1) || lua_rawlen(L, -1) == 0) {
    lua_pop(L, 1);
    lua_pushnil(L);
  }
  lua_getfield(L, base + 2, "body");
  if (!lua_isstring(L, -1)) {
    lua_pop(L, 1);
    lua_pushliteral(L, "");
  }
  lua_getfield(L, base + 2, "headers");
  lua_getfield(L, base + 2, "webSocket");
  if (!lua_isinteger(L, -1)) {
    lua_pop(L, 1);
    lua_pushnil(L);
  }
  nh = lua_istable(L, -2) ? lua_rawlen(L, -2) : 0;
  luaL_checkstack(L, (int)(2 * nh + 4), "too many response headers");
  for (i = 1; i <= nh; i++) {
    int t = lua_gettop(L) - 1 - (int)(2 * (i - 1));
    lua_rawgeti(L, t, (lua_Integer)i);
    if (!lua_istable(L, -1)) return luaL_error(L, "a response header is not a pair");
    lua_rawgeti(L, -1, 1);
    lua_rawgeti(L, -2, 2);
    lua_remove(L, -3);
    if (!lua_isstring(L, -2) || !lua_isstring(L, -1)) return luaL_error(L, "a response header is not a pair of strings");
  }
  return 5 + (int)(2 * nh);  /* status, reason, body, headers table, webSocket, then the pairs */
}

static void log_request(server *s, pending *p, int status) {
  double ms;
  if (s->o.quiet) return;
  ms = (double)(uv_hrtime() - p->t0) / 1e6;
  fprintf(stderr, "%s %s %d %.1fms\n", p->method, p->path, status, ms);
}

/* Appends the response to p; returns its status. */
static int respond(server *s, pending *p, eu_buf *out, int keep) {
  static const char isr[] = "Internal Server Error";
  static const eu_http_header text = { "content-type", 12, "text/plain; charset=utf-8", 25 };
  lua_State *L = s->L;
  char *data = NULL;
  size_t len = 0, before = out->n;
  int status = 500;
  if (p->raw) {
    if (eu_buf_put(out, p->raw, p->raw_len) == EU_OK) return p->direct_status;
  }
  if (p->direct) {
    static const eu_http_header json = { "content-type", 12, "application/json", 16 };
    eu_http_write_response(out, p->direct_status, NULL, p->direct_status == 200 ? &json : &text, 1, p->direct,
                           p->head ? 0 : strlen(p->direct), keep);
    return p->direct_status;
  }
  if (p->lost) {
    const char *why = p->lost == 507 ? "Insufficient Storage" : isr;
    if (p->slot && eu_world_slot_take(s->w, p->slot, &data, &len) == EU_OK) free(data);
    p->slot = 0;
    eu_http_write_response(out, p->lost, NULL, &text, 1, why, p->head ? 0 : strlen(why), keep);
    return p->lost;
  }
  if (s->failed && p->need > s->durable) {
    /* Its writes may not be on disk: it must not look like a success. */
    if (p->slot && eu_world_slot_take(s->w, p->slot, &data, &len) == EU_OK) free(data);
    p->slot = 0;
  } else if (p->slot && eu_world_slot_take(s->w, p->slot, &data, &len) == EU_OK) {
    lua_settop(L, 0);
    lua_pushcfunction(L, read_answer);
    lua_pushlstring(L, data ? data : "", len);
    free(data);
    if (lua_pcall(L, 1, LUA_MULTRET, 0) != LUA_OK) {
      fprintf(stderr, "eutaxy serve: %s %s: %s\n", p->method, p->path,
              lua_tostring(L, -1) ? lua_tostring(L, -1) : "error");
    } else {
      int n = lua_gettop(L), i, nh = (n - 5) / 2, rc;
      eu_http_header *hs;
      const char *body;
      size_t blen;
      if (lua_tointeger(L, 1) == 101) {
        /* the worker took the upgrade: the connection becomes the socket */
        if (p->ws_head && lua_isinteger(L, 5) && eu_buf_put(out, p->ws_head, p->ws_head_len) == EU_OK) {
          p->sock = (int64_t)lua_tointeger(L, 5);
          lua_settop(L, 0);
          return 101;
        }
        fprintf(stderr, "eutaxy serve: %s %s: fetch answered 101 %s\n", p->method, p->path,
                p->ws_head ? "without a webSocket" : "to a request that asked for no WebSocket upgrade");
        lua_settop(L, 0);
        out->n = before;
        eu_http_write_response(out, 500, NULL, &text, 1, isr, p->head ? 0 : sizeof isr - 1, keep);
        return 500;
      }
      hs = calloc((size_t)(nh ? nh : 1), sizeof *hs);
      if (hs) {
        for (i = 0; i < nh; i++) {
          hs[i].name = lua_tolstring(L, 6 + 2 * i, &hs[i].name_len);
          hs[i].value = lua_tolstring(L, 7 + 2 * i, &hs[i].value_len);
        }
        body = lua_tolstring(L, 3, &blen);
        status = (int)lua_tointeger(L, 1);
        rc = eu_http_write_response(out, status, lua_tostring(L, 2), hs, (size_t)nh, body, blen, keep);
        free(hs);
        if (rc == EU_OK) {
          if (p->head) out->n -= blen;  /* HEAD: the length of the body, not the body */
          lua_settop(L, 0);
          return status;
        }
        fprintf(stderr, "eutaxy serve: %s %s: the response of fetch cannot be sent (status %d)\n",
                p->method, p->path, status);
      }
      status = 500;
    }
    lua_settop(L, 0);
  } else if (!s->failed) {
    fprintf(stderr, "eutaxy serve: %s %s: the request could not be started\n", p->method, p->path);
  }
  out->n = before;
  eu_http_write_response(out, 500, NULL, &text, 1, isr, p->head ? 0 : sizeof isr - 1, keep);
  return 500;
}

/* ---- outbound fetches ------------------------------------------------- */

/* L: [1] the result (light userdata). Pushes the invocation's answer: true
 * and a wire response, or false and a wire error. */
static int build_answer(lua_State *L) {
  const eu_outbound_result *r = lua_touserdata(L, 1);
  size_t i;
  if (r->error_name) {
    lua_pushboolean(L, 0);
    lua_createtable(L, 0, 4);
    lua_pushstring(L, r->error_name);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, r->message);
    lua_setfield(L, -2, "message");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "remote");
    lua_pushboolean(L, r->retryable);
    lua_setfield(L, -2, "retryable");
    return 2;
  }
  lua_pushboolean(L, 1);
  lua_createtable(L, 0, 5);
  lua_pushliteral(L, "response");
  lua_setfield(L, -2, "kind");
  lua_pushinteger(L, r->status);
  lua_setfield(L, -2, "status");
  lua_pushstring(L, r->status_text ? r->status_text : "");
  lua_setfield(L, -2, "statusText");
  lua_createtable(L, (int)r->nheaders, 0);
  for (i = 0; i < r->nheaders; i++) {
    lua_createtable(L, 2, 0);
    lua_pushlstring(L, r->headers[i].name, r->headers[i].name_len);
    lua_rawseti(L, -2, 1);
    lua_pushlstring(L, r->headers[i].value, r->headers[i].value_len);
    lua_rawseti(L, -2, 2);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "headers");
  /* a Response of 204, 205 or 304 has no body, not even an empty one */
  if (r->body_len > 0 && r->status != 204 && r->status != 205 && r->status != 304) {
    lua_pushlstring(L, r->body, r->body_len);
    lua_setfield(L, -2, "body");
  }
  return 2;
}

static void drop_outgoing(server *s, outgoing *g) {
  outgoing **pp;
  for (pp = &s->outgoing; *pp; pp = &(*pp)->next)
    if (*pp == g) {
      *pp = g->next;
      break;
    }
  free(g->payload);
  free(g);
}

/* Resumes g's invocation with r, and forgets g. */
static void answer_outgoing(server *s, outgoing *g, const eu_outbound_result *r) {
  static const eu_outbound_result nomem = { "NetworkError", "out of memory for the response", 1, 0, NULL,
                                            NULL, 0, NULL, 0 };
  lua_State *L = s->L;
  eu_buf b;
  char *data;
  size_t len = 0;
  int attempt;
  eu_buf_init(&b);
  for (attempt = 0; attempt < 2; attempt++) {
    lua_settop(L, 0);
    lua_pushcfunction(L, build_answer);
    lua_pushlightuserdata(L, (void *)(attempt ? &nomem : r));
    if (lua_pcall(L, 1, 2, 0) == LUA_OK && eu_clone_encode(L, 1, 2, &b, NULL, 0) == EU_OK) break;
    eu_buf_reset(&b);
  }
  lua_settop(L, 0);
  data = eu_buf_take(&b, &len);
  eu_world_resume_outbound(s->w, g->task, data, len);
  drop_outgoing(s, g);
  request_pump(s);
}

static void fail_outgoing(server *s, outgoing *g, const char *name, const char *message, int retryable) {
  eu_outbound_result r;
  memset(&r, 0, sizeof r);
  r.error_name = name;
  r.message = message;
  r.retryable = retryable;
  answer_outgoing(s, g, &r);
}

static void on_fetched(void *ud, const eu_outbound_result *r) {
  outgoing *g = ud;
  server *s = g->srv;
  if (!s->o.quiet) {
    double ms = (double)(uv_hrtime() - g->t0) / 1e6;
    if (r->error_name) fprintf(stderr, "fetch %s %s %.1fms\n", g->what, r->error_name, ms);
    else fprintf(stderr, "fetch %s %d %.1fms\n", g->what, r->status, ms);
  }
  answer_outgoing(s, g, r);
}

/* "GET https://host/path": what the log shows of a request, without
 * credentials or query, as it shows a request's path. */
static void describe_outgoing(outgoing *g, const char *method, const char *url) {
  const char *rest = strstr(url, "://"), *host = rest ? rest + 3 : url, *at;
  size_t hostlen = strcspn(host, "/?#");
  if ((at = memchr(host, '@', hostlen)) != NULL) host = at + 1;
  snprintf(g->what, sizeof g->what, "%.16s %.*s%.*s", method, (int)(rest ? rest + 3 - url : 0), url,
           (int)strcspn(host, "?#"), host);
}

/* L: [1] the outgoing (light userdata). Decodes its wire request and
 * sends it, or raises saying why it cannot go. */
static int send_outgoing(lua_State *L) {
  outgoing *g = lua_touserdata(L, 1);
  server *s = g->srv;
  eu_outbound_request req;
  eu_http_header *hs;
  const char *redirect;
  char err[EU_ERRLEN];
  size_t n, i, ulen = 0;
  int count = 0;
  if (eu_clone_decode(L, g->payload, g->len, &count, err, sizeof err) != EU_OK || count != 1 || !lua_istable(L, 2))
    return luaL_error(L, "the request does not decode");
  memset(&req, 0, sizeof req);
  lua_getfield(L, 2, "method");    /* 3 */
  lua_getfield(L, 2, "url");       /* 4 */
  lua_getfield(L, 2, "body");      /* 5 */
  lua_getfield(L, 2, "redirect");  /* 6 */
  lua_getfield(L, 2, "headers");   /* 7 */
  req.method = lua_tostring(L, 3);
  req.url = lua_tolstring(L, 4, &ulen);
  if (!req.method || !req.url) return luaL_error(L, "the request has no method or URL");
  describe_outgoing(g, req.method, req.url);
  if (strlen(req.url) != ulen) return luaL_error(L, "%s: invalid URL: it holds a NUL byte", g->what);
  if (lua_type(L, 5) == LUA_TSTRING) req.body = lua_tolstring(L, 5, &req.body_len);
  redirect = lua_tostring(L, 6);
  req.redirect = !redirect || strcmp(redirect, "follow") == 0 ? EU_REDIRECT_FOLLOW
                 : strcmp(redirect, "manual") == 0        ? EU_REDIRECT_MANUAL
                                                          : EU_REDIRECT_ERROR;
  n = lua_istable(L, 7) ? lua_rawlen(L, 7) : 0;
  hs = lua_newuserdatauv(L, (n ? n : 1) * sizeof *hs, 0);
  for (i = 0; i < n; i++) {
    lua_rawgeti(L, 7, (lua_Integer)i + 1);
    if (!lua_istable(L, -1)) return luaL_error(L, "%s: a header is not a pair", g->what);
    lua_rawgeti(L, -1, 1);
    lua_rawgeti(L, -2, 2);
    hs[i].name = lua_tolstring(L, -2, &hs[i].name_len);
    hs[i].value = lua_tolstring(L, -1, &hs[i].value_len);
    if (!hs[i].name || !hs[i].value) return luaL_error(L, "%s: a header is not a pair of strings", g->what);
    lua_pop(L, 3);  /* the headers table keeps them */
  }
  req.headers = hs;
  req.nheaders = n;
  if (eu_outbound_send(s->out, &req, on_fetched, g, err, sizeof err) != EU_OK) return luaL_error(L, "%s", err);
  return 0;
}

static void start_outgoing(server *s, outgoing *g) {
  lua_State *L = s->L;
  char err[EU_ERRLEN];
  if (!s->out) {
    eu_outbound_opts oo;
    memset(&oo, 0, sizeof oo);
    oo.timeout_ms = s->o.fetch_timeout_ms;
    oo.max_bytes = s->o.fetch_max_bytes;
    oo.ca_file = s->o.ca_file;
    if (eu_outbound_new(&s->out, &s->loop, &oo, err, sizeof err) != EU_OK) {
      fail_outgoing(s, g, "NetworkError", err, 1);
      return;
    }
  }
  lua_settop(L, 0);
  lua_pushcfunction(L, send_outgoing);
  lua_pushlightuserdata(L, g);
  if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
    snprintf(err, sizeof err, "%s", lua_tostring(L, -1) ? lua_tostring(L, -1) : "out of memory");
    lua_settop(L, 0);
    fail_outgoing(s, g, "TypeError", err, 0);
    return;
  }
  free(g->payload);
  g->payload = NULL;
  g->t0 = uv_hrtime();
}

/* The world's way out (eu_world_opts.outbound): the request waits in line
 * for the output gate. */
static int on_outbound(void *ud, int64_t task, char *payload, size_t len, char *err, size_t errlen) {
  server *s = ud;
  outgoing *g = calloc(1, sizeof *g), **pp;
  if (!g) {
    free(payload);
    return eu_err(err, errlen, EU_ENOMEM, "out of memory");
  }
  g->srv = s;
  g->task = task;
  g->payload = payload;
  g->len = len;
  for (pp = &s->outgoing; *pp; pp = &(*pp)->next)
    ;
  *pp = g;
  request_pump(s);
  return EU_OK;
}

/* Sends every held request whose commits are durable: stamped, as an
 * answer is, once the pump has committed the turn that made it. */
static void send_held(server *s) {
  outgoing *g, *next;
  for (g = s->outgoing; g; g = next) {
    next = g->next;
    if (!g->payload) continue;  /* sent */
    if (!g->stamped) {
      g->stamped = 1;
      g->need = s->written;
    }
    if (s->failed)
      fail_outgoing(s, g, "NetworkError", "not sent: the server is stopping, its state could not be made durable", 0);
    else if (s->durable >= g->need)
      start_outgoing(s, g);
  }
}

/* At the end: requests in flight are abandoned with the invocations that wait for them. */
static void stop_outbound(server *s) {
  if (s->out) eu_outbound_close(s->out);
  s->out = NULL;
  while (s->outgoing) drop_outgoing(s, s->outgoing);
}

/* ---- connections ------------------------------------------------------ */

static int add_orphan(server *s, int slot) {
  if (s->norphans == s->caporphans) {
    int cap = s->caporphans ? s->caporphans * 2 : 16;
    int *a = realloc(s->orphans, (size_t)cap * sizeof *a);
    if (!a) return EU_ENOMEM;
    s->orphans = a;
    s->caporphans = cap;
  }
  s->orphans[s->norphans++] = slot;
  return EU_OK;
}

static void drop_pending(conn *c) {
  pending *p, *next;
  for (p = c->head; p; p = next) {
    next = p->next;
    if (p->slot) add_orphan(c->srv, p->slot);
    free(p->path);
    free(p->direct);
    free(p->raw);
    free(p->ws_head);
    free(p);
  }
  c->head = c->tail = NULL;
}

static void accept_one(server *s);

/* Called for the socket and for the timer: the last one frees the connection. */
static void on_conn_closed(uv_handle_t *h) {
  conn *c = h->data;
  server *s = c->srv;
  if (--c->handles > 0) return;
  if (c->prev) c->prev->next = c->next;
  else s->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  s->nconns--;
  eu_http_conn_free(c->http);
  eu_ws_conn_free(c->ws);
  free(c);
  if (s->accept_waiting && !s->stopping && s->nconns < s->max_conns) {
    s->accept_waiting = 0;
    accept_one(s);
  }
  if (s->stopping) request_pump(s);
}

static void close_conn(conn *c) {
  if (c->closing) return;
  c->closing = 1;
  if (c->ws) {
    server *s = c->srv;
    if (c->ws_open) eu_world_ws_client(s->w, c->sock, EU_WS_DROP, 1006, NULL, 0);
    c->ws_open = 0;
    if (c->sock >= 1 && c->sock <= s->capws && s->ws_conns[c->sock - 1] == c) s->ws_conns[c->sock - 1] = NULL;
    request_pump(s);
  }
  drop_pending(c);
  uv_close((uv_handle_t *)&c->timer, on_conn_closed);
  uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

static void on_written(uv_write_t *req, int status) {
  wreq *r = (wreq *)req;
  conn *c = r->c;
  free(r->data);
  free(r);
  c->nwrites--;
  c->last_io = uv_now(&c->srv->loop);
  if (status < 0 || (c->close_after && c->nwrites == 0)) close_conn(c);
  else arm_timer(c);
}

static void send_buf(conn *c, eu_buf *out) {
  wreq *r;
  uv_buf_t b;
  size_t n;
  if (out->n == 0) return;
  r = malloc(sizeof *r);
  if (!r) {
    eu_buf_free(out);
    close_conn(c);
    return;
  }
  r->c = c;
  r->data = eu_buf_take(out, &n);
  b = uv_buf_init(r->data, (unsigned)n);
  if (uv_write(&r->req, (uv_stream_t *)&c->tcp, &b, 1, on_written) != 0) {
    free(r->data);
    free(r);
    close_conn(c);
    return;
  }
  c->nwrites++;
}

/* ---- WebSockets --------------------------------------------------------- */

/* Writes what the layer has for c; closes c once it is done and written. */
static void write_ws(conn *c) {
  eu_buf *out = eu_ws_output(c->ws);
  send_buf(c, out);
  if (eu_ws_done(c->ws)) c->close_after = 1;
  if (!c->closing && c->close_after && c->nwrites == 0) close_conn(c);
  else arm_timer(c);
}

static int on_ws_message(void *ud, int binary, const char *data, size_t len) {
  conn *c = ud;
  /* once our close frame is out, what still comes is dropped, as a browser does */
  if (c->ws_open && !c->ws_closing)
    eu_world_ws_client(c->srv->w, c->sock, binary ? EU_WS_BINARY : EU_WS_TEXT, 0, data, len);
  return 0;
}

static void on_ws_closed(void *ud, int code, const char *reason, size_t len) {
  conn *c = ud;
  if (c->ws_open) eu_world_ws_client(c->srv->w, c->sock, EU_WS_CLOSE, code, reason, len);
  c->ws_open = 0;
}

/* Feeds what arrived; a protocol error closes the connection (1002, 1007,
 * 1009) and reaches the object as webSocketError. */
static void feed_ws(conn *c, const char *p, size_t n) {
  if (eu_ws_feed(c->ws, p, n) < 0 && c->ws_open) {
    const char *why = NULL;
    int code = eu_ws_conn_error(c->ws, &why);
    if (!why) why = "the connection failed";
    eu_world_ws_client(c->srv->w, c->sock, EU_WS_ERROR, code, why, strlen(why));
    c->ws_open = 0;
  }
  write_ws(c);
}

/* The connection of c's 101 becomes socket sock. */
static void become_websocket(conn *c, int64_t sock) {
  static const eu_ws_callbacks cb = { on_ws_message, on_ws_closed };
  server *s = c->srv;
  char err[EU_ERRLEN], label[32];
  eu_buf *rest;
  if (c->closing) return;
  if (sock > s->capws) {
    int cap = s->capws ? s->capws : 64;
    conn **a;
    while (cap < sock) cap *= 2;
    if (!(a = realloc(s->ws_conns, (size_t)cap * sizeof *a))) {
      close_conn(c);
      return;
    }
    memset(a + s->capws, 0, (size_t)(cap - s->capws) * sizeof *a);
    s->ws_conns = a;
    s->capws = cap;
  }
  if (eu_ws_conn_new(&c->ws, s->o.ws_max_message, &cb, c) != EU_OK) {
    close_conn(c);
    return;
  }
  c->sock = sock;
  s->ws_conns[sock - 1] = c;
  snprintf(label, sizeof label, "ws-%" PRIu64, ++s->nws);
  if (eu_world_ws_connect(s->w, sock, label, NULL, 0, err, sizeof err) != EU_OK) {
    fprintf(stderr, "eutaxy serve: %s\n", err);
    close_conn(c);
    return;
  }
  c->ws_open = 1;
  /* what the client sent right after its upgrade request */
  rest = eu_http_conn_rest(c->http);
  if (rest && rest->n) feed_ws(c, rest->p, rest->n);
  else arm_timer(c);
  /* HTTP is over on this connection: its parser's buffers go */
  eu_http_conn_free(c->http);
  c->http = NULL;
  request_pump(s);  /* what the object sent before the client came leaves in the next pump */
}

/* The commits a held message needs, until the pump that commits the turn
 * that sent it sets them (stamp_ws_held). */
#define WS_UNSTAMPED UINT64_MAX

/* The world's ws_out: what an object sent, held until durable. */
static void on_ws_out(void *ud, int64_t sock, int op, int code, const char *data, size_t len) {
  server *s = ud;
  uint64_t need = WS_UNSTAMPED;
  if (eu_buf_put(&s->ws_held, &sock, sizeof sock) != EU_OK || eu_buf_put(&s->ws_held, &need, sizeof need) != EU_OK ||
      eu_ws_record_put(&s->ws_held, op, code, 0, data, len) != EU_OK)
    fprintf(stderr, "eutaxy serve: out of memory: a WebSocket message of %zu bytes is dropped\n", len);
}

static void deliver_ws(server *s, int64_t sock, int op, int code, const char *data, size_t len) {
  conn *c = sock >= 1 && sock <= s->capws ? s->ws_conns[sock - 1] : NULL;
  char err[EU_ERRLEN];
  if (!c || c->closing) return;
  if (op == EU_WS_DROP) {
    c->ws_open = 0;  /* the object was reset: the world knows */
    close_conn(c);
    return;
  }
  if (op == EU_WS_CLOSE) {
    if (eu_ws_close(c->ws, code, data, len, err, sizeof err) != EU_OK)
      fprintf(stderr, "eutaxy serve: WebSocket %" PRId64 ": %s\n", sock, err);
    c->ws_closing = 1;
  } else if (!c->ws_closing && eu_ws_send(c->ws, op == EU_WS_BINARY, data, len, err, sizeof err) != EU_OK) {
    fprintf(stderr, "eutaxy serve: WebSocket %" PRId64 ": %s\n", sock, err);
  }
  write_ws(c);
}

/* Stamps what objects sent since the last pump with the commits written
 * now, as an answer is stamped: the pump has just committed the turns that
 * sent them, so each waits for its own turn's writes too. */
static void stamp_ws_held(server *s) {
  const char *rec = s->ws_held.p + s->ws_held_stamped, *data;
  size_t n = s->ws_held.n - s->ws_held_stamped, len;
  int op, code;
  int64_t at;
  while (n >= 16) {
    memcpy(s->ws_held.p + (rec - s->ws_held.p) + 8, &s->written, sizeof s->written);
    rec += 16;
    n -= 16;
    if (!eu_ws_record_get(&rec, &n, &op, &code, &at, &data, &len)) break;
  }
  s->ws_held_stamped = s->ws_held.n - n;
}

/* Sends, in order, what objects sent whose commits are durable now. */
static void send_ws_held(server *s) {
  const char *p, *data;
  size_t n, len;
  int op, code;
  int64_t sock, at;
  uint64_t need;
  stamp_ws_held(s);
  p = s->ws_held.p + s->ws_held_off;
  n = s->ws_held.n - s->ws_held_off;
  while (n >= 16) {
    const char *rec = p;
    size_t left;
    memcpy(&sock, p, 8);
    memcpy(&need, p + 8, 8);
    if (s->durable < need && !s->failed) break;
    p += 16;
    left = n - 16;
    if (!eu_ws_record_get(&p, &left, &op, &code, &at, &data, &len)) break;
    n = left;
    s->ws_held_off += (size_t)(p - rec);
    /* after a failed sync nothing may leave that could tell of lost writes */
    if (!s->failed) deliver_ws(s, sock, op, code, data, len);
  }
  if (s->ws_held_off == s->ws_held.n) {
    s->ws_held.n = 0;
    s->ws_held_off = 0;
    s->ws_held_stamped = 0;
  }
}

/* Answers, in order, every request at the head of the queue that is ready. */
static void flush_conn(conn *c) {
  server *s = c->srv;
  eu_buf out;
  if (c->closing || c->ws) return;
  eu_buf_init(&out);
  while (c->head && ready(s, c->head)) {
    pending *p = c->head;
    /* after an upgrade request the connection is no HTTP one any more */
    int keep = p->keep_alive && !s->stopping && !s->failed && !p->ws_head && !p->raw &&
               !(p->next == NULL && (c->eof || c->failed_status));
    int status = respond(s, p, &out, keep);
    int64_t sock = p->sock;
    log_request(s, p, status);
    c->head = p->next;
    if (!c->head) c->tail = NULL;
    free(p->path);
    free(p->direct);
    free(p->raw);
    free(p->ws_head);
    free(p);
    if (sock) {
      send_buf(c, &out);
      eu_buf_free(&out);
      become_websocket(c, sock);
      return;
    }
    if (!keep) {
      c->close_after = 1;
      drop_pending(c);
      break;
    }
  }
  if (!c->head && !c->close_after && c->failed_status) {
    const char *reason = c->timed_out;
    int status = c->failed_status;
    char body[64];
    if (!reason) eu_http_conn_error(c->http, &reason);
    snprintf(body, sizeof body, "%s\n", eu_http_reason(status));
    eu_http_write_response(&out, status, NULL, NULL, 0, body, strlen(body), 0);
    if (!s->o.quiet) fprintf(stderr, "- - %d (%s)\n", status, reason ? reason : "bad request");
    c->close_after = 1;
  }
  if (!c->head && !c->close_after && (c->eof || s->stopping)) c->close_after = 1;
  send_buf(c, &out);
  eu_buf_free(&out);
  if (!c->closing && c->close_after && c->nwrites == 0) close_conn(c);
  else if (!c->closing) arm_timer(c);
}

static void on_conn_timer(uv_timer_t *t) {
  conn *c = t->data;
  if (c->closing) return;
  if (c->ws) {
    close_conn(c);  /* our close frame went unanswered */
    return;
  }
  if (c->busy_since && !c->failed_status) {
    /* A request began and did not arrive whole in time: 408, then close. */
    c->failed_status = 408;
    c->timed_out = "the request did not arrive within --header-timeout";
    uv_read_stop((uv_stream_t *)&c->tcp);
    request_pump(c->srv);
  } else if (!c->head && c->nwrites == 0) {
    close_conn(c);  /* idle past --idle-timeout */
  }
}

/* The connection's one timer: the header timeout while a request is
 * arriving, the idle timeout while nothing is asked or owed, none while the
 * server owes an answer (the CPU limit bounds that). */
static void arm_timer(conn *c) {
  server *s = c->srv;
  uint64_t now = uv_now(&s->loop), deadline;
  if (c->closing) return;
  if (c->ws) {
    /* a socket stays open while its object sleeps: only a close handshake times out */
    if (c->ws_closing && !uv_is_active((uv_handle_t *)&c->timer))
      uv_timer_start(&c->timer, on_conn_timer, s->o.header_timeout_ms, 0);
    else if (!c->ws_closing)
      uv_timer_stop(&c->timer);
    return;
  }
  if (c->failed_status || c->head || c->nwrites) {
    uv_timer_stop(&c->timer);
    return;
  }
  if (eu_http_conn_busy(c->http)) {
    if (!c->busy_since) c->busy_since = now;
    deadline = c->busy_since + s->o.header_timeout_ms;
  } else {
    c->busy_since = 0;
    deadline = c->last_io + s->o.idle_timeout_ms;
  }
  uv_timer_start(&c->timer, on_conn_timer, deadline > now ? deadline - now : 0, 0);
}

/* One buffer serves every read: libuv hands it to on_read right after
 * asking for it, and the http layer copies what it keeps. */
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  server *s = ((conn *)h->data)->srv;
  (void)suggested;
  buf->base = s->rbuf;
  buf->len = sizeof s->rbuf;
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
  conn *c = stream->data;
  server *s = c->srv;
  if (c->ws) {
    if (nread > 0 && !c->closing) {
      c->last_io = uv_now(&s->loop);
      catch_up(s);
      feed_ws(c, buf->base, (size_t)nread);
    } else if (nread < 0) {
      close_conn(c);  /* gone without a close frame: the object hears 1006 */
    }
    request_pump(s);
    return;
  }
  if (nread > 0 && !c->failed_status && !c->closing) {
    int rc, was_busy = eu_http_conn_busy(c->http);
    uint64_t before = s->nrequests;
    c->last_io = uv_now(&s->loop);
    catch_up(s);  /* a request starts at the wall clock's now, not at the last event's time */
    rc = eu_http_feed(c->http, buf->base, (size_t)nread, on_request, c);
    if (rc < 0) {
      int status = eu_http_conn_error(c->http, NULL);
      c->failed_status = status ? status : 400;
      uv_read_stop(stream);
    } else if (eu_http_conn_closing(c->http)) {
      uv_read_stop(stream);
      c->eof = 1;
    }
    /* The header timeout counts from the first byte of the request now arriving. */
    if (!eu_http_conn_busy(c->http)) c->busy_since = 0;
    else if (!was_busy || s->nrequests != before) c->busy_since = c->last_io;
  } else if (nread == UV_EOF) {
    c->eof = 1;
    uv_read_stop(stream);
  } else if (nread < 0) {
    close_conn(c);
    return;
  }
  request_pump(s);
}

static void accept_one(server *s) {
  conn *c = calloc(1, sizeof *c);
  if (!c) return;
  c->srv = s;
  if (eu_http_conn_new(&c->http, NULL) != EU_OK || uv_tcp_init(&s->loop, &c->tcp) != 0) {
    eu_http_conn_free(c->http);
    free(c);
    return;
  }
  uv_timer_init(&s->loop, &c->timer);
  c->handles = 2;
  c->tcp.data = c->timer.data = c;
  c->next = s->conns;
  if (s->conns) s->conns->prev = c;
  s->conns = c;
  s->nconns++;
  c->last_io = uv_now(&s->loop);
  if (uv_accept((uv_stream_t *)&s->listener, (uv_stream_t *)&c->tcp) != 0 ||
      uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0) {
    close_conn(c);
    return;
  }
  arm_timer(c);
}

/* A connection is waiting. At --max-connections it is left in the backlog:
 * libuv stops watching the listener until uv_accept takes it, so the kernel
 * holds further clients, not our file descriptors. */
static void on_connection(uv_stream_t *listener, int status) {
  server *s = listener->data;
  if (status < 0) {
    int64_t now = (int64_t)uv_now(&s->loop);
    if (now - s->last_emfile >= 1000 || !s->last_emfile) {
      fprintf(stderr, "eutaxy serve: cannot accept a connection: %s\n", uv_strerror(status));
      s->last_emfile = now ? now : 1;
    }
    return;
  }
  if (s->stopping) return;
  if (s->nconns >= s->max_conns) {
    s->accept_waiting = 1;
    return;
  }
  accept_one(s);
}

/* ---- eviction --------------------------------------------------------- */

typedef struct candidate {
  int64_t last;
  eu_object *o;
} candidate;

static int by_last(const void *a, const void *b) {
  const candidate *x = a, *y = b;
  return x->last < y->last ? -1 : x->last > y->last;
}

/* Whether o's file has writes not yet committed, or committed and not yet
 * synced: it must stay open until they are durable. */
static int store_busy(server *s, eu_object *o, int *index) {
  served_store *ss = served_of(s, o);
  *index = ss ? ss->slot : -1;
  return ss && (ss->syncing || ss->dirty || ss->writing ||
                (eu_store_db(ss->store) && sqlite3_txn_state(eu_store_db(ss->store), NULL) == SQLITE_TXN_WRITE));
}

/* Evicts objects idle for --evict-after, then, past --max-resident, the
 * least recently active down to nine tenths of it. */
static void evict(server *s, int over_cap) {
  int n = eu_world_nobjects(s->w), i, k = 0, keep, evicted = 0, nres;
  int64_t now = now_ms(s);
  candidate *cs;
  if (n == 0) return;
  if (!(cs = malloc((size_t)n * sizeof *cs))) return;
  for (i = 0; i < n; i++) {
    eu_object *o = eu_world_object_at(s->w, i);
    int si;
    if (!eu_object_has_isolate(o) && !eu_object_store_if_open(o)) continue;
    if (!eu_world_evictable(s->w, o) || store_busy(s, o, &si)) continue;
    cs[k].last = eu_object_last_active(o);
    cs[k].o = o;
    k++;
  }
  qsort(cs, (size_t)k, sizeof *cs, by_last);
  nres = eu_world_nresident(s->w);
  keep = over_cap ? s->o.max_resident - s->o.max_resident / 10 : nres;
  for (i = 0; i < k; i++) {
    int si;
    if (!(nres - evicted > keep || now - cs[i].last >= s->o.evict_after_ms)) break;
    store_busy(s, cs[i].o, &si);
    if (eu_world_evict(s->w, cs[i].o) != EU_OK) continue;
    if (si >= 0) drop_served(s, si, 1);
    evicted++;
  }
  free(cs);
}

static void on_sweep(uv_timer_t *t) {
  server *s = t->data;
  if (s->stopping) return;
  pump(s);  /* commits what ran since the last pump: an object must be clean to go */
  evict(s, 0);
}

/* ---- the world on the wall clock -------------------------------------- */

static void on_timer(uv_timer_t *t) {
  pump(t->data);
}

static void on_idle(uv_idle_t *h) {
  uv_idle_stop(h);
  pump(h->data);
}

/* Pumps once, after libuv has delivered every read of this round (an idle
 * handle runs before the next poll, and keeps that poll from blocking): the
 * requests of all connections run, then one sync covers them all. */
static void request_pump(server *s) {
  if (!uv_is_closing((uv_handle_t *)&s->idle)) uv_idle_start(&s->idle, on_idle);
}

static void close_handle_if_open(uv_handle_t *h) {
  if (!uv_is_closing(h)) uv_close(h, NULL);
}

/* Runs every event due by the wall clock and moves the world's clock to it. */
static void catch_up(server *s) {
  char err[EU_ERRLEN];
  int64_t delta = now_ms(s) - eu_world_now(s->w);
  if (eu_world_advance(s->w, delta > 0 ? delta : 0, err, sizeof err) != EU_OK)
    fprintf(stderr, "eutaxy serve: %s\n", err);
}

static void begin_stop(server *s) {
  conn *c;
  if (s->stopping) return;
  s->stopping = 1;
  if (s->listening) close_handle_if_open((uv_handle_t *)&s->listener);
  for (c = s->conns; c; c = c->next) {
    if (c->closing) continue;
    uv_read_stop((uv_stream_t *)&c->tcp);
    if (c->ws) {
      /* as a deploy does: the client may come back */
      char err[EU_ERRLEN];
      c->ws_open = 0;
      eu_ws_close(c->ws, 1012, "service restart", 15, err, sizeof err);
      c->close_after = 1;
      write_ws(c);
    }
  }
}

/* Advances the world to now, syncs, sends what is ready, evicts, and sleeps
 * until the next event. */
static void pump(server *s) {
  int64_t next;
  conn *c, *cnext;
  int i;
  catch_up(s);
  if (s->o.test_clock && s->swept_clock != s->clock) {
    /* a test clock moved: what it made idle goes now, not at the next sweep */
    s->swept_clock = s->clock;
    if (s->o.evict_after_ms > 0) evict(s, 0);
  }
  commit_batches(s);
  start_sync(s);
  send_held(s);
  send_ws_held(s);
  for (c = s->conns; c; c = cnext) {
    cnext = c->next;
    flush_conn(c);
  }
  for (i = 0; i < s->norphans;) {
    char *data;
    size_t len;
    if (eu_world_slot_take(s->w, s->orphans[i], &data, &len) == EU_OK) {
      free(data);
      s->orphans[i] = s->orphans[--s->norphans];
    } else {
      i++;
    }
  }
  if (s->failed) begin_stop(s);
  if (eu_world_nresident(s->w) > s->o.max_resident) evict(s, 1);
  open_batches(s);
  if (s->stopping && !s->conns && !s->syncs_in_flight && !s->nopening) {
    stop_outbound(s);
    close_handle_if_open((uv_handle_t *)&s->timer);
    close_handle_if_open((uv_handle_t *)&s->sweep);
    close_handle_if_open((uv_handle_t *)&s->idle);
    close_handle_if_open((uv_handle_t *)&s->sigint);
    close_handle_if_open((uv_handle_t *)&s->sigterm);
    return;
  }
  next = eu_world_next_due(s->w);
  if (next == INT64_MAX || (s->o.test_clock && next > s->clock)) {
    uv_timer_stop(&s->timer);  /* a test clock moves only when asked */
  } else {
    int64_t wait = next - now_ms(s);
    uv_timer_start(&s->timer, on_timer, (uint64_t)(wait > 0 ? wait : 0), 0);
  }
}

static void on_signal(uv_signal_t *h, int signum) {
  server *s = h->data;
  (void)signum;
  begin_stop(s);
  pump(s);
}

/* ---- start and stop --------------------------------------------------- */

/* At the end: the databases still in memory whose last commits no round
 * covered (what alarms wrote at the end) are written and synced, as
 * closing a file's connection syncs its WAL. */
static void write_last_images(server *s) {
  int i, e, any = 0;
  for (i = 0; i < s->ndirty && !s->failed; i++) {
    served_store *ss = s->dirty[i];
    if (!eu_store_in_memory(ss->store) || write_now(s, ss) != 0 || s->o.durability_process) continue;
    if ((e = sync_path(ss->path, "", 0)) != 0) fail_server(s, "cannot sync %s: %s", ss->path, e);
    any = 1;
  }
  if (any && !s->failed && fsync(s->dirfd) != 0) fail_server(s, "cannot sync %s: %s", s->state, errno);
}

static int start(server *s, char *err, size_t errlen) {
  eu_world_opts wo;
  struct sockaddr_storage addr;
  struct sockaddr_storage bound;
  int rc, namelen = sizeof bound, port;
  const char *host = s->o.host;
  memset(&wo, 0, sizeof wo);
  wo.entry = s->o.entry;
  wo.libdir = s->o.libdir;
  wo.projectdir = s->o.projectdir;
  wo.bindings = s->o.bindings;
  wo.nbindings = s->o.nbindings;
  wo.vars = s->o.vars;
  wo.vars_len = s->o.vars_len;
  /* Ids from newUniqueId must differ between runs of the server. */
  wo.seed = (uint64_t)wall_ms() ^ ((uint64_t)getpid() << 32) ^ uv_hrtime();
  wo.start_ms = now_ms(s);
  wo.crons = s->o.crons;
  wo.ncrons = s->o.ncrons;
  wo.no_trace = 1;
  wo.echo_log = 1;
  wo.hold_wait_until = 1;  /* a worker's waitUntil runs once its response is on its way */
  wo.store_provider = provide_store;
  wo.store_opener = open_elsewhere;
  wo.store_ud = s;
  wo.berths = s->o.max_awake > 0 ? s->o.max_awake : 0;
  wo.cpu_limit = s->o.cpu_limit;
  wo.mem_limit = s->o.mem_limit;
  wo.max_object_bytes = s->o.max_object_bytes;
  wo.outbound = on_outbound;
  wo.ws_out = on_ws_out;
  wo.ws_ud = s;
  wo.outbound_ud = s;
  if ((rc = mkdir_p(s->state, err, errlen)) != EU_OK) return rc;
  if ((s->dirfd = open(s->state, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
    return eu_err(err, errlen, EU_EINVAL, "cannot open %s: %s", s->state, strerror(errno));
  if ((rc = eu_world_new(&s->w, &wo, err, errlen)) != EU_OK) return rc;
  if ((rc = rearm_alarms(s, err, errlen)) != EU_OK) return rc;
  make_blank(s);
  remove_spares(s);

  if (strchr(host, ':')) rc = uv_ip6_addr(host, s->o.port, (struct sockaddr_in6 *)&addr);
  else rc = uv_ip4_addr(host, s->o.port, (struct sockaddr_in *)&addr);
  if (rc != 0) return eu_err(err, errlen, EU_EINVAL, "invalid --host %s: %s", host, uv_strerror(rc));
  if ((rc = uv_tcp_bind(&s->listener, (const struct sockaddr *)&addr, 0)) != 0 ||
      (rc = uv_listen((uv_stream_t *)&s->listener, 511, on_connection)) != 0)
    return eu_err(err, errlen, EU_EINVAL, "cannot listen on %s port %d: %s", host, s->o.port, uv_strerror(rc));
  s->listening = 1;
  if ((rc = uv_tcp_getsockname(&s->listener, (struct sockaddr *)&bound, &namelen)) != 0)
    return eu_err(err, errlen, EU_EINVAL, "cannot read the bound port: %s", uv_strerror(rc));
  port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                           : ((struct sockaddr_in *)&bound)->sin_port);
  if (strchr(host, ':')) snprintf(s->authority, sizeof s->authority, "[%s]:%d", host, port);
  else snprintf(s->authority, sizeof s->authority, "%s:%d", host, port);
  printf("eutaxy serve: listening on http://%s\n", s->authority);
  fflush(stdout);
  if (s->o.evict_after_ms > 0) {
    uint64_t every = (uint64_t)s->o.evict_after_ms / 4;
    uv_timer_start(&s->sweep, on_sweep, every ? every : 1, every ? every : 1);
  }
  pump(s);  /* alarms that came due while the server was down */
  return EU_OK;
}

/* Descriptors held back from connections and open stores: the listener,
 * the loop's own, the state directory, standard streams, outbound fetches,
 * and the file a sync opens (at most EU_SERVE_SYNCFS - 1 a round, for a
 * round of more files is one syncfs). */
#define EU_SERVE_FDS_RESERVED (48 + EU_SERVE_ROUNDS * (EU_SERVE_SYNCFS - 1))

/* Zero options take their defaults. The descriptors the process may have,
 * less those held back, go to connections (one each) and to the pool of
 * open stores (two each: the database and its WAL, kept in exclusive
 * locking mode, which needs no shared-memory file): a quarter to each by
 * default, the pool no larger than --max-resident; given
 * --max-connections, the pool has what is left. */
static void fill_defaults(server *s) {
  struct rlimit rl;
  long fds = 1024, hot;
  if (s->o.max_resident <= 0) s->o.max_resident = EU_SERVE_MAX_RESIDENT;
  if (s->o.max_awake == 0) s->o.max_awake = EU_SERVE_MAX_AWAKE;
  /* the world's default, which an opening on the pool sets (open_one) */
  if (s->o.max_object_bytes <= 0) s->o.max_object_bytes = EU_DEFAULT_MAX_OBJECT_BYTES;
  if (s->o.evict_after_ms < 0) s->o.evict_after_ms = 0;
  else if (s->o.evict_after_ms == 0) s->o.evict_after_ms = EU_SERVE_EVICT_AFTER_MS;
  if (s->o.header_timeout_ms <= 0) s->o.header_timeout_ms = EU_SERVE_HEADER_TIMEOUT_MS;
  if (s->o.idle_timeout_ms <= 0) s->o.idle_timeout_ms = EU_SERVE_IDLE_TIMEOUT_MS;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    if (rl.rlim_cur < rl.rlim_max) {
      rl.rlim_cur = rl.rlim_max;
      setrlimit(RLIMIT_NOFILE, &rl);
      getrlimit(RLIMIT_NOFILE, &rl);
    }
    fds = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 1000000 ? 1000000 : (long)rl.rlim_cur;
  }
  fds -= EU_SERVE_FDS_RESERVED;
  /* The stores kept open: as many as heaps are kept awake (an open store
   * holds its SQLite memory too), within the descriptors. */
  hot = s->o.max_awake > 0 && s->o.max_awake < s->o.max_resident ? s->o.max_awake : s->o.max_resident;
  s->max_conns = s->o.max_connections;
  if (s->max_conns <= 0) {
    long open = fds / 4 < hot ? fds / 4 : hot;
    long n = fds - 2 * open;
    s->max_conns = n < 16 ? 16 : n > 10000 ? 10000 : (int)n;
  }
  s->max_open = (int)((fds - s->max_conns) / 2 < hot ? (fds - s->max_conns) / 2 : hot);
  if (s->max_open < 4) s->max_open = 4;
}

int eu_serve_run(const eu_serve_opts *o, char *err, size_t errlen) {
  server *s;
  int rc, i;
  if (!o->entry || !o->libdir) return eu_err(err, errlen, EU_EINVAL, "serve needs a worker entry and a library folder");
  s = calloc(1, sizeof *s);
  if (!s) return eu_err(err, errlen, EU_ENOMEM, "out of memory");
  s->o = *o;
  s->clock = o->test_clock;
  if (!s->o.host) s->o.host = "127.0.0.1";
  snprintf(s->state, sizeof s->state, "%s", o->state && *o->state ? o->state : ".eutaxy/state");
  if (!(s->L = luaL_newstate())) {
    free(s);
    return eu_err(err, errlen, EU_ENOMEM, "out of memory");
  }
  signal(SIGPIPE, SIG_IGN);
  setenv("UV_THREADPOOL_SIZE", "16", 0);  /* syncs of many files run side by side */
  /* Every pump frees what the last one took; without these glibc hands the
   * top of the heap back and asks for it again, one brk each time. */
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
  mallopt(M_TOP_PAD, 4 << 20);
  /* The pool's threads open objects' files, and what they allocate lives
   * on in the loop's connections: with an arena per thread (glibc's
   * default, up to 16 here) each kept its freed memory apart, 11 MB more
   * at the peak of 4,000 new objects. Two: the loop's, and the pool's. */
  mallopt(M_ARENA_MAX, 2);
  /* and SQLite runs on them as well as on the loop's */
  eu_sqlmem_share();
  s->dirfd = -1;
  fill_defaults(s);
  if ((rc = uv_loop_init(&s->loop)) != 0) {
    lua_close(s->L);
    free(s);
    return eu_err(err, errlen, EU_ENOMEM, "cannot start the event loop: %s", uv_strerror(rc));
  }
  uv_tcp_init(&s->loop, &s->listener);
  uv_timer_init(&s->loop, &s->timer);
  uv_timer_init(&s->loop, &s->sweep);
  uv_idle_init(&s->loop, &s->idle);
  uv_signal_init(&s->loop, &s->sigint);
  uv_signal_init(&s->loop, &s->sigterm);
  s->listener.data = s->timer.data = s->sweep.data = s->idle.data = s;
  s->sigint.data = s->sigterm.data = s;
  uv_signal_start(&s->sigint, on_signal, SIGINT);
  uv_signal_start(&s->sigterm, on_signal, SIGTERM);
  rc = start(s, err, errlen);
  if (rc != EU_OK) {
    s->stopping = 1;
    close_handle_if_open((uv_handle_t *)&s->listener);
    close_handle_if_open((uv_handle_t *)&s->timer);
    close_handle_if_open((uv_handle_t *)&s->sweep);
    close_handle_if_open((uv_handle_t *)&s->idle);
    close_handle_if_open((uv_handle_t *)&s->sigint);
    close_handle_if_open((uv_handle_t *)&s->sigterm);
  }
  uv_run(&s->loop, UV_RUN_DEFAULT);
  s->stopping = 1;
  if (s->out || s->outgoing) {
    stop_outbound(s);
    uv_run(&s->loop, UV_RUN_DEFAULT);  /* its handles close */
  }
  commit_batches(s);  /* what alarms wrote at the end; closing syncs it */
  write_last_images(s);
  if (rc == EU_OK && s->failed)
    rc = eu_err(err, errlen, EU_ESQL, "stopped: the state could not be made durable (see above)");
  uv_loop_close(&s->loop);
  /* The world never closes a provider's stores: they are closed after it. */
  eu_world_free(s->w);
  for (i = 0; i < s->nstores; i++) close_served(s->stores[i]);
  free(s->stores);
  free(s->by_object);
  free(s->dirty);
  free(s->blank);
  if (s->dirfd >= 0) close(s->dirfd);
  free(s->orphans);
  free(s->ws_conns);
  eu_buf_free(&s->ws_held);
  lua_close(s->L);
  free(s);
  return rc;
}

/* ---- core.serve ------------------------------------------------------- */

static const char *field_str(lua_State *L, const char *k) {
  const char *v;
  lua_getfield(L, 1, k);
  v = lua_tostring(L, -1);
  lua_pop(L, 1);  /* the options table keeps it alive */
  return v;
}

static int64_t opt_int(lua_State *L, const char *k, int64_t lo, int64_t hi) {
  lua_Integer v;
  lua_getfield(L, 1, k);
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    return 0;
  }
  if (!lua_isinteger(L, -1)) return luaL_error(L, "core.serve: %s must be an integer", k);
  v = lua_tointeger(L, -1);
  lua_pop(L, 1);
  if (v < lo || v > hi) return luaL_error(L, "core.serve: %s is out of range", k);
  return v;
}

/* core.serve{ entry=, projectdir=, libdir=, bindings=, vars=, host=, port=, state=, quiet=,
 * durability_process=, max_resident=, max_awake=, evict_after_ms=, header_timeout_ms=,
 * idle_timeout_ms=, max_connections=, cpu_limit=, memory_limit=, max_object_bytes=, test_clock=,
 * fetch_timeout_ms=, fetch_max_bytes=, ca_file=, crons = { "*\/5 * * * *", ... } } (integers;
 * nil for the defaults):
 * true once the server stopped, or nil and a message if it could not start. */
static int l_serve(lua_State *L) {
  eu_serve_opts o;
  eu_binding *bs;
  const char **cs;
  char err[EU_ERRLEN];
  int n, i, rc, ct;
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  memset(&o, 0, sizeof o);
  o.entry = field_str(L, "entry");
  o.projectdir = field_str(L, "projectdir");
  o.libdir = field_str(L, "libdir");
  o.host = field_str(L, "host");
  o.state = field_str(L, "state");
  lua_getfield(L, 1, "port");
  o.port = (int)luaL_optinteger(L, -1, 8787);
  lua_getfield(L, 1, "quiet");
  o.quiet = lua_toboolean(L, -1);
  lua_pop(L, 2);
  lua_getfield(L, 1, "durability_process");
  o.durability_process = lua_toboolean(L, -1);
  lua_pop(L, 1);
  o.max_resident = (int)opt_int(L, "max_resident", 0, 100000000);
  o.max_awake = (int)opt_int(L, "max_awake", -1, 100000000);
  o.evict_after_ms = opt_int(L, "evict_after_ms", -1, INT64_MAX / 2);
  o.header_timeout_ms = opt_int(L, "header_timeout_ms", 0, INT64_MAX / 2);
  o.idle_timeout_ms = opt_int(L, "idle_timeout_ms", 0, INT64_MAX / 2);
  o.max_connections = (int)opt_int(L, "max_connections", 0, 100000000);
  o.cpu_limit = opt_int(L, "cpu_limit", 0, INT64_MAX / 2);
  o.mem_limit = (size_t)opt_int(L, "memory_limit", 0, INT64_MAX / 2);
  o.max_object_bytes = opt_int(L, "max_object_bytes", 0, INT64_MAX / 2);
  o.test_clock = opt_int(L, "test_clock", 0, INT64_MAX / 4);
  o.fetch_timeout_ms = opt_int(L, "fetch_timeout_ms", 0, INT64_C(1) << 40);
  o.fetch_max_bytes = (size_t)opt_int(L, "fetch_max_bytes", 0, EU_SERVE_FETCH_MAX_BYTES);
  o.ca_file = field_str(L, "ca_file");
  o.ws_max_message = (size_t)opt_int(L, "ws_max_message", 0, EU_WS_MAX_MESSAGE);
  if (!o.entry || !o.libdir) return luaL_error(L, "core.serve: entry and libdir are required");
  if (o.port < 0 || o.port > 65535) return luaL_error(L, "core.serve: port must be within 0..65535");
  lua_getfield(L, 1, "bindings");  /* 2 */
  n = lua_istable(L, 2) ? (int)luaL_len(L, 2) : 0;
  bs = lua_newuserdatauv(L, sizeof *bs * (size_t)(n ? n : 1), 0);  /* 3: freed by the GC */
  memset(bs, 0, sizeof *bs * (size_t)(n ? n : 1));  /* serve has no services */
  for (i = 0; i < n; i++) {
    lua_geti(L, 2, i + 1);
    lua_getfield(L, -1, "name");
    lua_getfield(L, -2, "class_name");
    bs[i].name = lua_tostring(L, -2);
    bs[i].class_name = lua_tostring(L, -1);
    if (!bs[i].name || !bs[i].class_name)
      return luaL_error(L, "core.serve: bindings[%d] needs name and class_name", i + 1);
    lua_pop(L, 3);  /* the bindings table keeps them alive */
  }
  o.bindings = bs;
  o.nbindings = n;
  lua_getfield(L, 1, "vars");  /* 4 */
  if (lua_istable(L, 4)) {
    if (eu_clone_push_encoded(L, 4, err, sizeof err) != EU_OK)  /* 5: kept until the server stops */
      return luaL_error(L, "core.serve: vars: %s", err);
    o.vars = lua_tolstring(L, 5, &o.vars_len);
  } else if (!lua_isnil(L, 4)) {
    return luaL_error(L, "core.serve: vars must be a table");
  }
  lua_getfield(L, 1, "crons");
  ct = lua_gettop(L);
  n = lua_istable(L, ct) ? (int)luaL_len(L, ct) : 0;
  cs = lua_newuserdatauv(L, sizeof *cs * (size_t)(n ? n : 1), 0);  /* freed by the GC */
  for (i = 0; i < n; i++) {
    lua_geti(L, ct, i + 1);
    if (!(cs[i] = lua_tostring(L, -1))) return luaL_error(L, "core.serve: crons[%d] must be a string", i + 1);
    lua_pop(L, 1);  /* the crons table keeps it alive */
  }
  o.crons = cs;
  o.ncrons = n;
  rc = eu_serve_run(&o, err, sizeof err);
  if (rc != EU_OK) {
    luaL_pushfail(L);
    lua_pushstring(L, err);
    return 2;
  }
  lua_pushboolean(L, 1);
  return 1;
}

int eu_open_serve(lua_State *L) {
  lua_pushcfunction(L, l_serve);
  lua_setfield(L, -2, "serve");
  return 0;
}
