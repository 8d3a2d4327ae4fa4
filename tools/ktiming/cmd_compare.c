/* cmd_compare.c — `ktiming compare BEFORE.json AFTER.json`: per-kernel before/after verdicts from two snapshots. */
#include "cli.h"

#include "analysis/compare_files.h"

#include <ktiming/analysis.h>
#include <ktiming/compare.h>
#include "shared/output.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KTCLI_EXIT_REGRESSION KTCLI_EXIT_FAIL

static void compare_usage(FILE *out)
{
    fprintf(out,
            "usage: ktiming compare BEFORE.json AFTER.json [options]\n"
            "\n"
            "Compares two snapshots kernel by kernel, matched by (name, backend, device), on the raw duration\n"
            "samples they carry: speedup (before/after) of medians and means, a bootstrap confidence interval,\n"
            "a Mann-Whitney U p-value and a verdict FASTER / SLOWER / SAME / UNSURE, plus a geometric mean.\n"
            "Devices are matched by identity: the same UUID or PCI address, else model and ordinal, else label\n"
            "(a GPU renumbered by CUDA_VISIBLE_DEVICES is compared with itself); the output says which.\n"
            "\n"
            "options:\n"
            "  --threshold PCT       smallest change that counts, in percent (default 5)\n"
            "  --alpha A             significance level of the U test (default 0.05)\n"
            "  --confidence C        confidence level of the intervals (default 0.95)\n"
            "  --min-samples N       fewer samples on a side gives UNSURE (default 9)\n"
            "  --bootstrap N         bootstrap resamples (default 2000)\n"
            "  --seed N              bootstrap seed, 1 to 2^64-1 (default fixed: results are reproducible)\n"
            "  --fail-on-regression  exit 1 when any kernel is SLOWER (significant and beyond the threshold)\n"
            "  -k, --filter GLOB     only kernels whose name matches the shell pattern GLOB (fnmatch)\n"
            "  -f, --format FMT      text (default), markdown, json, or html (AFTER's HTML report with the\n"
            "                        speedups, confidence intervals and verdicts; best written with -o)\n"
            "  -o, --output FILE     write there (replaced atomically) instead of standard output (- for it)\n"
            "  --max-input-mb N      refuse a snapshot larger than N MiB (default 1024)\n"
            "  -h, --help            this text\n"
            "\n"
            "exit status: 0 compared (no regression, or not asked), 1 regression with --fail-on-regression,\n"
            "2 usage error, 3 a snapshot or the output could not be read or written.\n"
            "docs/compare.md explains the statistics.\n");
}

#define usage_error(...) ktcli_usage_error("compare", __VA_ARGS__)

static int parse_double(const char *s, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

/* A decimal count (010 is ten, not octal eight; 0x100 is no count): digits only, at most max. */
static int parse_u64(const char *s, unsigned long long max, unsigned long long *out)
{
    char *end = NULL;
    errno = 0;
    if (*s < '0' || *s > '9') return -1; /* no sign, no space: strtoull would take them */
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || *end || errno || v > max) return -1;
    *out = v;
    return 0;
}

/* Options parsed from argv. */
typedef struct compare_args_t {
    const char *paths[2];   /* BEFORE, AFTER */
    kt_compare_opts_t opts; /* statistics options */
    kt_compare_format_t format; /* output format */
    int html;               /* --format html: kt_report_compare_html instead of kt_compare_print */
    const char *output;     /* NULL = stdout */
    const char *filter;     /* fnmatch glob on kernel names; NULL = all */
    size_t max_input;       /* --max-input-mb, in bytes */
    int fail_on_regression; /* exit 1 on SLOWER */
} compare_args_t;

