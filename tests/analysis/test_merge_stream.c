/* test_merge_stream.c — `ktiming merge` writing the merged snapshot as it is made (src/analysis/merge_consume.h:
 * kt__merge_begin / kt__merge_view, the JSON writer reading a view, issue 39.9): the same bytes as kt_snapshot_merge
 * then kt_report_print / kt_report_write, for inputs with spans, threads, queues and devices, one or several, an
 * earlier merge among them, devices folded by model, inputs kept or released; a failure in the middle leaves no
 * file (and an old one as it was); and no array of merged entries is held while writing. */
#include "analysis/by_rank.h"
#include "analysis/merge_consume.h"
#include "support/merge_synth.h"
#include "support/files.h"
#include "support/heap.h"

#include <ktiming.h>
#include <ktiming/analysis.h>

#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

static char *g_dir;
KTT_TMPDIR_GROUP(g_dir, "merge_stream")

/* Input `which` (0..2) of n kernels: some only in one input, CPU and OpenCL entries, samples or aggregates only;
 * with spans (host and queue ones) on two threads and a queue, and an OpenCL device record of one model on each
 * host (kept apart by host, folded with by_model). */
static kt_snapshot_t *input(int which, size_t n)
{
    kt_snapshot_t *s = merge_synth_input(which, n, 0.3, 1000000u * (unsigned)(which + 1));
    s->device_count = 1;
    s->devices = calloc(1, sizeof *s->devices);
    kt_device_info_t *d = &s->devices[0];
    d->backend = KT_BACKEND_OPENCL;
    snprintf(d->name, sizeof d->name, "gpu");
    snprintf(d->key, sizeof d->key, "pci:0000:0%d:00.0", which);
    snprintf(d->id.model, sizeof d->id.model, "Model X");
    snprintf(d->id.id_kind, sizeof d->id.id_kind, "pci");
    d->id.ordinal = 0;
    d->rank = -1;
    s->thread_count = 2;
    s->threads = calloc(2, sizeof *s->threads);
    for (uint32_t t = 0; t < 2; t++) {
        s->threads[t].os_tid = 4000u + t + 10u * (unsigned)which;
        snprintf(s->threads[t].name, sizeof s->threads[t].name, "worker%u", t);
    }
    s->queue_count = 1;
    s->queues = calloc(1, sizeof *s->queues);
    s->queues[0].backend = KT_BACKEND_OPENCL;
    snprintf(s->queues[0].device, sizeof s->queues[0].device, "gpu");
    snprintf(s->queues[0].label, sizeof s->queues[0].label, "queue %d", which);
    s->span_count = s->count * 2;
    s->spans = calloc(s->span_count, sizeof *s->spans);
    for (size_t i = 0; i < s->span_count; i++) {
        kt_span_t *sp = &s->spans[i];
        sp->entry = (uint32_t)((i * 7) % s->count);
        sp->thread = (uint32_t)(i % 2);
        sp->queue = s->entries[sp->entry].backend == KT_BACKEND_OPENCL ? 0 : UINT32_MAX;
        sp->start_ns = 5000 + i * 1000 + (uint64_t)which * 333;
        sp->duration_ns = 400 + i % 9;
        sp->end_ns = sp->start_ns + sp->duration_ns;
        sp->enqueue_ns = i % 4 ? sp->start_ns - 50 : 0;
    }
    return s;
}

/* The inputs of set `set` (n kernels each): {0}, {0, 1, 2}, {merge(0, 1), 2}, {2, 0, 1} (an order the entries
 * must be sorted from). */
static size_t inputs(int set, size_t n, kt_snapshot_t **in)
{
    if (set == 0) {
        in[0] = input(0, n);
        return 1;
    }
    if (set == 1 || set == 3) {
        for (int i = 0; i < 3; i++)
            in[i] = input(set == 3 ? (i + 2) % 3 : i, n);
        return 3;
    }
    kt_snapshot_t *pair[2] = {input(0, n), input(1, n)};
    assert_int_equal(kt_snapshot_merge((const kt_snapshot_t *const *)pair, 2, NULL, &in[0]), 0);
    kt_snapshot_free(pair[0]);
    kt_snapshot_free(pair[1]);
    in[1] = input(2, n);
    return 2;
}

