/* snapshot_fixture.h — hand-built snapshots for the exporter, loader and CLI tests (memory contract of ktiming.h), and
 * the file helpers of tests/support. Header-only; include from tests as "support/snapshot_fixture.h". */
#ifndef KT_TESTS_SNAPSHOT_FIXTURE_H
#define KT_TESTS_SNAPSHOT_FIXTURE_H

#include "support/files.h"
#include <ktiming.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static inline char *fx_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* An empty snapshot with room for `count` entries. */
static inline kt_snapshot_t *fx_snapshot_new(size_t count)
{
    kt_snapshot_t *s = calloc(1, sizeof *s);
    if (count)
        s->entries = calloc(count, sizeof *s->entries);
    s->count = count;
    snprintf(s->host, sizeof s->host, "testhost");
    s->taken_ns = 123456789;
    return s;
}

/* Fills entry i: n dispatches of the given min/max and average; percentiles spread between them. */
static inline kt_kernel_timing_t *fx_entry(kt_snapshot_t *s, size_t i, const char *name, kt_backend_t backend,
                                           const char *device, uint64_t n, uint64_t avg_ns, uint64_t min_ns,
                                           uint64_t max_ns)
{
    kt_kernel_timing_t *e = &s->entries[i];
    e->name = fx_strdup(name);
    e->backend = backend;
    e->device = fx_strdup(device ? device : "host");
    e->dispatch_count = n;
    e->total_ns = avg_ns * n;
    e->min_ns = min_ns;
    e->max_ns = max_ns;
    e->last_ns = max_ns;
    e->mean_ns = (double)avg_ns;
    e->stddev_ns = n > 1 ? (double)(max_ns - min_ns) / 3.0 : 0.0;
    e->p50_ns = avg_ns;
    e->p90_ns = (avg_ns + max_ns) / 2;
    e->p99_ns = max_ns;
    return e;
}

/* Gives entry i `k` samples v0, v0+step, ... */
static inline void fx_samples(kt_snapshot_t *s, size_t i, uint32_t k, uint64_t v0, uint64_t step)
{
    kt_kernel_timing_t *e = &s->entries[i];
    free(e->samples);
    e->samples = k ? malloc(k * sizeof *e->samples) : NULL;
    for (uint32_t j = 0; j < k; j++)
        e->samples[j] = v0 + j * step;
    e->sample_count = k;
}

/* A snapshot using every part of kt_snapshot_t: 3 entries (CPU, OpenCL, Vulkan), spans on a host track and
 * on device queues, 2 threads, 2 queues, 2 devices. */
