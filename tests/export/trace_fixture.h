/* trace_fixture.h — a hand-built snapshot for the trace exporter tests (Chrome trace, HTML report): 2 host
 * threads, 2 OpenCL queues (one out-of-order, with overlapping spans), 1 Vulkan queue, nested CPU zones, an
 * errored and a host-timed span. */
#ifndef KT_TESTS_TRACE_FIXTURE_H
#define KT_TESTS_TRACE_FIXTURE_H

#include <ktiming.h>
#include <stdlib.h>
#include <string.h>

/* Kernels of the fixture, in entries[] order (sorted by name, backend, device). */
enum { TRF_BLUR_CL = 0, TRF_HOST_PREP = 1, TRF_SAXPY_CL = 2, TRF_SCAN_VK = 3, TRF_WEIRD = 4, TRF_ENTRY_COUNT = 5 };

/* Spans the fixture creates: per track, for the tests to check counts against. */
#define TRF_DEVICE_SPANS_Q0 6 /* in-order OpenCL queue */
#define TRF_DEVICE_SPANS_Q1 4 /* out-of-order OpenCL queue: two pairs overlap without nesting */
#define TRF_DEVICE_SPANS_Q2 3 /* Vulkan queue */
#define TRF_HOST_SPANS 3      /* CPU zones on thread 0: an outer one with two nested */
#define TRF_DEVICE_SPANS (TRF_DEVICE_SPANS_Q0 + TRF_DEVICE_SPANS_Q1 + TRF_DEVICE_SPANS_Q2)
#define TRF_BASE_NS 1000000000000ull

static inline char *trf_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p)
        memcpy(p, s, n);
    return p;
}

static inline void trf_entry(kt_kernel_timing_t *e, const char *name, kt_backend_t be, const char *dev, uint64_t base,
                      uint32_t nsamples)
{
    e->name = trf_strdup(name);
    e->backend = be;
    e->device = trf_strdup(dev);
    e->dispatch_count = nsamples;
    e->sample_count = nsamples;
    e->samples = malloc(nsamples * sizeof *e->samples);
    uint64_t total = 0, mn = UINT64_MAX, mx = 0;
    for (uint32_t i = 0; i < nsamples; i++) {
        /* a skewed spread around base: mostly near it, a tail up to +60 % */
        uint64_t jitter = (uint64_t)((i * 7919u) % 97u) * base / 400u + ((i % 13u) == 0 ? base / 2u : 0);
        e->samples[i] = base + jitter;
        total += e->samples[i];
        if (e->samples[i] < mn) mn = e->samples[i];
        if (e->samples[i] > mx) mx = e->samples[i];
    }
    e->total_ns = total;
    e->min_ns = nsamples ? mn : 0;
    e->max_ns = mx;
    e->last_ns = nsamples ? e->samples[nsamples - 1] : 0;
    e->mean_ns = nsamples ? (double)total / nsamples : 0;
    e->stddev_ns = (double)base / 10.0;
    e->p50_ns = base + base / 8;
    e->p90_ns = base + base / 4;
    e->p99_ns = base + base / 2;
}

static inline void trf_span(kt_span_t *s, uint32_t entry, uint32_t queue, uint32_t thread, uint32_t flags,
                     uint64_t enqueue, uint64_t start, uint64_t dur)
{
    memset(s, 0, sizeof *s);
    s->entry = entry;
    s->queue = queue;
    s->thread = thread;
    s->flags = flags;
    s->duration_ns = dur;
    s->enqueue_ns = enqueue;
    if (enqueue) {
        s->queued_ns = enqueue + 800;
        s->submit_ns = enqueue + 2500;
    }
    s->start_ns = start;
    s->end_ns = start + dur;
    s->uncertainty_ns = (flags & KT_SPAN_DEVICE) ? 350 : 0;
}

static inline int trf_span_cmp(const void *a, const void *b)
{
    const kt_span_t *x = a, *y = b;
    return x->start_ns < y->start_ns ? -1 : (x->start_ns > y->start_ns);
}

