/* devices_opencl.c — `ktiming devices` for OpenCL: every platform and device with its profiling clock (the
 * time base detected, how it is read, resolution, error bound). */
#include "cli.h"

#include <ktiming/cl.h>

#include <string.h>

static const char *device_type(cl_device_type t)
{
    if (t & CL_DEVICE_TYPE_GPU)
        return "GPU";
    if (t & CL_DEVICE_TYPE_CPU)
        return "CPU";
    if (t & CL_DEVICE_TYPE_ACCELERATOR)
        return "accelerator";
    return "other";
}

static void print_device(FILE *out, const kt_cl_api_t *cl, cl_device_id id)
{
    char name[128] = {0}, version[128] = {0}, driver[64] = {0};
    cl_device_type type = 0;
    cl->clGetDeviceInfo(id, CL_DEVICE_NAME, sizeof name - 1, name, NULL);
    cl->clGetDeviceInfo(id, CL_DEVICE_VERSION, sizeof version - 1, version, NULL);
    cl->clGetDeviceInfo(id, CL_DRIVER_VERSION, sizeof driver - 1, driver, NULL);
    cl->clGetDeviceInfo(id, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    kt_cl_device_info_t info;
    memset(&info, 0, sizeof info);
    int rc = kt_cl_device_info(id, &info);
    const kt_device_info_t *c = &info.clock;
    /* the label `ktiming run` reports use (identical devices apart: "pthread-cpu #0", "#1"): the snapshot's, every
     * device having been published (ktcli_devices_opencl) */
    kt_snapshot_t *snap = kt_snapshot();
    const kt_device_info_t *rec = snap && c->key[0] ? kt_snapshot_device(snap, KT_BACKEND_OPENCL, c->key) : NULL;
    fprintf(out, "  device  %s  (%s, %s, driver %s)\n", rec ? rec->name : c->name[0] ? c->name : name,
            device_type(type), version, driver);
    kt_snapshot_free(snap);
    fprintf(out, "    profiling timer resolution %llu ns; host timer (CL_PLATFORM_HOST_TIMER_RESOLUTION) %llu ns\n",
            (unsigned long long)c->resolution_ns, (unsigned long long)info.host_timer_resolution_ns);
    fprintf(out, "    clock reads: %s\n",
            info.uses_host_timer ? "clGetDeviceAndHostTimer"
                                 : "marker END stamps bracketed by host reads (clGetDeviceAndHostTimer not used: "
                                   "needs device >= 2.1 and a non-zero host timer resolution)");
    if (rc < 0) {
        fprintf(out, "    clock: time base not detected (%s)\n", kt_strerror(rc));
        return;
    }
    if (!strcmp(c->clock_domain, "device"))
        fprintf(out, "    clock: own epoch, fitted model -> CLOCK_MONOTONIC_RAW, error bound %llu ns, drift %+.3f ppm, "
                     "%u samples\n",
                (unsigned long long)c->error_bound_ns, c->drift_ppm, c->model_samples);
    else
        fprintf(out, "    clock: stamps follow %s (measured offset %+lld ns), mapped to CLOCK_MONOTONIC_RAW with error "
                     "bound %llu ns\n",
                c->clock_domain, (long long)info.domain_offset_ns, (unsigned long long)c->error_bound_ns);
}

int ktcli_devices_opencl(FILE *out)
{
    const kt_cl_api_t *cl = NULL;
    int rc = kt_cl_load(&cl);
    if (rc < 0)
        return rc;
    cl_platform_id platforms[16];
    cl_uint np = 0;
    if (cl->clGetPlatformIDs(16, platforms, &np) != CL_SUCCESS || np == 0) {
        fprintf(out, "OpenCL: loader present, no platform\n");
        return 0;
    }
    for (cl_uint p = 0; p < np && p < 16; p++) { /* every device published first: labels are unique among all */
        cl_device_id ids[16];
        cl_uint nd = 0;
        kt_cl_device_info_t info;
        if (cl->clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 16, ids, &nd) == CL_SUCCESS)
            for (cl_uint i = 0; i < nd && i < 16; i++)
                kt_cl_device_info(ids[i], &info);
    }
    int devices = 0;
    for (cl_uint p = 0; p < np && p < 16; p++) {
        char pname[128] = {0}, pver[128] = {0};
        cl->clGetPlatformInfo(platforms[p], CL_PLATFORM_NAME, sizeof pname - 1, pname, NULL);
        cl->clGetPlatformInfo(platforms[p], CL_PLATFORM_VERSION, sizeof pver - 1, pver, NULL);
        fprintf(out, "OpenCL  platform %s  (%s)\n", pname, pver);
        cl_device_id ids[16];
        cl_uint nd = 0;
        if (cl->clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 16, ids, &nd) != CL_SUCCESS)
            nd = 0;
        for (cl_uint i = 0; i < nd && i < 16; i++, devices++)
            print_device(out, cl, ids[i]);
        if (!nd)
            fprintf(out, "  (no devices)\n");
    }
    return devices;
}
