/* core.c — lifecycle (lazy init, kt_init/kt_shutdown/kt_flush), runtime switch, error strings, backend hooks. */
#include "core/internal.h"
#include "core/service.h"
#include "shared/shared.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------------------------------
 * State
 * ------------------------------------------------------------------------------------------------- */

KT_API int kt__recording = 1;
kt__config_t kt__cfg = {KT_SPANS_DEFAULT, 1024};

enum { KT__UNINIT = 0, KT__RUNNING = 1, KT__SHUTDOWN = 2 };

#define KT__SAMPLE_DEFAULT 1024u
#define KT__SAMPLE_MAX (1u << 20)

static pthread_mutex_t g_life_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int g_state = KT__UNINIT; /* KT__UNINIT / KT__RUNNING / KT__SHUTDOWN */
static int g_user_enabled = 1;           /* kt_enable / kt_disable, guarded by g_life_lock */
static int g_shut_early;                 /* kt_shutdown before anything initialised: the lazy init then leaves
                                            ktiming shut down (kt_init clears it); guarded by g_life_lock */

/* ---------------------------------------------------------------------------------------------------
 * Initialisation
 * ------------------------------------------------------------------------------------------------- */

static void update_recording(void)
{
    int on = g_user_enabled && !g_shut_early && atomic_load(&g_state) != KT__SHUTDOWN;
    __atomic_store_n(&kt__recording, on, __ATOMIC_RELAXED);
}

/* ---------------------------------------------------------------------------------------------------
 * fork (called from the service layer's one pthread_atfork registration, after the backends' prepare and
 * before their release): every core lock is taken before fork and released after it in both processes, so a
 * child forked while another thread held one (registering a name, adopting a shard, taking a snapshot) finds
 * it usable. The child starts with empty statistics (kt__recorder_fork_child) and writes its own outputs.
 * ------------------------------------------------------------------------------------------------- */

void kt__core_fork_prepare(void)
{
    pthread_mutex_lock(&g_life_lock);
    kt__recorder_fork_prepare();
    kt__hclock_fork_prepare(); /* before the registry: a clock refresh publishes the host record holding it */
    kt__registry_fork_prepare();
}

void kt__core_fork_release(int child)
{
    if (child) /* before anything is written: the child's tables are its own, not run's arena */
        kt__arena_fork_child();
    kt__registry_fork_release();
    kt__hclock_fork_release();
    kt__recorder_fork_release();
    pthread_mutex_unlock(&g_life_lock);
    if (child)
        kt__recorder_fork_child();
}

/* The fork handlers exist from load on: a fork on one thread while another is inside first_init (holding
 * g_life_lock through the clock's calibration) is then prepared like any other. */
static pid_t g_load_pid; /* the process this library was loaded into (set at load, never changed) */

__attribute__((constructor)) static void fork_handlers_at_load(void)
{
    g_load_pid = getpid();
    kt__fork_install(kt__core_fork_prepare, kt__core_fork_release);
}

int kt__forked_since_load(void) { return g_load_pid && g_load_pid != getpid(); }

/* At exit, in the process that initialised ktiming: one bounded wait for work in flight (KTIMING_EXIT_WAIT_MS),
 * leftovers counted as dropped, then the outputs. A forked child does not touch the parent's drivers (only the
 * backends that tell the child's own work from the parent's stop there: kt__backends_stop). */
static void at_exit(void)
{
    kt__arena_mark_exit();
    kt__backends_stop(kt__now() + kt__exit_wait_ns());
    kt__exit_write();
}

static uint32_t spans_from_env(void)
{
    const char *e = kt__env(KT_ENV_NAME(SPANS));
    if (!e || !*e)
        return KT_SPANS_DEFAULT;
    char *end;
    errno = 0;
    unsigned long v = strtoul(e, &end, 10);
    if (errno || *end || v > UINT32_MAX)
        return KT_SPANS_DEFAULT;
    return (uint32_t)v;
}

/* Called with g_life_lock held, once. */
static void first_init(const kt_desc_t *d)
{
    if (d->spans_off)
        kt__cfg.span_capacity = 0;
    else if (d->span_capacity)
        kt__cfg.span_capacity = d->span_capacity;
    else
        kt__cfg.span_capacity = spans_from_env();
    uint32_t sc = d->sample_capacity ? d->sample_capacity : KT__SAMPLE_DEFAULT;
    kt__cfg.sample_capacity = sc > KT__SAMPLE_MAX ? KT__SAMPLE_MAX : sc;
    g_user_enabled = !d->start_disabled;
    kt__arena_claim(); /* under `ktiming run`: the process takes the run arena at its first use (arena.c) */
    if (kt__arena) { /* what `ktiming run` needs to read the tables (arena.c) */
        atomic_store_explicit(&kt__arena->span_capacity, kt__cfg.span_capacity, memory_order_relaxed);
        atomic_store_explicit(&kt__arena->sample_capacity, kt__cfg.sample_capacity, memory_order_relaxed);
    }

    kt__hclock_init(); /* publishes the host device record */

    kt__fork_owner_mark();
    atexit(at_exit);
    kt__crash_install(); /* KTIMING_ON_CRASH=write (crash.c) */
    atomic_store_explicit(&g_state, KT__RUNNING, memory_order_release);
    update_recording();
}

