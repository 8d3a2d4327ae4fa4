/* cmd_run.c — `ktiming run [options] -- PROGRAM ARGS`: time every kernel of an unmodified program.
 *
 * The program runs with ktiming's interception libraries enabled through its environment: for OpenCL the
 * intercept library as a loader layer (OPENCL_LAYERS) and as an LD_PRELOAD fallback for loaders without
 * layers, libktiming pointed at the direct library (KTIMING_OPENCL_LIBRARY); for Vulkan the timing layer
 * (VK_ADD_LAYER_PATH + VK_INSTANCE_LAYERS) when it is built; for CUDA the CUPTI injection library
 * (CUDA_INJECTION64_PATH) when it is built and the user has not set one. Each timed process writes its snapshot to
 * KTIMING_RUN_DIR/<pid>.json at exit; afterwards this command writes the requested files from the program's
 * snapshot and prints the summary on stderr. The program's stdin, stdout, stderr and exit status are its own.
 */
#include "cli.h"
#include "core/env.h"

#include <ktiming/analysis.h>
#include "shared/output.h"
#include "shared/run_arena.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef KTCLI_INTERCEPT_BUILD_DIR
#define KTCLI_INTERCEPT_BUILD_DIR ""
#endif
#ifndef KTCLI_INTERCEPT_INSTALL_RELDIR
#define KTCLI_INTERCEPT_INSTALL_RELDIR "../lib/ktiming"
#endif
#ifndef KTCLI_ASAN_RUNTIME
#define KTCLI_ASAN_RUNTIME ""
#endif

#define CL_INTERCEPT_LIB "libktiming_cl_intercept.so"
#define CL_DIRECT_LIB "libktiming_cl_direct.so"
#define VK_LAYER_MANIFEST "ktiming_vk_layer.json"
#define VK_LAYER_NAME "VK_LAYER_KTIMING_timing"
#define CUPTI_LIB "libktiming_cupti.so"
#define MPI_LIB "libktiming_mpi.so"

/* run's own failures (usage, setup, outputs not written), as env(1) and timeout(1) use it: distinct from any
 * status the program itself is likely to return. */
#define KTCLI_RUN_ERROR 125

/* How an API is intercepted. */
typedef enum run_mode_t {
    RUN_AUTO = 0,    /* OpenCL: layer + LD_PRELOAD fallback; Vulkan: layer */
    RUN_LAYER = 1,   /* loader layer only */
    RUN_PRELOAD = 2, /* OpenCL: LD_PRELOAD only (programs that dlopen the loader are not timed) */
    RUN_OFF = 3,     /* not intercepted */
    RUN_ON = 4       /* CUDA: the injection library is required (an error when it was not built) */
} run_mode_t;

/* Parsed options. */
typedef struct run_opts_t {
    const char *output;  /* -o: snapshot JSON */
    const char *trace;   /* --trace: Chrome trace */
    const char *html;    /* --html: HTML report */
    const char *format;  /* --format: summary on stderr (text, csv, json, none) */
    int verbose;         /* --verbose */
    run_mode_t opencl;   /* --opencl */
    run_mode_t vulkan;   /* --vulkan */
    run_mode_t cuda;     /* --cuda: RUN_AUTO, RUN_ON or RUN_OFF */
    int mpi;             /* --mpi: preload libktiming_mpi (gather at MPI_Finalize) */
    const char *merged;  /* --merged: where rank 0 writes the gathered snapshot (KTIMING_MPI_OUTPUT) */
    int by_config;       /* --by-config: the summary's kernel rows broken down by launch configuration */
} run_opts_t;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: ktiming run [options] -- PROGRAM [ARGS...]\n"
            "Times every kernel of an unmodified OpenCL, Vulkan or CUDA program; prints a summary on stderr.\n\n"
            "  -o, --output FILE   write the snapshot (JSON, for ktiming report / compare) to FILE\n"
            "  --trace FILE        write a Chrome trace / Perfetto timeline to FILE\n"
            "  --html FILE         write the self-contained HTML report to FILE\n"
            "  -f, --format FMT    summary format: text (default: time per API, then the kernels by total\n"
            "                      time), markdown, csv, json, lines (grep-friendly), none\n"
            "  -c, --by-config     summary (text, markdown, csv, lines): after each kernel's row, a row per\n"
            "                      launch configuration (OpenCL global/local sizes, Vulkan group counts, CUDA\n"
            "                      grid/block; 'none' for dispatches recorded without one), as report --by-config\n"
            "  -v, --verbose       one line per completed kernel (KTIMING_VERBOSE=profile_exec) and setup notes\n"
            "  --opencl MODE       auto (loader layer, LD_PRELOAD fallback), layer, preload, off\n"
            "  --vulkan MODE       auto (timing layer), off\n"
            "  --cuda MODE         auto (CUPTI injection library when built), on (required), off; a\n"
            "                      CUDA_INJECTION64_PATH already set is kept\n"
            "  --mpi               an MPI program: preload libktiming_mpi, which at MPI_Finalize aligns every\n"
            "                      rank's clock to rank 0's and gathers the snapshots there; each rank's own\n"
            "                      snapshot still goes to -o (use a template: -o prof-%%r.json); only rank 0\n"
            "                      prints the summary. Run it under mpirun: mpirun -np 4 ktiming run --mpi ...\n"
            "  --merged FILE       with --mpi: where rank 0 writes the gathered snapshot (default\n"
            "                      ktiming-mpi.json; a template)\n"
            "Output paths are templates: %%p the program's pid, %%h the host, %%r the MPI rank, %%%% a '%%'.\n\n"
            "The exit status is the program's (128+N when it dies of signal N); 125 for run's own errors (usage,\n"
            "setup, or an output that could not be written when the program succeeded). SIGINT, SIGTERM, SIGHUP\n"
            "and SIGQUIT sent to run are passed on to the program; run then waits, writes what was timed and\n"
            "removes its temporary directory. A program that dies (a signal, _exit, SIGKILL) before writing its\n"
            "timings still gets them written: run reads them from the program's memory (\"ended\" in the JSON).\n"
            "Env KTIMING_INTERCEPT_DIR overrides where the interception libraries are looked for.\n");
}

static int parse_mode(const char *s, run_mode_t *m)
{
    static const struct {
        const char *name;
        run_mode_t mode;
    } kModes[] = {{"auto", RUN_AUTO},       {"layer", RUN_LAYER}, {"preload", RUN_PRELOAD},
                  {"off", RUN_OFF},         {"on", RUN_ON}};
    for (size_t i = 0; i < sizeof kModes / sizeof kModes[0]; i++)
        if (!strcmp(s, kModes[i].name)) {
            *m = kModes[i].mode;
            return 0;
        }
    return -1;
}

/* ---------------------------------------------------------------------------------------------------
 * Finding the interception libraries
 * ------------------------------------------------------------------------------------------------- */

/* dir/name into out; 0, or -1 when it does not fit. */
static int path_join(char *out, size_t size, const char *dir, const char *name)
{
    int n = snprintf(out, size, "%s/%s", dir, name);
    return n >= 0 && (size_t)n < size ? 0 : -1;
}

static int file_exists(const char *dir, const char *name)
{
    char path[PATH_MAX];
    struct stat st;
    return path_join(path, sizeof path, dir, name) == 0 && stat(path, &st) == 0;
}

/* A directory holding at least one of the interception libraries. */
static int has_shim(const char *dir)
{
    return file_exists(dir, CL_INTERCEPT_LIB) || file_exists(dir, VK_LAYER_MANIFEST) || file_exists(dir, CUPTI_LIB);
}

