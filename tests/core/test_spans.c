/* test_spans.c — a bounded span log per thread: overflow is counted in spans_dropped, never overwrites, never blocks. */
#include "test_util.h"

#include "support/files.h"

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

/* A dispatch naming a queue or thread id never handed out (report core.md item 1): its span stays, on the host track
 * of a known thread, and the snapshot is still written as JSON (it was refused whole with KT_EINVAL). */
static void test_unregistered_ids(void **state)
{
    (void)state;
    kt_reset();
    kt_kernel_id_t k = kt_kernel_intern("bad_ids", KT_BACKEND_OPENCL, NULL);
    assert_int_not_equal(k, 0);
    uint64_t now = kt_now_ns();
    kt_record_dispatch(&(kt_dispatch_t){.kernel = k, .queue = 77, .duration_ns = 10, .start_ns = now,
                                        .end_ns = now + 10});
    kt_record_dispatch(&(kt_dispatch_t){.kernel = k, .thread = 999, .duration_ns = 10, .start_ns = now + 20,
                                        .end_ns = now + 30});
    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    const kt_kernel_timing_t *e = kt_snapshot_find(s, "bad_ids", KT_BACKEND_OPENCL, NULL);
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 2);
    assert_int_equal(s->span_count, 2);
    for (size_t i = 0; i < s->span_count; i++) {
        assert_int_equal(s->spans[i].queue, UINT32_MAX);
        assert_true(s->spans[i].thread < s->thread_count);
    }
    char *dir = ktt_tmpdir("spans-ids");
    assert_non_null(dir);
    char *json = ktt_path(dir, "s.json"), *trace = ktt_path(dir, "s.trace.json");
    assert_int_equal(kt_report_write(json, s, KT_FORMAT_JSON, NULL), 0);
    assert_int_equal(kt_report_write(trace, s, KT_FORMAT_CHROME, NULL), 0);
    size_t len = 0;
    char *text = ktt_read_file(json, &len);
    assert_non_null(text);
    assert_non_null(strstr(text, "\"bad_ids\""));
    free(text);
    free(json);
    free(trace);
    ktt_rmtree(dir);
    free(dir);
    kt_snapshot_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_overflow_counted),
        cmocka_unit_test(test_unregistered_ids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
