/* snapprog.c — writes its own snapshot into KTIMING_RUN_DIR twice, as a process whose snapshot is replaced after
 * `ktiming run` has read it early: <pid>.json holding one CPU entry named "first", announced complete through the
 * run directory's FIFO as the interception libraries do (tools/intercept/shim/kti_run.h), then, 100 ms later,
 * one named "second" (each written to a temporary name and renamed in, as ktiming's writer does). `ktiming run`
 * must report what the file holds when the program has ended.
 *
 *   snapprog --wait-moved: writes "first" and announces it, then waits (up to 20 s) for `ktiming run -o` to move
 *   it out of the run directory while this process is still running, and prints "moved" (or "not moved").
 *   snapprog --chdir: changes directory to / first (KTIMING_RUN_DIR must still name the run directory), then as
 *   without options.
 *   snapprog --child OUT: first forks a child, another timed process, that prints "child <pid>", makes a directory
 *   OUT.<pid> where `ktiming run -o OUT` would put its snapshot (unless OUT is "-"), writes its own snapshot
 *   holding "child", and exits; then as without options. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int put(const char *dir, const char *name)
{
    char tmp[4096], path[4096];
    snprintf(tmp, sizeof tmp, "%s/snapprog.tmp", dir);
    snprintf(path, sizeof path, "%s/%ld.json", dir, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    fprintf(f,
            "{\"schema\": \"ktiming.snapshot\", \"version\": 3, \"entries\": [{\"name\": \"%s\", \"backend\": "
            "\"cpu\", \"dispatch_count\": 1, \"total_ns\": 5, \"min_ns\": 5, \"max_ns\": 5}]}\n",
            name);
    if (fclose(f) != 0)
        return -1;
    return rename(tmp, path);
}

/* Waits for path to vanish: 1 when it did within 20 s. */
static int wait_gone(const char *path)
{
    struct timespec ts = {0, 1000000};
    for (int i = 0; i < 20000; i++) {
        if (access(path, F_OK) != 0)
            return 1;
        nanosleep(&ts, NULL);
    }
    return 0;
}

int main(int argc, char **argv)
{
    int wait_moved = argc > 1 && !strcmp(argv[1], "--wait-moved");
    const char *dir = getenv("KTIMING_RUN_DIR");
    if (!dir || !*dir) {
        fprintf(stderr, "snapprog: no KTIMING_RUN_DIR\n");
        return 2;
    }
    if (argc > 1 && !strcmp(argv[1], "--chdir") && chdir("/") != 0)
        return 1;
    if (argc > 2 && !strcmp(argv[1], "--child")) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            char block[4200];
            snprintf(block, sizeof block, "%s.%ld", argv[2], (long)getpid());
            printf("child %ld\n", (long)getpid());
            _exit((strcmp(argv[2], "-") && mkdir(block, 0700) != 0) || put(dir, "child") != 0 || fflush(stdout) ? 1 : 0);
        }
        int st = 0;
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            return 1;
    }
    if (put(dir, "first") != 0)
        return 1;
    char fifo[4096], msg[32];
    snprintf(fifo, sizeof fifo, "%s/notify.fifo", dir);
    int fd = open(fifo, O_WRONLY | O_NONBLOCK);
    int n = snprintf(msg, sizeof msg, "%ld\n", (long)getpid());
    if (fd < 0 || write(fd, msg, (size_t)n) != n) {
        fprintf(stderr, "snapprog: no FIFO from ktiming run in %s\n", dir);
        return 1;
    }
    close(fd);
    if (wait_moved) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%ld.json", dir, (long)getpid());
        printf("%s\n", wait_gone(path) ? "moved" : "not moved");
        return 0;
    }
    struct timespec ts = {0, 100000000};
    nanosleep(&ts, NULL);
    if (put(dir, "second") != 0)
        return 1;
    printf("done\n");
    return 0;
}
