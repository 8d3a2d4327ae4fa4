/* test_cli.c — runs the built `ktiming` binary: --help/--version, `report` (formats, -o, stdin, bad files,
 * usage errors and their exit codes) and `demo` (CPU kernels, table shape, saved snapshot). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <regex.h>
#include <sys/wait.h>
#include <ktiming/analysis.h>

#include "export/fixture.h"

static char *g_dir;              /* scratch directory for this run */
static const char *g_env[4];     /* NAME=value settings for the next run_cli (NULL-terminated) */

/* Output of one run of the CLI. */
typedef struct run_t {
    int status; /* exit code, or 128+signal */
    char *out;  /* standard output */
    char *err;  /* standard error */
} run_t;

/* Runs ktiming with the given arguments (NULL-terminated), stdin from `in` (NULL: /dev/null). */
static run_t run_cli(const char *in, ...)
{
    const char *argv[32];
    size_t argc = 0;
    argv[argc++] = KT_CLI_PATH;
    va_list ap;
    va_start(ap, in);
    const char *a;
    while ((a = va_arg(ap, const char *)) && argc < 31)
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    char *outp = fx_path(g_dir, "stdout"), *errp = fx_path(g_dir, "stderr");
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fi = open(in ? in : "/dev/null", O_RDONLY);
        int fo = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fi < 0 || fo < 0 || fe < 0)
            _exit(126);
        dup2(fi, 0);
        dup2(fo, 1);
        dup2(fe, 2);
        for (size_t i = 0; g_env[i]; i++)
            putenv((char *)g_env[i]);
        execv(KT_CLI_PATH, (char *const *)argv);
        _exit(127);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    run_t r;
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    r.out = fx_read_file(outp, NULL);
    r.err = fx_read_file(errp, NULL);
    free(outp);
    free(errp);
    return r;
}

static void run_free(run_t *r)
{
    free(r->out);
    free(r->err);
}

/* Asserts the exit status and that `where` (stdout or stderr) contains `want`. */
static void expect(run_t r, int status, const char *where, const char *want)
{
    if (r.status != status)
        fail_msg("exit %d, wanted %d\nstdout: %s\nstderr: %s", r.status, status, r.out, r.err);
    if (want && !strstr(where, want))
        fail_msg("output lacks \"%s\":\n%s", want, where);
    run_free(&r);
}

static char *write_fixture(const char *name)
{
    char *path = fx_path(g_dir, name);
    kt_snapshot_t *s = fx_snapshot_full();
    assert_int_equal(kt_report_write(path, s, KT_FORMAT_JSON), 0);
    fx_free(s);
    return path;
}

static void test_top_level(void **state)
{
    (void)state;
    run_t r = run_cli(NULL, "--help", NULL);
    assert_non_null(strstr(r.out, "demo"));
    expect(r, 0, r.out, "report");
    expect(run_cli(NULL, "--version", NULL), 0, "", NULL);
    r = run_cli(NULL, "--version", NULL);
    assert_string_equal(r.out, "ktiming " KT_VERSION_STRING "\n");
    run_free(&r);
    expect(run_cli(NULL, NULL), 2, "", NULL);
    r = run_cli(NULL, "frobnicate", NULL);
    expect(r, 2, r.err, "unknown command 'frobnicate'");
}

static void test_report_ok(void **state)
{
    (void)state;
    char *snap = write_fixture("snap.json");
    run_t r = run_cli(NULL, "report", snap, NULL);
    assert_memory_equal(r.out, "[timing] blur                 CPU    avg=  12.340ms", 50);
    assert_string_equal(r.err, "");
    expect(r, 0, r.out, "[timing] saxpy                OpenCL avg=");

    r = run_cli(NULL, "report", "--format", "csv", snap, NULL);
    expect(r, 0, r.out, "name,backend,device,dispatch_count,");

    /* Same result from standard input. */
    r = run_cli(snap, "report", "-", "-f", "csv", NULL);
    expect(r, 0, r.out, "\r\nsaxpy,OpenCL,pthread-cpu,20,");

    /* JSON to a file reads back identical to the source snapshot. */
    char *copy = fx_path(g_dir, "copy.json");
    r = run_cli(NULL, "report", snap, "--format", "json", "-o", copy, NULL);
    assert_string_equal(r.out, "");
    expect(r, 0, r.err, NULL);
    kt_snapshot_t *a = NULL, *b = NULL;
    char err[256], why[128];
    assert_int_equal(kt_snapshot_load(snap, &a, err, sizeof err), 0);
    assert_int_equal(kt_snapshot_load(copy, &b, err, sizeof err), 0);
    assert_int_equal(fx_snapshot_diff(a, b, why, sizeof why), 0);
    fx_free(a);
    fx_free(b);
    free(copy);
    free(snap);
}

