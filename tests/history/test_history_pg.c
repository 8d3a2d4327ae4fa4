/* test_history_pg.c — the PostgreSQL store against a real server the test starts itself: initdb into a private
 * folder (as the unprivileged `postgres` user via runuser when run as root), a server on a private port listening
 * only on a socket in that folder, stopped at the end in every case (a watchdog process stops it when the test
 * dies). The same runs stored in SQLite and in PostgreSQL read back identically; concurrent writers lose nothing;
 * the CLI works through the URL. SKIPPED (77) where no server can be started. */
#include "support/files.h"
#include "support/proc.h"
#include "hist_util.h"

#include <fcntl.h>
#include <glob.h>
#include <pwd.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

static char *g_dir;         /* private folder: data/, the socket, the log */
static char g_bin[512];     /* PostgreSQL's bin folder */
static char g_url[1024];    /* postgresql:///postgres?host=...&port=... */
static int g_started;       /* the server runs */
static const char *g_user;  /* "postgres" when run as root, else NULL (ourselves) */

/* Runs a PostgreSQL program as the server's user; its exit status. */
static int pg_run(const char *const *args)
{
    char *argv[24];
    size_t n = 0;
    if (g_user) {
        argv[n++] = "/usr/sbin/runuser";
        argv[n++] = "-u";
        argv[n++] = (char *)g_user;
        argv[n++] = "--";
    }
    for (; *args && n < 23; args++)
        argv[n++] = (char *)*args;
    argv[n] = NULL;
    char log[4096];
    snprintf(log, sizeof log, "%s/tool.log", g_dir);
    return ktt_run(argv, &(ktt_spawn_t){.in = "/dev/null", .out = log, .err = log});
}

static void stop_server(void)
{
    if (!g_started)
        return;
    g_started = 0;
    char ctl[600], data[4096];
    snprintf(ctl, sizeof ctl, "%s/pg_ctl", g_bin);
    snprintf(data, sizeof data, "%s/data", g_dir);
    pg_run((const char *[]){ctl, "-D", data, "-m", "immediate", "-w", "stop", NULL});
}

/* A watchdog process that stops the server once this process is gone, however it ended (a crash, or the test
 * runner's SIGKILL at its timeout): it waits for the end of a pipe only this process holds. */
static void start_watchdog(void)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return;
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGINT, SIG_IGN);
        signal(SIGTERM, SIG_IGN);
        close(p[1]);
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) { /* never hold the test runner's output open */
            dup2(null, 1);
            dup2(null, 2);
        }
        char c;
        while (read(p[0], &c, 1) != 0) {
        }
        g_started = 1;
        stop_server(); /* already stopped when the test ended normally: pg_ctl then just says so */
        ktt_rmtree(g_dir); /* likewise already gone then */
        _exit(0);
    }
    close(p[0]); /* the write end stays open, unseen by anything this process execs, until it exits */
}

