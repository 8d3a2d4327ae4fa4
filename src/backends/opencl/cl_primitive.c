/* cl_primitive.c — the OpenCL primitive backend (ktiming/primitive.h): kernels are enqueued as they are recorded,
 * marks are markers whose END stamps are read after clFinish and placed through the device's clock model.
 * On an in-order queue (OpenCL 1.2+) the batch is held behind a user event until it is closed, as the CUDA
 * primitive holds its stream: the device then runs the trials back to back, and the marks' distance (gpu_ns)
 * holds no gap of the host enqueueing the next trial (+28 % at load ~15 without it). */
#include "backends/opencl/cl_internal.h"
#include "primitive/prim_ops.h"

#include <ktiming/primitive.h>

#include <stdlib.h>
#include <string.h>

/* State of one OpenCL primitive backend. */
typedef struct kt__cl_prim_t {
    cl_command_queue queue;                             /* retained until destroy */
    kt__cl_dev_t *dev;                                  /* device and clock model */
    cl_event marks[2 * KT_PRIMITIVE_MAX_KERNELS];       /* marker events of the current batch */
    uint32_t count;                                     /* marks in use */
    cl_context context;                                 /* the queue's, for the gate (NULL: no gate) */
    cl_event gate;                                      /* user event holding the open batch, or NULL */
} kt__cl_prim_t;

/* Let the held batch run (close, or any way out of a batch). */
static void gate_open(kt__cl_prim_t *p)
{
    if (!p->gate)
        return;
    kt__cl.clSetUserEventStatus(p->gate, CL_COMPLETE);
    kt__cl.clReleaseEvent(p->gate);
    p->gate = NULL;
}

static void release_marks(kt__cl_prim_t *p)
{
    for (uint32_t i = 0; i < 2 * KT_PRIMITIVE_MAX_KERNELS; i++)
        if (p->marks[i]) {
            kt__cl.clReleaseEvent(p->marks[i]);
            p->marks[i] = NULL;
        }
    p->count = 0;
}

static const char *prim_device_name(void *be)
{
    return ((kt__cl_prim_t *)be)->dev->key;
}

static int prim_open(void *be, uint32_t marks, void **encoder)
{
    kt__cl_prim_t *p = be;
    if (marks > 2 * KT_PRIMITIVE_MAX_KERNELS)
        return KT_EINVAL;
    release_marks(p);
    gate_open(p);
    p->count = marks;
    *encoder = (void *)p->queue;
    if (p->context) { /* hold the batch: a marker waiting on a user event blocks what follows on an in-order queue */
        cl_int err = CL_SUCCESS;
        p->gate = kt__cl.clCreateUserEvent(p->context, &err);
        if (err != CL_SUCCESS)
            p->gate = NULL;
        else if (kt__cl.clEnqueueMarkerWithWaitList(p->queue, 1, &p->gate, NULL) != CL_SUCCESS)
            gate_open(p); /* not held: timed as before */
    }
    return 0;
}

static int prim_mark(void *be, void *encoder, uint32_t index)
{
    kt__cl_prim_t *p = be;
    if (index >= p->count)
        return KT_EINVAL;
    /* A marker completes once every command enqueued before it has (in-order and out-of-order queues). */
    /* clEnqueueMarkerWithWaitList only from 1.2 on: a 1.1 driver's dispatch slot for it may be NULL even when the
     * loader exports the name. */
    int v12 = p->dev->version_major > 1 || p->dev->version_minor >= 2;
    cl_int rc;
    if (v12 && kt__cl.clEnqueueMarkerWithWaitList)
        rc = kt__cl.clEnqueueMarkerWithWaitList((cl_command_queue)encoder, 0, NULL, &p->marks[index]);
    else if (kt__cl.clEnqueueMarker)
        rc = kt__cl.clEnqueueMarker((cl_command_queue)encoder, &p->marks[index]);
    else
        return KT_ENOTSUP;
    return rc == CL_SUCCESS ? 0 : KT_EBACKEND;
}

