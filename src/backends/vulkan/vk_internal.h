/* vk_internal.h — internal: the Vulkan backend's function table, context layout and cross-file helpers. */
#ifndef KT_VK_INTERNAL_H
#define KT_VK_INTERNAL_H

#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <ktiming.h>
#include <ktiming/clock_model.h>
#include <ktiming/vk.h>

#include <pthread.h>
#include <stdatomic.h>

#include "backends/vulkan/vk_ticks.h"

/* ---------------------------------------------------------------------------------------------------
 * Function table (resolved per context through vkGetInstanceProcAddr / vkGetDeviceProcAddr)
 * ------------------------------------------------------------------------------------------------- */

/* Instance-level functions ktiming needs: X(name, required). */
#define KT_VK_INSTANCE_FUNCS(X)                                                                            \
    X(vkGetDeviceProcAddr, 1)                                                                              \
    X(vkGetPhysicalDeviceProperties, 1)                                                                    \
    X(vkGetPhysicalDeviceQueueFamilyProperties, 1)                                                         \
    X(vkGetPhysicalDeviceMemoryProperties, 1)                                                              \
    X(vkGetPhysicalDeviceCalibrateableTimeDomainsEXT, 0)                                                   \
    X(vkEnumerateDeviceExtensionProperties, 0)                                                             \
    X(vkEnumeratePhysicalDevices, 0)                                                                       \
    X(vkGetPhysicalDeviceProperties2, 0)                                                                   \
    X(vkGetPhysicalDeviceProperties2KHR, 0)

/* Device-level functions: X(name, required). */
#define KT_VK_DEVICE_FUNCS(X)                                                                              \
    X(vkCreateQueryPool, 1)                                                                                \
    X(vkDestroyQueryPool, 1)                                                                               \
    X(vkGetQueryPoolResults, 1)                                                                            \
    X(vkResetQueryPool, 0)                                                                                 \
    X(vkResetQueryPoolEXT, 0)                                                                              \
    X(vkCmdResetQueryPool, 1)                                                                              \
    X(vkCmdWriteTimestamp, 1)                                                                              \
    X(vkCmdCopyQueryPoolResults, 1)                                                                        \
    X(vkCmdCopyBuffer, 1)                                                                                  \
    X(vkCmdPipelineBarrier, 1)                                                                             \
    X(vkCreateBuffer, 1)                                                                                   \
    X(vkDestroyBuffer, 1)                                                                                  \
    X(vkGetBufferMemoryRequirements, 1)                                                                    \
    X(vkAllocateMemory, 1)                                                                                 \
    X(vkFreeMemory, 1)                                                                                     \
    X(vkBindBufferMemory, 1)                                                                               \
    X(vkMapMemory, 1)                                                                                      \
    X(vkUnmapMemory, 1)                                                                                    \
    X(vkCreateCommandPool, 1)                                                                              \
    X(vkDestroyCommandPool, 1)                                                                             \
    X(vkAllocateCommandBuffers, 1)                                                                         \
    X(vkFreeCommandBuffers, 1)                                                                             \
    X(vkBeginCommandBuffer, 1)                                                                             \
    X(vkEndCommandBuffer, 1)                                                                               \
    X(vkResetCommandBuffer, 1)                                                                             \
    X(vkQueueSubmit, 1)                                                                                    \
    X(vkQueueWaitIdle, 1)                                                                                  \
    X(vkCreateFence, 1)                                                                                    \
    X(vkDestroyFence, 1)                                                                                   \
    X(vkWaitForFences, 1)                                                                                  \
    X(vkResetFences, 1)                                                                                    \
    X(vkGetFenceStatus, 1)                                                                                 \
    X(vkQueueSubmit2, 0)                                                                                   \
    X(vkQueueSubmit2KHR, 0)                                                                                \
    X(vkGetCalibratedTimestampsEXT, 0)

