/* cl_collector.c — the collector thread: polls the polled records, drains the callbacks' ring, calibrates
 * prepared devices and frees detached queues, off the program's threads; and the completion callback.
 *
 * The driver runs completion callbacks on its own execution thread (PoCL: the worker that ran the command), so
 * whatever a callback does delays the next command. A callback therefore only claims its record and pushes the
 * slot into the ring (cl_ring.c). The collector (the core's collector helper, kt__collector_t) pops slots and does
 * the rest: profiling reads, clock mapping, kt_record_dispatch, the verbose line, clReleaseEvent; it also frees
 * detached queues whose last command is done. A flush drains the ring itself too, so nothing waits on the
 * collector being scheduled. A full ring, or no collector, means the callback finishes the record itself. The
 * collector polls every millisecond while completions keep coming and, after a quiet spell, sleeps until a
 * callback wakes it; a callback wakes it only then (no system call per command otherwise). */
#include "backends/opencl/cl_collector.h"
#include "backends/opencl/cl_outcome.h"
#include "backends/opencl/cl_poll.h"
#include "backends/opencl/cl_ring.h"
#include "core/internal.h"
#include "core/service.h"
#include "shared/tool_cl.h"

#include <string.h>

#define COLLECT_POLL_NS 1000000u /* collector's nap between drains while completions keep coming */
#define COLLECT_IDLE_NAPS 100   /* empty naps before it sleeps until woken */
/* While the program synchronises: a queue with work that no synchronisation point covered for this long is polled by
 * the collector (the longest nap, so a queue the program synchronises at least that often is left to it). */
#define COLLECT_STALE_NS 8000000u

static uint64_t g_coll_seen_collects;  /* sync points at the collector's last step (its thread only) */
static _Alignas(64) _Atomic int g_coll_deep;              /* the collector sleeps until woken */
static kt__collector_t g_coll = KT__COLLECTOR_INIT;       /* the collector thread */
static int g_coll_idle;                                   /* collector: empty naps in a row (its thread only) */
static _Atomic int g_coll_off;                            /* KTIMING_OPENCL_COLLECTOR=0 */
static pthread_once_t g_ring_once = PTHREAD_ONCE_INIT;

static void ring_init(void)
{
    kt__cl_ring_init();
    const char *v = kt__env(KT_ENV_NAME(OPENCL_COLLECTOR));
    atomic_store(&g_coll_off, v && !strcmp(v, "0"));
}

/* The collector's next nap: twice the last one (`first` after a short one), at most 8 ms. */
static void nap_longer(uint64_t first)
{
    uint64_t nap = g_coll.nap_ns >= COLLECT_POLL_NS ? 2 * g_coll.nap_ns : first;
    g_coll.nap_ns = nap < 8ull * COLLECT_POLL_NS ? nap : 8ull * COLLECT_POLL_NS;
}

/* kt_cl_prepare's devices, before their commands come, and the core set up with them (the host clock's
 * calibration): here, off the program's threads. */
static void prepare_pending(void)
{
    kt__ensure_init();
    kt__cl_dev_calibrate_pending();
    /* the span log of the next thread to record, written here: the program's thread that records its commands at
     * its clFinish/clWaitForEvents (kt_cl_collect) took its 288 page faults (~0.45 ms of CPU) at its first one,
     * inside its loop; made before this thread's shard, so that this thread is listed only once it is there */
    kt__span_log_spare_reserve();
    /* this thread records the commands' spans too (those no synchronisation point recorded): its shard and span
     * log are taken now, while the program builds its kernels, not at the first command of its loop; and when a
     * snapshot will be written at exit, the span array it copies into, likewise (~0.4 ms less in the program's
     * exit handler) */
    kt__shard_self();
    kt__snapshot_spare_reserve();
}

/* Nothing happened this step: nap, or after COLLECT_IDLE_NAPS empty naps with nothing in flight sleep until
 * woken (return 1: look again at once). */
static int idle_step(void)
{
    if (g_coll_idle++ < COLLECT_IDLE_NAPS) {
        /* the helper naps on its condition variable, not in nanosleep: a stop (exit, kt_shutdown) wakes it at once
         * instead of waiting out the nap (~1.1 ms at every exit); callbacks do not wake it (no system call per
         * command) */
        g_coll.nap_ns = COLLECT_POLL_NS;
        return 0;
    }
    atomic_store(&g_coll_deep, 1); /* seq_cst, before the head load in kt__cl_ring_nonempty and the tag loads */
    if (kt__cl_ring_nonempty() || kt__cl_ctx_retired_count() || kt__cl_any_polled() || kt__cl_dev_any_pending()) {
        atomic_store(&g_coll_deep, 0);
        g_coll_idle = kt__cl_ctx_retired_count() ? 0 : g_coll_idle;
        return 1;
    }
    g_coll_idle = 0;
    g_coll.nap_ns = 0; /* until a callback wakes it */
    return 0;
}

