/* cmd_devices.c — `ktiming devices`: the host clock domains, then every backend's devices with their clock models. */
#include "cli.h"

#include "core/device_label.h"
#include "export/escape.h"

#include <getopt.h>

#include <ktiming/clock_model.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void devices_usage(FILE *out)
{
    fprintf(out,
            "usage: ktiming devices [--help]\n"
            "\n"
            "Lists the host clocks (resolution, cost of one read, offset and rate of each domain against\n"
            "CLOCK_MONOTONIC_RAW, the ktiming timeline, with their error bounds), the counter host timestamps\n"
            "come from (TSC, CNTVCT_EL0 or clock_gettime; its rate, drift, bound, and why it was chosen; set\n"
            "KTIMING_CLOCK=auto|tsc|monotonic_raw to override), then every backend and device\n"
            "found, with its clock model, error bound, resolution and the time domain its timestamps follow.\n"
            "A backend whose runtime or device is absent is listed as unavailable; that is not an error.\n"
            "Last, every device ktiming registered, by the label reports of `ktiming run` give it (the model and\n"
            "the shortest suffix that tells identical devices apart: \"#ordinal\", PCI address, ...) and what\n"
            "identifies it (UUID, PCI address, or only its enumeration order; docs/devices.md).\n");
}

/* ---------------------------------------------------------------------------------------------------
 * Host clocks
 * ------------------------------------------------------------------------------------------------- */

/* Cost of one kt_clock_now(domain) in ns: the fastest of 5 rounds of 2000 reads. */
static double read_cost_ns(kt_clock_domain_t domain)
{
    double best = INFINITY;
    volatile uint64_t sink = 0;
    for (int round = 0; round < 5; round++) {
        uint64_t t0 = kt_clock_now(KT_DOMAIN_MONOTONIC_RAW);
        for (int i = 0; i < 2000; i++) sink += kt_clock_now(domain);
        uint64_t t1 = kt_clock_now(KT_DOMAIN_MONOTONIC_RAW);
        double per = (double)(t1 - t0) / 2000.0;
        if (per < best) best = per;
    }
    (void)sink;
    return best;
}

