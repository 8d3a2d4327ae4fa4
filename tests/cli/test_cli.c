/* test_cli.c — runs the built `ktiming` binary: --help/--version, no library taken from the current directory,
 * `report` (formats, -o, stdin, bad files, usage errors and their exit codes) and `demo` (CPU kernels, table
 * shape, saved snapshot). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <regex.h>
#include <sys/stat.h>
#include <ktiming/analysis.h>

#include "support/proc.h"
#include "support/snapshot_fixture.h"

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
    char *outp = ktt_path(g_dir, "stdout"), *errp = ktt_path(g_dir, "stderr");
    run_t r;
    r.status = ktt_run((char *const *)argv, &(ktt_spawn_t){.in = in ? in : KTT_DEVNULL, .out = outp, .err = errp,
                                                          .env = g_env});
    assert_true(r.status >= 0);
    r.out = ktt_read_file(outp, NULL);
    r.err = ktt_read_file(errp, NULL);
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
    char *path = ktt_path(g_dir, name);
    kt_snapshot_t *s = fx_snapshot_full();
    assert_int_equal(kt_report_write(path, s, KT_FORMAT_JSON, NULL), 0);
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

/* The built ktiming finds its libraries through its $ORIGIN RUNPATH and never in the directory it is started
 * from (an empty RUNPATH entry, once padding in the build tree, is the current directory to the dynamic loader).
 * Started where a junk file carries the name of each library it needs, it still runs. */
static void test_no_libraries_from_cwd(void **state)
{
    (void)state;
    char *dir = ktt_path(g_dir, "cwd-libs");
    assert_int_equal(mkdir(dir, 0700), 0);
    const char *names[] = {"libc.so.6", "libm.so.6", "libcjson.so.1", "libktiming.so.0", "libktiming_analysis.so.0"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char *f = ktt_path(dir, names[i]);
        assert_int_equal(ktt_write_file(f, "junk\n", 5), 0);
        free(f);
    }
    char cwd[4096];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(dir), 0);
    run_t r = run_cli(NULL, "--version", NULL);
    assert_int_equal(chdir(cwd), 0);
    if (r.status != 0)
        fail_msg("ktiming --version started in %s: exit %d\nstderr: %s", dir, r.status, r.err);
    assert_string_equal(r.out, "ktiming " KT_VERSION_STRING "\n");
    run_free(&r);
    free(dir);
}

