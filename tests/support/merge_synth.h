/* merge_synth.h — the merge tests' inputs (test_merge_consume.c, test_merge_stream.c): kernels k_00000.. with 0 to
 * 40 samples (or aggregates only), CPU and OpenCL entries, some only in input 0. */
#ifndef KT_TEST_MERGE_SYNTH_H
#define KT_TEST_MERGE_SYNTH_H

#include "support/compare_synth.h"

#include <stdio.h>

/* Input `which` of n kernels (input 1 lacks every 7th of input 0's and names them 5 further on), its samples
 * lognormal with relative spread sigma; host "host<which>", pid 100 + which. */
static inline kt_snapshot_t *merge_synth_input(int which, size_t n, double sigma, uint64_t taken_ns)
{
    kt_snapshot_t *s = synth_snapshot(n);
    snprintf(s->host, sizeof s->host, "host%d", which);
    s->pid = 100 + which;
    s->taken_ns = taken_ns;
    for (size_t k = 0; k < n; k++) {
        if (which == 1 && k % 7 == 3) /* kernels input 0 has and input 1 does not */
            continue;
        char name[32];
        snprintf(name, sizeof name, "k_%05zu", k + (which == 1 ? 5 : 0));
        kt_kernel_timing_t *e = synth_add(s, name, k % 3 ? KT_BACKEND_CPU : KT_BACKEND_OPENCL, k % 3 ? "host" : "gpu",
                                          (uint32_t)(k % 41), 1000.0 + (double)(k % 13) * 50.0, sigma,
                                          (uint64_t)(which * 100000 + k + 1));
        if (!e->sample_count) { /* aggregates only */
            e->dispatch_count = 10;
            e->total_ns = 10000 + k;
            e->min_ns = 900;
            e->max_ns = 1200;
            e->mean_ns = (double)e->total_ns / 10.0;
        }
        e->errors = k % 5 == 0;
    }
    return s;
}

#endif
