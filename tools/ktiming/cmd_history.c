/* cmd_history.c — `ktiming history add|show|check`: every run's per-kernel times in a database (SQLite file or
 * PostgreSQL server), a look at each kernel's trend, and regressions found across commits (docs/history.md). */
#include "cli.h"
#include "core/env.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if KTCLI_HAVE_HISTORY
#include "history.h"
#include "shared/output.h"
#endif

#define KTCLI_EXIT_REGRESSION KTCLI_EXIT_FAIL

static void history_usage(FILE *out)
{
    fprintf(out,
            "usage: ktiming history add RUN.json... [--commit SHA] [--branch B] [--when ISO8601] [--machine NAME]\n"
            "                           [--tag KEY=VALUE ...] [--db DB]\n"
            "       ktiming history show [--kernel GLOB] [--device GLOB] [--machine GLOB] [--branch B] [--last N]\n"
            "                            [-f text|markdown|csv|json|html] [-o FILE] [--commit-url URL] [--db DB]\n"
            "       ktiming history check [--fail-on-regression] [--threshold PCT] [--alpha A] [--window N]\n"
            "                             [--tail N] [filters as for show] [-f text|markdown|csv|json|html] [-o FILE]\n"
            "                             [--db DB]\n"
            "\n"
            "Keeps every run's per-kernel times (aggregates, percentiles, clock bounds and the reservoir sample) in\n"
            "a database and finds the commits where a kernel's time changed.\n"
            "  add    stores snapshots as runs (the same file twice is stored once)\n"
            "  show   one row per kernel, device and machine: latest median, change against the previous runs, trend\n"
            "  check  change points per series confirmed by a Mann-Whitney U test on the samples either side,\n"
            "         Benjamini-Hochberg across series; prints where each change began, its size and interval\n"
            "\n"
            "options:\n"
            "  --db DB               SQLite file, or postgresql://... for a shared server (default: $KTIMING_HISTORY,\n"
            "                        else ./ktiming-history.sqlite)\n"
            "  --commit SHA, --branch B, --when ISO8601 (default now), --machine NAME (default the snapshot's host),\n"
            "  --tag KEY=VALUE       the run's identity (add)\n"
            "  --kernel GLOB, --device GLOB, --machine GLOB, --branch B, --last N\n"
            "                        which series and runs (show, check)\n"
            "  --threshold PCT       smallest change reported, percent (default 5)\n"
            "  --alpha A             false discovery rate across series (default 0.05)\n"
            "  --window N            runs each side of a change compared (default 5)\n"
            "  --tail N              also compare the last N runs (a pull request's) with the runs before them, per\n"
            "                        kernel: a change too recent for three runs at the new level (check)\n"
            "  --fail-on-regression  exit 1 when a regression is not fixed by the latest run (check)\n"
            "  --commit-url URL      link commits: URL with {commit} (https://github.com/o/r/commit/{commit})\n"
            "  -f, --format FMT      text (default), markdown, csv, json, html\n"
            "  -o, --output FILE     write there instead of standard output\n"
            "  -h, --help            this text\n"
            "\n"
            "exit status: 0 done (check: no regression, or not asked), 1 a regression with --fail-on-regression,\n"
            "2 usage error, 3 a snapshot or the database could not be read or written.\n"
            "docs/history.md has the schema, the statistics and a CI recipe.\n");
}

#define usage_error(...) ktcli_usage_error("history", __VA_ARGS__)

#if !KTCLI_HAVE_HISTORY

int ktcli_cmd_history(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            history_usage(stdout);
            return 0;
        }
    fprintf(stderr, "ktiming history: this ktiming was built without SQLite (install libsqlite3-dev and rebuild)\n");
    return KTCLI_EXIT_INPUT;
}

#else

/* Options of every history subcommand. */
typedef struct history_args_t {
    const char *db;            /* --db */
    kth_run_info_t info;       /* add: the run's identity */
    const char **tags;         /* --tag values */
    kth_filter_t filter;       /* show, check */
    kth_check_opts_t check;    /* check */
    kth_format_t format;       /* -f */
    const char *output;        /* -o */
    const char *commit_url;    /* --commit-url */
    int fail_on_regression;    /* check */
} history_args_t;

