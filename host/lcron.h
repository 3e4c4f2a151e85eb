/*
 * lcron.h: cron expressions as the host's Lua side sees them
 * (eutaxy.core.cron_check and cron_next).
 */
#ifndef EUTAXY_LCRON_H
#define EUTAXY_LCRON_H

#include <lua.h>

/* Adds cron_check and cron_next to the table on the top of the stack. */
int eu_open_cron(lua_State *L);

#endif
