/* compare.c — before/after comparison: match kernels by key, Mann-Whitney U, bootstrap intervals, verdicts. */
#include <ktiming/compare.h>
#include <ktiming/stats.h>

#include "analysis/compare_match.h"
#include "shared/sort.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KT_CMP_THRESHOLD_PCT 5.0
#define KT_CMP_ALPHA 0.05
#define KT_CMP_CONFIDENCE 0.95
#define KT_CMP_MIN_SAMPLES 9u
#define KT_CMP_BOOTSTRAP 2000u
#define KT_CMP_SEED 0x6b74696d696e6721ull
#define KT_CMP_EXACT_MAX 25u

/* ---------------------------------------------------------------------------------------------------
 * Seeded PRNG (xoshiro256**, seeded through splitmix64)
 * ------------------------------------------------------------------------------------------------- */

typedef struct rng_t {
    uint64_t s[4]; /* state */
} rng_t;

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void rng_seed(rng_t *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(rng_t *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

static uint64_t key_hash(const char *name, kt_backend_t backend, const char *device)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *p = name; *p; p++) h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    h = (h ^ (uint64_t)(backend + 1)) * 0x100000001b3ull;
    for (const char *p = device; *p; p++) h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    return h;
}

/* ---------------------------------------------------------------------------------------------------
 * Random variates for the bootstrap
 * ------------------------------------------------------------------------------------------------- */

static double rng_u01(rng_t *r) { return ((double)(rng_next(r) >> 11) + 0.5) / 9007199254740992.0; }

static double rng_normal(rng_t *r)
{
    return sqrt(-2.0 * log(rng_u01(r))) * cos(6.283185307179586 * rng_u01(r));
}

/* Gamma(shape, 1) for shape >= 1 (Marsaglia and Tsang, 2000). */
static double rng_gamma(rng_t *r, double shape)
{
    double d = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x = rng_normal(r), v = 1.0 + c * x;
        if (v <= 0.0) continue;
        v = v * v * v;
        double u = rng_u01(r);
        if (log(u) < 0.5 * x * x + d - d * v + d * log(v)) return d * v;
    }
}

/* Beta(a, b) for a, b >= 1. */
static double rng_beta(rng_t *r, double a, double b)
{
    double x = rng_gamma(r, a), y = rng_gamma(r, b);
    return x / (x + y);
}

/* The median of one bootstrap resample of sorted[0..n), drawn in O(1) instead of resampling n values.
 * A resample is n indices floor(n*U_i) with U_i iid uniform, and floor is monotone, so its order statistics
 * are floor(n * U_(m)). U_(m) ~ Beta(m, n+1-m); for even n the next one, given U_(m) = u, is u plus (1-u)
 * times the minimum of n-m fresh uniforms, 1 - V^(1/(n-m)). The values are sorted, so indices map to values
 * in order and the resample's median is the value at those indices: exact, not an approximation. */
static double resample_median(const uint64_t *sorted, uint32_t n, rng_t *r)
{
    uint32_t m = (n + 1) / 2; /* 1-based rank of the (lower) median */
    double u = rng_beta(r, (double)m, (double)(n + 1 - m));
    double x = floor(u * (double)n);
    uint32_t i = x >= (double)n ? n - 1 : (uint32_t)x;
    if (n & 1) return (double)sorted[i];
    double u2 = u + (1.0 - u) * (1.0 - pow(rng_u01(r), 1.0 / (double)(n - m)));
    double x2 = floor(u2 * (double)n);
    uint32_t j = x2 >= (double)n ? n - 1 : (uint32_t)x2;
    if (j < i) j = i;
    return 0.5 * ((double)sorted[i] + (double)sorted[j]);
}

/* ---------------------------------------------------------------------------------------------------
 * The law of a resample's median, tabulated (small samples)
 *
 * A resample of n sorted values is n iid uniform indices in [0, n); its median is a function of the m-th
 * (and, for even n, the (m+1)-th) smallest index only, and the law of those does not depend on the values. For
 * n <= MED_TABLE_MAX that law is computed once per n from binomial probabilities and sampled with an alias
 * table: one random number per draw instead of two Gamma variates (about six logarithms and cosines). With
 * A = #indices below i and E = #indices equal to i, X(m) = i iff A < m <= A + E, so
 *   P(X(m) <= i) = P(Bin(n, (i+1)/n) >= m),
 *   P(X(m) = i, X(m+1) > i) = P(A + E = m) - P(A = m, E = 0)            (the next index lies above i)
 *                           = C(n,m) q^m (1-q)^(n-m) - C(n,m) p^m (1-q)^(n-m),   q = (i+1)/n, p = i/n,
 * and the rest of P(X(m) = i) is X(m+1) = i. Given X(m) = i < X(m+1), the n-m indices above i are iid uniform
 * on the K = n-1-i values above i, so X(m+1) = i + 1 + T with T their minimum: P(T >= s) = ((K-s)/K)^(n-m).
 * For n <= MED_PAIR_TABLE_MAX the joint law of (X(m), X(m+1)) is tabulated whole, one cell per pair i <= j, so a
 * draw is one random number and one table look-up; above, T is drawn by inversion (one pow). Exact: the tables
 * hold the probabilities to double precision and draws resolve them to 2^-64.
 * ------------------------------------------------------------------------------------------------- */

#define MED_TABLE_MAX 512u      /* tabulated law up to this n (O(n^2) to build, 24 n bytes to keep) */
#define MED_PAIR_TABLE_MAX 128u /* even n: the joint law of both indices tabulated up to this n (8 n^2 bytes) */

typedef struct alias_t {
    uint64_t *keep; /* cell k is kept when the draw's fraction is below keep[k] (2^64 scale), else alias[k] */
    uint32_t *alias;
    uint32_t cells;
} alias_t;

typedef struct med_law_t {
    uint32_t n, m;
    alias_t first;   /* odd n: cell i is X(m) = i; even n: cell 2i is (i, tie), cell 2i+1 is (i, next above) */
    alias_t pairs;   /* even n <= MED_PAIR_TABLE_MAX: cell c is (pair_i[c], pair_j[c]); first is then unused */
    uint8_t *pair_i, *pair_j;
} med_law_t;

typedef struct med_cache_t {
    med_law_t *law[MED_TABLE_MAX + 1];                           /* built on first use, per n */
    double lv[2][MED_TABLE_MAX];                                 /* the row's log memos (side_t), reused */
    double pair[2][MED_PAIR_TABLE_MAX * (MED_PAIR_TABLE_MAX + 1) / 2];
} med_cache_t;

