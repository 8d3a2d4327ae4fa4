/* clexitprog.c — an ordinary OpenCL program (no ktiming) that times kernels at its exit: `clexitprog A B` registers
 * `final_pass` with atexit before its first OpenCL call (as a framework's init would), runs kernel "k" A times in
 * main and returns; final_pass runs "k" B more times and waits for them (clFinish). `clexitprog A B dtor` runs
 * final_pass from a destructor of the program instead (after every exit handler). Exit 77: no OpenCL device. */
#include "cl_min.h"

#include <stdlib.h>

static cl_command_queue g_q;
static cl_kernel g_k;
static int g_nb;
static int g_dtor; /* final_pass from the destructor, not atexit */

static void run_k(int n)
{
    size_t global = 64;
    for (int i = 0; i < n; i++)
        clEnqueueNDRangeKernel(g_q, g_k, 1, NULL, &global, NULL, 0, NULL, NULL);
    clFinish(g_q);
}

static void final_pass(void)
{
    if (g_q)
        run_k(g_nb);
}

__attribute__((destructor)) static void final_dtor(void)
{
    if (g_dtor)
        final_pass();
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    int na = atoi(argv[1]);
    g_nb = atoi(argv[2]);
    g_dtor = argc > 3 && argv[3][0] == 'd';
    if (!g_dtor)
        atexit(final_pass); /* before any OpenCL call */
    static const char *src = "__kernel void k(__global int *p) { p[get_global_id(0)] += 1; }\n";
    cl_context ctx;
    cl_command_queue q;
    cl_program prog;
    int rc = ktt_cl_min(src, 0, &ctx, &q, &prog);
    if (rc != 0)
        return rc;
    cl_int err = CL_SUCCESS;
    cl_kernel k = clCreateKernel(prog, "k", &err);
    cl_mem buf = err == CL_SUCCESS ? clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64 * sizeof(cl_int), NULL, &err) : NULL;
    if (err != CL_SUCCESS || clSetKernelArg(k, 0, sizeof buf, &buf) != CL_SUCCESS)
        return 3;
    g_q = q;
    g_k = k;
    run_k(na);
    return 0;
}
