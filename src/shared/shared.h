/* shared.h — internal, header-only: the facts both libraries (libktiming, libktiming_analysis) must agree on.
 * Everything here is static inline or a macro, so each library keeps its own copy and no internal symbol is
 * exported across the shared-library boundary. */
#ifndef KT_SHARED_SHARED_H
#define KT_SHARED_SHARED_H

#include <ktiming.h>
#include <ktiming/analysis.h> /* KT_SNAPSHOT_SCHEMA_VERSION: the one schema version number */

#include "core/hist.h"

#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Identity of the JSON snapshot schema (docs/json-schema.md). Version 2 added exact sums, bytes, drop reasons,
 * last errors, pid/rank/kernels_dropped and the span table; version 3 runs ("v*n") in the span table and end
 * times there as offsets from start + duration; version 4 the device identity (devices carry key, model, ids, host,
 * rank; their name and the entries' and queues' device are labels unique in the file); version 5 the entries'
 * breakdown by launch configuration ("configs"); readers accept 1 to 5. */
#define KT_SNAPSHOT_SCHEMA_NAME "ktiming.snapshot"
/* The version written is the newest one read (ktiming/analysis.h): one number, never two to keep in step. */
#define KT_SNAPSHOT_SCHEMA_WRITTEN KT_SNAPSHOT_SCHEMA_VERSION

/* Every backend's names, the one table: schema id (stable: files carry it; never the display name, which may
 * change) and display name (kt_backend_name). Row b: the id (display 0) or the display name (display 1);
 * "unknown" out of range. */
static inline const char *kt__backend_names(kt_backend_t b, int display)
{
    static const char *const names[KT_BACKEND_COUNT][2] = {
        [KT_BACKEND_CPU] = {"cpu", "CPU"},          [KT_BACKEND_OPENCL] = {"opencl", "OpenCL"},
        [KT_BACKEND_VULKAN] = {"vulkan", "Vulkan"}, [KT_BACKEND_CUDA] = {"cuda", "CUDA"},
        [KT_BACKEND_METAL] = {"metal", "Metal"},    [KT_BACKEND_WEBGPU] = {"webgpu", "WebGPU"},
        [KT_BACKEND_HOST_API] = {"host-api", "host-api"}};
    return (unsigned)b < KT_BACKEND_COUNT && names[b][0] ? names[b][display != 0] : "unknown";
}

/* Backend identifiers of the schema (the table's first column). */
static inline const char *kt__backend_id(kt_backend_t b) { return kt__backend_names(b, 0); }

/* Identifiers of the drop reasons in the schema (the id column of KT_DROP_REASON_MAP: lower-case, words joined
 * by '_', "ring_full"). */
static inline const char *kt__drop_reason_id(int r)
{
    static const char *const ids[KT_DROP_REASON_COUNT] = {
#define KT__DROP_ID(name, text, id) id,
        KT_DROP_REASON_MAP(KT__DROP_ID)
#undef KT__DROP_ID
    };
    return (unsigned)r < KT_DROP_REASON_COUNT ? ids[r] : "unknown";
}

/* The exact sums of an entry. total128/sumsq128 are authoritative when consistent with total_ns (a snapshot
 * kt_snapshot() made, or a version-2 file); otherwise (a struct filled by hand, a version-1 file) the sum is
 * total_ns and the sum of squares is rebuilt from mean and stddev, exact to double precision. */
static inline void kt__entry_sums(const kt_kernel_timing_t *e, kt_u128_t *sum, kt_u128_t *sumsq)
{
    if ((e->total128.hi ? UINT64_MAX : e->total128.lo) == e->total_ns) {
        *sum = e->total128;
        if (e->sumsq128.lo || e->sumsq128.hi || !e->dispatch_count || !e->total_ns) {
            *sumsq = e->sumsq128;
            return;
        }
    } else {
        *sum = (kt_u128_t){e->total_ns, 0};
    }
    long double n = (long double)e->dispatch_count, m = (long double)e->mean_ns, sd = (long double)e->stddev_ns;
    long double q = n > 1 ? (n - 1) * sd * sd + n * m * m : n * m * m;
    unsigned __int128 qi = (!(q >= 0) || q > 3.4e38L) ? 0 : (unsigned __int128)(q + 0.5L);
    *sumsq = (kt_u128_t){(uint64_t)qi, (uint64_t)(qi >> 64)};
}