/* Vose's alias method over p[0..cells) (non-negative, any sum > 0). */
static int alias_build(alias_t *a, const double *p, uint32_t cells)
{
    a->cells = cells;
    a->keep = malloc((size_t)cells * sizeof *a->keep);
    a->alias = malloc((size_t)cells * sizeof *a->alias);
    double *w = malloc((size_t)cells * sizeof *w);
    uint32_t *small = malloc((size_t)cells * sizeof *small), *large = malloc((size_t)cells * sizeof *large);
    int ok = a->keep && a->alias && w && small && large;
    if (ok) {
        double sum = 0.0;
        for (uint32_t k = 0; k < cells; k++) sum += p[k];
        uint32_t ns = 0, nl = 0;
        for (uint32_t k = 0; k < cells; k++) {
            w[k] = p[k] * (double)cells / sum;
            a->alias[k] = k;
            if (w[k] < 1.0) small[ns++] = k;
            else large[nl++] = k;
        }
        while (ns && nl) {
            uint32_t s = small[--ns], l = large[nl - 1];
            a->keep[s] = w[s] <= 0.0 ? 0 : (uint64_t)ldexp(w[s], 64);
            a->alias[s] = l;
            w[l] -= 1.0 - w[s];
            if (w[l] < 1.0) {
                nl--;
                small[ns++] = l;
            }
        }
        while (nl) a->keep[large[--nl]] = UINT64_MAX; /* rounding leaves these at ~1: always kept */
        while (ns) a->keep[small[--ns]] = UINT64_MAX;
    }
    free(w);
    free(small);
    free(large);
    if (!ok) {
        free(a->keep);
        free(a->alias);
        a->keep = NULL;
        a->alias = NULL;
    }
    return ok ? 0 : KT_ENOMEM;
}

/* The cell of an alias table (its arrays and size) that the random number x picks. Both candidates are loaded
 * and one chosen without a branch: which one it is is random, so a branch on it is often mispredicted (the 100k
 * comparison of docs/compare.md took 0.1-0.2 s of CPU more with one). */
static inline uint32_t alias_pick(const uint64_t *keep, const uint32_t *alias, uint32_t cells, uint64_t x)
{
    unsigned __int128 p = (unsigned __int128)x * cells;
    uint32_t k = (uint32_t)(p >> 64), other = alias[k];
    uint32_t stay = -(uint32_t)((uint64_t)p < keep[k]); /* all ones: keep k */
    return (k & stay) | (other & ~stay);
}

static uint32_t alias_draw(const alias_t *a, rng_t *r) { return alias_pick(a->keep, a->alias, a->cells, rng_next(r)); }

static void alias_free(alias_t *a)
{
    free(a->keep);
    free(a->alias);
}

static void med_law_free(med_law_t *l)
{
    if (!l) return;
    alias_free(&l->first);
    alias_free(&l->pairs);
    free(l->pair_i);
    free(l->pair_j);
    free(l);
}

/* log P(Bin(n, p) = k) */
static double binom_log_pmf(uint32_t n, uint32_t k, double p)
{
    if (p <= 0.0) return k == 0 ? 0.0 : -INFINITY;
    if (p >= 1.0) return k == n ? 0.0 : -INFINITY;
    return lgamma(n + 1.0) - lgamma(k + 1.0) - lgamma((double)(n - k) + 1.0) + k * log(p) + (double)(n - k) * log1p(-p);
}

/* P(Bin(n, c/n) >= m), summing the pmf upward from m by its ratio recurrence. */
static double binom_tail(uint32_t n, uint32_t m, uint32_t c)
{
    if (c == 0) return 0.0;
    if (c >= n) return 1.0;
    double p = (double)c / n, odds = p / (1.0 - p), term = exp(binom_log_pmf(n, m, p)), sum = 0.0;
    for (uint32_t k = m; k <= n && term > 0.0; k++) {
        sum += term;
        term *= (double)(n - k) / (double)(k + 1) * odds;
    }
    return sum > 1.0 ? 1.0 : sum;
}

/* Even n <= MED_PAIR_TABLE_MAX: the joint law of the median's two indices from the split law in first_p (cell 2i
 * is (i, i), cell 2i+1 is (i, above i)), with the gap T above i, P(T >= s) = ((K-s)/K)^(n-m), spread out. */
static int med_pairs_build(med_law_t *l, const double *first_p)
{
    uint32_t n = l->n, cells = n * (n + 1) / 2, c = 0;
    double *p = malloc((size_t)cells * sizeof *p);
    l->pair_i = malloc(cells);
    l->pair_j = malloc(cells);
    if (!p || !l->pair_i || !l->pair_j) {
        free(p);
        return KT_ENOMEM;
    }
    double r = (double)(n - l->m);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t K = n - 1 - i;
        l->pair_i[c] = l->pair_j[c] = (uint8_t)i;
        p[c++] = first_p[2 * i];
        for (uint32_t t = 0; t < K; t++) {
            l->pair_i[c] = (uint8_t)i;
            l->pair_j[c] = (uint8_t)(i + 1 + t);
            p[c++] = first_p[2 * i + 1] * (pow((double)(K - t) / K, r) - pow((double)(K - t - 1) / K, r));
        }
    }
    int rc = alias_build(&l->pairs, p, cells);
    free(p);
    return rc;
}

/* The law for n (1 <= n <= MED_TABLE_MAX), or NULL when out of memory. */
static med_law_t *med_law_build(uint32_t n)
{
    med_law_t *l = calloc(1, sizeof *l);
    double *p = malloc(2 * (size_t)n * sizeof *p), *tail = malloc(((size_t)n + 1) * sizeof *tail);
    int rc = l && p && tail ? 0 : KT_ENOMEM;
    if (!rc) {
        l->n = n;
        l->m = (n + 1) / 2;
        uint32_t m = l->m;
        for (uint32_t c = 0; c <= n; c++) tail[c] = binom_tail(n, m, c); /* P(X(m) <= c-1) */
        for (uint32_t i = 0; i < n; i++) {
            double at = tail[i + 1] - tail[i];
            at = at > 0.0 ? at : 0.0;
            if (n & 1) {
                p[i] = at;
                continue;
            }
            double q = (double)(i + 1) / n, pl = (double)i / n;
            double lc = lgamma(n + 1.0) - lgamma(m + 1.0) - lgamma((double)(n - m) + 1.0);
            double above = i + 1 >= n ? 0.0
                                      : exp(lc + m * log(q) + (double)(n - m) * log1p(-q)) -
                                            (i ? exp(lc + m * log(pl) + (double)(n - m) * log1p(-q)) : 0.0);
            above = above > 0.0 ? (above < at ? above : at) : 0.0;
            p[2 * i] = at - above;
            p[2 * i + 1] = above;
        }
        rc = alias_build(&l->first, p, n & 1 ? n : 2 * n);
    }
    if (!rc && !(n & 1) && n <= MED_PAIR_TABLE_MAX) rc = med_pairs_build(l, p);
    free(p);
    free(tail);
    if (rc) {
        med_law_free(l);
        return NULL;
    }
    return l;
}

static void med_cache_free(med_cache_t *c)
{
    if (!c) return;
    for (uint32_t n = 0; n <= MED_TABLE_MAX; n++) med_law_free(c->law[n]);
    free(c);
}

