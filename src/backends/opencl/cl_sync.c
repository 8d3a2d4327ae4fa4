/* cl_sync.c — the program's synchronisation points (kt_cl_collect: what finished since the last one, in order)
 * and explicit flushes (kt_cl_flush: wait, bounded). */
#include "backends/opencl/cl_poll.h"
#include "backends/opencl/cl_ring.h"
#include "backends/opencl/cl_service.h"
#include "core/service.h"

int kt_cl_collect(kt_cl_ctx_t *ctx, uint64_t enqueued_before_ns)
{
    if (kt_cl_load(NULL) < 0)
        return ctx ? KT_EUNAVAILABLE : 0;
    if (kt__cl_stopped() || (ctx && kt__cl_ctx_in_flight(ctx) == 0)) /* a forked child: its own queues only */
        return 0;
    kt__cl_ring_drain(UINT32_MAX, 0); /* callbacks' completions, unless another thread is draining them */
    /* after a pass the collector may be making (a short wait: it looks less often while programs collect), so
     * that the commands within the bound that had finished before the call are recorded when it returns, in order */
    kt__cl_poll_sync_point(ctx, enqueued_before_ns);
    return 0;
}

int kt_cl_flush(kt_cl_ctx_t *ctx, uint64_t timeout_ns)
{
    if (kt_cl_load(NULL) < 0)
        return ctx ? KT_EUNAVAILABLE : 0;
    void *one = ctx;
    if (ctx)
        return kt__cl_flush_ctxs(&one, 1, ctx, kt__cl_deadline_after(timeout_ns));
    return kt__cl_flush_all(kt__cl_deadline_after(timeout_ns));
}
