/* primitive.c — runs multi-kernel primitives with trials on any backend's ops; includes the CPU backend. */
#include <ktiming.h>
#include <ktiming/primitive.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A primitive: its kernels and where they run. */
struct kt_primitive_t {
    char *name;                                        /* primitive name */
    uint32_t kernel_count;                             /* kernels */
    kt_primitive_kernel_t kernels[KT_PRIMITIVE_MAX_KERNELS]; /* names are owned copies */
    kt_kernel_id_t kernel_ids[KT_PRIMITIVE_MAX_KERNELS];     /* "<primitive>/<kernel>" on the backend's device */
    kt_kernel_id_t self_id;                            /* "<primitive>" */
    kt_primitive_backend_t backend;                    /* not owned */
};

/* ---------------------------------------------------------------------------------------------------
 * Lifecycle
 * ------------------------------------------------------------------------------------------------- */

void kt_primitive_destroy(kt_primitive_t *prim)
{
    if (!prim)
        return;
    for (uint32_t i = 0; i < prim->kernel_count; i++)
        free((char *)prim->kernels[i].name);
    free(prim->name);
    free(prim);
}

int kt_primitive_create(const kt_primitive_desc_t *desc, kt_primitive_t **out)
{
    if (!out)
        return KT_EINVAL;
    *out = NULL;
    if (!desc || !desc->name || !desc->kernels || desc->kernel_count == 0 ||
        desc->kernel_count > KT_PRIMITIVE_MAX_KERNELS || !desc->backend.ops)
        return KT_EINVAL;
    const kt_primitive_ops_t *ops = desc->backend.ops;
    if (!ops->open || !ops->mark || !ops->close || !ops->drain || !ops->submit || !ops->wait || !ops->read ||
        !ops->device_name)
        return KT_EINVAL;
    for (uint32_t i = 0; i < desc->kernel_count; i++)
        if (!desc->kernels[i].name || !desc->kernels[i].fn)
            return KT_EINVAL;
    kt_primitive_t *p = calloc(1, sizeof(*p));
    if (!p)
        return KT_ENOMEM;
    p->backend = desc->backend;
    p->name = strdup(desc->name);
    if (!p->name)
        goto nomem;
    const char *device = ops->device_name(desc->backend.ctx);
    for (uint32_t i = 0; i < desc->kernel_count; i++) {
        p->kernels[i] = desc->kernels[i];
        p->kernels[i].name = strdup(desc->kernels[i].name);
        if (!p->kernels[i].name)
            goto nomem;
        p->kernel_count = i + 1;
        size_t len = strlen(p->name) + strlen(p->kernels[i].name) + 2;
        char *full = malloc(len);
        if (!full)
            goto nomem;
        snprintf(full, len, "%s/%s", p->name, p->kernels[i].name);
        p->kernel_ids[i] = kt_kernel_intern(full, ops->backend, device);
        free(full);
    }
    p->self_id = kt_kernel_intern(p->name, ops->backend, device);
    *out = p;
    return 0;
nomem:
    kt_primitive_destroy(p);
    return KT_ENOMEM;
}

void kt_primitive_backend_destroy(kt_primitive_backend_t *be)
{
    if (!be)
        return;
    if (be->ops && be->ops->destroy)
        be->ops->destroy(be->ctx);
    be->ops = NULL;
    be->ctx = NULL;
}

/* ---------------------------------------------------------------------------------------------------
 * Execution
 * ------------------------------------------------------------------------------------------------- */

static void record_result(const kt_primitive_t *p, const kt_primitive_result_t *r, const uint64_t *host,
                          const uint64_t *unc, int gpu)
{
    int device_clock = p->backend.ops->backend != KT_BACKEND_CPU;
    if (gpu) {
        for (uint32_t k = 0; k < p->kernel_count; k++) {
            kt_dispatch_t d = {0};
            d.kernel = p->kernel_ids[k];
            d.flags = KT_SPAN_TRIALS | (device_clock ? KT_SPAN_DEVICE : 0);
            d.duration_ns = r->gpu_ns[k];
            d.enqueue_ns = r->start_ns;
            if (host[2 * k] && host[2 * k + 1] >= host[2 * k]) {
                d.start_ns = host[2 * k];
                d.end_ns = host[2 * k + 1];
                d.uncertainty_ns = unc[2 * k] > unc[2 * k + 1] ? unc[2 * k] : unc[2 * k + 1];
            }
            kt_record_dispatch(&d);
        }
    }
    if (r->cpu_total_ns) {
        kt_dispatch_t d = {0};
        d.kernel = p->self_id;
        d.flags = KT_SPAN_TRIALS | KT_SPAN_HOST_TIMED;
        d.duration_ns = r->cpu_ns;
        d.enqueue_ns = r->start_ns;
        d.start_ns = r->start_ns;
        d.end_ns = r->end_ns;
        kt_record_dispatch(&d);
    }
}

