/* ktiming/vk.h — Vulkan backend: timestamp queries around dispatches, non-blocking collection, clock mapping.
 *
 * Vulkan is never linked: ktiming dlopen()s libvulkan.so.1 (env KTIMING_VULKAN_LIBRARY overrides the path, or
 * pass your own vkGetInstanceProcAddr in the desc) and fetches every function through vkGet*ProcAddr. Only the
 * Vulkan headers are needed to compile against this header.
 *
 *     kt_vk_ctx_t *kv;
 *     kt_vk_ctx_create(&(kt_vk_desc_t){.instance = inst, .physical_device = pd, .device = dev,
 *                                      .queue_family = qf, .queue = q, .host_query_reset = 1}, &kv);
 *     vkBeginCommandBuffer(cmd, &bi);
 *     kt_vk_begin(kv, cmd, "blur");          // timestamp before
 *     vkCmdDispatch(cmd, gx, gy, 1);
 *     kt_vk_end(kv, cmd);                    // timestamp after, results copied to ktiming's readback buffer
 *     vkEndCommandBuffer(cmd);
 *     vkQueueSubmit(q, 1, &si, fence);
 *     ...
 *     kt_vk_collect(kv);                     // any time, any thread: records what has completed, never waits
 *     kt_vk_ctx_destroy(kv);                 // before vkDestroyDevice, once the timed work has finished
 *
 * One context per (device, queue family). It owns a ring of `ring_size` slots; each slot is two timestamp
 * queries (begin, end).
 *
 * Collection rule (why kt_vk_collect never blocks): kt_vk_collect() only moves results that are already on
 * the host into the recorder, oldest first, resuming at the oldest slot not yet collected. It never asks the
 * driver for query results. How results reach the host is the readback mode:
 *   KT_VK_READBACK_THREAD  one collector thread (for all contexts) polls the outstanding slots with
 *       vkGetQueryPoolResults (availability, no WAIT) every poll_us while some are outstanding, sleeps
 *       otherwise, and parks what it read in the ring. Nothing changes in the command stream.
 *   KT_VK_READBACK_COPY    kt_vk_end() also records a vkCmdCopyQueryPoolResults of its slot (64-bit values
 *       + availability, WAIT) into a host-visible coherent buffer and a TRANSFER->HOST barrier (with
 *       desc.copy_at_end, kt_vk_cmd_end() records all of a command buffer's copies once, at its end);
 *       kt_vk_collect() reads that memory. No thread and no driver call at collection, but the copy waits on the device for
 *       the slot's timestamps, which serialises timed dispatches on a GPU. Reads made before the application
 *       waited on the submission's fence rely on coherent memory (how readback works on desktop drivers);
 *       after that wait they are visible by the Vulkan memory model.
 *   KT_VK_READBACK_AUTO (default) COPY on CPU implementations (VK_PHYSICAL_DEVICE_TYPE_CPU: lavapipe,
 *       SwiftShader), THREAD on GPUs. lavapipe's vkGetQueryPoolResults waits for the whole device to go idle
 *       even without VK_QUERY_RESULT_WAIT_BIT and even for queries that completed long ago (so a fence check
 *       before reading would not help), which lets a polling thread fall behind a busy queue until the ring
 *       fills, and it reads the pool's query objects while the queue thread replaces them; dispatches run one
 *       after the other there anyway, so the copies change nothing about execution.
 * kt_vk_collect_wait() is the one collection call that waits: after the application waited for its work, it
 * asks the collector for a fresh pass and waits for it (bounded) before collecting.
 *
 * Resets: kt_vk_begin() records a vkCmdResetQueryPool of its two queries just before the begin timestamp.
 * Resetting on the host right after reading (hostQueryReset) would save that command but is only valid once the
 * whole submission that wrote the queries has completed (VUID-vkResetQueryPool-firstQuery-02741), which ktiming
 * cannot know without the application's fence (the validation layer flags it). hostQueryReset is used for the
 * one reset of the whole pool at creation when the application enabled it (say so in host_query_reset);
 * otherwise that reset is a submission on desc.queue, and with neither the context uses COPY readback.
 * Until a reused slot's reset has run, the collector thread sees the previous use's values: it recognises them
 * (device timestamps never repeat) and waits for the new ones. It knows them because a slot is released only
 * after its values were read, or (kt_vk_discard) after its command buffer was found never executed.
 *
 * Every execution (desc.per_submission): a command buffer recorded once and submitted many times, as engines
 * and benchmarks do, is timed at every execution when it is submitted with kt_vk_queue_submit (or _submit2).
 * Each batch is bracketed by two command buffers of ktiming's own (unless it is one one-time primary that times
 * itself: kt_vk_cmd_begin): the first writes a timestamp, the last writes another and copies the timestamps of
 * every slot of the batch's primaries (WAIT) into a record of that execution; a fence of ktiming's (the
 * submission's own when the application passed none, else an empty submission right after) says when those
 * command buffers can be reused. The application's command buffers carry only resets and timestamps, so
 * nothing waits between its dispatches. Each batch is also recorded as a span of its own, kernel
 * "vkQueueSubmit", on the queue's track. Secondary command buffers: call
 * kt_vk_cmd_execute after each vkCmdExecuteCommands (every occurrence is then timed at every execution; the
 * primary waits for them at that point), or kt_vk_cmd_end before their vkEndCommandBuffer (timed once). A
 * primary submitted without kt_vk_queue_submit is not read; kt_vk_discard counts its slots as never submitted.
 *
 * Rules for the application:
 *   - kt_vk_begin/kt_vk_end go outside render pass instances (compute), in a command buffer of the context's
 *     queue family; pairs nest (up to 8 deep per command buffer); each begin needs its end in the same
 *     command buffer.
 *   - A command buffer carrying slots is submitted once (ONE_TIME_SUBMIT), unless desc.per_submission is set
 *     and it is submitted with kt_vk_queue_submit (below): otherwise re-submitting it rewrites the same slots. Before you re-begin, reset or free a command buffer, call kt_vk_discard(): it reads what the
 *     buffer's execution wrote (it is not pending any more) and counts the rest as dropped, never submitted.
 *     Without it the slots stay pending; they pin only themselves, the other slots keep being reused.
 *   - A full ring (slots still pending) drops the dispatch: counted in `dropped`, never an overwritten slot.
 *   - Destroy the context after the command buffers using it have completed and before vkDestroyDevice.
 *   - kt_flush() and kt_snapshot() record what has completed (a fresh collector pass, bounded); kt_shutdown()
 *     and process exit wait up to KTIMING_EXIT_WAIT_MS (default 2000) for every slot still outstanding, record
 *     it, and count the rest as dropped with the reason "in flight at exit".
 *
 * Timestamps: durations are (end - begin) modulo 2^timestampValidBits times timestampPeriod. Placement on
 * the host timeline (CLOCK_MONOTONIC_RAW) uses VK_KHR/EXT_calibrated_timestamps when the device has it
 * enabled (desc.calibration says which; AUTO: the one the physical device reports; host domain
 * CLOCK_MONOTONIC_RAW, else CLOCK_MONOTONIC converted with kt_clock_domain_convert):
 * bursts of samples with bounded retries, maxDeviation as each sample's bracket, a refit every
 * recalibrate_ns from collect. Without it, the model is fitted from timestamps bracketed by host reads around
 * a tiny submission on desc.queue, at creation and on kt_vk_recalibrate() (its error bound grows with age).
 * Each span carries the model's error bound as uncertainty_ns.
 *
 * Thread safety: kt_vk_begin/end/collect/discard may be called from any thread concurrently (command buffers
 * are, as Vulkan requires, used by one thread at a time). kt_vk_recalibrate and primitives submit to
 * desc.queue: the caller must hold that queue as for vkQueueSubmit.
 */
