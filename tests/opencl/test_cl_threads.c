/* test_cl_threads.c — two threads enqueue onto two shared queues at once (one in-order, one out-of-order):
 * exact counts per kernel, every span on the right queue and attributed to the thread that enqueued it. */
#include "support/cl_test_util.h"

#include <pthread.h>

enum { PER_THREAD = 150 };

/* What one enqueuing thread does. */
typedef struct worker_t {
    kt_cl_ctx_t *ctx[2];  /* the two attached queues */
    cl_kernel kernel[2];  /* kernel per queue (a kernel object is not shared between threads) */
    uint32_t ordinal;     /* kt_thread_ordinal() of the thread */
    int failures;         /* enqueue calls that did not return CL_SUCCESS */
} worker_t;

static void *work(void *arg)
{
    worker_t *w = arg;
    w->ordinal = kt_thread_ordinal();
    size_t g = 16;
    for (int i = 0; i < PER_THREAD; i++)
        for (int k = 0; k < 2; k++)
            w->failures += kt_cl_enqueue_ndrange(w->ctx[k], w->kernel[k], 1, NULL, &g, NULL, 0, NULL, NULL) !=
                           CL_SUCCESS;
    return NULL;
}

static void test_two_threads_two_queues(void **state)
{
    (void)state;
    cl_command_queue q[2] = {clt_queue(CL_QUEUE_PROFILING_ENABLE),
                             clt_queue(CL_QUEUE_PROFILING_ENABLE | CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)};
    cl_mem buf[2][2];
    worker_t w[2];
    memset(w, 0, sizeof w);
    kt_cl_ctx_t *kc[2];
    for (int k = 0; k < 2; k++)
        assert_int_equal(kt_cl_attach(q[k], NULL, &kc[k]), 0);
    for (int t = 0; t < 2; t++)
        for (int k = 0; k < 2; k++) {
            buf[t][k] = clt_buffer(16);
            w[t].kernel[k] = clt_kernel(k == 0 ? "tiny" : "other", buf[t][k]);
            w[t].ctx[k] = kc[k];
        }
    pthread_t th[2];
    for (int t = 0; t < 2; t++)
        assert_int_equal(pthread_create(&th[t], NULL, work, &w[t]), 0);
    for (int t = 0; t < 2; t++)
        pthread_join(th[t], NULL);
    assert_int_equal(w[0].failures + w[1].failures, 0);
    assert_int_not_equal(w[0].ordinal, w[1].ordinal);
    for (int k = 0; k < 2; k++)
        assert_int_equal(kt_cl_detach(kc[k]), 0);

    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e[2] = {clt_find(s, "tiny"), clt_find(s, "other")};
    for (int k = 0; k < 2; k++) {
        assert_non_null(e[k]);
        assert_int_equal(e[k]->dispatch_count, 2 * PER_THREAD);
        assert_int_equal(e[k]->errors, 0);
        assert_int_equal(e[k]->dropped, 0);
    }
    /* Kernel k only ever ran on queue k: each kernel's spans share one queue, different between kernels.
     * Each kernel's spans come from exactly two enqueuing threads, PER_THREAD each. */
    uint32_t queue_of[2] = {UINT32_MAX, UINT32_MAX};
    for (int k = 0; k < 2; k++) {
        uint32_t th_id[2] = {UINT32_MAX, UINT32_MAX};
        size_t th_n[2] = {0, 0};
        for (size_t i = 0; i < s->span_count; i++) {
            const kt_span_t *sp = &s->spans[i];
            if (&s->entries[sp->entry] != e[k])
                continue;
            assert_true(sp->flags & KT_SPAN_DEVICE);
            if (queue_of[k] == UINT32_MAX)
                queue_of[k] = sp->queue;
            assert_int_equal(sp->queue, queue_of[k]);
            int slot = sp->thread == th_id[0] ? 0 : sp->thread == th_id[1] ? 1 : th_id[0] == UINT32_MAX ? 0
                     : th_id[1] == UINT32_MAX ? 1 : -1;
            if (slot < 0)
                fail_msg("a third thread appears in the spans");
            th_id[slot] = sp->thread;
            th_n[slot]++;
        }
        assert_int_equal(th_n[0], PER_THREAD);
        assert_int_equal(th_n[1], PER_THREAD);
    }
    assert_int_not_equal(queue_of[0], queue_of[1]);
    kt_snapshot_free(s);
    for (int t = 0; t < 2; t++)
        for (int k = 0; k < 2; k++) {
            clt.api->clReleaseKernel(w[t].kernel[k]);
            clt.api->clReleaseMemObject(buf[t][k]);
        }
    for (int k = 0; k < 2; k++)
        clt.api->clReleaseCommandQueue(q[k]);
}

int main(void)
{
    if (clt_init() != 0) {
        fprintf(stderr, "no OpenCL device: skipped\n");
        return KT_TEST_SKIP;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_two_threads_two_queues)};
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    clt.api->clReleaseProgram(clt.program);
    clt.api->clReleaseContext(clt.context);
    return rc;
}