/* Resolved pointers; NULL for optional functions the device does not expose. */
typedef struct kt__vk_table_t {
#define KT__VK_FIELD(name, req) PFN_##name name;
    PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
    KT_VK_INSTANCE_FUNCS(KT__VK_FIELD)
    KT_VK_DEVICE_FUNCS(KT__VK_FIELD)
#undef KT__VK_FIELD
    PFN_vkResetQueryPool reset_query_pool;             /* core or EXT entry, NULL if neither */
    PFN_vkGetCalibratedTimestampsEXT get_calibrated;   /* KHR or EXT entry (same ABI), NULL if not enabled */
    PFN_vkGetPhysicalDeviceCalibrateableTimeDomainsEXT get_domains; /* KHR or EXT entry */
} kt__vk_table_t;

/* Fill `t` for (instance, pd, device); the calibrated-timestamp entries from the extension `calibration` names
 * (AUTO: the one pd reports). KT_EUNAVAILABLE when a required function is missing. */
int kt__vk_table_load(kt__vk_table_t *t, PFN_vkGetInstanceProcAddr gipa, VkInstance instance, VkPhysicalDevice pd,
                      VkDevice device, kt_vk_calibration_t calibration);

/* ---------------------------------------------------------------------------------------------------
 * Context
 * ------------------------------------------------------------------------------------------------- */

/* Slot life: FREE -> OPEN (begin written) -> CLOSED (end written) -> READY (values read by the collector thread;
 * copy mode skips it) -> FREE (handed to the recorder, or released by kt_vk_discard / stop). Slots in use sit on a
 * list in allocation order (collection goes oldest first) and free ones in a FIFO, so a slot held by a command
 * buffer that is never submitted does not stop the others from being reused. */
enum {
    KT__VK_SLOT_FREE = 0,
    KT__VK_SLOT_OPEN = 1,
    KT__VK_SLOT_CLOSED = 2,
    KT__VK_SLOT_READY = 3
};

#define KT__VK_NONE UINT32_MAX
#define KT__VK_WORDS_PER_SLOT 4u /* readback words of a slot: begin value, begin availability, end value, end availability */

/* Bookkeeping of one ring slot (two queries: 2*i begin, 2*i+1 end). */
typedef struct kt__vk_slot_t {
    int state;               /* KT__VK_SLOT_* (under ctx->lock) */
    kt_kernel_id_t kernel;   /* what is timed */
    uint32_t thread;         /* kt_thread_ordinal() of the recording thread */
    uint32_t gen;            /* bumped on every allocation: tells a reused slot from its previous use */
    uint32_t prev, next;     /* neighbours on the in-use list (KT__VK_NONE at the ends) */
    VkCommandBuffer cmd;     /* command buffer it was recorded into */
    uint64_t enqueue_ns;     /* host time of kt_vk_begin */
    uint64_t begin_raw;      /* begin timestamp once READY; afterwards the queries' last values read */
    uint64_t end_raw;        /* end timestamp once READY; afterwards the queries' last values read */
    int read_once;           /* begin_raw/end_raw hold values read from the pool (to spot stale reads) */
    int copy_pending;        /* copy_at_end: CLOSED, its copy not recorded yet (kt_vk_cmd_end) */
    int half_read;           /* thread readback: a poll of this use found one timestamp available, not both */
    int submitted;           /* its command buffer went through kt_vk_queue_submit[2] (not per_submission): left
                                unread, it is counted read failed, never "never submitted" */
    int self_copy;           /* per_submission: kt_vk_cmd_end recorded its copy (a secondary: timed once) */
    int stage;               /* per_submission: an occurrence of a secondary's slot in a primary: its words are
                                a copy the primary makes after that vkCmdExecuteCommands, copied per submission */
    int stage_lost;          /* a stage slot standing for an occurrence that cannot be read: the same secondary
                                runs again later in the same vkCmdExecuteCommands, over the same queries, before
                                the copy after the call; counted dropped (re-executed) at every submission */
    int submission;          /* per_submission: the timestamp pair around a batch (read through its record, or
                                through its own words when it is a one-time primary's pair) */
    int cmd_pair;            /* per_submission: a one-time primary's own pair (kt_vk_cmd_begin), around all of it:
                                its batch's span when it is submitted alone in its batch, else unused */
    int own_copy;            /* per_submission: kt_vk_cmd_end of a one-time primary recorded the copy into the
                                slot's words; they are read (self_copy set) once its submission is made */
    uint32_t pair_first;     /* a cmd_pair on a stamps_at_flush device: the slot of the command buffer's first
                                kt_vk_begin, whose begin timestamp is the pair's (KT__VK_NONE: its own) */
    uint32_t batch_pair;     /* the own_copy dispatch whose begin timestamp is its direct batch's (pair_first):
                                that pair, read in the same pass (KT__VK_NONE: none) */
    uint32_t batch_pair_gen; /* the pair's gen when armed (a pair read and reused since no longer holds it back) */
    uint32_t executions;     /* per_submission: submissions whose records copy it (ctx->lock) */
    uint32_t lane;           /* per_submission: the queue track of the submission that armed it (0: the
                                context's own, queue_id) */
    int unused;              /* a cmd_pair submitted in a batch of several (bracketed by ktiming's own command
                                buffers): released unrecorded once its copy has landed, not held until discard */
    kt_launch_t launch;      /* its launch configuration (kt_vk_launch; zero: none); a stage slot copies its
                                secondary's, an execution record its slot's */
    kt_kernel_id_t inflight; /* read through its own words: the kernel counted in flight (kt__vk_inflight_arm),
                                ended once when the slot is recorded or released; 0: not counted */
} kt__vk_slot_t;

