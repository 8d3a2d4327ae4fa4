/* cmd_report.c — `ktiming report FILE.json`: print or convert a saved snapshot (text, markdown, csv, json, chrome,
 * html), its rows sorted and filtered by name. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <string.h>
#include <ktiming/analysis.h>
#include "analysis/report_file.h"
#include "shared/output.h"

static void report_usage(FILE *out)
{
    fprintf(out,
            "usage: ktiming report FILE.json [-f FORMAT] [--sort KEY] [--filter GLOB] [--by-config] [--by-rank]\n"
            "                      [-o OUT] [--max-input-mb N]\n"
            "\n"
            "Prints or converts a snapshot saved by KTIMING_OUTPUT=..., `ktiming demo -o`, `ktiming run -o` or\n"
            "kt_report_write(). FILE '-' reads standard input.\n"
            "\n"
            "  -f, --format FMT   text (default: the [timing] table), markdown (the same as a table for pull\n"
            "                     requests), csv, json (schema ktiming.snapshot), chrome (Chrome trace /\n"
            "                     Perfetto), html (self-contained report), lines (grep-friendly, one line per\n"
            "                     kernel: [timing] NAME BACKEND avg= 12.34ms min= 11.98ms max= 14.02ms n=3)\n"
            "  -s, --sort KEY     row order of text, markdown and csv: total (default, largest first), name,\n"
            "                     mean, count\n"
            "  -k, --filter GLOB  only kernels whose name matches the shell pattern GLOB (fnmatch), e.g. 'blur*'\n"
            "  -o, --output OUT   write to OUT (replaced atomically) instead of standard output\n"
            "  --max-input-mb N   refuse a snapshot larger than N MiB (default 1024)\n"
            "  -c, --by-config    text, markdown, csv, lines: after each kernel's row, a row per launch\n"
            "                     configuration (OpenCL global/local sizes, Vulkan group counts, CUDA grid/block;\n"
            "                     'none' for dispatches recorded without one)\n"
            "  -r, --by-rank      a merged snapshot's per-rank load balance (ktiming merge) instead of the table\n"
            "  -h, --help         this help\n"
            "\n"
            "exit status: 0 done, 1 unreadable or invalid snapshot or failed write, 2 usage error\n");
}

/* The exit status of a written report (rc from the writer, saved its errno), saying why it failed. */
static int report_failed(int rc, int saved, const char *out_path, const char *format_name)
{
    if (!rc)
        return 0;
    const char *target = out_path && strcmp(out_path, "-") ? out_path : "standard output";
    if (rc == KT_ENOTSUP)
        fprintf(stderr, "ktiming report: format '%s' is not available in this build\n", format_name);
    else if (rc == KT_EIO)
        fprintf(stderr, "ktiming report: cannot write %s: %s\n", target, strerror(saved));
    else
        fprintf(stderr, "ktiming report: cannot write %s: %s\n", target, kt_strerror(rc));
    return 1;
}

int ktcli_cmd_report(int argc, char **argv)
{
    static const struct option kLong[] = {
        KTCLI_OPT_FORMAT, KTCLI_OPT_OUTPUT, {"sort", required_argument, NULL, 's'}, KTCLI_OPT_FILTER,
        {"by-rank", no_argument, NULL, 'r'}, {"by-config", no_argument, NULL, 'c'}, KTCLI_OPT_HELP, {"max-input-mb", required_argument, NULL, 'M'},
        KTCLI_OPT_END};
    size_t max_input = (size_t)KTCLI_MAX_INPUT_MB_DEFAULT << 20;
    kt_format_t format = KT_FORMAT_TEXT;
    kt_report_opts_t ropts = {.sort = KT_SORT_TOTAL, .filter = NULL};
    const char *format_name = "text";
    const char *out_path = NULL;
    int c, by_rank = 0;
    ktcli_getopt_begin();
    while ((c = getopt_long(argc, argv, ":f:o:s:k:rch", kLong, NULL)) != -1) {
        switch (c) {
        case 'f':
            if (ktcli_parse_format(optarg, &format) != 0)
                return ktcli_usage_error("report", "unknown format '%s' (text, markdown, csv, json, chrome, html, lines)",
                                         optarg);
            format_name = optarg;
            break;
        case 's':
            if (ktcli_parse_sort(optarg, &ropts.sort) != 0)
                return ktcli_usage_error("report", "unknown sort key '%s' (total, name, mean, count)", optarg);
            break;
        case 'k': ropts.filter = optarg; break;
        case 'o': out_path = optarg; break;
        case 'M':
            if (ktcli_parse_max_input_mb(optarg, &max_input) != 0)
                return ktcli_usage_error("report", "--max-input-mb: not a size in MiB (1..1048576): '%s'", optarg);
            break;
        case 'r': by_rank = 1; break;
        case 'c': ropts.by_config = 1; break;
        case 'h': report_usage(stdout); return 0;
        default: return ktcli_getopt_error("report", c, argc, argv);
        }
    }
    if (optind != argc - 1)
        return ktcli_usage_error("report", "%s", optind >= argc ? "no snapshot file given" : "more than one file given");
    const char *in_path = argv[optind];

    kt_snapshot_t *snap = NULL;
    char err[512];
    int rc, saved;
    /* tables filter their rows (and say how many they show); the other formats get a filtered snapshot */
    int table = format == KT_FORMAT_TEXT || format == KT_FORMAT_MARKDOWN || format == KT_FORMAT_CSV ||
                format == KT_FORMAT_LINES;
    if (table && !by_rank) { /* a narrow record per kernel instead of the snapshot (report_file.h) */
        kt__report_file_t *rf = NULL;
        if ((rc = kt__report_file_load(in_path, max_input, &rf, err, sizeof err)) != 0) {
            fprintf(stderr, "ktiming report: %s\n", err);
            return 1;
        }
        kt__entry_view_t view;
        kt__report_file_view(rf, &view);
        const kt_snapshot_t *meta = kt__report_file_meta(rf);
        if (out_path && strcmp(out_path, "-"))
            rc = kt__report_write_view(out_path, meta, &view, format, &ropts);
        else
            rc = kt__report_print_view(stdout, meta, &view, format, &ropts);
        saved = errno;
        kt__report_file_free(rf);
        return report_failed(rc, saved, out_path, format_name);
    }
    if ((rc = kt_snapshot_load(in_path, &(kt_load_opts_t){.max_bytes = max_input}, &snap, err, sizeof err)) != 0) {
        fprintf(stderr, "ktiming report: %s\n", err);
        return 1;
    }
    ktcli_snapshot_filter(snap, ropts.filter);
    if (by_rank) {
        kt_output_t *o = NULL; /* the one output writer: atomic replace, FIFOs and devices written through */
        if (out_path && strcmp(out_path, "-")) {
            rc = kt_output_open(out_path, 0, &o);
            if (rc == 0 && (rc = kt_report_by_rank(kt_output_file(o), snap)) != 0)
                kt_output_abort(o);
            else if (rc == 0)
                rc = kt_output_commit(o);
        } else {
            rc = kt_report_by_rank(stdout, snap);
        }
        if (rc == KT_EINVAL) {
            fprintf(stderr, "ktiming report: --by-rank needs a merged snapshot (ktiming merge)\n");
            kt_snapshot_free(snap);
            return 1;
        }
    } else if (out_path && strcmp(out_path, "-"))
        rc = kt_report_write(out_path, snap, format, &ropts);
    else
        rc = kt_report_print(stdout, snap, format, &ropts);
    saved = errno;
    kt_snapshot_free(snap);
    return report_failed(rc, saved, out_path, format_name);
}
