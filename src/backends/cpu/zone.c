/* zone.c — CPU backend: scoped zones (KT_CPU_BEGIN / KT_CPU_END) and the host-clock timer. */
#include "core/internal.h"
#include "core/service.h"
#include "export/escape.h"
#include "shared/tool.h"

#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------
 * Zones
 * ------------------------------------------------------------------------------------------------- */

/* A KT_CPU_BEGIN site interns its name once and keeps the id: a site whose name varies records every dispatch
 * under its first name. In debug builds (no NDEBUG) or with KTIMING_CHECK=1 a cached site compares the name it is
 * given with its kernel's, and a difference is said once per kernel on stderr. 0 off, 1 on, -1 not read yet. */
static int g_site_check = -1;

static int site_check_on(void)
{
    int on = __atomic_load_n(&g_site_check, __ATOMIC_RELAXED);
    if (__builtin_expect(on >= 0, 1))
        return on;
#ifdef NDEBUG
    const char *v = kt__env(KT_ENV_NAME(CHECK));
    on = v && v[0] == '1' && v[1] == 0;
#else
    on = 1;
#endif
    __atomic_store_n(&g_site_check, on, __ATOMIC_RELAXED);
    return on;
}

static void site_check(kt_kernel_id_t id, const char *name)
{
    static unsigned char warned[(KT__MAX_KERNELS + 8u) / 8u]; /* one bit per kernel said once */
    const kt__kernel_t *k = kt__kernel_get(id);
    if (!k || kt__kernel_named(k, name))
        return;
    unsigned char bit = (unsigned char)(1u << (id & 7u));
    if (__atomic_fetch_or(&warned[id >> 3], bit, __ATOMIC_RELAXED) & bit)
        return;
    char first[128], given[128];
    kt__escape_field(first, sizeof first, k->name);
    kt__escape_field(given, sizeof given, name);
    fprintf(stderr,
            "ktiming: a KT_CPU_BEGIN site first named '%s' was given '%s': a site's name must not vary, so its "
            "dispatches are all recorded as '%s' (use one site per name, or kt_zone_begin(NULL, name))\n",
            first, given, first);
}

/* A zone of kernel `name` of `backend`: the site's cached id (interned on its first run), or the calling thread's
 * name cache when there is no site. */
static kt_zone_t zone_begin(kt_kernel_id_t *site_cache, const char *name, kt_backend_t backend)
{
    kt_zone_t z = {0, 0};
    if (!kt__on() || !name)
        return z;
    kt_kernel_id_t id = site_cache ? __atomic_load_n(site_cache, __ATOMIC_RELAXED) : 0;
    if (__builtin_expect(!id, 0)) {
        if (site_cache) {
            id = kt_kernel_intern(name, backend, "host"); /* host API waits run on the host too */
            __atomic_store_n(site_cache, id, __ATOMIC_RELAXED);
        } else {
            id = kt__kernel_lookup_cached(name, backend);
        }
        if (!id) /* the kernel table is full: the record is dropped, and counted in kernels_dropped */
            kt_record_dispatch(&(kt_dispatch_t){.kernel = 0});
    } else if (__builtin_expect(site_check_on(), 0)) {
        site_check(id, name);
    }
    z.kernel = id;
    z.start_ns = kt__now_zone_begin();
    return z;
}

kt_zone_t kt_zone_begin(kt_kernel_id_t *site_cache, const char *name)
{
    return zone_begin(site_cache, name, KT_BACKEND_CPU);
}

kt_zone_t kt__host_api_begin(kt_kernel_id_t *site_cache, const char *api)
{
    return zone_begin(site_cache, api, KT_BACKEND_HOST_API);
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