/* The kernel name under which the Vulkan backend records one span per submitted batch (its time contains the
 * batch's dispatches, so reports leave it out of shares and sums). */
#define KT__BATCH_NAME "vkQueueSubmit"
static inline int kt__entry_is_batch(const kt_kernel_timing_t *e)
{
    return e->backend == KT_BACKEND_VULKAN && e->name && !strcmp(e->name, KT__BATCH_NAME);
}

/* Host API time (KT_BACKEND_HOST_API): a program thread blocked in a GPU API call. Like a batch, its time overlaps
 * the kernels' (the thread waited while they ran), so it is neither kernel time nor part of a share. */
static inline int kt__entry_is_wait(const kt_kernel_timing_t *e) { return e->backend == KT_BACKEND_HOST_API; }

/* dropped_by of an entry made consistent with dropped: what the reasons do not account for (a struct filled by
 * hand, a version-1 file) is "unspecified"; reasons adding up to more than dropped are scaled back to it. */
static inline void kt__entry_dropped_by(const kt_kernel_timing_t *e, uint64_t out[KT_DROP_REASON_COUNT])
{
    uint64_t sum = 0;
    for (int r = 0; r < KT_DROP_REASON_COUNT; r++) {
        out[r] = e->dropped_by[r];
        sum = sum + out[r] < sum ? UINT64_MAX : sum + out[r];
    }
    if (sum <= e->dropped) {
        out[KT_DROP_UNSPECIFIED] += e->dropped - sum;
        return;
    }
    memset(out, 0, sizeof(uint64_t) * KT_DROP_REASON_COUNT);
    out[KT_DROP_UNSPECIFIED] = e->dropped;
}

/* a * b, 128 x 128 -> 256 bits, in 64-bit limbs from the least significant. */
static inline void kt__mul128(unsigned __int128 a, unsigned __int128 b, uint64_t r[4])
{
    uint64_t a0 = (uint64_t)a, a1 = (uint64_t)(a >> 64), b0 = (uint64_t)b, b1 = (uint64_t)(b >> 64);
    unsigned __int128 p00 = (unsigned __int128)a0 * b0, p01 = (unsigned __int128)a0 * b1;
    unsigned __int128 p10 = (unsigned __int128)a1 * b0, p11 = (unsigned __int128)a1 * b1;
    unsigned __int128 mid = (p00 >> 64) + (uint64_t)p01 + (uint64_t)p10;
    unsigned __int128 high = (mid >> 64) + (p01 >> 64) + (p10 >> 64) + (uint64_t)p11;
    r[0] = (uint64_t)p00;
    r[1] = (uint64_t)mid;
    r[2] = (uint64_t)high;
    r[3] = (uint64_t)(high >> 64) + (uint64_t)(p11 >> 64);
}

/* Sample standard deviation from exact integer sums: (Q - S^2/n) / (n - 1), with S^2/n split into quotient
 * and remainder so no precision is lost before the final division. */
static inline double kt__stddev_exact(uint64_t n, unsigned __int128 s, unsigned __int128 q)
{
    if (n < 2)
        return 0.0;
    if (q == ~(unsigned __int128)0) /* the sum of squares saturated (recorder.c) or passed 2^128: not known */
        return NAN;
    if (s >> 64) {
        /* Totals past 2^64 ns: s*s does not fit 128 bits, and Q - S^2/n in floating point cancels to nothing (8
         * records of 2^61 +- 1e6 gave 0). n*Q - S^2 in 256-bit integers is exact (and below 2^192: S^2 <= nQ). */
        uint64_t a[4], b[4], d[4];
        kt__mul128(q, n, a);
        kt__mul128(s, s, b);
        unsigned borrow = 0;
        for (int i = 0; i < 4; i++) {
            uint64_t x = a[i] - b[i] - borrow;
            borrow = (a[i] < b[i]) || (a[i] - b[i] < borrow);
            d[i] = x;
        }
        if (borrow)
            return 0.0; /* inconsistent sums */
        long double num = (long double)d[0] + ldexpl((long double)d[1], 64) + ldexpl((long double)d[2], 128) +
                          ldexpl((long double)d[3], 192);
        return (double)sqrtl(num / ((long double)n * (long double)(n - 1)));
    }
    unsigned __int128 s2 = s * s, quo = s2 / n, rem = s2 % n;
    double num = q >= quo ? (double)(q - quo) - (double)rem / (double)n : 0.0;
    if (num < 0)
        num = 0;
    return sqrt(num / (double)(n - 1));
}

