/* test_run_cupti_crash.c — `ktiming run` of an unmodified CUDA program that dies keeps what CUPTI delivered
 * (issue 36.4): the injection library's flusher thread hands CUPTI's completed records to the recorder while the
 * program runs, and the recorder lives in `run`'s arena, so a program that segfaults or is SIGKILLed after that
 * still gets its snapshot, marked with how it ended. Against the CUPTI test double (cupticrashprog loads the
 * library as the driver does and dies once the records arrived); on a GPU, tests/gpu/run.sh's run-sigkill. Before
 * the arena, a SIGKILLed CUDA program left no snapshot (docs/cuda.md, H200 run). Counts only. */
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

static void check_death(const char *mode, int status, const char *ended)
{
    char *dir = ktt_tmpdir("runcupticrash");
    assert_non_null(dir);
    char *out = ktt_path(dir, "out.json"), *errf = ktt_path(dir, "stderr.txt");
    assert_non_null(out);
    assert_non_null(errf);
    char *argv[] = {(char *)KT_CLI, (char *)"run", (char *)"-o", out, (char *)"-f", (char *)"none", (char *)"--cuda",
                    (char *)"off", (char *)"--", (char *)CUPTICRASHPROG, (char *)mode, NULL};
    const char *env[] = {"KT_TEST_CUPTI_INJECT=" CUPTI_INJECT, "KTIMING_CUPTI_LIBRARY=" FAKE_CUPTI, NULL};
    int rc = ktt_run(argv, &(ktt_spawn_t){.out = KTT_DEVNULL, .err = errf, .env = env});
    if (rc != status) {
        char *said = ktt_read_file(errf, NULL);
        fprintf(stderr, "run exit %d, stderr: %s\n", rc, said ? said : "");
        free(said);
    }
    assert_int_equal(rc, status);
    kt_snapshot_t *s = NULL;
    char err[256] = "";
    int lrc = kt_snapshot_load(out, NULL, &s, err, sizeof err);
    if (lrc != 0)
        fprintf(stderr, "load %s: %s\n", out, err);
    assert_int_equal(lrc, 0);
    assert_string_equal(s->ended, ended);
    /* what the double delivers on a flush (test_cuda_cupti_inject checks each field; here: that it survived) */
    const kt_kernel_timing_t *k = kt_snapshot_find(s, "kt_fake_configured", KT_BACKEND_CUDA, NULL);
    assert_non_null(k);
    assert_int_equal(k->dispatch_count, 5);
    k = kt_snapshot_find(s, "kt_fake_cupti_kernel", KT_BACKEND_CUDA, NULL);
    assert_non_null(k);
    assert_int_equal(k->dispatch_count, 1);
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
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_segv), cmocka_unit_test(test_sigkill)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
