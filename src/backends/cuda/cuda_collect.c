/* cuda_collect.c — CUDA backend: collection of completed dispatches (per context, all contexts, until a
 * deadline), dropping what cannot be collected, and the collector thread. Consumer lock held unless said. */
#include "cuda_internal.h"

#include "core/internal.h"
#include "core/service.h"

/* Dispatches handled per collection batch. */
#define KT__CUDA_BATCH 128

/* Whether the driver is torn down (process exit after the runtime's own atexit): nothing can be collected. */
static int result_is_deinit(kt__curesult r)
{
    return r == KT__CU_ERROR_DEINITIALIZED || r == KT__CU_ERROR_NOT_INITIALIZED;
}

/* Why collect_ctx stopped using a context. The two are counted differently: a reset's pending dispatches are
 * dropped as KT_DROP_CONTEXT_RESET, a torn-down driver's (process exit) as in flight at exit. */
enum { CTX_LIVE = 0, CTX_RESET = 1, CTX_DRIVER_GONE = 2 };

void kt__cuda_verbose(const kt__cuda_ctx_t *c, kt_kernel_id_t kernel, const kt_dispatch_t *d, const char *error)
{
    if (!kt__verbose_on())
        return;
    const kt__kernel_t *k = kt__kernel_get(kernel);
    const char *name = k ? k->name : NULL, *device = c->device_label;
    if (error)
        kt__verbose_line("error", "cuda", device, name, "%s", error);
    else if (d->start_ns)
        kt__verbose_line("exec", "cuda", device, name, "%.6f,%llu,device", (double)d->duration_ns / 1e6,
                         (unsigned long long)d->start_ns);
    else
        kt__verbose_line("exec", "cuda", device, name, "%.6f,,device", (double)d->duration_ns / 1e6);
}

/* Pops up to KT__CUDA_BATCH completed pairs off c's stream queues into done[] with their query results, and
 * returns how many. The queues' heads are read and popped under c->lock, but the driver is asked without it:
 * kt_cuda_begin and kt_cuda_end never wait behind a query (only this consumer pops; producers append at the
 * tail). Sets *dead when the context or the driver is gone (no more of its events are queried). */
static uint32_t take_completed(kt__cuda_ctx_t *c, kt__cuda_pair_t **done, kt__curesult *status, int *dead)
{
    uint32_t n = 0;
    pthread_mutex_lock(&c->lock);
    kt__cuda_squeue_t *q = c->queues;
    pthread_mutex_unlock(&c->lock);
    while (q && n < KT__CUDA_BATCH) {
        pthread_mutex_lock(&c->lock);
        kt__cuda_pair_t *head = q->head;
        kt__cuda_squeue_t *qnext = q->next;
        pthread_mutex_unlock(&c->lock);
        if (!head) {
            q = qnext;
            continue;
        }
        if (!kt__cuda_ctx_alive(c)) { /* before every use of a handle: a reset frees them all */
            *dead = CTX_RESET;
            break;
        }
        kt__curesult r = kt__cu.cuEventQuery(head->end);
        if (r == KT__CU_ERROR_NOT_READY || kt__cuda_capture_busy(r)) {
            q = qnext; /* later: not complete, or a capture forbids the query now */
            continue;
        }
        /* never a dispatch error: the driver or the context is gone, the caller drops the rest */
        if (r != KT__CU_SUCCESS && result_is_deinit(r)) {
            *dead = CTX_DRIVER_GONE;
            break;
        }
        if (r != KT__CU_SUCCESS && !kt__cuda_ctx_alive(c)) {
            *dead = CTX_RESET;
            break;
        }
        pthread_mutex_lock(&c->lock);
        q->head = head->next;
        if (!q->head)
            q->tail = NULL;
        head->next = NULL;
        c->pending--;
        pthread_mutex_unlock(&c->lock);
        status[n] = r;
        done[n++] = head;
    }
    return n;
}

/* Records the n pairs take_completed popped (a dispatch, an error, or a drop when the context was reset before
 * it could be read), returns them to the pool and counts them. Returns how many were dropped for a reset. */
