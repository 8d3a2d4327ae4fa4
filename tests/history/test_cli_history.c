/* test_cli_history.c — `ktiming history add|show|check` end to end on a SQLite file: usage errors, idempotent adds,
 * every output format, a regression found at its commit (exit 1 with --fail-on-regression), one fixed later (not
 * failing), hostile names escaped, and one-line errors with status 3 for missing, corrupt or foreign inputs. */
#include "support/files.h"
#include "support/proc.h"
#include "support/compare_synth.h"

#include <ktiming.h>

#include <cJSON.h>
#include <dirent.h>
#include <pwd.h>
#include <sys/stat.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#define RUNS 20
static char *g_dir;
static char g_db[4096], g_err[4096], g_env[4200];
static char g_run[RUNS][4096];

/* Run i: "steady" flat, "slowed" 30 % slower from run 12 on, "fixed" 30 % slower for runs 8..13 only, and a
 * kernel named with a terminal escape. */
static void write_run(size_t i)
{
    kt_snapshot_t *s = synth_snapshot(4);
    synth_add(s, "fixed", KT_BACKEND_CPU, "host", 40, i >= 8 && i < 14 ? 130000.0 : 100000.0, 0.02, i * 4 + 1);
    synth_add(s, "slowed", KT_BACKEND_CPU, "host", 40, i >= 12 ? 65000.0 : 50000.0, 0.02, i * 4 + 2);
    synth_add(s, "steady", KT_BACKEND_CPU, "host", 40, 20000.0, 0.02, i * 4 + 3);
    synth_add(s, "\x1b[31mred", KT_BACKEND_CPU, "host", 40, 10000.0, 0.02, i * 4 + 4);
    snprintf(s->host, sizeof s->host, "ci-box");
    s->taken_ns = 1000 + i; /* distinct files */
    assert_int_equal(kt_report_write(g_run[i], s, KT_FORMAT_JSON, NULL), 0);
    synth_free(s);
}

