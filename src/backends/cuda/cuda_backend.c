/* cuda_backend.c — CUDA backend lifecycle: the backend-wide state, initialisation, fork handling, the core's
 * flush and stop hooks (registered again after the core's stop by kt__backend_arm), and kt_cuda_shutdown. */
#include "cuda_internal.h"

#include "core/service.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Backend-wide state (cuda_internal.h). */
kt__cuda_state_t kt__cuda_g = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .consumer = PTHREAD_MUTEX_INITIALIZER,
    .set = KT__CTX_SET_INIT,
    .generation = 1,
    .ctx_epoch = 1,
    .collector = KT__COLLECTOR_INIT,
};

static void stop_hook(uint64_t deadline_ns);
static void flush_hook(uint64_t deadline_ns);

/* fork: the consumer and state locks are taken around fork(), so the child's copies are consistent and free (the
 * helper ends the collector in the child). CUDA cannot be used in a child forked after initialisation, so there
 * every call returns KT_EUNAVAILABLE at once and touches no lock a vanished thread of the parent may have held. */
static void fork_prepare(void)
{
    pthread_mutex_lock(&kt__cuda_g.consumer); /* first: a collector pass takes kt__cuda_g.lock under it */
    pthread_mutex_lock(&kt__cuda_g.lock);
}

static void fork_release(void)
{
    pthread_mutex_unlock(&kt__cuda_g.lock);
    pthread_mutex_unlock(&kt__cuda_g.consumer);
}

static kt__backend_life_t g_life = KT__BACKEND_LIFE_INIT;

const kt__backend_ops_t kt__cuda_ops = {.name = "CUDA",
                                        .flush = flush_hook,
                                        .stop = stop_hook,
                                        .fork_prepare = fork_prepare,
                                        .fork_parent = fork_release,
                                        .fork_child = fork_release,
                                        .life = &g_life};

/* In a forked child: nothing of CUDA may be used (the driver says so too, CUDA_ERROR_INITIALIZATION_ERROR). */
int kt__cuda_forked_child(void)
{
    if (!kt__forked_child())
        return 0;
    kt__cuda_set_error(0, "CUDA cannot be used in a process forked after CUDA was initialised");
    return 1;
}

static void fill_defaults(kt_cuda_desc_t *d)
{
    if (!d->pool_chunk)
        d->pool_chunk = 16;
    if (!d->max_pairs)
        d->max_pairs = 65536;
    if (!d->poll_us)
        d->poll_us = 100;
    if (!d->anchor_period_ms)
        d->anchor_period_ms = 100;
    if (!d->flush_timeout_ms)
        d->flush_timeout_ms = 2000;
    if (!d->per_thread_default_stream) {
        const char *s = kt__env(KT_ENV_NAME(CUDA_PER_THREAD_STREAM));
        d->per_thread_default_stream = s && s[0] && strcmp(s, "0") != 0;
    }
    if (!d->sync) {
        const char *s = kt__env(KT_ENV_NAME(CUDA_SYNC));
        d->sync = s && s[0] && strcmp(s, "0") != 0;
    }
}

/* kt__cuda_g.lock held. */
static int init_locked(const kt_cuda_desc_t *desc)
{
    kt_cuda_desc_t want = desc ? *desc : (kt_cuda_desc_t){0};
    fill_defaults(&want);
    int state = atomic_load(&kt__cuda_g.state);
    if (state == KT__CUDA_READY)
        return (desc && memcmp(&want, &kt__cuda_g.desc, sizeof want) != 0) ? KT_ESTATE : 0;
    if (state == KT__CUDA_UNAVAILABLE) {
        kt__cuda_set_error(kt__cuda_g.load_res, "%s", kt__cuda_g.load_msg);
        return KT_EUNAVAILABLE;
    }
    kt__cu_t cu;
    int rc = kt__cuda_load(&cu);
    if (rc != 0) {
        snprintf(kt__cuda_g.load_msg, sizeof kt__cuda_g.load_msg, "%s", kt_cuda_last_error());
        kt__cuda_g.load_res = kt_cuda_last_result();
        atomic_store(&kt__cuda_g.state, KT__CUDA_UNAVAILABLE);
        return KT_EUNAVAILABLE;
    }
    kt__cuda_g.desc = want;
    atomic_store(&kt__cuda_g.state, KT__CUDA_READY);
    return 0;
}


int kt_cuda_init(const kt_cuda_desc_t *desc)
{
    if (kt__cuda_forked_child())
        return KT_EUNAVAILABLE;
    /* Armed first, outside our locks (the core holds its own across fork_prepare): its fork handlers then take
     * kt__cuda_g.lock, so a fork while the first initialisation holds it across dlopen and cuInit (often hundreds
     * of ms) waits for it, instead of giving the child a lock held by a thread it does not have. A backend armed
     * whose initialisation then fails does nothing in its hooks (they check the state). */
    kt__backend_arm(&kt__cuda_ops);
    pthread_mutex_lock(&kt__cuda_g.lock);
    int was_ready = atomic_load(&kt__cuda_g.state) == KT__CUDA_READY;
    int rc = init_locked(desc);
    pthread_mutex_unlock(&kt__cuda_g.lock);
    if (rc == 0 && !was_ready)
        kt__cuda_watch_from_env(); /* KTIMING_CUDA_WATCH_RESETS=1 (cuda_reset_watch.c) */
    return rc;
}

