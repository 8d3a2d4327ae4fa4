/* test_snapshot.c — snapshot ordering, lookup, spans mapped to entries/queues/threads, devices, last-by-time. */
#include "test_util.h"

#include <ktiming/clock_model.h>

#include <pthread.h>

static void test_ordering(void **state)
{
    (void)state;
    kt_reset();
    /* Inserted scrambled; expected order: name, then backend, then device. */
    kt_record_dispatch(&(kt_dispatch_t){.kernel = kt_kernel_intern("zeta", KT_BACKEND_CPU, NULL), .duration_ns = 1});
    kt_record_dispatch(&(kt_dispatch_t){.kernel = kt_kernel_intern("alpha", KT_BACKEND_VULKAN, "gpu1"),
                                        .duration_ns = 1});
    kt_record_dispatch(&(kt_dispatch_t){.kernel = kt_kernel_intern("alpha", KT_BACKEND_OPENCL, "zdev"),
                                        .duration_ns = 1});
    kt_record_dispatch(&(kt_dispatch_t){.kernel = kt_kernel_intern("alpha", KT_BACKEND_VULKAN, "gpu0"),
                                        .duration_ns = 1});
    kt_record_dispatch(&(kt_dispatch_t){.kernel = kt_kernel_intern("alpha", KT_BACKEND_CPU, NULL), .duration_ns = 1});
    kt_record_dispatch(&(kt_dispatch_t){.kernel = kt_kernel_intern("beta", KT_BACKEND_CUDA, NULL), .duration_ns = 1});
    kt_record_dispatch(&(kt_dispatch_t){.kernel = kt_kernel_intern("Alpha", KT_BACKEND_METAL, NULL), .duration_ns = 1});
    kt_record_dispatch(&(kt_dispatch_t){.kernel = kt_kernel_intern("alpha", KT_BACKEND_OPENCL, "adev"),
                                        .duration_ns = 1});
    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    static const struct {
        const char *name;
        kt_backend_t b;
        const char *dev;
    } want[] = {
        {"Alpha", KT_BACKEND_METAL, "default"}, {"alpha", KT_BACKEND_CPU, "host"},
        {"alpha", KT_BACKEND_OPENCL, "adev"},   {"alpha", KT_BACKEND_OPENCL, "zdev"},
        {"alpha", KT_BACKEND_VULKAN, "gpu0"},   {"alpha", KT_BACKEND_VULKAN, "gpu1"},
        {"beta", KT_BACKEND_CUDA, "default"},   {"zeta", KT_BACKEND_CPU, "host"},
    };
    assert_int_equal(s->count, 8);
    for (size_t i = 0; i < 8; i++) {
        assert_string_equal(s->entries[i].name, want[i].name);
        assert_int_equal(s->entries[i].backend, want[i].b);
        assert_string_equal(s->entries[i].device, want[i].dev);
    }
    /* Lookup: exact device, or NULL for the first of any device. */
    assert_ptr_equal(kt_snapshot_find(s, "alpha", KT_BACKEND_OPENCL, "zdev"), &s->entries[3]);
    assert_ptr_equal(kt_snapshot_find(s, "alpha", KT_BACKEND_OPENCL, NULL), &s->entries[2]);
    assert_null(kt_snapshot_find(s, "alpha", KT_BACKEND_CUDA, NULL));
    assert_null(kt_snapshot_find(s, "nope", KT_BACKEND_CPU, NULL));
    assert_null(kt_snapshot_find(NULL, "alpha", KT_BACKEND_CPU, NULL));
    assert_true(s->taken_ns > 0);
    assert_true(s->host[0] != 0);
    kt_snapshot_free(s);
    kt_snapshot_free(NULL);
}