/* The directory holding the interception libraries into out; 0 or -1. */
static int intercept_dir(char *out, size_t size)
{
    const char *env = kt__env(KT_ENV_NAME(INTERCEPT_DIR));
    if (env && *env) { /* made absolute: the program loads from it after it may have changed directory */
        char real[PATH_MAX];
        snprintf(out, size, "%s", env[0] != '/' && realpath(env, real) ? real : env);
        return 0;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            char cand[PATH_MAX], real[PATH_MAX];
            if (path_join(cand, sizeof cand, exe, KTCLI_INTERCEPT_INSTALL_RELDIR) == 0 && realpath(cand, real) && has_shim(real)) {
                snprintf(out, size, "%s", real);
                return 0;
            }
        }
    }
    if (KTCLI_INTERCEPT_BUILD_DIR[0] && has_shim(KTCLI_INTERCEPT_BUILD_DIR)) {
        snprintf(out, size, "%s", KTCLI_INTERCEPT_BUILD_DIR);
        return 0;
    }
    return -1;
}

/* ---------------------------------------------------------------------------------------------------
 * The program's environment
 * ------------------------------------------------------------------------------------------------- */

/* Sets name to value, or to value SEP old (prepend) / old SEP value (append) when it is already set. */
static int env_join(const char *name, const char *value, const char *sep, int prepend)
{
    const char *old = kt__env_any(name);
    if (!old || !*old)
        return setenv(name, value, 1);
    size_t len = strlen(old) + strlen(value) + strlen(sep) + 1;
    char *buf = malloc(len);
    if (!buf)
        return -1;
    snprintf(buf, len, "%s%s%s", prepend ? value : old, sep, prepend ? old : value);
    int rc = setenv(name, buf, 1);
    free(buf);
    return rc;
}

/* The Vulkan loader's version (vkEnumerateInstanceVersion; 1.0.0 when it lacks it), or 0 when there is none.
 * KTIMING_VULKAN_LIBRARY names the loader as for the library; otherwise libvulkan.so.1. */
