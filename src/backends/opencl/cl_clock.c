/* cl_clock.c — per-device profiling clocks: detect their time base, map stamps to the host timeline. */
#include "backends/opencl/cl_internal.h"

#include "core/service.h"

#include <CL/cl_ext.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REFRESH_ERROR_NS 50000.0          /* a device-epoch model is refreshed once its bound passes 50 us */
#define REFRESH_INTERVAL_NS 10000000000ull /* ... or its newest sample is 10 s old */
#define DRIFT_PRIOR_PPM 500.0              /* any device oscillator is closer than this to the host's rate */

static pthread_mutex_t g_devs_lock = PTHREAD_MUTEX_INITIALIZER;
static kt__cl_dev_t *g_devs; /* registry, kept until exit */

/* ---------------------------------------------------------------------------------------------------
 * Reading the device clock
 * ------------------------------------------------------------------------------------------------- */

/* One device timestamp (ns) from clGetDeviceAndHostTimer, 0 on failure. */
static uint64_t read_host_timer(void *user)
{
    kt__cl_dev_t *dev = user;
    cl_ulong d = 0, h = 0;
    if (kt__cl.clGetDeviceAndHostTimer(dev->id, &d, &h) != CL_SUCCESS)
        return 0;
    return (uint64_t)d;
}

/* One device timestamp (ns): the END stamp of a marker on the private profiling queue, waited on inside the
 * caller's host bracket. 0 on failure. */
static uint64_t read_marker(void *user)
{
    kt__cl_dev_t *dev = user;
    cl_event ev = NULL;
    cl_int rc;
    if (kt__cl.clEnqueueMarkerWithWaitList && (dev->version_major > 1 || dev->version_minor >= 2))
        rc = kt__cl.clEnqueueMarkerWithWaitList(dev->calib_queue, 0, NULL, &ev);
    else if (kt__cl.clEnqueueMarker)
        rc = kt__cl.clEnqueueMarker(dev->calib_queue, &ev);
    else
        return 0;
    if (rc != CL_SUCCESS || !ev)
        return 0;
    uint64_t t = 0;
    if (kt__cl.clWaitForEvents(1, &ev) == CL_SUCCESS) {
        static const cl_profiling_info kOrder[] = {CL_PROFILING_COMMAND_END, CL_PROFILING_COMMAND_START,
                                                   CL_PROFILING_COMMAND_QUEUED};
        for (size_t i = 0; i < 3 && !t; i++) {
            cl_ulong v = 0;
            if (kt__cl.clGetEventProfilingInfo(ev, kOrder[i], sizeof v, &v, NULL) == CL_SUCCESS)
                t = (uint64_t)v;
        }
    }
    kt__cl.clReleaseEvent(ev);
    return t;
}

static kt_device_clock_read_cb reader(const kt__cl_dev_t *dev)
{
    return dev->use_host_timer ? read_host_timer : read_marker;
}

/* ---------------------------------------------------------------------------------------------------
 * Calibration
 * ------------------------------------------------------------------------------------------------- */

static int open_marker_queue(kt__cl_dev_t *dev)
{
    cl_int err = CL_SUCCESS;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)dev->platform, 0};
    dev->calib_context = kt__cl.clCreateContext(props, 1, &dev->id, NULL, NULL, &err);
    if (!dev->calib_context || err != CL_SUCCESS) {
        dev->calib_context = NULL;
        return KT_EBACKEND;
    }
    if (dev->version_major >= 2 && kt__cl.clCreateCommandQueueWithProperties) {
        cl_queue_properties qp[] = {CL_QUEUE_PROPERTIES, CL_QUEUE_PROFILING_ENABLE, 0};
        dev->calib_queue = kt__cl.clCreateCommandQueueWithProperties(dev->calib_context, dev->id, qp, &err);
    } else if (kt__cl.clCreateCommandQueue) {
        dev->calib_queue = kt__cl.clCreateCommandQueue(dev->calib_context, dev->id, CL_QUEUE_PROFILING_ENABLE,
                                                      &err);
    }
    if (!dev->calib_queue || err != CL_SUCCESS) {
        dev->calib_queue = NULL;
        kt__cl.clReleaseContext(dev->calib_context);
        dev->calib_context = NULL;
        return KT_EBACKEND;
    }
    return 0;
}

/* Start tracking a device-epoch clock against CLOCK_MONOTONIC_RAW (takes the first batch of reads). Bracket
 * widths vary with the load (marker round trips), so samples are weighted by width and outliers resisted. */
