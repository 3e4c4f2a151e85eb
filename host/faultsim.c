/*
 * faultsim.c: the host's fault simulation (see faultsim.h).
 *
 * Owns the two counters, SQLite's allocator wrapper and the "eutaxy-faultsim"
 * VFS. Must not know what the host does with memory or files: it only
 * decides, call by call, whether this one fails. Nothing here is installed
 * unless the mode is on, so a normal run uses SQLite's own allocator and VFS.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "eutaxy.h"
#include "faultsim.h"

int eu_faultsim_active;

enum { FS_COUNT, FS_ALLOC, FS_IO };

static struct {
  int kind;              /* what fails: FS_ALLOC, FS_IO, or FS_COUNT for nothing */
  int sticky;            /* N+: every call from the Nth on fails */
  uint64_t n;
  uint64_t allocs, ios, failed;
  char spec[64];
} fs;

static int strike(uint64_t count) {
  if (count == fs.n || (fs.sticky && count > fs.n)) {
    fs.failed++;
    return 1;
  }
  return 0;
}

static uint64_t ooms;

void eu_faultsim_note_oom(void) { ooms++; }
uint64_t eu_faultsim_ooms(void) { return ooms; }

int eu_faultsim_alloc_slow(void) {
  fs.allocs++;
  return fs.kind == FS_ALLOC && strike(fs.allocs);
}

static int io_fails(void) {
  fs.ios++;
  return fs.kind == FS_IO && strike(fs.ios);
}

/* ---- Lua states that use lauxlib's allocator ------------------------- */

static lua_Alloc lua_orig;
static void *lua_orig_ud;

static void *lua_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  size_t old = ptr ? osize : 0;
  (void)ud;
  if (nsize > old && eu_faultsim_alloc()) return NULL;
  return lua_orig(lua_orig_ud, ptr, osize, nsize);
}

void eu_faultsim_wrap_lua(lua_State *L) {
  void *ud;
  lua_Alloc f;
  if (!eu_faultsim_active) return;
  f = lua_getallocf(L, &ud);
  if (f == lua_alloc) return;
  /* One original is kept: every state main makes comes from luaL_newstate. */
  lua_orig = f;
  lua_orig_ud = ud;
  lua_setallocf(L, lua_alloc, NULL);
}

/* ---- SQLite's allocator ---------------------------------------------- */

static sqlite3_mem_methods sqlite_orig;

static void *sq_malloc(int n) {
  if (eu_faultsim_alloc()) {
    ooms++;
    return NULL;
  }
  return sqlite_orig.xMalloc(n);
}

static void *sq_realloc(void *p, int n) {
  if (eu_faultsim_alloc()) {
    ooms++;
    return NULL;
  }
  return sqlite_orig.xRealloc(p, n);
}

static void sq_free(void *p) { sqlite_orig.xFree(p); }
static int sq_size(void *p) { return sqlite_orig.xSize(p); }
static int sq_roundup(int n) { return sqlite_orig.xRoundup(n); }
static int sq_init(void *ud) { return sqlite_orig.xInit(ud); }
static void sq_shutdown(void *ud) { sqlite_orig.xShutdown(ud); }

static int install_malloc(void) {
  sqlite3_mem_methods m;
  if (sqlite3_config(SQLITE_CONFIG_GETMALLOC, &sqlite_orig) != SQLITE_OK) return -1;
  m = sqlite_orig;
  m.xMalloc = sq_malloc;
  m.xRealloc = sq_realloc;
  m.xFree = sq_free;
  m.xSize = sq_size;
  m.xRoundup = sq_roundup;
  m.xInit = sq_init;
  m.xShutdown = sq_shutdown;
  return sqlite3_config(SQLITE_CONFIG_MALLOC, &m) == SQLITE_OK ? 0 : -1;
}

/* ---- the VFS ----------------------------------------------------------
 *
 * Each file of the wrapper is its own small header followed by the real
 * VFS's file; every method passes through, after asking io_fails where the
 * real call could fail. Unlocking, closing and unmapping are never failed:
 * SQLite ignores their errors, so failing them tests nothing. */

typedef struct fs_file {
  sqlite3_file base;
  sqlite3_file *real;
} fs_file;

static sqlite3_vfs *vfs_real;
static sqlite3_vfs vfs;

#define REAL(f) (((fs_file *)(f))->real)

static int f_close(sqlite3_file *f) {
  int rc = REAL(f)->pMethods ? REAL(f)->pMethods->xClose(REAL(f)) : SQLITE_OK;
  f->pMethods = NULL;
  return rc;
}

static int f_read(sqlite3_file *f, void *buf, int n, sqlite3_int64 off) {
  if (io_fails()) return SQLITE_IOERR_READ;
  return REAL(f)->pMethods->xRead(REAL(f), buf, n, off);
}

