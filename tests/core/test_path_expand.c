/* test_path_expand.c — kt_path_expand (src/core/atexit.c -> kt__path_expand in service.c): %p %h %r %% expanded,
 * unknown conversions kept, KT_EFULL and KT_EINVAL; needs only the core library (runs without the analysis one). */
#include "test_util.h"

#include <stdio.h>
#include <unistd.h>

static void test_conversions(void **state)
{
    (void)state;
    char out[256], want[256];
    assert_int_equal(kt_path_expand("p%p-%x", 42, out, sizeof out), 0);
    assert_string_equal(out, "p42-%x"); /* unknown conversions kept */
    assert_int_equal(kt_path_expand("a%%p", 42, out, sizeof out), 0);
    assert_string_equal(out, "a%p");
    assert_int_equal(kt_path_expand("%p", -1, out, sizeof out), 0);
    snprintf(want, sizeof want, "%ld", (long)getpid());
    assert_string_equal(out, want); /* pid < 0: the calling process's */
    assert_int_equal(kt_path_expand("trail%", 1, out, sizeof out), 0);
    assert_string_equal(out, "trail%");
}

static void test_rank_and_host(void **state)
{
    (void)state;
    char out[256];
    unsetenv("OMPI_COMM_WORLD_RANK"), unsetenv("PMI_RANK"), unsetenv("PMIX_RANK"), unsetenv("SLURM_PROCID");
    assert_int_equal(kt_path_expand("r%r", 7, out, sizeof out), 0);
    assert_string_equal(out, "r0"); /* no rank variable: 0 */
    setenv("OMPI_COMM_WORLD_RANK", "5", 1);
    assert_int_equal(kt_path_expand("r%r.json", 7, out, sizeof out), 0);
    assert_string_equal(out, "r5.json");
    unsetenv("OMPI_COMM_WORLD_RANK");
    assert_int_equal(kt_path_expand("%h", 7, out, sizeof out), 0);
    assert_true(out[0] != 0);
    assert_null(strchr(out, '/')); /* a host name never adds a directory level */
}

static void test_errors(void **state)
{
    (void)state;
    char out[8];
    memset(out, 'x', sizeof out);
    assert_int_equal(kt_path_expand("%p", 42, out, 2), KT_EFULL);
    assert_string_equal(out, ""); /* nothing half-written */
    assert_int_equal(kt_path_expand("1234567", 1, out, sizeof out), 0);
    assert_int_equal(kt_path_expand("12345678", 1, out, sizeof out), KT_EFULL);
    assert_int_equal(kt_path_expand(NULL, 1, out, sizeof out), KT_EINVAL);
    assert_int_equal(kt_path_expand("a", 1, NULL, sizeof out), KT_EINVAL);
    assert_int_equal(kt_path_expand("a", 1, out, 0), KT_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conversions),
        cmocka_unit_test(test_rank_and_host),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