static uint32_t vulkan_loader_version(void)
{
    const char *path = kt__env(KT_ENV_NAME(VULKAN_LIBRARY));
    void *h = dlopen(path && *path ? path : "libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return 0;
    typedef void (*(*gipa_t)(void *, const char *))(void);
    typedef int (*enum_version_t)(uint32_t *);
    gipa_t gipa = (gipa_t)(uintptr_t)dlsym(h, "vkGetInstanceProcAddr");
    enum_version_t ev = gipa ? (enum_version_t)(uintptr_t)gipa(NULL, "vkEnumerateInstanceVersion") : NULL;
    uint32_t v = 1u << 22; /* 1.0.0 */
    if (ev && ev(&v) != 0)
        v = 1u << 22;
    dlclose(h);
    return v;
}

/* Loaders before 1.3.207 ignore VK_ADD_LAYER_PATH (they warn about an unknown layer at most): the layer would
 * silently time nothing. Says so on stderr (always, not only with -v); the program still runs. */
static void check_vulkan_loader(void)
{
    uint32_t v = vulkan_loader_version();
    const uint32_t need = (1u << 22) | (3u << 12) | 207u; /* VK_MAKE_API_VERSION(0, 1, 3, 207) */
    if (v == 0 || (v & 0x1fffffffu) >= need)
        return;
    fprintf(stderr,
            "ktiming run: the Vulkan loader is %u.%u.%u, older than 1.3.207, which ignores VK_ADD_LAYER_PATH: Vulkan "
            "dispatches will not be timed (install a newer loader, or point VK_LAYER_PATH at the directory of %s)\n",
            (v >> 22) & 0x7fu, (v >> 12) & 0x3ffu, v & 0xfffu, VK_LAYER_MANIFEST);
}

/* Set by setup_env: the Vulkan loader's version is checked once the program runs (run_program), not before:
 * loading the loader to ask was ~0.7 ms of every run's start. */
static int g_check_vulkan;

static int setup_env(const run_opts_t *o, const char *dir, const char *run_dir)
{
    char path[PATH_MAX];
    int have_cl = file_exists(dir, CL_INTERCEPT_LIB) && file_exists(dir, CL_DIRECT_LIB);
    int have_vk = file_exists(dir, VK_LAYER_MANIFEST);
    int have_cuda = file_exists(dir, CUPTI_LIB);
    const char *user_inject = kt__env_any("CUDA_INJECTION64_PATH");
    int cuda_user = user_inject && *user_inject; /* the user's injection library wins over ours */
    int cuda_ours = o->cuda != RUN_OFF && have_cuda && !cuda_user;
    /* outputs are written by this command from the per-process snapshots, not by the program's core */
    unsetenv(KT_ENV_NAME(OUTPUT));
    unsetenv(KT_ENV_NAME(TRACE));
    unsetenv(KT_ENV_NAME(REPORT));
    if (setenv(KT_ENV_NAME(RUN_DIR), run_dir, 1) != 0)
        return -1;
    /* Only a summary asked for: it needs no spans, so the program keeps none (recording, writing and reading
     * them was ~8 ms of a 100 ms run of 20,000 kernels). A KTIMING_SPANS of the user's is kept. */
    if (!o->output && !o->trace && !o->html && !o->mpi && !kt__env(KT_ENV_NAME(SPANS)) &&
        setenv(KT_ENV_NAME(SPANS), "0", 1) != 0)
        return -1;
    if (o->verbose) {
        setenv(KT_ENV_NAME(VERBOSE), "profile_exec", 1);
        setenv(KT_ENV_NAME(RUN_VERBOSE), "1", 1);
    }
    if (o->opencl != RUN_OFF && have_cl) {
        const char *user_loader = kt__env(KT_ENV_NAME(OPENCL_LIBRARY));
        if (user_loader && *user_loader && !strstr(user_loader, CL_DIRECT_LIB))
            setenv(KT_ENV_NAME(CL_INTERCEPT_LOADER), user_loader, 1);
        if (path_join(path, sizeof path, dir, CL_DIRECT_LIB) != 0)
            return -1;
        setenv(KT_ENV_NAME(OPENCL_LIBRARY), path, 1);
        if (path_join(path, sizeof path, dir, CL_INTERCEPT_LIB) != 0)
            return -1;
        if (o->opencl != RUN_PRELOAD && env_join("OPENCL_LAYERS", path, ":", 0) != 0)
            return -1;
        if (o->opencl != RUN_LAYER && env_join("LD_PRELOAD", path, ":", 1) != 0)
            return -1;
    } else if (o->opencl != RUN_OFF && o->verbose) {
        fprintf(stderr, "ktiming run: OpenCL interception not built (no %s in %s)\n", CL_INTERCEPT_LIB, dir);
    }
    if (o->vulkan != RUN_OFF && have_vk) {
        g_check_vulkan = 1;
        if (env_join("VK_ADD_LAYER_PATH", dir, ":", 1) != 0 || env_join("VK_INSTANCE_LAYERS", VK_LAYER_NAME, ":", 0))
            return -1;
    }
    if (o->cuda == RUN_ON && !have_cuda && !cuda_user) {
        fprintf(stderr, "ktiming run: --cuda on: CUDA interception not built (no %s in %s)\n", CUPTI_LIB, dir);
        return -2;
    }
    if (cuda_ours) {
        if (path_join(path, sizeof path, dir, CUPTI_LIB) != 0 || setenv("CUDA_INJECTION64_PATH", path, 1) != 0)
            return -1;
    } else if (o->cuda != RUN_OFF && cuda_user && o->verbose) {
        fprintf(stderr, "ktiming run: CUDA_INJECTION64_PATH is already set (%s): kept, CUDA kernels are not timed "
                        "by ktiming\n", user_inject);
    } else if (o->cuda != RUN_OFF && o->verbose) {
        fprintf(stderr, "ktiming run: CUDA interception not built (no %s in %s)\n", CUPTI_LIB, dir);
    }
    if (o->mpi) {
        if (!file_exists(dir, MPI_LIB)) {
#ifdef KTCLI_MPI_BUILT /* built with this ktiming, shipped apart (the only part that needs MPI) */
            fprintf(stderr, "ktiming run: --mpi: libktiming_mpi is not installed (no %s in %s): install the "
                            "ktiming-mpi package (apt install ktiming-mpi), or the build's mpi component "
                            "(cmake --install BUILD --component mpi)\n", MPI_LIB, dir);
#else
            fprintf(stderr, "ktiming run: --mpi: libktiming_mpi not built (no %s in %s): this ktiming was built "
                            "without MPI; build it where an MPI implementation is installed (e.g. libopenmpi-dev)\n",
                    MPI_LIB, dir);
#endif
            return -2;
        }
        if (path_join(path, sizeof path, dir, MPI_LIB) != 0 || env_join("LD_PRELOAD", path, ":", 1) != 0)
            return -1;
        if (o->merged && setenv(KT_ENV_NAME(MPI_OUTPUT), o->merged, 1) != 0)
            return -1;
    }
    /* A sanitizer build's libraries need the ASan runtime loaded first, even in a program built without it.
     * Leak checking is then off in the program: its leaks and its drivers' (some from libraries unloaded
     * before exit, which no suppression can name) are not ktiming's, and would change its exit status. */
    if (KTCLI_ASAN_RUNTIME[0] && ((o->opencl != RUN_OFF && have_cl) || (o->vulkan != RUN_OFF && have_vk) || cuda_ours) &&
        (env_join("LD_PRELOAD", KTCLI_ASAN_RUNTIME, ":", 1) != 0 ||
         env_join("ASAN_OPTIONS", "detect_leaks=0", ":", 0) != 0))
        return -1;
    if (o->verbose)
        fprintf(stderr, "ktiming run: OpenCL %s, Vulkan %s, CUDA %s, libraries in %s\n",
                o->opencl == RUN_OFF || !have_cl ? "off"
                : o->opencl == RUN_LAYER         ? "loader layer"
                : o->opencl == RUN_PRELOAD       ? "LD_PRELOAD"
                                                 : "loader layer + LD_PRELOAD fallback",
                o->vulkan == RUN_OFF || !have_vk ? "off" : "timing layer",
                cuda_ours ? "CUPTI injection (CUDA_INJECTION64_PATH)" : "off", dir);
    return 0;
}

/* ---------------------------------------------------------------------------------------------------
 * Running the program
 * ------------------------------------------------------------------------------------------------- */

/* Signals `ktiming run` passes on to the program; it then waits for the program, writes what was timed and
 * removes its directory, instead of dying at once and leaving the program orphaned. */
static const int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
#define N_FORWARDED (sizeof kForwarded / sizeof kForwarded[0])

static volatile sig_atomic_t g_child; /* the program's pid while it runs, else 0 */
static int g_status;                  /* the program's wait status (waitpid), once it ended */
static kt_run_arena_t *g_arena;       /* the run arena (crash survival), NULL: off */
static int g_own_group;               /* the program runs in a process group of its own (own_process_group) */
#define FORWARD_MERGE_NS 250000000ll  /* forward_signal: a repeat this close to the last one forwarded is merged */

/* A signal sent to us (kill, timeout, a service manager) goes on to the program. When the program shares our
 * process group (a job an interactive shell started: own_process_group), one the terminal generated (^C, ^\, hang-up: si_code
 * SI_KERNEL) already reached it: passing it on would deliver it twice. In a group of its own it gets only what we
 * pass on. */
static void forward_signal(int sig, siginfo_t *info, void *ctx)
{
    (void)ctx;
    int saved = errno;
    pid_t child = (pid_t)g_child;
    /* The same signal from the same sender again within FORWARD_MERGE_NS of the last one passed on is passed on
     * once: timeout(1) sends its signal to us and then to our whole group, two a program alone gets merged into one
     * (the kernel merges a standard signal still pending). Only this handler touches these; it runs with the
     * forwarded signals blocked. */
    static int last_sig;
    static pid_t last_pid;
    static struct timespec last;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    pid_t from = info ? info->si_pid : 0;
    long long since = (long long)(now.tv_sec - last.tv_sec) * 1000000000ll + (now.tv_nsec - last.tv_nsec);
    int repeat = sig == last_sig && from == last_pid && since < FORWARD_MERGE_NS;
    if (child > 0 && !repeat && (g_own_group || !info || info->si_code != SI_KERNEL)) {
        kill(child, sig);
        last_sig = sig;
        last_pid = from;
        last = now;
    }
    errno = saved;
}

/* Does the program get a process group of its own? A signal sent to our whole group (`kill -TERM -PGID`, the
 * second signal timeout(1) sends) then reaches us only, and the program gets it once, from us; with both in one
 * group it gets the group's copy and ours. But a job an interactive shell started -- the terminal's foreground
 * job, or a background job we lead -- keeps the program in our group, as the shell started us: job control (^C,
 * ^Z, `kill -STOP %1`, `fg`, terminal reads) must reach it as it would without us, and SIGSTOP cannot be passed
 * on. So: yes without a controlling terminal (a service, setsid, CI), and on a terminal when we are neither its
 * foreground job nor our group's leader (under timeout(1), which makes a group of its own). */
static int own_process_group(void)
{
    int tty = open("/dev/tty", O_RDONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
    if (tty < 0)
        return 1;
    pid_t fg = tcgetpgrp(tty);
    close(tty);
    return fg != getpgrp() && getpgrp() != getpid();
}

/* ---------------------------------------------------------------------------------------------------
 * The program's snapshot, read while its process is being torn down
 *
 * A timed process writes its snapshot at exit and then tells us through a FIFO in the run directory
 * (RUN_FIFO: "<pid>\n", kti_run.h). The kernel still needs milliseconds to tear the process down after that
 * (4-5 ms for a PoCL program here) before waitpid returns, so ktiming waits on the FIFO and on the process (a
 * pidfd) together and reads the program's own snapshot in that time; the report uses it if the file is still
 * the one read. Without the FIFO or pidfd_open, it waits and reads afterwards, as before. (An inotify watch
 * would need no message, but closing one waits for an SRCU grace period: 10-20 ms.)
 * ------------------------------------------------------------------------------------------------- */

#define RUN_FIFO "notify.fifo" /* KTI_RUN_FIFO of tools/intercept/shim/kti_run.h */

typedef struct early_t {
    kt_snapshot_t *snap; /* the program's snapshot, read early (NULL: none) */
    struct stat st;      /* the file it came from, as it was then */
    char path[PATH_MAX]; /* its path */
    /* The report prepared from it in the same time (prepare_report), used when the process wrote nothing after
     * it; else the report starts again from the newer file. */
    int prepared;        /* the fields below hold */
    int placed;          /* the file was moved to -o (no longer in the run directory) */
    int place_errno;     /* moving it there failed: why (0: it did not, or no -o) */
    char *text;          /* the summary, rendered (NULL: none asked for, or it could not be) */
    size_t text_len;
} early_t;

static early_t g_early;

static void early_clear(void)
{
    kt_snapshot_free(g_early.snap);
    free(g_early.text);
    memset(&g_early, 0, sizeof g_early);
}

static int same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Reads path into g_early (a failure leaves nothing: the report reads it again and says why). */
static void early_load(const char *path, int skip_spans)
{
    struct stat before, after;
    kt_load_opts_t lo = {.skip_spans = skip_spans};
    kt_snapshot_t *snap = NULL;
    if (stat(path, &before) != 0 || kt_snapshot_load(path, &lo, &snap, NULL, 0) != 0)
        return;
    if (stat(path, &after) != 0 || !same_file(&before, &after) ||
        snprintf(g_early.path, sizeof g_early.path, "%s", path) >= (int)sizeof g_early.path) {
        kt_snapshot_free(snap);
        return;
    }
    g_early.snap = snap;
    g_early.st = after;
}

/* The early snapshot of path if the file is still the one it was read from (ownership passes), else NULL. */
static kt_snapshot_t *early_take(const char *path)
{
    struct stat now;
    kt_snapshot_t *snap = g_early.snap;
    g_early.snap = NULL;
    if (snap && (strcmp(path, g_early.path) != 0 || stat(path, &now) != 0 || !same_file(&now, &g_early.st))) {
        kt_snapshot_free(snap);
        snap = NULL;
    }
    return snap;
}

/* The run directory's FIFO, made and opened before the program starts (-1 when it cannot be: no early read).
 * Opened read-write, so it never reports a hang-up when a writer closes and a writer's non-blocking open always
 * finds a reader. */
static int open_run_fifo(const char *run_dir)
{
    char path[PATH_MAX];
    if (path_join(path, sizeof path, run_dir, RUN_FIFO) != 0 || mkfifo(path, 0600) != 0)
        return -1;
    return open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
}

/* Does buf[0, n) hold the line "<child>\n"? */
static int fifo_names(const char *buf, ssize_t n, pid_t child)
{
    char want[32];
    int wl = snprintf(want, sizeof want, "%ld\n", (long)child);
    for (ssize_t i = 0; i + wl <= n; i++)
        if ((i == 0 || buf[i - 1] == '\n') && !memcmp(buf + i, want, (size_t)wl))
            return 1;
    return 0;
}

static void prepare_report(const run_opts_t *o, pid_t child);

/* Waits for the child; meanwhile, when fifo is open, reads the child's snapshot once the child says it is
 * complete, and prepares the report from it. Returns waitpid's status. */
static int wait_child(pid_t child, int fifo, const char *run_dir, const run_opts_t *o)
{
    int pidfd = -1;
#ifdef SYS_pidfd_open
    if (fifo >= 0)
        pidfd = (int)syscall(SYS_pidfd_open, child, 0);
#endif
    while (pidfd >= 0 && fifo >= 0) {
        struct pollfd p[2] = {{.fd = pidfd, .events = POLLIN}, {.fd = fifo, .events = POLLIN}};
        int n = poll(p, 2, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            break;
        int ended = (p[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0;
        if (p[1].revents & POLLIN) { /* the snapshot first, even when the process has ended meanwhile */
            char buf[4096], name[32], path[PATH_MAX];
            ssize_t got = read(fifo, buf, sizeof buf);
            snprintf(name, sizeof name, "%ld.json", (long)child);
            if (got > 0 && fifo_names(buf, got, child)) {
                if (path_join(path, sizeof path, run_dir, name) == 0)
                    early_load(path, !o->trace && !o->html);
                if (g_early.snap)
                    prepare_report(o, child);
                break; /* one snapshot per process: nothing more to wait for but the process */
            }
        }
        if (ended)
            break;
    }
    if (pidfd >= 0)
        close(pidfd);
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
}

/* Starts argv[0] (PATH searched) with the signal mask *mask, in a process group of its own when own_group; 0 and
 * *child, or an errno value. vfork + exec, as glibc's posix_spawnp does it (the address space is shared until the
 * exec: no page tables copied, no copy-on-write faults in ktiming afterwards), because the child must first ask
 * for PR_SET_PDEATHSIG: when `ktiming run` itself is killed (SIGKILL, which it cannot forward) the program is
 * killed too instead of running on as an orphan. The program gets our dispositions (an ignored SIGINT stays
 * ignored). A failed exec is told through a close-on-exec pipe (also right where a sanitizer runtime turns vfork
 * into fork). */
static __attribute__((noinline)) int spawn_program(char **argv, const sigset_t *mask, int own_group, pid_t *child)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return errno;
    pid_t parent = getpid();
    pid_t pid = vfork();
    if (pid == 0) {
        /* only system calls here: the parent's memory is ours until execvp */
        int e = 0;
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) { /* run already gone: do not start */
            e = ECHILD;
        } else if (own_group && setpgid(0, 0) != 0) {
            e = errno;
        } else {
            sigprocmask(SIG_SETMASK, mask, NULL);
            execvp(argv[0], argv);
            e = errno ? errno : ENOEXEC;
        }
        if (write(fds[1], &e, sizeof e) < 0) {
        }
        _exit(127);
    }
    int e = pid < 0 ? errno : 0;
    close(fds[1]);
    if (pid > 0) {
        ssize_t got;
        while ((got = read(fds[0], &e, sizeof e)) < 0 && errno == EINTR) {
        }
        if (got != (ssize_t)sizeof e) /* closed by the exec: the program runs */
            e = 0;
        else
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
            }
    }
    close(fds[0]);
    if (e == 0)
        *child = pid;
    return e;
}

/* Runs argv; returns its exit status as a shell would report it, *pid its process id. With fifo (the run
 * directory's, else -1), the program's snapshot there is read while its process ends (g_early). */
static int run_program(char **argv, pid_t *pid, int fifo, const char *run_dir, const run_opts_t *o)
{
    sigset_t block, old_mask;
    sigemptyset(&block);
    for (size_t i = 0; i < N_FORWARDED; i++)
        sigaddset(&block, kForwarded[i]);
    fflush(NULL);
    /* blocked across the spawn: a signal arriving before the handlers know the child waits for them */
    sigprocmask(SIG_BLOCK, &block, &old_mask);
    pid_t child = -1;
    g_own_group = own_process_group();
    int rc = spawn_program(argv, &old_mask, g_own_group, &child);
    if (rc != 0) {
        sigprocmask(SIG_SETMASK, &old_mask, NULL);
        fprintf(stderr, "ktiming run: cannot run %s: %s\n", argv[0], strerror(rc));
        return rc == ENOENT ? 127 : 126; /* as a shell reports it */
    }
    /* From here a closed stderr (`ktiming run ... 2>&1 | head`) costs the summary, not the program's status and
     * our clean-up: EPIPE instead of SIGPIPE. The program kept its own disposition: it is already running. */
    signal(SIGPIPE, SIG_IGN);
    *pid = child;
    g_child = child;
    struct sigaction fwd, old[N_FORWARDED];
    memset(&fwd, 0, sizeof fwd);
    fwd.sa_sigaction = forward_signal;
    fwd.sa_flags = SA_SIGINFO | SA_RESTART;
    fwd.sa_mask = block; /* one forward_signal at a time */
    for (size_t i = 0; i < N_FORWARDED; i++) {
        sigaction(kForwarded[i], NULL, &old[i]);
        if (old[i].sa_handler != SIG_IGN) /* a signal we were started ignoring stays ignored */
            sigaction(kForwarded[i], &fwd, NULL);
    }
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    if (g_check_vulkan) /* while the program starts: it is only a warning */
        check_vulkan_loader();
    int status = wait_child(child, fifo, run_dir, o);
    g_child = 0;
    g_status = status;
    for (size_t i = 0; i < N_FORWARDED; i++)
        sigaction(kForwarded[i], &old[i], NULL);
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "ktiming run: %s died of signal %d (%s)\n", argv[0], WTERMSIG(status),
                strsignal(WTERMSIG(status)));
        return 128 + WTERMSIG(status);
    }
    return KTCLI_RUN_ERROR;
}

