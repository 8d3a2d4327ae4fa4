/* test_launch.c — launch configurations (kt_dispatch_t.launch, issue 40.2): the breakdown per entry, its cap and
 * OTHER row, normalisation, errors and dispatches without one, reset, and threads adding up. */
#include "test_util.h"

#include <pthread.h>

/* One successful dispatch of kernel k lasting ns with the given configuration. */
static void dispatch(kt_kernel_id_t k, uint64_t ns, uint32_t kind, uint32_t dims, uint64_t g0, uint64_t g1,
                     uint64_t l0, uint64_t l1)
{
    kt_dispatch_t d;
    memset(&d, 0, sizeof d);
    d.kernel = k;
    d.duration_ns = ns;
    d.launch.kind = kind;
    d.launch.dims = dims;
    d.launch.size[0] = g0;
    d.launch.size[1] = g1;
    d.launch.local[0] = l0;
    d.launch.local[1] = l1;
    kt_record_dispatch(&d);
}

static const kt_config_timing_t *row(const kt_kernel_timing_t *t, uint32_t kind, uint64_t g0, uint64_t l0)
{
    for (uint32_t i = 0; i < t->config_count; i++)
        if (t->configs[i].launch.kind == kind && t->configs[i].launch.size[0] == g0 &&
            t->configs[i].launch.local[0] == l0)
            return &t->configs[i];
    return NULL;
}

static void test_breakdown(void **state)
{
    (void)state;
    kt_reset();
    kt_kernel_id_t k = kt_kernel_intern("scale", KT_BACKEND_OPENCL, "dev");
    for (int i = 0; i < 3; i++)
        dispatch(k, 100 + (uint64_t)i, KT_LAUNCH_ITEMS, 2, 1024, 768, 16, 16);
    dispatch(k, 500, KT_LAUNCH_ITEMS, 1, 4096, 0, 64, 0);
    dispatch(k, 700, KT_LAUNCH_ITEMS, 1, 4096, 0, 0, 0); /* local NULL: the driver chose */
    dispatch(k, 900, KT_LAUNCH_ITEMS, 1, 4096, 55, 0, 99); /* past dims: ignored, the same as the one above */
    dispatch(k, 50, 0, 0, 0, 0, 0, 0);                     /* none: in the aggregates only */
    kt_record_dispatch(&(kt_dispatch_t){.kernel = k, .duration_ns = 60}); /* likewise */
    kt_dispatch_t e = {.kernel = k, .flags = KT_SPAN_ERROR, .launch = {.kind = KT_LAUNCH_ITEMS, .dims = 1}};
    kt_record_dispatch(&e); /* an error: counted in errors, in no configuration */
    dispatch(k, 80, KT_LAUNCH_OTHER, 1, 1, 0, 1, 0); /* a kind a backend must not pass: none */
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *t = kt_snapshot_find(s, "scale", KT_BACKEND_OPENCL, "dev");
    assert_non_null(t);
    assert_int_equal(t->dispatch_count, 9);
    assert_int_equal(t->errors, 1);
    assert_int_equal(t->config_count, 3);
    const kt_config_timing_t *a = row(t, KT_LAUNCH_ITEMS, 1024, 16);
    assert_non_null(a);
    assert_int_equal(a->launch.dims, 2);
    assert_int_equal(a->launch.size[1], 768);
    assert_int_equal(a->launch.local[1], 16);
    assert_int_equal(a->dispatch_count, 3);
    assert_int_equal(a->total_ns, 303);
    assert_int_equal(a->min_ns, 100);
    assert_int_equal(a->max_ns, 102);
    const kt_config_timing_t *b = row(t, KT_LAUNCH_ITEMS, 4096, 64);
    assert_non_null(b);
    assert_int_equal(b->dispatch_count, 1);
    const kt_config_timing_t *c = row(t, KT_LAUNCH_ITEMS, 4096, 0);
    assert_non_null(c);
    assert_int_equal(c->dispatch_count, 2);
    assert_int_equal(c->total_ns, 1600);
    assert_int_equal(c->launch.size[1], 0);
    assert_int_equal(c->launch.local[1], 0);
    /* largest total first */
    assert_ptr_equal(c, &t->configs[0]);
    assert_ptr_equal(b, &t->configs[1]);
    kt_snapshot_free(s);

    kt_reset(); /* a new generation: no configuration left */
    kt_record_dispatch(&(kt_dispatch_t){.kernel = k, .duration_ns = 10});
    s = kt_snapshot();
    t = kt_snapshot_find(s, "scale", KT_BACKEND_OPENCL, "dev");
    assert_non_null(t);
    assert_int_equal(t->config_count, 0);
    assert_null(t->configs);
    dispatch(k, 10, KT_LAUNCH_GROUPS, 3, 8, 4, 0, 0);
    kt_snapshot_free(s);
    s = kt_snapshot();
    t = kt_snapshot_find(s, "scale", KT_BACKEND_OPENCL, "dev");
    assert_int_equal(t->config_count, 1);
    assert_int_equal(t->configs[0].launch.kind, KT_LAUNCH_GROUPS);
    assert_int_equal(t->configs[0].dispatch_count, 1);
    kt_snapshot_free(s);
}

