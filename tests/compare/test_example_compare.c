/* test_example_compare.c — the validation plan end to end: a before_after example (CPU, or OpenCL when built with
 * KT_EXAMPLE_BACKEND "OpenCL") writes two snapshots, `ktiming compare` judges them, and the optimised blur must
 * come out FASTER with a speedup above 1. An example exiting 77 (no device) skips the test. */
#include "support/files.h"
#include "support/proc.h"

#include <cJSON.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#ifndef KT_EXAMPLE_BACKEND
#define KT_EXAMPLE_BACKEND "CPU"
#endif

static int g_skipped;

/* One run of the example and of `ktiming compare`: the blur row's verdict copied to verdict[16]; returns 77 when
 * the example has no device. */
static int run_once(char verdict[16])
{
    char *dir = ktt_tmpdir("example-compare");
    assert_non_null(dir);
    char before[4200], after[4200], out[4200];
    snprintf(before, sizeof before, "%s/before.json", dir);
    snprintf(after, sizeof after, "%s/after.json", dir);
    snprintf(out, sizeof out, "%s/compare.json", dir);

    int rc = ktt_run_to((char *const[]){KT_EXAMPLE_PATH, "--quick", "--dir", dir, NULL}, NULL);
    if (rc == 77) {
        ktt_rmtree(dir);
        free(dir);
        return 77;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(ktt_run_to((char *const[]){KT_CLI_PATH, "compare", before, after, "--format", "json", "-o",
                                                 out, NULL},
                                 NULL),
                     0);
    char *js = ktt_read_file(out, NULL);
    assert_non_null(js);
    cJSON *root = cJSON_Parse(js);
    free(js);
    assert_non_null(root);
    cJSON *blur = NULL, *k;
    cJSON_ArrayForEach(k, cJSON_GetObjectItem(root, "kernels"))
        if (!strcmp(cJSON_GetObjectItem(k, "name")->valuestring, "blur") &&
            !strcmp(cJSON_GetObjectItem(k, "backend")->valuestring, KT_EXAMPLE_BACKEND))
            blur = k;
    assert_non_null(blur);
    double lo = cJSON_GetObjectItem(blur, "ci_lo")->valuedouble, hi = cJSON_GetObjectItem(blur, "ci_hi")->valuedouble;
    double speedup = cJSON_GetObjectItem(blur, "speedup_median")->valuedouble;
    snprintf(verdict, 16, "%s", cJSON_GetObjectItem(blur, "verdict")->valuestring);
    print_message("blur: %s, speedup %.2fx [%.2fx, %.2fx]\n", verdict, speedup, lo, hi);
    /* compare's own output agrees with itself whatever the noise: a FASTER verdict has its median and interval
     * above 1, a SLOWER one below (which try says FASTER is the machine's load: see below) */
    if (!strcmp(verdict, "FASTER"))
        assert_true(speedup > 1.0 && lo > 1.0);
    if (!strcmp(verdict, "SLOWER"))
        assert_true(speedup < 1.0 && hi < 1.0);
    cJSON_Delete(root);
    ktt_rmtree(dir);
    free(dir);
    return 0;
}

/* The verdict is FASTER. On a loaded machine preemptions can put samples of the fast side among the slow one's (or
 * stall a whole side), and the honest verdict of that try is then UNSURE or even SLOWER: each try is a new
 * measurement, and one of five must decide. */
static void test_example_blur_is_faster(void **state)
{
    (void)state;
    char verdict[16] = "";
    for (int attempt = 0; attempt < 5 && strcmp(verdict, "FASTER"); attempt++)
        if (run_once(verdict) == 77) {
            g_skipped = 1;
            return;
        }
    assert_string_equal(verdict, "FASTER");
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_example_blur_is_faster)};
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    return failed ? failed : g_skipped ? 77 : 0;
}
