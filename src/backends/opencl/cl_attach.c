/* cl_attach.c — attaching a queue (its device, properties and mode), detaching it (wait, or hand its last commands
 * to the collector), kt_cl_prepare and kt_cl_stats. */
#include "backends/opencl/cl_collector.h"
#include "backends/opencl/cl_ctx.h"
#include "backends/opencl/cl_env.h"
#include "backends/opencl/cl_poll.h"
#include "backends/opencl/cl_service.h"
#include "core/internal.h"
#include "core/service.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int kt_cl_prepare(cl_device_id device)
{
    if (!device)
        return KT_EINVAL;
    int rc = kt__cl_env_load();
    if (rc < 0)
        return rc;
    rc = kt__cl_dev_prepare(device);
    if (rc < 0)
        return rc;
    kt__cl_arm(); /* registered, so exit stops (and joins) the collector even if nothing is ever attached */
    kt__cl_collector_wake(); /* one already asleep: the pending flag is read before it sleeps again */
    return 0;
}

/* A new context for the queue (not registered yet): its device calibrated once, its properties read. 0,
 * KT_EINVAL (the driver refused a query), KT_ENOTSUP (no profiling and the desc requires it) or KT_ENOMEM. */
static int ctx_make(cl_command_queue queue, const kt_cl_attach_desc_t *desc, kt_cl_ctx_t **out)
{
    cl_device_id device = NULL;
    cl_command_queue_properties props = 0;
    cl_int err = kt__cl.clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof device, &device, NULL);
    if (err == CL_SUCCESS)
        err = kt__cl.clGetCommandQueueInfo(queue, CL_QUEUE_PROPERTIES, sizeof props, &props, NULL);
    if (err != CL_SUCCESS) {
        kt__cl_note_error(err);
        return KT_EINVAL;
    }
    if (!(props & CL_QUEUE_PROFILING_ENABLE) && desc->require_profiling)
        return KT_ENOTSUP;
    kt_cl_ctx_t *c = calloc(1, sizeof *c);
    kt__cl_dev_t *dev = c ? kt__cl_dev_get(device) : NULL;
    if (!dev) {
        free(c);
        return KT_ENOMEM;
    }
    pthread_mutex_init(&c->fifo_lock, NULL);
    c->queue = queue;
    c->dev = dev;
    c->profiling = (props & CL_QUEUE_PROFILING_ENABLE) != 0;
    c->out_of_order = (props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE) != 0;
    c->mode = desc->mode != KT_CL_MODE_DEFAULT ? desc->mode
              : kt__cl_env.sync_default      ? KT_CL_MODE_SYNC
                                             : KT_CL_MODE_ASYNC;
    *out = c;
    return 0;
}

int kt_cl_attach(cl_command_queue queue, const kt_cl_attach_desc_t *desc, kt_cl_ctx_t **out)
{
    static const kt_cl_attach_desc_t kDefault;
    if (!out)
        return KT_EINVAL;
    *out = NULL;
    if (!queue)
        return KT_EINVAL;
    int rc = kt__cl_env_load();
    if (rc < 0)
        return rc;
    if (!desc)
        desc = &kDefault;
    kt__cl_arm();

    kt_cl_ctx_t *c = kt__cl_ctx_find(queue);
    if (c) {
        *out = c;
        return 0;
    }
    kt__cl_ctx_reap();
    /* Driver queries and the device's first calibration run without the registry's lock: other threads'
     * lookups, releases and flushes go on meanwhile. A racing attach of the same queue is resolved below. */
    rc = ctx_make(queue, desc, &c);
    if (rc < 0)
        return rc;
    kt__cl.clRetainCommandQueue(queue);
    kt_cl_ctx_t *other;
    rc = kt__cl_ctx_add(c, &other);
    if (other || rc < 0) {
        kt__cl.clReleaseCommandQueue(queue);
        pthread_mutex_destroy(&c->fifo_lock);
        free(c);
        *out = other;
        return rc;
    }
    char label[64];
    if (desc->label)
        snprintf(label, sizeof label, "%s", desc->label);
    else
        snprintf(label, sizeof label, "queue %p", (void *)queue);
    c->queue_id = kt_queue_register(KT_BACKEND_OPENCL, c->dev->key, label);
    *out = c;
    return 0;
}

/* kt_cl_detach's last pass (kt__drain's step): what is still unfinished when the bounded wait ran out is dropped,
 * counted as in flight at exit (the queue's exit from timing: it was "unspecified"); records other threads hold
 * are waited for. */
static uint64_t drop_pass(void *arg)
{
    kt_cl_ctx_t *ctx = arg;
    if (kt__cl_ctx_in_flight(ctx) != 0)
        kt__cl_collect_pass(ctx, 1 + KT_DROP_IN_FLIGHT_AT_EXIT);
    return kt__cl_ctx_in_flight(ctx);
}

int kt_cl_detach(kt_cl_ctx_t *ctx)
{
    if (!ctx)
        return KT_EINVAL;
    atomic_store(&ctx->detaching, 1);
    void *one = ctx;
    int rc = kt__cl_flush_ctxs(&one, 1, ctx, kt__cl_deadline_after(0));
    static const kt__drain_policy_t kWaitHeld = {0, 100000, 1000000}; /* naps of 0.1 ms, growing to 1 ms */
    kt__drain_with(UINT64_MAX, drop_pass, ctx, &kWaitHeld, NULL);
    kt__cl_ctx_retire(ctx);
    kt__cl_ctx_reap();
    return rc;
}

int kt_cl_detach_async(kt_cl_ctx_t *ctx)
{
    if (!ctx)
        return KT_EINVAL;
    atomic_store(&ctx->detaching, 1);
    /* decided and flushed before retiring: once retired and done, the collector may free it at any moment */
    int busy = kt__cl_ctx_in_flight(ctx) != 0;
    if (busy)
        kt__cl.clFlush(ctx->queue); /* a command never submitted would never complete */
    kt__cl_ctx_retire(ctx);
    if (busy) {
        kt__cl_collector_kick(); /* it frees the context once its last command is recorded */
        return 0;
    }
    kt__cl_ctx_reap();
    return 0;
}

int kt_cl_stats(const kt_cl_ctx_t *ctx, kt_cl_stats_t *info)
{
    if (!ctx || !info)
        return KT_EINVAL;
    memset(info, 0, sizeof *info);
    info->queue = ctx->queue;
    info->device = ctx->dev->id;
    snprintf(info->device_name, sizeof info->device_name, "%s", ctx->dev->model);
    info->queue_id = ctx->queue_id;
    info->profiling = ctx->profiling;
    info->out_of_order = ctx->out_of_order;
    info->mode = ctx->mode;
    info->in_flight = kt__cl_ctx_in_flight(ctx);
    info->tracked = atomic_load(&((kt_cl_ctx_t *)ctx)->tracked);
    return 0;
}
