/* cl_order.h — internal: claimed polled records collected in a batch and finished in enqueue order. */
#ifndef KT_CL_ORDER_H
#define KT_CL_ORDER_H

#include "backends/opencl/cl_rec.h"

/* A finished record with its sort key beside it: sorting touches this array only, not a cache line per record. */
typedef struct kt__cl_done_t {
    uint64_t enqueue_ns; /* the record's */
    kt__cl_rec_t *r;
    uint64_t end_stamp;  /* its command's device end stamp, when the poll read it (else 0) */
} kt__cl_done_t;

/* Claimed polled records waiting to be finished together, oldest enqueue first (so an entry's last duration is
 * its newest command's): on the stack up to 256, then on the heap. Each record's status waits in cb_status. */
typedef struct kt__cl_batch_t {
    kt__cl_done_t *v;       /* stack or heap */
    unsigned n, cap;        /* held / room */
    kt__cl_done_t stack[256];
} kt__cl_batch_t;

void kt__cl_batch_init(kt__cl_batch_t *b);
/* Adds a CLAIMED record with its status (and end stamp, or 0). */
void kt__cl_batch_push(kt__cl_batch_t *b, kt__cl_rec_t *r, cl_int status, uint64_t end_stamp);
/* Finishes every record held, in enqueue order, and frees what the batch allocated. */
void kt__cl_batch_done(kt__cl_batch_t *b);

#endif