static int parse_double(const char *s, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

static int parse_size(const char *s, size_t *out)
{
    char *end = NULL;
    errno = 0;
    if (*s == '-' || !*s)
        return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno || v == 0 || v > 100000000ull)
        return -1;
    *out = (size_t)v;
    return 0;
}

/* Returns -1 to go on, or an exit code (0 after --help). */
static int parse_args(const char *sub, int argc, char **argv, history_args_t *a)
{
    enum { O_DB = 256, O_COMMIT, O_BRANCH, O_WHEN, O_MACHINE, O_TAG, O_KERNEL, O_DEVICE, O_LAST, O_THRESHOLD,
           O_ALPHA, O_WINDOW, O_FAIL, O_URL, O_TAIL };
    static const struct option kLong[] = {
        {"db", required_argument, NULL, O_DB}, {"commit", required_argument, NULL, O_COMMIT},
        {"branch", required_argument, NULL, O_BRANCH}, {"when", required_argument, NULL, O_WHEN},
        {"machine", required_argument, NULL, O_MACHINE}, {"tag", required_argument, NULL, O_TAG},
        {"kernel", required_argument, NULL, O_KERNEL}, {"device", required_argument, NULL, O_DEVICE},
        {"last", required_argument, NULL, O_LAST}, {"threshold", required_argument, NULL, O_THRESHOLD},
        {"alpha", required_argument, NULL, O_ALPHA}, {"window", required_argument, NULL, O_WINDOW},
        {"fail-on-regression", no_argument, NULL, O_FAIL}, {"commit-url", required_argument, NULL, O_URL},
        {"tail", required_argument, NULL, O_TAIL},
        KTCLI_OPT_FORMAT, KTCLI_OPT_OUTPUT, KTCLI_OPT_HELP, KTCLI_OPT_END};
    int is_add = !strcmp(sub, "add"), is_check = !strcmp(sub, "check");
    int c;
    double d;
    ktcli_getopt_begin();
    while ((c = getopt_long(argc, argv, ":f:o:h", kLong, NULL)) != -1) {
        const char *v = optarg;
        /* Options that belong to another subcommand are refused, not ignored. */
        int add_only = c == O_COMMIT || c == O_WHEN || c == O_TAG;
        int read_only = c == O_KERNEL || c == O_DEVICE || c == O_LAST || c == 'f' || c == 'o' || c == O_URL;
        int check_only = c == O_THRESHOLD || c == O_ALPHA || c == O_WINDOW || c == O_FAIL || c == O_TAIL;
        if ((add_only && !is_add) || (read_only && is_add) || (check_only && !is_check))
            return usage_error("%s: not an option of 'history %s'", argv[optind - 1], sub);
        switch (c) {
        case O_DB: a->db = v; break;
        case O_COMMIT: a->info.commit = v; break;
        case O_BRANCH:
            if (is_add) a->info.branch = v;
            else a->filter.branch = v;
            break;
        case O_WHEN: {
            int64_t t;
            if (kth_parse_time(v, &t)) return usage_error("--when: not an ISO 8601 time (2026-11-27T01:02:03Z): '%s'", v);
            a->info.when = v;
            break;
        }
        case O_MACHINE:
            if (is_add) a->info.machine = v;
            else a->filter.machine = v;
            break;
        case O_TAG: {
            const char *eq = strchr(v, '=');
            if (!eq || eq == v) return usage_error("--tag: expected KEY=VALUE, not '%s'", v);
            if (eq - v > KTH_TAG_KEY_MAX) return usage_error("--tag: a key longer than %d bytes", KTH_TAG_KEY_MAX);
            for (size_t i = 0; i < a->info.tag_count; i++)
                if (!strncmp(a->tags[i], v, (size_t)(eq - v) + 1))
                    return usage_error("--tag: key '%.*s' given twice", (int)(eq - v), v);
            const char **t = realloc(a->tags, (a->info.tag_count + 1) * sizeof *t);
            if (!t) return usage_error("out of memory");
            a->tags = t;
            a->tags[a->info.tag_count++] = v;
            a->info.tags = a->tags;
            break;
        }
        case O_KERNEL: a->filter.kernel = v; break;
        case O_DEVICE: a->filter.device = v; break;
        case O_LAST:
            if (parse_size(v, &a->filter.last)) return usage_error("--last: not a count >= 1: '%s'", v);
            break;
        case O_THRESHOLD:
            if (parse_double(v, &d) || d < 0.0 || d > 1000.0) return usage_error("--threshold: not a percentage in [0, 1000]: '%s'", v);
            a->check.threshold_pct = d == 0.0 ? -1.0 : d;
            break;
        case O_ALPHA:
            if (parse_double(v, &d) || !(d > 0.0 && d < 1.0)) return usage_error("--alpha: not a level in (0, 1): '%s'", v);
            a->check.alpha = d;
            break;
        case O_WINDOW:
            if (parse_size(v, &a->check.window) || a->check.window > 1000) return usage_error("--window: not a count in [1, 1000]: '%s'", v);
            break;
        case O_TAIL:
            if (parse_size(v, &a->check.tail) || a->check.tail > 1000) return usage_error("--tail: not a count in [1, 1000]: '%s'", v);
            break;
        case O_FAIL: a->fail_on_regression = 1; break;
        case O_URL: a->commit_url = v; break;
        case 'f':
            if (kth_parse_format(v, &a->format)) return usage_error("--format: expected text, markdown, csv, json or html, not '%s'", v);
            break;
        case 'o': a->output = v; break;
        case 'h': history_usage(stdout); return 0;
        default: return ktcli_getopt_error("history", c, argc, argv);
        }
    }
    if (!a->db) {
        const char *env = kt__env(KT_ENV_NAME(HISTORY));
        a->db = env && *env ? env : "ktiming-history.sqlite";
    }
    return -1;
}


