/* test_history_store.c — the SQLite store: schema and migration, idempotent adds, series read back in time order,
 * reservoirs round-tripped, and one-line errors (no crash) for corrupt, foreign and newer files. */
#include "support/files.h"
#include "hist_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>
#include <cmocka.h>

static char *g_dir;
static char g_db[4096];

static int setup(void **state)
{
    (void)state;
    if (!(g_dir = ktt_tmpdir("history-store")))
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    ktt_rmtree(g_dir);
    free(g_dir);
    return 0;
}

static void fresh_db(const char *name)
{
    snprintf(g_db, sizeof g_db, "%s/%s", g_dir, name);
}

static void assert_one_line(const char *err, const char *needle)
{
    assert_true(*err);
    assert_null(strchr(err, '\n'));
    if (needle && !strstr(err, needle)) {
        fprintf(stderr, "message: %s (expected '%s')\n", err, needle);
        fail();
    }
}

static void test_samples_codec(void **state)
{
    (void)state;
    uint64_t v[] = {5, UINT64_MAX, 0, 5, 127, 128, 1ull << 40, 3, UINT64_MAX - 1};
    size_t n = sizeof v / sizeof v[0];
    uint8_t *blob;
    size_t len = kth_samples_encode(v, n, &blob);
    assert_true(len > 0);
    uint64_t *back;
    size_t m;
    assert_int_equal(kth_samples_decode(blob, len, &back, &m), 0);
    assert_int_equal(m, n);
    uint64_t sorted[] = {0, 3, 5, 5, 127, 128, 1ull << 40, UINT64_MAX - 1, UINT64_MAX};
    assert_memory_equal(back, sorted, sizeof sorted);
    free(back);
    /* A cut blob (a continuation byte last) is refused, not read past its end. */
    assert_int_equal(kth_samples_decode(blob, len - 1, &back, &m) == KT_EPARSE || m != n, 1);
    free(back);
    uint8_t bad[] = {0x80, 0x80};
    assert_int_equal(kth_samples_decode(bad, 2, &back, &m), KT_EPARSE);
    free(blob);
}

static void test_parse_time(void **state)
{
    (void)state;
    int64_t t;
    assert_int_equal(kth_parse_time("1970-01-02", &t), 0);
    assert_int_equal(t, 86400);
    assert_int_equal(kth_parse_time("2026-11-27T01:02:03Z", &t), 0);
    assert_int_equal(t, 1795741323);
    assert_int_equal(kth_parse_time("2026-11-27T03:02:03+02:00", &t), 0);
    assert_int_equal(t, 1795741323);
    assert_int_equal(kth_parse_time("2026-11-27T01:02:03.250Z", &t), 0);
    assert_int_equal(t, 1795741323);
    assert_int_equal(kth_parse_time("2026-02-30", &t), -1);
    assert_int_equal(kth_parse_time("yesterday", &t), -1);
    assert_int_equal(kth_parse_time("2026-11-27T25:00", &t), -1);
}

