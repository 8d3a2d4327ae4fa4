/* env.h — internal: every KTIMING_* environment variable ktiming reads or sets, once, and kt__env, its one reader. */
#ifndef KT_CORE_ENV_H
#define KT_CORE_ENV_H

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

/* ---------------------------------------------------------------------------------------------------
 * The list (one row per variable: X(ID, what it does)); the variable is "KTIMING_" #ID.
 *
 * Code names a variable with KT_ENV_NAME(ID), never with a string literal: KT_ENV_NAME(CLOCK) is the literal
 * "KTIMING_CLOCK", and a name missing from this list does not compile. Read it with kt__env(KT_ENV_NAME(ID)).
 * docs/ describes each variable where its area is documented; this list is what the code knows.
 * ------------------------------------------------------------------------------------------------- */
#define KT_ENV_LIST(X)                                                                                      \
    /* core */                                                                                              \
    X(CLOCK, "host counter: auto, tsc, monotonic_raw")                                                     \
    X(SPANS, "span log capacity per thread (0 = no spans)")                                                \
    X(EXIT_WAIT_MS, "how long exit and kt_shutdown wait for work in flight (default 2000)")                \
    X(OUTPUT, "snapshot written at exit (path template: %p %h %r)")                                        \
    X(TRACE, "Chrome trace written at exit (path template)")                                               \
    X(REPORT, "text or HTML report written at exit")                                                       \
    X(RUN_DIR, "`ktiming run`: directory the snapshot is left in")                                         \
    X(RUN_ARENA, "`ktiming run`: the memfd the program records into (crash survival)")                     \
    X(ON_CRASH, "write: a program killed by a signal writes KTIMING_OUTPUT from its crash handler")        \
    X(VERBOSE, "comma list; profile_exec or all: one line per completed dispatch")                         \
    X(VERBOSE_SYNC, "1: commands wait for their completion on the enqueuing thread")                       \
    X(LOG, "verbose lines go to this file (path template) instead of stderr")                             \
    X(CHECK, "CPU zones: check begin/end pairing")                                                         \
    X(CPU_THREADS, "CPU dispatch pool size")                                                               \
    /* OpenCL */                                                                                            \
    X(OPENCL_LIBRARY, "path of the OpenCL ICD loader to load")                                             \
    X(OPENCL_TIMEOUT_MS, "how long an OpenCL flush waits")                                                 \
    X(OPENCL_COMPLETION, "callback: profiled commands complete through callbacks")                         \
    X(OPENCL_COMMANDS, "kernels: transfers and other commands untimed")                                    \
    X(OPENCL_COLLECTOR, "OpenCL collector thread setting")                                                 \
    X(CL_INTERCEPT_LOADER, "OpenCL intercept: the real loader")                                            \
    /* Vulkan */                                                                                            \
    X(VULKAN_LIBRARY, "path of the Vulkan loader to load")                                                 \
    X(VULKAN_ONCE, "Vulkan layer: do not set loader data")                                                 \
    X(VULKAN_QUERIES, "Vulkan layer: query pool size")                                                     \
    X(VULKAN_SCENE_STAMPS, "test hook: 0 times lavapipe as any other device")                              \
    /* CUDA */                                                                                              \
    X(CUDA_LIBRARY, "path of the CUDA driver library to load")                                             \
    X(CUDA_SYNC, "1: CUDA dispatches are waited for on the launching thread")                              \
    X(CUDA_PER_THREAD_STREAM, "1: the program uses per-thread default streams")                            \
    X(CUDA_WATCH_RESETS, "1: the CUDA backend holds CUPTI's subscription to learn of resets in time")      \
    X(CUPTI_LIBRARY, "CUPTI injection: path of the libcupti to load")                                      \
    X(CUPTI_SUBSCRIBE, "CUPTI injection: subscriber setting")                                              \
    X(CUPTI_GRAPHS, "CUPTI injection: how graph launches are timed")                                       \
    X(CUPTI_FLUSH_MS, "CUPTI injection: activity flush period")                                            \
    /* MPI */                                                                                               \
    X(MPI, "MPI: gather snapshots on rank 0")                                                              \
    X(MPI_OUTPUT, "MPI: merged snapshot path")                                                             \
    X(MPI_TRACE, "MPI: merged Chrome trace path")                                                          \
    X(MPI_SPAN_RANKS, "MPI: which ranks keep spans in the merge")                                          \
    X(TEST_CLOCK_OFFSET_NS, "test hook: offset added to this rank's clock (test builds)")                  \
    /* tools */                                                                                             \
    X(INTERCEPT_DIR, "`ktiming run`: directory of the intercept libraries")                               \
    X(RUN_VERBOSE, "`ktiming run -v`: intercepts print setup notes")                                       \
    X(HISTORY, "`ktiming history`: database path")

