/* vk_layer.c — libktiming_vk_layer.so, the Vulkan layer VK_LAYER_KTIMING_timing: times every vkCmdDispatch
 * (and DispatchBase / DispatchIndirect) of an unmodified program with the Vulkan backend's timestamp ring.
 *
 * A layer sees programs that load Vulkan with dlopen and fetch everything through vkGet*ProcAddr, which an
 * LD_PRELOAD hook cannot. `ktiming run` enables it with VK_ADD_LAYER_PATH + VK_INSTANCE_LAYERS.
 *
 * What it does:
 *  - vkCreateDevice: enables VK_KHR/EXT_calibrated_timestamps when the device has it, the program did not, and
 *    it is legal (VK_KHR_get_physical_device_properties2 enabled, or Vulkan 1.1 instance and device), so device
 *    timestamps are placed on the host timeline without submitting anything of ours (otherwise the backend
 *    brackets tiny submissions of its own inside the program's vkQueueSubmit); vkDestroyDevice waits for
 *    the device before the backend frees what the work in flight writes;
 *  - one kt_vk_ctx_t per (device, queue family), created on the first timed dispatch; ktiming's own Vulkan calls
 *    go to the next layer down (never through these hooks). Its command buffers get the loader's dispatch data
 *    through pfnSetDeviceLoaderData (from the device chain), which lets it time every execution: a submission
 *    carrying timed dispatches goes through kt_vk_queue_submit[2], which puts a command buffer of ktiming's
 *    before and after the program's in each batch (the batch's own span, the copies of its dispatches'
 *    timestamps into a record per execution). Its query pool starts with a host reset when the program enabled
 *    hostQueryReset; the readback is by those copies (a secondary's by the primary that executes it, after each
 *    vkCmdExecuteCommands);
 *  - each dispatch is bracketed with kt_vk_begin_id / kt_vk_end in the program's command buffer, under the name
 *    of the bound compute pipeline: its VK_EXT_debug_utils (or debug_marker) name, else its shader module's, else
 *    the entry point when it is not "main", else "main#<hash>" (of the SPIR-V: stable across runs); every VkDevice
 *    of a physical device records under that device's identity (deviceUUID where the program's instance lets us
 *    read it). The command buffer copies the name when the
 *    pipeline is bound: a rename (or a destroy) on another thread takes effect at the next bind;
 *  - the dispatch path takes no process-wide lock: devices and command buffers are found through per-thread
 *    caches, and the binding is the command buffer's own state (see the locks below);
 *  - completed dispatches are collected (never waiting) after submits and after the program's own waits
 *    (fences, timeline semaphores, queue/device idle); VK_ERROR_DEVICE_LOST from any of those, a present, an
 *    acquire, a sparse bind or the destroy's idle wait counts what is pending `device lost`; command buffers re-begun, reset or freed are read and collected, then
 *    discarded (kt_vk_discard: what never ran counts as dropped, never submitted);
 *  - a primary submitted again without being re-recorded is timed at every execution, and so is every occurrence
 *    of a secondary in it (kt_vk_cmd_execute after each vkCmdExecuteCommands: the primary copies the secondary's
 *    timestamps right after it ran, behind an execution barrier); a primary begun with SIMULTANEOUS_USE is not
 *    timed per dispatch (overlapping executions share its queries): its dispatches count as dropped,
 *    simultaneous-use command buffer, its batches are timed; the same for a SIMULTANEOUS_USE secondary, per
 *    occurrence in every submission of the primaries that execute it (nothing of ours is recorded into it).
 *    KTIMING_VULKAN_ONCE (or a loader without the callback) times each recording once instead.
 * At exit, never-submitted recordings are counted, kt_shutdown() waits (bounded) for work in flight, and the
 * snapshot is written for `ktiming run` (KTIMING_RUN_DIR). docs/vulkan.md has the reasoning and what is not
 * done yet.
 */
#include <vulkan/vk_layer.h>
#include <vulkan/vulkan.h>

#include <ktiming.h>
#include <ktiming/vk.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim/kti_map.h"
#include "core/env.h"
#include "shim/kti_run.h"

#define KTI_EXPORT __attribute__((visibility("default")))
#define KTI_MAX_FAMILIES 16u
#define KTI_POOL_PROTECTED 0x80000000u /* in kti_device_t.pools: the pool is protected */

/* Locks. g_lock guards the process-wide maps (instances, devices, devices per physical device); each device's own
 * `lock` guards its maps and the fields of its records that several threads touch. The dispatch hot path takes
 * neither in the steady state: device_of and cmd_get answer from a per-thread cache (below), and a command buffer's
 * binding is its own state (a command buffer is recorded by one thread at a time: the spec requires its pool to be
 * externally synchronized). */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

/* The loader's dispatch table pointer, shared by an instance or device and the objects made from it. */
static inline uint64_t dispatch_key(const void *handle)
{
    return (uint64_t)(uintptr_t) * (void *const *)handle;
}

/* ---------------------------------------------------------------------------------------------------
 * Instances and devices
 * ------------------------------------------------------------------------------------------------- */

/* One instance. */
typedef struct kti_instance_t {
    VkInstance instance;                               /* handle */
    PFN_vkGetInstanceProcAddr next_gipa;               /* next layer's vkGetInstanceProcAddr */
    PFN_vkDestroyInstance destroy;                     /* next vkDestroyInstance */
    PFN_vkEnumerateDeviceExtensionProperties enum_ext; /* next vkEnumerateDeviceExtensionProperties */
    PFN_vkGetPhysicalDeviceProperties props;           /* next vkGetPhysicalDeviceProperties */
    uint32_t api_version;                              /* the program's VkApplicationInfo::apiVersion (1.0 if none) */
    int props2;                                        /* the program enabled VK_KHR_get_physical_device_properties2 */
    int ext_mem_caps;                                  /* ... and VK_KHR_external_memory_capabilities */
} kti_instance_t;

/* Next layer's entry points of a device, for the functions hooked. */
#ifndef VK_EXT_shader_object /* headers before 1.3.246: the one entry point hooked, declared here */
VK_DEFINE_NON_DISPATCHABLE_HANDLE(VkShaderEXT)
typedef void(VKAPI_PTR *PFN_vkCmdBindShadersEXT)(VkCommandBuffer, uint32_t, const VkShaderStageFlagBits *,
                                                 const VkShaderEXT *);
#endif

#define KTI_DEVICE_HOOKS(X)                                                                                      \
    X(vkDestroyDevice) X(vkCreateComputePipelines) X(vkDestroyPipeline) X(vkDestroyShaderModule)                 \
    X(vkCreateShaderModule)                                                                                    \
    X(vkCreateCommandPool) X(vkDestroyCommandPool) X(vkResetCommandPool)                \
    X(vkAllocateCommandBuffers) X(vkFreeCommandBuffers) X(vkBeginCommandBuffer) X(vkResetCommandBuffer)          \
    X(vkEndCommandBuffer)                                                                                      \
    X(vkCmdBindPipeline) X(vkCmdDispatch) X(vkCmdDispatchIndirect) X(vkCmdDispatchBase) X(vkCmdDispatchBaseKHR)  \
    X(vkCmdExecuteCommands) X(vkQueueSubmit) X(vkQueueSubmit2) X(vkQueueSubmit2KHR) X(vkQueueWaitIdle)           \
    X(vkDeviceWaitIdle) X(vkWaitForFences) X(vkGetFenceStatus) X(vkSetDebugUtilsObjectNameEXT)  \
    X(vkDebugMarkerSetObjectNameEXT)                                                                           \
    X(vkCmdBindShadersEXT) X(vkCmdBeginRendering) X(vkCmdBeginRenderingKHR) X(vkCmdEndRendering)              \
    X(vkCmdEndRenderingKHR) X(vkCreateQueryPool) X(vkDestroyQueryPool) X(vkCmdBeginQuery)                      \
    X(vkCmdBeginQueryIndexedEXT) X(vkWaitSemaphores) X(vkWaitSemaphoresKHR) X(vkGetSemaphoreCounterValue)           \
    X(vkGetSemaphoreCounterValueKHR) X(vkQueuePresentKHR) X(vkAcquireNextImageKHR) X(vkAcquireNextImage2KHR)      \
    X(vkQueueBindSparse)

/* One device. */
typedef struct kti_device_t {
    pthread_mutex_t lock;              /* the maps below, ctx[], ctx_failed[], compute_pipelines, and the
                                          cross-thread fields of its command buffer records */
    atomic_ulong pipeline_epoch;       /* moves when a pipeline is renamed or destroyed: a command buffer
                                          rebinding the pipeline it has bound reuses its copy only while unmoved */
    VkDevice device;                   /* handle */
    VkPhysicalDevice physical_device;  /* its physical device */
    VkInstance instance;               /* its instance */
    PFN_vkGetInstanceProcAddr next_gipa; /* next layer's, from the device link */
    PFN_vkGetDeviceProcAddr next_gdpa; /* next layer's vkGetDeviceProcAddr */
    int host_query_reset;              /* the program enabled hostQueryReset */
    PFN_vkSetDeviceLoaderData set_loader_data; /* the loader's, for command buffers of ours; NULL: every execution
                                          cannot be timed (re-executions are counted as dropped instead) */
    kt_vk_calibration_t calibration;   /* calibrated-timestamps extension enabled on the device (ours or its) */
    kt_vk_ctx_t *ctx[KTI_MAX_FAMILIES];/* per queue family, created on first use */
    int ctx_failed[KTI_MAX_FAMILIES];  /* creation failed: do not retry */
    uint32_t compute_pipelines;        /* compute pipelines created, for default names */
    kti_map_t pipelines;               /* VkPipeline -> kti_pipeline_t */
    kti_map_t modules;                 /* VkShaderModule -> char * (debug name) */
    kti_map_t hashes;                  /* VkShaderModule -> content hash of its SPIR-V (| 1, never 0) */
    uint32_t slot;                     /* among the live VkDevices of its physical device: 0 for the first, k for
                                          the (k+1)-th alive at once (its queues' tracks say so; a device created
                                          after the others were destroyed takes slot 0 again) */
    uint32_t api_version;              /* its instance's apiVersion and KT_VK_INSTANCE_* extensions (for the
                                          device identity: kt_vk_desc_t.instance_api_version) */
    uint32_t instance_extensions;
    kti_map_t pools;                   /* VkCommandPool -> (family + 1) */
    kti_map_t perf_pools;              /* VkQueryPool -> 1: performance queries with a command-buffer-scope
                                          counter (their begin must be a command buffer's first command, their
                                          end its last: VUID-vkCmdBeginQuery-queryPool-03224, vkCmdEndQuery 03227) */
    kti_map_t cmds;                    /* VkCommandBuffer -> kti_cmd_t */
    char model[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE]; /* deviceName: the device of dispatches counted untimed before
                                          any context of the device exists (untimed_kernel) */
#define KTI_FIELD(fn) PFN_##fn fn;
    KTI_DEVICE_HOOKS(KTI_FIELD)
#undef KTI_FIELD
} kti_device_t;

#define KTI_NAME_MAX 128u

/* A compute pipeline's timing name. */
typedef struct kti_pipeline_t {
    char name[KTI_NAME_MAX]; /* kernel name */
    uint32_t family;        /* family of the id below, UINT32_MAX when not resolved yet */
    kt_kernel_id_t kernel;  /* kt_vk_kernel(ctx of family, name) */
} kti_pipeline_t;

/* A growable list of kernel ids. */
typedef struct kti_kernels_t {
    uint32_t n, cap;
    kt_kernel_id_t *ids;
} kti_kernels_t;

static void kernels_add(kti_kernels_t *l, kt_kernel_id_t k)
{
    if (l->n == l->cap) {
        uint32_t cap = l->cap ? 2 * l->cap : 8;
        kt_kernel_id_t *p = realloc(l->ids, cap * sizeof *p);
        if (!p)
            return;
        l->ids = p;
        l->cap = cap;
    }
    l->ids[l->n++] = k;
}

