/* test_report_file.c — `ktiming report`'s reader for the tables (src/analysis/report_file.h, issue 39.9), which
 * holds a narrow record per kernel instead of the snapshot: every table format (text, markdown, lines, CSV), with
 * every sort key, filters and --by-config, prints the same bytes as kt_report_print of the file loaded whole, on a
 * snapshot that uses every field a table prints (errors, drops by reason, bytes, launch configurations, batches,
 * host waits, a kernel on two devices, names that need escaping, a total past 64 bits, no dispatches, no
 * percentiles, the notes after the table); a malformed or duplicated file gets the loader's message; and what it
 * holds while it writes is a fraction of the loaded snapshot. */
#include "analysis/report_file.h"
#include "support/heap.h"
#include "support/snapshot_fixture.h"

#include <ktiming.h>
#include <ktiming/analysis.h>

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static char *g_dir;

/* A snapshot with every kind of entry a table shows, written in an order the loader has to sort. */
static kt_snapshot_t *varied_snapshot(void)
{
    enum { N = 24 };
    kt_snapshot_t *s = fx_snapshot_new(N);
    size_t i = 0;
    fx_entry(s, i++, "zeta_plain", KT_BACKEND_CPU, "host", 10, 5000, 4000, 9000);
    fx_entry(s, i++, "alpha_samples", KT_BACKEND_CPU, "host", 5, 2000, 1000, 3000);
    fx_samples(s, 1, 5, 1000, 500);
    kt_kernel_timing_t *e = fx_entry(s, i++, "errs", KT_BACKEND_OPENCL, "gpu0", 7, 3000, 2000, 4000);
    e->errors = 3;
    snprintf(e->last_error, sizeof e->last_error, "CL_INVALID_WORK_GROUP_SIZE");
    e = fx_entry(s, i++, "drops", KT_BACKEND_OPENCL, "gpu0", 9, 1000, 900, 1100);
    e->dropped = 4;
    e->dropped_by[0] = 1;
    e->dropped_by[KT_DROP_REASON_COUNT - 1] = 3;
    e->spans_dropped = 2;
    e = fx_entry(s, i++, "clEnqueueReadBuffer", KT_BACKEND_OPENCL, "gpu0", 4, 80000, 70000, 90000);
    e->bytes = 4u << 20;
    fx_entry(s, i++, "clEnqueueUnmapMemObject", KT_BACKEND_OPENCL, "gpu0", 2, 500, 400, 600);
    e = fx_entry(s, i++, "configured", KT_BACKEND_OPENCL, "gpu0", 12, 7000, 1000, 20000);
    e->config_count = 2;
    e->configs = calloc(2, sizeof *e->configs);
    e->configs[0] = (kt_config_timing_t){{KT_LAUNCH_ITEMS, 2, {1024, 768, 0}, {16, 16, 0}}, 6, 60000, 9000, 11000};
    e->configs[1] = (kt_config_timing_t){{KT_LAUNCH_ITEMS, 1, {4096, 0, 0}, {0, 0, 0}}, 4, 12000, 1000, 5000};
    e = fx_entry(s, i++, "configured_all", KT_BACKEND_VULKAN, "gpu1", 3, 2000, 1000, 3000);
    e->config_count = 1;
    e->configs = calloc(1, sizeof *e->configs);
    e->configs[0] = (kt_config_timing_t){{KT_LAUNCH_GROUPS, 3, {64, 1, 1}, {256, 1, 1}}, 3, 6000, 1000, 3000};
    fx_entry(s, i++, "vkQueueSubmit", KT_BACKEND_VULKAN, "gpu1", 6, 90000, 80000, 99000);
    fx_entry(s, i++, "clFinish", KT_BACKEND_HOST_API, "host", 8, 40000, 1000, 90000);
    fx_entry(s, i++, "twice", KT_BACKEND_CUDA, "gpu1", 2, 1500, 1000, 2000);
    fx_entry(s, i++, "twice", KT_BACKEND_CUDA, "gpu0", 3, 2500, 2000, 3000);
    fx_entry(s, i++, "k_esc\x1b]0;title\x07|x", KT_BACKEND_CPU, "host", 1, 100, 100, 100);
    fx_entry(s, i++, "=cmd,\"quoted\"", KT_BACKEND_CPU, "host", 1, 200, 200, 200);
    fx_entry(s, i++, "a_name_much_longer_than_forty_columns_of_a_terminal_table_row", KT_BACKEND_CPU, "host", 2, 300,
             250, 350);
    fx_entry(s, i++, "\xc3\xa9t\xc3\xa9", KT_BACKEND_CPU, "host", 2, 300, 250, 350);
    e = fx_entry(s, i++, "none_run", KT_BACKEND_CPU, "host", 0, 0, 0, 0);
    e->stddev_ns = 0;
    e = fx_entry(s, i++, "huge", KT_BACKEND_CPU, "host", 3, 1, 1, UINT64_MAX / 2);
    e->total_ns = UINT64_MAX;
    e->total128 = (kt_u128_t){5, 1};
    e->mean_ns = 6.1e18;
    e = fx_entry(s, i++, "nan_spread", KT_BACKEND_CPU, "host", 4, 800, 700, 900);
    e->stddev_ns = NAN;
    e = fx_entry(s, i++, "v1_no_pct", KT_BACKEND_CPU, "host", 4, 800, 700, 900);
    e->p50_ns = e->p90_ns = e->p99_ns = 0;
    e = fx_entry(s, i++, "with_hist", KT_BACKEND_CPU, "host", 2, 1000, 900, 1100);
    e->hist_count = 2;
    e->hist = calloc(2, sizeof *e->hist);
    e->hist[0] = (kt_hist_bin_t){896, 1};
    e->hist[1] = (kt_hist_bin_t){1088, 1};
    fx_entry(s, i++, "same_total_a", KT_BACKEND_CPU, "host", 2, 1000, 900, 1100);
    fx_entry(s, i++, "same_total_b", KT_BACKEND_CPU, "host", 2, 1000, 900, 1100);
    fx_entry(s, i++, "beta", KT_BACKEND_CPU, "host", 1, 5000, 5000, 5000);
    assert_int_equal(i, N);
    for (size_t k = 0; k < N; k++) { /* exact sums, as a recorder gives them */
        if (!s->entries[k].total128.lo && !s->entries[k].total128.hi)
            s->entries[k].total128.lo = s->entries[k].total_ns;
    }
    s->names_truncated = 2;
    s->kernels_dropped = 5;
    return s;
}