/* per_submission: one execution of a slot (or of a batch) whose timestamps a copy of ktiming's brings to the
 * host: FREE, RESERVED or PENDING. Records are taken in FIFO order (exec_head, exec_used) and freed as they are
 * read. */
enum { KT__VK_EXEC_FREE = 0, KT__VK_EXEC_PENDING = 1, KT__VK_EXEC_RESERVED = 2 /* its submission is being made */ };
typedef struct kt__vk_exec_t {
    int state;             /* KT__VK_EXEC_* */
    kt_kernel_id_t kernel; /* what was timed */
    uint32_t thread;       /* submitting thread */
    uint32_t slot;         /* a batch's own slot, released when read; KT__VK_NONE for a dispatch's */
    uint32_t lane;         /* queue track of the VkQueue it was submitted to (kt_queue_register id) */
    uint64_t enqueue_ns;   /* host time of the submission */
    kt_kernel_id_t inflight; /* counted in flight from its submission until recorded or freed (0: not) */
    kt_launch_t launch;    /* the dispatch's launch configuration (zero: none, a batch's) */
} kt__vk_exec_t;

/* per_submission: ktiming's command buffers of one vkQueueSubmit in flight, reused once a fence of ours on that
 * queue signalled: `fence` (the submission's own, when the program passed none), or, for a submission with the
 * program's fence (VK_NULL_HANDLE here), the next fence of ours on the queue (a fence's signal covers every
 * earlier submission to its queue; vk_submit.c reclaim_locked). */
typedef struct kt__vk_sub_t {
    VkFence fence;
    VkQueue queue;
    uint32_t ncmds;
    VkCommandBuffer *cmds;   /* malloc'ed */
} kt__vk_sub_t;

#define KT__VK_SLOT_DROPPED UINT32_MAX

/* per_submission: an occurrence of a secondary's dispatch that kt_vk_cmd_execute found no slot for (ring full):
 * counted dropped at every execution of the primary (plan_locked), not once at recording. */
typedef struct kt__vk_lost_occ_t {
    VkCommandBuffer cmd;   /* the primary */
    kt_kernel_id_t kernel; /* the secondary's dispatch */
    uint32_t executions;   /* submissions that counted it */
} kt__vk_lost_occ_t;

