/* test_cuda_cupti_inject.c — the CUPTI injection library builds as a loadable shared object exporting
 * InitializeInjection (what CUDA_INJECTION64_PATH needs); where no CUDA driver can be loaded, calling it reports
 * failure (0) instead of crashing and the process writes no `ktiming run` snapshot; with the CUPTI test double it
 * flushes CUPTI's buffers at exit before writing KTIMING_RUN_DIR/<pid>.json, and that snapshot shows the records
 * were handled as a real CUPTI needs: placed on the host timeline although CUPTI's REALTIME stepped (timestamp
 * callback), delivered in several buffers, C++ names demangled, zero-timing records counted as dropped, copies and
 * memsets as their own entries with bytes (a memset timed though copies are refused), tracks per (context,
 * stream), latency timestamps and the timestamp callback configured; a context destroyed has its records
 * delivered then (CUPTI resource callback), or at exit when another CUPTI client holds the callback subscription.
 * Graph launches are one dispatch each ("graph <id>", CUPTI's graph-level records) by default, their nodes one by
 * one with KTIMING_CUPTI_GRAPHS=node. Its recording is checked on a GPU by tests/gpu/run.sh. The program's
 * synchronisation calls are host API time (host-api entries, the outermost call only) while the library holds
 * CUPTI's subscription, and none without it. The flusher thread flushes completed records only (flag 0), is named
 * and blocks signals; records from CUPTI's own thread, the flusher and the exit flush are each recorded once;
 * records CUPTI dropped are counted, those after its last buffer too. On a driver older than its CUPTI the
 * start-up message names the driver's CUDA version, libcuda loaded RTLD_LOCAL; a CUPTI of another CUDA major is
 * refused. A child forked from the program writes what it timed itself, none of its parent's CUPTI records. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>
#include <dirent.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ktiming.h>
#include <ktiming/analysis.h>

#include "shared/cupti_subscribe.h"
#include "support/files.h"

static uint64_t raw_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int driver_installed(void)
{
    void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (driver)
        dlclose(driver);
    return driver != NULL;
}

static void test_exports_initialize_injection(void **state)
{
    (void)state;
    const char *path = getenv("KT_TEST_CUPTI_INJECT");
    assert_non_null(path);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        print_message("dlopen: %s\n", dlerror());
    assert_non_null(lib);
    int (*init)(void) = NULL;
    *(void **)&init = dlsym(lib, "InitializeInjection");
    assert_non_null(init);
    /* Internal helpers stay hidden. */
    assert_null(dlsym(lib, "buffer_completed"));

    if (driver_installed()) {
        print_message("a CUDA driver is installed: InitializeInjection is not called by this test\n");
    } else { /* in a child: the libcupti it loads stays loaded, and the children below load the double instead */
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
            _exit(init() == 0 ? 0 : 1);
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    dlclose(lib);
}

/* What the child does after InitializeInjection. */
typedef enum child_mode_t {
    CHILD_EXIT = 0,          /* exit at once */
    CHILD_DESTROY = 1,       /* the test double destroys context 1 first */
    CHILD_DESTROY_OTHER = 2, /* the same while another CUPTI client holds the one callback subscription */
    CHILD_NODES = 3,         /* exit at once, with KTIMING_CUPTI_GRAPHS=node */
    CHILD_LIVE = 4,          /* wait (up to 3 s) until its own kt_snapshot holds CUPTI's records, then _exit:
                                status 50 + found (+ 2 when the running command was handed over meanwhile, + 4
                                when no thread is named kt-cupti-flush with the program's signals blocked), no
                                exit handler, no snapshot */
    CHILD_OTHER_CLIENT = 5,  /* a profiler in the program replaces the activity callbacks, then exit */
    CHILD_DESTROY_NOSUB = 6, /* CHILD_DESTROY with KTIMING_CUPTI_SUBSCRIBE=0 */
    CHILD_IDENTITY = 7,      /* flush CUPTI, then check its own snapshot's device identities: status 70 + ok */
    CHILD_PROFILER = 8,      /* a profiler in the program subscribes (cuptiSubscribe_v2): status 80 + told who
                                holds the subscription and how to free it */
    CHILD_OLD_DRIVER = 9,    /* a CUDA 12.4 driver (the driver double as libcuda.so.1) loaded RTLD_LOCAL first, as
                                nvcc's static cudart loads it: CUPTI refuses the activity setup */
    CHILD_FORK = 10,         /* forks; the grandchild times a zone of its own and exit()s, then the child exits:
                                status 60 + the grandchild exited 0 */
    CHILD_SHORT = 11,        /* CUPTI honours 2 records a buffer (KT_TEST_CUPTI_SHORT): flush, check its own
                                snapshot's drops, then exit: status 90 + they were counted while it ran */
    CHILD_LATE_DROPS = 12,   /* exit at once; CUPTI drops 3 records after the last buffer it returns */
    CHILD_WORKER = 13,       /* CUPTI's own thread delivers every 5 ms, the flusher every 20 ms: launches kernels
                                until both delivered some, a last few, says how many on stderr, exits: status
                                120 + both delivered */
    CHILD_NO_MEMCPY = 14,    /* exit at once; CUPTI refuses memory copy activity (KT_TEST_CUPTI_REFUSE_KIND) */
    CHILD_CUPTI12 = 15,      /* KTIMING_CUPTI_LIBRARY names a CUPTI of CUDA 12 (the double says API version 28) */
    CHILD_HELD = 16,         /* the flusher every 20 ms: launches kernels behind the command in flight, checks its
                                own snapshot, exits: status 130 + only those sharing its buffer were held back */
    CHILD_SLOW_WORKER = 17,  /* CUPTI's own thread hands buffers over outside its lock and stays 300 ms in the
                                library's callback: exit while it is inside, status 140 + it was */
} child_mode_t;

/* In a child with KTIMING_RUN_DIR=run_dir: loads `first` (RTLD_GLOBAL) when given, then the injection library,
 * calls InitializeInjection and exits normally (exit handlers run); its exit status is 10 + the result, or with a
 * context destroyed, 30 + the records CUPTI delivered during the destroy. Returns that status and the child's
 * pid. */
static const char *g_child_stderr; /* when set, the child's stderr goes to this file */

/* The double's count of finished cuptiActivityFlushAll calls (the flusher thread's, in CHILD_LIVE). */
static unsigned long child_flushes_done(void)
{
    unsigned long (*done)(void) = NULL;
    *(void **)&done = dlsym(RTLD_DEFAULT, "kt_test_cupti_flushes");
    return done ? done() : 0;
}

/* In the child: a thread of this process named `name` blocks the signals a program uses (SIGINT, SIGUSR1,
 * SIGALRM, SIGTERM, SIGPROF), so none is delivered to it. 1 when so. */