/* The median's sorted indices (i, j) of one resample, j = i for odd n or a tie (first-index law: odd n, or even
 * n above MED_PAIR_TABLE_MAX). */
static void med_law_draw(const med_law_t *l, rng_t *r, uint32_t *i, uint32_t *j)
{
    uint32_t k = alias_draw(&l->first, r);
    if (l->n & 1) {
        *i = *j = k;
        return;
    }
    *i = k >> 1;
    if (!(k & 1)) {
        *j = *i;
        return;
    }
    uint32_t K = l->n - 1 - *i;
    double v = 1.0 - pow(rng_u01(r), 1.0 / (double)(l->n - l->m)); /* the minimum of n-m uniforms */
    double x = floor(v * K);
    *j = *i + 1 + (x >= K ? K - 1 : (uint32_t)x);
}

/* One side of a row: its sorted samples and, when tabulated, its law and logarithm memos. */
typedef struct side_t {
    const uint64_t *s;
    uint32_t n;
    const med_law_t *law; /* NULL: draw with resample_median */
    double *lv;           /* lv[i] = log of s[i] (nudged), tabulated sides */
    double *pair;         /* even n <= MED_PAIR_TABLE_MAX: the log median of pair cell c, NaN until used */
} side_t;

static double log_nudged(double v) { return log(v > 0.0 ? v : 0.5); }

/* The log median of a side's joint-table cell c, computed and kept on the cell's first draw (sd->pair[c] NaN). */
static double pair_cell_log(const side_t *sd, uint32_t c)
{
    const med_law_t *l = sd->law;
    return sd->pair[c] = log_nudged(0.5 * ((double)sd->s[l->pair_i[c]] + (double)sd->s[l->pair_j[c]]));
}

/* The log median of a side's joint-table cell c (sd->pair set). */
static inline double pair_log_median(const side_t *sd, uint32_t c)
{
    double v = sd->pair[c];
    return isnan(v) ? pair_cell_log(sd, c) : v;
}

static double side_log_median(side_t *sd, rng_t *r)
{
    const med_law_t *l = sd->law;
    if (!l) return log_nudged(resample_median(sd->s, sd->n, r));
    if (sd->pair) return pair_log_median(sd, alias_draw(&l->pairs, r));
    uint32_t i, j;
    med_law_draw(l, r, &i, &j);
    return i == j ? sd->lv[i] : log_nudged(0.5 * ((double)sd->s[i] + (double)sd->s[j]));
}

/* Moves the values of v[lo..hi) below piv (or_equal: not above it) to its front and returns where they end,
 * without a branch on the values (each is swapped with the first not moved, or with itself): a partition whose
 * branches the processor cannot mispredict on random values. */
static inline size_t partition_front(double *v, size_t lo, size_t hi, double piv, int or_equal)
{
    size_t front = lo;
    for (size_t i = lo; i < hi; i++) {
        double x = v[i];
        size_t moved = or_equal ? !(x > piv) : x < piv;
        v[i] = v[front];
        v[front] = x;
        front += moved;
    }
    return front;
}

/* Rearranges v[0..n) so that v[k] holds the k-th smallest value, nothing larger before it and nothing smaller
 * after it (quickselect: the values below the pivot, then those equal to it, so that the many equal replicates
 * of small samples cost nothing; partitions without branches on the values, which are random). */
static void select_kth(double *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n;
    while (hi - lo > 1) {
        double x = v[lo], y = v[lo + (hi - lo) / 2], z = v[hi - 1];
        double piv = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));
        size_t lt = partition_front(v, lo, hi, piv, 0); /* v[lo..lt) < piv <= v[lt..hi) */
        if (k < lt) {
            hi = lt;
            continue;
        }
        size_t eq = partition_front(v, lt, hi, piv, 1); /* v[lt..eq) == piv < v[eq..hi) */
        if (k < eq) return;
        lo = eq;
    }
}

/* The k-th and (k+1)-th smallest of v[0..n) (k + 1 < n), v rearranged. */
static void order_pair(double *v, size_t n, size_t k, double *at, double *next)
{
    select_kth(v, n, k);
    double m = v[k + 1];
    for (size_t i = k + 2; i < n; i++)
        if (v[i] < m) m = v[i];
    *at = v[k];
    *next = m;
}

#define TAIL_SAMPLE 128u /* values looked at to place the tails' thresholds (tail_split) */

/* Copies the values of v[0..n) beyond two thresholds out: those <= the low one to low[0..*nlow), those >= the high
 * one to high[0..*nhigh) (n values of room each). The thresholds are order statistics of an evenly spaced sample
 * of TAIL_SAMPLE values, placed to leave about twice the tail beyond them, so that low[] holds the k[0]+2
 * smallest values and high[] the n-k[1] largest. Returns 1 when they do (the order statistics wanted are then
 * those of a few hundred values of thousands), 0 when the sample misjudged, the tails are too large or n is too
 * small for it to pay. One pass without a branch on the values: each is written to both and counted where it
 * belongs. */
static int tail_split(const double *v, size_t n, const size_t k[2], double *low, double *high, size_t *nlow,
                      size_t *nhigh)
{
    const size_t m = TAIL_SAMPLE;
    if (n < 8 * m) return 0;
    size_t r_lo = 2 * (k[0] + 2) * m / n + 4, r_hi = 2 * (n - k[1]) * m / n + 4;
    if (r_lo + r_hi >= m) return 0;
    double s[TAIL_SAMPLE];
    for (size_t i = 0; i < m; i++) s[i] = v[i * (n / m)];
    select_kth(s, m, r_lo);
    double t_lo = s[r_lo];
    select_kth(s, m, m - 1 - r_hi);
    double t_hi = s[m - 1 - r_hi];
    if (!(t_lo < t_hi)) return 0;
    size_t nl = 0, nh = 0;
    for (size_t i = 0; i < n; i++) {
        double x = v[i];
        low[nl] = x;
        nl += x <= t_lo;
        high[nh] = x;
        nh += x >= t_hi;
    }
    *nlow = nl;
    *nhigh = nh;
    return nl >= k[0] + 2 && n - nh <= k[1];
}

/* Percentile interval of v[0..n) (linear interpolation between order statistics, as if sorted); v is left as it
 * is. Selection, not a sort: on the two ends that tail_split copies out, or on a copy of v when it cannot. 0, or
 * KT_ENOMEM. */