/* One collector pass: poll the polled records and drain the callbacks' ring; while completions keep coming nap
 * 1 ms and look again (polled commands still running: 1, 2, 4, then every 8 ms while none finishes); after
 * COLLECT_IDLE_NAPS empty naps with nothing in flight return 0, and the helper sleeps until a new record or a
 * callback wakes it. Measured on PoCL (2 cores, loaded): 1 ms naps beat 100-200 us ones, whose extra wake-ups
 * cost more CPU than the shorter leftover for the flush saved. */
static int collector_step(void *unused)
{
    (void)unused;
    if (kt__cl_dev_any_pending())
        prepare_pending();
    kt__cl_ctx_reap();
    uint64_t collects = kt__cl_poll_sync_points();
    if (collects != g_coll_seen_collects) {
        /* The program's thread polled at a synchronisation point since the last step (kt_cl_collect): it will
         * again at its next one. Polling here too, while the driver's threads run its commands and it enqueues
         * more, is what cost (their locks contended: +45 ms of CPU per 20,000 tiny kernels when the VM was slow).
         * Look less often (2, 4, then every 8 ms) while that goes on; callbacks are still drained, and the queues
         * no synchronisation point covered within COLLECT_STALE_NS are polled: a queue the program never waits
         * for, or one released without a wait, kept every finished command (and its event) until exit. */
        g_coll_seen_collects = collects;
        g_coll_idle = 0;
        nap_longer(2 * COLLECT_POLL_NS);
        kt__cl_ring_drain(256, 1);
        if (kt__cl_any_polled()) {
            unsigned running;
            uint64_t now = kt_now_ns();
            kt__cl_poll_done(now > COLLECT_STALE_NS ? now - COLLECT_STALE_NS : 0, &running);
        }
        return 0;
    }
    unsigned polled = 0, done = 0;
    if (kt__cl_any_polled())
        done = kt__cl_poll_done(UINT64_MAX, &polled);
    unsigned drained = kt__cl_ring_drain(256, 1);
    if (drained || done) {
        g_coll_idle = 0;
        if (drained || !polled) /* more may come at once: look again before napping */
            return 1;
        g_coll.nap_ns = COLLECT_POLL_NS;
        return 0;
    }
    if (polled) { /* commands still running: keep polling, less often (up to 8 ms) while none finishes */
        g_coll_idle = 0;
        nap_longer(COLLECT_POLL_NS);
        return 0;
    }
    return idle_step();
}

int kt__cl_collector_pass(void)
{
    /* only without the collector thread (KTIMING_OPENCL_COLLECTOR=0): its state is that thread's alone */
    return kt__collector_running(&g_coll) ? 0 : collector_step(NULL);
}

void kt__cl_collector_wake(void)
{
    if (atomic_load(&g_coll_deep) && atomic_exchange(&g_coll_deep, 0)) /* seq_cst, after the head CAS */
        kt__collector_wake(&g_coll);
}

void kt__cl_collector_kick(void)
{
    atomic_store(&g_coll_deep, 0);
    kt__collector_wake(&g_coll);
}

void kt__cl_collector_start(void)
{
    pthread_once(&g_ring_once, ring_init);
    /* not in a forked child: its commands use callbacks (the parent's collector does not exist there, and a thread
     * started in the child of a threaded process is what the child's exit would have to join) */
    if (!atomic_load(&g_coll_off) && !kt__collector_running(&g_coll) && !kt__forked_child())
        kt__collector_start(&g_coll, "kt-opencl", collector_step, NULL, 0);
}

void kt__cl_collector_stop(void)
{
    kt__collector_stop(&g_coll);
}

int kt__cl_collector_running(void)
{
    return kt__collector_running(&g_coll);
}

void CL_CALLBACK kt__cl_on_complete(cl_event event, cl_int status, void *user)
{
    (void)event;
    kt__cl_rec_t *r;
    if (!kt__cl_rec_callback(user, status, &r))
        return;
    r->observed_ns = r->ctx->profiling ? 0 : kt_now_ns();
    if (kt__collector_running(&g_coll) && kt__cl_ring_push(r->slot) == 0)
        kt__cl_collector_wake();
    else
        kt__cl_rec_finish(r, status, r->observed_ns, 0);
}
