/* test_run_signal.c — `ktiming run` passes SIGINT/SIGTERM/SIGHUP/SIGQUIT on to the program, waits for it (no
 * orphan), removes its temporary directory and returns the program's status; its own errors exit 125; killed
 * itself (SIGKILL), it takes the program with it and the next run removes what it left; off a terminal, a SIGTERM
 * to run's whole process group reaches the program once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support/files.h"
#include "support/proc.h"

/* Starts `ktiming run ARGS...` with TMPDIR=tmpdir (when given), output silenced; its pid. */
static pid_t spawn(const char *tmpdir, char *const args[])
{
    char *argv[16] = {(char *)KT_CLI, (char *)"run"};
    int n = 2;
    for (int i = 0; args[i] && n < 15; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    static char env_tmpdir[4200];
    snprintf(env_tmpdir, sizeof env_tmpdir, "TMPDIR=%s", tmpdir ? tmpdir : "");
    const char *env[] = {env_tmpdir, NULL};
    return ktt_spawn(argv, &(ktt_spawn_t){.out = KTT_DEVNULL, .err = KTT_DEVNULL, .env = tmpdir ? env : NULL});
}

static int run_status(char *const args[]) { return ktt_wait(spawn(NULL, args)); }

static int count_prefix(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int n = 0;
    while (d && (de = readdir(d)))
        n += strncmp(de->d_name, prefix, strlen(prefix)) == 0;
    if (d)
        closedir(d);
    return n;
}

/* Starts `ktiming run -- SIGPROG` in a fresh directory (*dir, tag names it) and waits, bounded, for the program to
 * publish its pid (generous: CI machines are loaded); *child gets that pid, *mark the program's mark file. */
static pid_t start_sigprog(const char *tag, char **dir, long *child, char *mark, size_t mark_cap)
{
    *dir = ktt_tmpdir(tag);
    assert_non_null(*dir);
    char pidf[4200];
    snprintf(pidf, sizeof pidf, "%s/pid", *dir);
    snprintf(mark, mark_cap, "%s/mark", *dir);
    char *args[] = {(char *)"--", (char *)SIGPROG, pidf, mark, NULL};
    pid_t run = spawn(*dir, args);
    assert_true(run > 0);
    struct timespec nap = {0, 10 * 1000 * 1000};
    *child = -1;
    for (int i = 0; i < 6000 && (*child = ktt_read_long(pidf)) <= 0; i++)
        nanosleep(&nap, NULL);
    assert_true(*child > 0);
    return run;
}

static void check_signal(int sig)
{
    char *dir, mark[4200];
    long child;
    pid_t run = start_sigprog("runsig", &dir, &child, mark, sizeof mark);
    assert_int_equal(count_prefix(dir, "ktiming-run."), 1); /* run's directory exists while it runs */
    assert_int_equal(kill(run, sig), 0);
    assert_int_equal(ktt_wait(run), 10 + sig); /* the program's own status, after it got the signal */
    assert_int_equal(ktt_read_long(mark), sig);
    errno = 0;
    assert_int_equal(kill((pid_t)child, 0), -1); /* reaped, not orphaned */
    assert_int_equal(errno, ESRCH);
    assert_int_equal(count_prefix(dir, "ktiming-run."), 0);
    ktt_rmtree(dir);
    free(dir);
}

static void test_sigterm(void **state) { (void)state; check_signal(SIGTERM); }
static void test_sighup(void **state) { (void)state; check_signal(SIGHUP); }
static void test_sigint(void **state) { (void)state; check_signal(SIGINT); }
static void test_sigquit(void **state) { (void)state; check_signal(SIGQUIT); }

/* Is the process gone (no such pid, or a zombie nobody has reaped yet)? */
static int process_gone(long pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')');
    return rp && (rp[2] == 'Z' || rp[2] == 'X');
}

/* SIGKILL to `ktiming run` (which it cannot pass on): the program dies with it (PR_SET_PDEATHSIG) instead of
 * running on as an orphan, and the next run removes the directory the killed one left. */
static void test_sigkill_run(void **state)
{
    (void)state;
    char *dir, mark[4200];
    long child;
    pid_t run = start_sigprog("runkill", &dir, &child, mark, sizeof mark);
    struct timespec nap = {0, 10 * 1000 * 1000};
    assert_int_equal(kill(run, SIGKILL), 0);
    assert_int_equal(ktt_wait(run), 128 + SIGKILL);
    int gone = 0;
    for (int i = 0; i < 6000 && !(gone = process_gone(child)); i++) /* bounded: 60 s on a loaded machine */
        nanosleep(&nap, NULL);
    assert_true(gone);
    assert_int_equal(count_prefix(dir, "ktiming-run."), 1); /* left behind by the killed run */
    char *again[] = {(char *)"-f", (char *)"none", (char *)"--", (char *)"true", NULL};
    assert_int_equal(ktt_wait(spawn(dir, again)), 0);
    assert_int_equal(count_prefix(dir, "ktiming-run."), 0); /* removed by the next run */
    ktt_rmtree(dir);
    free(dir);
}

