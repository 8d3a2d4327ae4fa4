/* test_roundtrip.c — JSON written by kt_report_write/print reads back field by field equal: 64-bit values up
 * to 2^64-1, names with quotes, newlines, control characters and non-ASCII text, doubles bit-exact; plus the
 * loader's defaults, ordering guarantees and file handling. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <float.h>
#include <math.h>
#include <ktiming/analysis.h>

#include "support/snapshot_fixture.h"

/* Writes s as JSON, parses it back and asserts the two are equal; returns the parsed copy. */
static kt_snapshot_t *round_trip(const kt_snapshot_t *s)
{
    int rc;
    char *text = fx_render(s, KT_FORMAT_JSON, &rc);
    assert_int_equal(rc, 0);
    kt_snapshot_t *back = NULL;
    char err[256];
    rc = kt_snapshot_parse(text, strlen(text), &back, err, sizeof err);
    if (rc)
        fail_msg("parse failed: %s", err);
    char why[128];
    if (fx_snapshot_diff(s, back, why, sizeof why))
        fail_msg("round trip differs at %s", why);
    free(text);
    return back;
}

static void test_full_snapshot(void **state)
{
    (void)state;
    kt_snapshot_t *s = fx_snapshot_full();
    kt_snapshot_t *back = round_trip(s);
    /* Memory contract: separate blocks, NULL samples when there are none. */
    assert_null(back->entries[2].samples);
    assert_ptr_not_equal(back->entries[0].name, s->entries[0].name);
    assert_int_equal(back->spans[0].queue, UINT32_MAX);
    fx_free(back);
    fx_free(s);
}

static void test_extreme_integers(void **state)
{
    (void)state;
    const uint64_t big[] = {UINT64_MAX,           UINT64_MAX - 1,          9007199254740991ull,
                            9007199254740992ull,  9007199254740993ull,     1ull << 63,
                            18446744073709551557ull, 0,                    1};
    kt_snapshot_t *s = fx_snapshot_full();
    kt_kernel_timing_t *e = &s->entries[0];
    e->dispatch_count = UINT64_MAX;
    e->total_ns = UINT64_MAX - 1;
    e->min_ns = 9007199254740993ull;
    e->max_ns = UINT64_MAX;
    e->last_ns = 9007199254740992ull;
    e->p50_ns = 1ull << 63;
    e->p90_ns = (1ull << 63) + 1;
    e->p99_ns = UINT64_MAX - 2;
    e->errors = 9007199254740991ull;
    e->dropped = 18446744073709551557ull;
    e->spans_dropped = 9007199254740994ull;
    free(e->samples);
    e->sample_count = sizeof big / sizeof big[0];
    e->samples = malloc(sizeof big);
    memcpy(e->samples, big, sizeof big);
    s->taken_ns = UINT64_MAX;
    s->spans[3].start_ns = UINT64_MAX - 10; /* still last in start order */
    s->spans[3].end_ns = UINT64_MAX;
    s->spans[3].enqueue_ns = UINT64_MAX - 20;
    s->spans[3].uncertainty_ns = 9007199254740993ull;
    s->threads[1].os_tid = UINT64_MAX;
    s->devices[0].frequency_hz = UINT64_MAX;
    s->devices[0].valid_bits = UINT32_MAX;
    s->devices[0].model_samples = UINT32_MAX;
    s->spans[2].flags = UINT32_MAX;
    kt_snapshot_t *back = round_trip(s);
    assert_true(back->entries[0].max_ns == UINT64_MAX);
    assert_true(back->entries[0].min_ns == 9007199254740993ull);
    fx_free(back);
    fx_free(s);
}

static void test_names_and_text(void **state)
{
    (void)state;
    /* In strcmp order so the loaded (sorted) snapshot lines up with this one. */
    const char *names[] = {
        "",                                        /* empty */
        "a \"quoted\" \\ name",                    /* JSON specials */
        "b\nnew\rline\ttab\b\f\x01\x1f\x7f",       /* control characters */
        "c\xe2\x80\xa8sep\xe2\x80\xa9",            /* U+2028 / U+2029 */
        "d caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x9a\x80", /* 2-, 3- and 4-byte UTF-8 */
        "e</script><!--",                          /* HTML-ish */
    };
    const size_t k = sizeof names / sizeof names[0];
    kt_snapshot_t *s = fx_snapshot_new(k);
    for (size_t i = 0; i < k; i++)
        fx_entry(s, i, names[i], KT_BACKEND_CUDA, "NVIDIA \"Fake\" GPU\n#0", i + 1, 100 * (i + 1), 50, 500);
    snprintf(s->host, sizeof s->host, "h\xc3\xb4te \"x\"");
    kt_snapshot_t *back = round_trip(s);
    for (size_t i = 0; i < k; i++)
        assert_string_equal(back->entries[i].name, names[i]);
    fx_free(back);
    fx_free(s);
}

static void test_doubles_exact(void **state)
{
    (void)state;
    /* every value a duration statistic can take (0 .. 2^64 ns; the reader refuses others, test_malformed) */
    const double values[] = {1.0 / 3.0, 0.1, 1e-300, 0x1p64, DBL_MIN, 5e-324, 0.125, 123456789.123456789, NAN};
    const size_t k = sizeof values / sizeof values[0];
    kt_snapshot_t *s = fx_snapshot_new(k);
    for (size_t i = 0; i < k; i++) {
        char name[8];
        snprintf(name, sizeof name, "k%zu", i);
        fx_entry(s, i, name, KT_BACKEND_CPU, "host", 1, 1, 1, 1)->mean_ns = values[i];
        s->entries[i].stddev_ns = values[k - 1 - i];
    }
    kt_snapshot_t *back = round_trip(s);
    for (size_t i = 0; i + 1 < k; i++)
        assert_memory_equal(&back->entries[i].mean_ns, &values[i], sizeof(double)); /* bit-exact */
    assert_true(isnan(back->entries[k - 1].mean_ns));
    fx_free(back);
    fx_free(s);
}

