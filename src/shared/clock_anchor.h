/* clock_anchor.h — internal: taking a clock anchor (CLOCK_MONOTONIC read around the host timeline) and putting
 * CLOCK_MONOTONIC times on the host timeline through it, with the bound (docs/json-schema.md, "Clock anchor").
 * Pure arithmetic on the readers it is given, so tests drive it with test-double clocks. */
#ifndef KT_SHARED_CLOCK_ANCHOR_H
#define KT_SHARED_CLOCK_ANCHOR_H

#include <ktiming.h>
#include <stdint.h>
#include <time.h>

/* The most CLOCK_MONOTONIC's rate may differ from CLOCK_MONOTONIC_RAW's, in ppm: NTP (adjtimex) steers the
 * kernel's frequency by at most ±500 ppm (MAXFREQ), and adjtime(3) slews at 500 µs per s. The bound of a time
 * placed through an anchor grows by this much of its distance from the anchor. */
#define KT_CLOCK_SLEW_PPM 500u

/* Bracketed readings an anchor takes; the narrowest bracket is kept. */
#define KT_CLOCK_ANCHOR_TRIES 5u

/* The clock names of kt_snapshot_t.clock_domain. */
#define KT_CLOCK_HOST "CLOCK_MONOTONIC_RAW" /* the host timeline of ktiming (kt_now_ns) */
#define KT_CLOCK_MONO "CLOCK_MONOTONIC"     /* Node's process.hrtime.bigint() */

/* A clock reader: ns, 0 when the read failed. */
typedef uint64_t (*kt__clock_read_t)(void *ctx);

/* clock_gettime(id) in ns, 0 when it fails. */
static inline uint64_t kt__clock_ns(clockid_t id)
{
    struct timespec ts;
    return clock_gettime(id, &ts) == 0 ? (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec : 0;
}

/* Readers of the system clocks for kt__clock_anchor_take. */
static inline uint64_t kt__clock_read_monotonic(void *ctx)
{
    (void)ctx;
    return kt__clock_ns(CLOCK_MONOTONIC);
}

static inline uint64_t kt__clock_read_raw(void *ctx)
{
    (void)ctx;
    return kt__clock_ns(CLOCK_MONOTONIC_RAW);
}

/* An anchor: `tries` times CLOCK_MONOTONIC (mono), the host timeline (host), CLOCK_MONOTONIC again; the reading
 * with the narrowest bracket w = m1 - m0 gives monotonic_ns = m0 + w/2 (the true value at host's instant lies in
 * [m0, m1], at most ceil(w/2) away) and bound_ns = ceil(w/2) + host_bound (the host timeline against
 * CLOCK_MONOTONIC_RAW) + 1 (the two clocks' rates differ by at most 500 ppm inside a bracket under 2 ms). 0, or
 * -1 (*out zeroed) when no reading was usable (a failed read, a bracket running backwards). */
static inline int kt__clock_anchor_take(kt__clock_read_t mono, kt__clock_read_t host, void *ctx, uint64_t host_bound,
                                        unsigned tries, kt_clock_anchor_t *out)
{
    kt_clock_anchor_t best = {0, 0, 0};
    uint64_t width = UINT64_MAX;
    for (unsigned i = 0; i < tries; i++) {
        uint64_t m0 = mono(ctx), h = host(ctx), m1 = mono(ctx);
        if (!m0 || !h || m1 < m0 || m1 - m0 >= width)
            continue;
        width = m1 - m0;
        uint64_t half = width / 2 + (width & 1);
        best = (kt_clock_anchor_t){h, m0 + width / 2, half > UINT64_MAX - host_bound - 1 ? UINT64_MAX
                                                                                        : half + host_bound + 1};
    }
    *out = best;
    return best.host_ns ? 0 : -1;
}

/* What a CLOCK_MONOTONIC time t moves by to be on the anchor's host timeline (host_ns - monotonic_ns). */
static inline int64_t kt__clock_anchor_offset(const kt_clock_anchor_t *a)
{
    return (int64_t)(a->host_ns - a->monotonic_ns); /* two's complement: the signed difference of two u64 */
}

/* The bound of a CLOCK_MONOTONIC time t placed through the anchor: the anchor's bound plus KT_CLOCK_SLEW_PPM of
 * |t - monotonic_ns|, rounded up; saturates at UINT64_MAX - 1 (UINT64_MAX means unknown). */
static inline uint64_t kt__clock_anchor_bound(const kt_clock_anchor_t *a, uint64_t t)
{
    uint64_t d = t > a->monotonic_ns ? t - a->monotonic_ns : a->monotonic_ns - t;
    unsigned __int128 slew = ((unsigned __int128)d * KT_CLOCK_SLEW_PPM + 999999u) / 1000000u;
    unsigned __int128 b = slew + a->bound_ns;
    return b >= UINT64_MAX ? UINT64_MAX - 1 : (uint64_t)b;
}

#endif