static int thread_blocks_signals(const char *name)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *de;
    int ok = 0;
    while (d && !ok && (de = readdir(d))) {
        char path[300], *text;
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", de->d_name);
        if (de->d_name[0] == '.' || !(text = ktt_read_file(path, NULL)))
            continue;
        int named = !strncmp(text, name, strlen(name)) && text[strlen(name)] == '\n';
        free(text);
        snprintf(path, sizeof path, "/proc/self/task/%s/status", de->d_name);
        char *status = named ? ktt_read_file(path, NULL) : NULL;
        const char *blk = status ? strstr(status, "\nSigBlk:\t") : NULL;
        if (blk) {
            unsigned long long mask = strtoull(blk + strlen("\nSigBlk:\t"), NULL, 16);
            static const int sigs[] = {SIGINT, SIGUSR1, SIGALRM, SIGTERM, SIGPROF};
            ok = 1;
            for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
                ok &= (mask >> (sigs[i] - 1)) & 1;
        }
        free(status);
    }
    if (d)
        closedir(d);
    return ok;
}

/* In the child: the dispatches its own snapshot holds of `name` (CUDA); *seen: it has an entry (a drop makes one). */
static uint64_t child_recorded(const char *name, int *seen)
{
    kt_snapshot_t *snap = kt_snapshot();
    const kt_kernel_timing_t *e = kt_snapshot_find(snap, name, KT_BACKEND_CUDA, NULL);
    uint64_t n = e ? e->dispatch_count : 0;
    if (seen)
        *seen = e != NULL;
    kt_snapshot_free(snap);
    return n;
}

/* In the child, the flusher running: waits (up to 3 s) until its own snapshot holds at least `n` dispatches of
 * `name`, then until the flush that delivered them has returned (a flush then finished after they arrived). 1 when
 * they arrived. */
static int child_await(const char *name, uint64_t n)
{
    int found = 0;
    for (int i = 0; i < 300 && !(found = child_recorded(name, NULL) >= n); i++)
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    if (!found)
        return 0;
    unsigned long before = child_flushes_done();
    for (int i = 0; i < 300 && child_flushes_done() == before; i++)
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    return 1;
}

/* In the child, the flusher every 20 ms: waits (up to 3 s) until its own snapshot holds CUPTI's completed records,
 * then until the flush that delivered them has returned, and looks again: the command still running must not
 * have been handed over (untimed, a "no timing" drop), which only a forced flush does. 50 + found, + 2 when it
 * was. */
static int child_live_status(void)
{
    if (!child_await("kt_fake_cupti_kernel", 1))
        return 50;
    int running = 0;
    child_recorded("kt_fake_running", &running);
    return 51 + 2 * running + 4 * !thread_blocks_signals("kt-cupti-flush");
}

/* docs/cuda.md's bound: a buffer takes at most 128 records, so a command in flight holds back at most the 127
 * completed records that share its buffer. */
#define HELD_BUFFER_RECORDS 128u
#define HELD_LAUNCHED 300u

/* In the child (CHILD_HELD), the flusher every 20 ms: once the double's first records arrived (its command in flight
 * is placed right after them, first in a buffer), the program launches HELD_LAUNCHED kernels that complete at once,
 * placed after it in order: the first 127 share its buffer, the rest fill two more. Waits (up to 3 s) until its own
 * snapshot holds those 173, then for one more flush, and looks again: exactly 173 recorded (the 127 held back, not
 * lost: the exit flush hands them over), the command in flight not handed over. 1 when so. */
static int child_held_back_bounded(void)
{
    void (*launch)(size_t) = NULL;
    *(void **)&launch = dlsym(RTLD_DEFAULT, "kt_test_cupti_launch");
    if (!launch || !child_await("kt_fake_cupti_kernel", 1))
        return 0;
    launch(HELD_LAUNCHED);
    uint64_t want = HELD_LAUNCHED - (HELD_BUFFER_RECORDS - 1);
    child_await("kt_fake_stream", want);
    int running = 0;
    uint64_t got = child_recorded("kt_fake_stream", NULL);
    child_recorded("kt_fake_running", &running);
    if (got != want || running)
        fprintf(stderr, "held: %llu of %u recorded, %d in flight handed over\n", (unsigned long long)got,
                HELD_LAUNCHED, running);
    return got == want && !running;
}

/* In the child: the program flushes CUPTI's completed records itself (cuptiActivityFlushAll(0)). 0 when done. */
static int child_flush_completed(void)
{
    int (*flush)(uint32_t) = NULL;
    *(void **)&flush = dlsym(RTLD_DEFAULT, "cuptiActivityFlushAll");
    return flush && flush(0) == 0 ? 0 : -1;
}

/* In the child: CUPTI flushed (the double's DEVICE records delivered), its own snapshot's two CUDA devices carry the
 * identities the library registered from them: the record's UUID as nvidia-smi writes it, a MIG instance's own
 * ("MIG-"), model and ordinal; and the kernels are keyed by them. 1 when all hold. */
static int child_identity_ok(void)
{
    if (child_flush_completed() != 0)
        return 0;
    kt_snapshot_t *snap = kt_snapshot();
    const kt_device_info_t *g0 = kt_snapshot_device(snap, KT_BACKEND_CUDA, "kt fake GPU #0");
    const kt_device_info_t *g1 = kt_snapshot_device(snap, KT_BACKEND_CUDA, "kt fake GPU #1");
    const kt_kernel_timing_t *k1 = kt_snapshot_find(snap, "kt_fake_cupti_kernel", KT_BACKEND_CUDA, NULL);
    int ok = g0 && g1 && k1 && !strcmp(g0->id.id_kind, "uuid") && !strcmp(g1->id.id_kind, "uuid") &&
             !strcasecmp(g0->id.uuid, "GPU-10111213-1415-1617-1819-1a1b1c1d1e1f") &&
             !strcasecmp(g1->id.uuid, "MIG-c0c1c2c3-c4c5-c6c7-c8c9-cacbcccdcecf") &&
             !strcmp(g1->id.model, "kt fake GPU") && !strcmp(g1->id.vendor, "NVIDIA") && g1->id.ordinal == 1 &&
             g0->id.ordinal == 0 && !strcmp(k1->device, g1->name) && strcmp(g0->key, g1->key) != 0;
    if (!ok && g0 && g1)
        fprintf(stderr, "identity: %s %s %s / %s %s %s\n", g0->key, g0->id.id_kind, g0->id.uuid, g1->key,
                g1->id.id_kind, g1->id.uuid);
    kt_snapshot_free(snap);
    return ok;
}

/* With room for 2 records of each batch, the double's completed records (batches of 2, 3, 4, 5 and 3) lose 7,
 * counted in CUPTI's global queue before the buffers holding the rest are handed over: in the child's own snapshot, after a flush of completed
 * records, "(CUPTI records dropped)" holds 7 drops for lack of buffer space. 1 when so. */
