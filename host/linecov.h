/*
 * linecov.h: line coverage of the user's Lua code, written as LCOV.
 *
 * `eutaxy test --coverage` and `eutaxy check --coverage` count, for every
 * line of the user's project that can run, how many times it ran, in every
 * isolate of the process (the worker's and the objects') and, under test,
 * in the spec's own state; the counts go to an LCOV tracefile (lcov.info),
 * which genhtml and CI coverage services read.
 *
 * The counts live here, in the host's memory, never in an isolate's heap:
 * an isolate reset, a hibernation or a checkpoint rewound (arena.h) leaves
 * them alone, so a line counts once for each time it ran in any schedule,
 * and an image of an isolate is the same with coverage on or off but for
 * the hook the lua_State carries. Counting allocates nothing in a state.
 *
 * Which files count:
 *   in an isolate   every file it runs but eutaxy's own modules (libdir):
 *                   an isolate loads only the project's files and eutaxy's
 *                   (sandbox.c's require), wherever the project lies
 *   in the spec's state (`eutaxy test`)
 *                   .lua files under root (the working folder), but
 *                   eutaxy's modules, the specs (*_spec.lua and the root's
 *                   spec/ folder, where busted keeps specs, helpers and
 *                   fixtures) and scenarios (*.sim.lua): those are the
 *                   tests, not the code under test (nor is .busted, busted's
 *                   configuration); busted and the system's modules lie
 *                   outside root
 * A file's lines that can run are its functions' active lines, read from
 * the bytecode Lua compiles it to (what debug.getinfo's "L" gives for
 * each function, nested ones included); each is written as DA:line,hits,
 * 0 for a line that never ran. A file the run never loaded is not listed.
 *
 * Off (the default), nothing is counted and no hook is set: sandbox.c sets
 * its count hook alone, as without this file. On, sandbox.c's hook takes
 * line events too (one hook serves both masks, since lua_sethook replaces
 * the hook), and the spec's state gets eu_linecov_host_hook.
 *
 * One process counts at a time, on one thread. `check -j N`'s workers are
 * forked: each exports what it counted (eu_linecov_export) and the parent
 * adds it up (eu_linecov_merge), holding its own counts aside meanwhile.
 */
#ifndef EUTAXY_LINECOV_H
#define EUTAXY_LINECOV_H

#include <stddef.h>

#include <lua.h>

#include "buf.h"

/* Whether counting is on: sandbox.c's hooks take line events while it is. */
extern int eu_linecov_on;

/* Turns counting on, to be written to out (checked now: a folder that is
 * not there or a file that cannot be written is an error before anything
 * runs). root is the folder whose files count in the spec's state (NULL:
 * the working folder); libdir is eutaxy's Lua folder, never counted.
 * EU_EINVAL with a message when counting is already on or out cannot be
 * written. */
int eu_linecov_start(const char *out, const char *root, const char *libdir, char *err, size_t errlen);

/* A line event of an isolate (sandbox.c's hook, for LUA_HOOKLINE). */
void eu_linecov_isolate_line(lua_State *L, lua_Debug *ar);
/* The hook of a state that is not an isolate (the spec's): LUA_MASKLINE. */
void eu_linecov_host_hook(lua_State *L, lua_Debug *ar);

/* What was counted, in the tracefile given to eu_linecov_start; counting
 * stops and its memory is freed, whether the write succeeds or not.
 * *files and *lines (either may be NULL) get the files listed and the
 * lines that can run, *hit the lines that ran. */
int eu_linecov_finish(int *files, int *lines, int *hit, char *err, size_t errlen);
/* Stops counting, writing nothing. */
void eu_linecov_stop(void);

/* For forked workers: hold sets the counts so far aside and starts them
 * at zero, so that what a worker exports is its own; release adds them
 * back. export appends the counts as text ("@path\n" then "line count
 * ..." on one line, for each file with a count), merge adds such text to
 * the counts; EU_ECORRUPT for text export did not write. */
int eu_linecov_hold(void);
void eu_linecov_release(void);
int eu_linecov_export(eu_buf *out);
int eu_linecov_merge(const char *p, size_t n);

/* The lines of the Lua source file at path that can run, as activelines
 * gives them for each of its functions: a[line] is 1 for each, up to
 * *n (a malloc'd array of *n + 1 bytes; free it). EU_EINVAL with Lua's
 * message when the file does not compile, EU_ENOMEM. */
int eu_linecov_lines(const char *path, char **a, int *n, char *err, size_t errlen);

#endif
