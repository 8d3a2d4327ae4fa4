/* csv.c — one CSV row per kernel entry, header first, RFC 4180 (CRLF line ends, quoted fields when needed);
 * a text cell a spreadsheet would run as a formula is neutralised with a leading single quote. */
#include "export/escape.h"
#include "export/export.h"

#include <stdlib.h>

#include <inttypes.h>
#include <stdint.h>
#include <string.h>

/* Writes one text field: escaped as every text output's names are (kt__escape: a CSV printed to a terminal must
 * not reach it with controls), prefixed with ' when it starts like a formula (= + - @ tab CR), quoted (with
 * inner quotes doubled) when it holds a comma or quote. */
static void csv_field(FILE *out, const char *raw)
{
    char *esc = kt__escape(raw, SIZE_MAX, KT_ESC_TEXT, NULL);
    const char *s = esc ? esc : "?";
    const char *prefix = kt__csv_is_formula(raw ? raw : "") ? "'" : "";
    if (!strpbrk(s, ",\"")) {
        fputs(prefix, out);
        fputs(s, out);
    } else {
        fputc('"', out);
        fputs(prefix, out);
        for (; *s; s++) {
            if (*s == '"')
                fputc('"', out);
            fputc(*s, out);
        }
        fputc('"', out);
    }
    free(esc);
}

static void csv_u64(FILE *out, uint64_t v) { fprintf(out, ",%" PRIu64, v); }

static void csv_double(FILE *out, double v)
{
    char buf[40];
    kt__format_double(buf, sizeof buf, v);
    fprintf(out, ",%s", strcmp(buf, "null") ? buf : "");
}

int kt__export_csv(FILE *out, const kt_snapshot_t *snap, const kt_report_opts_t *opts)
{
    size_t *rows = NULL, count = 0;
    int rc = kt__report_rows(snap, opts, &rows, &count);
    if (rc)
        return rc;
    fputs("name,backend,device,dispatch_count,total_ns,min_ns,max_ns,last_ns,mean_ns,stddev_ns,p50_ns,p90_ns,"
          "p99_ns,errors,dropped,spans_dropped,sample_count,bytes,last_error\r\n",
          out);
    for (size_t r = 0; r < count; r++) {
        const kt_kernel_timing_t *e = &snap->entries[rows[r]];
        csv_field(out, e->name);
        fputc(',', out);
        csv_field(out, kt_backend_name(e->backend));
        fputc(',', out);
        csv_field(out, e->device);
        csv_u64(out, e->dispatch_count);
        csv_u64(out, e->total_ns);
        csv_u64(out, e->min_ns);
        csv_u64(out, e->max_ns);
        csv_u64(out, e->last_ns);
        csv_double(out, e->mean_ns);
        csv_double(out, e->stddev_ns);
        csv_u64(out, e->p50_ns);
        csv_u64(out, e->p90_ns);
        csv_u64(out, e->p99_ns);
        csv_u64(out, e->errors);
        csv_u64(out, e->dropped);
        csv_u64(out, e->spans_dropped);
        csv_u64(out, e->samples ? e->sample_count : 0);
        csv_u64(out, e->bytes);
        fputc(',', out);
        csv_field(out, e->last_error);
        fputs("\r\n", out);
    }
    free(rows);
    return ferror(out) ? KT_EIO : 0;
}
