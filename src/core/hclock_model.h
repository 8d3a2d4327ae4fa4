/* hclock_model.h — internal: the host counter's model against CLOCK_MONOTONIC_RAW (hclock_model.c): the first
 * window, the guarded refresh, the bound. Pure apart from the reads of hclock.h, so tests drive it with
 * test-double counters (KT_HCLOCK_DOUBLES, tests/core/test_host_clock_model.c). docs/host-clock.md. */
#ifndef KT_CORE_HCLOCK_MODEL_H
#define KT_CORE_HCLOCK_MODEL_H

#include <stdint.h>

#ifdef KT_HCLOCK_DOUBLES /* the test's own copies never meet the library's, even in a static build */
#define kt__hcm_start kt__hcm_dbl_start
#define kt__hcm_stats kt__hcm_dbl_stats
#define kt__hcm_source_changed kt__hcm_dbl_source_changed
#define kt__hcm_published kt__hcm_dbl_published
#define kt__hcm_fork_prepare kt__hcm_dbl_fork_prepare
#define kt__hcm_fork_release kt__hcm_dbl_fork_release
#endif

/* The assumed worst change of the counter's rate against CLOCK_MONOTONIC_RAW between two refreshes, and the
 * refresh cadence that keeps its share of the bound small, when the counter is not the kernel's clocksource
 * (kvm-clock, hyperv_clocksource, xen: the kernel may re-scale) ... */
#define KT__HCM_CHANGE_PPM 1000.0
#define KT__HCM_WAIT_NS 1000000ull
/* ... and when it is (CLOCK_MONOTONIC_RAW is then a fixed linear function of it; only a switch of clocksource,
 * re-read at every refresh, changes that). */
#define KT__HCM_KERNEL_CHANGE_PPM 0.01
#define KT__HCM_KERNEL_WAIT_NS 1000000000ull
/* The guard saw this many steps (disagreements beyond what the assumed rate change explains): the counter is given
 * up for clock_gettime (under auto). */
#define KT__HCM_MAX_FIRES 8u

typedef struct kt__hcm_stats_t {
    double ns_per_tick;         /* fitted */
    double nominal_ns_per_tick; /* from the first window */
    double rate_bound_ppm;      /* bound on the rate's error over the next interval: fit + assumed change (+ widening) */
    double change_ppm;          /* assumed worst rate change (KT__HCM_CHANGE_PPM or KT__HCM_KERNEL_CHANGE_PPM) */
    double bound_ns;            /* bound on |converted - CLOCK_MONOTONIC_RAW| until the next refresh, slew included */
    double slew_ns;             /* the slew left at the last refresh (part of bound_ns) */
    double span_ms;             /* host time between the fit's two points */
    uint64_t wait_max_ns;       /* the longest refresh interval: the blind window of a step */
    uint32_t samples;           /* brackets read since the model's epoch began */
    uint64_t refreshes;         /* refreshes (the first window counts one) */
    uint64_t fires;             /* guard fires: the counter disagreed with its model beyond the bound */
    uint64_t steps;             /* ... of which too large for a rate change: a step */
    uint64_t source_changes;    /* clocksource switches seen at a refresh */
    int kernel_counter;         /* the counter is the kernel's clocksource (the tight assumption) */
    int fell_back;              /* KT__HCM_MAX_FIRES steps: clock_gettime from then on */
} kt__hcm_stats_t;

/* Calibrate from a first window (32 brackets over ~1 ms) and install the first piece. kernel_counter: the
 * counter is the kernel's clocksource; may_fall_back: give the counter up after KT__HCM_MAX_FIRES steps (auto).
 * 0, or -1 when the counter cannot be calibrated. Sets kt__hc.mode to KT__HC_COUNTER on success. */
int kt__hcm_start(int kernel_counter, int may_fall_back);
void kt__hcm_stats(kt__hcm_stats_t *out);
/* fork: the model's lock held across it (hclock.c's handlers). */
void kt__hcm_fork_prepare(void);
void kt__hcm_fork_release(void);

/* Supplied by the embedder (hclock.c; the tests' doubles): */
/* Re-read the kernel's clocksource; 1 when it differs from the last reading (*kernel_counter: whether it is
 * now the counter). Called under the model's lock at a refresh, at most every 100 ms unless kernel_counter. */
int kt__hcm_source_changed(int *kernel_counter);
/* The model changed in a way the published record should show (the lock is not held). */
void kt__hcm_published(const kt__hcm_stats_t *st);

#endif
