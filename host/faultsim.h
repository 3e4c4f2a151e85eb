/*
 * faultsim.h: fault simulation of the host itself, a test mode.
 *
 * Not the checker's faults (fault.h), which are faults of the platform the
 * user's code must survive: these are faults of the machine the host runs
 * on, which the host must survive. The mode fails the Nth allocation, or
 * the Nth SQLite I/O call, of one whole command, so a sweep over N = 1, 2,
 * ... reaches every allocation and every I/O call the command makes, as
 * SQLite's own malloc and I/O error tests do.
 *
 * It is switched on by the environment variable EUTAXY_FAULTSIM, read once
 * by main() before anything else runs:
 *
 *   alloc:N    the Nth allocation fails, the ones after it succeed again
 *   alloc:N+   every allocation from the Nth on fails
 *   io:N       the Nth SQLite I/O call fails with its SQLITE_IOERR_* code
 *   io:N+      every I/O call from the Nth on fails
 *   count      nothing fails; only counts
 *
 * The persistent form (N+) is the one a sweep should use for allocations:
 * Lua answers a failed allocation with a full collection and a second try,
 * so a single failure inside Lua is mostly absorbed, while N+ makes the
 * failure stick and the command must end with a clear error. The transient
 * form is the one that tests recovery: the command must go on, or end
 * clearly, with nothing committed lost.
 *
 * Counted allocations: every request for more memory that an isolate's
 * allocator (isolate.c) or the main Lua state (main.c) is asked for, and
 * every xMalloc/xRealloc of SQLite (SQLITE_CONFIG_MALLOC around the default
 * methods). The host's own malloc calls are not counted. Counted I/O calls:
 * xOpen, xDelete, xAccess of the VFS and xRead, xWrite, xTruncate, xSync,
 * xFileSize, xLock, xCheckReservedLock, xShmMap and xShmLock (locking only)
 * of its files, through a VFS registered as the default around "unix".
 * In-memory databases (the checker's) make no I/O calls.
 *
 * At exit a line on stderr says what was counted, so a sweep knows where N
 * ends:  eutaxy faultsim: alloc:7+: 12345 allocations, 67 io calls, 3 failed
 *
 * The count of one command is the same from run to run as long as the
 * addresses are: Lua hashes tables by address and seeds its string hashes
 * with the address of a stack variable, and a rehash allocates. So a sweep
 * runs under `setarch -R` (no address randomization) and writes every N
 * with the same number of digits (alloc:0000000042+), keeping the
 * environment, and so the stack, the same size.
 *
 * When the variable is unset nothing is installed, and each allocator pays
 * one test of a global that is always zero.
 */
#ifndef EUTAXY_FAULTSIM_H
#define EUTAXY_FAULTSIM_H

#include <stddef.h>
#include <stdint.h>
#include <lua.h>

/* Nonzero while a mode is on; read by the inline test below. */
extern int eu_faultsim_active;

/* Reads spec (the value of EUTAXY_FAULTSIM; NULL or "" leaves the mode
 * off) and installs SQLite's allocator and VFS wrappers. Call before any
 * SQLite call. 0 or EU_EINVAL with a message naming the variable. */
int eu_faultsim_init(const char *spec, char *err, size_t errlen);

/* Counts one allocation; 1 when it must fail. */
int eu_faultsim_alloc_slow(void);
static inline int eu_faultsim_alloc(void) {
  return eu_faultsim_active ? eu_faultsim_alloc_slow() : 0;
}

/* Every allocation the host could not make, simulated or real: an
 * isolate's (not its memory limit, which is the user's), SQLite's
 * (SQLITE_NOMEM, noted by store.c). The checker voids a run in which one failed: its verdict
 * would be about the machine, not the scenario. Counted with the mode off. */
void eu_faultsim_note_oom(void);
uint64_t eu_faultsim_ooms(void);

/* Puts the counting allocator in front of L's (for states that do not use
 * the isolate's allocator, such as main's). Does nothing when off. */
void eu_faultsim_wrap_lua(lua_State *L);

/* The line described above, on stderr; does nothing when off. */
void eu_faultsim_report(void);

#endif
