/*
 * test_linecov.c: the lines linecov.c says can run, against Lua's own
 * activelines, and the counts and tracefile of a state with its hook.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "buf.h"
#include "eutaxy.h"
#include "linecov.h"
#include "test.h"

static char dir[] = "/tmp/eutaxy-linecov-XXXXXX";

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  ASSERT(f != NULL);
  ASSERT(fputs(text, f) >= 0);
  ASSERT(fclose(f) == 0);
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "r");
  char *s;
  long n;
  ASSERT(f != NULL);
  ASSERT(fseek(f, 0, SEEK_END) == 0);
  n = ftell(f);
  rewind(f);
  s = calloc(1, (size_t)n + 1);
  ASSERT(s != NULL);
  ASSERT(fread(s, 1, (size_t)n, f) == (size_t)n);
  fclose(f);
  return s;
}

/* Functions of every shape the dump can hold: vararg and fixed, nested
 * three deep, a method, one long enough that its lines need absolute line
 * information every 128 instructions, and one with a gap of more lines
 * than a delta byte holds. The chunk returns them; calling one may give
 * a function created inside it. */
static char *tricky_source(void) {
  eu_buf b;
  char *s;
  size_t n;
  int i;
  eu_buf_init(&b);
  eu_buf_puts(&b,
    "local all = {}\n"
    "local function keep(f) all[#all + 1] = f; return f end\n"
    "keep(function(...)\n"
    "  local n = select('#', ...)\n"
    "  return n\n"
    "end)\n"
    "keep(function(a, b)\n"
    "  local inner = function(x)\n"
    "    return function(y)\n"
    "      return x + y\n"
    "    end\n"
    "  end\n"
    "  return inner\n"
    "end)\n"
    "local t = {}\n"
    "function t:method(v) if v then return 1 end\n"
    "  return 2 end\n"
    "keep(t.method)\n"
    "keep(function()\n"
    "  local x = 0\n");
  for (i = 0; i < 300; i++) eu_buf_printf(&b, "  x = x + %d; x = x * 2\n", i);
  eu_buf_puts(&b, "  return x\nend)\nkeep(function()\n  local y = 1\n");
  for (i = 0; i < 400; i++) eu_buf_putc(&b, '\n');
  eu_buf_puts(&b, "  y = y + 1\n  return y\nend)\nreturn all\n");
  s = eu_buf_take(&b, &n);
  ASSERT(s != NULL);
  return s;
}

/* Every function of the chunk at path (finding nested ones by calling
 * each), and the union of their activelines, as a table line -> true. */
static const char *activelines_script =
  "local path = ...\n"
  "local all = dofile(path)\n"
  "local lines, seen, i = {}, {}, 1\n"
  "local main = loadfile(path)\n"
  "for l in pairs(debug.getinfo(main, 'L').activelines) do lines[l] = true end\n"
  "while all[i] do\n"
  "  local f = all[i]\n"
  "  if not seen[f] then\n"
  "    seen[f] = true\n"
  "    for l in pairs(debug.getinfo(f, 'L').activelines) do lines[l] = true end\n"
  "    local ok, r = pcall(f, 1)\n"
  "    if ok and type(r) == 'function' then all[#all + 1] = r end\n"
  "  end\n"
  "  i = i + 1\n"
  "end\n"
  "return lines, #all\n";

static void test_lines_are_activelines(void) {
  char path[256], err[EU_ERRLEN], *src = tricky_source(), *a;
  lua_State *L = luaL_newstate();
  int n, line, functions, matched = 0;
  snprintf(path, sizeof path, "%s/tricky.lua", dir);
  write_file(path, src);
  free(src);
  ASSERT_OK(eu_linecov_lines(path, &a, &n, err, sizeof err));
  luaL_openlibs(L);
  ASSERT(luaL_loadstring(L, activelines_script) == LUA_OK);
  lua_pushstring(L, path);
  if (lua_pcall(L, 1, 2, 0) != LUA_OK) {
    fprintf(stderr, "%s\n", lua_tostring(L, -1));
    ASSERT(0);
  }
  functions = (int)lua_tointeger(L, -1);
  ASSERT_EQ(functions, 7);  /* the nested two come from calling their makers */
  for (line = 1; line <= n + 10; line++) {
    int active;
    lua_geti(L, -2, line);
    active = lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (active != (line <= n && a[line])) {
      fprintf(stderr, "line %d: activelines says %d, linecov says %d\n", line, active, line <= n && a[line]);
      ASSERT(0);
    }
    matched += active;
  }
  ASSERT(matched > 300);  /* the long function's lines are all there */
  lua_close(L);
  free(a);
  remove(path);
}

static void test_a_file_that_does_not_compile(void) {
  char path[256], err[EU_ERRLEN], *a;
  int n;
  snprintf(path, sizeof path, "%s/broken.lua", dir);
  write_file(path, "local x = = 1\n");
  ASSERT_EQ(eu_linecov_lines(path, &a, &n, err, sizeof err), EU_EINVAL);
  ASSERT_CONTAINS(err, "broken.lua:1:");
  ASSERT(a == NULL);
  remove(path);
}

static const char *module_source =
  "local m = {}\n"                        /* 1 */
  "function m.pick(v)\n"                  /* 2 */
  "  if v then\n"                         /* 3 */
  "    return 'yes'\n"                    /* 4 */
  "  end\n"                               /* 5 */
  "  return 'no'\n"                       /* 6 */
  "end\n"                                 /* 7 */
  "for i = 1, 3 do m.pick(true) end\n"    /* 8: entered once, jumped back to twice */
  "return m\n";                           /* 9 */