/* A growable list of dispatches whose begin failed while recording (the kernel and the reason it was dropped). */
typedef struct kti_drops_t {
    uint32_t n, cap;
    kt_kernel_id_t *ids;
    kt_drop_reason_t *why;
} kti_drops_t;

static void drops_add(kti_drops_t *l, kt_kernel_id_t k, kt_drop_reason_t why)
{
    if (l->n == l->cap) {
        uint32_t cap = l->cap ? 2 * l->cap : 8;
        kt_kernel_id_t *p = realloc(l->ids, cap * sizeof *p);
        if (p)
            l->ids = p;
        kt_drop_reason_t *w = p ? realloc(l->why, cap * sizeof *w) : NULL;
        if (!w)
            return;
        l->why = w;
        l->cap = cap;
    }
    l->ids[l->n] = k;
    l->why[l->n++] = why;
}

static void drops_free(kti_drops_t *l)
{
    free(l->ids);
    free(l->why);
    l->ids = NULL;
    l->why = NULL;
    l->n = l->cap = 0;
}

/* A command buffer's state for the current recording. */
typedef struct kti_cmd_t {
    atomic_ulong gen;            /* moves (under the device lock) when the record stops standing for its command
                                    buffer: a thread's cached lookup is used only while it has not moved */
    struct kti_cmd_t *next_free; /* on the list of records to reuse (g_cmd_spare) */
    VkCommandPool pool;          /* its pool */
    uint32_t family;             /* the pool's queue family */
    kt_vk_ctx_t *ctx;            /* context of the family (NULL until a dispatch is timed) */
    VkPipeline bound;            /* bound compute pipeline we know a name of; VK_NULL_HANDLE: none (or a shader
                                    object): dispatches are not timed */
    unsigned long bound_epoch;   /* the device's pipeline_epoch when the copy below was taken */
    uint32_t kernel_family;      /* family `kernel` was resolved in; UINT32_MAX: not resolved yet */
    kt_kernel_id_t kernel;       /* the bound pipeline's kernel id */
    char name[KTI_NAME_MAX];     /* the bound pipeline's name when it was bound (a copy: another thread may
                                    rename or destroy the pipeline record meanwhile) */
    int secondary;               /* VK_COMMAND_BUFFER_LEVEL_SECONDARY */
    int simultaneous;            /* begun with SIMULTANEOUS_USE: a primary while every execution is timed, or a
                                    secondary in either mode: its executions may overlap, so its dispatches are
                                    counted (at every submission, per occurrence), not timed */
    int pair;                    /* a one-time primary timing every execution: kt_vk_cmd_begin gave it a pair of
                                    its own around all of it, so its batch needs no command buffer of ours */
    uint32_t submits;            /* submissions since it was begun (device lock) */
    kti_kernels_t kernels;       /* kernels of its own timed dispatches */
    kti_kernels_t secondaries;   /* kernels of the secondaries it executes (their first occurrence): timed once */
    kti_kernels_t untimed;       /* kernels of its dispatches not timed (simultaneous): dropped per submission */
    int perf_scope;              /* it began a command-buffer-scope performance query: nothing of ours may be
                                    recorded into it (its end must stay last), so its dispatches are not timed */
    kti_kernels_t perf;          /* kernels of its dispatches left untimed for a reason of the device's (that query;
                                    a protected command buffer; a family ktiming has no context for; a compute
                                    shader object): dropped, no timing, at every submission (a secondary's: per
                                    occurrence, at every submission of the primary) */
    int protected_;              /* from a VK_COMMAND_POOL_CREATE_PROTECTED_BIT pool: nothing of ours goes into it */
    int shader_object;           /* a compute shader object is bound (VK_EXT_shader_object): no name is kept */
    uint32_t executed;           /* a secondary: vkCmdExecuteCommands that recorded it since it was begun (device
                                    lock) */
    kti_kernels_t repeats;       /* kernels of secondaries recorded here once more: untimed at every execution */
    kti_drops_t refail;          /* dispatches whose begin failed (ring full, no timing), its own and those of a
                                    secondary's first occurrence: the backend counted them once, at recording, so
                                    they are counted again at every later submission */
    kti_drops_t failocc;         /* the same of a secondary's later occurrences: counted at every submission */
    int fail_covered;            /* a secondary: its failed begins' count at recording stood for an occurrence */
    VkRenderingFlags rendering;  /* flags of its last vkCmdBeginRendering */
    int suspended;               /* its last dynamic render pass instance ended suspended (SUSPENDING_BIT): nothing
                                    of ours may follow it in the command buffer (VUID-VkSubmitInfo-pCommandBuffers-
                                    06015: no command between a suspend and its resume) */
} kti_cmd_t;

/* Whether d's contexts time every execution (kt_vk_queue_submit): the loader gave us its callback for objects
 * of our own. */
static int every_execution(const kti_device_t *d)
{
    return d->set_loader_data != NULL;
}

static kti_map_t g_instances; /* dispatch key -> kti_instance_t */
static kti_map_t g_devices;   /* dispatch key -> kti_device_t */
static kti_map_t g_pd_slots;  /* VkPhysicalDevice -> bit mask of the slots its live VkDevices hold (kti_device_t) */

static kti_instance_t *instance_of(const void *handle)
{
    pthread_mutex_lock(&g_lock);
    kti_instance_t *i = kti_map_get(&g_instances, dispatch_key(handle));
    pthread_mutex_unlock(&g_lock);
    return i;
}

/* The per-thread lookup caches. g_device_epoch moves (under g_lock) when a device record is removed, before it is
 * freed; a cached device is used only while the epoch it was taken at is current, so a handle value reused by a
 * later device is looked up again. A command buffer's record carries its own generation (kti_cmd_t.gen), moved
 * when the record stops standing for its command buffer; records are never given back to malloc but kept for
 * reuse (g_cmd_spare), so a cached record can always be read to compare it: freeing one command buffer leaves
 * every other thread's cached command buffer valid (issue 37.4: a vkFreeCommandBuffers anywhere used to send
 * every thread's next lookup to the device lock). A thread can hold a record that is retired under it only by
 * using a handle another thread is freeing, which the spec forbids. */
static atomic_ulong g_device_epoch = 1;
static pthread_mutex_t g_cmd_spare_lock = PTHREAD_MUTEX_INITIALIZER;
static kti_cmd_t *g_cmd_spare; /* records to reuse (next_free) */
#ifdef KT_VK_TEST_HOOKS
static atomic_ulong g_cmd_lookups; /* command buffer lookups the thread caches could not answer */
/* Test builds only: how many command buffer lookups went to the device's map (test_vk_layer). */
__attribute__((visibility("default"))) unsigned long kti_vk_layer_cmd_lookups(void)
{
    return atomic_load(&g_cmd_lookups);
}
#endif

typedef struct kti_dev_cache_t {
    uint64_t key;        /* dispatch key */
    kti_device_t *d;     /* its record */
    unsigned long epoch; /* g_device_epoch when looked up */
} kti_dev_cache_t;

typedef struct kti_cmd_cache_t {
    VkCommandBuffer cb;  /* handle */
    kti_device_t *d;     /* its device */
    kti_cmd_t *c;        /* its record */
    unsigned long gen;   /* c->gen when looked up */
} kti_cmd_cache_t;

static __thread kti_dev_cache_t t_dev;
static __thread kti_cmd_cache_t t_cmd;

static kti_device_t *device_of(const void *handle)
{
    uint64_t key = dispatch_key(handle);
    unsigned long epoch = atomic_load_explicit(&g_device_epoch, memory_order_acquire);
    if (t_dev.d && t_dev.key == key && t_dev.epoch == epoch)
        return t_dev.d;
    pthread_mutex_lock(&g_lock);
    epoch = atomic_load_explicit(&g_device_epoch, memory_order_relaxed);
    kti_device_t *d = kti_map_get(&g_devices, key);
    pthread_mutex_unlock(&g_lock);
    if (d)
        t_dev = (kti_dev_cache_t){key, d, epoch};
    return d;
}

/* ---------------------------------------------------------------------------------------------------
 * What ktiming's backend gets as vkGetInstanceProcAddr: the next layer's functions, so its own calls
 * (query pools, timestamps, copies, barriers) never come back through this layer
 * ------------------------------------------------------------------------------------------------- */

static PFN_vkVoidFunction VKAPI_CALL backend_gdpa(VkDevice device, const char *name)
{
    kti_device_t *d = device_of(device);
    return d ? d->next_gdpa(device, name) : NULL;
}

static PFN_vkVoidFunction VKAPI_CALL backend_gipa(VkInstance instance, const char *name)
{
    if (!strcmp(name, "vkGetDeviceProcAddr"))
        return (PFN_vkVoidFunction)backend_gdpa;
    kti_instance_t *i = instance ? instance_of(instance) : NULL;
    return i ? i->next_gipa(instance, name) : NULL;
}

static pid_t g_exit_pid; /* the process that registered the exit handler below */

/* At exit, before the snapshot is written (registered after kti_run's writer, so called before it): dispatches
 * of command buffers never submitted are counted as such, then kt_shutdown() waits (KTIMING_EXIT_WAIT_MS) for
 * the work still in flight -- a program may return from main without waiting -- records it and counts what is
 * left as dropped, in flight at exit. */
static void layer_at_exit(void)
{
    if (getpid() != g_exit_pid)
        return;
    pthread_mutex_lock(&g_lock);
    for (size_t i = 0; i < g_devices.cap; i++) {
        kti_device_t *d = g_devices.keys[i] ? g_devices.vals[i] : NULL;
        if (!d)
            continue;
        pthread_mutex_lock(&d->lock);
        for (size_t k = 0; k < d->cmds.cap; k++) {
            kti_cmd_t *c = d->cmds.keys[k] ? d->cmds.vals[k] : NULL;
            if (c && c->ctx && c->kernels.n && !c->submits)
                kt_vk_discard(c->ctx, (VkCommandBuffer)(uintptr_t)d->cmds.keys[k]);
        }
        pthread_mutex_unlock(&d->lock);
    }
    pthread_mutex_unlock(&g_lock);
    kt_shutdown();
}

static void register_exit(void)
{
    kti_run_exit_register();
    g_exit_pid = getpid();
    atexit(layer_at_exit);
}

static uint32_t g_ring_size; /* KTIMING_VULKAN_QUERIES, read once */

static void read_ring_size(void)
{
    const char *v = kt__env(KT_ENV_NAME(VULKAN_QUERIES));
    if (!v || !*v)
        return;
    char *end = NULL;
    unsigned long n = strtoul(v, &end, 10);
    if (*end || n < 16 || n > (1ul << 20)) {
        fprintf(stderr, "ktiming: KTIMING_VULKAN_QUERIES=%s is not a number of dispatches in 16..1048576: the default "
                        "%u is used\n", v, KT_VK_RING_DEFAULT);
        return;
    }
    g_ring_size = (uint32_t)n;
}

/* KTIMING_VULKAN_QUERIES: how many dispatches a context's ring holds in flight (each a pair of timestamp
 * queries); 0 (KT_VK_RING_DEFAULT) when unset. A recording with more timed dispatches than this times the first
 * ones and counts the rest as dropped, `ring full`. */
static uint32_t ring_size(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, read_ring_size);
    return g_ring_size;
}

