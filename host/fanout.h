/*
 * fanout.h: durable fanout, the storage engine (see fanout.c).
 */
#ifndef EUTAXY_FANOUT_H
#define EUTAXY_FANOUT_H

#include "store.h"

int eu_fanout_migrate(eu_store *s);

#endif
