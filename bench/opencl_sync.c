/* opencl_sync.c — what recording costs the program's thread at a synchronisation point, and that it does not grow
 * with work that is not the point's: pending commands of another queue, or how many commands were ever in flight.
 *
 * One measurement is one process (`opencl_sync --child`), PoCL (or whatever OpenCL device is first), ktiming's
 * library API: a sync point is what `ktiming run`'s clFinish hook does, kt_cl_collect(queue, when the previous one
 * began) then clFinish. Each round enqueues ROUND_KERNELS tiny kernels on queue A and syncs; the figure is the
 * calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID) for that sync call, the least of a phase's block medians
 * (BLOCKS blocks of BLOCK_ROUNDS rounds), in three phases of the same process:
 *   alone        nothing else in flight;
 *   deep_other   DEEP commands on queue B held back by a user event (all pending through the phase);
 *   after_burst  after BURST commands went through queue B and were recorded (slots handed out: BURST).
 * alone and deep_other alternate block by block; after_burst comes last (nothing after a burst is "before" it),
 * its blocks BURST_GAP_US apart.
 * A process's ratios are deep_other/alone and after_burst/alone: the same program under ktiming, with and without
 * the other work (issue 38 item 4: 3x-15x with another queue's pending work, ~10x after a burst, before the FIFO
 * per queue). "alone" is the scenario, not the program without ktiming: against a program that makes no events at
 * all (4-6 us per sync here, 14 us with ktiming) the ratio would be the cost of recording ~100 commands per sync,
 * which is bench/opencl_async's subject; item 4's claim is that a sync's cost does not grow with other work, so
 * each ratio keeps the program and ktiming fixed and varies only that work. The control's figures are printed
 * beside, so what ktiming adds per sync is shown too.
 *
 * Why one CPU, and several processes: on this shared 2-core machine the program's thread falls, for spells of
 * ~0.1-1 s, into a mode where everything it does costs 4-8x the CPU (PoCL's enqueue and clReleaseEvent, glibc's
 * malloc/free, futex wakes): the program's thread and PoCL's worker threads running at once on both cores and
 * contending. It comes before the burst too, but after it far more often (in 25-60% of processes, depending on the
 * machine's load), and as often in the control without ktiming, which holds no event through the burst; it never
 * came with the process on one CPU (docs/opencl.md). A single process's ratio was hostage to it (up to 10x), and
 * medians over processes on both CPUs were too when the rate passed one half (2.91, the control 2.98, in the same
 * run). So each process holds itself to the CPU it starts on, before the driver makes its threads (they inherit
 * it; the driver keeps its two worker threads): the figure is the same measurement, and work ktiming adds to it shows
 * as before; only the contention between the driver's threads across cores is gone. --two-cpus runs them
 * unpinned. The parent (no arguments) runs CHILDREN processes with ktiming and CHILDREN without (--child --plain:
 * the same program with no queue attached, which keeps each round's events and reads and releases them at the
 * next sync, as ktiming's recording does: the control), alternating, and takes the median of each side's
 * per-process ratios. It also prints ktiming's figures against the control's, phase by phase (what recording
 * itself costs per sync, with ~100 commands recorded at each).
 * The last line is the verdict: `opencl_sync: deep_other_vs_alone=<x> after_burst_vs_alone=<y>` (both <= 1.5
 * wanted), the medians over the ktiming processes. */
#include <ktiming.h>
#include <ktiming/cl.h>

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHILDREN 9        /* processes with ktiming, and as many without: medians of per-process ratios */
#define BURST_GAP_US 100000 /* between the blocks after the burst: a spell of the machine passes */
#define BLOCKS 4          /* alone and deep_other alternate in blocks, so load changes hit both alike */
#define BLOCK_ROUNDS 31   /* rounds per block */
#define ROUNDS (BLOCKS * BLOCK_ROUNDS)
#define ROUND_KERNELS 100
#define DEEP 5000
#define BURST 100000

static const kt_cl_api_t *cl;
static cl_kernel g_tiny;
static int g_plain; /* --plain: no ktiming, the program keeps and releases its events itself */
static int g_two_cpus; /* --two-cpus: the processes are not held to one CPU */

static uint64_t thread_cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The samples of one phase: CPU ns of each sync call, and of its kt_cl_collect part. */
typedef struct phase_t {
    const char *name;
    uint64_t cpu[ROUNDS], col[ROUNDS];
    int n;
    uint64_t block_med[BLOCKS]; /* the median of each block */
    int blocks;
} phase_t;

