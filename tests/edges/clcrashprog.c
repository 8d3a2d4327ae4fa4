/* clcrashprog.c — an ordinary OpenCL program (no ktiming) for the in-flight-at-death test: enqueues `gated_a` A
 * times and `gated_b` B times, all waiting on a user event it never sets, flushes the queue, then dies as asked:
 * segv (a write to an unmapped address) or kill (SIGKILL to itself). Exit 77: no OpenCL device. */
#include <CL/cl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "die.h"

static const char *kSrc = "__kernel void gated_a(__global int *p) { p[get_global_id(0)] += 1; }\n"
                          "__kernel void gated_b(__global int *p) { p[get_global_id(0)] += 2; }\n";

int main(int argc, char **argv)
{
    if (argc < 4)
        return 2;
    int na = atoi(argv[2]), nb = atoi(argv[3]);
    cl_platform_id plat;
    cl_device_id dev;
    cl_uint np = 0;
    cl_int err = CL_SUCCESS;
    if (clGetPlatformIDs(1, &plat, &np) != CL_SUCCESS || !np ||
        clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL) != CL_SUCCESS)
        return 77;
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    if (err != CL_SUCCESS)
        return 77;
    cl_command_queue q = clCreateCommandQueue(ctx, dev, CL_QUEUE_PROFILING_ENABLE, &err);
    cl_program prog = err == CL_SUCCESS ? clCreateProgramWithSource(ctx, 1, &kSrc, NULL, &err) : NULL;
    if (err != CL_SUCCESS || clBuildProgram(prog, 1, &dev, "", NULL, NULL) != CL_SUCCESS)
        return 3;
    cl_kernel ka = clCreateKernel(prog, "gated_a", &err);
    cl_kernel kb = err == CL_SUCCESS ? clCreateKernel(prog, "gated_b", &err) : NULL;
    cl_mem buf = err == CL_SUCCESS ? clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64 * sizeof(cl_int), NULL, &err) : NULL;
    cl_event gate = err == CL_SUCCESS ? clCreateUserEvent(ctx, &err) : NULL;
    if (err != CL_SUCCESS || clSetKernelArg(ka, 0, sizeof buf, &buf) != CL_SUCCESS ||
        clSetKernelArg(kb, 0, sizeof buf, &buf) != CL_SUCCESS)
        return 3;
    size_t global = 64;
    for (int i = 0; i < na + nb; i++) {
        cl_event ev;
        if (clEnqueueNDRangeKernel(q, i < na ? ka : kb, 1, NULL, &global, NULL, 1, &gate, &ev) != CL_SUCCESS)
            return 3;
        clReleaseEvent(ev);
    }
    clFlush(q);
    ktt_die_as_asked(argv[1], argc);
    return 4;
}