/* A command buffer with open kt_vk_begin pairs. */
typedef struct kt__vk_open_t {
    VkCommandBuffer cmd;                  /* NULL = unused entry */
    uint32_t depth;                       /* open pairs */
    uint32_t stack[KT_VK_MAX_NESTING];    /* their slots (KT__VK_SLOT_DROPPED for dropped begins) */
    uint32_t overflow;                    /* dropped begins nested deeper than the stack */
    uint32_t pair;                        /* KT__VK_PAIR_WANTED: kt_vk_cmd_begin asked for a pair, made at the
                                             first kt_vk_begin (nothing is held by a recording with none), or
                                             KT__VK_NONE */
} kt__vk_open_t;

#define KT__VK_PAIR_WANTED (UINT32_MAX - 1u)
#define KT__VK_OPEN_INITIAL 64u /* entries of the open table at first; it doubles when full */
#define KT__VK_NAME_CACHE 64u
#define KT__VK_LANES 16u /* VkQueues of one family with tracks of their own; more share the last one */

/* Name -> id cache entry (keyed by the caller's pointer, verified by content). */
typedef struct kt__vk_name_t {
    const char *key;     /* caller's pointer */
    char *copy;          /* its content when cached */
    kt_kernel_id_t id;   /* interned id */
} kt__vk_name_t;

struct kt_vk_ctx_t {
    kt__vk_table_t vk;                  /* functions */
    VkInstance instance;                /* application's */
    VkPhysicalDevice physical_device;   /* application's */
    VkDevice device;                    /* application's */
    VkQueue queue;                      /* optional application queue (calibration, primitives) */
    VkQueue cal_queue;                  /* where waited-for bracketing samples are submitted (creation,
                                           kt_vk_recalibrate): desc.queue; the layer's go with the application's
                                           submissions, never waited for (kt__vk_clock_bracket_submit) */
    uint32_t queue_family;              /* timed family */
    int untimed;                        /* the family has no timestamps (timestampValidBits 0): no ring or clock;
                                           kt_vk_begin counts each dispatch dropped, no timing */
    char device_name[128];              /* deviceName, or desc.device_label (the model in reports; verbose lines) */
    char device_key[KT_DEVICE_KEY_MAX]; /* kt_device_register's key (vk_device.c): kernels, queues and clock
                                           facts are recorded under it */
    uint32_t queue_id;                  /* kt_queue_register id: the track of the first VkQueue (desc.queue, else
                                           the first submitted to) and of what is not submitted through ktiming */
    char queue_label[64];               /* its label; another VkQueue of the family gets "<label> (queue k)" */
    struct {
        VkQueue queue;
        uint32_t id;
    } lanes[KT__VK_LANES];              /* per_submission: one queue track per VkQueue seen (under lock) */
    uint32_t nlanes;
    double period_ns;                   /* timestampPeriod */
    uint32_t valid_bits;                /* in use (desc override or family's) */
    uint32_t family_valid_bits;         /* the family's */
    int host_reset;                     /* pool reset on the host at creation (hostQueryReset enabled) */
    uint64_t recalibrate_ns;            /* refit period for calibrated timestamps */

    /* ring */
    uint32_t cap;                       /* slots */
    VkQueryPool pool;                   /* 2*cap ring queries + 1 calibration query */
    VkBuffer buffer;                    /* readback: 32 bytes per slot + 1 calibration record */
    VkDeviceMemory memory;              /* host-visible, coherent */
    uint64_t *words;                    /* mapped buffer: per slot {begin, avail, end, avail} (atomic loads) */
    kt__vk_slot_t *slots;               /* cap entries */
    uint32_t used_first, used_last;     /* in-use list in allocation order (KT__VK_NONE when empty) */
    uint32_t used;                      /* slots in use */
    uint32_t *free_q;                   /* FIFO of free slots (cap entries, circular) */
    uint32_t free_head;                 /* index of the oldest free slot in free_q */
    kt__vk_open_t *open;                /* command buffers with open pairs (nopen entries, grown by doubling) */
    uint32_t nopen;
    uint32_t orphans;                   /* dropped begins of command buffers the open table had no room for */
    kt__vk_name_t names[KT__VK_NAME_CACHE]; /* name cache */
    pthread_mutex_t lock;               /* ring, open table, name cache, counters */

