/* test_run_crash.c — nothing recorded is lost when the program dies (issue 39.1): under `ktiming run -o`, a program
 * that ends by a segfault, abort(), _exit, SIGKILL from outside or a SIGTERM that run passed on still gets its
 * snapshot written, with exactly the zones it recorded and `ended` saying how it ended (built by run from the
 * memory the program recorded into). Outside run, KTIMING_ON_CRASH=write writes the snapshot from the crash
 * handler. Counts only, never durations. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <ktiming.h>
#include <ktiming/analysis.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "support/files.h"
#include "support/proc.h"
#include "run_cmd.h"

#define N_ZONES 37 /* crash_zone; crash_other gets N_ZONES / 4 */

/* Sanitizer runtimes catch SIGSEGV themselves and exit otherwise; the program's own end is what is tested. */
static const char kAsan[] = "ASAN_OPTIONS=handle_segv=0:handle_abort=0:detect_leaks=0";

/* out: a stale file from an earlier run, which a run that writes nothing would leave in place. */
static void stale(const char *out)
{
    FILE *f = fopen(out, "w");
    assert_non_null(f);
    fputs("{\"stale\": true}\n", f);
    fclose(f);
}

static int g_crash_handler; /* the snapshot comes from KTIMING_ON_CRASH=write, not from `ktiming run` */

/* The snapshot at path: crash_zone N_ZONES * zone_x times, crash_other N_ZONES / 4 * rest_x times, crash_cfg
 * 3 * rest_x times (two configurations), and `ended` (ending in '*': a prefix of it). */
static void check_snapshot_x(const char *path, const char *ended, int zone_x, int rest_x);

/* The snapshot at path: both kernels with their exact counts (crash_zone's times `threads`), and `ended`. */
static void check_snapshot_n(const char *path, const char *ended, int threads)
{
    check_snapshot_x(path, ended, threads, 1);
}

static void check_snapshot_x(const char *path, const char *ended, int zone_x, int rest_x)
{
    kt_snapshot_t *s = NULL;
    char err[256] = "";
    int rc = kt_snapshot_load(path, NULL, &s, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "load %s: %s\n", path, err);
    assert_int_equal(rc, 0);
    const kt_kernel_timing_t *a = kt_snapshot_find(s, "crash_zone", KT_BACKEND_CPU, NULL);
    const kt_kernel_timing_t *b = kt_snapshot_find(s, "crash_other", KT_BACKEND_CPU, NULL);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(a->dispatch_count, N_ZONES * zone_x);
    assert_int_equal(b->dispatch_count, N_ZONES / 4 * rest_x);
    assert_true(a->min_ns <= a->max_ns);
    size_t el = strlen(ended);
    if (el && ended[el - 1] == '*')
        assert_int_equal(strncmp(s->ended, ended, el - 1), 0);
    else
        assert_string_equal(s->ended, ended);
    /* launch configurations: built from the dead program's arena as from a live one (the crash handler outside
     * `run` writes aggregates only: no breakdown) */
    const kt_kernel_timing_t *c = kt_snapshot_find(s, "crash_cfg", KT_BACKEND_OPENCL, NULL);
    assert_non_null(c);
    assert_int_equal(c->dispatch_count, 3 * rest_x);
    if (!g_crash_handler) {
        assert_int_equal(c->config_count, 2);
        assert_int_equal(c->configs[0].dispatch_count, 2 * rest_x);
        assert_int_equal(c->configs[0].launch.size[0], 64);
        assert_int_equal(c->configs[0].launch.local[0], 16);
        assert_int_equal(c->configs[1].dispatch_count, 1 * rest_x);
        assert_int_equal(c->configs[1].launch.size[0], 128);
        assert_int_equal(c->configs[1].launch.local[0], 0);
    }
    kt_snapshot_free(s);
}

static void check_snapshot(const char *path, const char *ended) { check_snapshot_n(path, ended, 1); }

/* `ktiming run -o DIR/out.json -f none -- CRASHPROG mode N`: its status; *dir the test's directory. */
static int run_mode(const char *mode, char **dir, char *out, size_t cap)
{
    *dir = ktt_tmpdir("runcrash");
    assert_non_null(*dir);
    snprintf(out, cap, "%s/out.json", *dir);
    stale(out);
    char n[16];
    snprintf(n, sizeof n, "%d", N_ZONES);
    char *argv[] = {(char *)KT_CLI, (char *)"run", (char *)"-o", out, (char *)"-f", (char *)"none", (char *)"--",
                    (char *)CRASHPROG, (char *)mode, n, NULL};
    const char *env[] = {kAsan, NULL};
    return ktt_run(argv, &(ktt_spawn_t){.out = KTT_DEVNULL, .err = KTT_QUIET, .env = env});
}

