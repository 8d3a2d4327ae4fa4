/* cucrashprog.c — a CUDA program for the in-flight-at-death test, against the driver TEST DOUBLE (tests/cuda):
 * times D spans of `cu_done` on a stream that runs (and flushes: all recorded), then H spans of `cu_held` on a
 * stream the double holds (never completes), then dies as asked: segv (a write to an unmapped address) or kill
 * (SIGKILL to itself). */
#include <ktiming.h>
#include <ktiming/cuda.h>

#include "cuda/fake_driver/kt_test_cuda_driver.h"

#include <stdlib.h>
#include <string.h>

#include "die.h"

int cuInit(unsigned int flags);
int cuDevicePrimaryCtxRetain(struct CUctx_st **ctx, int dev);
int cuCtxPushCurrent_v2(struct CUctx_st *ctx);
int cuStreamCreate(struct CUstream_st **s, unsigned int flags);

static int spans(struct CUctx_st *ctx, struct CUstream_st *s, const char *name, int n)
{
    for (int i = 0; i < n; i++) {
        kt_cuda_span_t span;
        if (kt_cuda_begin(&span, ctx, s, name) != 0 || kt_cuda_end(&span) != 0)
            return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 4)
        return 2;
    int nd = atoi(argv[2]), nh = atoi(argv[3]);
    struct CUctx_st *ctx = NULL;
    struct CUstream_st *run = NULL, *held = NULL;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxPushCurrent_v2(ctx) || kt_cuda_init(NULL) ||
        cuStreamCreate(&run, 0) || cuStreamCreate(&held, 0) || kt_test_cuda_driver_hold(held, 1))
        return 3;
    if (spans(ctx, run, "cu_done", nd) != 0)
        return 3;
    kt_flush(); /* every cu_done recorded: none of them in flight */
    if (spans(ctx, held, "cu_held", nh) != 0)
        return 3;
    ktt_die_as_asked(argv[1], argc);
    return 4;
}
