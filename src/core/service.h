/* service.h — internal: the one way backends plug into the core (registration, collector threads, exit, fork). */
#ifndef KT_CORE_SERVICE_H
#define KT_CORE_SERVICE_H

#include "ktiming.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/* ---------------------------------------------------------------------------------------------------
 * Backend registration
 *
 * A backend registers one ops table the first time it has something to collect. The core then calls:
 *   flush(deadline)  from kt_flush(), kt_snapshot(): record every completed command; wait for commands still in
 *                    flight no later than `deadline_ns` (kt_now_ns() time; 0 = do not wait at all).
 *   stop(deadline)   once, from kt_shutdown() and at process exit (in the process that registered, never in a
 *                    forked child): wait for in-flight work until `deadline_ns`, record it, count what is left as
 *                    dropped with KT_DROP_IN_FLIGHT_AT_EXIT, and stop any collector thread. After stop, flush
 *                    must return at once. A backend used again after kt_init() registers again.
 *   fork_prepare / fork_parent / fork_child   around fork(), in registration order (child and parent in
 *                    reverse): take the backend's locks in prepare, release them in parent and child. In the
 *                    child no collector thread exists (kt__collector_t handles itself) and the driver's state is
 *                    the parent's: a backend must not wait on it there.
 * Any callback may be NULL. Callbacks are called outside every core lock.
 * ------------------------------------------------------------------------------------------------- */
typedef struct kt__backend_ops_t {
    const char *name;                   /* display name, e.g. kt_backend_name(KT_BACKEND_OPENCL) */
    void (*flush)(uint64_t deadline_ns); /* collect what is complete; wait for the rest until the deadline */
    void (*stop)(uint64_t deadline_ns);  /* final collection at shutdown / exit, leftovers counted as dropped */
    void (*fork_prepare)(void);         /* before fork: take the backend's locks */
    void (*fork_parent)(void);          /* after fork, in the parent: release them */
    void (*fork_child)(void);           /* after fork, in the child: release or reinitialise them */
} kt__backend_ops_t;

/* Registers ops (the pointer must stay valid; idempotent per pointer). 0, KT_EINVAL or KT_EFULL. */
int kt__backend_register(const kt__backend_ops_t *ops);

/* Calls every registered flush with this deadline (registration order); nothing in a forked child. */
void kt__backends_flush(uint64_t deadline_ns);

/* Calls every registered stop once with this deadline and unregisters them (registration order); in a forked
 * child it only unregisters them. */
void kt__backends_stop(uint64_t deadline_ns);
/* Nonzero while kt__backends_stop runs the stop hooks (exit, kt_shutdown): a thread recording only then (the exit
 * flush) gets no prefaulted span log. */
int kt__backends_stopping(void);

/* How long exit and kt_shutdown() wait for work in flight: KTIMING_EXIT_WAIT_MS (default 2000 ms), in ns. */
uint64_t kt__exit_wait_ns(void);

/* How long kt_flush() / kt_snapshot() wait for work in flight before returning: 10 s. A command that never
 * completes (waiting on an event the program never sets) costs this once per flush, not once per command. */
#define KT__FLUSH_WAIT_NS 10000000000ull

/* Installs the one pthread_atfork registration (backends' callbacks, collector threads, then the core's own
 * locks through core_prepare / core_release(child)); idempotent. The core calls it from a load-time
 * constructor with kt__core_fork_prepare / kt__core_fork_release, so no fork can find a core lock held
 * without the handlers that take it (first initialisation holds the life-cycle lock while it calibrates). */
void kt__fork_install(void (*core_prepare)(void), void (*core_release)(int child));

/* Marks this process as the owner (first initialisation, first backend registration); idempotent. */
void kt__fork_owner_mark(void);

/* Non-zero in a process forked from the one that initialised ktiming (exit-time backend work is skipped). */
int kt__forked_child(void);

/* ---------------------------------------------------------------------------------------------------
 * Collector threads
 *
 * One helper for every backend's background collector: the thread is named, has every signal blocked (the
 * program's signals are never delivered to it), calls step(arg) in a loop -- at once again while step returns
 * non-zero (it did work), else after napping up to nap_ns or until kt__collector_wake() -- and is stopped and
 * joined by kt__collector_stop(). Across fork() the child has no collector thread: kt__collector_running() is
 * 0 there and the struct can be started again.
 * ------------------------------------------------------------------------------------------------- */