static int setup(void **state)
{
    (void)state;
    if (!(g_dir = ktt_tmpdir("cli-history")))
        return -1;
    snprintf(g_db, sizeof g_db, "%s/h.sqlite", g_dir);
    snprintf(g_err, sizeof g_err, "%s/err.txt", g_dir);
    snprintf(g_env, sizeof g_env, "KTIMING_HISTORY=%s", g_db);
    for (size_t i = 0; i < RUNS; i++) {
        snprintf(g_run[i], sizeof g_run[i], "%s/run%02zu.json", g_dir, i);
        write_run(i);
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    ktt_rmtree(g_dir);
    free(g_dir);
    return 0;
}

/* Runs `ktiming history ARGS` with KTIMING_HISTORY set and stderr in g_err: stdout (malloc'd), *status. */
static char *cli(int *status, char *const *args)
{
    char *argv[32] = {KT_CLI_PATH, "history"};
    size_t n = 2;
    for (; *args && n < 31; args++)
        argv[n++] = *args;
    argv[n] = NULL;
    const char *env[] = {g_env, NULL};
    char *out = ktt_run_capture(argv, &(ktt_spawn_t){.err = g_err, .env = env}, status);
    assert_non_null(out);
    return out;
}
#define CLI(st, ...) cli(st, (char *const[]){__VA_ARGS__, NULL})

static int status_of(char *const *args)
{
    int st;
    free(cli(&st, args));
    return st;
}
#define STATUS(...) status_of((char *const[]){__VA_ARGS__, NULL})

static char *err_text(void) { return ktt_read_file(g_err, NULL); }

static void assert_err_contains(const char *needle)
{
    char *e = err_text();
    assert_non_null(e);
    if (!strstr(e, needle)) {
        fprintf(stderr, "stderr: %s (expected '%s')\n", e, needle);
        fail();
    }
    free(e);
}

/* The database clients are not loaded when the CLI starts: libpq (PostgreSQL) brings ~25 libraries whose loading
 * cost every `ktiming` start, `run` included, ~4 ms of CPU (docs/run.md); it is loaded when a postgresql:// store
 * is opened, and SQLite when a store is (test_add_show_check: the store works so). The dynamic loader lists what
 * it loads (LD_TRACE_LOADED_OBJECTS, what ldd uses). */
static void test_start_loads_no_db_client(void **state)
{
    (void)state;
    char *argv[] = {KT_CLI_PATH, "--version", NULL};
    const char *env[] = {"LD_TRACE_LOADED_OBJECTS=1", NULL};
    int st = -1;
    char *out = ktt_run_capture(argv, &(ktt_spawn_t){.err = g_err, .env = env}, &st);
    assert_non_null(out);
    assert_int_equal(st, 0);
    assert_non_null(strstr(out, "libktiming")); /* the list is there */
    if (strstr(out, "libpq") || strstr(out, "libssl") || strstr(out, "libgssapi") || strstr(out, "libsqlite3")) {
        fprintf(stderr, "loaded at start:\n%s", out);
        fail();
    }
    free(out);
}

static void test_usage(void **state)
{
    (void)state;
    char *argv[] = {KT_CLI_PATH, "history", NULL};
    assert_int_equal(ktt_run_to(argv, NULL), 2);
    assert_int_equal(STATUS("frobnicate"), 2);
    assert_int_equal(STATUS("add"), 2);
    assert_int_equal(STATUS("add", g_run[0], "--when", "tuesday"), 2);
    assert_int_equal(STATUS("add", g_run[0], "--tag", "novalue"), 2);
    assert_int_equal(STATUS("show", "--commit", "abc"), 2); /* an add option */
    assert_int_equal(STATUS("show", "--fail-on-regression"), 2); /* a check option */
    assert_int_equal(STATUS("show", "-f", "xml"), 2);
    assert_int_equal(STATUS("show", "--last", "0"), 2);
    assert_int_equal(STATUS("check", "--threshold", "-1"), 2);
    assert_int_equal(STATUS("check", "--alpha", "1"), 2);
    assert_int_equal(STATUS("show", "extra"), 2);
    int st;
    char *help = CLI(&st, "--help");
    assert_int_equal(st, 0);
    assert_non_null(strstr(help, "ktiming history add"));
    assert_non_null(strstr(help, "--fail-on-regression"));
    /* `ktiming help history` is `ktiming history --help`; the top-level list names it. */
    char *argv2[] = {KT_CLI_PATH, "help", "history", NULL};
    char *same = ktt_run_capture(argv2, NULL, &st);
    assert_int_equal(st, 0);
    assert_string_equal(same, help);
    free(same);
    free(help);
    char *argv3[] = {KT_CLI_PATH, "--help", NULL};
    char *top = ktt_run_capture(argv3, NULL, &st);
    assert_non_null(strstr(top, "  history "));
    free(top);
    /* An unknown option has the shape of every command's. */
    assert_int_equal(STATUS("--no-such-option"), 2);
    assert_err_contains("ktiming history: unknown option '--no-such-option'");
    assert_int_equal(STATUS("show", "--no-such-option"), 2);
    assert_err_contains("ktiming history: unknown option '--no-such-option'");
}

/* The bash completion knows the subcommands, their options and the formats; the man page documents them. */
static void test_completion_and_man(void **state)
{
    (void)state;
    if (access("/bin/bash", X_OK) != 0)
        skip();
    char cmd[8192 + 1024], out[4200];
    snprintf(out, sizeof out, "%s/compl.txt", g_dir);
    snprintf(cmd, sizeof cmd,
             "/bin/bash -c 'source \"%s\" && "
             "COMP_WORDS=(ktiming \"\"); COMP_CWORD=1; _ktiming; echo \"1:${COMPREPLY[*]}\"; "
             "COMP_WORDS=(ktiming history \"\"); COMP_CWORD=2; _ktiming; echo \"2:${COMPREPLY[*]}\"; "
             "COMP_WORDS=(ktiming history check --f); COMP_CWORD=3; _ktiming; echo \"3:${COMPREPLY[*]}\"; "
             "COMP_WORDS=(ktiming history show -f \"\"); COMP_CWORD=4; _ktiming; echo \"4:${COMPREPLY[*]}\"; "
             "COMP_WORDS=(ktiming history add --c); COMP_CWORD=3; _ktiming; echo \"5:${COMPREPLY[*]}\"' > %s 2>&1",
             KT_COMPLETION_PATH, out);
    assert_int_equal(system(cmd), 0);
    char *c = ktt_read_file(out, NULL);
    assert_non_null(c);
    assert_non_null(strstr(strstr(c, "1:"), "history"));
    assert_non_null(strstr(c, "2:add show check"));
    assert_non_null(strstr(strstr(c, "3:"), "--fail-on-regression"));
    assert_non_null(strstr(strstr(c, "4:"), "html"));
    assert_non_null(strstr(c, "5:--commit"));
    assert_null(strstr(strstr(c, "5:"), "--commit-url")); /* a show/check option, not add's */
    free(c);
    if (access("/usr/bin/groff", X_OK) != 0)
        return;
    snprintf(out, sizeof out, "%s/man.txt", g_dir);
    snprintf(cmd, sizeof cmd, "groff -t -man -Tutf8 -P-bou -ww '%s' > %s 2>&1", KT_MAN_PATH, out);
    assert_int_equal(system(cmd), 0);
    char *man = ktt_read_file(out, NULL);
    assert_non_null(man);
    assert_non_null(strstr(man, "ktiming history add|show|check"));
    assert_non_null(strstr(man, "KTIMING_HISTORY"));
    assert_non_null(strstr(man, "Benjamini"));
    assert_null(strstr(man, "warning"));
    free(man);
}

static void test_missing_and_bad(void **state)
{
    (void)state;
    /* show and check never create a history. */
    assert_int_equal(STATUS("show"), 3);
    assert_err_contains("no history there");
    assert_int_not_equal(access(g_db, F_OK), 0);
    char bad[4200], notjson[4200];
    snprintf(bad, sizeof bad, "%s/bad.sqlite", g_dir);
    FILE *f = fopen(bad, "w");
    fputs("this is not a database, just some text that is long enough to look like a header\n", f);
    fclose(f);
    assert_int_equal(STATUS("show", "--db", bad), 3);
    assert_err_contains("not a ktiming history");
    char *e = err_text();
    assert_int_equal(strchr(e, '\n') - e + 1, (long)strlen(e)); /* one line */
    free(e);
    assert_int_equal(STATUS("add", g_run[0], "--db", bad), 3);
    snprintf(notjson, sizeof notjson, "%s/not.json", g_dir);
    f = fopen(notjson, "w");
    fputs("{\"format\": \"something else\"}", f);
    fclose(f);
    char other[4200];
    snprintf(other, sizeof other, "%s/other.sqlite", g_dir);
    assert_int_equal(STATUS("add", notjson, "--db", other), 3);
    assert_err_contains("not.json");
}

static void test_add_show_check(void **state)
{
    (void)state;
    char commit[RUNS][16], when[RUNS][32];
    for (size_t i = 0; i < RUNS; i++) {
        snprintf(commit[i], sizeof commit[i], "c0ffee%02zu", i);
        snprintf(when[i], sizeof when[i], "2026-01-%02zuT12:00:00Z", i + 1);
        assert_int_equal(STATUS("add", g_run[i], "--commit", commit[i], "--branch", "main", "--when", when[i],
                                "--tag", "job=ci"),
                         0);
        assert_err_contains("added as run");
    }
    assert_int_equal(STATUS("add", g_run[4], "--commit", commit[4]), 0);
    assert_err_contains("already stored");

    int st;
    char *text = CLI(&st, "show");
    assert_int_equal(st, 0);
    assert_non_null(strstr(text, "slowed"));
    assert_non_null(strstr(text, "ci-box"));
    assert_null(strchr(text, '\x1b')); /* the escape is written escaped */
    assert_non_null(strstr(text, "\\x1b[31mred"));
    assert_non_null(strstr(text, "▁"));
    free(text);

    char *js = CLI(&st, "show", "-f", "json", "--kernel", "s*");
    assert_int_equal(st, 0);
    cJSON *root = cJSON_Parse(js);
    assert_non_null(root);
    cJSON *series = cJSON_GetObjectItem(root, "series");
    assert_int_equal(cJSON_GetArraySize(series), 2); /* slowed, steady */
    cJSON *slowed = cJSON_GetArrayItem(series, 0);
    assert_string_equal(cJSON_GetObjectItem(slowed, "kernel")->valuestring, "slowed");
    assert_int_equal(cJSON_GetObjectItem(slowed, "runs")->valueint, RUNS);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(slowed, "medians_ns")), RUNS);
    assert_string_equal(cJSON_GetObjectItem(slowed, "commit")->valuestring, commit[RUNS - 1]);
    cJSON_Delete(root);
    free(js);

    char *csv = CLI(&st, "show", "-f", "csv", "--last", "5");
    assert_int_equal(st, 0);
    assert_int_equal(strncmp(csv, "kernel,backend,device,machine,runs,", 35), 0);
    assert_non_null(strstr(csv, "\"steady\",\"CPU\",\"host\",\"ci-box\",5,"));
    free(csv);
    /* Filters on device and machine; none matching is said, not an error. */
    char *none = CLI(&st, "show", "--device", "gpu*");
    assert_int_equal(st, 0);
    assert_null(strstr(none, "slowed"));
    free(none);
    assert_err_contains("no series match");
    char *mach = CLI(&st, "show", "-f", "csv", "--machine", "ci-*", "--kernel", "steady");
    assert_int_equal(st, 0);
    assert_non_null(strstr(mach, "\"steady\""));
    assert_null(strstr(mach, "\"slowed\""));
    free(mach);
    char *md = CLI(&st, "show", "-f", "markdown");
    assert_int_equal(st, 0);
    assert_non_null(strstr(md, "| kernel | backend |"));
    free(md);

    /* check: "slowed" regressed at run 13 (index 12) and stays slow; "fixed" regressed and came back. */
    char *ck = CLI(&st, "check", "-f", "json");
    assert_int_equal(st, 0);
    root = cJSON_Parse(ck);
    assert_non_null(root);
    assert_int_equal(cJSON_GetObjectItem(root, "regressions")->valueint, 1);
    cJSON *ch;
    int seen_slowed = 0, seen_fixed = 0, others = 0;
    cJSON_ArrayForEach(ch, cJSON_GetObjectItem(root, "changes"))
    {
        const char *k = cJSON_GetObjectItem(ch, "kernel")->valuestring;
        const char *c = cJSON_GetObjectItem(ch, "commit")->valuestring;
        double change = cJSON_GetObjectItem(ch, "change")->valuedouble;
        cJSON *ci = cJSON_GetObjectItem(ch, "ci");
        if (!strcmp(k, "slowed")) {
            seen_slowed = 1;
            assert_string_equal(c, commit[12]);
            assert_true(change > 0.25 && change < 0.35);
            assert_true(cJSON_GetArrayItem(ci, 0)->valuedouble <= change);
            assert_true(cJSON_GetArrayItem(ci, 1)->valuedouble >= change);
            assert_true(cJSON_IsFalse(cJSON_GetObjectItem(ch, "fixed")));
        } else if (!strcmp(k, "fixed") && change > 0) {
            seen_fixed = 1;
            assert_string_equal(c, commit[8]);
            assert_true(cJSON_IsTrue(cJSON_GetObjectItem(ch, "fixed")));
            assert_string_equal(cJSON_GetObjectItem(ch, "fixed_commit")->valuestring, commit[14]);
        } else if (strcmp(k, "fixed")) {
            others++;
        }
    }
    assert_true(seen_slowed && seen_fixed);
    assert_int_equal(others, 0); /* steady and the escaped one: no change */
    cJSON_Delete(root);
    free(ck);

    assert_int_equal(STATUS("check", "--fail-on-regression"), 1);
    assert_int_equal(STATUS("check", "--fail-on-regression", "--kernel", "fixed"), 0); /* fixed: no failure */
    assert_int_equal(STATUS("check", "--fail-on-regression", "--threshold", "50"), 0); /* 30 % < 50 % */
    char *mdc = CLI(&st, "check", "-f", "markdown", "--commit-url", "https://example.org/r/commit/{commit}");
    assert_int_equal(st, 0);
    assert_non_null(strstr(mdc, "### ktiming history check"));
    assert_non_null(strstr(mdc, "REGRESSION"));
    assert_non_null(strstr(mdc, "](https://example.org/r/commit/c0ffee12)"));
    free(mdc);
    char html[4200];
    snprintf(html, sizeof html, "%s/h.html", g_dir);
    assert_int_equal(STATUS("show", "-f", "html", "-o", html, "--commit-url", "https://example.org/c/{commit}"), 0);
    char *page = ktt_read_file(html, NULL);
    assert_non_null(page);
    assert_non_null(strstr(page, "<svg"));
    assert_non_null(strstr(page, "class=\"band\""));
    assert_non_null(strstr(page, "href=\"https://example.org/c/c0ffee12\""));
    assert_non_null(strstr(page, "<title>c0ffee12: ")); /* each run's tooltip names its commit */
    assert_null(strchr(page, '\x1b'));
    free(page);
    /* -o replaces the file whole through the output writer, and a folder that is not there is one error */
    static const char stale[] = "stale stale stale stale stale stale stale stale stale stale stale stale";
    assert_int_equal(ktt_write_file(html, stale, sizeof stale - 1), 0);
    assert_int_equal(STATUS("show", "-f", "csv", "-o", html), 0);
    char *replaced = ktt_read_file(html, NULL);
    assert_non_null(replaced);
    assert_null(strstr(replaced, "stale"));
    free(replaced);
    char missing[4200];
    snprintf(missing, sizeof missing, "%s/no/such/dir/h.csv", g_dir);
    assert_int_equal(STATUS("show", "-f", "csv", "-o", missing), 3);
    assert_int_equal(access(missing, F_OK), -1);
    char *ckc = CLI(&st, "check", "-f", "csv");
    assert_int_equal(st, 0);
    assert_non_null(strstr(ckc, "\"slowed\",\"CPU\",\"host\",\"ci-box\",\"c0ffee12\",13,"));
    free(ckc);
}

