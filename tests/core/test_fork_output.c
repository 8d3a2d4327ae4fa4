/* test_fork_output.c — a forked child's exit-time output never takes the parent's file (report core.md item 4):
 * (a) a child forked before this process used ktiming writes KTIMING_OUTPUT.PID, not KTIMING_OUTPUT; (b) with a
 * template whose "%p" is the literal of "%%p" (no pid in the name) a child also gets ".PID". The test process
 * itself must not use ktiming before case (a) forks. */
#include "test_util.h"
#include "support/files.h"

#include <errno.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

/* Forks a child that sets KTIMING_OUTPUT to tmpl, records `name` and exits (exit handlers run); its exit code. */
static int child_records(const char *tmpl, const char *name, pid_t *pid)
{
    fflush(NULL);
    pid_t c = fork();
    assert_true(c >= 0);
    if (c == 0) {
        setenv("KTIMING_OUTPUT", tmpl, 1);
        kt_record(name, KT_BACKEND_CPU, 7);
        exit(0);
    }
    *pid = c;
    int st = 0;
    while (waitpid(c, &st, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Whether file dir/name exists and holds `needle`. */
static int file_has(const char *dir, const char *name, const char *needle)
{
    char *path = ktt_path(dir, name);
    assert_non_null(path);
    char *text = ktt_read_file(path, NULL);
    free(path);
    int ok = text && strstr(text, needle);
    free(text);
    return ok;
}

static int file_exists(const char *dir, const char *name)
{
    char *path = ktt_path(dir, name);
    assert_non_null(path);
    int ok = access(path, F_OK) == 0;
    free(path);
    return ok;
}

static void test_child_files(void **state)
{
    (void)state;
    char *dir = ktt_tmpdir("fork-output");
    assert_non_null(dir);
    char tmpl[4200], name[64];
    pid_t c;

    /* (a) fork before the first use of ktiming in this process */
    snprintf(tmpl, sizeof tmpl, "%s/out.json", dir);
    assert_int_equal(child_records(tmpl, "child_before_use", &c), 0);
    snprintf(name, sizeof name, "out.json.%ld", (long)c);
    assert_true(file_has(dir, name, "\"child_before_use\""));
    assert_false(file_exists(dir, "out.json")); /* the parent's file, written at its exit, stays the parent's */

    /* (b) the parent uses ktiming; "%%p" is a literal "%p", not the pid */
    kt_record("parent_work", KT_BACKEND_CPU, 5);
    snprintf(tmpl, sizeof tmpl, "%s/lit-%%%%p.json", dir);
    assert_int_equal(child_records(tmpl, "child_literal", &c), 0);
    snprintf(name, sizeof name, "lit-%%p.json.%ld", (long)c);
    assert_true(file_has(dir, name, "\"child_literal\""));
    assert_false(file_exists(dir, "lit-%p.json"));

    /* a real %p still needs no suffix */
    snprintf(tmpl, sizeof tmpl, "%s/pid-%%p.json", dir);
    assert_int_equal(child_records(tmpl, "child_pid", &c), 0);
    snprintf(name, sizeof name, "pid-%ld.json", (long)c);
    assert_true(file_has(dir, name, "\"child_pid\""));

    ktt_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_child_files)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
