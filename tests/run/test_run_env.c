/* test_run_env.c — what `ktiming run` sets in the program's environment beyond the backends' hooks: span logs
 * off (KTIMING_SPANS=0) when only a summary is asked for, since nothing reads them then; kept when an output,
 * a trace, an HTML report or --mpi may need them, and never overriding a KTIMING_SPANS of the user's. Also: the
 * snapshot `ktiming run` reads while the program ends is the one the program left (a replaced file is read
 * again), and the report is prepared from it before the program's process is gone; where the run directory
 * goes (a relative TMPDIR or KTIMING_INTERCEPT_DIR made absolute); and other timed processes' snapshots that cannot
 * go beside -o are kept, not lost. */
#include "run_util.h"

#include <sys/stat.h>
#include <sys/statfs.h>

/* envprog KTIMING_SPANS under `ktiming run <args> --`; its stdout line (malloc, no newline). */
static char *spans_seen(const char *const args[], int *status)
{
    char *argv[16];
    int n = 0;
    argv[n++] = KT_CLI;
    argv[n++] = "run";
    argv[n++] = "-f";
    argv[n++] = "none";
    for (int i = 0; args[i]; i++)
        argv[n++] = (char *)args[i];
    argv[n++] = "--";
    argv[n++] = ENVPROG;
    argv[n++] = "KTIMING_SPANS";
    argv[n] = NULL;
    char *out = ru_run(argv, status);
    out[strcspn(out, "\n")] = '\0';
    return out;
}

/* envprog times nothing: with an output asked for, run says so and exits 125 (KTCLI_RUN_ERROR); the program
 * still ran with the environment under test. */
static void expect(const char *const args[], const char *want, int want_status)
{
    int st = -1;
    char *seen = spans_seen(args, &st);
    assert_int_equal(st, want_status);
    if (strcmp(seen, want) != 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "KTIMING_SPANS seen by the program: %s, expected %s (first option %s)", seen,
                 want, args[0] ? args[0] : "none");
        free(seen);
        fail_msg("%s", msg);
    }
    free(seen);
}

static void test_summary_only_turns_spans_off(void **state)
{
    (void)state;
    unsetenv("KTIMING_SPANS");
    const char *const none[] = {NULL};
    expect(none, "0", 0);
}

static void test_outputs_keep_spans(void **state)
{
    (void)state;
    unsetenv("KTIMING_SPANS");
    const char *const out[] = {"-o", ru_path("s.json"), NULL};
    const char *const trace[] = {"--trace", ru_path("t.json"), NULL};
    const char *const html[] = {"--html", ru_path("r.html"), NULL};
    expect(out, "(unset)", 125);
    expect(trace, "(unset)", 125);
    expect(html, "(unset)", 125);
}

static void test_user_setting_kept(void **state)
{
    (void)state;
    setenv("KTIMING_SPANS", "5", 1);
    const char *const none[] = {NULL};
    expect(none, "5", 0);
    unsetenv("KTIMING_SPANS");
}

/* `ktiming run [-o out] -- snapprog [mode]`: checks its status 0 and stdout `want_stdout`, that the summary names
 * the entry `shown` and not `hidden` (NULL: nothing), and that out (when given) holds just `shown`. */
