/*
 * luac.h: eutaxy's own Lua modules as the build compiled and hashed them.
 *
 * The build compiles every lua/eutaxy/NAME.lua with luac into
 * EUTAXY_LUACDIR/eutaxy/NAME.luac and hashes them into
 * EUTAXY_LUACDIR/eutaxy.fnv; wherever eutaxy loads one of its own modules
 * (the command's require, the isolates' require) it loads the bytecode
 * instead of parsing the source, when the bytecode is the source's. Every
 * other Lua file is loaded as text.
 */
#ifndef EUTAXY_LUAC_H
#define EUTAXY_LUAC_H

#include <stddef.h>

#include <lua.h>

/* The folder of the build's compiled modules: EUTAXY_LUACDIR from the
 * environment, else the one eu_luac_use_dir named, else the one built in;
 * NULL when there is none. */
const char *eu_luac_dir(void);

/* Makes dir (kept, not copied) the folder of the compiled modules, under
 * EUTAXY_LUACDIR from the environment: the eutaxy command's, when it runs
 * installed rather than from its build tree (main.c). */
void eu_luac_use_dir(const char *dir);

/* The bytecode of the Lua file at path, in a malloc'd block of *len bytes,
 * when path names one of eutaxy's modules (DIR/eutaxy/NAME.lua) and the
 * build's bytecode of it is not older than it; else NULL. */
char *eu_luac_read(const char *path, size_t *len);

/* Loads code, which eu_luac_read gave for path, pushing the chunk: LUA_OK;
 * another status, with nothing pushed, when it does not load or was not
 * compiled from a file named path (then the source is to be parsed). */
int eu_luac_load(lua_State *L, const char *code, size_t len, const char *path);

/* Loads the Lua file at path from its bytecode when there is one to use,
 * else from its source as text; pushes the chunk or, as luaL_loadfilex, an
 * error message. */
int eu_luac_loadfile(lua_State *L, const char *path);

/* Replaces Lua's searcher for Lua files in L's package.searchers by one
 * that loads with eu_luac_loadfile: the same files, text only, eutaxy's
 * modules from their bytecode. */
void eu_luac_require(lua_State *L);

/* eutaxy.luac, for the command's state: dir, the folder of the build's
 * compiled modules (nil when there is none), and digest(), the build's
 * hashes of them (luac.c). */
int eu_luac_open(lua_State *L);

#endif
