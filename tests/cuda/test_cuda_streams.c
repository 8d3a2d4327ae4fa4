/* test_cuda_streams.c — per-thread default streams: code compiled as with nvcc --default-stream per-thread
 * (CUDA_API_PER_THREAD_DEFAULT_STREAM) has its stream-0 spans recorded on the calling thread's per-thread stream,
 * not on the legacy stream; so does every stream-0 span with desc.per_thread_default_stream; the legacy stream
 * stays reachable as CU_STREAM_LEGACY. */
#define CUDA_API_PER_THREAD_DEFAULT_STREAM 1
#include "cuda_test_util.h"

#include <pthread.h>

#define STREAM_LEGACY ((struct CUstream_st *)0x1)
#define STREAM_PER_THREAD ((struct CUstream_st *)0x2)

static struct CUctx_st *g_ctx;

static int setup(void **state)
{
    (void)state;
    g_ctx = kt_test_ctx_enter();
    return 0;
}

static size_t log_len(struct CUstream_st *s)
{
    uint64_t ts[256];
    return kt_test_cuda_driver_record_log(s, ts, 256);
}

/* One thread's spans on stream 0 (macro path) land on its own per-thread stream. */
static void *thread_spans(void *arg)
{
    (void)arg;
    cuCtxPushCurrent_v2(g_ctx);
    size_t pt0 = log_len(STREAM_PER_THREAD), legacy0 = log_len(NULL);
    for (int i = 0; i < 3; i++) {
        kt_cuda_span_t span;
        if (kt_cuda_begin(&span, g_ctx, NULL, "ptds") != 0 || kt_cuda_end(&span) != 0)
            return (void *)1;
    }
    cuStreamSynchronize(STREAM_PER_THREAD);
    size_t pt = log_len(STREAM_PER_THREAD) - pt0, legacy = log_len(NULL) - legacy0;
    struct CUctx_st *popped;
    cuCtxPopCurrent_v2(&popped);
    return (pt == 6 && legacy == 0) ? NULL : (void *)2;
}

static void test_compiled_per_thread(void **state)
{
    (void)state;
    assert_int_equal(kt_cuda_init(NULL), 0); /* the backend is not told: the header maps stream 0 */
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, thread_spans, NULL), 0);
    for (int i = 0; i < 2; i++) {
        void *rv = (void *)9;
        pthread_join(th[i], &rv);
        assert_null(rv);
    }
    /* The legacy stream, asked for explicitly. */
    size_t legacy0 = log_len(NULL);
    kt_cuda_span_t span;
    assert_int_equal(kt_cuda_begin(&span, g_ctx, STREAM_LEGACY, "legacy"), 0);
    assert_int_equal(kt_cuda_end(&span), 0);
    kt_flush();
    assert_int_equal(log_len(NULL) - legacy0, 2);
    kt_snapshot_t *snap = kt_snapshot();
    const kt_kernel_timing_t *e = kt_test_find(snap, "ptds");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 6);
    kt_snapshot_free(snap);
    kt_cuda_shutdown();
}

static void test_desc_per_thread(void **state)
{
    (void)state;
    assert_int_equal(kt_cuda_init(&(kt_cuda_desc_t){.per_thread_default_stream = 1}), 0);
    size_t pt0 = log_len(STREAM_PER_THREAD), legacy0 = log_len(NULL);
    kt_cuda_span_t span;
    assert_int_equal((kt_cuda_begin)(&span, g_ctx, NULL, "desc-ptds"), 0); /* the function, not the macro */
    assert_int_equal(kt_cuda_end(&span), 0);
    kt_flush();
    assert_int_equal(log_len(STREAM_PER_THREAD) - pt0, 2);
    assert_int_equal(log_len(NULL) - legacy0, 0);
    kt_cuda_shutdown();
}

static int enqueue_one(void *user, struct CUstream_st *stream, uint32_t trials)
{
    (void)user;
    for (uint32_t i = 0; i < trials; i++)
        if (kt_test_cuda_driver_work(stream, 1000, 0) != 0)
            return -1;
    return 0;
}

/* Issue 36.6: stream 0 means the per-thread default stream in such a build for the timer and the held stream too
 * (a zeroed timer, kt_cuda_timer_init with stream 0, a kt_cuda_held_t with stream 0), never the legacy stream. */
