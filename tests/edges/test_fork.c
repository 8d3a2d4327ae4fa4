/* test_fork.c — fork: a child's exit-time output is its own file (PATH.PID) holding only what it recorded, the
 * parent's file keeps the parent's records made before and after the fork; a child forked while other threads
 * register names, adopt shards and take snapshots finds every core lock usable (200 children, each bounded by
 * alarm()). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <ktiming.h>
#include <ktiming/analysis.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/files.h"

static int wait_exit(pid_t pid)
{
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static uint64_t count_of(const kt_snapshot_t *s, const char *name)
{
    const kt_kernel_timing_t *k = kt_snapshot_find(s, name, KT_BACKEND_CPU, NULL);
    return k ? k->dispatch_count : 0;
}

/* In a separate process P (so the test's own state stays clean): P records, forks a child that records and
 * exits, forks a child that records nothing, records again and exits. */
static void test_fork_clobber(void **state)
{
    (void)state;
    char *dir = ktt_tmpdir("fork");
    assert_non_null(dir);
    char out[4200];
    snprintf(out, sizeof out, "%s/out.json", dir);
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t p = fork();
    if (p == 0) {
        close(pfd[0]);
        setenv("KTIMING_OUTPUT", out, 1);
        kt_record("parent_before", KT_BACKEND_CPU, 10);
        pid_t c = fork();
        if (c == 0) {
            kt_record("child_kernel", KT_BACKEND_CPU, 20);
            kt_record("child_kernel", KT_BACKEND_CPU, 21);
            exit(0); /* exit handlers run: the child's own file */
        }
        pid_t idle = fork();
        if (idle == 0)
            exit(0); /* recorded nothing: writes nothing */
        long pids[2] = {c, idle};
        if (write(pfd[1], pids, sizeof pids) != (ssize_t)sizeof pids)
            _exit(5);
        if (wait_exit(c) != 0 || wait_exit(idle) != 0)
            _exit(6);
        kt_record("parent_after", KT_BACKEND_CPU, 30);
        exit(0);
    }
    close(pfd[1]);
    long pids[2] = {0, 0};
    assert_int_equal(read(pfd[0], pids, sizeof pids), (ssize_t)sizeof pids);
    close(pfd[0]);
    assert_int_equal(wait_exit(p), 0);

    char err[256], parent_out[4300];
    kt_snapshot_t *ps = NULL, *cs = NULL;
    /* P is itself forked from this test process, which loaded libktiming: its file is out.json.P (docs/safety.md) */
    snprintf(parent_out, sizeof parent_out, "%s.%ld", out, (long)p);
    assert_int_equal(kt_snapshot_load(parent_out, NULL, &ps, err, sizeof err), 0);
    assert_int_equal(count_of(ps, "parent_before"), 1);
    assert_int_equal(count_of(ps, "parent_after"), 1); /* recorded after the child exited: not clobbered */
    assert_int_equal(count_of(ps, "child_kernel"), 0);
    char child_out[4300], idle_out[4300];
    snprintf(child_out, sizeof child_out, "%s.%ld", out, pids[0]);
    snprintf(idle_out, sizeof idle_out, "%s.%ld", out, pids[1]);
    assert_int_equal(kt_snapshot_load(child_out, NULL, &cs, err, sizeof err), 0);
    assert_int_equal(count_of(cs, "child_kernel"), 2);
    assert_int_equal(count_of(cs, "parent_before"), 0); /* the child starts empty: no second copy */
    struct stat st;
    assert_int_not_equal(stat(idle_out, &st), 0);
    kt_snapshot_free(ps);
    kt_snapshot_free(cs);
    ktt_rmtree(dir);
    free(dir);
}

static atomic_int g_stop;

/* Registers names (registry lock) as fast as it can. */
static void *registrar(void *arg)
{
    (void)arg;
    char name[64];
    for (unsigned i = 0; !atomic_load(&g_stop); i++) {
        snprintf(name, sizeof name, "reg_%u", i % 512u);
        kt_kernel_id_t id = kt_kernel_intern(name, KT_BACKEND_CPU, NULL);
        kt_record_dispatch(&(kt_dispatch_t){.kernel = id, .duration_ns = 1});
    }
    return NULL;
}

/* Takes snapshots and resets (reset lock, flush lock). */
static void *snapshotter(void *arg)
{
    (void)arg;
    while (!atomic_load(&g_stop)) {
        kt_snapshot_free(kt_snapshot());
        kt_reset();
    }
    return NULL;
}

static void *short_lived(void *arg)
{
    kt_record("short_lived", KT_BACKEND_CPU, (uint64_t)(uintptr_t)arg);
    return NULL;
}

/* Starts and ends recording threads (shard list lock, thread registration). */
static void *spawner(void *arg)
{
    (void)arg;
    for (uintptr_t i = 1; !atomic_load(&g_stop); i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, short_lived, (void *)i) == 0)
            pthread_join(t, NULL);
    }
    return NULL;
}

static void test_fork_while_registering(void **state)
{
    (void)state;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    /* The sanitizer runtimes' own locks are not fork-safe: a child forked while another thread is inside the
     * runtime (here: creating threads) can hang in the runtime itself before reaching ktiming (seen: the first
     * pthread_create in the child waiting on ASan's thread registry). The normal build runs this test. */
    skip();
#endif
    pthread_t th[3];
    atomic_store(&g_stop, 0);
    assert_int_equal(pthread_create(&th[0], NULL, registrar, NULL), 0);
    assert_int_equal(pthread_create(&th[1], NULL, snapshotter, NULL), 0);
    assert_int_equal(pthread_create(&th[2], NULL, spawner, NULL), 0);
    int hung = 0, failed = 0;
    for (int i = 0; i < 200; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            alarm(120); /* a child stuck on a lock dies of SIGALRM instead of hanging the test (generous: CI is loaded) */
            char name[64];
            snprintf(name, sizeof name, "child_%d", i);
            kt_kernel_id_t id = kt_kernel_intern(name, KT_BACKEND_CPU, NULL);
            kt_record_dispatch(&(kt_dispatch_t){.kernel = id, .duration_ns = 7});
            pthread_t t;
            if (pthread_create(&t, NULL, short_lived, (void *)(uintptr_t)3) != 0 || pthread_join(t, NULL) != 0)
                _exit(3);
            kt_snapshot_t *s = kt_snapshot();
            int ok = s && count_of(s, name) == 1 && count_of(s, "short_lived") == 1;
            kt_snapshot_free(s);
            kt_reset();
            _exit(ok ? 0 : 4);
        }
        assert_true(pid > 0);
        int rc = wait_exit(pid);
        if (rc != 0)
            print_message("child %d: exit %d (3: thread, 4: counts, %d: stuck, alarm)\n", i, rc, 128 + SIGALRM);
        hung += rc == 128 + SIGALRM;
        failed += rc != 0;
    }
    atomic_store(&g_stop, 1);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(hung, 0);
    assert_int_equal(failed, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fork_clobber),
        cmocka_unit_test(test_fork_while_registering),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
