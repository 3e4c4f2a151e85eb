/*
 * ws_client.c: the WebSocket client of bench/serve/ws.sh (README.md there).
 *
 *   ws_client broadcast PORT CLIENTS PROCS SIZE WARMUP PACED BLAST WINDOW SERVER_PID
 *   ws_client hold PORT ROOMS PER_ROOM [by-room|round-robin]
 *
 * broadcast: CLIENTS sockets join /room/bench; the parent process holds the
 * sender, PROCS child processes the other CLIENTS - 1. The sender sends
 * WARMUP messages one at a time (not measured), PACED one at a time (the
 * next once every socket has the last: fan-out latency with nothing
 * queued), then BLAST with at most WINDOW sent and not yet delivered to
 * every socket (delivered messages per second). Each message is SIZE bytes
 * of text, its sequence number first. Every socket must receive every
 * message, in order and intact, else the client exits 1. Prints one line
 * of key=value figures; the CPU time of SERVER_PID, of the client's
 * processes and of everything else on the machine is taken over the blast.
 *
 * hold: ROOMS x PER_ROOM sockets join /room/r0 .. /room/r<ROOMS-1> and stay,
 * room by room (by-room, the default) or one socket per room in turn
 * (round-robin); prints "connected N in T s", then obeys stdin: "check"
 * asks each room (through its first socket) "hibernated?" and prints
 * "hibernated H of ROOMS"; "quit" or the end of stdin closes them all.
 *
 * Why C and not python3-websockets: one python3-websockets process reading
 * 1,000 sockets runs at 95% of a core at about 85,000 deliveries a second,
 * about what eutaxy serves, so it would share the bound. Per delivery the
 * two cost about the same, 10-11 us (nine tenths of this client's is the
 * kernel's read(2) and TCP); what C buys is reading from several cheap
 * processes while checking every message and timing each fan-out.
 *
 * The handshake sends RFC 6455's sample key and checks the 101 for its
 * known answer, so no SHA-1 is needed. Server frames come unmasked; ours
 * are masked, as the RFC requires of a client. Every wait ends after
 * STALL_MS without progress, so a server that stops answering fails the
 * run instead of hanging it.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KEY "dGhlIHNhbXBsZSBub25jZQ=="
#define ACCEPT "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
#define STALL_MS 30000     /* no progress for this long fails the run */
#define CONNECTING_MAX 64  /* handshakes in flight at once: below any listen backlog */
#define SEQ_DIGITS 8
#define MAX_PROCS 16

enum { C_CONNECTING, C_HANDSHAKE, C_OPEN };

typedef struct conn {
  int fd, state, room;     /* room -1: /room/bench */
  uint32_t events;         /* what epoll watches it for */
  char *in;                /* bytes read and not yet parsed */
  size_t in_len;
  char *out;               /* bytes written to the socket once it takes them */
  size_t out_len, out_cap;
  uint32_t next;           /* broadcast: the sequence number due next */
  char answer;             /* hold: 'h' hibernated, 'a' awake, 0 none yet */
} conn;

/* What a child tells the parent through its pipe. */
typedef struct record {
  uint32_t kind, seq;      /* R_READY; or R_DONE: every socket of the child has seq */
  uint64_t t;              /* R_DONE: when the last of them got it (CLOCK_MONOTONIC ns) */
} record;
enum { R_READY = 1, R_DONE = 2 };

static const char *who = "ws_client";
static int port, epfd;
static size_t in_cap;
static conn *conns;
static int nconns, nopen;
static pid_t kids[MAX_PROCS];
static int nkids;

/* Broadcast, per process. */
static size_t size;
static uint32_t total;            /* messages in all; 0 in hold */
static uint32_t *done_count;      /* per message: how many sockets of this process have it */
static uint64_t *done_at;         /* per message: when the last of them got it */
static uint32_t complete;         /* messages every socket of this process has */
static char *expect_tail;         /* what follows the sequence number in every message */

