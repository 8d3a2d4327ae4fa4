/* compile_out_tu.c — user code using every KT_* macro and API call, built twice for core_compile_out: without
 * KTIMING_ENABLE (must leave no trace) and with KT_TEST_STRIP (the instrumentation removed by hand). */
#include <ktiming.h>

#ifdef KT_TEST_STRIP
#define KT_I(...)
#define KT_TU(name) name##_plain
#else
#define KT_I(...) __VA_ARGS__
#define KT_TU(name) name##_off
#endif

/* Doubles rows [y0, y1) of a width-wide image. */
static void double_rows(uint32_t y0, uint32_t y1, uint32_t width, void *user)
{
    float *img = user;
    for (uint32_t y = y0; y < y1; y++)
        for (uint32_t x = 0; x < width; x++)
            img[y * width + x] *= 2.0f;
}

/* Sums v, timing it every way ktiming offers; returns the sum (or a negative code on a ktiming failure). */
double KT_TU(compile_out_work)(float *img, uint32_t width, uint32_t height)
{
    KT_I(kt_desc_t desc = {0, 0, 0, 0};)
    KT_I(desc.span_capacity = KT_SPANS_DEFAULT;)
    KT_I(int rc = kt_init(&desc);)
    KT_I(if (rc != 0 && rc != KT_ESTATE) return (double)rc;)
    KT_I(kt_enable();)
    KT_I(if (!kt_is_enabled()) kt_disable();)

    KT_I(kt_cpu_timer_t timer;)
    KT_I(kt_cpu_timer_start(&timer);)
    KT_I(KT_CPU_BEGIN(zone, "sum");)
    double sum = 0;
    for (uint32_t i = 0; i < width * height; i++)
        sum += img[i];
    KT_I(KT_CPU_END(zone);)
    KT_I(kt_cpu_timer_stop(&timer);)
    KT_I(if (kt_cpu_timer_elapsed_ms(&timer) > 1e9) return -1.0;)

    KT_I(uint64_t t0 = kt_now_ns();)
    KT_I(if (kt_cpu_dispatch_2d("double", width, height, double_rows, img) != 0) return -2.0;)
#ifdef KT_TEST_STRIP /* what the compiled-out kt_cpu_dispatch_2d still does: run every row */
    kt_cpu_rows_cb rows = double_rows;
    if (rows && width && height)
        rows(0, height, width, img);
#endif
    KT_I(uint64_t t1 = kt_now_ns();)
    KT_I(KT_RECORD("double_host", KT_BACKEND_CPU, t1 - t0);)
    KT_I(kt_record("double_named", KT_BACKEND_CPU, t1 - t0);)
    KT_I(static kt_kernel_id_t site;)

    KT_I(kt_kernel_id_t id = kt_kernel_intern("gpu", KT_BACKEND_OPENCL, "dev");)
    KT_I(uint32_t queue = kt_queue_register(KT_BACKEND_OPENCL, "dev", "q0");)
    KT_I(kt_dispatch_t d = {id, queue, kt_thread_ordinal(), KT_SPAN_DEVICE, 10, 0, 0, 0, t0, t1, 0, 0, {0, 0, {0, 0, 0}, {0, 0, 0}}};)
    KT_I(kt_record_dispatch(&d);)
    KT_I(kt_record_dispatch(&(kt_dispatch_t){.kernel = id, .duration_ns = 5});)
    KT_I(kt_record_error(id, NULL);)
    KT_I(kt_record_drop(id, KT_DROP_UNSPECIFIED);)
    KT_I(kt_record_drop(id, KT_DROP_RING_FULL);)
    KT_I(kt_record_error(id, "CL_INVALID_VALUE");)
    KT_I(kt_device_info_t info = {.backend = KT_BACKEND_OPENCL, .name = "dev", .clock_domain = "unknown"};)
    KT_I(kt_device_publish(&info);)
    KT_I(kt_zone_t z = kt_zone_begin(&site, "manual");)
    KT_I(kt_zone_end(&z);)

    KT_I(if (kt_clock_resolution_ns() > 1000000000u || kt_clock_read_cost_ns() > 1e9) return -3.0;)
    KT_I(if (kt_cpu_threads() > 100000) return -4.0;)
    KT_I(kt_flush();)
    KT_I(kt_snapshot_t *snap = kt_snapshot();)
    KT_I(if (snap) {
        const kt_kernel_timing_t *t = kt_snapshot_find(snap, "sum", KT_BACKEND_CPU, NULL);
        if (t && (t->mean_ns < 0 || t->min_ns > t->max_ns))
            sum = -5.0;
        if (kt_report_print(stdout, snap, KT_FORMAT_TEXT, NULL) == KT_EDISABLED ||
            kt_report_write("/dev/null", snap, KT_FORMAT_JSON, NULL) == KT_EDISABLED)
            sum = -6.0;
        kt_snapshot_free(snap);
    })
    KT_I(if (rc < 0 && (kt_strerror(rc)[0] == 0 || kt_backend_name(KT_BACKEND_CPU)[0] == 0 ||
                        kt_version()[0] == 0)) return -7.0;)
    KT_I(kt_reset();)
    KT_I(kt_shutdown();)
    return sum;
}