#define SHORT_DROPS 7
static int child_short_drops_seen(void)
{
    if (child_flush_completed() != 0)
        return 0;
    kt_snapshot_t *snap = kt_snapshot();
    const kt_kernel_timing_t *e = kt_snapshot_find(snap, "(CUPTI records dropped)", KT_BACKEND_CUDA, NULL);
    int ok = e && e->dropped == SHORT_DROPS && e->dropped_by[KT_DROP_RING_FULL] == SHORT_DROPS;
    if (!ok)
        fprintf(stderr, "short: %llu dropped\n", e ? (unsigned long long)e->dropped : 0ull);
    kt_snapshot_free(snap);
    return ok;
}

/* In the child (CHILD_WORKER): the program launches a kernel a millisecond until the double's worker thread and the
 * library's flusher have each delivered some of them, then WORKER_TAIL more right before exit (what neither
 * thread takes, the exit flush delivers). Says "kt-test launched <n>" on stderr; 1 when both threads delivered. */
#define WORKER_TAIL 20
static int child_launches_delivered(void)
{
    void (*launch)(size_t) = NULL;
    void (*delivered)(size_t *, size_t *) = NULL;
    *(void **)&launch = dlsym(RTLD_DEFAULT, "kt_test_cupti_launch");
    *(void **)&delivered = dlsym(RTLD_DEFAULT, "kt_test_cupti_stream_delivered");
    if (!launch || !delivered)
        return 0;
    size_t launched = 0, by_worker = 0, by_flush = 0;
    for (int i = 0; i < 3000 && !(by_worker && by_flush); i++) {
        launch(1);
        launched++;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
        delivered(&by_worker, &by_flush);
    }
    launch(WORKER_TAIL);
    launched += WORKER_TAIL;
    fprintf(stderr, "kt-test launched %zu\n", launched);
    fflush(stderr);
    return by_worker && by_flush;
}

/* In the child: fork (as a program forks a worker without exec) while CUPTI still holds the child's records, one
 * of them in flight; the grandchild times one zone of its own and leaves through exit(), so every exit handler
 * runs there. 1 when it exited 0. */
