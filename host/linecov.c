/*
 * linecov.c: the line counts behind `--coverage` (see linecov.h).
 *
 * A line event gives the running function's chunk name (lua_getinfo "S",
 * which allocates nothing) and the line. Chunk names are mapped to the file
 * they count toward once, on first sight (realpath, the rules of
 * linecov.h); after that a small cache keyed by the name's address answers,
 * checked against a copy of the name, since an address freed by one
 * isolate may hold another name later.
 *
 * The lines that can run come from the file's bytecode: the C API gives
 * activelines for a function on the stack only, and a chunk's nested
 * functions are not reachable without running it, so the file is compiled
 * once in a state of its own, dumped with its debug information, and the
 * dump's functions walked as lundump.c reads them (Lua 5.4's format; each
 * function's lineinfo decoded as ldebug.c's nextline does, the first
 * instruction of a vararg function left out as its collectvalidlines does).
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>

#include "eutaxy.h"
#include "linecov.h"

int eu_linecov_on = 0;

typedef struct lcfile {
  char *path;          /* the real path, as SF: writes it */
  uint64_t *hits;      /* hits[line], for lines below nhits */
  int nhits;
  char *exec;          /* exec[line] 1 for a line that can run, lines up to nexec */
  int nexec;
  uint64_t *held;      /* eu_linecov_hold's counts, nheld of them, or NULL */
  int nheld;
  struct lcfile *next;
} lcfile;

/* A chunk name seen, in a kind of state (an isolate's or the host's), and
 * the file it counts toward (NULL: it does not count). */
typedef struct source {
  char *name;
  size_t len;
  int host;
  lcfile *file;
  struct source *next;
} source;

typedef struct hot {
  const char *ptr;  /* where the name was, in the state that ran it */
  source *s;
} hot;

#define SOURCE_BUCKETS 256
#define HOT_N 1024

static struct {
  char *out;       /* the tracefile */
  char *root;      /* real path of the folder whose files count in the host's state */
  size_t rootlen;
  char *libdir;    /* real path of eutaxy's Lua folder */
  size_t liblen;
  lcfile *files;
  source *sources[SOURCE_BUCKETS];
  hot hot[HOT_N];
  int lost;        /* a count or a file lost for want of memory */
} cov;

/* ---- the lines that can run ------------------------------------------- */

typedef struct dump {
  const unsigned char *p, *end;
  size_t isize, nsize, insize;  /* sizeof lua_Integer, lua_Number, Instruction in the dump */
  char *lines;                  /* lines[line] 1 for a line found */
  int n, cap;
  int bad;                      /* the dump ended early or did not decode */
  int oom;
} dump;

static int d_byte(dump *d) {
  if (d->p >= d->end) {
    d->bad = 1;
    return 0;
  }
  return *d->p++;
}

/* lundump.c's loadUnsigned: 7 bits a byte, most significant first, the last byte's top bit set. */
static size_t d_size(dump *d) {
  size_t x = 0;
  int b;
  do {
    if (x > (SIZE_MAX >> 7)) d->bad = 1;
    b = d_byte(d);
    if (d->bad) return 0;
    x = (x << 7) | (size_t)(b & 0x7f);
  } while (!(b & 0x80));
  return x;
}

static void d_skip(dump *d, size_t n, size_t each) {
  if (each && n > (size_t)(d->end - d->p) / each) {
    d->bad = 1;
    d->p = d->end;
    return;
  }
  d->p += n * each;
}

static void d_string(dump *d) {
  size_t n = d_size(d);
  if (n) d_skip(d, n - 1, 1);
}

static void d_mark(dump *d, size_t line) {
  if (line < 1 || line > INT_MAX / 2) return;
  if ((int)line > d->cap) {
    size_t had = d->lines ? (size_t)d->cap + 1 : 0;
    int cap = d->cap ? d->cap : 256;
    char *a;
    while (cap < (int)line) cap *= 2;
    if (!(a = realloc(d->lines, (size_t)cap + 1))) {
      d->oom = d->bad = 1;
      return;
    }
    memset(a + had, 0, (size_t)cap + 1 - had);
    d->lines = a;
    d->cap = cap;
  }
  d->lines[line] = 1;
  if ((int)line > d->n) d->n = (int)line;
}

/* Lua 5.4's constant tags (lobject.h's makevariant). */
enum { K_NIL = 0, K_FALSE = 1, K_TRUE = 17, K_INT = 3, K_FLT = 19, K_SHRSTR = 4, K_LNGSTR = 20 };
#define ABSLINEINFO (-0x80)

