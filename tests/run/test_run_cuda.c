/* test_run_cuda.c — `ktiming run --cuda`: what the program's environment holds. `on`/`auto` point
 * CUDA_INJECTION64_PATH at an existing library exporting InitializeInjection, `off` leaves it unset, a value the
 * user set is kept, `on` without the library is an error. No CUDA program runs here (no driver): the program
 * is envprog, which prints the variable. */
#include "run_util.h"

#include <dlfcn.h>
#include <sys/stat.h>

/* envprog under `ktiming run -f none <mode args> --`; returns its stdout line (malloc, no newline). */
static char *inject_seen(const char *mode, int *status)
{
    char *argv[] = {KT_CLI, "run", "-f", "none", "--cuda", (char *)mode, "--", ENVPROG, NULL};
    char *out = ru_run(argv, status);
    out[strcspn(out, "\n")] = '\0';
    return out;
}

#ifdef KT_HAVE_CUPTI_INJECT
static void assert_injection_library(const char *path)
{
    struct stat st;
    assert_int_equal(path[0], '/');
    assert_int_equal(stat(path, &st), 0);
    assert_non_null(strstr(path, "libktiming_cupti.so"));
    void *lib = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
    if (!lib)
        fail_msg("dlopen %s: %s", path, dlerror());
    assert_non_null(dlsym(lib, "InitializeInjection"));
    dlclose(lib);
}
#endif

static void test_on_and_auto_set_the_library(void **state)
{
    (void)state;
#ifndef KT_HAVE_CUPTI_INJECT
    skip();
#else
    unsetenv("CUDA_INJECTION64_PATH");
    unsetenv("KTIMING_INTERCEPT_DIR");
    const char *modes[] = {"on", "auto"};
    for (int i = 0; i < 2; i++) {
        int st = -1;
        char *seen = inject_seen(modes[i], &st);
        assert_int_equal(st, 0);
        assert_string_equal(seen, KT_CUPTI_INJECT);
        assert_injection_library(seen);
        free(seen);
    }
#endif
}

static void test_off_leaves_it_unset(void **state)
{
    (void)state;
    unsetenv("CUDA_INJECTION64_PATH");
    int st = -1;
    char *seen = inject_seen("off", &st);
    assert_int_equal(st, 0);
    assert_string_equal(seen, "(unset)");
    free(seen);
}

static void test_user_value_is_kept(void **state)
{
    (void)state;
    const char *modes[] = {"on", "auto", "off"};
    setenv("CUDA_INJECTION64_PATH", "/opt/someone/else/libinject.so", 1);
    for (int i = 0; i < 3; i++) {
        int st = -1;
        char *seen = inject_seen(modes[i], &st);
        assert_int_equal(st, 0);
        assert_string_equal(seen, "/opt/someone/else/libinject.so");
        free(seen);
    }
    unsetenv("CUDA_INJECTION64_PATH");
}

/* Where the library is missing: `on` refuses to run the program (125, nothing printed), `auto` runs it without. */
static void test_on_without_library_fails(void **state)
{
    (void)state;
    unsetenv("CUDA_INJECTION64_PATH");
    setenv("KTIMING_INTERCEPT_DIR", ru_dir, 1); /* an empty directory: no shim in it */
    int st = -1;
    char *seen = inject_seen("on", &st);
    assert_int_equal(st, 125);
    assert_string_equal(seen, "");
    free(seen);
    seen = inject_seen("auto", &st);
    assert_int_equal(st, 0);
    assert_string_equal(seen, "(unset)");
    free(seen);
    unsetenv("KTIMING_INTERCEPT_DIR");
}

static void test_bad_mode_is_usage_error(void **state)
{
    (void)state;
    int st = -1;
    char *seen = inject_seen("layer", &st);
    assert_int_equal(st, 125); /* run's own usage error, not a status the program could return */
    assert_string_equal(seen, "");
    free(seen);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_on_and_auto_set_the_library), cmocka_unit_test(test_off_leaves_it_unset),
        cmocka_unit_test(test_user_value_is_kept),          cmocka_unit_test(test_on_without_library_fails),
        cmocka_unit_test(test_bad_mode_is_usage_error),
    };
    return cmocka_run_group_tests(tests, ru_group_setup, ru_group_teardown);
}