static int track_clock(kt__cl_dev_t *dev)
{
    kt_clock_tracker_desc_t d;
    memset(&d, 0, sizeof d);
    d.read_device = reader(dev);
    d.user = dev;
    d.refit_interval_ns = REFRESH_INTERVAL_NS;
    d.max_error_ns = REFRESH_ERROR_NS;
    /* The first batch spans a few ms: too short to measure drift, so it is held at 0 with a bound growing at
     * the prior until the ring spans long enough to measure it. */
    d.drift_prior_ppm = DRIFT_PRIOR_PPM;
    int rc = kt_clock_tracker_create(KT_FIT_ROBUST, KT_DOMAIN_MONOTONIC_RAW, &d, &dev->tracker);
    if (rc < 0)
        return rc;
    rc = kt_clock_tracker_poll(dev->tracker, kt_now_ns());
    return rc < 0 ? rc : 0;
}

/* Publishes the device's clock facts, the bound and fit taken from its model (kt__device_publish_model). */
static void publish(kt__cl_dev_t *dev)
{
    kt_device_info_t info;
    kt__cl_dev_describe(dev, &info);
    kt_clock_model_t m;
    const kt_clock_model_t *model = NULL;
    if (dev->domain == KT_DOMAIN_DEVICE && dev->tracker && kt_clock_tracker_model(dev->tracker, &m) == 0)
        model = &m;
    else if ((dev->domain == KT_DOMAIN_MONOTONIC || dev->domain == KT_DOMAIN_REALTIME) &&
             kt_clock_domain_model(dev->domain, &m) == 0)
        model = &m;
    kt__device_publish_model(&info, model, kt_now_ns());
}

/* Whether the device lists an extension. */
static int has_extension(cl_device_id id, const char *ext)
{
    size_t len = 0;
    if (kt__cl.clGetDeviceInfo(id, CL_DEVICE_EXTENSIONS, 0, NULL, &len) != CL_SUCCESS || len == 0)
        return 0;
    char *list = malloc(len + 1);
    if (!list)
        return 0;
    int found = 0;
    if (kt__cl.clGetDeviceInfo(id, CL_DEVICE_EXTENSIONS, len, list, NULL) == CL_SUCCESS) {
        list[len] = '\0';
        size_t n = strlen(ext);
        for (const char *p = strstr(list, ext); p && !found; p = strstr(p + 1, ext))
            found = (p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0');
    }
    free(list);
    return found;
}

/* Sub-devices ktiming has met, per parent in the order it met them: a sub-device's partition index. OpenCL does
 * not say which part of its parent a sub-device is, so this is the order of first use (the same sub-device keeps
 * its index for the process's life). */
typedef struct sub_seen_t {
    cl_device_id parent, child;
    unsigned index;
    struct sub_seen_t *next;
} sub_seen_t;
static pthread_mutex_t g_subs_lock = PTHREAD_MUTEX_INITIALIZER;
static sub_seen_t *g_subs;

static unsigned sub_index(cl_device_id parent, cl_device_id child)
{
    pthread_mutex_lock(&g_subs_lock);
    unsigned n = 0;
    for (sub_seen_t *s = g_subs; s; s = s->next) {
        if (s->parent != parent)
            continue;
        if (s->child == child) {
            n = s->index;
            goto out;
        }
        n++;
    }
    sub_seen_t *fresh = malloc(sizeof *fresh);
    if (fresh) { /* without memory the index is still unique until the next sub-device of this parent */
        *fresh = (sub_seen_t){parent, child, n, g_subs};
        g_subs = fresh;
    }
out:
    pthread_mutex_unlock(&g_subs_lock);
    return n;
}

/* 16 bytes as 8-4-4-4-12 lowercase hex. */
static void uuid_text(const cl_uchar u[CL_UUID_SIZE_KHR], char *out, size_t cap)
{
    snprintf(out, cap, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2], u[3],
             u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}

/* The device's index over all platforms, in clGetPlatformIDs x clGetDeviceIDs(CL_DEVICE_TYPE_ALL) order; -1 when it
 * is not listed there. */
static int32_t device_ordinal(cl_device_id id)
{
    cl_uint np = 0;
    if (kt__cl.clGetPlatformIDs(0, NULL, &np) != CL_SUCCESS || np == 0)
        return -1;
    cl_platform_id *ps = calloc(np, sizeof *ps);
    if (!ps || kt__cl.clGetPlatformIDs(np, ps, NULL) != CL_SUCCESS) {
        free(ps);
        return -1;
    }
    int32_t ordinal = -1, seen = 0;
    for (cl_uint i = 0; i < np && ordinal < 0; i++) {
        cl_uint nd = 0;
        if (kt__cl.clGetDeviceIDs(ps[i], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) != CL_SUCCESS || nd == 0)
            continue;
        cl_device_id *ids = calloc(nd, sizeof *ids);
        if (ids && kt__cl.clGetDeviceIDs(ps[i], CL_DEVICE_TYPE_ALL, nd, ids, NULL) == CL_SUCCESS)
            for (cl_uint k = 0; k < nd && ordinal < 0; k++, seen++)
                if (ids[k] == id)
                    ordinal = seen;
        free(ids);
    }
    free(ps);
    return ordinal;
}

/* A root device's identity: model, vendor, platform name, ordinal, and the stable ids its extensions give. */
static void root_identity(cl_device_id dev, kt_device_id_t *id)
{
    kt__cl.clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof id->model - 1, id->model, NULL);
    if (!id->model[0])
        snprintf(id->model, sizeof id->model, "opencl device %p", (void *)dev);
    kt__cl.clGetDeviceInfo(dev, CL_DEVICE_VENDOR, sizeof id->vendor - 1, id->vendor, NULL);
    cl_platform_id platform = NULL;
    if (kt__cl.clGetDeviceInfo(dev, CL_DEVICE_PLATFORM, sizeof platform, &platform, NULL) == CL_SUCCESS && platform)
        kt__cl.clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof id->platform - 1, id->platform, NULL);
    cl_uchar uuid[CL_UUID_SIZE_KHR];
    if (has_extension(dev, "cl_khr_device_uuid")) {
        if (kt__cl.clGetDeviceInfo(dev, CL_DEVICE_UUID_KHR, sizeof uuid, uuid, NULL) == CL_SUCCESS)
            uuid_text(uuid, id->uuid, sizeof id->uuid);
        if (kt__cl.clGetDeviceInfo(dev, CL_DRIVER_UUID_KHR, sizeof uuid, uuid, NULL) == CL_SUCCESS)
            uuid_text(uuid, id->driver_uuid, sizeof id->driver_uuid);
    }
    cl_device_pci_bus_info_khr pci;
    if (has_extension(dev, "cl_khr_pci_bus_info") &&
        kt__cl.clGetDeviceInfo(dev, CL_DEVICE_PCI_BUS_INFO_KHR, sizeof pci, &pci, NULL) == CL_SUCCESS)
        snprintf(id->pci, sizeof id->pci, "%04x:%02x:%02x.%x", pci.pci_domain, pci.pci_bus, pci.pci_device,
                 pci.pci_function);
    id->ordinal = device_ordinal(dev);
}