/* Runs the module at path in a state of its own with the host's hook. */
static void run_hooked(const char *path) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  lua_sethook(L, eu_linecov_host_hook, LUA_MASKLINE, 0);
  ASSERT(luaL_dofile(L, path) == LUA_OK);
  lua_close(L);
}

static void test_tracefile_has_hits_and_misses(void) {
  char path[256], out[256], spec[256], err[EU_ERRLEN], want[1024], *got;
  int files, lines, hit;
  snprintf(path, sizeof path, "%s/mod.lua", dir);
  snprintf(spec, sizeof spec, "%s/mod_spec.lua", dir);
  snprintf(out, sizeof out, "%s/lcov.info", dir);
  write_file(path, module_source);
  write_file(spec, "return 1\n");
  ASSERT_OK(eu_linecov_start(out, dir, "/nonexistent", err, sizeof err));
  ASSERT(access(out, F_OK) != 0);  /* checked, not left behind */
  run_hooked(path);
  run_hooked(spec);  /* a spec is the test, not the code under test */
  ASSERT_OK(eu_linecov_finish(&files, &lines, &hit, err, sizeof err));
  ASSERT_EQ(files, 1);
  ASSERT_EQ(lines, 8);
  ASSERT_EQ(hit, 7);
  ASSERT(!eu_linecov_on);
  got = read_file(out);
  snprintf(want, sizeof want,
           "TN:\nSF:%s\nDA:1,1\nDA:2,1\nDA:3,3\nDA:4,3\nDA:6,0\nDA:7,1\nDA:8,3\nDA:9,1\nLF:8\nLH:7\nend_of_record\n",
           path);
  ASSERT_STR_EQ(got, want);
  free(got);
  remove(out);
  remove(spec);
  remove(path);
}

/* What forked workers do: the parent holds its counts, a worker counts
 * from none and exports, the parent merges and releases. */
static void test_held_counts_and_merged_ones_add_up(void) {
  char path[256], out[256], err[EU_ERRLEN], *got;
  eu_buf b;
  snprintf(path, sizeof path, "%s/mod.lua", dir);
  snprintf(out, sizeof out, "%s/lcov.info", dir);
  write_file(path, module_source);
  ASSERT_OK(eu_linecov_start(out, dir, NULL, err, sizeof err));
  run_hooked(path);                  /* the parent's: 1 */
  ASSERT_OK(eu_linecov_hold());
  run_hooked(path);                  /* the worker's: 1 */
  eu_buf_init(&b);
  ASSERT_OK(eu_linecov_export(&b));
  ASSERT(b.n > 0 && b.p[0] == '@');
  ASSERT_OK(eu_linecov_merge(b.p, b.n));     /* as from another worker: 2 */
  ASSERT_EQ(eu_linecov_merge("@/x\n1 z\n", 8), EU_ECORRUPT);
  ASSERT_EQ(eu_linecov_merge("5 5\n", 4), EU_ECORRUPT);
  eu_linecov_release();              /* 3 in all */
  eu_buf_free(&b);
  ASSERT_OK(eu_linecov_finish(NULL, NULL, NULL, err, sizeof err));
  got = read_file(out);
  ASSERT_CONTAINS(got, "DA:1,3\nDA:2,3\nDA:3,9\nDA:4,9\nDA:6,0\nDA:7,3\nDA:8,9\nDA:9,3\n");
  free(got);
  remove(out);
  remove(path);
}

static void test_bad_tracefile_and_twice_on(void) {
  char out[256], err[EU_ERRLEN];
  snprintf(out, sizeof out, "%s/no/such/folder/lcov.info", dir);
  ASSERT_EQ(eu_linecov_start(out, NULL, NULL, err, sizeof err), EU_EINVAL);
  ASSERT_CONTAINS(err, "cannot write");
  ASSERT_CONTAINS(err, "No such file or directory");
  ASSERT(!eu_linecov_on);
  ASSERT_EQ(eu_linecov_start(dir, NULL, NULL, err, sizeof err), EU_EINVAL);  /* a folder */
  snprintf(out, sizeof out, "%s/lcov.info", dir);
  ASSERT_OK(eu_linecov_start(out, NULL, NULL, err, sizeof err));
  ASSERT_EQ(eu_linecov_start(out, NULL, NULL, err, sizeof err), EU_EINVAL);
  ASSERT_CONTAINS(err, "already");
  eu_linecov_stop();
  ASSERT(!eu_linecov_on);
  ASSERT(access(out, F_OK) != 0);  /* stopped: nothing written */
}

int main(void) {
  static const eu_test tests[] = {
    {"the lines that can run are Lua's activelines of every function", test_lines_are_activelines},
    {"a file that does not compile has no lines and Lua's message", test_a_file_that_does_not_compile},
    {"the tracefile lists hits and misses of the project's files only", test_tracefile_has_hits_and_misses},
    {"held counts and merged ones add up", test_held_counts_and_merged_ones_add_up},
    {"an unwritable tracefile and a second start are refused", test_bad_tracefile_and_twice_on},
  };
  int rc;
  ASSERT(mkdtemp(dir) != NULL);
  rc = test_main(tests, sizeof tests / sizeof tests[0]);
  rmdir(dir);
  return rc;
}