static int prim_close(void *be, void *encoder)
{
    gate_open(be);
    return kt__cl.clFlush((cl_command_queue)encoder) == CL_SUCCESS ? 0 : KT_EBACKEND;
}

static int prim_drain(void *be)
{
    return kt__cl.clFinish(((kt__cl_prim_t *)be)->queue) == CL_SUCCESS ? 0 : KT_EBACKEND;
}

static int prim_submit(void *be, void *encoder)
{
    (void)be;
    (void)encoder;
    return 0; /* recording enqueued everything */
}

static int prim_wait(void *be, void *encoder)
{
    (void)be;
    return kt__cl.clFinish((cl_command_queue)encoder) == CL_SUCCESS ? 0 : KT_EBACKEND;
}

static int prim_read(void *be, void *encoder, uint32_t count, uint64_t *device_ns, uint64_t *host_ns,
                     uint64_t *uncertainty_ns)
{
    kt__cl_prim_t *p = be;
    (void)encoder;
    if (count > p->count)
        return KT_EINVAL;
    for (uint32_t i = 0; i < count; i++) {
        cl_ulong end = 0;
        if (!p->marks[i] || kt__cl.clGetEventProfilingInfo(p->marks[i], CL_PROFILING_COMMAND_END, sizeof(end), &end,
                                                           NULL) != CL_SUCCESS)
            return KT_EBACKEND;
        device_ns[i] = (uint64_t)end;
        host_ns[i] = 0;
        uncertainty_ns[i] = 0;
        kt__cl_dev_map(p->dev, device_ns[i], &host_ns[i], &uncertainty_ns[i]);
    }
    release_marks(p);
    return 0;
}

static void prim_destroy(void *be)
{
    kt__cl_prim_t *p = be;
    if (!p)
        return;
    release_marks(p);
    gate_open(p);
    kt__cl.clReleaseCommandQueue(p->queue);
    free(p);
}

static const kt_primitive_ops_t g_cl_prim_ops = KT__PRIM_OPS(KT_BACKEND_OPENCL, KT_PRIMITIVE_OPS_RECORDING_SUBMITS);

int kt_cl_primitive_backend_create(cl_command_queue queue, kt_primitive_backend_t *out)
{
    if (!out)
        return KT_EINVAL;
    out->ops = NULL;
    out->ctx = NULL;
    int rc = kt_cl_load(NULL);
    if (rc)
        return rc;
    if (!queue)
        return KT_EINVAL;
    if (!kt__cl.clEnqueueMarkerWithWaitList && !kt__cl.clEnqueueMarker)
        return KT_ENOTSUP;
    cl_command_queue_properties props = 0;
    cl_device_id device = NULL;
    if (kt__cl.clGetCommandQueueInfo(queue, CL_QUEUE_PROPERTIES, sizeof(props), &props, NULL) != CL_SUCCESS ||
        kt__cl.clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof(device), &device, NULL) != CL_SUCCESS)
        return KT_EINVAL;
    if (!(props & CL_QUEUE_PROFILING_ENABLE))
        return KT_ENOTSUP; /* marks are profiling stamps */
    kt__cl_prim_t *p = calloc(1, sizeof(*p));
    if (!p)
        return KT_ENOMEM;
    p->dev = kt__cl_dev_get(device);
    if (!p->dev) {
        free(p);
        return KT_ENOMEM;
    }
    kt__cl.clRetainCommandQueue(queue);
    p->queue = queue;
    int can_hold = (p->dev->version_major > 1 || p->dev->version_minor >= 2) &&
                   !(props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE) && kt__cl.clCreateUserEvent &&
                   kt__cl.clSetUserEventStatus && kt__cl.clEnqueueMarkerWithWaitList;
    if (!can_hold ||
        kt__cl.clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof(p->context), &p->context, NULL) != CL_SUCCESS)
        p->context = NULL;
    out->ops = &g_cl_prim_ops;
    out->ctx = p;
    return 0;
}