static void test_report_ok(void **state)
{
    (void)state;
    char *snap = write_fixture("snap.json");
    run_t r = run_cli(NULL, "report", snap, NULL);
    /* sorted by total time: blur 37.02 ms, saxpy 17.40 ms, vignette 120 us */
    assert_memory_equal(r.out, "[timing] kernel   backend   n     total", 38);
    assert_non_null(strstr(r.out, "\n[timing] blur     CPU       3  37.02 ms  67.9%  12.34 ms"));
    assert_true(strstr(r.out, "[timing] blur ") < strstr(r.out, "[timing] saxpy "));
    assert_true(strstr(r.out, "[timing] saxpy ") < strstr(r.out, "[timing] vignette "));
    assert_string_equal(r.err, "");
    expect(r, 0, r.out, "[timing] saxpy    OpenCL   20  17.40 ms  31.9%");

    r = run_cli(NULL, "report", "--sort", "name", "--filter", "[sv]*", snap, NULL);
    assert_null(strstr(r.out, "blur"));
    assert_true(strstr(r.out, "[timing] saxpy ") < strstr(r.out, "[timing] vignette "));
    expect(r, 0, r.out, "[timing] 2 of 3 kernels shown (filter)");
    r = run_cli(NULL, "report", "-s", "count", snap, NULL);
    assert_true(strstr(r.out, "[timing] saxpy ") < strstr(r.out, "[timing] blur "));
    expect(r, 0, "", NULL);
    r = run_cli(NULL, "report", "-f", "markdown", snap, NULL);
    expect(r, 0, r.out, "| kernel | backend | device | n | total |");
    /* --filter on a whole-snapshot format keeps only the matching kernels */
    r = run_cli(NULL, "report", "-f", "json", "--filter", "sax*", snap, NULL);
    assert_null(strstr(r.out, "\"blur\""));
    expect(r, 0, r.out, "\"saxpy\"");

    r = run_cli(NULL, "report", "--format", "csv", snap, NULL);
    expect(r, 0, r.out, "name,backend,device,dispatch_count,");

    /* Same result from standard input. */
    r = run_cli(snap, "report", "-", "-f", "csv", NULL);
    expect(r, 0, r.out, "\r\nsaxpy,OpenCL,pthread-cpu,20,");

    /* JSON to a file reads back identical to the source snapshot. */
    char *copy = ktt_path(g_dir, "copy.json");
    r = run_cli(NULL, "report", snap, "--format", "json", "-o", copy, NULL);
    assert_string_equal(r.out, "");
    expect(r, 0, r.err, NULL);
    kt_snapshot_t *a = NULL, *b = NULL;
    char err[256], why[128];
    assert_int_equal(kt_snapshot_load(snap, NULL, &a, err, sizeof err), 0);
    assert_int_equal(kt_snapshot_load(copy, NULL, &b, err, sizeof err), 0);
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
    r = run_cli(NULL, "report", snap, "--sort", "speed", NULL);
    expect(r, 2, r.err, "unknown sort key 'speed'");

    char *missing = ktt_path(g_dir, "missing.json");
    r = run_cli(NULL, "report", missing, NULL);
    expect(r, 1, r.err, "missing.json: No such file or directory");
    free(missing);

    /* A truncated file: the message names the position. */
    size_t len = 0;
    char *text = ktt_read_file(snap, &len);
    assert_non_null(text);
    char *cut = ktt_path(g_dir, "cut.json");
    assert_int_equal(ktt_write_file(cut, text, len / 2), 0);
    r = run_cli(NULL, "report", cut, NULL);
    assert_string_equal(r.out, "");
    expect(r, 1, r.err, "cut.json: JSON syntax error at line ");
    free(cut);

    /* A newer schema version is refused by name. */
    char *v2 = ktt_path(g_dir, "v2.json");
    char *p = strstr(text, "\"version\": 5");
    assert_non_null(p);
    p[11] = '7';
    assert_int_equal(ktt_write_file(v2, text, len), 0);
    r = run_cli(NULL, "report", v2, NULL);
    expect(r, 1, r.err, "unsupported schema version 7");
    free(v2);
    free(text);

    /* An unwritable destination. */
    char *nodir = ktt_path(g_dir, "no/such/dir/out.txt");
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

    char *out = ktt_path(g_dir, "demo.json");
    r = run_cli(NULL, "demo", "--backend", "cpu", "--dispatches", "10", "--warmup", "1", "--size", "1", "-o", out,
                NULL);
    if (r.status != 0)
        fail_msg("demo failed (%d): %s", r.status, r.err);
    regex_t re;
    const char *t = "[0-9.]+ (ns|\xc2\xb5s|us|ms|s) +";
    char pattern[512];
    snprintf(pattern, sizeof pattern,
             "^\\[timing\\] (box_blur|saxpy|reduce) +CPU +10 +%s[0-9.]+%% +%s%s%s%s%s%s[0-9.]+ (ns|\xc2\xb5s|us|ms|s)$", t, t, t, t,
             t, t, t);
    assert_int_equal(regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB | REG_NEWLINE), 0);
    size_t lines = 0;
    for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n")) {
        if (lines++ == 0) {
            assert_memory_equal(line, "[timing] kernel ", 16);
            continue;
        }
        if (regexec(&re, line, 0, NULL, 0) != 0)
            fail_msg("line does not match: %s", line);
    }
    assert_int_equal(lines, 4);
    regfree(&re);
    run_free(&r);

    kt_snapshot_t *s = NULL;
    char err[256];
    assert_int_equal(kt_snapshot_load(out, NULL, &s, err, sizeof err), 0);
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
    char *atexit_json = ktt_path(g_dir, "atexit.json");
    char env_out[600];
    snprintf(env_out, sizeof env_out, "KTIMING_OUTPUT=%s", atexit_json);
    g_env[0] = env_out;
    g_env[1] = "KTIMING_REPORT=1";
    r = run_cli(NULL, "demo", "--backend", "cpu", "--dispatches", "10", "--warmup", "0", "--size", "1", NULL);
    g_env[0] = g_env[1] = NULL;
    assert_non_null(strstr(r.err, "[timing] saxpy "));
    expect(r, 0, r.out, "[timing] box_blur ");
    assert_int_equal(kt_snapshot_load(atexit_json, NULL, &s, err, sizeof err), 0);
    assert_int_equal(s->count, 3);
    assert_int_equal(s->entries[2].dispatch_count, 10);
    fx_free(s);
    free(atexit_json);

    /* A GPU backend that is not built in or has no device is a note, not a failure. */
    r = run_cli(NULL, "demo", "--backend", "cuda", "--dispatches", "10", "--size", "1", NULL);
    expect(r, 0, "", NULL);
}

