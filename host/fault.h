/*
 * fault.h: the kinds of fault the checker injects, and their names.
 *
 * New kinds go at the end: a schedule string names a fault by its place
 * among the kinds offered, in this order, so old schedules still replay.
 *
 * A fault strikes at a *fault point*, a place in the world where the real
 * platform could fail: an RPC call, an alarm or cron firing, the delivery of
 * a call to an object, the answer of a drive request. Each fault point is a choice
 * (eu_world_choose with EU_CHOICE_FAULT) between no fault and every kind the
 * run may still inject there, so the explorer reaches every fault at every
 * point without knowing what a fault is.
 */
#ifndef EUTAXY_FAULT_H
#define EUTAXY_FAULT_H

enum {
  EU_FAULT_NONE = 0,
  EU_FAULT_RPC_FAIL,      /* the call fails before it arrives: nothing ran */
  EU_FAULT_AMBIGUOUS,     /* the call ran and committed; its answer is lost */
  EU_FAULT_CALLER_CRASH,  /* the caller crashes right after the answer */
  EU_FAULT_ALARM_FAIL,    /* an alarm throws before it commits: retried on the ladder */
  EU_FAULT_ALARM_LOST,    /* an alarm ran and committed; its completion is lost: it runs again */
  EU_FAULT_RESET,         /* the object is reset between invocations, or while one waits */
  EU_FAULT_RESEND,        /* the client resends a drive request whose answer it lost */
  EU_FAULT_DELIVERY_FAIL, /* a fanout target's callback fails */
  EU_FAULT_DELIVERY_TIMEOUT, /* a fanout target's callback times out */
  EU_FAULT_CRON_FAIL,     /* a cron invocation fails before its handler runs: retried on the ladder */
  EU_FAULT_CRON_LOST,     /* a cron invocation ran; its outcome is lost: it runs again */
  EU_FAULT_OVERLOADED,    /* an object too busy refuses a call: nothing ran, not to be retried */
  EU_FAULT_FETCH_TIMEOUT, /* a service outside applied a fetch; its answer never comes, the caller times out */
  EU_FAULT_HIBERNATE,     /* an idle object with WebSockets hibernates: in-memory state lost, sockets kept */
  EU_FAULT_WS_DROP,       /* a WebSocket client goes without a close frame (the object sees 1006) */
  EU_FAULT_WS_CLOSE,      /* a WebSocket client closes (1001, going away) instead of sending its next message */
  EU_FAULT_NKINDS
};

#define EU_FAULT_BIT(k) (1u << (k))
#define EU_FAULT_ALL (((1u << EU_FAULT_NKINDS) - 1) & ~1u)

/* "ambiguous", ... ; NULL for a kind out of range. */
const char *eu_fault_name(int kind);
/* The kind of a name, or 0. */
int eu_fault_parse(const char *name);

#endif
