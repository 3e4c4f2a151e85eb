/*
 * heapprint.h: a fingerprint of what a Lua state keeps between turns.
 *
 * The worker's isolate serves every request of a world. Whether one
 * request's turn can affect another's is a question of what the turn
 * changed among the values that outlive it: globals, loaded modules, their
 * upvalues and tables, and all they reach. The fingerprint covers exactly
 * that, from the registry down, and two fingerprints differ when anything
 * there was written (a key added, removed or set, an upvalue set, a
 * metatable changed, a coroutine moved on). Values are named by identity
 * within the process (pointers, which Lua never moves), so a fingerprint
 * is only ever compared with one taken earlier in the same state.
 *
 * Left out, because they belong to one invocation: the registry's integer
 * slots (the host's references, among them the coroutines of tasks), and
 * any coroutine skip() names, with its stack; and, because it changes no
 * result, next's cache of sorted keys (determ.h). A string with the same
 * bytes but a new address counts as a change, which is only conservative.
 */
#ifndef EUTAXY_HEAPPRINT_H
#define EUTAXY_HEAPPRINT_H

#include <stdint.h>
#include <lua.h>

/* 0 when it could not be taken (out of memory): the caller treats that as
 * a change. The walk allocates nothing but room on L's stack and on a
 * thread of its own, and leaves the collector as it is: stopping and
 * restarting it set the collector's debt to zero, which made the next
 * allocation pay a whole step after every walk. */
uint64_t eu_heapprint(lua_State *L, int (*skip)(void *ud, lua_State *th), void *ud);

#endif
