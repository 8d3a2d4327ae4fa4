/* detect.c — `history check`: change points per series (E-divisive means: hierarchical bisection on the run
 * medians' logarithms), each confirmed with the Mann-Whitney U test and a bootstrap interval on the pooled reservoir
 * samples of the runs either side (kt_compare), p-values adjusted across every series (Benjamini-Hochberg). */
#include "history.h"

#include <ktiming/compare.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Runs a level must hold on each side of a change: an isolated slow run, or two in a row, is never a change. */
#define KTH_MIN_SEGMENT 3

/* ===================================================================================================== *
 * Change points
 * ===================================================================================================== */

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* The k-th smallest of v[0..n) (Hoare's selection; reorders v). */
static double select_kth(double *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        double pivot = v[lo + (hi - lo) / 2];
        size_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i <= j) {
                double t = v[i];
                v[i] = v[j];
                v[j] = t;
                i++;
                if (j == 0)
                    break;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return v[k];
    }
    return v[k];
}

/* Median of v[0..n) (reorders v). */
static double median_of(double *v, size_t n)
{
    if (!n)
        return NAN;
    double hi = select_kth(v, n, n / 2);
    if (n % 2)
        return hi;
    double lo = v[0]; /* the largest of the lower half, which selection left below n/2 */
    for (size_t i = 1; i < n / 2; i++)
        lo = v[i] > lo ? v[i] : lo;
    return 0.5 * (lo + hi);
}

size_t kth_change_points(const double *x, size_t n, double penalty, size_t *cps)
{
    if (n < 2 * KTH_MIN_SEGMENT)
        return 0;
    double *S = malloc((n + 1) * sizeof *S);
    size_t *stack = malloc(2 * n * sizeof *stack);
    if (!S || !stack) {
        free(S);
        free(stack);
        return 0;
    }
    S[0] = 0.0;
    for (size_t i = 0; i < n; i++)
        S[i + 1] = S[i] + x[i];
    size_t count = 0, top = 0;
    stack[top++] = 0;
    stack[top++] = n;
    while (top) {
        size_t b = stack[--top], a = stack[--top];
        if (b - a < 2 * KTH_MIN_SEGMENT)
            continue;
        /* The split maximising (nl nr / n)(mean_l - mean_r)^2: the energy statistic of E-divisive at alpha 2
         * (the divergence of means), which is also the drop in squared error a mean shift there explains. */
        double best = 0.0;
        size_t at = 0;
        for (size_t k = a + KTH_MIN_SEGMENT; k + KTH_MIN_SEGMENT <= b; k++) {
            double nl = (double)(k - a), nr = (double)(b - k);
            double d = (S[k] - S[a]) / nl - (S[b] - S[k]) / nr;
            double g = nl * nr / (nl + nr) * d * d;
            if (g > best) {
                best = g;
                at = k;
            }
        }
        if (at && best > penalty) {
            cps[count++] = at;
            stack[top++] = a;
            stack[top++] = at;
            stack[top++] = at;
            stack[top++] = b;
        }
    }
    qsort(cps, count, sizeof *cps, cmp_size);
    free(S);
    free(stack);
    return count;
}

/* ===================================================================================================== *
 * Confirmation
 * ===================================================================================================== */

/* Pools the samples of points [a, b) of a series (run medians when a run has none). */
static int pool(const kth_history_t *h, kth_samples_fn fn, void *ctx, size_t s, size_t a, size_t b, uint64_t **out,
                size_t *n)
{
    size_t cap = 0, len = 0;
    uint64_t *all = NULL;
    for (size_t i = a; i < b; i++) {
        uint64_t *v = NULL, one;
        size_t m = 0;
        int rc = fn(ctx, h, s, i, &v, &m);
        if (rc) {
            free(all);
            return rc;
        }
        const uint64_t *src = v;
        if (!m) { /* aggregates only: the run's median stands for it */
            one = (uint64_t)llround(h->series[s].pts[i].median);
            src = &one;
            m = 1;
        }
        if (len + m > cap) {
            cap = (len + m) * 2;
            uint64_t *na = realloc(all, cap * sizeof *na);
            if (!na) {
                free(v);
                free(all);
                return KT_ENOMEM;
            }
            all = na;
        }
        memcpy(all + len, src, m * sizeof *src);
        len += m;
        free(v);
    }
    *out = all;
    *n = len;
    return 0;
}

