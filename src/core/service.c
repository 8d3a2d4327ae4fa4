/* service.c — the backend service layer: registration, flush/stop at a deadline, collector threads, fork. */
#include "core/service.h"
#include "core/internal.h"
#include "ktiming/clock_model.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------------------------------
 * Registration
 * ------------------------------------------------------------------------------------------------- */

#define KT__MAX_BACKENDS 16

static pthread_mutex_t g_svc_lock = PTHREAD_MUTEX_INITIALIZER;
static const kt__backend_ops_t *g_ops[KT__MAX_BACKENDS]; /* guarded by g_svc_lock */
static int g_nops;                                        /* guarded by g_svc_lock */

static void fork_prepare(void);
static void fork_parent(void);
static void fork_child(void);
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;
static void atfork_install(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

/* The process that first initialised ktiming or registered a backend: a forked child sees another pid. Set
 * then, not when the handlers are installed (at load), so a child of a process that never used ktiming and
 * that uses it itself is its own owner. */
static pid_t g_owner_pid;
void kt__fork_owner_mark(void)
{
    pid_t none = 0;
    __atomic_compare_exchange_n(&g_owner_pid, &none, getpid(), 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

static void (*g_core_prepare)(void);     /* the core's own fork hooks (kt__fork_install), set once */
static void (*g_core_release)(int child);
static void (*g_fork_core_release)(int child); /* what this fork's prepare took (read once per fork) */

void kt__fork_install(void (*core_prepare)(void), void (*core_release)(int child))
{
    /* no lock: called from the core's load-time constructor, before any thread of this library exists */
    __atomic_store_n(&g_core_release, core_release, __ATOMIC_RELEASE);
    __atomic_store_n(&g_core_prepare, core_prepare, __ATOMIC_RELEASE);
    pthread_once(&g_atfork_once, atfork_install);
}

int kt__backend_register(const kt__backend_ops_t *ops)
{
    if (!ops)
        return KT_EINVAL;
    pthread_once(&g_atfork_once, atfork_install);
    kt__fork_owner_mark();
    int rc = 0, i;
    pthread_mutex_lock(&g_svc_lock);
    for (i = 0; i < g_nops && g_ops[i] != ops; i++)
        ;
    if (i == g_nops) {
        if (g_nops == KT__MAX_BACKENDS)
            rc = KT_EFULL;
        else
            g_ops[g_nops++] = ops;
    }
    if (rc == 0 && ops->life)
        atomic_store_explicit(&ops->life->state, 1, memory_order_release);
    pthread_mutex_unlock(&g_svc_lock);
    return rc;
}

int kt__backend_arm(const kt__backend_ops_t *ops)
{
    if (ops && ops->life && atomic_load_explicit(&ops->life->state, memory_order_acquire) == 1)
        return 0;
    return kt__backend_register(ops);
}

int kt__backend_stopped(const kt__backend_ops_t *ops)
{
    return ops && ops->life && atomic_load_explicit(&ops->life->state, memory_order_acquire) == 2;
}

void kt__backend_stop_one(const kt__backend_ops_t *ops)
{
    if (!ops)
        return;
    pthread_mutex_lock(&g_svc_lock);
    for (int i = 0; i < g_nops; i++)
        if (g_ops[i] == ops) {
            memmove(&g_ops[i], &g_ops[i + 1], sizeof g_ops[0] * (size_t)(g_nops - i - 1));
            g_nops--;
            break;
        }
    if (ops->life)
        atomic_store_explicit(&ops->life->state, 2, memory_order_release);
    pthread_mutex_unlock(&g_svc_lock);
}

/* A copy of the table, so callbacks run outside the lock (a flush may record or register). */
static int ops_copy(const kt__backend_ops_t **out)
{
    pthread_mutex_lock(&g_svc_lock);
    int n = g_nops;
    memcpy(out, g_ops, sizeof out[0] * (size_t)n);
    pthread_mutex_unlock(&g_svc_lock);
    return n;
}

void kt__backends_flush(uint64_t deadline_ns)
{
    int child = kt__forked_child(); /* the driver state is the parent's: never waited on here, unless the backend
                                     * tells its own work from the parent's (life->in_forked_child) */
    const kt__backend_ops_t *ops[KT__MAX_BACKENDS];
    int n = ops_copy(ops);
    for (int i = 0; i < n; i++)
        if (ops[i]->flush && (!child || (ops[i]->life && ops[i]->life->in_forked_child)))
            ops[i]->flush(deadline_ns);
}

static _Atomic int g_stopping; /* backends' stop hooks running: what they record is the last of it */

int kt__backends_stopping(void) { return atomic_load_explicit(&g_stopping, memory_order_relaxed); }

void kt__backends_stop(uint64_t deadline_ns)
{
    const kt__backend_ops_t *ops[KT__MAX_BACKENDS];
    pthread_mutex_lock(&g_svc_lock);
    int n = g_nops;
    memcpy(ops, g_ops, sizeof ops[0] * (size_t)n);
    g_nops = 0; /* each stop runs once; a backend used again registers again */
    for (int i = 0; i < n; i++) /* before the hooks run: a stop hook sees kt__backend_stopped() == 1 */
        if (ops[i]->life)
            atomic_store_explicit(&ops[i]->life->state, 2, memory_order_release);
    pthread_mutex_unlock(&g_svc_lock);
    int child = kt__forked_child(); /* unregistered, but the parent's drivers are not touched from a child (unless
                                     * the backend leaves the parent's work alone: life->in_forked_child) */
    atomic_fetch_add(&g_stopping, 1);
    for (int i = 0; i < n; i++)
        if (ops[i]->stop && (!child || (ops[i]->life && ops[i]->life->in_forked_child)))
            ops[i]->stop(deadline_ns);
    atomic_fetch_sub(&g_stopping, 1);
}

uint64_t kt__exit_wait_ns(void)
{
    return kt__env_ms(KT_ENV_NAME(EXIT_WAIT_MS), 2000, 3600000) * 1000000ull;
}

int kt__forked_child(void)
{
    pid_t owner = __atomic_load_n(&g_owner_pid, __ATOMIC_RELAXED);
    return owner != 0 && owner != getpid();
}

/* ---------------------------------------------------------------------------------------------------
 * Collector threads
 * ------------------------------------------------------------------------------------------------- */

static pthread_mutex_t g_coll_list_lock = PTHREAD_MUTEX_INITIALIZER;
static kt__collector_t *g_colls; /* every collector ever started (structs are static in their backends) */

void kt__nap_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* ---------------------------------------------------------------------------------------------------
 * Drain until a deadline
 * ------------------------------------------------------------------------------------------------- */

static uint64_t real_now(void *arg)
{
    (void)arg;
    return kt_now_ns();
}

static void real_wait(void *arg, uint64_t ns)
{
    (void)arg;
    if (ns)
        kt__nap_ns(ns);
    else
        sched_yield();
}

uint64_t kt__drain_with(uint64_t deadline_ns, kt__drain_step_cb step, void *arg, const kt__drain_policy_t *policy,
                        const kt__drain_clock_t *clock)
{
    static const kt__drain_policy_t kDefault = KT__DRAIN_POLICY_DEFAULT;
    static const kt__drain_clock_t kReal = {real_now, real_wait, NULL};
    if (!step)
        return 0;
    if (!policy)
        policy = &kDefault;
    if (!clock)
        clock = &kReal;
    uint64_t nap = policy->first_nap_ns ? policy->first_nap_ns : 1000u;
    uint64_t start = clock->now(clock->arg);
    for (;;) {
        uint64_t left = step(arg);
        if (!left)
            return 0;
        uint64_t now = clock->now(clock->arg);
        if (now >= deadline_ns)
            return left;
        if (now - start < policy->spin_ns) {
            clock->wait(clock->arg, 0);
            continue;
        }
        uint64_t rest = deadline_ns - now;
        clock->wait(clock->arg, nap < rest ? nap : rest);
        if (nap < policy->max_nap_ns)
            nap = 2 * nap < policy->max_nap_ns ? 2 * nap : policy->max_nap_ns;
    }
}

uint64_t kt__drain(uint64_t deadline_ns, kt__drain_step_cb step, void *arg)
{
    return kt__drain_with(deadline_ns, step, arg, NULL, NULL);
}

/* ---------------------------------------------------------------------------------------------------
 * Context sets
 * ------------------------------------------------------------------------------------------------- */

static pthread_mutex_t g_set_list_lock = PTHREAD_MUTEX_INITIALIZER;
static kt__ctx_set_t *g_sets; /* every set that ever held an entry (sets are static in their backends) */

/* Puts s on the fork list (once). Not under s->lock: fork_prepare takes the list lock, then each set's. */
static void set_list(kt__ctx_set_t *s)
{
    if (__atomic_load_n(&s->listed, __ATOMIC_ACQUIRE))
        return;
    pthread_once(&g_atfork_once, atfork_install);
    pthread_mutex_lock(&g_set_list_lock);
    if (!s->listed) {
        s->next = g_sets;
        g_sets = s;
        __atomic_store_n(&s->listed, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_set_list_lock);
}

/* Grows *arr to hold one more entry than *count (under s->lock). 0 or KT_ENOMEM. */
static int set_grow(void ***arr, size_t count, size_t *cap)
{
    if (count < *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 8;
    void **grown = realloc(*arr, ncap * sizeof *grown);
    if (!grown)
        return KT_ENOMEM;
    *arr = grown;
    *cap = ncap;
    return 0;
}

/* Index of ctx in arr[0..n), or n. */
static size_t set_index(void *const *arr, size_t n, const void *ctx)
{
    size_t i = 0;
    while (i < n && arr[i] != ctx)
        i++;
    return i;
}

int kt__ctx_set_add(kt__ctx_set_t *s, void *ctx)
{
    if (!s || !ctx)
        return KT_EINVAL;
    set_list(s);
    pthread_mutex_lock(&s->lock);
    int rc = set_grow(&s->live, s->nlive, &s->cap_live);
    if (rc == 0)
        s->live[s->nlive++] = ctx;
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* Takes ctx off either list (under s->lock). 0 or KT_EINVAL. */
static int set_unlink_locked(kt__ctx_set_t *s, void *ctx)
{
    int rc = 0;
    size_t i = set_index(s->live, s->nlive, ctx);
    if (i < s->nlive) {
        s->live[i] = s->live[--s->nlive];
    } else if ((i = set_index(s->retired, s->nretired, ctx)) < s->nretired) {
        memmove(s->retired + i, s->retired + i + 1, (s->nretired - i - 1) * sizeof s->retired[0]);
        s->nretired--;
    } else {
        rc = KT_EINVAL;
    }
    return rc;
}

int kt__ctx_set_remove(kt__ctx_set_t *s, void *ctx)
{
    if (!s || !ctx)
        return KT_EINVAL;
    pthread_mutex_lock(&s->lock);
    int rc = set_unlink_locked(s, ctx);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* Whether a pin with a ticket up to seq is still held (under s->lock). */
static int set_held_upto(const kt__ctx_set_t *s, uint64_t seq)
{
    for (const kt__ctx_pin_t *p = s->held; p; p = p->hnext)
        if (p->ticket <= seq)
            return 1;
    return 0;
}

int kt__ctx_set_remove_wait(kt__ctx_set_t *s, void *ctx)
{
    if (!s || !ctx)
        return KT_EINVAL;
    pthread_mutex_lock(&s->lock);
    int rc = set_unlink_locked(s, ctx);
    uint64_t seq = s->pin_seq; /* pins after this one never saw ctx */
    s->waiters++;
    while (rc == 0 && set_held_upto(s, seq))
        pthread_cond_wait(&s->unpinned, &s->lock);
    s->waiters--;
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int kt__ctx_set_retire(kt__ctx_set_t *s, void *ctx)
{
    if (!s || !ctx)
        return KT_EINVAL;
    pthread_mutex_lock(&s->lock);
    size_t i = set_index(s->live, s->nlive, ctx);
    int rc = i < s->nlive ? set_grow(&s->retired, s->nretired, &s->cap_retired) : KT_EINVAL;
    if (rc == 0) {
        s->live[i] = s->live[--s->nlive];
        s->retired[s->nretired++] = ctx;
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

size_t kt__ctx_set_reap(kt__ctx_set_t *s, int (*done)(void *ctx), void (*release)(void *ctx))
{
    if (!s)
        return 0;
    void *small[KT__CTX_PIN_INLINE], **out = small;
    size_t taken = 0;
    pthread_mutex_lock(&s->lock);
    if (s->pins == 0 && s->nretired) {
        if (s->nretired > KT__CTX_PIN_INLINE && release)
            out = malloc(s->nretired * sizeof *out); /* NULL: reap only what fits in small */
        size_t room = out ? s->nretired : KT__CTX_PIN_INLINE;
        if (!out)
            out = small;
        if (!release)
            room = s->nretired; /* nothing to call afterwards: nothing to remember */
        size_t keep = 0;
        for (size_t i = 0; i < s->nretired; i++) {
            void *c = s->retired[i];
            if (taken < room && (!done || done(c))) {
                if (release)
                    out[taken] = c;
                taken++;
            } else {
                s->retired[keep++] = c;
            }
        }
        s->nretired = keep;
    }
    pthread_mutex_unlock(&s->lock);
    for (size_t i = 0; release && i < taken; i++)
        release(out[i]);
    if (out != small)
        free(out);
    return taken;
}

int kt__ctx_set_pin(kt__ctx_set_t *s, kt__ctx_pin_t *pin, unsigned which)
{
    if (!pin)
        return KT_EINVAL;
    pin->ctx = pin->inline_ctx;
    pin->n = 0;
    pin->set = NULL;
    if (!s)
        return KT_EINVAL;
    int rc = 0;
    pthread_mutex_lock(&s->lock);
    size_t nl = (which & KT__CTX_PIN_LIVE) ? s->nlive : 0;
    size_t nr = (which & KT__CTX_PIN_RETIRED) ? s->nretired : 0;
    if (nl + nr > KT__CTX_PIN_INLINE) {
        pin->ctx = malloc((nl + nr) * sizeof *pin->ctx);
        if (!pin->ctx) {
            pin->ctx = pin->inline_ctx;
            nl = nr = 0;
            rc = KT_ENOMEM;
        }
    }
    if (nl + nr) {
        if (nl) /* an empty list's array may be NULL: memcpy from NULL is undefined even for 0 bytes (UBSan) */
            memcpy(pin->ctx, s->live, nl * sizeof *pin->ctx);
        if (nr)
            memcpy(pin->ctx + nl, s->retired, nr * sizeof *pin->ctx);
        pin->n = nl + nr;
        pin->set = s;
        pin->ticket = ++s->pin_seq;
        pin->fork_gen = s->fork_gen;
        pin->hprev = NULL;
        pin->hnext = s->held;
        if (s->held)
            s->held->hprev = pin;
        s->held = pin;
        s->pins++;
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

void kt__ctx_set_unpin(kt__ctx_pin_t *pin)
{
    if (!pin)
        return;
    kt__ctx_set_t *s = pin->set;
    if (s) {
        pthread_mutex_lock(&s->lock);
        if (pin->fork_gen == s->fork_gen) { /* else: pinned before a fork, in this child it counts no more */
            if (pin->hprev)
                pin->hprev->hnext = pin->hnext;
            else
                s->held = pin->hnext;
            if (pin->hnext)
                pin->hnext->hprev = pin->hprev;
            s->pins--;
            if (s->waiters)
                pthread_cond_broadcast(&s->unpinned);
        }
        pthread_mutex_unlock(&s->lock);
    }
    if (pin->ctx != pin->inline_ctx)
        free(pin->ctx);
    pin->ctx = pin->inline_ctx;
    pin->n = 0;
    pin->set = NULL;
}

size_t kt__ctx_set_live(kt__ctx_set_t *s)
{
    pthread_mutex_lock(&s->lock);
    size_t n = s->nlive;
    pthread_mutex_unlock(&s->lock);
    return n;
}

size_t kt__ctx_set_retired(kt__ctx_set_t *s)
{
    pthread_mutex_lock(&s->lock);
    size_t n = s->nretired;
    pthread_mutex_unlock(&s->lock);
    return n;
}

void *kt__ctx_set_find(kt__ctx_set_t *s, int (*match)(void *ctx, const void *key), const void *key)
{
    void *found = NULL;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->nlive && !found; i++)
        if (match(s->live[i], key))
            found = s->live[i];
    pthread_mutex_unlock(&s->lock);
    return found;
}

void kt__ctx_set_foreach(kt__ctx_set_t *s, int retired, void (*fn)(void *ctx, void *arg), void *arg)
{
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->nlive; i++)
        fn(s->live[i], arg);
    for (size_t i = 0; retired && i < s->nretired; i++)
        fn(s->retired[i], arg);
    pthread_mutex_unlock(&s->lock);
}

/* Every entry of a set (under its lock) through its fork_each. */
static void set_fork_each(kt__ctx_set_t *s, int phase)
{
    if (!s->fork_each)
        return;
    for (size_t i = 0; i < s->nlive; i++)
        s->fork_each(s->live[i], phase);
    for (size_t i = 0; i < s->nretired; i++)
        s->fork_each(s->retired[i], phase);
}

/* ---------------------------------------------------------------------------------------------------
 * Collector threads (the loop)
 * ------------------------------------------------------------------------------------------------- */

static void *collector_main(void *p)
{
    kt__collector_t *c = p;
    pthread_setname_np(pthread_self(), c->name);
    while (!atomic_load(&c->stop_req)) {
        atomic_store(&c->wake_req, 0);
        if (c->step(c->arg))
            continue;
        pthread_mutex_lock(&c->lock);
        atomic_store(&c->sleeping, 1); /* seq_cst: paired with wake's store of wake_req then load of sleeping */
        if (!atomic_load(&c->wake_req) && !atomic_load(&c->stop_req)) {
            if (c->nap_ns) {
                struct timespec ts = kt__timespec_in(CLOCK_MONOTONIC, c->nap_ns);
                pthread_cond_timedwait(&c->cond, &c->lock, &ts);
            } else {
                pthread_cond_wait(&c->cond, &c->lock);
            }
        }
        atomic_store(&c->sleeping, 0);
        pthread_mutex_unlock(&c->lock);
    }
    return NULL;
}

/* A fresh condition variable timed on CLOCK_MONOTONIC. Not pthread_cond_destroy first: in a forked child the
 * parent's collector may have been waiting on it, and glibc's destroy would wait for that thread forever. */
static void cond_init_monotonic(pthread_cond_t *cond)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    memset(cond, 0, sizeof *cond);
    pthread_cond_init(cond, &ca);
    pthread_condattr_destroy(&ca);
}

int kt__collector_start(kt__collector_t *c, const char *name, kt__collector_step_cb step, void *arg,
                        uint64_t nap_ns)
{
    if (!c || !step)
        return KT_EINVAL;
    pthread_once(&g_atfork_once, atfork_install);
    /* Listed first, under the list lock alone (fork_prepare takes the list lock, then each collector's): a
     * fork from here on finds this collector and, in the child, marks it not running. */
    pthread_mutex_lock(&g_coll_list_lock);
    kt__collector_t *it;
    for (it = g_colls; it && it != c; it = it->next)
        ;
    if (!it) {
        c->next = g_colls;
        g_colls = c;
    }
    pthread_mutex_unlock(&g_coll_list_lock);
    pthread_mutex_lock(&c->lock);
    if (atomic_load(&c->running)) {
        pthread_mutex_unlock(&c->lock);
        return 0;
    }
    c->step = step;
    c->arg = arg;
    c->nap_ns = nap_ns;
    snprintf(c->name, sizeof c->name, "%s", name ? name : "kt-collector");
    atomic_store(&c->stop_req, 0);
    atomic_store(&c->wake_req, 0);
    atomic_store(&c->sleeping, 0);

    if (!c->cond_ready) {
        cond_init_monotonic(&c->cond);
        c->cond_ready = 1;
    }

    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread inherits the mask: no program signal reaches it */
    int err = pthread_create(&c->thread, NULL, collector_main, c);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err == 0)
        atomic_store(&c->running, 1);
    pthread_mutex_unlock(&c->lock);
    return err == 0 ? 0 : KT_ENOMEM;
}

void kt__collector_wake(kt__collector_t *c)
{
    atomic_store(&c->wake_req, 1); /* seq_cst, before the sleeping load (see collector_main) */
    if (atomic_load(&c->sleeping)) {
        pthread_mutex_lock(&c->lock);
        pthread_cond_signal(&c->cond);
        pthread_mutex_unlock(&c->lock);
    }
}

int kt__collector_running(kt__collector_t *c) { return atomic_load(&c->running); }

int kt__collector_stopping(kt__collector_t *c) { return atomic_load(&c->stop_req); }

int kt__collector_is_self(kt__collector_t *c)
{
    return atomic_load(&c->running) && pthread_equal(c->thread, pthread_self());
}

void kt__collector_stop(kt__collector_t *c)
{
    pthread_mutex_lock(&c->lock);
    if (!atomic_load(&c->running)) {
        pthread_mutex_unlock(&c->lock);
        return;
    }
    atomic_store(&c->stop_req, 1);
    pthread_cond_broadcast(&c->cond);
    if (pthread_equal(c->thread, pthread_self())) {
        pthread_mutex_unlock(&c->lock); /* the loop ends after this step; nobody joins: detach */
        pthread_detach(c->thread);
        atomic_store(&c->running, 0);
        return;
    }
    pthread_t th = c->thread;
    pthread_mutex_unlock(&c->lock);
    pthread_join(th, NULL);
    atomic_store(&c->running, 0);
}

/* ---------------------------------------------------------------------------------------------------
 * fork
 * ------------------------------------------------------------------------------------------------- */

/* Prepare takes, in order: the registration lock (the backend list is then fixed), each backend's locks, each
 * collector's lock. Parent and child release in reverse. In the child the collector threads do not exist. */
static const kt__backend_ops_t *g_fork_ops[KT__MAX_BACKENDS];
static int g_fork_n;

static void fork_prepare(void)
{
    pthread_mutex_lock(&g_svc_lock);
    g_fork_n = g_nops;
    memcpy(g_fork_ops, g_ops, sizeof g_ops[0] * (size_t)g_nops);
    for (int i = 0; i < g_fork_n; i++)
        if (g_fork_ops[i]->fork_prepare)
            g_fork_ops[i]->fork_prepare();
    pthread_mutex_lock(&g_set_list_lock);
    for (kt__ctx_set_t *s = g_sets; s; s = s->next) {
        pthread_mutex_lock(&s->lock);
        set_fork_each(s, 0);
    }
    pthread_mutex_lock(&g_coll_list_lock);
    for (kt__collector_t *c = g_colls; c; c = c->next)
        pthread_mutex_lock(&c->lock);
    g_fork_core_release = __atomic_load_n(&g_core_release, __ATOMIC_ACQUIRE);
    void (*core_prepare)(void) = __atomic_load_n(&g_core_prepare, __ATOMIC_ACQUIRE);
    if (core_prepare && g_fork_core_release) /* last: a backend may record (core locks) holding its own */
        core_prepare();
    else
        g_fork_core_release = NULL;
}

static void fork_release(int child)
{
    if (g_fork_core_release)
        g_fork_core_release(child);
    for (kt__collector_t *c = g_colls; c; c = c->next) {
        if (child) {
            atomic_store(&c->running, 0);
            atomic_store(&c->sleeping, 0);
            cond_init_monotonic(&c->cond); /* the parent's waiter does not exist here */
        }
        pthread_mutex_unlock(&c->lock);
    }
    pthread_mutex_unlock(&g_coll_list_lock);
    for (kt__ctx_set_t *s = g_sets; s; s = s->next) {
        set_fork_each(s, child ? 2 : 1);
        if (child) { /* the parent's pinning and waiting threads do not exist here */
            s->pins = 0;
            s->held = NULL;
            s->waiters = 0;
            s->fork_gen++;
            memset(&s->unpinned, 0, sizeof s->unpinned); /* not destroyed: a parent's waiter may be on it */
            pthread_cond_init(&s->unpinned, NULL);
        }
        pthread_mutex_unlock(&s->lock);
    }
    pthread_mutex_unlock(&g_set_list_lock);
    for (int i = g_fork_n - 1; i >= 0; i--) {
        void (*fn)(void) = child ? g_fork_ops[i]->fork_child : g_fork_ops[i]->fork_parent;
        if (fn)
            fn();
    }
    pthread_mutex_unlock(&g_svc_lock);
}

static void fork_parent(void) { fork_release(0); }
static void fork_child(void) { fork_release(1); }

/* ---------------------------------------------------------------------------------------------------
 * Device clock facts
 * ------------------------------------------------------------------------------------------------- */

void kt__device_publish_model(kt_device_info_t *info, const struct kt_clock_model_t *m, uint64_t now_ns)
{
    if (m) {
        double b = kt_clock_error_at(m, now_ns);
        info->error_bound_ns = b > 0 ? (uint64_t)(b + 0.999) : 0;
        info->drift_ppm = m->drift_ppm;
        info->model_samples = m->inliers;
    }
    kt_device_publish(info);
}

/* ---------------------------------------------------------------------------------------------------
 * Output path templates
 * ------------------------------------------------------------------------------------------------- */

int32_t kt__rank(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = kt__env_any(vars[i]); /* set by launchers, not ktiming's: read like any other program */
        if (!v || !*v)
            continue;
        char *end;
        errno = 0;
        long r = strtol(v, &end, 10);
        if (!errno && !*end && r >= 0 && r <= INT32_MAX)
            return (int32_t)r;
    }
    return -1;
}

int kt__path_expand(const char *tmpl, long pid, char *out, size_t size)
{
    if (!tmpl || !out || !size)
        return KT_EINVAL;
    size_t o = 0;
    char buf[256];
    for (const char *p = tmpl; *p; p++) {
        const char *add = buf;
        if (p[0] == '%' && p[1] == 'p') {
            snprintf(buf, sizeof buf, "%ld", pid < 0 ? (long)getpid() : pid);
            p++;
        } else if (p[0] == '%' && p[1] == 'h') {
            if (gethostname(buf, sizeof buf) != 0)
                snprintf(buf, sizeof buf, "unknown");
            buf[sizeof buf - 1] = 0;
            for (char *q = buf; *q; q++) /* a host name never adds a directory level */
                if (*q == '/')
                    *q = '_';
            p++;
        } else if (p[0] == '%' && p[1] == 'r') {
            int32_t r = kt__rank();
            snprintf(buf, sizeof buf, "%d", r < 0 ? 0 : (int)r);
            p++;
        } else if (p[0] == '%' && p[1] == '%') {
            buf[0] = '%', buf[1] = 0;
            p++;
        } else {
            buf[0] = *p, buf[1] = 0;
        }
        size_t n = strlen(add);
        if (o + n >= size) {
            out[0] = 0;
            return KT_EFULL;
        }
        memcpy(out + o, add, n);
        o += n;
    }
    out[o] = 0;
    return 0;
}