    /* readback */
    int copy_readback;                  /* 1: kt_vk_end copies results into `words`; 0: collector thread */
    int copy_at_end;                    /* copy mode: the copies are recorded by kt_vk_cmd_end, not kt_vk_end */
    uint64_t poll_ns;                   /* collector poll period while slots are outstanding */
    pthread_cond_t pass_done;           /* signalled after every poll pass of this context (under lock) */
    int pass_requested;                 /* a flush wants a pass now */
    _Atomic int stopped;                /* stop ran: flushes return at once, nothing more is waited for */
    uint64_t passes;                    /* completed poll passes */
    uint64_t closed_unread;             /* CLOSED slots not read yet (thread mode) */

    /* clock model (under model_lock) */
    pthread_mutex_t model_lock;         /* model, unwrap state, calibration objects */
    pthread_mutex_t collect_lock;       /* one collector at a time (others return at once) */
    kt__vk_unwrap_t unwrap;             /* device counter unwrapping */
    uint64_t base_ns;                   /* device ns of the unwrap base (the model's device timeline) */
    int calibrated;                     /* VK_*_calibrated_timestamps in use */
    VkTimeDomainEXT cal_host_domain;    /* host domain sampled with the device */
    kt_clock_domain_t host_domain;      /* same as a ktiming domain */
    kt_clock_domain_t device_domain;    /* detected time base */
    int have_model;                     /* model valid */
    kt_clock_model_t model;             /* device ns -> host_domain: the tracker's current model, cached */
    kt_clock_tracker_t *tracker;        /* ring of recent samples and periodic refits (calibrate module) */
    uint64_t last_fit_ns;               /* kt_now_ns of the last fit */
    VkCommandPool cal_pool;             /* bracketing: tiny command buffer + fence */
    VkCommandBuffer cal_cmd;
    VkFence cal_fence;
    int cal_pending;                    /* cal_cmd submitted without a wait and its fence not seen signalled: it is
                                           never re-recorded or resubmitted before (vk_clock.c, bracket_submit) */
    uint64_t cal_before_ns;             /* host time (model domain) just before that submission */
    uint32_t cal_burst;                 /* samples still wanted by the current bracketed refit */
    uint32_t cal_taken;                 /* bracketed samples observed so far */
    kt_clock_sample_t cal_best;         /* the tightest of them (an offset-only model until a fit can be made) */
    kt_clock_domain_t cal_domain;       /* host domain every bracketed sample lay in (UNKNOWN before the first,
                                           DEVICE once one did not) */
    uint64_t cal_stuck_ns;              /* kt_now_ns since when a sample is due but the queue not seen idle */

    _Atomic int lost;                   /* kt_vk_device_lost was called: no more polling */
    _Atomic int last_error;             /* VkResult of the last failed driver call (kt_vk_last_error) */

    /* counters */
    atomic_uint_fast64_t begun, collected, dropped, discarded, collect_calls, collect_max_ns, recalibrations;
    atomic_uint_fast64_t polls;         /* collector-thread driver reads */
    atomic_uint_fast64_t direct_batches;/* per_submission: batches timed by a one-time primary's own pair */