/* A snapshot's text at dir/name; its path in out. */
static void write_snap(char *out, size_t cap, const char *name, const char *entries, int taken)
{
    snprintf(out, cap, "%s/%s", g_dir, name);
    char text[4096];
    int n = snprintf(text, sizeof text,
                     "{\"schema\": \"ktiming.snapshot\", \"version\": 5, \"generator\": \"test\", \"host\": \"vm\", "
                     "\"taken_ns\": %d, \"entries\": [%s]}",
                     taken, entries);
    assert_int_equal(ktt_write_file(out, text, (size_t)n), 0);
}

/* An entry with a reservoir of three samples of `ns`. */
static const char *entry3(char *buf, size_t cap, const char *name, unsigned ns)
{
    snprintf(buf, cap,
             "{\"name\": \"%s\", \"backend\": \"cpu\", \"device\": \"host\", \"dispatch_count\": 3, \"total_ns\": %u, "
             "\"min_ns\": %u, \"max_ns\": %u, \"mean_ns\": %u, \"p50_ns\": %u, \"p90_ns\": %u, \"p99_ns\": %u, "
             "\"sample_count\": 3, \"samples\": [%u, %u, %u]}",
             name, 3 * ns, ns, ns, ns, ns, ns, ns, ns, ns, ns);
    return buf;
}

