/* test_run_inflight.c — device work in flight when the program dies is counted as lost (issue 39.1): under
 * `ktiming run -o`, a program that handed kernels to the device that cannot complete and then segfaults or is
 * SIGKILLed gets a snapshot where each such kernel has exactly its dispatches dropped as "in flight at exit",
 * none counted, and `ended` saying how it died. Built twice: OpenCL (CLCRASHPROG: a plain OpenCL program on the
 * machine's driver, kernels gated by a user event it never sets; skips without an OpenCL device) and CUDA
 * (CUCRASHPROG: against the driver test double, spans on a held stream, after spans that completed and were
 * recorded: those exactly counted, none dropped). Built a third time for an unmodified CUDA program (CUPTICRASHPROG:
 * it loads the CUPTI injection library as the driver does, against the CUPTI test double, and dies once the
 * library's flusher delivered CUPTI's records): every delivered record survives, exactly counted, nothing lost in
 * flight (issue 36.4; the H200 run's "no snapshot" came before run's arena). Counts only. */
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

#define N_A 3 /* first in-flight kernel's dispatches (OpenCL: gated_a; CUDA: cu_done, completed) */
#define N_B 5 /* second in-flight kernel's (OpenCL: gated_b; CUDA: cu_held) */

#if defined(CUPTICRASHPROG)
#define PROG CUPTICRASHPROG
#define BACKEND KT_BACKEND_CUDA
#elif defined(CUCRASHPROG)
#define PROG CUCRASHPROG
#define BACKEND KT_BACKEND_CUDA
#else
#define PROG CLCRASHPROG
#define BACKEND KT_BACKEND_OPENCL
#endif

/* Sanitizer runtimes (the CUDA program is built with them) catch SIGSEGV themselves and exit otherwise. */
static const char kAsan[] = "ASAN_OPTIONS=handle_segv=0:handle_abort=0:detect_leaks=0";

static int g_skip; /* no OpenCL device: every case skips */

/* name: `counted` dispatches recorded and `lost` dropped, all of them in flight at exit. */
static void check_kernel(const kt_snapshot_t *s, const char *name, uint64_t counted, uint64_t lost)
{
    const kt_kernel_timing_t *t = kt_snapshot_find(s, name, BACKEND, NULL);
    if (!t)
        fprintf(stderr, "%s: no entry\n", name);
    assert_non_null(t);
    assert_int_equal(t->dispatch_count, counted);
    assert_int_equal(t->dropped, lost);
    assert_int_equal(t->dropped_by[KT_DROP_IN_FLIGHT_AT_EXIT], lost);
}

static void check_death(const char *mode, int status, const char *ended)
{
    if (g_skip)
        skip();
    char *dir = ktt_tmpdir("runinflight");
    assert_non_null(dir);
    char *out = ktt_path(dir, "out.json"), *errf = ktt_path(dir, "stderr.txt"), na[16], nb[16];
    assert_non_null(out);
    assert_non_null(errf);
    snprintf(na, sizeof na, "%d", N_A);
    snprintf(nb, sizeof nb, "%d", N_B);
    char *argv[] = {(char *)KT_CLI, (char *)"run",    (char *)"-o", out, (char *)"-f", (char *)"none",
                    (char *)"--",   (char *)PROG, (char *)mode, na, nb, NULL};
    const char *env[] = {kAsan, NULL};
    assert_int_equal(ktt_run(argv, &(ktt_spawn_t){.out = KTT_DEVNULL, .err = errf, .env = env}), status);
    /* run's line says what was lost, not only what was recovered */
    char *said = ktt_read_file(errf, NULL), want[64];
#if defined(CUPTICRASHPROG)
    snprintf(want, sizeof want, " recovered from its memory\n"); /* and nothing "lost in flight" */
#elif defined(CUCRASHPROG)
    snprintf(want, sizeof want, ", %d dispatches lost in flight\n", N_B);
#else
    snprintf(want, sizeof want, ", %d dispatches lost in flight\n", N_A + N_B);
#endif
    assert_non_null(said);
    if (!strstr(said, want))
        fprintf(stderr, "run said: %s", said);
    assert_non_null(strstr(said, want));
    free(said);
    kt_snapshot_t *s = NULL;
    char err[256] = "";
    int rc = kt_snapshot_load(out, NULL, &s, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "load %s: %s\n", out, err);
    assert_int_equal(rc, 0);
    assert_string_equal(s->ended, ended);
#if defined(CUPTICRASHPROG)
    check_kernel(s, "kt_fake_configured", 5, 0); /* what the CUPTI double delivers on a flush */
    check_kernel(s, "kt_fake_cupti_kernel", 1, 0);
#elif defined(CUCRASHPROG)
    check_kernel(s, "cu_done", N_A, 0); /* recorded (kt_flush): nothing of it left in flight */
    check_kernel(s, "cu_held", 0, N_B);
#else
    check_kernel(s, "gated_a", 0, N_A);
    check_kernel(s, "gated_b", 0, N_B);
#endif
    kt_snapshot_free(s);
    ktt_rmtree(dir);
    free(errf);
    free(out);
    free(dir);
}

static void test_segv(void **state) { (void)state; check_death("segv", 128 + SIGSEGV, "signal 11"); }
static void test_sigkill(void **state) { (void)state; check_death("kill", 128 + SIGKILL, "signal 9"); }

int main(void)
{
#ifndef CUCRASHPROG
    char *argv[] = {(char *)PROG, (char *)"probe", (char *)"0", (char *)"0", NULL};
    if (ktt_run(argv, &(ktt_spawn_t){.out = KTT_DEVNULL, .err = KTT_QUIET}) == 77)
        g_skip = 1;
#endif
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_segv), cmocka_unit_test(test_sigkill)};
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    return g_skip && !failed ? 77 : failed;
}