static int child_fork_exit(void)
{
    fflush(NULL);
    pid_t g = fork();
    if (g < 0)
        return 0;
    if (g == 0) {
        static kt_kernel_id_t site;
        kt_zone_t z = kt_zone_begin(&site, "kt_grandchild_own");
        kt_zone_end(&z);
        exit(0);
    }
    int st = 0;
    return waitpid(g, &st, 0) == g && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* In the child: a profiler of the program's own (Kineto with CUPTI 13) subscribes while the library holds the
 * slot; CUPTI refuses it and names the holder, whose name says how to free it. 1 when so. */
static int child_profiler_told(void)
{
    int (*subscribe)(void **, void *, void *, kt__cupti_subscriber_params_t *) = NULL;
    *(void **)&subscribe = dlsym(RTLD_DEFAULT, "cuptiSubscribe_v2");
    char holder[KT__CUPTI_HOLDER_NAME_LEN];
    kt__cupti_subscriber_params_t p = kt__cupti_subscriber_params("a profiler", holder);
    void *handle = NULL;
    int r = subscribe ? subscribe(&handle, NULL, NULL, &p) : -1;
    if (r == 0 || strcmp(holder, "CUPTI for " KT__CUPTI_NAME_RUN) != 0) {
        fprintf(stderr, "profiler: cuptiSubscribe_v2 %d, holder \"%s\"\n", r, holder);
        return 0;
    }
    return 1;
}

/* The child's copy of the parent's run directory name, kept reachable: the child exit()s (its exit handlers are
 * under test) while the parent's allocation is still in its heap, which is not the child's leak. volatile: a store
 * nothing reads would be dropped. */
static const char *volatile g_child_run_dir;

/* In the child: `name` set to `value` when `on`, else unset (nothing inherited from the test's environment). */
static void child_env(int on, const char *name, const char *value)
{
    if (on)
        setenv(name, value, 1);
    else
        unsetenv(name);
}

static int child_initialize_mode(const char *run_dir, const char *first, child_mode_t mode, pid_t *pid)
{
    fflush(NULL);
    *pid = fork();
    assert_true(*pid >= 0);
    if (*pid == 0) {
        g_child_run_dir = run_dir;
        if (g_child_stderr && !freopen(g_child_stderr, "w", stderr))
            _exit(5);
        setenv("KTIMING_RUN_DIR", run_dir, 1);
        unsetenv("KTIMING_OUTPUT");
        unsetenv("KTIMING_TRACE");
        unsetenv("KTIMING_REPORT");
        if (mode == CHILD_DESTROY_OTHER) /* a tool that names itself, as CUPTI 13 tells a refused client */
            setenv("KT_TEST_CUPTI_OTHER_SUBSCRIBER", "Nsight Systems", 1);
        child_env(mode == CHILD_DESTROY_NOSUB, "KTIMING_CUPTI_SUBSCRIBE", "0");
        child_env(mode == CHILD_NODES, "KTIMING_CUPTI_GRAPHS", "node");
        child_env(mode == CHILD_SHORT, "KT_TEST_CUPTI_SHORT", "2");
        child_env(mode == CHILD_LATE_DROPS, "KT_TEST_CUPTI_LATE_DROPS", "3");
        child_env(mode == CHILD_CUPTI12, "KT_TEST_CUPTI_VERSION", "28"); /* CUDA 12.9's CUPTI */
        child_env(mode == CHILD_CUPTI12, "KTIMING_CUPTI_LIBRARY", first ? first : "");
        child_env(mode == CHILD_NO_MEMCPY, "KT_TEST_CUPTI_REFUSE_KIND", "1"); /* CUPTI_ACTIVITY_KIND_MEMCPY */
        /* the flusher thread: every 20 ms where the test waits for it, else never within the child's life (so
         * what a destroy or the exit delivers does not depend on scheduling) */
        setenv("KTIMING_CUPTI_FLUSH_MS", mode == CHILD_LIVE || mode == CHILD_WORKER || mode == CHILD_HELD ? "20" : "600000", 1);
        child_env(mode == CHILD_WORKER || mode == CHILD_SLOW_WORKER, "KT_TEST_CUPTI_WORKER_MS", "5");
        child_env(mode == CHILD_SLOW_WORKER, "KT_TEST_CUPTI_WORKER_SLOW_MS", "300");
        if (mode == CHILD_OLD_DRIVER) {
            const char *libcuda = getenv("KT_TEST_FAKE_LIBCUDA");
            setenv("KT_TEST_CUDA_DRIVER_VERSION", "12040", 1);
            if (!libcuda || !dlopen(libcuda, RTLD_NOW | RTLD_LOCAL))
                _exit(7);
        }
        if (first && !dlopen(first, RTLD_NOW | RTLD_GLOBAL))
            _exit(2);
        void *lib = dlopen(getenv("KT_TEST_CUPTI_INJECT"), RTLD_NOW | RTLD_LOCAL);
        int (*init)(void) = NULL;
        if (!lib || !(*(void **)&init = dlsym(lib, "InitializeInjection")))
            _exit(3);
        int rc = init();
        void (*settings)(uint32_t *, int *, int *) = NULL;
        *(void **)&settings = first ? dlsym(RTLD_DEFAULT, "kt_test_cupti_settings") : NULL;
        if (settings && rc == 1) { /* what the library asked of CUPTI: latency stamps, its own clock */
            uint32_t period = 0;
            int latency = 0, clock_cb = 0;
            settings(&period, &latency, &clock_cb);
            if (!latency || !clock_cb)
                rc += 100;
        }
        if (mode == CHILD_LIVE)
            _exit(child_live_status());
        int (*waits)(void) = NULL;
        *(void **)&waits = first ? dlsym(RTLD_DEFAULT, "kt_test_cupti_program_waits") : NULL;
        if (waits)
            waits(); /* the program synchronises: host API time, where the library holds the subscription */
        if (mode == CHILD_IDENTITY)
            _exit(70 + child_identity_ok());
        if (mode == CHILD_PROFILER)
            _exit(80 + child_profiler_told());
        if (mode == CHILD_FORK)
            exit(60 + child_fork_exit());
        if (mode == CHILD_SHORT)
            exit(90 + child_short_drops_seen());
        if (mode == CHILD_WORKER)
            exit(120 + child_launches_delivered());
        if (mode == CHILD_HELD)
            exit(130 + child_held_back_bounded());
        if (mode == CHILD_SLOW_WORKER) {
            int (*inside)(void) = NULL;
            *(void **)&inside = dlsym(RTLD_DEFAULT, "kt_test_cupti_wait_slow_delivery");
            exit(140 + (inside && inside()));
        }
        if (mode == CHILD_DESTROY_NOSUB) { /* the program's own profiler can still subscribe */
            int (*subscribe)(void **, void *, void *) = NULL;
            *(void **)&subscribe = dlsym(RTLD_DEFAULT, "cuptiSubscribe");
            void *handle = NULL;
            if (!subscribe || subscribe(&handle, NULL, NULL) != 0)
                _exit(6);
        }
        if (mode == CHILD_OTHER_CLIENT) {
            void (*other)(void) = NULL;
            *(void **)&other = dlsym(RTLD_DEFAULT, "kt_test_cupti_other_client");
            if (!other)
                _exit(4);
            other();
        }
        size_t (*destroy)(uint32_t) = NULL;
        if (mode == CHILD_DESTROY || mode == CHILD_DESTROY_OTHER || mode == CHILD_DESTROY_NOSUB)
            *(void **)&destroy = dlsym(RTLD_DEFAULT, "kt_test_cupti_destroy_context");
        if (destroy && rc == 1)
            exit(30 + (int)destroy(1));
        exit(10 + rc);
    }
    int st = 0;
    assert_int_equal(waitpid(*pid, &st, 0), *pid);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static int child_initialize(const char *run_dir, const char *first, pid_t *pid)
{
    return child_initialize_mode(run_dir, first, CHILD_EXIT, pid);
}

static uint64_t g_t0, g_t1; /* CLOCK_MONOTONIC_RAW around the child's life */

static size_t count_files(const char *dir)
{
    size_t n = 0;
    DIR *d = opendir(dir);
    struct dirent *de;
    assert_non_null(d);
    while ((de = readdir(d)))
        n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
    closedir(d);
    return n;
}

/* Without a driver, InitializeInjection fails and the process's exit writes nothing for `ktiming run` (which then
 * says "nothing was timed"), rather than an empty or partial snapshot. */
/* How often `needle` occurs in the file at `path` (which is then removed). */
static int count_in_file(const char *path, const char *needle)
{
    char *text = ktt_read_file(path, NULL);
    unlink(path);
    int n = 0;
    for (const char *p = text; p && (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    free(text);
    return n;
}

/* A private stderr file for a child (the caller removes it through count_in_file). */
static void child_err_path(char *path, size_t size, const char *tag)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(path, size, "%s/kt-cupti-%s-%ld.err", tmp && tmp[0] ? tmp : "/tmp", tag, (long)getpid());
}

/* libcupti is found at run time, by soname, not through a DT_NEEDED with a RUNPATH into the build machine's CUDA
 * toolkit: loading the library loads no CUPTI (checked in a child, which has loaded none before), and a CUPTI that
 * cannot be loaded is said on stderr, naming the library and the driver its CUPTI needs; nothing is timed. */
static void test_cupti_loaded_at_run_time(void **state)
{
    (void)state;
    const char *soname = getenv("KT_TEST_CUPTI_SONAME");
    assert_non_null(soname);
    char *dir = ktt_tmpdir("cupti-missing");
    assert_non_null(dir);
    char *err = ktt_path(dir, "stderr");
    assert_non_null(err);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (!freopen(err, "w", stderr))
            _exit(5);
        void *lib = dlopen(getenv("KT_TEST_CUPTI_INJECT"), RTLD_NOW | RTLD_LOCAL);
        int (*init)(void) = NULL;
        if (!lib || !(*(void **)&init = dlsym(lib, "InitializeInjection")))
            _exit(3);
        if (dlopen(soname, RTLD_NOW | RTLD_NOLOAD))
            _exit(20); /* linked: loaded with the library */
        setenv("KTIMING_CUPTI_LIBRARY", "/nonexistent/libcupti.so.13", 1);
        int rc = init();
        fflush(stderr); /* _exit flushes nothing */
        _exit(rc == 0 ? 0 : 21);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    char *text = ktt_read_file(err, NULL);
    assert_non_null(text);
    print_message("%s", text ? text : ""); /* the compiler cannot see that a failed assert does not return */
    assert_non_null(strstr(text, "ktiming-cupti: cannot load /nonexistent/libcupti.so.13 ("));
    assert_non_null(strstr(text, "nothing is timed"));
    assert_non_null(strstr(text, "needs an NVIDIA driver for CUDA "));
    assert_non_null(strstr(text, "KTIMING_CUPTI_LIBRARY"));
    assert_int_equal(count_in_file(err, "ktiming-cupti:"), 1); /* one line */
    free(text);
    free(err);
    ktt_rmtree(dir);
    free(dir);
}

static void test_no_driver_writes_no_snapshot(void **state)
{
    (void)state;
    if (driver_installed())
        skip();
    char *dir = ktt_tmpdir("cupti-run");
    assert_non_null(dir);
    char err[4200];
    snprintf(err, sizeof err, "%s.err", dir ? dir : "");
    g_child_stderr = err;
    pid_t pid = 0;
    assert_int_equal(child_initialize(dir, NULL, &pid), 10);
    g_child_stderr = NULL;
    assert_int_equal(count_files(dir), 0);
    /* Issue 36.8: it says at start-up why nothing is timed, and which driver the library needs. */
    assert_int_equal(count_in_file(err, "nothing is timed (no CUDA driver answered; this library was built with CUDA "), 1);
    ktt_rmtree(dir);
    free(dir);
}

/* The dispatch count of entry `name` in the JSON text, -1 when it is absent. */
static long long entry_count(const char *json, const char *name)
{
    char key[128];
    snprintf(key, sizeof key, "\"%s\"", name);
    const char *e = strstr(json, key);
    if (!e)
        return -1;
    const char *c = strstr(e, "\"dispatch_count\": ");
    return c ? strtoll(c + strlen("\"dispatch_count\": "), NULL, 10) : -1;
}

/* Entry `name` of the JSON text holds `text` (before the next entry begins). */
static int entry_has(const char *json, const char *name, const char *text)
{
    char key[128];
    snprintf(key, sizeof key, "\"%s\"", name);
    const char *e = strstr(json, key);
    if (!e)
        return 0;
    const char *next = strstr(e + 1, "{\"name\"");
    const char *t = strstr(e, text);
    return t && (!next || t < next);
}

/* The snapshot in the JSON text (fails the test when it does not parse). */
static kt_snapshot_t *parse_snapshot(const char *json)
{
    kt_snapshot_t *snap = NULL;
    char err[256];
    if (kt_snapshot_parse(json, strlen(json), &snap, err, sizeof err) != 0)
        fail_msg("snapshot: %s", err);
    return snap;
}

/* Issue 40.2: the configurations of CUPTI's kernel records (grid, block) travel with each dispatch, through the
 * child's JSON: kt_fake_configured has exactly two rows, 3 launches of 128x1x1 / 256x1x1 (1000 ns each) and 2 of
 * 16x8x1 / 32x8x1 (2000 ns each), largest total first; a record without a grid, and a copy, have none. */
static void check_configs(const kt_snapshot_t *snap)
{
    const kt_kernel_timing_t *e = kt_snapshot_find(snap, "kt_fake_configured", KT_BACKEND_CUDA, NULL);
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 5);
    assert_int_equal(e->config_count, 2);
    static const struct {
        uint64_t size[3], local[3], count, total;
    } want[2] = {{{16, 8, 1}, {32, 8, 1}, 2, 4000}, {{128, 1, 1}, {256, 1, 1}, 3, 3000}};
    for (int i = 0; i < 2; i++) {
        const kt_config_timing_t *c = &e->configs[i];
        print_message("config %d: kind %u dims %u grid %llux%llux%llu block %llux%llux%llu: %llu dispatches, %llu ns\n",
                      i, c->launch.kind, c->launch.dims, (unsigned long long)c->launch.size[0],
                      (unsigned long long)c->launch.size[1], (unsigned long long)c->launch.size[2],
                      (unsigned long long)c->launch.local[0], (unsigned long long)c->launch.local[1],
                      (unsigned long long)c->launch.local[2], (unsigned long long)c->dispatch_count,
                      (unsigned long long)c->total_ns);
        assert_int_equal(c->launch.kind, KT_LAUNCH_GROUPS);
        assert_int_equal(c->launch.dims, 3);
        for (int d = 0; d < 3; d++) {
            assert_int_equal(c->launch.size[d], want[i].size[d]);
            assert_int_equal(c->launch.local[d], want[i].local[d]);
        }
        assert_int_equal(c->dispatch_count, want[i].count);
        assert_int_equal(c->total_ns, want[i].total);
        assert_int_equal(c->min_ns, want[i].total / want[i].count);
        assert_int_equal(c->max_ns, want[i].total / want[i].count);
    }
    static const char *const none[] = {"kt::fake::saxpy_kernel(int, float, float*, float*)", "memcpy HtoD"};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
        e = kt_snapshot_find(snap, none[i], KT_BACKEND_CUDA, NULL);
        assert_non_null(e);
        assert_int_equal(e->config_count, 0);
    }
}

/* The snapshot the child wrote holds the test double's records, each once, handled as a real CUPTI needs; graph
 * launches one dispatch each, or (nodes) their kernels one by one. */
static void check_snapshot(const char *dir, pid_t pid, int nodes, int host_api)
{
    assert_int_equal(count_files(dir), 1);
    char path[4200];
    snprintf(path, sizeof path, "%s/%ld.json", dir, (long)pid);
    char *json = ktt_read_file(path, NULL);
    assert_non_null(json);
    assert_true(entry_has(json, "kt_fake_cupti_kernel", "\"dispatch_count\": 1,")); /* delivered once, recorded once */
    /* Demangled. */
    assert_non_null(strstr(json, "\"kt::fake::saxpy_kernel(int, float, float*, float*)\""));
    assert_null(strstr(json, "_ZN2kt4fake"));
    /* Zero-timing record: dropped ("no timing"), not a 0 ns dispatch. */
    assert_true(entry_has(json, "kt_fake_untimed", "\"dispatch_count\": 0,"));
    assert_true(entry_has(json, "kt_fake_untimed", "\"no_timing\": 1"));
    /* Copies and memsets as their own entries, with bytes. */
    const char *e = strstr(json, "\"memcpy HtoD\"");
    assert_non_null(e);
    assert_non_null(strstr(e, "\"bytes\": 4096"));
    e = strstr(json, "\"memset\"");
    assert_non_null(e);
    assert_non_null(strstr(e, "\"bytes\": 1024"));
    /* Issue 36.8: two kernels whose names CUPTI gave at one address (a module reloaded) stay two kernels. */
    assert_int_equal(entry_count(json, "kt_fake_module_v1"), 1);
    assert_int_equal(entry_count(json, "kt_fake_module_v2"), 1);
    /* Peer-to-peer copies arrive as MEMCPY2 records, timed as transfers (issue 36.4). */
    e = strstr(json, "\"memcpy PtoP\"");
    assert_non_null(e);
    assert_non_null(strstr(e, "\"bytes\": 8192"));
    /* Every buffer came back to the library: none counted as another client's or as still being delivered. */
    assert_null(strstr(json, "(CUPTI buffers"));
    /* The command still running in context 2 went out only with the forced flush at exit, untimed. */
    assert_true(entry_has(json, "kt_fake_running", "\"no_timing\": 1"));
    /* One track per (context, stream): stream 7 of two contexts. */
    assert_non_null(strstr(json, "stream 7 (context 1)"));
    assert_non_null(strstr(json, "stream 7 (context 2)"));
    /* Graph 3 launched twice with two kernel nodes each. */
    assert_non_null(strstr(json, "stream 9 (context 1)"));
    assert_int_equal(entry_count(json, "graph 3"), nodes ? -1 : 2);
    assert_int_equal(entry_count(json, "kt_fake_graph_node"), nodes ? 4 : -1);
    /* Every span placed within the child's life on this host's CLOCK_MONOTONIC_RAW (CUPTI's REALTIME stepped by
     * 30 s meanwhile), kernels with their queued time. */
    kt_snapshot_t *snap = parse_snapshot(json);
    size_t placed = 0, queued = 0, waits = 0;
    for (size_t i = 0; i < snap->span_count; i++) {
        unsigned long long start = snap->spans[i].start_ns;
        const kt_kernel_timing_t *entry = &snap->entries[snap->spans[i].entry];
        if (entry->backend == KT_BACKEND_HOST_API) { /* a wait, on the program's thread, within the child's life */
            assert_true(start >= g_t0 && snap->spans[i].end_ns <= g_t1);
            assert_true(snap->spans[i].duration_ns >= 1000000); /* the double waited at least 1 ms in the call */
            assert_int_equal(snap->spans[i].queue, UINT32_MAX);
            waits++;
            continue;
        }
        print_message("span start %llu within [%llu, %llu]\n", start, (unsigned long long)g_t0,
                      (unsigned long long)g_t1);
        assert_true(start >= g_t0 && start <= g_t1);
        assert_true(snap->spans[i].uncertainty_ns >= 1000); /* issue 36.7: CUPTI interpolates, never exact */
        placed++;
        queued += snap->spans[i].queued_ns != 0;
    }
    /* 4 kernels, 5 of kt_fake_configured, 2 copies, the memset; 2 graphs or 4 nodes */
    assert_int_equal(placed, nodes ? 16u : 14u);
    assert_int_equal(queued, 2);
    /* Issue 40.1: host API time. cudaDeviceSynchronize once (the cuCtxSynchronize it runs inside is not counted
     * twice), cuStreamSynchronize twice, cuEventSynchronize once, nothing for cuLaunchKernel (no wait); none when
     * the library does not hold CUPTI's subscription (KTIMING_CUPTI_SUBSCRIBE=0, another client). */
    assert_int_equal(waits, host_api ? 4u : 0u);
    const kt_kernel_timing_t *w = kt_snapshot_find(snap, "cudaDeviceSynchronize", KT_BACKEND_HOST_API, NULL);
    if (host_api) {
        assert_non_null(w);
        assert_int_equal(w->dispatch_count, 1);
        w = kt_snapshot_find(snap, "cuStreamSynchronize", KT_BACKEND_HOST_API, NULL);
        assert_non_null(w);
        assert_int_equal(w->dispatch_count, 2);
        w = kt_snapshot_find(snap, "cuEventSynchronize", KT_BACKEND_HOST_API, NULL);
        assert_non_null(w);
        assert_int_equal(w->dispatch_count, 1);
    } else {
        assert_null(w);
    }
    assert_null(kt_snapshot_find(snap, "cuCtxSynchronize", KT_BACKEND_HOST_API, NULL));
    assert_null(kt_snapshot_find(snap, "cuLaunchKernel", KT_BACKEND_HOST_API, NULL));
    check_configs(snap);
    /* Issue 36.3: two GPUs of one name stay two devices ("name #<id>"), as the CUDA backend labels them. */
    assert_non_null(kt_snapshot_find(snap, "kt_fake_cupti_kernel", KT_BACKEND_CUDA, "kt fake GPU #1"));
    assert_non_null(kt_snapshot_find(snap, "kt::fake::saxpy_kernel(int, float, float*, float*)", KT_BACKEND_CUDA,
                                     "kt fake GPU #0"));

    kt_snapshot_free(snap);
    free(json);
}

/* Runs a child with the CUPTI test double in `mode`, expects exit status `status`, checks its snapshot. */
static void run_with_double(child_mode_t mode, int status)
{
    const char *fake = getenv("KT_TEST_FAKE_CUPTI");
    if (!fake)
        skip();
    char *dir = ktt_tmpdir("cupti-run");
    assert_non_null(dir);
    pid_t pid = 0;
    g_t0 = raw_now();
    assert_int_equal(child_initialize_mode(dir, fake, mode, &pid), status);
    g_t1 = raw_now();
    check_snapshot(dir, pid, mode == CHILD_NODES, mode != CHILD_DESTROY_OTHER && mode != CHILD_DESTROY_NOSUB);
    ktt_rmtree(dir);
    free(dir);
}

/* With the CUPTI test double, whose records are delivered by cuptiActivityFlushAll only: the snapshot the
 * process writes at exit holds them, so CUPTI was flushed before the snapshot was taken. */
static void test_exit_flushes_then_writes_snapshot(void **state)
{
    (void)state;
    run_with_double(CHILD_EXIT, 11);
}

/* A context destroyed (cuCtxDestroy, cudaDeviceReset): the library's resource callback flushes CUPTI while the
 * context still exists, so all 17 completed records (2 devices, 12, 2 graph launches, the P2P copy) are delivered
 * during the destroy (before: 0, they waited for exit), and the flush at exit delivers none twice. The flush there is not
 * forced (issue 36.4): the command still running in another context is not handed over untimed (it would add
 * 10 to the status). */
static void test_context_destroy_flushes(void **state)
{
    (void)state;
    run_with_double(CHILD_DESTROY, 47);
}

/* KTIMING_CUPTI_SUBSCRIBE=0: the library leaves CUPTI's one subscription free for a profiler of the program's own
 * (holding it, torch.profiler recorded no CUDA event on an H200): nothing is delivered during the destroy, all of it
 * at exit, the subscription is still free afterwards (the child exits 6 otherwise), and no host API time is
 * recorded (it needs the subscription's callbacks). */
static void test_subscription_left_free(void **state)
{
    (void)state;
    run_with_double(CHILD_DESTROY_NOSUB, 30);
}

/* Runs a child with the CUPTI test double in `mode` (skipped without the double), expects exit status `status`,
 * and returns the snapshot it wrote (NULL: none); its run directory is removed. */
static char *run_fake_child(child_mode_t mode, int status)
{
    const char *fake = getenv("KT_TEST_FAKE_CUPTI");
    if (!fake)
        skip();
    char *dir = ktt_tmpdir("cupti-run");
    assert_non_null(dir);
    pid_t pid = 0;
    assert_int_equal(child_initialize_mode(dir, fake, mode, &pid), status);
    char path[4200];
    snprintf(path, sizeof path, "%s/%ld.json", dir ? dir : "", (long)pid);
    char *json = ktt_read_file(path, NULL);
    ktt_rmtree(dir);
    free(dir);
    return json;
}

/* run_fake_child, the child's stderr going to `err` (a private file named for `tag`; count_in_file removes it). */
static char *run_fake_child_said(child_mode_t mode, int status, const char *tag, char *err, size_t size)
{
    child_err_path(err, size, tag);
    g_child_stderr = err;
    char *json = run_fake_child(mode, status);
    g_child_stderr = NULL;
    return json;
}

/* Issue 36.4: records reach the recorder while the program runs. CUPTI's flush period returns only full buffers;
 * the library's flusher thread flushes completed records every period, so a process that then dies without its
 * exit handlers (here _exit) had them recorded. Completed records only (flag 0): the command still running (the
 * double places it after the first records went out, so it holds back none of them; sharing a buffer with it is
 * running_holds_back_its_buffer_only's case) is not handed over untimed while the program runs. The flusher thread is named kt-cupti-flush and the program's
 * signals are blocked in it, as in the core's collector threads. */
static void test_records_arrive_while_running(void **state)
{
    (void)state;
    char *json = run_fake_child(CHILD_LIVE, 51);
    assert_null(json); /* _exit: no snapshot written, the records were seen in the child */
}

/* The `n` kernels the program launched (kt_test_cupti_launch) are each recorded once: none lost, none twice, none
 * dropped. */
static void assert_launched_once(const kt_snapshot_t *snap, uint64_t n)
{
    const kt_kernel_timing_t *e = kt_snapshot_find(snap, "kt_fake_stream", KT_BACKEND_CUDA, NULL);
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, n);
    assert_int_equal(e->dropped, 0);
    assert_null(kt_snapshot_find(snap, "(CUPTI records dropped)", KT_BACKEND_CUDA, NULL));
}

