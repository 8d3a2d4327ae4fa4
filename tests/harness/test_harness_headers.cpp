// test_harness_headers.cpp — the harness, stats and compare headers used from C++ (linkage, no C-only constructs).
#include <ktiming/compare.h>
#include <ktiming/harness.h>
#include <ktiming/stats.h>

#include <cstdio>
#include <cstring>

extern "C" int headers_off_check(void);

int main()
{
    int off = headers_off_check();
    if (off != 0) {
        std::printf("compiled-out check %d failed\n", off);
        return 1;
    }
    const uint64_t v[] = {5, 1, 3};
    kt_sample_stats_t st;
    if (kt_sample_stats(v, 3, &st) != 0 || st.median_ns != 3.0) return 2;
    if (kt_harness_cache_size() == 0) return 3;
    if (std::strcmp(kt_verdict_name(KT_VERDICT_FASTER), "FASTER") != 0) return 4;
    if (std::strcmp(kt_harness_stop_name(KT_HARNESS_STOP_TIMEOUT), "timeout") != 0) return 5;
    std::printf("headers: C++ and compiled-out use OK\n");
    return 0;
}