static void test_dispatch_spans(void **state)
{
    (void)state;
    kt_reset();
    kt_kernel_id_t k1 = kt_kernel_intern("gpu_k", KT_BACKEND_OPENCL, "pocl");
    kt_kernel_id_t k0 = kt_kernel_intern("cpu_k", KT_BACKEND_CPU, NULL);
    uint32_t q = kt_queue_register(KT_BACKEND_OPENCL, "pocl", "queue A");
    assert_int_not_equal(q, 0);
    assert_int_equal(kt_queue_register(KT_BACKEND_OPENCL, "pocl", "queue A"), q); /* same triple, same id */
    uint32_t q2 = kt_queue_register(KT_BACKEND_OPENCL, "pocl", "queue B");
    assert_int_not_equal(q2, q);
    uint32_t me = kt_thread_ordinal();
    assert_true(me >= 1);
    assert_int_equal(kt_thread_ordinal(), me);

    kt_dispatch_t d;
    memset(&d, 0, sizeof d);
    d.kernel = k1;
    d.queue = q2;
    d.flags = KT_SPAN_DEVICE;
    d.duration_ns = 300;
    d.enqueue_ns = 1000;
    d.start_ns = 5000;
    d.end_ns = 5300;
    d.uncertainty_ns = 7;
    kt_record_dispatch(&d);
    d.duration_ns = 200; /* starts earlier: spans sort by start, not by record order */
    d.start_ns = 4000;
    d.end_ns = 6000;
    d.queue = q;
    kt_record_dispatch(&d);
    d.duration_ns = 50; /* no times: aggregated, no span */
    d.start_ns = d.end_ns = 0;
    kt_record_dispatch(&d);
    kt_dispatch_t h;
    memset(&h, 0, sizeof h);
    h.kernel = k0;
    h.duration_ns = 10;
    h.start_ns = 4500;
    h.end_ns = 4510;
    kt_record_dispatch(&h);

    kt_device_info_t dev;
    memset(&dev, 0, sizeof dev);
    dev.backend = KT_BACKEND_OPENCL;
    strcpy(dev.name, "pocl");
    strcpy(dev.clock_domain, "CLOCK_MONOTONIC_RAW");
    dev.resolution_ns = 1;
    kt_device_publish(&dev);
    dev.resolution_ns = 2; /* republished: replaced, not duplicated */
    kt_device_publish(&dev);

    kt_snapshot_t *s = kt_snapshot();
    assert_int_equal(s->count, 2);
    const kt_kernel_timing_t *g = kt_snapshot_find(s, "gpu_k", KT_BACKEND_OPENCL, "pocl");
    assert_non_null(g);
    assert_int_equal(g->dispatch_count, 3);
    assert_int_equal(g->total_ns, 550);
    assert_int_equal(g->last_ns, 50); /* within a thread, last is the last recorded */
    size_t gi = (size_t)(g - s->entries), ci = gi == 0 ? 1 : 0;

    assert_int_equal(s->span_count, 3);
    assert_int_equal(s->spans[0].start_ns, 4000); /* sorted by start */
    assert_int_equal(s->spans[1].start_ns, 4500);
    assert_int_equal(s->spans[2].start_ns, 5000);
    assert_int_equal(s->spans[0].entry, gi);
    assert_int_equal(s->spans[1].entry, ci);
    assert_int_equal(s->spans[1].queue, UINT32_MAX); /* host thread track */
    assert_int_equal(s->spans[0].queue, q - 1);
    assert_int_equal(s->spans[2].queue, q2 - 1);
    assert_true(s->queue_count >= 2);
    assert_string_equal(s->queues[q2 - 1].label, "queue B");
    assert_string_equal(s->queues[q2 - 1].device, "pocl");
    assert_int_equal(s->spans[2].flags, KT_SPAN_DEVICE);
    kt_host_clock_info_t hc; /* the host counter model's bound is added to a device span's (docs/host-clock.md) */
    assert_int_equal(kt_host_clock_info(&hc), 0);
    if (strcmp(hc.counter, "CLOCK_MONOTONIC_RAW") != 0)
        assert_true(s->spans[2].uncertainty_ns > 7);
    else
        assert_int_equal(s->spans[2].uncertainty_ns, 7);
    assert_int_equal(s->spans[2].enqueue_ns, 1000);
    assert_int_equal(s->spans[2].duration_ns, 300);
    assert_int_equal(s->spans[0].thread, me - 1);
    assert_true(s->thread_count >= me);
    assert_true(s->threads[me - 1].os_tid > 0);

    int found = 0, host = 0;
    for (size_t i = 0; i < s->device_count; i++) {
        if (s->devices[i].backend == KT_BACKEND_OPENCL && !strcmp(s->devices[i].name, "pocl")) {
            found++;
            assert_int_equal(s->devices[i].resolution_ns, 2);
        }
        if (s->devices[i].backend == KT_BACKEND_CPU && !strcmp(s->devices[i].name, "host")) {
            host++;
            assert_string_equal(s->devices[i].clock_domain, "CLOCK_MONOTONIC_RAW");
        }
    }
    assert_int_equal(found, 1);
    assert_int_equal(host, 1);
    kt_snapshot_free(s);
}