    /* every execution (desc.per_submission; vk_submit.c) */
    int per_submit;                     /* kt_vk_queue_submit brackets batches and copies per execution */
    VkResult (VKAPI_PTR *set_loader_data)(VkDevice, void *); /* a layer's pfnSetDeviceLoaderData, or NULL */
    kt_kernel_id_t submit_kernel;       /* "vkQueueSubmit": the batch spans */
    VkPipelineStageFlagBits batch_end_stage; /* of a batch's end timestamp (vk_submit.c record_plan) */
    int stamps_at_flush;                /* lavapipe: a TOP_OF_PIPE timestamp is taken when the rasterizer scene it
                                           joined runs, at the next flush (any other stage flushes first) */
    uint32_t exec_cap;                  /* execution records (readback words after the slots' and calibration's) */
    kt__vk_exec_t *execs;               /* under lock */
    uint32_t exec_head, exec_used;      /* FIFO of records in use (freed ones are skipped when head reaches them) */
    uint32_t exec_pending;              /* PENDING records */
    kt__vk_lost_occ_t *lost_occ;        /* occurrences without a slot (under lock; kt__vk_lost_occ_release_locked) */
    uint32_t nlost_occ, cap_lost_occ;
    pthread_mutex_t sub_lock;           /* sub_pool, its command buffers and fences, subs */
    VkCommandPool sub_pool;             /* ktiming's command buffers (RESET_COMMAND_BUFFER) */
    kt__vk_sub_t *subs;                 /* submissions in flight, oldest first */
    uint32_t nsubs;
    VkCommandBuffer *free_cmds;         /* recorded-and-done command buffers to re-record */
    uint32_t nfree_cmds, cap_free_cmds;
    VkFence *free_fences;               /* unsignalled fences */
    uint32_t nfree_fences, cap_free_fences;

};

/* Files and their call direction (each calls only files below it; nothing calls upwards):
 *   vk_context.c (creation, registry, flush/stop) -> vk_submit.c, vk_collect.c, vk_clock.c, vk_ring.c
 *   vk_record.c (begin/end, discard)              -> vk_collect.c, vk_ring.c (called by the application only)
 *   vk_submit.c (every execution)                 -> vk_clock.c, vk_ring.c
 *   vk_collect.c (collection, poll pass)          -> vk_clock.c, vk_ring.c
 *   vk_clock.c (device clock model)               -> vk_ring.c
 *   vk_ring.c (query pool, readback, slots)       -> vk_loader.c (the table) only
 *   vk_device.c (identity), called by vk_context.c -> the table only
 * vk_primitive.c uses only the public kt_vk_* calls. */

/* The ring (vk_ring.c). */
/* Notes a failed driver call (kt_vk_last_error, and the creating thread's error) and returns the ktiming error
 * for it. */
int kt__vk_fail(kt_vk_ctx_t *ctx, VkResult r, int rc);
int kt__vk_create_error(void);        /* this thread's last failed driver call in kt_vk_ctx_create */
void kt__vk_create_error_clear(void);
/* Query pool (reset once), readback buffer and the slot bookkeeping; freed by kt__vk_ring_fini (also after a
 * partial create). */
int kt__vk_ring_create(kt_vk_ctx_t *ctx);
void kt__vk_ring_fini(kt_vk_ctx_t *ctx);
/* pool (flags) + one primary command buffer + fence; on failure the caller destroys what *pool / *fence hold */
int kt__vk_cmd_create(kt_vk_ctx_t *ctx, VkCommandPoolCreateFlags flags, VkCommandPool *pool, VkCommandBuffer *cmd,
                      VkFence *fence);
/* reset cmd (pool with VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT) and begin it, one-time submit */
int kt__vk_cmd_restart(const kt_vk_ctx_t *ctx, VkCommandBuffer cmd);
/* Copy `count` queries from `first` into the readback buffer at byte `dst`: 64-bit values with availability,
 * waiting for them (two words per query). */
