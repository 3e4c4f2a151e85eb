/*
 * lstore.h: the storage API as Lua sees it inside an object's isolate.
 *
 * eu_lstore_push pushes a table of C functions bound to one store:
 *   exec(sql, ...)            -> { columnNames = {...}, rows = { {v1, v2, ...}, ... },
 *                                  rowsRead = n, rowsWritten = n }
 *                                rows are arrays with NULL as nil; the Lua side
 *                                (lua/eutaxy/storage.lua) builds the cursor.
 *   get(key) / get({keys})    -> value, or a { [key] = value } table
 *   put(key, value) / put({ [key] = value })
 *   delete(key) -> boolean / delete({keys}) -> count
 *   list{ prefix=, start=, startAfter=, ["end"]=, limit=, reverse= } -> { {key=, value=}, ... } in key order
 *   deleteAll()
 *   getAlarm() -> ms or nil, setAlarm(ms), deleteAlarm()
 *   transactionSync(fn, ...) -> fn's results; fn may not yield
 *   sync()
 *   databaseSize() -> bytes (page_count * page_size)
 * exec binds nil as NULL, booleans as 1/0, integers, floats, and strings as
 * TEXT when they are valid UTF-8, as BLOB otherwise (so bytes round-trip).
 * rowsWritten is the rows the statement inserted, updated or deleted,
 * counting its triggers' and foreign-key actions' (sqlite3_total_changes64
 * before and after); rowsRead is the rows it returned plus rowsWritten.
 * list ranges combine: prefix, start or startAfter, and end all narrow it.
 * deleteAll drops every table, view and virtual table, the engines' too,
 * and clears the key-value pairs and the alarm (eu_store_delete_all).
 * sync returns at once: the turn's writes commit at its end, before
 * anything it sends leaves.
 * Every function begins the turn transaction if none is open. Errors are
 * raised as Lua errors whose message carries SQLite's text.
 * Refused in exec, through the authorizer: BEGIN, COMMIT, ROLLBACK,
 * SAVEPOINT, RELEASE, ATTACH, DETACH, and any access to _eutaxy_* tables.
 */
#ifndef EUTAXY_LSTORE_H
#define EUTAXY_LSTORE_H

#include <lua.h>
#include "store.h"

/* eutaxy.core's row_object(names, row) and row_objects(names, rows, from):
 * a cursor's rows as objects (storage.lua's as_object, which says what is
 * wrong when they return nothing). The _metered ones, an isolate's, charge
 * its CPU meter by the values they place. */
int eu_sql_row_object(lua_State *L);
int eu_sql_row_object_metered(lua_State *L);
int eu_sql_row_objects(lua_State *L);
int eu_sql_row_objects_metered(lua_State *L);

/* s must outlive every use of the pushed functions in L. */
void eu_lstore_push(lua_State *L, eu_store *s);
/* One of them alone (name is its key in the table: "exec", "list", ...). */
void eu_lstore_push_fn(lua_State *L, eu_store *s, const char *name);

#endif
