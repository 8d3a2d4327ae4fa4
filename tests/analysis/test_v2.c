/* test_v2.c — schema 2 members through JSON and back (exact sums past 2^64, bytes, last errors, drops by reason,
 * pid and rank), version-1 files read with derived sums, and the consistency rules the reader enforces. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <ktiming.h>
#include <ktiming/analysis.h>

static char *render_as(const kt_snapshot_t *s, kt_format_t format)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(kt_report_print(f, s, format, NULL), 0);
    fclose(f);
    return buf;
}

static char *render(const kt_snapshot_t *s) { return render_as(s, KT_FORMAT_JSON); }

static void test_roundtrip_v2(void **state)
{
    (void)state;
    kt_reset();
    kt_kernel_id_t k = kt_kernel_intern("v2", KT_BACKEND_OPENCL, "dev");
    kt_record_dispatch(&(kt_dispatch_t){.kernel = k, .duration_ns = UINT64_MAX - 1});
    kt_record_dispatch(&(kt_dispatch_t){.kernel = k, .duration_ns = 7});
    kt_record_drop(k, KT_DROP_IN_FLIGHT_AT_EXIT);
    kt_record_drop(k, KT_DROP_RING_FULL);
    kt_record_drop(k, KT_DROP_UNSPECIFIED);
    kt_record_error(k, "CL_OUT_OF_RESOURCES");
    kt_kernel_id_t w = kt_kernel_intern("clEnqueueWriteBuffer", KT_BACKEND_OPENCL, "dev");
    kt_dispatch_t d;
    memset(&d, 0, sizeof d);
    d.kernel = w;
    d.duration_ns = 10;
    d.bytes = 1u << 20;
    kt_record_dispatch(&d);
    setenv("PMIX_RANK", "12", 1);
    kt_snapshot_t *s = kt_snapshot();
    unsetenv("PMIX_RANK");
    char *json = render(s);
    assert_non_null(strstr(json, "\"version\": 5"));
    kt_snapshot_t *r = NULL;
    char err[256];
    if (kt_snapshot_parse(json, strlen(json), &r, err, sizeof err) != 0)
        fail_msg("parse: %s", err);
    assert_int_equal(r->pid, s->pid);
    assert_int_equal(r->rank, 12);
    const kt_kernel_timing_t *a = kt_snapshot_find(s, "v2", KT_BACKEND_OPENCL, "dev");
    const kt_kernel_timing_t *b = kt_snapshot_find(r, "v2", KT_BACKEND_OPENCL, "dev");
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(b->total_ns, UINT64_MAX);
    assert_int_equal(b->total128.hi, 1);
    assert_int_equal(b->total128.lo, a->total128.lo);
    assert_memory_equal(&b->sumsq128, &a->sumsq128, sizeof a->sumsq128);
    assert_int_equal(b->dropped, 3);
    assert_int_equal(b->dropped_by[KT_DROP_IN_FLIGHT_AT_EXIT], 1);
    assert_int_equal(b->dropped_by[KT_DROP_RING_FULL], 1);
    assert_int_equal(b->dropped_by[KT_DROP_UNSPECIFIED], 1);
    assert_string_equal(b->last_error, "CL_OUT_OF_RESOURCES");
    assert_int_equal(b->errors, 1);
    const kt_kernel_timing_t *t = kt_snapshot_find(r, "clEnqueueWriteBuffer", KT_BACKEND_OPENCL, "dev");
    assert_non_null(t);
    assert_int_equal(t->bytes, 1u << 20);
    kt_snapshot_free(r);
    kt_snapshot_free(s);
    free(json);
}

/* kt_snapshot_load with skip_spans: the statistics as a full load gives them, no spans, and span sections
 * that would be refused are not even read (what `ktiming run` uses for its summary). */
static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

/* Version 3's span table: repeated values written once as runs, end times as offsets from start + duration; every
 * span reads back exactly (spans whose end is not start + duration, absent and negative offsets included). */
