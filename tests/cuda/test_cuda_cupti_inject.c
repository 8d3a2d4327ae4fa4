/* test_cuda_cupti_inject.c — the CUPTI injection library builds as a loadable shared object exporting
 * InitializeInjection (what CUDA_INJECTION64_PATH needs); where no CUDA driver can be loaded, calling it reports
 * failure (0) instead of crashing. Its kernel recording has not been run on a GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>
#include <dlfcn.h>

static void test_exports_initialize_injection(void **state)
{
    (void)state;
    const char *path = getenv("KT_TEST_CUPTI_INJECT");
    assert_non_null(path);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        print_message("dlopen: %s\n", dlerror());
    assert_non_null(lib);
    int (*init)(void) = NULL;
    *(void **)&init = dlsym(lib, "InitializeInjection");
    assert_non_null(init);
    /* Internal helpers stay hidden. */
    assert_null(dlsym(lib, "buffer_completed"));

    void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (driver) {
        print_message("a CUDA driver is installed: InitializeInjection is not called by this test\n");
        dlclose(driver);
    } else {
        assert_int_equal(init(), 0);
    }
    dlclose(lib);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_exports_initialize_injection)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
