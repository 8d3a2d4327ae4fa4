/* hist_util.h — helpers of the history tests: synthetic runs as snapshot JSON, counting rows, one store's
 * contents printed for comparison. Header-only. */
#ifndef KT_TESTS_HIST_UTIL_H
#define KT_TESTS_HIST_UTIL_H

#include "history.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const double kHuSteps[] = {0.3};

/* A small synthetic history: `runs` runs of `kernels` kernels, half of them with a 30 % step. */
static inline int hu_synth(kth_synth_t *sy, uint64_t seed, size_t runs, size_t kernels)
{
    kth_synth_opts_t o = {.seed = seed, .runs = runs, .kernels = kernels, .samples = 16, .run_noise = 0.01,
                          .sample_noise = 0.03, .step_share = 0.5, .steps = kHuSteps, .step_kinds = 1};
    return kth_synth(&o, sy);
}

static inline int hu_row_count(void *ctx, const kth_val_t *c, int n)
{
    if (n > 0 && c[0].t == KTH_INT)
        *(int64_t *)ctx = c[0].i;
    return 0;
}

/* SELECT COUNT(*) FROM table (-1 on error). */
static inline int64_t hu_count(kth_db_t *db, const char *table)
{
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM %s", table);
    int64_t n = -1;
    if (kth_exec(db, sql, NULL, 0, hu_row_count, &n))
        return -1;
    return n;
}

/* Adds run i of the synthetic history with its commit and time (0 or the error). */
static inline int hu_add_run(kth_db_t *db, const kth_synth_t *sy, size_t i, int *added)
{
    size_t len = 0;
    char *json = kth_synth_run_json(sy, i, &len);
    if (!json)
        return KT_ENOMEM;
    char when[32];
    int64_t t = sy->h.runs[i].when;
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    kth_run_info_t info = {.commit = sy->h.runs[i].commit, .branch = "main", .when = when, .machine = "synth"};
    int64_t id;
    char err[512];
    int rc = kth_add_json(db, json, len, &info, &id, added, err, sizeof err);
    if (rc)
        fprintf(stderr, "add: %s\n", err);
    free(json);
    return rc;
}

/* The history's `show -f json` and `check -f json` text (malloc'd), for comparing two stores. */
static inline char *hu_dump(kth_db_t *db)
{
    kth_history_t h;
    if (kth_load(db, NULL, &h))
        return NULL;
    kth_check_result_t r;
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!kth_check(&h, kth_db_samples_fn, db, NULL, &r)) {
        kth_print_show(f, &h, NULL, KTH_FMT_JSON, NULL);
        kth_print_check(f, &h, &r, KTH_FMT_JSON, NULL);
        kth_check_free(&r);
    }
    fclose(f);
    kth_history_free(&h);
    return buf;
}

#endif
