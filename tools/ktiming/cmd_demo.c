/* cmd_demo.c — `ktiming demo`: runs the built-in kernels on the CPU and on every GPU backend built in and
 * available, then prints the [timing] table (and saves the snapshot with -o). */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* One backend's demo as the CLI knows it. */
typedef struct demo_backend_t {
    const char *name;                              /* --backend word */
    int (*run)(const ktcli_demo_opts_t *opts);     /* runs the demo */
} demo_backend_t;

static const demo_backend_t kBackends[] = {
    {"cpu", ktcli_demo_cpu},
    {"opencl", ktcli_demo_opencl},
    {"vulkan", ktcli_demo_vulkan},
    {"cuda", ktcli_demo_cuda},
    {"webgpu", ktcli_demo_webgpu},
};
#define BACKEND_COUNT (sizeof kBackends / sizeof kBackends[0])

static void demo_usage(FILE *out)
{
    fprintf(out,
            "usage: ktiming demo [--dispatches N] [--warmup N] [--size MB] [--backend cpu|opencl|vulkan|cuda|webgpu|all]\n"
            "                    [-o snapshot.json] [--verbose]\n"
            "\n"
            "Runs built-in kernels (CPU: box blur, saxpy, reduction; GPU backends add their own) with untimed\n"
            "warm-up dispatches, then prints one [timing] line per kernel. A backend with no device prints a note\n"
            "and is skipped.\n"
            "\n"
            "  -n, --dispatches N   timed dispatches per kernel (default 20)\n"
            "  -w, --warmup N       untimed warm-up dispatches per kernel (default 3)\n"
            "  -s, --size MB        working set per kernel in MiB (default 8)\n"
            "  -b, --backend B      cpu, opencl, vulkan, cuda, webgpu or all (default all; may be repeated)\n"
            "  -o, --output FILE    also save the snapshot as JSON (schema ktiming.snapshot); -o - writes it on\n"
            "                       standard output and the table on standard error\n"
            "  -v, --verbose        setup notes on standard error (a terminal also shows a progress line\n"
            "                       once the run takes over a second)\n"
            "  -h, --help           this help\n"
            "\n"
            "exit status: 0 done, 1 a kernel or the snapshot write failed, 2 usage error\n");
}

/* Parses a decimal integer in [lo, hi]; 0 on success. */
static int parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* What the command line asks of the demo. */
typedef struct demo_args_t {
    ktcli_demo_opts_t opts;
    unsigned selected;    /* bit i: kBackends[i]; 0 = all */
    const char *out_path; /* -o: the snapshot as JSON */
} demo_args_t;

/* --backend NAME: its bit in a->selected ("all" clears them); 0, or 2 after the usage error. */
static int select_backend(demo_args_t *a, const char *name)
{
    if (!strcmp(name, "all")) {
        a->selected = 0;
        return 0;
    }
    for (size_t i = 0; i < BACKEND_COUNT; i++)
        if (!strcmp(name, kBackends[i].name)) {
            a->selected |= 1u << i;
            return 0;
        }
    return ktcli_usage_error("demo", "unknown backend '%s' (cpu, opencl, vulkan, cuda, webgpu, all)", name);
}

/* Parses the options into a: -1 to go on, else the exit status (help printed, or a usage error). */
static int demo_parse(int argc, char **argv, demo_args_t *a)
{
    static const struct option kLong[] = {
        {"dispatches", required_argument, NULL, 'n'}, {"warmup", required_argument, NULL, 'w'},
        {"size", required_argument, NULL, 's'}, {"backend", required_argument, NULL, 'b'}, KTCLI_OPT_OUTPUT,
        {"verbose", no_argument, NULL, 'v'}, KTCLI_OPT_HELP, KTCLI_OPT_END};
    long v;
    int c;
    ktcli_getopt_begin();
    while ((c = getopt_long(argc, argv, ":n:w:s:b:o:vh", kLong, NULL)) != -1) {
        switch (c) {
        case 'n':
            if (parse_int(optarg, 1, 1000000, &v))
                return ktcli_usage_error("demo", "--dispatches wants a whole number from 1 to 1000000, not '%s'",
                                         optarg);
            a->opts.dispatches = (int)v;
            break;
        case 'w':
            if (parse_int(optarg, 0, 1000000, &v))
                return ktcli_usage_error("demo", "--warmup wants a whole number from 0 to 1000000, not '%s'", optarg);
            a->opts.warmup = (int)v;
            break;
        case 's':
            if (parse_int(optarg, 1, 4096, &v))
                return ktcli_usage_error("demo", "--size wants MiB from 1 to 4096, not '%s'", optarg);
            a->opts.bytes = (size_t)v << 20;
            break;
        case 'b':
            if (select_backend(a, optarg))
                return KTCLI_EXIT_USAGE;
            break;
        case 'o': a->out_path = optarg; break;
        case 'v': a->opts.verbose = 1; break;
        case 'h': demo_usage(stdout); return 0;
        default: return ktcli_getopt_error("demo", c, argc, argv);
        }
    }
    if (optind < argc)
        return ktcli_usage_error("demo", "unexpected argument '%s'", argv[optind]);
    return -1;
}