static char *json_of(const kt_snapshot_t *s, size_t *len)
{
    char *text = NULL;
    FILE *m = open_memstream(&text, len);
    assert_non_null(m);
    assert_int_equal(kt_report_print(m, s, KT_FORMAT_JSON, NULL), 0);
    assert_int_equal(fclose(m), 0);
    return text;
}

/* The streamed merge of in[0..n) printed (path NULL) or written to path: its text (printed) or NULL. */
static char *streamed(kt_snapshot_t **in, size_t n, int own, int by_model, const char *path, size_t *len)
{
    kt_merge_opts_t o = {.by_model = by_model};
    kt__merge_iter_t *it = NULL;
    assert_int_equal(kt__merge_begin((const kt_snapshot_t *const *)in, own ? in : NULL, n, &o, &it), 0);
    assert_non_null(it);
    assert_int_equal(kt__merge_result(it)->count, 0);
    assert_int_equal(kt__merge_result(it)->span_count, 0); /* merged once the entries are made */
    kt__entry_view_t v;
    kt__merge_view(it, &v);
    char *text = NULL;
    if (path) {
        assert_int_equal(kt__report_write_view(path, kt__merge_result(it), &v, KT_FORMAT_JSON, NULL), 0);
    } else {
        FILE *m = open_memstream(&text, len);
        assert_non_null(m);
        assert_int_equal(kt__report_print_view(m, kt__merge_result(it), &v, KT_FORMAT_JSON, NULL), 0);
        assert_int_equal(fclose(m), 0);
    }
    assert_int_equal(kt__merge_status(it), 0);
    kt__merge_end(it);
    return text;
}

static void test_same_bytes(void **state)
{
    (void)state;
    char *path = ktt_path(g_dir, "merged.json");
    for (int set = 0; set < 4; set++)
        for (int by_model = 0; by_model < 2; by_model++)
            for (int own = 0; own < 2; own++)
                for (int to_file = 0; to_file < 2; to_file++) {
                    kt_merge_opts_t o = {.by_model = by_model};
                    kt_snapshot_t *in[3] = {NULL}, *want = NULL;
                    size_t n = inputs(set, 300, in), wl = 0, gl = 0;
                    assert_int_equal(kt_snapshot_merge((const kt_snapshot_t *const *)in, n, &o, &want), 0);
                    assert_true(want->span_count > 0 && want->count > 0);
                    char *a = json_of(want, &wl);
                    char *b = streamed(in, n, own, by_model, to_file ? path : NULL, &gl);
                    if (to_file)
                        b = ktt_read_file(path, &gl);
                    assert_non_null(b);
                    if (wl != gl || memcmp(a, b, wl))
                        fail_msg("set %d, by_model %d, own %d, to_file %d: the streamed snapshot differs", set,
                                 by_model, own, to_file);
                    free(a);
                    free(b);
                    kt_snapshot_free(want);
                    for (size_t i = 0; i < n; i++)
                        kt_snapshot_free(in[i]);
                }
    remove(path);
    free(path);
}

/* One input merged from its entries in order (no refs: read as merged) and reversed (sorted first), spans
 * following their entries: the same snapshot, streamed or whole. */