/* Devices are told apart by identity, not by name (issue 34, docs/devices.md): each is registered with the core
 * (kt_device_register) and keyed by what it returns: its UUID (cl_khr_device_uuid), else its PCI address
 * (cl_khr_pci_bus_info), else its ordinal over all platforms, with its platform's name; a sub-device
 * (clCreateSubDevices) by its parent's key and its partition index, the parent registered first. key gets the
 * device key (the model when the core cannot register it), model CL_DEVICE_NAME. */
static void device_identity(cl_device_id dev, char *key, size_t cap, char *model, size_t mcap)
{
    kt_device_id_t id;
    memset(&id, 0, sizeof id);
    cl_device_id parent = NULL;
    if (kt__cl.clGetDeviceInfo(dev, CL_DEVICE_PARENT_DEVICE, sizeof parent, &parent, NULL) == CL_SUCCESS && parent &&
        parent != dev) {
        char parent_model[128];
        device_identity(parent, id.parent, sizeof id.parent, parent_model, sizeof parent_model);
        id.partition = (int32_t)sub_index(parent, dev);
        id.ordinal = -1;
        kt__cl.clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof id.model - 1, id.model, NULL);
        if (!id.model[0])
            snprintf(id.model, sizeof id.model, "%s", parent_model);
        kt__cl.clGetDeviceInfo(dev, CL_DEVICE_VENDOR, sizeof id.vendor - 1, id.vendor, NULL);
    } else {
        root_identity(dev, &id);
    }
    const char *k = kt_device_register(KT_BACKEND_OPENCL, &id);
    snprintf(key, cap, "%s", k ? k : id.model);
    snprintf(model, mcap, "%s", id.model);
}

