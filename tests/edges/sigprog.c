/* sigprog.c — a program for the `ktiming run` signal test: publishes its pid, waits for a signal, notes which
 * one arrived in a file and exits with 10 + its number.
 *
 *   sigprog PIDFILE MARK count: counts the SIGTERMs it gets instead. After the first it waits (bounded) until its
 *   parent (`ktiming run`) has handled its own copy of that signal, if any -- none pending for it, and asleep
 *   again -- so that a copy the parent passed on has arrived too; then writes the count to MARK and exits 0. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *g_mark;
static volatile sig_atomic_t g_terms;

static void on_signal(int sig)
{
    FILE *f = fopen(g_mark, "w"); /* not async-signal-safe in general; the program does nothing else */
    if (f) {
        fprintf(f, "%d\n", sig);
        fclose(f);
    }
    _exit(10 + sig);
}

static void on_term(int sig)
{
    (void)sig;
    g_terms++;
}

/* Has the parent handled SIGTERM: none pending (thread or process) and asleep? */
static int parent_settled(void)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", (long)getppid());
    FILE *f = fopen(path, "r");
    if (!f)
        return 1; /* gone */
    int asleep = 0, pending = 0;
    unsigned long long bit = 1ull << (SIGTERM - 1);
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "State:", 6))
            asleep = strchr(line, 'S') != NULL;
        else if (!strncmp(line, "SigPnd:", 7) || !strncmp(line, "ShdPnd:", 7))
            pending |= (strtoull(line + 7, NULL, 16) & bit) != 0;
    }
    fclose(f);
    return asleep && !pending;
}

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 4)
        return 2;
    g_mark = argv[2];
    int count = argc == 4 && !strcmp(argv[3], "count");
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = count && sigs[i] == SIGTERM ? on_term : on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return 3;
    fprintf(f, "%ld\n", (long)getpid());
    if (fclose(f) != 0 || rename(tmp, argv[1]) != 0)
        return 3;
    if (!count)
        for (;;)
            pause();
    while (!g_terms)
        pause();
    struct timespec nap = {0, 1000000};
    for (int i = 0; i < 20000 && !parent_settled(); i++) /* bounded: 20 s */
        nanosleep(&nap, NULL);
    nanosleep(&nap, NULL); /* a signal sent to us is handled on the way back from a system call */
    snprintf(tmp, sizeof tmp, "%s.tmp", g_mark);
    if (!(f = fopen(tmp, "w")))
        return 3;
    fprintf(f, "%d\n", (int)g_terms);
    return fclose(f) != 0 || rename(tmp, g_mark) != 0 ? 3 : 0;
}