/* `ktiming run` off a terminal (a new session: setsid, as a service or CI job runs it): the program runs in a
 * process group of its own, and gets a SIGTERM sent to run (to_group 0), to run's whole process group
 * (`kill -TERM -PGID`, to_group 1), or to both at once as timeout(1) sends it (to_group 2) exactly once: from run.
 * Sharing run's group, it got the group's copy and the ones run passed on. */
static void check_sigterm_once(int to_group)
{
    const char *setsid_bin = access("/usr/bin/setsid", X_OK) == 0 ? "/usr/bin/setsid"
                             : access("/bin/setsid", X_OK) == 0   ? "/bin/setsid"
                                                                  : NULL;
    if (!setsid_bin)
        skip();
    char *dir = ktt_tmpdir("runsigonce");
    assert_non_null(dir);
    char pidf[4200], mark[4200];
    snprintf(pidf, sizeof pidf, "%s/pid", dir);
    snprintf(mark, sizeof mark, "%s/mark", dir);
    /* the test's child is no group leader, so setsid(1) makes it one without forking: its pid is run's */
    char *argv[] = {(char *)setsid_bin, (char *)KT_CLI, (char *)"run", (char *)"-f", (char *)"none", (char *)"--",
                    (char *)SIGPROG, pidf, mark, (char *)"count", NULL};
    static char env_tmpdir[4300];
    snprintf(env_tmpdir, sizeof env_tmpdir, "TMPDIR=%s", dir);
    const char *env[] = {env_tmpdir, NULL};
    pid_t run = ktt_spawn(argv, &(ktt_spawn_t){.out = KTT_DEVNULL, .err = KTT_QUIET, .env = env});
    assert_true(run > 0);
    struct timespec nap = {0, 10 * 1000 * 1000};
    long child = -1;
    for (int i = 0; i < 6000 && (child = ktt_read_long(pidf)) <= 0; i++)
        nanosleep(&nap, NULL);
    assert_true(child > 0);
    assert_int_equal(getpgid(run), run);               /* setsid made run a group leader ... */
    assert_int_equal(getpgid((pid_t)child), (pid_t)child); /* ... and the program leads a group of its own */
    if (to_group == 2)
        assert_int_equal(kill(run, SIGTERM), 0);
    assert_int_equal(kill(to_group ? -run : run, SIGTERM), 0);
    assert_int_equal(ktt_wait(run), 0);
    assert_int_equal(ktt_read_long(mark), 1);
    ktt_rmtree(dir);
    free(dir);
}

static void test_sigterm_to_run_once(void **state) { (void)state; check_sigterm_once(0); }
static void test_sigterm_to_group_once(void **state) { (void)state; check_sigterm_once(1); }
static void test_sigterm_like_timeout_once(void **state) { (void)state; check_sigterm_once(2); }

static void test_own_errors_125(void **state)
{
    (void)state;
    char *bogus[] = {(char *)"--bogus", (char *)"--", (char *)"true", NULL};
    char *none[] = {NULL};
    char *fmt[] = {(char *)"-f", (char *)"yaml", (char *)"--", (char *)"true", NULL};
    char *same[] = {(char *)"-o", (char *)"/tmp/kt-runsig-same.json", (char *)"--trace",
                    (char *)"/tmp/./kt-runsig-same.json", (char *)"--", (char *)"true", NULL};
    char *prog2[] = {(char *)"--", (char *)"sh", (char *)"-c", (char *)"exit 2", NULL};
    assert_int_equal(run_status(bogus), 125);
    assert_int_equal(run_status(none), 125);
    assert_int_equal(run_status(fmt), 125);
    assert_int_equal(run_status(same), 125);
    assert_int_equal(run_status(prog2), 2); /* the program's 2 is its own */
}

int main(void)
{
    char *probe[] = {(char *)"--", (char *)"true", NULL};
    if (run_status(probe) == 125) {
        fprintf(stderr, "test_run_signal: ktiming run cannot run here (no interception libraries), skipping\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigterm), cmocka_unit_test(test_sighup),         cmocka_unit_test(test_sigint),
        cmocka_unit_test(test_sigquit), cmocka_unit_test(test_own_errors_125), cmocka_unit_test(test_sigkill_run),
        cmocka_unit_test(test_sigterm_to_run_once), cmocka_unit_test(test_sigterm_to_group_once),
        cmocka_unit_test(test_sigterm_like_timeout_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
