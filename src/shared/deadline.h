/* deadline.h — the deadline of a pthread timed wait: a clock's time some ns from now, on the clock the waited-on
 * object uses (CLOCK_MONOTONIC for a condition variable made with that attribute, CLOCK_REALTIME for a mutex or a
 * default condition variable, which a clock step stretches). Header-only: the core's collector helper, the
 * backends and the CUPTI injection library use it. */
#ifndef KT_SHARED_DEADLINE_H
#define KT_SHARED_DEADLINE_H

#include <stdint.h>
#include <time.h>

static inline struct timespec kt__timespec_in(clockid_t clk, uint64_t ns)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    uint64_t t = (uint64_t)ts.tv_nsec + ns;
    ts.tv_sec += (time_t)(t / 1000000000ull);
    ts.tv_nsec = (long)(t % 1000000000ull);
    return ts;
}

#endif
