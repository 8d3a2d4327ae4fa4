/* test_history_concurrent.c — 8 processes append to one SQLite history at once (as CI jobs on one machine do):
 * WAL and the busy timeout make them queue, so every run and every result row is there, counted exactly, and
 * a run all of them add is stored once. */
#include "support/files.h"
#include "hist_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#define WRITERS 8
#define RUNS_EACH 6
#define KERNELS 25

/* One writer: its own connection, its own runs, then the run every writer adds. Exit status 0 when all went in. */
static int writer(const char *path, const kth_synth_t *sy, int w)
{
    kth_db_t *db;
    char err[512];
    if (kth_open(path, &db, err, sizeof err)) {
        fprintf(stderr, "writer %d: %s\n", w, err);
        return 1;
    }
    int added, bad = 0;
    for (int i = 0; i < RUNS_EACH && !bad; i++)
        bad = hu_add_run(db, sy, (size_t)(w * RUNS_EACH + i), &added) || !added;
    if (!bad)
        bad = hu_add_run(db, sy, WRITERS * RUNS_EACH, &added) != 0; /* the shared run: added by one writer only */
    kth_close(db);
    return bad;
}

static void test_eight_writers(void **state)
{
    (void)state;
    char *dir = ktt_tmpdir("history-writers");
    assert_non_null(dir);
    char *path = ktt_path(dir, "h.sqlite");
    kth_synth_t sy;
    assert_int_equal(hu_synth(&sy, 99, WRITERS * RUNS_EACH + 1, KERNELS), 0);
    /* Every writer starts on a history that does not exist yet: creating the schema races too. */
    int go[2];
    assert_int_equal(pipe(go), 0);
    pid_t pids[WRITERS];
    for (int w = 0; w < WRITERS; w++) {
        pids[w] = fork();
        assert_true(pids[w] >= 0);
        if (pids[w] == 0) {
            close(go[1]);
            char c;
            (void)!read(go[0], &c, 1); /* all start together when the pipe closes */
            _exit(writer(path, &sy, w));
        }
    }
    close(go[0]);
    close(go[1]);
    int failed = 0;
    for (int w = 0; w < WRITERS; w++) {
        int st = 0;
        assert_int_equal(waitpid(pids[w], &st, 0), pids[w]);
        failed += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    assert_int_equal(failed, 0);
    kth_db_t *db;
    char err[512];
    assert_int_equal(kth_open(path, &db, err, sizeof err), 0);
    assert_int_equal(hu_count(db, "kt_run"), WRITERS * RUNS_EACH + 1);
    assert_int_equal(hu_count(db, "kt_result"), (WRITERS * RUNS_EACH + 1) * KERNELS);
    assert_int_equal(hu_count(db, "kt_series"), KERNELS);
    assert_int_equal(hu_count(db, "kt_device"), WRITERS * RUNS_EACH + 1);
    kth_close(db);
    kth_synth_free(&sy);
    ktt_rmtree(dir);
    free(path);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_eight_writers)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