static int percentile_interval(const double *v, size_t n, double confidence, double *lo, double *hi)
{
    double tail = 0.5 * (1.0 - confidence);
    double q[2] = {tail, 1.0 - tail}, pos[2], at[2], next[2];
    size_t k[2];
    for (int e = 0; e < 2; e++) {
        pos[e] = q[e] * (double)(n - 1);
        k[e] = (size_t)pos[e];
    }
    double *buf = malloc(2 * n * sizeof *buf);
    if (!buf) return KT_ENOMEM;
    double *end[2] = {buf, buf + n}; /* where each end's order statistics are selected: end[e][0..len[e]) */
    size_t len[2], below[2] = {0, 0}; /* below: values left out that lie below end[e]'s */
    if (tail_split(v, n, k, end[0], end[1], &len[0], &len[1])) {
        below[1] = n - len[1];
    } else {
        memcpy(buf, v, n * sizeof *v);
        end[1] = buf;
        len[0] = len[1] = n;
    }
    for (int e = 0; e < 2; e++) {
        if (k[e] >= n - 1) {
            select_kth(end[e], len[e], len[e] - 1);
            at[e] = next[e] = end[e][len[e] - 1];
        } else {
            order_pair(end[e], len[e], k[e] - below[e], &at[e], &next[e]);
        }
    }
    free(buf);
    *lo = at[0] + (pos[0] - (double)k[0]) * (next[0] - at[0]);
    *hi = at[1] + (pos[1] - (double)k[1]) * (next[1] - at[1]);
    return 0;
}

/* ---------------------------------------------------------------------------------------------------
 * Mann-Whitney U
 * ------------------------------------------------------------------------------------------------- */

/* Exact two-sided p of U (no ties): the null distribution counts the arrangements of na a's among na+nb ranks. */
static int mw_exact(size_t na, size_t nb, double u, double *p)
{
    size_t umax = na * nb, n = na + nb;
    double *dp = calloc((na + 1) * (umax + 1), sizeof *dp);
    if (!dp) return KT_ENOMEM;
#define DP(i, uu) dp[(i) * (umax + 1) + (uu)]
    DP(0, 0) = 1.0;
    for (size_t k = 0; k < n; k++) {
        size_t top = k < na - 1 ? k : na - 1;
        for (size_t i = top + 1; i-- > 0;) {
            if (k < i || k - i > nb) continue;
            size_t add = k - i; /* b's ranked below this a */
            for (size_t uu = umax - add + 1; uu-- > 0;)
                if (DP(i, uu) != 0.0) DP(i + 1, uu + add) += DP(i, uu);
        }
    }
    double total = 0.0, le = 0.0, ge = 0.0;
    for (size_t uu = 0; uu <= umax; uu++) {
        double c = DP(na, uu);
        total += c;
        if ((double)uu <= u + 1e-9) le += c;
        if ((double)uu >= u - 1e-9) ge += c;
    }
#undef DP
    free(dp);
    double pv = 2.0 * (le < ge ? le : ge) / total;
    *p = pv > 1.0 ? 1.0 : pv;
    return 0;
}

/* U and its p from the two samples sorted: their pooled ranks by merging them, tied values sharing their mean
 * rank. */
static int mann_whitney_sorted(const uint64_t *a, size_t na, const uint64_t *b, size_t nb, double *u, double *p)
{
    size_t n = na + nb, i = 0, ia = 0, ib = 0; /* i: how many pooled values lie below the current value */
    double rank_a = 0.0, ties = 0.0;
    while (ia < na || ib < nb) {
        uint64_t v = ib >= nb || (ia < na && a[ia] <= b[ib]) ? a[ia] : b[ib];
        size_t j = i, in_a = 0;
        for (; ia < na && a[ia] == v; ia++, j++) in_a++;
        for (; ib < nb && b[ib] == v; ib++) j++;
        double t = (double)(j - i), avg = 0.5 * ((double)i + 1.0 + (double)j); /* ranks i+1 .. j */
        for (size_t k = 0; k < in_a; k++) rank_a += avg;
        ties += t * t * t - t;
        i = j;
    }
    double dna = (double)na, dnb = (double)nb, dn = (double)n;
    *u = rank_a - dna * (dna + 1.0) / 2.0;
    if (ties == 0.0 && na <= KT_CMP_EXACT_MAX && nb <= KT_CMP_EXACT_MAX) return mw_exact(na, nb, *u, p);
    double mean = dna * dnb / 2.0;
    double var = dna * dnb / 12.0 * ((dn + 1.0) - (n > 1 ? ties / (dn * (dn - 1.0)) : 0.0));
    if (!(var > 0.0)) {
        *p = 1.0; /* every value tied: no evidence of a difference */
        return 0;
    }
    double z = (fabs(*u - mean) - 0.5) / sqrt(var);
    if (z < 0.0) z = 0.0;
    *p = erfc(z / M_SQRT2);
    if (*p > 1.0) *p = 1.0;
    return 0;
}

static uint64_t *sorted_copy(const uint64_t *v, size_t n)
{
    uint64_t *s = malloc((n ? n : 1) * sizeof *s);
    if (!s) return NULL;
    memcpy(s, v, n * sizeof *s);
    kt__sort_u64_asc(s, n);
    return s;
}

int kt_mann_whitney(const uint64_t *a, size_t na, const uint64_t *b, size_t nb, double *u, double *p)
{
    if (!a || !b || !na || !nb || !u || !p) return KT_EINVAL;
    uint64_t *sa = sorted_copy(a, na), *sb = sorted_copy(b, nb);
    int rc = sa && sb ? mann_whitney_sorted(sa, na, sb, nb, u, p) : KT_ENOMEM;
    free(sa);
    free(sb);
    return rc;
}

/* ---------------------------------------------------------------------------------------------------
 * Bootstrap of the ratio of medians
 * ------------------------------------------------------------------------------------------------- */

/* Prepares one side: sorted samples, the tabulated law when n is small enough (built into the cache on first
 * use) and its memos. */
static int side_init(side_t *sd, const uint64_t *sorted, uint32_t n, med_cache_t *cache, int which)
{
    memset(sd, 0, sizeof *sd);
    sd->s = sorted;
    sd->n = n;
    if (!cache || n > MED_TABLE_MAX) return 0;
    if (!cache->law[n] && !(cache->law[n] = med_law_build(n))) return KT_ENOMEM;
    sd->law = cache->law[n];
    if (sd->law->pair_i) {
        sd->pair = cache->pair[which];
        for (size_t k = 0; k < (size_t)n * (n + 1) / 2; k++) sd->pair[k] = NAN;
    } else {
        sd->lv = cache->lv[which];
        for (uint32_t i = 0; i < n; i++) sd->lv[i] = log_nudged((double)sorted[i]);
    }
    return 0;
}

/* reps[i] = ln(median(resampled before) / median(resampled after)) for i < count, from the two samples sorted. A
 * zero median (durations below clock resolution) is nudged to 0.5 ns to keep the logarithm finite. cache NULL:
 * every median is drawn with resample_median. */