static void test_report_errors(void **state)
{
    (void)state;
    char *snap = write_fixture("snap2.json");
    run_t r = run_cli(NULL, "report", "--help", NULL);
    expect(r, 0, r.out, "usage: ktiming report FILE.json");
    r = run_cli(NULL, "report", NULL);
    expect(r, 2, r.err, "no snapshot file given");
    r = run_cli(NULL, "report", snap, snap, NULL);
    expect(r, 2, r.err, "more than one file given");
    r = run_cli(NULL, "report", "--format", "xml", snap, NULL);
    expect(r, 2, r.err, "unknown format 'xml'");
    r = run_cli(NULL, "report", snap, "--bogus", NULL);
    expect(r, 2, r.err, "unknown option '--bogus'");
    r = run_cli(NULL, "report", snap, "-o", NULL);
    expect(r, 2, r.err, "needs a value");

    char *missing = fx_path(g_dir, "missing.json");
    r = run_cli(NULL, "report", missing, NULL);
    expect(r, 1, r.err, "missing.json: No such file or directory");
    free(missing);

    /* A truncated file: the message names the position. */
    size_t len = 0;
    char *text = fx_read_file(snap, &len);
    assert_non_null(text);
    char *cut = fx_path(g_dir, "cut.json");
    assert_int_equal(fx_write_file(cut, text, len / 2), 0);
    r = run_cli(NULL, "report", cut, NULL);
    assert_string_equal(r.out, "");
    expect(r, 1, r.err, "cut.json: JSON syntax error at line ");
    free(cut);

    /* A newer schema version is refused by name. */
    char *v2 = fx_path(g_dir, "v2.json");
    char *p = strstr(text, "\"version\": 2");
    assert_non_null(p);
    p[11] = '7';
    assert_int_equal(fx_write_file(v2, text, len), 0);
    r = run_cli(NULL, "report", v2, NULL);
    expect(r, 1, r.err, "unsupported schema version 7");
    free(v2);
    free(text);

    /* An unwritable destination. */
    char *nodir = fx_path(g_dir, "no/such/dir/out.txt");
    r = run_cli(NULL, "report", snap, "-o", nodir, NULL);
    expect(r, 1, r.err, "No such file or directory");
    free(nodir);
    free(snap);
}

static void test_demo(void **state)
{
    (void)state;
    run_t r = run_cli(NULL, "demo", "--help", NULL);
    expect(r, 0, r.out, "usage: ktiming demo");
    r = run_cli(NULL, "demo", "--dispatches", "0", NULL);
    expect(r, 2, r.err, "--dispatches wants a whole number");
    r = run_cli(NULL, "demo", "--size", "lots", NULL);
    expect(r, 2, r.err, "--size wants MiB");
    r = run_cli(NULL, "demo", "--backend", "directx", NULL);
    expect(r, 2, r.err, "unknown backend 'directx'");
    r = run_cli(NULL, "demo", "extra", NULL);
    expect(r, 2, r.err, "unexpected argument 'extra'");

    char *out = fx_path(g_dir, "demo.json");
    r = run_cli(NULL, "demo", "--backend", "cpu", "--dispatches", "10", "--warmup", "1", "--size", "1", "-o", out,
                NULL);
    if (r.status != 0)
        fail_msg("demo failed (%d): %s", r.status, r.err);
    regex_t re;
    assert_int_equal(regcomp(&re,
                             "^\\[timing\\] (box_blur|saxpy|reduce) +CPU +avg= *[0-9]+\\.[0-9]{2,6}ms "
                             "min= *[0-9]+\\.[0-9]{2,6}ms max= *[0-9]+\\.[0-9]{2,6}ms n=10 +p50=",
                             REG_EXTENDED | REG_NOSUB | REG_NEWLINE),
                     0);
    size_t lines = 0;
    for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n")) {
        if (regexec(&re, line, 0, NULL, 0) != 0)
            fail_msg("line does not match: %s", line);
        lines++;
    }
    assert_int_equal(lines, 3);
    regfree(&re);
    run_free(&r);

    kt_snapshot_t *s = NULL;
    char err[256];
    assert_int_equal(kt_snapshot_load(out, &s, err, sizeof err), 0);
    assert_int_equal(s->count, 3);
    const char *names[] = {"box_blur", "reduce", "saxpy"}; /* sorted by name */
    for (size_t i = 0; i < 3; i++) {
        assert_string_equal(s->entries[i].name, names[i]);
        assert_int_equal(s->entries[i].backend, KT_BACKEND_CPU);
        assert_int_equal(s->entries[i].dispatch_count, 10); /* warm-up dispatches are not recorded */
        assert_true(s->entries[i].min_ns > 0);
        assert_true(s->entries[i].min_ns <= s->entries[i].max_ns);
        assert_true(s->entries[i].sample_count >= 1 && s->entries[i].sample_count <= 10);
    }
    fx_free(s);
    free(out);

    /* The exit writer: KTIMING_OUTPUT saves the snapshot, KTIMING_REPORT=1 prints the table on stderr. */
    char *atexit_json = fx_path(g_dir, "atexit.json");
    char env_out[600];
    snprintf(env_out, sizeof env_out, "KTIMING_OUTPUT=%s", atexit_json);
    g_env[0] = env_out;
    g_env[1] = "KTIMING_REPORT=1";
    r = run_cli(NULL, "demo", "--backend", "cpu", "--dispatches", "10", "--warmup", "0", "--size", "1", NULL);
    g_env[0] = g_env[1] = NULL;
    assert_non_null(strstr(r.err, "[timing] saxpy "));
    expect(r, 0, r.out, "[timing] box_blur ");
    assert_int_equal(kt_snapshot_load(atexit_json, &s, err, sizeof err), 0);
    assert_int_equal(s->count, 3);
    assert_int_equal(s->entries[2].dispatch_count, 10);
    fx_free(s);
    free(atexit_json);

    /* A GPU backend that is not built in or has no device is a note, not a failure. */
    r = run_cli(NULL, "demo", "--backend", "cuda", "--dispatches", "10", "--size", "1", NULL);
    expect(r, 0, "", NULL);
}

static int setup(void **state)
{
    (void)state;
    g_dir = fx_tempdir();
    return g_dir ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    fx_rmtree(g_dir);
    free(g_dir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_top_level),
        cmocka_unit_test(test_report_ok),
        cmocka_unit_test(test_report_errors),
        cmocka_unit_test(test_demo),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
