/* test_primitive_cl_hold.c — the OpenCL primitive holds its batch until the last trial is enqueued (issue 43): the
 * host sleeps between trials, yet the device time of the trials contains none of that (order, not durations:
 * the first mark completes after the last trial's enqueue). Runs on PoCL; skipped (77) without an OpenCL device. */
#include "support/cl_test_util.h"

#include <ktiming/primitive.h>
#include <stdint.h>

typedef struct hold_t {
    cl_kernel tiny;
    uint64_t last_enqueued; /* kt_now_ns() after the last trial's enqueue */
} hold_t;

static int gap_cb(void *encoder, uint32_t trial, void *user)
{
    hold_t *h = user;
    size_t g = 64;
    if (trial)
        clt_sleep_ms(30); /* a host gap between trials, as a loaded machine makes */
    int rc = clt.api->clEnqueueNDRangeKernel((cl_command_queue)encoder, h->tiny, 1, NULL, &g, NULL, 0, NULL, NULL) ==
                     CL_SUCCESS ? 0 : KT_EBACKEND;
    h->last_enqueued = kt_now_ns();
    return rc;
}

static void test_trials_held(void **state)
{
    (void)state;
    kt_reset();
    cl_command_queue q = clt_queue(CL_QUEUE_PROFILING_ENABLE);
    cl_mem buf = clt_buffer(64);
    hold_t h = {clt_kernel("tiny", buf), 0};
    kt_primitive_backend_t be;
    assert_int_equal(kt_cl_primitive_backend_create(q, &be), 0);
    const kt_primitive_kernel_t k[1] = {{"tiny", gap_cb, &h}};
    kt_primitive_t *prim = NULL;
    assert_int_equal(kt_primitive_create(&(kt_primitive_desc_t){.name = "hold", .kernels = k, .kernel_count = 1,
                                                                .backend = be}, &prim), 0);
    kt_primitive_result_t r;
    assert_int_equal(kt_primitive_execute(prim, &(kt_primitive_run_t){.trials = 4}, &r), 0);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e = clt_find(s, "hold/tiny");
    assert_non_null(e);
    size_t idx = (size_t)(e - s->entries);
    const kt_span_t *sp = NULL;
    for (size_t i = 0; i < s->span_count; i++)
        if (s->spans[i].entry == idx)
            sp = &s->spans[i];
    assert_non_null(sp);
    fprintf(stderr, "held batch: first mark %.3f ms after the last enqueue (+- %.3f ms), gpu_total %.3f ms\n",
            ((double)sp->start_ns - (double)h.last_enqueued) / 1e6, (double)sp->uncertainty_ns / 1e6,
            (double)r.gpu_total_ns[0] / 1e6);
    /* the device started the batch only once it was released: after the last enqueue */
    assert_true(sp->start_ns + sp->uncertainty_ns >= h.last_enqueued);
    /* the host bracket still contains the device time */
    assert_true(r.cpu_total_ns >= r.gpu_total_ns[0]);
    kt_snapshot_free(s);
    kt_primitive_destroy(prim);
    kt_primitive_backend_destroy(&be);
    clt.api->clReleaseKernel(h.tiny);
    clt.api->clReleaseMemObject(buf);
    clt.api->clReleaseCommandQueue(q);
}

int main(void)
{
    if (clt_init() != 0) {
        fprintf(stderr, "no OpenCL device: skipped\n");
        return KT_TEST_SKIP;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_trials_held)};
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    clt.api->clReleaseProgram(clt.program);
    clt.api->clReleaseContext(clt.context);
    return rc;
}
