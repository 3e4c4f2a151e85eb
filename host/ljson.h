/*
 * eutaxy.json's encoder in C, for eutaxy.core (lua/eutaxy/json.lua is the
 * definition; spec/json_spec.lua compares the two).
 *
 * json_quote(s): s as a JSON string.
 * json_encode(value, array_mt, null): the text json.encode gives for value,
 * or nil for anything json.encode raises on or the encoder here leaves to
 * it (a table with another metatable, nesting deeper than 100): the caller
 * then runs json.encode, which says what is wrong.
 *
 * The _metered forms are an isolate's: they charge its CPU meter a VM
 * instruction for each 64 bytes they read or write and for each value.
 */
#ifndef EUTAXY_LJSON_H
#define EUTAXY_LJSON_H

#include <lua.h>

int eu_json_quote(lua_State *L);
int eu_json_quote_metered(lua_State *L);
int eu_json_encode(lua_State *L);
int eu_json_encode_metered(lua_State *L);

#endif