/* The crash handler's snapshots carry no p50 and no samples: the run's median is its mean, not 0 ns. */
static void test_crash_snapshot_median(void **state)
{
    (void)state;
    char db[4200], snap[4200];
    snprintf(db, sizeof db, "%s/crash.sqlite", g_dir);
    write_snap(snap, sizeof snap, "crash.json",
               "{\"name\": \"crash_zone\", \"backend\": \"cpu\", \"device\": \"host\", \"dispatch_count\": 100, "
               "\"total_ns\": 1916, \"min_ns\": 0, \"max_ns\": 982, \"last_ns\": 10, \"mean_ns\": 19, "
               "\"stddev_ns\": 97, \"errors\": 0, \"dropped\": 0}",
               1);
    assert_int_equal(STATUS("add", snap, "--db", db), 0);
    int st;
    char *js = CLI(&st, "show", "-f", "json", "--db", db);
    assert_int_equal(st, 0);
    cJSON *root = cJSON_Parse(js);
    assert_non_null(root);
    cJSON *k = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "series"), 0);
    assert_non_null(k);
    assert_true(cJSON_GetObjectItem(k, "latest_ns")->valuedouble == 19.0);
    cJSON_Delete(root);
    free(js);
}

/* A change from a 0 ns median has no ratio: JSON says null and CSV leaves the field empty, never "nan". */
static void test_change_from_zero(void **state)
{
    (void)state;
    char db[4200], snap[4200], e[1024];
    snprintf(db, sizeof db, "%s/zero.sqlite", g_dir);
    for (int i = 0; i < 4; i++) {
        char name[32];
        snprintf(name, sizeof name, "zero%d.json", i);
        write_snap(snap, sizeof snap, name, entry3(e, sizeof e, "k", i < 3 ? 0 : 100), i + 1);
        char when[32];
        snprintf(when, sizeof when, "2026-01-0%dT00:00:00Z", i + 1);
        assert_int_equal(STATUS("add", snap, "--db", db, "--when", when), 0);
    }
    int st;
    char *js = CLI(&st, "show", "-f", "json", "--db", db);
    assert_int_equal(st, 0);
    assert_null(strstr(js, "nan"));
    cJSON *root = cJSON_Parse(js);
    assert_non_null(root);
    cJSON *k = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "series"), 0);
    assert_true(cJSON_GetObjectItem(k, "latest_ns")->valuedouble == 100.0);
    assert_true(cJSON_GetObjectItem(k, "previous_ns")->valuedouble == 0.0);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(k, "change")));
    cJSON_Delete(root);
    free(js);
    char *csv = CLI(&st, "show", "-f", "csv", "--db", db);
    assert_int_equal(st, 0);
    assert_null(strstr(csv, "nan"));
    assert_non_null(strstr(csv, "\"k\",\"CPU\",\"host\",\"vm\",4,100,0,,\"\""));
    free(csv);
}

