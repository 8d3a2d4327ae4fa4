/* compare_scale.c — `ktiming compare` at scale: two snapshots of 100,000 kernels (32 samples each, the AFTER
 * side 0-20 % slower per kernel) compared by the CLI as a user runs it; wall seconds and the compare process's
 * peak RSS (wait4 rusage). The bound checked is the issue's: <= 10 s and <= 300 MB. Then two snapshots of
 * 1,000,000 kernels without samples (about 324 bytes a kernel, 324 MB a file: the reader's scale, issue 39.9;
 * bound <= 15 s and <= 600 MB), and on the first of them `ktiming report` and `ktiming merge -o`: the readers'
 * input megabytes per CPU second (aim >= 100) and peak RSS per input megabyte (aim <= 1.5), one line each.
 * `compare_scale --keep` leaves the snapshots in place (for profiling).
 * Last two lines: compare_scale: kernels=100000 seconds=<s> max_rss_mb=<m>
 *                 compare_scale_1m: kernels=1000000 seconds=<s> max_rss_mb=<m>
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef KERNELS
#define KERNELS 100000u
#endif
#define SAMPLES 32u
#define KERNELS_1M 1000000u

static uint64_t rng(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* A schema-1 snapshot of `kernels` kernels with `samples` samples each (0 or SAMPLES); `slow` scales kernel i by
 * 1 + (i % 5) * 5 %. */
static int write_snapshot(const char *path, int slow, uint64_t seed, uint32_t kernels, uint32_t samples)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "{\"schema\": \"ktiming.snapshot\", \"version\": 1, \"generator\": \"compare_scale\", \"host\": \"bench\",\n"
               " \"taken_ns\": 1, \"entries\": [\n");
    for (uint32_t k = 0; k < kernels; k++) {
        uint64_t v[SAMPLES], sum = 0, base = 10000 + (k % 997) * 37;
        uint32_t n = samples ? samples : SAMPLES; /* without samples: the statistics of SAMPLES dispatches */
        if (slow)
            base += base * (k % 5) * 5 / 100;
        for (uint32_t i = 0; i < n; i++) {
            v[i] = base + rng(&seed) % (base / 10 + 1);
            sum += v[i];
        }
        uint64_t sorted[SAMPLES];
        memcpy(sorted, v, sizeof v);
        qsort(sorted, n, sizeof sorted[0], cmp_u64);
        fprintf(f,
                "%s{\"name\": \"kernel_%07u\", \"backend\": \"cpu\", \"device\": \"host\", \"dispatch_count\": %u, "
                "\"total_ns\": %llu, \"min_ns\": %llu, \"max_ns\": %llu, \"last_ns\": %llu, \"mean_ns\": %llu, "
                "\"stddev_ns\": 1, \"p50_ns\": %llu, \"p90_ns\": %llu, \"p99_ns\": %llu, \"errors\": 0, "
                "\"dropped\": 0, \"spans_dropped\": 0, \"sample_count\": %u, \"samples\": [",
                k ? ",\n" : "", k, n, (unsigned long long)sum, (unsigned long long)sorted[0],
                (unsigned long long)sorted[n - 1], (unsigned long long)v[n - 1], (unsigned long long)(sum / n),
                (unsigned long long)sorted[n / 2], (unsigned long long)sorted[n * 9 / 10],
                (unsigned long long)sorted[n - 1], samples);
        for (uint32_t i = 0; i < samples; i++)
            fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)v[i]);
        fputs("]}", f);
    }
    fputs("\n], \"spans\": [], \"queues\": [], \"threads\": [], \"devices\": []}\n", f);
    return fclose(f);
}

/* One run of the CLI: argv (argv[0] is KT_CLI), its standard output to /dev/null; 0 with *secs (wall), *cpu
 * (user + system seconds of the process: what to compare while other jobs share the cores) and *rss_mb (its peak
 * resident set), or 1. */
static int run_cli(char *const argv[], double *secs, double *cpu, double *rss_mb)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        execv(KT_CLI, argv);
        _exit(127);
    }
    int st = 0;
    struct rusage ru;
    while (wait4(pid, &st, 0, &ru) < 0 && errno == EINTR) {
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "compare_scale: ktiming %s failed (status %d)\n", argv[1], st);
        return 1;
    }
    *secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    *cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
    *rss_mb = (double)ru.ru_maxrss / 1024.0;
    return 0;
}

static double file_mb(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (double)st.st_size / 1e6 : 0.0;
}

