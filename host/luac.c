/*
 * luac.c: eutaxy's own Lua modules as the build compiled and hashed them.
 *
 * Parsing eutaxy's modules was a fifth of a small check: the command's
 * state parses the CLI's (checker, check, config, json, ...), the first
 * isolate the runtime's (isolate.c keeps the bytecode for the others). The
 * build compiles each lua/eutaxy/NAME.lua with luac, debug information
 * kept, into EUTAXY_LUACDIR/eutaxy/NAME.luac. A module is loaded from its
 * bytecode when all of this holds, and parsed from its source as before
 * when any does not:
 *
 *   the source is named DIR/eutaxy/NAME.lua and the bytecode exists
 *   the bytecode is not older than the source: a module edited since the
 *                       build is parsed
 *   it loads: a liblua of another version refuses its header
 *   the chunk name luac recorded is "@" and the source's path exactly: the
 *                       build gives luac each file by the path the binary
 *                       loads it by (EUTAXY_LUADIR's), so errors,
 *                       tracebacks and config.libdir() name the same file
 *                       and line as from the source; a module found in
 *                       another folder (EUTAXY_LUADIR set elsewhere) is not
 *                       the file this bytecode was compiled from
 *
 * Lua does not verify bytecode, and a forged chunk crashes the host: only
 * the files of this folder, which the build wrote, are ever loaded in
 * binary mode. Every other Lua file eutaxy loads, the project's and what a
 * user names, is loaded as text.
 *
 * `cmake --install` compiles the installed modules again, each named by
 * its installed path (tools/luac_install.lua), into PREFIX/share/eutaxy/luac,
 * which an installed binary uses in place of EUTAXY_LUACDIR (main.c).
 *
 * The build also hashes the same modules into EUTAXY_LUACDIR/eutaxy.fnv
 * for eutaxy.fingerprint, which hashes eutaxy's modules for every check:
 * a module not changed since (the same rule) need not be read again.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lualib.h>

#include "luac.h"

/* the folder the command found (eu_luac_use_dir), NULL for the one built in */
static const char *used_dir;

void eu_luac_use_dir(const char *dir) {
  used_dir = dir;
}

const char *eu_luac_dir(void) {
  const char *d = getenv("EUTAXY_LUACDIR");
  if (d && *d) return d;
  if (used_dir) return used_dir;
#ifdef EUTAXY_LUACDIR
  return EUTAXY_LUACDIR;
#else
  return NULL;
#endif
}

/* Whether what the build made (built, as stat saw it) is not older than
 * the file at source. */
static int fresh(const struct stat *built, const char *source) {
  struct stat st;
  if (stat(source, &st) != 0) return 0;
  if (built->st_mtim.tv_sec != st.st_mtim.tv_sec) return built->st_mtim.tv_sec > st.st_mtim.tv_sec;
  return built->st_mtim.tv_nsec >= st.st_mtim.tv_nsec;
}

/* The bytecode's path for the source at path, DIR/eutaxy/NAME.lua, in buf;
 * 0 when path is not of that form or there is no folder. */
static int luac_path(const char *path, char *buf, size_t size) {
  const char *dir = eu_luac_dir(), *name = strrchr(path, '/');
  size_t n, before;
  if (!dir || !name) return 0;
  before = (size_t)(name - path);
  if (before < 6 || memcmp(name - 6, "eutaxy", 6) != 0 || (before > 6 && name[-7] != '/')) return 0;
  name++;
  n = strlen(name);
  if (n <= 4 || strcmp(name + n - 4, ".lua") != 0) return 0;
  return (size_t)snprintf(buf, size, "%s/eutaxy/%.*s.luac", dir, (int)(n - 4), name) < size;
}

char *eu_luac_read(const char *path, size_t *len) {
  char bc[PATH_MAX];
  struct stat st;
  char *code = NULL;
  size_t got = 0;
  int fd;
  *len = 0;
  if (!luac_path(path, bc, sizeof bc) || (fd = open(bc, O_RDONLY | O_CLOEXEC)) < 0) return NULL;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 && fresh(&st, path) &&
      (code = malloc((size_t)st.st_size)) != NULL) {
    while (got < (size_t)st.st_size) {
      ssize_t n = read(fd, code + got, (size_t)st.st_size - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += (size_t)n;
    }
    if (got < (size_t)st.st_size) {
      free(code);
      code = NULL;
    }
  }
  close(fd);
  if (code) *len = got;
  return code;
}