/* The context timing a family of d (created on first use); NULL when timestamps can't be had there. */
static kt_vk_ctx_t *family_ctx(kti_device_t *d, uint32_t family)
{
    if (family >= KTI_MAX_FAMILIES || kti_secure()) /* secure-execution mode: nothing is timed */
        return NULL;
    pthread_mutex_lock(&d->lock);
    kt_vk_ctx_t *ctx = d->ctx[family];
    int failed = d->ctx_failed[family];
    pthread_mutex_unlock(&d->lock);
    if (ctx || failed)
        return ctx;
    kt_vk_desc_t desc;
    memset(&desc, 0, sizeof desc);
    desc.instance = d->instance;
    desc.physical_device = d->physical_device;
    desc.device = d->device;
    desc.queue_family = family;
    desc.queue = VK_NULL_HANDLE; /* no submissions of ours: calibrated timestamps or durations only */
    desc.get_instance_proc_addr = backend_gipa;
    desc.host_query_reset = d->host_query_reset;
    desc.calibration = d->calibration;
    char label[64];
    if (d->slot)
        snprintf(label, sizeof label, "queue family %u (VkDevice %u)", family, d->slot + 1);
    else
        snprintf(label, sizeof label, "queue family %u", family);
    desc.label = label; /* one track per family of each VkDevice alive at once */
    desc.instance_api_version = d->api_version; /* the identity: every VkDevice of a physical device is one device */
    desc.instance_extensions = d->instance_extensions;
    desc.copy_at_end = 1; /* copy readback: one set of copies per recording, at vkEndCommandBuffer */
    desc.ring_size = ring_size();
    /* every execution: our command buffers around each batch copy its primaries' timestamps, and a primary copies
     * its secondaries' after each vkCmdExecuteCommands (kt_vk_cmd_execute) */
    desc.per_submission = every_execution(d);
    desc.set_device_loader_data = d->set_loader_data;
    int rc = kt_vk_ctx_create(&desc, &ctx);
    pthread_mutex_lock(&d->lock);
    if (rc == 0 && d->ctx[family]) { /* another thread won */
        kt_vk_ctx_t *mine = ctx;
        ctx = d->ctx[family];
        pthread_mutex_unlock(&d->lock);
        kt_vk_ctx_destroy(mine);
        return ctx;
    }
    if (rc == 0)
        d->ctx[family] = ctx;
    else
        d->ctx_failed[family] = 1;
    pthread_mutex_unlock(&d->lock);
    if (rc != 0 && kt__env(KT_ENV_NAME(RUN_VERBOSE)))
        fprintf(stderr, "ktiming: Vulkan queue family %u not timed: %s\n", family, kt_strerror(rc));
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (rc == 0)
        pthread_once(&once, register_exit);
    return rc == 0 ? ctx : NULL;
}

/* The device's per-family contexts as they are now (NULL: family not timed), read under its lock. */
static void device_ctxs(kti_device_t *d, kt_vk_ctx_t *ctx[KTI_MAX_FAMILIES])
{
    pthread_mutex_lock(&d->lock);
    memcpy(ctx, d->ctx, KTI_MAX_FAMILIES * sizeof ctx[0]);
    pthread_mutex_unlock(&d->lock);
}

/* After a call returned VK_ERROR_DEVICE_LOST: what is pending on the device will never complete. */
static void device_lost(kti_device_t *d)
{
    kt_vk_ctx_t *ctx[KTI_MAX_FAMILIES];
    device_ctxs(d, ctx);
    for (uint32_t f = 0; f < KTI_MAX_FAMILIES; f++)
        if (ctx[f])
            kt_vk_device_lost(ctx[f]);
}

static void collect_device(kti_device_t *d)
{
    kt_vk_ctx_t *ctx[KTI_MAX_FAMILIES];
    device_ctxs(d, ctx);
    for (uint32_t f = 0; f < KTI_MAX_FAMILIES; f++)
        if (ctx[f])
            kt_vk_collect(ctx[f]);
}

/* ---------------------------------------------------------------------------------------------------
 * Command buffers
 * ------------------------------------------------------------------------------------------------- */

/* The record of a command buffer of d, or NULL when it is not tracked (a protected pool's). */
static kti_cmd_t *cmd_get(kti_device_t *d, VkCommandBuffer cb)
{
    if (t_cmd.c && t_cmd.cb == cb && t_cmd.d == d &&
        atomic_load_explicit(&t_cmd.c->gen, memory_order_acquire) == t_cmd.gen)
        return t_cmd.c;
#ifdef KT_VK_TEST_HOOKS
    atomic_fetch_add(&g_cmd_lookups, 1);
#endif
    pthread_mutex_lock(&d->lock);
    kti_cmd_t *c = kti_map_get(&d->cmds, (uint64_t)(uintptr_t)cb);
    unsigned long gen = c ? atomic_load_explicit(&c->gen, memory_order_relaxed) : 0;
    pthread_mutex_unlock(&d->lock);
    if (c) /* not "not tracked": an untracked handle value may come back as a tracked one */
        t_cmd = (kti_cmd_cache_t){cb, d, c, gen};
    return c;
}

/* A zeroed record (a spare one reused, its generation kept), or NULL. */
static kti_cmd_t *cmd_new(void)
{
    pthread_mutex_lock(&g_cmd_spare_lock);
    kti_cmd_t *c = g_cmd_spare;
    if (c)
        g_cmd_spare = c->next_free;
    pthread_mutex_unlock(&g_cmd_spare_lock);
    if (!c)
        return calloc(1, sizeof *c);
    unsigned long gen = atomic_load(&c->gen);
    memset((char *)c + offsetof(kti_cmd_t, next_free), 0, sizeof *c - offsetof(kti_cmd_t, next_free));
    atomic_store(&c->gen, gen);
    return c;
}

/* Ends a recording's life: what completed is recorded, the rest of its slots released. */
static void cmd_retire(kti_device_t *d, kti_cmd_t *c, VkCommandBuffer cb)
{
    if (c->ctx && (c->kernels.n || c->pair)) {
        kt_vk_collect(c->ctx);
        kt_vk_discard(c->ctx, cb);
    }
    c->pair = 0;
    c->bound = VK_NULL_HANDLE;
    c->kernels.n = 0;
    c->secondaries.n = 0;
    c->untimed.n = 0;
    c->perf.n = 0;
    c->perf_scope = 0;
    c->shader_object = 0;
    c->repeats.n = 0;
    c->refail.n = 0;
    c->failocc.n = 0;
    c->fail_covered = 0;
    c->simultaneous = 0;
    c->rendering = 0;
    c->suspended = 0;
    pthread_mutex_lock(&d->lock);
    c->submits = 0;
    c->executed = 0;
    pthread_mutex_unlock(&d->lock);
}

static void drop_all(const kti_kernels_t *l, kt_drop_reason_t reason)
{
    for (uint32_t i = 0; i < l->n; i++)
        kt_record_drop(l->ids[i], reason);
}

static void drops_all(const kti_drops_t *l)
{
    for (uint32_t i = 0; i < l->n; i++)
        kt_record_drop(l->ids[i], l->why[i]);
}

/* A submission. Timing every execution, a primary's dispatches are read per submission (kt_vk_queue_submit);
 * otherwise a re-execution of a recording already submitted is not timed (its slots were read). A secondary is
 * timed once: its later executions, and its second and later occurrences in one primary, count as dropped,
 * re-executed. Dispatches of a simultaneous-use primary count as dropped at every submission. */
static void cmd_submitted(kti_device_t *d, VkCommandBuffer cb)
{
    kti_cmd_t *c = cmd_get(d, cb);
    if (!c)
        return;
    pthread_mutex_lock(&d->lock);
    uint32_t again = c->submits++;
    pthread_mutex_unlock(&d->lock);
    if (again && !every_execution(d))
        drop_all(&c->kernels, KT_DROP_RESUBMITTED);
    if (again)
        drop_all(&c->secondaries, KT_DROP_RESUBMITTED);
    drop_all(&c->repeats, KT_DROP_RESUBMITTED);
    if (again) /* a begin that failed at recording was counted once then: once per execution now */
        drops_all(&c->refail);
    drops_all(&c->failocc);
    drop_all(&c->untimed, KT_DROP_SIMULTANEOUS_USE);
    drop_all(&c->perf, KT_DROP_NO_TIMING);
}

/* The context that times a submission's command buffers (all of the queue's family), or NULL: none carries a
 * timed dispatch, or every execution is not timed on d. */
static kt_vk_ctx_t *submit_ctx(kti_device_t *d, VkCommandBuffer cb)
{
    kti_cmd_t *c = every_execution(d) ? cmd_get(d, cb) : NULL;
    return c && (c->kernels.n || c->untimed.n || c->secondaries.n) ? c->ctx : NULL;
}

/* ---------------------------------------------------------------------------------------------------
 * Hooks
 * ------------------------------------------------------------------------------------------------- */

/* The bound pipeline's kernel id was resolved for a command buffer: kept in the pipeline record too (so later
 * bindings copy it), unless the record was renamed or destroyed since the binding. */
static void pipeline_resolved(kti_device_t *d, const kti_cmd_t *c)
{
    pthread_mutex_lock(&d->lock);
    kti_pipeline_t *p = kti_map_get(&d->pipelines, (uint64_t)c->bound);
    if (p && !strcmp(p->name, c->name)) {
        p->kernel = c->kernel;
        p->family = c->kernel_family;
    }
    pthread_mutex_unlock(&d->lock);
}

/* The kernel id of a dispatch the layer does not time: the bound pipeline's name (a compute shader object's
 * dispatch: "shader object"), on the device of the command buffer's family context, of any context of the device,
 * or (none exists: the family is one ktiming cannot time) under the device's model name. */
static kt_kernel_id_t untimed_kernel(kti_device_t *d, kti_cmd_t *c)
{
    const char *name = c->shader_object ? "shader object" : c->name;
    kt_vk_ctx_t *ctx = c->ctx;
    if (!ctx && c->family < KTI_MAX_FAMILIES) /* a protected pool's family: its context names it */
        ctx = family_ctx(d, c->family);
    if (!ctx) {
        kt_vk_ctx_t *all[KTI_MAX_FAMILIES];
        device_ctxs(d, all);
        for (uint32_t f = 0; f < KTI_MAX_FAMILIES && !ctx; f++)
            ctx = all[f];
    }
    return ctx ? kt_vk_kernel(ctx, name) : kt_kernel_intern(name, KT_BACKEND_VULKAN, d->model);
}

/* Before a dispatch: its begin timestamp, under the name of the pipeline bound, with its launch configuration
 * (group counts; the shader's local size is not read: 0). No lock of the layer's once the
 * command buffer's context and kernel are known (the backend's ring takes its context's). */
static void timed_dispatch_begin(kti_device_t *d, VkCommandBuffer cb, const kt_launch_t *launch, kti_cmd_t **out)
{
    *out = NULL;
    kti_cmd_t *c = cmd_get(d, cb);
    static atomic_int secure = -1; /* secure-execution mode (read once): nothing is recorded */
    int sec = atomic_load_explicit(&secure, memory_order_relaxed);
    if (sec < 0)
        atomic_store_explicit(&secure, sec = kti_secure(), memory_order_relaxed);
    if (!c || !kt_is_enabled() || sec)
        return;
    if (!c->bound && !c->shader_object) /* no compute pipeline bound that the layer knows: not a valid dispatch */
        return;
    kt_vk_ctx_t *ctx = c->ctx ? c->ctx : c->protected_ ? NULL : family_ctx(d, c->family);
    if (!ctx || c->shader_object || c->protected_) { /* counted at every submission, never untimed silently */
        kernels_add(&c->perf, untimed_kernel(d, c));
        return;
    }
    c->ctx = ctx;
    if (c->kernel_family != c->family) {
        c->kernel = kt_vk_kernel(ctx, c->name);
        c->kernel_family = c->family;
        pipeline_resolved(d, c);
    }
    if (c->simultaneous) { /* executions may overlap: counted at each submission, not timed */
        kernels_add(&c->untimed, c->kernel);
        return;
    }
    if (c->perf_scope) { /* a command-buffer-scope performance query: left as the program made it */
        kernels_add(&c->perf, c->kernel);
        return;
    }
    int rc = kt_vk_begin_id(ctx, cb, c->kernel);
    if (rc == 0) {
        kernels_add(&c->kernels, c->kernel);
        kt_vk_launch(ctx, cb, launch); /* the configuration every execution is recorded with (issue 40.2) */
        *out = c;
    } else if (rc == KT_EUNAVAILABLE || rc == KT_EFULL) { /* counted by the backend, once: again per execution */
        drops_add(&c->refail, c->kernel, rc == KT_EFULL ? KT_DROP_RING_FULL : KT_DROP_NO_TIMING);
    }
}

