/* cl_internal.h — internal: the OpenCL backend's loader table, per-device clock state and environment. */
#ifndef KT_CL_INTERNAL_H
#define KT_CL_INTERNAL_H

#include <ktiming/cl.h>
#include <ktiming/clock_model.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/* The loaded entry points (valid after kt_cl_load() returned 0). */
extern kt_cl_api_t kt__cl;

/* Read an environment value as milliseconds -> ns, with a default. */
uint64_t kt__cl_timeout_ns(void);

/* Remember a failing cl_int for kt_cl_last_error (cl_error.c). */
void kt__cl_note_error(cl_int rc);

/* A device and what is known about its profiling clock. Created on first use, kept until exit. */
typedef struct kt__cl_dev_t {
    cl_device_id id;               /* the device */
    cl_platform_id platform;       /* its platform */
    char key[KT_DEVICE_KEY_MAX];   /* its identity's key (kt_device_register): entries and queues are keyed by it */
    char model[128];               /* CL_DEVICE_NAME (verbose lines, kt_cl_stats) */
    int version_major;             /* from CL_DEVICE_VERSION "OpenCL M.m ..." */
    int version_minor;
    uint64_t resolution_ns;        /* CL_DEVICE_PROFILING_TIMER_RESOLUTION */
    uint64_t platform_timer_res;   /* CL_PLATFORM_HOST_TIMER_RESOLUTION (0 when absent / 0) */
    int use_host_timer;            /* clGetDeviceAndHostTimer allowed (version >= 2.1 and resolution != 0) */
    kt_clock_domain_t domain;      /* detected time base of the profiling stamps */
    int64_t domain_offset_ns;      /* offset to that domain the detection measured */
    _Atomic int calibrated;        /* detection ran (successfully or not); set last, with release order */
    pthread_mutex_t calib_lock;    /* held through the first calibration (not the registry lock) */
    int calib_error;               /* 0, or the KT_E* detection ended with */
    kt_clock_tracker_t *tracker;   /* device-epoch clocks only: samples + periodically refitted model */
    cl_context calib_context;      /* private context for marker reads (NULL when the host timer is used) */
    cl_command_queue calib_queue;  /* private profiling queue for marker reads */
    struct kt__cl_dev_t *next;     /* registry list */
} kt__cl_dev_t;

/* Find or create the device entry and calibrate it once (blocking, bounded; under the device's own lock, never
 * the registry's). Never NULL unless out of memory. */
kt__cl_dev_t *kt__cl_dev_get(cl_device_id id);
/* kt_cl_prepare: lists the device (not calibrated yet) for the collector's kt__cl_dev_calibrate_pending, which
 * calibrates every listed device not calibrated yet; 0 or KT_ENOMEM. */
int kt__cl_dev_prepare(cl_device_id id);
void kt__cl_dev_calibrate_pending(void);
int kt__cl_dev_any_pending(void); /* seq_cst: read after the collector announces it sleeps */
/* fork, in the child: the registry's locks as if no other thread had held them (none runs there). */
void kt__cl_dev_fork_child(void);
/* Map a device profiling stamp to the host timeline. 0 on success; uncertainty in ns. Never blocks: a
 * device-epoch model is refreshed here only when reads are clGetDeviceAndHostTimer; marker reads wait for the
 * device, so those refreshes happen in kt__cl_dev_refresh (attach, flush). */
int kt__cl_dev_map(kt__cl_dev_t *dev, uint64_t device_ns, uint64_t *host_ns, uint64_t *uncertainty_ns);
/* Refresh a device-epoch model if due, where blocking is allowed (flush, attach). */
void kt__cl_dev_refresh(kt__cl_dev_t *dev);
/* Fill a kt_device_info_t from the entry. */
void kt__cl_dev_describe(kt__cl_dev_t *dev, kt_device_info_t *info);

#endif
