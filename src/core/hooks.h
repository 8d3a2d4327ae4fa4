/* hooks.h — internal: how backends plug into the core's lifecycle (flush before snapshots, exit and shutdown). */
#ifndef KT_CORE_HOOKS_H
#define KT_CORE_HOOKS_H

/* A backend's flush: collect every outstanding completion into the recorder; must not deadlock when called
 * from an atexit handler, and must be bounded in time. */
typedef void (*kt__flush_cb)(void);

/* Register a flush (idempotent per function). Called by kt_flush(), kt_snapshot(), kt_shutdown() and at exit before
 * KTIMING_OUTPUT / KTIMING_REPORT / KTIMING_TRACE are written. Returns 0, KT_EINVAL (NULL) or KT_EFULL. */
int kt__register_flush(kt__flush_cb fn);

/* Run every registered flush (in registration order). */
void kt__flush_all(void);

#endif