static void VKAPI_CALL hook_CmdDispatch(VkCommandBuffer cb, uint32_t x, uint32_t y, uint32_t z)
{
    kti_device_t *d = device_of(cb);
    kti_cmd_t *c;
    const kt_launch_t launch = {.kind = KT_LAUNCH_GROUPS, .dims = 3, .size = {x, y, z}};
    timed_dispatch_begin(d, cb, &launch, &c);
    d->vkCmdDispatch(cb, x, y, z);
    if (c)
        kt_vk_end(c->ctx, cb);
}

static void VKAPI_CALL hook_CmdDispatchBase(VkCommandBuffer cb, uint32_t bx, uint32_t by, uint32_t bz, uint32_t x,
                                            uint32_t y, uint32_t z)
{
    kti_device_t *d = device_of(cb);
    kti_cmd_t *c;
    const kt_launch_t launch = {.kind = KT_LAUNCH_GROUPS, .dims = 3, .size = {x, y, z}}; /* base: an offset */
    timed_dispatch_begin(d, cb, &launch, &c);
    (d->vkCmdDispatchBase ? d->vkCmdDispatchBase : d->vkCmdDispatchBaseKHR)(cb, bx, by, bz, x, y, z);
    if (c)
        kt_vk_end(c->ctx, cb);
}

static void VKAPI_CALL hook_CmdDispatchIndirect(VkCommandBuffer cb, VkBuffer buf, VkDeviceSize off)
{
    kti_device_t *d = device_of(cb);
    kti_cmd_t *c;
    const kt_launch_t launch = {.kind = KT_LAUNCH_INDIRECT};
    timed_dispatch_begin(d, cb, &launch, &c);
    d->vkCmdDispatchIndirect(cb, buf, off);
    if (c)
        kt_vk_end(c->ctx, cb);
}

static void VKAPI_CALL hook_CmdBindPipeline(VkCommandBuffer cb, VkPipelineBindPoint bp, VkPipeline pipeline)
{
    kti_device_t *d = device_of(cb);
    kti_cmd_t *c = bp == VK_PIPELINE_BIND_POINT_COMPUTE ? cmd_get(d, cb) : NULL;
    /* The same pipeline bound again, neither renamed nor destroyed since: the copy holds. */
    if (c)
        c->shader_object = 0;
    if (c && !(c->bound == pipeline && pipeline &&
               c->bound_epoch == atomic_load_explicit(&d->pipeline_epoch, memory_order_acquire))) {
        pthread_mutex_lock(&d->lock);
        kti_pipeline_t *p = kti_map_get(&d->pipelines, (uint64_t)pipeline);
        c->bound = p ? pipeline : VK_NULL_HANDLE;
        c->bound_epoch = atomic_load_explicit(&d->pipeline_epoch, memory_order_relaxed);
        if (p) {
            memcpy(c->name, p->name, sizeof c->name);
            c->kernel = p->kernel;
            c->kernel_family = p->family;
        }
        pthread_mutex_unlock(&d->lock);
    }
    d->vkCmdBindPipeline(cb, bp, pipeline);
}

/* VK_EXT_shader_object: binding a compute shader object (or unbinding it) replaces the bound compute pipeline.
 * Dispatches using a shader object are not timed (no name is kept for shader objects yet); before this hook they
 * were credited to the pipeline bound earlier. */
static void VKAPI_CALL hook_CmdBindShadersEXT(VkCommandBuffer cb, uint32_t n, const VkShaderStageFlagBits *stages,
                                              const VkShaderEXT *shaders)
{
    kti_device_t *d = device_of(cb);
    kti_cmd_t *c = cmd_get(d, cb);
    for (uint32_t i = 0; c && i < n; i++)
        if (stages[i] == VK_SHADER_STAGE_COMPUTE_BIT) {
            c->bound = VK_NULL_HANDLE;
            c->shader_object = shaders && shaders[i] != VK_NULL_HANDLE;
        }
    d->vkCmdBindShadersEXT(cb, n, stages, shaders);
}

/* Dynamic rendering: a render pass instance suspended at the end of a command buffer is resumed at the start of
 * the next one in the batch, with nothing in between. A recording that ends suspended gets no copies of ours at
 * its end (kt_vk_cmd_end): its dispatches are copied by the command buffer ktiming appends to the batch, or, with
 * KTIMING_VULKAN_ONCE (no command buffer of ours), not at all: kt_vk_cmd_untimed counts them dropped. */
static void rendering_begun(kti_device_t *d, VkCommandBuffer cb, const VkRenderingInfo *ri)
{
    kti_cmd_t *c = cmd_get(d, cb);
    if (c) {
        c->rendering = ri ? ri->flags : 0;
        c->suspended = 0;
    }
}

static void rendering_ended(kti_device_t *d, VkCommandBuffer cb)
{
    kti_cmd_t *c = cmd_get(d, cb);
    if (c)
        c->suspended = (c->rendering & VK_RENDERING_SUSPENDING_BIT) != 0;
}

static void VKAPI_CALL hook_CmdBeginRendering(VkCommandBuffer cb, const VkRenderingInfo *ri)
{
    kti_device_t *d = device_of(cb);
    rendering_begun(d, cb, ri);
    d->vkCmdBeginRendering(cb, ri);
}

static void VKAPI_CALL hook_CmdBeginRenderingKHR(VkCommandBuffer cb, const VkRenderingInfo *ri)
{
    kti_device_t *d = device_of(cb);
    rendering_begun(d, cb, ri);
    d->vkCmdBeginRenderingKHR(cb, ri);
}

static void VKAPI_CALL hook_CmdEndRendering(VkCommandBuffer cb)
{
    kti_device_t *d = device_of(cb);
    rendering_ended(d, cb);
    d->vkCmdEndRendering(cb);
}

static void VKAPI_CALL hook_CmdEndRenderingKHR(VkCommandBuffer cb)
{
    kti_device_t *d = device_of(cb);
    rendering_ended(d, cb);
    d->vkCmdEndRenderingKHR(cb);
}

static void VKAPI_CALL hook_CmdExecuteCommands(VkCommandBuffer cb, uint32_t n, const VkCommandBuffer *secondaries)
{
    kti_device_t *d = device_of(cb);
    d->vkCmdExecuteCommands(cb, n, secondaries);
    kti_cmd_t *c = cmd_get(d, cb);
    /* Timing every execution: the timed secondaries of the call, in order, go to kt_vk_cmd_execute in one call (one
     * family, one context), which times a secondary listed twice at its last occurrence and counts the earlier
     * ones (they write the same queries before the copies after the call can read them). */
    VkCommandBuffer few[16], *timed = n <= 16 ? few : malloc(n * sizeof *timed);
    uint32_t ntimed = 0;
    kt_vk_ctx_t *timed_ctx = NULL;
    for (uint32_t i = 0; c && i < n; i++) {
        kti_cmd_t *s = cmd_get(d, secondaries[i]);
        if (!s)
            continue;
        /* a SIMULTANEOUS_USE secondary is not timed (its executions may overlap): its dispatches count as dropped at
         * every submission of the primary, once per occurrence */
        for (uint32_t k = 0; k < s->untimed.n; k++)
            kernels_add(&c->untimed, s->untimed.ids[k]);
        if (!c->ctx && s->untimed.n)
            c->ctx = s->ctx;
        for (uint32_t k = 0; k < s->perf.n; k++) /* untimed for the device's reasons: per occurrence */
            kernels_add(&c->perf, s->perf.ids[k]);
        /* its begins that failed at recording: that count stands for its first occurrence's first execution */
        for (uint32_t k = 0; k < s->refail.n; k++)
            drops_add(s->fail_covered ? &c->failocc : &c->refail, s->refail.ids[k], s->refail.why[k]);
        s->fail_covered |= s->refail.n != 0;
        if (!c->ctx && s->refail.n)
            c->ctx = s->ctx;
        if (every_execution(d)) { /* every occurrence timed at every execution of the primary */
            if (s->ctx && s->kernels.n) {
                if (timed && (!timed_ctx || timed_ctx == s->ctx)) {
                    timed[ntimed++] = secondaries[i];
                    timed_ctx = s->ctx;
                } else {
                    kt_vk_cmd_execute(s->ctx, cb, 1, &secondaries[i]);
                }
                for (uint32_t k = 0; k < s->kernels.n; k++)
                    kernels_add(&c->kernels, s->kernels.ids[k]);
                if (!c->ctx)
                    c->ctx = s->ctx;
            }
            continue;
        }
        pthread_mutex_lock(&d->lock);
        uint32_t before = s->executed++;
        pthread_mutex_unlock(&d->lock);
        for (uint32_t k = 0; k < s->kernels.n; k++)
            kernels_add(before ? &c->repeats : &c->secondaries, s->kernels.ids[k]);
        if (!c->ctx && s->ctx)
            c->ctx = s->ctx; /* the primary's submissions go through the context that times its secondaries */
    }
    if (ntimed)
        kt_vk_cmd_execute(timed_ctx, cb, ntimed, timed);
    if (timed != few)
        free(timed);
}

static VkResult VKAPI_CALL hook_BeginCommandBuffer(VkCommandBuffer cb, const VkCommandBufferBeginInfo *bi)
{
    kti_device_t *d = device_of(cb);
    kti_cmd_t *c = cmd_get(d, cb);
    if (c) {
        cmd_retire(d, c, cb);
        /* A SIMULTANEOUS_USE secondary is untimed in either mode: pending in several primaries at once, its
         * executions would reset and write the same queries unordered (and Debian 12's validation layer aborts on
         * query resets in a secondary pending twice). Its dispatches count per occurrence and submission. */
        c->simultaneous = (c->secondary || every_execution(d)) && bi &&
                          (bi->flags & VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT);
    }
    VkResult r = d->vkBeginCommandBuffer(cb, bi);
    /* A one-time primary (submitted once, so re-recorded for every execution, as per-frame recordings are):
     * its dispatches are copied at its end and its own pair times its batch, so a batch of it alone goes to the
     * driver as the program made it. Only once its family's context exists (a dispatch was timed there before):
     * a program that never dispatches gets no context for it. */
    if (r == VK_SUCCESS && c && every_execution(d) && !c->secondary && !c->simultaneous && !c->protected_ && bi &&
        (bi->flags & VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT) && c->family < KTI_MAX_FAMILIES &&
        kt_is_enabled()) {
        pthread_mutex_lock(&d->lock);
        kt_vk_ctx_t *ctx = d->ctx[c->family];
        pthread_mutex_unlock(&d->lock);
        if (ctx && kt_vk_cmd_begin(ctx, cb) == 0) {
            c->ctx = ctx;
            c->pair = 1;
        }
    }
    return r;
}

static VkResult VKAPI_CALL hook_EndCommandBuffer(VkCommandBuffer cb)
{
    kti_device_t *d = device_of(cb);
    kti_cmd_t *c = cmd_get(d, cb);
    /* the readback of the whole recording, after its last dispatch; timing every execution, none (a primary's
     * slots are copied per submission, a secondary's by its primary after each vkCmdExecuteCommands) unless it is
     * a one-time primary with its own pair */
    if (c && c->ctx && c->kernels.n && c->suspended && !every_execution(d))
        kt_vk_cmd_untimed(c->ctx, cb); /* timed once, read at its end: after a suspend nothing of ours may follow */
    else if (c && c->ctx && c->kernels.n && (!every_execution(d) || c->pair) && !c->suspended)
        kt_vk_cmd_end(c->ctx, cb);
    return d->vkEndCommandBuffer(cb);
}

