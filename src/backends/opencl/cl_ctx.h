/* cl_ctx.h — internal: an attached queue (kt_cl_ctx_t) and the registry of attached and retired ones (the service
 * layer's context set, with a hash from queue to context for the shim's lookups). */
#ifndef KT_CL_CTX_H
#define KT_CL_CTX_H

#include "backends/opencl/cl_internal.h"
#include "core/service.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct kt_cl_ctx_t {
    cl_command_queue queue;       /* retained while attached */
    kt__cl_dev_t *dev;            /* its device (clock model) */
    uint32_t queue_id;            /* kt_queue_register() id */
    int profiling;                /* CL_QUEUE_PROFILING_ENABLE set */
    int out_of_order;             /* CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE set */
    kt_cl_mode_t mode;            /* ASYNC or SYNC */
    _Atomic int detaching;        /* set by kt_cl_detach / kt_cl_detach_async: new tracks are refused */
    unsigned fork_gen;            /* kt__cl_fork_gen when attached: a forked child leaves its parent's alone */
    struct kt_cl_ctx_t *hnext;    /* chain in the registry's hash while attached */
    /* In flight = tracked - finished. Two counters on their own cache lines, each written by one side (the
     * enqueuing threads, the completion paths), so tracking does not bounce a line between cores. */
    _Alignas(64) _Atomic uint64_t tracked; /* commands handed to kt_cl_track* since attach */
    _Alignas(64) _Atomic uint64_t finished; /* of those: recorded, dropped or refused */
    _Alignas(64) _Atomic uint64_t last_end_ns; /* host-timed fallback, in-order queues: latest command's end */
    /* Its polled records in the order they were tracked (slot + 1, 0 = none): a poll looks at a queue's oldest
     * first and, on an in-order queue, stops at the first one still running, so what a poll costs is what
     * finished since the last one, not what is pending (other queues' included). Appended under fifo_lock by
     * the enqueuing threads; unlinked only by the poller holding the poll lock (and fifo_lock to unlink). */
    pthread_mutex_t fifo_lock;
    _Atomic uint32_t fifo_head;
    uint32_t fifo_tail; /* under fifo_lock */
    /* When a synchronisation point's pass last covered its FIFO (kt_now_ns; 0: never): looked at every record
     * that could have finished. While the program synchronises, the collector polls only the queues no such pass
     * covered lately (cl_collector.c). Written under the poll lock, read by the collector. */
    _Atomic uint64_t synced_ns;
};

/* Forks seen by this process (bumped in a forked child): a context attached in another generation is the
 * parent's, whose driver state the child must not touch (neither waited for nor counted there). */
extern unsigned kt__cl_fork_gen; /* written only in a forked child's fork handler (one thread then) */
/* The context was attached in this process (not inherited across fork). */
static inline int kt__cl_ctx_mine(const kt_cl_ctx_t *c)
{
    return c->fork_gen == kt__cl_fork_gen;
}

/* Commands of the context tracked and not finished yet. */
uint64_t kt__cl_ctx_in_flight(const kt_cl_ctx_t *c);
/* The attached context of a queue, or NULL. */
kt_cl_ctx_t *kt__cl_ctx_find(cl_command_queue queue);
/* Adds an attached context unless the queue has one already (*other gets it; 0). 0 or KT_ENOMEM. */
int kt__cl_ctx_add(kt_cl_ctx_t *c, kt_cl_ctx_t **other);
/* Takes an attached context off the registry onto the retired list (nothing when it is not attached). */
void kt__cl_ctx_retire(kt_cl_ctx_t *c);
/* Every attached context marked detaching and retired (kt_cl_shutdown). */
void kt__cl_ctx_retire_all(void);
/* Detached contexts not yet freed. */
size_t kt__cl_ctx_retired_count(void);
/* Every context of this process (attached and retired; a forked child's inherited ones left out) pinned into *pin:
 * none is freed until kt__cl_ctx_unpin. pin->n is 0 when there is none (or no memory). */
void kt__cl_ctx_pin(kt__ctx_pin_t *pin);
/* Releases the pin and frees the retired contexts that are done. */
void kt__cl_ctx_unpin(kt__ctx_pin_t *pin);
/* Frees the detached contexts whose last record is finished, unless a flush holds a pin. */
void kt__cl_ctx_reap(void);
/* fork: the hash's lock taken (prepare) or released (parent, child); the set's lock and every context's FIFO lock
 * are taken by the service (KT__CTX_SET_INIT_FORK). */
void kt__cl_ctx_fork_lock(void);
void kt__cl_ctx_fork_unlock(void);

#endif