static int f_write(sqlite3_file *f, const void *buf, int n, sqlite3_int64 off) {
  if (io_fails()) return SQLITE_IOERR_WRITE;
  return REAL(f)->pMethods->xWrite(REAL(f), buf, n, off);
}

static int f_truncate(sqlite3_file *f, sqlite3_int64 size) {
  if (io_fails()) return SQLITE_IOERR_TRUNCATE;
  return REAL(f)->pMethods->xTruncate(REAL(f), size);
}

static int f_sync(sqlite3_file *f, int flags) {
  if (io_fails()) return SQLITE_IOERR_FSYNC;
  return REAL(f)->pMethods->xSync(REAL(f), flags);
}

static int f_file_size(sqlite3_file *f, sqlite3_int64 *size) {
  if (io_fails()) return SQLITE_IOERR_FSTAT;
  return REAL(f)->pMethods->xFileSize(REAL(f), size);
}

static int f_lock(sqlite3_file *f, int level) {
  if (io_fails()) return SQLITE_IOERR_LOCK;
  return REAL(f)->pMethods->xLock(REAL(f), level);
}

static int f_unlock(sqlite3_file *f, int level) {
  return REAL(f)->pMethods->xUnlock(REAL(f), level);
}

static int f_check_reserved(sqlite3_file *f, int *out) {
  if (io_fails()) return SQLITE_IOERR_CHECKRESERVEDLOCK;
  return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}

static int f_file_control(sqlite3_file *f, int op, void *arg) {
  return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}

static int f_sector_size(sqlite3_file *f) {
  return REAL(f)->pMethods->xSectorSize(REAL(f));
}

static int f_device_characteristics(sqlite3_file *f) {
  return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}

static int f_shm_map(sqlite3_file *f, int page, int size, int extend, void volatile **p) {
  if (io_fails()) return SQLITE_IOERR_SHMMAP;
  return REAL(f)->pMethods->xShmMap(REAL(f), page, size, extend, p);
}

static int f_shm_lock(sqlite3_file *f, int offset, int n, int flags) {
  if ((flags & SQLITE_SHM_LOCK) && io_fails()) return SQLITE_IOERR_SHMLOCK;
  return REAL(f)->pMethods->xShmLock(REAL(f), offset, n, flags);
}

static void f_shm_barrier(sqlite3_file *f) {
  REAL(f)->pMethods->xShmBarrier(REAL(f));
}

static int f_shm_unmap(sqlite3_file *f, int del) {
  return REAL(f)->pMethods->xShmUnmap(REAL(f), del);
}

static int f_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **p) {
  return REAL(f)->pMethods->xFetch(REAL(f), off, n, p);
}

static int f_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p) {
  return REAL(f)->pMethods->xUnfetch(REAL(f), off, p);
}

/* The methods as far as the real file's version goes: SQLite looks at
 * iVersion before it uses shared memory or memory mapping. */
static const sqlite3_io_methods methods[4] = {
#define V1 f_close, f_read, f_write, f_truncate, f_sync, f_file_size, f_lock, f_unlock, \
           f_check_reserved, f_file_control, f_sector_size, f_device_characteristics
  { 0, V1, NULL, NULL, NULL, NULL, NULL, NULL },
  { 1, V1, NULL, NULL, NULL, NULL, NULL, NULL },
  { 2, V1, f_shm_map, f_shm_lock, f_shm_barrier, f_shm_unmap, NULL, NULL },
  { 3, V1, f_shm_map, f_shm_lock, f_shm_barrier, f_shm_unmap, f_fetch, f_unfetch },
#undef V1
};

static int v_open(sqlite3_vfs *v, sqlite3_filename name, sqlite3_file *f, int flags, int *out) {
  fs_file *ff = (fs_file *)f;
  int rc, version;
  (void)v;
  ff->real = (sqlite3_file *)(ff + 1);
  f->pMethods = NULL;
  if (io_fails()) return SQLITE_CANTOPEN;
  rc = vfs_real->xOpen(vfs_real, name, ff->real, flags, out);
  if (ff->real->pMethods) {
    version = ff->real->pMethods->iVersion;
    f->pMethods = &methods[version < 0 ? 0 : version > 3 ? 3 : version];
  }
  return rc;
}

static int v_delete(sqlite3_vfs *v, const char *name, int sync) {
  (void)v;
  if (io_fails()) return SQLITE_IOERR_DELETE;
  return vfs_real->xDelete(vfs_real, name, sync);
}

static int v_access(sqlite3_vfs *v, const char *name, int flags, int *out) {
  (void)v;
  if (io_fails()) return SQLITE_IOERR_ACCESS;
  return vfs_real->xAccess(vfs_real, name, flags, out);
}

static int v_full_pathname(sqlite3_vfs *v, const char *name, int n, char *out) {
  (void)v;
  return vfs_real->xFullPathname(vfs_real, name, n, out);
}

