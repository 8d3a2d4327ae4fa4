/* cuda_reset_watch.c — learning of a context's destruction before it happens. cudaDeviceReset
 * (cuDevicePrimaryCtxReset) and cuCtxDestroy free every event and stream of the context, ktiming's too; the
 * collector checks the context's id before each use of a handle, but a reset landing between that check and the
 * call makes one use of a freed handle. Only CUPTI's resource callback at CONTEXT_DESTROY_STARTING, made on the
 * destroying thread while the context still exists, tells a tool in time. kt__cuda_context_destroying is what
 * that callback calls: it waits for a collector pass in progress (its uses happen before the reset frees
 * anything), collects what completes, and retires the context so no pass touches its handles again.
 *
 * Who calls it: the CUPTI injection library of `ktiming run` (it holds CUPTI's subscription anyway, and says so with
 * kt__cuda_resets_watched_by_tool: kt_cuda_watch_resets(1) then succeeds as it is), or, in a
 * program that times with kt_cuda_* itself, this file's own subscription (kt_cuda_watch_resets,
 * KTIMING_CUDA_WATCH_RESETS=1). CUPTI allows one subscriber per process, so that is opt-in: holding it makes a
 * profiler of the program's own (Kineto / torch.profiler, Nsight tools) fail to subscribe; with CUPTI 13's
 * cuptiSubscribe_v2 the subscription carries a name saying how to free it, and a refusal names the holder
 * (shared/cupti_subscribe.h). libcupti is loaded with dlopen (KTIMING_CUPTI_LIBRARY, else by soname); libktiming
 * links nothing of CUDA. */
#include "cuda_internal.h"

#include "core/env.h"
#include "shared/cupti_subscribe.h"
#include "shared/tool.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* What is used of cupti_callbacks.h (values and layouts unchanged since CUPTI 4; CUPTI 13 checked). */
#define KT__CUPTI_SUCCESS 0
#define KT__CUPTI_CB_DOMAIN_RESOURCE 3
#define KT__CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING 2u
typedef void (*kt__cupti_callback_fn)(void *user, int domain, uint32_t cbid, const void *data);
typedef struct kt__cupti_resource_data_t {
    kt__cuctx context; /* CUpti_ResourceData.context: the context being destroyed */
} kt__cupti_resource_data_t;

/* libcupti's names, newest first: the library of the running toolkit is loaded by its soname. */
static const char *const kCuptiSonames[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so.11.8", "libcupti.so"};

static struct {
    pthread_mutex_t lock; /* everything below */
    void *lib;            /* libcupti, kept loaded for the process's life once loaded */
    int (*subscribe)(void **subscriber, kt__cupti_callback_fn fn, void *user);
    int (*subscribe_v2)(void **subscriber, kt__cupti_callback_fn fn, void *user, kt__cupti_subscriber_params_t *p);
    int (*unsubscribe)(void *subscriber);
    int (*enable)(uint32_t enable, void *subscriber, int domain, uint32_t cbid);
    int (*result_string)(int result, const char **text);
    void *subscriber;     /* non-NULL while ktiming holds the subscription */
} W = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Set by the CUPTI injection library (`ktiming run`) while its subscription calls kt__cuda_context_destroying. */
static atomic_int g_watched_by_tool;

void kt__cuda_resets_watched_by_tool(int on)
{
    atomic_store(&g_watched_by_tool, on != 0);
}

/* Bounded wait for the consumer lock: a collector pass inside the driver may wait on the destroying thread. The
 * bound is on CLOCK_MONOTONIC where the C library can wait on it (glibc 2.30's pthread_mutex_clocklock), so a step
 * of the wall clock during a reset neither stretches nor cuts it; elsewhere pthread_mutex_timedlock's
 * CLOCK_REALTIME. TSan builds keep the latter: this TSan (GCC 12) does not intercept pthread_mutex_clocklock and
 * would not see the lock taken. */
#if defined(__SANITIZE_THREAD__)
#define KT__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) /* clang's spelling of GCC's __SANITIZE_THREAD__ */
#define KT__TSAN 1
#endif
#endif
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 30)) && !defined(KT__TSAN)
#define KT__LOCK_CLOCK CLOCK_MONOTONIC
#define kt__mutex_lock_until(m, until) pthread_mutex_clocklock((m), CLOCK_MONOTONIC, (until))
#else
#define KT__LOCK_CLOCK CLOCK_REALTIME
#define kt__mutex_lock_until(m, until) pthread_mutex_timedlock((m), (until))
#endif

