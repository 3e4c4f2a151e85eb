/*
 * fanout.c: placeholder until the engine is written.
 */
#include "eutaxy.h"
#include "fanout.h"

int eu_fanout_migrate(eu_store *s) { (void)s; return EU_EINVAL; }