/* ---------------------------------------------------------------------------------------------------
 * Results
 * ------------------------------------------------------------------------------------------------- */

static int write_as(const char *what, const char *path, const kt_snapshot_t *snap, kt_format_t fmt)
{
    errno = 0;
    int rc = kt_report_write(path, snap, fmt, NULL);
    if (rc != 0)
        fprintf(stderr, "ktiming run: cannot write %s %s: %s\n", what, path,
                rc == KT_EIO && errno ? strerror(errno) : kt_strerror(rc));
    return rc;
}

/* *dst = tmpl with %p (the program's pid), %h, %r, %% expanded into buf (kt_path_expand); 0 or -1. */
static int expand_path(const char *what, const char *tmpl, pid_t child, char *buf, size_t size, const char **dst)
{
    if (!tmpl)
        return 0;
    int rc = kt_path_expand(tmpl, (long)child, buf, size);
    if (rc != 0) {
        fprintf(stderr, "ktiming run: %s %s: %s\n", what, tmpl, kt_strerror(rc));
        return -1;
    }
    *dst = buf;
    return 0;
}

static void summary_print(FILE *out, const run_opts_t *o, const kt_snapshot_t *snap)
{
    kt_format_t fmt = KT_FORMAT_TEXT;
    ktcli_parse_format(o->format, &fmt);
    kt_report_opts_t ropts = {.sort = KT_SORT_TOTAL, .filter = NULL, .by_api = 1, .by_config = o->by_config};
    kt_report_print(out, snap, fmt, &ropts);
}