void kt__vk_copy_results(kt_vk_ctx_t *ctx, VkCommandBuffer cmd, uint32_t first, uint32_t count, VkDeviceSize dst);
/* Copy mode: the slot's two results into its words of the readback buffer. */
void kt__vk_record_copy(kt_vk_ctx_t *ctx, VkCommandBuffer cmd, uint32_t slot);
/* Makes transfer writes recorded before it visible to host reads, and orders later transfer writes after them. */
void kt__vk_host_barrier(kt_vk_ctx_t *ctx, VkCommandBuffer cmd);
/* Copy readback: whether the four words at w (a slot's or a record's) have landed; kt__vk_slot_copied: a slot's. */
int kt__vk_words_landed(const uint64_t *w);
int kt__vk_slot_copied(const kt_vk_ctx_t *ctx, uint32_t slot);
/* Word offset (uint64_t index into ctx->words) of execution record e. */
static inline size_t kt__vk_exec_word(const kt_vk_ctx_t *ctx, uint32_t e)
{
    return ((size_t)ctx->cap + 1u + e) * KT__VK_WORDS_PER_SLOT;
}
/* ctx->lock held: slot allocation and release, execution records. */
uint32_t kt__vk_slot_alloc_locked(kt_vk_ctx_t *ctx);
void kt__vk_slot_release_locked(kt_vk_ctx_t *ctx, uint32_t slot);
/* A dead program's device work (issue 39.1): what ktiming owes a timing for counts as in flight (core/internal.h
 * kt__inflight_begin/_end) from when it goes to the device until it is recorded or given up. The unit is what is
 * read: an execution record (per_submission, from its submission), or a slot read through its own words (a
 * one-time primary's dispatch or pair armed by its submission; a slot whose copy kt_vk_cmd_end recorded; without
 * per_submission, ktiming does not see the submission: from kt_vk_end). `held` is the unit's field: arm counts
 * `kernel` once (a unit already counted stays as it is); settle ends what it holds. Every slot release and record
 * free settles, so each begin has exactly one end whichever way the unit goes (read, discarded, dropped at stop,
 * device loss or destroy, or a read that failed); collection moves the field into what it records and settles
 * after recording. ctx->lock held, or the unit is the caller's alone. */
void kt__vk_inflight_arm(kt_kernel_id_t *held, kt_kernel_id_t kernel);
void kt__vk_inflight_settle(kt_kernel_id_t *held);
/* per_submission: where n consecutive execution records (modulo cap) can be taken for a submission, in *first.
 * Every record not FREE lies in the FIFO window [head, head + used); records are freed as they are read, in any
 * order. First after the window (returns 1: the window grows by n), else a run of n FREE records inside it
 * (returns 0): a record still pending at the head (a long batch, perhaps on another queue of the family) no
 * longer stops the records read after it from being reused (before, the window filled and every later execution
 * was dropped, ring full). -1: no room. */
static inline int kt__vk_exec_pick(const kt__vk_exec_t *execs, uint32_t cap, uint32_t head, uint32_t used, uint32_t n,
                                   uint32_t *first)
{
    if (n <= cap - used) {
        *first = (head + used) % cap;
        return 1;
    }
    uint32_t run = 0;
    for (uint32_t k = 0; k < used && n; k++) {
        if (execs[(head + k) % cap].state != KT__VK_EXEC_FREE) {
            run = 0;
            continue;
        }
        if (++run == n) {
            *first = (head + k + 1 - n) % cap;
            return 0;
        }
    }
    return -1;
}

/* ctx->lock held: the occurrences without a slot of primary `cmd` (every primary's with VK_NULL_HANDLE) are
 * forgotten; those no submission counted are counted dropped, ring full, now (a recording never submitted, or the
 * context going away). Returns how many were counted. */
uint32_t kt__vk_lost_occ_release_locked(kt_vk_ctx_t *ctx, VkCommandBuffer cmd);
/* Marks record e FREE (words zeroed, a batch's slot released); the FIFO's head moves in reclaim. */
void kt__vk_exec_free_locked(kt_vk_ctx_t *ctx, uint32_t e);
void kt__vk_exec_reclaim_locked(kt_vk_ctx_t *ctx);

