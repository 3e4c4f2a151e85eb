/*
 * eutaxy.json's encoder in C, for eutaxy.core (lua/eutaxy/json.lua is the
 * definition; spec/json_spec.lua compares the two).
 *
 * json_encoder(array_mt, null, encode): json.encode, a C function that
 * gives the text json.lua's encode gives, and calls encode (json.lua's)
 * for anything that raises on or that it leaves to it (a table with
 * another metatable, nesting deeper than 100).
 *
 * The _metered forms are an isolate's: they charge its CPU meter a VM
 * instruction for each 64 bytes they read or write and for each value,
 * json.encode as it goes. So a stop names the user's line, json.encode
 * being the C function the user's code calls.
 */
#ifndef EUTAXY_LJSON_H
#define EUTAXY_LJSON_H

#include <lua.h>

int eu_json_encoder(lua_State *L);
int eu_json_encoder_metered(lua_State *L);

#endif