static void check_mode(const char *mode, int status, const char *ended)
{
    char *dir, out[4200];
    assert_int_equal(run_mode(mode, &dir, out, sizeof out), status);
    check_snapshot(out, ended);
    ktt_rmtree(dir);
    free(dir);
}

/* ... and `ktiming report` of it says how the program ended. */
static void test_segv(void **state)
{
    (void)state;
    char *dir, out[4200];
    assert_int_equal(run_mode("segv", &dir, out, sizeof out), 128 + SIGSEGV);
    check_snapshot(out, "signal 11");
    char *argv[] = {(char *)KT_CLI, (char *)"report", out, NULL};
    int st = -1;
    char *text = ktt_run_capture(argv, &(ktt_spawn_t){.err = KTT_QUIET}, &st);
    assert_int_equal(st, 0);
    assert_non_null(text);
    assert_non_null(strstr(text, "the program ended (signal 11)"));
    free(text);
    ktt_rmtree(dir);
    free(dir);
}
static void test_abort(void **state) { (void)state; check_mode("abort", 128 + SIGABRT, "signal 6"); }
static void test_underscore_exit(void **state) { (void)state; check_mode("_exit", 3, "exit 3 via _exit"); }
/* 126 and 127 are what a shell returns for a command it could not run; a program that ran and returned one
 * itself is reported as any other (run says a failed start itself, through the pipe it starts the program with). */
static void test_underscore_exit_127(void **state) { (void)state; check_mode("exit127", 127, "exit 127 via _exit"); }

/* `ktiming run -o OUT -- CRASHPROG exit N 2>&1 | cmd-that-quit`: run's stderr is a pipe nobody reads. The summary
 * is lost (EPIPE), not run's status (no SIGPIPE): the program's 0, OUT written, the run directory removed. */
static void test_closed_stderr(void **state)
{
    (void)state;
    char *dir = ktt_tmpdir("runcrashpipe");
    assert_non_null(dir);
    static char out[4200], env_tmp[4300];
    char n[16];
    snprintf(out, sizeof out, "%s/out.json", dir);
    snprintf(env_tmp, sizeof env_tmp, "TMPDIR=%s", dir);
    snprintf(n, sizeof n, "%d", N_ZONES);
    char *argv[] = {(char *)KT_CLI, (char *)"run", (char *)"-o", out, (char *)"--", (char *)CRASHPROG,
                    (char *)"exit", n, NULL};
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    close(fds[0]); /* the reader is gone before anything is written: every write to the pipe fails */
    fflush(NULL);
    pid_t pid = fork(); /* ktt_spawn redirects to files only */
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull < 0 || dup2(devnull, 1) < 0 || dup2(fds[1], 2) < 0 || putenv(env_tmp) != 0 ||
            putenv((char *)kAsan) != 0)
            _exit(126);
        signal(SIGPIPE, SIG_DFL);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    assert_true(pid > 0);
    assert_int_equal(ktt_wait(pid), 0);
    check_snapshot(out, "");
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (struct dirent *de; (de = readdir(d));)
        if (!strncmp(de->d_name, "ktiming-run.", 12))
            fail_msg("run directory %s left behind", de->d_name);
    closedir(d);
    ktt_rmtree(dir);
    free(dir);
}
/* Four threads' shards, all read. */
static void test_threads_then_segv(void **state)
{
    (void)state;
    char *dir, out[4200];
    assert_int_equal(run_mode("threadsegv", &dir, out, sizeof out), 128 + SIGSEGV);
    check_snapshot_n(out, "signal 11", 4);
    ktt_rmtree(dir);
    free(dir);
}

/* A forked child records into memory of its own, not into the program's (its zones are not the program's). */
static void test_fork_then_segv(void **state) { (void)state; check_mode("forksegv", 128 + SIGSEGV, "signal 11"); }
/* A program timing only CPU zones that exits normally: its snapshot too (it has no interception library to
 * write one), with no `ended`. */
static void test_exit(void **state) { (void)state; check_mode("exit", 0, ""); }

/* Starts run with the program in wait mode, waits (bounded) for its pid, sends sig to the program (to_run 0) or
 * to run (to_run 1), and checks run's status and the snapshot. */