/* The summary of snap as it goes to stderr: time per API first, then the kernels by total time. 0 when none
 * is asked for (--format none, or not MPI rank 0); else 1, with *text the summary rendered in memory (NULL when
 * it could not be: the caller prints it to stderr directly). */
static int render_summary(const run_opts_t *o, const kt_snapshot_t *snap, char **text, size_t *len)
{
    *text = NULL;
    *len = 0;
    char rank[16] = "0";
    if (o->mpi) /* one summary per job, not one per rank */
        kt_path_expand("%r", -1, rank, sizeof rank);
    if (!strcmp(o->format, "none") || strcmp(rank, "0"))
        return 0;
    /* built in memory and written at once: stderr is unbuffered, and the summary is ~100 small writes */
    FILE *ms = open_memstream(text, len);
    if (!ms)
        return 1;
    summary_print(ms, o, snap);
    if (fclose(ms) != 0 || !*text) {
        free(*text);
        *text = NULL;
        *len = 0;
    }
    return 1;
}

static void print_summary(const run_opts_t *o, const kt_snapshot_t *snap)
{
    char *text;
    size_t len;
    if (!render_summary(o, snap, &text, &len))
        return;
    if (text) {
        fwrite(text, 1, len, stderr);
        free(text);
        return;
    }
    summary_print(stderr, o, snap);
}

/* Called once the program's snapshot has been read early (g_early), while its process is still being torn
 * down (4-5 ms for a PoCL program): renders the summary and moves the snapshot to -o in that time, so that
 * after the wait only printing is left (~0.3 ms less between the program's end and ours). Only for the
 * summary and -o; --trace and --html are written afterwards. Nothing is printed here: the program may still
 * flush its own output. */
static void prepare_report(const run_opts_t *o, pid_t child)
{
    char out[PATH_MAX];
    if (o->trace || o->html || (o->output && kt_path_expand(o->output, (long)child, out, sizeof out) != 0))
        return; /* the report says why a path does not expand */
    if (render_summary(o, g_early.snap, &g_early.text, &g_early.text_len) && !g_early.text)
        return;
    if (o->output) {
        errno = 0;
        if (kt_output_place(g_early.path, out, KT_OUTPUT_NOSYNC) == 0)
            g_early.placed = 1;
        else
            g_early.place_errno = errno ? errno : EIO;
    }
    g_early.prepared = 1;
}

/* Does the report prepared early still hold for the program's snapshot at path: the process wrote no newer one
 * after it (a second interception library's exit handler may: the later write holds everything)? */
static int early_prepared(const char *path)
{
    if (!g_early.prepared || strcmp(path, g_early.path) != 0)
        return 0;
    struct stat now;
    if (g_early.placed) /* moved to -o: any file there now is newer */
        return stat(path, &now) != 0 && errno == ENOENT;
    return stat(path, &now) == 0 && same_file(&now, &g_early.st);
}

/* Set when the program's snapshot could not be put where -o says: the run directory is then kept. */
static int g_keep_run_dir;

/* -o failed after the program ran: its snapshot stays in the run directory (never deleted with it), and where
 * is said. */
static void keep_snapshot(const char *path)
{
    g_keep_run_dir = 1;
    fprintf(stderr, "ktiming run: the program's snapshot is kept at %s\n", path);
}

/* ---------------------------------------------------------------------------------------------------
 * A program that died before writing its snapshot (docs/run.md, "When the program dies")
 *
 * The program records into the run arena (a memfd it maps at the address run chose: src/core/arena.c). When it
 * ends without writing its snapshot -- a signal, _exit, SIGKILL, a SIGTERM run passed on -- the snapshot is built
 * here from that memory, marked with how the program ended.
 * ------------------------------------------------------------------------------------------------- */

#define RUN_ARENA_BYTES (1ull << 30) /* address space; memory only for what the program records */
#define RUN_ARENA_MIN (16ull << 20)  /* below this under a ulimit -v: no arena */

/* The arena's size: 1 GiB of address space, in run and in the program. Under a limit on address space
 * (ulimit -v, inherited by the program) at most an eighth of it, in whole MiB, so the program keeps the rest;
 * 0 when that is under RUN_ARENA_MIN (*limit_kib: the limit, for the message). */
static size_t arena_bytes(unsigned long long *limit_kib)
{
    struct rlimit as;
    *limit_kib = 0;
    if (getrlimit(RLIMIT_AS, &as) != 0 || as.rlim_cur == RLIM_INFINITY)
        return (size_t)RUN_ARENA_BYTES;
    *limit_kib = (unsigned long long)as.rlim_cur / 1024u;
    unsigned long long b = ((unsigned long long)as.rlim_cur / 8u) & ~((1ull << 20) - 1u);
    return b < RUN_ARENA_MIN ? 0 : b < RUN_ARENA_BYTES ? (size_t)b : (size_t)RUN_ARENA_BYTES;
}


/* How the program ended, for the snapshot's `ended` (empty: it ran its exit handlers and exited). */
static void ended_text(int status, int exited, char *buf, size_t size)
{
    buf[0] = '\0';
    if (WIFSIGNALED(status))
        snprintf(buf, size, "signal %d", WTERMSIG(status));
    else if (WIFEXITED(status) && !exited)
        snprintf(buf, size, "exit %d via _exit", WEXITSTATUS(status));
}

/* The snapshot of the program's memory when it wrote none itself and recorded something; else NULL. The process
 * that took the arena may not be run's child (a shell or wrapper started it): its status is then unknown here, and
 * `ended` says so rather than the child's. When its process exec'd and the new image recorded too (the same pid),
 * each image's snapshot is read and they are merged. */
static kt_snapshot_t *arena_take(int status, pid_t child)
{
    int64_t pid = 0;
    int exited = 0;
    if (!kt_run_arena_status(g_arena, &pid, &exited))
        return NULL;
    char ended[48] = "";
    if (pid == (int64_t)child)
        ended_text(status, exited, ended, sizeof ended);
    else if (!exited)
        snprintf(ended, sizeof ended, "status unknown: pid %lld not run's child", (long long)pid);
    size_t n = kt_run_arena_images(g_arena);
    kt_snapshot_t *snap = NULL;
    if (n > 1) {
        kt_snapshot_t **imgs = calloc(n, sizeof *imgs);
        size_t got = 0;
        for (size_t i = 0; imgs && i < n; i++)
            if ((imgs[got] = kt_run_arena_snapshot_image(g_arena, i, ended)) != NULL)
                got++;
        if (got > 1 && kt_snapshot_merge((const kt_snapshot_t *const *)imgs, got, NULL, &snap) == 0) {
            snprintf(snap->ended, sizeof snap->ended, "%s", ended);
            fprintf(stderr, "ktiming run: the program exec'd: the snapshots of its %zu images are merged\n", got);
        } else if (got) { /* not merged: the last image, and what is missing said */
            snap = imgs[--got];
            imgs[got] = NULL;
            if (got)
                fprintf(stderr, "ktiming run: the program exec'd: the timings of its %zu earlier image%s could not be "
                                "merged and are left out\n", got, got == 1 ? "" : "s");
        }
        for (size_t i = 0; imgs && i < n; i++)
            kt_snapshot_free(imgs[i]);
        free(imgs);
    } else {
        snap = kt_run_arena_snapshot(g_arena, ended);
    }
    if (snap && !snap->count) {
        kt_snapshot_free(snap);
        return NULL;
    }
    return snap;
}

