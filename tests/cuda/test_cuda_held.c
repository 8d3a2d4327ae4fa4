/* test_cuda_held.c — kt_cuda_time_held / kt_cuda_harness_run against the driver test double: the stream is held
 * by the spin kernel while the callback enqueues, so the start event is stamped only after the enqueuing ended
 * (an event pair on an idle stream is stamped while the host still prepares the launch); a callback that waits
 * on the held stream ends in KT_ETIMEDOUT, not a hang; a failing callback's error comes back and the stream is
 * released; the harness takes its samples through it. */
#include "cuda_test_util.h"

#include <ktiming/harness.h>

#include <pthread.h>

static uint64_t host_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* What the enqueue callbacks do. */
typedef struct job_t {
    uint64_t prep_ns;    /* host time spent before enqueuing (a slow launch path) */
    uint64_t work_ns;    /* simulated work enqueued per trial */
    uint64_t done_host;  /* host time when the callback finished enqueuing */
    int wait_on_stream;  /* misbehave: synchronise the held stream */
    int fail;            /* return this */
    uint32_t calls;
} job_t;

static int enqueue(void *user, struct CUstream_st *stream, uint32_t trials)
{
    job_t *j = user;
    j->calls++;
    if (j->fail)
        return j->fail;
    struct timespec ts = {0, (long)j->prep_ns};
    nanosleep(&ts, NULL);
    for (uint32_t i = 0; i < trials; i++)
        assert_int_equal(kt_test_cuda_driver_work(stream, j->work_ns, 0), 0);
    if (j->wait_on_stream)
        cuStreamSynchronize(stream);
    j->done_host = host_now();
    return 0;
}

/* Each test: a context entered and a stream of the double's (*state), both released even when it fails. */
static int held_setup(void **state)
{
    kt_test_ctx_enter();
    *state = kt_test_stream();
    return *state ? 0 : -1;
}

static int held_teardown(void **state)
{
    kt_cuda_shutdown(); /* what a context learned (its held batch size) does not reach the next test */
    if (*state)
        cuStreamDestroy_v2(*state);
    kt_test_ctx_leave();
    return 0;
}

/* The start event is stamped after the callback finished enqueuing (it queued behind the hold), although the
 * callback spent 20 ms before its first launch: an order, not a duration. Released before the callback, the
 * start would be stamped at once, inside those 20 ms (checked by moving the release: the test fails). An unheld
 * pair is not compared here: when its start gets stamped depends on how the machine schedules the double's
 * stream thread. */
static void test_start_waits_for_release(void **state)
{
    struct CUstream_st *s = *state;
    job_t j = {.prep_ns = 20000000, .work_ns = 30000};
    kt_cuda_held_t h = {.stream = s, .enqueue = enqueue, .user = &j};
    kt_test_cuda_stats_t before, after;
    kt_test_cuda_driver_stats(&before);
    uint64_t d = 0;
    int rc = kt_cuda_time_held(&h, 3, &d);
    if (rc)
        fail_msg("kt_cuda_time_held: %d (%s)", rc, kt_cuda_last_error());
    kt_test_cuda_driver_stats(&after);
    assert_int_equal(after.holds - before.holds, 1);
    assert_true(d > 0);
    uint64_t ts[8];
    size_t n = kt_test_cuda_driver_record_log(s, ts, 8);
    assert_int_equal(n, 2); /* the start and end events, on the caller's stream */
    uint64_t start_host = kt_test_cuda_driver_device_to_host(ts[0]);
    print_message("start event at host %llu, enqueuing ended at %llu\n", (unsigned long long)start_host,
                  (unsigned long long)j.done_host);
    assert_true(start_host + 1024 >= j.done_host); /* event resolution 512 ns, rounded down */
    assert_true(ts[1] >= ts[0]);

}

/* A callback that waits on the held stream would wait forever: the hold kernel gives up after hold_timeout_ms,
 * the call says so, and the stream works again afterwards. */
static void test_waiting_callback_times_out(void **state)
{
    struct CUstream_st *s = *state;
    job_t j = {.work_ns = 1000, .wait_on_stream = 1};
    kt_cuda_held_t h = {.stream = s, .enqueue = enqueue, .user = &j, .hold_timeout_ms = 30};
    uint64_t d = 7;
    assert_int_equal(kt_cuda_time_held(&h, 1, &d), KT_ETIMEDOUT);
    assert_int_equal(d, 0);
    assert_non_null(strstr(kt_cuda_last_error(), "held"));
    j.wait_on_stream = 0;
    h.hold_timeout_ms = 0;
    assert_int_equal(kt_cuda_time_held(&h, 1, &d), 0);
    assert_true(d > 0);
}