/* Runs the selected backends' demos (an unavailable one is skipped); 1 when one failed. */
static int demo_run(demo_args_t *a)
{
    int status = 0;
    ktcli_progress_t progress; /* "ktiming demo: cpu, 1234 dispatches, 3 s" on a terminal after a second */
    ktcli_progress_begin(&progress, "ktiming demo", "starting", "dispatches");
    a->opts.progress = &progress;
    for (size_t i = 0; i < BACKEND_COUNT; i++) {
        if (a->selected && !(a->selected & (1u << i)))
            continue;
        if (a->opts.verbose)
            fprintf(stderr, "ktiming demo: %s ...\n", kBackends[i].name);
        ktcli_progress_stage(&progress, kBackends[i].name);
        int rc = kBackends[i].run(&a->opts);
        if (rc == KT_EUNAVAILABLE) {
            if (a->opts.verbose)
                fprintf(stderr, "ktiming demo: %s unavailable here, skipped\n", kBackends[i].name);
        } else if (rc) {
            fprintf(stderr, "ktiming demo: the %s demo failed: %s\n", kBackends[i].name, kt_strerror(rc));
            status = 1;
        }
    }
    kt_flush();
    ktcli_progress_end(&progress);
    a->opts.progress = NULL;
    return status;
}

/* The table on stdout and, with -o, the snapshot; 1 when either failed. */
static int demo_report(const demo_args_t *a)
{
    kt_snapshot_t *snap = kt_snapshot();
    if (!snap) {
        fprintf(stderr, "ktiming demo: no snapshot: %s\n", kt_strerror(KT_ENOMEM));
        return 1;
    }
    /* -o -: the snapshot is standard output (for a pipe), so the table goes to standard error */
    int json_stdout = a->out_path && !strcmp(a->out_path, "-");
    int status = 0, rc = kt_report_print(json_stdout ? stderr : stdout, snap, KT_FORMAT_TEXT, NULL);
    if (rc) {
        fprintf(stderr, "ktiming demo: cannot print the table: %s\n", kt_strerror(rc));
        status = 1;
    }
    if (a->out_path) {
        rc = json_stdout ? kt_report_print(stdout, snap, KT_FORMAT_JSON, NULL)
                         : kt_report_write(a->out_path, snap, KT_FORMAT_JSON, NULL);
        if (!rc && json_stdout && fflush(stdout) != 0) rc = KT_EIO;
        if (rc) {
            fprintf(stderr, "ktiming demo: cannot write %s: %s\n", json_stdout ? "standard output" : a->out_path,
                    rc == KT_EIO ? strerror(errno) : kt_strerror(rc));
            status = 1;
        } else if (a->opts.verbose) {
            fprintf(stderr, "ktiming demo: snapshot saved to %s\n", a->out_path);
        }
    }
    kt_snapshot_free(snap);
    return status;
}

int ktcli_cmd_demo(int argc, char **argv)
{
    demo_args_t a = {.opts = {.warmup = 3, .dispatches = 20, .bytes = (size_t)8 << 20, .verbose = 0}};
    int rc = demo_parse(argc, argv, &a);
    if (rc >= 0)
        return rc;
    int status = demo_run(&a);
    return demo_report(&a) | status;
}