static void test_compiled_per_thread_timer_and_held(void **state)
{
    (void)state;
    assert_int_equal(kt_cuda_init(NULL), 0);
    size_t pt0 = log_len(STREAM_PER_THREAD), legacy0 = log_len(NULL);
    kt_cuda_timer_t zeroed = {0};
    kt_cuda_timer_start(&zeroed);
    kt_cuda_timer_stop(&zeroed);
    double ms = -1.0;
    assert_int_equal(kt_cuda_timer_elapsed(&zeroed, &ms), 0);
    kt_cuda_timer_destroy(&zeroed);
    kt_cuda_timer_t t;
    assert_int_equal(kt_cuda_timer_init(&t, g_ctx, NULL), 0);
    kt_cuda_timer_start(&t);
    kt_cuda_timer_stop(&t);
    assert_int_equal(kt_cuda_timer_elapsed(&t, &ms), 0);
    kt_cuda_timer_destroy(&t);
    kt_cuda_held_t h = {.ctx = g_ctx, .stream = NULL, .enqueue = enqueue_one};
    uint64_t d = 0;
    assert_int_equal(kt_cuda_time_held(&h, 2, &d), 0); /* not refused as the legacy stream */
    assert_int_equal(log_len(NULL) - legacy0, 0);
    assert_int_equal(log_len(STREAM_PER_THREAD) - pt0, 6); /* two timers' pairs, the held pair */
    kt_cuda_shutdown();
}

/* kt_cuda_slots_bind's copies on stream 0 go to the per-thread default stream where stream 0 means it: with the
 * header compiled as with --default-stream per-thread (the macro), and with desc.per_thread_default_stream (the
 * function itself). The per-thread stream is held, so the copies wait there: the module's slot pointer is still
 * unset until it is released. On the legacy stream (before the fix, both ways) they ran at once. */
int cuModuleGetGlobal_v2(unsigned long long *dptr, size_t *bytes, struct CUmod_st *m, const char *name);

static const char kStampModule[] =
    ".version 6.0\n.target sm_50\n.address_size 64\n"
    ".global .align 8 .u64 kt_cuda_slot_ptr;\n"
    ".visible .entry kt_test_stamp(\n\t.param .u64 work_ns\n)\n{\n\tret;\n}\n";

/* Binds slot 1 on stream 0 (through the macro, or the function when `function`) while the per-thread stream is
 * held; returns the module's slot pointer then (*after: once the stream ran) and the slot's device address. */
static uint64_t bind_on_stream_zero(int function, uint64_t *after, uint64_t *slot)
{
    struct CUmod_st *mod = NULL;
    assert_int_equal(cuModuleLoadData(&mod, kStampModule), 0);
    unsigned long long var = 0;
    size_t bytes = 0;
    assert_int_equal(cuModuleGetGlobal_v2(&var, &bytes, mod, "kt_cuda_slot_ptr"), 0);
    kt_cuda_slots_t *slots = NULL;
    assert_int_equal(kt_cuda_slots_create(&slots, g_ctx, 2), 0);
    assert_int_equal(kt_test_cuda_driver_hold(STREAM_PER_THREAD, 1), 0);
    int rc = function ? (kt_cuda_slots_bind)(slots, mod, NULL, 1) : kt_cuda_slots_bind(slots, mod, NULL, 1);
    assert_int_equal(rc, 0);
    assert_int_equal(cuStreamSynchronize(STREAM_LEGACY), 0);
    uint64_t during = __atomic_load_n((uint64_t *)(uintptr_t)var, __ATOMIC_ACQUIRE);
    assert_int_equal(kt_test_cuda_driver_hold(STREAM_PER_THREAD, 0), 0);
    assert_int_equal(cuStreamSynchronize(STREAM_PER_THREAD), 0);
    *after = __atomic_load_n((uint64_t *)(uintptr_t)var, __ATOMIC_ACQUIRE);
    *slot = kt_cuda_slots_device_ptr(slots, 1);
    kt_cuda_slots_destroy(slots);
    assert_int_equal(cuModuleUnload(mod), 0);
    return during;
}

static void test_slots_bind_stream_zero_per_thread(void **state)
{
    (void)state;
    uint64_t after = 0, slot = 0;
    assert_int_equal(kt_cuda_init(NULL), 0); /* the backend is not told: the header maps stream 0 */
    assert_int_equal(bind_on_stream_zero(0, &after, &slot), 0);
    assert_int_equal(after, slot);
    kt_cuda_shutdown();
    assert_int_equal(kt_cuda_init(&(kt_cuda_desc_t){.per_thread_default_stream = 1}), 0);
    assert_int_equal(bind_on_stream_zero(1, &after, &slot), 0);
    assert_int_equal(after, slot);
    kt_cuda_shutdown();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compiled_per_thread),
        cmocka_unit_test(test_desc_per_thread),
        cmocka_unit_test(test_compiled_per_thread_timer_and_held),
        cmocka_unit_test(test_slots_bind_stream_zero_per_thread),
    };
    return cmocka_run_group_tests(tests, setup, kt_test_cuda_teardown);
}