void kt__ensure_init(void)
{
    if (atomic_load_explicit(&g_state, memory_order_acquire) != KT__UNINIT)
        return;
    pthread_mutex_lock(&g_life_lock);
    if (atomic_load(&g_state) == KT__UNINIT) {
        kt_desc_t d;
        memset(&d, 0, sizeof d);
        first_init(&d);
        if (g_shut_early) { /* kt_shutdown came first: initialised, but shut down until kt_init */
            g_shut_early = 0;
            atomic_store(&g_state, KT__SHUTDOWN);
            update_recording();
            kt__arena_mark_closed();
        }
    }
    pthread_mutex_unlock(&g_life_lock);
}

int kt_init(const kt_desc_t *desc)
{
    kt_desc_t zero;
    memset(&zero, 0, sizeof zero);
    if (!desc)
        desc = &zero;
    int rc = 0;
    pthread_mutex_lock(&g_life_lock);
    switch (atomic_load(&g_state)) {
    case KT__UNINIT:
        g_shut_early = 0; /* a kt_shutdown before it is undone, as after any kt_shutdown */
        first_init(desc);
        break;
    case KT__SHUTDOWN: /* sizes stay those of the first initialisation */
        g_user_enabled = !desc->start_disabled;
        atomic_store(&g_state, KT__RUNNING);
        update_recording();
        break;
    default:
        rc = KT_ESTATE;
    }
    pthread_mutex_unlock(&g_life_lock);
    return rc;
}

void kt_shutdown(void)
{
    kt__backends_stop(kt__now() + kt__exit_wait_ns());
    pthread_mutex_lock(&g_life_lock);
    if (atomic_load(&g_state) == KT__UNINIT) { /* nothing initialised yet: off until kt_init, whose sizes count */
        g_shut_early = 1;
        update_recording();
    } else {
        atomic_store(&g_state, KT__SHUTDOWN);
        update_recording();
        kt__arena_mark_closed();
    }
    pthread_mutex_unlock(&g_life_lock);
}

void kt_flush(void) { kt__backends_flush(kt__now() + KT__FLUSH_WAIT_NS); }

/* ---------------------------------------------------------------------------------------------------
 * Runtime switch
 * ------------------------------------------------------------------------------------------------- */

void kt_enable(void)
{
    pthread_mutex_lock(&g_life_lock);
    g_user_enabled = 1;
    update_recording();
    pthread_mutex_unlock(&g_life_lock);
}

void kt_disable(void)
{
    pthread_mutex_lock(&g_life_lock);
    g_user_enabled = 0;
    update_recording();
    pthread_mutex_unlock(&g_life_lock);
}

int kt_is_enabled(void) { return kt__on(); }

/* ---------------------------------------------------------------------------------------------------
 * Names
 * ------------------------------------------------------------------------------------------------- */

/* Every error code with its name and message, from the one X-macro (KT_ERRNO_MAP). */
static const struct kt__err_row {
    int err;          /* KT_OK or a KT_E* value */
    const char *name; /* "KT_OK", "KT_EINVAL", ... */
    const char *msg;  /* kt_strerror's text */
} g_err_rows[] = {
    {KT_OK, "KT_OK", "success"},
#define KT__ERR_ROW(name, val, msg) {KT_##name, "KT_" #name, msg},
    KT_ERRNO_MAP(KT__ERR_ROW)
#undef KT__ERR_ROW
};

static const struct kt__err_row *err_row(int err)
{
    for (size_t i = 0; i < sizeof g_err_rows / sizeof g_err_rows[0]; i++)
        if (g_err_rows[i].err == err)
            return &g_err_rows[i];
    return NULL;
}

const char *kt_strerror(int err)
{
    const struct kt__err_row *r = err_row(err);
    return r ? r->msg : "unknown error";
}

const char *kt_err_name(int err)
{
    const struct kt__err_row *r = err_row(err);
    return r ? r->name : "KT_E?";
}

const char *kt_drop_reason_name(kt_drop_reason_t reason)
{
    static const char *const names[KT_DROP_REASON_COUNT] = {
#define KT__DROP_NAME(name, text, id) text,
        KT_DROP_REASON_MAP(KT__DROP_NAME)
#undef KT__DROP_NAME
    };
    return (unsigned)reason < KT_DROP_REASON_COUNT ? names[reason] : "unknown";
}

const char *kt_backend_name(kt_backend_t backend)
{
    return kt__backend_names(backend, 1); /* shared/shared.h: the one table of backend names */
}

const char *kt_version(void) { return KT_VERSION_STRING; }
