/* cl_outcome.c — recording an outcome: profiling stamps read and mapped to the host clock (or the host-timed
 * fallback), kt_record_dispatch or an error, the verbose line; then the record's event released and slot freed. */
#include "backends/opencl/cl_outcome.h"
#include "core/internal.h"
#include "core/service.h"

#include <stdio.h>
#include <string.h>

static int prof(cl_event ev, cl_profiling_info what, uint64_t *out)
{
    cl_ulong v = 0;
    if (kt__cl.clGetEventProfilingInfo(ev, what, sizeof v, &v, NULL) != CL_SUCCESS)
        return 0;
    *out = (uint64_t)v;
    return 1;
}

static void map_stamp(kt__cl_dev_t *dev, uint64_t device_ns, uint64_t *host_ns, uint64_t *unc)
{
    uint64_t u = 0;
    if (kt__cl_dev_map(dev, device_ns, host_ns, &u) < 0)
        *host_ns = 0;
    else if (u > *unc)
        *unc = u;
}

/* A command's negative execution status, in words. It is no enqueue error: -1 is no CL_DEVICE_NOT_FOUND, only
 * "terminated abnormally" (the specification's words); a failed wait list has its own code; the resource codes
 * drivers use there keep their names. */
static void exec_status_name(cl_int status, char *out, size_t cap)
{
    if (status == CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
        snprintf(out, cap, "%s", kt_cl_error_name(status));
    else if (status == CL_OUT_OF_RESOURCES || status == CL_OUT_OF_HOST_MEMORY ||
             status == CL_MEM_OBJECT_ALLOCATION_FAILURE)
        snprintf(out, cap, "execution status %d (%s)", (int)status, kt_cl_error_name(status));
    else
        snprintf(out, cap, "execution status %d (terminated abnormally)", (int)status);
}

/* A failed command: its error recorded, and its verbose line. */
static void record_failure(const kt__cl_outcome_t *o, cl_int status)
{
    kt__cl_note_error(status);
    char what[64]; /* last_error keeps 47 characters: every status from -99 to -1 fits */
    exec_status_name(status, what, sizeof what);
    kt_record_error(o->kernel, what);
    char lab[128]; /* the device's label: two of one model are told apart */
    if (kt__verbose_on())
        kt__verbose_line("error", "opencl",
                         kt__device_label_now(KT_BACKEND_OPENCL, o->ctx->dev->key, o->ctx->dev->model, lab, sizeof lab),
                         o->name, "%d,%s", (int)status, what);
}

/* Host-timed: from the enqueue (or, on an in-order queue, the previous command's end) to when completion was
 * seen. */
static void host_timed(kt_cl_ctx_t *c, const kt__cl_outcome_t *o, uint64_t observed_ns, kt_dispatch_t *d)
{
    uint64_t start = o->enqueue_ns;
    if (!observed_ns)
        observed_ns = kt_now_ns();
    uint64_t end = observed_ns > start ? observed_ns : start;
    if (!c->out_of_order) { /* in order: it could not start before the previous command ended */
        uint64_t prev = atomic_load(&c->last_end_ns);
        if (prev > start && prev <= end)
            start = prev;
        while (prev < end && !atomic_compare_exchange_weak(&c->last_end_ns, &prev, end)) {
        }
    }
    d->flags = KT_SPAN_HOST_TIMED;
    d->start_ns = start;
    d->end_ns = end;
    d->duration_ns = end - start;
}

void kt__cl_outcome_record(const kt__cl_outcome_t *o, cl_int status, uint64_t observed_ns)
{
    kt_cl_ctx_t *c = o->ctx;
    if (status < 0) {
        record_failure(o, status);
        return;
    }
    kt_dispatch_t d;
    memset(&d, 0, sizeof d);
    d.kernel = o->kernel;
    d.queue = c->queue_id;
    d.thread = o->thread;
    d.enqueue_ns = o->enqueue_ns;
    d.bytes = o->bytes;
    if (o->launch && o->launch->kind)
        d.launch = *o->launch;
    uint64_t q = 0, s = 0, b = 0, e = o->end_stamp;
    int device = c->profiling && (e || prof(o->event, CL_PROFILING_COMMAND_END, &e)) &&
                 prof(o->event, CL_PROFILING_COMMAND_START, &b) && b != 0 && e >= b;
    int verbose = kt__verbose_on();
    if (device && (verbose || kt__span_room())) { /* only a span or a verbose line shows these two */
        prof(o->event, CL_PROFILING_COMMAND_QUEUED, &q);
        prof(o->event, CL_PROFILING_COMMAND_SUBMIT, &s);
    }
    if (device) {
        if (q > s)
            q = 0;
        if (s > b)
            s = 0;
        d.flags = KT_SPAN_DEVICE;
        d.duration_ns = e - b;
        map_stamp(c->dev, b, &d.start_ns, &d.uncertainty_ns);
        map_stamp(c->dev, e, &d.end_ns, &d.uncertainty_ns);
        if (!d.start_ns || !d.end_ns)
            d.start_ns = d.end_ns = 0;
        if (q)
            map_stamp(c->dev, q, &d.queued_ns, &d.uncertainty_ns);
        if (s)
            map_stamp(c->dev, s, &d.submit_ns, &d.uncertainty_ns);
    } else {
        host_timed(c, o, observed_ns, &d);
    }
    kt_record_dispatch(&d);
    char lab[128]; /* the device's label: two of one model are told apart */
    const char *dev = verbose ? kt__device_label_now(KT_BACKEND_OPENCL, c->dev->key, c->dev->model, lab, sizeof lab)
                              : NULL;
    if (verbose && device)
        kt__verbose_line("exec", "opencl", dev, o->name, "%.6f,%.6f,%.6f,device", (double)d.duration_ns / 1e6,
                         q && s ? (double)(s - q) / 1e6 : 0.0, s ? (double)(b - s) / 1e6 : 0.0);
    else if (verbose)
        kt__verbose_line("exec", "opencl", dev, o->name, "%.6f,,,host", (double)d.duration_ns / 1e6);
}

void kt__cl_rec_finish_stamped(kt__cl_rec_t *r, cl_int status, uint64_t observed_ns, int drop, uint64_t end_stamp)
{
    kt__cl_outcome_t o = {r->ctx, r->event, r->kernel, r->thread, r->enqueue_ns, kt__cl_rec_name(r),
                          *kt__cl_rec_bytes(r), end_stamp, kt__cl_rec_launch(r)};
    if (drop)
        kt_record_drop(o.kernel, (kt_drop_reason_t)(drop - 1));
    else
        kt__cl_outcome_record(&o, status, observed_ns);
    kt__inflight_end(o.kernel); /* begun in rec_take (cl_track.c) */
    kt__cl.clReleaseEvent(o.event);
    kt__cl_slot_free(r);
    atomic_fetch_add(&o.ctx->finished, 1); /* the context is touched last: detaching and freeing wait for this */
}

void kt__cl_rec_finish(kt__cl_rec_t *r, cl_int status, uint64_t observed_ns, int drop)
{
    kt__cl_rec_finish_stamped(r, status, observed_ns, drop, 0);
}
