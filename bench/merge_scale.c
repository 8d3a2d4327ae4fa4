/* merge_scale.c — the cost of merging a 1,000-rank job: 1,000 synthetic snapshots (100 kernels each, 128
 * samples and a ~40-bucket histogram per kernel, no spans: at this scale spans stay in per-rank files, see
 * docs/scale.md) are written as JSON files, then read back (kt_snapshot_load_many: one thread per core),
 * merged and the result written, as `ktiming merge` does. Prints the phases and, last, `merge_scale: files=1000 seconds=<s> mb_per_s=<m>` (s: load + merge +
 * write; m: input megabytes per second). Target: s <= 5 on the 2-core CI machine.
 * Usage: merge_scale [files] [kernels] [loader threads, 0 = one per core] */
#include <ktiming.h>
#include <ktiming/analysis.h>

#include "core/hist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SAMPLES 128u

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* One rank's snapshot: kernel k's durations around 10 us * (k + 1), 1,000 dispatches each. */
static kt_snapshot_t *synth(int rank, int kernels)
{
    kt_snapshot_t *s = calloc(1, sizeof *s);
    uint64_t seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)(rank + 1) * 0x2545f4914f6cdd1dull;
    snprintf(s->host, sizeof s->host, "node%03d", rank / 32);
    s->pid = 10000 + rank;
    s->rank = rank;
    s->taken_ns = 1000000000ull;
    s->count = (size_t)kernels;
    s->entries = calloc((size_t)kernels, sizeof *s->entries);
    uint64_t *durs = malloc(1000 * sizeof *durs);
    for (int k = 0; k < kernels; k++) {
        kt_kernel_timing_t *e = &s->entries[k];
        char name[32];
        snprintf(name, sizeof name, "kernel_%03d", k);
        e->name = strdup(name);
        e->device = strdup("host");
        e->backend = KT_BACKEND_CPU;
        unsigned __int128 sum = 0, sq = 0;
        uint64_t base = 10000ull * (uint64_t)(k + 1);
        e->min_ns = UINT64_MAX;
        for (int i = 0; i < 1000; i++) {
            uint64_t d = base + rng(&seed) % (base / 4 + 1);
            durs[i] = d;
            sum += d;
            sq += (unsigned __int128)d * d;
            e->min_ns = d < e->min_ns ? d : e->min_ns;
            e->max_ns = d > e->max_ns ? d : e->max_ns;
        }
        e->dispatch_count = 1000;
        e->total_ns = (uint64_t)sum;
        e->total128 = (kt_u128_t){(uint64_t)sum, 0};
        e->sumsq128 = (kt_u128_t){(uint64_t)sq, (uint64_t)(sq >> 64)};
        e->mean_ns = (double)sum / 1000.0;
        e->last_ns = durs[999];
        /* histogram: non-empty buckets, ascending */
        uint32_t *cnt = calloc(KT__HIST_BUCKETS, sizeof *cnt), nb = 0;
        for (int i = 0; i < 1000; i++)
            cnt[kt__hist_index(durs[i])]++;
        for (uint32_t b = 0; b < KT__HIST_BUCKETS; b++)
            nb += cnt[b] != 0;
        e->hist = malloc(nb * sizeof *e->hist);
        for (uint32_t b = 0; b < KT__HIST_BUCKETS; b++)
            if (cnt[b])
                e->hist[e->hist_count++] = (kt_hist_bin_t){kt__hist_lower(b), cnt[b]};
        free(cnt);
        e->samples = malloc(SAMPLES * sizeof *e->samples);
        memcpy(e->samples, durs, SAMPLES * sizeof *e->samples);
        e->sample_count = SAMPLES;
    }
    free(durs);
    return s;
}

int main(int argc, char **argv)
{
    int files = argc > 1 ? atoi(argv[1]) : 1000, kernels = argc > 2 ? atoi(argv[2]) : 100;
    int threads = argc > 3 ? atoi(argv[3]) : 0;
    if (files < 1 || kernels < 1)
        return 2;
    char dir[] = "/tmp/kt_merge_scale_XXXXXX", path[256];
    if (!mkdtemp(dir))
        return 1;
    double t0 = now_s(), bytes = 0;
    for (int r = 0; r < files; r++) {
        kt_snapshot_t *s = synth(r, kernels);
        snprintf(path, sizeof path, "%s/rank%04d.json", dir, r);
        if (kt_report_write(path, s, KT_FORMAT_JSON, NULL) != 0)
            return 1;
        kt_snapshot_free(s);
        struct stat st;
        if (stat(path, &st) == 0)
            bytes += (double)st.st_size;
    }
    double t1 = now_s();
    printf("generated %d files, %.1f MB, in %.2f s (not timed)\n", files, bytes / 1e6, t1 - t0);

    kt_snapshot_t **in = calloc((size_t)files, sizeof *in), *merged = NULL;
    char err[512];
    double a = now_s(), ca = cpu_s();
    char **paths = calloc((size_t)files, sizeof *paths);
    for (int r = 0; r < files; r++) {
        snprintf(path, sizeof path, "%s/rank%04d.json", dir, r);
        paths[r] = strdup(path);
    }
    if (kt_snapshot_load_many((const char *const *)paths, (size_t)files, in, threads, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    double b = now_s();
    if (kt_snapshot_merge((const kt_snapshot_t *const *)in, (size_t)files, NULL, &merged) != 0)
        return 1;
    double c = now_s();
    snprintf(path, sizeof path, "%s/merged.json", dir);
    if (kt_report_write(path, merged, KT_FORMAT_JSON, NULL) != 0)
        return 1;
    double d = now_s(), cd = cpu_s();
    struct stat st;
    double out_mb = stat(path, &st) == 0 ? (double)st.st_size / 1e6 : 0;
    printf("load+parse %.3f s (%.1f MB/s)  merge %.3f s  write %.3f s (%.1f MB)\n", b - a, bytes / 1e6 / (b - a),
           c - b, d - c, out_mb);
    printf("cpu time of load+merge+write: %.3f s (wall %.3f s: the machine is shared)\n", cd - ca, d - a);
    printf("merged: %zu kernels, %zu sources, %llu dispatches of kernel_000\n", merged->count, merged->source_count,
           (unsigned long long)merged->entries[0].dispatch_count);
    for (int r = 0; r < files; r++) {
        kt_snapshot_free(in[r]);
        snprintf(path, sizeof path, "%s/rank%04d.json", dir, r);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/merged.json", dir);
    unlink(path);
    rmdir(dir);
    for (int r = 0; r < files; r++)
        free(paths[r]);
    free(paths);
    free(in);
    kt_snapshot_free(merged);
    double secs = d - a;
    printf("merge_scale: files=%d seconds=%.3f mb_per_s=%.1f\n", files, secs, bytes / 1e6 / secs);
    return 0;
}
