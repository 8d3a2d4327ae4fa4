/* run_cmd.h — `ktiming run -o DIR/out.json -f none [--opencl MODE] -- PROGRAM...` for the crash-survival tests
 * (test_run_crash.c, test_run_exit_order.c), run's stderr kept in DIR/err. */
#ifndef KT_TESTS_EDGES_RUN_CMD_H
#define KT_TESTS_EDGES_RUN_CMD_H

#include "support/files.h"
#include "support/proc.h"

#include <stdio.h>

/* Its status; out (cap bytes) receives DIR/out.json, where a stale file is put first (a run that writes nothing
 * leaves it). Sanitizer runtimes (the program's, or preloaded with the interception library in those builds)
 * leave the program's SIGSEGV and SIGABRT to it. */
static inline int ktt_run_cmd(const char *dir, const char *opencl, const char *const *prog, char *out, size_t cap)
{
    snprintf(out, cap, "%s/out.json", dir);
    FILE *f = fopen(out, "w");
    if (f) {
        fputs("{\"stale\": true}\n", f);
        fclose(f);
    }
    char err[4200];
    snprintf(err, sizeof err, "%s/err", dir);
    char *argv[32] = {(char *)KT_CLI, (char *)"run", (char *)"-o", out, (char *)"-f", (char *)"none"};
    size_t a = 6;
    if (opencl) {
        argv[a++] = (char *)"--opencl";
        argv[a++] = (char *)opencl;
    }
    argv[a++] = (char *)"--";
    for (size_t i = 0; prog[i] && a < 31; i++)
        argv[a++] = (char *)prog[i];
    argv[a] = NULL;
    const char *env[] = {"ASAN_OPTIONS=handle_segv=0:handle_abort=0:detect_leaks=0", NULL};
    return ktt_run(argv, &(ktt_spawn_t){.out = KTT_DEVNULL, .err = err, .env = env});
}

/* run's stderr of the last ktt_run_cmd in dir (NULL when there is none; freed by the caller). */
static inline char *ktt_run_cmd_err(const char *dir)
{
    char err[4200];
    snprintf(err, sizeof err, "%s/err", dir);
    return ktt_read_file(err, NULL);
}

#endif