static void check_signal(int sig, int to_run, const char *ended)
{
    char *dir = ktt_tmpdir("runcrashsig");
    assert_non_null(dir);
    char out[4200], pidf[4200], n[16];
    snprintf(out, sizeof out, "%s/out.json", dir);
    snprintf(pidf, sizeof pidf, "%s/pid", dir);
    snprintf(n, sizeof n, "%d", N_ZONES);
    stale(out);
    char *argv[] = {(char *)KT_CLI, (char *)"run", (char *)"-o", out, (char *)"-f", (char *)"none", (char *)"--",
                    (char *)CRASHPROG, (char *)"wait", n, pidf, NULL};
    const char *env[] = {kAsan, NULL};
    pid_t run = ktt_spawn(argv, &(ktt_spawn_t){.out = KTT_DEVNULL, .err = KTT_QUIET, .env = env});
    assert_true(run > 0);
    long child = -1;
    struct timespec nap = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 6000 && (child = ktt_read_long(pidf)) <= 0; i++) /* bounded: 60 s on a loaded machine */
        nanosleep(&nap, NULL);
    assert_true(child > 0);
    assert_int_equal(kill(to_run ? run : (pid_t)child, sig), 0);
    assert_int_equal(ktt_wait(run), 128 + sig);
    check_snapshot(out, ended);
    ktt_rmtree(dir);
    free(dir);
}

static void test_sigkill_program(void **state) { (void)state; check_signal(SIGKILL, 0, "signal 9"); }
/* `timeout 60 ktiming run ...` sends SIGTERM to run, which passes it on. */
static void test_sigterm_run(void **state) { (void)state; check_signal(SIGTERM, 1, "signal 15"); }
static void test_sighup_run(void **state) { (void)state; check_signal(SIGHUP, 1, "signal 1"); }

/* Outside run: KTIMING_OUTPUT with KTIMING_ON_CRASH=write writes the snapshot from the crash handler; without
 * KTIMING_ON_CRASH nothing is written (the old file stays). */
static void check_on_crash(const char *on_crash, int written)
{
    char *dir = ktt_tmpdir("oncrash");
    assert_non_null(dir);
    static char out[4200], env_out[4300], env_crash[64];
    snprintf(out, sizeof out, "%s/crash.json", dir);
    snprintf(env_out, sizeof env_out, "KTIMING_OUTPUT=%s", out);
    snprintf(env_crash, sizeof env_crash, "KTIMING_ON_CRASH=%s", on_crash);
    stale(out);
    char n[16];
    snprintf(n, sizeof n, "%d", N_ZONES);
    char *argv[] = {(char *)CRASHPROG, (char *)"segv", n, NULL};
    const char *env[] = {kAsan, env_out, env_crash, NULL};
    assert_int_equal(ktt_run(argv, &(ktt_spawn_t){.out = KTT_DEVNULL, .err = KTT_QUIET, .env = env}),
                     128 + SIGSEGV);
    if (written) {
        g_crash_handler = 1;
        check_snapshot(out, "signal 11");
        g_crash_handler = 0;
    } else {
        char *text = ktt_read_file(out, NULL);
        assert_non_null(text);
        assert_non_null(strstr(text, "stale"));
        free(text);
    }
    ktt_rmtree(dir);
    free(dir);
}

static void test_on_crash_write(void **state) { (void)state; check_on_crash("write", 1); }

/* KTIMING_ON_CRASH=write, CRASHPROG mode N: its status, the snapshot checked (crash_zone times `zone_sets`). */
static void check_on_crash_mode(const char *mode, int status, const char *ended, int zone_sets)
{
    char *dir = ktt_tmpdir("oncrashmode");
    assert_non_null(dir);
    static char out[4200], env_out[4300];
    snprintf(out, sizeof out, "%s/crash.json", dir);
    snprintf(env_out, sizeof env_out, "KTIMING_OUTPUT=%s", out);
    stale(out);
    char n[16];
    snprintf(n, sizeof n, "%d", N_ZONES);
    char *argv[] = {(char *)CRASHPROG, (char *)mode, n, NULL};
    const char *env[] = {kAsan, env_out, "KTIMING_ON_CRASH=write", NULL};
    assert_int_equal(ktt_run(argv, &(ktt_spawn_t){.out = KTT_DEVNULL, .err = KTT_QUIET, .env = env}), status);
    g_crash_handler = 1;
    check_snapshot_n(out, ended, zone_sets);
    g_crash_handler = 0;
    ktt_rmtree(dir);
    free(dir);
}

