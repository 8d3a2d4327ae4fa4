/* run_overhead.c — wall time of an unmodified OpenCL program alone and under `ktiming run` (every kernel timed,
 * snapshot written, summary printed), in back-to-back pairs whose order alternates, so the load of a shared
 * machine hits both sides of a pair alike. The verdict is the median of the per-pair ratios (the ratio of the
 * two medians is printed too).
 * Last line: run_overhead: ratio=<median of timed/alone over the pairs>   (target <= 1.05) */
#include <ktiming.h>
#include <math.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define PAIRS 15
#define BUDGET_NS 32000000000ull /* stop adding pairs after 32 s (the whole bench stays under ~40 s) */
#define ITERATIONS "300"         /* clprog: 3 dispatches per iteration (900 timed), about 0.5 s alone here */
#define SIZE "2097152"           /* floats per buffer */

/* Runs argv with stdout and stderr on /dev/null; wall ns, or 0 when it failed (*status set); *cpu_ns the CPU
 * time (user + system) of it and the processes it waited for. */
static uint64_t run_ns(char *const argv[], int *status, uint64_t *cpu_ns)
{
    uint64_t t0 = kt_now_ns();
    pid_t pid = fork();
    if (pid < 0)
        return 0;
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 1);
        dup2(fd, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    int st = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    wait4(pid, &st, 0, &ru);
    uint64_t t = kt_now_ns() - t0;
    *cpu_ns = (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ull +
              (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ull;
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    return *status == 0 ? t : 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double median_ms(uint64_t *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_u64);
    return (n % 2 ? (double)v[n / 2] : ((double)v[n / 2 - 1] + (double)v[n / 2]) / 2) / 1e6;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(void)
{
    char *alone[] = {CLPROG, "--iterations", ITERATIONS, "--size", SIZE, NULL};
    char *timed[] = {KT_CLI, "run", "-o", NULL, "--", CLPROG, "--iterations", ITERATIONS, "--size", SIZE, NULL};
    char out[] = "/tmp/kt_run_overhead_XXXXXX.json";
    int fd = mkstemps(out, 5);
    if (fd < 0)
        return 1;
    close(fd);
    timed[3] = out;
    int st = 0;
    uint64_t cpu_a = 0, cpu_t = 0;
    /* warm-up of both (PoCL's kernel cache, page cache) and the device check */
    if (!run_ns(alone, &st, &cpu_a)) {
        printf("run_overhead: the OpenCL program did not run (status %d%s)\n", st,
               st == 77 ? ": no OpenCL device" : "");
        printf("run_overhead: ratio=nan\n");
        unlink(out);
        return 0;
    }
    if (!run_ns(timed, &st, &cpu_t)) {
        printf("run_overhead: ktiming run failed (status %d)\n", st);
        printf("run_overhead: ratio=nan\n");
        unlink(out);
        return 1;
    }
    uint64_t a[PAIRS], t[PAIRS], start = kt_now_ns();
    double r[PAIRS], rc[PAIRS];
    int n = 0;
    for (int i = 0; i < PAIRS && (n < 5 || kt_now_ns() - start < BUDGET_NS); i++) {
        /* alternate which goes first, so a drifting load favours neither */
        uint64_t x, y;
        if (i % 2) {
            y = run_ns(timed, &st, &cpu_t);
            x = run_ns(alone, &st, &cpu_a);
        } else {
            x = run_ns(alone, &st, &cpu_a);
            y = run_ns(timed, &st, &cpu_t);
        }
        if (!x || !y) {
            printf("run_overhead: a run failed (status %d)\n", st);
            continue;
        }
        a[n] = x;
        t[n] = y;
        r[n] = (double)y / (double)x;
        rc[n] = cpu_a ? (double)cpu_t / (double)cpu_a : 0;
        n++;
    }
    unlink(out);
    if (n == 0) {
        printf("run_overhead: ratio=nan\n");
        return 1;
    }
    qsort(r, (size_t)n, sizeof *r, cmp_dbl);
    qsort(rc, (size_t)n, sizeof *rc, cmp_dbl);
    double ratio = n % 2 ? r[n / 2] : (r[n / 2 - 1] + r[n / 2]) / 2;
    double cpu_ratio = n % 2 ? rc[n / 2] : (rc[n / 2 - 1] + rc[n / 2]) / 2;
    double ma = median_ms(a, n), mt = median_ms(t, n);
    printf("run_overhead: %d alternating pairs of clprog (%s iterations of 3 kernels on %s floats), the timed one\n"
           "run_overhead: writing its snapshot with -o and printing the summary (to /dev/null)\n",
           n, ITERATIONS, SIZE);
    printf("run_overhead: alone median %.1f ms [%.1f .. %.1f], under ktiming run median %.1f ms [%.1f .. %.1f]\n",
           ma, (double)a[0] / 1e6, (double)a[n - 1] / 1e6, mt, (double)t[0] / 1e6, (double)t[n - 1] / 1e6);
    printf("run_overhead: ratio of medians %.3f; per-pair ratios %.3f .. %.3f\n", mt / ma, r[0], r[n - 1]);
    printf("run_overhead: CPU time (user+sys, less sensitive to other load) median per-pair ratio %.3f\n",
           cpu_ratio);
    printf("run_overhead: ratio=%.3f\n", ratio);
    return 0;
}