/* Returns -1 to continue, or an exit code (0 after --help). */
static int parse_args(int argc, char **argv, compare_args_t *a)
{
    enum { O_THRESHOLD = 256, O_ALPHA, O_CONFIDENCE, O_MIN_SAMPLES, O_BOOTSTRAP, O_SEED, O_FAIL, O_MAX_INPUT };
    static const struct option kLong[] = {
        {"threshold", required_argument, NULL, O_THRESHOLD}, {"alpha", required_argument, NULL, O_ALPHA},
        {"confidence", required_argument, NULL, O_CONFIDENCE}, {"min-samples", required_argument, NULL, O_MIN_SAMPLES},
        {"bootstrap", required_argument, NULL, O_BOOTSTRAP}, {"seed", required_argument, NULL, O_SEED},
        {"fail-on-regression", no_argument, NULL, O_FAIL}, {"max-input-mb", required_argument, NULL, O_MAX_INPUT},
        KTCLI_OPT_FILTER, KTCLI_OPT_FORMAT, KTCLI_OPT_OUTPUT, KTCLI_OPT_HELP, KTCLI_OPT_END};
    int c;
    double d;
    unsigned long long u;
    ktcli_getopt_begin();
    while ((c = getopt_long(argc, argv, ":k:f:o:h", kLong, NULL)) != -1) {
        const char *val = optarg;
        switch (c) {
        case O_THRESHOLD:
            if (parse_double(val, &d) || d < 0.0) return usage_error("--threshold: not a percentage >= 0: '%s'", val);
            a->opts.threshold_pct = d == 0.0 ? -1.0 : d; /* negative asks for exactly 0 */
            break;
        case O_ALPHA:
            if (parse_double(val, &d) || !(d > 0.0 && d < 1.0))
                return usage_error("--alpha: not a level in (0, 1): '%s'", val);
            a->opts.alpha = d;
            break;
        case O_CONFIDENCE:
            if (parse_double(val, &d) || !(d > 0.0 && d < 1.0))
                return usage_error("--confidence: not a level in (0, 1): '%s'", val);
            a->opts.confidence = d;
            break;
        case O_MIN_SAMPLES:
            if (parse_u64(val, 1000000000ull, &u) || u == 0) return usage_error("--min-samples: not a count: '%s'", val);
            a->opts.min_samples = (uint32_t)u;
            break;
        case O_BOOTSTRAP:
            if (parse_u64(val, 10000000ull, &u) || u < 100)
                return usage_error("--bootstrap: not a count in [100, 1e7]: '%s'", val);
            a->opts.bootstrap = (uint32_t)u;
            break;
        case O_SEED:
            if (parse_u64(val, ~0ull, &u)) return usage_error("--seed: not an unsigned integer: '%s'", val);
            if (u == 0) /* kt_compare reads seed 0 as "the default": 0 would silently be another seed */
                return usage_error("--seed: 0 means the default seed; give a seed from 1 to 2^64-1");
            a->opts.seed = u;
            break;
        case O_FAIL: a->fail_on_regression = 1; break;
        case O_MAX_INPUT:
            if (ktcli_parse_max_input_mb(val, &a->max_input))
                return usage_error("--max-input-mb: not a size in MiB (1..1048576): '%s'", val);
            break;
        case 'k': a->filter = val; break;
        case 'f':
            if (!strcmp(val, "text")) a->format = KT_COMPARE_TEXT;
            else if (!strcmp(val, "markdown") || !strcmp(val, "md")) a->format = KT_COMPARE_MARKDOWN;
            else if (!strcmp(val, "json")) a->format = KT_COMPARE_JSON;
            else if (!strcmp(val, "html")) a->html = 1;
            else return usage_error("--format: expected text, markdown, json or html, not '%s'", val);
            break;
        case 'o': a->output = val; break;
        case 'h': compare_usage(stdout); return 0;
        default: return ktcli_getopt_error("compare", c, argc, argv);
        }
    }
    if (argc - optind != 2)
        return usage_error("%s", argc - optind < 2 ? "two snapshots expected (BEFORE.json AFTER.json)"
                                                   : "more than two snapshots given (BEFORE.json AFTER.json)");
    a->paths[0] = argv[optind];
    a->paths[1] = argv[optind + 1];
    return -1;
}

/* The HTML report of AFTER with the comparison: the result as JSON, handed to the page. */
static int print_html(FILE *out, kt_snapshot_t *const snap[2], const kt_compare_result_t *res)
{
    char *json = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&json, &len);
    if (!m) return KT_ENOMEM;
    int rc = kt_compare_print(m, res, KT_COMPARE_JSON);
    if (fclose(m) != 0 && !rc) rc = KT_ENOMEM;
    if (!rc) rc = kt_report_compare_html(out, snap[0], snap[1], json);
    free(json);
    return rc;
}

