/*
 * main.c: the eutaxy command.
 *
 *   eutaxy check SCENARIO    explores a scenario's schedules under faults
 *   eutaxy serve CONFIG      serves the worker and its objects over HTTP
 *   eutaxy run FILE [ARGS]   runs a Lua script with eutaxy's modules
 *   eutaxy test [ARGS]       runs busted specs (ARGS go to busted)
 *   eutaxy init DIR          writes a starter project into DIR
 *   eutaxy help [COMMAND]    the commands' help (lua/eutaxy/help.lua)
 *   eutaxy version
 *
 * The binary is a Lua interpreter with eutaxy.core built in, so specs run
 * under the sanitizers along with the host, which a system `lua` loading
 * core.so could not do.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lualib.h>

#include "eutaxy.h"
#include "faultsim.h"
#include "lcore.h"
#include "linecov.h"
#include "luac.h"

#ifndef EUTAXY_LUADIR
#define EUTAXY_LUADIR "lua"
#endif

/*
 * Where eutaxy's own files are. The binary in its build folder
 * (EUTAXY_BUILDDIR) uses the source tree's lua/ and the build's luac/, the
 * folders built in, so an edit to lua/ takes effect at the next run without
 * an install. Any other copy of it is an installed one, and uses the tree
 * `cmake --install` lays out beside it, found from the binary's own path
 * (/proc/self/exe) through EUTAXY_BIN_TO_DATA, the way from the bin folder
 * to the data folder: PREFIX/bin/eutaxy uses PREFIX/share/eutaxy/lua and
 * .../luac wherever PREFIX is, and never a source tree, which may have
 * changed or gone since. Without /proc the binary takes the folders built
 * in. EUTAXY_LUADIR and EUTAXY_LUACDIR from the environment go over both.
 */
static char found_luadir[PATH_MAX], found_luacdir[PATH_MAX];

/* The path of the running binary, with no symbolic links, in buf; 0 when
 * it cannot be known. */
static int exe_path(char *buf, size_t size) {
  ssize_t n = readlink("/proc/self/exe", buf, size - 1);
  if (n <= 0 || (size_t)n >= size - 1) return 0;
  buf[n] = '\0';
  return 1;
}

/* The folder of the running binary, as exe_path. */
static int exe_dir(char *buf, size_t size) {
  char *slash;
  if (!exe_path(buf, size) || !(slash = strrchr(buf, '/'))) return 0;
  if (slash == buf) slash++;  /* a binary in / */
  *slash = '\0';
  return 1;
}

static void find_files(void) {
#if defined(EUTAXY_BUILDDIR) && defined(EUTAXY_BIN_TO_DATA)
  char bin[PATH_MAX], built[PATH_MAX], data[PATH_MAX], canon[PATH_MAX];
  if (!exe_dir(bin, sizeof bin) || (realpath(EUTAXY_BUILDDIR, built) && strcmp(bin, built) == 0)) return;
  if ((size_t)snprintf(data, sizeof data, "%s/%s", bin, EUTAXY_BIN_TO_DATA) >= sizeof data) return;
  /* the name the install gave its bytecode (tools/luac_install.lua) */
  if (realpath(data, canon)) strcpy(data, canon);
  if ((size_t)snprintf(found_luadir, sizeof found_luadir, "%s/lua", data) >= sizeof found_luadir ||
      (size_t)snprintf(found_luacdir, sizeof found_luacdir, "%s/luac", data) >= sizeof found_luacdir) {
    found_luadir[0] = found_luacdir[0] = '\0';
    return;
  }
  eu_luac_use_dir(found_luacdir);
#endif
}

static const char *libdir(void) {
  const char *d = getenv("EUTAXY_LUADIR");
  if (d && *d) return d;
  return found_luadir[0] ? found_luadir : EUTAXY_LUADIR;
}

static int traceback(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  /* an RPC error is a table with a __tostring: "Error: message" */
  if (!msg && luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) msg = lua_tostring(L, -1);
  if (!msg) msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  luaL_traceback(L, L, msg, 1);
  return 1;
}

/*
 * eutaxy.fs: the little of the file system `eutaxy init` needs and Lua's
 * io library lacks. Each function returns its answer, or nil and a message
 * naming the path, as io.open does.
 */

/* fs.entries(path): how many entries the folder has (. and .. not counted),
 * or nil, message, and "missing" or "error". */