static void test_add_twice_is_noop(void **state)
{
    (void)state;
    fresh_db("twice.sqlite");
    kth_db_t *db;
    char err[512];
    assert_int_equal(kth_open(g_db, &db, err, sizeof err), 0);
    assert_int_equal(kth_schema_version(db), KTH_SCHEMA_VERSION);
    kth_synth_t sy;
    assert_int_equal(hu_synth(&sy, 7, 3, 5), 0);
    int added;
    assert_int_equal(hu_add_run(db, &sy, 0, &added), 0);
    assert_int_equal(added, 1);
    assert_int_equal(hu_add_run(db, &sy, 0, &added), 0);
    assert_int_equal(added, 0);
    assert_int_equal(hu_count(db, "kt_run"), 1);
    assert_int_equal(hu_count(db, "kt_result"), 5);
    assert_int_equal(hu_count(db, "kt_series"), 5);
    assert_int_equal(hu_count(db, "kt_device"), 1);
    assert_int_equal(hu_add_run(db, &sy, 1, &added), 0);
    assert_int_equal(added, 1);
    assert_int_equal(hu_count(db, "kt_run"), 2);
    assert_int_equal(hu_count(db, "kt_result"), 10);
    assert_int_equal(hu_count(db, "kt_series"), 5); /* the same series */
    /* Tags are stored with the run; a tag without '=' is refused before anything is written. */
    size_t len;
    char *json = kth_synth_run_json(&sy, 2, &len);
    const char *tags[] = {"ci=github", "gpu=lavapipe"};
    kth_run_info_t info = {.commit = "abc", .tags = tags, .tag_count = 2};
    int64_t id;
    assert_int_equal(kth_add_json(db, json, len, &info, &id, &added, err, sizeof err), 0);
    assert_int_equal(hu_count(db, "kt_tag"), 2);
    const char *bad[] = {"novalue"};
    info.tags = bad;
    info.tag_count = 1;
    assert_int_equal(kth_add_json(db, json, len, &info, &id, &added, err, sizeof err), KT_EPARSE);
    assert_one_line(err, "KEY=VALUE");
    info.tag_count = 0;
    info.when = "not a time";
    assert_int_equal(kth_add_json(db, json, len, &info, &id, &added, err, sizeof err), KT_EPARSE);
    /* Not a snapshot: refused with the loader's message, nothing stored. */
    assert_int_equal(kth_add_json(db, "{\"x\": 1}", 8, NULL, &id, &added, err, sizeof err), KT_EPARSE);
    assert_one_line(err, NULL);
    assert_int_equal(hu_count(db, "kt_run"), 3);
    free(json);
    kth_synth_free(&sy);
    kth_close(db);
}

/* Runs added out of order come back in time order, with the medians and reservoirs stored. */
static void test_load_series(void **state)
{
    (void)state;
    fresh_db("load.sqlite");
    kth_db_t *db;
    char err[512];
    assert_int_equal(kth_open(g_db, &db, err, sizeof err), 0);
    kth_synth_t sy;
    assert_int_equal(hu_synth(&sy, 11, 8, 4), 0);
    int added;
    for (size_t i = 8; i-- > 0;)
        assert_int_equal(hu_add_run(db, &sy, i, &added), 0);
    kth_history_t h;
    assert_int_equal(kth_load(db, NULL, &h), 0);
    assert_int_equal(h.run_count, 8);
    assert_int_equal(h.series_count, 4);
    for (size_t i = 0; i < 8; i++)
        assert_string_equal(h.runs[i].commit, sy.h.runs[i].commit);
    for (size_t s = 0; s < 4; s++) {
        assert_string_equal(h.series[s].kernel, sy.h.series[s].kernel);
        assert_string_equal(h.series[s].machine, "synth");
        assert_int_equal(h.series[s].n, 8);
        for (size_t i = 0; i < 8; i++) {
            assert_int_equal(h.series[s].pts[i].run, i);
            assert_true(fabs(h.series[s].pts[i].median - sy.h.series[s].pts[i].median) < 1e-6);
            uint64_t *a, *b;
            size_t na, nb;
            assert_int_equal(kth_db_samples_fn(db, &h, s, i, &a, &na), 0);
            assert_int_equal(kth_synth_samples_fn(&sy, &sy.h, s, i, &b, &nb), 0);
            assert_int_equal(na, nb);
            kth__sort_u64(b, nb);
            assert_memory_equal(a, b, na * sizeof *a);
            free(a);
            free(b);
        }
    }
    kth_history_free(&h);
    /* Filters: a kernel glob and the last N runs. */
    kth_filter_t f = {.kernel = "k00001", .last = 3};
    assert_int_equal(kth_load(db, &f, &h), 0);
    assert_int_equal(h.series_count, 1);
    assert_int_equal(h.run_count, 3);
    assert_int_equal(h.series[0].n, 3);
    assert_string_equal(h.runs[0].commit, sy.h.runs[5].commit);
    kth_history_free(&h);
    kth_synth_free(&sy);
    kth_close(db);
}