/* The readers' throughput on one snapshot (issue 39.9: input megabytes per CPU second, aim >= 100, peak RSS
 * <= 1.5x the input): `ktiming report` (text table) and `ktiming merge -o`, one line. */
static int readers(const char *dir, const char *path)
{
    char merged[512];
    snprintf(merged, sizeof merged, "%s/merged.json", dir);
    char *report[] = {KT_CLI, "report", (char *)path, NULL};
    char *merge[] = {KT_CLI, "merge", (char *)path, "-o", merged, NULL};
    double s[2], c[2], r[2], mb = file_mb(path), mib = mb * 1e6 / (1024.0 * 1024.0);
    int bad = run_cli(report, &s[0], &c[0], &r[0]) || run_cli(merge, &s[1], &c[1], &r[1]);
    unlink(merged);
    if (bad || mb <= 0.0)
        return 1;
    printf("compare_scale_1m: readers of one %.0f MB file, input MB per CPU second (aim >= 100) and peak RSS per "
           "input: report %.0f MB/s %.2fx, merge %.0f MB/s %.2fx\n",
           mb, mb / c[0], r[0] / mib, mb / c[1], r[1] / mib);
    return 0;
}

/* Writes the two snapshots in dir, runs `ktiming compare` on them (and, with readers, `report` and `merge` of the
 * first); 0 with *secs, *cpu and *rss_mb of the compare, or 1. */
static int measure(const char *dir, const char *tag, uint32_t kernels, uint32_t samples, int keep, int with_readers,
                   double *secs, double *cpu, double *rss_mb)
{
    char before[512], after[512];
    snprintf(before, sizeof before, "%s/before%s.json", dir, tag);
    snprintf(after, sizeof after, "%s/after%s.json", dir, tag);
    if (write_snapshot(before, 0, 1, kernels, samples) != 0 || write_snapshot(after, 1, 2, kernels, samples) != 0) {
        perror("compare_scale: writing the snapshots");
        return 1;
    }
    char *compare[] = {KT_CLI, "compare", before, after, "--format", "json", NULL};
    int bad = run_cli(compare, secs, cpu, rss_mb);
    if (!bad && with_readers) {
        double mb = file_mb(before) + file_mb(after);
        printf("compare_scale_1m: compare of %.0f MB, input MB per CPU second (aim >= 100) and peak RSS per input: "
               "%.0f MB/s %.2fx\n",
               mb, mb / *cpu, *rss_mb / (mb * 1e6 / (1024.0 * 1024.0)));
        bad = readers(dir, before);
    }
    if (keep) {
        printf("compare_scale: snapshots kept: %s %s\n", before, after);
    } else {
        unlink(before);
        unlink(after);
    }
    return bad;
}

int main(int argc, char **argv)
{
    int keep = argc > 1 && !strcmp(argv[1], "--keep"); /* leave the snapshots for a profiler */
    char dir[] = "/tmp/kt-compare-scale.XXXXXX";
    if (!mkdtemp(dir)) {
        perror("compare_scale: mkdtemp");
        return 1;
    }
    double secs = 0, cpu = 0, rss_mb = 0, secs1m = 0, cpu1m = 0, rss1m = 0;
    int bad = measure(dir, "", KERNELS, SAMPLES, keep, 0, &secs, &cpu, &rss_mb) ||
              measure(dir, "_1m", KERNELS_1M, 0, keep, 1, &secs1m, &cpu1m, &rss1m);
    if (!keep)
        rmdir(dir);
    if (bad)
        return 1;
    printf("compare_scale: %u kernels x %u samples per side, ktiming compare --format json\n", KERNELS, SAMPLES);
    printf("compare_scale: bound 10 s and 300 MB: %s\n", secs <= 10.0 && rss_mb <= 300.0 ? "met" : "NOT met");
    printf("compare_scale_1m: %u kernels without samples per side: bound 15 s and 600 MB: %s\n", KERNELS_1M,
           secs1m <= 15.0 && rss1m <= 600.0 ? "met" : "NOT met");
    printf("compare_scale: cpu seconds %.2f (100,000 kernels), %.2f (1,000,000 kernels)\n", cpu, cpu1m);
    printf("compare_scale: kernels=%u seconds=%.2f max_rss_mb=%.0f\n", KERNELS, secs, rss_mb);
    printf("compare_scale_1m: kernels=%u seconds=%.2f max_rss_mb=%.0f\n", KERNELS_1M, secs1m, rss1m);
    return 0;
}
