/* test_cl_bounds.c — what tracking holds stays bounded, and what it loses is counted, on the driver double with
 * commands that complete inside the enqueue (FAKE_CL_INLINE=1; a command waiting on a user event is held until the
 * event is set, while later ones run: the double's queues then behave out of order). Counts, never times:
 *  - (`starve`) a queue the program never synchronises, while it synchronises another (kt_cl_collect, what
 *    `ktiming run`'s clFinish does): the collector's step collects it while the synchronising goes on (it skipped
 *    polling while synchronisation points came, and the queue held every finished command and its event until
 *    exit); the step is made on the test's thread (no collector thread), so no scheduling decides it;
 *  - an out-of-order queue whose oldest command is gated by a user event: each synchronisation point records the
 *    finished commands behind it (it stopped at the gated one: none recorded until the gate opened);
 *  - a thread that tracked once and then only synchronises another thread's commands: the records it frees go
 *    back to the enqueuing thread, so the records ever made stay bounded (they grew with every command, until
 *    2^24 and then every command was dropped);
 *  - a kt_cl_detach that times out, and a command tracked on a queue being detached: dropped with a reason, not
 *    "unspecified" (or not counted at all);
 *  - `fork` (its own process: KTIMING_OPENCL_COMPLETION=callback, so the parent's collector never calls the driver
 *    and the fork takes no driver lock with it): a forked child's own command still in flight at its exit is
 *    counted as in flight at exit (the child's exit did nothing for its own queues), while the parent's is left to
 *    the parent; the child's own commands on its parent's queue are counted in the child (they were never). */
#include "fake_cl_util.h"
#include "shared/tool_cl.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t in_flight(kt_cl_ctx_t *kc)
{
    kt_cl_stats_t st;
    assert_int_equal(kt_cl_stats(kc, &st), 0);
    return st.in_flight;
}

static cl_command_queue queue_with(cl_command_queue_properties props)
{
    cl_int err = 0;
    cl_command_queue q = cl->clCreateCommandQueue(g_ctx, g_dev, CL_QUEUE_PROFILING_ENABLE | props, &err);
    assert_non_null(q);
    return q;
}

/* Queue A's commands are never synchronised; B is, at every step (as `ktiming run` does at each clFinish(B)). A's
 * commands are all finished (they ran inside the enqueue). Run as `starve`: no collector thread, the driver refuses
 * callbacks (so commands are polled), and the collector's step is made here after each synchronisation point: it
 * must collect A, which no synchronisation point covered (it skipped polling altogether while they came). */
static void test_unsynchronised_queue_collected(void **state)
{
    (void)state;
    kt_reset();
    enum { N = 200 };
    cl_command_queue qa = fake_queue(), qb = fake_queue();
    cl_kernel ka = fake_kernel("starved_a", 0), kb = fake_kernel("synced_b", 0);
    kt_cl_ctx_t *a, *b;
    assert_int_equal(kt_cl_attach(qa, NULL, &a), 0);
    assert_int_equal(kt_cl_attach(qb, NULL, &b), 0);
    size_t g = 1;
    uint64_t synced = 0;
    for (int i = 0; i < N; i++) {
        assert_int_equal(kt_cl_enqueue_ndrange(a, ka, 1, NULL, &g, NULL, 0, NULL, NULL), CL_SUCCESS);
        assert_int_equal(kt_cl_enqueue_ndrange(b, kb, 1, NULL, &g, NULL, 0, NULL, NULL), CL_SUCCESS);
        if (synced)
            assert_int_equal(kt_cl_collect(b, synced), 0);
        synced = kt_now_ns();
        while (kt__cl_collector_pass()) /* the collector's wake-up after this synchronisation point */
            ;
        if (in_flight(a) != 0)
            fail_msg("after synchronisation point %d of B and a collector step, queue A still holds %llu finished "
                     "commands", i, (unsigned long long)in_flight(a));
    }
    assert_int_equal(kt_cl_detach(a), 0);
    assert_int_equal(kt_cl_detach(b), 0);
    fake_expect_counts("starved_a", N, 0);
    fake_expect_counts("synced_b", N, 0);
    cl->clReleaseKernel(ka);
    cl->clReleaseKernel(kb);
    cl->clReleaseCommandQueue(qa);
    cl->clReleaseCommandQueue(qb);
}

/* An out-of-order queue whose oldest command waits on a user event; every later one finishes at once. After each
 * synchronisation point (bounded by the previous one's time, as `ktiming run` calls it) only the gated command and
 * the one enqueued since are still held: the sync recorded the finished ones behind the gated head. */