/* A command still in flight (a persistent kernel, one spinning on a host flag) holds back the completed records that
 * share its buffer: a flag-0 flush returns no buffer holding a record in flight, and CUPTI fills buffers in order.
 * With buffers of at most 128 records, the 300 kernels launched behind it are recorded while it runs but for the 127
 * in its buffer (with 1 MiB buffers filled as far as they go, all 300 were held back); the exit flush (forced) then
 * hands over those 127 and the command, untimed: all 300 in the snapshot, none dropped. */
static void test_running_holds_back_its_buffer_only(void **state)
{
    (void)state;
    char *json = run_fake_child(CHILD_HELD, 131);
    assert_non_null(json);
    kt_snapshot_t *snap = parse_snapshot(json);
    assert_launched_once(snap, HELD_LAUNCHED);
    assert_true(entry_has(json, "kt_fake_running", "\"no_timing\": 1"));
    kt_snapshot_free(snap);
    free(json);
}

/* Issue 36.5: a profiler in the program (Kineto) replaces the activity callbacks after the library's: the buffers
 * CUPTI held for ktiming go to it. The loss is counted, not a silent zero. */
static void test_other_client_taking_callbacks_is_counted(void **state)
{
    (void)state;
    char *json = run_fake_child(CHILD_OTHER_CLIENT, 11);
    assert_non_null(json);
    assert_true(entry_has(json, "(CUPTI buffers taken by another client)", "\"dropped\": 1"));
    assert_null(strstr(json, "\"kt_fake_cupti_kernel\""));
    free(json);
}