/* One tiny kernel on q: through ktiming, or (--plain) the driver alone, its event kept in *ev when ev is given. */
static cl_int enqueue(kt_cl_ctx_t *kc, cl_command_queue q, cl_uint nwait, const cl_event *wait, cl_event *ev)
{
    size_t g = 64;
    if (g_plain)
        return cl->clEnqueueNDRangeKernel(q, g_tiny, 1, NULL, &g, NULL, nwait, wait, ev);
    return kt_cl_enqueue_ndrange(kc, g_tiny, 1, NULL, &g, NULL, nwait, wait, NULL);
}

/* --plain: what recording does at a sync, without ktiming: the previous round's events read and released. */
static void plain_collect(cl_event *ev, int n)
{
    for (int k = 0; k < n; k++) {
        cl_ulong t = 0;
        cl->clGetEventProfilingInfo(ev[k], CL_PROFILING_COMMAND_END, sizeof t, &t, NULL);
        cl->clGetEventProfilingInfo(ev[k], CL_PROFILING_COMMAND_START, sizeof t, &t, NULL);
        cl->clReleaseEvent(ev[k]);
    }
}

/* n rounds on queue A: ROUND_KERNELS tiny kernels, then a sync, its CPU time added to the phase. */
static int rounds(kt_cl_ctx_t *kc, cl_command_queue q, phase_t *ph, int n)
{
    static uint64_t synced_ns; /* when the previous sync began (the hook's t_synced_ns) */
    static cl_event kept[2][ROUND_KERNELS]; /* --plain: this round's events and the previous round's */
    static int cur, kept_n[2];
    int first = ph->n;
    for (int r = 0; r < n && ph->n < ROUNDS; r++) {
        for (int k = 0; k < ROUND_KERNELS; k++)
            if (enqueue(kc, q, 0, NULL, g_plain ? &kept[cur][k] : NULL) != CL_SUCCESS)
                return -1;
        kept_n[cur] = g_plain ? ROUND_KERNELS : 0;
        uint64_t c0 = thread_cpu_ns();
        if (synced_ns && !g_plain)
            kt_cl_collect(kc, synced_ns);
        else if (synced_ns)
            plain_collect(kept[!cur], kept_n[!cur]);
        kept_n[!cur] = 0;
        cur = !cur;
        uint64_t c1 = thread_cpu_ns();
        uint64_t began = kt_now_ns();
        cl->clFinish(q);
        synced_ns = began;
        ph->cpu[ph->n] = thread_cpu_ns() - c0;
        ph->col[ph->n++] = c1 - c0;
    }
    if (ph->blocks < BLOCKS && ph->n > first) {
        uint64_t b[ROUNDS];
        memcpy(b, ph->cpu + first, (size_t)(ph->n - first) * sizeof b[0]);
        qsort(b, (size_t)(ph->n - first), sizeof b[0], cmp_u64);
        ph->block_med[ph->blocks++] = b[(ph->n - first) / 2];
    }
    return 0;
}

/* Prints the phase; its figure: the least of its blocks' medians (the machine's load comes and goes over seconds
 * here: the quietest block of each phase is what compares). */
static double report(phase_t *ph)
{
    qsort(ph->cpu, (size_t)ph->n, sizeof ph->cpu[0], cmp_u64);
    qsort(ph->col, (size_t)ph->n, sizeof ph->col[0], cmp_u64);
    qsort(ph->block_med, (size_t)ph->blocks, sizeof ph->block_med[0], cmp_u64);
    double fig = (double)ph->block_med[0];
    printf("opencl_sync: %-12s %8.2f us of the program's thread CPU per sync (least of %d block medians; all %d: "
           "median %.2f, p10 %.2f, p90 %.2f; recording (kt_cl_collect) median %.2f)\n",
           ph->name, fig / 1e3, ph->blocks, ph->n, (double)ph->cpu[ph->n / 2] / 1e3, (double)ph->cpu[ph->n / 10] / 1e3,
           (double)ph->cpu[ph->n * 9 / 10] / 1e3, (double)ph->col[ph->n / 2] / 1e3);
    return fig;
}

static phase_t g_warm = {.name = "warm-up"}, g_alone = {.name = "alone"}, g_deep = {.name = "deep_other"},
               g_burst = {.name = "after_burst"};

/* One process's measurement (--child): its phases printed, then `opencl_sync-child: alone=<ns> deep_other=<ns>
 * after_burst=<ns>` for the parent. 77 when there is no OpenCL device. */