static VkResult VKAPI_CALL hook_ResetCommandBuffer(VkCommandBuffer cb, VkCommandBufferResetFlags flags)
{
    kti_device_t *d = device_of(cb);
    kti_cmd_t *c = cmd_get(d, cb);
    if (c)
        cmd_retire(d, c, cb);
    return d->vkResetCommandBuffer(cb, flags);
}

static VkResult VKAPI_CALL hook_AllocateCommandBuffers(VkDevice device, const VkCommandBufferAllocateInfo *ai,
                                                       VkCommandBuffer *out)
{
    kti_device_t *d = device_of(device);
    VkResult r = d->vkAllocateCommandBuffers(device, ai, out);
    if (r != VK_SUCCESS)
        return r;
    pthread_mutex_lock(&d->lock);
    uintptr_t fam = (uintptr_t)kti_map_get(&d->pools, (uint64_t)ai->commandPool);
    for (uint32_t i = 0; fam && i < ai->commandBufferCount; i++) {
        kti_cmd_t *c = cmd_new();
        if (!c)
            break;
        c->pool = ai->commandPool;
        c->family = (uint32_t)((fam & ~(uintptr_t)KTI_POOL_PROTECTED) - 1);
        c->protected_ = (fam & KTI_POOL_PROTECTED) != 0;
        c->secondary = ai->level == VK_COMMAND_BUFFER_LEVEL_SECONDARY;
        if (kti_map_put(&d->cmds, (uint64_t)(uintptr_t)out[i], c) != 0)
            free(c);
    }
    pthread_mutex_unlock(&d->lock);
    return r;
}

/* The record stops standing for its command buffer (no cached lookup answers with it) and is kept for reuse. */
static void cmd_free(kti_cmd_t *c)
{
    atomic_fetch_add_explicit(&c->gen, 1, memory_order_release);
    free(c->kernels.ids);
    free(c->secondaries.ids);
    free(c->untimed.ids);
    free(c->repeats.ids);
    free(c->perf.ids);
    c->kernels.ids = c->secondaries.ids = c->untimed.ids = c->repeats.ids = c->perf.ids = NULL;
    drops_free(&c->refail);
    drops_free(&c->failocc);
    pthread_mutex_lock(&g_cmd_spare_lock);
    c->next_free = g_cmd_spare;
    g_cmd_spare = c;
    pthread_mutex_unlock(&g_cmd_spare_lock);
}

static void cmd_forget(kti_device_t *d, VkCommandBuffer cb)
{
    pthread_mutex_lock(&d->lock);
    kti_cmd_t *c = kti_map_del(&d->cmds, (uint64_t)(uintptr_t)cb);
    if (c) /* before the retire: no thread's cache answers with it any more (only with it) */
        atomic_fetch_add_explicit(&c->gen, 1, memory_order_release);
    pthread_mutex_unlock(&d->lock);
    if (c) {
        cmd_retire(d, c, cb);
        cmd_free(c);
    }
}

static void VKAPI_CALL hook_FreeCommandBuffers(VkDevice device, VkCommandPool pool, uint32_t n,
                                               const VkCommandBuffer *cbs)
{
    kti_device_t *d = device_of(device);
    for (uint32_t i = 0; i < n; i++)
        if (cbs[i])
            cmd_forget(d, cbs[i]);
    d->vkFreeCommandBuffers(device, pool, n, cbs);
}

/* The command buffers of pool (malloc'ed array; *n entries). */
static VkCommandBuffer *pool_cmds(kti_device_t *d, VkCommandPool pool, size_t *n)
{
    pthread_mutex_lock(&d->lock);
    VkCommandBuffer *list = malloc((d->cmds.n ? d->cmds.n : 1) * sizeof *list);
    *n = 0;
    for (size_t i = 0; list && i < d->cmds.cap; i++)
        if (d->cmds.keys[i] && ((kti_cmd_t *)d->cmds.vals[i])->pool == pool)
            list[(*n)++] = (VkCommandBuffer)(uintptr_t)d->cmds.keys[i];
    pthread_mutex_unlock(&d->lock);
    return list;
}

static VkResult VKAPI_CALL hook_ResetCommandPool(VkDevice device, VkCommandPool pool, VkCommandPoolResetFlags f)
{
    kti_device_t *d = device_of(device);
    size_t n;
    VkCommandBuffer *list = pool_cmds(d, pool, &n);
    for (size_t i = 0; i < n; i++) {
        kti_cmd_t *c = cmd_get(d, list[i]);
        if (c)
            cmd_retire(d, c, list[i]);
    }
    free(list);
    return d->vkResetCommandPool(device, pool, f);
}

/* ---------------------------------------------------------------------------------------------------
 * Performance queries (issue 37.3): a command buffer with a command-buffer-scope one is left untimed
 * ------------------------------------------------------------------------------------------------- */

/* Whether a performance query pool has a counter of command-buffer scope; 1 also when the counters' scopes cannot
 * be read (left untimed rather than broken). */
static int perf_pool_cb_scope(kti_device_t *d, const VkQueryPoolCreateInfo *ci)
{
    const VkQueryPoolPerformanceCreateInfoKHR *pc = NULL;
    for (const VkBaseInStructure *s = ci->pNext; s; s = s->pNext)
        if (s->sType == VK_STRUCTURE_TYPE_QUERY_POOL_PERFORMANCE_CREATE_INFO_KHR)
            pc = (const VkQueryPoolPerformanceCreateInfoKHR *)s;
    PFN_vkEnumeratePhysicalDeviceQueueFamilyPerformanceQueryCountersKHR en =
        (PFN_vkEnumeratePhysicalDeviceQueueFamilyPerformanceQueryCountersKHR)d->next_gipa(
            d->instance, "vkEnumeratePhysicalDeviceQueueFamilyPerformanceQueryCountersKHR");
    uint32_t n = 0;
    if (!pc || !en || en(d->physical_device, pc->queueFamilyIndex, &n, NULL, NULL) != VK_SUCCESS || !n)
        return 1;
    VkPerformanceCounterKHR *counters = calloc(n, sizeof *counters);
    if (!counters)
        return 1;
    for (uint32_t i = 0; i < n; i++)
        counters[i].sType = VK_STRUCTURE_TYPE_PERFORMANCE_COUNTER_KHR;
    int cb_scope = en(d->physical_device, pc->queueFamilyIndex, &n, counters, NULL) != VK_SUCCESS;
    for (uint32_t i = 0; !cb_scope && i < pc->counterIndexCount; i++)
        cb_scope = pc->pCounterIndices[i] >= n ||
                   counters[pc->pCounterIndices[i]].scope == VK_PERFORMANCE_COUNTER_SCOPE_COMMAND_BUFFER_KHR;
    free(counters);
    return cb_scope;
}

static VkResult VKAPI_CALL hook_CreateQueryPool(VkDevice device, const VkQueryPoolCreateInfo *ci,
                                                const VkAllocationCallbacks *a, VkQueryPool *out)
{
    kti_device_t *d = device_of(device);
    VkResult r = d->vkCreateQueryPool(device, ci, a, out);
    if (r == VK_SUCCESS && ci->queryType == VK_QUERY_TYPE_PERFORMANCE_QUERY_KHR && perf_pool_cb_scope(d, ci)) {
        pthread_mutex_lock(&d->lock);
        kti_map_put(&d->perf_pools, (uint64_t)*out, (void *)1);
        pthread_mutex_unlock(&d->lock);
    }
    return r;
}

static void VKAPI_CALL hook_DestroyQueryPool(VkDevice device, VkQueryPool pool, const VkAllocationCallbacks *a)
{
    kti_device_t *d = device_of(device);
    if (pool) {
        pthread_mutex_lock(&d->lock);
        kti_map_del(&d->perf_pools, (uint64_t)pool);
        pthread_mutex_unlock(&d->lock);
    }
    d->vkDestroyQueryPool(device, pool, a);
}

/* A query of `pool` begins in cb: from a command-buffer-scope performance pool, cb is left as the program made it. */
static void query_begun(kti_device_t *d, VkCommandBuffer cb, VkQueryPool pool)
{
    kti_cmd_t *c = cmd_get(d, cb);
    if (c) {
        pthread_mutex_lock(&d->lock);
        int perf = kti_map_get(&d->perf_pools, (uint64_t)pool) != NULL;
        pthread_mutex_unlock(&d->lock);
        c->perf_scope |= perf;
    }
}

static void VKAPI_CALL hook_CmdBeginQuery(VkCommandBuffer cb, VkQueryPool pool, uint32_t query,
                                          VkQueryControlFlags flags)
{
    kti_device_t *d = device_of(cb);
    query_begun(d, cb, pool);
    d->vkCmdBeginQuery(cb, pool, query, flags);
}

/* VK_EXT_transform_feedback's begin has the same rule for performance pools
 * (VUID-vkCmdBeginQueryIndexedEXT-queryPool-03224). */
static void VKAPI_CALL hook_CmdBeginQueryIndexedEXT(VkCommandBuffer cb, VkQueryPool pool, uint32_t query,
                                                    VkQueryControlFlags flags, uint32_t index)
{
    kti_device_t *d = device_of(cb);
    query_begun(d, cb, pool);
    d->vkCmdBeginQueryIndexedEXT(cb, pool, query, flags, index);
}

static VkResult VKAPI_CALL hook_CreateCommandPool(VkDevice device, const VkCommandPoolCreateInfo *ci,
                                                  const VkAllocationCallbacks *a, VkCommandPool *out)
{
    kti_device_t *d = device_of(device);
    VkResult r = d->vkCreateCommandPool(device, ci, a, out);
    /* A protected pool's command buffers are never written to: a protected command buffer may not copy query
     * results into our (unprotected) readback buffer. Tracked all the same (KTI_POOL_PROTECTED), so their
     * dispatches are counted untimed at every submission rather than left out silently. */
    if (r == VK_SUCCESS) {
        uintptr_t v = (uintptr_t)(ci->queueFamilyIndex + 1u) |
                      ((ci->flags & VK_COMMAND_POOL_CREATE_PROTECTED_BIT) ? KTI_POOL_PROTECTED : 0u);
        pthread_mutex_lock(&d->lock);
        kti_map_put(&d->pools, (uint64_t)*out, (void *)v);
        pthread_mutex_unlock(&d->lock);
    }
    return r;
}

static void VKAPI_CALL hook_DestroyCommandPool(VkDevice device, VkCommandPool pool, const VkAllocationCallbacks *a)
{
    kti_device_t *d = device_of(device);
    if (pool) {
        size_t n;
        VkCommandBuffer *list = pool_cmds(d, pool, &n);
        for (size_t i = 0; i < n; i++)
            cmd_forget(d, list[i]);
        free(list);
        pthread_mutex_lock(&d->lock);
        kti_map_del(&d->pools, (uint64_t)pool);
        pthread_mutex_unlock(&d->lock);
    }
    d->vkDestroyCommandPool(device, pool, a);
}

/* ---------------------------------------------------------------------------------------------------
 * Pipelines and their names
 * ------------------------------------------------------------------------------------------------- */

/* FNV-1a over SPIR-V words: a name for an unnamed "main" that is the same in every run (creation order is not,
 * with pipelines created on several threads). Never 0. */
static uint64_t spirv_hash(const uint32_t *code, size_t bytes)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    const unsigned char *p = (const unsigned char *)code;
    for (size_t i = 0; code && i < bytes; i++)
        h = (h ^ p[i]) * UINT64_C(0x100000001b3);
    return h | 1u;
}