static int consumer_lock_within(uint32_t ms)
{
    struct timespec until = kt__timespec_in(KT__LOCK_CLOCK, (uint64_t)ms * 1000000u);
    return kt__mutex_lock_until(&kt__cuda_g.consumer, &until);
}

/* This thread releases a primary-context retain of ktiming's whose state is unlinked (kt__cuda_watch_releasing). */
static _Thread_local int t_releasing;

void kt__cuda_watch_releasing(int on)
{
    t_releasing = on;
}

void kt__cuda_context_destroying(struct CUctx_st *ctx)
{
    /* t_releasing: ktiming's own release of the last primary-context retain destroys the context on this thread;
     * its state is unlinked already, and waiting for a lock this thread holds (the consumer lock, or the context
     * table's) would stall or hang. */
    if (!ctx || t_releasing || kt__forked_child() || atomic_load(&kt__cuda_g.state) != KT__CUDA_READY)
        return;
    if (consumer_lock_within(kt__cuda_g.desc.flush_timeout_ms) != 0) {
        /* A pass has held the lock all along (inside a driver call that waits for this thread, or a stuck
         * driver): mark the context gone so no later check lets a use through; the pass in progress is the
         * one raced use that remains. */
        kt__cuda_ctx_t *c = kt__cuda_ctx_lookup(ctx);
        if (c)
            atomic_store(&c->gone, 1);
        kt__cuda_set_error(KT__CU_ERROR_CONTEXT_IS_DESTROYED,
                           "CUDA context %p is being destroyed while ktiming's collector is inside the driver: "
                           "its state is dropped without waiting", (void *)ctx);
        return;
    }
    kt__cuda_ctx_t *c = kt__cuda_ctx_lookup(ctx); /* no pass runs now: we hold the consumer lock */
    if (c && kt__backend_stopped(&kt__cuda_ops)) {
        /* after kt_shutdown() or at exit (the driver destroys contexts late): the collector is stopped and what
         * was in flight is counted; nothing more is recorded, the handles are only never used again */
        atomic_store(&c->gone, 1);
    } else if (c && !atomic_load(&c->gone)) {
        /* The context still exists: what completes before the flush timeout is recorded, not dropped. */
        if (kt__cuda_ctx_alive(c))
            kt__cuda_collect_until(c, kt__cuda_deadline_in_ms(kt__cuda_g.desc.flush_timeout_ms), 1);
        kt__cuda_ctx_retire(c); /* counts the rest as dropped (context reset); its handles are never used again */
    }
    pthread_mutex_unlock(&kt__cuda_g.consumer);
}

static void destroy_callback(void *user, int domain, uint32_t cbid, const void *data)
{
    (void)user;
    if (domain == KT__CUPTI_CB_DOMAIN_RESOURCE && cbid == KT__CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING && data)
        kt__cuda_context_destroying(((const kt__cupti_resource_data_t *)data)->context);
}

/* W.lock held: libcupti and the three entry points, or KT_EUNAVAILABLE with the reason as the last error. */
static int load_cupti_locked(void)
{
    if (W.lib)
        return 0;
    const char *path = kt__env(KT_ENV_NAME(CUPTI_LIBRARY));
    void *lib = NULL;
    char why[256] = "";
    if (path && path[0]) {
        lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!lib)
            snprintf(why, sizeof why, "%s", dlerror());
    } else {
        for (size_t i = 0; !lib && i < sizeof kCuptiSonames / sizeof kCuptiSonames[0]; i++)
            lib = dlopen(kCuptiSonames[i], RTLD_NOW | RTLD_LOCAL);
        if (!lib)
            snprintf(why, sizeof why, "none of libcupti.so.13, .12, .11.8 or libcupti.so is on the library path "
                                      "(set KTIMING_CUPTI_LIBRARY to its path)");
    }
    if (!lib) {
        kt__cuda_set_error(0, "kt_cuda_watch_resets: CUPTI could not be loaded: %s", why);
        return KT_EUNAVAILABLE;
    }
    *(void **)&W.subscribe = dlsym(lib, "cuptiSubscribe");
    *(void **)&W.unsubscribe = dlsym(lib, "cuptiUnsubscribe");
    *(void **)&W.enable = dlsym(lib, "cuptiEnableCallback");
    *(void **)&W.result_string = dlsym(lib, "cuptiGetResultString");
    *(void **)&W.subscribe_v2 = dlsym(lib, "cuptiSubscribe_v2"); /* CUPTI 13: subscribers have names */
    if (!W.subscribe || !W.unsubscribe || !W.enable) {
        dlclose(lib);
        kt__cuda_set_error(0, "kt_cuda_watch_resets: %s lacks cuptiSubscribe/cuptiEnableCallback",
                           path && path[0] ? path : "libcupti");
        return KT_EUNAVAILABLE;
    }
    W.lib = lib;
    return 0;
}

