/* test_dlreload.c — the kt_record name cache across dlclose/dlopen: two plugins, each recording its own literal,
 * loaded one after the other at the same address, give two kernels with their own counts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <ktiming.h>

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef const char *(*name_fn)(void);
typedef void (*record_fn)(unsigned);

/* Loads path, records n dispatches through it, unloads it; the address of its literal into *where. */
static int run_plugin(const char *path, unsigned n, const char **where)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
        return -1;
    }
    name_fn name = (name_fn)dlsym(h, "plugin_name");
    record_fn rec = (record_fn)dlsym(h, "plugin_record");
    if (!name || !rec) {
        dlclose(h);
        return -1;
    }
    *where = name();
    rec(n);
    return dlclose(h);
}

static void test_two_plugins_one_address(void **state)
{
    (void)state;
    const char *a = NULL, *b = NULL;
    assert_int_equal(run_plugin(KT_PLUGIN_A, 3, &a), 0);
    assert_int_equal(run_plugin(KT_PLUGIN_B, 5, &b), 0);
    if (a != b) {
        fprintf(stderr, "test_dlreload: the loader put the second plugin elsewhere (%p, %p): case not reached\n",
                (const void *)a, (const void *)b);
        skip();
    }
    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    const kt_kernel_timing_t *ka = kt_snapshot_find(s, "kernA", KT_BACKEND_CPU, NULL);
    const kt_kernel_timing_t *kb = kt_snapshot_find(s, "kernB", KT_BACKEND_CPU, NULL);
    assert_non_null(ka);
    assert_non_null(kb);
    assert_int_equal(ka->dispatch_count, 3);
    assert_int_equal(kb->dispatch_count, 5);
    kt_snapshot_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_two_plugins_one_address)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