#ifndef KTIMING_VK_H
#define KTIMING_VK_H

#include <ktiming.h>
#include <ktiming/clock_model.h>
#include <ktiming/primitive.h>
#include <vulkan/vulkan_core.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KT_VK_RING_DEFAULT 4096u

/* How query results reach the host (see "Collection rule" above). */
typedef enum kt_vk_readback_t {
    KT_VK_READBACK_AUTO = 0,   /* COPY on CPU implementations, THREAD on GPUs */
    KT_VK_READBACK_THREAD = 1, /* a collector thread polls vkGetQueryPoolResults */
    KT_VK_READBACK_COPY = 2    /* kt_vk_end copies each slot's results into a host-visible buffer */
} kt_vk_readback_t;
#define KT_VK_MAX_NESTING 8u

/* Which calibrated-timestamps extension the application enabled on the device (the clock model's source). */
typedef enum kt_vk_calibration_t {
    KT_VK_CALIBRATION_AUTO = 0, /* the one the physical device reports (KHR before EXT); enable it yourself */
    KT_VK_CALIBRATION_NONE = 1, /* neither is enabled: no vkGetCalibratedTimestamps* call is made */
    KT_VK_CALIBRATION_KHR = 2,  /* VK_KHR_calibrated_timestamps */
    KT_VK_CALIBRATION_EXT = 3   /* VK_EXT_calibrated_timestamps */
} kt_vk_calibration_t;

