/* test_merge.c — kt_snapshot_merge: exact against statistics computed directly from the recorded durations,
 * associative in every statistic, sources/threads/spans kept; a version-1 file merges with a version-2 one;
 * output path templates (KTIMING_OUTPUT, KTIMING_TRACE; kt_path_expand itself: tests/core/test_path_expand.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <ktiming.h>
#include <ktiming/analysis.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/files.h"
#include "support/snapshot_assert.h"

/* Durations of three "processes" (kt_reset between them): kernel "k" in all three, "only_b" in one. */
static uint64_t dur(int part, int i) { return (uint64_t)(100 + part * 37) + (uint64_t)((i * 7919) % (500 + part * 1000)); }
static const int kN[3] = {300, 1700, 50};

static kt_snapshot_t *make_part(int part)
{
    kt_reset();
    kt_kernel_id_t k = kt_kernel_intern("k", KT_BACKEND_CPU, NULL);
    kt_kernel_id_t b = kt_kernel_intern("only_b", KT_BACKEND_CPU, NULL);
    for (int i = 0; i < kN[part]; i++) {
        uint64_t d = dur(part, i), t = 1000000 + (uint64_t)part * 10 + (uint64_t)i * 100;
        kt_dispatch_t disp = {.kernel = k, .duration_ns = d, .start_ns = t, .end_ns = t + d, .bytes = 8};
        kt_record_dispatch(&disp);
    }
    if (part == 1) {
        kt_record_dispatch(&(kt_dispatch_t){.kernel = b, .duration_ns = 5});
        kt_record_drop(b, KT_DROP_RING_FULL);
        kt_record_error(k, "E_TEST");
    }
    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    s->pid = 1000 + part; /* distinct "processes" */
    s->rank = part;
    return s;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Every statistic of two entries equal (samples: same count only, see analysis.h). */
static void assert_entry_same(const kt_kernel_timing_t *a, const kt_kernel_timing_t *b)
{
    assert_string_equal(a->name, b->name);
    assert_int_equal(a->dispatch_count, b->dispatch_count);
    assert_int_equal(a->total_ns, b->total_ns);
    assert_memory_equal(&a->total128, &b->total128, sizeof a->total128);
    assert_memory_equal(&a->sumsq128, &b->sumsq128, sizeof a->sumsq128);
    assert_int_equal(a->min_ns, b->min_ns);
    assert_int_equal(a->max_ns, b->max_ns);
    assert_int_equal(a->last_ns, b->last_ns);
    assert_true(a->mean_ns == b->mean_ns);
    assert_true(a->stddev_ns == b->stddev_ns);
    assert_int_equal(a->p50_ns, b->p50_ns);
    assert_int_equal(a->p90_ns, b->p90_ns);
    assert_int_equal(a->p99_ns, b->p99_ns);
    assert_int_equal(a->errors, b->errors);
    assert_int_equal(a->dropped, b->dropped);
    assert_memory_equal(a->dropped_by, b->dropped_by, sizeof a->dropped_by);
    assert_int_equal(a->bytes, b->bytes);
    assert_string_equal(a->last_error, b->last_error);
    assert_int_equal(a->hist_count, b->hist_count);
    if (a->hist_count)
        assert_memory_equal(a->hist, b->hist, a->hist_count * sizeof *a->hist);
    ktt_assert_by_source_same(a, b);
    assert_int_equal(a->sample_count, b->sample_count);
}

static void assert_snapshot_same(const kt_snapshot_t *a, const kt_snapshot_t *b)
{
    assert_int_equal(a->count, b->count);
    for (size_t i = 0; i < a->count; i++)
        assert_entry_same(&a->entries[i], &b->entries[i]);
    assert_int_equal(a->source_count, b->source_count);
    for (size_t i = 0; i < a->source_count; i++) {
        assert_string_equal(a->sources[i].host, b->sources[i].host);
        assert_int_equal(a->sources[i].pid, b->sources[i].pid);
        assert_int_equal(a->sources[i].rank, b->sources[i].rank);
        assert_int_equal(a->sources[i].offset_ns, b->sources[i].offset_ns);
        assert_int_equal(a->sources[i].offset_bound_ns, b->sources[i].offset_bound_ns);
    }
    assert_int_equal(a->thread_count, b->thread_count);
    for (size_t i = 0; i < a->thread_count; i++) {
        assert_int_equal(a->threads[i].os_tid, b->threads[i].os_tid);
        assert_string_equal(a->threads[i].name, b->threads[i].name);
        assert_int_equal(a->threads[i].source, b->threads[i].source);
    }
    assert_int_equal(a->span_count, b->span_count);
    if (a->span_count)
        assert_memory_equal(a->spans, b->spans, a->span_count * sizeof *a->spans);
    assert_int_equal(a->taken_ns, b->taken_ns);
}

static void test_exact_and_associative(void **state)
{
    (void)state;
    kt_snapshot_t *p[3] = {make_part(0), make_part(1), make_part(2)}, *abc, *ab, *ab_c, *bc, *a_bc;
    assert_int_equal(kt_snapshot_merge((const kt_snapshot_t *const *)p, 3, NULL, &abc), 0);
    assert_int_equal(kt_snapshot_merge((const kt_snapshot_t *const *)p, 2, NULL, &ab), 0);
    const kt_snapshot_t *x[2] = {ab, p[2]};
    assert_int_equal(kt_snapshot_merge(x, 2, NULL, &ab_c), 0);
    assert_int_equal(kt_snapshot_merge((const kt_snapshot_t *const *)p + 1, 2, NULL, &bc), 0);
    const kt_snapshot_t *y[2] = {p[0], bc};
    assert_int_equal(kt_snapshot_merge(y, 2, NULL, &a_bc), 0);
    assert_snapshot_same(abc, ab_c);
    assert_snapshot_same(abc, a_bc);

    /* exact against the durations themselves */
    size_t n = (size_t)kN[0] + kN[1] + kN[2], w = 0;
    uint64_t *all = malloc(n * sizeof *all);
    long double sum = 0;
    for (int part = 0; part < 3; part++)
        for (int i = 0; i < kN[part]; i++) {
            all[w++] = dur(part, i);
            sum += (long double)dur(part, i);
        }
    qsort(all, n, sizeof *all, cmp_u64);
    long double mean = sum / n, ss = 0;
    for (size_t i = 0; i < n; i++)
        ss += ((long double)all[i] - mean) * ((long double)all[i] - mean);
    const kt_kernel_timing_t *k = kt_snapshot_find(abc, "k", KT_BACKEND_CPU, NULL);
    assert_non_null(k);
    assert_int_equal(k->dispatch_count, n);
    assert_int_equal(k->total_ns, (uint64_t)sum);
    assert_int_equal(k->min_ns, all[0]);
    assert_int_equal(k->max_ns, all[n - 1]);
    assert_true(fabs(k->mean_ns - (double)mean) <= 1e-9 * (double)mean);
    assert_true(fabs(k->stddev_ns - sqrt((double)(ss / (n - 1)))) <= 1e-9 * k->stddev_ns);
    static const double ps[3] = {0.5, 0.9, 0.99};
    uint64_t got[3] = {k->p50_ns, k->p90_ns, k->p99_ns};
    for (int q = 0; q < 3; q++) {
        size_t r = (size_t)ceil(ps[q] * (double)n); /* nearest rank */
        double exact = (double)all[r - 1];
        assert_true(fabs((double)got[q] - exact) <= exact / 128.0 + 1.0);
    }
    assert_int_equal(k->bytes, 8 * n);
    assert_int_equal(k->errors, 1);
    assert_string_equal(k->last_error, "E_TEST");
    assert_true(k->sample_count > 0 && k->sample_count <= 1024);
    for (uint32_t i = 0; i < k->sample_count; i++) /* every sample is a recorded duration */
        assert_non_null(bsearch(&k->samples[i], all, n, sizeof *all, cmp_u64));
    const kt_kernel_timing_t *b = kt_snapshot_find(abc, "only_b", KT_BACKEND_CPU, NULL);
    assert_non_null(b);
    assert_int_equal(b->dropped, 1);
    assert_int_equal(b->dropped_by[KT_DROP_RING_FULL], 1);
    /* sources, per-source totals, spans with their source */
    assert_int_equal(abc->source_count, 3);
    for (int s = 0; s < 3; s++) {
        assert_int_equal(abc->sources[s].rank, s);
        assert_int_equal(abc->sources[s].pid, 1000 + s);
        assert_int_equal(k->by_source[s].source, s);
        assert_int_equal(k->by_source[s].dispatch_count, kN[s]);
    }
    assert_int_equal(abc->span_count, n);
    for (size_t i = 1; i < abc->span_count; i++)
        assert_true(abc->spans[i - 1].start_ns <= abc->spans[i].start_ns);
    kt_rank_balance_t *bal;
    size_t nb;
    assert_int_equal(kt_rank_balance(abc, &bal, &nb), 0);
    assert_int_equal(nb, abc->count);
    assert_int_equal(bal[k - abc->entries].slowest_source, 1); /* part 1 has most dispatches */
    free(bal);

    /* through JSON: the same statistics after a write / load round trip */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(kt_report_print(f, abc, KT_FORMAT_JSON, NULL), 0);
    fclose(f);
    kt_snapshot_t *back;
    char err[256];
    assert_int_equal(kt_snapshot_parse(buf, len, &back, err, sizeof err), 0);
    assert_snapshot_same(abc, back);
    free(buf);
    kt_snapshot_free(back);

    free(all);
    for (int i = 0; i < 3; i++)
        kt_snapshot_free(p[i]);
    kt_snapshot_free(abc);
    kt_snapshot_free(ab);
    kt_snapshot_free(ab_c);
    kt_snapshot_free(bc);
    kt_snapshot_free(a_bc);
}

/* A version-1 file (no sums, no histogram) merged with a version-2 snapshot. */
static void test_v1_with_v2(void **state)
{
    (void)state;
    static const char v1[] =
        "{\"schema\": \"ktiming.snapshot\", \"version\": 1, \"host\": \"old\", \"taken_ns\": 5,\n"
        " \"entries\": [{\"name\": \"k\", \"backend\": \"cpu\", \"device\": \"host\", \"dispatch_count\": 3,\n"
        "   \"total_ns\": 600, \"min_ns\": 100, \"max_ns\": 300, \"mean_ns\": 200, \"stddev_ns\": 100,\n"
        "   \"p50_ns\": 200, \"p90_ns\": 300, \"p99_ns\": 300, \"sample_count\": 3, \"samples\": [100, 200, 300]}]}";
    kt_snapshot_t *old, *cur, *m;
    char err[256];
    assert_int_equal(kt_snapshot_parse(v1, sizeof v1 - 1, &old, err, sizeof err), 0);
    kt_reset();
    kt_kernel_id_t k = kt_kernel_intern("k", KT_BACKEND_CPU, NULL);
    kt_record_dispatch(&(kt_dispatch_t){.kernel = k, .duration_ns = 400});
    kt_record_dispatch(&(kt_dispatch_t){.kernel = k, .duration_ns = 500});
    cur = kt_snapshot();
    const kt_snapshot_t *in[2] = {old, cur};
    assert_int_equal(kt_snapshot_merge(in, 2, NULL, &m), 0);
    const kt_kernel_timing_t *e = kt_snapshot_find(m, "k", KT_BACKEND_CPU, NULL);
    assert_non_null(e);
    /* 100 200 300 400 500: n 5, sum 1500, sum of squares 550000 */
    assert_int_equal(e->dispatch_count, 5);
    assert_int_equal(e->total_ns, 1500);
    assert_int_equal(e->sumsq128.lo, 550000);
    assert_int_equal(e->min_ns, 100);
    assert_int_equal(e->max_ns, 500);
    assert_true(e->mean_ns == 300.0);
    assert_true(fabs(e->stddev_ns - sqrt(25000.0)) < 1e-9);
    assert_true(e->p50_ns >= 297 && e->p50_ns <= 303); /* from the v1 samples standing for its dispatches */
    assert_int_equal(e->hist_count, 0); /* estimates are not passed on as a histogram */
    assert_int_equal(e->sample_count, 5);
    assert_int_equal(m->source_count, 2);
    assert_true(m->sources[1].offset_bound_ns == UINT64_MAX); /* another host: its clock is not ours */
    kt_snapshot_free(old);
    kt_snapshot_free(cur);
    kt_snapshot_free(m);
}

static void test_invalid(void **state)
{
    (void)state;
    kt_snapshot_t *m = (kt_snapshot_t *)1, bad = {0};
    kt_span_t sp = {.entry = 3};
    bad.span_count = 1;
    bad.spans = &sp;
    const kt_snapshot_t *in[1] = {&bad};
    assert_int_equal(kt_snapshot_merge(in, 1, NULL, &m), KT_EINVAL);
    assert_null(m);
    assert_int_equal(kt_snapshot_merge(in, 0, NULL, &m), KT_EINVAL);
    kt_rank_balance_t *b;
    size_t n;
    kt_snapshot_t plain = {0};
    assert_int_equal(kt_rank_balance(&plain, &b, &n), KT_EINVAL); /* not a merge */
}

/* KTIMING_OUTPUT and KTIMING_TRACE are templates, expanded where the file is written (at exit). */
static void test_output_template(void **state)
{
    (void)state;
    char want[4096], trace[4096];
    char *dir = ktt_tmpdir("template");
    assert_non_null(dir);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char out[4096], tr[4096];
        snprintf(out, sizeof out, "%s/out-%%p-r%%r-%%%%.json", dir);
        snprintf(tr, sizeof tr, "%s/trace-%%r.json", dir);
        setenv("KTIMING_OUTPUT", out, 1);
        setenv("KTIMING_TRACE", tr, 1);
        setenv("OMPI_COMM_WORLD_RANK", "5", 1);
        kt_record("templated", KT_BACKEND_CPU, 10);
        exit(0);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    snprintf(want, sizeof want, "%s/out-%ld-r5-%%.json", dir, (long)pid);
    /* A forked child's template without %p gets .PID appended: never the parent's file (docs/safety.md). */
    snprintf(trace, sizeof trace, "%s/trace-5.json.%ld", dir, (long)pid);
    kt_snapshot_t *s;
    char err[256];
    assert_int_equal(kt_snapshot_load(want, NULL, &s, err, sizeof err), 0);
    assert_int_equal(s->pid, pid);
    assert_int_equal(s->rank, 5);
    assert_non_null(kt_snapshot_find(s, "templated", KT_BACKEND_CPU, NULL));
    kt_snapshot_free(s);
    assert_int_equal(access(trace, R_OK), 0);
    ktt_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_and_associative),
        cmocka_unit_test(test_v1_with_v2),
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_output_template),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
