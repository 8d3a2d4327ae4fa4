/* cmd_report.c — `ktiming report FILE.json`: print or convert a saved snapshot (text, csv, json, chrome, html). */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <string.h>
#include <ktiming/analysis.h>

static void report_usage(FILE *out)
{
    fprintf(out,
            "usage: ktiming report FILE.json [--format text|csv|json|chrome|html] [--by-rank] [-o OUT]\n"
            "\n"
            "Prints or converts a snapshot saved by KTIMING_OUTPUT=..., `ktiming demo -o` or kt_report_write().\n"
            "FILE '-' reads standard input.\n"
            "\n"
            "  -f, --format FMT   text (default: the [timing] table), csv, json (schema ktiming.snapshot),\n"
            "                     chrome (Chrome trace / Perfetto), html (self-contained report)\n"
            "  -o, --output OUT   write to OUT (replaced atomically) instead of standard output\n"
            "  -r, --by-rank      a merged snapshot's per-rank load balance (ktiming merge) instead of the table\n"
            "  -h, --help         this help\n"
            "\n"
            "exit status: 0 done, 1 unreadable or invalid snapshot or failed write, 2 usage error\n");
}

/* Maps a --format word to a format; -1 when unknown. */
static int parse_format(const char *s)
{
    static const struct {
        const char *name;
        kt_format_t fmt;
    } kFormats[] = {{"text", KT_FORMAT_TEXT},     {"csv", KT_FORMAT_CSV},   {"json", KT_FORMAT_JSON},
                    {"chrome", KT_FORMAT_CHROME}, {"html", KT_FORMAT_HTML}};
    for (size_t i = 0; i < sizeof kFormats / sizeof kFormats[0]; i++)
        if (!strcmp(s, kFormats[i].name))
            return (int)kFormats[i].fmt;
    return -1;
}

int ktcli_cmd_report(int argc, char **argv)
{
    static const struct option kLong[] = {{"format", required_argument, NULL, 'f'},
                                          {"output", required_argument, NULL, 'o'},
                                          {"by-rank", no_argument, NULL, 'r'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
    int format = KT_FORMAT_TEXT;
    const char *format_name = "text";
    const char *out_path = NULL;
    int c, by_rank = 0;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":f:o:rh", kLong, NULL)) != -1) {
        switch (c) {
        case 'f':
            format = parse_format(optarg);
            if (format < 0) {
                fprintf(stderr, "ktiming report: unknown format '%s' (text, csv, json, chrome, html)\n", optarg);
                return 2;
            }
            format_name = optarg;
            break;
        case 'o': out_path = optarg; break;
        case 'r': by_rank = 1; break;
        case 'h': report_usage(stdout); return 0;
        case ':':
            fprintf(stderr, "ktiming report: %s needs a value\n", argv[optind - 1]);
            report_usage(stderr);
            return 2;
        default:
            fprintf(stderr, "ktiming report: unknown option '%s'\n", argv[optind - 1]);
            report_usage(stderr);
            return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "ktiming report: %s\n", optind >= argc ? "no snapshot file given" : "more than one file given");
        report_usage(stderr);
        return 2;
    }
    const char *in_path = argv[optind];

    kt_snapshot_t *snap = NULL;
    char err[512];
    int rc = kt_snapshot_load(in_path, &snap, err, sizeof err);
    if (rc) {
        fprintf(stderr, "ktiming report: %s\n", err);
        return 1;
    }
    if (by_rank) {
        FILE *f = out_path && strcmp(out_path, "-") ? fopen(out_path, "w") : stdout;
        rc = f ? kt_report_by_rank(f, snap) : KT_EIO;
        if (f && f != stdout && fclose(f) && !rc)
            rc = KT_EIO;
        if (rc == KT_EINVAL) {
            fprintf(stderr, "ktiming report: --by-rank needs a merged snapshot (ktiming merge)\n");
            kt_snapshot_free(snap);
            return 1;
        }
    } else if (out_path && strcmp(out_path, "-"))
        rc = kt_report_write(out_path, snap, (kt_format_t)format);
    else
        rc = kt_report_print(stdout, snap, (kt_format_t)format);
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
