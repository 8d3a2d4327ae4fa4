/* test_run_exit_order.c — `ktiming run` on an unmodified OpenCL program (the default: the interception library
 * preloaded) keeps what is timed late and what a wrapper starts:
 *  - kernels an exit handler runs, registered before the program's first OpenCL call, are in the snapshot (the
 *    exit-time snapshot was written before that handler ran, and they were dropped uncounted);
 *  - kernels timed after the exit-time snapshot file was written (a loader layer registers its writer late) come
 *    from the run arena instead;
 *  - a program started by a shell (which loads libktiming too, through LD_PRELOAD, and records nothing) that dies
 *    with work in flight is recovered from the run arena (the shell had taken the arena: "nothing was timed").
 * Counts only, never durations. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <ktiming.h>
#include <ktiming/analysis.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/files.h"
#include "support/proc.h"
#include "run_cmd.h"

/* ktt_run_cmd (run_cmd.h): its status; the snapshot into *snap (NULL when it cannot be read). */
static int run_mode_to(const char *dir, const char *opencl, const char *const *prog, kt_snapshot_t **snap)
{
    char out[4200], e[256] = "";
    int st = ktt_run_cmd(dir, opencl, prog, out, sizeof out);
    *snap = NULL;
    if (kt_snapshot_load(out, NULL, snap, e, sizeof e) != 0) {
        fprintf(stderr, "load %s: %s\n", out, e);
        *snap = NULL;
    }
    return st;
}

static int run_to(const char *dir, const char *const *prog, kt_snapshot_t **snap)
{
    return run_mode_to(dir, NULL, prog, snap);
}

static void test_exit_handler_kernels(void **state)
{
    (void)state;
    char *dir = ktt_tmpdir("runexitorder");
    assert_non_null(dir);
    const char *prog[] = {CLEXITPROG, "5", "4", NULL};
    kt_snapshot_t *s = NULL;
    assert_int_equal(run_to(dir, prog, &s), 0);
    assert_non_null(s);
    const kt_kernel_timing_t *k = kt_snapshot_find(s, "k", KT_BACKEND_OPENCL, NULL);
    assert_non_null(k);
    assert_int_equal(k->dispatch_count + k->dropped, 5 + 4); /* the exit handler's 4 too */
    assert_string_equal(s->ended, "");
    kt_snapshot_free(s);
    ktt_rmtree(dir);
    free(dir);
}

static void test_shell_started_program_dies(void **state)
{
    (void)state;
    char *dir = ktt_tmpdir("runexitsh");
    assert_non_null(dir);
    char script[4400];
    snprintf(script, sizeof script, "'%s' segv 3 5; exit $?", CLCRASHPROG);
    const char *prog[] = {"/bin/sh", "-c", script, NULL};
    kt_snapshot_t *s = NULL;
    assert_int_equal(run_to(dir, prog, &s), 128 + SIGSEGV);
    assert_non_null(s);
    const kt_kernel_timing_t *a = kt_snapshot_find(s, "gated_a", KT_BACKEND_OPENCL, NULL);
    const kt_kernel_timing_t *b = kt_snapshot_find(s, "gated_b", KT_BACKEND_OPENCL, NULL);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(a->dropped_by[KT_DROP_IN_FLIGHT_AT_EXIT], 3);
    assert_int_equal(b->dropped_by[KT_DROP_IN_FLIGHT_AT_EXIT], 5);
    assert_int_equal(strncmp(s->ended, "status unknown: pid ", 20), 0); /* not run's child: not the shell's status */
    kt_snapshot_free(s);
    ktt_rmtree(dir);
    free(dir);
}

/* As a loader layer (dlopen'ed at the first OpenCL call) the interception library registers its exit writer
 * after the program's exit handler, which then runs after the file is written: what it times is recorded into the
 * run arena (recording is on again after the write), and run reports from there, saying so. Its clFinish is the
 * deterministic witness (the layer's OpenCL backend, stopped at exit, times only some of the commands after it). */
static void test_late_records_from_memory(void **state)
{
    (void)state;
    char *dir = ktt_tmpdir("runexitlate");
    assert_non_null(dir);
    const char *prog[] = {CLEXITPROG, "5", "4", NULL};
    kt_snapshot_t *s = NULL;
    assert_int_equal(run_mode_to(dir, "layer", prog, &s), 0);
    assert_non_null(s);
    const kt_kernel_timing_t *fin = kt_snapshot_find(s, "clFinish", KT_BACKEND_HOST_API, NULL);
    assert_non_null(fin);
    assert_int_equal(fin->dispatch_count, 2); /* main's and the exit handler's */
    const kt_kernel_timing_t *k = kt_snapshot_find(s, "k", KT_BACKEND_OPENCL, NULL);
    assert_non_null(k);
    /* The exit handler's commands the stopped backend does not time are counted as dropped at their enqueue (their
     * context is detaching: in flight at its exit from timing), never lost: all 9 are accounted for. */
    assert_int_equal(k->dispatch_count + k->dropped, 5 + 4);
    assert_int_equal(k->dispatch_count + k->dropped_by[KT_DROP_IN_FLIGHT_AT_EXIT], 5 + 4);
    assert_string_equal(s->ended, "");
    kt_snapshot_free(s);
    char *said = ktt_run_cmd_err(dir);
    assert_non_null(said);
    assert_non_null(strstr(said, "made after the program wrote its timings at exit"));
    free(said);
    ktt_rmtree(dir);
    free(dir);
}

int main(void)
{
    char *probe[] = {(char *)CLEXITPROG, (char *)"0", (char *)"0", NULL};
    if (ktt_run(probe, &(ktt_spawn_t){.out = KTT_DEVNULL, .err = KTT_QUIET}) == 77)
        return 77; /* no OpenCL device: SKIPPED */
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_exit_handler_kernels),
                                       cmocka_unit_test(test_shell_started_program_dies),
                                       cmocka_unit_test(test_late_records_from_memory)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