/* One entry snapshot around pooled samples, for kt_compare. */
static void as_snapshot(kt_snapshot_t *s, kt_kernel_timing_t *e, uint64_t *v, size_t n)
{
    memset(s, 0, sizeof *s);
    memset(e, 0, sizeof *e);
    e->name = "k";
    e->device = "d";
    e->backend = KT_BACKEND_CPU;
    e->samples = v;
    e->sample_count = (uint32_t)n;
    e->dispatch_count = n;
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += (double)v[i];
    e->mean_ns = n ? sum / (double)n : 0.0;
    s->count = 1;
    s->entries = e;
}

/* Level of points [a, b): exp of the median log median. */
static double level(const double *x, size_t a, size_t b, double *tmp)
{
    memcpy(tmp, x + a, (b - a) * sizeof *x);
    return exp(median_of(tmp, b - a));
}

typedef struct cand_t {
    kth_change_t c;  /* the change */
    double robust;   /* the change of the median run median between the windows */
    int keep;        /* confirmed */
} cand_t;

static int cmp_cand_p(const void *a, const void *b)
{
    const cand_t *x = *(const cand_t *const *)a, *y = *(const cand_t *const *)b;
    return x->c.p < y->c.p ? -1 : x->c.p > y->c.p;
}

/* The candidates found so far. */
typedef struct cands_t {
    cand_t *v;  /* candidates */
    size_t n;   /* used */
    size_t cap; /* allocated */
} cands_t;

/* Compares the pooled samples of points [a, at) and [at, b) of series s with kt_compare (the U test and the bootstrap
 * interval of `ktiming compare`) and appends the candidate: 0 (*made the candidate, or NULL when kt_compare gave no
 * row) or KT_E*. */
static int confirm(const kth_history_t *h, kth_samples_fn fn, void *ctx, size_t s, size_t a, size_t at, size_t b,
                   double robust, const kth_check_opts_t *o, cands_t *cs, cand_t **made)
{
    *made = NULL;
    uint64_t *bv = NULL, *av = NULL;
    size_t bn = 0, an = 0;
    int rc = pool(h, fn, ctx, s, a, at, &bv, &bn);
    if (!rc && (rc = pool(h, fn, ctx, s, at, b, &av, &an)))
        free(bv);
    if (rc)
        return rc;
    kt_snapshot_t sb, sa;
    kt_kernel_timing_t eb, ea;
    as_snapshot(&sb, &eb, bv, bn);
    as_snapshot(&sa, &ea, av, an);
    kt_compare_result_t r;
    kt_compare_opts_t co = {.threshold_pct = o->threshold_pct, .bootstrap = 1000,
                            .seed = (uint64_t)h->series[s].id * 1000003u + at};
    rc = kt_compare(&sb, &sa, &co, &r);
    if (!rc && r.count == 1) {
        if (cs->n == cs->cap) {
            size_t cap = cs->cap ? cs->cap * 2 : 64;
            cand_t *nc = realloc(cs->v, cap * sizeof *nc);
            if (!nc)
                rc = KT_ENOMEM;
            else
                cs->v = nc, cs->cap = cap;
        }
        if (!rc) {
            const kt_compare_row_t *row = &r.rows[0];
            cand_t *c = &cs->v[cs->n++];
            memset(c, 0, sizeof *c);
            c->c.series = s;
            c->c.at = at;
            c->c.before_ns = row->before.median_ns;
            c->c.after_ns = row->after.median_ns;
            c->c.change = row->speedup_median > 0.0 ? 1.0 / row->speedup_median - 1.0 : NAN;
            c->c.ci_lo = row->ci_hi > 0.0 ? 1.0 / row->ci_hi - 1.0 : NAN;
            c->c.ci_hi = row->ci_lo > 0.0 ? 1.0 / row->ci_lo - 1.0 : NAN;
            c->c.p = isfinite(row->p_value) ? row->p_value : 1.0;
            c->robust = robust;
            *made = c;
        }
    }
    kt_compare_free(&r);
    free(bv);
    free(av);
    return rc;
}

/* --tail N: a series' `tail` points in the last N runs of the history against the runs before them (up to the
 * window, never before the last change point, found among the runs before the tail), for the runs a pull request
 * adds, which no level of three runs can show yet. Every one of those runs must have moved the same way by the
 * threshold and by three times the run-to-run noise (sigma, of log medians) from the median of the runs before: one
 * outlier run among two cannot pass, and a run within the noise cannot either. Then kt_compare confirms it as it
 * does every change. 0 or KT_E*. */