/* Context description. Zero-initialise; 0 / NULL means the default. */
typedef struct kt_vk_desc_t {
    VkInstance instance;                              /* the application's instance (required) */
    VkPhysicalDevice physical_device;                 /* the device's physical device (required) */
    VkDevice device;                                  /* the application's device (required) */
    uint32_t queue_family;                            /* family of the queue timed work is submitted to */
    VkQueue queue;                                    /* a queue of that family: bracketing calibration and
                                                         primitives use it (NULL: neither is available) */
    PFN_vkGetInstanceProcAddr get_instance_proc_addr; /* NULL: ktiming's own dlopen of the loader */
    uint32_t ring_size;                               /* slots (dispatches in flight); 0 = KT_VK_RING_DEFAULT */
    int host_query_reset;                             /* non-zero: the app enabled the hostQueryReset feature
                                                         (used for the initial reset of the pool) */
    uint32_t timestamp_valid_bits;                    /* 0 = the family's; fewer bits mask the timestamps
                                                         (exercises counter-wrap handling in tests) */
    uint64_t recalibrate_ns;                          /* calibrated-timestamps refit period; 0 = 1 s */
    kt_vk_readback_t readback;                        /* readback mode; AUTO by default */
    uint32_t poll_us;                                 /* THREAD: poll period while results are outstanding;
                                                         0 = 500 us */
    const char *label;                                /* queue label for timelines; NULL = "queue family N" */
    kt_vk_calibration_t calibration;                  /* calibrated-timestamps extension enabled; AUTO default */
    int copy_at_end;                                  /* COPY readback: kt_vk_end records no copy; call
                                                         kt_vk_cmd_end() before vkEndCommandBuffer, which copies
                                                         all of the command buffer's slots at once (no wait
                                                         between the timed dispatches) */
    const char *device_label;                         /* the device's model name in reports; NULL = deviceName.
                                                         Which device it is comes from its identity (deviceUUID,
                                                         PCI address; see instance_api_version), never from this
                                                         name: every VkDevice of one physical device is one
                                                         device */
    int per_submission;                               /* time every execution: primary command buffers carrying
                                                         slots are submitted with kt_vk_queue_submit[2] (see
                                                         "Every execution" above); implies COPY readback */
    VkResult (VKAPI_PTR *set_device_loader_data)(VkDevice, void *); /* a layer's pfnSetDeviceLoaderData: called
                                                         on every command buffer ktiming allocates (NULL: none) */
    uint32_t instance_api_version;                    /* the apiVersion the instance was created with
                                                         (VkApplicationInfo); 1.1 or later on a 1.1 device: the
                                                         device identity (deviceUUID, driverUUID, PCI address) is
                                                         read with vkGetPhysicalDeviceProperties2. 0 = 1.0 */
    uint32_t instance_extensions;                     /* KT_VK_INSTANCE_* bits: instance extensions the
                                                         application enabled (on a 1.0 instance the identity needs
                                                         both, through vkGetPhysicalDeviceProperties2KHR).
                                                         Without either way the device is known by its
                                                         enumeration index (docs/devices.md) */
} kt_vk_desc_t;

