/* sigprog.c — a program for the `ktiming run` signal test: publishes its pid, waits for a signal, notes which
 * one arrived in a file and exits with 10 + its number. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *g_mark;

static void on_signal(int sig)
{
    FILE *f = fopen(g_mark, "w"); /* not async-signal-safe in general; the program does nothing else */
    if (f) {
        fprintf(f, "%d\n", sig);
        fclose(f);
    }
    _exit(10 + sig);
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    g_mark = argv[2];
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
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
    for (;;)
        pause();
}