static VkResult VKAPI_CALL hook_CreateShaderModule(VkDevice device, const VkShaderModuleCreateInfo *ci,
                                                   const VkAllocationCallbacks *a, VkShaderModule *out)
{
    kti_device_t *d = device_of(device);
    VkResult r = d->vkCreateShaderModule(device, ci, a, out);
    if (r == VK_SUCCESS) {
        uint64_t h = spirv_hash(ci->pCode, ci->codeSize);
        pthread_mutex_lock(&d->lock);
        kti_map_put(&d->hashes, (uint64_t)*out, (void *)(uintptr_t)h);
        pthread_mutex_unlock(&d->lock);
    }
    return r;
}

static void VKAPI_CALL hook_DestroyShaderModule(VkDevice device, VkShaderModule m, const VkAllocationCallbacks *a)
{
    kti_device_t *d = device_of(device);
    pthread_mutex_lock(&d->lock);
    free(kti_map_del(&d->modules, (uint64_t)m));
    kti_map_del(&d->hashes, (uint64_t)m);
    pthread_mutex_unlock(&d->lock);
    d->vkDestroyShaderModule(device, m, a);
}

static VkResult VKAPI_CALL hook_CreateComputePipelines(VkDevice device, VkPipelineCache cache, uint32_t n,
                                                       const VkComputePipelineCreateInfo *ci,
                                                       const VkAllocationCallbacks *a, VkPipeline *out)
{
    kti_device_t *d = device_of(device);
    VkResult r = d->vkCreateComputePipelines(device, cache, n, ci, a, out);
    pthread_mutex_lock(&d->lock);
    for (uint32_t i = 0; i < n; i++) {
        if (!out[i])
            continue;
        kti_pipeline_t *p = calloc(1, sizeof *p);
        if (!p)
            continue;
        const char *entry = ci[i].stage.pName ? ci[i].stage.pName : "main";
        const char *module_name = kti_map_get(&d->modules, (uint64_t)ci[i].stage.module);
        uint64_t hash = (uint64_t)(uintptr_t)kti_map_get(&d->hashes, (uint64_t)ci[i].stage.module);
        for (const VkBaseInStructure *x = ci[i].stage.pNext; !hash && x; x = x->pNext) /* inline module */
            if (x->sType == VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO)
                hash = spirv_hash(((const VkShaderModuleCreateInfo *)x)->pCode,
                                  ((const VkShaderModuleCreateInfo *)x)->codeSize);
        uint32_t ordinal = ++d->compute_pipelines;
        if (module_name)
            snprintf(p->name, sizeof p->name, "%s", module_name);
        else if (strcmp(entry, "main") != 0)
            snprintf(p->name, sizeof p->name, "%s", entry);
        else if (hash)
            snprintf(p->name, sizeof p->name, "%s#%08x", entry, (unsigned)(hash >> 32));
        else
            snprintf(p->name, sizeof p->name, "main#%u", ordinal);
        p->family = UINT32_MAX;
        if (kti_map_put(&d->pipelines, (uint64_t)out[i], p) != 0)
            free(p);
    }
    pthread_mutex_unlock(&d->lock);
    return r;
}

static void VKAPI_CALL hook_DestroyPipeline(VkDevice device, VkPipeline pipeline, const VkAllocationCallbacks *a)
{
    kti_device_t *d = device_of(device);
    pthread_mutex_lock(&d->lock);
    kti_pipeline_t *p = kti_map_del(&d->pipelines, (uint64_t)pipeline);
    /* command buffers that bound it keep their copy of its name; a later pipeline with the same handle value is
     * looked up again when bound */
    atomic_fetch_add_explicit(&d->pipeline_epoch, 1, memory_order_release);
    pthread_mutex_unlock(&d->lock);
    free(p);
    d->vkDestroyPipeline(device, pipeline, a);
}

/* A debug name given to a pipeline (its kernel name from the next bind) or a shader module (the default name of
 * pipelines created from it later): by VK_EXT_debug_utils or VK_EXT_debug_marker, whichever the program uses. */
static void name_object(kti_device_t *d, int pipeline, uint64_t handle, const char *name)
{
    if (!name || !name[0])
        return;
    pthread_mutex_lock(&d->lock);
    if (pipeline) {
        kti_pipeline_t *p = kti_map_get(&d->pipelines, handle);
        if (p) {
            snprintf(p->name, sizeof p->name, "%s", name);
            p->family = UINT32_MAX; /* re-resolve the kernel id under the new name */
            atomic_fetch_add_explicit(&d->pipeline_epoch, 1, memory_order_release); /* at the next bind */
        }
    } else {
        size_t len = strlen(name) + 1;
        char *copy = malloc(len);
        if (copy) {
            memcpy(copy, name, len);
            free(kti_map_del(&d->modules, handle));
            if (kti_map_put(&d->modules, handle, copy) != 0)
                free(copy);
        }
    }
    pthread_mutex_unlock(&d->lock);
}

static VkResult VKAPI_CALL hook_SetDebugUtilsObjectNameEXT(VkDevice device, const VkDebugUtilsObjectNameInfoEXT *ni)
{
    kti_device_t *d = device_of(device);
    if (ni && (ni->objectType == VK_OBJECT_TYPE_PIPELINE || ni->objectType == VK_OBJECT_TYPE_SHADER_MODULE))
        name_object(d, ni->objectType == VK_OBJECT_TYPE_PIPELINE, ni->objectHandle, ni->pObjectName);
    return d->vkSetDebugUtilsObjectNameEXT ? d->vkSetDebugUtilsObjectNameEXT(device, ni) : VK_SUCCESS;
}

static VkResult VKAPI_CALL hook_DebugMarkerSetObjectNameEXT(VkDevice device, const VkDebugMarkerObjectNameInfoEXT *ni)
{
    kti_device_t *d = device_of(device);
    if (ni && (ni->objectType == VK_DEBUG_REPORT_OBJECT_TYPE_PIPELINE_EXT ||
               ni->objectType == VK_DEBUG_REPORT_OBJECT_TYPE_SHADER_MODULE_EXT))
        name_object(d, ni->objectType == VK_DEBUG_REPORT_OBJECT_TYPE_PIPELINE_EXT, ni->object, ni->pObjectName);
    return d->vkDebugMarkerSetObjectNameEXT ? d->vkDebugMarkerSetObjectNameEXT(device, ni) : VK_SUCCESS;
}

/* ---------------------------------------------------------------------------------------------------
 * Submissions and waits
 * ------------------------------------------------------------------------------------------------- */

static VkResult VKAPI_CALL hook_QueueSubmit(VkQueue q, uint32_t n, const VkSubmitInfo *si, VkFence fence)
{
    kti_device_t *d = device_of(q);
    kt_vk_ctx_t *ctx = NULL;
    for (uint32_t i = 0; i < n && !ctx; i++)
        for (uint32_t k = 0; k < si[i].commandBufferCount && !ctx; k++)
            ctx = submit_ctx(d, si[i].pCommandBuffers[k]);
    static kt_kernel_id_t api_site;
    kt_zone_t api = kti_wait_begin(&api_site, "vkQueueSubmit"); /* host API time, ktiming's own work included */
    VkResult r = ctx ? kt_vk_queue_submit(ctx, q, n, si, fence) : d->vkQueueSubmit(q, n, si, fence);
    kt_zone_end(&api);
    /* A failed submission executes nothing: not counted as one (a re-execution would be counted dropped). */
    for (uint32_t i = 0; r == VK_SUCCESS && i < n; i++)
        for (uint32_t k = 0; k < si[i].commandBufferCount; k++)
            cmd_submitted(d, si[i].pCommandBuffers[k]);
    if (r == VK_ERROR_DEVICE_LOST)
        device_lost(d);
    collect_device(d);
    return r;
}

static VkResult submit2(kti_device_t *d, PFN_vkQueueSubmit2 next, VkQueue q, uint32_t n, const VkSubmitInfo2 *si,
                        VkFence fence)
{
    kt_vk_ctx_t *ctx = NULL;
    for (uint32_t i = 0; i < n && !ctx; i++)
        for (uint32_t k = 0; k < si[i].commandBufferInfoCount && !ctx; k++)
            ctx = submit_ctx(d, si[i].pCommandBufferInfos[k].commandBuffer);
    static kt_kernel_id_t api_site;
    kt_zone_t api = kti_wait_begin(&api_site, "vkQueueSubmit2");
    VkResult r = ctx ? kt_vk_queue_submit2(ctx, q, n, si, fence) : next(q, n, si, fence);
    kt_zone_end(&api);
    for (uint32_t i = 0; r == VK_SUCCESS && i < n; i++)
        for (uint32_t k = 0; k < si[i].commandBufferInfoCount; k++)
            cmd_submitted(d, si[i].pCommandBufferInfos[k].commandBuffer);
    if (r == VK_ERROR_DEVICE_LOST)
        device_lost(d);
    collect_device(d);
    return r;
}

static VkResult VKAPI_CALL hook_QueueSubmit2(VkQueue q, uint32_t n, const VkSubmitInfo2 *si, VkFence fence)
{
    kti_device_t *d = device_of(q);
    return submit2(d, d->vkQueueSubmit2, q, n, si, fence);
}

static VkResult VKAPI_CALL hook_QueueSubmit2KHR(VkQueue q, uint32_t n, const VkSubmitInfo2 *si, VkFence fence)
{
    kti_device_t *d = device_of(q);
    return submit2(d, d->vkQueueSubmit2KHR, q, n, si, fence);
}

/* After a queue or device idle wait (its API zone still open): the zone ends; lost: pending slots counted
 * `device lost`; the rings are read either way. Returns r. */
static VkResult idle_waited(kti_device_t *d, kt_zone_t *api, VkResult r)
{
    kt_zone_end(api);
    if (r == VK_ERROR_DEVICE_LOST)
        device_lost(d);
    collect_device(d);
    return r;
}

/* After a fence wait or status query. Lost: pending slots counted `device lost`; collected only when the wait
 * succeeded (a VK_TIMEOUT poll with a zero timeout, or VK_NOT_READY, must not read the rings on every call).
 * Returns r. */
static VkResult fence_waited(kti_device_t *d, VkResult r)
{
    if (r == VK_ERROR_DEVICE_LOST)
        device_lost(d);
    else if (r == VK_SUCCESS)
        collect_device(d);
    return r;
}

static VkResult VKAPI_CALL hook_QueueWaitIdle(VkQueue q)
{
    kti_device_t *d = device_of(q);
    static kt_kernel_id_t api_site;
    kt_zone_t api = kti_wait_begin(&api_site, "vkQueueWaitIdle");
    return idle_waited(d, &api, d->vkQueueWaitIdle(q));
}

static VkResult VKAPI_CALL hook_DeviceWaitIdle(VkDevice device)
{
    kti_device_t *d = device_of(device);
    static kt_kernel_id_t api_site;
    kt_zone_t api = kti_wait_begin(&api_site, "vkDeviceWaitIdle");
    return idle_waited(d, &api, d->vkDeviceWaitIdle(device));
}

static VkResult VKAPI_CALL hook_WaitForFences(VkDevice device, uint32_t n, const VkFence *f, VkBool32 all,
                                              uint64_t timeout)
{
    kti_device_t *d = device_of(device);
    static kt_kernel_id_t api_site;
    kt_zone_t api = kti_wait_begin(&api_site, "vkWaitForFences");
    VkResult r = d->vkWaitForFences(device, n, f, all, timeout);
    kt_zone_end(&api);
    return fence_waited(d, r);
}

static VkResult VKAPI_CALL hook_GetFenceStatus(VkDevice device, VkFence f)
{
    kti_device_t *d = device_of(device);
    return fence_waited(d, d->vkGetFenceStatus(device, f));
}