static void on_signal(int sig)
{
    stop_server();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* 0 when a server runs; 77 (skip) with the reason printed otherwise. */
static int start_server(void)
{
    glob_t gl;
    if (glob("/usr/lib/postgresql/*/bin/initdb", 0, NULL, &gl) || !gl.gl_pathc) {
        printf("SKIPPED: no PostgreSQL server installed (Debian: postgresql)\n");
        return 77;
    }
    snprintf(g_bin, sizeof g_bin, "%.*s", (int)(strlen(gl.gl_pathv[gl.gl_pathc - 1]) - 7), gl.gl_pathv[gl.gl_pathc - 1]);
    globfree(&gl);
    if (geteuid() == 0) {
        struct passwd *pw = getpwnam("postgres");
        if (!pw || access("/usr/sbin/runuser", X_OK)) {
            printf("SKIPPED: running as root without a 'postgres' user or runuser to start the server as\n");
            return 77;
        }
        g_user = "postgres";
        if (chown(g_dir, pw->pw_uid, pw->pw_gid) || chmod(g_dir, 0700)) {
            printf("SKIPPED: cannot hand %s to the postgres user\n", g_dir);
            return 77;
        }
    }
    char initdb[600], ctl[600], data[4096], opts[4200], log[4096];
    snprintf(initdb, sizeof initdb, "%s/initdb", g_bin);
    snprintf(ctl, sizeof ctl, "%s/pg_ctl", g_bin);
    snprintf(data, sizeof data, "%s/data", g_dir);
    snprintf(log, sizeof log, "%s/server.log", g_dir);
    if (pg_run((const char *[]){initdb, "-D", data, "-A", "trust", "-U", "kt", "--no-sync", "-E", "UTF8",
                                "--locale=C", NULL})) {
        printf("SKIPPED: initdb failed (see %s/tool.log)\n", g_dir);
        return 77;
    }
    /* Only a Unix socket in our folder: the port just names it, so no other server or test can collide. */
    int port = 20000 + (int)(getpid() % 20000);
    snprintf(opts, sizeof opts, "-p %d -k %s -c listen_addresses= -c fsync=off -c max_connections=40", port, g_dir);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    atexit(stop_server);
    g_started = 1;
    start_watchdog();
    if (pg_run((const char *[]){ctl, "-D", data, "-o", opts, "-l", log, "-w", "-t", "120", "start", NULL})) {
        stop_server();
        printf("SKIPPED: the server did not start (see %s)\n", log);
        return 77;
    }
    snprintf(g_url, sizeof g_url, "postgresql:///postgres?host=%s&port=%d&user=kt", g_dir, port);
    kth_db_t *db;
    char err[512];
    int rc = kth_open(g_url, &db, err, sizeof err);
    if (rc == KT_ENOTSUP) {
        stop_server();
        printf("SKIPPED: %s\n", err);
        return 77;
    }
    if (rc) {
        stop_server();
        printf("the server runs but cannot be used: %s\n", err);
        return 1;
    }
    kth_close(db);
    return 0;
}

static int setup(void **state)
{
    (void)state;
    /* Under /tmp itself rather than $TMPDIR: the server's socket path must stay within the 107 bytes a Unix socket
     * name allows, and the postgres user must be able to reach the folder. */
    char tmpl[] = "/tmp/kt-history-pg-XXXXXX";
    return (g_dir = mkdtemp(tmpl) ? strdup(tmpl) : NULL) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    stop_server();
    ktt_rmtree(g_dir);
    free(g_dir);
    return 0;
}

/* The same runs in SQLite and PostgreSQL: the same series, points, changes (and a second add is a no-op). */
static void test_same_as_sqlite(void **state)
{
    (void)state;
    kth_db_t *pg, *lite;
    char err[512], path[4200];
    assert_int_equal(kth_open(g_url, &pg, err, sizeof err), 0);
    assert_string_equal(pg->engine->name, "postgresql");
    snprintf(path, sizeof path, "%s/same.sqlite", g_dir);
    assert_int_equal(kth_open(path, &lite, err, sizeof err), 0);
    kth_synth_t sy;
    assert_int_equal(hu_synth(&sy, 21, 16, 6), 0);
    int added;
    for (size_t i = 0; i < 16; i++) {
        assert_int_equal(hu_add_run(pg, &sy, i, &added), 0);
        assert_int_equal(added, 1);
        assert_int_equal(hu_add_run(lite, &sy, i, &added), 0);
    }
    assert_int_equal(hu_add_run(pg, &sy, 3, &added), 0);
    assert_int_equal(added, 0);
    assert_int_equal(hu_count(pg, "kt_run"), 16);
    assert_int_equal(hu_count(pg, "kt_result"), 16 * 6);
    char *a = hu_dump(pg), *b = hu_dump(lite);
    assert_non_null(a);
    assert_non_null(b);
    assert_string_equal(a, b);
    assert_non_null(strstr(a, "\"changes\": [\n  {")); /* the stepped series were found, in both */
    free(a);
    free(b);
    kth_close(lite);
    kth_close(pg);
    /* Reopening migrates nothing and keeps everything. */
    assert_int_equal(kth_open(g_url, &pg, err, sizeof err), 0);
    assert_int_equal(kth_schema_version(pg), KTH_SCHEMA_VERSION);
    assert_int_equal(hu_count(pg, "kt_run"), 16);
    kth_close(pg);
    kth_synth_free(&sy);
}

/* Four processes append to the server at once: every row is there. */
static void test_concurrent(void **state)
{
    (void)state;
    enum { W = 4, EACH = 3, K = 10 };
    kth_synth_t sy;
    assert_int_equal(hu_synth(&sy, 77, W * EACH, K), 0);
    char url[1200];
    snprintf(url, sizeof url, "%s&dbname=conc", g_url);
    kth_db_t *db;
    char err[512];
    assert_int_equal(kth_open(g_url, &db, err, sizeof err), 0);
    assert_int_equal(kth_exec(db, "CREATE DATABASE conc", NULL, 0, NULL, NULL), 0);
    kth_close(db);
    pid_t pids[W];
    for (int w = 0; w < W; w++) {
        if ((pids[w] = fork()) == 0) {
            int bad = kth_open(url, &db, err, sizeof err);
            for (int i = 0; !bad && i < EACH; i++) {
                int added;
                bad = hu_add_run(db, &sy, (size_t)(w * EACH + i), &added) || !added;
            }
            if (!bad)
                kth_close(db);
            _exit(bad ? 1 : 0);
        }
        assert_true(pids[w] > 0);
    }
    for (int w = 0; w < W; w++) {
        int st = 0;
        assert_int_equal(waitpid(pids[w], &st, 0), pids[w]);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    assert_int_equal(kth_open(url, &db, err, sizeof err), 0);
    assert_int_equal(hu_count(db, "kt_run"), W * EACH);
    assert_int_equal(hu_count(db, "kt_result"), W * EACH * K);
    assert_int_equal(hu_count(db, "kt_series"), K);
    kth_close(db);
    kth_synth_free(&sy);
}

/* A server that is not there, or a database of something else: one-line errors. */
static void test_errors(void **state)
{
    (void)state;
    kth_db_t *db;
    char err[512], url[1200];
    snprintf(url, sizeof url, "postgresql://kt:secret@/postgres?host=%s/nowhere&port=1", g_dir);
    assert_int_equal(kth_open(url, &db, err, sizeof err), KT_EIO);
    assert_null(strchr(err, '\n'));
    assert_null(strstr(err, "secret")); /* the password never reaches a message */
    snprintf(url, sizeof url, "%s&dbname=other_app", g_url);
    assert_int_equal(kth_open(g_url, &db, err, sizeof err), 0);
    assert_int_equal(kth_exec(db, "CREATE DATABASE other_app", NULL, 0, NULL, NULL), 0);
    kth_close(db);
    assert_int_equal(kth_open(url, &db, err, sizeof err), 0);
    assert_int_equal(kth_exec(db, "DROP TABLE kt_meta", NULL, 0, NULL, NULL), 0);
    kth_close(db);
    assert_int_equal(kth_open(url, &db, err, sizeof err), KT_EPARSE);
    assert_non_null(strstr(err, "not a ktiming history"));
}

#ifdef KT_CLI_PATH
/* The CLI takes the server's URL as it takes a file: add, show, check. */
static void test_cli(void **state)
{
    (void)state;
    kth_synth_t sy;
    assert_int_equal(hu_synth(&sy, 5, 3, 2), 0);
    size_t len;
    char *json = kth_synth_run_json(&sy, 0, &len);
    char path[4200], out[4200], url[1200];
    snprintf(path, sizeof path, "%s/run.json", g_dir);
    snprintf(out, sizeof out, "%s/out.txt", g_dir);
    snprintf(url, sizeof url, "%s&dbname=cli", g_url);
    kth_db_t *db;
    char err[512];
    assert_int_equal(kth_open(g_url, &db, err, sizeof err), 0);
    assert_int_equal(kth_exec(db, "CREATE DATABASE cli", NULL, 0, NULL, NULL), 0);
    kth_close(db);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(json, 1, len, f), len);
    fclose(f);
    free(json);
    /* show never creates a history: on an empty database it says so (3) and leaves it without tables. */
    assert_int_equal(ktt_run_to((char *const[]){KT_CLI_PATH, "history", "show", "--db", url, NULL}, NULL), 3);
    assert_int_equal(kth_open_read(url, &db, err, sizeof err), KT_EPARSE);
    assert_non_null(strstr(err, "no history there"));
    assert_int_equal(ktt_run_to((char *const[]){KT_CLI_PATH, "history", "add", path, "--db", url, "--commit", "abc",
                                                NULL},
                                NULL),
                     0);
    assert_int_equal(ktt_run_to((char *const[]){KT_CLI_PATH, "history", "show", "-f", "csv", "--db", url, NULL}, out), 0);
    char *csv = ktt_read_file(out, NULL);
    assert_non_null(csv);
    assert_non_null(strstr(csv, "\"k00001\",\"CPU\",\"host\",\"synth\",1,"));
    free(csv);
    assert_int_equal(ktt_run_to((char *const[]){KT_CLI_PATH, "history", "check", "--fail-on-regression", "--db", url,
                                                NULL},
                                NULL),
                     0);
    kth_synth_free(&sy);
}
#endif

int main(void)
{
    if (setup(NULL))
        return 1;
    int rc = start_server();
    if (rc) {
        teardown(NULL);
        return rc;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_as_sqlite),
        cmocka_unit_test(test_concurrent),
        cmocka_unit_test(test_errors),
#ifdef KT_CLI_PATH
        cmocka_unit_test(test_cli),
#endif
    };
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    teardown(NULL);
    return rc;
}