/* -o naming the history (or its WAL) is refused with status 2; the history stays. */
static void test_output_is_the_db(void **state)
{
    (void)state;
    char db[4200], snap[4200], e[1024], wal[4300];
    snprintf(db, sizeof db, "%s/self.sqlite", g_dir);
    write_snap(snap, sizeof snap, "self.json", entry3(e, sizeof e, "k", 500), 1);
    assert_int_equal(STATUS("add", snap, "--db", db), 0);
    assert_int_equal(STATUS("show", "--db", db, "-o", db), 2);
    assert_err_contains("history database");
    assert_int_equal(STATUS("check", "--db", db, "-f", "json", "-o", db), 2);
    snprintf(wal, sizeof wal, "%s-wal", db);
    assert_int_equal(ktt_write_file(wal, "", 0), 0); /* as a reader's open leaves it */
    assert_int_equal(STATUS("show", "--db", db, "-o", wal), 2);
    unlink(wal);
    int st;
    char *csv = CLI(&st, "show", "-f", "csv", "--db", db);
    assert_int_equal(st, 0);
    assert_non_null(strstr(csv, "\"k\",\"CPU\",\"host\",\"vm\",1,500,"));
    free(csv);
}

/* Several snapshots at once: one that cannot be stored is named and the others still go in (status 3); a null
 * mean is stored as the totals say, not refused. */