/* The program's own SIGSEGV handler (installed before ktiming's) recovers from a fault, the program records as
 * many zones again and aborts: the snapshot is the abort's, with every zone -- not a stale one of the recovered
 * fault, with the handler disarmed after it. */
static void test_on_crash_recovered_fault(void **state)
{
    (void)state;
    check_on_crash_mode("recover", 128 + SIGABRT, "signal 6", 2);
}

/* A SIGABRT handler of the program's (installed first) that returns: abort() then ends the process with the
 * default action, and the snapshot is written. */
static void test_on_crash_abort_handler_returns(void **state)
{
    (void)state;
    check_on_crash_mode("abortlog", 128 + SIGABRT, "signal 6", 1);
}

/* The program's own signal stack is kept (the program exits 5 when it was replaced), and the handler runs on it. */
static void test_on_crash_keeps_altstack(void **state)
{
    (void)state;
    check_on_crash_mode("altstack", 128 + SIGSEGV, "signal 11", 1);
}
static void test_on_crash_off(void **state) { (void)state; check_on_crash("", 0); }

/* The run arena's descriptor is close-on-exec (a timed process opens it through /proc/<run's pid>/fd): a process
 * that never loads ktiming -- here the shell, with no interception library preloaded -- holds none, and the timed
 * program the shell starts still gets crash survival. */
static void test_arena_fd_not_inherited(void **state)
{
    (void)state;
    char *dir = ktt_tmpdir("runcrashfd");
    assert_non_null(dir);
    char out[4200], fds[4200], script[8600], n[16];
    snprintf(out, sizeof out, "%s/out.json", dir);
    snprintf(fds, sizeof fds, "%s/fds", dir);
    snprintf(n, sizeof n, "%d", N_ZONES);
    stale(out);
    snprintf(script, sizeof script, "ls -l /proc/$$/fd/ > '%s'; '%s' segv %s; exit $?", fds, CRASHPROG, n);
    char *argv[] = {(char *)KT_CLI, (char *)"run", (char *)"--opencl", (char *)"off", (char *)"-o", out, (char *)"-f",
                    (char *)"none", (char *)"--", (char *)"/bin/sh", (char *)"-c", script, NULL};
    const char *env[] = {kAsan, NULL};
    assert_int_equal(ktt_run(argv, &(ktt_spawn_t){.out = KTT_DEVNULL, .err = KTT_QUIET, .env = env}), 128 + SIGSEGV);
    char *listing = ktt_read_file(fds, NULL);
    assert_non_null(listing);
    assert_non_null(strstr(listing, "0 ->")); /* the listing is there ... */
    assert_null(strstr(listing, "ktiming-run-arena")); /* ... without the arena */
    free(listing);
    /* the program is the shell's child, not run's: how it ended is not known to run (not the shell's status) */
    check_snapshot(out, "status unknown: pid *");
    ktt_rmtree(dir);
    free(dir);
}

/* run's stderr of the last ktt_run_cmd in dir (freed by the caller). */
static char *run_err(const char *dir)
{
    char *text = ktt_run_cmd_err(dir);
    assert_non_null(text);
    return text;
}

/* A shell running `script` (its %s the program, %d N_ZONES) under the default `run` (the OpenCL interception
 * library preloaded, so libktiming loads into the shell too) starts the program: the arena is the program's, which
 * records, not the shell's, which only loaded it (issue: the first process to load libktiming took it, and the
 * program's crash lost everything). */
static void check_shell(const char *script_fmt, const char *ended)
{
    char *dir = ktt_tmpdir("runcrashsh");
    assert_non_null(dir);
    char out[4200], script[4400];
    snprintf(script, sizeof script, script_fmt, CRASHPROG, N_ZONES);
    const char *prog[] = {"/bin/sh", "-c", script, NULL};
    assert_int_equal(ktt_run_cmd(dir, NULL, prog, out, sizeof out), 128 + SIGSEGV);
    check_snapshot(out, ended);
    ktt_rmtree(dir);
    free(dir);
}

/* The shell's child: how it ended is not run's to know (not the shell's status). */
static void test_shell_preloaded_then_segv(void **state)
{
    (void)state;
    check_shell("'%s' segv %d; exit $?", "status unknown: pid *");
}

/* The shell execs the program (the same pid): run's child is the program, so `ended` is its signal. */
static void test_shell_exec_then_segv(void **state)
{
    (void)state;
    check_shell("exec '%s' segv %d", "signal 11");
}