static int bootstrap_log_ratio(const uint64_t *sb, uint32_t nb, const uint64_t *sa, uint32_t na, uint32_t count,
                               uint64_t seed, double *reps, med_cache_t *cache)
{
    side_t db, da;
    int rc = side_init(&db, sb, nb, cache, 0);
    if (!rc) rc = side_init(&da, sa, na, cache, 1);
    if (!rc) {
        rng_t r;
        rng_seed(&r, seed);
        if (db.pair && da.pair) { /* even n <= MED_PAIR_TABLE_MAX on both sides, the usual case: side_log_median's
                                   * draws, in a loop that keeps the generator's state in registers */
            const alias_t tb = db.law->pairs, ta = da.law->pairs; /* copies: no reload after a memo's store */
            const double *mb = db.pair, *ma = da.pair;
            rng_t g = r; /* a copy whose address goes nowhere but inlined code */
            for (uint32_t it = 0; it < count; it++) {
                uint32_t cb = alias_pick(tb.keep, tb.alias, tb.cells, rng_next(&g));
                double lb = mb[cb];
                if (isnan(lb)) lb = pair_cell_log(&db, cb);
                uint32_t ca = alias_pick(ta.keep, ta.alias, ta.cells, rng_next(&g));
                double la = ma[ca];
                if (isnan(la)) la = pair_cell_log(&da, ca);
                reps[it] = lb - la;
            }
        } else {
            for (uint32_t it = 0; it < count; it++) {
                double lb = side_log_median(&db, &r);
                reps[it] = lb - side_log_median(&da, &r);
            }
        }
    }
    return rc;
}

/* ---------------------------------------------------------------------------------------------------
 * Matching and rows
 * ------------------------------------------------------------------------------------------------- */

