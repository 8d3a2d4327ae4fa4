/* run_util.h — run a built program (the CLI, an example) from a test and get its exit status. */
#ifndef KT_TEST_RUN_UTIL_H
#define KT_TEST_RUN_UTIL_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs argv[0] with argv; stdout goes to out_path (NULL = /dev/null), stderr to /dev/null unless
 * KT_TEST_VERBOSE is set. Returns the exit status, or -1 when it did not exit normally. */
static inline int run_program(char *const argv[], const char *out_path)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int fd = open(out_path ? out_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) dup2(fd, 1);
        if (!getenv("KT_TEST_VERBOSE")) {
            int nul = open("/dev/null", O_WRONLY);
            if (nul >= 0) dup2(nul, 2);
        }
        execv(argv[0], argv);
        _exit(127);
    }
    int st = 0;
    if (waitpid(pid, &st, 0) < 0) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Reads a whole file into a malloc'd NUL-terminated string (NULL on failure). */
static inline char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s) s[n] = '\0';
    fclose(f);
    return s;
}

#endif
