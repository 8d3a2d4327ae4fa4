/* service.h — internal: the one way backends plug into the core (registration, collector threads, exit, fork). */
#ifndef KT_CORE_SERVICE_H
#define KT_CORE_SERVICE_H

#include "core/env.h"
#include "ktiming.h"

#include "shared/deadline.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/* ---------------------------------------------------------------------------------------------------
 * Backend registration
 *
 * A backend registers one ops table the first time it has something to collect. The core then calls:
 *   flush(deadline)  from kt_flush(), kt_snapshot(): record every completed command; wait for commands still in
 *                    flight no later than `deadline_ns` (kt_now_ns() time; 0 = do not wait at all).
 *   stop(deadline)   once, from kt_shutdown() and at process exit (in the process that registered; in a forked
 *                    child only with life->in_forked_child): wait for in-flight work until `deadline_ns`, record
 *                    it, count what is left as dropped with KT_DROP_IN_FLIGHT_AT_EXIT, and stop any collector
 *                    thread. After stop, flush must return at once. A backend used again after kt_init()
 *                    registers again.
 *   fork_prepare / fork_parent / fork_child   around fork(), in registration order (child and parent in
 *                    reverse): take the backend's locks in prepare, release them in parent and child. In the
 *                    child no collector thread exists (kt__collector_t handles itself) and the driver's state is
 *                    the parent's: a backend must not wait on it there.
 * Any callback may be NULL. Callbacks are called outside every core lock.
 * ------------------------------------------------------------------------------------------------- */
typedef struct kt__backend_life_t kt__backend_life_t;

typedef struct kt__backend_ops_t {
    const char *name;                   /* display name, e.g. kt_backend_name(KT_BACKEND_OPENCL) */
    void (*flush)(uint64_t deadline_ns); /* collect what is complete; wait for the rest until the deadline */
    void (*stop)(uint64_t deadline_ns);  /* final collection at shutdown / exit, leftovers counted as dropped */
    void (*fork_prepare)(void);         /* before fork: take the backend's locks */
    void (*fork_parent)(void);          /* after fork, in the parent: release them */
    void (*fork_child)(void);           /* after fork, in the child: release or reinitialise them */
    kt__backend_life_t *life;           /* optional (NULL = none): the state kt__backend_arm keeps, see below */
} kt__backend_ops_t;

/* Registers ops (the pointer must stay valid; idempotent per pointer). 0, KT_EINVAL or KT_EFULL. */
int kt__backend_register(const kt__backend_ops_t *ops);

/* Calls every registered flush with this deadline (registration order); in a forked child only those whose
 * life says in_forked_child. */
void kt__backends_flush(uint64_t deadline_ns);

/* Calls every registered stop once with this deadline and unregisters them (registration order); in a forked
 * child it only unregisters them, but for those whose life says in_forked_child. */
void kt__backends_stop(uint64_t deadline_ns);
/* Nonzero while kt__backends_stop runs the stop hooks (exit, kt_shutdown): a thread recording only then (the exit
 * flush) gets no prefaulted span log. */
int kt__backends_stopping(void);

/* ---------------------------------------------------------------------------------------------------
 * "Stopped -> register again", once
 *
 * A backend keeps one static kt__backend_life_t (zero-initialised: KT__BACKEND_LIFE_INIT) and points its ops'
 * `life` at it. It then calls kt__backend_arm(&ops) wherever it has something to collect (first use, every track,
 * context creation): the call is one atomic load while the backend is registered, and registers it (again) when
 * it never was or when kt__backends_stop (kt_shutdown, exit) stopped it since. kt__backend_stopped(&ops) tells the
 * backend that the core's stop ran and no arm followed (start no collector thread, skip a collect). The state
 * changes under the service's registration lock, so arm and stop never interleave halfway; stop marks every
 * registered backend stopped BEFORE calling the stop hooks (a stop hook sees kt__backend_stopped() == 1). An arm
 * that races a running stop registers the backend again at once (as the backends did before), and the next
 * flush or stop calls it. Call arm outside the backend's own locks (the core may hold its registration lock
 * across fork_prepare, which takes them). Without `life`, kt__backend_arm is kt__backend_register and
 * kt__backend_stopped is always 0.
 * ------------------------------------------------------------------------------------------------- */
struct kt__backend_life_t {
    _Atomic int state; /* 0 never registered, 1 registered, 2 stopped since (guarded by the registration lock) */
    int in_forked_child; /* constant, set by the backend: its flush and stop run in a forked child too (it leaves
                          * the parent's work alone there and collects the child's own) */
};
#define KT__BACKEND_LIFE_INIT {0}

/* Registers ops unless it is registered and not stopped since: 0 (also when nothing had to be done), KT_EINVAL
 * or KT_EFULL as kt__backend_register. Any thread; lock-free when already armed. */