/* Nearest-rank percentile (the ceil(p*n)-th smallest of n) from ascending histogram buckets, as the
 * representative value of its bucket (kt__hist_value), clamped to [lo, hi]; hi when there are no buckets. */
static inline uint64_t kt__bins_percentile(const kt_hist_bin_t *bins, uint32_t nbins, double p, uint64_t lo,
                                           uint64_t hi)
{
    uint64_t n = 0, cum = 0, v = hi;
    for (uint32_t i = 0; i < nbins; i++)
        n += bins[i].count;
    if (!n)
        return hi;
    double want = p * (double)n;
    uint64_t rank = (uint64_t)want;
    if ((double)rank < want)
        rank++;
    if (rank < 1)
        rank = 1;
    for (uint32_t i = 0; i < nbins; i++) {
        cum += bins[i].count;
        if (cum >= rank) {
            v = kt__hist_value(kt__hist_index(bins[i].lower_ns));
            break;
        }
    }
    return v < lo ? lo : v > hi ? hi : v;
}

/* The order of a snapshot's entries: by name, then backend, then device. */
static inline int kt__entry_order(const kt_kernel_timing_t *a, const kt_kernel_timing_t *b)
{
    int r = strcmp(a->name, b->name);
    if (r)
        return r;
    if (a->backend != b->backend)
        return a->backend < b->backend ? -1 : 1;
    return strcmp(a->device, b->device);
}

/* Decodes the well-formed UTF-8 sequence (RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF) at s,
 * looking at no more than avail bytes: its length 1..4 and its code point in *cp, or 0 (and *cp untouched) when
 * the bytes there are not valid UTF-8. The one UTF-8 decoder of both libraries. */
static inline size_t kt__utf8_decode(const unsigned char *s, size_t avail, uint32_t *cp)
{
    unsigned char c = s[0];
    size_t n;
    uint32_t v;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
        v = c & 0x1Fu;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        v = c & 0x0Fu;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        v = c & 0x07u;
    } else {
        return 0;
    }
    if (n > avail)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0u) != 0x80u)
            return 0;
        v = (v << 6) | (s[i] & 0x3Fu);
    }
    if ((n == 3 && v < 0x800) || (n == 4 && (v < 0x10000 || v > 0x10FFFF)) || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return n;
}

/* Length of the well-formed UTF-8 sequence at s (avail bytes at most): 1..4, or 0 when not valid UTF-8. */
static inline size_t kt__utf8_len(const unsigned char *s, size_t avail)
{
    uint32_t cp;
    return kt__utf8_decode(s, avail, &cp);
}

/* ---------------------------------------------------------------------------------------------------
 * Launch configurations (kt_kernel_timing_t.configs): their schema ids, equality, and the one fold to the cap
 * ------------------------------------------------------------------------------------------------- */

/* Schema ids of the kinds (docs/json-schema.md); NULL out of range or for KT_LAUNCH_NONE. */
static inline const char *kt__launch_kind_id(uint32_t kind)
{
    static const char *const ids[] = {NULL, "items", "groups", "indirect", "other"};
    return kind < sizeof ids / sizeof ids[0] ? ids[kind] : NULL;
}

static inline int kt__launch_same(const kt_launch_t *a, const kt_launch_t *b)
{
    return a->kind == b->kind && a->dims == b->dims && !memcmp(a->size, b->size, sizeof a->size) &&
           !memcmp(a->local, b->local, sizeof a->local);
}