/* Every command's --help is `ktiming help CMD`; unknown options are usage errors with one message shape. */
static void test_help_and_usage(void **state)
{
    (void)state;
    static const char *const kCmds[] = {"demo", "report", "devices", "compare", "run"};
    for (size_t i = 0; i < sizeof kCmds / sizeof kCmds[0]; i++) {
        run_t a = run_cli(NULL, kCmds[i], "--help", NULL), b = run_cli(NULL, "help", kCmds[i], NULL);
        assert_int_equal(a.status, 0);
        assert_int_equal(b.status, 0);
        assert_string_equal(a.out, b.out);
        char want[64];
        snprintf(want, sizeof want, "usage: ktiming %s", kCmds[i]);
        expect(a, 0, a.out, want);
        run_free(&b);
        if (strcmp(kCmds[i], "run") != 0) { /* run's own usage errors are the edges area's (exit 125) */
            run_t c = run_cli(NULL, kCmds[i], "--no-such-option", NULL);
            char msg[96];
            snprintf(msg, sizeof msg, "ktiming %s: unknown option '--no-such-option'", kCmds[i]);
            expect(c, 2, c.err, msg);
        }
    }
    run_t r = run_cli(NULL, "help", "frobnicate", NULL);
    expect(r, 2, r.err, "unknown command 'frobnicate'");
    r = run_cli(NULL, "help", NULL);
    expect(r, 0, r.out, "ktiming help <command>");
}

/* One error line in the documented shape for every misuse, and nothing misleading after it: unknown options of
 * `run` and of ktiming itself, a bare `run`, `help help`, a compare output that cannot be written, a run that
 * timed nothing with an output asked for; and the overview names every report format. */
static void test_cli_consistency(void **state)
{
    (void)state;
    run_t r = run_cli(NULL, "run", "--bogus", NULL);
    expect(r, 125, r.err, "ktiming run: unknown option '--bogus'\n(try 'ktiming run --help')\n");
    r = run_cli(NULL, "run", "--bogus", NULL);
    assert_null(strstr(r.err, "usage:")); /* the one line, not getopt's message and the whole usage */
    assert_null(strstr(r.err, "unrecognized"));
    run_free(&r);
    r = run_cli(NULL, "run", NULL);
    expect(r, 125, r.err, "ktiming run: no program to run");
    r = run_cli(NULL, "run", "--output", NULL);
    expect(r, 125, r.err, "ktiming run: option '--output' needs a value");
    static const char *const kOverview[] = {"help", "--help", "-h"};
    for (size_t i = 0; i < sizeof kOverview / sizeof kOverview[0]; i++) {
        r = run_cli(NULL, "help", kOverview[i], NULL);
        expect(r, 0, r.out, "'ktiming help <command>'");
    }
    r = run_cli(NULL, "--bogus", NULL);
    expect(r, 2, r.err, "ktiming: unknown option '--bogus'");
    r = run_cli(NULL, NULL);
    expect(r, 2, r.err, "ktiming: no command given");
    r = run_cli(NULL, "--help", NULL);
    expect(r, 0, r.out, "text, markdown, csv, json, chrome, html");

    char *snap = write_fixture("consistency.json");
    char *nodir = ktt_path(g_dir, "no/such/dir/cmp.txt");
    r = run_cli(NULL, "compare", snap, snap, "-o", nodir, NULL);
    assert_int_equal(r.status, 3); /* the output could not be written */
    assert_non_null(strstr(r.err, "cmp.txt: No such file or directory\n"));
    assert_null(strstr(r.err, "input/output error")); /* one line names the file and the cause, no second */
    run_free(&r);
    free(nodir);

    char *out = ktt_path(g_dir, "nothing.json");
    r = run_cli(NULL, "run", "-o", out, "--", "/bin/true", NULL);
    assert_int_equal(r.status, 125);
    assert_non_null(strstr(r.err, "nothing.json was not written"));
    run_free(&r);
    assert_int_equal(access(out, F_OK), -1);
    free(out);
    free(snap);
}

/* Units follow the environment's locale: "µs" under a UTF-8 locale, "us" under C/POSIX (never a byte that a
 * non-UTF-8 terminal shows as mojibake), the same in report and compare. */
static void test_units_follow_locale(void **state)
{
    (void)state;
    char *snap = write_fixture("units.json");
    g_env[0] = "LC_ALL=C";
    run_t r = run_cli(NULL, "report", snap, NULL);
    assert_int_equal(r.status, 0);
    assert_null(strstr(r.out, "\xc2"));
    assert_non_null(strstr(r.out, " us "));
    run_free(&r);
    r = run_cli(NULL, "compare", snap, snap, NULL);
    assert_int_equal(r.status, 0);
    assert_null(strstr(r.out, "\xc2"));
    assert_non_null(strstr(r.out, " us"));
    run_free(&r);
    g_env[0] = "LC_ALL=C.UTF-8";
    r = run_cli(NULL, "report", snap, NULL);
    expect(r, 0, r.out, " \xc2\xb5s ");
    r = run_cli(NULL, "compare", snap, snap, NULL);
    expect(r, 0, r.out, " \xc2\xb5s");
    g_env[0] = NULL;
    free(snap);
}

