/* cli.h — shared declarations of the ktiming command-line tool: subcommands and per-backend demo/device hooks. */
#ifndef KTCLI_H
#define KTCLI_H

#include <ktiming.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit statuses (docs/cli.md has the table). */
#define KTCLI_EXIT_OK 0         /* done */
#define KTCLI_EXIT_FAIL 1       /* the work failed (demo, report); compare: a regression with --fail-on-regression */
#define KTCLI_EXIT_USAGE 2      /* usage error: unknown option, bad value, missing argument */
#define KTCLI_EXIT_INPUT 3      /* compare: a snapshot could not be read, or the output not written */
#define KTCLI_EXIT_RUN_OWN 125  /* run: ktiming's own failure (usage, setup, an output not written) */

/* A progress line on standard error, drawn only when it is a terminal and only once the work has taken
 * KTCLI_PROGRESS_AFTER_NS; a background thread redraws it every 200 ms and ktcli_progress_end erases it, so
 * nothing remains in the terminal, and a redirected stderr never sees it. */
#define KTCLI_PROGRESS_AFTER_NS 1000000000ull
typedef struct ktcli_progress_t {
    const char *command;          /* "ktiming demo" */
    char stage[96];               /* what is being done now */
    const char *unit;             /* what `done` counts ("dispatches") */
    atomic_ullong done;           /* units done in this stage (0: only the elapsed time is shown) */
    atomic_int stop;              /* set by ktcli_progress_end */
    int enabled;                  /* a terminal: the thread runs */
    int shown;                    /* the line was drawn (and must be erased) */
    uint64_t start_ns;            /* CLOCK_MONOTONIC at begin */
    uint64_t after_ns;            /* drawn once the work has taken this long */
    pthread_t thread;             /* the redrawing thread */
    pthread_mutex_t lock;         /* guards stage */
} ktcli_progress_t;
void ktcli_progress_begin(ktcli_progress_t *p, const char *command, const char *stage, const char *unit);
/* The same with another delay than KTCLI_PROGRESS_AFTER_NS (the tests use 0). */
void ktcli_progress_begin_after(ktcli_progress_t *p, const char *command, const char *stage, const char *unit,
                                uint64_t after_ns);
void ktcli_progress_stage(ktcli_progress_t *p, const char *stage); /* new stage, count back to 0; p may be NULL */
static inline void ktcli_progress_add(ktcli_progress_t *p, unsigned long long n)
{
    if (p)
        atomic_fetch_add_explicit(&p->done, n, memory_order_relaxed);
}
void ktcli_progress_end(ktcli_progress_t *p);

/* Flushes standard output; 1 (after "CMD: cannot write standard output: why" on stderr) when that or an earlier
 * write to it failed (/dev/full, a closed descriptor), else 0. cmd is "ktiming devices". */
int ktcli_stdout_failed(const char *cmd);
/* "ktiming CMD: MESSAGE" and a pointer to --help on stderr; returns KTCLI_EXIT_USAGE. */
int ktcli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* getopt_long rows that every subcommand spells the same way: one long name, one short letter everywhere. */
#define KTCLI_OPT_OUTPUT {"output", required_argument, NULL, 'o'}
#define KTCLI_OPT_FORMAT {"format", required_argument, NULL, 'f'}
#define KTCLI_OPT_FILTER {"filter", required_argument, NULL, 'k'}
#define KTCLI_OPT_HELP {"help", no_argument, NULL, 'h'}
#define KTCLI_OPT_END {NULL, 0, NULL, 0}
/* Before a subcommand's getopt_long loop: scan from argv[1], and no getopt messages (ktcli_getopt_error's
 * one-line errors instead). */
void ktcli_getopt_begin(void);
/* The usage error for getopt_long's ':' (missing value) or '?' (unknown option); returns KTCLI_EXIT_USAGE. */
int ktcli_getopt_error(const char *cmd, int c, int argc, char **argv);
/* Report format and sort words ("text", "csv", "json", "chrome", "html", "markdown"/"md"; "total", "name",
 * "mean", "count"); 0, or -1 when unknown. */
int ktcli_parse_format(const char *s, kt_format_t *out);
int ktcli_parse_sort(const char *s, kt_sort_t *out);
/* Keeps the entries whose name matches the fnmatch(3) glob (and their spans, re-indexed); frees the others. */
void ktcli_snapshot_filter(kt_snapshot_t *snap, const char *glob);

/* Options of `ktiming demo`, shared by every backend's demo. */
typedef struct ktcli_demo_opts_t {
    int warmup;       /* untimed dispatches per kernel before measuring */
    int dispatches;   /* timed dispatches per kernel (>= 10) */
    size_t bytes;     /* working-set size of the demo kernels */
    int verbose;      /* print progress lines */
    ktcli_progress_t *progress; /* counts dispatches for the progress line; may be NULL */
} ktcli_demo_opts_t;

/* Subcommands: each takes argv after the subcommand name (argv[0] is the subcommand) and returns an exit code. */
int ktcli_cmd_demo(int argc, char **argv);
int ktcli_cmd_report(int argc, char **argv);
int ktcli_cmd_devices(int argc, char **argv);
int ktcli_cmd_compare(int argc, char **argv);
int ktcli_cmd_run(int argc, char **argv);
int ktcli_cmd_merge(int argc, char **argv);
int ktcli_cmd_history(int argc, char **argv);

/* Per-backend demo kernels: 0 on success, KT_EUNAVAILABLE when the backend has no device (after printing a
 * one-line note to stderr), another negative KT_E* on failure. */
int ktcli_demo_cpu(const ktcli_demo_opts_t *opts);
int ktcli_demo_opencl(const ktcli_demo_opts_t *opts);
int ktcli_demo_vulkan(const ktcli_demo_opts_t *opts);
int ktcli_demo_cuda(const ktcli_demo_opts_t *opts);
int ktcli_demo_webgpu(const ktcli_demo_opts_t *opts); /* Node + bindings/webgpu; see demo_webgpu.c */

/* Per-backend device listings for `ktiming devices`: prints devices with their clock facts; returns the
 * number of devices, or a negative KT_E* (KT_EUNAVAILABLE when the runtime is absent). */
int ktcli_devices_opencl(FILE *out);
int ktcli_devices_vulkan(FILE *out);
int ktcli_devices_cuda(FILE *out);

/* --max-input-mb for commands that read snapshots: default and largest accepted value (MiB). */
#define KTCLI_MAX_INPUT_MB_DEFAULT 1024u
#define KTCLI_MAX_INPUT_MB_MAX (1u << 20)

/* Parses a --max-input-mb value (a whole number of MiB in [1, KTCLI_MAX_INPUT_MB_MAX]) into bytes; 0 or -1. */
static inline int ktcli_parse_max_input_mb(const char *s, size_t *bytes)
{
    unsigned long long v = 0;
    if (!s || !*s)
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || (v = v * 10u + (unsigned)(*s - '0')) > KTCLI_MAX_INPUT_MB_MAX)
            return -1;
    }
    if (v == 0)
        return -1;
    *bytes = (size_t)v << 20;
    return 0;
}

#endif