static void test_order_of_one_input(void **state)
{
    (void)state;
    for (int by_model = 0; by_model < 2; by_model++) {
        kt_merge_opts_t o = {.by_model = by_model};
        kt_snapshot_t *in[1] = {input(0, 300)}, *rev[1] = {input(0, 300)}, *a = NULL, *b = NULL;
        size_t n = rev[0]->count;
        for (size_t k = 0; k < n / 2; k++) {
            kt_kernel_timing_t t = rev[0]->entries[k];
            rev[0]->entries[k] = rev[0]->entries[n - 1 - k];
            rev[0]->entries[n - 1 - k] = t;
        }
        for (size_t i = 0; i < rev[0]->span_count; i++)
            rev[0]->spans[i].entry = (uint32_t)(n - 1 - rev[0]->spans[i].entry);
        assert_int_equal(kt_snapshot_merge((const kt_snapshot_t *const *)in, 1, &o, &a), 0);
        assert_int_equal(kt_snapshot_merge((const kt_snapshot_t *const *)rev, 1, &o, &b), 0);
        size_t la = 0, lb = 0, ls = 0;
        char *ja = json_of(a, &la), *jb = json_of(b, &lb), *js = streamed(rev, 1, 1, by_model, NULL, &ls);
        assert_true(la == lb && !memcmp(ja, jb, la));
        assert_true(la == ls && !memcmp(ja, js, la));
        free(ja);
        free(jb);
        free(js);
        kt_snapshot_free(a);
        kt_snapshot_free(b);
        kt_snapshot_free(in[0]);
        kt_snapshot_free(rev[0]);
    }
}

/* A view over the merge's that fails at entry `at`: NULL (out of memory), or an entry the writer refuses. */
typedef struct failing_t {
    kt__entry_view_t inner;
    size_t at;
    int bad_entry;
    kt_kernel_timing_t bad;
} failing_t;

static const kt_kernel_timing_t *failing_get(const kt__entry_view_t *v, size_t i, kt_kernel_timing_t *tmp)
{
    failing_t *f = (failing_t *)v->user;
    const kt_kernel_timing_t *e = kt__view_entry(&f->inner, i, tmp);
    if (i != f->at || !e)
        return e;
    if (!f->bad_entry)
        return NULL;
    f->bad = *e;
    f->bad.backend = (kt_backend_t)KT_BACKEND_COUNT; /* no such backend */
    return &f->bad;
}

/* Files in g_dir. */
static size_t dir_files(void)
{
    DIR *d = opendir(g_dir);
    assert_non_null(d);
    size_t n = 0;
    for (struct dirent *de; (de = readdir(d));)
        n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
    closedir(d);
    return n;
}

static void test_failure_leaves_no_file(void **state)
{
    (void)state;
    char *fresh = ktt_path(g_dir, "fresh.json"), *old = ktt_path(g_dir, "old.json");
    for (int bad_entry = 0; bad_entry < 2; bad_entry++)
        for (int replace = 0; replace < 2; replace++) {
            const char *path = replace ? old : fresh;
            remove(fresh);
            assert_int_equal(ktt_write_file(old, "old\n", 4), 0);
            kt_snapshot_t *in[3] = {NULL};
            size_t n = inputs(1, 300, in);
            kt__merge_iter_t *it = NULL;
            assert_int_equal(kt__merge_begin((const kt_snapshot_t *const *)in, in, n, NULL, &it), 0);
            failing_t f = {.at = kt__merge_count(it) / 2, .bad_entry = bad_entry};
            kt__merge_view(it, &f.inner);
            kt__entry_view_t v = f.inner;
            v.get = failing_get;
            v.user = &f;
            assert_int_equal(kt__report_write_view(path, kt__merge_result(it), &v, KT_FORMAT_JSON, NULL),
                             bad_entry ? KT_EINVAL : KT_ENOMEM);
            kt__merge_end(it);
            for (size_t i = 0; i < n; i++)
                kt_snapshot_free(in[i]);
            size_t len = 0;
            char *text = ktt_read_file(old, &len);
            assert_non_null(text);
            assert_int_equal(len, 4);
            assert_memory_equal(text, "old\n", 4); /* the old file as it was */
            free(text);
            assert_null(fopen(fresh, "r"));  /* no new file */
            assert_int_equal(dir_files(), 1); /* and no temporary one left */
        }
    remove(old);
    free(fresh);
    free(old);
}

