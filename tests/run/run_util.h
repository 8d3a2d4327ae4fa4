/* run_util.h — helpers of the `ktiming run` tests: run a program capturing stdout, and run one alone and under
 * `ktiming run -o out.json` checking the program's stdout and status are unchanged. */
#ifndef KT_TESTS_RUN_UTIL_H
#define KT_TESTS_RUN_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "support/files.h"
#include "support/proc.h"
#include <ktiming.h>
#include <ktiming/analysis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *ru_dir; /* scratch directory of the test */

/* Creates the scratch directory; 0 or -1. */
static inline int ru_setup(void)
{
    ru_dir = ktt_tmpdir("run");
    return ru_dir ? 0 : -1;
}

static inline void ru_teardown(void)
{
    ktt_rmtree(ru_dir);
    free(ru_dir);
    ru_dir = NULL;
}

/* The two as a cmocka group's setup and teardown. */
static inline int ru_group_setup(void **state)
{
    (void)state;
    return ru_setup();
}

static inline int ru_group_teardown(void **state)
{
    (void)state;
    ru_teardown();
    return 0;
}

/* A path in the scratch directory (one of 4 rotating buffers). */
static inline char *ru_path(const char *name)
{
    static char buf[4][4096];
    static int i;
    char *p = buf[i++ % 4];
    snprintf(p, sizeof buf[0], "%s/%s", ru_dir, name);
    return p;
}

/* Runs argv, returns its stdout (malloc) and *status (exit code, or 128+signal); stderr passes through. */
static inline char *ru_run(char *const argv[], int *status)
{
    char *out = ktt_run_capture(argv, NULL, status);
    assert_non_null(out);
    return out;
}

/* The program (prog + args, NULL-terminated) alone, then under `ktiming run -o out.json <kt_args> -- ...`: same
 * stdout and status 0 both times. Returns the snapshot, or NULL when the timed run wrote none (it then exits
 * 125: -o was asked for and nothing was timed). */
static inline kt_snapshot_t *ru_run_both(const char *const prog[], const char *const kt_args[])
{
    char *argv[40];
    int a = 0, st_alone = -1, st_timed = -1;
    for (int i = 0; prog[i] && a < 16; i++)
        argv[a++] = (char *)prog[i];
    argv[a] = NULL;
    char *alone = ru_run(argv, &st_alone);
    assert_int_equal(st_alone, 0);

    char *out = ru_path("out.json");
    unlink(out);
    a = 0;
    argv[a++] = KT_CLI;
    argv[a++] = "run";
    argv[a++] = "-o";
    argv[a++] = out;
    for (int i = 0; kt_args && kt_args[i] && a < 20; i++)
        argv[a++] = (char *)kt_args[i];
    argv[a++] = "--";
    for (int i = 0; prog[i] && a < 39; i++)
        argv[a++] = (char *)prog[i];
    argv[a] = NULL;
    char *timed = ru_run(argv, &st_timed);
    if (strcmp(alone, timed) != 0)
        fail_msg("stdout differs under ktiming run\n--- alone:\n%s\n--- timed:\n%s", alone, timed);
    free(alone);
    free(timed);
    if (access(out, R_OK) != 0) {
        assert_int_equal(st_timed, 125);
        return NULL;
    }
    assert_int_equal(st_timed, 0);
    kt_snapshot_t *snap = NULL;
    char err[256];
    if (kt_snapshot_load(out, NULL, &snap, err, sizeof err) != 0)
        fail_msg("snapshot: %s", err);
    return snap;
}

/* The entry of a kernel, or NULL. */
static inline const kt_kernel_timing_t *ru_find(const kt_snapshot_t *s, const char *name, kt_backend_t backend)
{
    for (size_t i = 0; i < s->count; i++)
        if (s->entries[i].backend == backend && !strcmp(s->entries[i].name, name))
            return &s->entries[i];
    return NULL;
}

#endif