static char *write_json(const char *file, const kt_snapshot_t *s)
{
    char *path = ktt_path(g_dir, file);
    assert_int_equal(kt_report_write(path, s, KT_FORMAT_JSON, NULL), 0);
    return path;
}

/* The report of path loaded whole, and through the narrow reader: both NUL-terminated, both return codes 0. */
static void render_both(const char *path, kt_format_t fmt, const kt_report_opts_t *opts, char **whole, char **narrow,
                        size_t *wlen, size_t *nlen)
{
    char err[512];
    kt_snapshot_t *snap = NULL;
    assert_int_equal(kt_snapshot_load(path, NULL, &snap, err, sizeof err), 0);
    FILE *f = open_memstream(whole, wlen);
    assert_int_equal(kt_report_print(f, snap, fmt, opts), 0);
    fclose(f);
    kt_snapshot_free(snap);

    kt__report_file_t *rf = NULL;
    assert_int_equal(kt__report_file_load(path, KT_SNAPSHOT_MAX_INPUT_DEFAULT, &rf, err, sizeof err), 0);
    kt__entry_view_t v;
    kt__report_file_view(rf, &v);
    f = open_memstream(narrow, nlen);
    assert_int_equal(kt__report_print_view(f, kt__report_file_meta(rf), &v, fmt, opts), 0);
    fclose(f);
    kt__report_file_free(rf);
}