/* The program records, execs itself (a new image, the same pid), records it all again, and dies (or exits): both
 * images' records are in the snapshot, and `ended` is how the last image ended. */
/* `ktiming run --opencl off -o DIR/out.json -- CRASHPROG mode N_ZONES` ended with `status`: DIR (freed by the
 * caller), out its out.json. */
static char *run_crashprog(const char *mode, int status, char *out, size_t cap)
{
    char *dir = ktt_tmpdir("runcrashprog");
    assert_non_null(dir);
    char n[16];
    snprintf(n, sizeof n, "%d", N_ZONES);
    const char *prog[] = {CRASHPROG, mode, n, NULL};
    assert_int_equal(ktt_run_cmd(dir, "off", prog, out, cap), status);
    return dir;
}

static void check_exec(const char *mode, int status, const char *ended)
{
    char out[4200];
    char *dir = run_crashprog(mode, status, out, sizeof out);
    check_snapshot_x(out, ended, 2, 2);
    ktt_rmtree(dir);
    free(dir);
}

static void test_exec_then_segv(void **state) { (void)state; check_exec("exec:segv", 128 + SIGSEGV, "signal 11"); }
static void test_exec_then_exit(void **state) { (void)state; check_exec("exec:exit", 0, ""); }

/* A forked child that records CPU zones and exits normally writes its own snapshot (kept beside -o as
 * out.json.<pid>, with its 5 zones); run says another process timed kernels. */
static void test_fork_child_exit_written(void **state)
{
    (void)state;
    char out[4200];
    char *dir = run_crashprog("forkexit", 0, out, sizeof out);
    check_snapshot(out, "");
    char *err = run_err(dir);
    const char *kept = strstr(err, "another timed process's snapshot: ");
    assert_non_null(kept);
    char path[4200];
    assert_int_equal(sscanf(kept + strlen("another timed process's snapshot: "), "%4199s", path), 1);
    kt_snapshot_t *s = NULL;
    assert_int_equal(kt_snapshot_load(path, NULL, &s, NULL, 0), 0);
    const kt_kernel_timing_t *z = kt_snapshot_find(s, "crash_zone", KT_BACKEND_CPU, NULL);
    assert_non_null(z);
    assert_int_equal(z->dispatch_count, 5);
    assert_null(kt_snapshot_find(s, "crash_other", KT_BACKEND_CPU, NULL)); /* the parent's are not its */
    kt_snapshot_free(s);
    free(err);
    ktt_rmtree(dir);
    free(dir);
}

/* A forked child that records and ends by _exit loses its records: run says so (it said nothing). */
static void test_fork_child_lost_said(void **state)
{
    (void)state;
    char out[4200];
    char *dir = run_crashprog("forksegv", 128 + SIGSEGV, out, sizeof out);
    check_snapshot(out, "signal 11");
    char *err = run_err(dir);
    assert_non_null(strstr(err, "1 other process of the program used ktiming and ended without writing its timings"));
    free(err);
    ktt_rmtree(dir);
    free(dir);
}

/* Sanitizer builds skip the ulimit cases: their runtimes reserve terabytes of address space, so no program of
 * theirs runs under a limit. Called first (nothing to clean up yet). */
static void skip_if_sanitized(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    skip();
#endif
}

/* `ktiming run [-o OUT] -f none -- CRASHPROG MODE N` under `ulimit -v KIB` (set by a shell): run's status, its
 * stderr into err (NULL: quiet). */
static int run_limited(const char *kib, const char *mode, const char *out, const char *err)
{
    char script[64], n[16];
    snprintf(script, sizeof script, "ulimit -v %s && exec \"$@\"", kib);
    snprintf(n, sizeof n, "%d", N_ZONES);
    char *argv[16] = {(char *)"/bin/sh", (char *)"-c", script, (char *)"sh", (char *)KT_CLI, (char *)"run"};
    size_t a = 6;
    if (out) {
        argv[a++] = (char *)"-o";
        argv[a++] = (char *)out;
    }
    const char *tail[] = {"-f", "none", "--", CRASHPROG, mode, n, NULL};
    for (size_t i = 0; tail[i]; i++)
        argv[a++] = (char *)tail[i];
    argv[a] = NULL;
    return ktt_run(argv, &(ktt_spawn_t){.out = KTT_DEVNULL, .err = err ? err : KTT_QUIET});
}

/* Under a limit on address space (ulimit -v, which the program inherits) the arena takes an eighth of it, not
 * 1 GiB (which run could not even map under 1 GiB): crash survival holds. */
