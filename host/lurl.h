/*
 * lurl.h: the parts of a URL in one pass, for eutaxy.url (lurl.c).
 */
#ifndef EUTAXY_LURL_H
#define EUTAXY_LURL_H

#include <lua.h>

/* split(s): a table of the URL's parts but its query, or nil and why it
 * is refused; url.lua's parse builds on it. Charged to the meter of an
 * isolate by the length of s. */
int eu_url_split(lua_State *L);

#endif