/* `report -f lines` is the seed's grep-friendly format: one line per kernel, milliseconds with two decimals. */
static void test_report_lines(void **state)
{
    (void)state;
    char *snap = write_fixture("lines.json");
    run_t r = run_cli(NULL, "report", snap, "-f", "lines", NULL);
    assert_int_equal(r.status, 0);
    regex_t line;
    assert_int_equal(regcomp(&line,
                             "^\\[timing\\] [^ ].{19} [A-Za-z]+ *avg= *[0-9]+\\.[0-9]{2}ms min= *[0-9]+\\.[0-9]{2}ms "
                             "max= *[0-9]+\\.[0-9]{2}ms n=[0-9]+$",
                             REG_EXTENDED | REG_NOSUB),
                     0);
    size_t lines = 0;
    for (char *save = NULL, *l = strtok_r(r.out, "\n", &save); l; l = strtok_r(NULL, "\n", &save), lines++)
        if (regexec(&line, l, 0, NULL, 0) != 0)
            fail_msg("not a lines-format line: '%s'", l);
    regfree(&line);
    assert_true(lines >= 3);
    run_free(&r);
    r = run_cli(NULL, "report", snap, "-f", "lines", NULL);
    expect(r, 0, r.out, "[timing] blur                 CPU   avg=  12.34ms min=  11.98ms max=  14.02ms n=3\n");
    free(snap);
}

/* Hostile kernel names reach the terminal escaped through `ktiming report` (text and markdown). */
static void test_report_hostile_names(void **state)
{
    (void)state;
    kt_snapshot_t *s = fx_snapshot_new(3);
    fx_entry(s, 0, "t\x1b]0;owned\x07\x1b[2J\r\nfake", KT_BACKEND_CPU, "host", 3, 1000, 900, 1100);
    fx_entry(s, 1, "bidi\xe2\x80\xae" "exe\xc2\x9b", KT_BACKEND_CPU, "host", 3, 2000, 900, 3100);
    fx_entry(s, 2, "<script>|x", KT_BACKEND_CPU, "host", 3, 3000, 900, 5100);
    char *path = ktt_path(g_dir, "hostile.json");
    assert_int_equal(kt_report_write(path, s, KT_FORMAT_JSON, NULL), 0);
    fx_free(s);
    for (int md = 0; md < 2; md++) {
        run_t r = run_cli(NULL, "report", "-f", md ? "markdown" : "text", path, NULL);
        for (const unsigned char *p = (const unsigned char *)r.out; *p; p++) {
            assert_false((*p < 0x20 && *p != '\n') || *p == 0x7f);
            assert_false(*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f);
            assert_false(*p == 0xe2 && p[1] == 0x80 && p[2] == 0xae);
        }
        if (md)
            assert_null(strstr(r.out, "<script>"));
        expect(r, 0, r.out, md ? "bidi\\\\u202eexe\\\\u009b" : "bidi\\u202eexe\\u009b");
    }
    free(path);
}

/* `merge` refuses inputs that hold the same process (the same file twice, an earlier merge caught by a glob):
 * merging them would count its dispatches twice. --allow-same-process overrides. */
static void test_merge_same_process_refused(void **state)
{
    (void)state;
    char *paths[2];
    for (int k = 0; k < 2; k++) {
        kt_snapshot_t *s = fx_snapshot_full();
        s->pid = 4100 + k;
        paths[k] = ktt_path(g_dir, k ? "mb.json" : "ma.json");
        assert_int_equal(kt_report_write(paths[k], s, KT_FORMAT_JSON, NULL), 0);
        fx_free(s);
    }
    char *merged = ktt_path(g_dir, "mab.json");
    run_t r = run_cli(NULL, "merge", paths[0], paths[0], NULL);
    expect(r, 1, r.err, "(pid 4100)");
    r = run_cli(NULL, "merge", paths[0], paths[1], "-o", merged, NULL);
    expect(r, 0, r.err, NULL);
    r = run_cli(NULL, "merge", paths[0], paths[1], merged, NULL); /* a glob that caught the earlier merge */
    expect(r, 1, r.err, "count its dispatches twice");
    r = run_cli(NULL, "merge", "--allow-same-process", paths[0], paths[0], NULL);
    expect(r, 0, r.out, "\"sources\"");
    free(merged);
    free(paths[0]);
    free(paths[1]);
}

/* Two hosts' snapshots with the same devices: merged, each host's devices stay apart (labels "... @n2");
 * --by-model folds them (issue 34). */