/* Timeline semaphore waits (core 1.2 and KHR): a wait that succeeded saw device work complete, as a fence wait. */
static VkResult semaphores_waited(VkDevice device, const VkSemaphoreWaitInfo *wi, uint64_t timeout, int khr)
{
    kti_device_t *d = device_of(device);
    static kt_kernel_id_t sites[2];
    kt_zone_t api = kti_wait_begin(&sites[khr], khr ? "vkWaitSemaphoresKHR" : "vkWaitSemaphores");
    VkResult r = (khr ? d->vkWaitSemaphoresKHR : d->vkWaitSemaphores)(device, wi, timeout);
    kt_zone_end(&api);
    return fence_waited(d, r);
}

static VkResult VKAPI_CALL hook_WaitSemaphores(VkDevice device, const VkSemaphoreWaitInfo *wi, uint64_t timeout)
{
    return semaphores_waited(device, wi, timeout, 0);
}

static VkResult VKAPI_CALL hook_WaitSemaphoresKHR(VkDevice device, const VkSemaphoreWaitInfo *wi, uint64_t timeout)
{
    return semaphores_waited(device, wi, timeout, 1);
}

/* Calls that report VK_ERROR_DEVICE_LOST without waiting for ktiming's work: the loss is noted (pending dispatches
 * counted `device lost`, nothing more waited for at exit); nothing is collected (they may be polled in a loop).
 * Before, a loss seen only here left the pending work to be counted `never submitted` at vkDestroyDevice, or
 * waited for (2 s) at exit as `in flight at exit`. */
static VkResult lost_check(kti_device_t *d, VkResult r)
{
    if (r == VK_ERROR_DEVICE_LOST)
        device_lost(d);
    return r;
}

static VkResult VKAPI_CALL hook_GetSemaphoreCounterValue(VkDevice device, VkSemaphore sem, uint64_t *value)
{
    kti_device_t *d = device_of(device);
    return lost_check(d, d->vkGetSemaphoreCounterValue(device, sem, value));
}

static VkResult VKAPI_CALL hook_GetSemaphoreCounterValueKHR(VkDevice device, VkSemaphore sem, uint64_t *value)
{
    kti_device_t *d = device_of(device);
    return lost_check(d, d->vkGetSemaphoreCounterValueKHR(device, sem, value));
}

static VkResult VKAPI_CALL hook_QueuePresentKHR(VkQueue q, const VkPresentInfoKHR *pi)
{
    kti_device_t *d = device_of(q);
    return lost_check(d, d->vkQueuePresentKHR(q, pi));
}

static VkResult VKAPI_CALL hook_AcquireNextImageKHR(VkDevice device, VkSwapchainKHR sc, uint64_t timeout,
                                                    VkSemaphore sem, VkFence f, uint32_t *index)
{
    kti_device_t *d = device_of(device);
    return lost_check(d, d->vkAcquireNextImageKHR(device, sc, timeout, sem, f, index));
}

static VkResult VKAPI_CALL hook_AcquireNextImage2KHR(VkDevice device, const VkAcquireNextImageInfoKHR *ai,
                                                     uint32_t *index)
{
    kti_device_t *d = device_of(device);
    return lost_check(d, d->vkAcquireNextImage2KHR(device, ai, index));
}

static VkResult VKAPI_CALL hook_QueueBindSparse(VkQueue q, uint32_t n, const VkBindSparseInfo *bi, VkFence f)
{
    kti_device_t *d = device_of(q);
    return lost_check(d, d->vkQueueBindSparse(q, n, bi, f));
}

/* ---------------------------------------------------------------------------------------------------
 * Device and instance creation
 * ------------------------------------------------------------------------------------------------- */

/* Whether the program's device create info enables hostQueryReset. */
static int enables_host_query_reset(const VkDeviceCreateInfo *ci)
{
    for (const VkBaseInStructure *s = ci->pNext; s; s = s->pNext) {
        if (s->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_HOST_QUERY_RESET_FEATURES &&
            ((const VkPhysicalDeviceHostQueryResetFeatures *)s)->hostQueryReset)
            return 1;
        if (s->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES &&
            ((const VkPhysicalDeviceVulkan12Features *)s)->hostQueryReset)
            return 1;
    }
    return 0;
}

static const char *const kCalibrationExts[2] = {"VK_KHR_calibrated_timestamps",
                                                VK_EXT_CALIBRATED_TIMESTAMPS_EXTENSION_NAME};

/* Which calibrated-timestamps extension the program enabled itself. */
static kt_vk_calibration_t enabled_calibration(const VkDeviceCreateInfo *ci)
{
    for (uint32_t i = 0; i < ci->enabledExtensionCount; i++) {
        if (!strcmp(ci->ppEnabledExtensionNames[i], kCalibrationExts[0]))
            return KT_VK_CALIBRATION_KHR;
        if (!strcmp(ci->ppEnabledExtensionNames[i], kCalibrationExts[1]))
            return KT_VK_CALIBRATION_EXT;
    }
    return KT_VK_CALIBRATION_NONE;
}

/* g_lock held: d's slot among its physical device's live VkDevices is free again. */
static void slot_release_locked(const kti_device_t *d)
{
    uint64_t key = (uint64_t)(uintptr_t)d->physical_device;
    uint64_t held = (uint64_t)(uintptr_t)kti_map_get(&g_pd_slots, key) & ~(UINT64_C(1) << d->slot);
    if (held)
        kti_map_put(&g_pd_slots, key, (void *)(uintptr_t)held);
    else
        kti_map_del(&g_pd_slots, key);
}

/* The calibrated-timestamps extension we may add to the program's device, or NULL. Both depend on
 * VK_KHR_get_physical_device_properties2 or Vulkan 1.1 (VUID-vkCreateDevice-ppEnabledExtensionNames-01387): the
 * program's instance must have enabled the former, or asked for apiVersion >= 1.1 on a device that has it.
 * Adding the dependency ourselves would change the program's instance, so where neither holds the device is left
 * as the program made it and dispatches are timed by durations (bracketing needs a submission of ours). */
static const char *addable_calibration_ext(kti_instance_t *inst, VkPhysicalDevice pd, const VkDeviceCreateInfo *ci)
{
    if (enabled_calibration(ci) != KT_VK_CALIBRATION_NONE)
        return NULL;
    int legal = inst->props2;
    if (!legal && inst->api_version >= VK_API_VERSION_1_1 && inst->props) {
        VkPhysicalDeviceProperties p;
        inst->props(pd, &p);
        legal = p.apiVersion >= VK_API_VERSION_1_1;
    }
    uint32_t n = 0;
    if (!legal || !inst->enum_ext || inst->enum_ext(pd, NULL, &n, NULL) != VK_SUCCESS || n == 0)
        return NULL;
    VkExtensionProperties *props = calloc(n, sizeof *props);
    const char *found = NULL;
    if (props && inst->enum_ext(pd, NULL, &n, props) == VK_SUCCESS)
        for (int k = 0; k < 2 && !found; k++)
            for (uint32_t i = 0; i < n && !found; i++)
                if (!strcmp(props[i].extensionName, kCalibrationExts[k]))
                    found = kCalibrationExts[k];
    free(props);
    return found;
}

static VkResult VKAPI_CALL hook_CreateDevice(VkPhysicalDevice pd, const VkDeviceCreateInfo *ci,
                                             const VkAllocationCallbacks *a, VkDevice *out)
{
    VkLayerDeviceCreateInfo *link = (VkLayerDeviceCreateInfo *)ci->pNext;
    while (link && !(link->sType == VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO && link->function == VK_LAYER_LINK_INFO))
        link = (VkLayerDeviceCreateInfo *)link->pNext;
    kti_instance_t *inst = instance_of(pd);
    if (!link || !inst)
        return VK_ERROR_INITIALIZATION_FAILED;
    PFN_vkSetDeviceLoaderData set_loader_data = NULL;
    for (const VkLayerDeviceCreateInfo *l = ci->pNext; l; l = (const VkLayerDeviceCreateInfo *)l->pNext)
        if (l->sType == VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO && l->function == VK_LOADER_DATA_CALLBACK)
            set_loader_data = l->u.pfnSetDeviceLoaderData;
    PFN_vkGetInstanceProcAddr gipa = link->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    PFN_vkGetDeviceProcAddr gdpa = link->u.pLayerInfo->pfnNextGetDeviceProcAddr;
    link->u.pLayerInfo = link->u.pLayerInfo->pNext;
    VkLayerDeviceLink *below = link->u.pLayerInfo; /* the next layer advances it again: restore for a retry */
    PFN_vkCreateDevice create = (PFN_vkCreateDevice)gipa(inst->instance, "vkCreateDevice");
    if (!create)
        return VK_ERROR_INITIALIZATION_FAILED;

    VkResult r = VK_ERROR_INITIALIZATION_FAILED;
    const char *add = addable_calibration_ext(inst, pd, ci);
    kt_vk_calibration_t calibration = enabled_calibration(ci);
    if (add) {
        const char **names = malloc((ci->enabledExtensionCount + 1) * sizeof *names);
        if (names) {
            if (ci->enabledExtensionCount)
                memcpy(names, ci->ppEnabledExtensionNames, ci->enabledExtensionCount * sizeof *names);
            names[ci->enabledExtensionCount] = add;
            VkDeviceCreateInfo mine = *ci;
            mine.enabledExtensionCount = ci->enabledExtensionCount + 1;
            mine.ppEnabledExtensionNames = names;
            r = create(pd, &mine, a, out);
            free(names);
        }
    }
    if (add && r == VK_SUCCESS)
        calibration = add == kCalibrationExts[0] ? KT_VK_CALIBRATION_KHR : KT_VK_CALIBRATION_EXT;
    if (!add || r != VK_SUCCESS) {
        link->u.pLayerInfo = below;
        r = create(pd, ci, a, out); /* as the program asked */
    }
    if (r != VK_SUCCESS)
        return r;

    kti_device_t *d = calloc(1, sizeof *d);
    if (!d) { /* every hook needs the record: a clean failure rather than a device we can't serve */
        PFN_vkDestroyDevice destroy = (PFN_vkDestroyDevice)gdpa(*out, "vkDestroyDevice");
        if (destroy)
            destroy(*out, a);
        return VK_ERROR_OUT_OF_HOST_MEMORY;
    }
    pthread_mutex_init(&d->lock, NULL);
    atomic_init(&d->pipeline_epoch, 1);
    d->device = *out;
    d->physical_device = pd;
    d->instance = inst->instance;
    d->next_gipa = gipa;
    d->next_gdpa = gdpa;
    d->host_query_reset = enables_host_query_reset(ci);
    d->set_loader_data = kt__env(KT_ENV_NAME(VULKAN_ONCE)) ? NULL : set_loader_data;
    d->calibration = calibration;
    snprintf(d->model, sizeof d->model, "Vulkan device");
    if (inst->props) {
        VkPhysicalDeviceProperties p;
        inst->props(pd, &p);
        snprintf(d->model, sizeof d->model, "%s", p.deviceName);
    }
    pthread_mutex_lock(&g_lock);
    uint64_t held = (uint64_t)(uintptr_t)kti_map_get(&g_pd_slots, (uint64_t)(uintptr_t)pd);
    while (d->slot < 63 && (held >> d->slot & 1u))
        d->slot++;
    kti_map_put(&g_pd_slots, (uint64_t)(uintptr_t)pd, (void *)(uintptr_t)(held | UINT64_C(1) << d->slot));
    pthread_mutex_unlock(&g_lock);
    d->api_version = inst->api_version;
    d->instance_extensions = (inst->props2 ? KT_VK_INSTANCE_PROPERTIES2 : 0u) |
                             (inst->ext_mem_caps ? KT_VK_INSTANCE_EXTERNAL_MEMORY_CAPABILITIES : 0u);
#define KTI_LOAD(fn) d->fn = (PFN_##fn)gdpa(*out, #fn);
    KTI_DEVICE_HOOKS(KTI_LOAD)
#undef KTI_LOAD
    pthread_mutex_lock(&g_lock);
    int put = kti_map_put(&g_devices, dispatch_key(*out), d);
    pthread_mutex_unlock(&g_lock);
    if (put != 0) {
        pthread_mutex_lock(&g_lock);
        slot_release_locked(d);
        pthread_mutex_unlock(&g_lock);
        d->vkDestroyDevice(*out, a);
        pthread_mutex_destroy(&d->lock);
        free(d);
        return VK_ERROR_OUT_OF_HOST_MEMORY;
    }
    return r;
}

