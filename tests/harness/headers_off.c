/* headers_off.c — built without KTIMING_ENABLE: the harness and stats headers compile to no-ops returning
 * KT_EDISABLED, so measurement code keeps compiling when ktiming is switched off. */
#include <ktiming/harness.h>
#include <ktiming/stats.h>

#include <string.h>

/* Returns 0 when every compiled-out call behaves as documented, else the number of the failed check. */
int headers_off_check(void)
{
    kt_harness_desc_t d;
    memset(&d, 0, sizeof d);
    kt_harness_result_t r;
    memset(&r, 0xff, sizeof r);
    if (kt_harness_run(&d, &r) != KT_EDISABLED) return 1;
    if (r.samples != NULL || r.sample_count != 0) return 2;
    kt_harness_result_free(&r);
    if (kt_harness_cache_size() != 0) return 3;
    kt_sample_stats_t st;
    const uint64_t v[3] = {1, 2, 3};
    if (kt_sample_stats(v, 3, &st) != KT_EDISABLED) return 4;
    if (kt_median_ci_rank(100, 0.95) != 0) return 5;
    return 0;
}