static void test_merge_devices_by_host(void **state)
{
    (void)state;
    char *paths[2];
    for (int k = 0; k < 2; k++) {
        kt_snapshot_t *s = fx_snapshot_full();
        snprintf(s->host, sizeof s->host, "%s", k ? "n2" : "n1");
        paths[k] = ktt_path(g_dir, k ? "hb.json" : "ha.json");
        assert_int_equal(kt_report_write(paths[k], s, KT_FORMAT_JSON, NULL), 0);
        fx_free(s);
    }
    run_t r = run_cli(NULL, "merge", paths[0], paths[1], NULL);
    assert_non_null(strstr(r.out, " @n1\""));
    expect(r, 0, r.out, " @n2\"");
    r = run_cli(NULL, "merge", "--by-model", paths[0], paths[1], NULL);
    assert_null(strstr(r.out, " @n2\""));
    expect(r, 0, r.out, "\"id_kind\": \"model\"");
    free(paths[0]);
    free(paths[1]);
}

/* `ktiming devices` ends with every registered device by the label `run` gives it: two identical PoCL devices get
 * two labels (issue 34). */
static void test_devices_labels_section(void **state)
{
    (void)state;
    g_env[0] = "POCL_DEVICES=pthread pthread";
    g_env[1] = NULL;
    run_t r = run_cli(NULL, "devices", NULL);
    g_env[0] = NULL;
    if (r.status != 0 || !strstr(r.out, "Portable Computing Language")) {
        run_free(&r);
        skip(); /* no PoCL here: nothing to list */
    }
    const char *sec = strstr(r.out, "\ndevice labels (as `ktiming run` reports name them)\n");
    assert_non_null(sec);
    char first[256] = "", second[256] = "";
    int n = 0;
    for (const char *p = strstr(sec, "\n  OpenCL  "); p && n < 3; p = strstr(p + 1, "\n  OpenCL  ")) {
        const char *end = strstr(p + 11, "  [");
        assert_non_null(end);
        snprintf(n ? second : first, sizeof first, "%.*s", (int)(end - (p + 11)), p + 11);
        n++;
    }
    assert_int_equal(n, 2);
    assert_string_not_equal(first, second);
    run_free(&r);
}

/* What the bash completion prints for script (COMP_WORDS/COMP_CWORD settings, _ktiming and echo lines), run in a
 * bash that sourced it: malloc'd; NULL with no bash. */
static char *completion_run(const char *script)
{
    if (access("/bin/bash", X_OK) != 0)
        return NULL;
    char *path = ktt_path(g_dir, "compl.txt"), cmd[4096];
    snprintf(cmd, sizeof cmd, "/bin/bash -c 'source \"%s\" && %s' > %s 2>&1", KT_COMPLETION_PATH, script, path);
    assert_int_equal(system(cmd), 0);
    char *out = ktt_read_file(path, NULL);
    assert_non_null(out);
    free(path);
    return out;
}

/* The bash completion offers the commands, each command's options, and format words after -f. */
static void test_bash_completion(void **state)
{
    (void)state;
    char *out = completion_run("COMP_WORDS=(ktiming \"\"); COMP_CWORD=1; _ktiming; echo \"1:${COMPREPLY[*]}\"; "
                               "COMP_WORDS=(ktiming report --s); COMP_CWORD=2; _ktiming; echo \"2:${COMPREPLY[*]}\"; "
                               "COMP_WORDS=(ktiming compare -f \"\"); COMP_CWORD=3; _ktiming; "
                               "echo \"3:${COMPREPLY[*]}\"; "
                               "COMP_WORDS=(ktiming help \"\"); COMP_CWORD=2; _ktiming; echo \"4:${COMPREPLY[*]}\"");
    if (!out)
        skip();
    assert_non_null(strstr(out, "1:"));
    for (const char *w = "demo report devices compare run help"; *w;) {
        char word[16];
        size_t n = strcspn(w, " ");
        snprintf(word, sizeof word, "%.*s", (int)n, w);
        assert_non_null(strstr(strstr(out, "1:"), word));
        w += n + (w[n] == ' ');
    }
    assert_non_null(strstr(out, "2:--sort"));
    char *l3 = strstr(out, "3:");
    assert_non_null(l3);
    assert_non_null(strstr(l3, "markdown"));
    assert_non_null(strstr(l3, "json"));
    assert_non_null(strstr(strstr(out, "4:"), "compare"));
    free(out);
}

