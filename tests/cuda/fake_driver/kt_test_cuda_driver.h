/* kt_test_cuda_driver.h — control API of the CUDA driver TEST DOUBLE (libkt_test_cuda_driver.so). It is not a GPU
 * driver: it exports the driver entry points ktiming uses, runs each stream on a host thread, stamps events from
 * a simulated device clock with known parameters, and counts calls, so the CUDA backend's logic can be tested on
 * machines with no NVIDIA driver. Tests point ktiming at it with KTIMING_CUDA_LIBRARY.
 *
 * Environment, read at cuInit:
 *   KT_TEST_CUDA_MODE=normal|stub|nodevice  stub: cuInit returns CUDA_ERROR_STUB_LIBRARY (34) and cuGetErrorName
 *                                           cannot name it, as the toolkit's stub libcuda; nodevice: cuInit
 *                                           returns CUDA_ERROR_NO_DEVICE (100)
 *   KT_TEST_CUDA_DEVICES=N                  devices (default 1)
 *   KT_TEST_CUDA_CLOCK_OFFSET_NS=N          device clock = host CLOCK_MONOTONIC_RAW + N (default 10^15) ...
 *   KT_TEST_CUDA_DRIFT_PPM=X                ... running X ppm fast (default 0)
 *   KT_TEST_CUDA_EVENT_RES_NS=N             event timestamp resolution (default 32)
 *   KT_TEST_CUDA_GT_GRANULARITY_NS=N        %globaltimer update granularity (default 1000)
 *   KT_TEST_CUDA_KERNEL_NS=N                duration of a launched kernel the double does not know (default 20000)
 *   KT_TEST_CUDA_LAUNCH_NS=N                launch latency: an enqueued op starts no earlier than N ns after the
 *                                           call that enqueued it (default 4000)
 *   KT_TEST_CUDA_DRIVER_VERSION=N           cuDriverGetVersion (default 13000); cuModuleLoadData rejects PTX newer
 *                                           than that driver JIT-compiles (CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
 *   KT_TEST_CUDA_QUEUE_DEPTH=N              ops a stream queues while a kt_hold_wait kernel is queued on it
 *                                           (pending or spinning) before an enqueue blocks until it moves
 *                                           (default 64; a real driver's depth: docs/cuda.md, measured by
 *                                           tests/gpu/run.sh queue-depth)
 *   KT_TEST_CUDA_CC=NN                      compute capability of every device (default 90); PTX for a newer
 *                                           .target fails with CUDA_ERROR_NO_BINARY_FOR_GPU
 *
 * Sharper than a happy path (issue 18): events default to 512 ns resolution (~0.5 us, as documented for CUDA
 * events); cuDevicePrimaryCtxReset, cuCtxDestroy and the last cuDevicePrimaryCtxRelease free the context's
 * events, streams, modules (and their functions), device allocations and mapped host allocations (the latter
 * really freed, so a host read is an ASan error) and change its cuCtxGetId. A later driver call on any of them, or
 * on an event, stream or module destroyed by the program, ABORTS the test (a use after free on a real driver),
 * unless a cuCtxGetId on the same thread just before still answered the old id and nothing of this thread's came
 * between (the unpreventable raced use, counted); CU_STREAM_PER_THREAD
 * (0x2) is a per-thread stream, CU_STREAM_LEGACY (0x1) the legacy one; cuStreamBeginCapture_v2 captures a
 * stream's work (events recorded there fail queries with CUDA_ERROR_CAPTURED_EVENT), and a capture-unsafe call
 * (query, synchronise, allocation, module load) fails with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates
 * the captures that forbid it, by cuda.h's rules for the calling thread's mode (cuThreadExchangeStreamCaptureMode):
 * global (the default) while any thread captures in global mode or this thread has a capture not begun relaxed,
 * thread-local only the latter, relaxed never; cuGraphLaunch replays the
 * captured work as one op. The legacy stream synchronises with every blocking stream of its context: while one
 * of them captures, work or an event record on the legacy stream (NULL) answers CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
 * and invalidates that capture, in any capture mode; cuStreamIsCapturing on it answers the same (906).
 *
 * A kernel's first launch waits while a kernel spins on another stream of the context (lazy loading's context
 * synchronisation). Kernels it knows by name (from the PTX given to cuModuleLoadData): kt_globaltimer_read,
 * kt_globaltimer_batch, kt_hold_wait(u32 *flag, u64 timeout_ns), which holds its stream until flag[0] is
 * non-zero or timeout_ns passed (host time: a frozen clock or virtual work does not change it; then flag[1] = 2), and kt_test_stamp(u64 work_ns), which stamps
 * its module's kt_cuda_slot_ptr slot like KT_KERNEL_ENTER/EXIT around work_ns of simulated work. Mapped pinned
 * host memory (cuMemHostAlloc, cuMemHostGetDevicePointer_v2) is host memory whose address is the device's.
 */