static int one_process(void)
{
    cl_platform_id p;
    cl_device_id d;
    cl_uint n = 0;
    if (!g_two_cpus) { /* before the driver makes its threads, which inherit it */
        cpu_set_t one;
        CPU_ZERO(&one);
        int cpu = sched_getcpu();
        CPU_SET(cpu < 0 ? 0 : cpu, &one);
        if (sched_setaffinity(0, sizeof one, &one) != 0)
            printf("opencl_sync: could not hold the process to one CPU\n");
    }
    if (kt_cl_load(&cl) != 0 || cl->clGetPlatformIDs(1, &p, &n) != CL_SUCCESS || !n ||
        cl->clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &d, &n) != CL_SUCCESS || !n) {
        printf("opencl_sync: no OpenCL device\n");
        return 77;
    }
    cl_int err = 0;
    cl_context ctx = cl->clCreateContext(NULL, 1, &d, NULL, NULL, &err);
    const char *src = "__kernel void tiny(__global float *a) { a[get_global_id(0)] += 1.0f; }\n";
    cl_program prog = cl->clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    if (cl->clBuildProgram(prog, 1, &d, "", NULL, NULL) != CL_SUCCESS) {
        printf("opencl_sync: the kernel did not build\n");
        return 1;
    }
    g_tiny = cl->clCreateKernel(prog, "tiny", &err);
    cl_mem buf = cl->clCreateBuffer(ctx, CL_MEM_READ_WRITE, 64 * sizeof(float), NULL, &err);
    cl->clSetKernelArg(g_tiny, 0, sizeof buf, &buf);
    cl_command_queue qa = cl->clCreateCommandQueue(ctx, d, CL_QUEUE_PROFILING_ENABLE, &err);
    cl_command_queue qb = cl->clCreateCommandQueue(ctx, d, CL_QUEUE_PROFILING_ENABLE, &err);
    kt_cl_ctx_t *ka = NULL, *kb = NULL;
    if (!g_plain && (kt_cl_attach(qa, NULL, &ka) != 0 || kt_cl_attach(qb, NULL, &kb) != 0)) {
        printf("opencl_sync: cannot attach\n");
        return 1;
    }
    printf("opencl_sync%s: %d rounds of %d tiny kernels on queue A, each ended by %sclFinish; deep_other: %d "
           "commands on queue B held by a user event; after_burst: after %d commands went through queue B\n",
           g_plain ? "(plain)" : "", ROUNDS, ROUND_KERNELS,
           g_plain ? "reading and releasing the previous round's events + " : "kt_cl_collect + ", DEEP, BURST);
    rounds(ka, qa, &g_warm, BLOCK_ROUNDS);
    g_warm.blocks = 0;
    for (int blk = 0; blk < BLOCKS; blk++) {
        rounds(ka, qa, &g_alone, BLOCK_ROUNDS);
        cl_event gate = cl->clCreateUserEvent(ctx, &err);
        for (int i = 0; i < DEEP; i++)
            enqueue(kb, qb, i == 0, i == 0 ? &gate : NULL, NULL);
        cl->clFlush(qb);
        rounds(ka, qa, &g_deep, BLOCK_ROUNDS);
        cl->clSetUserEventStatus(gate, CL_COMPLETE);
        cl->clFinish(qb);
        cl->clReleaseEvent(gate);
    }
    for (int i = 0; i < BURST; i++)
        enqueue(kb, qb, 0, NULL, NULL);
    cl->clFinish(qb);
    if (!g_plain)
        kt_cl_flush(NULL, 0);
    for (int blk = 0; blk < BLOCKS; blk++) {
        if (blk)
            usleep(BURST_GAP_US);
        rounds(ka, qa, &g_burst, BLOCK_ROUNDS);
    }
    report(&g_warm);
    double alone = report(&g_alone), deep = report(&g_deep), burst = report(&g_burst);

    if (!g_plain) {
        kt_cl_detach(ka);
        kt_cl_detach(kb);
    }
    cl->clReleaseCommandQueue(qa);
    cl->clReleaseCommandQueue(qb);
    cl->clReleaseMemObject(buf);
    cl->clReleaseKernel(g_tiny);
    cl->clReleaseProgram(prog);
    cl->clReleaseContext(ctx);
    printf("opencl_sync-child: alone=%.0f deep_other=%.0f after_burst=%.0f\n", alone, deep, burst);
    return alone > 0 && deep > 0 && burst > 0 ? 0 : 1;
}

/* A child's three figures (ns of CPU per sync). */
typedef struct child_t {
    double alone, deep, burst;
} child_t;