static int print_host_clocks(FILE *out)
{
    static const kt_clock_domain_t doms[3] = {KT_DOMAIN_MONOTONIC_RAW, KT_DOMAIN_MONOTONIC, KT_DOMAIN_REALTIME};
    /* let the domain models see 100 ms of history so their rate is measured rather than bounded by the prior */
    for (int i = 0; i < 20; i++) {
        uint64_t t = kt_clock_now(KT_DOMAIN_MONOTONIC_RAW), o;
        kt_clock_domain_convert(t, KT_DOMAIN_MONOTONIC_RAW, KT_DOMAIN_MONOTONIC, &o, NULL);
        kt_clock_domain_convert(t, KT_DOMAIN_MONOTONIC_RAW, KT_DOMAIN_REALTIME, &o, NULL);
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    fprintf(out, "host clocks (ktiming timeline: CLOCK_MONOTONIC_RAW)\n");
    fprintf(out, "  %-20s %10s %10s  %-36s %s\n", "domain", "resolution", "read cost", "offset to RAW (domain - RAW)",
            "rate vs RAW");
    int rc = 0;
    for (int i = 0; i < 3; i++) {
        kt_clock_domain_t d = doms[i];
        char res[32], cost[32], offset[64], rate[64];
        snprintf(res, sizeof(res), "%llu ns", (unsigned long long)kt_clock_domain_resolution_ns(d));
        snprintf(cost, sizeof(cost), "%.0f ns", read_cost_ns(d));
        if (d == KT_DOMAIN_MONOTONIC_RAW) {
            snprintf(offset, sizeof(offset), "0 (the timeline)");
            snprintf(rate, sizeof(rate), "-");
        } else {
            uint64_t raw = kt_clock_now(KT_DOMAIN_MONOTONIC_RAW), t = 0, unc = 0;
            kt_clock_model_t m;
            int e = kt_clock_domain_convert(raw, KT_DOMAIN_MONOTONIC_RAW, d, &t, &unc);
            if (e == 0) e = kt_clock_domain_model(d, &m);
            if (e != 0) {
                snprintf(offset, sizeof(offset), "error (%s)", kt_strerror(e));
                snprintf(rate, sizeof(rate), "-");
                rc = e;
            } else {
                snprintf(offset, sizeof(offset), "%+lld ns +- %llu ns", (long long)(int64_t)(t - raw),
                         (unsigned long long)unc);
                snprintf(rate, sizeof(rate), "%+.3f ppm +- %.3f (%u samples over %.1f ms)", m.drift_ppm,
                         m.drift_bound_ppm, m.samples, (double)(m.fitted_at_ns - m.host_first_ns) / 1e6);
            }
        }
        fprintf(out, "  %-20s %10s %10s  %-36s %s\n", kt_clock_domain_name(d), res, cost, offset, rate);
    }
    kt_host_clock_info_t hc;
    if (kt_host_clock_info(&hc) == 0) {
        /* one line: which clock, and why */
        fprintf(out, "  host clock: %s, because %s\n", hc.counter, hc.reason);
        if (strcmp(hc.counter, "CLOCK_MONOTONIC_RAW") != 0)
            fprintf(out, "  host timestamps: %s at %.6f MHz (nominal %.6f MHz, drift %+.3f ppm +- %.3f), converted to CLOCK_MONOTONIC_RAW "
                    "+- %.0f ns (%u samples over %.1f ms, %llu fits), read cost %.1f ns\n",
                    hc.counter, (double)hc.frequency_hz / 1e6, (double)hc.nominal_hz / 1e6, hc.drift_ppm,
                    hc.drift_bound_ppm, hc.error_bound_ns, hc.model_samples, hc.span_ms, (unsigned long long)hc.fits,
                    kt_clock_read_cost_ns());
    }
    return rc;
}

/* ---------------------------------------------------------------------------------------------------
 * Backends
 * ------------------------------------------------------------------------------------------------- */

/* Every device record the backends registered or published while listing, labelled as a snapshot of `ktiming run`
 * labels them (the same core function over the same kind of records). */
static void print_labels(FILE *out)
{
    kt_snapshot_t *s = kt_snapshot();
    if (!s)
        return;
    size_t shown = 0;
    for (size_t i = 0; i < s->device_count; i++)
        shown += s->devices[i].backend != KT_BACKEND_CPU;
    if (shown) {
        fprintf(out, "\ndevice labels (as `ktiming run` reports name them)\n");
        for (size_t i = 0; i < s->device_count; i++) {
            const kt_device_info_t *d = &s->devices[i];
            if (d->backend == KT_BACKEND_CPU)
                continue;
            char id[KT_DEVICE_KEY_MAX + 96];
            kt__device_id_text(d, id, sizeof id);
            fprintf(out, "  %-7s ", kt_backend_name(d->backend));
            kt__escape_write(out, d->name, KT_ESC_TEXT);
            fputs("  [", out);
            kt__escape_write(out, id, KT_ESC_TEXT);
            fputs("]\n", out);
        }
    }
    kt_snapshot_free(s);
}

/* One backend's listing; 0, or 1 when it failed with something other than "unavailable". */
static int list_backend(FILE *out, const char *name, int (*fn)(FILE *))
{
    fflush(out);
    int rc = fn(out);
    if (rc >= 0) return 0;
    if (rc == KT_EUNAVAILABLE) {
        fprintf(out, "%s: unavailable (%s)\n", name, kt_strerror(rc));
        return 0;
    }
    fprintf(out, "%s: error (%s)\n", name, kt_strerror(rc));
    return 1;
}

int ktcli_cmd_devices(int argc, char **argv)
{
    static const struct option kLong[] = {KTCLI_OPT_HELP, KTCLI_OPT_END};
    int c;
    ktcli_getopt_begin();
    while ((c = getopt_long(argc, argv, ":h", kLong, NULL)) != -1) {
        if (c != 'h')
            return ktcli_getopt_error("devices", c, argc, argv);
        devices_usage(stdout);
        return 0;
    }
    if (optind < argc)
        return ktcli_usage_error("devices", "unexpected argument '%s'", argv[optind]);
    int failed = print_host_clocks(stdout) != 0;
    fprintf(stdout, "\nbackends\n");
    failed |= list_backend(stdout, "OpenCL", ktcli_devices_opencl);
    failed |= list_backend(stdout, "Vulkan", ktcli_devices_vulkan);
    failed |= list_backend(stdout, "CUDA", ktcli_devices_cuda);
    print_labels(stdout);
    return ktcli_stdout_failed("ktiming devices") || failed ? 1 : 0; /* a listing not written is a failure */
}