/* The fixture snapshot (free with kt_snapshot_free). scale multiplies the number of samples per kernel. */
static inline kt_snapshot_t *trf_snapshot(uint32_t scale)
{
    kt_snapshot_t *s = calloc(1, sizeof *s);
    const uint64_t B = TRF_BASE_NS;
    s->count = TRF_ENTRY_COUNT;
    s->entries = calloc(s->count, sizeof *s->entries);
    trf_entry(&s->entries[TRF_BLUR_CL], "blur", KT_BACKEND_OPENCL, "pthread-cpu", 420000, 40 * scale);
    trf_entry(&s->entries[TRF_HOST_PREP], "host_prep", KT_BACKEND_CPU, "host", 90000, 25 * scale);
    trf_entry(&s->entries[TRF_SAXPY_CL], "saxpy", KT_BACKEND_OPENCL, "pthread-cpu", 61000, 120 * scale);
    trf_entry(&s->entries[TRF_SCAN_VK], "scan", KT_BACKEND_VULKAN, "llvmpipe (LLVM 15.0.6, 256 bits)", 250000,
              30 * scale);
    trf_entry(&s->entries[TRF_WEIRD], "we\"ird</script><b>&\\n\xe2\x80\xa8k", KT_BACKEND_OPENCL, "pthread-cpu",
              5000, 3);
    s->entries[TRF_SAXPY_CL].errors = 1;

    s->thread_count = 2;
    s->threads = calloc(2, sizeof *s->threads);
    s->threads[0].os_tid = 4242;
    strcpy(s->threads[0].name, "main");
    s->threads[1].os_tid = 4243;

    s->queue_count = 3;
    s->queues = calloc(3, sizeof *s->queues);
    s->queues[0] = (kt_queue_info_t){KT_BACKEND_OPENCL, "pthread-cpu", "queue 0x5501", 0};
    s->queues[1] = (kt_queue_info_t){KT_BACKEND_OPENCL, "pthread-cpu", "queue 0x5502 (out-of-order)", 0};
    s->queues[2] = (kt_queue_info_t){KT_BACKEND_VULKAN, "llvmpipe (LLVM 15.0.6, 256 bits)", "queue family 0 #0", 0};

    s->device_count = 2;
    s->devices = calloc(2, sizeof *s->devices);
    s->devices[0] = (kt_device_info_t){.backend = KT_BACKEND_OPENCL, .name = "pthread-cpu",
                                       .clock_domain = "CLOCK_MONOTONIC_RAW", .resolution_ns = 1,
                                       .frequency_hz = 1000000000, .valid_bits = 64, .error_bound_ns = 350};
    s->devices[1] = (kt_device_info_t){.backend = KT_BACKEND_VULKAN, .name = "llvmpipe (LLVM 15.0.6, 256 bits)",
                                       .clock_domain = "CLOCK_MONOTONIC", .resolution_ns = 1,
                                       .frequency_hz = 1000000000, .valid_bits = 64, .error_bound_ns = 800,
                                       .drift_ppm = 1.5, .model_samples = 16};

    s->span_count = TRF_DEVICE_SPANS + TRF_HOST_SPANS;
    s->spans = calloc(s->span_count, sizeof *s->spans);
    kt_span_t *sp = s->spans;
    const uint32_t DEV = KT_SPAN_DEVICE;
    /* host zones on thread 0: [0, 2 ms) with two nested */
    trf_span(sp++, TRF_HOST_PREP, UINT32_MAX, 0, 0, 0, B, 2000000);
    trf_span(sp++, TRF_HOST_PREP, UINT32_MAX, 0, 0, 0, B + 100000, 300000);
    trf_span(sp++, TRF_HOST_PREP, UINT32_MAX, 0, 0, 0, B + 600000, 300000);
    /* queue 0: in order, enqueued by thread 0 (inside the outer zone) and thread 1 */
    for (int i = 0; i < TRF_DEVICE_SPANS_Q0; i++) {
        uint64_t enq = B + 150000 + (uint64_t)i * 200000;
        uint32_t k = (i % 3 == 0) ? TRF_BLUR_CL : TRF_SAXPY_CL;
        uint32_t flags = DEV | (i == 4 ? KT_SPAN_ERROR : 0);
        trf_span(sp++, k, 0, (uint32_t)(i % 2), flags, enq, B + 400000 + (uint64_t)i * 450000, i == 4 ? 0 : 420000);
    }
    /* queue 1: out of order: spans 0/1 and 2/3 overlap without nesting */
    trf_span(sp++, TRF_SAXPY_CL, 1, 1, DEV, B + 50000, B + 300000, 400000);
    trf_span(sp++, TRF_SAXPY_CL, 1, 1, DEV, B + 60000, B + 500000, 400000);
    trf_span(sp++, TRF_SAXPY_CL, 1, 1, DEV | KT_SPAN_HOST_TIMED, B + 70000, B + 1500000, 300000);
    trf_span(sp++, TRF_WEIRD, 1, 1, DEV, B + 80000, B + 1600000, 300000);
    /* queue 2: Vulkan, enqueued by thread 1, one marked as a trial */
    for (int i = 0; i < TRF_DEVICE_SPANS_Q2; i++)
        trf_span(sp++, TRF_SCAN_VK, 2, 1, DEV | (i == 1 ? KT_SPAN_TRIALS : 0), B + 90000 + (uint64_t)i * 10000,
                 B + 700000 + (uint64_t)i * 700000, 250000);
    qsort(s->spans, s->span_count, sizeof *s->spans, trf_span_cmp);
    s->taken_ns = B + 5000000;
    strcpy(s->host, "fixture-host");
    return s;
}