/* kt_vk_desc_t.instance_extensions bits. */
#define KT_VK_INSTANCE_PROPERTIES2 0x1u                 /* VK_KHR_get_physical_device_properties2 */
#define KT_VK_INSTANCE_EXTERNAL_MEMORY_CAPABILITIES 0x2u /* VK_KHR_external_memory_capabilities */

/* Counters of a context (monotonic since creation). */
typedef struct kt_vk_stats_t {
    uint64_t begun;             /* kt_vk_begin calls that got a slot */
    uint64_t collected;         /* dispatches handed to the recorder */
    uint64_t dropped;           /* dispatches lost: full ring, nesting, command-buffer table, device lost, times that
                                   failed the sanity check (longer than the host time from begin to collection) */
    uint64_t discarded;         /* slots abandoned with kt_vk_discard */
    uint64_t pending;           /* slots in flight now */
    uint64_t collect_calls;     /* kt_vk_collect calls (including flushes) */
    uint64_t collect_max_ns;    /* longest kt_vk_collect call */
    uint64_t recalibrations;    /* clock-model fits done */
    uint64_t polls;             /* collector-thread reads of the driver */
    uint64_t direct_batches;    /* desc.per_submission: batches timed inside their one command buffer
                                   (kt_vk_cmd_begin), with no command buffer of ktiming's added */
    uint32_t ring_size;         /* slots */
    uint32_t valid_bits;        /* timestamp valid bits in use */
    double period_ns;           /* timestampPeriod */
    int host_query_reset;       /* 1 when the pool was reset on the host at creation */
    int calibrated;             /* 1 when VK_KHR/EXT_calibrated_timestamps feeds the clock model */
    kt_vk_readback_t readback;  /* mode in use: THREAD or COPY */
    kt_clock_domain_t host_domain;   /* host domain the clock model maps to before conversion to the timeline */
    kt_clock_domain_t device_domain; /* detected time base of the device timestamps (DEVICE = own epoch) */
} kt_vk_stats_t;

typedef struct kt_vk_ctx_t kt_vk_ctx_t;

#if KT_ENABLED

/* The loader's vkGetInstanceProcAddr (dlopen on first use), or NULL when no Vulkan loader is installed. */
KT_API PFN_vkGetInstanceProcAddr kt_vk_loader(void);

/* KT_EUNAVAILABLE: no loader, or the queue family is neither compute nor graphics; KT_EINVAL: missing handles. A
 * family without timestamps (timestampValidBits 0) gets an untimed context: kt_vk_begin returns KT_EUNAVAILABLE
 * and counts the dispatch dropped, KT_DROP_NO_TIMING (nothing is left untimed silently). */
KT_API int kt_vk_ctx_create(const kt_vk_desc_t *desc, kt_vk_ctx_t **out);
/* Collects what is available, then releases everything. A dispatch still unread is counted as dropped: never
 * submitted, or read failed when the driver made only one of its two timestamps available. NULL is fine. */
KT_API void kt_vk_ctx_destroy(kt_vk_ctx_t *ctx);

/* Write the begin timestamp of a dispatch of `name` into cmd. 0, or KT_EFULL when dropped (counted). */
KT_API int kt_vk_begin(kt_vk_ctx_t *ctx, VkCommandBuffer cmd, const char *name);
/* Same with an id from kt_vk_kernel() (no name lookup). */
KT_API int kt_vk_begin_id(kt_vk_ctx_t *ctx, VkCommandBuffer cmd, kt_kernel_id_t kernel);
/* The launch configuration of the dispatch the innermost open kt_vk_begin of cmd times (call between kt_vk_begin
 * and kt_vk_end): vkCmdDispatch(x, y, z) -> {KT_LAUNCH_GROUPS, 3, {x, y, z}, local size or 0}, vkCmdDispatchBase
 * the same with its group counts, vkCmdDispatchIndirect -> {KT_LAUNCH_INDIRECT}. Every execution of the dispatch
 * is recorded with it (kt_kernel_timing_t.configs). 0; KT_EINVAL for a kind other than GROUPS, ITEMS or
 * INDIRECT, or dims past 3; KT_ESTATE when no timed kt_vk_begin is open on cmd (also when that begin was
 * dropped: nothing to attach it to). */