/* A program that forks a worker and lets it exit() (no exec): the worker writes what it timed itself, none of its
 * parent's CUPTI records (a flush from the child handed them over again, the one still running as a phantom
 * "no timing" drop), and the parent's snapshot still holds them all. */
static void test_forked_child_leaves_cupti_alone(void **state)
{
    (void)state;
    const char *fake = getenv("KT_TEST_FAKE_CUPTI");
    if (!fake)
        skip();
    char *dir = ktt_tmpdir("cupti-fork");
    assert_non_null(dir);
    pid_t pid = 0;
    assert_int_equal(child_initialize_mode(dir, fake, CHILD_FORK, &pid), 61);
    assert_int_equal(count_files(dir), 2);
    char own[64], path[4200];
    snprintf(own, sizeof own, "%ld.json", (long)pid);
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *de;
    char *worker = NULL, *parent = NULL;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (!strcmp(de->d_name, own))
            parent = ktt_read_file(path, NULL);
        else
            worker = ktt_read_file(path, NULL);
    }
    closedir(d);
    assert_non_null(parent);
    assert_non_null(worker);
    assert_int_equal(entry_count(worker, "kt_grandchild_own"), 1);
    assert_null(strstr(worker, "\"kt_fake_cupti_kernel\""));
    assert_null(strstr(worker, "\"kt_fake_running\""));
    assert_null(strstr(worker, "\"kt fake GPU"));
    assert_null(strstr(worker, "(CUPTI"));
    /* the parent: every record once, the one still running handed over at its own exit */
    assert_int_equal(entry_count(parent, "kt_fake_cupti_kernel"), 1);
    assert_int_equal(entry_count(parent, "kt_fake_configured"), 5);
    assert_true(entry_has(parent, "kt_fake_running", "\"no_timing\": 1"));
    assert_null(strstr(parent, "kt_grandchild_own"));
    free(worker);
    free(parent);
    ktt_rmtree(dir);
    free(dir);
}