/* Device identity (vk_device.c): registers the context's physical device (model, vendor, deviceUUID and
 * driverUUID where the instance allows vkGetPhysicalDeviceProperties2, the PCI address with VK_EXT_pci_bus_info,
 * its enumeration index) and sets ctx->device_key. Calls the table only. */
void kt__vk_device_register(kt_vk_ctx_t *ctx, const kt_vk_desc_t *desc, const VkPhysicalDeviceProperties *props);

/* Why an unread slot is dropped when nothing more will be read (discard, destroy): it ran (a poll saw one of
 * its timestamps, or its command buffer was submitted through ktiming) but its values never reached the host:
 * `ran`; else `never` (its end never recorded or its command buffer never submitted, as far as ktiming knows). */
static inline kt_drop_reason_t kt__vk_unread_reason(const kt__vk_slot_t *s, kt_drop_reason_t ran,
                                                    kt_drop_reason_t never)
{
    return s->half_read || s->submitted ? ran : never;
}

/* Every execution (vk_submit.c). */
int kt__vk_submit_init(kt_vk_ctx_t *ctx);
void kt__vk_submit_fini(kt_vk_ctx_t *ctx);

/* Clock (vk_clock.c). model_lock held by the caller for the *_locked functions. */
int kt__vk_clock_init(kt_vk_ctx_t *ctx);
void kt__vk_clock_fini(kt_vk_ctx_t *ctx);
int kt__vk_clock_refit_locked(kt_vk_ctx_t *ctx, int full);
void kt__vk_clock_maybe_refit(kt_vk_ctx_t *ctx);
/* Raw timestamp -> unwrapped device ns (model_lock held). host_ref_ns: host time (ktiming timeline) just before
 * the timestamp was taken, used to resolve counter wrap through the model; 0 = unwrap by sequence only. */
uint64_t kt__vk_device_ns_locked(kt_vk_ctx_t *ctx, uint64_t raw, uint64_t host_ref_ns);
/* Device ns -> host timeline (model_lock held). */
int kt__vk_map_locked(kt_vk_ctx_t *ctx, uint64_t device_ns, uint64_t *host_ns, uint64_t *uncertainty_ns);
void kt__vk_publish(kt_vk_ctx_t *ctx);
/* Bracketing without a wait (no calibrated timestamps): inside an application's submission on `queue` (the
 * caller holds it), submits one sample of ours when one is due, none is pending and the queue was seen idle
 * (`seen_idle`, asked only then, with model_lock held; it may take ctx->lock); kt__vk_clock_bracket_poll, from
 * every collection, takes a pending sample whose fence has signalled. */
void kt__vk_clock_bracket_submit(kt_vk_ctx_t *ctx, VkQueue queue, int (*seen_idle)(kt_vk_ctx_t *));
void kt__vk_clock_bracket_poll(kt_vk_ctx_t *ctx);

/* Collection (vk_collect.c). The collector thread (thread readback): started with the registry's step (which
 * sets the nap: 0 waits for a wake), woken by kt_vk_end and flushes, stopped at kt_shutdown. */
int kt__vk_collector_start(int (*step)(void *));
void kt__vk_collector_nap(uint64_t nap_ns);
void kt__vk_collector_wake(void);
void kt__vk_collector_stop(void);
/* Thread readback: ask for passes and wait (until the deadline, kt_now_ns time) for one that began after this
 * call, or until nothing is outstanding. */
void kt__vk_wait_fresh_pass(kt_vk_ctx_t *ctx, uint64_t deadline_ns);
/* One poll pass over the CLOSED slots (of `only`, unless VK_NULL_HANDLE); ctx->lock held (dropped inside). */
int kt__vk_poll_pass_locked(kt_vk_ctx_t *ctx, VkCommandBuffer only);

#endif
