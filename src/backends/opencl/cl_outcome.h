/* cl_outcome.h — internal: a finished command turned into a dispatch (or an error) and its record finished. */
#ifndef KT_CL_OUTCOME_H
#define KT_CL_OUTCOME_H

#include "backends/opencl/cl_ctx.h"
#include "backends/opencl/cl_rec.h"

/* What a record needs to be recorded, whether it lives in a slot (async) or on the stack (sync). */
typedef struct kt__cl_outcome_t {
    kt_cl_ctx_t *ctx;      /* its queue */
    cl_event event;        /* its event (valid during the call) */
    kt_kernel_id_t kernel; /* interned name */
    uint32_t thread;       /* enqueuing thread ordinal */
    uint64_t enqueue_ns;   /* host time of the enqueue */
    const char *name;      /* kernel name for verbose lines (may be empty) */
    uint64_t bytes;        /* bytes the command moves (transfers), 0 for kernels */
    uint64_t end_stamp;    /* the command's device end stamp when the poll that found it done read it, else 0 */
    const kt_launch_t *launch; /* its launch configuration (NULL or kind 0: none) */
} kt__cl_outcome_t;

/* Records one finished command (callback thread, flush thread, or the enqueuing thread in SYNC mode): its
 * dispatch with device stamps or host-timed, or its negative execution status as an error; the verbose line.
 * observed_ns: host time the completion was seen (0: now), used only by the host-timed fallback. */
void kt__cl_outcome_record(const kt__cl_outcome_t *o, cl_int status, uint64_t observed_ns);
/* The owner (CLAIMED) finishes a record: record it (or count it dropped: drop is 1 + a kt_drop_reason_t),
 * release the event, free the slot, count it finished. end_stamp: the device end stamp a poll read, else 0. */
void kt__cl_rec_finish_stamped(kt__cl_rec_t *r, cl_int status, uint64_t observed_ns, int drop, uint64_t end_stamp);
void kt__cl_rec_finish(kt__cl_rec_t *r, cl_int status, uint64_t observed_ns, int drop);

#endif