static void test_ulimit_small_arena(void **state)
{
    (void)state;
    skip_if_sanitized();
    char *dir = ktt_tmpdir("runcrashas");
    assert_non_null(dir);
    char out[4200];
    snprintf(out, sizeof out, "%s/out.json", dir ? dir : ""); /* gcc 12 sees a NULL dir otherwise */
    stale(out);
    assert_int_equal(run_limited("1048576", "segv", out, NULL), 128 + SIGSEGV);
    check_snapshot(out, "signal 11");
    ktt_rmtree(dir);
    free(dir);
}

/* A limit with no room for an arena: one line says crash survival is off, and the program runs as it would. */
static void test_ulimit_no_room(void **state)
{
    (void)state;
    skip_if_sanitized();
    char *dir = ktt_tmpdir("runcrashas0");
    assert_non_null(dir);
    char err[4200];
    snprintf(err, sizeof err, "%s/err", dir);
    assert_int_equal(run_limited("100000", "exit", NULL, err), 0);
    char *text = ktt_read_file(err, NULL);
    assert_non_null(text);
    const char *line = strstr(text, "ktiming run: crash survival off: ulimit -v 100000");
    assert_non_null(line);
    assert_null(strstr(line + strlen("ktiming run: crash survival off"), "crash survival off")); /* said once */
    free(text);
    ktt_rmtree(dir);
    free(dir);
}

/* A full arena (a 64 MiB one under ulimit -v 512 MiB; eight threads alive at once, each with a 9 MB span log)
 * keeps every thread's records: span logs that do not fit go to the heap, leaving the rest of the arena to the
 * shards, and run says what it could not read. Before, the first shard on the heap became the arena's list head
 * and the reader found no shard at all: "nothing was timed". */
static void test_arena_full(void **state)
{
    (void)state;
    skip_if_sanitized();
    char *dir = ktt_tmpdir("runcrashfull");
    assert_non_null(dir);
    char out[4200], err[4200], n[16];
    snprintf(out, sizeof out, "%s/out.json", dir ? dir : "");
    snprintf(err, sizeof err, "%s/err", dir ? dir : "");
    snprintf(n, sizeof n, "%d", N_ZONES);
    stale(out);
    char *argv[] = {(char *)"/bin/sh", (char *)"-c", (char *)"ulimit -v 524288 && exec \"$@\"", (char *)"sh",
                    (char *)KT_CLI, (char *)"run", (char *)"--opencl", (char *)"off", (char *)"-o", out, (char *)"-f",
                    (char *)"none", (char *)"--", (char *)CRASHPROG, (char *)"manythreads", n, NULL};
    const char *env[] = {"KTIMING_SPANS=131072", "MALLOC_ARENA_MAX=1", NULL};
    assert_int_equal(ktt_run(argv, &(ktt_spawn_t){.out = KTT_DEVNULL, .err = err, .env = env}), 128 + SIGSEGV);
    check_snapshot_n(out, "signal 11", 1 + 8);
    char *text = ktt_read_file(err, NULL);
    assert_non_null(text);
    assert_non_null(strstr(text, "ktiming run: the run arena was full: "));
    free(text);
    ktt_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_segv),           cmocka_unit_test(test_abort),
        cmocka_unit_test(test_underscore_exit), cmocka_unit_test(test_exit),
        cmocka_unit_test(test_sigkill_program), cmocka_unit_test(test_sigterm_run),
        cmocka_unit_test(test_sighup_run),     cmocka_unit_test(test_on_crash_write),
        cmocka_unit_test(test_on_crash_off),   cmocka_unit_test(test_fork_then_segv),
        cmocka_unit_test(test_threads_then_segv), cmocka_unit_test(test_arena_fd_not_inherited),
        cmocka_unit_test(test_ulimit_small_arena), cmocka_unit_test(test_ulimit_no_room),
        cmocka_unit_test(test_shell_preloaded_then_segv), cmocka_unit_test(test_shell_exec_then_segv),
        cmocka_unit_test(test_exec_then_segv),    cmocka_unit_test(test_exec_then_exit),
        cmocka_unit_test(test_fork_child_exit_written), cmocka_unit_test(test_fork_child_lost_said),
        cmocka_unit_test(test_arena_full),
        cmocka_unit_test(test_underscore_exit_127), cmocka_unit_test(test_closed_stderr),
        cmocka_unit_test(test_on_crash_recovered_fault), cmocka_unit_test(test_on_crash_keeps_altstack),
        cmocka_unit_test(test_on_crash_abort_handler_returns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