KT_API int kt_vk_launch(kt_vk_ctx_t *ctx, VkCommandBuffer cmd, const kt_launch_t *launch);
/* Write the end timestamp of the innermost open kt_vk_begin of cmd. KT_ESTATE when none is open. */
KT_API int kt_vk_end(kt_vk_ctx_t *ctx, VkCommandBuffer cmd);
/* With desc.copy_at_end: record the readback of every slot cmd closed since it began (or since the last call),
 * once, at the end of cmd; call just before vkEndCommandBuffer. 0 (nothing to do in THREAD readback). */
KT_API int kt_vk_cmd_end(kt_vk_ctx_t *ctx, VkCommandBuffer cmd);
/* desc.per_submission with COPY readback and copy_at_end: call right after vkBeginCommandBuffer of a primary
 * begun with ONE_TIME_SUBMIT, and kt_vk_cmd_end just before its vkEndCommandBuffer. cmd then carries a
 * timestamp pair from its first kt_vk_begin to its end and the copies of its dispatches, so a batch made of cmd
 * alone is timed inside it: kt_vk_queue_submit adds no command buffer of its own and no fence (counted in
 * kt_vk_stats_t.direct_batches). The pair is made at the first kt_vk_begin: a recording with none holds no
 * slot. In a batch with other command buffers, the pair goes unused (released once its copy has landed) and
 * the batch is bracketed as usual; its dispatches are still read from their own copies. When the ring has no
 * slot for the pair nothing is lost: its batches are bracketed as usual. KT_ENOMEM when ktiming's own table
 * could not grow; 0 otherwise. */
KT_API int kt_vk_cmd_begin(kt_vk_ctx_t *ctx, VkCommandBuffer cmd);
/* The recorder id of a kernel name on this context's device. */
KT_API kt_kernel_id_t kt_vk_kernel(kt_vk_ctx_t *ctx, const char *name);

/* Record every completed dispatch read so far; never waits for the device. Returns how many were recorded. */
KT_API int kt_vk_collect(kt_vk_ctx_t *ctx);
/* After your own wait for the timed work (fence, vkQueueWaitIdle): ask the collector for a fresh pass, wait for
 * it (at most timeout_ns) and collect. The one collection call that may wait; kt_vk_collect in COPY mode. */
KT_API int kt_vk_collect_wait(kt_vk_ctx_t *ctx, uint64_t timeout_ns);
/* Forget cmd's uncollected slots (after collecting what completed), e.g. before resetting it unsubmitted. */
KT_API int kt_vk_discard(kt_vk_ctx_t *ctx, VkCommandBuffer cmd);
/* In place of kt_vk_cmd_end, for a recording that cannot take ktiming's readback at its end (it ends with a
 * dynamic render pass instance suspended, VK_RENDERING_SUSPENDING_BIT: nothing may be recorded between the
 * suspend and the resume, VUID-VkSubmitInfo-pCommandBuffers-06015), when its batch is not submitted through
 * kt_vk_queue_submit (which reads it with a command buffer of its own after the batch): its dispatches are left
 * untimed, counted as dropped with the reason `no timing`, and their slots released. Returns how many. */
KT_API int kt_vk_cmd_untimed(kt_vk_ctx_t *ctx, VkCommandBuffer cmd);