/* A "before" snapshot for comparisons: the fixture with blur 1.5x slower, scan 1.25x faster, saxpy the same,
 * host_prep renamed (so it is one-sided) and no spans. */
static inline kt_snapshot_t *trf_before_snapshot(void)
{
    kt_snapshot_t *s = trf_snapshot(1);
    const double f[TRF_ENTRY_COUNT] = {1.5, 1.0, 1.0, 0.8, 1.0};
    for (size_t i = 0; i < s->count; i++)
        for (uint32_t k = 0; k < s->entries[i].sample_count; k++)
            s->entries[i].samples[k] = (uint64_t)((double)s->entries[i].samples[k] * f[i]);
    free((void *)s->entries[TRF_HOST_PREP].name);
    s->entries[TRF_HOST_PREP].name = trf_strdup("host_prep_v0");
    free(s->spans);
    s->spans = NULL;
    s->span_count = 0;
    return s;
}

/* A comparison document shaped as kt_compare_print(KT_COMPARE_JSON) writes it (src/analysis/compare_print.c). */
static const char trf_compare_json[] =
    "{\"ktiming_compare\":1,\"kernels\":["
    "{\"name\":\"blur\",\"backend\":\"OpenCL\",\"device\":\"pthread-cpu\",\"presence\":\"both\","
    "\"before\":{\"dispatches\":40,\"samples\":40,\"median_ns\":712000},\"after\":{\"dispatches\":40,"
    "\"samples\":40,\"median_ns\":475000},\"speedup_median\":1.5,\"ci_lo\":1.41,\"ci_hi\":1.58,"
    "\"p_value\":1e-9,\"verdict\":\"FASTER\",\"reason\":\"significant\"},"
    "{\"name\":\"saxpy\",\"backend\":\"OpenCL\",\"device\":\"pthread-cpu\",\"presence\":\"both\","
    "\"before\":{\"dispatches\":120,\"median_ns\":68800},\"after\":{\"dispatches\":120,\"median_ns\":68800},"
    "\"speedup_median\":1.0,\"ci_lo\":0.98,\"ci_hi\":1.02,\"p_value\":0.9,\"verdict\":\"SAME\"},"
    "{\"name\":\"scan\",\"backend\":\"Vulkan\",\"device\":\"llvmpipe (LLVM 15.0.6, 256 bits)\",\"presence\":\"both\","
    "\"before\":{\"dispatches\":30,\"median_ns\":227000},\"after\":{\"dispatches\":30,\"median_ns\":284700},"
    "\"speedup_median\":0.8,\"ci_lo\":0.76,\"ci_hi\":0.84,\"p_value\":1e-6,\"verdict\":\"SLOWER\"},"
    "{\"name\":\"we\\\"ird</script><b>&\\\\n\\u2028k\",\"backend\":\"OpenCL\",\"device\":\"pthread-cpu\","
    "\"presence\":\"both\",\"before\":{\"dispatches\":3,\"median_ns\":5775},\"after\":{\"dispatches\":3,"
    "\"median_ns\":5775},\"speedup_median\":1.0,\"ci_lo\":0.5,\"ci_hi\":2.0,\"p_value\":1,\"verdict\":\"UNSURE\","
    "\"reason\":\"3 samples < 9\"},"
    "{\"name\":\"host_prep\",\"backend\":\"CPU\",\"device\":\"host\",\"presence\":\"after_only\",\"verdict\":\"UNSURE\"},"
    "{\"name\":\"host_prep_v0\",\"backend\":\"CPU\",\"device\":\"host\",\"presence\":\"before_only\",\"verdict\":\"UNSURE\"}],"
    "\"geomean\":{\"kernels\":4,\"speedup\":1.06,\"ci_lo\":0.97,\"ci_hi\":1.16,\"verdict\":\"UNSURE\"}}";

#endif