static uint64_t record_completed(kt__cuda_ctx_t *c, kt__cuda_pair_t **done, const kt__curesult *status, uint32_t n)
{
    kt_dispatch_t d[KT__CUDA_BATCH];
    const char *err[KT__CUDA_BATCH];
    static const char kReset[] = "context reset";
    for (uint32_t i = 0; i < n; i++) {
        err[i] = NULL;
        int rc = 0;
        if (status[i] != KT__CU_SUCCESS) {
            kt__cuda_fail("cuEventQuery", status[i]);
            err[i] = kt__cuda_result_name(status[i]);
        } else if ((rc = kt__cuda_pair_place(c, done[i], &d[i])) != 0) {
            err[i] = rc == KT_ESTATE ? kReset : kt__cuda_result_name(kt_cuda_last_result());
        }
    }
    uint64_t recorded = 0, errors = 0, reset = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!err[i]) {
            kt_record_dispatch(&d[i]);
            kt__cuda_verbose(c, done[i]->kernel, &d[i], NULL);
            recorded++;
        } else if (err[i] == kReset) { /* completed, but reset before it could be read: dropped */
            kt_record_drop(done[i]->kernel, KT_DROP_CONTEXT_RESET);
            reset++;
        } else {
            kt_record_error(done[i]->kernel, err[i]);
            kt__cuda_verbose(c, done[i]->kernel, NULL, err[i]);
            errors++;
        }
        kt__inflight_end(done[i]->kernel); /* begun in kt_cuda_end */
    }
    pthread_mutex_lock(&c->lock);
    for (uint32_t i = 0; i < n; i++) {
        done[i]->queue = NULL;
        done[i]->next = c->free_list;
        c->free_list = done[i];
        c->free_count++;
    }
    c->recorded += recorded;
    c->errors += errors;
    c->dropped += reset;
    pthread_mutex_unlock(&c->lock);
    atomic_fetch_sub(&kt__cuda_g.pending, n);
    return reset;
}

/* Collect completed dispatches of one context; returns how many remain pending. Sets *gone to CTX_RESET when
 * the context died under ktiming (reset, destroyed) or CTX_DRIVER_GONE when the driver is torn down: the
 * caller then stops using it. */
static uint32_t collect_ctx(kt__cuda_ctx_t *c, int *gone)
{
    if (atomic_load(&c->gone)) {
        *gone = CTX_RESET;
        return 0;
    }
    pthread_mutex_lock(&c->lock);
    uint32_t pending = c->pending;
    pthread_mutex_unlock(&c->lock);
    if (!pending)
        return 0;
    if (!kt__cuda_ctx_alive(c)) { /* reset or destroyed: none of its events may be queried */
        *gone = CTX_RESET;
        return pending;
    }
    int pushed = 0;
    if (kt__cuda_ctx_enter(c, &pushed)) {
        if (result_is_deinit(kt_cuda_last_result()))
            *gone = CTX_DRIVER_GONE;
        else if (!kt__cuda_ctx_alive(c))
            *gone = CTX_RESET;
        return pending;
    }
    kt__cuda_anchor_refresh(c);
    if (atomic_load(&c->gone)) { /* the anchor found it reset or destroyed: its events are not queried */
        *gone = CTX_RESET;
        kt__cuda_ctx_leave(pushed);
        return pending;
    }
    for (;;) {
        kt__cuda_pair_t *done[KT__CUDA_BATCH];
        kt__curesult status[KT__CUDA_BATCH];
        int dead = CTX_LIVE;
        uint32_t n = take_completed(c, done, status, &dead);
        pthread_mutex_lock(&c->lock);
        pending = c->pending;
        pthread_mutex_unlock(&c->lock);
        if (dead)
            *gone = dead;
        if (!n)
            break;
        if (record_completed(c, done, status, n) && !dead)
            *gone = dead = CTX_RESET;
        if (dead)
            break;
    }
    kt__cuda_ctx_leave(pushed);
    return pending;
}

/* Consumer lock held: count every dispatch still queued in c as dropped for `reason` and return its pairs to
 * the pool (their events are not touched). */
uint32_t kt__cuda_drop_pending(kt__cuda_ctx_t *c, kt_drop_reason_t reason)
{
    uint32_t dropped = 0;
    pthread_mutex_lock(&c->lock);
    for (kt__cuda_squeue_t *q = c->queues; q; q = q->next) {
        for (kt__cuda_pair_t *p = q->head, *pn; p; p = pn) {
            pn = p->next;
            kt_record_drop(p->kernel, reason);
            kt__inflight_end(p->kernel);
            p->queue = NULL;
            p->next = c->free_list;
            c->free_list = p;
            c->free_count++;
            dropped++;
        }
        q->head = q->tail = NULL;
    }
    c->pending -= dropped;
    c->dropped += dropped;
    pthread_mutex_unlock(&c->lock);
    if (dropped)
        atomic_fetch_sub(&kt__cuda_g.pending, dropped);
    return dropped;
}