/* The man page is valid roff (groff reports no warnings) and documents every command and the exit table. */
static void test_man_page(void **state)
{
    (void)state;
    if (access("/usr/bin/groff", X_OK) != 0)
        skip();
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "groff -t -man -Tutf8 -P-bou -ww '%s' > %s/man.txt 2> %s/man.err", KT_MAN_PATH, g_dir, g_dir);
    assert_int_equal(system(cmd), 0);
    char *errp = ktt_path(g_dir, "man.err"), *outp = ktt_path(g_dir, "man.txt");
    char *err = ktt_read_file(errp, NULL), *out = ktt_read_file(outp, NULL);
    assert_non_null(err);
    assert_non_null(out);
    if (*err)
        fail_msg("groff warnings:\n%s", err);
    static const char *const kWords[] = {"demo", "report", "devices", "compare", "run", "EXIT STATUS", "125",
                                         "--filter", "--sort", "markdown"};
    for (size_t i = 0; i < sizeof kWords / sizeof kWords[0]; i++)
        if (!strstr(out, kWords[i]))
            fail_msg("the man page lacks \"%s\"", kWords[i]);
    free(err);
    free(out);
    free(errp);
    free(outp);
}

/* "-o -" is standard output for every command that takes -o (no file named "-"), --trace - too; merge refuses
 * what would put two documents on it or drop one; a failed trace write says why. */
static void test_output_dash(void **state)
{
    (void)state;
    char *snap = write_fixture("dash.json"), *dir = ktt_path(g_dir, "dash-cwd"), *other = ktt_path(g_dir, "dash2.json");
    kt_snapshot_t *s = fx_snapshot_full();
    s->pid = 4242;
    assert_int_equal(kt_report_write(other, s, KT_FORMAT_JSON, NULL), 0);
    fx_free(s);
    assert_int_equal(mkdir(dir, 0700), 0);
    char cwd[4096];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(dir), 0); /* where a file named "-" would appear */
    run_t r = run_cli(NULL, "compare", snap, snap, "-o", "-", NULL);
    assert_int_equal(access("-", F_OK), -1);
    expect(r, 0, r.out, "kernels matched");
    r = run_cli(NULL, "compare", snap, snap, "-f", "json", "--output=-", NULL);
    assert_int_equal(access("-", F_OK), -1);
    expect(r, 0, r.out, "\"ktiming_compare\"");
    r = run_cli(NULL, "demo", "--backend", "cpu", "--dispatches", "10", "--warmup", "0", "--size", "1", "-o", "-",
                NULL);
    assert_int_equal(access("-", F_OK), -1);
    assert_non_null(strstr(r.err, "[timing] saxpy ")); /* the table moves to stderr */
    assert_null(strstr(r.out, "[timing]"));
    expect(r, 0, r.out, "\"schema\": \"ktiming.snapshot\"");
    r = run_cli(NULL, "merge", snap, other, "--by-rank", "-o", "-", NULL);
    expect(r, 2, r.err, "both write standard output");
    r = run_cli(NULL, "merge", snap, other, "--trace", "-", NULL);
    expect(r, 2, r.err, "both write standard output");
    char *merged = ktt_path(dir, "m.json");
    r = run_cli(NULL, "merge", snap, other, "--trace", "-", "-o", merged, NULL);
    assert_int_equal(access("-", F_OK), -1);
    expect(r, 0, r.out, "\"traceEvents\"");
    if (access("/dev/full", W_OK) == 0) {
        r = run_cli(NULL, "merge", snap, other, "--trace", "/dev/full", "-o", merged, NULL);
        assert_null(strstr(r.err, "input/output error"));
        expect(r, 1, r.err, "/dev/full: No space left on device");
    }
    assert_int_equal(chdir(cwd), 0);
    free(merged);
    free(snap);
    free(other);
    free(dir);
}

/* Nothing says "done" (0) when what it printed was not written: --help, --version and `devices` on a full device
 * or a closed standard output exit with the command's failure status and one line saying so. */
static void test_stdout_write_failure(void **state)
{
    (void)state;
    static const struct {
        const char *args[3];
        int status;
    } kCases[] = {
        {{"--help"}, 1},           {{"--version"}, 1},          {{"devices"}, 1},
        {{"devices", "--help"}, 1}, {{"report", "--help"}, 1},   {{"merge", "--help"}, 1},
        {{"demo", "--help"}, 1},   {{"compare", "--help"}, 3},  {{"help", "report"}, 1},
    };
    char *errp = ktt_path(g_dir, "wf.err");
    for (size_t i = 0; i < sizeof kCases / sizeof kCases[0]; i++) {
        char *const argv[] = {KT_CLI_PATH, (char *)kCases[i].args[0], (char *)kCases[i].args[1], NULL};
        if (access("/dev/full", W_OK) == 0) {
            int st = ktt_run(argv, &(ktt_spawn_t){.out = "/dev/full", .err = errp});
            char *err = ktt_read_file(errp, NULL);
            if (st != kCases[i].status || !err || !strstr(err, "cannot write standard output"))
                fail_msg("ktiming %s %s >/dev/full: exit %d, stderr: %s", kCases[i].args[0],
                         kCases[i].args[1] ? kCases[i].args[1] : "", st, err ? err : "");
            free(err);
        }
        /* a closed standard output: the shell closes it, then runs ktiming */
        char *const sh[] = {"/bin/sh", "-c", "exec \"$0\" \"$@\" >&-", argv[0], argv[1], argv[2], NULL};
        int st = ktt_run(sh, &(ktt_spawn_t){.err = errp});
        if (st != kCases[i].status)
            fail_msg("ktiming %s >&-: exit %d", kCases[i].args[0], st);
    }
    free(errp);
}

