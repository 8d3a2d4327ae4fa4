/* pool.c — CPU backend: kt_cpu_dispatch_2d runs a row function over bands on a persistent thread pool. */
#include "core/env.h"
#include "core/internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define KT__POOL_MAX 256

/* The one job the pool runs at a time. */
typedef struct pool_job_t {
    kt_cpu_rows_cb fn;          /* row function */
    void *user;                 /* its argument */
    uint32_t width;             /* passed through */
    uint32_t height;            /* rows in total */
    uint32_t band;              /* rows per claim */
    _Atomic uint32_t next_row;  /* first unclaimed row */
} pool_job_t;

static pthread_once_t g_conf_once = PTHREAD_ONCE_INIT;
static int g_threads = 1;                 /* pool size including the calling thread */
static pthread_once_t g_start_once = PTHREAD_ONCE_INIT;
static int g_workers;                     /* worker threads actually running */
static pthread_mutex_t g_job_lock = PTHREAD_MUTEX_INITIALIZER; /* one dispatch on the pool at a time */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;       /* guards the fields below */
static pthread_cond_t g_work = PTHREAD_COND_INITIALIZER;        /* a new job was posted */
static pthread_cond_t g_done = PTHREAD_COND_INITIALIZER;        /* the last worker left the job */
static uint64_t g_job_seq;                /* bumped per posted job */
static int g_busy;                        /* workers still inside the current job */
static pool_job_t g_job;                  /* the current job (fields set under g_mu) */
static __thread int tl_pool_worker;       /* set in pool threads: a nested dispatch runs inline */

static void conf(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    const char *e = kt__env(KT_ENV_NAME(CPU_THREADS));
    if (e && *e) {
        char *end;
        errno = 0;
        long v = strtol(e, &end, 10);
        if (!errno && !*end && v >= 1)
            n = v;
    }
    if (n < 1)
        n = 1;
    g_threads = n > KT__POOL_MAX ? KT__POOL_MAX : (int)n;
}

int kt_cpu_threads(void)
{
    pthread_once(&g_conf_once, conf);
    return g_threads;
}

static void run_bands(pool_job_t *j)
{
    uint32_t y0;
    while ((y0 = atomic_fetch_add_explicit(&j->next_row, j->band, memory_order_relaxed)) < j->height) {
        uint32_t y1 = j->height - y0 < j->band ? j->height : y0 + j->band;
        j->fn(y0, y1, j->width, j->user);
    }
}

static void *worker(void *arg)
{
    char name[16];
    snprintf(name, sizeof name, "kt-cpu-%d", (int)(intptr_t)arg);
    pthread_setname_np(pthread_self(), name);
    tl_pool_worker = 1;
    uint64_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&g_mu);
        while (g_job_seq == seen)
            pthread_cond_wait(&g_work, &g_mu);
        seen = g_job_seq;
        pthread_mutex_unlock(&g_mu);
        run_bands(&g_job);
        pthread_mutex_lock(&g_mu);
        if (--g_busy == 0)
            pthread_cond_signal(&g_done);
        pthread_mutex_unlock(&g_mu);
    }
    return NULL;
}

static void start_workers(void)
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (int i = 1; i < kt_cpu_threads(); i++) {
        pthread_t t;
        if (pthread_create(&t, &attr, worker, (void *)(intptr_t)i) != 0)
            break;
        g_workers++;
    }
    pthread_attr_destroy(&attr);
}

/* Every row exactly once, on the pool when it is free, otherwise on the calling thread. */
static void run_rows(uint32_t width, uint32_t height, kt_cpu_rows_cb fn, void *user)
{
    if (kt_cpu_threads() == 1 || height == 1 || tl_pool_worker || pthread_mutex_trylock(&g_job_lock) != 0) {
        fn(0, height, width, user);
        return;
    }
    pthread_once(&g_start_once, start_workers);
    if (!g_workers) {
        pthread_mutex_unlock(&g_job_lock);
        fn(0, height, width, user);
        return;
    }
    uint32_t parts = (uint32_t)(g_workers + 1) * 4u;
    pthread_mutex_lock(&g_mu);
    g_job.fn = fn;
    g_job.user = user;
    g_job.width = width;
    g_job.height = height;
    g_job.band = height / parts + (height % parts != 0);
    atomic_store_explicit(&g_job.next_row, 0, memory_order_relaxed);
    g_busy = g_workers;
    g_job_seq++;
    pthread_cond_broadcast(&g_work);
    pthread_mutex_unlock(&g_mu);

    run_bands(&g_job);

    pthread_mutex_lock(&g_mu);
    while (g_busy)
        pthread_cond_wait(&g_done, &g_mu);
    pthread_mutex_unlock(&g_mu);
    pthread_mutex_unlock(&g_job_lock);
}

int kt_cpu_dispatch_2d(const char *name, uint32_t width, uint32_t height, kt_cpu_rows_cb fn, void *user)
{
    if (!fn || !name)
        return KT_EINVAL;
    if (!width || !height)
        return 0;
    kt_kernel_id_t id = kt__on() ? kt__kernel_lookup_cached(name, KT_BACKEND_CPU) : 0;
    if (!id && kt__on()) /* the kernel table is full: the record is dropped, and counted in kernels_dropped */
        kt_record_dispatch(&(kt_dispatch_t){.kernel = 0});
    uint64_t t0 = kt__now_begin();
    run_rows(width, height, fn, user);
    uint64_t t1 = kt__now();
    if (id && kt__on())
        kt__record_host_span(id, t0, t1);
    return 0;
}