static uint64_t now_ns(void);
static uint64_t t_start;  /* when main began: failures say how long after */

static void fail(const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "%s: %.1f s in, %d of %d sockets open: ", who, (double)(now_ns() - t_start) / 1e9,
          nopen, nconns);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  for (int k = 0; k < nkids; k++) kill(kids[k], SIGKILL);
  exit(1);
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *xcalloc(size_t n, size_t each) {
  void *p = calloc(n ? n : 1, each);
  if (!p) fail("out of memory");
  return p;
}

static long index_of(const conn *c) { return (long)(c - conns); }

static void watch(conn *c, uint32_t events, int op) {
  struct epoll_event ev = { .events = events, .data.ptr = c };
  if (op == EPOLL_CTL_MOD && events == c->events) return;
  if (epoll_ctl(epfd, op, c->fd, &ev) != 0) fail("epoll_ctl: %s", strerror(errno));
  c->events = events;
}

static void start_connect(conn *c) {
  struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c->fd < 0) fail("socket: %s (is ulimit -n high enough?)", strerror(errno));
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) != 0 && errno != EINPROGRESS)
    fail("connect to 127.0.0.1:%d: %s", port, strerror(errno));
  c->state = C_CONNECTING;
  c->in = xcalloc(in_cap, 1);
  watch(c, EPOLLOUT, EPOLL_CTL_ADD);
}

static void queue_out(conn *c, const void *p, size_t n) {
  if (c->out_len + n > c->out_cap) {
    c->out_cap = (c->out_len + n) * 2;
    c->out = realloc(c->out, c->out_cap);
    if (!c->out) fail("out of memory");
  }
  memcpy(c->out + c->out_len, p, n);
  c->out_len += n;
}

static void flush_out(conn *c) {
  while (c->out_len > 0) {
    ssize_t w = write(c->fd, c->out, c->out_len);
    if (w < 0 && errno == EAGAIN) break;
    if (w < 0) fail("socket %ld: write: %s", index_of(c), strerror(errno));
    memmove(c->out, c->out + w, c->out_len - (size_t)w);
    c->out_len -= (size_t)w;
  }
  watch(c, EPOLLIN | (c->out_len ? EPOLLOUT : 0), EPOLL_CTL_MOD);
}

/* Queues one masked frame and writes what the socket takes. */
static void send_frame(conn *c, int opcode, const char *payload, size_t n) {
  static const unsigned char mask[4] = { 0x37, 0xfa, 0x21, 0x3d };
  unsigned char head[8];
  size_t h = 0;
  head[h++] = (unsigned char)(0x80 | opcode);
  if (n < 126) {
    head[h++] = (unsigned char)(0x80 | n);
  } else if (n < 65536) {
    head[h++] = 0x80 | 126;
    head[h++] = (unsigned char)(n >> 8);
    head[h++] = (unsigned char)n;
  } else {
    fail("a message of %zu bytes: this client sends at most 65535", n);
  }
  memcpy(head + h, mask, 4);
  queue_out(c, head, h + 4);
  size_t at = c->out_len;
  queue_out(c, payload, n);
  for (size_t k = 0; k < n; k++) c->out[at + k] ^= (char)mask[k % 4];
  flush_out(c);
}

static void request_upgrade(conn *c) {
  char path[32], req[256];
  if (c->room < 0) snprintf(path, sizeof path, "bench");
  else snprintf(path, sizeof path, "r%d", c->room);
  int n = snprintf(req, sizeof req,
                   "GET /room/%s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\n"
                   "Connection: Upgrade\r\nSec-WebSocket-Key: " KEY "\r\n"
                   "Sec-WebSocket-Version: 13\r\n\r\n", path, port);
  c->state = C_HANDSHAKE;
  queue_out(c, req, (size_t)n);
  flush_out(c);
}

