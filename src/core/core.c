/* core.c — lifecycle (lazy init, kt_init/kt_shutdown/kt_flush), runtime switch, error strings, backend hooks. */
#include "core/hooks.h"
#include "core/internal.h"

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

/* ---------------------------------------------------------------------------------------------------
 * Backend flush hooks (hooks.h)
 * ------------------------------------------------------------------------------------------------- */

#define KT__MAX_FLUSH 32

static pthread_mutex_t g_flush_lock = PTHREAD_MUTEX_INITIALIZER;
static kt__flush_cb g_flush[KT__MAX_FLUSH];
static int g_flush_count;

int kt__register_flush(kt__flush_cb fn)
{
    int rc = 0;
    if (!fn)
        return KT_EINVAL;
    pthread_mutex_lock(&g_flush_lock);
    int i;
    for (i = 0; i < g_flush_count && g_flush[i] != fn; i++)
        ;
    if (i == g_flush_count) {
        if (g_flush_count == KT__MAX_FLUSH)
            rc = KT_EFULL;
        else
            g_flush[g_flush_count++] = fn;
    }
    pthread_mutex_unlock(&g_flush_lock);
    return rc;
}

void kt__flush_all(void)
{
    kt__flush_cb fns[KT__MAX_FLUSH];
    pthread_mutex_lock(&g_flush_lock);
    int n = g_flush_count;
    memcpy(fns, g_flush, sizeof(fns[0]) * (size_t)n);
    pthread_mutex_unlock(&g_flush_lock);
    /* Called outside the lock: a flush may record, or even register another hook. */
    for (int i = 0; i < n; i++)
        fns[i]();
}

/* ---------------------------------------------------------------------------------------------------
 * Initialisation
 * ------------------------------------------------------------------------------------------------- */

static void update_recording(void)
{
    int on = g_user_enabled && atomic_load(&g_state) != KT__SHUTDOWN;
    __atomic_store_n(&kt__recording, on, __ATOMIC_RELAXED);
}

/* ---------------------------------------------------------------------------------------------------
 * fork: every core lock is taken before fork and released after it in both processes, so a child forked
 * while another thread held one (registering a name, adopting a shard, taking a snapshot) finds it usable.
 * The child starts with empty statistics (kt__recorder_fork_child) and writes its own outputs at exit.
 * ------------------------------------------------------------------------------------------------- */

static pid_t g_init_pid; /* set once by first_init */

pid_t kt__init_pid(void) { return g_init_pid; }

static void fork_prepare(void)
{
    pthread_mutex_lock(&g_life_lock);
    pthread_mutex_lock(&g_flush_lock);
    kt__recorder_fork_prepare();
    kt__registry_fork_prepare();
}

static void fork_release(void)
{
    kt__registry_fork_release();
    kt__recorder_fork_release();
    pthread_mutex_unlock(&g_flush_lock);
    pthread_mutex_unlock(&g_life_lock);
}

static void fork_child(void)
{
    fork_release();
    kt__recorder_fork_child();
}

static void at_exit(void)
{
    kt__flush_all();
#ifdef KT_HAVE_EXIT_WRITER
    kt__exit_write();
#endif
}

static uint32_t spans_from_env(void)
{
    const char *e = secure_getenv("KTIMING_SPANS");
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

    kt_device_info_t host;
    memset(&host, 0, sizeof host);
    host.backend = KT_BACKEND_CPU;
    strcpy(host.name, "host");
    strcpy(host.clock_domain, "CLOCK_MONOTONIC_RAW");
    host.resolution_ns = kt_clock_resolution_ns();
    host.frequency_hz = 1000000000u;
    host.valid_bits = 64;
    kt_device_publish(&host);

    g_init_pid = getpid();
    pthread_atfork(fork_prepare, fork_release, fork_child);
    atexit(at_exit);
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
    kt__flush_all();
    pthread_mutex_lock(&g_life_lock);
    if (atomic_load(&g_state) != KT__UNINIT) {
        atomic_store(&g_state, KT__SHUTDOWN);
        update_recording();
    }
    pthread_mutex_unlock(&g_life_lock);
}

void kt_flush(void) { kt__flush_all(); }

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

const char *kt_strerror(int err)
{
    switch (err) {
    case KT_OK:
        return "success";
#define KT__ERRNO_CASE(name, val, msg)                                                                     \
    case KT_##name:                                                                                        \
        return msg;
        KT_ERRNO_MAP(KT__ERRNO_CASE)
#undef KT__ERRNO_CASE
    default:
        return "unknown error";
    }
}

const char *kt_backend_name(kt_backend_t backend)
{
    static const char *const names[KT_BACKEND_COUNT] = {"CPU", "OpenCL", "Vulkan", "CUDA", "Metal"};
    return (unsigned)backend < KT_BACKEND_COUNT ? names[backend] : "unknown";
}

const char *kt_version(void) { return KT_VERSION_STRING; }
