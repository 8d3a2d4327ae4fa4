/* test_service.c — the backend service layer: registration, flush/stop order and deadlines, collector threads
 * (signals blocked, wake, stop, fork), path templates, the exit wait setting. Built with src/core/service.c
 * compiled in, since its functions are internal to the library. */
#include "test_util.h"

#include "core/service.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------------------------------
 * Backends
 * ------------------------------------------------------------------------------------------------- */

static char g_log[256];
static uint64_t g_deadline_seen;

static void logc(char c)
{
    size_t n = strlen(g_log);
    if (n + 1 < sizeof g_log)
        g_log[n] = c, g_log[n + 1] = 0;
}
static void a_flush(uint64_t d) { g_deadline_seen = d; logc('a'); }
static void b_flush(uint64_t d) { (void)d; logc('b'); }
static void a_stop(uint64_t d) { g_deadline_seen = d; logc('A'); }
static void b_stop(uint64_t d) { (void)d; logc('B'); }
static void a_prep(void) { logc('1'); }
static void b_prep(void) { logc('2'); }
static void a_parent(void) { logc('x'); }
static void b_parent(void) { logc('y'); }

static const kt__backend_ops_t kA = {"a", a_flush, a_stop, a_prep, a_parent, NULL, NULL};
static int g_stopping_seen = -1;
static void c_flush(uint64_t d) { (void)d; g_stopping_seen = kt__backends_stopping(); }
static void c_stop(uint64_t d) { (void)d; g_stopping_seen = kt__backends_stopping(); }
static const kt__backend_ops_t kC = {"c", c_flush, c_stop, NULL, NULL, NULL, NULL};
static const kt__backend_ops_t kB = {"b", b_flush, b_stop, b_prep, b_parent, NULL, NULL};

static void test_register_flush_stop(void **state)
{
    (void)state;
    g_log[0] = 0;
    assert_int_equal(kt__backend_register(NULL), KT_EINVAL);
    assert_int_equal(kt__backend_register(&kA), 0);
    assert_int_equal(kt__backend_register(&kB), 0);
    assert_int_equal(kt__backend_register(&kA), 0); /* idempotent */
    kt__backends_flush(1234);
    assert_string_equal(g_log, "ab");
    assert_int_equal(g_deadline_seen, 1234);
    kt__backends_stop(99);
    assert_string_equal(g_log, "abAB");
    assert_int_equal(g_deadline_seen, 99);
    kt__backends_flush(5); /* stopped backends are no longer called */
    kt__backends_stop(5);
    assert_string_equal(g_log, "abAB");
    assert_int_equal(kt__backend_register(&kA), 0); /* used again: registers again */
    kt__backends_flush(7);
    assert_string_equal(g_log, "abABa");
    kt__backends_stop(7);
}

/* Stop hooks run with kt__backends_stopping() set (what the recorder reads to skip prefaulting a span log that
 * only the exit flush will use); flush hooks, and everything after the stop, see it clear. */
static void test_stopping_flag(void **state)
{
    (void)state;
    assert_int_equal(kt__backends_stopping(), 0);
    assert_int_equal(kt__backend_register(&kC), 0);
    kt__backends_flush(1);
    assert_int_equal(g_stopping_seen, 0);
    kt__backends_stop(1);
    assert_int_equal(g_stopping_seen, 1);
    assert_int_equal(kt__backends_stopping(), 0);
}