#ifndef KT_TEST_CUDA_DRIVER_H
#define KT_TEST_CUDA_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct CUstream_st;
struct CUevent_st;
struct CUctx_st;

/* Call counters. */
typedef struct kt_test_cuda_stats_t {
    uint64_t event_creates;          /* cuEventCreate successes */
    uint64_t event_destroys;         /* cuEventDestroy_v2 successes */
    uint64_t event_bad_handles;      /* calls on destroyed or bogus events or streams: each ABORTS the process (a use after
                                        free on a real driver; KT_TEST_CUDA_LENIENT=1 only counts), except ... */
    uint64_t raced_handle_uses;      /* ... the one use right after a cuCtxGetId on the same thread that still
                                        answered the event's context id (the reset came between: unpreventable) */
    uint64_t event_records;          /* cuEventRecord */
    uint64_t event_queries;          /* cuEventQuery */
    uint64_t event_syncs;            /* cuEventSynchronize */
    uint64_t elapsed_calls;          /* cuEventElapsedTime */
    uint64_t stream_creates;         /* cuStreamCreate */
    uint64_t stream_destroys;        /* cuStreamDestroy_v2 */
    uint64_t stream_syncs;           /* cuStreamSynchronize */
    uint64_t launches;               /* cuLaunchKernel */
    uint64_t mem_allocs;             /* cuMemAlloc_v2 */
    uint64_t mem_frees;              /* cuMemFree_v2 */
    uint64_t module_loads;           /* cuModuleLoadData */
    uint64_t module_unloads;         /* cuModuleUnload */
    uint64_t primary_retains;        /* cuDevicePrimaryCtxRetain */
    uint64_t primary_releases;       /* cuDevicePrimaryCtxRelease_v2 */
    uint64_t watched_blocking;       /* cuEventSynchronize/cuStreamSynchronize from watched threads */
    uint64_t watched_queries;        /* cuEventQuery/cuEventElapsedTime from watched threads */
    uint64_t resets;                 /* cuDevicePrimaryCtxReset */
    uint64_t events_freed_by_reset;  /* events freed by a reset or cuCtxDestroy */
    uint64_t capture_violations;     /* unsafe calls during a global-mode capture (each invalidates it) */
    uint64_t calls_after_deinit;     /* calls made after kt_test_cuda_driver_deinit(1) */
    uint64_t holds;                  /* kt_hold_wait kernels run */
    uint64_t queue_full_waits;       /* enqueues that blocked: the queue behind a hold kernel was full */
    uint64_t max_queued_behind_hold; /* most ops queued on a stream while a kt_hold_wait kernel was queued or spun */
    uint64_t blocked_queries;        /* cuEventQuery calls that waited in kt_test_cuda_driver_block_queries */
    uint64_t lazy_load_waits;        /* first launches of a kernel that waited for a spinning kernel to end (lazy
                                        loading synchronises the context) */
    uint64_t raced_destroys;         /* resets and destroys kt_test_cuda_driver_race_destroy made */
    uint64_t primary_destroys;       /* primary contexts destroyed by the release of their last retain */
    uint64_t forced_query_answers;   /* queries answered by kt_test_cuda_driver_query_answer */
    uint64_t init_gate_waits;        /* cuInit calls that waited at kt_test_cuda_driver_init_gate */
} kt_test_cuda_stats_t;