static void test_same_bytes_every_table(void **state)
{
    (void)state;
    kt_snapshot_t *s = varied_snapshot();
    char *path = write_json("varied.json", s);
    fx_free(s);
    static const kt_format_t kFormats[] = {KT_FORMAT_TEXT, KT_FORMAT_MARKDOWN, KT_FORMAT_LINES, KT_FORMAT_CSV};
    const kt_report_opts_t kOpts[] = {
        {KT_SORT_TOTAL, NULL, 0, 0},     {KT_SORT_NAME, NULL, 0, 0},      {KT_SORT_MEAN, NULL, 0, 0},
        {KT_SORT_COUNT, NULL, 0, 0},     {KT_SORT_TOTAL, NULL, 0, 1},     {KT_SORT_NAME, NULL, 0, 1},
        {KT_SORT_TOTAL, "*e*", 0, 0},    {KT_SORT_MEAN, "config*", 0, 1}, {KT_SORT_TOTAL, "nothing*", 0, 0},
        {KT_SORT_COUNT, NULL, 1, 1},     {KT_SORT_TOTAL, "twice", 0, 0},
    };
    for (size_t f = 0; f < sizeof kFormats / sizeof kFormats[0]; f++) {
        for (size_t o = 0; o < sizeof kOpts / sizeof kOpts[0]; o++) {
            char *whole = NULL, *narrow = NULL;
            size_t wl = 0, nl = 0;
            render_both(path, kFormats[f], &kOpts[o], &whole, &narrow, &wl, &nl);
            if (wl != nl || memcmp(whole, narrow, wl) != 0)
                print_message("format %d options %zu differ:\n--- whole\n%s\n--- narrow\n%s\n", (int)kFormats[f], o,
                              whole, narrow);
            assert_int_equal(wl, nl);
            assert_memory_equal(whole, narrow, wl);
            assert_true(wl > 0);
            free(whole);
            free(narrow);
        }
    }
    /* the fixture's features reached the output (the comparison is not of two empty tables) */
    char *whole = NULL, *narrow = NULL;
    size_t wl = 0, nl = 0;
    render_both(path, KT_FORMAT_TEXT, &(kt_report_opts_t){KT_SORT_TOTAL, NULL, 0, 1}, &whole, &narrow, &wl, &nl);
    assert_non_null(strstr(narrow, "CL_INVALID_WORK_GROUP_SIZE"));
    assert_non_null(strstr(narrow, "global=1024x768 local=16x16"));
    assert_non_null(strstr(narrow, "spans_dropped=2"));
    assert_non_null(strstr(narrow, "names_truncated"));
    free(whole);
    free(narrow);
    render_both(path, KT_FORMAT_LINES, NULL, &whole, &narrow, &wl, &nl);
    assert_non_null(strstr(narrow, " dev=gpu0"));
    free(whole);
    free(narrow);
    render_both(path, KT_FORMAT_CSV, NULL, &whole, &narrow, &wl, &nl);
    assert_non_null(strstr(narrow, "alpha_samples,CPU,host,5,10000,1000,3000,3000,2000,"));
    assert_non_null(strstr(narrow, ",0,0,0,5,0,\r\n")); /* alpha_samples' sample_count */
    free(whole);
    free(narrow);
    /* written to a file as kt_report_write writes it */
    char err[512];
    kt__report_file_t *rf = NULL;
    assert_int_equal(kt__report_file_load(path, KT_SNAPSHOT_MAX_INPUT_DEFAULT, &rf, err, sizeof err), 0);
    kt__entry_view_t v;
    kt__report_file_view(rf, &v);
    char *out = ktt_path(g_dir, "out.md");
    assert_int_equal(kt__report_write_view(out, kt__report_file_meta(rf), &v, KT_FORMAT_MARKDOWN, NULL), 0);
    assert_int_equal(kt__report_print_view(stdout, kt__report_file_meta(rf), &v, KT_FORMAT_JSON, NULL), KT_EINVAL);
    kt__report_file_free(rf);
    render_both(path, KT_FORMAT_MARKDOWN, NULL, &whole, &narrow, &wl, &nl);
    size_t fl = 0;
    char *written = ktt_read_file(out, &fl);
    assert_non_null(written);
    assert_int_equal(fl, wl);
    assert_memory_equal(written, whole, wl);
    free(written);
    free(whole);
    free(narrow);
    free(out);
    free(path);
}

