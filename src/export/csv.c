/* csv.c — one CSV row per kernel entry, header first, RFC 4180 (CRLF line ends, quoted fields when needed);
 * a text cell a spreadsheet would run as a formula is neutralised with a leading single quote. */
#include "export/escape.h"
#include "export/export.h"
#include "export/fixed.h"

#include <stdlib.h>

#include <stdint.h>
#include <string.h>

/* Writes one text field: escaped as every text output's names are (kt__escape: a CSV printed to a terminal must
 * not reach it with controls), prefixed with ' when it starts like a formula (= + - @ tab CR), quoted (with
 * inner quotes doubled) when it holds a comma or quote. */
static void csv_field(FILE *out, const char *raw)
{
    /* printable ASCII without a backslash, comma or quote is its own escape and needs no quotes: written as it
     * is, not through kt__escape's copy (a malloc and free per field, three fields a row) */
    size_t n = raw ? strlen(raw) : 0;
    if (raw && kt__text_plain_len(raw, n) == n && !strpbrk(raw, ",\"")) {
        if (kt__csv_is_formula(raw))
            fputc('\'', out);
        fwrite(raw, 1, n, out);
        return;
    }
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

static void csv_u64(FILE *out, uint64_t v)
{
    char buf[24] = ",";
    kt__fmt_u64(buf + 1, sizeof buf - 1, v); /* fixed.h: what "%" PRIu64 writes, without printf */
    fputs(buf, out);
}

static void csv_double(FILE *out, double v)
{
    char buf[40];
    kt__format_double(buf, sizeof buf, v);
    fputc(',', out);
    if (strcmp(buf, "null"))
        fputs(buf, out);
}

/* One row's statistics (an entry's, or a configuration's: a value not known is left empty). */
static void csv_stats(FILE *out, const kt_kernel_timing_t *e)
{
    int no_range = kt__no_range(e), no_pct = kt__no_pct(e);
    csv_u64(out, e->dispatch_count);
    csv_u64(out, e->total_ns);
    if (no_range)
        fputs(",,", out);
    else {
        csv_u64(out, e->min_ns);
        csv_u64(out, e->max_ns);
    }
    csv_u64(out, e->last_ns);
    csv_double(out, e->mean_ns);
    csv_double(out, e->stddev_ns);
    if (no_pct)
        fputs(",,,", out);
    else {
        csv_u64(out, e->p50_ns);
        csv_u64(out, e->p90_ns);
        csv_u64(out, e->p99_ns);
    }
}

/* --by-config: after an entry's row, one per launch configuration (and "none" for dispatches without one), with
 * the entry's name, backend and device, count, total, min, max and mean (kt__config_parts); the rest empty. */
static void csv_config_rows(FILE *out, const kt_kernel_timing_t *e)
{
    kt_kernel_timing_t parts[KT_LAUNCH_CONFIGS_MAX + 2];
    char labels[KT_LAUNCH_CONFIGS_MAX + 2][KT__LAUNCH_LABEL];
    uint32_t np = kt__config_parts(e, parts, labels);
    for (uint32_t j = 0; j < np; j++) {
        csv_field(out, e->name);
        fputc(',', out);
        csv_field(out, kt_backend_name(e->backend));
        fputc(',', out);
        csv_field(out, e->device);
        parts[j].last_ns = 0;
        csv_stats(out, &parts[j]);
        fputs(",,,,,,,", out); /* errors .. last_error: the entry's row has them */
        csv_field(out, labels[j]);
        fputs("\r\n", out);
    }
}

int kt__export_csv(FILE *out, const kt__entry_view_t *v, const kt_report_opts_t *opts)
{
    size_t *rows = NULL, count = 0;
    int rc = kt__report_rows(v, opts, &rows, &count);
    if (rc)
        return rc;
    int by_config = opts && opts->by_config;
    fputs("name,backend,device,dispatch_count,total_ns,min_ns,max_ns,last_ns,mean_ns,stddev_ns,p50_ns,p90_ns,"
          "p99_ns,errors,dropped,spans_dropped,sample_count,bytes,last_error",
          out);
    fputs(by_config ? ",config\r\n" : "\r\n", out); /* config: empty on a kernel's row */
    kt_kernel_timing_t scratch;
    for (size_t r = 0; r < count; r++) {
        if (r + KT__VIEW_AHEAD < count)
            kt__view_prefetch(v, rows[r + KT__VIEW_AHEAD]);
        const kt_kernel_timing_t *e = kt__view_entry(v, rows[r], &scratch);
        csv_field(out, e->name);
        fputc(',', out);
        csv_field(out, kt_backend_name(e->backend));
        fputc(',', out);
        csv_field(out, e->device);
        csv_stats(out, e);
        csv_u64(out, e->errors);
        csv_u64(out, e->dropped);
        csv_u64(out, e->spans_dropped);
        csv_u64(out, e->samples ? e->sample_count : 0);
        csv_u64(out, e->bytes);
        fputc(',', out);
        csv_field(out, e->last_error);
        fputs(by_config ? ",\r\n" : "\r\n", out);
        if (by_config && e->configs && e->config_count)
            csv_config_rows(out, e);
    }
    free(rows);
    return ferror(out) ? KT_EIO : 0;
}