static int tail_candidate(const kth_history_t *h, kth_samples_fn fn, void *ctx, size_t s, size_t tail,
                          const double *x, double sigma, const size_t *cps, size_t k, const kth_check_opts_t *o,
                          double *tmp, cands_t *cs)
{
    size_t n = h->series[s].n, ts = n - tail, prev = k ? cps[k - 1] : 0; /* change points are all before ts */
    size_t a = ts - prev > o->window ? ts - o->window : prev;
    if (ts - a < KTH_MIN_SEGMENT)
        return 0;
    memcpy(tmp, x + a, (ts - a) * sizeof *x);
    double base = median_of(tmp, ts - a), w = (double)(ts - a);
    /* The spread of (one run - the median of w runs): the run's own noise and the median's (pi/2 sigma^2 / w). */
    double gate = fmax(log1p(o->threshold_pct / 100.0), 3.0 * sigma * sqrt(1.0 + 1.5707963 / w));
    double least = INFINITY;
    int up = x[ts] > base;
    for (size_t i = ts; i < n; i++) {
        double d = x[i] - base;
        if ((d > 0) != up || fabs(d) < gate)
            return 0;
        least = fmin(least, fabs(d));
    }
    cand_t *c;
    int rc = confirm(h, fn, ctx, s, a, ts, n, up ? expm1(least) : expm1(-least), o, cs, &c);
    if (!rc && c)
        c->c.tail = 1;
    return rc;
}