/* A failing callback: its error comes back, and the stream is released (it drains). */
static void test_callback_error_releases(void **state)
{
    struct CUstream_st *s = *state;
    job_t j = {.fail = KT_EINVAL};
    kt_cuda_held_t h = {.stream = s, .enqueue = enqueue, .user = &j, .hold_timeout_ms = 60000};
    uint64_t d = 0;
    assert_int_equal(kt_cuda_time_held(&h, 1, &d), KT_EINVAL);
    assert_int_equal(cuStreamSynchronize(s), 0); /* would wait the full minute if the hold were not released */
    assert_int_equal(kt_cuda_time_held(&h, 1, NULL), KT_EINVAL);
    h.enqueue = NULL;
    assert_int_equal(kt_cuda_time_held(&h, 1, &d), KT_EINVAL);
}

/* The harness's CUDA path: samples taken through kt_cuda_harness_run, recorded under the kernel's name. */
static void test_harness_path(void **state)
{
    struct CUstream_st *s = *state;
    job_t j = {.work_ns = 20000};
    kt_cuda_held_t h = {.stream = s, .enqueue = enqueue, .user = &j};
    kt_harness_desc_t desc = {.name = "held_kernel",
                              .backend = KT_BACKEND_CUDA,
                              .run = kt_cuda_harness_run,
                              .user = &h,
                              .timing = KT_HARNESS_TIME_REPORTED,
                              .trials = 4,
                              .min_samples = 5,
                              .max_samples = 12,
                              .max_noise = 1e-9};
    kt_harness_result_t r;
    memset(&r, 0, sizeof r);
    assert_int_equal(kt_harness_run(&desc, &r), 0);
    assert_true(r.sample_count >= 5);
    assert_true(j.calls >= r.sample_count);
    kt_snapshot_t *snap = kt_snapshot();
    const kt_kernel_timing_t *e = kt_snapshot_find(snap, "held_kernel", KT_BACKEND_CUDA, NULL);
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, r.sample_count); /* one per-dispatch duration per sample */
    kt_snapshot_free(snap);
    kt_harness_result_free(&r);
}

/* Issue 36.2: 1,000 launches behind the spin kernel would fill the driver's launch queue (the double's holds 64):
 * the enqueuing call would block (checked by raising the batch to 1,000: the test fails). ktiming holds the stream for batches of at most 32 and
 * warms the work up once unheld (a kernel's first launch may synchronise the context under lazy loading), so the
 * call returns 0 with every batch's time summed and no enqueue ever blocked. */
static void test_thousand_launches_in_batches(void **state)
{
    struct CUstream_st *s = *state;
    job_t j = {.work_ns = 0};
    kt_cuda_held_t h = {.stream = s, .enqueue = enqueue, .user = &j, .hold_timeout_ms = 5000};
    kt_test_cuda_stats_t before, after;
    kt_test_cuda_driver_stats(&before);
    uint64_t d = 0;
    int rc = kt_cuda_time_held(&h, 1000, &d);
    if (rc)
        fail_msg("kt_cuda_time_held: %d (%s)", rc, kt_cuda_last_error());
    kt_test_cuda_driver_stats(&after);
    assert_int_equal(after.queue_full_waits, before.queue_full_waits);
    assert_true(after.max_queued_behind_hold <= 32 + 2);
    assert_int_equal(after.holds - before.holds, (1000 + 31) / 32); /* 32 batches */
    assert_int_equal(j.calls, 1 + (1000 + 31) / 32);                  /* and the unheld warm-up */
    assert_true(d > 0);
    /* The same work again: warmed up again (one unheld trial per call), then two held batches. */
    j.calls = 0;
    assert_int_equal(kt_cuda_time_held(&h, 64, &d), 0);
    assert_int_equal(j.calls, 1 + 2);
}

/* The legacy default stream cannot be held: it synchronises with every blocking stream (all of the program's
 * work would wait on the spin kernel). NULL means it unless the program uses the per-thread default stream. */