static void test_add_batch(void **state)
{
    (void)state;
    char db[4200], a[4200], nul[4200], bad[4200], b[4200], e[1024];
    snprintf(db, sizeof db, "%s/batch.sqlite", g_dir);
    write_snap(a, sizeof a, "batch_a.json", entry3(e, sizeof e, "k", 1000), 1);
    write_snap(nul, sizeof nul, "batch_null.json",
               "{\"name\": \"k\", \"backend\": \"cpu\", \"device\": \"host\", \"dispatch_count\": 4, \"total_ns\": "
               "4000, \"min_ns\": 990, \"max_ns\": 1010, \"mean_ns\": null, \"p50_ns\": 1000, \"p90_ns\": 1010, "
               "\"p99_ns\": 1010, \"sample_count\": 4, \"samples\": [990, 1000, 1000, 1010]}",
               2);
    write_snap(bad, sizeof bad, "batch_bad.json", "{\"name\": 5}", 3);
    write_snap(b, sizeof b, "batch_b.json", entry3(e, sizeof e, "k", 1100), 4);
    assert_int_equal(STATUS("add", a, nul, "--db", db), 0);
    assert_err_contains("batch_null.json: added as run");
    assert_int_equal(STATUS("add", bad, b, "--db", db), 3);
    assert_err_contains("batch_bad.json");
    assert_err_contains("batch_b.json: added as run 3");
    int st;
    char *csv = CLI(&st, "show", "-f", "csv", "--db", db);
    assert_int_equal(st, 0);
    assert_non_null(strstr(csv, "\"k\",\"CPU\",\"host\",\"vm\",3,1100,"));
    free(csv);
}

/* A --tag key given twice, or longer than the store keeps, is a usage error (it was overwritten or truncated). */
static void test_tag_keys(void **state)
{
    (void)state;
    char db[4200], snap[4200], e[1024], longtag[400];
    snprintf(db, sizeof db, "%s/tags.sqlite", g_dir);
    write_snap(snap, sizeof snap, "tags.json", entry3(e, sizeof e, "k", 10), 1);
    assert_int_equal(STATUS("add", snap, "--db", db, "--tag", "job=a", "--tag", "job=b"), 2);
    assert_err_contains("given twice");
    memset(longtag, 'k', 300);
    snprintf(longtag + 300, sizeof longtag - 300, "=v");
    assert_int_equal(STATUS("add", snap, "--db", db, "--tag", longtag), 2);
    assert_int_equal(access(db, F_OK), -1); /* refused before anything was opened */
    assert_int_equal(STATUS("add", snap, "--db", db, "--tag", "job=a", "--tag", "jo=b"), 0);
}

