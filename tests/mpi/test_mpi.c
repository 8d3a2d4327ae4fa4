/* test_mpi.c — libktiming_mpi on 4 ranks (mpirun on loopback): the gathered snapshot names rank 2 slowest with
 * imbalance 2 (from the recorded durations: rank 2 runs three times the work), an artificial per-rank clock
 * offset (KTIMING_TEST_CLOCK_OFFSET_NS) is removed within the reported bound, and `ktiming run --mpi` with a
 * path template plus `ktiming merge`-style merging gives the same statistics as the in-process gather; above
 * KTIMING_MPI_SPAN_RANKS ranks the spans stay in per-rank files.
 * Exits 77 (skipped) when MPI was not found at build time. */
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
#include <unistd.h>

#include "support/files.h"
#include "support/snapshot_assert.h"

#ifdef KT_HAVE_MPI

static char *dir; /* the test's private directory */

/* mpirun with 4 ranks on loopback only; env (may be "") goes before the program; returns the exit status and,
 * when out is set, the ranks' stdout in *out (malloc). */
static int mpirun(const char *env, const char *prog_and_args, char **out)
{
    char cmd[8192], log[4096];
    snprintf(log, sizeof log, "%s/stdout.txt", dir);
    snprintf(cmd, sizeof cmd,
             "OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo "
             "OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1 "
             /* each mpirun its own session directory: two at once under /tmp/ompi.<host>.<uid> race (one removes
              * it as it ends while the other creates its pid.N inside: "orte_session_dir failed") */
             "OMPI_MCA_orte_tmpdir_base=%s "
             "%s --allow-run-as-root --oversubscribe -np 4 env "
             /* sanitizer builds: the launcher comes before the runtime in the ranks' library list, and OpenMPI's
              * own allocations at exit are not ours to report (addresses and UB are still checked) */
             "ASAN_OPTIONS=\"$ASAN_OPTIONS:verify_asan_link_order=0:detect_leaks=0\" %s %s > %s",
             dir, KT_MPIEXEC, env, prog_and_args, log);
    int st = system(cmd);
    if (out) {
        *out = ktt_read_file(log, NULL);
        assert_non_null(*out);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static char *path(const char *name)
{
    static char buf[8][4096];
    static int i;
    char *p = buf[i++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", dir, name);
    return p;
}

static kt_snapshot_t *load(const char *p)
{
    kt_snapshot_t *s = NULL;
    char err[512];
    int rc = kt_snapshot_load(p, NULL, &s, err, sizeof err);
    if (rc)
        fprintf(stderr, "%s\n", err);
    assert_int_equal(rc, 0);
    return s;
}

/* What every rank recorded (mpi_prog.c): "work" 70 x units dispatches of 1000 + 10 (i % 7) ns. */
static void assert_work_exact(const kt_snapshot_t *s)
{
    const kt_kernel_timing_t *w = kt_snapshot_find(s, "work", KT_BACKEND_CPU, NULL);
    assert_non_null(w);
    uint64_t n = 0, sum = 0;
    long double sq = 0;
    for (int r = 0; r < 4; r++)
        for (int i = 0; i < 70 * (r == 2 ? 3 : 1); i++) {
            uint64_t d = 1000 + 10 * (uint64_t)(i % 7);
            n++;
            sum += d;
            sq += (long double)d * d;
        }
    assert_int_equal(w->dispatch_count, n);
    assert_int_equal(w->total_ns, sum);
    assert_int_equal(w->min_ns, 1000);
    assert_int_equal(w->max_ns, 1060);
    assert_int_equal(w->sumsq128.lo, (uint64_t)sq);
    double mean = (double)sum / (double)n;
    assert_true(fabs(w->mean_ns - mean) < 1e-9 * mean);
    double sd = sqrt((double)((sq - (long double)sum * sum / n) / (n - 1)));
    assert_true(fabs(w->stddev_ns - sd) < 1e-9 * sd);
    assert_true(w->p50_ns >= 1025 && w->p50_ns <= 1035); /* exact median 1030 (nearest rank), within 0.8 % */
}

/* rank 2 slowest, imbalance exactly 2: totals 72100, 72100, 216300, 72100 ns. */
static void assert_balance(const kt_snapshot_t *s)
{
    assert_int_equal(s->source_count, 4);
    for (int r = 0; r < 4; r++)
        assert_int_equal(s->sources[r].rank, r);
    kt_rank_balance_t *b;
    size_t n;
    assert_int_equal(kt_rank_balance(s, &b, &n), 0);
    const kt_kernel_timing_t *w = kt_snapshot_find(s, "work", KT_BACKEND_CPU, NULL);
    const kt_rank_balance_t *wb = &b[w - s->entries];
    assert_int_equal(s->sources[wb->slowest_source].rank, 2);
    assert_int_equal(wb->max_total_ns, 216300);
    assert_int_equal(wb->min_total_ns, 72100);
    assert_true(fabs(wb->imbalance - 2.0) < 1e-12);
    free(b);
}

static void test_gather_offset_and_balance(void **state)
{
    (void)state;
    char env[1024], *out = NULL;
    snprintf(env, sizeof env, "KTIMING_MPI_OUTPUT=%s KTIMING_MPI_TRACE=%s KTIMING_TEST_CLOCK_OFFSET_NS=1000000000",
             path("all-%r.json"), path("all.trace.json"));
    assert_int_equal(mpirun(env, MPI_PROG, &out), 0);
    kt_snapshot_t *s = load(path("all-0.json")); /* the template, expanded on rank 0 */
    assert_work_exact(s);
    assert_balance(s);
    /* offsets: rank r's clock read r seconds ahead; the alignment's estimate is within its bound */
    for (int r = 1; r < 4; r++) {
        int64_t err = s->sources[r].offset_ns + (int64_t)r * 1000000000;
        assert_true(s->sources[r].offset_bound_ns < 100000000); /* a bound, not "unknown" */
        assert_true((uint64_t)llabs(err) <= s->sources[r].offset_bound_ns);
    }
    /* spans: back on the true timeline, within each span's uncertainty, between the rank's first and last */
    unsigned long long first[4] = {0}, last[4] = {0};
    for (char *line = out; line && *line;) {
        int r;
        unsigned long long f, l;
        if (sscanf(line, "rank %d first %llu last %llu", &r, &f, &l) == 3 && r >= 0 && r < 4) {
            first[r] = f;
            last[r] = l;
        }
        line = strchr(line, '\n');
        line = line ? line + 1 : NULL;
    }
    size_t seen[4] = {0};
    for (size_t i = 0; i < s->span_count; i++) {
        const kt_span_t *sp = &s->spans[i];
        uint32_t src = s->threads[sp->thread].source;
        assert_true(src < 4);
        assert_true(first[src] > 0);
        assert_true(sp->start_ns + sp->uncertainty_ns >= first[src]);
        assert_true(sp->start_ns <= last[src] + sp->uncertainty_ns);
        seen[src]++;
    }
    assert_int_equal(seen[2], 210 + 35);
    assert_int_equal(seen[0], 70 + 35);
    /* the trace has one process group per rank */
    FILE *f = fopen(path("all.trace.json"), "r");
    assert_non_null(f);
    char *t = calloc(1, 1 << 22);
    size_t tn = fread(t, 1, (1 << 22) - 1, f);
    fclose(f);
    t[tn] = 0;
    for (int r = 0; r < 4; r++) {
        char want[64];
        snprintf(want, sizeof want, "\"name\":\"rank %d: host ", r);
        assert_non_null(strstr(t, want));
    }
    free(t);
    free(out);
    kt_snapshot_free(s);
}

static void test_run_template_matches_gather(void **state)
{
    (void)state;
    char args[2048];
    snprintf(args, sizeof args, "%s run --mpi -f none -o %s --merged %s -- %s", KT_CLI, path("prof-%r.json"),
             path("gathered.json"), MPI_PROG_PLAIN);
    assert_int_equal(mpirun("", args, NULL), 0);
    kt_snapshot_t *g = load(path("gathered.json")), *p[4];
    for (int r = 0; r < 4; r++) {
        char name[32];
        snprintf(name, sizeof name, "prof-%d.json", r);
        p[r] = load(path(name));
        assert_int_equal(p[r]->rank, r);
    }
    kt_snapshot_t *m;
    assert_int_equal(kt_snapshot_merge((const kt_snapshot_t *const *)p, 4, NULL, &m), 0);
    assert_work_exact(m);
    assert_balance(m);
    assert_balance(g);
    assert_int_equal(m->count, g->count);
    for (size_t i = 0; i < m->count; i++) {
        const kt_kernel_timing_t *a = &m->entries[i], *b = &g->entries[i];
        assert_string_equal(a->name, b->name);
        assert_int_equal(a->dispatch_count, b->dispatch_count);
        assert_memory_equal(&a->total128, &b->total128, sizeof a->total128);
        assert_memory_equal(&a->sumsq128, &b->sumsq128, sizeof a->sumsq128);
        assert_int_equal(a->min_ns, b->min_ns);
        assert_int_equal(a->max_ns, b->max_ns);
        assert_true(a->mean_ns == b->mean_ns && a->stddev_ns == b->stddev_ns);
        assert_int_equal(a->p50_ns, b->p50_ns);
        assert_int_equal(a->p90_ns, b->p90_ns);
        assert_int_equal(a->p99_ns, b->p99_ns);
        assert_int_equal(a->hist_count, b->hist_count);
        assert_memory_equal(a->hist, b->hist, a->hist_count * sizeof *a->hist);
        ktt_assert_by_source_same(a, b);
    }
    /* ktiming merge + report --by-rank on the per-rank files names rank 2 */
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s merge %s %s %s %s --by-rank -o %s > %s", KT_CLI, path("prof-0.json"),
             path("prof-1.json"), path("prof-2.json"), path("prof-3.json"), path("cli.json"), path("byrank.txt"));
    assert_int_equal(system(cmd), 0);
    FILE *f = fopen(path("byrank.txt"), "r");
    assert_non_null(f);
    char line[512];
    int found = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "work ", 5) && strstr(line, "2.000") && strstr(line, "rank 2"))
            found = 1;
    fclose(f);
    assert_true(found);
    for (int r = 0; r < 4; r++)
        kt_snapshot_free(p[r]);
    kt_snapshot_free(m);
    kt_snapshot_free(g);
}