/* Entry `name` of the snapshot in `json` has exactly `n` drops, all for `why`. */
static void assert_drops(const char *json, const char *name, uint64_t n, kt_drop_reason_t why)
{
    kt_snapshot_t *snap = parse_snapshot(json);
    const kt_kernel_timing_t *e = kt_snapshot_find(snap, name, KT_BACKEND_CUDA, NULL);
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 0);
    assert_int_equal(e->dropped, n);
    assert_int_equal(e->dropped_by[why], n);
    kt_snapshot_free(snap);
}

/* Issue 36 item 4: records CUPTI dropped for lack of buffer space (a buffer holding fewer than CUPTI had) are
 * counted as they are found, each buffer's with it: the child sees all 7 while it runs, and its snapshot at exit
 * holds exactly those (per process: CUPTI counts drops in one global queue). */
static void test_dropped_records_counted(void **state)
{
    (void)state;
    char *json = run_fake_child(CHILD_SHORT, 91);
    assert_non_null(json);
    assert_drops(json, "(CUPTI records dropped)", SHORT_DROPS, KT_DROP_RING_FULL);
    assert_null(strstr(json, "(CUPTI records dropped, context"));
    free(json);
}

/* Issue 36 item 4, at exit: records CUPTI dropped after the last buffer it returned (here 3, after the forced
 * flush's last buffer) reach no buffer callback; the exit flush reads CUPTI's count after flushing, so they are
 * counted instead of lost. */
static void test_drops_after_last_buffer_counted(void **state)
{
    (void)state;
    char *json = run_fake_child(CHILD_LATE_DROPS, 11);
    assert_non_null(json);
    assert_drops(json, "(CUPTI records dropped)", 3, KT_DROP_RING_FULL);
    assert_int_equal(entry_count(json, "kt_fake_cupti_kernel"), 1); /* the rest as usual */
    free(json);
}

/* The demand on the doubles: CUPTI delivers from its own thread. With the double's worker thread handing
 * over completed records every 5 ms, the library's flusher flushing every 20 ms and the exit flush, each of the
 * program's kernels is recorded exactly once: none lost, none twice, none dropped. The first 127 launched share the
 * buffer of the double's command in flight, so neither thread delivers any until a buffer is full (with buffers
 * filled as far as 1 MiB goes, none within the child's 3000 launches); the exit flush hands those over. */
