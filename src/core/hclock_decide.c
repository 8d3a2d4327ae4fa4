/* hclock_decide.c — which host counter to trust, from facts gathered by hclock.c (pure: unit-tested alone). */
#include "core/hclock_decide.h"

#include <stdio.h>
#include <string.h>

int kt__hc_request_parse(const char *env)
{
    if (!env || !*env || !strcmp(env, "auto"))
        return KT__HC_REQ_AUTO;
    if (!strcmp(env, "tsc"))
        return KT__HC_REQ_COUNTER;
    if (!strcmp(env, "monotonic_raw"))
        return KT__HC_REQ_GETTIME;
    return KT__HC_REQ_INVALID;
}

/* The first reason the counter cannot be trusted, or NULL. The kernel's clocksource is no such reason: where it
 * is not the counter (kvm-clock, hyperv_clocksource, xen), the model is checked against CLOCK_MONOTONIC_RAW every
 * millisecond and its bound assumes a rate change of up to 1000 ppm (hclock_model.c). */
static const char *distrust(const kt__hc_facts_t *f)
{
    if (!f->have_counter)
        return "no invariant counter on this architecture";
    if (!f->invariant)
        return f->is_x86 ? "CPUID 0x80000007 EDX bit 8 (invariant TSC) is clear" : "counter not invariant";
    if (f->is_x86 && !f->constant_tsc)
        return "Linux does not list constant_tsc";
    if (f->is_x86 && !f->nonstop_tsc)
        return "Linux does not list nonstop_tsc";
    if (f->cross_cpu_checked && !f->cross_cpu_ok)
        return f->cross_cpu_note;
    return NULL;
}

int kt__hc_kernel_counter(const kt__hc_facts_t *f)
{
    return f->expected_clocksource[0] && !strcmp(f->clocksource, f->expected_clocksource);
}

/* Why the counter is trusted, in one phrase. */
static void trusted(const kt__hc_facts_t *f, char *buf, size_t n)
{
    const char *inv = f->is_x86 ? "invariant TSC (CPUID 0x80000007 EDX bit 8)" : "invariant counter (architectural)";
    if (kt__hc_kernel_counter(f))
        snprintf(buf, n, "%s, the kernel's clocksource (%s)", inv, f->clocksource);
    else
        snprintf(buf, n, "%s; clocksource %s, so checked against CLOCK_MONOTONIC_RAW every 1 ms", inv,
                 f->clocksource[0] ? f->clocksource : "unknown");
}

int kt__hc_decide(const kt__hc_facts_t *f, int request, char *reason, size_t n)
{
    char buf[160];
    const char *why = distrust(f);
    switch (request) {
    case KT__HC_REQ_GETTIME:
        snprintf(reason, n, "KTIMING_CLOCK=monotonic_raw");
        return 0;
    case KT__HC_REQ_COUNTER:
        if (!f->have_counter) {
            snprintf(reason, n, "KTIMING_CLOCK=tsc, but %s", "this architecture has no counter");
            return 0;
        }
        if (why)
            snprintf(reason, n, "KTIMING_CLOCK=tsc (forced although %s)", why);
        else
            snprintf(reason, n, "KTIMING_CLOCK=tsc");
        return 1;
    case KT__HC_REQ_INVALID:
        if (why) {
            snprintf(reason, n, "KTIMING_CLOCK not auto|tsc|monotonic_raw; %s", why);
            return 0;
        }
        trusted(f, buf, sizeof buf);
        snprintf(reason, n, "KTIMING_CLOCK not auto|tsc|monotonic_raw; %s", buf);
        return 1;
    default:
        if (why) {
            snprintf(reason, n, "%s", why);
            return 0;
        }
        trusted(f, reason, n);
        return 1;
    }
}
