/* test_cuda_fork.c — issue 36.6: fork() while the collector thread is inside the driver (its cuEventQuery waits in
 * the double) with the backend's locks held. The backend's fork handlers make fork wait for a consistent state, and
 * in the child (CUDA cannot be used in a child forked after initialisation) every call returns at once with
 * KT_EUNAVAILABLE instead of waiting on a lock the vanished collector held. Without them the child hangs (here:
 * killed by its alarm). */
#include "cuda_test_util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static void *unblock_later(void *arg)
{
    (void)arg;
    kt_test_sleep_ms(50);
    kt_test_cuda_driver_block_queries(0);
    return NULL;
}

static void test_fork_while_collecting(void **state)
{
    (void)state;
    struct CUctx_st *ctx = kt_test_ctx_enter();
    assert_int_equal(kt_cuda_init(NULL), 0);
    struct CUstream_st *s = kt_test_stream();
    kt_cuda_span_t span;
    assert_int_equal(kt_cuda_begin(&span, ctx, s, "before-fork"), 0);
    assert_int_equal(kt_test_cuda_driver_work(s, 1000, 0), 0);
    kt_test_end_into_blocked_query(&span); /* the collector queries and waits in the driver */
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, unblock_later, NULL), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(5);
        kt_cuda_span_t c;
        int rc = kt_cuda_begin(&c, ctx, s, "in-child");
        int rc2 = kt_cuda_end(&c);
        kt_flush();
        _exit(rc == KT_EUNAVAILABLE && rc2 == 0 ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    pthread_join(th, NULL);
    if (WIFSIGNALED(status))
        fail_msg("the child was killed by signal %d (hung on a lock held at fork)", WTERMSIG(status));
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    kt_test_expect_count("before-fork", 1); /* the parent goes on: its dispatch is recorded */
    assert_int_equal(cuStreamDestroy_v2(s), 0);
    kt_cuda_shutdown();
    kt_test_ctx_leave();
}

static void *open_gate_later(void *arg)
{
    (void)arg;
    kt_test_sleep_ms(100);
    kt_test_cuda_driver_init_gate(0);
    return NULL;
}

static atomic_int g_init_rc = -1000; /* kt_cuda_init's result on the other thread (-1000: not yet) */

static void *init_backend(void *arg)
{
    (void)arg;
    atomic_store(&g_init_rc, kt_cuda_init(NULL));
    return NULL;
}

/* Detached: a finished thread not joined would be a "thread leak" to TSan in the forked child. */
static void start_detached(void *(*fn)(void *))
{
    pthread_t th;
    pthread_attr_t attr;
    assert_int_equal(pthread_attr_init(&attr), 0);
    assert_int_equal(pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED), 0);
    assert_int_equal(pthread_create(&th, &attr, fn, NULL), 0);
    pthread_attr_destroy(&attr);
}

/* fork() while another thread is inside the backend's first initialisation (its cuInit waits in the double, as a
 * real cuInit takes hundreds of ms, with the backend's lock held): the fork handlers already cover that lock, so
 * fork waits for the initialisation, and the child's kt_cuda_init and kt_cuda_begin return KT_EUNAVAILABLE at once.
 * Without them the child inherits the lock held and hangs (killed by its alarm). First: nothing initialised. */
static void test_fork_during_the_first_init(void **state)
{
    (void)state;
    kt_test_cuda_driver_init_gate(1);
    start_detached(init_backend);
    kt_test_cuda_stats_t st;
    for (int i = 0; i < 5000; i++) {
        kt_test_cuda_driver_stats(&st);
        if (st.init_gate_waits)
            break;
        kt_test_sleep_ms(1);
    }
    assert_int_equal(st.init_gate_waits, 1); /* the backend's cuInit is waiting, its lock held */
    start_detached(open_gate_later);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(5);
        int rc = kt_cuda_init(NULL);
        kt_cuda_span_t c;
        int rc2 = kt_cuda_begin(&c, NULL, NULL, "in-child");
        _exit(rc == KT_EUNAVAILABLE && rc2 == KT_EUNAVAILABLE ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    for (int i = 0; i < 5000 && atomic_load(&g_init_rc) == -1000; i++)
        kt_test_sleep_ms(1);
    if (WIFSIGNALED(status))
        fail_msg("the child was killed by signal %d (hung on the lock the initialisation held at fork)",
                 WTERMSIG(status));
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(atomic_load(&g_init_rc), 0); /* the parent's initialisation went on */
    kt_cuda_shutdown();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fork_during_the_first_init), /* first: nothing initialised */
        cmocka_unit_test(test_fork_while_collecting),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
