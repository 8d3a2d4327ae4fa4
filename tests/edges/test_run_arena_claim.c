/* test_run_arena_claim.c — a process takes the run arena at its first use of ktiming, not at load, whichever of its
 * threads gets there first while the others record at the same instant (built for TSan too: no race on the arena's
 * pointers, which are now set after threads exist), and every record lands in it. The test plays `ktiming run`:
 * it creates the arena and names it in KTIMING_RUN_ARENA, and a forked child records from four threads that start
 * together and ends with _exit (no exit handler, no file); the parent then reads the child's records from the
 * arena. Before, the child took the arena at load only: a child forked from a process that had loaded libktiming
 * (this one) found nothing to take and recorded nowhere run could read (the snapshot was empty). Counts only. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <ktiming.h>

#include "shared/run_arena.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define THREADS 4
#define RECORDS 500

static pthread_barrier_t g_go;

static void *record(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&g_go); /* all at once: the first record of each races for the arena */
    for (int i = 0; i < RECORDS; i++)
        kt_record("claim_zone", KT_BACKEND_CPU, 10);
    return NULL;
}

/* The child: four threads wait; the arena's address is made free here (run's mapping is not in a program it
 * starts) only then, so no thread stack lands in it, and they start. */
static void child(uintptr_t addr, size_t size)
{
    pthread_barrier_init(&g_go, NULL, THREADS + 1);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&t[i], NULL, record, NULL) != 0)
            _exit(3);
    munmap((void *)addr, size);
    pthread_barrier_wait(&g_go);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    _exit(0);
}

static void test_first_use_takes_arena(void **state)
{
    (void)state;
    kt_run_arena_t *r = NULL;
    assert_int_equal(kt_run_arena_create(64u << 20, &r), 0);
    const char *env = kt_run_arena_env(r);
    int fd = -1;
    unsigned long long addr = 0, size = 0;
    assert_int_equal(sscanf(env, "%d:%llx:%llu:", &fd, &addr, &size), 3);
    assert_int_equal(setenv("KTIMING_RUN_ARENA", env, 1), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        child((uintptr_t)addr, (size_t)size);
    unsetenv("KTIMING_RUN_ARENA");
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    int64_t owner = 0;
    int exited = 1;
    assert_int_equal(kt_run_arena_status(r, &owner, &exited), 1);
    assert_int_equal(owner, pid);
    assert_int_equal(exited, 0); /* _exit: no exit handler ran */
    assert_int_equal(kt_run_arena_images(r), 1);
    kt_snapshot_t *s = kt_run_arena_snapshot(r, NULL);
    assert_non_null(s);
    const kt_kernel_timing_t *e = kt_snapshot_find(s, "claim_zone", KT_BACKEND_CPU, NULL);
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, THREADS * RECORDS);
    kt_snapshot_free(s);
    kt_run_arena_close(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_first_use_takes_arena)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