/* A whole message arrived on c. */
static void on_message(conn *c, const char *p, size_t n) {
  long i = index_of(c);
  if (total == 0) {
    if (n == 10 && memcmp(p, "hibernated", 10) == 0) c->answer = 'h';
    else if (n == 5 && memcmp(p, "awake", 5) == 0) c->answer = 'a';
    else fail("socket %ld: unexpected message \"%.*s\"", i, (int)(n < 60 ? n : 60), p);
    return;
  }
  uint32_t seq = 0;
  if (n != size) fail("socket %ld: message %u is %zu bytes, not %zu", i, c->next, n, size);
  for (int k = 0; k < SEQ_DIGITS; k++) {
    if (p[k] < '0' || p[k] > '9') fail("socket %ld: message %u has no sequence number", i, c->next);
    seq = seq * 10 + (uint32_t)(p[k] - '0');
  }
  if (seq != c->next) fail("socket %ld: got message %u where %u was due (lost or reordered)", i, seq, c->next);
  if (seq >= total) fail("socket %ld: got message %u, beyond the %u sent", i, seq, total);
  if (memcmp(p + SEQ_DIGITS, expect_tail, n - SEQ_DIGITS) != 0) fail("socket %ld: message %u garbled", i, seq);
  c->next++;
  if (++done_count[seq] == (uint32_t)nconns) done_at[seq] = now_ns();
  while (complete < total && done_count[complete] == (uint32_t)nconns) complete++;
}

/* Takes the whole frames in c->in from byte `at` on; returns where the rest starts. */
static size_t parse_frames(conn *c, size_t at) {
  long i = index_of(c);
  for (;;) {
    const unsigned char *b = (const unsigned char *)c->in + at;
    size_t avail = c->in_len - at, h = 2, n;
    if (avail < 2) break;
    if (b[1] & 0x80) fail("socket %ld: the server masked a frame", i);
    n = b[1] & 0x7f;
    if (n == 126) {
      if (avail < 4) break;
      n = ((size_t)b[2] << 8) | b[3];
      h = 4;
    } else if (n == 127) {
      if (avail < 10) break;
      n = 0;
      for (int k = 0; k < 8; k++) n = (n << 8) | b[2 + k];
      h = 10;
    }
    if (n > in_cap - h) fail("socket %ld: a frame of %zu bytes, more than this client takes", i, n);
    if (avail < h + n) break;
    int fin = b[0] & 0x80, op = b[0] & 0x0f;
    const char *payload = (const char *)b + h;
    if (op == 1 || op == 2) {
      if (!fin) fail("socket %ld: a fragmented message (this client joins none)", i);
      on_message(c, payload, n);
    } else if (op == 9) {
      send_frame(c, 10, payload, n);
    } else if (op == 8) {
      unsigned code = n >= 2 ? ((unsigned)b[h] << 8) | b[h + 1] : 1005;
      fail("socket %ld: the server closed it with %u \"%.*s\"", i, code,
           n > 2 ? (int)(n - 2) : 0, n > 2 ? payload + 2 : "");
    } else if (op != 10) {
      fail("socket %ld: unexpected opcode %d", i, op);
    }
    at += h + n;
  }
  return at;
}

static void on_readable(conn *c) {
  long i = index_of(c);
  ssize_t r = read(c->fd, c->in + c->in_len, in_cap - c->in_len);
  if (r < 0 && errno == EAGAIN) return;
  if (r < 0) fail("socket %ld: read: %s", i, strerror(errno));
  if (r == 0) fail("socket %ld: the server closed the connection", i);
  c->in_len += (size_t)r;
  size_t used = 0;
  if (c->state == C_HANDSHAKE) {
    char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
    if (!end) {
      if (c->in_len == in_cap) fail("socket %ld: the server's answer has no end", i);
      return;
    }
    used = (size_t)(end - c->in) + 4;
    if (memcmp(c->in, "HTTP/1.1 101", 12) != 0 || !memmem(c->in, used, ACCEPT, strlen(ACCEPT)))
      fail("socket %ld: the server refused the upgrade: %.*s", i, (int)(used < 300 ? used : 300), c->in);
    c->state = C_OPEN;
    nopen++;
  }
  used = parse_frames(c, used);
  memmove(c->in, c->in + used, c->in_len - used);
  c->in_len -= used;
}