static void test_explicit_gather(void **state)
{
    (void)state;
    char args[1024];
    snprintf(args, sizeof args, "%s --gather %s", MPI_PROG, path("explicit.json"));
    assert_int_equal(mpirun("KTIMING_MPI=0", args, NULL), 0);
    kt_snapshot_t *s = load(path("explicit.json"));
    assert_work_exact(s);
    assert_balance(s);
    for (int r = 1; r < 4; r++) /* one host, one clock: the true offset is 0 */
        assert_true((uint64_t)llabs(s->sources[r].offset_ns) <= s->sources[r].offset_bound_ns);
    kt_snapshot_free(s);
}

/* Above KTIMING_MPI_SPAN_RANKS ranks only aggregates travel; each rank keeps its spans in its own file. */
static void test_spans_per_rank_files(void **state)
{
    (void)state;
    char env[512];
    snprintf(env, sizeof env, "KTIMING_MPI_SPAN_RANKS=2 KTIMING_MPI_OUTPUT=%s", path("agg.json"));
    assert_int_equal(mpirun(env, MPI_PROG, NULL), 0);
    kt_snapshot_t *s = load(path("agg.json"));
    assert_int_equal(s->span_count, 0); /* no spans travelled */
    assert_work_exact(s);                /* the statistics did */
    assert_balance(s);
    kt_snapshot_free(s);
    for (int r = 0; r < 4; r++) {
        char name[32];
        snprintf(name, sizeof name, "agg.rank%d.json", r);
        kt_snapshot_t *own = load(path(name));
        assert_int_equal(own->rank, r);
        assert_int_equal(own->span_count, (size_t)(70 * (r == 2 ? 3 : 1) + 35));
        kt_snapshot_free(own);
    }
}

static int setup(void **state)
{
    (void)state;
    dir = ktt_tmpdir("mpi");
    return dir ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    ktt_rmtree(dir);
    free(dir);
    dir = NULL;
    return 0;
}

/* Without an argument: the first scenario; with one, the scenario of that name (CMake registers one ctest per
 * scenario, so each mpirun run stays well under the per-test budget). */
int main(int argc, char **argv)
{
    cmocka_set_test_filter(argc > 1 ? argv[1] : "test_gather_offset_and_balance");
    if (access(KT_MPIEXEC, X_OK) != 0) {
        fprintf(stderr, "mpirun not found: skipped\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gather_offset_and_balance),
        cmocka_unit_test(test_run_template_matches_gather),
        cmocka_unit_test(test_explicit_gather),
        cmocka_unit_test(test_spans_per_rank_files),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

#else

int main(void)
{
    fprintf(stderr, "MPI not found at build time: libktiming_mpi not built, skipped\n");
    return 77;
}

#endif