static void test_out_of_order_gated_head(void **state)
{
    (void)state;
    kt_reset();
    enum { N = 300 };
    cl_command_queue q = queue_with(CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE);
    cl_kernel gated = fake_kernel("ooo_gated", 0), k = fake_kernel("ooo_free", 0);
    kt_cl_ctx_t *kc;
    assert_int_equal(kt_cl_attach(q, NULL, &kc), 0);
    cl_int err = 0;
    cl_event gate = cl->clCreateUserEvent(g_ctx, &err);
    size_t g = 1;
    assert_int_equal(kt_cl_enqueue_ndrange(kc, gated, 1, NULL, &g, NULL, 1, &gate, NULL), CL_SUCCESS);
    uint64_t synced = 0;
    for (int i = 0; i < N; i++) {
        assert_int_equal(kt_cl_enqueue_ndrange(kc, k, 1, NULL, &g, NULL, 0, NULL, NULL), CL_SUCCESS);
        if (synced) {
            assert_int_equal(kt_cl_collect(NULL, synced), 0); /* clWaitForEvents' form: every queue */
            uint64_t held = in_flight(kc);
            if (held > 2)
                fail_msg("after synchronisation point %d the queue holds %llu commands (the gated one and the "
                         "newest at most)", i, (unsigned long long)held);
        }
        synced = kt_now_ns();
    }
    cl->clSetUserEventStatus(gate, CL_COMPLETE);
    assert_int_equal(kt_cl_detach(kc), 0);
    fake_expect_counts("ooo_free", N, 0);
    fake_expect_counts("ooo_gated", 1, 0);
    cl->clReleaseEvent(gate);
    cl->clReleaseKernel(gated);
    cl->clReleaseKernel(k);
    cl->clReleaseCommandQueue(q);
}

/* Thread E enqueues batches; thread S, which tracked one command of its own first, records each batch at its
 * synchronisation point, in lockstep. The records S frees are E's: they must come back to E. */
enum { ROUNDS = 200, BATCH = 100 };
static kt_cl_ctx_t *g_two_ctx;
static cl_kernel g_two_k;
static pthread_mutex_t g_two_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_two_cv = PTHREAD_COND_INITIALIZER;
static int g_two_turn; /* 0: E enqueues a batch; 1: S synchronises */
static int g_two_round;

static void two_wait_turn(int who)
{
    pthread_mutex_lock(&g_two_lock);
    while (g_two_turn != who)
        pthread_cond_wait(&g_two_cv, &g_two_lock);
    pthread_mutex_unlock(&g_two_lock);
}

static void two_pass_turn(int to)
{
    pthread_mutex_lock(&g_two_lock);
    g_two_turn = to;
    if (to == 0)
        g_two_round++;
    pthread_cond_broadcast(&g_two_cv);
    pthread_mutex_unlock(&g_two_lock);
}

static void *two_enqueuer(void *unused)
{
    (void)unused;
    size_t g = 1;
    for (int r = 0; r < ROUNDS; r++) {
        two_wait_turn(0);
        for (int i = 0; i < BATCH; i++)
            if (kt_cl_enqueue_ndrange(g_two_ctx, g_two_k, 1, NULL, &g, NULL, 0, NULL, NULL) != CL_SUCCESS)
                return (void *)1;
        two_pass_turn(1);
    }
    return NULL;
}

static void test_records_return_to_enqueuer(void **state)
{
    (void)state;
    kt_reset();
    cl_command_queue q = fake_queue();
    g_two_k = fake_kernel("two_threads", 0);
    cl_kernel own = fake_kernel("sync_thread_own", 0);
    assert_int_equal(kt_cl_attach(q, NULL, &g_two_ctx), 0);
    size_t g = 1;
    /* this thread (S) tracks a command once: from then on it keeps the records it frees, but only its own */
    assert_int_equal(kt_cl_enqueue_ndrange(g_two_ctx, own, 1, NULL, &g, NULL, 0, NULL, NULL), CL_SUCCESS);
    assert_int_equal(kt_cl_collect(g_two_ctx, 0), 0);
    uint32_t before = kt__cl_slots_made();
    g_two_turn = 0;
    g_two_round = 0;
    pthread_t e;
    assert_int_equal(pthread_create(&e, NULL, two_enqueuer, NULL), 0);
    for (int r = 0; r < ROUNDS; r++) {
        two_wait_turn(1);
        assert_int_equal(kt_cl_collect(g_two_ctx, 0), 0); /* records the batch (the collector may take some) */
        two_pass_turn(0);
    }
    void *erc = NULL;
    pthread_join(e, &erc);
    assert_null(erc);
    uint32_t made = kt__cl_slots_made() - before;
    /* at most one batch is in flight at a time: two chunks of 1,024 records are room enough; the old code made one
     * record per command (20,000) */
    if (made > 2048)
        fail_msg("%u records made for %d commands of %d in flight at most", made, ROUNDS * BATCH, BATCH);
    assert_int_equal(kt_cl_detach(g_two_ctx), 0);
    fake_expect_counts("two_threads", ROUNDS * BATCH, 0);
    cl->clReleaseKernel(g_two_k);
    cl->clReleaseKernel(own);
    cl->clReleaseCommandQueue(q);
}