static void test_load_file(void **state)
{
    (void)state;
    char *dir = ktt_tmpdir("roundtrip");
    char *path = ktt_path(dir, "snap.json");
    kt_snapshot_t *s = fx_snapshot_full();
    assert_int_equal(kt_report_write(path, s, KT_FORMAT_JSON, NULL), 0);
    kt_snapshot_t *back = NULL;
    char err[256];
    assert_int_equal(kt_snapshot_load(path, NULL, &back, err, sizeof err), 0);
    char why[128];
    assert_int_equal(fx_snapshot_diff(s, back, why, sizeof why), 0);
    fx_free(back);

    char *missing = ktt_path(dir, "nope.json");
    back = (kt_snapshot_t *)1;
    assert_int_equal(kt_snapshot_load(missing, NULL, &back, err, sizeof err), KT_EIO);
    assert_int_equal(errno, ENOENT);
    assert_null(back);
    assert_memory_equal(err, missing, strlen(missing)); /* the message starts with the path */
    assert_non_null(strstr(err, "No such file"));
    /* A directory is not a snapshot. */
    assert_int_not_equal(kt_snapshot_load(dir, NULL, &back, err, sizeof err), 0);
    assert_null(back);
    free(missing);
    fx_free(s);
    free(path);
    ktt_rmtree(dir);
    free(dir);
}

static kt_snapshot_t *parse_ok(const char *json)
{
    kt_snapshot_t *s = NULL;
    char err[256];
    int rc = kt_snapshot_parse(json, strlen(json), &s, err, sizeof err);
    if (rc)
        fail_msg("expected success, got %d: %s", rc, err);
    return s;
}

static void test_minimal_document_defaults(void **state)
{
    (void)state;
    kt_snapshot_t *s = parse_ok("{\"schema\":\"ktiming.snapshot\",\"version\":1,\"entries\":[{\"name\":\"k\","
                                "\"backend\":\"CPU\",\"dispatch_count\":\"2\",\"total_ns\":10,\"min_ns\":4,"
                                "\"max_ns\":6,\"future_member\":{\"x\":[1,2]}}],\"future_section\":true}");
    assert_int_equal(s->count, 1);
    assert_string_equal(s->entries[0].name, "k");
    assert_int_equal(s->entries[0].backend, KT_BACKEND_CPU);
    assert_string_equal(s->entries[0].device, "host");
    assert_int_equal(s->entries[0].dispatch_count, 2);
    assert_true(s->entries[0].mean_ns == 5.0);
    assert_int_equal(s->entries[0].sample_count, 0);
    assert_null(s->entries[0].samples);
    assert_null(s->spans);
    assert_null(s->queues);
    assert_null(s->threads);
    assert_null(s->devices);
    assert_string_equal(s->host, "");
    fx_free(s);
    s = parse_ok("{\"schema\":\"ktiming.snapshot\",\"version\":1,\"entries\":[]}");
    assert_int_equal(s->count, 0);
    assert_null(s->entries);
    fx_free(s);
}

static void test_order_restored(void **state)
{
    (void)state;
    /* Entries out of order (b, a) and spans out of start order: the loader sorts both and remaps indices. */
    kt_snapshot_t *s = parse_ok(
        "{\"schema\":\"ktiming.snapshot\",\"version\":1,\"entries\":["
        "{\"name\":\"b\",\"backend\":\"opencl\",\"device\":\"d\",\"dispatch_count\":1,\"total_ns\":2,\"min_ns\":2,"
        "\"max_ns\":2},"
        "{\"name\":\"a\",\"backend\":\"vulkan\",\"dispatch_count\":1,\"total_ns\":3,\"min_ns\":3,\"max_ns\":3},"
        "{\"name\":\"a\",\"backend\":\"opencl\",\"dispatch_count\":1,\"total_ns\":4,\"min_ns\":4,\"max_ns\":4}],"
        "\"threads\":[{\"os_tid\":1,\"name\":\"t\"}],"
        "\"spans\":[{\"entry\":0,\"thread\":0,\"start_ns\":30,\"end_ns\":32},"
        "{\"entry\":1,\"thread\":0,\"start_ns\":10,\"end_ns\":13},"
        "{\"entry\":2,\"thread\":0,\"start_ns\":20,\"end_ns\":24}]}");
    assert_string_equal(s->entries[0].name, "a");
    assert_int_equal(s->entries[0].backend, KT_BACKEND_OPENCL);
    assert_int_equal(s->entries[0].total_ns, 4);
    assert_int_equal(s->entries[1].backend, KT_BACKEND_VULKAN);
    assert_string_equal(s->entries[2].name, "b");
    assert_string_equal(s->entries[1].device, ""); /* non-CPU default */
    assert_int_equal(s->spans[0].start_ns, 10);
    assert_int_equal(s->spans[1].start_ns, 20);
    assert_int_equal(s->spans[2].start_ns, 30);
    /* Each span still points at the entry it named in the file. */
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(s->entries[s->spans[i].entry].total_ns, s->spans[i].end_ns - s->spans[i].start_ns);
    fx_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_snapshot),
        cmocka_unit_test(test_extreme_integers),
        cmocka_unit_test(test_names_and_text),
        cmocka_unit_test(test_doubles_exact),
        cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_minimal_document_defaults),
        cmocka_unit_test(test_order_restored),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