/* The files in dir (names, one per line: "a\nb\n"), sorted; malloc'd. */
static char *list_dir(const char *dir)
{
    struct dirent **names = NULL;
    int n = scandir(dir, &names, NULL, alphasort);
    assert_true(n >= 0);
    char *out = calloc(1, 4096);
    assert_non_null(out);
    for (int i = 0; i < n; i++) {
        if (strcmp(names[i]->d_name, ".") && strcmp(names[i]->d_name, ".."))
            snprintf(out + strlen(out), 4096 - strlen(out), "%s\n", names[i]->d_name);
        free(names[i]);
    }
    free(names);
    return out;
}

/* `ktiming history ARGS` as a user who cannot write the history: "nobody" (through runuser) when the test runs as
 * root, else this user itself (then only a folder without write permission can stand for another's history). */
static char *cli_reader(int *status, char *const *args)
{
    char *argv[40];
    size_t n = 0;
    if (geteuid() == 0) {
        argv[n++] = "/usr/sbin/runuser", argv[n++] = "-u", argv[n++] = "nobody", argv[n++] = "--";
    }
    argv[n++] = KT_CLI_PATH;
    argv[n++] = "history";
    for (; *args && n < 39; args++)
        argv[n++] = *args;
    argv[n] = NULL;
    char *out = ktt_run_capture(argv, &(ktt_spawn_t){.err = g_err}, status);
    assert_non_null(out);
    return out;
}
#define READER(st, ...) cli_reader(st, (char *const[]){__VA_ARGS__, NULL})

/* show and check read a history they cannot write (a folder without write permission, another user's file in a
 * sticky folder such as /tmp) and leave nothing beside it; they never write one (an empty file stays empty). */
static void test_read_without_write_access(void **state)
{
    (void)state;
    char ro[4200], sticky[4200], db[4300], sdb[4300], snap[4200], e[1024], empty[4200];
    int st;
    /* An empty file is no history, and stays empty. */
    snprintf(empty, sizeof empty, "%s/empty.sqlite", g_dir);
    assert_int_equal(ktt_write_file(empty, "", 0), 0);
    assert_int_equal(STATUS("show", "--db", empty), 3);
    assert_err_contains("no history there");
    struct stat sb;
    assert_int_equal(stat(empty, &sb), 0);
    assert_int_equal(sb.st_size, 0);

    if (geteuid() == 0) {
        int ok = access("/usr/sbin/runuser", X_OK) == 0 && getpwnam("nobody") && chmod(g_dir, 0711) == 0;
        char *argv[] = {"/usr/sbin/runuser", "-u", "nobody", "--", KT_CLI_PATH, "--version", NULL};
        if (!ok || ktt_run_to(argv, NULL) != 0) { /* e.g. a build under a folder only root can enter */
            fprintf(stderr, "(no second user to read as: skipped)\n");
            skip();
        }
    }
    snprintf(ro, sizeof ro, "%s/ro", g_dir);
    snprintf(db, sizeof db, "%s/h.sqlite", ro);
    assert_int_equal(mkdir(ro, 0755), 0);
    write_snap(snap, sizeof snap, "ro.json", entry3(e, sizeof e, "k", 700), 1);
    assert_int_equal(STATUS("add", snap, "--db", db), 0);
    assert_int_equal(chmod(ro, 0555), 0);
    char *out = READER(&st, "show", "-f", "csv", "--db", db);
    assert_int_equal(st, 0);
    assert_non_null(strstr(out, "\"k\",\"CPU\",\"host\",\"vm\",1,700,"));
    free(out);
    out = READER(&st, "check", "--db", db);
    assert_int_equal(st, 0);
    free(out);
    char *files = list_dir(ro);
    assert_string_equal(files, "h.sqlite\n");
    free(files);
    /* An empty -wal left beside it (nothing in it to read) does not stop the reader either. */
    char wal[4400];
    snprintf(wal, sizeof wal, "%s-wal", db);
    assert_int_equal(chmod(ro, 0755), 0);
    assert_int_equal(ktt_write_file(wal, "", 0), 0);
    assert_int_equal(chmod(ro, 0555), 0);
    out = READER(&st, "show", "-f", "csv", "--db", db);
    assert_int_equal(st, 0);
    assert_non_null(strstr(out, "\"k\",\"CPU\",\"host\",\"vm\",1,700,"));
    free(out);
    assert_int_equal(chmod(ro, 0755), 0); /* removable again */
    if (geteuid() != 0)
        return;
    /* Root's history in a sticky folder, read by nobody: no -wal or -shm of nobody's is left to block root's add. */
    snprintf(sticky, sizeof sticky, "%s/sticky", g_dir);
    snprintf(sdb, sizeof sdb, "%s/h.sqlite", sticky);
    assert_int_equal(mkdir(sticky, 0755), 0);
    assert_int_equal(chmod(sticky, 01777), 0);
    assert_int_equal(STATUS("add", snap, "--db", sdb), 0);
    assert_int_equal(chmod(sdb, 0644), 0);
    out = READER(&st, "show", "-f", "csv", "--db", sdb);
    assert_int_equal(st, 0);
    assert_non_null(strstr(out, "\"k\",\"CPU\",\"host\",\"vm\",1,700,"));
    free(out);
    files = list_dir(sticky);
    assert_string_equal(files, "h.sqlite\n");
    free(files);
    write_snap(snap, sizeof snap, "ro2.json", entry3(e, sizeof e, "k", 710), 2);
    assert_int_equal(STATUS("add", snap, "--db", sdb), 0);
    out = CLI(&st, "show", "-f", "csv", "--db", sdb);
    assert_int_equal(st, 0);
    assert_non_null(strstr(out, "\"k\",\"CPU\",\"host\",\"vm\",2,710,"));
    free(out);
}