int kt__backend_arm(const kt__backend_ops_t *ops);
/* 1 when kt__backends_stop stopped ops and no kt__backend_arm followed; else 0 (also before the first arm). */
int kt__backend_stopped(const kt__backend_ops_t *ops);
/* One backend stops alone (an OpenCL loader layer's clDeinitLayer): unregistered and marked stopped as
 * kt__backends_stop does for all, without calling its hooks (the caller runs its own stop). */
void kt__backend_stop_one(const kt__backend_ops_t *ops);

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
 * Drain until a deadline: the one wait loop of every backend's flush and stop
 *
 *   left = kt__drain(deadline_ns, step, arg);
 *
 * calls step(arg) -- one collection pass that records what has completed and returns how much is still
 * outstanding (in flight: commands, slots, events; any unit the backend counts) -- until it returns 0 or the
 * deadline (kt_now_ns time) has passed, and returns step's last answer. step is always called at least once,
 * also with deadline_ns 0 or one already past (one pass, no wait). Between passes it backs off by one policy:
 * for the first policy.spin_ns after the call it only yields the CPU (sched_yield: completions already being
 * delivered by a driver thread land within microseconds), then it naps first_nap_ns, doubling each time up to
 * max_nap_ns; a nap never goes past the deadline. No lock is held by the helper; step runs on the calling
 * thread, so it may take the backend's locks and call the driver (pin the context set inside it, or before the
 * call). Nothing is counted: at stop the backend records what the returned value stands for as dropped with
 * KT_DROP_IN_FLIGHT_AT_EXIT (kt_record_drop per command it still holds), at flush it leaves it in
 * flight for the next flush.
 *
 * The default policy is the OpenCL flush's: spin (yield) 1 ms, naps from 50 us doubling to 2 ms. A backend that
 * keeps a documented poll period (CUDA's kt_cuda_desc_t.poll_us) passes its own policy to kt__drain_with, e.g.
 * {0, poll_ns, poll_ns} for a fixed period. kt__drain_with also takes a clock (NULL = kt_now_ns and real sleeps)
 * so tests drive it with a test-double clock.
 * ------------------------------------------------------------------------------------------------- */

/* One collection pass; returns what is still outstanding (0 = done). */
typedef uint64_t (*kt__drain_step_cb)(void *arg);

typedef struct kt__drain_policy_t {
    uint64_t spin_ns;      /* from the call: yield only, no sleep, for this long (0 = nap from the start) */
    uint64_t first_nap_ns; /* first nap after the spin phase (0 is taken as 1000 ns) */
    uint64_t max_nap_ns;   /* naps double up to this (below first_nap_ns: every nap is first_nap_ns) */
} kt__drain_policy_t;

#define KT__DRAIN_POLICY_DEFAULT {1000000u, 50000u, 2000000u}

typedef struct kt__drain_clock_t {
    uint64_t (*now)(void *arg);          /* current time, same timeline as the deadline */
    void (*wait)(void *arg, uint64_t ns); /* yield (ns == 0) or sleep ns */
    void *arg;
} kt__drain_clock_t;

/* Passes until nothing is outstanding or the deadline passed; returns the last pass's outstanding count.
 * step NULL: returns 0 at once. Default policy, real clock. */
uint64_t kt__drain(uint64_t deadline_ns, kt__drain_step_cb step, void *arg);
/* The same with a policy (NULL = KT__DRAIN_POLICY_DEFAULT) and a clock (NULL = kt_now_ns, sched_yield and
 * kt__nap_ns). */
uint64_t kt__drain_with(uint64_t deadline_ns, kt__drain_step_cb step, void *arg, const kt__drain_policy_t *policy,
                        const kt__drain_clock_t *clock);

/* ---------------------------------------------------------------------------------------------------
 * Context set: a backend's registry of its contexts (queues, devices' contexts), no fixed cap
 *
 * Entries are opaque pointers (the backend's context structs). Two lists: live (added, not retired) and retired
 * (kt__ctx_set_retire: detached by the program, but commands of it may still be in flight; flushes still walk
 * it). Iteration pins: kt__ctx_set_pin copies the chosen lists into the caller's kt__ctx_pin_t (no allocation
 * for up to KT__CTX_PIN_INLINE entries, malloc beyond) and counts a pin; the caller then walks pin.ctx[0..n)
 * WITHOUT the set's lock, calling the driver or waiting as it likes, and calls kt__ctx_set_unpin. While any pin
 * is held, kt__ctx_set_reap frees nothing, so a retired context in a pinned copy stays valid. A context
 * kt__ctx_set_remove takes out is the backend's again at once: a pin taken before may still list it, so the
 * backend frees it only when its own rule says no pass can run (Vulkan: the program must not destroy a context
 * while it flushes); kt__ctx_set_remove_wait also waits until every pin taken before the removal is released (a
 * collector pass that may be polling it has ended), after which nothing in ktiming can reach the context; use
 * retire + reap when the context must outlive work still in flight.
 *
 *   static kt__ctx_set_t g_set = KT__CTX_SET_INIT;            (or KT__CTX_SET_INIT_FORK(each), see fork)
 *   kt__ctx_set_add(&g_set, ctx);                             attach (0 or KT_ENOMEM)
 *   kt__ctx_pin_t pin;
 *   kt__ctx_set_pin(&g_set, &pin, KT__CTX_PIN_ALL);           flush / stop / collector pass
 *   for (size_t i = 0; i < pin.n; i++) poll(pin.ctx[i]);
 *   kt__ctx_set_unpin(&pin);
 *   kt__ctx_set_retire(&g_set, ctx);                          detach: stays listed until reaped
 *   kt__ctx_set_reap(&g_set, ctx_done, ctx_free);             frees the retired ones whose work is finished
 *
 * Order: live entries come in the order they were added, except that a remove or retire moves the last-added
 * live entry into the freed position (O(1) after the O(n) search); retired entries follow, oldest first.
 * Lock rules: the set's lock is a leaf: the set holds it only inside these calls and calls back (reap's done,
 * find's match, foreach's fn, fork_each) with it held, so those callbacks must not take a lock of the set,
 * call the driver, or block. Backends may call every function here while holding their own locks, except
 * kt__ctx_set_remove_wait (it waits for pinning threads: hold no lock they may need).
 * fork: the set joins the service's fork handling on its first add: before fork, after the backends'
 * fork_prepare callbacks, the service takes each set's lock and then calls fork_each(ctx, 0) for every live and
 * retired entry (e.g. to take each context's own lock, as OpenCL does with its FIFO locks); after fork it calls
 * fork_each(ctx, 1) (parent) or fork_each(ctx, 2) (child) and releases the lock, before the backends'
 * fork_parent / fork_child. In the child the pin count starts at 0 (the parent's pinning threads do not exist
 * there; a pin the forking thread held is released in the child as usual and counts nothing). Lock order is therefore: backend locks taken in fork_prepare, then the set, then what fork_each takes.
 * ------------------------------------------------------------------------------------------------- */

typedef struct kt__ctx_set_t {
    pthread_mutex_t lock;                  /* guards everything below */
    void **live;                           /* added, not retired or removed: live[0..nlive) */
    size_t nlive, cap_live;
    void **retired;                        /* retired, not reaped: retired[0..nretired), oldest first */
    size_t nretired, cap_retired;
    unsigned pins;                         /* pinned copies held (kt__ctx_set_pin .. unpin) */
    void (*fork_each)(void *ctx, int phase); /* optional: 0 before fork, 1 parent after, 2 child after */
    int listed;                            /* on the service's fork list (set under the list lock) */
    struct kt__ctx_set_t *next;            /* that list */
    pthread_cond_t unpinned;               /* broadcast by unpin while kt__ctx_set_remove_wait waits */
    struct kt__ctx_pin_t *held;            /* the pins held now (linked through the pins themselves) */
    uint64_t pin_seq;                      /* tickets given to pins, in order */
    unsigned waiters;                      /* threads in kt__ctx_set_remove_wait */
    unsigned fork_gen;                     /* bumped in a forked child: the parent's pins count no more there */
} kt__ctx_set_t;

#define KT__CTX_SET_INIT {.lock = PTHREAD_MUTEX_INITIALIZER, .unpinned = PTHREAD_COND_INITIALIZER}
#define KT__CTX_SET_INIT_FORK(each)                                                                         \
    {.lock = PTHREAD_MUTEX_INITIALIZER, .unpinned = PTHREAD_COND_INITIALIZER, .fork_each = (each)}

/* Which lists kt__ctx_set_pin copies. */
#define KT__CTX_PIN_LIVE 1u
#define KT__CTX_PIN_RETIRED 2u
#define KT__CTX_PIN_ALL 3u

#define KT__CTX_PIN_INLINE 16

typedef struct kt__ctx_pin_t {
    void **ctx;                          /* the pinned entries: ctx[0..n) (live first, then retired) */
    size_t n;
    kt__ctx_set_t *set;                  /* NULL when nothing is pinned (empty copy or no memory) */
    void *inline_ctx[KT__CTX_PIN_INLINE]; /* the copy when it fits */
    uint64_t ticket;                     /* the set's pin_seq when pinned (internal) */
    unsigned fork_gen;                   /* the set's fork_gen when pinned (internal) */
    struct kt__ctx_pin_t *hnext, *hprev; /* the set's held list (internal) */
} kt__ctx_pin_t;

/* Adds ctx to the live list. 0, KT_EINVAL (NULL) or KT_ENOMEM. A context is added once (not checked). */
int kt__ctx_set_add(kt__ctx_set_t *s, void *ctx);
/* Takes ctx off the live or retired list without freeing anything. 0, or KT_EINVAL when it is on neither. */
int kt__ctx_set_remove(kt__ctx_set_t *s, void *ctx);
/* kt__ctx_set_remove, then waits until every pin taken before it is released. Never call it while the calling
 * thread holds a pin of this set or a lock a pinning thread may wait for (it would wait for itself). */
int kt__ctx_set_remove_wait(kt__ctx_set_t *s, void *ctx);
/* Moves ctx from the live to the retired list (pins still see it; kt__ctx_set_reap frees it). 0, KT_EINVAL when
 * it is not live, or KT_ENOMEM (it then stays live). */
int kt__ctx_set_retire(kt__ctx_set_t *s, void *ctx);
/* Unless a pin is held: takes every retired entry for which done(ctx) is nonzero (done NULL: every one) off the
 * list, then calls release(ctx) on each outside the lock (release NULL: nothing). Returns how many were taken. */
size_t kt__ctx_set_reap(kt__ctx_set_t *s, int (*done)(void *ctx), void (*release)(void *ctx));
/* Copies the lists `which` names into *pin and pins the set. The pin is linked into the set until unpin: keep it
 * where it is (a local of the pinning function), never copy it. 0 (pin->n may be 0: then nothing is pinned and
 * unpin is still correct), KT_EINVAL, or KT_ENOMEM (pin->n = 0, nothing pinned). */
int kt__ctx_set_pin(kt__ctx_set_t *s, kt__ctx_pin_t *pin, unsigned which);
/* Releases a pin (frees its copy); safe on a pin with nothing pinned. Does not reap: call kt__ctx_set_reap. */
void kt__ctx_set_unpin(kt__ctx_pin_t *pin);
/* Number of live / retired entries now. */
size_t kt__ctx_set_live(kt__ctx_set_t *s);
size_t kt__ctx_set_retired(kt__ctx_set_t *s);
/* The first live entry for which match(ctx, key) is nonzero, else NULL; valid only as long as the backend's
 * own rule keeps it alive (the set pins nothing here). */
void *kt__ctx_set_find(kt__ctx_set_t *s, int (*match)(void *ctx, const void *key), const void *key);
/* Calls fn(ctx, arg) for every live entry and then (retired nonzero) every retired one, under the set's lock. */
void kt__ctx_set_foreach(kt__ctx_set_t *s, int retired, void (*fn)(void *ctx, void *arg), void *arg);

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
 * Verbose lines (`ktiming run -v`): one writer for every backend (src/core/verbose.c)
 *
 * KTIMING_VERBOSE (a comma list) containing profile_exec or all turns them on; KTIMING_LOG (a path template,
 * kt__path_expand) sends them to that file, opened for append and line-buffered, instead of stderr (also when it
 * cannot be opened; the program's stdout is never used). Both are read once per process, on the first call of
 * either function below. A line is
 *
 *   ktiming,<kind>,<backend>,<device>,<name>,<rest>\n
 *
 * with device and name escaped by the exporters' field escaping (kt__escape_field: no control byte reaches the
 * terminal, ',' written as "\x2c"; the raw names are passed, never pre-escaped ones) and <rest> formatted with
 * printf from fmt (numbers and fixed words: not escaped). Each line goes out in one fputs and is flushed, so
 * lines of concurrent threads never interleave. Today's lines:
 *   kt__verbose_line("exec", "opencl", dev, name, "%.6f,%.6f,%.6f,device", ms, queued_ms, submit_ms);
 *   kt__verbose_line("exec", "opencl", dev, name, "%.6f,,,host", ms);
 *   kt__verbose_line("error", "opencl", dev, name, "%d,%s", status, what);
 *   kt__verbose_line("exec", "vulkan", dev, name, "%.6f,%llu,device", ms, start_ns);   (start empty when 0)
 * A backend asks kt__verbose_on() before gathering what only the line needs (extra profiling reads).
 * ------------------------------------------------------------------------------------------------- */

/* 1 when verbose lines are on (KTIMING_VERBOSE holds profile_exec or all), else 0. Cheap after the first call. */
int kt__verbose_on(void);
/* Writes one line as above when verbose lines are on; nothing otherwise. NULL device or name is written as "?".
 * fmt NULL: the line ends after <name>. Lines longer than 2048 bytes are cut (still newline-terminated). */
void kt__verbose_line(const char *kind, const char *backend, const char *device, const char *name, const char *fmt,
                      ...) __attribute__((format(printf, 5, 6)));

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

/* kt__env (getenv for KTIMING_* variables, NULL in secure-execution mode) is defined in core/env.h, with the
 * list of every variable's name (KT_ENV_NAME). */

#endif
