/* hclock_decide.h — internal: the facts about the host counter and the decision whether to trust it. */
#ifndef KT_CORE_HCLOCK_DECIDE_H
#define KT_CORE_HCLOCK_DECIDE_H

#include <stddef.h>

/* KTIMING_CLOCK values. */
enum { KT__HC_REQ_AUTO = 0, KT__HC_REQ_COUNTER = 1, KT__HC_REQ_GETTIME = 2, KT__HC_REQ_INVALID = 3 };

/* What hclock.c found out about the counter. */
typedef struct kt__hc_facts_t {
    int have_counter;               /* the architecture has one (x86-64 TSC, aarch64 CNTVCT_EL0) */
    int is_x86;                     /* x86-64: the Linux flags below apply */
    int invariant;                  /* x86: CPUID 0x80000007 EDX bit 8; aarch64: always (architectural) */
    int constant_tsc;               /* /proc/cpuinfo lists constant_tsc */
    int nonstop_tsc;                /* /proc/cpuinfo lists nonstop_tsc */
    char clocksource[32];           /* the kernel's current clocksource */
    char expected_clocksource[32];  /* the one that means the kernel trusts the counter ("tsc") */
    int cross_cpu_checked;          /* the per-CPU check ran */
    int cross_cpu_ok;               /* ... and every CPU agreed */
    char cross_cpu_note[128];       /* what disagreed */
} kt__hc_facts_t;

/* KTIMING_CLOCK (NULL or empty = auto) to a KT__HC_REQ_*. */
int kt__hc_request_parse(const char *env);
/* 1: use the counter, 0: clock_gettime. reason gets why, for `ktiming devices`. An invalid request acts as auto
 * and says so. */
int kt__hc_decide(const kt__hc_facts_t *f, int request, char *reason, size_t n);
/* The counter is the kernel's clocksource (CLOCK_MONOTONIC_RAW is then a fixed linear function of it). */
int kt__hc_kernel_counter(const kt__hc_facts_t *f);

#endif