static void d_function(dump *d, int depth) {
  size_t i, n, nline, nabs;
  size_t line;
  int vararg;
  const unsigned char *info;
  dump abs;
  if (depth > 250) {
    d->bad = 1;
    return;
  }
  d_string(d);           /* source */
  line = d_size(d);      /* linedefined */
  d_size(d);             /* lastlinedefined */
  d_byte(d);             /* numparams */
  vararg = d_byte(d);
  d_byte(d);             /* maxstacksize */
  n = d_size(d);
  d_skip(d, n, d->insize);
  n = d_size(d);
  for (i = 0; i < n && !d->bad; i++) {
    switch (d_byte(d)) {
    case K_NIL: case K_FALSE: case K_TRUE: break;
    case K_INT: d_skip(d, 1, d->isize); break;
    case K_FLT: d_skip(d, 1, d->nsize); break;
    case K_SHRSTR: case K_LNGSTR: d_string(d); break;
    default: d->bad = 1;
    }
  }
  n = d_size(d);
  d_skip(d, n, 3);       /* upvalues: instack, idx, kind */
  n = d_size(d);
  for (i = 0; i < n && !d->bad; i++) d_function(d, depth + 1);
  nline = d_size(d);
  info = d->p;
  d_skip(d, nline, 1);
  nabs = d_size(d);
  abs = *d;              /* the absolute lines, read in step with lineinfo */
  for (i = 0; i < 2 * nabs && !d->bad; i++) d_size(d);
  for (i = 0; i < nline && !d->bad; i++) {
    int delta = (signed char)info[i];
    if (delta == ABSLINEINFO) {
      size_t pc = d_size(&abs);
      line = d_size(&abs);
      if (abs.bad || pc != i) d->bad = 1;
    } else {
      line += (size_t)(ptrdiff_t)delta;
    }
    if (!(vararg && i == 0)) d_mark(d, line);  /* OP_VARARGPREP: no line event */
  }
  n = d_size(d);
  for (i = 0; i < n && !d->bad; i++) {  /* locals: name, startpc, endpc */
    d_string(d);
    d_size(d);
    d_size(d);
  }
  n = d_size(d);
  for (i = 0; i < n && !d->bad; i++) d_string(d);  /* upvalue names */
}

static int dump_writer(lua_State *L, const void *p, size_t sz, void *ud) {
  (void)L;
  return eu_buf_put(ud, p, sz) == EU_OK ? 0 : 1;
}

int eu_linecov_lines(const char *path, char **a, int *n, char *err, size_t errlen) {
  static const char head[] = "\x1bLua\x54\x00\x19\x93\r\n\x1a\n";
  lua_State *L = luaL_newstate();
  eu_buf b;
  dump d;
  int rc = EU_OK;
  *a = NULL;
  *n = 0;
  if (!L) return eu_err(err, errlen, EU_ENOMEM, "out of memory reading %s", path);
  if (luaL_loadfilex(L, path, "t") != LUA_OK) {
    rc = eu_err(err, errlen, EU_EINVAL, "%s", lua_tostring(L, -1));
    lua_close(L);
    return rc;
  }
  eu_buf_init(&b);
  if (lua_dump(L, dump_writer, &b, 0) != 0) {
    eu_buf_free(&b);
    lua_close(L);
    return eu_err(err, errlen, EU_ENOMEM, "out of memory reading %s", path);
  }
  lua_close(L);
  memset(&d, 0, sizeof d);
  d.p = (const unsigned char *)b.p;
  d.end = d.p + b.n;
  if (b.n < sizeof head - 1 + 3 || memcmp(d.p, head, sizeof head - 1) != 0) {
    d.bad = 1;
  } else {
    d.p += sizeof head - 1;
    d.insize = (size_t)d_byte(&d);
    d.isize = (size_t)d_byte(&d);
    d.nsize = (size_t)d_byte(&d);
    d_skip(&d, 1, d.isize);   /* LUAC_INT */
    d_skip(&d, 1, d.nsize);   /* LUAC_NUM */
    d_byte(&d);               /* the main function's upvalue count */
    d_function(&d, 0);
  }
  eu_buf_free(&b);
  if (d.bad) {
    free(d.lines);
    if (d.oom) return eu_err(err, errlen, EU_ENOMEM, "out of memory reading %s", path);
    return eu_err(err, errlen, EU_EINVAL, "%s: its bytecode did not decode as Lua 5.4's", path);
  }
  if (!d.lines && !(d.lines = calloc(1, 1))) return eu_err(err, errlen, EU_ENOMEM, "out of memory reading %s", path);
  *a = d.lines;
  *n = d.n;
  return EU_OK;
}