static void query_facts(kt__cl_dev_t *dev)
{
    char ver[256] = {0};
    device_identity(dev->id, dev->key, sizeof dev->key, dev->model, sizeof dev->model);
    kt__cl.clGetDeviceInfo(dev->id, CL_DEVICE_VERSION, sizeof ver - 1, ver, NULL);
    if (sscanf(ver, "OpenCL %d.%d", &dev->version_major, &dev->version_minor) != 2) {
        dev->version_major = 1;
        dev->version_minor = 0;
    }
    size_t res = 0;
    if (kt__cl.clGetDeviceInfo(dev->id, CL_DEVICE_PROFILING_TIMER_RESOLUTION, sizeof res, &res, NULL) == 0)
        dev->resolution_ns = res;
    kt__cl.clGetDeviceInfo(dev->id, CL_DEVICE_PLATFORM, sizeof dev->platform, &dev->platform, NULL);
    int v21 = dev->version_major > 2 || (dev->version_major == 2 && dev->version_minor >= 1);
    if (v21 && dev->platform) {
        cl_ulong pres = 0;
        if (kt__cl.clGetPlatformInfo(dev->platform, CL_PLATFORM_HOST_TIMER_RESOLUTION, sizeof pres, &pres,
                                     NULL) == CL_SUCCESS)
            dev->platform_timer_res = pres;
    }
    /* Only where the timer is advertised: on some 1.2 stacks the call through the loader never returns. */
    dev->use_host_timer = v21 && dev->platform_timer_res != 0 && kt__cl.clGetDeviceAndHostTimer != NULL &&
                          read_host_timer(dev) != 0;
}

static void calibrate(kt__cl_dev_t *dev)
{
    query_facts(dev);
    int rc = 0;
    if (!dev->use_host_timer)
        rc = open_marker_queue(dev);
    if (rc == 0)
        rc = kt_clock_detect_domain(reader(dev), dev, 0, &dev->domain, &dev->domain_offset_ns);
    if (rc == 0 && dev->domain == KT_DOMAIN_DEVICE)
        rc = track_clock(dev);
    if (rc < 0)
        dev->domain = KT_DOMAIN_UNKNOWN;
    if (dev->domain != KT_DOMAIN_DEVICE && dev->calib_queue) { /* only a device-epoch model refits */
        kt__cl.clReleaseCommandQueue(dev->calib_queue);
        kt__cl.clReleaseContext(dev->calib_context);
        dev->calib_queue = NULL;
        dev->calib_context = NULL;
    }
    dev->calib_error = rc;
    publish(dev);
    atomic_store_explicit(&dev->calibrated, 1, memory_order_release);
}

/* The registry's entry for id, made (not calibrated) if it is new; NULL without memory. */
static kt__cl_dev_t *dev_entry(cl_device_id id)
{
    pthread_mutex_lock(&g_devs_lock);
    kt__cl_dev_t *dev = g_devs;
    while (dev && dev->id != id)
        dev = dev->next;
    if (!dev) {
        dev = calloc(1, sizeof *dev);
        if (dev) {
            dev->id = id;
            dev->domain = KT_DOMAIN_UNKNOWN;
            pthread_mutex_init(&dev->calib_lock, NULL);
            dev->next = g_devs;
            g_devs = dev;
        }
    }
    pthread_mutex_unlock(&g_devs_lock);
    return dev;
}

/* Calibration (driver calls, a few markers waited on) runs under the device's own lock, not the registry's:
 * other devices' first uses go on meanwhile; users of this device wait for its clock facts. */
static void ensure_calibrated(kt__cl_dev_t *dev)
{
    if (!atomic_load_explicit(&dev->calibrated, memory_order_acquire)) {
        pthread_mutex_lock(&dev->calib_lock);
        if (!atomic_load_explicit(&dev->calibrated, memory_order_relaxed))
            calibrate(dev);
        pthread_mutex_unlock(&dev->calib_lock);
    }
}

kt__cl_dev_t *kt__cl_dev_get(cl_device_id id)
{
    kt__cl_dev_t *dev = dev_entry(id);
    if (dev)
        ensure_calibrated(dev);
    return dev;
}

static _Atomic int g_devs_pending; /* kt__cl_dev_prepare listed a device the collector has not calibrated */

int kt__cl_dev_prepare(cl_device_id id)
{
    kt__cl_dev_t *dev = dev_entry(id);
    if (!dev)
        return KT_ENOMEM;
    if (!atomic_load_explicit(&dev->calibrated, memory_order_acquire))
        atomic_store(&g_devs_pending, 1);
    return 0;
}

int kt__cl_dev_any_pending(void) { return atomic_load(&g_devs_pending); }

void kt__cl_dev_calibrate_pending(void)
{
    if (!atomic_load_explicit(&g_devs_pending, memory_order_relaxed) || !atomic_exchange(&g_devs_pending, 0))
        return;
    pthread_mutex_lock(&g_devs_lock);
    kt__cl_dev_t *dev = g_devs; /* entries are never removed and are pushed at the head: the rest is fixed */
    pthread_mutex_unlock(&g_devs_lock);
    for (; dev; dev = dev->next)
        ensure_calibrated(dev);
}