/* A detach whose bounded wait (KTIMING_OPENCL_TIMEOUT_MS) runs out drops the command with a reason; a command
 * tracked on the queue once its detach began is dropped too, not lost. */
static void test_detach_drop_reasons(void **state)
{
    (void)state;
    kt_reset();
    cl_command_queue q = fake_queue();
    cl_kernel k = fake_kernel("detach_timeout", 0), late = fake_kernel("tracked_late", 0);
    kt_cl_ctx_t *kc;
    assert_int_equal(kt_cl_attach(q, NULL, &kc), 0);
    cl_int err = 0;
    cl_event gate = cl->clCreateUserEvent(g_ctx, &err), gate2 = cl->clCreateUserEvent(g_ctx, &err);
    size_t g = 1;
    assert_int_equal(kt_cl_enqueue_ndrange(kc, k, 1, NULL, &g, NULL, 1, &gate, NULL), CL_SUCCESS);
    assert_int_equal(kt_cl_detach(kc), KT_ETIMEDOUT); /* KTIMING_OPENCL_TIMEOUT_MS */
    /* a queue detached without waiting: its context lives while a command is in flight (the gated one) */
    cl_command_queue q2 = fake_queue();
    kt_cl_ctx_t *k2;
    assert_int_equal(kt_cl_attach(q2, NULL, &k2), 0);
    assert_int_equal(kt_cl_enqueue_ndrange(k2, k, 1, NULL, &g, NULL, 1, &gate2, NULL), CL_SUCCESS);
    assert_int_equal(kt_cl_detach_async(k2), 0);
    cl_event ev = NULL;
    assert_int_equal(cl->clEnqueueNDRangeKernel(q2, late, 1, NULL, &g, NULL, 0, NULL, &ev), CL_SUCCESS);
    assert_int_equal(kt_cl_track_kernel(k2, ev, late, NULL, 0), KT_ESTATE);
    cl->clReleaseEvent(ev);
    cl->clSetUserEventStatus(gate, CL_COMPLETE);
    cl->clSetUserEventStatus(gate2, CL_COMPLETE);
    kt_flush();
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e = fake_find(s, "detach_timeout");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 1); /* the one on the queue detached without waiting */
    assert_int_equal(e->dropped, 1);
    assert_int_equal(e->dropped_by[KT_DROP_UNSPECIFIED], 0);
    assert_int_equal(e->dropped_by[KT_DROP_IN_FLIGHT_AT_EXIT], 1);
    e = fake_find(s, "tracked_late");
    if (!e)
        fail_msg("the command tracked on a queue being detached was not counted");
    assert_int_equal(e->dispatch_count, 0);
    assert_int_equal(e->dropped, 1);
    assert_int_equal(e->dropped_by[KT_DROP_IN_FLIGHT_AT_EXIT], 1);
    kt_snapshot_free(s);
    cl->clReleaseEvent(gate);
    cl->clReleaseEvent(gate2);
    cl->clReleaseKernel(k);
    cl->clReleaseKernel(late);
    cl->clReleaseCommandQueue(q);
    cl->clReleaseCommandQueue(q2);
}

/* ---- fork (its own process) ---- */

static int g_fork_child; /* set in the forked child: verify_child_at_exit checks its exit */

/* Runs after ktiming's exit handler (registered before it): the child's own stuck command was waited for once and
 * counted as in flight at exit, its finished one recorded, and the parent's stuck command left alone. */
static void verify_child_at_exit(void)
{
    if (!g_fork_child)
        return;
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *mine = s ? fake_find(s, "child_stuck") : NULL;
    const kt_kernel_timing_t *done = s ? fake_find(s, "child_done") : NULL;
    const kt_kernel_timing_t *parent = s ? fake_find(s, "parent_stuck") : NULL;
    int ok_mine = mine && mine->dispatch_count == 0 && mine->dropped == 1 &&
                  mine->dropped_by[KT_DROP_IN_FLIGHT_AT_EXIT] == 1;
    int ok_done = done && done->dispatch_count == 1;
    int ok_parent = !parent || (parent->dispatch_count == 0 && parent->dropped == 0);
    /* the child's own commands on its parent's queue: the finished one timed, the stuck one counted as dropped */
    const kt_kernel_timing_t *on_done = s ? fake_find(s, "child_on_parent_done") : NULL;
    const kt_kernel_timing_t *on_stuck = s ? fake_find(s, "child_on_parent_stuck") : NULL;
    int ok_on = on_done && on_done->dispatch_count == 1 && on_done->dropped == 0 && on_stuck &&
                on_stuck->dispatch_count == 0 && on_stuck->dropped == 1 &&
                on_stuck->dropped_by[KT_DROP_IN_FLIGHT_AT_EXIT] == 1;
    fprintf(stderr, "child at exit: its stuck command %s; its finished one %s; the parent's %s; its own on the "
                    "parent's queue %s\n",
            ok_mine ? "counted as in flight at exit" : "NOT counted", ok_done ? "recorded" : "NOT recorded",
            ok_parent ? "left to the parent" : "counted in the child", ok_on ? "counted" : "NOT counted");
    kt_snapshot_free(s);
    fflush(stderr);
    _exit(ok_mine && ok_done && ok_parent && ok_on ? 0 : 1);
}