int kt_primitive_execute(kt_primitive_t *prim, const kt_primitive_run_t *run, kt_primitive_result_t *out)
{
    if (!prim || !out)
        return KT_EINVAL;
    kt_primitive_run_t opts = run ? *run : (kt_primitive_run_t){0};
    uint32_t trials = opts.trials ? opts.trials : 1;
    int gpu = !opts.no_gpu_timing, cpu = !opts.no_cpu_timing;
    const kt_primitive_ops_t *ops = prim->backend.ops;
    void *be = prim->backend.ctx;
    int submits_early = (ops->flags & KT_PRIMITIVE_OPS_RECORDING_SUBMITS) != 0;
    uint32_t marks = gpu ? 2 * prim->kernel_count : 0;

    memset(out, 0, sizeof(*out));
    out->kernel_count = prim->kernel_count;
    out->trials = trials;

    int rc = 0;
    uint64_t t0 = 0, t1 = 0;
    if (cpu && submits_early) {
        if ((rc = ops->drain(be)) != 0)
            return rc;
        t0 = kt_now_ns();
    }
    void *enc = NULL;
    if ((rc = ops->open(be, marks, &enc)) != 0)
        return rc;
    for (uint32_t k = 0; k < prim->kernel_count && rc == 0; k++) {
        if (gpu && (rc = ops->mark(be, enc, 2 * k)) != 0)
            break;
        for (uint32_t t = 0; t < trials && rc == 0; t++)
            rc = prim->kernels[k].fn(enc, t, prim->kernels[k].user);
        if (rc == 0 && gpu)
            rc = ops->mark(be, enc, 2 * k + 1);
    }
    int rc_close = ops->close(be, enc);
    if (rc)
        return rc < 0 ? rc : KT_EBACKEND;
    if (rc_close)
        return rc_close;
    if (!submits_early) {
        if (cpu) {
            if ((rc = ops->drain(be)) != 0)
                return rc;
            t0 = kt_now_ns();
        }
        if ((rc = ops->submit(be, enc)) != 0)
            return rc;
    }
    if ((rc = ops->wait(be, enc)) != 0)
        return rc;
    if (cpu) {
        t1 = kt_now_ns();
        out->start_ns = t0;
        out->end_ns = t1;
        out->cpu_total_ns = t1 - t0;
        out->cpu_ns = out->cpu_total_ns / trials;
    }
    uint64_t dev[2 * KT_PRIMITIVE_MAX_KERNELS] = {0}, host[2 * KT_PRIMITIVE_MAX_KERNELS] = {0},
             unc[2 * KT_PRIMITIVE_MAX_KERNELS] = {0};
    if (gpu) {
        if ((rc = ops->read(be, enc, marks, dev, host, unc)) != 0)
            return rc;
        for (uint32_t k = 0; k < prim->kernel_count; k++) {
            uint64_t a = dev[2 * k], b = dev[2 * k + 1];
            out->gpu_total_ns[k] = b > a ? b - a : 0;
            out->gpu_ns[k] = out->gpu_total_ns[k] / trials;
        }
    }
    if (!opts.no_record && kt_is_enabled())
        record_result(prim, out, host, unc, gpu);
    return 0;
}

/* ---------------------------------------------------------------------------------------------------
 * CPU backend: kernels run inside their callbacks; marks are host clock reads
 * ------------------------------------------------------------------------------------------------- */

/* Marks of the current CPU batch (the backend is used by one thread at a time, as every backend). */
typedef struct kt__cpu_prim_t {
    uint64_t marks[2 * KT_PRIMITIVE_MAX_KERNELS]; /* host ns */
} kt__cpu_prim_t;

static const char *cpu_device_name(void *be)
{
    (void)be;
    return "host";
}

static int cpu_open(void *be, uint32_t marks, void **encoder)
{
    (void)be;
    *encoder = NULL;
    return marks <= 2 * KT_PRIMITIVE_MAX_KERNELS ? 0 : KT_EINVAL;
}

static int cpu_mark(void *be, void *encoder, uint32_t index)
{
    (void)encoder;
    if (index >= 2 * KT_PRIMITIVE_MAX_KERNELS)
        return KT_EINVAL;
    ((kt__cpu_prim_t *)be)->marks[index] = kt_now_ns();
    return 0;
}

static int cpu_nothing(void *be, void *encoder)
{
    (void)be;
    (void)encoder;
    return 0;
}

static int cpu_drain(void *be)
{
    (void)be;
    return 0;
}

static int cpu_read(void *be, void *encoder, uint32_t count, uint64_t *device_ns, uint64_t *host_ns,
                    uint64_t *uncertainty_ns)
{
    (void)encoder;
    const kt__cpu_prim_t *c = be;
    for (uint32_t i = 0; i < count; i++) {
        device_ns[i] = c->marks[i];
        host_ns[i] = c->marks[i];
        uncertainty_ns[i] = 0;
    }
    return 0;
}

static void cpu_destroy(void *be)
{
    free(be);
}

static const kt_primitive_ops_t g_cpu_ops = {
    .backend = KT_BACKEND_CPU,
    .flags = KT_PRIMITIVE_OPS_RECORDING_SUBMITS,
    .device_name = cpu_device_name,
    .open = cpu_open,
    .mark = cpu_mark,
    .close = cpu_nothing,
    .drain = cpu_drain,
    .submit = cpu_nothing,
    .wait = cpu_nothing,
    .read = cpu_read,
    .destroy = cpu_destroy,
};

int kt_cpu_primitive_backend(kt_primitive_backend_t *out)
{
    if (!out)
        return KT_EINVAL;
    out->ops = NULL;
    out->ctx = calloc(1, sizeof(kt__cpu_prim_t));
    if (!out->ctx)
        return KT_ENOMEM;
    out->ops = &g_cpu_ops;
    return 0;
}