/* Opens the history; show and check refuse a file that does not exist rather than create an empty one. */
static int open_db(const history_args_t *a, int create, kth_db_t **db)
{
    char err[512];
    if (!create && !kth_is_server(a->db) && access(a->db, F_OK) != 0) {
        fprintf(stderr, "ktiming history: %s: no history there (%s); add runs first with 'ktiming history add'\n",
                a->db, strerror(errno));
        return KTCLI_EXIT_INPUT;
    }
    if ((create ? kth_open : kth_open_read)(a->db, db, err, sizeof err)) {
        fprintf(stderr, "ktiming history: %s\n", err);
        return KTCLI_EXIT_INPUT;
    }
    return 0;
}

static int cmd_add(history_args_t *a, int argc, char **argv)
{
    if (optind >= argc)
        return usage_error("add: no snapshot given (ktiming history add RUN.json)");
    kth_db_t *db = NULL;
    int rc = open_db(a, 1, &db);
    if (rc)
        return rc;
    /* Every file is tried: one that cannot be stored is named, the others still go in, and the status says 3. */
    for (int i = optind; i < argc; i++) {
        int64_t id;
        int added;
        char err[1024];
        if (kth_add_file(db, argv[i], &a->info, &id, &added, err, sizeof err)) {
            fprintf(stderr, "ktiming history: %s\n", err);
            rc = KTCLI_EXIT_INPUT;
        } else {
            fprintf(stderr, "ktiming history: %s: %s run %lld\n", argv[i], added ? "added as" : "already stored as",
                    (long long)id);
        }
    }
    kth_close(db);
    return rc;
}

/* -o goes through the output writer (src/shared/output.h), as compare's and report's do: a reader never sees half a
 * history, and a failed write leaves an existing file as it was. */
static int print_read(FILE *out, const kth_history_t *h, const kth_check_result_t *r, int check, int need,
                      const history_args_t *a)
{
    int rc = check ? kth_print_check(out, h, r, a->format, a->commit_url)
                   : kth_print_show(out, h, need ? r : NULL, a->format, a->commit_url);
    if (!rc && (ferror(out) || fflush(out) != 0))
        rc = KT_EIO;
    return rc;
}

static int write_read(const kth_history_t *h, const kth_check_result_t *r, int check, int need,
                      const history_args_t *a)
{
    const char *path = a->output;
    if (!path || !strcmp(path, "-")) {
        int rc = print_read(stdout, h, r, check, need, a);
        if (rc)
            fprintf(stderr, "ktiming history: standard output: write error\n");
        return rc;
    }
    kt_output_t *o = NULL;
    int rc = kt_output_open(path, 0, &o);
    if (!rc) {
        rc = print_read(kt_output_file(o), h, r, check, need, a);
        if (rc) kt_output_abort(o);
        else rc = kt_output_commit(o);
    }
    if (rc == KT_EIO) fprintf(stderr, "ktiming history: %s: %s\n", path, strerror(errno));
    else if (rc) fprintf(stderr, "ktiming history: %s: %s\n", path, kt_strerror(rc));
    return rc;
}