/* What the run arena could not hold or the program's other processes lost, said in one line each (from_arena: the
 * report comes from the arena, whose limits then matter). */
static void say_arena_lost(int from_arena)
{
    kt_run_arena_lost_t lost;
    kt_run_arena_lost(g_arena, &lost);
    if (from_arena && lost.threads_outside)
        fprintf(stderr, "ktiming run: the run arena was full: the records of %u thread%s were kept outside it and are "
                        "lost\n", lost.threads_outside, lost.threads_outside == 1 ? "" : "s");
    else if (from_arena && lost.outside)
        fprintf(stderr, "ktiming run: the run arena was full: %llu of the program's tables (span logs first) were kept "
                        "outside it; the snapshot misses what they held\n", (unsigned long long)lost.outside);
    if (lost.processes_lost)
        fprintf(stderr, "ktiming run: %u other process%s of the program used ktiming and ended without writing %s "
                        "timings (a signal or _exit): lost\n", lost.processes_lost,
                lost.processes_lost == 1 ? "" : "es", lost.processes_lost == 1 ? "its" : "their");
}

/* Writes the outputs and the summary from the snapshot read out of the program's memory; 0 or -1. */
static int report_arena(const run_opts_t *o, kt_snapshot_t *snap)
{
    if (snap->ended[0]) {
        uint64_t lost = 0; /* device work the program had handed over and never saw finish */
        for (size_t i = 0; i < snap->count; i++)
            lost += snap->entries[i].dropped_by[KT_DROP_IN_FLIGHT_AT_EXIT];
        fprintf(stderr, "ktiming run: the program ended (%s) without writing its timings: %zu kernel%s recovered "
                        "from its memory", snap->ended, snap->count, snap->count == 1 ? "" : "s");
        if (lost)
            fprintf(stderr, ", %llu dispatch%s lost in flight", (unsigned long long)lost, lost == 1 ? "" : "es");
        fputc('\n', stderr);
    }
    int bad = 0;
    if (o->output && write_as("output", o->output, snap, KT_FORMAT_JSON) != 0)
        bad = 1;
    if (o->trace && write_as("trace", o->trace, snap, KT_FORMAT_CHROME) != 0)
        bad = 1;
    if (o->html && write_as("HTML report", o->html, snap, KT_FORMAT_HTML) != 0)
        bad = 1;
    print_summary(o, snap);
    return bad ? -1 : 0;
}

/* Other processes of the program that wrote snapshots too, said once; kept of them are in run_dir. */
static void say_others(const run_opts_t *o, size_t others, size_t kept, const char *run_dir)
{
    if (!others)
        return;
    fprintf(stderr, "ktiming run: %zu other process%s of the program timed kernels too", others,
            others == 1 ? "" : "es");
    if (!o->output)
        fputs(" (use -o to keep them)\n", stderr);
    else if (!kept)
        fputs(" (snapshots kept beside the output)\n", stderr);
    else
        fprintf(stderr, " (snapshots kept %sin %s)\n", kept < others ? "beside the output and " : "", run_dir);
}

/* Can the other processes' snapshots go beside the output, as OUTPUT.<pid>? Not when it names no regular file in
 * a directory of files: a device, a FIFO, a descriptor (/dev/stdout, /dev/fd/N), anything under /dev or /proc,
 * where OUTPUT.<pid> would be created among the devices or not at all. */
static int others_beside(const char *output)
{
    char dir[PATH_MAX], real[PATH_MAX];
    struct stat st;
    if (stat(output, &st) == 0 && !S_ISREG(st.st_mode))
        return 0;
    snprintf(dir, sizeof dir, "%s", output);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        slash[1] = '\0';
    else
        *slash = '\0';
    if (!realpath(dir, real))
        return 1; /* placing it says why */
    return strcmp(real, "/dev") && strncmp(real, "/dev/", 5) && strcmp(real, "/proc") && strncmp(real, "/proc/", 6);
}

/* Puts another process's snapshot (path, named <pid>.json) beside the output as OUTPUT.<pid>; where it cannot
 * go, it stays in the run directory, which is then kept, and either way the line says where it is. 1 when it
 * was kept in the run directory, else 0. */
static int place_other(const char *output, int beside, const char *path, const char *name)
{
    char keep[PATH_MAX + 64];
    size_t len = strlen(name);
    int kn = snprintf(keep, sizeof keep, "%s.%.*s", output, (int)(len - 5), name);
    if (beside) {
        errno = 0;
        if (kn > 0 && (size_t)kn < sizeof keep && kt_output_place(path, keep, 0) == 0) {
            fprintf(stderr, "ktiming run: another timed process's snapshot: %s\n", keep);
            return 0;
        }
        fprintf(stderr, "ktiming run: cannot write %s: %s\n", kn > 0 && (size_t)kn < sizeof keep ? keep : output,
                strerror(kn > 0 && (size_t)kn < sizeof keep && errno ? errno : ENAMETOOLONG));
    }
    g_keep_run_dir = 1;
    fprintf(stderr, "ktiming run: another timed process's snapshot is kept at %s%s\n", path,
            beside ? "" : " (-o names no regular file to put it beside)");
    return 1;
}