/* g_lock held: a dispatchable handle's entry taken out of its global map (NULL when not tracked); the map's
 * memory goes once it is empty, so a program that destroys everything leaves nothing behind. */
static void *map_take_locked(kti_map_t *m, uint64_t key)
{
    void *v = kti_map_del(m, key);
    if (!m->n)
        kti_map_free(m);
    return v;
}

static void VKAPI_CALL hook_DestroyDevice(VkDevice device, const VkAllocationCallbacks *a)
{
    if (!device)
        return;
    pthread_mutex_lock(&g_lock);
    kti_device_t *d = map_take_locked(&g_devices, dispatch_key(device));
    if (d) { /* before anything is freed: no thread's cache answers with the device (its records: cmd_free) */
        slot_release_locked(d);
        atomic_fetch_add_explicit(&g_device_epoch, 1, memory_order_release);
    }
    pthread_mutex_unlock(&g_lock);
    if (!d)
        return;
    /* The program may destroy its device with work still in flight (the driver's vkDestroyDevice drains it). Our
     * query pool and readback buffer are written by that work: wait for it through the next layer before
     * collecting and freeing them, so what finished is recorded and nothing we free is still written. */
    if (d->vkDeviceWaitIdle && d->vkDeviceWaitIdle(device) == VK_ERROR_DEVICE_LOST)
        device_lost(d); /* what is pending will never complete: `device lost`, not `never submitted` */
    for (size_t i = 0; i < d->cmds.cap; i++)
        if (d->cmds.keys[i])
            cmd_free(d->cmds.vals[i]);
    for (uint32_t f = 0; f < KTI_MAX_FAMILIES; f++)
        kt_vk_ctx_destroy(d->ctx[f]); /* collects what completed: the device is idle */
    for (size_t i = 0; i < d->pipelines.cap; i++)
        if (d->pipelines.keys[i])
            free(d->pipelines.vals[i]);
    for (size_t i = 0; i < d->modules.cap; i++)
        if (d->modules.keys[i])
            free(d->modules.vals[i]);
    kti_map_free(&d->pipelines);
    kti_map_free(&d->modules);
    kti_map_free(&d->hashes);
    kti_map_free(&d->pools);
    kti_map_free(&d->perf_pools);
    kti_map_free(&d->cmds);
    PFN_vkDestroyDevice destroy = d->vkDestroyDevice;
    pthread_mutex_destroy(&d->lock);
    free(d);
    destroy(device, a);
}

static VkResult VKAPI_CALL hook_CreateInstance(const VkInstanceCreateInfo *ci, const VkAllocationCallbacks *a,
                                               VkInstance *out)
{
    VkLayerInstanceCreateInfo *link = (VkLayerInstanceCreateInfo *)ci->pNext;
    while (link &&
           !(link->sType == VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO && link->function == VK_LAYER_LINK_INFO))
        link = (VkLayerInstanceCreateInfo *)link->pNext;
    if (!link)
        return VK_ERROR_INITIALIZATION_FAILED;
    PFN_vkGetInstanceProcAddr gipa = link->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    link->u.pLayerInfo = link->u.pLayerInfo->pNext;
    PFN_vkCreateInstance create = (PFN_vkCreateInstance)gipa(VK_NULL_HANDLE, "vkCreateInstance");
    if (!create)
        return VK_ERROR_INITIALIZATION_FAILED;
    VkResult r = create(ci, a, out);
    if (r != VK_SUCCESS)
        return r;
    kti_instance_t *i = calloc(1, sizeof *i);
    if (i) {
        i->instance = *out;
        i->next_gipa = gipa;
        i->destroy = (PFN_vkDestroyInstance)gipa(*out, "vkDestroyInstance");
        i->enum_ext = (PFN_vkEnumerateDeviceExtensionProperties)gipa(*out, "vkEnumerateDeviceExtensionProperties");
        i->props = (PFN_vkGetPhysicalDeviceProperties)gipa(*out, "vkGetPhysicalDeviceProperties");
        i->api_version = ci->pApplicationInfo && ci->pApplicationInfo->apiVersion ? ci->pApplicationInfo->apiVersion
                                                                                  : VK_API_VERSION_1_0;
        for (uint32_t k = 0; k < ci->enabledExtensionCount; k++) {
            i->props2 |= !strcmp(ci->ppEnabledExtensionNames[k], "VK_KHR_get_physical_device_properties2");
            i->ext_mem_caps |= !strcmp(ci->ppEnabledExtensionNames[k], "VK_KHR_external_memory_capabilities");
        }
        pthread_mutex_lock(&g_lock);
        if (kti_map_put(&g_instances, dispatch_key(*out), i) != 0) {
            free(i);
            i = NULL;
        }
        pthread_mutex_unlock(&g_lock);
    }
    if (!i) { /* cannot track it: undo, so the program sees a clean failure rather than a half-layered instance */
        PFN_vkDestroyInstance destroy = (PFN_vkDestroyInstance)gipa(*out, "vkDestroyInstance");
        if (destroy)
            destroy(*out, a);
        return VK_ERROR_OUT_OF_HOST_MEMORY;
    }
    return r;
}

static void VKAPI_CALL hook_DestroyInstance(VkInstance instance, const VkAllocationCallbacks *a)
{
    if (!instance)
        return;
    pthread_mutex_lock(&g_lock);
    kti_instance_t *i = map_take_locked(&g_instances, dispatch_key(instance));
    pthread_mutex_unlock(&g_lock);
    if (!i)
        return;
    PFN_vkDestroyInstance destroy = i->destroy;
    free(i);
    destroy(instance, a);
}

/* ---------------------------------------------------------------------------------------------------
 * Proc addresses and the loader interface
 * ------------------------------------------------------------------------------------------------- */

/* A device hook by name. */
typedef struct kti_hook_t {
    const char *name;      /* Vulkan name */
    PFN_vkVoidFunction fn; /* ours */
} kti_hook_t;

#define KTI_HOOK(name) {"vk" #name, (PFN_vkVoidFunction)hook_##name}
static const kti_hook_t kDeviceHooks[] = {
    KTI_HOOK(DestroyDevice),         KTI_HOOK(CreateComputePipelines), KTI_HOOK(DestroyPipeline),
    KTI_HOOK(DestroyShaderModule),    KTI_HOOK(CreateShaderModule),     KTI_HOOK(CreateCommandPool),
    KTI_HOOK(DestroyCommandPool),    KTI_HOOK(ResetCommandPool),       KTI_HOOK(AllocateCommandBuffers),
    KTI_HOOK(FreeCommandBuffers),    KTI_HOOK(BeginCommandBuffer),     KTI_HOOK(ResetCommandBuffer),
    KTI_HOOK(EndCommandBuffer),
    KTI_HOOK(CmdBindPipeline),       KTI_HOOK(CmdDispatch),            KTI_HOOK(CmdDispatchIndirect),
    KTI_HOOK(CmdExecuteCommands),    KTI_HOOK(QueueSubmit),            KTI_HOOK(QueueSubmit2),
    KTI_HOOK(QueueSubmit2KHR),       KTI_HOOK(QueueWaitIdle),          KTI_HOOK(DeviceWaitIdle),
    KTI_HOOK(WaitForFences),         KTI_HOOK(GetFenceStatus),         KTI_HOOK(SetDebugUtilsObjectNameEXT),
    KTI_HOOK(CmdBindShadersEXT),     KTI_HOOK(DebugMarkerSetObjectNameEXT),
    KTI_HOOK(CmdBeginRendering),     KTI_HOOK(CmdBeginRenderingKHR),   KTI_HOOK(CmdEndRendering),
    KTI_HOOK(CmdEndRenderingKHR),    KTI_HOOK(CreateQueryPool),        KTI_HOOK(DestroyQueryPool),
    KTI_HOOK(CmdBeginQuery),         KTI_HOOK(CmdBeginQueryIndexedEXT), KTI_HOOK(WaitSemaphores),
    KTI_HOOK(WaitSemaphoresKHR),     KTI_HOOK(GetSemaphoreCounterValue), KTI_HOOK(GetSemaphoreCounterValueKHR),
    KTI_HOOK(QueuePresentKHR),       KTI_HOOK(AcquireNextImageKHR),    KTI_HOOK(AcquireNextImage2KHR),
    KTI_HOOK(QueueBindSparse),
    {"vkCmdDispatchBase", (PFN_vkVoidFunction)hook_CmdDispatchBase},
    {"vkCmdDispatchBaseKHR", (PFN_vkVoidFunction)hook_CmdDispatchBase},
};
#undef KTI_HOOK

static PFN_vkVoidFunction device_hook(const char *name)
{
    for (size_t i = 0; i < sizeof kDeviceHooks / sizeof kDeviceHooks[0]; i++)
        if (!strcmp(name, kDeviceHooks[i].name))
            return kDeviceHooks[i].fn;
    return NULL;
}

static PFN_vkVoidFunction VKAPI_CALL layer_gdpa(VkDevice device, const char *name);

static PFN_vkVoidFunction VKAPI_CALL layer_gipa(VkInstance instance, const char *name)
{
    if (!strcmp(name, "vkGetInstanceProcAddr"))
        return (PFN_vkVoidFunction)layer_gipa;
    if (!strcmp(name, "vkGetDeviceProcAddr"))
        return (PFN_vkVoidFunction)layer_gdpa;
    if (!strcmp(name, "vkCreateInstance"))
        return (PFN_vkVoidFunction)hook_CreateInstance;
    if (!strcmp(name, "vkDestroyInstance"))
        return (PFN_vkVoidFunction)hook_DestroyInstance;
    if (!strcmp(name, "vkCreateDevice"))
        return (PFN_vkVoidFunction)hook_CreateDevice;
    kti_instance_t *i = instance ? instance_of(instance) : NULL;
    if (!i)
        return NULL;
    PFN_vkVoidFunction next = i->next_gipa(instance, name);
    /* device functions fetched through the instance: ours, when the driver has the function at all */
    PFN_vkVoidFunction hook = next ? device_hook(name) : NULL;
    return hook ? hook : next;
}

static PFN_vkVoidFunction VKAPI_CALL layer_gdpa(VkDevice device, const char *name)
{
    if (!strcmp(name, "vkGetDeviceProcAddr"))
        return (PFN_vkVoidFunction)layer_gdpa;
    kti_device_t *d = device ? device_of(device) : NULL;
    if (!d)
        return NULL;
    PFN_vkVoidFunction next = d->next_gdpa(device, name);
    PFN_vkVoidFunction hook = next ? device_hook(name) : NULL;
    return hook ? hook : next;
}

KTI_EXPORT VKAPI_ATTR VkResult VKAPI_CALL vkNegotiateLoaderLayerInterfaceVersion(VkNegotiateLayerInterface *v)
{
    if (!v || v->sType != LAYER_NEGOTIATE_INTERFACE_STRUCT || v->loaderLayerInterfaceVersion < 2)
        return VK_ERROR_INITIALIZATION_FAILED;
    v->loaderLayerInterfaceVersion = 2;
    v->pfnGetInstanceProcAddr = layer_gipa;
    v->pfnGetDeviceProcAddr = layer_gdpa;
    v->pfnGetPhysicalDeviceProcAddr = NULL;
    return VK_SUCCESS;
}
