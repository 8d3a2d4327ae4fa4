/* zone.c — CPU backend: scoped zones (KT_CPU_BEGIN / KT_CPU_END) and the host-clock timer. */
#include "core/internal.h"

/* ---------------------------------------------------------------------------------------------------
 * Zones
 * ------------------------------------------------------------------------------------------------- */

kt_zone_t kt_zone_begin(kt_kernel_id_t *site_cache, const char *name)
{
    kt_zone_t z = {0, 0};
    if (!kt__on() || !name)
        return z;
    kt_kernel_id_t id = site_cache ? __atomic_load_n(site_cache, __ATOMIC_RELAXED) : 0;
    if (__builtin_expect(!id, 0)) {
        if (site_cache) {
            id = kt_kernel_intern(name, KT_BACKEND_CPU, NULL);
            __atomic_store_n(site_cache, id, __ATOMIC_RELAXED);
        } else {
            id = kt__kernel_lookup_cached(name, KT_BACKEND_CPU);
        }
    }
    z.kernel = id;
    z.start_ns = kt__now_zone_begin();
    return z;
}

void kt__zone_end_id(kt_kernel_id_t kernel, uint64_t start_ns)
{
    uint64_t end = kt__now_zone();
    /* a refit slews, so time never steps back; a read converted across the refit may still land 1 ns early */
    if ((int64_t)(end - start_ns) < 0)
        end = start_ns;
    if (kernel && kt__on())
        kt__record_host_span(kernel, start_ns, end);
}

void kt_zone_end(const kt_zone_t *zone)
{
    if (zone)
        kt__zone_end_id(zone->kernel, zone->start_ns);
}

/* ---------------------------------------------------------------------------------------------------
 * Timer (semantics in ktiming.h: elapsed while running is time since the last start; stop freezes it)
 * ------------------------------------------------------------------------------------------------- */

void kt_cpu_timer_start(kt_cpu_timer_t *t)
{
    if (!t)
        return;
    t->start_ns = kt__now_begin();
    t->stop_ns = 0;
    t->running = 1;
}

void kt_cpu_timer_stop(kt_cpu_timer_t *t)
{
    if (!t || !t->running)
        return;
    t->stop_ns = kt__now();
    t->running = 0;
}

double kt_cpu_timer_elapsed_ms(const kt_cpu_timer_t *t)
{
    if (!t || !t->start_ns)
        return 0.0;
    uint64_t end = t->running ? kt__now() : t->stop_ns;
    return (double)(end - t->start_ns) / 1e6;
}
