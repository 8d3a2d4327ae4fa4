/* history_scale.c — `ktiming history` at scale on SQLite: 1,000 runs of 1,000 kernels (32 reservoir samples each)
 * added one by one as `history add` does (the snapshot's JSON parsed and stored in one transaction), then every
 * series checked as `history check` does (read back, change points, confirmations). The run's JSON is generated
 * outside the timed part. The bounds checked are the issue's: <= 50 ms per run added, <= 2 s for the check.
 * `history_scale --keep` leaves the database in place; `history_scale RUNS KERNELS` sizes it otherwise.
 * Last line: history_scale: runs=<r> kernels=<k> add_ms=<a> check_s=<c>
 */
#include "history.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
static double now_s(void) { return clock_s(CLOCK_MONOTONIC); }
/* This process's CPU time: on a shared, loaded machine the wall figures include waiting for a core. */
static double cpu_s(void) { return clock_s(CLOCK_PROCESS_CPUTIME_ID); }

static const double kSteps[] = {0.05, 0.1, 0.3};

int main(int argc, char **argv)
{
    int keep = 0;
    size_t runs = 1000, kernels = 1000;
    int pos = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--keep"))
            keep = 1;
        else if (pos++ == 0)
            runs = strtoul(argv[i], NULL, 10);
        else
            kernels = strtoul(argv[i], NULL, 10);
    }
    if (runs < 2 || kernels < 1) {
        fprintf(stderr, "usage: history_scale [--keep] [RUNS [KERNELS]]\n");
        return 2;
    }
    const char *tmp = getenv("TMPDIR");
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/kt-history-scale-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror("history_scale: mkdtemp");
        return 1;
    }
    snprintf(path, sizeof path, "%s/history.sqlite", dir);
    kth_synth_opts_t o = {.seed = 2026, .runs = runs, .kernels = kernels, .samples = 32, .run_noise = 0.02,
                          .sample_noise = 0.05, .outlier_rate = 0.01, .drift = 0.02, .step_share = 0.05,
                          .steps = kSteps, .step_kinds = 3};
    kth_synth_t sy;
    if (kth_synth(&o, &sy)) {
        fprintf(stderr, "history_scale: out of memory\n");
        return 1;
    }
    kth_db_t *db;
    char err[512];
    if (kth_open(path, &db, err, sizeof err)) {
        fprintf(stderr, "history_scale: %s\n", err);
        return 1;
    }
    double add_total = 0.0, add_max = 0.0, add_cpu = 0.0;
    for (size_t i = 0; i < runs; i++) {
        size_t len;
        char *json = kth_synth_run_json(&sy, i, &len);
        if (!json) {
            fprintf(stderr, "history_scale: out of memory\n");
            return 1;
        }
        char when[32];
        time_t t = (time_t)sy.h.runs[i].when;
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
        kth_run_info_t info = {.commit = sy.h.runs[i].commit, .branch = "main", .when = when};
        int64_t id;
        int added;
        double t0 = now_s(), c0 = cpu_s();
        int rc = kth_add_json(db, json, len, &info, &id, &added, err, sizeof err);
        double dt = now_s() - t0;
        add_cpu += cpu_s() - c0;
        free(json);
        if (rc || !added) {
            fprintf(stderr, "history_scale: run %zu: %s\n", i, rc ? err : "not added");
            return 1;
        }
        add_total += dt;
        add_max = dt > add_max ? dt : add_max;
    }
    kth_close(db);
    /* The check as `ktiming history check` runs it: a fresh connection, everything read, every series checked. */
    double t0 = now_s(), c0 = cpu_s();
    kth_history_t h;
    kth_check_result_t r;
    if (kth_open(path, &db, err, sizeof err) || kth_load(db, NULL, &h) ||
        kth_check(&h, kth_db_samples_fn, db, NULL, &r)) {
        fprintf(stderr, "history_scale: check failed: %s\n", *err ? err : db->err);
        return 1;
    }
    double check_s = now_s() - t0, check_cpu = cpu_s() - c0;
    size_t stepped = 0;
    for (size_t s = 0; s < kernels; s++)
        stepped += sy.step[s] != 0.0;
    printf("history_scale: %zu runs x %zu kernels x %u samples, SQLite at %s\n", runs, kernels, o.samples, path);
    printf("history_scale: add mean %.1f ms, slowest %.1f ms; check found %zu changes (%zu candidates; %zu kernels "
           "were given a step)\n",
           add_total / (double)runs * 1e3, add_max * 1e3, r.count, r.candidates, stepped);
    double load[1] = {0};
    if (getloadavg(load, 1) < 1)
        load[0] = -1;
    printf("history_scale: CPU time: add %.1f ms per run, check %.2f s (load average %.1f)\n",
           add_cpu / (double)runs * 1e3, check_cpu, load[0]);
    printf("history_scale: bound 50 ms per run added and 2 s per check: %s\n",
           add_total / (double)runs * 1e3 <= 50.0 && check_s <= 2.0 ? "met" : "NOT met");
    kth_check_free(&r);
    kth_history_free(&h);
    kth_close(db);
    kth_synth_free(&sy);
    if (!keep) {
        char wal[700], shm[700];
        snprintf(wal, sizeof wal, "%s-wal", path);
        snprintf(shm, sizeof shm, "%s-shm", path);
        unlink(wal);
        unlink(shm);
        unlink(path);
        rmdir(dir);
    }
    printf("history_scale: runs=%zu kernels=%zu add_ms=%.1f check_s=%.2f\n", runs, kernels,
           add_total / (double)runs * 1e3, check_s);
    return 0;
}
