/* cmd_report.c — `ktiming report FILE.json`: print or convert a saved snapshot (text, markdown, csv, json, chrome,
 * html), its rows sorted and filtered by name. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <string.h>
#include <ktiming/analysis.h>

static void report_usage(FILE *out)
{
    fprintf(out,
            "usage: ktiming report FILE.json [-f FORMAT] [--sort KEY] [--filter GLOB] [-o OUT]\n"
            "\n"
            "Prints or converts a snapshot saved by KTIMING_OUTPUT=..., `ktiming demo -o`, `ktiming run -o` or\n"
            "kt_report_write(). FILE '-' reads standard input.\n"
            "\n"
            "  -f, --format FMT   text (default: the [timing] table), markdown (the same as a table for pull\n"
            "                     requests), csv, json (schema ktiming.snapshot), chrome (Chrome trace /\n"
            "                     Perfetto), html (self-contained report)\n"
            "  -s, --sort KEY     row order of text, markdown and csv: total (default, largest first), name,\n"
            "                     mean, count\n"
            "  -k, --filter GLOB  only kernels whose name matches the shell pattern GLOB (fnmatch), e.g. 'blur*'\n"
            "  -o, --output OUT   write to OUT (replaced atomically) instead of standard output\n"
            "  -h, --help         this help\n"
            "\n"
            "exit status: 0 done, 1 unreadable or invalid snapshot or failed write, 2 usage error\n");
}

int ktcli_cmd_report(int argc, char **argv)
{
    static const struct option kLong[] = {{"format", required_argument, NULL, 'f'},
                                          {"output", required_argument, NULL, 'o'},
                                          {"sort", required_argument, NULL, 's'},
                                          {"filter", required_argument, NULL, 'k'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
    kt_format_t format = KT_FORMAT_TEXT;
    kt_report_opts_t ropts = {.sort = KT_SORT_TOTAL, .filter = NULL};
    const char *format_name = "text";
    const char *out_path = NULL;
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":f:o:s:k:h", kLong, NULL)) != -1) {
        switch (c) {
        case 'f':
            if (ktcli_parse_format(optarg, &format) != 0)
                return ktcli_usage_error("report", "unknown format '%s' (text, markdown, csv, json, chrome, html)",
                                         optarg);
            format_name = optarg;
            break;
        case 's':
            if (ktcli_parse_sort(optarg, &ropts.sort) != 0)
                return ktcli_usage_error("report", "unknown sort key '%s' (total, name, mean, count)", optarg);
            break;
        case 'k': ropts.filter = optarg; break;
        case 'o': out_path = optarg; break;
        case 'h': report_usage(stdout); return 0;
        default: return ktcli_getopt_error("report", c, argc, argv);
        }
    }
    if (optind != argc - 1)
        return ktcli_usage_error("report", "%s", optind >= argc ? "no snapshot file given" : "more than one file given");
    const char *in_path = argv[optind];

    kt_snapshot_t *snap = NULL;
    char err[512];
    int rc = kt_snapshot_load(in_path, &snap, err, sizeof err);
    if (rc) {
        fprintf(stderr, "ktiming report: %s\n", err);
        return 1;
    }
    /* tables filter their rows (and say how many they show); the other formats get a filtered snapshot */
    int table = format == KT_FORMAT_TEXT || format == KT_FORMAT_MARKDOWN || format == KT_FORMAT_CSV;
    if (!table)
        ktcli_snapshot_filter(snap, ropts.filter);
    if (out_path && strcmp(out_path, "-"))
        rc = kt_report_write_opts(out_path, snap, format, &ropts);
    else
        rc = kt_report_print_opts(stdout, snap, format, &ropts);
    int saved = errno;
    kt_snapshot_free(snap);
    if (rc) {
        const char *target = out_path && strcmp(out_path, "-") ? out_path : "standard output";
        if (rc == KT_ENOTSUP)
            fprintf(stderr, "ktiming report: format '%s' is not available in this build\n", format_name);
        else if (rc == KT_EIO)
            fprintf(stderr, "ktiming report: cannot write %s: %s\n", target, strerror(saved));
        else
            fprintf(stderr, "ktiming report: cannot write %s: %s\n", target, kt_strerror(rc));
        return 1;
    }
    return 0;
}