static char *dup_str(const char *s)
{
    s = s ? s : "";
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* fmt (whose conversions are all %s) with each replaced by the next string of ap, malloc'd. */
static char *join_strings(const char *fmt, va_list ap)
{
    va_list count;
    va_copy(count, ap);
    size_t n = strlen(fmt);
    for (const char *p = fmt; (p = strchr(p, '%')); p += 2) n += strlen(va_arg(count, const char *)) - 2;
    va_end(count);
    char *s = malloc(n + 1), *o = s;
    if (!s) return NULL;
    const char *p = fmt;
    for (const char *pct; (pct = strchr(p, '%')); p = pct + 2) {
        memcpy(o, p, (size_t)(pct - p));
        o += pct - p;
        const char *arg = va_arg(ap, const char *);
        size_t len = strlen(arg);
        memcpy(o, arg, len);
        o += len;
    }
    memcpy(o, p, strlen(p) + 1);
    return s;
}

/* The reason fmt says with its arguments, malloc'd: joined when its conversions are all %s (the reasons of rows
 * without samples, a million of them in a large comparison), else by vasprintf. */
static char *fmt_reason(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const char *pct = fmt;
    while ((pct = strchr(pct, '%')) && pct[1] == 's') pct += 2;
    char *s = NULL;
    if (!pct) s = join_strings(fmt, ap);
    else if (vasprintf(&s, fmt, ap) < 0) s = NULL;
    va_end(ap);
    return s;
}

void kt__cmp_entry_of(const kt_kernel_timing_t *t, size_t from, kt__cmp_entry_t *out)
{
    memset(out, 0, sizeof *out);
    out->name = t->name;
    out->device = t->device;
    out->backend = t->backend;
    out->samples = t->samples;
    out->sample_count = t->samples ? t->sample_count : 0;
    out->dispatch_count = t->dispatch_count;
    out->p50_ns = t->p50_ns;
    if (t->dispatch_count)
        out->mean_ns = t->mean_ns > 0.0 ? t->mean_ns : (double)t->total_ns / (double)t->dispatch_count;
    out->from = from;
}

/* Fill one side from an entry: statistics of its samples (t's, or the same sorted: kt_sample_stats sorts a copy,
 * which costs nothing when they are in order already), or its aggregates when it has none. */
static int fill_side(const kt__cmp_entry_t *t, const uint64_t *samples, kt_compare_side_t *side)
{
    memset(side, 0, sizeof *side);
    if (!t) return 0;
    side->dispatches = t->dispatch_count;
    side->samples = t->sample_count;
    if (side->samples) {
        kt_sample_stats_t st;
        int rc = kt_sample_stats(samples, side->samples, &st);
        if (rc) return rc;
        side->median_ns = st.median_ns;
        side->mean_ns = st.mean_ns;
        side->noise = st.madrel;
        side->stdrel = st.stdrel;
    } else if (t->dispatch_count) {
        side->median_ns = (double)t->p50_ns;
        side->mean_ns = t->mean_ns;
    }
    return 0;
}

/* A medians' or means' ratio with each value below the clock's resolution nudged to 0.5 ns, as the bootstrap's
 * logarithms are (log_nudged): 0 ns -> 1 ms is a regression of 2,000,000x, not a ratio that cannot be computed.
 * NaN when both values are below 1 ns (nothing to compare) or when one is missing or not finite. */
static double ratio(double num, double den)
{
    if (!(num >= 0.0) || !(den >= 0.0) || !isfinite(num) || !isfinite(den) || (num < 1.0 && den < 1.0)) return NAN;
    return (num > 0.5 ? num : 0.5) / (den > 0.5 ? den : 0.5);
}

/* The verdict rule shared by rows and the geometric-mean summary. `noise` < 0 skips the noise check. */
static kt_verdict_t decide(double speedup, double lo, double hi, double p, double alpha, double t, double noise,
                           int *why)
{
    double up = 1.0 + t, down = 1.0 / (1.0 + t);
    int sig = (isnan(p) || p < alpha) && (lo > 1.0 || hi < 1.0);
    int big = speedup >= up || speedup <= down;
    if (sig && big) {
        if (noise >= 0.0 && noise > fabs(log(speedup))) {
            *why = 1; /* change within the noise */
            return KT_VERDICT_UNSURE;
        }
        *why = 0;
        return speedup > 1.0 ? KT_VERDICT_FASTER : KT_VERDICT_SLOWER;
    }
    if (lo >= down && hi <= up) {
        *why = 0;
        return KT_VERDICT_SAME;
    }
    *why = sig ? 3 : 2; /* 2: not significant and the interval is too wide; 3: significant, below threshold */
    return KT_VERDICT_UNSURE;
}

/* The standard normal quantile: x with P(Z <= x) = p, 0 < p < 1 (bisection on erfc; 1e-12 is plenty here). */
static double normal_quantile(double p)
{
    double lo = -40.0, hi = 40.0;
    for (int i = 0; i < 200 && hi - lo > 1e-12; i++) {
        double mid = 0.5 * (lo + hi);
        if (0.5 * erfc(-mid / M_SQRT2) < p) lo = mid;
        else hi = mid;
    }
    return 0.5 * (lo + hi);
}

#define KT_CMP_DECIDE_POWER 0.8      /* chance the estimated sample count reaches a verdict if the effect is real */
#define KT_CMP_DECIDE_MAX 1000000000.0 /* beyond this the estimate says "not in practice" (0) */

/* What every row's verdict reads that depends on the options only, worked out once per comparison. */
typedef struct row_consts_t {
    char band[32];                 /* the threshold as written in reasons: "5 %" */
    double z_conf, z_alpha, z_pow; /* normal quantiles of the confidence and alpha (two-sided) and of the power */
    uint32_t u_min_n;              /* fewest samples per side whose U test can reach p < alpha at all */
} row_consts_t;

/* The fewest samples per side, n, for which the U test can be significant: its smallest two-sided p-value with n
 * on each side (complete separation, no ties) is 2 / C(2n, n) — 0.1 for 3 and 3, 0.029 for 4 and 4. */
static uint32_t u_min_samples(double alpha)
{
    double ways = 2.0; /* C(2n, n) for n = 1 */
    uint32_t n = 1;
    while (!(2.0 / ways < alpha) && n < 4096) {
        ways *= (double)(2 * n + 1) * (double)(2 * n + 2) / ((double)(n + 1) * (double)(n + 1));
        n++;
    }
    return n;
}

static void row_consts_init(row_consts_t *c, const kt_compare_opts_t *o)
{
    double t = o->threshold_pct / 100.0;
    snprintf(c->band, sizeof c->band, "%.3g %%", 100.0 * t);
    c->z_conf = normal_quantile(0.5 + 0.5 * o->confidence);
    c->z_alpha = normal_quantile(1.0 - 0.5 * o->alpha);
    c->z_pow = normal_quantile(KT_CMP_DECIDE_POWER);
    c->u_min_n = u_min_samples(o->alpha);
}

/* About how many samples per side would decide an UNSURE row (docs/compare.md, "How many more"): the
 * standard error of the log-ratio of medians observed in the bootstrap interval, scaled as 1/n per side, must
 * become small enough that the interval excludes 1 (an effect beyond the threshold: FASTER/SLOWER) or lies
 * inside the threshold band (an effect inside it: SAME), with KT_CMP_DECIDE_POWER. 0 = more samples would not
 * help: the change is within the per-sample noise, or it sits on the threshold. */
static uint64_t decide_samples(const kt_compare_row_t *row, const kt_compare_opts_t *o, double noise,
                               const row_consts_t *c)
{
    uint32_t nb = row->before.samples, na = row->after.samples;
    double s = row->speedup_median, lo = row->ci_lo, hi = row->ci_hi;
    if (!nb || !na || !(s > 0.0) || !(lo > 0.0) || !(hi >= lo) || !isfinite(hi)) return 0;
    double z_conf = c->z_conf, z_alpha = c->z_alpha, z_pow = c->z_pow;
    double se = (log(hi) - log(lo)) / (2.0 * z_conf);
    double per_sample_var = se * se / (1.0 / nb + 1.0 / na); /* var of the log-ratio = v (1/nb + 1/na) */
    double d = fabs(log(s)), band = log(1.0 + o->threshold_pct / 100.0), margin, z, floor_n = o->min_samples;
    if (d > band) {               /* to call FASTER/SLOWER the interval must exclude 1 */
        if (noise > d) return 0;  /* and the change exceed the noise, which more samples do not shrink */
        margin = d;
        z = (z_conf > z_alpha ? z_conf : z_alpha) + z_pow;
        if (floor_n < c->u_min_n) floor_n = c->u_min_n; /* and p < alpha, out of reach with fewer samples */
    } else {                      /* to call SAME the interval must fit inside the band */
        margin = band - d;
        z = z_conf + z_pow;
    }
    if (!(margin > 0.0)) return 0;
    double n = 2.0 * per_sample_var * z * z / (margin * margin);
    if (!isfinite(n) || n > KT_CMP_DECIDE_MAX) return 0;
    n = ceil(n);
    if (n < floor_n) n = floor_n;
    return (uint64_t)n;
}

/* " (about N samples per side would decide it at this noise)" or the reason none would, into buf. */
static void decide_note(char *buf, size_t cap, uint64_t n)
{
    if (n)
        snprintf(buf, cap, "; about %llu dispatches per side would decide it at this noise", (unsigned long long)n);
    else
        snprintf(buf, cap, "; more dispatches would not decide it at this noise");
}

/* The verdict of a matched row whose sides are filled, from the samples sorted (sb, sa); reps receives the
 * bootstrap replicates (opts->bootstrap of them) when the row is compared on samples, and *has_reps says so. */
static int judge_matched(kt_compare_row_t *row, const kt__cmp_entry_t *b, const kt__cmp_entry_t *a,
                         const uint64_t *sb, const uint64_t *sa, const kt_compare_opts_t *o, const row_consts_t *c,
                         double *reps, int *has_reps, med_cache_t *cache)
{
    *has_reps = 0;
    uint32_t nb = row->before.samples, na = row->after.samples;
    if ((b->dispatch_count || nb) && (a->dispatch_count || na)) { /* a side with nothing has no median */
        row->speedup_median = ratio(row->before.median_ns, row->after.median_ns);
        row->speedup_mean = ratio(row->before.mean_ns, row->after.mean_ns);
    }
    double t = o->threshold_pct / 100.0;
    const char *band = c->band;
    if (!nb || !na) {
        row->verdict = KT_VERDICT_UNSURE;
        if (!b->dispatch_count || !a->dispatch_count)
            row->reason = fmt_reason("no dispatches in %s", !b->dispatch_count ? "BEFORE" : "AFTER");
        else
            row->reason = fmt_reason("no raw samples in %s (aggregates only): speedups from p50 and mean, no test",
                                     !nb && !na ? "either snapshot" : !nb ? "BEFORE" : "AFTER");
        return row->reason ? 0 : KT_ENOMEM;
    }
    int rc = mann_whitney_sorted(sb, nb, sa, na, &row->u, &row->p_value);
    uint64_t seed = o->seed ^ key_hash(row->name, row->backend, row->device);
    if (!rc) rc = bootstrap_log_ratio(sb, nb, sa, na, o->bootstrap, seed, reps, cache);
    if (rc) return rc;
    double llo, lhi;
    if ((rc = percentile_interval(reps, o->bootstrap, o->confidence, &llo, &lhi))) return rc;
    row->ci_lo = exp(llo);
    row->ci_hi = exp(lhi);
    double s = row->speedup_median;
    double noise = row->before.noise > row->after.noise ? row->before.noise : row->after.noise;
    char note[96];
    if (nb < o->min_samples || na < o->min_samples) {
        row->verdict = KT_VERDICT_UNSURE;
        row->decide_samples = isnan(s) ? 0 : decide_samples(row, o, noise, c);
        if (row->decide_samples) decide_note(note, sizeof note, row->decide_samples);
        else note[0] = '\0';
        if (nb < o->min_samples && na < o->min_samples)
            row->reason = fmt_reason("only %u and %u samples (need %u on each side)%s", nb, na, o->min_samples, note);
        else
            row->reason = fmt_reason("only %u samples in %s (need %u)%s", nb < na ? nb : na,
                                     nb < na ? "BEFORE" : "AFTER", o->min_samples, note);
        return row->reason ? 0 : KT_ENOMEM;
    }
    if (isnan(s)) { /* both medians below 1 ns: no ratio, so no interval beside it either */
        row->verdict = KT_VERDICT_UNSURE;
        row->ci_lo = row->ci_hi = NAN;
        row->reason = fmt_reason("medians below 1 ns on both sides: below the clock's resolution");
        return row->reason ? 0 : KT_ENOMEM;
    }
    *has_reps = 1;
    int why = 0;
    row->verdict = decide(s, row->ci_lo, row->ci_hi, row->p_value, o->alpha, t, noise, &why);
    if (row->verdict == KT_VERDICT_UNSURE) {
        row->decide_samples = why == 1 ? 0 : decide_samples(row, o, noise, c);
        decide_note(note, sizeof note, row->decide_samples);
    }
    int conf = (int)lround(o->confidence * 100.0);
    switch (row->verdict) {
    case KT_VERDICT_FASTER:
    case KT_VERDICT_SLOWER:
        row->reason = fmt_reason("%.3gx %s, time %+.1f %% (p = %.2g; the %d %% CI excludes 1; beyond the %s "
                                 "threshold)",
                                 s >= 1.0 ? s : 1.0 / s, s >= 1.0 ? "faster" : "slower", 100.0 * (1.0 / s - 1.0),
                                 row->p_value, conf, band);
        break;
    case KT_VERDICT_SAME:
        row->reason = fmt_reason("%d %% CI [%.3fx, %.3fx] lies within +/-%s", conf, row->ci_lo, row->ci_hi, band);
        break;
    default:
        if (why == 1)
            row->reason = fmt_reason("the change (|ln speedup| = %.1f %%) is within the noise (%.1f %%, "
                                     "1.4826 MAD / median)%s",
                                     100.0 * fabs(log(s)), 100.0 * noise, note);
        else if (why == 3)
            row->reason = fmt_reason("significant (p = %.2g) but below the %s threshold, and the %d %% CI "
                                     "[%.3fx, %.3fx] reaches beyond it%s",
                                     row->p_value, band, conf, row->ci_lo, row->ci_hi, note);
        else
            row->reason = fmt_reason("inconclusive: p = %.2g, %d %% CI [%.3fx, %.3fx] reaches beyond +/-%s%s",
                                     row->p_value, conf, row->ci_lo, row->ci_hi, band, note);
        break;
    }
    return row->reason ? 0 : KT_ENOMEM;
}

/* Compute a matched row: its sides and verdict, each side's samples sorted once (for the statistics, U and the
 * bootstrap); reps and *has_reps as judge_matched. */
static int fill_matched(kt_compare_row_t *row, const kt__cmp_entry_t *b, const kt__cmp_entry_t *a,
                        const kt_compare_opts_t *o, const row_consts_t *c, double *reps, int *has_reps,
                        med_cache_t *cache)
{
    uint32_t nb = b->sample_count, na = a->sample_count;
    uint64_t *sb = nb ? sorted_copy(b->samples, nb) : NULL, *sa = na ? sorted_copy(a->samples, na) : NULL;
    int rc = (nb && !sb) || (na && !sa) ? KT_ENOMEM : 0;
    if (!rc) rc = fill_side(b, sb, &row->before);
    if (!rc) rc = fill_side(a, sa, &row->after);
    if (!rc) rc = judge_matched(row, b, a, sb, sa, o, c, reps, has_reps, cache);
    free(sb);
    free(sa);
    return rc;
}

/* The row's copy of s, or with strings (kt__compare_sides) s itself ("" for NULL). */
static const char *row_str(const kt__cmp_strings_t *strings, const char *s)
{
    return strings ? (s ? s : "") : dup_str(s);
}

static int fill_key(kt_compare_row_t *row, const kt__cmp_entry_t *t, const kt__cmp_strings_t *strings)
{
    row->name = row_str(strings, t->name);
    row->device = row_str(strings, t->device);
    row->backend = t->backend;
    row->speedup_median = row->speedup_mean = row->ci_lo = row->ci_hi = NAN;
    row->p_value = row->u = NAN;
    return row->name && row->device ? 0 : KT_ENOMEM;
}

/* ---------------------------------------------------------------------------------------------------
 * kt_compare
 * ------------------------------------------------------------------------------------------------- */

const char *kt_verdict_name(kt_verdict_t verdict)
{
    switch (verdict) {
    case KT_VERDICT_SAME: return "SAME";
    case KT_VERDICT_FASTER: return "FASTER";
    case KT_VERDICT_SLOWER: return "SLOWER";
    case KT_VERDICT_UNSURE: return "UNSURE";
    }
    return "?";
}

void kt_compare_free(kt_compare_result_t *result)
{
    if (!result) return;
    for (size_t i = 0; i < result->count; i++) {
        free((void *)result->rows[i].name);
        free((void *)result->rows[i].device);
        free((void *)result->rows[i].device_after);
        free((void *)result->rows[i].reason);
    }
    free(result->rows);
    memset(result, 0, sizeof *result);
}

static int apply_defaults(const kt_compare_opts_t *in, kt_compare_opts_t *o)
{
    memset(o, 0, sizeof *o);
    if (in) *o = *in;
    if (o->threshold_pct == 0.0) o->threshold_pct = KT_CMP_THRESHOLD_PCT;
    else if (o->threshold_pct < 0.0) o->threshold_pct = 0.0;
    if (o->alpha == 0.0) o->alpha = KT_CMP_ALPHA;
    if (o->confidence == 0.0) o->confidence = KT_CMP_CONFIDENCE;
    if (!o->min_samples) o->min_samples = KT_CMP_MIN_SAMPLES;
    if (!o->bootstrap) o->bootstrap = KT_CMP_BOOTSTRAP;
    if (!o->seed) o->seed = KT_CMP_SEED;
    if (!(o->alpha > 0.0 && o->alpha < 1.0) || !(o->confidence > 0.0 && o->confidence < 1.0) ||
        !isfinite(o->threshold_pct))
        return KT_EINVAL;
    return 0;
}

/* Geometric mean over rows compared on samples, with the interval from the replicates: gsum[j] is the sum
 * over those rows of their j-th replicate (accumulated row by row, so no row keeps its replicates). */
static int summarise(kt_compare_result_t *r, double *gsum, size_t k, double log_sum)
{
    const kt_compare_opts_t *o = &r->opts;
    r->geomean_speedup = r->geomean_ci_lo = r->geomean_ci_hi = NAN;
    r->geomean_verdict = KT_VERDICT_UNSURE;
    r->geomean_kernels = k;
    if (!k) return 0;
    r->geomean_speedup = exp(log_sum / (double)k);
    for (uint32_t j = 0; j < o->bootstrap; j++) gsum[j] /= (double)k;
    double lo, hi;
    int rc = percentile_interval(gsum, o->bootstrap, o->confidence, &lo, &hi);
    if (rc) return rc;
    r->geomean_ci_lo = exp(lo);
    r->geomean_ci_hi = exp(hi);
    int why;
    r->geomean_verdict = decide(r->geomean_speedup, r->geomean_ci_lo, r->geomean_ci_hi, NAN, o->alpha,
                                o->threshold_pct / 100.0, -1.0, &why);
    return 0;
}

/* ---------------------------------------------------------------------------------------------------
 * Reasons kept once (kt__cmp_strings_t): a million rows of "no raw samples in either snapshot ..." are one string
 * ------------------------------------------------------------------------------------------------- */

struct kt__cmp_strings_t {
    char **slot; /* open addressing, cap a power of 2; NULL = free */
    size_t cap, used;
};

kt__cmp_strings_t *kt__cmp_strings_new(void) { return calloc(1, sizeof(kt__cmp_strings_t)); }

void kt__cmp_strings_free(kt__cmp_strings_t *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->cap; i++) free(s->slot[i]);
    free(s->slot);
    free(s);
}