static void test_fork_callbacks(void **state)
{
    (void)state;
    g_log[0] = 0;
    assert_int_equal(kt__backend_register(&kA), 0);
    assert_int_equal(kt__backend_register(&kB), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(kt__forked_child() ? 0 : 3);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(kt__forked_child(), 0);
    assert_string_equal(g_log, "12yx"); /* prepare in order, parent in reverse */
    kt__backends_stop(0);
}

/* ---------------------------------------------------------------------------------------------------
 * Collectors
 * ------------------------------------------------------------------------------------------------- */

typedef struct coll_arg_t {
    _Atomic int steps;     /* steps run */
    _Atomic int work;      /* steps that should report work */
    _Atomic int sig_blocked; /* 1 if SIGINT and SIGTERM were blocked in the collector, -1 if not */
    char name[16];         /* the collector thread's name, written before `named` is set */
    _Atomic int named;
} coll_arg_t;

static int step(void *p)
{
    coll_arg_t *a = p;
    if (atomic_fetch_add(&a->steps, 1) == 0) {
        sigset_t cur;
        pthread_sigmask(SIG_SETMASK, NULL, &cur);
        atomic_store(&a->sig_blocked, sigismember(&cur, SIGINT) && sigismember(&cur, SIGTERM) ? 1 : -1);
        pthread_getname_np(pthread_self(), a->name, sizeof a->name);
        atomic_store(&a->named, 1); /* publishes name to the test thread */
    }
    if (atomic_load(&a->work) > 0) {
        atomic_fetch_sub(&a->work, 1);
        return 1;
    }
    return 0;
}

/* Waits (bounded by iterations, not time asserted) until cond holds. */
#define WAIT_FOR(cond)                                                                                     \
    for (int i_ = 0; i_ < 20000 && !(cond); i_++)                                                         \
        kt__nap_ns(100000)

static kt__collector_t g_coll = KT__COLLECTOR_INIT;

static void test_collector(void **state)
{
    (void)state;
    static coll_arg_t a;
    assert_int_equal(kt__collector_start(&g_coll, "kt-test-coll", step, &a, 0), 0); /* nap until woken */
    assert_true(kt__collector_running(&g_coll));
    assert_int_equal(kt__collector_start(&g_coll, "other", step, &a, 0), 0); /* already running: no-op */
    WAIT_FOR(atomic_load(&a.named));
    assert_int_equal(atomic_load(&a.named), 1);
    assert_int_equal(atomic_load(&a.sig_blocked), 1);
    assert_string_equal(a.name, "kt-test-coll");
    /* Asleep with no timeout: only a wake runs it again. Work makes it step again at once. */
    WAIT_FOR(atomic_load(&g_coll.sleeping));
    int before = atomic_load(&a.steps);
    atomic_store(&a.work, 5);
    kt__collector_wake(&g_coll);
    WAIT_FOR(atomic_load(&a.steps) >= before + 6);
    assert_true(atomic_load(&a.steps) >= before + 6);
    assert_int_equal(atomic_load(&a.work), 0);
    assert_false(kt__collector_is_self(&g_coll));

    /* fork: the child has no collector and may start one of its own. */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (kt__collector_running(&g_coll))
            _exit(4);
#if defined(__SANITIZE_THREAD__)
        _exit(0); /* TSan cannot start threads in a child of a multi-threaded process; the normal build does */
#endif
        static coll_arg_t b;
        if (kt__collector_start(&g_coll, "kt-child", step, &b, 1000000) != 0)
            _exit(5);
        WAIT_FOR(atomic_load(&b.steps) >= 2); /* a 1 ms nap: it steps by itself */
        kt__collector_stop(&g_coll);
        _exit(atomic_load(&b.steps) >= 2 && !kt__collector_running(&g_coll) ? 0 : 6);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_true(kt__collector_running(&g_coll)); /* the parent's is untouched */

    kt__collector_stop(&g_coll);
    assert_false(kt__collector_running(&g_coll));
    kt__collector_stop(&g_coll); /* stopping twice is harmless */
    assert_int_equal(kt__collector_start(NULL, "x", step, &a, 0), KT_EINVAL);
    assert_int_equal(kt__collector_start(&g_coll, "x", NULL, &a, 0), KT_EINVAL);
}

/* ---------------------------------------------------------------------------------------------------
 * Paths, ranks, exit wait
 * ------------------------------------------------------------------------------------------------- */

static void test_path_expand(void **state)
{
    (void)state;
    char out[256], want[256], host[128];
    unsetenv("OMPI_COMM_WORLD_RANK");
    unsetenv("PMI_RANK");
    unsetenv("PMIX_RANK");
    unsetenv("SLURM_PROCID");
    assert_int_equal(kt__rank(), -1);
    assert_int_equal(kt__path_expand("out-%p-%r-%%-%x.json", 4242, out, sizeof out), 0);
    assert_string_equal(out, "out-4242-0-%-%x.json");
    setenv("PMI_RANK", "7", 1);
    setenv("SLURM_PROCID", "9", 1);
    assert_int_equal(kt__rank(), 7);
    setenv("OMPI_COMM_WORLD_RANK", "3", 1); /* first in the list wins */
    assert_int_equal(kt__rank(), 3);
    setenv("OMPI_COMM_WORLD_RANK", "-3", 1); /* not a rank: the next one */
    assert_int_equal(kt__rank(), 7);
    assert_int_equal(kt__path_expand("r%r", -1, out, sizeof out), 0);
    assert_string_equal(out, "r7");
    assert_int_equal(kt__path_expand("p%p", -1, out, sizeof out), 0);
    snprintf(want, sizeof want, "p%ld", (long)getpid());
    assert_string_equal(out, want);
    assert_int_equal(gethostname(host, sizeof host), 0);
    assert_int_equal(kt__path_expand("%h.json", 1, out, sizeof out), 0);
    assert_true(strncmp(out, host, strlen(host) > 20 ? 20 : strlen(host)) == 0);
    assert_null(strchr(out, '/'));
    assert_int_equal(kt__path_expand("0123456789", 1, out, 10), KT_EFULL);
    assert_string_equal(out, "");
    assert_int_equal(kt__path_expand(NULL, 1, out, sizeof out), KT_EINVAL);
}

static void test_exit_wait(void **state)
{
    (void)state;
    unsetenv("KTIMING_EXIT_WAIT_MS");
    assert_int_equal(kt__exit_wait_ns(), 2000000000ull);
    setenv("KTIMING_EXIT_WAIT_MS", "150", 1);
    assert_int_equal(kt__exit_wait_ns(), 150000000ull);
    setenv("KTIMING_EXIT_WAIT_MS", "0", 1);
    assert_int_equal(kt__exit_wait_ns(), 0);
    setenv("KTIMING_EXIT_WAIT_MS", "-5", 1);
    assert_int_equal(kt__exit_wait_ns(), 2000000000ull);
    setenv("KTIMING_EXIT_WAIT_MS", "12abc", 1);
    assert_int_equal(kt__exit_wait_ns(), 2000000000ull);
    unsetenv("KTIMING_EXIT_WAIT_MS");
}

/* ---------------------------------------------------------------------------------------------------
 * Stopped -> register again (kt__backend_arm)
 * ------------------------------------------------------------------------------------------------- */

static kt__backend_life_t g_life_d = KT__BACKEND_LIFE_INIT;
static int g_d_flushes, g_d_stops, g_d_stopped_in_stop = -1;
static const kt__backend_ops_t kD;
static void d_flush(uint64_t d) { (void)d; g_d_flushes++; }
static void d_stop(uint64_t d) { (void)d; g_d_stops++; g_d_stopped_in_stop = kt__backend_stopped(&kD); }
static const kt__backend_ops_t kD = {.name = "d", .flush = d_flush, .stop = d_stop, .life = &g_life_d};

static void test_arm(void **state)
{
    (void)state;
    assert_int_equal(kt__backend_arm(NULL), KT_EINVAL);
    assert_int_equal(kt__backend_stopped(&kD), 0); /* never registered is not stopped */
    assert_int_equal(kt__backend_arm(&kD), 0);
    assert_int_equal(kt__backend_arm(&kD), 0); /* armed: nothing to do */
    kt__backends_flush(1);
    assert_int_equal(g_d_flushes, 1); /* registered once: called once */
    kt__backends_stop(1);
    assert_int_equal(g_d_stops, 1);
    assert_int_equal(g_d_stopped_in_stop, 1); /* marked before the hook runs */
    assert_int_equal(kt__backend_stopped(&kD), 1);
    kt__backends_flush(1);
    assert_int_equal(g_d_flushes, 1); /* stopped: not called */
    assert_int_equal(kt__backend_arm(&kD), 0); /* used again: registers again */
    assert_int_equal(kt__backend_stopped(&kD), 0);
    kt__backends_flush(1);
    assert_int_equal(g_d_flushes, 2);
    kt__backends_stop(1);
    assert_int_equal(g_d_stops, 2);
    /* without `life`, arm is register and stopped is always 0 */
    g_log[0] = 0;
    assert_int_equal(kt__backend_arm(&kB), 0);
    kt__backends_stop(1);
    assert_string_equal(g_log, "B");
    assert_int_equal(kt__backend_stopped(&kB), 0);
}

/* ---------------------------------------------------------------------------------------------------
 * Drain until a deadline, on a test-double clock
 * ------------------------------------------------------------------------------------------------- */

typedef struct fake_t {
    uint64_t now;          /* the double clock */
    uint64_t waits[64];    /* every wait asked for (0 = yield) */
    int nwaits;
    int passes;            /* step calls */
    uint64_t left[16];     /* what pass i returns (the last entry repeats) */
    int nleft;
    uint64_t pass_cost_ns; /* the clock advances this much per pass */
} fake_t;

static uint64_t fake_now(void *arg) { return ((fake_t *)arg)->now; }
static void fake_wait(void *arg, uint64_t ns)
{
    fake_t *f = arg;
    if (f->nwaits < 64)
        f->waits[f->nwaits++] = ns;
    f->now += ns ? ns : 1000; /* a yield costs 1 us on this clock */
}
static uint64_t fake_step(void *arg)
{
    fake_t *f = arg;
    int i = f->passes < f->nleft ? f->passes : f->nleft - 1;
    f->passes++;
    f->now += f->pass_cost_ns;
    return f->left[i];
}

static void test_drain(void **state)
{
    (void)state;
    const kt__drain_policy_t pol = {10000, 50000, 200000}; /* yield 10 us, naps 50, 100, 200, 200... us */
    fake_t f = {.now = 1000000, .left = {3, 2, 0}, .nleft = 3};
    kt__drain_clock_t clk = {fake_now, fake_wait, &f};
    /* done before the deadline: 0, and no pass after the one that returned 0 */
    assert_int_equal(kt__drain_with(UINT64_MAX, fake_step, &f, &pol, &clk), 0);
    assert_int_equal(f.passes, 3);
    assert_int_equal(f.nwaits, 2);
    assert_int_equal(f.waits[0], 0); /* within the spin phase: yields */

    /* never done: the deadline ends it, the last count comes back, backs off 50 -> 100 -> 200 and caps */
    memset(&f, 0, sizeof f);
    f.now = 1000000;
    f.left[0] = 7;
    f.nleft = 1;
    uint64_t deadline = f.now + 1000000;
    assert_int_equal(kt__drain_with(deadline, fake_step, &f, &pol, &clk), 7);
    assert_true(f.now >= deadline);
    int first_nap = 0;
    while (first_nap < f.nwaits && f.waits[first_nap] == 0)
        first_nap++;
    assert_int_equal(first_nap, 10); /* 10 us of 1 us yields */
    assert_int_equal(f.waits[first_nap], 50000);
    assert_int_equal(f.waits[first_nap + 1], 100000);
    assert_int_equal(f.waits[first_nap + 2], 200000);
    assert_int_equal(f.waits[first_nap + 3], 200000);
    for (int i = 0; i < f.nwaits; i++) /* no nap runs past the deadline */
        assert_true(f.waits[i] <= deadline);
    uint64_t total = 0;
    for (int i = 0; i < f.nwaits; i++)
        total += f.waits[i] ? f.waits[i] : 1000;
    assert_int_equal(total, 1000000); /* the last nap was cut to end exactly at the deadline */
    assert_int_equal(f.passes, f.nwaits + 1); /* a pass after every wait, the last one at the deadline */

    /* deadline 0 (or past): exactly one pass, no wait */
    memset(&f, 0, sizeof f);
    f.now = 5;
    f.left[0] = 4;
    f.nleft = 1;
    assert_int_equal(kt__drain_with(0, fake_step, &f, &pol, &clk), 4);
    assert_int_equal(f.passes, 1);
    assert_int_equal(f.nwaits, 0);

    /* no spin phase, fixed period (CUDA's poll_us as {0, p, p}) */
    const kt__drain_policy_t fixed = {0, 30000, 30000};
    memset(&f, 0, sizeof f);
    f.left[0] = 1;
    f.nleft = 1;
    assert_int_equal(kt__drain_with(100000, fake_step, &f, &fixed, &clk), 1);
    assert_int_equal(f.nwaits, 4);
    assert_int_equal(f.waits[0], 30000);
    assert_int_equal(f.waits[2], 30000);
    assert_int_equal(f.waits[3], 10000);

    /* NULL step; the real clock and default policy with a step done at once */
    assert_int_equal(kt__drain(UINT64_MAX, NULL, NULL), 0);
    memset(&f, 0, sizeof f);
    f.nleft = 1;
    assert_int_equal(kt__drain(UINT64_MAX, fake_step, &f), 0);
    assert_int_equal(f.passes, 1);
}

/* ---------------------------------------------------------------------------------------------------
 * Context sets
 * ------------------------------------------------------------------------------------------------- */

typedef struct fctx_t {
    int id;
    int busy;     /* work in flight: not reapable */
    int released; /* release called */
    int fork_phases[3];
} fctx_t;

static int fctx_done(void *c) { return !((fctx_t *)c)->busy; }
static void fctx_release(void *c) { ((fctx_t *)c)->released++; }
static int fctx_match(void *c, const void *key) { return ((fctx_t *)c)->id == *(const int *)key; }
static void fctx_count(void *c, void *arg) { (void)c; (*(int *)arg)++; }

static void test_ctx_set(void **state)
{
    (void)state;
    static kt__ctx_set_t set = KT__CTX_SET_INIT;
    enum { N = 100 }; /* past every inline and initial capacity: no fixed cap */
    static fctx_t ctx[N];
    assert_int_equal(kt__ctx_set_add(&set, NULL), KT_EINVAL);
    for (int i = 0; i < N; i++) {
        ctx[i].id = i;
        assert_int_equal(kt__ctx_set_add(&set, &ctx[i]), 0);
    }
    assert_int_equal(kt__ctx_set_live(&set), N);
    int key = 77;
    assert_ptr_equal(kt__ctx_set_find(&set, fctx_match, &key), &ctx[77]);
    key = N;
    assert_null(kt__ctx_set_find(&set, fctx_match, &key));

    /* a pin copies every entry, each once */
    kt__ctx_pin_t pin;
    assert_int_equal(kt__ctx_set_pin(&set, &pin, KT__CTX_PIN_ALL), 0);
    assert_int_equal(pin.n, N);
    int seen[N] = {0};
    for (size_t i = 0; i < pin.n; i++)
        seen[((fctx_t *)pin.ctx[i])->id]++;
    for (int i = 0; i < N; i++)
        assert_int_equal(seen[i], 1);

    /* retire while pinned: still in the pinned copy, and not reaped until unpin */
    ctx[5].busy = 1;
    assert_int_equal(kt__ctx_set_retire(&set, &ctx[5]), 0);
    assert_int_equal(kt__ctx_set_retire(&set, &ctx[6]), 0);
    assert_int_equal(kt__ctx_set_retire(&set, &ctx[6]), KT_EINVAL); /* not live any more */
    assert_int_equal(kt__ctx_set_live(&set), N - 2);
    assert_int_equal(kt__ctx_set_retired(&set), 2);
    assert_int_equal(kt__ctx_set_reap(&set, fctx_done, fctx_release), 0); /* pinned */
    assert_int_equal(ctx[6].released, 0);
    kt__ctx_pin_t live;
    assert_int_equal(kt__ctx_set_pin(&set, &live, KT__CTX_PIN_LIVE), 0);
    assert_int_equal(live.n, N - 2);
    for (size_t i = 0; i < live.n; i++)
        assert_true(live.ctx[i] != &ctx[5] && live.ctx[i] != &ctx[6]);
    kt__ctx_set_unpin(&live);
    kt__ctx_pin_t ret;
    assert_int_equal(kt__ctx_set_pin(&set, &ret, KT__CTX_PIN_RETIRED), 0);
    assert_int_equal(ret.n, 2);
    assert_ptr_equal(ret.ctx[0], &ctx[5]); /* retired, oldest first */
    assert_ptr_equal(ret.ctx[1], &ctx[6]);
    assert_ptr_equal(ret.ctx, ret.inline_ctx); /* small copies allocate nothing */
    kt__ctx_set_unpin(&ret);
    kt__ctx_set_unpin(&pin);
    kt__ctx_set_unpin(&pin); /* twice: nothing pinned the second time */

    /* unpinned: the finished one is released once, the busy one stays */
    assert_int_equal(kt__ctx_set_reap(&set, fctx_done, fctx_release), 1);
    assert_int_equal(ctx[6].released, 1);
    assert_int_equal(ctx[5].released, 0);
    assert_int_equal(kt__ctx_set_retired(&set), 1);
    ctx[5].busy = 0;
    assert_int_equal(kt__ctx_set_reap(&set, fctx_done, fctx_release), 1);
    assert_int_equal(ctx[5].released, 1);
    assert_int_equal(kt__ctx_set_retired(&set), 0);

    /* remove: from the live list, and from the retired one */
    assert_int_equal(kt__ctx_set_remove(&set, &ctx[0]), 0);
    assert_int_equal(kt__ctx_set_remove(&set, &ctx[0]), KT_EINVAL);
    assert_int_equal(kt__ctx_set_retire(&set, &ctx[1]), 0);
    assert_int_equal(kt__ctx_set_retire(&set, &ctx[2]), 0);
    assert_int_equal(kt__ctx_set_remove(&set, &ctx[1]), 0);
    assert_int_equal(kt__ctx_set_retired(&set), 1);
    assert_int_equal(kt__ctx_set_live(&set), N - 5);
    int count = 0;
    kt__ctx_set_foreach(&set, 0, fctx_count, &count);
    assert_int_equal(count, N - 5);
    count = 0;
    kt__ctx_set_foreach(&set, 1, fctx_count, &count);
    assert_int_equal(count, N - 4);
    /* reap without a predicate or release: takes every retired entry */
    assert_int_equal(kt__ctx_set_reap(&set, NULL, NULL), 1);
    assert_int_equal(ctx[2].released, 0);

    /* empty set: a pin with nothing pinned */
    static kt__ctx_set_t empty = KT__CTX_SET_INIT;
    assert_int_equal(kt__ctx_set_pin(&empty, &pin, KT__CTX_PIN_ALL), 0);
    assert_int_equal(pin.n, 0);
    assert_null(pin.set);
    kt__ctx_set_unpin(&pin);
    assert_int_equal(kt__ctx_set_pin(NULL, &pin, KT__CTX_PIN_ALL), KT_EINVAL);
}

/* Threads adding, retiring and reaping while others pin and walk: no entry is released while a pin lists it. */
typedef struct churn_t {
    kt__ctx_set_t *set;
    fctx_t *ctx;
    int n;
    _Atomic int stop;
    _Atomic int bad;
} churn_t;

static void churn_release(void *c) { atomic_store((_Atomic int *)&((fctx_t *)c)->released, 1); }

static void *churn_walker(void *p)
{
    churn_t *a = p;
    while (!atomic_load(&a->stop)) {
        kt__ctx_pin_t pin;
        kt__ctx_set_pin(a->set, &pin, KT__CTX_PIN_ALL);
        for (size_t i = 0; i < pin.n; i++)
            if (atomic_load((_Atomic int *)&((fctx_t *)pin.ctx[i])->released))
                atomic_store(&a->bad, 1);
        kt__ctx_set_unpin(&pin);
    }
    return NULL;
}

static void test_ctx_set_threads(void **state)
{
    (void)state;
    static kt__ctx_set_t set = KT__CTX_SET_INIT;
    enum { N = 2000 };
    static fctx_t ctx[N];
    churn_t a = {.set = &set, .ctx = ctx, .n = N};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, churn_walker, &a), 0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(kt__ctx_set_add(&set, &ctx[i]), 0);
        if (i >= 8) {
            assert_int_equal(kt__ctx_set_retire(&set, &ctx[i - 8]), 0);
            kt__ctx_set_reap(&set, NULL, churn_release);
        }
    }
    atomic_store(&a.stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    while (kt__ctx_set_retired(&set))
        kt__ctx_set_reap(&set, NULL, churn_release);
    assert_int_equal(atomic_load(&a.bad), 0);
    for (int i = 0; i < N - 8; i++)
        assert_int_equal(ctx[i].released, 1); /* every retired one released, once no pin held it */
    assert_int_equal(kt__ctx_set_live(&set), 8);
}

