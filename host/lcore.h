/*
 * lcore.h: opening eutaxy.core.
 */
#ifndef EUTAXY_LCORE_H
#define EUTAXY_LCORE_H

#include <stdint.h>

#include <lua.h>

typedef struct eu_world eu_world;

/* The host face: worlds and the checker. Pushes the module table. */
int eu_open_core_host(lua_State *L);

/* A World userdata for w. A borrowed one does not free w; release makes it
 * refuse further use (the world is about to go). */
void eu_lworld_push(lua_State *L, eu_world *w, int borrowed);
void eu_lworld_release(lua_State *L, int idx);

/* Pushes what the world knows of WebSocket sock and its client (a table:
 * state, object, client, received), or nil for no such socket. */
void eu_push_ws_seen(lua_State *L, eu_world *w, int64_t sock);

/* Adds core.explore to the table on the top of the stack (lcheck.c). */
int eu_open_check(lua_State *L);
/* Frees what explorations keep for the next one in the process (the
 * arenas of their isolates): for when no other will come. */
void eu_check_release(void);

#endif
