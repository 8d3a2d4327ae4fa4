/* launch_config.c — what a launch configuration (kt_dispatch_t.launch, issue 40.2) adds to kt_record_dispatch, in
 * one run: the same dispatch recorded without one, with one (the same configuration every time: the row hint
 * hits), and cycling through eight configurations (a scan of the kernel's rows each time). Each loop is timed in
 * chunks of 1024 records and reports its cheapest chunk (noise on a shared machine only adds time); the three
 * loops interleave over 7 repetitions and the median of each is printed. Spans are off (the span log is not what
 * this measures). The cost without a configuration against a build without the feature is what docs/cli.md quotes
 * (measured with two builds; this binary has only the new one).
 * Last line: launch_config: none_ns=<a> with_vs_none=<b> eight_vs_none=<c>
 *   a = ns per record without a configuration, b and c = per-record cost with one / cycling through eight, over a.
 */
#include <ktiming.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REPS 7
#define CHUNK 1024u
#define CHUNKS 400u

static uint64_t now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ns per record, cheapest chunk; configs 0: none, else cycling through that many configurations. */
static double loop(kt_kernel_id_t k, uint32_t configs)
{
    kt_dispatch_t d;
    memset(&d, 0, sizeof d);
    d.kernel = k;
    d.flags = KT_SPAN_DEVICE;
    d.launch.dims = 1;
    d.launch.local[0] = 64;
    double best = 1e30;
    for (uint32_t c = 0; c < CHUNKS; c++) {
        uint64_t t0 = now();
        for (uint32_t i = 0; i < CHUNK; i++) {
            d.duration_ns = 1000 + (i & 255u);
            d.launch.kind = configs ? KT_LAUNCH_ITEMS : KT_LAUNCH_NONE;
            d.launch.size[0] = configs ? 4096u * (1u + i % configs) : 0;
            kt_record_dispatch(&d);
        }
        double v = (double)(now() - t0) / CHUNK;
        if (v < best)
            best = v;
    }
    return best;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void)
{
    kt_init(&(kt_desc_t){.spans_off = 1});
    kt_kernel_id_t k = kt_kernel_intern("launch_config", KT_BACKEND_OPENCL, "bench");
    double none[REPS], one[REPS], eight[REPS];
    loop(k, 8); /* warm: every row and histogram block allocated */
    for (int r = 0; r < REPS; r++) {
        none[r] = loop(k, 0);
        one[r] = loop(k, 1);
        eight[r] = loop(k, 8);
    }
    qsort(none, REPS, sizeof none[0], cmp);
    qsort(one, REPS, sizeof one[0], cmp);
    qsort(eight, REPS, sizeof eight[0], cmp);
    double a = none[REPS / 2], b = one[REPS / 2], c = eight[REPS / 2];
    printf("launch_config: kt_record_dispatch without a configuration %.2f ns, with one %.2f ns (+%.2f), cycling "
           "through eight %.2f ns (+%.2f)\n",
           a, b, b - a, c, c - a);
    kt_snapshot_t *s = kt_snapshot(); /* the breakdown holds what was recorded: nothing lost */
    const kt_kernel_timing_t *e = kt_snapshot_find(s, "launch_config", KT_BACKEND_OPENCL, NULL);
    uint64_t rows = 0;
    for (uint32_t i = 0; e && i < e->config_count; i++)
        rows += e->configs[i].dispatch_count;
    printf("launch_config: %llu dispatches, %llu of them in %u configuration rows\n",
           e ? (unsigned long long)e->dispatch_count : 0ull, (unsigned long long)rows, e ? e->config_count : 0u);
    kt_snapshot_free(s);
    printf("launch_config: none_ns=%.2f with_vs_none=%.2f eight_vs_none=%.2f\n", a, b / a, c / a);
    return 0;
}