/* Writes the outputs and the summary from the program's snapshot; 0 or -1. */
static int report(const run_opts_t *opts, const char *run_dir, pid_t child, int status)
{
    char primary[PATH_MAX] = "", path[PATH_MAX], name[32];
    char out_buf[PATH_MAX], trace_buf[PATH_MAX], html_buf[PATH_MAX];
    run_opts_t expanded = *opts;
    const run_opts_t *o = &expanded;
    if (expand_path("output", opts->output, child, out_buf, sizeof out_buf, &expanded.output) ||
        expand_path("trace", opts->trace, child, trace_buf, sizeof trace_buf, &expanded.trace) ||
        expand_path("HTML report", opts->html, child, html_buf, sizeof html_buf, &expanded.html))
        return -1;
    size_t others = 0, kept = 0; /* other processes' snapshots; those kept in the run directory */
    int beside = -1;             /* others_beside(-o), once asked */
    snprintf(name, sizeof name, "%ld.json", (long)child);
    int joined = path_join(path, sizeof path, run_dir, name) == 0;
    int early = joined && early_prepared(path);
    if (joined && (early || access(path, R_OK) == 0))
        memcpy(primary, path, sizeof path);
    /* the program's exit-time file misses what it recorded after writing it (exit handlers and destructors that
     * ran later): its memory holds it all, and is the primary then; the file is not another process's */
    char superseded[PATH_MAX] = "";
    int64_t owner = 0;
    uint64_t late = primary[0] && kt_run_arena_status(g_arena, &owner, NULL) && owner == (int64_t)child
                        ? kt_run_arena_late(g_arena)
                        : 0;
    if (late) {
        memcpy(superseded, primary, sizeof primary);
        primary[0] = '\0';
        early = 0;
    }
    /* the program wrote no snapshot: the one in its memory (it died, or it has no interception library's exit
     * writer, as a program timing only CPU zones) is the primary; other processes' files stay "others" */
    kt_snapshot_t *dead = primary[0] ? NULL : arena_take(status, child);
    if (dead && late)
        fprintf(stderr, "ktiming run: %llu record%s made after the program wrote its timings at exit (by later exit "
                        "handlers or destructors): reported from its memory\n", (unsigned long long)late,
                late == 1 ? "" : "s");
    else if (late) /* the memory could not be read: the file, as it is */
        memcpy(primary, superseded, sizeof primary);
    say_arena_lost(dead != NULL);
    if (dead)
        snprintf(primary, sizeof primary, "%s", "(memory)");
    DIR *d = opendir(run_dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len < 6 || strcmp(de->d_name + len - 5, ".json") != 0)
            continue;
        if (path_join(path, sizeof path, run_dir, de->d_name) != 0 || !strcmp(path, primary) ||
            !strcmp(path, superseded))
            continue;
        if (!primary[0]) {
            memcpy(primary, path, sizeof path);
            continue;
        }
        others++;
        if (o->output) { /* keep the other processes' snapshots beside the main one */
            if (beside < 0)
                beside = others_beside(o->output);
            kept += (size_t)place_other(o->output, beside, path, de->d_name);
        }
    }
    if (d)
        closedir(d);
    int bad = 0;
    if (dead) {
        bad = report_arena(o, dead) != 0;
        kt_snapshot_free(dead);
        say_others(o, others, kept, run_dir);
        return bad ? -1 : 0;
    }
    if (!primary[0]) {
        fprintf(stderr, "ktiming run: nothing was timed (the program ran no OpenCL/Vulkan/CUDA kernels, or it ended "
                        "without running its exit handlers)\n");
        const char *asked[3] = {o->output, o->trace, o->html};
        for (int i = 0; i < 3; i++)
            if (asked[i])
                fprintf(stderr, "ktiming run: %s was not written\n", asked[i]);
        return o->output || o->trace || o->html ? -1 : 0;
    }
    if (early) { /* placed and rendered while the process ended (prepare_report) */
        if (g_early.place_errno) {
            fprintf(stderr, "ktiming run: cannot write %s: %s\n", o->output, strerror(g_early.place_errno));
            keep_snapshot(g_early.path);
            bad = 1;
        }
        if (g_early.text)
            fwrite(g_early.text, 1, g_early.text_len, stderr);
    } else {
        kt_snapshot_t *snap = NULL;
        char err[256] = "";
        ktcli_progress_t progress; /* a large snapshot takes a while to read and convert: say so on a terminal */
        ktcli_progress_begin(&progress, "ktiming run", "reading the program's snapshot", NULL);
        /* the summary and the JSON copy need no spans; the trace and the HTML report do */
        kt_load_opts_t lo = {.skip_spans = !o->trace && !o->html};
        snap = early_take(primary);
        int rc = snap ? 0 : kt_snapshot_load(primary, &lo, &snap, err, sizeof err);
        if (rc == 0)
            ktcli_progress_stage(&progress, "writing the outputs");
        if (rc != 0) {
            ktcli_progress_end(&progress);
            fprintf(stderr, "ktiming run: cannot read the program's snapshot: %s\n", err[0] ? err : kt_strerror(rc));
            return -1;
        }
        /* moved into place, not copied, where it can be, and not fsynced: the run is a measurement to repeat, and
         * the copy and fsync of a 0.7 MB timeline were ~2% of a 100 ms program's run (docs/safety.md) */
        if (o->output && kt_output_place(primary, o->output, KT_OUTPUT_NOSYNC) != 0) {
            fprintf(stderr, "ktiming run: cannot write %s: %s\n", o->output, strerror(errno));
            keep_snapshot(primary);
            bad = 1;
        }
        if (o->trace && write_as("trace", o->trace, snap, KT_FORMAT_CHROME) != 0)
            bad = 1;
        if (o->html && write_as("HTML report", o->html, snap, KT_FORMAT_HTML) != 0)
            bad = 1;
        if (bad && !g_keep_run_dir && access(primary, F_OK) == 0) /* not placed at -o: the only copy */
            keep_snapshot(primary);
        ktcli_progress_end(&progress);
        print_summary(o, snap);
        kt_snapshot_free(snap);
    }
    say_others(o, others, kept, run_dir);
    return bad ? -1 : 0;
}

/* Where the run directory goes: TMPDIR when set; else /dev/shm when it is a tmpfs we can write with room to
 * spare (RUN_SHM_MIN_FREE), else /tmp. The directory only holds the processes' snapshots until they are read:
 * on a tmpfs they are written and read without the disk, and removing the directory takes 0.006 ms instead of
 * 0.2-0.25 ms (an ext4 root mounted with `discard` on the 2-core VM, where the rmdir waits for the block
 * layer, after the program has ended). A small /dev/shm (64 MB in a container by default) is left alone. */
#define RUN_SHM "/dev/shm"
#define RUN_SHM_MIN_FREE (1024ull * 1024 * 1024)
#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif
static const char *run_dir_base(void)
{
    static char real[PATH_MAX];
    const char *tmp = kt__env_any("TMPDIR");
    if (tmp && *tmp) /* made absolute: the program writes into the run directory after it may have changed directory */
        return tmp[0] != '/' && realpath(tmp, real) ? real : tmp;
    struct statfs fs;
    if (statfs(RUN_SHM, &fs) == 0 && (unsigned long)fs.f_type == (unsigned long)TMPFS_MAGIC &&
        (unsigned long long)fs.f_bavail * (unsigned long long)fs.f_bsize >= RUN_SHM_MIN_FREE &&
        access(RUN_SHM, W_OK | X_OK) == 0)
        return RUN_SHM;
    return "/tmp";
}

static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char path[PATH_MAX];
    while (d && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (path_join(path, sizeof path, dir, de->d_name) == 0)
            unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

/* Run directories are named RUN_DIR_PREFIX<pid of run>.XXXXXX. One whose `ktiming run` is gone (killed by
 * SIGKILL: no chance to clean up) and that holds no snapshot is removed by the next run in the same base
 * directory; one holding a snapshot was announced (keep_snapshot) and is the user's to remove. */
#define RUN_DIR_PREFIX "ktiming-run."

static int dir_has_snapshot(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int found = 0;
    while (d && !found && (de = readdir(d))) {
        size_t len = strlen(de->d_name);
        found = len > 5 && !strcmp(de->d_name + len - 5, ".json");
    }
    if (d)
        closedir(d);
    return found;
}

static void remove_dir(const char *dir);

static void remove_stale_run_dirs(const char *base)
{
    DIR *d = opendir(base);
    struct dirent *de;
    size_t pl = strlen(RUN_DIR_PREFIX);
    while (d && (de = readdir(d))) {
        char *end;
        if (strncmp(de->d_name, RUN_DIR_PREFIX, pl) != 0)
            continue;
        long pid = strtol(de->d_name + pl, &end, 10);
        char path[PATH_MAX];
        struct stat st;
        if (end == de->d_name + pl || *end != '.' || strlen(end + 1) != 6 || pid <= 0 || pid == (long)getpid() ||
            path_join(path, sizeof path, base, de->d_name) != 0 || lstat(path, &st) != 0 || !S_ISDIR(st.st_mode) ||
            st.st_uid != geteuid())
            continue;
        if ((kill((pid_t)pid, 0) == 0 || errno != ESRCH) || dir_has_snapshot(path))
            continue;
        remove_dir(path);
    }
    if (d)
        closedir(d);
}

/* An output whose directory does not exist (or cannot be written) is said before the program runs, not after
 * (its whole run lost). The template is expanded with run's pid for %p: only the directory part matters. */
static int check_output_dir(const char *what, const char *tmpl)
{
    char path[PATH_MAX];
    if (!tmpl || kt_path_expand(tmpl, (long)getpid(), path, sizeof path) != 0)
        return 0; /* a template that does not expand is reported where it is used */
    char *slash = strrchr(path, '/');
    if (!slash)
        return 0; /* the current directory */
    if (slash == path)
        slash[1] = '\0';
    else
        *slash = '\0';
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "ktiming run: cannot write %s %s: directory %s %s\n", what, tmpl, path,
                errno == ENOENT ? "does not exist" : strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr, "ktiming run: cannot write %s %s: %s is not a directory\n", what, tmpl, path);
        return -1;
    }
    if (access(path, W_OK | X_OK) != 0) {
        fprintf(stderr, "ktiming run: cannot write %s %s: directory %s: %s\n", what, tmpl, path, strerror(errno));
        return -1;
    }
    return 0;
}