/* Past KT_LAUNCH_CONFIGS_MAX configurations the rest add up in one OTHER row: nothing is lost. */
static void test_cap(void **state)
{
    (void)state;
    kt_reset();
    kt_kernel_id_t k = kt_kernel_intern("many", KT_BACKEND_CUDA, "dev");
    uint32_t n = KT_LAUNCH_CONFIGS_MAX + 8;
    for (uint32_t i = 0; i < n; i++) /* configuration i: grid i+1, twice, lasting 1000 + i */
        for (int r = 0; r < 2; r++)
            dispatch(k, 1000 + i, KT_LAUNCH_GROUPS, 1, i + 1, 0, 128, 0);
    dispatch(k, 5, KT_LAUNCH_INDIRECT, 3, 7, 7, 7, 7); /* indirect: sizes dropped, past the cap -> OTHER */
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *t = kt_snapshot_find(s, "many", KT_BACKEND_CUDA, "dev");
    assert_non_null(t);
    assert_int_equal(t->config_count, KT_LAUNCH_CONFIGS_MAX + 1);
    uint64_t sum = 0;
    for (uint32_t i = 0; i < t->config_count; i++)
        sum += t->configs[i].dispatch_count;
    assert_int_equal(sum, t->dispatch_count);
    const kt_config_timing_t *o = &t->configs[KT_LAUNCH_CONFIGS_MAX];
    assert_int_equal(o->launch.kind, KT_LAUNCH_OTHER);
    assert_int_equal(o->dispatch_count, 8 * 2 + 1);
    assert_int_equal(o->min_ns, 5);
    assert_int_equal(o->max_ns, 1000 + n - 1);
    for (uint32_t i = 0; i < KT_LAUNCH_CONFIGS_MAX; i++) {
        assert_int_equal(t->configs[i].launch.kind, KT_LAUNCH_GROUPS);
        assert_int_equal(t->configs[i].dispatch_count, 2);
        if (i)
            assert_true(t->configs[i - 1].total_ns >= t->configs[i].total_ns);
    }
    kt_snapshot_free(s);
}

static kt_kernel_id_t g_k;

static void *worker(void *arg)
{
    uint64_t local = (uint64_t)(uintptr_t)arg;
    for (int i = 0; i < 100; i++)
        dispatch(g_k, 10, KT_LAUNCH_ITEMS, 1, 256, 0, local, 0);
    return NULL;
}

/* Threads record into their own shards; a snapshot adds the same configuration up across them. */
static void test_threads(void **state)
{
    (void)state;
    kt_reset();
    g_k = kt_kernel_intern("shared", KT_BACKEND_OPENCL, "dev");
    pthread_t th[4];
    for (uintptr_t i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)(i % 2 ? 32u : 64u)), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *t = kt_snapshot_find(s, "shared", KT_BACKEND_OPENCL, "dev");
    assert_non_null(t);
    assert_int_equal(t->config_count, 2);
    assert_int_equal(t->configs[0].dispatch_count, 200);
    assert_int_equal(t->configs[1].dispatch_count, 200);
    assert_int_equal(t->configs[0].total_ns, 2000);
    kt_snapshot_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_breakdown),
        cmocka_unit_test(test_cap),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