/* 1 when -o names the history itself or one of SQLite's files beside it (replacing it would lose the history). */
static int output_is_db(const history_args_t *a)
{
    if (!a->output || !strcmp(a->output, "-") || kth_is_server(a->db))
        return 0;
    static const char *const kSuffix[] = {"", "-wal", "-shm", "-journal"};
    for (size_t i = 0; i < sizeof kSuffix / sizeof *kSuffix; i++) {
        char p[4096];
        if ((size_t)snprintf(p, sizeof p, "%s%s", a->db, kSuffix[i]) < sizeof p && kt_output_same(a->output, p))
            return 1;
    }
    return 0;
}

/* Opens the history and reads what show or check needs: 0, or an exit status with the message printed (*db NULL).
 * *changed: the file was written while it was read without write access (kth_changed), so nothing is printed. */
static int read_history(const history_args_t *a, int need, kth_db_t **db, kth_history_t *h, kth_check_result_t *r,
                        int *changed)
{
    *changed = 0;
    int rc = open_db(a, 0, db);
    if (rc)
        return rc;
    const char *why = NULL;
    if (kth_load(*db, &a->filter, h))
        why = (*db)->err;
    else if (need && (rc = kth_check(h, kth_db_samples_fn, *db, &a->check, r))) {
        why = rc == KT_ENOMEM ? "out of memory" : (*db)->err;
        kth_history_free(h);
    }
    if (kth_changed(*db)) {
        *changed = 1;
        if (!why) {
            kth_check_free(r);
            kth_history_free(h);
        }
        why = "";
    }
    if (why) {
        if (*why)
            fprintf(stderr, "ktiming history: %s\n", why);
        kth_close(*db);
        *db = NULL;
        return KTCLI_EXIT_INPUT;
    }
    return 0;
}

static int cmd_read(history_args_t *a, int check, int argc, char **argv)
{
    if (optind < argc)
        return usage_error("%s: unexpected argument '%s'", check ? "check" : "show", argv[optind]);
    if (output_is_db(a))
        return usage_error("-o %s: that is the history database (%s); name another file", a->output, a->db);
    kth_db_t *db = NULL;
    kth_history_t h;
    kth_check_result_t r = {0};
    int need = check || a->format == KTH_FMT_HTML, changed = 0, rc = 0;
    /* A history read without write access is read as it is on disk; a writer that changed it meanwhile makes the
     * read start over (a few times), so what is printed is one consistent state. */
    for (int attempt = 0; attempt < 5; attempt++)
        if (!(rc = read_history(a, need, &db, &h, &r, &changed)) || !changed)
            break;
    if (rc) {
        if (changed)
            fprintf(stderr, "ktiming history: %s: changed each time it was read; try again\n", a->db);
        return rc;
    }
    int exit = KTCLI_EXIT_OK;
    if (write_read(&h, &r, check, need, a))
        exit = KTCLI_EXIT_INPUT;
    else if (check && a->fail_on_regression && r.regressions)
        exit = KTCLI_EXIT_REGRESSION;
    if (!h.series_count && exit == KTCLI_EXIT_OK)
        fprintf(stderr, "ktiming history: no series match in %s\n", db->where);
    kth_check_free(&r);
    kth_history_free(&h);
    kth_close(db);
    return exit;
}

int ktcli_cmd_history(int argc, char **argv)
{
    if (argc < 2)
        return usage_error("expected a subcommand: add, show or check");
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        history_usage(stdout);
        return 0;
    }
    const char *sub = argv[1];
    if (sub[0] == '-')
        return usage_error("unknown option '%s' (expected a subcommand first: add, show or check)", sub);
    if (strcmp(sub, "add") && strcmp(sub, "show") && strcmp(sub, "check"))
        return usage_error("unknown subcommand '%s' (add, show or check)", sub);
    history_args_t a;
    memset(&a, 0, sizeof a);
    int rc = parse_args(sub, argc - 1, argv + 1, &a);
    if (rc < 0) {
        if (!strcmp(sub, "add"))
            rc = cmd_add(&a, argc - 1, argv + 1);
        else
            rc = cmd_read(&a, !strcmp(sub, "check"), argc - 1, argv + 1);
    }
    free(a.tags);
    return rc;
}

#endif