static void test_legacy_stream_refused(void **state)
{
    (void)state;
    job_t j = {.work_ns = 1000};
    kt_cuda_held_t h = {.stream = NULL, .enqueue = enqueue, .user = &j};
    uint64_t d = 0;
    assert_int_equal(kt_cuda_time_held(&h, 1, &d), KT_EINVAL);
    assert_non_null(strstr(kt_cuda_last_error(), "legacy"));
    h.stream = (struct CUstream_st *)0x1; /* CU_STREAM_LEGACY */
    assert_int_equal(kt_cuda_time_held(&h, 1, &d), KT_EINVAL);
    assert_int_equal(j.calls, 0);
}

/* A callback launching a kernel for the first time: under lazy loading (CUDA 12.2+) that launch loads the module
 * and can synchronise the context, i.e. wait for the spin kernel that waits for the release that never comes (the
 * double models it). The unheld warm-up launches it once before any hold, so the held batches do not wait. */
static const char kLazyModule[] =
    ".version 6.0\n.target sm_50\n.address_size 64\n"
    ".visible .entry kt_lazy_kernel(\n\t.param .u64 work_ns\n)\n{\n\tret;\n}\n";

static int enqueue_launches(void *user, struct CUstream_st *stream, uint32_t trials)
{
    struct CUfunc_st *fn = user;
    uint64_t work = 0;
    void *params[] = {&work};
    for (uint32_t i = 0; i < trials; i++)
        if (cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL) != 0)
            return -1;
    return 0;
}

/* Loads a PTX module into the double and returns its kernel `name`. */
static struct CUfunc_st *load_kernel(struct CUmod_st **mod, const char *ptx, const char *name)
{
    struct CUfunc_st *fn = NULL;
    assert_int_equal(cuModuleLoadData(mod, ptx), 0);
    assert_int_equal(cuModuleGetFunction(&fn, *mod, name), 0);
    return fn;
}

static void test_first_launch_is_warmed_up_unheld(void **state)
{
    struct CUstream_st *s = *state;
    struct CUmod_st *mod = NULL;
    struct CUfunc_st *fn = load_kernel(&mod, kLazyModule, "kt_lazy_kernel");
    kt_cuda_held_t h = {.stream = s, .enqueue = enqueue_launches, .user = fn, .hold_timeout_ms = 3000};
    kt_test_cuda_stats_t before, after;
    kt_test_cuda_driver_stats(&before);
    uint64_t d = 0;
    int rc = kt_cuda_time_held(&h, 4, &d);
    if (rc)
        fail_msg("kt_cuda_time_held: %d (%s)", rc, kt_cuda_last_error());
    kt_test_cuda_driver_stats(&after);
    assert_int_equal(after.lazy_load_waits, before.lazy_load_waits);
    assert_int_equal(cuModuleUnload(mod), 0);
}

/* Issue 36.2: held batches cap trials, but a trial may enqueue any number of launches, which ktiming cannot count.
 * Here each trial enqueues 10 operations, so 32 trials (320) overflow the double's queue of 64 behind the spin
 * kernel: that enqueue blocks, and before the fix the call waited the full hold timeout (10 s) and returned
 * KT_ETIMEDOUT. Now the spin kernel gives up after a short bound (hold_timeout_ms 0: from the warm-up's time), the
 * batch is not counted (it ran partly unheld), and the call goes on with half the trials per hold until they fit;
 * the context keeps that size, so a second call blocks no enqueue at all. The clock is frozen and the work virtual:
 * each counted batch's event pair then differs by its work exactly, so the total says that every trial was counted
 * once and no given-up batch was (one would add at least 40 of the 10240 ns trials). */
#define OP_NS 1024u /* a multiple of the double's event resolution (512): pairs differ by the work exactly */

typedef struct ops_job_t {
    uint32_t ops_per_trial; /* operations each trial enqueues */
    uint32_t calls;
} ops_job_t;

static int enqueue_ops(void *user, struct CUstream_st *stream, uint32_t trials)
{
    ops_job_t *j = user;
    j->calls++;
    for (uint32_t i = 0; i < trials * j->ops_per_trial; i++)
        if (kt_test_cuda_driver_work(stream, OP_NS, 1) != 0)
            return -1;
    return 0;
}