/* A pull request's one run (2x slower than the six runs of main before it): check's change points cannot show it,
 * --tail 1 does and fails the gate; the JSON marks it as a tail change. "gone", which the pull request did not run,
 * is not tested by --tail (its own last run, main's, is not the pull request's). */
static void test_check_tail(void **state)
{
    (void)state;
    char db[4200], snap[4200], e[1024], e2[1024], when[32], name[32], both[2100];
    snprintf(db, sizeof db, "%s/pr.sqlite", g_dir);
    for (int i = 0; i < 7; i++) {
        snprintf(name, sizeof name, "pr%d.json", i);
        entry3(e, sizeof e, "k", i < 6 ? 1000 + (unsigned)i : 2000);
        snprintf(both, sizeof both, "%s, %s", e, entry3(e2, sizeof e2, "gone", i < 5 ? 3000 : 6000));
        write_snap(snap, sizeof snap, name, i < 6 ? both : e, i + 1);
        snprintf(when, sizeof when, "2026-02-0%dT00:00:00Z", i + 1);
        assert_int_equal(STATUS("add", snap, "--db", db, "--when", when, "--commit", i < 6 ? "main" : "pr"), 0);
    }
    assert_int_equal(STATUS("check", "--db", db, "--fail-on-regression"), 0);
    assert_int_equal(STATUS("check", "--db", db, "--fail-on-regression", "--tail", "1"), 1);
    int st;
    char *js = CLI(&st, "check", "--db", db, "-f", "json", "--tail", "1");
    assert_int_equal(st, 0);
    cJSON *root = cJSON_Parse(js);
    assert_non_null(root);
    cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "changes"), 0);
    assert_non_null(ch);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(root, "changes")), 1);
    assert_string_equal(cJSON_GetObjectItem(ch, "kernel")->valuestring, "k");
    assert_string_equal(cJSON_GetObjectItem(ch, "commit")->valuestring, "pr");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(ch, "tail")));
    assert_true(cJSON_GetObjectItem(ch, "change")->valuedouble > 0.9);
    cJSON_Delete(root);
    free(js);
    assert_int_equal(STATUS("check", "--db", db, "--tail", "0"), 2);
    assert_int_equal(STATUS("show", "--db", db, "--tail", "1"), 2); /* a check option */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_start_loads_no_db_client),
        cmocka_unit_test(test_usage),
        cmocka_unit_test(test_completion_and_man),
        cmocka_unit_test(test_missing_and_bad),
        cmocka_unit_test(test_add_show_check),
        cmocka_unit_test(test_crash_snapshot_median),
        cmocka_unit_test(test_change_from_zero),
        cmocka_unit_test(test_output_is_the_db),
        cmocka_unit_test(test_add_batch),
        cmocka_unit_test(test_tag_keys),
        cmocka_unit_test(test_read_without_write_access),
        cmocka_unit_test(test_check_tail),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
