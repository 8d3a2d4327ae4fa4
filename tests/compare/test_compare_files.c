/* test_compare_files.c — `ktiming compare`'s reader of two files (src/analysis/compare_files.h, issue 39.9), which
 * holds per kernel only what a comparison reads: the same result, printed byte for byte, as kt_compare of the two
 * files loaded whole (every format, options, --filter, devices matched by UUID under other labels, entries out of
 * order, one-sided rows, aggregates only, names that need escaping); the same error messages; and the memory it
 * holds a fraction of the two snapshots'. */
#include "analysis/compare_files.h"
#include "support/files.h"
#include "support/heap.h"

#include <ktiming.h>
#include <ktiming/analysis.h>
#include <ktiming/compare.h>

#include <fnmatch.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

static char *g_dir;

static uint64_t rng(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#define UA "GPU-aaaaaaaa-0000-0000-0000-000000000001"
#define UB "GPU-bbbbbbbb-0000-0000-0000-000000000002"

/* One side's file: CPU kernels k_000..k_<n-1> written in reverse order (so the reader has to sort them), with
 * 0 (aggregates only), 5, 12, 40 or 130 samples each, AFTER slower by kernel-dependent amounts; kernels only on
 * one side; a kernel with no dispatches; two names that need escaping; and CUDA kernels on two GPUs whose labels
 * are swapped in AFTER (matched by UUID, device_after). */
static char *write_side(const char *file, int after, int n)
{
    char *path = ktt_path(g_dir, file);
    FILE *b = fopen(path, "w");
    assert_non_null(b);
    uint64_t seed = after ? 77 : 11;
    fprintf(b, "{\"schema\": \"ktiming.snapshot\", \"version\": 3, \"host\": \"h\", \"pid\": %d, \"taken_ns\": 5,\n"
            " \"entries\": [", after ? 2 : 1);
    static const uint32_t kSamples[] = {0, 5, 12, 40, 130};
    int first = 1;
    for (int k = n - 1; k >= 0; k--) {
        if ((after && k == 3) || (!after && k == 4)) /* k_003 only in BEFORE, k_004 only in AFTER */
            continue;
        uint32_t ns = kSamples[k % 5];
        uint64_t base = 1000 + (uint64_t)(k % 7) * 300, v[130], total = 0, mn = UINT64_MAX, mx = 0;
        if (after)
            base += base * (uint64_t)(k % 4) * 4 / 100; /* 0, 4, 8, 12 % slower */
        uint32_t nd = ns ? ns : 20;
        for (uint32_t i = 0; i < nd; i++) {
            v[i] = base + rng(&seed) % (base / 8 + 1);
            total += v[i];
            mn = v[i] < mn ? v[i] : mn;
            mx = v[i] > mx ? v[i] : mx;
        }
        int none = k == 6; /* no dispatches */
        fprintf(b, "%s\n  {\"name\": \"k_%03d\", \"backend\": \"cpu\", \"device\": \"host\", \"dispatch_count\": %u, "
                "\"total_ns\": %llu, \"min_ns\": %llu, \"max_ns\": %llu, \"p50_ns\": %llu, \"mean_ns\": %.1f, "
                "\"sample_count\": %u, \"samples\": [",
            first ? "" : ",", k, none ? 0 : nd, none ? 0ull : (unsigned long long)total,
            none ? 0ull : (unsigned long long)mn, none ? 0ull : (unsigned long long)mx,
            none ? 0ull : (unsigned long long)base, none ? 0.0 : (double)total / nd, none ? 0 : ns);
        for (uint32_t i = 0; !none && i < ns; i++)
            fprintf(b, "%s%llu", i ? ", " : "", (unsigned long long)v[i]);
        fprintf(b, "]}");
        first = 0;
    }
    /* names a terminal or markdown must not take raw, and UTF-8 */
    fprintf(b, ",\n  {\"name\": \"k_esc\\u001b[2J|x\", \"backend\": \"cpu\", \"device\": \"host\", \"dispatch_count\": 3, "
            "\"total_ns\": 3000, \"min_ns\": 900, \"max_ns\": 1100, \"p50_ns\": 1000, \"samples\": [900, 1000, 1100]}");
    fprintf(b, ",\n  {\"name\": \"k_\\u00e9t\\u00e9\\u202e\", \"backend\": \"cpu\", \"device\": \"host\", "
            "\"dispatch_count\": 2, \"total_ns\": %d, \"min_ns\": 1000, \"max_ns\": %d}",
        after ? 2600 : 2000, after ? 1600 : 1000);
    for (int g = 0; g < 2; g++) { /* the GPU kernels: the same physical GPU under the other label in AFTER */
        const char *label = (g == 0) != (after != 0) ? "H100 #3" : "H100 #5";
        fprintf(b, ",\n  {\"name\": \"gemm\", \"backend\": \"cuda\", \"device\": \"%s\", \"dispatch_count\": 30, "
                "\"total_ns\": 1, \"min_ns\": 1, \"max_ns\": 1, \"sample_count\": 30, \"samples\": [",
            label);
        for (int i = 0; i < 30; i++)
            fprintf(b, "%s%d", i ? ", " : "", (g ? 9000 : 1000) * (after && g ? 2 : 1) + (i % 5) * 7);
        fprintf(b, "]}");
    }
    fprintf(b, "],\n \"devices\": [");
    for (int g = 0; g < 2; g++) {
        const char *label = (g == 0) != (after != 0) ? "H100 #3" : "H100 #5", *u = g ? UB : UA;
        fprintf(b, "%s\n  {\"backend\": \"cuda\", \"name\": \"%s\", \"clock_domain\": \"device\", \"model\": \"H100\", "
                "\"key\": \"uuid:%s\", \"id_kind\": \"uuid\", \"ordinal\": %d, \"uuid\": \"%s\"}",
            g ? "," : "", label, u, label[6] - '0', u);
    }
    fprintf(b, "]}\n");
    assert_int_equal(fclose(b), 0);
    return path;
}

/* What the CLI did before it read files narrowly: both snapshots whole, filtered, kt_compare. */
static void filter_whole(kt_snapshot_t *s, const char *glob)
{
    if (!glob)
        return;
    size_t kept = 0;
    for (size_t i = 0; i < s->count; i++) {
        kt_kernel_timing_t *e = &s->entries[i];
        if (fnmatch(glob, e->name, 0) == 0) {
            s->entries[kept++] = *e;
            continue;
        }
        free((void *)e->name);
        free((void *)e->device);
        free(e->samples);
        free(e->hist);
        free(e->by_source);
    }
    s->count = kept;
}

/* The comparison printed in `format`, the whole way (whole = 1) or through compare_files.h; malloc'd. */
static char *printed(const char *before, const char *after, const kt_compare_opts_t *o, const char *glob,
                     kt_compare_format_t format, int whole)
{
    char *text = NULL, err[512];
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    assert_non_null(m);
    kt_compare_result_t r;
    if (whole) {
        kt_snapshot_t *s[2] = {NULL, NULL};
        assert_int_equal(kt_snapshot_load(before, &(kt_load_opts_t){.max_bytes = 1u << 30}, &s[0], err, sizeof err), 0);
        assert_int_equal(kt_snapshot_load(after, &(kt_load_opts_t){.max_bytes = 1u << 30}, &s[1], err, sizeof err), 0);
        filter_whole(s[0], glob);
        filter_whole(s[1], glob);
        assert_int_equal(kt_compare(s[0], s[1], o, &r), 0);
        assert_int_equal(kt_compare_print(m, &r, format), 0);
        kt_compare_free(&r);
        kt_snapshot_free(s[0]);
        kt_snapshot_free(s[1]);
    } else {
        kt__cmp_files_t *f = NULL;
        assert_int_equal(kt__compare_files_load(before, after, 1u << 30, glob, &f, err, sizeof err), 0);
        assert_int_equal(kt__compare_files(f, o, &r), 0);
        assert_int_equal(kt_compare_print(m, &r, format), 0);
        kt__compare_files_free(f, &r);
    }
    assert_int_equal(fclose(m), 0);
    return text;
}

static void test_same_bytes(void **state)
{
    (void)state;
    char *before = write_side("before.json", 0, 60), *after = write_side("after.json", 1, 60);
    const kt_compare_opts_t opts[2] = {{0}, {.threshold_pct = 2, .seed = 7, .min_samples = 20, .bootstrap = 500}};
    const char *globs[3] = {NULL, "k_0[0-2]*", "gemm"};
    static const kt_compare_format_t kFormats[3] = {KT_COMPARE_TEXT, KT_COMPARE_MARKDOWN, KT_COMPARE_JSON};
    for (int o = 0; o < 2; o++)
        for (int g = 0; g < 3; g++)
            for (int f = 0; f < 3; f++) {
                char *want = printed(before, after, &opts[o], globs[g], kFormats[f], 1);
                char *got = printed(before, after, &opts[o], globs[g], kFormats[f], 0);
                if (strcmp(want, got))
                    fail_msg("opts %d, filter %s, format %d: the outputs differ\n--- whole:\n%s\n--- files:\n%s", o,
                             globs[g] ? globs[g] : "-", f, want, got);
                if (f == 2 && g == 0) { /* the file exercises what it should */
                    assert_non_null(strstr(got, "\"device_after\":\"H100 #5\""));
                    assert_non_null(strstr(got, "\"presence\":\"before_only\""));
                    assert_non_null(strstr(got, "\"presence\":\"after_only\""));
                    assert_non_null(strstr(got, "\"verdict\":\"SLOWER\""));
                    assert_non_null(strstr(got, "aggregates only"));
                }
                free(want);
                free(got);
            }
    free(before);
    free(after);
}

/* A file the loader refuses is refused with its message; a duplicate kernel (out of order, so found after the
 * sort) with the loader's message naming both entries. */
static void test_same_errors(void **state)
{
    (void)state;
    static const char *const kBad[] = {
        "{\"schema\": \"ktiming.snapshot\", \"version\": 1, \"entries\": [\n"
        " {\"name\": \"b\", \"backend\": \"cpu\", \"dispatch_count\": 1, \"total_ns\": 1, \"min_ns\": 1, \"max_ns\": 1},\n"
        " {\"name\": \"a\", \"backend\": \"cpu\", \"dispatch_count\": 1, \"total_ns\": 1, \"min_ns\": 1, \"max_ns\": 1},\n"
        " {\"name\": \"b\", \"backend\": \"cpu\", \"dispatch_count\": 2, \"total_ns\": 2, \"min_ns\": 1, \"max_ns\": 1}]}",
        "{\"schema\": \"ktiming.snapshot\", \"version\": 1, \"entries\": [\n"
        " {\"name\": \"a\", \"backend\": \"cpu\", \"dispatch_count\": 1, \"total_ns\": 1, \"min_ns\": 1, \"max_ns\": 1}],\n"
        " \"threads\": [{\"id\": 1}], \"spans\": [{\"entry\": 1, \"thread\": 0, \"start_ns\": 1, \"end_ns\": 2}]}",
        "{\"schema\": \"ktiming.snapshot\", \"version\": 1, \"entries\": [\n"
        " {\"name\": \"a\", \"backend\": \"cpu\", \"dispatch_count\": 1, \"total_ns\": 1, \"min_ns\": 2, \"max_ns\": 1}]}",
    };
    char *good = write_side("good.json", 0, 8), *bad = ktt_path(g_dir, "bad.json");
    for (size_t i = 0; i < sizeof kBad / sizeof kBad[0]; i++) {
        assert_int_equal(ktt_write_file(bad, kBad[i], strlen(kBad[i])), 0);
        char want[512] = "", got[512] = "";
        kt_snapshot_t *s = NULL;
        int rc = kt_snapshot_load(bad, &(kt_load_opts_t){.max_bytes = 1u << 30}, &s, want, sizeof want);
        assert_int_equal(rc, KT_EPARSE);
        kt__cmp_files_t *f = NULL;
        assert_int_equal(kt__compare_files_load(good, bad, 1u << 30, NULL, &f, got, sizeof got), rc);
        assert_null(f);
        assert_string_equal(got, want);
        got[0] = '\0';
        assert_int_equal(kt__compare_files_load(bad, good, 1u << 30, NULL, &f, got, sizeof got), rc);
        assert_string_equal(got, want);
        if (i == 0) /* the duplicate, found after the sort, named as the loader names it */
            assert_non_null(strstr(got, "entries[0] and entries[2]: the same (name, backend, device) twice"));
        if (i == 1)
            assert_non_null(strstr(got, "index out of range of entries"));
    }
    free(good);
    free(bad);
}

/* 20,000 kernels a side without samples: the two files as read for a comparison hold at most a third of what
 * the two snapshots hold (64-byte records and packed names against 360-byte entries and two blocks each). */
static void test_memory(void **state)
{
    (void)state;
    enum { N = 20000 };
    char *path = ktt_path(g_dir, "big.json");
    FILE *out = fopen(path, "w");
    assert_non_null(out);
    fputs("{\"schema\": \"ktiming.snapshot\", \"version\": 1, \"entries\": [", out);
    for (int k = 0; k < N; k++)
        fprintf(out, "%s\n{\"name\": \"kernel_%07d\", \"backend\": \"cpu\", \"device\": \"host\", \"dispatch_count\": 4, "
                     "\"total_ns\": 4000, \"min_ns\": 900, \"max_ns\": 1100, \"p50_ns\": 1000}",
                k ? "," : "", k);
    fputs("]}\n", out);
    assert_int_equal(fclose(out), 0);
    char err[512];
    size_t h0 = ktt_heap_used();
    kt_snapshot_t *s[2] = {NULL, NULL};
    assert_int_equal(kt_snapshot_load(path, &(kt_load_opts_t){.max_bytes = 1u << 30}, &s[0], err, sizeof err), 0);
    assert_int_equal(kt_snapshot_load(path, &(kt_load_opts_t){.max_bytes = 1u << 30}, &s[1], err, sizeof err), 0);
    size_t whole = ktt_heap_used() - h0;
    kt_snapshot_free(s[0]);
    kt_snapshot_free(s[1]);
    h0 = ktt_heap_used();
    kt__cmp_files_t *f = NULL;
    assert_int_equal(kt__compare_files_load(path, path, 1u << 30, NULL, &f, err, sizeof err), 0);
    size_t narrow = ktt_heap_used() - h0;
    kt__compare_files_free(f, NULL);
    print_message("two snapshots: %zu bytes a kernel; read for a comparison: %zu\n", whole / (2 * N),
                  narrow / (2 * N));
    assert_true(whole >= 2 * N * sizeof(kt_kernel_timing_t));
    assert_true(narrow * 3 <= whole);
    free(path);
}

KTT_TMPDIR_GROUP(g_dir, "compare-files")

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_bytes),
        cmocka_unit_test(test_same_errors),
        cmocka_unit_test(test_memory),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