int kth_check(const kth_history_t *h, kth_samples_fn fn, void *ctx, const kth_check_opts_t *opts,
              kth_check_result_t *out)
{
    memset(out, 0, sizeof *out);
    kth_check_opts_t o = opts ? *opts : (kth_check_opts_t){0};
    if (o.threshold_pct == 0.0)
        o.threshold_pct = 5.0;
    if (o.threshold_pct < 0.0)
        o.threshold_pct = 0.0;
    if (o.alpha <= 0.0 || o.alpha >= 1.0)
        o.alpha = 0.05;
    if (o.penalty <= 0.0)
        o.penalty = 3.0;
    if (!o.window)
        o.window = 5;
    out->opts = o;
    const double t = o.threshold_pct / 100.0;
    size_t maxn = 0;
    for (size_t s = 0; s < h->series_count; s++)
        if (h->series[s].n > maxn)
            maxn = h->series[s].n;
    double *x = malloc((maxn + 1) * sizeof *x), *y = malloc((maxn + 1) * sizeof *y);
    double *tmp = malloc((maxn + 1) * sizeof *tmp);
    size_t *cps = malloc((maxn + 1) * sizeof *cps);
    cands_t cs = {NULL, 0, 0};
    int rc = (!x || !y || !tmp || !cps) ? KT_ENOMEM : 0;
    for (size_t s = 0; !rc && s < h->series_count; s++) {
        const kth_series_t *se = &h->series[s];
        /* With --tail N, the series' points in the last N runs of the history (a kernel the pull request did not
         * run has none) are under test: the change points are found in the points before them, and the tail is
         * compared with those after (tail_candidate). */
        size_t all = se->n, tail = 0, first = h->run_count > o.tail ? h->run_count - o.tail : 0;
        while (o.tail && tail < all && se->pts[all - 1 - tail].run >= first) /* its points in the last runs */
            tail++;
        size_t n = tail && all >= tail + KTH_MIN_SEGMENT ? all - tail : all;
        if (n < 2 * KTH_MIN_SEGMENT && n == all)
            continue;
        for (size_t i = 0; i < all; i++)
            x[i] = log(se->pts[i].median > 1.0 ? se->pts[i].median : 1.0);
        /* Noise: the robust spread of consecutive differences (a step moves one difference, not the MAD). */
        for (size_t i = 1; i < n; i++)
            tmp[i - 1] = x[i] - x[i - 1];
        double md = median_of(tmp, n - 1);
        for (size_t i = 1; i < n; i++)
            tmp[i - 1] = fabs(x[i] - x[i - 1] - md);
        double sigma = 1.4826 * median_of(tmp, n - 1) / sqrt(2.0);
        if (sigma < 1e-4)
            sigma = 1e-4;
        /* A running median of five (clipped at the ends) removes up to two outlier runs close together and
         * keeps steps where they are. */
        for (size_t i = 0; i < n; i++) {
            size_t a = i > 2 ? i - 2 : 0, b = i + 3 < n ? i + 3 : n;
            double w[5];
            memcpy(w, x + a, (b - a) * sizeof *w);
            y[i] = median_of(w, b - a);
        }
        size_t k = kth_change_points(y, n, o.penalty * sigma * sigma * log((double)n), cps);
        for (size_t j = 0; !rc && j < k; j++) {
            size_t at = cps[j], prev = j ? cps[j - 1] : 0, next = j + 1 < k ? cps[j + 1] : n;
            size_t a = at - prev > o.window ? at - o.window : prev, b = next - at > o.window ? at + o.window : next;
            /* The runs' filtered medians either side must move by the threshold: pooled samples alone would let an
             * outlier run or two in a window pass for a change. Checked first: it needs no samples. */
            double robust = level(y, at, b, tmp) / level(y, a, at, tmp) - 1.0;
            if (!(fabs(robust) >= t))
                continue;
            /* The last three runs of a history as the new level: the running median, clipped there, makes two runs
             * at a new level look like three from the run before them (a change reported at the commit before the
             * one that made it). The first of the three must itself be nearer the level after than the one before;
             * else the change waits for its third run. */
            if (next == n && n - at == KTH_MIN_SEGMENT &&
                fabs(x[at] - log(level(x, a, at, tmp))) < fabs(x[at] - log(level(x, at, b, tmp))))
                continue;
            cand_t *c;
            if ((rc = confirm(h, fn, ctx, s, a, at, b, robust, &o, &cs, &c)) || !c)
                continue;
            /* Fixed: a later segment back within the threshold of the level before the change. Segment m is
             * [cps[m - 1], cps[m]); the change's own new level is segment j + 1, so the search starts after it
             * (a step smaller than the threshold over its whole segment is not its own fix). */
            double before = level(x, prev, at, tmp);
            for (size_t m = j + 2; c->c.change > 0 && m < k + 1 && !c->c.fixed; m++) {
                size_t sa0 = cps[m - 1], sb0 = m < k ? cps[m] : n;
                if (fabs(level(x, sa0, sb0, tmp) / before - 1.0) < t) {
                    c->c.fixed = 1;
                    c->c.fixed_at = sa0;
                }
            }
        }
        out->candidates += k;
        size_t had = cs.n;
        if (!rc && n < all)
            rc = tail_candidate(h, fn, ctx, s, tail, x, sigma, cps, k, &o, tmp, &cs);
        out->candidates += cs.n - had;
    }
    cand_t *cands = cs.v;
    size_t ncand = cs.n;
    /* Benjamini-Hochberg over max(candidates, series): a series with no candidate, and a candidate that moved less
     * than the threshold, were tested too. */
    cand_t **order = ncand ? malloc(ncand * sizeof *order) : NULL;
    if (!rc && ncand && !order)
        rc = KT_ENOMEM;
    if (!rc && ncand) {
        for (size_t i = 0; i < ncand; i++)
            order[i] = &cands[i];
        qsort(order, ncand, sizeof *order, cmp_cand_p);
        size_t tested = out->candidates > h->series_count ? out->candidates : h->series_count;
        double m = (double)tested, run = 1.0;
        for (size_t i = ncand; i-- > 0;) {
            double q = order[i]->c.p * m / (double)(i + 1);
            run = q < run ? q : run;
            order[i]->c.q = run;
        }
        size_t kept = 0;
        for (size_t i = 0; i < ncand; i++) {
            kth_change_t *c = &cands[i].c;
            int outside = c->change > 0 ? c->ci_lo > 0.0 : c->ci_hi < 0.0; /* the interval excludes no change */
            int same_way = (cands[i].robust > 0) == (c->change > 0);
            cands[i].keep = c->q <= o.alpha && fabs(c->change) >= t && fabs(cands[i].robust) >= t && same_way && outside;
            kept += cands[i].keep;
        }
        out->changes = kept ? malloc(kept * sizeof *out->changes) : NULL;
        if (kept && !out->changes)
            rc = KT_ENOMEM;
        for (size_t i = 0; !rc && i < ncand; i++)
            if (cands[i].keep) {
                out->changes[out->count++] = cands[i].c;
                out->regressions += cands[i].c.change > 0 && !cands[i].c.fixed;
            }
    }
    free(order);
    free(cands);
    free(x);
    free(y);
    free(tmp);
    free(cps);
    if (rc)
        kth_check_free(out);
    return rc;
}

void kth_check_free(kth_check_result_t *r)
{
    if (!r)
        return;
    free(r->changes);
    r->changes = NULL;
    r->count = 0;
}
