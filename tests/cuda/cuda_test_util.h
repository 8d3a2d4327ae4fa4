/* cuda_test_util.h — helpers shared by the CUDA backend tests, which run against the driver TEST DOUBLE
 * (tests/cuda/fake_driver): a context made current, streams, snapshot look-ups, waiting for the collector. */
#ifndef KT_CUDA_TEST_UTIL_H
#define KT_CUDA_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include <ktiming.h>
#include <ktiming/cuda.h>

#include "fake_driver/kt_test_cuda_driver.h"

struct CUfunc_st;

/* The test double's driver entry points the tests call directly (the test links the double, and ktiming
 * dlopens the same file through KTIMING_CUDA_LIBRARY, so both see one driver). */
int cuInit(unsigned int flags);
int cuDevicePrimaryCtxRetain(struct CUctx_st **ctx, int dev);
int cuDevicePrimaryCtxRelease_v2(int dev);
int cuCtxPushCurrent_v2(struct CUctx_st *ctx);
int cuCtxPopCurrent_v2(struct CUctx_st **ctx);
int cuStreamCreate(struct CUstream_st **s, unsigned int flags);
int cuStreamDestroy_v2(struct CUstream_st *s);
int cuStreamSynchronize(struct CUstream_st *s);
int cuModuleLoadData(struct CUmod_st **m, const void *image);
int cuModuleUnload(struct CUmod_st *m);
int cuModuleGetFunction(struct CUfunc_st **f, struct CUmod_st *m, const char *name);
int cuLaunchKernel(struct CUfunc_st *f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                   unsigned int by, unsigned int bz, unsigned int shmem, struct CUstream_st *stream, void **params,
                   void **extra);

/* Make device 0's primary context current on this thread (the test's own reference). */
static inline struct CUctx_st *kt_test_ctx_enter(void)
{
    struct CUctx_st *ctx = NULL;
    assert_int_equal(cuInit(0), 0);
    assert_int_equal(cuDevicePrimaryCtxRetain(&ctx, 0), 0);
    assert_int_equal(cuCtxPushCurrent_v2(ctx), 0);
    return ctx;
}

static inline void kt_test_ctx_leave(void)
{
    struct CUctx_st *ctx = NULL;
    cuCtxPopCurrent_v2(&ctx);
    cuDevicePrimaryCtxRelease_v2(0);
}

/* The group teardown of the tests whose setup made a context current with kt_test_ctx_enter. */
static inline int kt_test_cuda_teardown(void **state)
{
    (void)state;
    kt_cuda_shutdown();
    kt_test_ctx_leave();
    return 0;
}

/* A kt_cuda_held_t enqueue callback: `trials` operations of 1 us of simulated work each (user unused). */
static inline int kt_test_enqueue_work(void *user, struct CUstream_st *stream, uint32_t trials)
{
    (void)user;
    for (uint32_t i = 0; i < trials; i++)
        if (kt_test_cuda_driver_work(stream, 1000, 0) != 0)
            return -1;
    return 0;
}

static inline struct CUstream_st *kt_test_stream(void)
{
    struct CUstream_st *s = NULL;
    assert_int_equal(cuStreamCreate(&s, 0), 0);
    return s;
}

static inline void kt_test_sleep_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Wait (without touching the driver from this thread) until the context has recorded `n` dispatches. */
static inline int kt_test_wait_recorded(struct CUctx_st *ctx, uint64_t n, unsigned timeout_ms)
{
    for (unsigned waited = 0; waited <= timeout_ms; waited += 2) {
        kt_cuda_stats_t st;
        if (kt_cuda_stats(ctx, &st) == 0 && st.recorded + st.errors >= n)
            return 1;
        kt_test_sleep_ms(2);
    }
    return 0;
}

/* The CUDA entry named `name` in a snapshot (any device). */
/* Blocks every cuEventQuery of the double, ends `span` (which wakes the collector) and waits (up to 5 s) until
 * the collector waits inside its query; fails the test if it never does. */
static inline void kt_test_end_into_blocked_query(kt_cuda_span_t *span)
{
    kt_test_cuda_stats_t st;
    kt_test_cuda_driver_stats(&st);
    uint64_t blocked0 = st.blocked_queries;
    kt_test_cuda_driver_block_queries(1);
    assert_int_equal(kt_cuda_end(span), 0);
    for (int i = 0; i < 5000; i++) {
        kt_test_cuda_driver_stats(&st);
        if (st.blocked_queries > blocked0)
            break;
        kt_test_sleep_ms(1);
    }
    assert_true(st.blocked_queries > blocked0);
}

/* The one entry named `name` of a fresh snapshot (after kt_flush) has `count` dispatches. */
static inline void kt_test_expect_count(const char *name, uint64_t count);

static inline const kt_kernel_timing_t *kt_test_find(const kt_snapshot_t *s, const char *name)
{
    for (size_t i = 0; s && i < s->count; i++)
        if (s->entries[i].backend == KT_BACKEND_CUDA && !strcmp(s->entries[i].name, name))
            return &s->entries[i];
    return NULL;
}

/* Index of the entry named `name`, or SIZE_MAX. */
static inline size_t kt_test_entry_index(const kt_snapshot_t *s, const char *name)
{
    for (size_t i = 0; s && i < s->count; i++)
        if (s->entries[i].backend == KT_BACKEND_CUDA && !strcmp(s->entries[i].name, name))
            return i;
    return SIZE_MAX;
}

/* After kt_flush: a copy of the entry named `name` (asserted to exist). Only its counters are to be read: what it
 * points to went with the snapshot. */
static inline kt_kernel_timing_t kt_test_entry_now(const char *name)
{
    kt_flush();
    kt_snapshot_t *snap = kt_snapshot();
    const kt_kernel_timing_t *e = kt_test_find(snap, name);
    assert_non_null(e);
    kt_kernel_timing_t copy = *e;
    kt_snapshot_free(snap);
    return copy;
}

static inline void kt_test_expect_count(const char *name, uint64_t count)
{
    assert_int_equal(kt_test_entry_now(name).dispatch_count, count);
}

#endif