static void run_snapprog(const char *out, const char *mode, const char *want_stdout, const char *shown,
                         const char *hidden)
{
    char *err_path = ru_path("snapprog.err");
    char *argv[10];
    int n = 0;
    argv[n++] = KT_CLI;
    argv[n++] = "run";
    if (out) {
        argv[n++] = "-o";
        argv[n++] = (char *)out;
    }
    argv[n++] = "--";
    argv[n++] = SNAPPROG;
    if (mode)
        argv[n++] = (char *)mode;
    argv[n] = NULL;
    ktt_spawn_t how = {.err = err_path};
    int st = -1;
    char *text = ktt_run_capture(argv, &how, &st);
    assert_non_null(text);
    assert_int_equal(st, 0);
    assert_string_equal(text, want_stdout);
    free(text);
    size_t len = 0;
    char *summary = ktt_read_file(err_path, &len);
    assert_non_null(summary);
    if (!strstr(summary, shown) || (hidden && strstr(summary, hidden)))
        fail_msg("the summary should show %s%s%s:\n%s", shown, hidden ? ", not " : "", hidden ? hidden : "",
                 summary);
    free(summary);
    if (!out)
        return;
    kt_snapshot_t *s = NULL;
    char err[256];
    if (kt_snapshot_load(out, NULL, &s, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(s->count, 1);
    assert_string_equal(s->entries[0].name, shown);
    kt_snapshot_free(s);
}

/* snapprog's snapshot is replaced 100 ms after it first appears (ktiming may read it then): the summary and the
 * output are the replacement's. */
static void test_replaced_snapshot_read_again(void **state)
{
    (void)state;
    run_snapprog(ru_path("replaced.json"), NULL, "done\n", "second", "first");
}

/* The same without -o: the summary read while the program ended is dropped for the replacement's. */
static void test_replaced_snapshot_summary_only(void **state)
{
    (void)state;
    run_snapprog(NULL, NULL, "done\n", "second", "first");
}

/* The report is prepared while the program ends: the snapshot it announced is moved to -o before the process
 * is gone (snapprog --wait-moved sees it leave the run directory), and the output and summary are that
 * snapshot's. */
static void test_output_placed_while_program_ends(void **state)
{
    (void)state;
    run_snapprog(ru_path("placed_early.json"), "--wait-moved", "moved\n", "first", NULL);
}

/* KTIMING_RUN_DIR as envprog sees it under `ktiming run -f none` (malloc, no newline); the directory must be gone
 * once run has returned. */
static char *run_dir_seen(void)
{
    char *argv[] = {KT_CLI, "run", "-f", "none", "--", ENVPROG, "KTIMING_RUN_DIR", NULL};
    int st = -1;
    char *seen = ru_run(argv, &st);
    assert_int_equal(st, 0);
    seen[strcspn(seen, "\n")] = '\0';
    if (access(seen, F_OK) == 0)
        fail_msg("the run directory %s is still there", seen);
    return seen;
}

static void expect_prefix(const char *seen, const char *dir)
{
    char want[4096];
    snprintf(want, sizeof want, "%s/ktiming-run.", dir);
    if (strncmp(seen, want, strlen(want)) != 0)
        fail_msg("run directory %s, expected one in %s", seen, dir);
}

/* The run directory goes under TMPDIR when it is set; else in /dev/shm when that is a tmpfs we can write with at
 * least 1 GiB free, else in /tmp. */
static void test_run_dir_location(void **state)
{
    (void)state;
    const char *saved = getenv("TMPDIR");
    char *keep = saved ? strdup(saved) : NULL;
    unsetenv("TMPDIR");
    char *seen = run_dir_seen();
    struct statfs fs;
    int shm = statfs("/dev/shm", &fs) == 0 && (unsigned long)fs.f_type == 0x01021994ul &&
              (unsigned long long)fs.f_bavail * (unsigned long long)fs.f_bsize >= (1ull << 30) &&
              access("/dev/shm", W_OK | X_OK) == 0;
    expect_prefix(seen, shm ? "/dev/shm" : "/tmp");
    free(seen);
    setenv("TMPDIR", ru_dir, 1);
    seen = run_dir_seen();
    expect_prefix(seen, ru_dir);
    free(seen);
    if (keep)
        setenv("TMPDIR", keep, 1);
    else
        unsetenv("TMPDIR");
    free(keep);
}

/* -o into a directory that does not exist is refused before the program runs (125, the program never started). */
static void test_missing_output_dir_before_start(void **state)
{
    (void)state;
    char mark[4096], out[4096], cmd[4200];
    snprintf(mark, sizeof mark, "%s", ru_path("started.mark"));
    snprintf(out, sizeof out, "%s", ru_path("no/such/dir/out.json"));
    snprintf(cmd, sizeof cmd, "touch '%s'", mark);
    unlink(mark);
    char *argv[] = {KT_CLI, "run", "-o", out, "--", "/bin/sh", "-c", cmd, NULL};
    char *err_path = ru_path("missing.err");
    ktt_spawn_t how = {.err = err_path};
    int st = -1;
    char *text = ktt_run_capture(argv, &how, &st);
    free(text);
    assert_int_equal(st, 125);
    assert_int_not_equal(access(mark, F_OK), 0); /* never started */
    char *msg = ktt_read_file(err_path, NULL);
    assert_non_null(msg);
    assert_non_null(strstr(msg, "does not exist"));
    free(msg);
}

/* An output whose directory goes away while the program runs (-o, or --trace alone): the snapshot is not deleted
 * with the run directory but kept there, and the message says where. */
static void late_failure_keeps_snapshot(const char *option)
{
    char sub[4096], out[4200], cmd[8400];
    snprintf(sub, sizeof sub, "%s", ru_path("vanishing"));
    assert_int_equal(mkdir(sub, 0700), 0);
    snprintf(out, sizeof out, "%s/out.json", sub);
    snprintf(cmd, sizeof cmd, "rmdir '%s' && exec '%s'", sub, SNAPPROG);
    char *argv[] = {KT_CLI, "run", (char *)option, out, "--", "/bin/sh", "-c", cmd, NULL};
    char *err_path = ru_path("late.err");
    ktt_spawn_t how = {.err = err_path};
    int st = -1;
    char *text = ktt_run_capture(argv, &how, &st);
    free(text);
    assert_int_equal(st, 125);
    char *msg = ktt_read_file(err_path, NULL);
    assert_non_null(msg);
    const char *kept = strstr(msg, "snapshot is kept at ");
    if (!kept)
        fail_msg("%s: no word of the kept snapshot:\n%s", option, msg);
    char path[4096];
    snprintf(path, sizeof path, "%s", kept + strlen("snapshot is kept at "));
    path[strcspn(path, "\n")] = '\0';
    kt_snapshot_t *s = NULL;
    char err[256];
    if (kt_snapshot_load(path, NULL, &s, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(s->count, 1);
    kt_snapshot_free(s);
    free(msg);
    /* the user's to remove: the run directory and what it holds */
    char *dir = strdup(path);
    *strrchr(dir, '/') = '\0';
    ktt_rmtree(dir);
    free(dir);
}

static void test_late_output_failure_keeps_snapshot(void **state)
{
    (void)state;
    late_failure_keeps_snapshot("-o");
    late_failure_keeps_snapshot("--trace");
}

/* The snapshot file named in msg after `marker` (up to the end of its line, or a space), loaded: it must hold one
 * entry, `name`. Returns its directory (malloc) for the caller to remove. */
static char *kept_snapshot(const char *msg, const char *marker, const char *name)
{
    const char *at = strstr(msg, marker);
    if (!at)
        fail_msg("no '%s' in:\n%s", marker, msg);
    char path[4096];
    snprintf(path, sizeof path, "%s", at + strlen(marker));
    path[strcspn(path, " \n")] = '\0';
    kt_snapshot_t *s = NULL;
    char err[256];
    if (kt_snapshot_load(path, NULL, &s, err, sizeof err) != 0)
        fail_msg("%s: %s", path, err);
    assert_int_equal(s->count, 1);
    assert_string_equal(s->entries[0].name, name);
    kt_snapshot_free(s);
    *strrchr(path, '/') = '\0';
    return strdup(path);
}

/* `ktiming run -o OUT -- snapprog --child BLOCK` with TMPDIR in the scratch directory: its stderr (malloc); *child
 * the other timed process's pid. */
static char *run_with_child(const char *out, const char *block, long *child)
{
    char *err_path = ru_path("child.err");
    static char env_tmp[4200];
    snprintf(env_tmp, sizeof env_tmp, "TMPDIR=%s", ru_dir);
    const char *env[] = {env_tmp, NULL};
    char *argv[] = {KT_CLI, "run", "-f", "none", "-o", (char *)out, "--", SNAPPROG, "--child", (char *)block, NULL};
    int st = -1;
    char *text = ktt_run_capture(argv, &(ktt_spawn_t){.err = err_path, .env = env}, &st);
    assert_non_null(text);
    assert_int_equal(st, 0);
    *child = -1;
    sscanf(text, "child %ld", child);
    assert_true(*child > 0);
    assert_non_null(strstr(text, "done\n"));
    free(text);
    char *msg = ktt_read_file(err_path, NULL);
    assert_non_null(msg);
    return msg;
}

/* -o names a device: another process's snapshot is not created beside it (/dev/null.<pid>, which root could)
 * nor lost with the run directory, but kept there, and run says where. */
static void test_other_snapshot_beside_device_kept(void **state)
{
    (void)state;
    long child;
    char *msg = run_with_child("/dev/null", "-", &child);
    char beside[64];
    snprintf(beside, sizeof beside, "/dev/null.%ld", child);
    int created = access(beside, F_OK) == 0;
    if (created)
        unlink(beside);
    assert_false(created);
    char *dir = kept_snapshot(msg, "another timed process's snapshot is kept at ", "child");
    free(msg);
    ktt_rmtree(dir);
    free(dir);
}

/* OUT.<pid> cannot be written (a directory is in the way): the snapshot is kept in the run directory and said, not
 * deleted with it. */
static void test_other_snapshot_unplaceable_kept(void **state)
{
    (void)state;
    char out[4096], beside[4200];
    snprintf(out, sizeof out, "%s", ru_path("others.json"));
    long child;
    char *msg = run_with_child(out, out, &child);
    snprintf(beside, sizeof beside, "%s.%ld", out, child);
    rmdir(beside);
    char want[4300];
    snprintf(want, sizeof want, "cannot write %s", beside);
    if (!strstr(msg, want))
        fail_msg("no '%s' in:\n%s", want, msg);
    char *dir = kept_snapshot(msg, "another timed process's snapshot is kept at ", "child");
    free(msg);
    ktt_rmtree(dir);
    free(dir);
    kt_snapshot_t *s = NULL;
    assert_int_equal(kt_snapshot_load(out, NULL, &s, NULL, 0), 0); /* the program's own, as without the child */
    assert_string_equal(s->entries[0].name, "second");
    kt_snapshot_free(s);
}

/* `cd DIR && ENV ktiming run ARGS` (argv after the script's "sh"): its status, stdout into *text (malloc). */
static int run_in(const char *dir, const char *env, char *const args[], char **text)
{
    char *argv[24] = {"/bin/sh", "-c", "cd \"$1\" && shift && exec \"$@\"", "sh", (char *)dir, KT_CLI, "run"};
    int n = 7;
    for (int i = 0; args[i] && n < 23; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    const char *envs[] = {env, NULL};
    int st = -1;
    *text = ktt_run_capture(argv, &(ktt_spawn_t){.err = KTT_QUIET, .env = envs}, &st);
    assert_non_null(*text);
    return st;
}

/* A relative TMPDIR: the run directory the program is given is absolute, so a program that changes directory
 * still writes its snapshot there. */
static void test_relative_tmpdir(void **state)
{
    (void)state;
    char *rel = ru_path("reltmp");
    mkdir(rel, 0700);
    char out[4096];
    snprintf(out, sizeof out, "%s", ru_path("reltmp.json"));
    char *args[] = {"-f", "none", "-o", out, "--", SNAPPROG, "--chdir", NULL};
    char *text;
    assert_int_equal(run_in(ru_dir, "TMPDIR=reltmp", args, &text), 0);
    assert_string_equal(text, "done\n");
    free(text);
    kt_snapshot_t *s = NULL;
    assert_int_equal(kt_snapshot_load(out, NULL, &s, NULL, 0), 0);
    assert_string_equal(s->entries[0].name, "second");
    kt_snapshot_free(s);
}

/* A relative KTIMING_INTERCEPT_DIR: the libraries are named to the program by absolute paths (it may load them
 * after changing directory). Checked on the OpenCL direct library's path; skipped where it is not built. */
static void test_relative_intercept_dir(void **state)
{
    (void)state;
    char *args[] = {"-f", "none", "--", ENVPROG, "KTIMING_OPENCL_LIBRARY", NULL};
    char *text;
    assert_int_equal(run_in(ru_dir, "KTIMING_SPANS=0", args, &text), 0); /* where run finds them itself */
    char *slash = strrchr(text, '/');
    if (text[0] != '/' || !slash) {
        free(text);
        skip();
    }
    *slash = '\0';
    char *link = ru_path("shimdir");
    unlink(link);
    assert_int_equal(symlink(text, link), 0);
    free(text);
    assert_int_equal(run_in(ru_dir, "KTIMING_INTERCEPT_DIR=shimdir", args, &text), 0);
    if (text[0] != '/')
        fail_msg("KTIMING_OPENCL_LIBRARY given to the program: %s", text);
    assert_non_null(strstr(text, "/libktiming_cl_direct.so"));
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_summary_only_turns_spans_off),
        cmocka_unit_test(test_outputs_keep_spans),
        cmocka_unit_test(test_user_setting_kept),
        cmocka_unit_test(test_replaced_snapshot_read_again),
        cmocka_unit_test(test_replaced_snapshot_summary_only),
        cmocka_unit_test(test_output_placed_while_program_ends),
        cmocka_unit_test(test_run_dir_location),
        cmocka_unit_test(test_missing_output_dir_before_start),
        cmocka_unit_test(test_late_output_failure_keeps_snapshot),
        cmocka_unit_test(test_other_snapshot_beside_device_kept),
        cmocka_unit_test(test_other_snapshot_unplaceable_kept),
        cmocka_unit_test(test_relative_tmpdir),
        cmocka_unit_test(test_relative_intercept_dir),
    };
    return cmocka_run_group_tests(tests, ru_group_setup, ru_group_teardown);
}
