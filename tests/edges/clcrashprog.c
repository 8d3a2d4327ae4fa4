/* clcrashprog.c — an ordinary OpenCL program (no ktiming) for the in-flight-at-death test: enqueues `gated_a` A
 * times and `gated_b` B times, all waiting on a user event it never sets, flushes the queue, then dies as asked:
 * segv (a write to an unmapped address) or kill (SIGKILL to itself). Exit 77: no OpenCL device. */
#include <CL/cl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cl_min.h"
#include "die.h"

static const char *kSrc = "__kernel void gated_a(__global int *p) { p[get_global_id(0)] += 1; }\n"
                          "__kernel void gated_b(__global int *p) { p[get_global_id(0)] += 2; }\n";

int main(int argc, char **argv)
{
    if (argc < 4)
        return 2;
    int na = atoi(argv[2]), nb = atoi(argv[3]);
    cl_context ctx;
    cl_command_queue q;
    cl_program prog;
    int rc = ktt_cl_min(kSrc, CL_QUEUE_PROFILING_ENABLE, &ctx, &q, &prog);
    if (rc != 0)
        return rc;
    cl_int err = CL_SUCCESS;
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