/* The same code and message as kt_snapshot_load for a file it refuses. */
static void same_error(const char *path)
{
    char e1[512], e2[512];
    kt_snapshot_t *snap = NULL;
    kt__report_file_t *rf = NULL;
    int r1 = kt_snapshot_load(path, NULL, &snap, e1, sizeof e1);
    int r2 = kt__report_file_load(path, KT_SNAPSHOT_MAX_INPUT_DEFAULT, &rf, e2, sizeof e2);
    assert_int_not_equal(r1, 0);
    assert_int_equal(r1, r2);
    assert_string_equal(e1, e2);
    assert_null(snap);
    assert_null(rf);
}

static void test_same_errors(void **state)
{
    (void)state;
    kt_snapshot_t *s = fx_snapshot_new(3);
    fx_entry(s, 0, "b", KT_BACKEND_CPU, "host", 1, 10, 10, 10);
    fx_entry(s, 1, "a", KT_BACKEND_CPU, "host", 1, 10, 10, 10);
    fx_entry(s, 2, "b", KT_BACKEND_CPU, "host", 2, 10, 10, 10);
    char *dup = write_json("dup.json", s);
    fx_free(s);
    same_error(dup);
    char *bad = ktt_path(g_dir, "bad.json");
    static const char kBad[] = "{\"schema\": \"ktiming.snapshot\", \"version\": 3, \"entries\": [{\"name\": 5}]}";
    assert_int_equal(ktt_write_file(bad, kBad, sizeof kBad - 1), 0);
    same_error(bad);
    char *missing = ktt_path(g_dir, "missing.json");
    same_error(missing);
    free(dup);
    free(bad);
    free(missing);
}

/* Heap held (above base) at the report's writes. */
static size_t held_while_writing(const kt_snapshot_t *meta, const kt__entry_view_t *v, size_t base)
{
    ktt_heap_sink_t k = {base, 0};
    static char buf[256]; /* small: the heap is sampled all along the write */
    FILE *out = ktt_heap_sink_open(&k, buf, sizeof buf);
    assert_non_null(out);
    assert_int_equal(v ? kt__report_print_view(out, meta, v, KT_FORMAT_TEXT, NULL)
                       : kt_report_print(out, meta, KT_FORMAT_TEXT, NULL),
                     0);
    fclose(out);
    return k.peak > base ? k.peak - base : 0;
}

#define MANY 40000
#define BOUND_PER_KERNEL 300 /* bytes a kernel held while the text report writes, its records included */

static void test_holds_narrow_records(void **state)
{
    (void)state;
    kt_snapshot_t *s = fx_snapshot_new(MANY);
    for (size_t i = 0; i < MANY; i++) {
        char name[32];
        snprintf(name, sizeof name, "kernel_%07zu", i);
        fx_entry(s, i, name, KT_BACKEND_CPU, "host", 32, 1000 + i, 900, 1200 + i);
        s->entries[i].total128.lo = s->entries[i].total_ns;
    }
    char *path = write_json("many.json", s);
    fx_free(s);
    char err[512];

    size_t base = ktt_heap_used();
    kt__report_file_t *rf = NULL;
    assert_int_equal(kt__report_file_load(path, KT_SNAPSHOT_MAX_INPUT_DEFAULT, &rf, err, sizeof err), 0);
    kt__entry_view_t v;
    kt__report_file_view(rf, &v);
    assert_int_equal(v.count, MANY);
    size_t narrow = held_while_writing(kt__report_file_meta(rf), &v, base);
    kt__report_file_free(rf);

    /* what `ktiming report` held before: the snapshot loaded whole, then its table */
    base = ktt_heap_used();
    kt_snapshot_t *snap = NULL;
    assert_int_equal(kt_snapshot_load(path, NULL, &snap, err, sizeof err), 0);
    size_t whole = held_while_writing(snap, NULL, base);
    kt_snapshot_free(snap);

    print_message("text report of %d kernels: %zu bytes a kernel held (loaded whole: %zu; bound %d)\n", MANY,
                  narrow / MANY, whole / MANY, BOUND_PER_KERNEL);
    assert_true(narrow > (size_t)MANY * 100); /* the sampling saw the records and rows: not vacuous */
    assert_true(narrow / MANY <= BOUND_PER_KERNEL);
    free(path);
}

KTT_TMPDIR_GROUP(g_dir, "report-file")

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_bytes_every_table),
        cmocka_unit_test(test_same_errors),
        cmocka_unit_test(test_holds_narrow_records),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