int eu_luac_load(lua_State *L, const char *code, size_t len, const char *path) {
  lua_Debug ar;
  int status = luaL_loadbufferx(L, code, len, path, "b");
  if (status != LUA_OK) {
    lua_pop(L, 1);
    return status;
  }
  lua_pushvalue(L, -1);
  lua_getinfo(L, ">S", &ar);
  if (ar.source[0] != '@' || strcmp(ar.source + 1, path) != 0) {
    lua_pop(L, 1);
    return LUA_ERRFILE;
  }
  return LUA_OK;
}

int eu_luac_loadfile(lua_State *L, const char *path) {
  size_t len;
  char *code = eu_luac_read(path, &len);
  int status = code ? eu_luac_load(L, code, len, path) : LUA_ERRFILE;
  free(code);
  return status == LUA_OK ? LUA_OK : luaL_loadfilex(L, path, "t");
}

/* package.searchers[2]: Lua's own searcher for Lua files (package.path
 * through package.searchpath, its messages word for word), but loading
 * with eu_luac_loadfile. Upvalues: 1 package, 2 package.searchpath. */
static int search_lua(lua_State *L) {
  const char *name = luaL_checkstring(L, 1), *path;
  lua_settop(L, 1);
  lua_pushvalue(L, lua_upvalueindex(2));
  lua_pushvalue(L, 1);
  lua_getfield(L, lua_upvalueindex(1), "path");
  if (!lua_isstring(L, -1)) return luaL_error(L, "'package.path' must be a string");
  lua_call(L, 2, 2);
  if (lua_isnil(L, 2)) return 1;  /* where it looked */
  lua_settop(L, 2);
  path = lua_tostring(L, 2);
  if (eu_luac_loadfile(L, path) != LUA_OK)
    return luaL_error(L, "error loading module '%s' from file '%s':\n\t%s", name, path, lua_tostring(L, -1));
  lua_insert(L, 2);  /* the chunk, then the file name it is given */
  return 2;
}

void eu_luac_require(lua_State *L) {
  lua_getglobal(L, LUA_LOADLIBNAME);
  lua_getfield(L, -1, "searchers");
  lua_pushvalue(L, -2);
  lua_getfield(L, -3, "searchpath");
  lua_pushcclosure(L, search_lua, 2);
  lua_rawseti(L, -2, 2);
  lua_pop(L, 2);
}

/* digest(): the build's hashes of eutaxy's modules (FNV-1a 64, as
 * eutaxy.fingerprint hashes files), path -> 16 hex digits, of the modules
 * not changed since: one newer than the digest is left out, to be read and
 * hashed again. Empty when there is no digest. The file holds a line
 * "HASH PATH" a module, the paths as EUTAXY_LUADIR names them. */
static int l_digest(lua_State *L) {
  char path[PATH_MAX];
  const char *dir = eu_luac_dir();
  struct stat st;
  char *text, *line, *end;
  size_t n;
  FILE *f;
  lua_newtable(L);
  if (!dir || (size_t)snprintf(path, sizeof path, "%s/eutaxy.fnv", dir) >= sizeof path) return 1;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 1;
  /* Lua's memory, taken before the file is open: an error cannot leak either */
  text = lua_newuserdatauv(L, (size_t)st.st_size + 1, 0);
  if (!(f = fopen(path, "rb"))) {
    lua_pop(L, 1);
    return 1;
  }
  n = fread(text, 1, (size_t)st.st_size, f);
  fclose(f);
  text[n] = '\0';
  for (line = text; (end = strchr(line, '\n')) != NULL; line = end + 1) {
    *end = '\0';
    if (end - line > 17 && line[16] == ' ' && strspn(line, "0123456789abcdef") == 16 && fresh(&st, line + 17)) {
      lua_pushlstring(L, line, 16);
      lua_setfield(L, -3, line + 17);
    }
  }
  lua_pop(L, 1);
  return 1;
}

int eu_luac_open(lua_State *L) {
  static const luaL_Reg fns[] = {
    {"digest", l_digest},
    {NULL, NULL}
  };
  const char *dir = eu_luac_dir();
  luaL_newlib(L, fns);
  if (dir) {
    lua_pushstring(L, dir);
    lua_setfield(L, -2, "dir");
  }
  return 1;
}