static void test_many_launches_per_trial_fit_by_halving(void **state)
{
    struct CUstream_st *s = *state;
    ops_job_t j = {.ops_per_trial = 10};
    kt_cuda_held_t h = {.stream = s, .enqueue = enqueue_ops, .user = &j}; /* hold_timeout_ms 0: automatic */
    const uint64_t work = 64ull * 10 * OP_NS;
    kt_test_cuda_stats_t before, mid, after;
    kt_test_cuda_driver_stats(&before);
    kt_test_cuda_driver_freeze_clock(1);
    uint64_t d = 0, d2 = 0;
    int rc = kt_cuda_time_held(&h, 64, &d);
    kt_test_cuda_driver_stats(&mid);
    uint32_t calls1 = j.calls;
    int rc2 = rc ? rc : kt_cuda_time_held(&h, 64, &d2);
    kt_test_cuda_driver_freeze_clock(0);
    kt_test_cuda_driver_stats(&after);
    if (rc || rc2)
        fail_msg("kt_cuda_time_held: %d, %d (%s)", rc, rc2, kt_cuda_last_error());
    print_message("first call: %u callbacks, %llu holds, %llu blocked enqueues, %llu ns; second: %u callbacks, %llu "
                  "blocked, %llu ns (work %llu ns)\n", calls1, (unsigned long long)(mid.holds - before.holds),
                  (unsigned long long)(mid.queue_full_waits - before.queue_full_waits), (unsigned long long)d,
                  j.calls - calls1, (unsigned long long)(after.queue_full_waits - mid.queue_full_waits),
                  (unsigned long long)d2, (unsigned long long)work);
    assert_true(mid.queue_full_waits > before.queue_full_waits); /* the first batches did overflow */
    assert_int_equal(after.queue_full_waits, mid.queue_full_waits); /* the learned size fits */
    assert_true(d + 64 >= work && d <= work + 64);                 /* float ms: 1 ns per batch at most */
    assert_true(d2 + 64 >= work && d2 <= work + 64);
    /* warm-up, then batches of the learned size: 4 trials (40 operations fit the queue of 64), or less where a host
     * stall on a loaded machine cut a batch of 4 past the automatic bound too */
    uint32_t batches = j.calls - calls1 - 1;
    assert_true(batches == 64 / 4 || batches == 64 / 2 || batches == 64);
}

/* A single trial that enqueues more than the launch queue holds cannot be held at all: the call halves down to one
 * trial per hold, then fails with KT_ETIMEDOUT and says why, and the stream drains. Before the fix: one batch, the
 * full hold timeout, and a message that did not name the launch queue. */
static void test_one_trial_overflowing_the_queue_fails(void **state)
{
    struct CUstream_st *s = *state;
    ops_job_t j = {.ops_per_trial = 100}; /* the double's queue holds 64 */
    kt_cuda_held_t h = {.stream = s, .enqueue = enqueue_ops, .user = &j};
    uint64_t d = 7;
    assert_int_equal(kt_cuda_time_held(&h, 4, &d), KT_ETIMEDOUT);
    print_message("%s\n", kt_cuda_last_error());
    assert_int_equal(d, 0);
    assert_non_null(strstr(kt_cuda_last_error(), "launch queue"));
    assert_int_equal(j.calls, 1 + 3); /* warm-up, then 4, 2 and 1 trials per hold */
    assert_int_equal(cuStreamSynchronize(s), 0);
    j.ops_per_trial = 1; /* the stream and the context still hold work that fits */
    assert_int_equal(kt_cuda_time_held(&h, 4, &d), 0);
    assert_true(d > 0);
}

/* Issue 36.2, the warm-up's key: a program that reuses one job struct (one callback, one user pointer) for another
 * kernel still gets that kernel warmed up before the hold. Keyed by the (callback, user) pair, the second call
 * skipped the warm-up, kt_lazy_b's first launch waited behind the spin kernel (lazy_load_waits + 1) and the call
 * ended in KT_ETIMEDOUT. */
static const char kTwoKernels[] =
    ".version 6.0\n.target sm_50\n.address_size 64\n"
    ".visible .entry kt_lazy_a(\n\t.param .u64 work_ns\n)\n{\n\tret;\n}\n"
    ".visible .entry kt_lazy_b(\n\t.param .u64 work_ns\n)\n{\n\tret;\n}\n";

typedef struct kernel_job_t {
    struct CUfunc_st *fn; /* what the callback launches: the program changes it between calls */
} kernel_job_t;

static int enqueue_job_kernel(void *user, struct CUstream_st *stream, uint32_t trials)
{
    kernel_job_t *j = user;
    return enqueue_launches(j->fn, stream, trials);
}