/* merge takes --max-input-mb, the option its size-limit message names (it was "unknown option"). */
static void test_merge_max_input(void **state)
{
    (void)state;
    char *small = write_fixture("mi-small.json"), *big = ktt_path(g_dir, "mi-big.json");
    size_t len = (size_t)3 << 19; /* 1.5 MiB: a snapshot padded with whitespace */
    char *doc = malloc(len);
    assert_non_null(doc);
    memset(doc, ' ', len);
    static const char kDoc[] = "{\"schema\":\"ktiming.snapshot\",\"version\":5,\"pid\":77,\"entries\":[]}";
    memcpy(doc, kDoc, sizeof kDoc - 1);
    assert_int_equal(ktt_write_file(big, doc, len), 0);
    free(doc);
    run_t r = run_cli(NULL, "merge", "--max-input-mb", "1", small, big, NULL);
    expect(r, 1, r.err, "mi-big.json: 1572864 bytes, larger than the input limit of 1 MiB (--max-input-mb)");
    r = run_cli(NULL, "merge", "--max-input-mb=2", small, big, NULL);
    expect(r, 0, r.out, "\"sources\"");
    r = run_cli(NULL, "merge", "--max-input-mb", "0", small, big, NULL);
    expect(r, 2, r.err, "--max-input-mb: not a size in MiB");
    free(small);
    free(big);
}

/* A file's own bytes in an error message reach the terminal escaped (report, compare and merge share the loader). */
static void test_load_error_escaped(void **state)
{
    (void)state;
    char *bad = ktt_path(g_dir, "esc-schema.json");
    static const char kDoc[] = "{\"schema\":\"\\u001b[31mX\",\"version\":5,\"entries\":[]}";
    assert_int_equal(ktt_write_file(bad, kDoc, sizeof kDoc - 1), 0);
    run_t r = run_cli(NULL, "report", bad, NULL);
    assert_null(strchr(r.err, '\x1b'));
    expect(r, 1, r.err, "schema is \"\\x1b[31mX\"");
    r = run_cli(NULL, "compare", bad, bad, NULL);
    assert_null(strchr(r.err, '\x1b'));
    expect(r, 3, r.err, "schema is \"\\x1b[31mX\"");
    r = run_cli(NULL, "merge", bad, NULL);
    assert_null(strchr(r.err, '\x1b'));
    expect(r, 1, r.err, "schema is \"\\x1b[31mX\"");
    free(bad);
}

/* Each "--long-option" word of text, once, into opts as " --a --b " (each word between spaces). */
static void long_options(const char *text, char *opts, size_t cap)
{
    snprintf(opts, cap, " ");
    for (const char *p = strstr(text, "--"); p; p = strstr(p + 2, "--")) {
        size_t n = 2;
        while ((p[n] >= 'a' && p[n] <= 'z') || p[n] == '-')
            n++;
        if (n < 4 || (p > text && p[-1] != ' ' && p[-1] != '[' && p[-1] != '\n'))
            continue;
        char word[72];
        snprintf(word, sizeof word, " %.*s ", (int)n, p);
        if (!strstr(opts, word) && strlen(opts) + n + 1 < cap)
            strncat(opts, word + 1, n + 1);
    }
}

/* Where the rendered man page's section that starts at sec ends: at the next line that is a section heading
 * (starts with a capital) or a command's subsection heading ("   run" alone on its line). */
static const char *man_section_end(const char *sec)
{
    for (const char *p = strchr(sec + 1, '\n'); p; p = strchr(p + 1, '\n')) {
        const char *l = p + 1;
        if (*l >= 'A' && *l <= 'Z')
            return p;
        if (!strncmp(l, "   ", 3) && l[3] >= 'a' && l[3] <= 'z') {
            size_t n = strspn(l + 3, "abcdefghijklmnopqrstuvwxyz");
            if (l[3 + n] == '\n')
                return p;
        }
    }
    return sec + strlen(sec);
}

/* Every option a command's --help lists is offered by the bash completion and described in the man page's section
 * of that command; the formats `report` and `compare` take are completed after -f. */