static void *v_dlopen(sqlite3_vfs *v, const char *name) {
  (void)v;
  return vfs_real->xDlOpen(vfs_real, name);
}

static void v_dlerror(sqlite3_vfs *v, int n, char *msg) {
  (void)v;
  vfs_real->xDlError(vfs_real, n, msg);
}

static void (*v_dlsym(sqlite3_vfs *v, void *lib, const char *sym))(void) {
  (void)v;
  return vfs_real->xDlSym(vfs_real, lib, sym);
}

static void v_dlclose(sqlite3_vfs *v, void *lib) {
  (void)v;
  vfs_real->xDlClose(vfs_real, lib);
}

static int v_randomness(sqlite3_vfs *v, int n, char *out) {
  (void)v;
  return vfs_real->xRandomness(vfs_real, n, out);
}

static int v_sleep(sqlite3_vfs *v, int us) {
  (void)v;
  return vfs_real->xSleep(vfs_real, us);
}

static int v_current_time(sqlite3_vfs *v, double *t) {
  (void)v;
  return vfs_real->xCurrentTime(vfs_real, t);
}

static int v_get_last_error(sqlite3_vfs *v, int n, char *msg) {
  (void)v;
  return vfs_real->xGetLastError ? vfs_real->xGetLastError(vfs_real, n, msg) : 0;
}

static int v_current_time_int64(sqlite3_vfs *v, sqlite3_int64 *t) {
  (void)v;
  return vfs_real->xCurrentTimeInt64(vfs_real, t);
}

static int install_vfs(void) {
  if (!(vfs_real = sqlite3_vfs_find("unix")) || vfs_real->iVersion < 2) return -1;
  vfs.iVersion = 2;
  vfs.szOsFile = (int)sizeof(fs_file) + vfs_real->szOsFile;
  vfs.mxPathname = vfs_real->mxPathname;
  vfs.zName = "eutaxy-faultsim";
  vfs.xOpen = v_open;
  vfs.xDelete = v_delete;
  vfs.xAccess = v_access;
  vfs.xFullPathname = v_full_pathname;
  vfs.xDlOpen = v_dlopen;
  vfs.xDlError = v_dlerror;
  vfs.xDlSym = v_dlsym;
  vfs.xDlClose = v_dlclose;
  vfs.xRandomness = v_randomness;
  vfs.xSleep = v_sleep;
  vfs.xCurrentTime = v_current_time;
  vfs.xGetLastError = v_get_last_error;
  vfs.xCurrentTimeInt64 = v_current_time_int64;
  return sqlite3_vfs_register(&vfs, 1) == SQLITE_OK ? 0 : -1;
}

/* ---- the mode ---------------------------------------------------------- */

static int parse(const char *spec) {
  const char *p;
  char *end;
  unsigned long long n;
  if (strcmp(spec, "count") == 0) {
    fs.kind = FS_COUNT;
    return 0;
  }
  if (strncmp(spec, "alloc:", 6) == 0) {
    fs.kind = FS_ALLOC;
    p = spec + 6;
  } else if (strncmp(spec, "io:", 3) == 0) {
    fs.kind = FS_IO;
    p = spec + 3;
  } else {
    return -1;
  }
  if (*p < '0' || *p > '9') return -1;
  n = strtoull(p, &end, 10);
  if (n == 0) return -1;
  fs.sticky = *end == '+';
  if (fs.sticky) end++;
  if (*end) return -1;
  fs.n = n;
  return 0;
}

int eu_faultsim_init(const char *spec, char *err, size_t errlen) {
  if (!spec || !*spec) return EU_OK;
  if (strlen(spec) >= sizeof fs.spec || parse(spec) != 0)
    return eu_err(err, errlen, EU_EINVAL,
                  "EUTAXY_FAULTSIM='%.64s': expected alloc:N, alloc:N+, io:N, io:N+ or count "
                  "(N from 1)", spec);
  snprintf(fs.spec, sizeof fs.spec, "%s", spec);
  if (install_malloc() != 0)
    return eu_err(err, errlen, EU_EINVAL,
                  "EUTAXY_FAULTSIM: SQLite refused a new allocator (was it already initialized?)");
  if (install_vfs() != 0)
    return eu_err(err, errlen, EU_EINVAL, "EUTAXY_FAULTSIM: cannot register a VFS around \"unix\"");
  eu_faultsim_active = 1;
  return EU_OK;
}

void eu_faultsim_report(void) {
  if (!eu_faultsim_active) return;
  fprintf(stderr, "eutaxy faultsim: %s: %" PRIu64 " allocations, %" PRIu64 " io calls, %" PRIu64
          " failed\n", fs.spec, fs.allocs, fs.ios, fs.failed);
}