static void test_reused_job_struct_is_warmed_up(void **state)
{
    struct CUstream_st *s = *state;
    struct CUmod_st *mod = NULL;
    struct CUfunc_st *a = load_kernel(&mod, kTwoKernels, "kt_lazy_a"), *b = NULL;
    assert_int_equal(cuModuleGetFunction(&b, mod, "kt_lazy_b"), 0);
    kernel_job_t job = {.fn = a};
    kt_cuda_held_t h = {.stream = s, .enqueue = enqueue_job_kernel, .user = &job, .hold_timeout_ms = 3000};
    uint64_t d = 0;
    int rc = kt_cuda_time_held(&h, 4, &d);
    if (rc)
        fail_msg("kt_cuda_time_held (kernel a): %d (%s)", rc, kt_cuda_last_error());
    job.fn = b; /* the same struct, the same callback: another kernel, never launched */
    kt_test_cuda_stats_t before, after;
    kt_test_cuda_driver_stats(&before);
    rc = kt_cuda_time_held(&h, 4, &d);
    kt_test_cuda_driver_stats(&after);
    if (rc)
        fail_msg("kt_cuda_time_held (kernel b): %d (%s)", rc, kt_cuda_last_error());
    assert_int_equal(after.lazy_load_waits, before.lazy_load_waits);
    assert_int_equal(cuModuleUnload(mod), 0);
}

/* The double itself (what the tests above lean on): behind a kt_hold_wait kernel that is queued but not yet running
 * (here: the stream's worker is held, as a busy stream or a host that enqueues faster than the stream starts would
 * leave it), enqueues still fill the launch queue and block, as a real push buffer does. Were only a spinning
 * kernel counted, the held tests' "no enqueue blocked" would pass whenever enqueuing outran the stream. */
static const char kHoldModule[] =
    ".version 6.0\n.target sm_50\n.address_size 64\n"
    ".visible .entry kt_hold_wait(\n\t.param .u64 flag,\n\t.param .u64 timeout_ns\n)\n{\n\tret;\n}\n";

typedef struct filler_t {
    struct CUstream_st *stream;
    uint32_t ops;      /* to enqueue */
    uint32_t returned; /* enqueues returned so far (atomic) */
} filler_t;

static void *fill_queue(void *arg)
{
    filler_t *f = arg;
    for (uint32_t i = 0; i < f->ops; i++) {
        if (kt_test_cuda_driver_work(f->stream, 0, 1) != 0)
            break;
        __atomic_add_fetch(&f->returned, 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

static void test_double_queue_fills_behind_a_pending_hold(void **state)
{
    struct CUstream_st *s = *state;
    struct CUmod_st *mod = NULL;
    struct CUfunc_st *fn = load_kernel(&mod, kHoldModule, "kt_hold_wait");
    static uint32_t flag[2]; /* the double's device addresses are host addresses */
    __atomic_store_n(&flag[0], 0u, __ATOMIC_RELEASE);
    uint64_t flag_addr = (uint64_t)(uintptr_t)flag, timeout = 60000000000ull;
    void *params[] = {&flag_addr, &timeout};
    kt_test_cuda_stats_t before, now;
    kt_test_cuda_driver_stats(&before);
    assert_int_equal(kt_test_cuda_driver_hold(s, 1), 0); /* the hold kernel stays queued, not running */
    assert_int_equal(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, s, params, NULL), 0);
    filler_t f = {.stream = s, .ops = 100};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, fill_queue, &f), 0);
    int blocked = 0;
    for (int i = 0; i < 5000 && !blocked; i++) {
        kt_test_cuda_driver_stats(&now);
        blocked = now.queue_full_waits > before.queue_full_waits;
        if (!blocked)
            kt_test_sleep_ms(1);
    }
    uint32_t returned = __atomic_load_n(&f.returned, __ATOMIC_ACQUIRE);
    assert_int_equal(kt_test_cuda_driver_hold(s, 0), 0); /* the kernel spins now; the filler still waits */
    __atomic_store_n(&flag[0], 1u, __ATOMIC_RELEASE);     /* released: the queue drains */
    pthread_join(th, NULL);
    assert_int_equal(cuStreamSynchronize(s), 0);
    print_message("%u of 100 enqueues returned behind the pending hold kernel\n", returned);
    assert_true(blocked);
    assert_true(returned < 100);
    assert_int_equal(f.returned, 100);
    assert_int_equal(cuModuleUnload(mod), 0);
}

/* A call that cannot be held at all (its callback waits on the held stream: every batch gives up, halved down to 1
 * trial, KT_ETIMEDOUT) teaches the context nothing: the next call, with a callback that can be held, holds 32
 * trials a batch again (1,000 trials: 32 holds, not 1,000). */