static void test_docs_follow_help(void **state)
{
    (void)state;
    int have_groff = access("/usr/bin/groff", X_OK) == 0, have_bash = access("/bin/bash", X_OK) == 0;
    if (!have_groff || !have_bash)
        skip();
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "groff -t -man -Tutf8 -P-bou -ww '%s' > %s/man2.txt 2>/dev/null", KT_MAN_PATH, g_dir);
    assert_int_equal(system(cmd), 0);
    char *manp = ktt_path(g_dir, "man2.txt"), *man = ktt_read_file(manp, NULL);
    assert_non_null(man);
    static const char *const kCmds[] = {"demo", "report", "compare", "merge", "devices"};
    for (size_t i = 0; i < sizeof kCmds / sizeof kCmds[0]; i++) {
        run_t r = run_cli(NULL, kCmds[i], "--help", NULL);
        assert_int_equal(r.status, 0);
        char opts[2048];
        long_options(r.out, opts, sizeof opts);
        run_free(&r);
        /* the man page's section: from "   CMD" to the next subsection or section heading */
        char head[32];
        snprintf(head, sizeof head, "\n   %s\n", kCmds[i]);
        const char *sec = strstr(man, head);
        assert_non_null(sec);
        size_t len = (size_t)(man_section_end(sec + 1) - sec);
        char *section = strndup(sec, len);
        /* the completion's offers for "ktiming CMD --" */
        char script[256];
        snprintf(script, sizeof script, "COMP_WORDS=(ktiming %s --); COMP_CWORD=2; _ktiming; echo \" ${COMPREPLY[*]} \"",
                 kCmds[i]);
        char *compl = completion_run(script);
        assert_non_null(compl);
        for (const char *w = opts; *w;) {
            while (*w == ' ')
                w++;
            size_t n = strcspn(w, " ");
            if (!n)
                break;
            char word[72];
            snprintf(word, sizeof word, " %.*s ", (int)n, w);
            if (!strstr(compl, word))
                fail_msg("completion of 'ktiming %s --' lacks %s: %s", kCmds[i], word, compl);
            snprintf(word, sizeof word, "%.*s", (int)n, w);
            if (strcmp(word, "--help") && !strstr(section, word))
                fail_msg("man page section '%s' lacks %s", kCmds[i], word);
            w += n;
        }
        free(compl);
        free(section);
    }
    free(man);
    free(manp);
    /* format words after -f */
    char *compl = completion_run("COMP_WORDS=(ktiming report -f \"\"); COMP_CWORD=3; _ktiming; "
                                 "echo \"r: ${COMPREPLY[*]} \"; COMP_WORDS=(ktiming compare -f \"\"); COMP_CWORD=3; "
                                 "_ktiming; echo \"c: ${COMPREPLY[*]} \"");
    assert_non_null(compl);
    char *c = strstr(compl, "c: ");
    assert_non_null(c);
    *c = '\0';
    static const char *const kReport[] = {" text ", " markdown ", " md ", " csv ", " json ", " chrome ", " html ",
                                          " lines "};
    for (size_t i = 0; i < sizeof kReport / sizeof kReport[0]; i++)
        if (!strstr(compl, kReport[i]))
            fail_msg("report -f completion lacks%s", kReport[i]);
    static const char *const kCompare[] = {" text ", " markdown ", " md ", " json ", " html "};
    for (size_t i = 0; i < sizeof kCompare / sizeof kCompare[0]; i++)
        if (!strstr(c + 2, kCompare[i]))
            fail_msg("compare -f completion lacks%s", kCompare[i]);
    free(compl);
}

KTT_TMPDIR_GROUP(g_dir, "cli")

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_top_level),
        cmocka_unit_test(test_no_libraries_from_cwd),
        cmocka_unit_test(test_report_ok),
        cmocka_unit_test(test_report_errors),
        cmocka_unit_test(test_demo),
        cmocka_unit_test(test_help_and_usage),
        cmocka_unit_test(test_cli_consistency),
        cmocka_unit_test(test_units_follow_locale),
        cmocka_unit_test(test_report_lines),
        cmocka_unit_test(test_report_hostile_names),
        cmocka_unit_test(test_merge_same_process_refused),
        cmocka_unit_test(test_merge_devices_by_host),
        cmocka_unit_test(test_devices_labels_section),
        cmocka_unit_test(test_bash_completion),
        cmocka_unit_test(test_man_page),
        cmocka_unit_test(test_output_dash),
        cmocka_unit_test(test_stdout_write_failure),
        cmocka_unit_test(test_merge_max_input),
        cmocka_unit_test(test_load_error_escaped),
        cmocka_unit_test(test_docs_follow_help),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