static void on_event(conn *c, uint32_t events) {
  if (c->state == C_CONNECTING) {
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err) fail("socket %ld: connect: %s", index_of(c), strerror(err));
    request_upgrade(c);
    return;
  }
  if (events & EPOLLOUT) flush_out(c);
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) on_readable(c);
}

/* Waits up to ms for events; the others (pipes, stdin) go to `other`.
 * Returns how many events there were. */
static int pump(int ms, void (*other)(int fd)) {
  struct epoll_event evs[256];
  int n = epoll_wait(epfd, evs, 256, ms);
  if (n < 0 && errno == EINTR) return 0;
  if (n < 0) fail("epoll_wait: %s", strerror(errno));
  for (int k = 0; k < n; k++) {
    conn *c = evs[k].data.ptr;
    if (c >= conns && c < conns + nconns) on_event(c, evs[k].events);
    else other(((int *)evs[k].data.ptr)[0]);
  }
  return n;
}

static void no_other(int fd) { (void)fd; }

/* Opens every socket of conns, CONNECTING_MAX handshakes at a time. */
static void connect_all(void) {
  int started = 0;
  uint64_t last = now_ns();
  int last_open = 0;
  while (nopen < nconns) {
    while (started < nconns && started - nopen < CONNECTING_MAX) start_connect(&conns[started++]);
    pump(100, no_other);
    if (nopen != last_open) { last_open = nopen; last = now_ns(); }
    if (now_ns() - last > (uint64_t)STALL_MS * 1000000u)
      fail("%d of %d sockets open, none more for %d s", nopen, nconns, STALL_MS / 1000);
  }
}

static void watch_fd(int *fdp) {
  struct epoll_event ev = { .events = EPOLLIN, .data.ptr = fdp };
  if (epoll_ctl(epfd, EPOLL_CTL_ADD, *fdp, &ev) != 0) fail("epoll_ctl: %s", strerror(errno));
}

/* utime + stime of a process, in seconds. */
static double cpu_seconds(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *p = strrchr(buf, ')');  /* the name may hold spaces; the fields follow it */
  unsigned long ut, st;
  if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2) return -1;
  return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* CPU time the whole machine spent busy (not idle or waiting on I/O), in seconds. */
static double machine_busy_seconds(void) {
  FILE *f = fopen("/proc/stat", "r");
  unsigned long long v[10] = { 0 };
  if (!f) return -1;
  int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                 &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
  fclose(f);
  if (n < 8) return -1;
  /* user nice system idle iowait irq softirq steal: all but idle and iowait */
  return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)sysconf(_SC_CLK_TCK);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static double percentile_us(uint64_t *v, size_t n, double q) {
  qsort(v, n, sizeof *v, cmp_u64);
  size_t k = (size_t)(q * (double)(n - 1) + 0.5);
  return (double)v[k] / 1000.0;
}

static void setup_messages(size_t sz, uint32_t n) {
  size = sz;
  total = n;
  done_count = xcalloc(total, sizeof *done_count);
  done_at = xcalloc(total, sizeof *done_at);
  expect_tail = xcalloc(size, 1);
  memset(expect_tail, 'x', size - SEQ_DIGITS);
}

/* A child: its sockets, their progress reported through out_fd. */
static void child(int out_fd, int count) {
  nconns = count;
  conns = xcalloc((size_t)nconns, sizeof *conns);
  for (int k = 0; k < nconns; k++) conns[k].room = -1;
  connect_all();
  record r = { .kind = R_READY };
  if (write(out_fd, &r, sizeof r) != (ssize_t)sizeof r) fail("pipe: %s", strerror(errno));
  uint32_t told = 0;
  uint64_t last = now_ns();
  record batch[256];
  while (told < total) {
    pump(100, no_other);
    if (complete > told) last = now_ns();
    while (told < complete) {
      int m = 0;
      while (told < complete && m < 256) batch[m++] = (record){ R_DONE, told, done_at[told] }, told++;
      if (write(out_fd, batch, (size_t)m * sizeof *batch) != (ssize_t)((size_t)m * sizeof *batch))
        fail("pipe: %s", strerror(errno));
    }
    if (now_ns() - last > (uint64_t)STALL_MS * 1000000u) {
      for (int k = 0; k < nconns; k++)
        if (conns[k].next < total)
          fail("no message for %d s: socket %d of this process got %u of %u", STALL_MS / 1000,
               k, conns[k].next, total);
    }
  }
  exit(0);
}

