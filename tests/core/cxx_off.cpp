// cxx_off.cpp — include/ktiming.h compiled as C++ without KTIMING_ENABLE: everything is a no-op, types stay.
#include <ktiming.h>

#if KT_ENABLED
#error "this file must be compiled without KTIMING_ENABLE"
#endif

static void rows(uint32_t y0, uint32_t y1, uint32_t width, void *user)
{
    *static_cast<uint32_t *>(user) += (y1 - y0) * width;
}

// 0 when every compiled-out call behaves as documented.
int cxx_off_run(void)
{
    KT_CPU_BEGIN(z, "off_zone");
    KT_CPU_END(z);
    KT_RECORD("off_record", KT_BACKEND_CPU, 1u);
    kt_record("off", KT_BACKEND_CPU, 1u);
    kt_kernel_id_t id = kt_kernel_intern("off", KT_BACKEND_CPU, nullptr);
    kt_dispatch_t d = {};
    kt_record_dispatch(&d);
    kt_cpu_timer_t t = {};
    kt_cpu_timer_start(&t);
    kt_cpu_timer_stop(&t);
    uint32_t cells = 0;
    int bad = 0;
    bad |= kt_cpu_dispatch_2d("off_rows", 4, 3, rows, &cells) != 0 || cells != 12; // rows still run
    bad |= kt_init(nullptr) != 0;
    bad |= kt_is_enabled() != 0;
    bad |= kt_snapshot() != nullptr;
    bad |= kt_cpu_timer_elapsed_ms(&t) != 0.0;
    bad |= id != 0;
    bad |= kt_report_print(nullptr, nullptr, KT_FORMAT_TEXT, NULL) != KT_EDISABLED;
    return bad;
}