static void test_a_failed_call_keeps_the_batch_size(void **state)
{
    struct CUstream_st *s = *state;
    job_t waits = {.work_ns = 1000, .wait_on_stream = 1};
    kt_cuda_held_t bad = {.stream = s, .enqueue = enqueue, .user = &waits, .hold_timeout_ms = 30};
    uint64_t d = 0;
    assert_int_equal(kt_cuda_time_held(&bad, 64, &d), KT_ETIMEDOUT);
    job_t fine = {.work_ns = 0};
    /* a long bound: on a loaded machine a host stall past the automatic one (100 ms) would halve a batch here */
    kt_cuda_held_t good = {.stream = s, .enqueue = enqueue, .user = &fine, .hold_timeout_ms = 60000};
    kt_test_cuda_stats_t before, after;
    kt_test_cuda_driver_stats(&before);
    assert_int_equal(kt_cuda_time_held(&good, 1000, &d), 0);
    kt_test_cuda_driver_stats(&after);
    assert_int_equal(after.holds - before.holds, (1000 + 31) / 32);
}

/* A size learned from a callback with many launches a trial (10 operations: 4 trials a batch) is kept while it
 * holds, and doubled again after 8 calls in a row held at it: a later, lighter callback is not stuck with it. */
static void test_learned_size_grows_back(void **state)
{
    struct CUstream_st *s = *state;
    ops_job_t heavy = {.ops_per_trial = 10};
    kt_cuda_held_t h = {.stream = s, .enqueue = enqueue_ops, .user = &heavy};
    uint64_t d = 0;
    kt_test_cuda_driver_freeze_clock(1);
    assert_int_equal(kt_cuda_time_held(&h, 64, &d), 0);
    ops_job_t light = {.ops_per_trial = 1};
    h.user = &light;
    h.hold_timeout_ms = 60000; /* no give-up of its own from here: only what the heavy call taught is in play */
    kt_test_cuda_stats_t before, after;
    uint64_t learned = 0; /* trials a batch the heavy call left: 4 (40 operations fit the queue of 64), less if a host
                           * stall on a loaded machine cut a batch of 4 too */
    for (int call = 0; call < 8; call++) { /* held at the learned size */
        kt_test_cuda_driver_stats(&before);
        assert_int_equal(kt_cuda_time_held(&h, 64, &d), 0);
        kt_test_cuda_driver_stats(&after);
        if (!learned)
            learned = 64 / (after.holds - before.holds);
        assert_true(learned >= 1 && learned <= 4 && 64 % learned == 0);
        assert_int_equal(after.holds - before.holds, 64 / learned);
    }
    kt_test_cuda_driver_stats(&before);
    assert_int_equal(kt_cuda_time_held(&h, 64, &d), 0); /* then twice as many */
    kt_test_cuda_driver_stats(&after);
    kt_test_cuda_driver_freeze_clock(0);
    assert_int_equal(after.holds - before.holds, 64 / (2 * learned));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_start_waits_for_release, held_setup, held_teardown),
        cmocka_unit_test_setup_teardown(test_waiting_callback_times_out, held_setup, held_teardown),
        cmocka_unit_test_setup_teardown(test_callback_error_releases, held_setup, held_teardown),
        cmocka_unit_test_setup_teardown(test_harness_path, held_setup, held_teardown),
        cmocka_unit_test_setup_teardown(test_thousand_launches_in_batches, held_setup, held_teardown),
        cmocka_unit_test_setup_teardown(test_legacy_stream_refused, held_setup, held_teardown),
        cmocka_unit_test_setup_teardown(test_first_launch_is_warmed_up_unheld, held_setup, held_teardown),
        cmocka_unit_test_setup_teardown(test_reused_job_struct_is_warmed_up, held_setup, held_teardown),
        /* after test_thousand_launches_in_batches: the double's max_queued_behind_hold is a process-wide maximum */
        cmocka_unit_test_setup_teardown(test_many_launches_per_trial_fit_by_halving, held_setup, held_teardown),
        cmocka_unit_test_setup_teardown(test_one_trial_overflowing_the_queue_fails, held_setup, held_teardown),
        cmocka_unit_test_setup_teardown(test_double_queue_fills_behind_a_pending_hold, held_setup, held_teardown),
        cmocka_unit_test_setup_teardown(test_a_failed_call_keeps_the_batch_size, held_setup, held_teardown),
        cmocka_unit_test_setup_teardown(test_learned_size_grows_back, held_setup, held_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