void kt_test_cuda_driver_stats(kt_test_cuda_stats_t *out);
/* Count the calling thread's blocking calls and queries separately (on = 1) or stop (0). */
void kt_test_cuda_driver_watch_thread(int on);
/* Hold a stream (its worker executes nothing until released). NULL = the current context's default stream. */
int kt_test_cuda_driver_hold(struct CUstream_st *stream, int hold);
/* Enqueue simulated work: the stream's worker sleeps ns (virtual_time 0), or the device clock jumps ns ahead
 * instantly (virtual_time 1: event times then differ by exactly ns, as long as no other stream jumps the one
 * device clock meanwhile). */
int kt_test_cuda_driver_work(struct CUstream_st *stream, uint64_t ns, int virtual_time);
/* The simulated device clock now, and its inverse (host CLOCK_MONOTONIC_RAW ns for a device time, ignoring
 * virtual jumps). */
uint64_t kt_test_cuda_driver_device_now(void);
uint64_t kt_test_cuda_driver_device_to_host(uint64_t device_ns);
/* Device timestamps of the event records completed on a stream, in order; returns how many were copied. */
size_t kt_test_cuda_driver_record_log(struct CUstream_st *stream, uint64_t *ts, size_t max);
/* Change the simulated clock: device = host CLOCK_MONOTONIC_RAW + offset, drift ppm fast from now on, and the
 * %globaltimer granularity. Virtual jumps are forgotten. */
void kt_test_cuda_driver_set_clock(uint64_t offset_ns, double drift_ppm, uint64_t gt_granularity_ns);
/* Freeze the device clock (on = 1): it then advances only by virtual work, so event times differ by exactly
 * the virtual work enqueued between them, however the host threads are scheduled. */
void kt_test_cuda_driver_freeze_clock(int on);
/* The next n cuEventQuery calls on live events answer `result` (e.g. 901, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, as
 * a query made while a capture forbids it does), whatever the event's state. */
void kt_test_cuda_driver_query_answer(int result, uint32_t n);
/* The primary context of `device` is reset (cuDevicePrimaryCtxReset) inside the n-th cuEventCreate from now in that
 * context, after the event was made (so it dies too): a reset on another thread landing while a tool makes events,
 * e.g. while it grows a pool. 0 disarms. */
void kt_test_cuda_driver_reset_after_creates(int device, uint32_t n);
/* closed = 1: the next cuInit waits inside the driver (counted in init_gate_waits) until closed = 0 opens the gate:
 * the hundreds of ms a real cuInit takes, made as long as a test needs. */
void kt_test_cuda_driver_init_gate(int closed);
/* Make every cuEventQuery wait inside the driver (on = 1) until cleared (0), as a driver busy elsewhere does. */
void kt_test_cuda_driver_block_queries(int on);
/* Tear the driver down (on = 1): every later call returns CUDA_ERROR_DEINITIALIZED, as at process exit after
 * the CUDA runtime's own exit handler ran. */
void kt_test_cuda_driver_deinit(int on);
/* Events created and not destroyed. */
uint64_t kt_test_cuda_driver_live_events(void);
/* A reset racing a tool's context check: the next event call on one of ctx's events made by a thread other than
 * the calling one (a tool's collector) right after its cuCtxGetId of ctx answered the live id makes another
 * thread reset ctx (cuDevicePrimaryCtxReset for a primary context, e.g. kt_test_ctx_enter's) or destroy it
 * (cuCtxDestroy, a user context) — the reset lands between the check and the use. The event call goes on once
 * the reset is over, or once the tool's CONTEXT_DESTROY_STARTING callback runs (the CUPTI double registers it
 * through kt_test_cuda_driver_on_destroy while a subscriber enables it). -1 if a race is still armed or running. */
int kt_test_cuda_driver_race_destroy(struct CUctx_st *ctx);
/* Waits up to timeout_ms for the raced reset to finish; 1 when it did (then it can be armed again), 0 if it was
 * never triggered (it is disarmed) or is still running. */
int kt_test_cuda_driver_race_wait(uint32_t timeout_ms);
/* CUPTI's part in context destruction: fn is called on the destroying thread before the context's resources are
 * freed (NULL: none). The CUPTI double sets it; tests need not. */
void kt_test_cuda_driver_on_destroy(void (*fn)(struct CUctx_st *ctx));

#ifdef __cplusplus
}
#endif
#endif