/* The parent's view of every process: messages everyone has. */
static int nprocs_all;               /* children + the parent */
static uint32_t *all_count;          /* per message: processes that have it */
static uint64_t *all_at;             /* per message: when the last process's last socket got it */
static uint32_t all_complete;
static int ready;
static int pipes[MAX_PROCS];
static char pipe_buf[MAX_PROCS][sizeof(record) * 256];
static size_t pipe_len[MAX_PROCS];
static uint32_t pipe_done[MAX_PROCS];  /* messages each child has reported */

static void mark(uint32_t seq, uint64_t t) {
  if (seq >= total) fail("a child reported message %u of %u", seq, total);
  if (t > all_at[seq]) all_at[seq] = t;
  all_count[seq]++;
  while (all_complete < total && all_count[all_complete] == (uint32_t)nprocs_all) all_complete++;
}

static void on_pipe(int fd) {
  int k = 0;
  while (pipes[k] != fd) k++;
  ssize_t r = read(fd, pipe_buf[k] + pipe_len[k], sizeof pipe_buf[k] - pipe_len[k]);
  if (r < 0 && errno == EAGAIN) return;
  if (r <= 0) {
    if (pipe_done[k] < total) fail("client process %d ended before its sockets had every message", k + 1);
    epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);  /* done, and exited or exiting */
    return;
  }
  pipe_len[k] += (size_t)r;
  size_t whole = pipe_len[k] / sizeof(record) * sizeof(record);
  for (size_t at = 0; at < whole; at += sizeof(record)) {
    record rec;
    memcpy(&rec, pipe_buf[k] + at, sizeof rec);
    if (rec.kind == R_READY) ready++;
    else mark(rec.seq, rec.t), pipe_done[k]++;
  }
  memmove(pipe_buf[k], pipe_buf[k] + whole, pipe_len[k] - whole);
  pipe_len[k] -= whole;
}