static void test_records_from_cuptis_thread_once(void **state)
{
    (void)state;
    char err[4200];
    char *json = run_fake_child_said(CHILD_WORKER, 121, "worker", err, sizeof err);
    char *said = ktt_read_file(err, NULL);
    unlink(err);
    assert_non_null(said);
    const char *l = strstr(said, "kt-test launched ");
    assert_non_null(l);
    unsigned long long launched = strtoull(l + strlen("kt-test launched "), NULL, 10);
    free(said);
    assert_true(launched > WORKER_TAIL);
    assert_non_null(json);
    kt_snapshot_t *snap = parse_snapshot(json);
    assert_launched_once(snap, launched);
    /* the double's other records, once each, whichever thread took them */
    const kt_kernel_timing_t *e = kt_snapshot_find(snap, "kt_fake_configured", KT_BACKEND_CUDA, NULL);
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 5);
    kt_snapshot_free(snap);
    free(json);
}

/* CUPTI's own thread may still be inside the library's buffer callback when the exit's forced flush returns (CUPTI
 * promises no order between them). The exit waits for that delivery: its records are in the snapshot, and its
 * buffers are not counted as taken by another client. Before, the snapshot lacked the buffers' records (the second
 * module's kernel, the configured launches, the graphs) and counted them under "(CUPTI buffers taken by another
 * client)". */
static void test_exit_waits_for_cuptis_thread(void **state)
{
    (void)state;
    run_with_double(CHILD_SLOW_WORKER, 141);
}

/* A CUPTI that refuses memory copy activity: copies go untimed, said once, and memsets are still asked for and
 * timed (each kind enabled on its own). */
static void test_memset_timed_without_memcpy(void **state)
{
    (void)state;
    char err[4200];
    char *json = run_fake_child_said(CHILD_NO_MEMCPY, 11, "no-memcpy", err, sizeof err);
    assert_non_null(json);
    assert_int_equal(entry_count(json, "memcpy HtoD"), -1);
    assert_int_equal(entry_count(json, "memset"), 1);
    assert_true(entry_has(json, "memset", "\"bytes\": 1024"));
    assert_int_equal(entry_count(json, "kt_fake_cupti_kernel"), 1);
    free(json);
    assert_int_equal(count_in_file(err, "ktiming-cupti: memory copy activity unavailable "
                                        "(CUPTI_ERROR_NOT_SUPPORTED): copies are not timed\n"),
                     1);
}

/* KTIMING_CUPTI_LIBRARY pointing at another CUDA major's CUPTI (its records are laid out otherwise): refused at
 * start-up, naming both versions; nothing is timed, nothing written. */
static void test_other_major_cupti_refused(void **state)
{
    (void)state;
    char err[4200];
    char *json = run_fake_child_said(CHILD_CUPTI12, 10, "cupti12", err, sizeof err);
    assert_null(json);
    char want[4400];
    snprintf(want, sizeof want, "ktiming-cupti: %s is CUPTI API version 28 (CUDA 12), but this library was built "
             "against CUPTI API version ", getenv("KT_TEST_FAKE_CUPTI"));
    char *text = ktt_read_file(err, NULL);
    assert_non_null(text);
    assert_non_null(strstr(text, "nothing is timed"));
    free(text);
    assert_int_equal(count_in_file(err, want), 1);
}

/* KTIMING_CUPTI_GRAPHS=node: no graph-level records asked for, so CUPTI reports the graphs' kernels. */
static void test_graph_nodes_one_by_one(void **state)
{
    (void)state;
    run_with_double(CHILD_NODES, 11);
}

/* Issue 34: the CUPTI library keys devices by the identity in CUPTI's DEVICE records (UUID, MIG instance UUID,
 * model, ordinal), checked in the child's own snapshot. */
static void test_device_identity(void **state)
{
    (void)state;
    char *json = run_fake_child(CHILD_IDENTITY, 71);
    assert_null(json); /* _exit: no snapshot written, checked in the child */
}

/* Another CUPTI client holds the one callback subscription: the library still times everything, and the records
 * arrive with the flush at exit (none during the destroy). */
static void test_other_subscriber_still_times(void **state)
{
    (void)state;
    char err[4200];
    child_err_path(err, sizeof err, "other");
    g_child_stderr = err;
    run_with_double(CHILD_DESTROY_OTHER, 30);
    g_child_stderr = NULL;
    /* Issue 36.5: said once, without KTIMING_RUN_VERBOSE, naming the holder as CUPTI 13 names it. */
    assert_int_equal(count_in_file(err, "another CUPTI client holds the callback subscription "
                                        "(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, held by \"Nsight Systems\")"),
                     1);
}

/* Issue 36.8 (driver floor): on a driver older than the library's CUPTI, the start-up message names the driver's
 * CUDA version although the program loaded libcuda RTLD_LOCAL (nvcc's static cudart does), where a lookup in the
 * global scope finds no cuDriverGetVersion. */
static void test_old_driver_named(void **state)
{
    (void)state;
    if (!getenv("KT_TEST_FAKE_LIBCUDA"))
        skip();
    char err[4200];
    char *json = run_fake_child_said(CHILD_OLD_DRIVER, 10, "old-driver", err, sizeof err);
    assert_null(json); /* nothing timed, nothing written */
    assert_int_equal(count_in_file(err, "nothing is timed (the driver supports CUDA 12.4; this library was built "
                                        "with CUDA "),
                     1);
}

/* Issue 36.5, the other direction: holding the subscription, the library is named to a profiler that is refused
 * it, with how to free it (KTIMING_CUPTI_SUBSCRIBE=0). */
static void test_profiler_told_who_holds_it(void **state)
{
    (void)state;
    char *json = run_fake_child(CHILD_PROFILER, 81);
    assert_null(json); /* _exit: checked in the child */
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_exports_initialize_injection),
                                       cmocka_unit_test(test_no_driver_writes_no_snapshot),
                                       cmocka_unit_test(test_cupti_loaded_at_run_time),
                                       cmocka_unit_test(test_exit_flushes_then_writes_snapshot),
                                       cmocka_unit_test(test_context_destroy_flushes),
                                       cmocka_unit_test(test_graph_nodes_one_by_one),
                                       cmocka_unit_test(test_other_subscriber_still_times),
                                       cmocka_unit_test(test_profiler_told_who_holds_it),
                                       cmocka_unit_test(test_old_driver_named),
                                       cmocka_unit_test(test_forked_child_leaves_cupti_alone),
                                       cmocka_unit_test(test_dropped_records_counted),
                                       cmocka_unit_test(test_drops_after_last_buffer_counted),
                                       cmocka_unit_test(test_records_from_cuptis_thread_once),
        cmocka_unit_test(test_exit_waits_for_cuptis_thread),
                                       cmocka_unit_test(test_memset_timed_without_memcpy),
                                       cmocka_unit_test(test_other_major_cupti_refused),
                                       cmocka_unit_test(test_records_arrive_while_running),
                                       cmocka_unit_test(test_running_holds_back_its_buffer_only),
                                       cmocka_unit_test(test_subscription_left_free),
                                       cmocka_unit_test(test_device_identity),
                                       cmocka_unit_test(test_other_client_taking_callbacks_is_counted)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
