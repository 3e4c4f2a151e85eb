/*
 * lurl.h: the parts of a URL in one pass, for eutaxy.url (lurl.c).
 */
#ifndef EUTAXY_LURL_H
#define EUTAXY_LURL_H

#include <lua.h>

/* split(s): a table of the URL's parts but its query, or nil and why it
 * is refused; url.lua's parse builds on it. The metered one, an isolate's,
 * charges its meter by the length of s first; the other is a host state's,
 * which has no meter. */
int eu_url_split(lua_State *L);
int eu_url_split_metered(lua_State *L);

/* href(s): split's href alone, or nil and why, for a URL that is only
 * normalized (Request.new): no table and no strings of the other parts. */
int eu_url_href(lua_State *L);
int eu_url_href_metered(lua_State *L);

#endif