/* The view makes its entries in order only; once every entry is made, asking again is refused. */
static void test_view_in_order(void **state)
{
    (void)state;
    kt_snapshot_t *in[1] = {input(0, 50)};
    kt__merge_iter_t *it = NULL;
    assert_int_equal(kt__merge_begin((const kt_snapshot_t *const *)in, NULL, 1, NULL, &it), 0);
    kt__entry_view_t v;
    kt__merge_view(it, &v);
    kt_kernel_timing_t tmp;
    assert_int_equal(v.count, 50);
    assert_null(v.get(&v, 1, &tmp)); /* entry 0 first */
    for (size_t i = 0; i < v.count; i++) {
        const kt_kernel_timing_t *e = v.get(&v, i, &tmp);
        assert_non_null(e);
        assert_non_null(e->name);
    }
    assert_int_equal(kt__merge_result(it)->span_count, in[0]->span_count); /* merged after the last entry */
    assert_int_equal(kt__merge_status(it), 0);
    assert_int_equal(kt__merge_next(it, &tmp), KT_EINVAL); /* none left */
    kt__merge_end(it);
    kt_snapshot_free(in[0]);
}

/* Heap held while the merge is written, per kernel, beside the inputs: the merge's order and maps (36 bytes a
 * kernel measured), not merged entries (376 bytes each, and their samples, when merged whole then written, which
 * the second half checks, so the measure is not vacuous). */
#define N_MEM 20000
#define BOUND_PER_KERNEL 120

static void test_memory(void **state)
{
    (void)state;
    kt_snapshot_t *in[1] = {input(0, N_MEM)};
    free(in[0]->spans); /* held by both ways (merged, then written after the entries): not what is measured */
    in[0]->spans = NULL;
    in[0]->span_count = 0;
    ktt_heap_sink_t k = {0, 0};
    static char buf[256]; /* small: the writer writes (and the heap is sampled) all along */
    for (int whole = 0; whole < 2; whole++) {
        k = (ktt_heap_sink_t){0, 0};
        FILE *out = ktt_heap_sink_open(&k, buf, sizeof buf);
        assert_non_null(out);
        size_t base = ktt_heap_used();
        k.peak = base;
        if (whole) {
            kt_snapshot_t *m = NULL;
            assert_int_equal(kt_snapshot_merge((const kt_snapshot_t *const *)in, 1, NULL, &m), 0);
            assert_int_equal(kt_report_print(out, m, KT_FORMAT_JSON, NULL), 0);
            kt_snapshot_free(m);
        } else {
            kt__merge_iter_t *it = NULL;
            assert_int_equal(kt__merge_begin((const kt_snapshot_t *const *)in, NULL, 1, NULL, &it), 0);
            kt__entry_view_t v;
            kt__merge_view(it, &v);
            assert_int_equal(kt__report_print_view(out, kt__merge_result(it), &v, KT_FORMAT_JSON, NULL), 0);
            kt__merge_end(it);
        }
        fclose(out);
        assert_true(k.bytes > (size_t)N_MEM * 200); /* every entry was written */
        size_t held = k.peak > base ? k.peak - base : 0;
        print_message("%s: %zu bytes held a kernel while writing (bound %d)\n", whole ? "merged whole" : "streamed",
                      held / N_MEM, BOUND_PER_KERNEL);
        if (whole)
            assert_true(held / N_MEM > BOUND_PER_KERNEL);
        else
            assert_true(held / N_MEM <= BOUND_PER_KERNEL);
    }
    kt_snapshot_free(in[0]);
}

static char *by_rank_text(const kt_snapshot_t *meta, const kt__by_rank_t *keep, const kt_snapshot_t *whole)
{
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    assert_non_null(m);
    assert_int_equal(keep ? kt__by_rank_print(m, meta, keep) : kt_report_by_rank(m, whole), 0);
    assert_int_equal(fclose(m), 0);
    return text;
}

/* `merge --by-rank` from the entries kept as they are merged (by_rank.h): kt_report_by_rank's text of the merge
 * made whole, for kernels on one device and on several (one per host, or one model), for 3 sources (each listed
 * under each kernel) and 20 (the summary line only), an earlier merge among the inputs. */