/* desc.per_submission: vkQueueSubmit through ktiming. Every batch with command buffers gets a command buffer of
 * ktiming's own before and after the application's: a "vkQueueSubmit" span around the batch, and copies of
 * the timestamps of every slot its primaries carry, so each execution is recorded. A batch of one one-time
 * primary timing itself (kt_vk_cmd_begin) goes unchanged: its own pair is the batch's span. Returns
 * vkQueueSubmit's result; on failure nothing is counted as executed. Without per_submission: a plain vkQueueSubmit. The caller
 * holds the queue as for vkQueueSubmit; `queue` is of the context's family. */
KT_API VkResult kt_vk_queue_submit(kt_vk_ctx_t *ctx, VkQueue queue, uint32_t n, const VkSubmitInfo *si,
                                   VkFence fence);
/* desc.per_submission: call right after vkCmdExecuteCommands(primary, n, secondaries). Each timed dispatch of
 * the secondaries is then recorded at every execution of the primary, once per occurrence: the primary copies
 * their timestamps right after they ran (behind an execution barrier: the primary's next command waits for
 * them), and each submission copies those values into its records. Don't call kt_vk_cmd_end for secondaries
 * used this way. Returns the occurrences recorded; those the ring had no room for are counted as dropped. A
 * secondary listed more than once in one call (SIMULTANEOUS_USE) is timed at its last occurrence: the earlier
 * ones write the same queries before anything after the call can copy them, so they count as dropped,
 * re-executed, at every execution of the primary (one vkCmdExecuteCommands per occurrence times each). */
KT_API int kt_vk_cmd_execute(kt_vk_ctx_t *ctx, VkCommandBuffer primary, uint32_t n,
                             const VkCommandBuffer *secondaries);
#ifdef VK_VERSION_1_3
/* The same for vkQueueSubmit2 (core 1.3, or VK_KHR_synchronization2's vkQueueSubmit2KHR). */
KT_API VkResult kt_vk_queue_submit2(kt_vk_ctx_t *ctx, VkQueue queue, uint32_t n, const VkSubmitInfo2 *si,
                                    VkFence fence);
#endif

/* The device was lost (a call returned VK_ERROR_DEVICE_LOST): every slot still pending is counted as dropped with
 * the reason "device lost" and released, and the context is no longer polled. Returns how many were dropped. */
KT_API int kt_vk_device_lost(kt_vk_ctx_t *ctx);
/* Refit the clock model now (bracketing needs desc.queue; the caller holds it). */
KT_API int kt_vk_recalibrate(kt_vk_ctx_t *ctx);
/* Map a raw timestamp (as written by vkCmdWriteTimestamp) to the host timeline with its error bound. */
KT_API int kt_vk_timestamp_to_host(kt_vk_ctx_t *ctx, uint64_t timestamp, uint64_t *host_ns,
                                   uint64_t *uncertainty_ns);
/* Clock facts as published to reports. */
KT_API int kt_vk_device_info(kt_vk_ctx_t *ctx, kt_device_info_t *out);
KT_API int kt_vk_stats(kt_vk_ctx_t *ctx, kt_vk_stats_t *out);
/* The driver's VkResult of the context's last failed Vulkan call (VK_SUCCESS if none). With ctx NULL: that of
 * the last kt_vk_ctx_create on the calling thread (VK_SUCCESS when it failed for a reason of ktiming's own). */
KT_API VkResult kt_vk_last_error(kt_vk_ctx_t *ctx);

/* A primitive backend on ctx's device and desc.queue (see ktiming/primitive.h). The encoder handed to kernel
 * callbacks is the primitive's own VkCommandBuffer. */
KT_API int kt_vk_primitive_backend_create(kt_vk_ctx_t *ctx, kt_primitive_backend_t *out);

#else /* !KT_ENABLED */