/* A timed dispatch recorded on another thread. */
typedef struct timed_t {
    kt_kernel_id_t kernel; /* what */
    uint64_t dur, end;     /* duration and end time */
} timed_t;

static void *record_timed(void *arg)
{
    timed_t *t = arg;
    kt_dispatch_t d;
    memset(&d, 0, sizeof d);
    d.kernel = t->kernel;
    d.duration_ns = t->dur;
    d.start_ns = t->end - t->dur;
    d.end_ns = t->end;
    kt_record_dispatch(&d);
    return NULL;
}

/* Across threads, last_ns follows the end time, not the order the threads happened to record in. */
static void test_last_across_threads(void **state)
{
    (void)state;
    kt_reset();
    kt_kernel_id_t k = kt_kernel_intern("last_x", KT_BACKEND_VULKAN, "lvp");
    timed_t late = {k, 111, 9000}, early = {k, 222, 5000};
    pthread_t a, b;
    pthread_create(&a, NULL, record_timed, &late);
    pthread_join(a, NULL);
    pthread_create(&b, NULL, record_timed, &early); /* recorded later, but ended earlier */
    pthread_join(b, NULL);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *t = kt_snapshot_find(s, "last_x", KT_BACKEND_VULKAN, "lvp");
    assert_non_null(t);
    assert_int_equal(t->dispatch_count, 2);
    assert_int_equal(t->last_ns, 111);
    kt_snapshot_free(s);
}

/* Spans come out sorted by (start, end, entry) however they were recorded: in order, as a few ascending runs
 * (merged), as an odd number of runs or five of unequal lengths (merged in place, forward and backward), or
 * scrambled (many runs: a full sort); none lost or duplicated. */
static void record_span(kt_kernel_id_t k, uint64_t start, uint64_t end)
{
    kt_dispatch_t d;
    memset(&d, 0, sizeof d);
    d.kernel = k;
    d.start_ns = start;
    d.end_ns = end;
    d.duration_ns = end - start;
    d.flags = KT_SPAN_DEVICE;
    kt_record_dispatch(&d);
}

static void check_span_order(size_t n, uint64_t sum_start)
{
    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    assert_int_equal(s->span_count, n);
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        sum += s->spans[i].start_ns;
        if (i == 0)
            continue;
        const kt_span_t *a = &s->spans[i - 1], *b = &s->spans[i];
        assert_true(a->start_ns < b->start_ns || (a->start_ns == b->start_ns && a->end_ns <= b->end_ns));
    }
    assert_int_equal(sum, sum_start);
    kt_snapshot_free(s);
}

static void test_span_order(void **state)
{
    (void)state;
    kt_kernel_id_t k = kt_kernel_intern("span_order", KT_BACKEND_OPENCL, "dev");
    enum { N = 1000 };
    static const uint64_t kRun[5] = {100, 400, 50, 300, 150}; /* pattern 5: five runs of unequal lengths */
    for (int pattern = 0; pattern < 6; pattern++) {
        kt_reset();
        uint64_t sum = 0;
        for (uint64_t i = 0; i < N; i++) {
            uint64_t start;
            switch (pattern) {
            case 0: start = 1000 + i * 10; break;                        /* in order */
            case 1: start = 1000 + (i % 500) * 10 + (i >= 500 ? 5 : 0); break; /* two interleaving runs */
            case 2: start = 1000 + (i % 334) * 30 + (i / 334); break;   /* three runs (an odd count) */
            case 3: start = 1000 + (i * 7919) % N; break;                /* scrambled */
            case 4: start = 1000 + (N - i) / 2; break;                   /* descending, pairs of equal starts */
            default: {                                                    /* interleaved runs, merged in place */
                uint64_t r = 0, at = i;
                while (at >= kRun[r])
                    at -= kRun[r++];
                start = 1000 + r * 3 + at * 5;
            }
            }
            record_span(k, start, start + 1 + (i % 3));
            sum += start;
        }
        check_span_order(N, sum);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ordering),
        cmocka_unit_test(test_dispatch_spans),
        cmocka_unit_test(test_last_across_threads),
        cmocka_unit_test(test_span_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