void kt__cl_dev_fork_child(void)
{
    pthread_mutex_init(&g_devs_lock, NULL);
    pthread_mutex_init(&g_subs_lock, NULL);
    for (kt__cl_dev_t *dev = g_devs; dev; dev = dev->next)
        if (!atomic_load(&dev->calibrated)) /* another thread of the parent was calibrating it: again here */
            pthread_mutex_init(&dev->calib_lock, NULL);
}

/* ---------------------------------------------------------------------------------------------------
 * Mapping
 * ------------------------------------------------------------------------------------------------- */

int kt__cl_dev_map(kt__cl_dev_t *dev, uint64_t device_ns, uint64_t *host_ns, uint64_t *uncertainty_ns)
{
    *host_ns = 0;
    *uncertainty_ns = 0;
    if (!device_ns)
        return KT_EINVAL;
    switch (dev->domain) {
    case KT_DOMAIN_MONOTONIC_RAW: /* the timeline's own clock */
        *host_ns = device_ns;
        *uncertainty_ns = dev->resolution_ns > 1 ? dev->resolution_ns : 0;
        return 0;
    case KT_DOMAIN_MONOTONIC:
    case KT_DOMAIN_REALTIME:
        return kt_clock_domain_convert(device_ns, dev->domain, KT_DOMAIN_MONOTONIC_RAW, host_ns, uncertainty_ns);
    case KT_DOMAIN_DEVICE:
        if (!dev->tracker)
            return KT_ESTATE;
        if (dev->use_host_timer) /* non-blocking reads: keep the model fresh from here */
            kt_clock_tracker_poll(dev->tracker, kt_now_ns());
        return kt_clock_tracker_to_host(dev->tracker, device_ns, host_ns, uncertainty_ns);
    default:
        return KT_ESTATE;
    }
}

void kt__cl_dev_refresh(kt__cl_dev_t *dev)
{
    if (dev->domain != KT_DOMAIN_DEVICE || !dev->tracker)
        return;
    if (kt_clock_tracker_poll(dev->tracker, kt_now_ns()) == 1)
        publish(dev);
}

void kt__cl_dev_describe(kt__cl_dev_t *dev, kt_device_info_t *info)
{
    memset(info, 0, sizeof *info);
    info->backend = KT_BACKEND_OPENCL;
    snprintf(info->name, sizeof info->name, "%s", dev->model);
    snprintf(info->key, sizeof info->key, "%s", dev->key);
    snprintf(info->clock_domain, sizeof info->clock_domain, "%s", kt_clock_domain_name(dev->domain));
    info->resolution_ns = dev->resolution_ns;
    info->frequency_hz = 1000000000ull; /* OpenCL profiling stamps are specified in ns */
    info->valid_bits = 64;
    uint64_t now = kt_now_ns();
    kt_clock_model_t m;
    if (dev->domain == KT_DOMAIN_DEVICE && dev->tracker && kt_clock_tracker_model(dev->tracker, &m) == 0) {
        info->error_bound_ns = (uint64_t)(kt_clock_error_at(&m, now) + 0.5);
        info->drift_ppm = m.drift_ppm;
        info->model_samples = m.inliers;
    } else if (dev->domain == KT_DOMAIN_MONOTONIC || dev->domain == KT_DOMAIN_REALTIME) {
        uint64_t host = 0, unc = 0;
        if (kt_clock_domain_convert(kt_clock_now(dev->domain), dev->domain, KT_DOMAIN_MONOTONIC_RAW, &host,
                                    &unc) == 0)
            info->error_bound_ns = unc;
        if (kt_clock_domain_model(dev->domain, &m) == 0) {
            info->drift_ppm = m.drift_ppm;
            info->model_samples = m.inliers;
        }
    }
}

int kt_cl_device_info(cl_device_id device, kt_cl_device_info_t *info)
{
    if (!device || !info)
        return KT_EINVAL;
    int rc = kt_cl_load(NULL);
    if (rc < 0)
        return rc;
    kt__cl_dev_t *dev = kt__cl_dev_get(device);
    if (!dev)
        return KT_ENOMEM;
    kt__cl_dev_refresh(dev);
    memset(info, 0, sizeof *info);
    kt__cl_dev_describe(dev, &info->clock);
    info->version_major = dev->version_major;
    info->version_minor = dev->version_minor;
    info->host_timer_resolution_ns = dev->platform_timer_res;
    info->uses_host_timer = dev->use_host_timer;
    info->domain_offset_ns = dev->domain_offset_ns;
    return dev->calib_error;
}
