/*
 * agenda.c: the object's scheduler: participants' due times and the one alarm.
 */
#include "agenda.h"
#include "eutaxy.h"

int eu_agenda_migrate(eu_store *s) { (void)s; return EU_EINVAL; }
int eu_agenda_set(eu_store *s, const char *participant, const char *key, int64_t due) {
  (void)s; (void)participant; (void)key; (void)due; return EU_EINVAL;
}
int eu_agenda_clear(eu_store *s, const char *participant, const char *key) {
  (void)s; (void)participant; (void)key; return EU_EINVAL;
}
int eu_agenda_next(eu_store *s, int *has, int64_t *due) { (void)s; *has = 0; *due = 0; return EU_EINVAL; }
int eu_agenda_reconcile(eu_store *s) { (void)s; return EU_EINVAL; }