/* One pass of a collector; returns non-zero when it did work (called again at once), 0 to nap. */
typedef int (*kt__collector_step_cb)(void *arg);

typedef struct kt__collector_t {
    pthread_mutex_t lock;          /* guards the sleep/wake handshake and start/stop */
    pthread_cond_t cond;           /* signalled by wake and stop */
    pthread_t thread;              /* valid while running */
    _Atomic int running;           /* 1 while the thread exists (0 again in a forked child) */
    _Atomic int stop_req;          /* set by stop: the loop ends after the current step */
    _Atomic int wake_req;          /* set by wake: skip the next nap */
    _Atomic int sleeping;          /* 1 while the thread waits on cond */
    kt__collector_step_cb step;    /* what the thread does */
    void *arg;                     /* passed to step */
    uint64_t nap_ns;               /* longest nap between idle steps; 0 = until woken */
    char name[16];                 /* thread name (15 chars max, as Linux allows) */
    int cond_ready;                /* cond re-initialised on CLOCK_MONOTONIC (under lock) */
    struct kt__collector_t *next;  /* list of started collectors, for the fork handlers */
} kt__collector_t;

#define KT__COLLECTOR_INIT {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER}

/* Starts the thread (no-op returning 0 if already running). 0, KT_EINVAL or KT_ENOMEM (thread creation). */
int kt__collector_start(kt__collector_t *c, const char *name, kt__collector_step_cb step, void *arg,
                        uint64_t nap_ns);
/* Asks the collector to run a step soon; cheap (no lock) unless the collector sleeps. Any thread. */
void kt__collector_wake(kt__collector_t *c);
/* Stops and joins the thread; returns at once if it is not running or when called from the collector itself
 * (which then ends after its current step). */
void kt__collector_stop(kt__collector_t *c);
/* Whether the thread exists. */
int kt__collector_running(kt__collector_t *c);
/* True inside step() when stop was requested (long steps may end early). */
int kt__collector_stopping(kt__collector_t *c);
/* Whether the calling thread is c's collector thread. */
int kt__collector_is_self(kt__collector_t *c);

/* Sleeps ns nanoseconds (the one sleep helper; restarts after signals until the time has passed). */
void kt__nap_ns(uint64_t ns);

/* ---------------------------------------------------------------------------------------------------
 * Device clock facts: one meaning per field
 *
 * Backends publish a device with kt__device_publish_model(): error_bound_ns is the model's bound at `now_ns`
 * (kt_clock_error_at: what a span placed now may be off by, extrapolation included), model_samples the samples
 * the fit kept (inliers), drift_ppm the fitted drift. Backends without a model publish with model NULL
 * (bound 0 = host clock or durations only, as info->clock_domain says).
 * ------------------------------------------------------------------------------------------------- */
struct kt_clock_model_t;
void kt__device_publish_model(kt_device_info_t *info, const struct kt_clock_model_t *model, uint64_t now_ns);

/* Whether a dispatch kt_record_dispatch records on the calling thread now would keep its span (spans on and
 * the thread's log not full): a backend may skip reading stamps that only a span holds (OpenCL's queued and
 * submit times). 1 when it cannot tell yet (no shard, or one a reset will clear). */
int kt__span_room(void);

/* ---------------------------------------------------------------------------------------------------
 * Output path templates
 * ------------------------------------------------------------------------------------------------- */

/* Expands %p (pid), %h (host name), %r (kt__rank(), "0" when there is none) and %% in tmpl into out.
 * Any other %x is kept as is. 0, KT_EINVAL (NULL), or KT_EFULL when out is too small (out then holds "").
 * pid < 0 means the calling process's. */
int kt__path_expand(const char *tmpl, long pid, char *out, size_t size);

/* The process's rank from OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK or SLURM_PROCID (first set, a decimal
 * integer in 0..INT32_MAX), else -1. */
int32_t kt__rank(void);

/* getenv for KTIMING_* variables: NULL in secure-execution mode (setuid/setgid/capabilities: secure_getenv),
 * so a privileged program built with ktiming never obeys its caller's environment. */
const char *kt__env(const char *name);

#endif
