/* test_merge_consume.c — `ktiming merge`'s merge that releases its inputs' entries as they are merged
 * (src/analysis/merge_consume.h, issue 39.9): the same merged snapshot, written byte for byte, as kt_snapshot_merge
 * of the same inputs (one input, several, an earlier merge among them with its sources and per-source totals,
 * kernels on one side only, devices grouped by model), and the inputs emptied afterwards. */
#include "analysis/merge_consume.h"
#include "support/merge_synth.h"

#include <ktiming.h>
#include <ktiming/analysis.h>

#include <setjmp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

/* Input `which` (0..2) of a set, built afresh each time (the consuming merge empties it): kernels k_00000.. with
 * 0 to 40 samples, some only in one input; input 2 is large enough that whole pages of its entries are given
 * back during the merge. */
static kt_snapshot_t *input(int which)
{
    return merge_synth_input(which, which == 2 ? 20000 : 300, 0.05, 1000u * (unsigned)(which + 1));
}

/* The inputs of set `set`: {0}, {0, 1, 2}, {merge(0, 1), 2}. */
static size_t inputs(int set, kt_snapshot_t **in)
{
    if (set == 0) {
        in[0] = input(0);
        return 1;
    }
    if (set == 1) {
        for (int i = 0; i < 3; i++)
            in[i] = input(i);
        return 3;
    }
    kt_snapshot_t *pair[2] = {input(0), input(1)};
    assert_int_equal(kt_snapshot_merge((const kt_snapshot_t *const *)pair, 2, NULL, &in[0]), 0);
    kt_snapshot_free(pair[0]);
    kt_snapshot_free(pair[1]);
    in[1] = input(2);
    return 2;
}

static char *json_of(const kt_snapshot_t *s)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    assert_non_null(m);
    assert_int_equal(kt_report_print(m, s, KT_FORMAT_JSON, NULL), 0);
    assert_int_equal(fclose(m), 0);
    return text;
}

static void test_same_result(void **state)
{
    (void)state;
    for (int set = 0; set < 3; set++)
        for (int by_model = 0; by_model < 2; by_model++) {
            kt_merge_opts_t o = {.by_model = by_model};
            kt_snapshot_t *in[3] = {NULL}, *want = NULL, *got = NULL;
            size_t n = inputs(set, in);
            assert_int_equal(kt_snapshot_merge((const kt_snapshot_t *const *)in, n, &o, &want), 0);
            for (size_t i = 0; i < n; i++)
                kt_snapshot_free(in[i]);
            n = inputs(set, in);
            size_t before = 0;
            for (size_t i = 0; i < n; i++)
                before += in[i]->count;
            assert_int_equal(kt__snapshot_merge_consume(in, n, &o, &got), 0);
            for (size_t i = 0; i < n; i++) { /* emptied: nothing of an entry is held after the merge */
                for (size_t k = 0; k < in[i]->count; k++) {
                    const kt_kernel_timing_t *e = &in[i]->entries[k];
                    if (e->name || e->device || e->samples || e->hist || e->by_source)
                        fail_msg("set %d input %zu entry %zu still holds its members", set, i, k);
                }
                kt_snapshot_free(in[i]);
            }
            char *a = json_of(want), *b = json_of(got);
            if (strcmp(a, b))
                fail_msg("set %d, by_model %d: the merged snapshots differ", set, by_model);
            assert_true(got->count > 0 && got->count <= before);
            free(a);
            free(b);
            kt_snapshot_free(want);
            kt_snapshot_free(got);
        }
}

/* Inputs it refuses, it refuses as kt_snapshot_merge does, before it releases anything. */
static void test_same_refusals(void **state)
{
    (void)state;
    kt_snapshot_t *in[2] = {input(0), NULL}, *out = NULL;
    assert_int_equal(kt_snapshot_merge((const kt_snapshot_t *const *)in, 2, NULL, &out), KT_EINVAL);
    assert_int_equal(kt__snapshot_merge_consume(in, 2, NULL, &out), KT_EINVAL);
    assert_int_equal(kt__snapshot_merge_consume(in, 0, NULL, &out), KT_EINVAL);
    assert_null(out);
    const char *name = in[0]->entries[0].name; /* an entry without a name */
    in[0]->entries[0].name = NULL;
    assert_int_equal(kt_snapshot_merge((const kt_snapshot_t *const *)in, 1, NULL, &out), KT_EINVAL);
    assert_int_equal(kt__snapshot_merge_consume(in, 1, NULL, &out), KT_EINVAL);
    assert_null(out);
    in[0]->entries[0].name = name;
    for (size_t k = 0; k < in[0]->count; k++)
        assert_non_null(in[0]->entries[k].name);
    kt_snapshot_free(in[0]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_result),
        cmocka_unit_test(test_same_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
