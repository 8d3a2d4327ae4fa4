/* cl_service.c — the OpenCL backend's face to the core: flush and stop hooks (bounded by the core's deadline),
 * fork callbacks for its locks, registering again after a stop, and kt_cl_shutdown. */
#include "backends/opencl/cl_service.h"
#include "backends/opencl/cl_collector.h"
#include "backends/opencl/cl_poll.h"
#include "backends/opencl/cl_ring.h"
#include "core/internal.h"
#include "core/service.h"

/* registered / stopped since: the core's one logic; flush and stop run in a forked child too (its own queues) */
static kt__backend_life_t g_life = {.state = 0, .in_forked_child = 1};

/* kt_flush / kt_snapshot: bounded by the core's deadline. In a forked child too, for the child's own queues only:
 * the contexts inherited from the parent (the parent's driver state) are left alone (kt__cl_ctx_mine). */
static void flush_hook(uint64_t deadline_ns)
{
    kt__cl_flush_all(deadline_ns);
}

/* Exit and kt_shutdown: one bounded wait, then whatever is still in flight is counted as dropped (in flight at
 * exit) and the collector ends. The core marks the backend stopped first: kt_cl_collect does nothing from then
 * on, and the next track arms it again (kt__backend_arm). */
static void stop_hook(uint64_t deadline_ns)
{
    kt__cl_flush_all(deadline_ns); /* a forked child: its own queues only, as flush_hook */
    kt__cl_collect_pass(NULL, 1 + KT_DROP_IN_FLIGHT_AT_EXIT);
    kt__cl_collector_stop();
    kt__cl_ctx_reap();
}

/* fork: consistent poll and drain locks and registry in both processes (the helper ends the collector in the
 * child). */
static void fork_prepare(void)
{
    kt__cl_poll_fork_lock(); /* first: a FIFO poller takes the registry's lock only before it */
    kt__cl_ctx_fork_lock();
    kt__cl_ring_fork_lock();
}

static void fork_release(void)
{
    kt__cl_ring_fork_unlock();
    kt__cl_ctx_fork_unlock();
    kt__cl_poll_fork_unlock();
}

static void fork_child(void)
{
    fork_release();
    kt__cl_dev_fork_child();
}

static const kt__backend_ops_t kOps = {.name = "OpenCL",
                                       .flush = flush_hook,
                                       .stop = stop_hook,
                                       .fork_prepare = fork_prepare,
                                       .fork_parent = fork_release,
                                       .fork_child = fork_child,
                                       .life = &g_life};

/* A loader layer's clDeinitLayer: as the core's stop, for this backend alone. It is marked stopped first (as the
 * core's stop marks every backend): kt_cl_collect does nothing, the core's flush and stop no longer call in (the
 * loader unloads the driver next), and the next attach or track arms it again. */
void kt_cl_shutdown(void)
{
    if (kt_cl_load(NULL) < 0 || kt__forked_child())
        return;
    kt__backend_stop_one(&kOps);
    stop_hook(kt_now_ns() + kt__exit_wait_ns());
    kt__cl_ctx_retire_all();
    kt__cl_ctx_reap();
}

int kt__cl_stopped(void)
{
    return kt__backend_stopped(&kOps);
}

void kt__cl_arm(void)
{
    kt__backend_arm(&kOps); /* outside the registry's lock: the core may hold its own lock while flushing */
    kt__cl_collector_start();
}