static inline PFN_vkGetInstanceProcAddr kt_vk_loader(void) { return NULL; }
static inline int kt_vk_ctx_create(const kt_vk_desc_t *desc, kt_vk_ctx_t **out)
{ (void)desc; if (out) *out = NULL; return KT_EDISABLED; }
static inline void kt_vk_ctx_destroy(kt_vk_ctx_t *ctx) { (void)ctx; }
static inline int kt_vk_begin(kt_vk_ctx_t *ctx, VkCommandBuffer cmd, const char *name)
{ (void)ctx; (void)cmd; (void)name; return 0; }
static inline int kt_vk_begin_id(kt_vk_ctx_t *ctx, VkCommandBuffer cmd, kt_kernel_id_t kernel)
{ (void)ctx; (void)cmd; (void)kernel; return 0; }
static inline int kt_vk_end(kt_vk_ctx_t *ctx, VkCommandBuffer cmd) { (void)ctx; (void)cmd; return 0; }
static inline int kt_vk_launch(kt_vk_ctx_t *ctx, VkCommandBuffer cmd, const kt_launch_t *launch)
{ (void)ctx; (void)cmd; (void)launch; return 0; }
static inline int kt_vk_cmd_end(kt_vk_ctx_t *ctx, VkCommandBuffer cmd) { (void)ctx; (void)cmd; return 0; }
static inline int kt_vk_cmd_begin(kt_vk_ctx_t *ctx, VkCommandBuffer cmd) { (void)ctx; (void)cmd; return 0; }
static inline kt_kernel_id_t kt_vk_kernel(kt_vk_ctx_t *ctx, const char *name) { (void)ctx; (void)name; return 0; }
static inline int kt_vk_collect(kt_vk_ctx_t *ctx) { (void)ctx; return 0; }
static inline int kt_vk_collect_wait(kt_vk_ctx_t *ctx, uint64_t timeout_ns) { (void)ctx; (void)timeout_ns; return 0; }
static inline int kt_vk_discard(kt_vk_ctx_t *ctx, VkCommandBuffer cmd) { (void)ctx; (void)cmd; return 0; }
static inline int kt_vk_cmd_untimed(kt_vk_ctx_t *ctx, VkCommandBuffer cmd) { (void)ctx; (void)cmd; return 0; }
/* Compiled out, the submission is the program's own vkQueueSubmit[2] (a prototype, or volk's pointer: a macro,
 * expanded only where it is used). */
#define kt_vk_queue_submit(ctx, queue, n, si, fence) ((void)(ctx), vkQueueSubmit((queue), (n), (si), (fence)))
static inline int kt_vk_cmd_execute(kt_vk_ctx_t *ctx, VkCommandBuffer primary, uint32_t n,
                                    const VkCommandBuffer *secondaries)
{ (void)ctx; (void)primary; (void)n; (void)secondaries; return 0; }
#define kt_vk_queue_submit2(ctx, queue, n, si, fence) ((void)(ctx), vkQueueSubmit2((queue), (n), (si), (fence)))
static inline int kt_vk_device_lost(kt_vk_ctx_t *ctx) { (void)ctx; return 0; }
static inline int kt_vk_recalibrate(kt_vk_ctx_t *ctx) { (void)ctx; return KT_EDISABLED; }
static inline int kt_vk_timestamp_to_host(kt_vk_ctx_t *ctx, uint64_t timestamp, uint64_t *host_ns,
                                          uint64_t *uncertainty_ns)
{ (void)ctx; (void)timestamp; (void)host_ns; (void)uncertainty_ns; return KT_EDISABLED; }
static inline int kt_vk_device_info(kt_vk_ctx_t *ctx, kt_device_info_t *out) { (void)ctx; (void)out; return KT_EDISABLED; }
static inline int kt_vk_stats(kt_vk_ctx_t *ctx, kt_vk_stats_t *out) { (void)ctx; (void)out; return KT_EDISABLED; }
static inline VkResult kt_vk_last_error(kt_vk_ctx_t *ctx) { (void)ctx; return VK_SUCCESS; }
static inline int kt_vk_primitive_backend_create(kt_vk_ctx_t *ctx, kt_primitive_backend_t *out)
{ (void)ctx; (void)out; return KT_EDISABLED; }

#endif /* KT_ENABLED */

#ifdef __cplusplus
}
#endif
#endif /* KTIMING_VK_H */