/* A version-1 history is migrated on open, keeping its runs; version 2 adds the tag table. */
static void test_migration(void **state)
{
    (void)state;
    fresh_db("v1.sqlite");
    kth_db_t *db;
    char err[512];
    assert_int_equal(kth_open_at(g_db, 1, &db, err, sizeof err), 0);
    assert_int_equal(kth_schema_version(db), 1);
    assert_int_equal(hu_count(db, "kt_tag"), -1); /* not there yet */
    kth_synth_t sy;
    assert_int_equal(hu_synth(&sy, 3, 2, 3), 0);
    int added;
    assert_int_equal(hu_add_run(db, &sy, 0, &added), 0);
    kth_close(db);
    /* A read (show, check) reads it as it is: never migrated, so a read needs no write access. */
    assert_int_equal(kth_open_read(g_db, &db, err, sizeof err), 0);
    kth_history_t h;
    assert_int_equal(kth_load(db, NULL, &h), 0);
    assert_int_equal(h.run_count, 1);
    assert_int_equal(h.series_count, 3);
    kth_history_free(&h);
    assert_int_equal(kth_schema_version(db), 1);
    kth_close(db);
    assert_int_equal(kth_open(g_db, &db, err, sizeof err), 0);
    assert_int_equal(kth_schema_version(db), 2);
    assert_int_equal(hu_count(db, "kt_run"), 1);
    assert_int_equal(hu_count(db, "kt_tag"), 0);
    assert_int_equal(hu_add_run(db, &sy, 1, &added), 0);
    assert_int_equal(hu_count(db, "kt_result"), 6);
    /* A newer schema is refused with a one-line message, the file left alone. */
    kth_val_t p = {.t = KTH_TEXT, .s = "99"};
    assert_int_equal(kth_exec(db, "UPDATE kt_meta SET value = $1 WHERE key = 'version'", &p, 1, NULL, NULL), 0);
    kth_close(db);
    assert_int_not_equal(kth_open(g_db, &db, err, sizeof err), 0);
    assert_null(db);
    assert_one_line(err, "newer");
    kth_synth_free(&sy);
}

static void write_file(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    fclose(f);
}

static void test_foreign_and_corrupt(void **state)
{
    (void)state;
    kth_db_t *db;
    char err[512];
    /* Not a database at all. */
    fresh_db("text.sqlite");
    write_file(g_db, "hello, this is not SQLite\n", 26);
    assert_int_equal(kth_open(g_db, &db, err, sizeof err), KT_EIO);
    assert_one_line(err, "not a ktiming history");
    /* A SQLite database of something else: left alone. */
    fresh_db("other.sqlite");
    assert_int_equal(kth_open_at(g_db, 1, &db, err, sizeof err), 0);
    assert_int_equal(kth_exec(db, "DROP TABLE kt_meta", NULL, 0, NULL, NULL), 0);
    kth_close(db);
    assert_int_equal(kth_open(g_db, &db, err, sizeof err), KT_EPARSE);
    assert_one_line(err, "not a ktiming history");
    /* A kt_meta of another format. */
    fresh_db("format.sqlite");
    assert_int_equal(kth_open(g_db, &db, err, sizeof err), 0);
    assert_int_equal(kth_exec(db, "UPDATE kt_meta SET value = 'other' WHERE key = 'format'", NULL, 0, NULL, NULL), 0);
    kth_close(db);
    assert_int_equal(kth_open(g_db, &db, err, sizeof err), KT_EPARSE);
    assert_one_line(err, "format 'other'");
    /* A history whose pages after the header are overwritten: an error, never a crash. */
    fresh_db("corrupt.sqlite");
    assert_int_equal(kth_open(g_db, &db, err, sizeof err), 0);
    kth_synth_t sy;
    assert_int_equal(hu_synth(&sy, 5, 4, 40), 0);
    int added;
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(hu_add_run(db, &sy, i, &added), 0);
    kth_synth_free(&sy);
    kth_close(db); /* the last connection checkpoints the WAL into the file */
    int fd = open(g_db, O_WRONLY);
    assert_true(fd >= 0);
    off_t size = lseek(fd, 0, SEEK_END);
    assert_true(size > 8192);
    char junk[4096];
    memset(junk, 0x5a, sizeof junk);
    for (off_t at = 4096; at < size; at += (off_t)sizeof junk)
        assert_int_equal(pwrite(fd, junk, sizeof junk, at), (ssize_t)sizeof junk);
    close(fd);
    int rc = kth_open(g_db, &db, err, sizeof err);
    if (!rc) {
        kth_history_t h;
        rc = kth_load(db, NULL, &h);
        if (!rc)
            kth_history_free(&h);
        else
            snprintf(err, sizeof err, "%s", db->err);
        kth_close(db);
    }
    assert_int_not_equal(rc, 0);
    assert_one_line(err, g_db);
}