static size_t str_hash(const char *p)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *p; p++) h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    return (size_t)(h ^ (h >> 32));
}

const char *kt__cmp_strings_keep(kt__cmp_strings_t *s, char *str)
{
    if (!str) return NULL;
    if (2 * (s->used + 1) > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        char **slot = calloc(cap, sizeof *slot);
        if (!slot) {
            free(str);
            return NULL;
        }
        for (size_t i = 0; i < s->cap; i++)
            if (s->slot[i])
                for (size_t j = str_hash(s->slot[i]) & (cap - 1);; j = (j + 1) & (cap - 1))
                    if (!slot[j]) {
                        slot[j] = s->slot[i];
                        break;
                    }
        free(s->slot);
        s->slot = slot;
        s->cap = cap;
    }
    size_t j = str_hash(str) & (s->cap - 1);
    for (; s->slot[j]; j = (j + 1) & (s->cap - 1))
        if (!strcmp(s->slot[j], str)) {
            free(str);
            return s->slot[j];
        }
    s->used++;
    return s->slot[j] = str;
}

void kt__compare_rows_free(kt_compare_result_t *result)
{
    if (!result) return;
    free(result->rows);
    memset(result, 0, sizeof *result);
}

int kt__compare_sides(const kt__cmp_side_t *before, const kt__cmp_side_t *after, const kt_compare_opts_t *opts,
                      kt__cmp_strings_t *strings, kt_compare_result_t *out)
{
    if (!out) return KT_EINVAL;
    memset(out, 0, sizeof *out);
    int rc = apply_defaults(opts, &out->opts);
    if (rc) return rc;
    const kt_compare_opts_t *o = &out->opts;
    row_consts_t consts;
    row_consts_init(&consts, o);

    kt__cmp_pair_t *pairs = NULL;
    size_t npairs = 0;
    if ((rc = kt__compare_match(before, after, &pairs, &npairs)))
        return rc;
    out->rows = calloc(npairs ? npairs : 1, sizeof *out->rows);
    /* One replicate buffer reused by every row and one running sum for the geometric mean: memory is the rows
     * plus 2 x bootstrap doubles, whatever the number of kernels. */
    double *rep_buf = calloc(o->bootstrap, sizeof *rep_buf), *gsum = calloc(o->bootstrap, sizeof *gsum);
    med_cache_t *cache = calloc(1, sizeof *cache); /* the median laws of the sample counts seen */
    size_t geo_k = 0;
    double geo_log_sum = 0.0;
    if (!out->rows || !rep_buf || !gsum || !cache) {
        rc = KT_ENOMEM;
        goto done;
    }
    for (size_t k = 0; k < npairs; k++) {
        const kt__cmp_pair_t *pr = &pairs[k];
        kt_compare_row_t *row = &out->rows[out->count++];
        if (!pr->a) {
            if ((rc = fill_key(row, pr->b, strings))) goto done;
            row->presence = KT_PRESENT_BEFORE;
            if ((rc = fill_side(pr->b, pr->b->samples, &row->before))) goto done;
            row->verdict = KT_VERDICT_UNSURE;
            row->reason = dup_str("only in BEFORE");
            out->before_only++;
        } else if (!pr->b) {
            if ((rc = fill_key(row, pr->a, strings))) goto done;
            row->presence = KT_PRESENT_AFTER;
            if ((rc = fill_side(pr->a, pr->a->samples, &row->after))) goto done;
            row->verdict = KT_VERDICT_UNSURE;
            row->reason = dup_str("only in AFTER");
            out->after_only++;
        } else {
            const kt__cmp_entry_t *b = pr->b, *a = pr->a;
            if ((rc = fill_key(row, b, strings))) goto done;
            row->presence = KT_PRESENT_BOTH;
            row->match = pr->match;
            if (a->device && row->device && strcmp(a->device, row->device)) { /* renumbered, relabelled */
                if (!(row->device_after = row_str(strings, a->device))) {
                    rc = KT_ENOMEM;
                    goto done;
                }
            }
            int has = 0;
            if ((rc = fill_matched(row, b, a, o, &consts, rep_buf, &has, cache))) goto done;
            if (has && !isnan(row->speedup_median)) {
                for (uint32_t j = 0; j < o->bootstrap; j++) gsum[j] += rep_buf[j];
                geo_log_sum += log(row->speedup_median);
                geo_k++;
            }
            out->matched++;
            switch (row->verdict) {
            case KT_VERDICT_FASTER: out->faster++; break;
            case KT_VERDICT_SLOWER: out->slower++; break;
            case KT_VERDICT_SAME: out->same++; break;
            case KT_VERDICT_UNSURE: out->unsure++; break;
            }
        }
        if (strings) row->reason = kt__cmp_strings_keep(strings, (char *)row->reason);
        if (!row->reason) {
            rc = KT_ENOMEM;
            goto done;
        }
    }
    rc = summarise(out, gsum, geo_k, geo_log_sum);

done:
    med_cache_free(cache);
    free(gsum);
    free(rep_buf);
    free(pairs);
    return rc;
}