static int run_fork(void)
{
    atexit(verify_child_at_exit); /* before any ktiming call: runs after ktiming's exit handler */
    if (fake_open() != 0)
        return 1;
    cl_int err = 0;
    cl_command_queue qp = cl->clCreateCommandQueue(g_ctx, g_dev, CL_QUEUE_PROFILING_ENABLE, &err);
    cl_kernel kp = cl->clCreateKernel(NULL, "parent_stuck", &err);
    cl_event never = cl->clCreateUserEvent(g_ctx, &err);
    kt_cl_ctx_t *pc;
    size_t g = 1;
    if (kt_cl_attach(qp, NULL, &pc) != 0 || kt_cl_enqueue_ndrange(pc, kp, 1, NULL, &g, NULL, 1, &never, NULL) != 0)
        return 1;
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) {
        g_fork_child = 1;
        alarm(120); /* a child stuck on a lock ends, and the parent sees a signal, not an exit */
        cl_command_queue qc = cl->clCreateCommandQueue(g_ctx, g_dev, CL_QUEUE_PROFILING_ENABLE, &err);
        cl_kernel stuck = cl->clCreateKernel(NULL, "child_stuck", &err);
        cl_kernel done = cl->clCreateKernel(NULL, "child_done", &err);
        cl_uint us = 0;
        cl->clSetKernelArg(stuck, 0, sizeof us, &us);
        cl->clSetKernelArg(done, 0, sizeof us, &us);
        cl_event gate = cl->clCreateUserEvent(g_ctx, &err);
        kt_cl_ctx_t *cc;
        if (kt_cl_attach(qc, NULL, &cc) != 0 ||
            kt_cl_enqueue_ndrange(cc, done, 1, NULL, &g, NULL, 0, NULL, NULL) != CL_SUCCESS ||
            kt_cl_enqueue_ndrange(cc, stuck, 1, NULL, &g, NULL, 1, &gate, NULL) != CL_SUCCESS)
            _exit(2);
        /* and on the parent's queue (its context attached in the parent) */
        cl_kernel on_done = cl->clCreateKernel(NULL, "child_on_parent_done", &err);
        cl_kernel on_stuck = cl->clCreateKernel(NULL, "child_on_parent_stuck", &err);
        cl->clSetKernelArg(on_done, 0, sizeof us, &us);
        cl->clSetKernelArg(on_stuck, 0, sizeof us, &us);
        cl_event gate2 = cl->clCreateUserEvent(g_ctx, &err); /* the double holds one command per user event */
        if (kt_cl_enqueue_ndrange(pc, on_done, 1, NULL, &g, NULL, 0, NULL, NULL) != CL_SUCCESS ||
            kt_cl_enqueue_ndrange(pc, on_stuck, 1, NULL, &g, NULL, 1, &gate2, NULL) != CL_SUCCESS)
            _exit(3);
        exit(0); /* ktiming's exit handler (its own stuck command waited for, KTIMING_EXIT_WAIT_MS), then
                  * verify_child_at_exit */
    }
    int st = 0;
    if (child < 0 || waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "the forked child's exit did not count its own command (status 0x%x)\n", st);
        return 1;
    }
    cl->clSetUserEventStatus(never, CL_COMPLETE);
    kt_cl_detach(pc);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e = s ? fake_find(s, "parent_stuck") : NULL;
    int ok = e && e->dispatch_count == 1 && e->dropped == 0;
    kt_snapshot_free(s);
    cl->clReleaseEvent(never);
    cl->clReleaseKernel(kp);
    cl->clReleaseCommandQueue(qp);
    fprintf(stderr, "parent: its command %s\n", ok ? "recorded once" : "NOT recorded as it should");
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "fork"))
        return run_fork();
    if (fake_open() != 0)
        return 1;
    if (argc > 1 && !strcmp(argv[1], "starve")) {
        const struct CMUnitTest starve[] = {cmocka_unit_test(test_unsynchronised_queue_collected)};
        return cmocka_run_group_tests(starve, NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_out_of_order_gated_head),
        cmocka_unit_test(test_records_return_to_enqueuer),
        cmocka_unit_test(test_detach_drop_reasons),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