static inline kt_snapshot_t *fx_snapshot_full(void)
{
    kt_snapshot_t *s = fx_snapshot_new(3);
    fx_entry(s, 0, "blur", KT_BACKEND_CPU, "host", 3, 12340000, 11980000, 14020000);
    fx_samples(s, 0, 3, 11980000, 1020000);
    fx_entry(s, 1, "saxpy", KT_BACKEND_OPENCL, "pthread-cpu", 20, 870000, 820000, 1050000);
    fx_samples(s, 1, 20, 820000, 11000);
    s->entries[1].errors = 2;
    s->entries[1].dropped = 1;
    fx_entry(s, 2, "vignette", KT_BACKEND_VULKAN, "llvmpipe (LLVM 15.0.6, 256 bits)", 1, 120000, 120000, 120000);
    s->span_count = 4;
    s->spans = calloc(4, sizeof *s->spans);
    for (uint32_t k = 0; k < 4; k++) {
        kt_span_t *sp = &s->spans[k];
        sp->entry = k % 3;
        sp->queue = k == 0 ? UINT32_MAX : (k % 2);
        sp->thread = k % 2;
        sp->flags = k == 0 ? 0 : KT_SPAN_DEVICE;
        sp->start_ns = 1000000 + k * 500000;
        sp->duration_ns = 100000 + k;
        sp->end_ns = sp->start_ns + sp->duration_ns;
        sp->enqueue_ns = k ? sp->start_ns - 20000 : 0;
        sp->submit_ns = k ? sp->start_ns - 10000 : 0;
        sp->queued_ns = k == 3 ? sp->start_ns - 15000 : 0;
        sp->uncertainty_ns = k ? 250 : 0;
    }
    s->queue_count = 2;
    s->queues = calloc(2, sizeof *s->queues);
    s->queues[0].backend = KT_BACKEND_OPENCL;
    snprintf(s->queues[0].device, sizeof s->queues[0].device, "pthread-cpu");
    snprintf(s->queues[0].label, sizeof s->queues[0].label, "queue 0x55d0");
    s->queues[1].backend = KT_BACKEND_VULKAN;
    snprintf(s->queues[1].device, sizeof s->queues[1].device, "llvmpipe");
    snprintf(s->queues[1].label, sizeof s->queues[1].label, "queue 0 family 0");
    s->thread_count = 2;
    s->threads = calloc(2, sizeof *s->threads);
    s->threads[0].os_tid = 4242;
    snprintf(s->threads[0].name, sizeof s->threads[0].name, "main");
    s->threads[1].os_tid = 4243;
    snprintf(s->threads[1].name, sizeof s->threads[1].name, "worker \"1\"");
    s->device_count = 2;
    s->devices = calloc(2, sizeof *s->devices);
    s->devices[0].backend = KT_BACKEND_OPENCL;
    snprintf(s->devices[0].name, sizeof s->devices[0].name, "pthread-cpu");
    snprintf(s->devices[0].clock_domain, sizeof s->devices[0].clock_domain, "CLOCK_MONOTONIC_RAW");
    s->devices[0].resolution_ns = 1;
    s->devices[0].frequency_hz = 1000000000;
    s->devices[0].valid_bits = 64;
    s->devices[0].drift_ppm = -0.125;
    s->devices[0].model_samples = 16;
    s->devices[1].backend = KT_BACKEND_VULKAN;
    snprintf(s->devices[1].name, sizeof s->devices[1].name, "llvmpipe");
    snprintf(s->devices[1].clock_domain, sizeof s->devices[1].clock_domain, "device");
    s->devices[1].error_bound_ns = 1500;
    s->devices[1].drift_ppm = 3.0000000000000004;
    return s;
}

/* Same double, treating NaN as equal to NaN. */
static inline int fx_same_double(double a, double b) { return (a != a && b != b) || a == b; }

/* 0 when a and b hold the same data field by field; otherwise 1 and a description of the first difference
 * in why (e.g. "entries[2].p99_ns"). */