/* One collection pass over every context (consumer lock held). Returns what is still pending; *deinit is set
 * when the driver is torn down. */
static uint32_t collect_all(int *deinit)
{
    uint32_t left = 0;
    kt__ctx_pin_t pin; /* retire keeps a context's memory while pinned; only this consumer removes one */
    kt__ctx_set_pin(&kt__cuda_g.set, &pin, KT__CTX_PIN_LIVE);
    for (size_t i = 0; i < pin.n; i++) {
        kt__cuda_ctx_t *c = pin.ctx[i];
        int gone = CTX_LIVE;
        left += collect_ctx(c, &gone);
        if (gone == CTX_DRIVER_GONE) { /* exit: the stop hook counts what is left as in flight at exit */
            *deinit = 1;
            break;
        }
        if (gone == CTX_RESET)
            kt__cuda_ctx_retire(c);
    }
    kt__ctx_set_unpin(&pin);
    return left;
}

/* What one drain pass collects. */
typedef struct collect_arg_t {
    kt__cuda_ctx_t *only; /* one context, or NULL: every live one */
    int held;             /* the caller holds the consumer lock */
} collect_arg_t;

/* One pass for kt__drain: what is left, or 0 when the context or the driver is gone (nothing more to wait for). */
static uint64_t collect_pass(void *arg)
{
    const collect_arg_t *a = arg;
    int dead = 0;
    uint32_t left = 0;
    if (!a->held)
        pthread_mutex_lock(&kt__cuda_g.consumer);
    if (a->only) {
        int gone = CTX_LIVE;
        left = collect_ctx(a->only, &gone);
        dead = gone != CTX_LIVE;
    } else {
        left = collect_all(&dead);
    }
    if (!a->held)
        pthread_mutex_unlock(&kt__cuda_g.consumer);
    return dead ? 0 : left;
}

/* Collect every context (or only `only`) until nothing is pending or `deadline_ns` (kt_now_ns time) passes, a
 * pass every poll period (kt_cuda_desc_t.poll_us). Gives up at once when the driver is torn down. Takes the
 * consumer lock per pass unless the caller holds it (held = 1). Returns what is left. */
uint32_t kt__cuda_collect_until(kt__cuda_ctx_t *only, uint64_t deadline_ns, int held)
{
    uint64_t poll_ns = (uint64_t)kt__cuda_g.desc.poll_us * 1000u;
    const kt__drain_policy_t every_poll = {0, poll_ns, poll_ns};
    collect_arg_t arg = {only, held};
    return (uint32_t)kt__drain_with(deadline_ns, collect_pass, &arg, &every_poll, NULL);
}

/* One step of the collector thread: collect what completed. */
static int collector_step(void *arg)
{
    (void)arg;
    if (atomic_load(&kt__cuda_g.pending) == 0) {
        kt__cuda_g.collector.nap_ns = 0; /* sleep until kt_cuda_end wakes it */
        return 0;
    }
    pthread_mutex_lock(&kt__cuda_g.consumer);
    int deinit = 0;
    uint32_t left = collect_all(&deinit); /* its driver calls run relaxed (kt__cuda_ctx_enter) */
    pthread_mutex_unlock(&kt__cuda_g.consumer);
    /* nap on the helper's condition variable (a stop wakes it at once; nanosleep made every exit wait out a
     * poll), or sleep until woken when nothing is left */
    kt__cuda_g.collector.nap_ns = !left || deinit ? 0 : (uint64_t)kt__cuda_g.desc.poll_us * 1000u;
    return 0;
}

/* Called when the first dispatch becomes pending: starts the collector if needed and wakes it. */
void kt__cuda_collector_kick(void)
{
    if (kt__backend_stopped(&kt__cuda_ops))
        return;
    pthread_mutex_lock(&kt__cuda_g.lock); /* the stop hook takes it before stopping the collector */
    if (!kt__backend_stopped(&kt__cuda_ops))
        kt__collector_start(&kt__cuda_g.collector, "kt-cuda-collect", collector_step, NULL, 0);
    pthread_mutex_unlock(&kt__cuda_g.lock);
    kt__collector_wake(&kt__cuda_g.collector);
}
