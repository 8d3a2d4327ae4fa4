/* test_cpu_dispatch.c — kt_cpu_dispatch_2d covers every row once on the pool and records exactly one dispatch. */
#include "test_util.h"

#include <pthread.h>

/* Per-row hit counters and the width each call saw. */
typedef struct rows_t {
    _Atomic uint32_t *hits; /* one per row */
    uint32_t width;         /* expected width */
    _Atomic int bad_width;  /* calls that saw another width */
    _Atomic int calls;      /* row-band calls */
} rows_t;

static void mark(uint32_t y0, uint32_t y1, uint32_t width, void *user)
{
    rows_t *r = user;
    if (width != r->width)
        atomic_fetch_add(&r->bad_width, 1);
    atomic_fetch_add(&r->calls, 1);
    for (uint32_t y = y0; y < y1; y++)
        atomic_fetch_add(&r->hits[y], 1);
}

static void check_cover(uint32_t width, uint32_t height, const char *name)
{
    rows_t r;
    r.hits = calloc(height, sizeof *r.hits);
    r.width = width;
    atomic_init(&r.bad_width, 0);
    atomic_init(&r.calls, 0);
    assert_int_equal(kt_cpu_dispatch_2d(name, width, height, mark, &r), 0);
    for (uint32_t y = 0; y < height; y++)
        assert_int_equal(atomic_load(&r.hits[y]), 1);
    assert_int_equal(atomic_load(&r.bad_width), 0);
    assert_true(atomic_load(&r.calls) >= 1);
    free(r.hits);
}

static uint64_t count_of(const char *name)
{
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *t = kt_snapshot_find(s, name, KT_BACKEND_CPU, "host");
    uint64_t n = t ? t->dispatch_count : 0;
    kt_snapshot_free(s);
    return n;
}

static void test_threads_config(void **state)
{
    (void)state;
    const char *e = getenv("KTIMING_CPU_THREADS");
    int n = kt_cpu_threads();
    assert_true(n >= 1);
    if (e)
        assert_int_equal(n, atoi(e));
}

static void test_covers_every_row_once(void **state)
{
    (void)state;
    kt_reset();
    check_cover(7, 1000, "cover");
    assert_int_equal(count_of("cover"), 1); /* one dispatch, not one per band */
    check_cover(3, 1, "cover");
    check_cover(1, 5, "cover");
    check_cover(640, 4097, "cover");
    assert_int_equal(count_of("cover"), 4);
    kt_snapshot_t *s = kt_snapshot();
    assert_int_equal(s->span_count, 4);
    kt_snapshot_free(s);
}

static void never(uint32_t y0, uint32_t y1, uint32_t width, void *user)
{
    (void)y0;
    (void)y1;
    (void)width;
    atomic_fetch_add((_Atomic int *)user, 1);
}

static void test_zero_size_records_nothing(void **state)
{
    (void)state;
    kt_reset();
    _Atomic int calls = 0;
    assert_int_equal(kt_cpu_dispatch_2d("empty", 0, 100, never, &calls), 0);
    assert_int_equal(kt_cpu_dispatch_2d("empty", 100, 0, never, &calls), 0);
    assert_int_equal(atomic_load(&calls), 0);
    kt_snapshot_t *s = kt_snapshot();
    assert_null(kt_snapshot_find(s, "empty", KT_BACKEND_CPU, NULL));
    assert_int_equal(s->count, 0);
    kt_snapshot_free(s);
    assert_int_equal(kt_cpu_dispatch_2d("empty", 1, 1, NULL, NULL), KT_EINVAL);
    assert_int_equal(kt_cpu_dispatch_2d(NULL, 1, 1, never, &calls), KT_EINVAL);
}

static void test_disabled_still_runs(void **state)
{
    (void)state;
    kt_reset();
    kt_disable();
    check_cover(4, 64, "disabled_run");
    kt_enable();
    assert_int_equal(count_of("disabled_run"), 0);
}

/* A row function that dispatches again: the inner call runs inline and is recorded too. */
static void nested(uint32_t y0, uint32_t y1, uint32_t width, void *user)
{
    (void)width;
    (void)user;
    for (uint32_t y = y0; y < y1; y++)
        check_cover(2, 3, "inner");
}

static void test_nested_dispatch(void **state)
{
    (void)state;
    kt_reset();
    assert_int_equal(kt_cpu_dispatch_2d("outer", 1, 8, nested, NULL), 0);
    assert_int_equal(count_of("outer"), 1);
    assert_int_equal(count_of("inner"), 8);
}

static void *concurrent_dispatcher(void *arg)
{
    (void)arg;
    for (int i = 0; i < 20; i++)
        check_cover(5, 333, "concurrent");
    return NULL;
}

static void test_concurrent_dispatchers(void **state)
{
    (void)state;
    kt_reset();
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, concurrent_dispatcher, NULL);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(count_of("concurrent"), 60);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_config),
        cmocka_unit_test(test_covers_every_row_once),
        cmocka_unit_test(test_zero_size_records_nothing),
        cmocka_unit_test(test_disabled_still_runs),
        cmocka_unit_test(test_nested_dispatch),
        cmocka_unit_test(test_concurrent_dispatchers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