/* A server is named in messages without its password, however the password was given; a libpq key=value string
 * names a server, never a SQLite file of that name. */
static void test_server_names(void **state)
{
    (void)state;
    static const struct {
        const char *in, *shown;
    } k[] = {
        {"postgresql://kt:hunter2@db.example/perf", "postgresql://kt@db.example/perf"},
        {"postgres://db/perf?user=kt&password=hunter2", "postgres://db/perf?user=kt"},
        {"postgresql:///perf?password=hunter2&host=/run/pg&port=5433", "postgresql:///perf?host=/run/pg&port=5433"},
        {"postgresql://kt@db/perf?application_name=a@b&password=hunter2", "postgresql://kt@db/perf?application_name=a@b"},
        {"postgresql://kt:hun?ter#2@db/perf", "postgresql://kt@db/perf"},
        {"postgresql://db/perf?password=hunter2#frag", "postgresql://db/perf#frag"},
        {"host=db dbname=perf password=hunter2 user=kt", "host=db dbname=perf user=kt"},
        {"password='hunter2 \\' x' host=db", "host=db"},
        {"host=db password = hunter2", "host=db"},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        char out[256];
        kth_server_display(k[i].in, out, sizeof out);
        if (strcmp(out, k[i].shown)) {
            fprintf(stderr, "'%s' shown as '%s', expected '%s'\n", k[i].in, out, k[i].shown);
            fail();
        }
        assert_true(kth_is_server(k[i].in));
    }
    assert_false(kth_is_server("history.sqlite"));
    assert_false(kth_is_server("./host=db.sqlite"));
    assert_false(kth_is_server("a=b.sqlite"));
    /* Opening them: a one-line error without the password, and no SQLite file created for the key=value one. */
    char cwd[4096];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(g_dir), 0);
    char url[512], err[512];
    kth_db_t *db = NULL;
    snprintf(url, sizeof url, "postgresql:///perf?host=%s/nowhere&port=1&password=hunter2", g_dir);
    assert_int_not_equal(kth_open(url, &db, err, sizeof err), 0);
    assert_null(db);
    assert_one_line(err, NULL);
    assert_null(strstr(err, "hunter2"));
    snprintf(url, sizeof url, "host=%s/nowhere port=1 dbname=perf password=hunter2", g_dir);
    assert_int_not_equal(kth_open(url, &db, err, sizeof err), 0);
    assert_null(db);
    assert_one_line(err, NULL);
    assert_null(strstr(err, "hunter2"));
    assert_null(strstr(err, "unable to open database file")); /* SQLite's words: it was taken for a file */
    struct stat st;
    assert_int_not_equal(stat("host=", &st), 0);
    assert_int_equal(chdir(cwd), 0);
}

/* Adds a run holding the kernels named in `kernels` (space-separated), each with 4 samples of `ns`. */
static void add_kernels(kth_db_t *db, int run, const char *kernels, unsigned ns)
{
    char json[4096], when[32], commit[16];
    int n = snprintf(json, sizeof json, "{\"schema\": \"ktiming.snapshot\", \"version\": 5, \"host\": \"h\", "
                                        "\"taken_ns\": %d, \"entries\": [", run);
    char names[256];
    snprintf(names, sizeof names, "%s", kernels);
    const char *sep = "";
    for (char *save = NULL, *k = strtok_r(names, " ", &save); k; k = strtok_r(NULL, " ", &save), sep = ", ")
        n += snprintf(json + n, sizeof json - (size_t)n,
                      "%s{\"name\": \"%s\", \"backend\": \"cpu\", \"device\": \"host\", \"dispatch_count\": 4, "
                      "\"total_ns\": %u, \"min_ns\": %u, \"max_ns\": %u, \"mean_ns\": %u, \"p50_ns\": %u, "
                      "\"sample_count\": 4, \"samples\": [%u, %u, %u, %u]}",
                      sep, k, 4 * ns, ns, ns, ns, ns, ns, ns, ns, ns);
    n += snprintf(json + n, sizeof json - (size_t)n, "]}");
    snprintf(when, sizeof when, "2026-01-01T00:00:%02dZ", run);
    snprintf(commit, sizeof commit, "c%d", run);
    kth_run_info_t info = {.commit = commit, .when = when};
    int64_t id;
    int added;
    char err[512];
    assert_int_equal(kth_add_json(db, json, (size_t)n, &info, &id, &added, err, sizeof err), 0);
    assert_int_equal(added, 1);
}