/* ---- files and chunk names -------------------------------------------- */

static lcfile *file_of(const char *real) {
  lcfile *f;
  char err[EU_ERRLEN];
  for (f = cov.files; f; f = f->next)
    if (strcmp(f->path, real) == 0) return f;
  if (!(f = calloc(1, sizeof *f)) || !(f->path = strdup(real))) {
    free(f);
    return NULL;
  }
  /* a file that does not compile now counts its hits alone */
  if (eu_linecov_lines(real, &f->exec, &f->nexec, err, sizeof err) == EU_ENOMEM) {
    free(f->path);
    free(f);
    return NULL;
  }
  f->nhits = f->nexec + 1;
  if (!(f->hits = calloc((size_t)f->nhits, sizeof *f->hits))) {
    free(f->exec);
    free(f->path);
    free(f);
    return NULL;
  }
  f->next = cov.files;
  cov.files = f;
  return f;
}

static int inside(const char *path, const char *dir, size_t len) {
  if (!dir || strncmp(path, dir, len) != 0) return 0;
  return path[len] == '/' || path[len] == '\0' || (len > 0 && dir[len - 1] == '/');
}

static int ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), m = strlen(tail);
  return n >= m && strcmp(s + n - m, tail) == 0;
}

/* Whether a file of the host's state, at rel under the root, is no code
 * under test: a spec, a scenario, busted's .busted (not a .lua file). */
static int is_test(const char *rel) {
  return ends_with(rel, "_spec.lua") || ends_with(rel, ".sim.lua") || strncmp(rel, "spec/", 5) == 0 ||
         !ends_with(rel, ".lua");
}

/* The file chunk name counts toward, by linecov.h's rules; NULL for none.
 * *oom is set when memory ran out deciding. */
static lcfile *decide(const char *name, size_t len, int host, int *oom) {
  char *path, real[PATH_MAX];
  lcfile *f;
  if (len < 2 || name[0] != '@') return NULL;  /* a string given to load */
  if (!(path = malloc(len))) {
    *oom = 1;
    return NULL;
  }
  memcpy(path, name + 1, len - 1);
  path[len - 1] = '\0';
  if (strlen(path) != len - 1 || !realpath(path, real)) {
    free(path);
    return NULL;
  }
  free(path);
  if (inside(real, cov.libdir, cov.liblen)) return NULL;
  if (host) {
    if (!inside(real, cov.root, cov.rootlen) || strlen(real) <= cov.rootlen) return NULL;
    if (is_test(real + cov.rootlen + (cov.root[cov.rootlen - 1] == '/' ? 0 : 1))) return NULL;
  }
  if (!(f = file_of(real))) *oom = 1;
  return f;
}

