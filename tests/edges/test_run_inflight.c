/* test_run_inflight.c — device work in flight when the program dies is counted as lost (issue 39.1): under
 * `ktiming run -o`, an OpenCL program that enqueued kernels gated by a user event it never sets and then
 * segfaults or is SIGKILLed gets a snapshot where each gated kernel has exactly its enqueued dispatches dropped
 * as "in flight at exit", none counted, and `ended` saying how it died. Counts only. Skips without an OpenCL
 * device. */
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

#include "common/files.h"
#include "common/proc.h"

#define N_A 3 /* gated_a's dispatches */
#define N_B 5 /* gated_b's */

static int g_skip; /* no OpenCL device: every case skips */

static void check_kernel(const kt_snapshot_t *s, const char *name, uint64_t n)
{
    const kt_kernel_timing_t *t = kt_snapshot_find(s, name, KT_BACKEND_OPENCL, NULL);
    if (!t)
        fprintf(stderr, "%s: no entry\n", name);
    assert_non_null(t);
    assert_int_equal(t->dispatch_count, 0);
    assert_int_equal(t->dropped, n);
    assert_int_equal(t->dropped_by[KT_DROP_IN_FLIGHT_AT_EXIT], n);
}

static void check_death(const char *mode, int status, const char *ended)
{
    if (g_skip)
        skip();
    char *dir = ktt_tmpdir("runinflight");
    assert_non_null(dir);
    char out[4200], na[16], nb[16];
    snprintf(out, sizeof out, "%s/out.json", dir);
    snprintf(na, sizeof na, "%d", N_A);
    snprintf(nb, sizeof nb, "%d", N_B);
    char *argv[] = {(char *)KT_CLI, (char *)"run",    (char *)"-o", out, (char *)"-f", (char *)"none",
                    (char *)"--",   (char *)CLCRASHPROG, (char *)mode, na, nb, NULL};
    assert_int_equal(ktt_run(argv, &(ktt_spawn_t){.out = KTT_DEVNULL, .err = KTT_QUIET}), status);
    kt_snapshot_t *s = NULL;
    char err[256] = "";
    int rc = kt_snapshot_load(out, &s, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "load %s: %s\n", out, err);
    assert_int_equal(rc, 0);
    assert_string_equal(s->ended, ended);
    check_kernel(s, "gated_a", N_A);
    check_kernel(s, "gated_b", N_B);
    kt_snapshot_free(s);
    ktt_rmtree(dir);
    free(dir);
}

static void test_segv(void **state) { (void)state; check_death("segv", 128 + SIGSEGV, "signal 11"); }
static void test_sigkill(void **state) { (void)state; check_death("kill", 128 + SIGKILL, "signal 9"); }

int main(void)
{
    char *argv[] = {(char *)CLCRASHPROG, (char *)"probe", (char *)"0", (char *)"0", NULL};
    if (ktt_run(argv, &(ktt_spawn_t){.out = KTT_DEVNULL, .err = KTT_QUIET}) == 77)
        g_skip = 1;
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_segv), cmocka_unit_test(test_sigkill)};
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    return g_skip && !failed ? 77 : failed;
}
