/* fuzz_merge.c — libFuzzer, differential: the merge `ktiming merge` writes an entry at a time (merge_consume.h,
 * by_rank.h) against kt_snapshot_merge made whole and then written. The input's first byte chooses the shape (1-3
 * inputs, --by-model, whether the streamed merge releases its inputs as it goes); the rest is up to three snapshots
 * separated by NUL bytes (reused in turn when there are fewer). When every input parses, both merges must agree:
 * the same status (KT_ENOMEM aside), and on success the same JSON bytes and the same by-rank report. The corpus
 * (tests/fuzz/corpus-merge) is also replayed in every build by the analysis_merge_fuzz_regress test. */
#include <ktiming/analysis.h>

#include "analysis/by_rank.h"
#include "analysis/merge_consume.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
unsigned kt_fuzz_merge_compared; /* inputs whose two merges were written and compared (the corpus replay reads it) */

#define INPUTS_MAX 3
#define NOT_RUN 1 /* a status a kt_* call never returns (theirs are 0 or negative) */

/* The snapshots of the input's chunks, n of them (chunks reused in turn); 0 when one does not parse. */
static int parse_all(const uint8_t *data, size_t size, size_t n, kt_snapshot_t **out)
{
    const char *chunk[INPUTS_MAX];
    size_t len[INPUTS_MAX], chunks = 0, at = 0;
    while (chunks < INPUTS_MAX && at <= size) {
        const uint8_t *nul = memchr(data + at, 0, size - at);
        size_t end = nul ? (size_t)(nul - data) : size;
        chunk[chunks] = (const char *)data + at;
        len[chunks++] = end - at;
        at = end + 1;
        if (!nul)
            break;
    }
    for (size_t i = 0; i < n; i++) {
        out[i] = NULL;
        if (kt_snapshot_parse(chunk[i % chunks], len[i % chunks], &out[i], NULL, 0) != 0) {
            for (size_t k = 0; k < i; k++)
                kt_snapshot_free(out[k]);
            return 0;
        }
    }
    return 1;
}

static void free_all(kt_snapshot_t **s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        kt_snapshot_free(s[i]);
}

/* A memory stream's text, closed; NULL (with *len 0) when it could not be made. */
typedef struct text_t {
    char *p;
    size_t len;
    FILE *f;
} text_t;

static void text_close(text_t *t)
{
    if (t->f)
        fclose(t->f);
    t->f = NULL;
}

static int same_text(const text_t *a, const text_t *b)
{
    return a->len == b->len && (!a->len || !memcmp(a->p, b->p, a->len));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t n = (size_t)(data[0] & 3) % INPUTS_MAX + 1;
    kt_merge_opts_t opts = {.by_model = (data[0] >> 2) & 1};
    int consume = (data[0] >> 3) & 1;
    kt_snapshot_t *a[INPUTS_MAX], *b[INPUTS_MAX];
    if (!parse_all(data + 1, size - 1, n, a))
        return 0;
    if (!parse_all(data + 1, size - 1, n, b))
        abort(); /* the same text parsed once */

    /* whole: kt_snapshot_merge, then the writer and the report */
    text_t json_a = {0}, rank_a = {0}, json_b = {0}, rank_b = {0};
    kt_snapshot_t *merged = NULL;
    int rc_a = kt_snapshot_merge((const kt_snapshot_t *const *)a, n, &opts, &merged), json_rc_a = NOT_RUN, rank_rc_a = NOT_RUN;
    if (!rc_a) {
        if ((json_a.f = open_memstream(&json_a.p, &json_a.len)))
            json_rc_a = kt_report_print(json_a.f, merged, KT_FORMAT_JSON, NULL);
        if ((rank_a.f = open_memstream(&rank_a.p, &rank_a.len)))
            rank_rc_a = kt_report_by_rank(rank_a.f, merged);
        text_close(&json_a);
        text_close(&rank_a);
    }

    /* streamed: made an entry at a time, each written and kept for the report as it is made */
    kt__merge_iter_t *it = NULL;
    kt__by_rank_t *keep = NULL;
    int rc_b = kt__merge_begin((const kt_snapshot_t *const *)b, consume ? b : NULL, n, &opts, &it), json_rc_b = NOT_RUN,
        rank_rc_b = NOT_RUN;
    if ((rc_a == 0) != (rc_b == 0) && rc_a != KT_ENOMEM && rc_b != KT_ENOMEM)
        abort(); /* one refused what the other merged */
    if (!rc_b && (keep = kt__by_rank_new(kt__merge_count(it)))) {
        kt__entry_view_t inner;
        kt__by_rank_keeping_t k;
        kt__merge_view(it, &inner);
        kt__by_rank_keeping(&k, &inner, keep); /* as `ktiming merge --by-rank -o` keeps them */
        const kt__entry_view_t *v = &k.view;
        const kt_snapshot_t *meta = kt__merge_result(it);
        if ((json_b.f = open_memstream(&json_b.p, &json_b.len)))
            json_rc_b = kt__report_print_view(json_b.f, meta, v, KT_FORMAT_JSON, NULL);
        if (!json_rc_b && !k.rc && (rank_b.f = open_memstream(&rank_b.p, &rank_b.len)))
            rank_rc_b = kt__by_rank_print(rank_b.f, meta, keep);
        else if (!json_rc_b)
            rank_rc_b = k.rc ? k.rc : KT_ENOMEM;
        text_close(&json_b);
        text_close(&rank_b);
        if (!json_rc_b && kt__merge_status(it))
            abort(); /* written though the merge failed */
    }
    if (!json_rc_a && !json_rc_b && !same_text(&json_a, &json_b))
        abort(); /* the streamed bytes differ from the merge made whole */
    if (!rank_rc_a && !rank_rc_b && !same_text(&rank_a, &rank_b))
        abort(); /* the by-rank report differs */
    if (!json_rc_a && !json_rc_b && !rank_rc_a && !rank_rc_b)
        kt_fuzz_merge_compared++;
    if ((json_rc_a && json_rc_a != NOT_RUN && json_rc_a != KT_ENOMEM) ||
        (json_rc_b && json_rc_b != NOT_RUN && json_rc_b != KT_ENOMEM))
        abort(); /* the writer refused a merge's result */
    if (rank_rc_a != rank_rc_b && rank_rc_a != NOT_RUN && rank_rc_b != NOT_RUN && rank_rc_a != KT_ENOMEM &&
        rank_rc_b != KT_ENOMEM)
        abort(); /* the by-rank report failed one way only */
    kt__merge_end(it);
    kt__by_rank_free(keep);
    kt_snapshot_free(merged);
    free(json_a.p);
    free(rank_a.p);
    free(json_b.p);
    free(rank_b.p);
    free_all(a, n);
    free_all(b, n);
    return 0;
}
