/* test_example_compare.c — the validation plan end to end: a before_after example (CPU, or OpenCL when built with
 * KT_EXAMPLE_BACKEND "OpenCL") writes two snapshots, `ktiming compare` judges them, and the optimised blur must
 * come out FASTER with a speedup above 1. An example exiting 77 (no device) skips the test. */
#include "compare/run_util.h"

#include <cJSON.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#ifndef KT_EXAMPLE_BACKEND
#define KT_EXAMPLE_BACKEND "CPU"
#endif

static int g_skipped;

static void test_example_blur_is_faster(void **state)
{
    (void)state;
    char dir[] = "/tmp/kt_example_compare_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char before[4200], after[4200], out[4200];
    snprintf(before, sizeof before, "%s/before.json", dir);
    snprintf(after, sizeof after, "%s/after.json", dir);
    snprintf(out, sizeof out, "%s/compare.json", dir);

    int rc = run_program((char *const[]){KT_EXAMPLE_PATH, "--quick", "--dir", dir, NULL}, NULL);
    if (rc == 77) {
        g_skipped = 1;
        rmdir(dir);
        return;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(run_program((char *const[]){KT_CLI_PATH, "compare", before, after, "--format", "json", "-o",
                                                 out, NULL},
                                 NULL),
                     0);
    char *js = slurp(out);
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
    print_message("blur: %s, speedup %.2fx [%.2fx, %.2fx]\n", cJSON_GetObjectItem(blur, "verdict")->valuestring,
                  cJSON_GetObjectItem(blur, "speedup_median")->valuedouble,
                  cJSON_GetObjectItem(blur, "ci_lo")->valuedouble, cJSON_GetObjectItem(blur, "ci_hi")->valuedouble);
    assert_string_equal(cJSON_GetObjectItem(blur, "verdict")->valuestring, "FASTER");
    assert_true(cJSON_GetObjectItem(blur, "speedup_median")->valuedouble > 1.0);
    assert_true(cJSON_GetObjectItem(blur, "ci_lo")->valuedouble > 1.0);
    cJSON_Delete(root);
    unlink(before);
    unlink(after);
    unlink(out);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_example_blur_is_faster)};
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    return failed ? failed : g_skipped ? 77 : 0;
}