static void test_by_rank_same_text(void **state)
{
    (void)state;
    for (int set = 1; set < 5; set++)
        for (int by_model = 0; by_model < 2; by_model++) {
            kt_merge_opts_t o = {.by_model = by_model};
            kt_snapshot_t *in[20] = {NULL}, *want = NULL;
            size_t n = 20;
            if (set < 4)
                n = inputs(set, 200, in);
            else
                for (size_t i = 0; i < n; i++)
                    in[i] = input((int)i, 40);
            assert_int_equal(kt_snapshot_merge((const kt_snapshot_t *const *)in, n, &o, &want), 0);
            char *a = by_rank_text(want, NULL, want);
            kt__merge_iter_t *it = NULL;
            assert_int_equal(kt__merge_begin((const kt_snapshot_t *const *)in, in, n, &o, &it), 0);
            kt__by_rank_t *keep = kt__by_rank_new(kt__merge_count(it));
            assert_non_null(keep);
            kt__entry_view_t v;
            kt__merge_view(it, &v);
            for (size_t i = 0; i < v.count; i++) {
                kt_kernel_timing_t tmp;
                const kt_kernel_timing_t *e = kt__view_entry(&v, i, &tmp);
                assert_non_null(e);
                assert_int_equal(kt__by_rank_keep(keep, e), 0);
            }
            char *b = by_rank_text(kt__merge_result(it), keep, NULL);
            if (strcmp(a, b))
                fail_msg("set %d, by_model %d: the by-rank reports differ:\n%s\n---\n%s", set, by_model, a, b);
            assert_non_null(strstr(a, set == 4 ? "[by-rank] 20 sources" : "[by-rank] "));
            if (!by_model && set < 4)
                assert_non_null(strstr(a, "    on ")); /* a kernel on several devices */
            free(a);
            free(b);
            kt__by_rank_free(keep);
            kt__merge_end(it);
            kt_snapshot_free(want);
            for (size_t i = 0; i < n; i++)
                kt_snapshot_free(in[i]);
        }
}

static ssize_t full_write(void *cookie, const char *buf, size_t size)
{
    (void)cookie;
    (void)buf;
    (void)size;
    errno = ENOSPC;
    return -1;
}

/* The by-rank report to a stream that cannot be written (a full disk, a closed descriptor): KT_EIO, also when the
 * whole report fits in the stream's buffer (it was 0 before, and `merge --by-rank > /dev/full` exited 0 with
 * nothing written). */
static void test_by_rank_unwritable(void **state)
{
    (void)state;
    kt_snapshot_t *in[2] = {input(0, 5), input(1, 5)}, *m = NULL;
    assert_int_equal(kt_snapshot_merge((const kt_snapshot_t *const *)in, 2, NULL, &m), 0);
    kt__by_rank_t *keep = kt__by_rank_new(m->count);
    assert_non_null(keep);
    for (size_t i = 0; i < m->count; i++)
        assert_int_equal(kt__by_rank_keep(keep, &m->entries[i]), 0);
    assert_int_equal(kt__by_rank_keep(keep, &m->entries[0]), KT_EINVAL); /* one more than it was made for */
    for (int kept = 0; kept < 2; kept++) {
        FILE *f = fopencookie(NULL, "w", (cookie_io_functions_t){NULL, full_write, NULL, NULL});
        assert_non_null(f);
        assert_int_equal(kept ? kt__by_rank_print(f, m, keep) : kt_report_by_rank(f, m), KT_EIO);
        fclose(f);
    }
    kt__by_rank_free(keep);
    kt_snapshot_free(m);
    kt_snapshot_free(in[0]);
    kt_snapshot_free(in[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_bytes),
        cmocka_unit_test(test_order_of_one_input),
        cmocka_unit_test(test_failure_leaves_no_file),
        cmocka_unit_test(test_view_in_order),
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_by_rank_same_text),
        cmocka_unit_test(test_by_rank_unwritable),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
