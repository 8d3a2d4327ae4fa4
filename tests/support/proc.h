/* proc.h — running a program from a test: the one place tests fork and exec. Standard streams go to files (or
 * stay inherited), stdout can be captured in memory, and the result is one status: the exit code, 128+signal
 * when a signal ended it, -1 when it could not be started. Header-only; include as "support/proc.h". */
#ifndef KT_TESTS_SUPPORT_PROC_H
#define KT_TESTS_SUPPORT_PROC_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* stderr target: /dev/null unless KT_TEST_VERBOSE is set (then inherited, so a failing run can be read). */
#define KTT_QUIET "\001quiet"
#define KTT_DEVNULL "/dev/null"

/* Where the child's streams go; NULL members are inherited. Files written are created 0644 and truncated. */
typedef struct ktt_spawn_t {
    const char *in;         /* stdin read from this file */
    const char *out;        /* stdout written to this file */
    const char *err;        /* stderr written to this file, or KTT_QUIET */
    const char *const *env; /* NAME=value settings added for the child (NULL-terminated) */
} ktt_spawn_t;

/* In the child: one stream onto a file; 0 or -1. */
static inline int ktt__redirect(int fd, const char *path, int flags)
{
    if (!path)
        return 0;
    if (path[0] == '\001') { /* KTT_QUIET */
        if (getenv("KT_TEST_VERBOSE"))
            return 0;
        path = KTT_DEVNULL;
    }
    int f = open(path, flags, 0644);
    if (f < 0 || dup2(f, fd) < 0)
        return -1;
    if (f != fd)
        close(f);
    return 0;
}

/* In the child, after fork: streams, environment, exec. Never returns (126: a redirect failed; 127: exec). */
static inline void ktt__exec(char *const argv[], const ktt_spawn_t *how, int out_pipe)
{
    if (how && (ktt__redirect(0, how->in, O_RDONLY) || ktt__redirect(1, how->out, O_WRONLY | O_CREAT | O_TRUNC) ||
                ktt__redirect(2, how->err, O_WRONLY | O_CREAT | O_TRUNC)))
        _exit(126);
    if (out_pipe >= 0 && (dup2(out_pipe, 1) < 0 || close(out_pipe) != 0))
        _exit(126);
    for (size_t i = 0; how && how->env && how->env[i]; i++)
        if (putenv((char *)how->env[i]) != 0)
            _exit(126);
    execv(argv[0], argv);
    _exit(127);
}

/* Starts argv[0] with argv; the child's pid, or -1. */
static inline pid_t ktt_spawn(char *const argv[], const ktt_spawn_t *how)
{
    fflush(NULL); /* nothing buffered is written twice */
    pid_t pid = fork();
    if (pid == 0)
        ktt__exec(argv, how, -1);
    return pid;
}

/* Waits for pid: its exit code, 128+signal, or -1. */
static inline int ktt_wait(pid_t pid)
{
    int st = 0;
    if (pid < 0)
        return -1;
    pid_t got;
    while ((got = waitpid(pid, &st, 0)) < 0 && errno == EINTR) {
    }
    if (got != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
}

/* Runs argv to its end: its status as ktt_wait. */
static inline int ktt_run(char *const argv[], const ktt_spawn_t *how) { return ktt_wait(ktt_spawn(argv, how)); }

/* Runs argv to its end with stdout written to out_path (NULL: /dev/null) and stderr quiet: its status. */
static inline int ktt_run_to(char *const argv[], const char *out_path)
{
    return ktt_run(argv, &(ktt_spawn_t){.out = out_path ? out_path : KTT_DEVNULL, .err = KTT_QUIET});
}

/* Runs argv to its end with stdout captured (how->out is ignored): a malloc'd NUL-terminated copy of it, or NULL
 * when it could not be started; *status as ktt_wait. */
static inline char *ktt_run_capture(char *const argv[], const ktt_spawn_t *how, int *status)
{
    *status = -1;
    ktt_spawn_t h = how ? *how : (ktt_spawn_t){0};
    h.out = NULL;
    int fds[2];
    if (pipe(fds) != 0)
        return NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        ktt__exec(argv, &h, fds[1]);
    }
    close(fds[1]);
    size_t cap = 4096, len = 0;
    char *buf = pid < 0 ? NULL : malloc(cap);
    for (ssize_t n; buf && (n = read(fds[0], buf + len, cap - len - 1)) != 0;) {
        if (n < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        len += (size_t)n;
        if (cap - len < 1024) {
            char *bigger = realloc(buf, cap *= 2);
            if (!bigger)
                free(buf);
            buf = bigger;
        }
    }
    close(fds[0]);
    *status = ktt_wait(pid);
    if (buf)
        buf[len] = '\0';
    return buf;
}

#endif