static const char *cupti_result(int r)
{
    const char *text = NULL;
    if (W.result_string && W.result_string(r, &text) == KT__CUPTI_SUCCESS && text)
        return text;
    return "CUPTI error";
}

/* W.lock held. */
static void unwatch_locked(void)
{
    if (!W.subscriber)
        return;
    W.enable(0, W.subscriber, KT__CUPTI_CB_DOMAIN_RESOURCE, KT__CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
    W.unsubscribe(W.subscriber);
    W.subscriber = NULL;
}

int kt_cuda_watch_resets(int on)
{
    if (kt__forked_child()) { /* the parent's subscription and W.lock are not this process's to touch */
        if (!on)
            return 0;
        kt__cuda_forked_child(); /* says why */
        return KT_EUNAVAILABLE;
    }
    if (!on) {
        pthread_mutex_lock(&W.lock);
        unwatch_locked();
        pthread_mutex_unlock(&W.lock);
        return 0;
    }
    int rc = kt__cuda_ready();
    if (rc)
        return rc;
    if (atomic_load(&g_watched_by_tool))
        return 0; /* `ktiming run`'s CUPTI library tells the backend already, from the one subscription there is */
    pthread_mutex_lock(&W.lock);
    rc = W.subscriber ? 0 : load_cupti_locked();
    if (rc == 0 && !W.subscriber) {
        void *sub = NULL;
        char holder[KT__CUPTI_HOLDER_NAME_LEN], held_by[KT__CUPTI_HOLDER_NAME_LEN + 16] = "";
        kt__cupti_subscriber_params_t params = kt__cupti_subscriber_params(KT__CUPTI_NAME_WATCH, holder);
        int r = W.subscribe_v2 ? W.subscribe_v2(&sub, destroy_callback, NULL, &params)
                               : W.subscribe(&sub, destroy_callback, NULL);
        if (r == KT__CUPTI_SUCCESS) {
            r = W.enable(1, sub, KT__CUPTI_CB_DOMAIN_RESOURCE, KT__CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
            if (r != KT__CUPTI_SUCCESS) {
                W.unsubscribe(sub);
                kt__cuda_set_error(0, "kt_cuda_watch_resets: CUPTI refused the context destruction callback (%s)",
                                   cupti_result(r));
                rc = KT_EUNAVAILABLE;
            } else {
                W.subscriber = sub;
            }
        } else {
            kt__cupti_holder_text(holder, held_by, sizeof held_by);
            kt__cuda_set_error(0, "kt_cuda_watch_resets: another CUPTI client holds CUPTI's one callback subscription "
                                  "(%s%s%s): a profiler, Nsight tools, or `ktiming run`'s CUPTI library (which "
                                  "watches resets itself)", cupti_result(r), held_by[0] ? ", " : "", held_by);
            rc = KT_EUNAVAILABLE;
        }
    }
    pthread_mutex_unlock(&W.lock);
    return rc;
}

/* At initialisation: KTIMING_CUDA_WATCH_RESETS=1 asks for the watch; a refusal is said once on stderr (the
 * program did not call for it, so nothing else would say it). */
void kt__cuda_watch_from_env(void)
{
    const char *v = kt__env(KT_ENV_NAME(CUDA_WATCH_RESETS));
    if (!v || !v[0] || !strcmp(v, "0"))
        return;
    static atomic_int said;
    if (kt_cuda_watch_resets(1) != 0 && !atomic_exchange(&said, 1))
        fprintf(stderr, "ktiming: KTIMING_CUDA_WATCH_RESETS=1: %s\n", kt_cuda_last_error());
}

/* kt_cuda_shutdown: the subscription goes with the backend (it is asked for again at the next initialisation). */
void kt__cuda_watch_stop(void)
{
    pthread_mutex_lock(&W.lock);
    unwatch_locked();
    pthread_mutex_unlock(&W.lock);
}