static void test_span_table_runs(void **state)
{
    (void)state;
    kt_reset();
    kt_kernel_id_t k = kt_kernel_intern("runs", KT_BACKEND_OPENCL, "dev");
    uint32_t q = kt_queue_register(KT_BACKEND_OPENCL, "dev", "queue");
    for (int i = 0; i < 40; i++) {
        kt_dispatch_t d;
        memset(&d, 0, sizeof d);
        d.kernel = k;
        d.queue = q;
        d.thread = kt_thread_ordinal();
        d.flags = KT_SPAN_DEVICE;
        d.start_ns = 1000000 + (uint64_t)i * 500;
        d.duration_ns = i < 30 ? 100 : 100 + (uint64_t)i;
        d.end_ns = d.start_ns + d.duration_ns + (i % 10 == 9 ? 3 : 0); /* a few ends past start + duration */
        d.enqueue_ns = i % 4 ? d.start_ns - 50 : 0;
        d.uncertainty_ns = 40;
        kt_record_dispatch(&d);
    }
    /* durations around every power of ten up to 2^64 - 1: each number's digits counted right */
    kt_kernel_id_t k2 = kt_kernel_intern("digits", KT_BACKEND_OPENCL, "dev");
    uint64_t p10 = 1;
    int extra = 0;
    for (int e = 0; e < 20; e++, p10 = e < 20 ? p10 * 10 : p10) {
        const uint64_t around[3] = {p10 - 1, p10, p10 + 1};
        for (int j = 0; j < 3; j++, extra++) {
            kt_dispatch_t d;
            memset(&d, 0, sizeof d);
            d.kernel = k2;
            d.thread = kt_thread_ordinal();
            d.start_ns = 2000000 + (uint64_t)extra;
            d.duration_ns = around[j];
            d.end_ns = d.start_ns + 1;
            kt_record_dispatch(&d);
        }
    }
    kt_dispatch_t top;
    memset(&top, 0, sizeof top);
    top.kernel = k2;
    top.thread = kt_thread_ordinal();
    top.start_ns = UINT64_MAX - 5;
    top.duration_ns = UINT64_MAX;
    top.end_ns = UINT64_MAX;
    kt_record_dispatch(&top);
    extra++;
    kt_snapshot_t *s = kt_snapshot();
    assert_int_equal(s->span_count, 40 + (size_t)extra);
    char *json = render(s);
    assert_non_null(strstr(json, "\"entry\": \"1*40 0*61\"")); /* "digits" sorts first */
    assert_non_null(strstr(json, "\"uncertainty_ns\": \"40*40 -*61\""));
    assert_non_null(strstr(json, "\"start_ns\": \"1000000 500*39 980500 1*59 "));
    kt_snapshot_t *r = NULL;
    char err[256];
    if (kt_snapshot_parse(json, strlen(json), &r, err, sizeof err) != 0)
        fail_msg("parse: %s", err);
    assert_int_equal(r->span_count, s->span_count);
    for (size_t i = 0; i < s->span_count; i++) {
        const kt_span_t *a = &s->spans[i], *b = &r->spans[i];
        assert_int_equal(b->entry, a->entry);
        assert_int_equal(b->queue, a->queue);
        assert_int_equal(b->flags, a->flags);
        assert_int_equal(b->duration_ns, a->duration_ns);
        assert_int_equal(b->start_ns, a->start_ns);
        assert_int_equal(b->end_ns, a->end_ns);
        assert_int_equal(b->enqueue_ns, a->enqueue_ns);
        assert_int_equal(b->uncertainty_ns, a->uncertainty_ns);
    }
    assert_int_equal(r->spans[9].end_ns - r->spans[9].start_ns, 103);
    assert_int_equal(r->spans[r->span_count - 1].duration_ns, UINT64_MAX);
    assert_int_equal(r->spans[r->span_count - 1].start_ns, UINT64_MAX - 5);
    kt_snapshot_free(r);
    kt_snapshot_free(s);
    free(json);
}

