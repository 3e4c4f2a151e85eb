/*
 * sqlmem.h: SQLite's memory, counted per object.
 *
 * Owns the allocator the host gives SQLite (SQLITE_CONFIG_MALLOC, installed
 * once per process before SQLite initializes) and the meters it counts
 * into. Every block SQLite asks for carries a small header naming the meter
 * that was current on its thread when it was made; freeing the block takes
 * its bytes off that meter, whichever thread or store frees it. Must not
 * know about stores or isolates: store.c makes its meter current around the
 * SQLite calls it makes and says when the limit holds.
 *
 * A meter is freed when both its owner has released it and its last block
 * is gone, so a block that outlives its store (SQLite keeps a few caches
 * past a connection) never points at freed memory.
 */
#ifndef EUTAXY_SQLMEM_H
#define EUTAXY_SQLMEM_H

#include <stddef.h>
#include <stdint.h>

typedef struct eu_sqlmem {
  size_t live;          /* bytes of the blocks made under this meter and not yet freed */
  size_t limit;         /* 0: none */
  const size_t *also;   /* more live bytes counted toward limit (the isolate's); may be NULL */
  int enforce;          /* refuse past limit now (user SQL is running) */
  int refused;          /* an allocation was refused since the flag was cleared */
  int charging;         /* add what is allocated to charged */
  uint64_t charged;     /* bytes allocated while charging */
  uint64_t charge_max;  /* while charging, refuse what would take charged past it */
  int over;             /* an allocation was refused for charge_max */
  long refs;            /* the owner's reference and one per live block */
} eu_sqlmem;

/* Installs the allocator, once per process (thread-safe). 0, or -1 when
 * SQLite was initialized before it could be installed: then nothing is
 * counted and no limit holds. */
int eu_sqlmem_install(void);
/* 1 when the allocator is in place. */
int eu_sqlmem_installed(void);
/* From now on SQLite may run on more than one thread: the meters count
 * with atomic operations. Called before the second thread starts, and
 * never undone. */
void eu_sqlmem_share(void);

/* How many allocations meters have refused in this process, for a limit
 * or a statement's charge: the checker compares the count before and
 * after a run in a restored world (lcheck.c). */
uint64_t eu_sqlmem_refusals(void);

/* A new meter (NULL when out of memory); release gives up the owner's hold. */
eu_sqlmem *eu_sqlmem_new(void);
void eu_sqlmem_release(eu_sqlmem *m);

/* Makes m the current meter of this thread (NULL: none); returns the one
 * it replaces, for eu_sqlmem_leave. */
eu_sqlmem *eu_sqlmem_enter(eu_sqlmem *m);
void eu_sqlmem_leave(eu_sqlmem *prev);

#endif
