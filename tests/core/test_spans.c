/* test_spans.c — a bounded span log per thread: overflow is counted in spans_dropped, never overwrites, never blocks. */
#include "test_util.h"

#include <pthread.h>

static void zones(int n)
{
    for (int i = 0; i < n; i++) {
        KT_CPU_BEGIN(z, "spanned");
        KT_CPU_END(z);
    }
}

static void *thread_zones(void *arg)
{
    zones(*(int *)arg);
    return NULL;
}

static void test_overflow_counted(void **state)
{
    (void)state;
    kt_desc_t d;
    memset(&d, 0, sizeof d);
    d.span_capacity = 8;
    assert_int_equal(kt_init(&d), 0);

    zones(20);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *t = kt_snapshot_find(s, "spanned", KT_BACKEND_CPU, NULL);
    assert_non_null(t);
    assert_int_equal(t->dispatch_count, 20); /* aggregates include every dispatch */
    assert_int_equal(s->span_count, 8);      /* the first 8 are kept: never overwritten */
    assert_int_equal(t->spans_dropped, 12);
    assert_int_equal(t->dropped, 0);
    uint64_t first_start = s->spans[0].start_ns;
    for (size_t i = 1; i < s->span_count; i++)
        assert_true(s->spans[i].start_ns >= s->spans[i - 1].start_ns);
    kt_snapshot_free(s);

    /* Still full: the kept spans are the same ones. */
    zones(1);
    s = kt_snapshot();
    assert_int_equal(s->span_count, 8);
    assert_int_equal(s->spans[0].start_ns, first_start);
    assert_int_equal(kt_snapshot_find(s, "spanned", KT_BACKEND_CPU, NULL)->spans_dropped, 13);
    kt_snapshot_free(s);

    /* Another thread has its own log. */
    int n = 5;
    pthread_t th;
    pthread_create(&th, NULL, thread_zones, &n);
    pthread_join(th, NULL);
    s = kt_snapshot();
    assert_int_equal(s->span_count, 13);
    t = kt_snapshot_find(s, "spanned", KT_BACKEND_CPU, NULL);
    assert_int_equal(t->dispatch_count, 26);
    assert_int_equal(t->spans_dropped, 13);
    kt_snapshot_free(s);

    /* A reset empties the logs. */
    kt_reset();
    zones(5);
    s = kt_snapshot();
    assert_int_equal(s->span_count, 5);
    assert_int_equal(kt_snapshot_find(s, "spanned", KT_BACKEND_CPU, NULL)->spans_dropped, 0);
    kt_snapshot_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_overflow_counted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
