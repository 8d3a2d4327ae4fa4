/* devices_cuda.c — `ktiming devices` for CUDA: each device with its clock facts (event resolution, %globaltimer
 * granularity and its calibration against the host), or why the driver is unavailable. */
#include "cli.h"

#include <ktiming/clock_model.h>
#include <ktiming/cuda.h>

int ktcli_devices_cuda(FILE *out)
{
    int n = kt_cuda_device_count();
    if (n < 0) {
        /* The reason; `ktiming devices` then adds its "CUDA: unavailable" line. */
        fprintf(out, "CUDA: %s\n", kt_cuda_last_error());
        return n;
    }
    for (int i = 0; i < n; i++) {
        kt_cuda_device_t d;
        int rc = kt_cuda_device_info(i, &d);
        if (rc) {
            fprintf(out, "CUDA device %d: %s\n", i, kt_cuda_last_error());
            continue;
        }
        fprintf(out, "CUDA device %d: %s, compute capability %d.%d, %d SMs, SM clock %.0f MHz, driver %d.%d\n", i,
                d.name, d.cc_major, d.cc_minor, d.sm_count, (double)d.sm_clock_hz / 1e6, d.driver_version / 1000,
                (d.driver_version % 1000) / 10);
        fprintf(out, "  identity: recorded as \"%s\"; PCI %s; UUID %02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
                     "%02x%02x%02x%02x%02x%02x\n",
                d.label, d.pci_bus_id[0] ? d.pci_bus_id : "unknown", d.uuid[0], d.uuid[1], d.uuid[2], d.uuid[3],
                d.uuid[4], d.uuid[5], d.uuid[6], d.uuid[7], d.uuid[8], d.uuid[9], d.uuid[10], d.uuid[11], d.uuid[12],
                d.uuid[13], d.uuid[14], d.uuid[15]);
        fprintf(out, "  events: cuEventElapsedTime, float ms, documented resolution %u ns\n",
                KT_CUDA_EVENT_RESOLUTION_NS);
        struct CUctx_st *ctx = NULL;
        uint64_t res = 0;
        kt_clock_model_t m;
        kt_clock_domain_t dom = KT_DOMAIN_UNKNOWN;
        if (kt_cuda_device_primary(i, &ctx) != 0 || kt_cuda_globaltimer_resolution(ctx, &res) != 0) {
            fprintf(out, "  %%globaltimer: not measured: %s\n", kt_cuda_last_error());
            continue;
        }
        fprintf(out, "  %%globaltimer: ns counter, update granularity %llu ns\n", (unsigned long long)res);
        if (kt_cuda_calibrate(ctx, 64, KT_FIT_WEIGHTED, &m, &dom) != 0) {
            fprintf(out, "  calibration: failed: %s\n", kt_cuda_last_error());
            continue;
        }
        fprintf(out, "  calibration vs CLOCK_MONOTONIC_RAW: error bound %.0f ns, drift %.2f ppm, %u/%u samples, "
                     "follows %s\n",
                m.error_ns, m.drift_ppm, m.inliers, m.samples, kt_clock_domain_name(dom));
    }
    return n;
}
