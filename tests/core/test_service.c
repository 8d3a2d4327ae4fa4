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

static const kt__backend_ops_t kA = {"a", a_flush, a_stop, a_prep, a_parent, NULL};
static int g_stopping_seen = -1;
static void c_flush(uint64_t d) { (void)d; g_stopping_seen = kt__backends_stopping(); }
static void c_stop(uint64_t d) { (void)d; g_stopping_seen = kt__backends_stopping(); }
static const kt__backend_ops_t kC = {"c", c_flush, c_stop, NULL, NULL, NULL};
static const kt__backend_ops_t kB = {"b", b_flush, b_stop, b_prep, b_parent, NULL};

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_register_flush_stop), cmocka_unit_test(test_fork_callbacks),
        cmocka_unit_test(test_stopping_flag),
        cmocka_unit_test(test_collector),           cmocka_unit_test(test_path_expand),
        cmocka_unit_test(test_exit_wait),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
