/* test_cuda_fork.c — issue 36.6: fork() while the collector thread is inside the driver (its cuEventQuery waits in
 * the double) with the backend's locks held. The backend's fork handlers make fork wait for a consistent state, and
 * in the child (CUDA cannot be used in a child forked after initialisation) every call returns at once with
 * KT_EUNAVAILABLE instead of waiting on a lock the vanished collector held. Without them the child hangs (here:
 * killed by its alarm). */
#include "cuda_test_util.h"

#include <pthread.h>
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fork_while_collecting),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
