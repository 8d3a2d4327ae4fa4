/* cl_poll.h — internal: polling tracked commands (each queue's FIFO of polled records, the slot scan for callback
 * records) at synchronisation points, flushes, detach and exit. */
#ifndef KT_CL_POLL_H
#define KT_CL_POLL_H

#include "backends/opencl/cl_ctx.h"
#include "backends/opencl/cl_rec.h"

/* Appends a record just published as POLLED to its queue's FIFO. */
void kt__cl_fifo_append(kt_cl_ctx_t *c, kt__cl_rec_t *r);
/* Polled records exist (seq_cst: with the tracker's increment before its load of the collector's sleep flag,
 * either the collector sees the record or the tracker sees the collector asleep and wakes it). */
int kt__cl_any_polled(void);
/* One pass over every record: complete those of `only` (NULL: any queue) that finished or failed; with
 * `abandon` (1 + a kt_drop_reason_t), count the unfinished ones as dropped for that reason. */
void kt__cl_collect_pass(kt_cl_ctx_t *only, int abandon);
/* Collect for the given contexts (kt_cl_ctx_t pointers, as a pin holds them) until none is in flight or the deadline (kt_now_ns time) passes; 0 or
 * KT_ETIMEDOUT. */
int kt__cl_flush_ctxs(void *const *ctxs, size_t n, kt_cl_ctx_t *only, uint64_t deadline);
/* Every queue, until the deadline; no lock is held while waiting. */
int kt__cl_flush_all(uint64_t deadline);
/* Now plus timeout_ns, or plus KTIMING_OPENCL_TIMEOUT_MS when 0. */
uint64_t kt__cl_deadline_after(uint64_t timeout_ns);
/* A synchronisation point (kt_cl_collect): the finished prefix of ctx's FIFO (NULL: of every queue), of the
 * commands enqueued before enqueued_before_ns (0: now), recorded in order. */
void kt__cl_poll_sync_point(kt_cl_ctx_t *ctx, uint64_t enqueued_before_ns);
/* Synchronisation points so far (the collector looks less often while the program polls). */
uint64_t kt__cl_poll_sync_points(void);
/* The collector's pass: every finished polled record (an out-of-order queue's in any order) of the queues no
 * synchronisation point covered since stale_before (UINT64_MAX: every queue); returns how many, *running how many
 * of those queues' commands are still in flight. */
unsigned kt__cl_poll_done(uint64_t stale_before, unsigned *running);
/* fork: the poll lock taken (prepare; first: a FIFO poller takes the registry's lock only before it) or
 * released. */
void kt__cl_poll_fork_lock(void);
void kt__cl_poll_fork_unlock(void);

#endif