/* Runs `self --child [--plain]`, its output read for its figures line; 0, 77 (no device), or -1. */
static int run_child(int plain, child_t *out)
{
    int fd[2];
    if (pipe(fd) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        char *argv[5] = {"opencl_sync", "--child"};
        int n = 2;
        if (plain)
            argv[n++] = "--plain";
        if (g_two_cpus)
            argv[n++] = "--two-cpus";
        argv[n] = NULL;
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    close(fd[1]);
    FILE *f = fdopen(fd[0], "r");
    char line[1024];
    int got = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "opencl_sync-child: alone=%lf deep_other=%lf after_burst=%lf", &out->alone, &out->deep,
                   &out->burst) == 3)
            got = 1;
    if (f)
        fclose(f);
    else
        close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
        return 77;
    return got && WIFEXITED(st) && WEXITSTATUS(st) == 0 && out->alone > 0 ? 0 : -1;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_dbl);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The medians over a side's processes: of each ratio, and of each phase's figure. */
static void side_medians(const child_t *c, int n, double *deep_r, double *burst_r, child_t *fig)
{
    double a[CHILDREN], b[CHILDREN], x[CHILDREN], y[CHILDREN], z[CHILDREN];
    for (int i = 0; i < n; i++) {
        a[i] = c[i].deep / c[i].alone;
        b[i] = c[i].burst / c[i].alone;
        x[i] = c[i].alone;
        y[i] = c[i].deep;
        z[i] = c[i].burst;
    }
    *deep_r = median(a, n);
    *burst_r = median(b, n);
    fig->alone = median(x, n);
    fig->deep = median(y, n);
    fig->burst = median(z, n);
}

int main(int argc, char **argv)
{
    int child = argc > 1 && !strcmp(argv[1], "--child");
    for (int i = 1 + child; i < argc; i++) {
        if (child && !strcmp(argv[i], "--plain"))
            g_plain = 1;
        else if (!strcmp(argv[i], "--two-cpus"))
            g_two_cpus = 1;
        else {
            printf("usage: opencl_sync [--two-cpus] | opencl_sync --child [--plain] [--two-cpus]\n");
            return 2;
        }
    }
    if (child)
        return one_process();
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("opencl_sync: %d processes with ktiming and %d without (the control: events kept, read and released at "
           "the next sync), alternating, %s; each: %d rounds per phase of %d tiny kernels, ended by a sync; phases "
           "alone, deep_other (%d commands held on another queue), after_burst (after %d commands); per process "
           "the least of %d block medians of the sync's thread CPU time\n",
           CHILDREN, CHILDREN, g_two_cpus ? "each on every CPU" : "each held to one CPU", ROUNDS, ROUND_KERNELS, DEEP,
           BURST, BLOCKS);
    child_t kt[CHILDREN], pl[CHILDREN];
    int nk = 0, np = 0;
    for (int i = 0; i < CHILDREN; i++)
        for (int j = 0; j < 2; j++) {
            int plain = (i + j) % 2; /* ktiming first in even pairs, the control first in odd ones */
            child_t c;
            int rc = run_child(plain, &c);
            if (rc == 77) {
                printf("opencl_sync: no OpenCL device\nopencl_sync: deep_other_vs_alone=nan "
                       "after_burst_vs_alone=nan\n");
                return 0;
            }
            if (rc != 0) {
                printf("opencl_sync: a %s process failed\n", plain ? "control" : "ktiming");
                continue;
            }
            printf("opencl_sync: process %2d %-8s alone %7.2f us, deep_other %7.2f us, after_burst %7.2f us: "
                   "ratios %.3f %.3f\n",
                   i, plain ? "control" : "ktiming", c.alone / 1e3, c.deep / 1e3, c.burst / 1e3, c.deep / c.alone,
                   c.burst / c.alone);
            if (plain)
                pl[np++] = c;
            else
                kt[nk++] = c;
        }
    if (!nk || !np) {
        printf("opencl_sync: deep_other_vs_alone=nan after_burst_vs_alone=nan\n");
        return 1;
    }
    double kd, kb, pd, pb;
    child_t kf, pf;
    side_medians(kt, nk, &kd, &kb, &kf);
    side_medians(pl, np, &pd, &pb, &pf);
    printf("opencl_sync(plain): deep_other_vs_alone=%.3f after_burst_vs_alone=%.3f (medians of %d processes)\n", pd,
           pb, np);
    printf("opencl_sync: ktiming/control per sync (medians of the processes' figures): alone %.2f/%.2f us, "
           "deep_other %.2f/%.2f us, after_burst %.2f/%.2f us\n",
           kf.alone / 1e3, pf.alone / 1e3, kf.deep / 1e3, pf.deep / 1e3, kf.burst / 1e3, pf.burst / 1e3);
    printf("opencl_sync: deep_other_vs_alone=%.3f after_burst_vs_alone=%.3f\n", kd, kb);
    return 0;
}