/* KT__ENV_<ID>: the row's index (KT__ENV_COUNT rows). */
typedef enum kt__env_id_t {
#define KT__ENV_ENUM(id, what) KT__ENV_##id,
    KT_ENV_LIST(KT__ENV_ENUM)
#undef KT__ENV_ENUM
        KT__ENV_COUNT
} kt__env_id_t;

/* The variable's name as a string literal, checked against the list at compile time. */
#define KT_ENV_NAME(id) ((void)KT__ENV_##id, "KTIMING_" #id)

/* The name of row `id` ("KTIMING_CLOCK"), NULL out of range. */
static inline const char *kt__env_name(kt__env_id_t id)
{
    static const char *const names[] = {
#define KT__ENV_STR(id, what) "KTIMING_" #id,
        KT_ENV_LIST(KT__ENV_STR)
#undef KT__ENV_STR
    };
    return (unsigned)id < (unsigned)KT__ENV_COUNT ? names[id] : NULL;
}

/* ---------------------------------------------------------------------------------------------------
 * The one reader
 *
 * kt__env is getenv for ktiming's variables: NULL in secure-execution mode (setuid/setgid/capabilities: glibc's
 * secure_getenv), so a privileged program built with ktiming never obeys its caller's environment. Every read of
 * a KTIMING_* variable (library, intercepts, CLI) goes through it; tests/core/check_getenv.sh fails the build's
 * tests on any other getenv/secure_getenv in src/ and tools/ (launcher variables such as OMPI_COMM_WORLD_RANK and
 * TMPDIR are read with kt__env_any). Inline, so the intercepts and the CLI use it without linking the library's
 * internal symbols.
 * ------------------------------------------------------------------------------------------------- */
extern char *secure_getenv(const char *name); /* glibc; declared here so no file needs _GNU_SOURCE for it */
extern char *getenv(const char *name);

static inline const char *kt__env(const char *name) { return secure_getenv(name); }

/* Variables that are not ktiming's (set by launchers, shells, other libraries: OMPI_COMM_WORLD_RANK, TMPDIR,
 * LANG, CUDA_INJECTION64_PATH): read as any program reads them, secure-execution mode or not, exactly as plain
 * getenv. Never for a KTIMING_* name. */
static inline const char *kt__env_any(const char *name) { return getenv(name); }

/* A KTIMING_* count of milliseconds (KTIMING_EXIT_WAIT_MS, KTIMING_CUPTI_FLUSH_MS, ...): its value when it is a
 * whole decimal number of at most `max`, else `dflt` (unset, empty, a sign, trailing characters, out of range), so
 * a mistyped value means the documented default, never 0 nor a wrapped huge wait. */
static inline unsigned long long kt__env_ms(const char *name, unsigned long long dflt, unsigned long long max)
{
    const char *e = kt__env(name);
    if (!e || e[0] < '0' || e[0] > '9')
        return dflt;
    char *end;
    int saved = errno;
    errno = 0;
    unsigned long long ms = strtoull(e, &end, 10);
    int bad = errno || *end || ms > max;
    errno = saved;
    return bad ? dflt : ms;
}

#endif