/* A snapshot as the narrow records kt__compare_sides reads (pointing into it). */
static int side_of(const kt_snapshot_t *s, kt__cmp_entry_t **v, kt__cmp_side_t *side)
{
    *v = malloc((s->count ? s->count : 1) * sizeof **v);
    if (!*v) return KT_ENOMEM;
    for (size_t i = 0; i < s->count; i++) kt__cmp_entry_of(&s->entries[i], i, &(*v)[i]);
    *side = (kt__cmp_side_t){*v, s->count, s->devices, s->device_count};
    return 0;
}

int kt_compare(const kt_snapshot_t *before, const kt_snapshot_t *after, const kt_compare_opts_t *opts,
               kt_compare_result_t *out)
{
    if (!out) return KT_EINVAL;
    memset(out, 0, sizeof *out);
    if (!before || !after || (before->count && !before->entries) || (after->count && !after->entries))
        return KT_EINVAL;
    kt__cmp_entry_t *vb = NULL, *va = NULL;
    kt__cmp_side_t sb, sa;
    int rc = side_of(before, &vb, &sb);
    if (!rc) rc = side_of(after, &va, &sa);
    if (!rc) rc = kt__compare_sides(&sb, &sa, opts, NULL, out);
    free(vb);
    free(va);
    return rc;
}