static void test_load_skip_spans(void **state)
{
    (void)state;
    kt_reset();
    for (int i = 0; i < 50; i++) {
        KT_CPU_BEGIN(z, "skip_spans_zone");
        KT_CPU_END(z);
    }
    kt_snapshot_t *s = kt_snapshot();
    assert_true(s->span_count >= 50);
    char *json = render(s);
    char path[] = "/tmp/kt_skip_spans_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    write_text(path, json);
    kt_snapshot_t *full = NULL, *stats = NULL;
    char err[256];
    assert_int_equal(kt_snapshot_load(path, NULL, &full, err, sizeof err), 0);
    kt_load_opts_t o = {.skip_spans = 1};
    if (kt_snapshot_load(path, &o, &stats, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(full->span_count, s->span_count);
    assert_int_equal(stats->span_count, 0);
    assert_null(stats->spans);
    assert_int_equal(stats->count, full->count);
    const kt_kernel_timing_t *a = kt_snapshot_find(full, "skip_spans_zone", KT_BACKEND_CPU, NULL);
    const kt_kernel_timing_t *b = kt_snapshot_find(stats, "skip_spans_zone", KT_BACKEND_CPU, NULL);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(b->dispatch_count, 50);
    assert_int_equal(b->total_ns, a->total_ns);
    assert_int_equal(b->p99_ns, a->p99_ns);
    kt_snapshot_free(full);
    kt_snapshot_free(stats);

    /* a span table naming an entry that does not exist: a full load refuses it, a statistics load never reads it */
    char *at = strstr(json, "\"span_table\"");
    assert_non_null(at);
    char *entry = strstr(at, "\"entry\": \"");
    assert_non_null(entry);
    entry[10] = '9'; /* the first span's entry index: 9..., beyond the one entry */
    write_text(path, json);
    assert_int_not_equal(kt_snapshot_load(path, NULL, &full, err, sizeof err), 0);
    assert_int_equal(kt_snapshot_load(path, &o, &stats, err, sizeof err), 0);
    assert_int_equal(stats->count, 1);
    kt_snapshot_free(stats);
    /* not even tokenised: a span table holding what no JSON parser takes still gives the statistics */
    at = strstr(json, "\"span_table\"");
    char *brace = strchr(at, '{');
    assert_non_null(brace);
    size_t head = (size_t)(brace + 1 - json);
    char *junk = malloc(strlen(json) + 32);
    assert_non_null(junk);
    snprintf(junk, strlen(json) + 32, "%.*s\"x\": nope, %s", (int)head, json, json + head);
    write_text(path, junk);
    free(junk);
    assert_int_not_equal(kt_snapshot_load(path, NULL, &full, err, sizeof err), 0);
    assert_int_equal(kt_snapshot_load(path, &o, &stats, err, sizeof err), 0);
    assert_int_equal(stats->count, 1);
    assert_int_equal(stats->entries[0].dispatch_count, 50);
    kt_snapshot_free(stats);
    /* the size limit still holds */
    kt_load_opts_t tiny = {.max_bytes = 16, .skip_spans = 1};
    assert_int_equal(kt_snapshot_load(path, &tiny, &stats, err, sizeof err), KT_EFULL);
    assert_null(stats);
    unlink(path);
    free(json);
    kt_snapshot_free(s);
}

static const char kV1[] = "{\"schema\":\"ktiming.snapshot\",\"version\":1,\"entries\":[{\"name\":\"k\",\"backend\":\"cpu\","
                          "\"dispatch_count\":3,\"total_ns\":60,\"min_ns\":10,\"max_ns\":30,\"mean_ns\":20,"
                          "\"stddev_ns\":10,\"dropped\":4}]}";

static void test_read_v1(void **state)
{
    (void)state;
    kt_snapshot_t *r = NULL;
    char err[256];
    if (kt_snapshot_parse(kV1, strlen(kV1), &r, err, sizeof err) != 0)
        fail_msg("parse: %s", err);
    const kt_kernel_timing_t *e = &r->entries[0];
    assert_int_equal(e->total128.lo, 60);
    assert_int_equal(e->total128.hi, 0);
    assert_int_equal(e->sumsq128.lo, 100 + 400 + 900); /* (n-1) sd^2 + n mean^2 = 200 + 1200 */
    assert_int_equal(e->dropped_by[KT_DROP_UNSPECIFIED], 4);
    assert_int_equal(r->rank, -1);
    assert_int_equal(r->pid, 0);
    kt_snapshot_free(r);
}

static void expect_reject(const char *json, const char *want)
{
    kt_snapshot_t *r = NULL;
    char err[256] = "";
    assert_int_equal(kt_snapshot_parse(json, strlen(json), &r, err, sizeof err), KT_EPARSE);
    assert_null(r);
    if (!strstr(err, want))
        fail_msg("message \"%s\" lacks \"%s\"", err, want);
}

static void test_consistency(void **state)
{
    (void)state;
    expect_reject("{\"schema\":\"ktiming.snapshot\",\"version\":2,\"entries\":[{\"name\":\"k\",\"backend\":\"cpu\","
                  "\"dispatch_count\":1,\"total_ns\":5,\"min_ns\":5,\"max_ns\":5,\"sum_ns\":6}]}",
                  "entries[0].sum_ns: does not match total_ns");
    expect_reject("{\"schema\":\"ktiming.snapshot\",\"version\":2,\"entries\":[{\"name\":\"k\",\"backend\":\"cpu\","
                  "\"dispatch_count\":0,\"total_ns\":0,\"min_ns\":0,\"max_ns\":0,\"dropped\":2,"
                  "\"dropped_by\":{\"ring_full\":1}}]}",
                  "entries[0].dropped_by: counts do not add up to dropped");
    expect_reject("{\"schema\":\"ktiming.snapshot\",\"version\":2,\"entries\":[{\"name\":\"k\",\"backend\":\"cpu\","
                  "\"dispatch_count\":1,\"total_ns\":5,\"min_ns\":5,\"max_ns\":5,"
                  "\"sum_ns\":\"999999999999999999999999999999999999999999\"}]}",
                  "does not fit in 128 bits");
    expect_reject("{\"schema\":\"ktiming.snapshot\",\"version\":2,\"rank\":-2,\"entries\":[]}", "rank:");
    /* A reason from a newer writer still counts, as unspecified. */
    const char *newer = "{\"schema\":\"ktiming.snapshot\",\"version\":2,\"entries\":[{\"name\":\"k\",\"backend\":\"cpu\","
                        "\"dispatch_count\":0,\"total_ns\":0,\"min_ns\":0,\"max_ns\":0,\"dropped\":2,"
                        "\"dropped_by\":{\"ring_full\":1,\"solar_flare\":1}}]}";
    kt_snapshot_t *r = NULL;
    assert_int_equal(kt_snapshot_parse(newer, strlen(newer), &r, NULL, 0), 0);
    assert_int_equal(r->entries[0].dropped_by[KT_DROP_UNSPECIFIED], 1);
    assert_int_equal(r->entries[0].dropped_by[KT_DROP_RING_FULL], 1);
    kt_snapshot_free(r);
}

/* A version-1 file without percentiles shows "-" for them in the text table, not "0 ns" below its min. */
static void test_v1_percentiles_absent(void **state)
{
    (void)state;
    kt_snapshot_t *r = NULL;
    assert_int_equal(kt_snapshot_parse(kV1, strlen(kV1), &r, NULL, 0), 0);
    char *buf = render_as(r, KT_FORMAT_TEXT);
    const char *row = strstr(buf, "[timing] k ");
    assert_non_null(row);
    assert_null(strstr(row, " 0 ns"));
    assert_non_null(strstr(row, "10 ns"));
    assert_non_null(strstr(row, " - "));
    free(buf);
    kt_snapshot_free(r);
}

/* A file without mean_ns whose total_ns saturated (20 dispatches of 2^62 ns: the sum is 5 * 2^64): the mean comes from
 * the exact sum_ns, 2^62 ns, not from the saturated total (2^64-1 / 20, a quarter of it). */
static void test_mean_from_exact_sum(void **state)
{
    (void)state;
    static const char kDoc[] =
        "{\"schema\":\"ktiming.snapshot\",\"version\":5,\"entries\":[{\"name\":\"k\",\"backend\":\"cpu\","
        "\"dispatch_count\":20,\"total_ns\":\"18446744073709551615\",\"sum_ns\":\"92233720368547758080\","
        "\"min_ns\":\"4611686018427387904\",\"max_ns\":\"4611686018427387904\"},"
        "{\"name\":\"given\",\"backend\":\"cpu\",\"dispatch_count\":2,\"total_ns\":10,\"min_ns\":5,"
        "\"max_ns\":5,\"mean_ns\":7}]}";
    kt_snapshot_t *r = NULL;
    char err[256];
    if (kt_snapshot_parse(kDoc, strlen(kDoc), &r, err, sizeof err) != 0)
        fail_msg("%s", err);
    const kt_kernel_timing_t *e = kt_snapshot_find(r, "k", KT_BACKEND_CPU, NULL);
    assert_non_null(e);
    assert_true(e->mean_ns == 0x1p62);
    e = kt_snapshot_find(r, "given", KT_BACKEND_CPU, NULL);
    assert_non_null(e);
    assert_true(e->mean_ns == 7.0); /* a mean the file gives is kept */
    kt_snapshot_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_v2),
        cmocka_unit_test(test_span_table_runs),
        cmocka_unit_test(test_load_skip_spans),
        cmocka_unit_test(test_read_v1),
        cmocka_unit_test(test_v1_percentiles_absent),
        cmocka_unit_test(test_consistency),
        cmocka_unit_test(test_mean_from_exact_sum),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
