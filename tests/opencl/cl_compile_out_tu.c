/* cl_compile_out_tu.c — built WITHOUT KTIMING_ENABLE: the OpenCL API must compile unchanged and forward the
 * enqueue to the program's own clEnqueueNDRangeKernel (here the test's stand-in). */
#include <ktiming/cl.h>

int kt_test_cl_compiled_out(cl_command_queue queue, cl_kernel kernel)
{
    kt_cl_ctx_t *kc = NULL;
    if (kt_cl_attach(queue, NULL, &kc) != 0 || kc != (kt_cl_ctx_t *)queue)
        return 1;
    const kt_cl_api_t *api = (const kt_cl_api_t *)1;
    if (kt_cl_load(&api) != KT_EDISABLED || api != NULL)
        return 2;
    size_t g = 1;
    cl_event ev = NULL;
    if (kt_cl_enqueue_ndrange(kc, kernel, 1, NULL, &g, NULL, 0, NULL, &ev) != CL_SUCCESS || ev != (cl_event)kernel)
        return 3;
    if (kt_cl_track(kc, ev, "x") != 0 || kt_cl_flush(kc, 0) != 0 || kt_cl_detach(kc) != 0 || kt_cl_find(queue))
        return 4;
    return 0;
}
