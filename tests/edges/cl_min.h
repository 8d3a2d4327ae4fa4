/* cl_min.h — the OpenCL setup of the plain OpenCL programs of the run tests (clcrashprog, clexitprog): the first
 * device of the first platform, a context, a queue and a program built from source. */
#ifndef KT_TESTS_EDGES_CL_MIN_H
#define KT_TESTS_EDGES_CL_MIN_H

#include <CL/cl.h>

/* 0; 77 when there is no OpenCL device; 3 when the queue or program cannot be made. */
static inline int ktt_cl_min(const char *src, cl_command_queue_properties props, cl_context *ctx,
                             cl_command_queue *q, cl_program *prog)
{
    cl_platform_id plat;
    cl_device_id dev;
    cl_uint np = 0;
    cl_int err = CL_SUCCESS;
    if (clGetPlatformIDs(1, &plat, &np) != CL_SUCCESS || !np ||
        clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL) != CL_SUCCESS)
        return 77;
    *ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    if (err != CL_SUCCESS)
        return 77;
    *q = clCreateCommandQueue(*ctx, dev, props, &err);
    *prog = err == CL_SUCCESS ? clCreateProgramWithSource(*ctx, 1, &src, NULL, &err) : NULL;
    if (err != CL_SUCCESS || clBuildProgram(*prog, 1, &dev, "", NULL, NULL) != CL_SUCCESS)
        return 3;
    return 0;
}

#endif