/* The comparison in the chosen format; snap non-NULL selects the HTML report. */
static int print_any(FILE *out, kt_snapshot_t *const *snap, const kt_compare_result_t *res,
                     kt_compare_format_t format)
{
    return snap ? print_html(out, snap, res) : kt_compare_print(out, res, format);
}

/* Through the output writer (src/shared/output.h): readers never see half a comparison, a failure leaves an
 * existing file as it was, a FIFO or device is written through. */
static int write_atomic(const char *path, kt_snapshot_t *const *snap, const kt_compare_result_t *res,
                        kt_compare_format_t format)
{
    kt_output_t *o = NULL;
    int rc = kt_output_open(path, 0, &o);
    if (!rc) {
        rc = print_any(kt_output_file(o), snap, res, format);
        if (rc) kt_output_abort(o);
        else rc = kt_output_commit(o);
    }
    if (rc == KT_EIO) fprintf(stderr, "ktiming compare: %s: %s\n", path, strerror(errno));
    else if (rc) fprintf(stderr, "ktiming compare: %s: %s\n", path, kt_strerror(rc));
    return rc; /* said once here: the caller adds no second line */
}

/* Releases what main compared: the files' result and records, or the snapshots and kt_compare's result. */
static void release(kt__cmp_files_t *files, kt_snapshot_t *snap[2], kt_compare_result_t *res)
{
    if (files) kt__compare_files_free(files, res);
    else kt_compare_free(res);
    kt_snapshot_free(snap[0]);
    kt_snapshot_free(snap[1]);
}

int ktcli_cmd_compare(int argc, char **argv)
{
    compare_args_t a;
    memset(&a, 0, sizeof a);
    a.max_input = (size_t)KTCLI_MAX_INPUT_MB_DEFAULT << 20;
    int code = parse_args(argc, argv, &a);
    if (code >= 0) return code;

    /* The HTML report needs both snapshots whole; the tables and JSON only what a comparison reads per kernel
     * (compare_files.h: two 1,000,000-kernel files in a third of the memory), with the same result. */
    kt_snapshot_t *snap[2] = {NULL, NULL};
    kt__cmp_files_t *files = NULL;
    char err[512];
    int rc = 0;
    if (a.html) {
        for (int i = 0; i < 2 && !rc; i++)
            rc = kt_snapshot_load(a.paths[i], &(kt_load_opts_t){.max_bytes = a.max_input}, &snap[i], err, sizeof err);
    } else {
        rc = kt__compare_files_load(a.paths[0], a.paths[1], a.max_input, a.filter, &files, err, sizeof err);
    }
    if (rc) {
        fprintf(stderr, "ktiming compare: %s\n", err[0] ? err : kt_strerror(rc));
        kt_snapshot_free(snap[0]);
        return KTCLI_EXIT_INPUT;
    }
    kt_compare_result_t res;
    if (a.html) {
        ktcli_snapshot_filter(snap[0], a.filter);
        ktcli_snapshot_filter(snap[1], a.filter);
        rc = kt_compare(snap[0], snap[1], &a.opts, &res);
    } else {
        rc = kt__compare_files(files, &a.opts, &res);
    }
    if (rc) {
        release(files, snap, &res);
        fprintf(stderr, "ktiming compare: %s\n", kt_strerror(rc));
        return rc == KT_EINVAL ? KTCLI_EXIT_USAGE : KTCLI_EXIT_INPUT;
    }

    kt_snapshot_t *const *html = a.html ? snap : NULL;
    if (a.output && !strcmp(a.output, "-")) a.output = NULL; /* "-" is standard output, as for report and merge */
    rc = a.output ? write_atomic(a.output, html, &res, a.format) : print_any(stdout, html, &res, a.format);
    size_t slower = res.slower;
    release(files, snap, &res);
    if (!a.output && fflush(stdout) != 0 && !rc) rc = KT_EIO;
    int regression = slower > 0;
    if (regression && (a.html || a.format != KT_COMPARE_JSON))
        fprintf(stderr, "ktiming compare: %zu kernel%s SLOWER (regression)\n", slower, slower == 1 ? "" : "s");
    if (rc) {
        if (!a.output) /* write_atomic named the file and the cause */
            fprintf(stderr, "ktiming compare: writing the comparison failed: %s\n", kt_strerror(rc));
        return KTCLI_EXIT_INPUT;
    }
    return regression && a.fail_on_regression ? KTCLI_EXIT_REGRESSION : 0;
}