static int fs_entries(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  DIR *d = opendir(path);
  struct dirent *e;
  lua_Integer n = 0;
  if (!d) {
    int missing = errno == ENOENT;
    luaL_pushfail(L);
    lua_pushfstring(L, "%s: %s", path, errno == ENOTDIR ? "not a folder" : strerror(errno));
    lua_pushstring(L, missing ? "missing" : "error");
    return 3;
  }
  while ((e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
  closedir(d);
  lua_pushinteger(L, n);
  return 1;
}

/* fs.mkdir(path): true, or nil and a message. */
static int fs_mkdir(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  if (mkdir(path, 0777) != 0) {
    luaL_pushfail(L);
    lua_pushfstring(L, "cannot make folder %s: %s", path, strerror(errno));
    return 2;
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* fs.realpath(path): the absolute path with no symbolic links, or nil and a message. */
static int fs_realpath(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  char resolved[PATH_MAX];
  if (!realpath(path, resolved)) {
    luaL_pushfail(L);
    lua_pushfstring(L, "%s: %s", path, strerror(errno));
    return 2;
  }
  lua_pushstring(L, resolved);
  return 1;
}

/* fs.exe(): the running eutaxy binary's path, or nil and a message. */
static int fs_exe(lua_State *L) {
  char path[PATH_MAX];
  if (!exe_path(path, sizeof path)) {
    luaL_pushfail(L);
    lua_pushstring(L, "/proc/self/exe: cannot be read");
    return 2;
  }
  lua_pushstring(L, path);
  return 1;
}

static int open_fs(lua_State *L) {
  static const luaL_Reg fns[] = {
    {"entries", fs_entries},
    {"exe", fs_exe},
    {"mkdir", fs_mkdir},
    {"realpath", fs_realpath},
    {NULL, NULL}
  };
  luaL_newlib(L, fns);
  return 1;
}

/* package.path: eutaxy's modules first, so that no other file stands in
 * for one of them, then the folder beside (NULL for none), then Lua's
 * default. */
static void set_path(lua_State *L, const char *beside) {
  lua_getglobal(L, "package");
  if (beside)
    lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s/?.lua;%s/?/init.lua;%s", libdir(), libdir(), beside, beside,
                    LUA_PATH_DEFAULT);
  else
    lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", libdir(), libdir(), LUA_PATH_DEFAULT);
  lua_setfield(L, -2, "path");
  lua_pop(L, 1);
}

/* require loads Lua files as text, eutaxy's own modules from the build's
 * bytecode (luac.h). */
static void open_state(lua_State *L) {
  luaL_openlibs(L);
  set_path(L, NULL);
  eu_luac_require(L);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, eu_open_core_host);
  lua_setfield(L, -2, "eutaxy.core");
  lua_pushcfunction(L, open_fs);
  lua_setfield(L, -2, "eutaxy.fs");
  lua_pushcfunction(L, eu_luac_open);
  lua_setfield(L, -2, "eutaxy.luac");
  lua_pop(L, 1);
}

/* arg as lua.c builds it: arg[0] the script, arg[1..] its arguments. */
static void set_args(lua_State *L, const char *script, int argc, char **argv) {
  int i;
  lua_createtable(L, argc, 1);
  lua_pushstring(L, script);
  lua_rawseti(L, -2, 0);
  for (i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setglobal(L, "arg");
}

/* Where eutaxy test --coverage writes its LCOV tracefile. */
static const char *coverage_out = "lcov.info";

static int run_chunk(lua_State *L, int argc, char **argv) {
  int i, status;
  lua_pushcfunction(L, traceback);
  lua_insert(L, -2);
  for (i = 0; i < argc; i++) lua_pushstring(L, argv[i]);
  status = lua_pcall(L, argc, 0, -(argc + 2));
  if (status != LUA_OK) {
    fprintf(stderr, "eutaxy: %s\n", lua_tostring(L, -1));
    return 1;
  }
  return 0;
}

/* A command's steps in its Lua state. Each of them may allocate, and an
 * allocation may fail (EUTAXY_FAULTSIM makes one fail on purpose): outside
 * a protected call Lua would abort the process, so every command runs as a
 * C function under lua_pcall and an error ends it with its message. */
typedef struct job {
  void (*body)(lua_State *L, struct job *j);
  const char *module, *name;  /* cmd_main's */
  int argc;
  char **argv;
  int rc;
} job;

static int protected_job(lua_State *L) {
  job *j = lua_touserdata(L, 1);
  lua_settop(L, 0);
  open_state(L);
  j->body(L, j);
  return 0;
}

static int run_job(job *j) {
  lua_State *L = luaL_newstate();
  if (!L) {
    fputs("eutaxy: not enough memory\n", stderr);
    return 1;
  }
  eu_faultsim_wrap_lua(L);
  lua_pushcfunction(L, protected_job);
  lua_pushlightuserdata(L, j);
  if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
    fprintf(stderr, "eutaxy: %s\n", lua_tostring(L, -1));
    j->rc = 1;
  }
  fflush(stdout);
  lua_close(L);
  eu_check_release();
  return j->rc;
}

/* require finds the modules beside the script, after eutaxy's own, as a
 * scenario's are found beside it (checker.lua), wherever the command runs
 * from. */
static void path_beside(lua_State *L, const char *script) {
  const char *slash = strrchr(script, '/');
  if (slash)
    lua_pushlstring(L, script, slash == script ? 1 : (size_t)(slash - script));
  else
    lua_pushliteral(L, ".");
  set_path(L, lua_tostring(L, -1));
  lua_pop(L, 1);
}

static void run_body(lua_State *L, job *j) {
  set_args(L, j->argv[0], j->argc - 1, j->argv + 1);
  path_beside(L, j->argv[0]);
  if (luaL_loadfilex(L, j->argv[0], "t") != LUA_OK) {
    fprintf(stderr, "eutaxy: %s\n", lua_tostring(L, -1));
    j->rc = 2;
    return;
  }
  j->rc = run_chunk(L, j->argc - 1, j->argv + 1);
}

static int cmd_run(int argc, char **argv) {
  job j = { run_body, NULL, NULL, argc, argv, 1 };
  if (argc < 1) {
    fputs("eutaxy run: which script? usage: eutaxy run FILE [ARGS]\n", stderr);
    return 2;
  }
  return run_job(&j);
}

static void main_body(lua_State *L, job *j) {
  int i;
  lua_pushcfunction(L, traceback);
  lua_getglobal(L, "require");
  lua_pushstring(L, j->module);
  if (lua_pcall(L, 1, 1, 1) != LUA_OK) {
    fprintf(stderr, "eutaxy: %s\n", lua_tostring(L, -1));
    j->rc = 2;
    return;
  }
  lua_getfield(L, -1, "main");
  lua_createtable(L, j->argc, 0);
  for (i = 0; i < j->argc; i++) {
    lua_pushstring(L, j->argv[i]);
    lua_rawseti(L, -2, i + 1);
  }
  if (lua_pcall(L, 1, 1, 1) != LUA_OK) {
    fprintf(stderr, "eutaxy %s: %s\n", j->name, lua_tostring(L, -1));
    j->rc = 2;
  } else {
    j->rc = (int)lua_tointeger(L, -1);
  }
}

/* check, serve, init and help: eutaxy.<module>.main(argv) returns the exit code. */
static int cmd_main(const char *module, const char *name, int argc, char **argv) {
  job j = { main_body, module, name, argc, argv, 1 };
  return run_job(&j);
}

static void test_body(lua_State *L, job *j) {
  set_args(L, "busted", j->argc, j->argv);
  /* every coroutine busted makes copies the main thread's hook */
  if (eu_linecov_on) lua_sethook(L, eu_linecov_host_hook, LUA_MASKLINE, 0);
  if (luaL_loadstring(L, "require 'busted.runner'({ standalone = false })") != LUA_OK) {
    fprintf(stderr, "eutaxy: %s\n", lua_tostring(L, -1));
    j->rc = 1;
    return;
  }
  j->rc = run_chunk(L, 0, NULL);
}

/* --coverage's tracefile, written as the process exits: busted ends a run
 * with failures through os.exit, and the counts live outside its state. A
 * tracefile that cannot be written fails the command. */
static void write_coverage(void) {
  char err[EU_ERRLEN];
  int files, lines, hit;
  if (eu_linecov_finish(&files, &lines, &hit, err, sizeof err) != EU_OK) {
    fprintf(stderr, "eutaxy test: --coverage: %s\n", err);
    fflush(NULL);
    _exit(2);
  }
  fprintf(stderr, "eutaxy test: coverage: %d of %d line%s ran, in %d file%s; written to %s\n", hit, lines,
          lines == 1 ? "" : "s", files, files == 1 ? "" : "s", coverage_out);
}

/* eutaxy test takes --coverage (or busted's -c) and --coverage-out FILE
 * itself, so that busted never looks for LuaCov: the lines are counted by
 * linecov.c, in the spec's state and in every isolate. The rest of argv
 * goes to busted. */
static int cmd_test(int argc, char **argv) {
  job j = { test_body, NULL, NULL, 0, argv, 1 };
  char err[EU_ERRLEN];
  int i, on = 0;
  for (i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--coverage") == 0 || strcmp(argv[i], "-c") == 0) {
      on = 1;
    } else if (strcmp(argv[i], "--coverage-out") == 0) {
      if (i + 1 >= argc || argv[i + 1][0] == '\0') {
        fputs("eutaxy test: --coverage-out needs a file: eutaxy test --coverage-out lcov.info\n", stderr);
        return 2;
      }
      coverage_out = argv[++i];
      on = 1;
    } else {
      argv[j.argc++] = argv[i];
    }
  }
  if (on) {
    if (eu_linecov_start(coverage_out, NULL, libdir(), err, sizeof err) != EU_OK) {
      fprintf(stderr, "eutaxy test: --coverage: %s\n", err);
      return 2;
    }
    atexit(write_coverage);
  }
  return run_job(&j);
}

/*
 * The heap of a short command on huge pages. A check allocates a few
 * megabytes in its first milliseconds (the command's modules, SQLite's
 * pages, the first images), one page fault per 4 KiB page touched; on a
 * virtual machine a fault costs tens of microseconds, a fifth of
 * leases.fixed.sim.lua's whole run. The kernel backs a range marked
 * MADV_HUGEPAGE with 2 MiB pages on first touch, one fault each, but only
 * where the mark came before the touch. So, before the first malloc: the
 * break is moved to one page short of a 2 MiB boundary, malloc is told to
 * take HEAP_HUGE more than it needs when it grows the heap (and to keep it),
 * its first block puts its headers in that one page, and what lies past the
 * boundary, untouched, is marked. The heap beyond it, and memory malloc
 * maps, are ordinary pages; RSS grows in steps of 2 MiB within the range.
 * Where malloc does not take its memory from the break (under ASan or
 * valgrind, whose allocators map their own), the break is put back and
 * nothing else changes.
 */
#define HUGE_PAGE ((uintptr_t)2 << 20)
#define HEAP_HUGE (16 << 20)

static void heap_on_huge_pages(void) {
  uintptr_t cur = (uintptr_t)sbrk(0), at, to;
  intptr_t gap;
  void *volatile first;  /* a malloc and free the compiler may not elide */
  if (cur == (uintptr_t)-1) return;
  at = (cur + 2 * 4096 + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
  gap = (intptr_t)(at - 4096 - cur);
  if (sbrk(gap) == (void *)-1) return;
  mallopt(M_TOP_PAD, HEAP_HUGE);
  mallopt(M_TRIM_THRESHOLD, 2 * HEAP_HUGE);
  first = malloc(1);
  to = (uintptr_t)sbrk(0) & ~(HUGE_PAGE - 1);
  if (to > at) madvise((void *)at, to - at, MADV_HUGEPAGE);
  else if ((uintptr_t)sbrk(0) == at - 4096) sbrk(-gap);
  free(first);
}

static int is_help_flag(const char *a) {
  return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0;
}

int main(int argc, char **argv) {
  const char *cmd = argc > 1 ? argv[1] : "help";
  char err[EU_ERRLEN];
  if (strcmp(cmd, "check") == 0 || strcmp(cmd, "test") == 0) heap_on_huge_pages();
  /* Before anything touches SQLite: the mode installs its allocator. */
  if (eu_faultsim_init(getenv("EUTAXY_FAULTSIM"), err, sizeof err) != EU_OK) {
    fprintf(stderr, "eutaxy: %s\n", err);
    return 2;
  }
  atexit(eu_faultsim_report);
  find_files();
  /* COMMAND --help for every command, so run shows eutaxy's help, not the
   * script's, and test eutaxy's, then busted's options (help.lua); unknown
   * commands fall to help's message. */
  if (argc > 2 && is_help_flag(argv[2]) && strcmp(cmd, "help") != 0)
    return cmd_main("eutaxy.help", "help", 1, argv + 1);
  if (strcmp(cmd, "check") == 0) return cmd_main("eutaxy.checker", "check", argc - 2, argv + 2);
  if (strcmp(cmd, "serve") == 0) return cmd_main("eutaxy.serve", "serve", argc - 2, argv + 2);
  if (strcmp(cmd, "init") == 0) return cmd_main("eutaxy.starter", "init", argc - 2, argv + 2);
  if (strcmp(cmd, "run") == 0) return cmd_run(argc - 2, argv + 2);
  if (strcmp(cmd, "test") == 0) return cmd_test(argc - 2, argv + 2);
  if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
    printf("eutaxy %s\n", EU_VERSION);
    return 0;
  }
  if (strcmp(cmd, "help") == 0 || is_help_flag(cmd))
    return cmd_main("eutaxy.help", "help", argc > 2 ? argc - 2 : 0, argv + 2);
  return cmd_main("eutaxy.help", "help", 1, argv + 1);
}