int ktcli_cmd_run(int argc, char **argv)
{
    static const struct option kLong[] = {
        {"output", required_argument, NULL, 'o'}, {"trace", required_argument, NULL, 't'},
        {"html", required_argument, NULL, 'H'},   {"format", required_argument, NULL, 'f'},
        {"verbose", no_argument, NULL, 'v'},      {"opencl", required_argument, NULL, 'C'},
        {"vulkan", required_argument, NULL, 'K'}, {"cuda", required_argument, NULL, 'U'},
        {"mpi", no_argument, NULL, 'M'},          {"merged", required_argument, NULL, 'm'},
        {"by-config", no_argument, NULL, 'c'},    {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    run_opts_t o = {.format = "text", .opencl = RUN_AUTO, .vulkan = RUN_AUTO, .cuda = RUN_AUTO};
    int c;
    optind = 1;
    opterr = 0; /* our own one-line errors below, not getopt's */
    /* '+': stop at the first non-option, so the program's own options are left alone */
    while ((c = getopt_long(argc, argv, "+:o:f:cvh", kLong, NULL)) != -1) {
        switch (c) {
        case 'o': o.output = optarg; break;
        case 't': o.trace = optarg; break;
        case 'H': o.html = optarg; break;
        case 'f':
            if (strcmp(optarg, "text") && strcmp(optarg, "markdown") && strcmp(optarg, "md") && strcmp(optarg, "csv") &&
                strcmp(optarg, "json") && strcmp(optarg, "lines") && strcmp(optarg, "none")) {
                fprintf(stderr, "ktiming run: unknown summary format '%s' (text, markdown, csv, json, lines, none)\n",
                        optarg);
                return KTCLI_RUN_ERROR;
            }
            o.format = optarg;
            break;
        case 'v': o.verbose = 1; break;
        case 'c': o.by_config = 1; break;
        case 'C':
            if (parse_mode(optarg, &o.opencl) != 0 || o.opencl == RUN_ON) {
                fprintf(stderr, "ktiming run: --opencl takes auto, layer, preload or off\n");
                return KTCLI_RUN_ERROR;
            }
            break;
        case 'K':
            if (parse_mode(optarg, &o.vulkan) != 0 || o.vulkan == RUN_PRELOAD || o.vulkan == RUN_ON) {
                fprintf(stderr, "ktiming run: --vulkan takes auto or off\n");
                return KTCLI_RUN_ERROR;
            }
            break;
        case 'U':
            if (parse_mode(optarg, &o.cuda) != 0 || (o.cuda != RUN_AUTO && o.cuda != RUN_ON && o.cuda != RUN_OFF)) {
                fprintf(stderr, "ktiming run: --cuda takes auto, on or off\n");
                return KTCLI_RUN_ERROR;
            }
            break;
        case 'M': o.mpi = 1; break;
        case 'm': o.merged = optarg; break;
        case 'h': usage(stdout); return 0;
        default: ktcli_getopt_error("run", c, argc, argv); return KTCLI_RUN_ERROR;
        }
    }
    if (optind >= argc) {
        ktcli_usage_error("run", "no program to run (ktiming run [options] -- PROGRAM [ARGS...])");
        return KTCLI_RUN_ERROR;
    }
    const char *outs[3] = {o.output, o.trace, o.html};
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++)
            if (outs[i] && outs[j] && kt_output_same(outs[i], outs[j])) {
                fprintf(stderr, "ktiming run: two outputs name the same file (%s)\n", outs[j]);
                return KTCLI_RUN_ERROR;
            }
    if (check_output_dir("output", o.output) || check_output_dir("trace", o.trace) ||
        check_output_dir("HTML report", o.html))
        return KTCLI_RUN_ERROR;
    char dir[PATH_MAX];
    if (intercept_dir(dir, sizeof dir) != 0) {
        fprintf(stderr, "ktiming run: interception libraries not found (set KTIMING_INTERCEPT_DIR)\n");
        return KTCLI_RUN_ERROR;
    }
    const char *base = run_dir_base();
    char run_dir[PATH_MAX];
    remove_stale_run_dirs(base);
    int rn = snprintf(run_dir, sizeof run_dir, "%s/" RUN_DIR_PREFIX "%ld.XXXXXX", base, (long)getpid());
    if (rn < 0 || (size_t)rn >= sizeof run_dir)
        errno = ENAMETOOLONG;
    if (rn < 0 || (size_t)rn >= sizeof run_dir || !mkdtemp(run_dir)) {
        fprintf(stderr, "ktiming run: cannot create a directory in %s: %s\n", base, strerror(errno));
        return KTCLI_RUN_ERROR;
    }
    int env_rc = setup_env(&o, dir, run_dir);
    if (env_rc != 0) {
        if (env_rc == -1)
            fprintf(stderr, "ktiming run: cannot set up the environment\n");
        remove_dir(run_dir);
        return KTCLI_RUN_ERROR;
    }
    /* crash survival: the program records into memory run can read after it is gone */
    unsigned long long limit_kib;
    size_t arena = arena_bytes(&limit_kib);
    if (!arena) {
        fprintf(stderr, "ktiming run: crash survival off: ulimit -v %llu leaves no room for the run arena; if the "
                        "program dies without exiting, its timings are lost\n", limit_kib);
        unsetenv(KT_ENV_NAME(RUN_ARENA));
    } else if (kt_run_arena_create(arena, &g_arena) != 0 ||
               setenv(KT_ENV_NAME(RUN_ARENA), kt_run_arena_env(g_arena), 1) != 0) {
        fprintf(stderr, "ktiming run: crash survival off (no run arena: %s); if the program dies without exiting, its "
                        "timings are lost\n", strerror(errno));
        kt_run_arena_close(g_arena);
        g_arena = NULL;
        unsetenv(KT_ENV_NAME(RUN_ARENA));
    } else if (o.verbose && limit_kib) {
        fprintf(stderr, "ktiming run: run arena %zu MiB (an eighth of ulimit -v %llu KiB)\n", arena >> 20, limit_kib);
    }
    pid_t child = 0;
    int fifo = open_run_fifo(run_dir);
    int status = run_program(argv + optind, &child, fifo, run_dir, &o);
    if (fifo >= 0)
        close(fifo);
    /* a program that could not be started (run_program said why) timed nothing: no second message; one that
     * started and then exited 126 or 127 itself is reported as any other */
    int rc = child > 0 ? report(&o, run_dir, child, g_status) : 0;
    kt_run_arena_close(g_arena);
    g_arena = NULL;
    early_clear(); /* read early but not used (report took it otherwise) */
    if (!g_keep_run_dir)
        remove_dir(run_dir);
    /* the program's status wins; a failure to write what was asked for shows when the program succeeded */
    return status != 0 ? status : (rc != 0 ? KTCLI_RUN_ERROR : 0);
}