/* --last N counts the runs that hold a kernel the filters keep: "nightly" runs in runs 0..3 only, "every" in all
 * eight, so the last 2 runs of "nightly" are runs 2 and 3 (once none: the last 2 runs of the history hold none). */
static void test_last_after_filters(void **state)
{
    (void)state;
    fresh_db("last.sqlite");
    kth_db_t *db;
    char err[512];
    assert_int_equal(kth_open(g_db, &db, err, sizeof err), 0);
    for (int i = 0; i < 8; i++)
        add_kernels(db, i, i < 4 ? "every nightly" : "every", 100 + (unsigned)i);
    kth_history_t h;
    kth_filter_t f = {.kernel = "nightly", .last = 2};
    assert_int_equal(kth_load(db, &f, &h), 0);
    assert_int_equal(h.series_count, 1);
    assert_int_equal(h.run_count, 2);
    assert_string_equal(h.runs[0].commit, "c2");
    assert_string_equal(h.runs[1].commit, "c3");
    assert_int_equal(h.series[0].n, 2);
    assert_int_equal(h.series[0].pts[0].run, 0);
    assert_int_equal(h.series[0].pts[1].run, 1);
    assert_true(h.series[0].pts[1].median == 103.0);
    kth_history_free(&h);
    /* Without a kernel filter the last 3 runs are runs 5..7, and "nightly" is not among them. */
    f = (kth_filter_t){.last = 3};
    assert_int_equal(kth_load(db, &f, &h), 0);
    assert_int_equal(h.run_count, 3);
    assert_int_equal(h.series_count, 1);
    assert_string_equal(h.series[0].kernel, "every");
    assert_string_equal(h.runs[0].commit, "c5");
    assert_true(h.series[0].pts[2].median == 107.0);
    kth_history_free(&h);
    kth_close(db);
}

/* Read without write access (a folder without write permission), a history is read as an immutable file; when a
 * writer changes it meanwhile, kth_changed says so (the CLI then reads it again). Root writes anywhere, so this runs
 * only as another user (tests/history/test_cli_history.c reads as "nobody" when run as root). */
static void test_read_changed(void **state)
{
    (void)state;
    if (geteuid() == 0)
        skip();
    char dir[2048], err[512];
    snprintf(dir, sizeof dir, "%s/rodir", g_dir);
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(g_db, sizeof g_db, "%s/h.sqlite", dir);
    kth_db_t *db, *rd;
    assert_int_equal(kth_open(g_db, &db, err, sizeof err), 0);
    add_kernels(db, 1, "k", 100);
    kth_close(db);
    assert_int_equal(chmod(dir, 0555), 0);
    assert_int_equal(kth_open_read(g_db, &rd, err, sizeof err), 0);
    kth_history_t h;
    assert_int_equal(kth_load(rd, NULL, &h), 0);
    assert_int_equal(h.run_count, 1);
    kth_history_free(&h);
    assert_int_equal(kth_changed(rd), 0);
    assert_int_equal(chmod(dir, 0755), 0); /* the owner adds a run meanwhile */
    assert_int_equal(kth_open(g_db, &db, err, sizeof err), 0);
    add_kernels(db, 2, "k", 110);
    kth_close(db);
    assert_int_equal(chmod(dir, 0555), 0);
    assert_int_equal(kth_changed(rd), 1);
    kth_close(rd);
    assert_int_equal(chmod(dir, 0755), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_samples_codec),      cmocka_unit_test(test_parse_time),
        cmocka_unit_test(test_add_twice_is_noop),  cmocka_unit_test(test_load_series),
        cmocka_unit_test(test_migration),          cmocka_unit_test(test_foreign_and_corrupt),
        cmocka_unit_test(test_server_names),        cmocka_unit_test(test_last_after_filters),
        cmocka_unit_test(test_read_changed),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