static unsigned hash_name(const char *s, size_t len, int host) {
  unsigned h = 2166136261u ^ (unsigned)host;
  size_t i;
  for (i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
  return h % SOURCE_BUCKETS;
}

static source *source_of(const char *name, size_t len, int host) {
  unsigned h = hash_name(name, len, host);
  source *s;
  int oom = 0;
  for (s = cov.sources[h]; s; s = s->next)
    if (s->host == host && s->len == len && memcmp(s->name, name, len) == 0) return s;
  if (!(s = calloc(1, sizeof *s)) || !(s->name = malloc(len ? len : 1))) {
    free(s);
    return NULL;
  }
  memcpy(s->name, name, len);
  s->len = len;
  s->host = host;
  s->file = decide(name, len, host, &oom);
  if (oom) {  /* decided again on the next sight */
    free(s->name);
    free(s);
    return NULL;
  }
  s->next = cov.sources[h];
  cov.sources[h] = s;
  return s;
}

static void bump_by(lcfile *f, int line, uint64_t by) {
  if (line <= 0) return;
  if (line >= f->nhits) {
    int n = line + 1 > 2 * f->nhits ? line + 1 : 2 * f->nhits;
    uint64_t *a = realloc(f->hits, (size_t)n * sizeof *a);
    if (!a) {
      cov.lost = 1;
      return;
    }
    memset(a + f->nhits, 0, (size_t)(n - f->nhits) * sizeof *a);
    f->hits = a;
    f->nhits = n;
  }
  f->hits[line] += by;
}

static void count(lua_State *L, lua_Debug *ar, int host) {
  hot *h;
  source *s;
  if (!lua_getinfo(L, "S", ar) || !ar->source) return;
  h = &cov.hot[((uintptr_t)ar->source >> 4) & (HOT_N - 1)];
  s = h->s;
  if (!s || h->ptr != ar->source || s->host != host || s->len != ar->srclen ||
      memcmp(s->name, ar->source, s->len) != 0) {
    if (!(s = source_of(ar->source, ar->srclen, host))) {
      cov.lost = 1;
      return;
    }
    h->ptr = ar->source;
    h->s = s;
  }
  if (s->file) bump_by(s->file, ar->currentline, 1);
}

void eu_linecov_isolate_line(lua_State *L, lua_Debug *ar) {
  if (eu_linecov_on) count(L, ar, 0);
}

void eu_linecov_host_hook(lua_State *L, lua_Debug *ar) {
  if (eu_linecov_on && ar->event == LUA_HOOKLINE) count(L, ar, 1);
}

/* ---- on and off ------------------------------------------------------- */

/* The real path of dir, malloc'd; dir itself when it has none. */
static char *real_or_same(const char *dir) {
  char real[PATH_MAX];
  return strdup(realpath(dir, real) ? real : dir);
}

int eu_linecov_start(const char *out, const char *root, const char *libdir, char *err, size_t errlen) {
  FILE *f;
  int existed;
  if (eu_linecov_on) return eu_err(err, errlen, EU_EINVAL, "coverage is already being counted in this process");
  if (!out || !*out) return eu_err(err, errlen, EU_EINVAL, "coverage: no file to write to");
  /* "a" neither truncates an old tracefile nor leaves a new one behind */
  existed = access(out, F_OK) == 0;
  if (!(f = fopen(out, "a"))) return eu_err(err, errlen, EU_EINVAL, "cannot write %s: %s", out, strerror(errno));
  fclose(f);
  if (!existed) remove(out);
  memset(&cov, 0, sizeof cov);
  cov.out = strdup(out);
  cov.root = real_or_same(root ? root : ".");
  cov.libdir = libdir ? real_or_same(libdir) : NULL;
  if (!cov.out || !cov.root || (libdir && !cov.libdir)) {
    eu_linecov_stop();
    return eu_err(err, errlen, EU_ENOMEM, "out of memory starting coverage");
  }
  cov.rootlen = strlen(cov.root);
  cov.liblen = cov.libdir ? strlen(cov.libdir) : 0;
  eu_linecov_on = 1;
  return EU_OK;
}

void eu_linecov_stop(void) {
  int i;
  eu_linecov_on = 0;
  while (cov.files) {
    lcfile *f = cov.files;
    cov.files = f->next;
    free(f->path);
    free(f->hits);
    free(f->exec);
    free(f->held);
    free(f);
  }
  for (i = 0; i < SOURCE_BUCKETS; i++) {
    while (cov.sources[i]) {
      source *s = cov.sources[i];
      cov.sources[i] = s->next;
      free(s->name);
      free(s);
    }
  }
  free(cov.out);
  free(cov.root);
  free(cov.libdir);
  memset(&cov, 0, sizeof cov);
}

static int by_path(const void *a, const void *b) {
  return strcmp((*(lcfile *const *)a)->path, (*(lcfile *const *)b)->path);
}

/* One record: DA for each line that can run or ran, in order. */
static void write_record(FILE *o, const lcfile *f, int *lines, int *hit) {
  int last = f->nexec > f->nhits - 1 ? f->nexec : f->nhits - 1, line, lf = 0, lh = 0;
  fprintf(o, "TN:\nSF:%s\n", f->path);
  for (line = 1; line <= last; line++) {
    uint64_t n = line < f->nhits ? f->hits[line] : 0;
    if (!(line <= f->nexec && f->exec[line]) && n == 0) continue;
    fprintf(o, "DA:%d,%llu\n", line, (unsigned long long)n);
    lf++;
    if (n) lh++;
  }
  fprintf(o, "LF:%d\nLH:%d\nend_of_record\n", lf, lh);
  *lines += lf;
  *hit += lh;
}

int eu_linecov_finish(int *files, int *lines, int *hit, char *err, size_t errlen) {
  lcfile *f, **all;
  int n = 0, i, nl = 0, nh = 0, rc = EU_OK;
  size_t tlen;
  char *tmp;
  FILE *o;
  if (!cov.out) return eu_err(err, errlen, EU_EINVAL, "coverage is not being counted");
  eu_linecov_on = 0;
  for (f = cov.files; f; f = f->next) n++;
  all = malloc((size_t)(n ? n : 1) * sizeof *all);
  tlen = strlen(cov.out) + 8;
  tmp = malloc(tlen);
  if (!all || !tmp) {
    free(all);
    free(tmp);
    eu_linecov_stop();
    return eu_err(err, errlen, EU_ENOMEM, "out of memory writing coverage");
  }
  for (f = cov.files, i = 0; f; f = f->next) all[i++] = f;
  qsort(all, (size_t)n, sizeof *all, by_path);
  /* written aside and renamed: a reader never sees half a tracefile */
  snprintf(tmp, tlen, "%s.tmp", cov.out);
  if (!(o = fopen(tmp, "w"))) {
    rc = eu_err(err, errlen, EU_EINVAL, "cannot write %s: %s", tmp, strerror(errno));
  } else {
    for (i = 0; i < n; i++) write_record(o, all[i], &nl, &nh);
    if (ferror(o) | (fclose(o) != 0)) {
      rc = eu_err(err, errlen, EU_EINVAL, "cannot write %s: %s", tmp, strerror(errno));
      remove(tmp);
    } else if (rename(tmp, cov.out) != 0) {
      rc = eu_err(err, errlen, EU_EINVAL, "cannot write %s: %s", cov.out, strerror(errno));
      remove(tmp);
    } else if (cov.lost) {
      rc = eu_err(err, errlen, EU_ENOMEM, "%s is incomplete: memory ran out while counting", cov.out);
    }
  }
  if (files) *files = n;
  if (lines) *lines = nl;
  if (hit) *hit = nh;
  free(all);
  free(tmp);
  eu_linecov_stop();
  return rc;
}

/* ---- forked workers --------------------------------------------------- */

int eu_linecov_hold(void) {
  lcfile *f;
  for (f = cov.files; f; f = f->next) {
    uint64_t *zero = calloc((size_t)f->nhits, sizeof *zero);
    if (!zero) return EU_ENOMEM;  /* the files held so far stay held */
    f->held = f->hits;
    f->nheld = f->nhits;
    f->hits = zero;
  }
  return EU_OK;
}

void eu_linecov_release(void) {
  lcfile *f;
  int i;
  for (f = cov.files; f; f = f->next) {
    if (!f->held) continue;
    for (i = 0; i < f->nheld; i++)
      if (f->held[i]) bump_by(f, i, f->held[i]);
    free(f->held);
    f->held = NULL;
    f->nheld = 0;
  }
}

int eu_linecov_export(eu_buf *out) {
  lcfile *f;
  int i, any;
  for (f = cov.files; f; f = f->next) {
    for (i = 1, any = 0; i < f->nhits && !any; i++) any = f->hits[i] != 0;
    if (!any) continue;
    if (eu_buf_printf(out, "@%s\n", f->path) != EU_OK) return EU_ENOMEM;
    for (i = 1, any = 0; i < f->nhits; i++) {
      if (!f->hits[i]) continue;
      if (eu_buf_printf(out, "%s%d %llu", any++ ? " " : "", i, (unsigned long long)f->hits[i]) != EU_OK)
        return EU_ENOMEM;
    }
    if (eu_buf_putc(out, '\n') != EU_OK) return EU_ENOMEM;
  }
  return EU_OK;
}

int eu_linecov_merge(const char *p, size_t n) {
  const char *end = p + n;
  if (!cov.out) return EU_EINVAL;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    char path[PATH_MAX];
    lcfile *f;
    if (*p != '@' || !nl || nl - p - 1 >= (ptrdiff_t)sizeof path || nl - p < 2) return EU_ECORRUPT;
    memcpy(path, p + 1, (size_t)(nl - p - 1));
    path[nl - p - 1] = '\0';
    if (path[0] != '/') return EU_ECORRUPT;
    if (!(f = file_of(path))) return EU_ENOMEM;
    p = nl + 1;
    if (!(nl = memchr(p, '\n', (size_t)(end - p)))) return EU_ECORRUPT;
    while (p < nl) {
      char *next;
      long line;
      unsigned long long hits;
      line = strtol(p, &next, 10);
      if (next == p || next >= nl || *next != ' ' || line < 1 || line > INT_MAX - 1) return EU_ECORRUPT;
      p = next + 1;
      hits = strtoull(p, &next, 10);
      if (next == p || next > nl || (*next != ' ' && next != nl)) return EU_ECORRUPT;
      p = next == nl ? nl : next + 1;
      bump_by(f, (int)line, hits);
    }
    p = nl + 1;
  }
  return cov.lost ? EU_ENOMEM : EU_OK;
}
