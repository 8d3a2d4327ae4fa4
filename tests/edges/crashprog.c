/* crashprog.c — a program for the crash-survival tests: records N CPU zones of kernel "crash_zone" and N / 4 of
 * "crash_other", then ends as asked: segv (a write to an unmapped address), abort, _exit (status 3), exit (status
 * 0), or wait (publishes its pid in a file, then waits for a signal with the default action); forksegv first forks
 * a child that records 5 zones of "crash_zone" and exits, then segfaults; threadsegv first has three threads record
 * N zones of "crash_zone" each, then segfaults. Before ending it also records three dispatches of "crash_cfg" (OpenCL)
 * with launch configurations: two of global 64 local 16, one of global 128 with the local size left to the driver.
 * exec:MODE records as above, then execs itself (the same pid, a new image) in MODE, which records it all again.
 * forkexit forks a child that records 5 zones of "crash_zone" and exits normally (exit 0), then exits normally.
 * manythreads has eight threads, alive at once, record N zones of "crash_zone" each, then segfaults.
 * exit127 ends with _exit(127) (a status a shell gives a command it could not run); recover installs its own
 * SIGSEGV handler before ktiming's first use, recovers from a fault with siglongjmp, records N more zones of
 * "crash_zone" and aborts; abortlog installs a SIGABRT handler that returns before ktiming's first use, then
 * aborts; altstack sets up its own signal stack first and exits 5 when ktiming's first use replaced it, else
 * segfaults. */
#include <ktiming.h>

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void zones(const char *name, long n)
{
    static kt_kernel_id_t sites[2];
    kt_kernel_id_t *site = &sites[strcmp(name, "crash_zone") != 0];
    for (long i = 0; i < n; i++) {
        kt_zone_t z = kt_zone_begin(site, name);
        kt_zone_end(&z);
    }
}

static sigjmp_buf g_probe;
static void recover(int sig)
{
    (void)sig;
    siglongjmp(g_probe, 1);
}

static void abort_seen(int sig) { (void)sig; }

static void *thread_zones(void *arg)
{
    zones("crash_zone", *(const long *)arg);
    return NULL;
}

static pthread_barrier_t g_all_alive; /* manythreads: every thread holds its own shard */

static void *thread_zones_together(void *arg)
{
    pthread_barrier_wait(&g_all_alive);
    zones("crash_zone", *(const long *)arg);
    pthread_barrier_wait(&g_all_alive);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    long n = strtol(argv[2], NULL, 10);
    static char stack[1 << 16];
    if (!strcmp(argv[1], "recover")) { /* before ktiming's first use: its crash handler finds this one */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = recover;
        sigaction(SIGSEGV, &sa, NULL);
    } else if (!strcmp(argv[1], "abortlog")) { /* a handler that returns: abort() goes on to the default */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = abort_seen;
        sigaction(SIGABRT, &sa, NULL);
    } else if (!strcmp(argv[1], "altstack")) {
        stack_t ss = {.ss_sp = stack, .ss_size = sizeof stack};
        if (sigaltstack(&ss, NULL) != 0)
            return 4;
    }
    zones("crash_zone", n);
    zones("crash_other", n / 4);
    kt_kernel_id_t cfg = kt_kernel_intern("crash_cfg", KT_BACKEND_OPENCL, NULL);
    for (int i = 0; i < 3; i++) {
        kt_dispatch_t d;
        memset(&d, 0, sizeof d);
        d.kernel = cfg;
        d.duration_ns = 1000 + (uint64_t)i;
        d.launch.kind = KT_LAUNCH_ITEMS;
        d.launch.dims = 1;
        d.launch.size[0] = i < 2 ? 64 : 128;
        d.launch.local[0] = i < 2 ? 16 : 0;
        kt_record_dispatch(&d);
    }
    const char *mode = argv[1];
    if (!strncmp(mode, "exec:", 5)) { /* the same process, a new image */
        char *again[] = {argv[0], (char *)mode + 5, argv[2], NULL};
        execv(argv[0], again);
        return 5;
    }
    if (!strcmp(mode, "manythreads")) {
        enum { T = 8 };
        pthread_t t[T];
        pthread_barrier_init(&g_all_alive, NULL, T);
        for (int i = 0; i < T; i++)
            if (pthread_create(&t[i], NULL, thread_zones_together, &n) != 0)
                return 4;
        for (int i = 0; i < T; i++)
            pthread_join(t[i], NULL);
        mode = "segv";
    }
    if (!strcmp(mode, "forkexit")) { /* a child that records and exits normally: its own snapshot */
        pid_t pid = fork();
        if (pid == 0) {
            zones("crash_zone", 5);
            exit(0);
        }
        if (pid < 0 || waitpid(pid, NULL, 0) != pid)
            return 4;
        mode = "exit";
    }
    if (!strcmp(mode, "threadsegv")) { /* three more threads, three more shards, N zones each */
        pthread_t t[3];
        for (int i = 0; i < 3; i++)
            if (pthread_create(&t[i], NULL, thread_zones, &n) != 0)
                return 4;
        for (int i = 0; i < 3; i++)
            pthread_join(t[i], NULL);
        mode = "segv";
    }
    if (!strcmp(mode, "forksegv")) { /* a child that records and dies too must not touch the program's records */
        pid_t pid = fork();
        if (pid == 0) {
            zones("crash_zone", 5);
            _exit(0);
        }
        if (pid < 0 || waitpid(pid, NULL, 0) != pid)
            return 4;
        mode = "segv";
    }
    if (!strcmp(mode, "recover")) {
        if (!sigsetjmp(g_probe, 1)) {
            volatile int *volatile p = (volatile int *)(uintptr_t)16;
            *p = 1;
        }
        zones("crash_zone", n);
        mode = "abort";
    }
    if (!strcmp(mode, "altstack")) {
        stack_t now;
        if (sigaltstack(NULL, &now) != 0 || now.ss_sp != (void *)stack)
            return 5;
        mode = "segv";
    }
    if (!strcmp(mode, "segv")) {
        volatile int *volatile p = (volatile int *)(uintptr_t)16; /* unmapped; not NULL, which UBSan would catch */
        *p = 1;
    } else if (!strcmp(mode, "abort") || !strcmp(mode, "abortlog")) {
        abort();
    } else if (!strcmp(mode, "_exit")) {
        _exit(3);
    } else if (!strcmp(mode, "exit127")) {
        _exit(127);
    } else if (!strcmp(mode, "exit")) {
        exit(0);
    } else if (!strcmp(mode, "wait") && argc == 4) {
        char tmp[4200];
        snprintf(tmp, sizeof tmp, "%s.tmp", argv[3]);
        FILE *f = fopen(tmp, "w");
        if (!f)
            return 3;
        fprintf(f, "%ld\n", (long)getpid());
        if (fclose(f) != 0 || rename(tmp, argv[3]) != 0)
            return 3;
        for (;;)
            pause();
    }
    return 2;
}