static inline int fx_snapshot_diff(const kt_snapshot_t *a, const kt_snapshot_t *b, char *why, size_t whylen)
{
#define FX_DIFF(cond, ...)                                                                                 \
    do {                                                                                                   \
        if (cond) {                                                                                        \
            snprintf(why, whylen, __VA_ARGS__);                                                            \
            return 1;                                                                                      \
        }                                                                                                  \
    } while (0)
    FX_DIFF(a->count != b->count, "count %zu vs %zu", a->count, b->count);
    FX_DIFF(a->span_count != b->span_count, "span_count");
    FX_DIFF(a->queue_count != b->queue_count, "queue_count");
    FX_DIFF(a->thread_count != b->thread_count, "thread_count");
    FX_DIFF(a->device_count != b->device_count, "device_count");
    FX_DIFF(a->taken_ns != b->taken_ns, "taken_ns");
    FX_DIFF(strncmp(a->host, b->host, sizeof a->host), "host");
    for (size_t i = 0; i < a->count; i++) {
        const kt_kernel_timing_t *x = &a->entries[i], *y = &b->entries[i];
        FX_DIFF(strcmp(x->name, y->name), "entries[%zu].name", i);
        FX_DIFF(x->backend != y->backend, "entries[%zu].backend", i);
        FX_DIFF(strcmp(x->device, y->device), "entries[%zu].device", i);
        FX_DIFF(x->dispatch_count != y->dispatch_count, "entries[%zu].dispatch_count", i);
        FX_DIFF(x->total_ns != y->total_ns, "entries[%zu].total_ns", i);
        FX_DIFF(x->min_ns != y->min_ns, "entries[%zu].min_ns", i);
        FX_DIFF(x->max_ns != y->max_ns, "entries[%zu].max_ns", i);
        FX_DIFF(x->last_ns != y->last_ns, "entries[%zu].last_ns", i);
        FX_DIFF(!fx_same_double(x->mean_ns, y->mean_ns), "entries[%zu].mean_ns", i);
        FX_DIFF(!fx_same_double(x->stddev_ns, y->stddev_ns), "entries[%zu].stddev_ns", i);
        FX_DIFF(x->p50_ns != y->p50_ns, "entries[%zu].p50_ns", i);
        FX_DIFF(x->p90_ns != y->p90_ns, "entries[%zu].p90_ns", i);
        FX_DIFF(x->p99_ns != y->p99_ns, "entries[%zu].p99_ns", i);
        FX_DIFF(x->errors != y->errors, "entries[%zu].errors", i);
        FX_DIFF(x->dropped != y->dropped, "entries[%zu].dropped", i);
        FX_DIFF(x->spans_dropped != y->spans_dropped, "entries[%zu].spans_dropped", i);
        FX_DIFF(x->sample_count != y->sample_count, "entries[%zu].sample_count", i);
        for (uint32_t k = 0; k < x->sample_count; k++)
            FX_DIFF(x->samples[k] != y->samples[k], "entries[%zu].samples[%u]", i, k);
    }
    for (size_t i = 0; i < a->span_count; i++) {
        const kt_span_t *x = &a->spans[i], *y = &b->spans[i];
        FX_DIFF(x->entry != y->entry || x->queue != y->queue || x->thread != y->thread || x->flags != y->flags,
                "spans[%zu] indices/flags", i);
        FX_DIFF(x->duration_ns != y->duration_ns || x->enqueue_ns != y->enqueue_ns || x->queued_ns != y->queued_ns ||
                    x->submit_ns != y->submit_ns || x->start_ns != y->start_ns || x->end_ns != y->end_ns ||
                    x->uncertainty_ns != y->uncertainty_ns,
                "spans[%zu] times", i);
    }
    for (size_t i = 0; i < a->queue_count; i++)
        FX_DIFF(a->queues[i].backend != b->queues[i].backend || strcmp(a->queues[i].device, b->queues[i].device) ||
                    strcmp(a->queues[i].label, b->queues[i].label),
                "queues[%zu]", i);
    for (size_t i = 0; i < a->thread_count; i++)
        FX_DIFF(a->threads[i].os_tid != b->threads[i].os_tid || strcmp(a->threads[i].name, b->threads[i].name),
                "threads[%zu]", i);
    for (size_t i = 0; i < a->device_count; i++) {
        const kt_device_info_t *x = &a->devices[i], *y = &b->devices[i];
        FX_DIFF(x->backend != y->backend || strcmp(x->name, y->name) || strcmp(x->clock_domain, y->clock_domain),
                "devices[%zu] names", i);
        FX_DIFF(x->resolution_ns != y->resolution_ns || x->frequency_hz != y->frequency_hz ||
                    x->valid_bits != y->valid_bits || x->error_bound_ns != y->error_bound_ns ||
                    !fx_same_double(x->drift_ppm, y->drift_ppm) || x->model_samples != y->model_samples,
                "devices[%zu] values", i);
    }
#undef FX_DIFF
    return 0;
}

/* Releases a fixture or loaded snapshot (kt_snapshot_free, the shared memory contract). */
static inline void fx_free(kt_snapshot_t *s) { kt_snapshot_free(s); }

/* kt_report_print into a malloc'd NUL-terminated string; *rc gets the return code. */
static inline char *fx_render(const kt_snapshot_t *s, kt_format_t fmt, int *rc)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    int r = kt_report_print(f, s, fmt, NULL);
    fclose(f);
    if (rc)
        *rc = r;
    return buf;
}

#endif