/* fork: the set's lock is taken around fork (after the backends' prepare) and fork_each sees every entry. */
static void fctx_fork(void *c, int phase) { ((fctx_t *)c)->fork_phases[phase]++; }

static void test_ctx_set_fork(void **state)
{
    (void)state;
    static kt__ctx_set_t set = KT__CTX_SET_INIT_FORK(fctx_fork);
    static fctx_t c[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(kt__ctx_set_add(&set, &c[i]), 0);
    assert_int_equal(kt__ctx_set_retire(&set, &c[2]), 0);
    kt__ctx_pin_t pin; /* held across fork: the child starts with no pin and can reap */
    assert_int_equal(kt__ctx_set_pin(&set, &pin, KT__CTX_PIN_ALL), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int ok = c[0].fork_phases[0] == 1 && c[2].fork_phases[0] == 1 && c[0].fork_phases[2] == 1 &&
                 c[2].fork_phases[2] == 1 && c[0].fork_phases[1] == 0;
        ok = ok && kt__ctx_set_add(&set, &c[2]) == 0 && kt__ctx_set_reap(&set, NULL, NULL) == 1; /* lock free */
        _exit(ok ? 0 : 4);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(c[i].fork_phases[0], 1);
        assert_int_equal(c[i].fork_phases[1], 1);
        assert_int_equal(c[i].fork_phases[2], 0);
    }
    assert_int_equal(kt__ctx_set_reap(&set, NULL, NULL), 0); /* the parent's pin still holds */
    kt__ctx_set_unpin(&pin);
    assert_int_equal(kt__ctx_set_reap(&set, NULL, NULL), 1);
}

/* The env list: names are their rows, each once. */
static void test_env_list(void **state)
{
    (void)state;
    assert_string_equal(KT_ENV_NAME(CLOCK), "KTIMING_CLOCK");
    assert_string_equal(kt__env_name(KT__ENV_EXIT_WAIT_MS), "KTIMING_EXIT_WAIT_MS");
    assert_null(kt__env_name(KT__ENV_COUNT));
    for (int i = 0; i < KT__ENV_COUNT; i++) {
        assert_int_equal(strncmp(kt__env_name((kt__env_id_t)i), "KTIMING_", 8), 0);
        for (int j = 0; j < i; j++)
            assert_string_not_equal(kt__env_name((kt__env_id_t)i), kt__env_name((kt__env_id_t)j));
    }
    setenv("KTIMING_CLOCK", "x", 1);
    assert_string_equal(kt__env(KT_ENV_NAME(CLOCK)), "x");
    unsetenv("KTIMING_CLOCK");
    assert_null(kt__env(KT_ENV_NAME(CLOCK)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_register_flush_stop), cmocka_unit_test(test_fork_callbacks),
        cmocka_unit_test(test_stopping_flag),
        cmocka_unit_test(test_collector),           cmocka_unit_test(test_path_expand),
        cmocka_unit_test(test_exit_wait),           cmocka_unit_test(test_arm),
        cmocka_unit_test(test_drain),               cmocka_unit_test(test_ctx_set),
        cmocka_unit_test(test_ctx_set_threads),     cmocka_unit_test(test_ctx_set_fork),
        cmocka_unit_test(test_env_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