/* Order of rows: largest total first, then most dispatches, then the configuration's fields (a stable, total
 * order, so the same data always folds to the same rows); the OTHER row last. */
static inline int kt__config_order(const void *pa, const void *pb)
{
    const kt_config_timing_t *a = pa, *b = pb;
    int ao = a->launch.kind == KT_LAUNCH_OTHER, bo = b->launch.kind == KT_LAUNCH_OTHER;
    if (ao != bo)
        return ao - bo;
    if (a->total_ns != b->total_ns)
        return a->total_ns > b->total_ns ? -1 : 1;
    if (a->dispatch_count != b->dispatch_count)
        return a->dispatch_count > b->dispatch_count ? -1 : 1;
    const uint64_t *x = &a->launch.size[0], *y = &b->launch.size[0];
    if (a->launch.kind != b->launch.kind)
        return a->launch.kind < b->launch.kind ? -1 : 1;
    if (a->launch.dims != b->launch.dims)
        return a->launch.dims < b->launch.dims ? -1 : 1;
    for (int i = 0; i < 3; i++)
        if (x[i] != y[i])
            return x[i] < y[i] ? -1 : 1;
    x = &a->launch.local[0], y = &b->launch.local[0];
    for (int i = 0; i < 3; i++)
        if (x[i] != y[i])
            return x[i] < y[i] ? -1 : 1;
    return 0;
}

/* b's counts added into a (the same configuration, or both OTHER). */
static inline void kt__config_add(kt_config_timing_t *a, const kt_config_timing_t *b)
{
    if (!b->dispatch_count)
        return;
    if (!a->dispatch_count || b->min_ns < a->min_ns)
        a->min_ns = b->min_ns;
    if (b->max_ns > a->max_ns)
        a->max_ns = b->max_ns;
    a->dispatch_count += b->dispatch_count;
    a->total_ns = a->total_ns > UINT64_MAX - b->total_ns ? UINT64_MAX : a->total_ns + b->total_ns;
}

/* Rows r[0, n) (from several threads or snapshots) made into an entry's breakdown in place: equal configurations
 * (and every OTHER row) added together, empty rows left out, sorted by kt__config_order, and past
 * KT_LAUNCH_CONFIGS_MAX configurations the smallest added into one OTHER row. Returns the rows kept (at most
 * KT_LAUNCH_CONFIGS_MAX + 1, never more than n). O(n^2) in the rows, which are few. */
static inline uint32_t kt__configs_fold(kt_config_timing_t *r, uint32_t n)
{
    uint32_t w = 0;
    if (!r || !n)
        return 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!r[i].dispatch_count)
            continue;
        uint32_t j = 0;
        while (j < w && !kt__launch_same(&r[j].launch, &r[i].launch))
            j++;
        if (j < w) {
            kt__config_add(&r[j], &r[i]);
        } else {
            r[w++] = r[i];
        }
    }
    if (w > 1)
        qsort(r, w, sizeof *r, kt__config_order);
    uint32_t keep = 0;
    while (keep < w && keep < KT_LAUNCH_CONFIGS_MAX && r[keep].launch.kind != KT_LAUNCH_OTHER)
        keep++;
    if (keep == w)
        return w;
    kt_config_timing_t other;
    memset(&other, 0, sizeof other);
    other.launch.kind = KT_LAUNCH_OTHER;
    for (uint32_t i = keep; i < w; i++)
        kt__config_add(&other, &r[i]);
    r[keep] = other;
    return keep + 1;
}

/* Frees what an entry owns (its name, device label, samples, histogram, per-source totals and launch
 * configurations; not the entry itself): the one list of them, for kt_snapshot_free and every reader or merge
 * that drops entries one at a time. */
static inline void kt__entry_release(kt_kernel_timing_t *e)
{
    free((void *)e->name);
    free((void *)e->device);
    free(e->samples);
    free(e->hist);
    free(e->by_source);
    free(e->configs);
}

#endif