static int broadcast(int argc, char **argv) {
  if (argc != 11) return 2;
  port = atoi(argv[2]);
  int clients = atoi(argv[3]), procs = atoi(argv[4]);
  size_t sz = (size_t)atol(argv[5]);
  uint32_t warmup = (uint32_t)atol(argv[6]), paced = (uint32_t)atol(argv[7]), blast = (uint32_t)atol(argv[8]);
  uint32_t window = (uint32_t)atol(argv[9]);
  pid_t server = (pid_t)atol(argv[10]);
  if (clients < procs + 1 || procs < 1 || procs > MAX_PROCS || sz < SEQ_DIGITS + 1 || sz > 4096
      || paced < 1 || blast < 1 || window < 1 || (uint64_t)warmup + paced + blast >= 100000000) {
    fprintf(stderr, "%s: need CLIENTS > PROCS >= 1, PROCS <= %d, SIZE 9..4096, PACED, BLAST, WINDOW >= 1, under 10^8 messages\n",
            who, MAX_PROCS);
    return 2;
  }
  in_cap = 16384;
  setup_messages(sz, warmup + paced + blast);
  signal(SIGPIPE, SIG_IGN);

  int share = (clients - 1) / procs, extra = (clients - 1) % procs;
  for (int k = 0; k < procs; k++) {
    int fds[2], count = share + (k < extra);
    if (pipe2(fds, O_CLOEXEC) != 0) fail("pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) fail("fork: %s", strerror(errno));
    if (pid == 0) {
      close(fds[0]);
      nkids = 0;
      char name[32];
      snprintf(name, sizeof name, "ws_client[%d]", k + 1);
      who = strdup(name);
      epfd = epoll_create1(EPOLL_CLOEXEC);
      child(fds[1], count);
    }
    close(fds[1]);
    kids[nkids++] = pid;
    pipes[k] = fds[0];
  }

  /* The parent: the sender, itself one of the sockets. */
  epfd = epoll_create1(EPOLL_CLOEXEC);
  nconns = 1;
  conns = xcalloc(1, sizeof *conns);
  conns[0].room = -1;
  connect_all();
  nprocs_all = procs + 1;
  all_count = xcalloc(total, sizeof *all_count);
  all_at = xcalloc(total, sizeof *all_at);
  for (int k = 0; k < procs; k++) watch_fd(&pipes[k]);
  uint64_t t_wait = now_ns();
  while (ready < procs) {
    pump(100, on_pipe);
    if (now_ns() - t_wait > (uint64_t)STALL_MS * 1000000u)
      fail("%d of %d client processes connected their sockets", ready, procs);
  }

  uint64_t *sent_at = xcalloc(total, sizeof *sent_at);
  char *msg = xcalloc(size + 1, 1);
  memcpy(msg + SEQ_DIGITS, expect_tail, size - SEQ_DIGITS);
  uint32_t next = 0, blast_from = warmup + paced, mine = 0;
  uint64_t last = now_ns(), t0 = 0;
  double cpu_server0 = 0, cpu_client0 = 0, busy0 = 0;
  while (all_complete < total) {
    uint32_t w = next < blast_from ? 1 : window;
    while (next < total && next - all_complete < w && (next != blast_from || all_complete == blast_from)) {
      if (next == blast_from) {
        busy0 = machine_busy_seconds();
        cpu_server0 = cpu_seconds(server);
        cpu_client0 = cpu_seconds(getpid());
        for (int k = 0; k < nkids; k++) cpu_client0 += cpu_seconds(kids[k]);
        t0 = now_ns();
      }
      for (uint32_t k = SEQ_DIGITS, v = next; k-- > 0; v /= 10) msg[k] = (char)('0' + v % 10);
      sent_at[next] = now_ns();
      send_frame(&conns[0], 1, msg, size);
      next++;
      w = next < blast_from ? 1 : window;
    }
    uint32_t before = all_complete;
    pump(100, on_pipe);
    while (mine < complete) { mark(mine, done_at[mine]); mine++; }
    if (all_complete != before) last = now_ns();
    if (now_ns() - last > (uint64_t)STALL_MS * 1000000u)
      fail("no message delivered to every socket for %d s: %u of %u sent, %u delivered everywhere",
           STALL_MS / 1000, next, total, all_complete);
  }
  uint64_t t1 = all_at[total - 1];
  double cpu_server = cpu_seconds(server) - cpu_server0, cpu_client = cpu_seconds(getpid()) - cpu_client0;
  for (int k = 0; k < nkids; k++) cpu_client += cpu_seconds(kids[k]);
  double busy = machine_busy_seconds() - busy0;
  for (int k = 0; k < nkids; k++) {
    int status;
    if (waitpid(kids[k], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      fail("client process %d failed", k + 1);
  }
  nkids = 0;

  uint64_t *lat = xcalloc(total, sizeof *lat);
  for (uint32_t s = 0; s < total; s++) lat[s] = all_at[s] - sent_at[s];
  double secs = (double)(t1 - t0) / 1e9;
  printf("clients=%d procs=%d size=%zu paced=%u paced_p50_us=%.0f paced_p99_us=%.0f blast=%u window=%u"
         " blast_s=%.3f delivered_per_s=%.0f blast_p50_us=%.0f blast_p99_us=%.0f"
         " server_cpu_pct=%.0f client_cpu_pct=%.0f server_us_per_delivery=%.2f client_us_per_delivery=%.2f"
         " other_cpu_pct=%.0f\n",
         clients, procs, size, paced, percentile_us(lat + warmup, paced, 0.5),
         percentile_us(lat + warmup, paced, 0.99), blast, window, secs,
         (double)blast * clients / secs, percentile_us(lat + blast_from, blast, 0.5),
         percentile_us(lat + blast_from, blast, 0.99), 100 * cpu_server / secs, 100 * cpu_client / secs,
         1e6 * cpu_server / ((double)blast * clients), 1e6 * cpu_client / ((double)blast * clients),
         100 * (busy - cpu_server - cpu_client) / secs);
  return 0;
}

static int stdin_fd = 0;
static char line[256];
static size_t line_len;
static int want_check, want_quit;

static void on_stdin(int fd) {
  ssize_t r = read(fd, line + line_len, sizeof line - 1 - line_len);
  if (r <= 0) { want_quit = 1; return; }
  line_len += (size_t)r;
  char *nl;
  while ((nl = memchr(line, '\n', line_len))) {
    *nl = 0;
    if (strcmp(line, "check") == 0) want_check = 1;
    else want_quit = 1;
    size_t used = (size_t)(nl - line) + 1;
    memmove(line, line + used, line_len - used);
    line_len -= used;
  }
}

static int hold(int argc, char **argv) {
  if (argc != 5 && argc != 6) return 2;
  port = atoi(argv[2]);
  int rooms = atoi(argv[3]), per_room = atoi(argv[4]);
  int round_robin = argc == 6 && strcmp(argv[5], "round-robin") == 0;
  if (rooms < 1 || per_room < 1 || (argc == 6 && !round_robin && strcmp(argv[5], "by-room") != 0)) return 2;
  in_cap = 1024;
  signal(SIGPIPE, SIG_IGN);
  epfd = epoll_create1(EPOLL_CLOEXEC);
  nconns = rooms * per_room;
  conns = xcalloc((size_t)nconns, sizeof *conns);
  for (int k = 0; k < nconns; k++) conns[k].room = round_robin ? k % rooms : k / per_room;
  uint64_t t0 = now_ns();
  connect_all();
  printf("connected %d in %.1f s\n", nopen, (double)(now_ns() - t0) / 1e9);
  fflush(stdout);
  watch_fd(&stdin_fd);
  while (!want_quit) {
    pump(1000, on_stdin);
    if (!want_check) continue;
    want_check = 0;
    int step = round_robin ? 1 : per_room;  /* from one room's first socket to the next's */
    for (int k = 0; k < rooms; k++) {
      conns[k * step].answer = 0;
      send_frame(&conns[k * step], 1, "hibernated?", 11);
    }
    int answered = 0, hibernated = 0;
    uint64_t last = now_ns();
    while (answered < rooms) {
      pump(100, on_stdin);
      int a = 0;
      for (int k = 0; k < rooms; k++) a += conns[k * step].answer != 0;
      if (a != answered) { answered = a; last = now_ns(); }
      if (now_ns() - last > (uint64_t)STALL_MS * 1000000u)
        fail("%d of %d rooms answered \"hibernated?\"", answered, rooms);
    }
    for (int k = 0; k < rooms; k++) hibernated += conns[k * step].answer == 'h';
    printf("hibernated %d of %d\n", hibernated, rooms);
    fflush(stdout);
  }
  return 0;
}

int main(int argc, char **argv) {
  int rc = 2;
  t_start = now_ns();
  if (argc > 1 && strcmp(argv[1], "broadcast") == 0) rc = broadcast(argc, argv);
  else if (argc > 1 && strcmp(argv[1], "hold") == 0) rc = hold(argc, argv);
  if (rc == 2)
    fprintf(stderr, "usage: %s broadcast PORT CLIENTS PROCS SIZE WARMUP PACED BLAST WINDOW SERVER_PID\n"
                    "       %s hold PORT ROOMS PER_ROOM [by-room|round-robin]\n", who, who);
  return rc;
}