int kt__cuda_ready(void)
{
    if (kt__cuda_forked_child())
        return KT_EUNAVAILABLE;
    if (atomic_load_explicit(&kt__cuda_g.state, memory_order_acquire) == KT__CUDA_READY)
        return 0;
    return kt_cuda_init(NULL);
}

uint32_t kt__cuda_generation(void)
{
    return atomic_load(&kt__cuda_g.generation);
}

int kt_cuda_device_count(void)
{
    int rc = kt__cuda_ready();
    if (rc)
        return rc;
    int n = 0;
    kt__curesult r = kt__cu.cuDeviceGetCount(&n);
    return r ? kt__cuda_fail("cuDeviceGetCount", r) : n;
}

uint64_t kt__cuda_deadline_in_ms(uint32_t ms)
{
    return kt_now_ns() + (uint64_t)ms * 1000000ull;
}


static void flush_hook(uint64_t deadline_ns)
{
    if (atomic_load(&kt__cuda_g.state) != KT__CUDA_READY || kt__backend_stopped(&kt__cuda_ops) || kt__forked_child())
        return;
    uint64_t own = kt__cuda_deadline_in_ms(kt__cuda_g.desc.flush_timeout_ms);
    kt__cuda_collect_until(NULL, deadline_ns && deadline_ns < own ? deadline_ns : own, 0);
    pthread_mutex_lock(&kt__cuda_g.consumer);
    kt__ctx_pin_t pin;
    kt__ctx_set_pin(&kt__cuda_g.set, &pin, KT__CTX_PIN_LIVE);
    for (size_t i = 0; i < pin.n; i++)
        kt__cuda_publish(pin.ctx[i]);
    kt__ctx_set_unpin(&pin);
    pthread_mutex_unlock(&kt__cuda_g.consumer);
}

/* kt_shutdown() and process exit (once; the core has marked the backend stopped, so no collector starts again):
 * stop the collector so no thread of ktiming is inside the driver while it is torn down, collect until the
 * deadline (at once if the driver is already gone), and count what is left as dropped (in flight at exit).
 * Contexts are not destroyed (other threads may still use them). */
static void stop_hook(uint64_t deadline_ns)
{
    if (kt__forked_child())
        return;
    pthread_mutex_lock(&kt__cuda_g.lock); /* after a collector start that saw the backend armed (collector_kick) */
    pthread_mutex_unlock(&kt__cuda_g.lock);
    kt__collector_stop(&kt__cuda_g.collector);
    if (atomic_load(&kt__cuda_g.state) != KT__CUDA_READY)
        return;
    kt__cuda_collect_until(NULL, deadline_ns, 0);
    pthread_mutex_lock(&kt__cuda_g.consumer);
    kt__ctx_pin_t pin;
    kt__ctx_set_pin(&kt__cuda_g.set, &pin, KT__CTX_PIN_LIVE);
    for (size_t i = 0; i < pin.n; i++)
        kt__cuda_drop_pending(pin.ctx[i], KT_DROP_IN_FLIGHT_AT_EXIT);
    kt__ctx_set_unpin(&pin);
    pthread_mutex_unlock(&kt__cuda_g.consumer);
}

/* consumer and lock held: takes every context of `which` off the set into *pin (the caller frees them). */
static void set_take_locked(kt__ctx_pin_t *pin, unsigned which)
{
    kt__ctx_set_pin(&kt__cuda_g.set, pin, which);
    for (size_t i = 0; i < pin->n; i++)
        kt__ctx_set_remove(&kt__cuda_g.set, pin->ctx[i]);
}

void kt_cuda_shutdown(void)
{
    if (kt__forked_child())
        return;
    pthread_mutex_lock(&kt__cuda_g.lock);
    int state = atomic_load(&kt__cuda_g.state);
    if (state != KT__CUDA_READY) {
        atomic_store(&kt__cuda_g.state, KT__CUDA_UNINIT);
        pthread_mutex_unlock(&kt__cuda_g.lock);
        return;
    }
    pthread_mutex_unlock(&kt__cuda_g.lock);
    kt__cuda_watch_stop(); /* first, with no lock of ours held: a destroy callback may be waiting for one */
    kt__collector_stop(&kt__cuda_g.collector);
    kt__cuda_collect_until(NULL, kt__cuda_deadline_in_ms(kt__cuda_g.desc.flush_timeout_ms), 0);
    pthread_mutex_lock(&kt__cuda_g.consumer);
    pthread_mutex_lock(&kt__cuda_g.lock);
    kt__ctx_pin_t live, retired;
    set_take_locked(&live, KT__CTX_PIN_LIVE);
    set_take_locked(&retired, KT__CTX_PIN_RETIRED);
    atomic_fetch_add(&kt__cuda_g.generation, 1);
    atomic_fetch_add(&kt__cuda_g.ctx_epoch, 1);
    atomic_store(&kt__cuda_g.state, KT__CUDA_UNINIT);
    pthread_mutex_unlock(&kt__cuda_g.lock);
    for (size_t i = 0; i < live.n; i++) {
        kt__cuda_publish(live.ctx[i]);
        kt__cuda_ctx_destroy(live.ctx[i]);
    }
    for (size_t i = 0; i < retired.n; i++)
        kt__cuda_ctx_destroy(retired.ctx[i]);
    kt__ctx_set_unpin(&live);
    kt__ctx_set_unpin(&retired);
    atomic_store(&kt__cuda_g.pending, 0);
    pthread_mutex_unlock(&kt__cuda_g.consumer);
}
