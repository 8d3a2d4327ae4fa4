/* compare_print.c — the comparison as an aligned text table, a markdown table, or JSON. */
#include <ktiming/compare.h>

#include "export/escape.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------
 * Cell formatting
 * ------------------------------------------------------------------------------------------------- */

/* The formatted cells of one matched row. */
typedef struct cells_t {
    char before[24];  /* median before */
    char after[24];   /* median after */
    char speedup[24]; /* of medians */
    char ci[40];      /* interval */
    char mean[24];    /* speedup of means */
    char p[24];       /* p-value */
    char n[32];       /* samples before/after */
} cells_t;

static void fmt_time(char *buf, size_t cap, double ns)
{
    if (!(ns > 0.0) || !isfinite(ns)) snprintf(buf, cap, "-");
    else if (ns < 1e3) snprintf(buf, cap, "%.0f ns", ns);
    else if (ns < 1e6) snprintf(buf, cap, "%.2f %s", ns / 1e3, kt__unit_us());
    else if (ns < 1e9) snprintf(buf, cap, "%.2f ms", ns / 1e6);
    else snprintf(buf, cap, "%.3f s", ns / 1e9);
}

static void fmt_x(char *buf, size_t cap, double x)
{
    if (!isfinite(x)) snprintf(buf, cap, "-");
    else snprintf(buf, cap, "%.3fx", x);
}

static void fmt_ci(char *buf, size_t cap, double lo, double hi)
{
    if (!isfinite(lo) || !isfinite(hi)) snprintf(buf, cap, "-");
    else snprintf(buf, cap, "[%.3fx, %.3fx]", lo, hi);
}

static void fmt_p(char *buf, size_t cap, double p)
{
    if (!isfinite(p)) snprintf(buf, cap, "-");
    else if (p < 0.001) snprintf(buf, cap, "<0.001");
    else snprintf(buf, cap, "%.3f", p);
}

static void make_cells(const kt_compare_row_t *r, cells_t *c)
{
    fmt_time(c->before, sizeof c->before, r->before.median_ns);
    fmt_time(c->after, sizeof c->after, r->after.median_ns);
    fmt_x(c->speedup, sizeof c->speedup, r->speedup_median);
    fmt_ci(c->ci, sizeof c->ci, r->ci_lo, r->ci_hi);
    fmt_x(c->mean, sizeof c->mean, r->speedup_mean);
    fmt_p(c->p, sizeof c->p, r->p_value);
    snprintf(c->n, sizeof c->n, "%u/%u", r->before.samples, r->after.samples);
}

static const char *backend_label(kt_backend_t b) { return kt_backend_name(b); }

static int width_of(const char *s, int w)
{
    int n = (int)strlen(s);
    return n > w ? n : w;
}

/* Display width of s once escaped for a terminal, or w when that is larger. */
static int esc_width_of(const char *s, int w)
{
    size_t cols = 0;
    char *e = kt__escape(s, SIZE_MAX, KT_ESC_TEXT, &cols);
    free(e);
    return (int)cols > w ? (int)cols : w;
}

/* ---------------------------------------------------------------------------------------------------
 * Text
 * ------------------------------------------------------------------------------------------------- */

static void print_header_line(FILE *out, const kt_compare_result_t *r)
{
    /* before/after are sample medians; `report`'s p50 comes from the histogram of every dispatch and may differ */
    fprintf(out, "%zu kernel%s matched, %zu only in BEFORE, %zu only in AFTER (threshold %.3g %%, alpha %.3g, "
                 "%.0f %% intervals; before/after: medians of the kept samples)\n",
            r->matched, r->matched == 1 ? "" : "s", r->before_only, r->after_only, r->opts.threshold_pct,
            r->opts.alpha, 100.0 * r->opts.confidence);
}

/* How the matched rows' devices were matched, when any was matched by identity rather than by an equal label:
 * "devices matched by uuid 2, model+ordinal 1, name 3", then each device found under another label. */
static void print_matching(FILE *out, const kt_compare_result_t *r, unsigned esc)
{
    static const char *const kinds[] = {"uuid", "pci", "model+ordinal", "name"};
    size_t n[4] = {0}, by_id = 0;
    for (size_t i = 0; i < r->count; i++)
        for (int k = 0; k < 4; k++)
            if (r->rows[i].match && !strcmp(r->rows[i].match, kinds[k])) {
                n[k]++;
                by_id += k < 3;
            }
    if (!by_id)
        return;
    fputs("\ndevices matched by", out);
    for (int k = 0, first = 1; k < 4; k++)
        if (n[k]) {
            fprintf(out, "%s %s %zu", first ? "" : ",", kinds[k], n[k]);
            first = 0;
        }
    fputs(" (docs/devices.md)\n", out);
    for (size_t i = 0; i < r->count; i++) {
        const kt_compare_row_t *row = &r->rows[i];
        if (!row->device_after)
            continue;
        fputs("  ", out);
        kt__escape_write(out, row->name, esc);
        fputs(": BEFORE's ", out);
        kt__escape_write(out, row->device, esc);
        fputs(" is AFTER's ", out);
        kt__escape_write(out, row->device_after, esc);
        fprintf(out, " (same %s)\n", row->match ? row->match : "device");
    }
}

static void print_text(FILE *out, const kt_compare_result_t *r)
{
    print_header_line(out, r);
    int wk = 6, wb = 7, wd = 6, wci = 15;
    for (size_t i = 0; i < r->count; i++) {
        const kt_compare_row_t *row = &r->rows[i];
        if (row->presence != KT_PRESENT_BOTH) continue;
        cells_t c;
        make_cells(row, &c);
        wk = esc_width_of(row->name, wk);
        wb = width_of(backend_label(row->backend), wb);
        wd = esc_width_of(row->device, wd);
        wci = width_of(c.ci, wci);
    }
    char gm[32];
    snprintf(gm, sizeof gm, "geomean (%zu)", r->geomean_kernels);
    wk = width_of(gm, wk);
    if (r->matched) {
        fprintf(out, "\n%-*s  %-*s  %-*s  %12s  %12s  %8s  %-*s  %8s  %7s  %11s  %s\n", wk, "kernel", wb, "backend",
                wd, "device", "before", "after", "speedup", wci, "CI", "mean x", "p", "n b/a", "verdict");
        for (size_t i = 0; i < r->count; i++) {
            const kt_compare_row_t *row = &r->rows[i];
            if (row->presence != KT_PRESENT_BOTH) continue;
            cells_t c;
            make_cells(row, &c);
            kt__escape_write_padded(out, row->name, KT_ESC_TEXT, (size_t)wk);
            fprintf(out, "  %-*s  ", wb, backend_label(row->backend));
            kt__escape_write_padded(out, row->device, KT_ESC_TEXT, (size_t)wd);
            fprintf(out, "  %12s  %12s  %8s  %-*s  %8s  %7s  %11s  %s\n", c.before, c.after, c.speedup, wci, c.ci,
                    c.mean, c.p, c.n, kt_verdict_name(row->verdict));
        }
        char gx[24], gci[40];
        fmt_x(gx, sizeof gx, r->geomean_speedup);
        fmt_ci(gci, sizeof gci, r->geomean_ci_lo, r->geomean_ci_hi);
        fprintf(out, "%-*s  %-*s  %-*s  %12s  %12s  %8s  %-*s  %8s  %7s  %11s  %s\n", wk, gm, wb, "", wd, "", "", "",
                gx, wci, gci, "", "", "", r->geomean_kernels ? kt_verdict_name(r->geomean_verdict) : "-");
    }
    int notes = 0;
    for (size_t i = 0; i < r->count; i++) {
        const kt_compare_row_t *row = &r->rows[i];
        if (row->presence != KT_PRESENT_BOTH || row->verdict != KT_VERDICT_UNSURE) continue;
        if (!notes++) fputs("\n", out);
        fputs("UNSURE ", out);
        kt__escape_write(out, row->name, KT_ESC_TEXT);
        fprintf(out, " (%s, ", backend_label(row->backend));
        kt__escape_write(out, row->device, KT_ESC_TEXT);
        fputs("): ", out);
        kt__escape_write(out, row->reason, KT_ESC_TEXT);
        fputc('\n', out);
    }
    for (int side = 1; side <= 2; side++) {
        int first = 1;
        for (size_t i = 0; i < r->count; i++) {
            const kt_compare_row_t *row = &r->rows[i];
            if ((int)row->presence != side) continue;
            if (first) fprintf(out, "\nonly in %s:", side == 1 ? "BEFORE" : "AFTER");
            fprintf(out, "%s ", first ? "" : ",");
            kt__escape_write(out, row->name, KT_ESC_TEXT);
            fprintf(out, " (%s, ", backend_label(row->backend));
            kt__escape_write(out, row->device, KT_ESC_TEXT);
            fputc(')', out);
            first = 0;
        }
        if (!first) fputs("\n", out);
    }
    print_matching(out, r, KT_ESC_TEXT);
    fprintf(out, "\nfaster %zu, slower %zu, same %zu, unsure %zu\n", r->faster, r->slower, r->same, r->unsure);
}

/* ---------------------------------------------------------------------------------------------------
 * Markdown
 * ------------------------------------------------------------------------------------------------- */

static void md_text(FILE *out, const char *s) { kt__escape_write(out, s, KT_ESC_MARKDOWN); }

static void print_markdown(FILE *out, const kt_compare_result_t *r)
{
    print_header_line(out, r);
    fputs("\n| kernel | backend | device | before | after | speedup | CI | mean x | p | n b/a | verdict | note |\n"
          "|---|---|---|---:|---:|---:|---|---:|---:|---:|---|---|\n",
          out);
    for (size_t i = 0; i < r->count; i++) {
        const kt_compare_row_t *row = &r->rows[i];
        cells_t c;
        make_cells(row, &c);
        fputs("| ", out);
        md_text(out, row->name);
        fprintf(out, " | %s | ", backend_label(row->backend));
        md_text(out, row->device);
        if (row->presence == KT_PRESENT_BOTH)
            fprintf(out, " | %s | %s | %s | %s | %s | %s | %s | **%s** | ", c.before, c.after, c.speedup, c.ci,
                    c.mean, c.p, c.n, kt_verdict_name(row->verdict));
        else
            fprintf(out, " | %s | %s | - | - | - | - | %s | - | ", c.before, c.after, c.n);
        md_text(out, row->reason);
        fputs(" |\n", out);
    }
    char gx[24], gci[40];
    fmt_x(gx, sizeof gx, r->geomean_speedup);
    fmt_ci(gci, sizeof gci, r->geomean_ci_lo, r->geomean_ci_hi);
    fprintf(out, "| **geomean** (%zu) | | | | | %s | %s | | | | **%s** | |\n", r->geomean_kernels, gx, gci,
            r->geomean_kernels ? kt_verdict_name(r->geomean_verdict) : "-");
    print_matching(out, r, KT_ESC_MARKDOWN);
    fprintf(out, "\nfaster %zu, slower %zu, same %zu, unsure %zu\n", r->faster, r->slower, r->same, r->unsure);
}

/* ---------------------------------------------------------------------------------------------------
 * JSON
 * ------------------------------------------------------------------------------------------------- */

static int add_num(cJSON *obj, const char *key, double v)
{
    cJSON *item = isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull();
    return item && cJSON_AddItemToObject(obj, key, item) ? 0 : -1;
}

/* o when it was built whole, else NULL (o freed). */
static cJSON *built(cJSON *o, int bad)
{
    if (!bad) return o;
    cJSON_Delete(o);
    return NULL;
}

static cJSON *side_json(const kt_compare_side_t *s)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    int bad = add_num(o, "dispatches", (double)s->dispatches) | add_num(o, "samples", (double)s->samples) |
              add_num(o, "median_ns", s->median_ns) | add_num(o, "mean_ns", s->mean_ns) |
              add_num(o, "noise", s->noise) | add_num(o, "stdrel", s->stdrel);
    return built(o, bad);
}

static const char *presence_name(kt_presence_t p)
{
    return p == KT_PRESENT_BOTH ? "both" : p == KT_PRESENT_BEFORE ? "before_only" : "after_only";
}

static cJSON *opts_json(const kt_compare_result_t *r)
{
    cJSON *o = cJSON_CreateObject();
    char seed[24];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)r->opts.seed);
    int bad = !o || (add_num(o, "threshold_pct", r->opts.threshold_pct) | add_num(o, "alpha", r->opts.alpha) |
                     add_num(o, "confidence", r->opts.confidence) | add_num(o, "min_samples", r->opts.min_samples) |
                     add_num(o, "bootstrap", r->opts.bootstrap)) ||
              !cJSON_AddStringToObject(o, "seed", seed);
    return built(o, bad);
}

static cJSON *row_json(const kt_compare_row_t *row)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    int bad = !cJSON_AddStringToObject(o, "name", row->name);
    bad |= !cJSON_AddStringToObject(o, "backend", backend_label(row->backend));
    bad |= !cJSON_AddStringToObject(o, "device", row->device);
    bad |= !cJSON_AddStringToObject(o, "presence", presence_name(row->presence));
    if (row->match)
        bad |= !cJSON_AddStringToObject(o, "match", row->match);
    if (row->device_after)
        bad |= !cJSON_AddStringToObject(o, "device_after", row->device_after);
    cJSON *b = side_json(&row->before), *a = side_json(&row->after);
    if (b) cJSON_AddItemToObject(o, "before", b);
    if (a) cJSON_AddItemToObject(o, "after", a);
    bad |= !a || !b;
    bad |= add_num(o, "speedup_median", row->speedup_median) | add_num(o, "speedup_mean", row->speedup_mean) |
           add_num(o, "ci_lo", row->ci_lo) | add_num(o, "ci_hi", row->ci_hi) | add_num(o, "p_value", row->p_value) |
           add_num(o, "u", row->u);
    bad |= !cJSON_AddStringToObject(o, "verdict", kt_verdict_name(row->verdict));
    bad |= !cJSON_AddStringToObject(o, "reason", row->reason ? row->reason : "");
    if (row->verdict == KT_VERDICT_UNSURE && row->presence == KT_PRESENT_BOTH)
        bad |= add_num(o, "decide_samples", (double)row->decide_samples);
    return built(o, bad);
}

static cJSON *geomean_json(const kt_compare_result_t *r)
{
    cJSON *o = cJSON_CreateObject();
    int bad = !o || (add_num(o, "kernels", (double)r->geomean_kernels) | add_num(o, "speedup", r->geomean_speedup) |
                     add_num(o, "ci_lo", r->geomean_ci_lo) | add_num(o, "ci_hi", r->geomean_ci_hi)) ||
              !cJSON_AddStringToObject(o, "verdict",
                                       r->geomean_kernels ? kt_verdict_name(r->geomean_verdict) : "UNSURE");
    return built(o, bad);
}

static cJSON *summary_json(const kt_compare_result_t *r)
{
    cJSON *o = cJSON_CreateObject();
    int bad = !o || (add_num(o, "matched", (double)r->matched) | add_num(o, "faster", (double)r->faster) |
                     add_num(o, "slower", (double)r->slower) | add_num(o, "same", (double)r->same) |
                     add_num(o, "unsure", (double)r->unsure) | add_num(o, "before_only", (double)r->before_only) |
                     add_num(o, "after_only", (double)r->after_only)) ||
              !cJSON_AddBoolToObject(o, "regression", r->slower > 0);
    return built(o, bad);
}

/* Writes v (consumed) unformatted after prefix; 0 or KT_ENOMEM. */
static int put_json(FILE *out, const char *prefix, cJSON *v)
{
    char *s = v ? cJSON_PrintUnformatted(v) : NULL;
    cJSON_Delete(v);
    if (!s) return KT_ENOMEM;
    fputs(prefix, out);
    /* cJSON writes UTF-8 as it is: what kt__escape hides (C1, bidi, line controls; only ever inside strings)
     * goes out as \uXXXX, the same value and inert on a terminal */
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        size_t n = *p == 0xC2 || *p == 0xD8 ? 2 : *p == 0xE2 ? 3 : 0;
        unsigned cp = n && strnlen((const char *)p, n) == n ? kt__hidden_control(p, n) : 0;
        if (cp) {
            fprintf(out, "\\u%04x", cp);
            p += n;
        } else {
            const unsigned char *q = p + 1;
            while (*q && *q != 0xC2 && *q != 0xD8 && *q != 0xE2)
                q++;
            fwrite(p, 1, (size_t)(q - p), out);
            p = q;
        }
    }
    cJSON_free(s);
    return 0;
}

/* The comparison as one JSON object, written as it is built: one kernel per line, so the memory is one row's
 * tree whatever the number of kernels. */
static int print_json(FILE *out, const kt_compare_result_t *r)
{
    int rc;
    fputs("{\n  \"ktiming_compare\": 1,\n", out);
    if ((rc = put_json(out, "  \"opts\": ", opts_json(r)))) return rc;
    fputs(",\n  \"kernels\": [", out);
    for (size_t i = 0; i < r->count; i++)
        if ((rc = put_json(out, i ? ",\n    " : "\n    ", row_json(&r->rows[i])))) return rc;
    fputs(r->count ? "\n  ],\n" : "],\n", out);
    if ((rc = put_json(out, "  \"geomean\": ", geomean_json(r))) ||
        (rc = put_json(out, ",\n  \"summary\": ", summary_json(r))))
        return rc;
    fputs("\n}\n", out);
    return 0;
}

/* ---------------------------------------------------------------------------------------------------
 * Entry point
 * ------------------------------------------------------------------------------------------------- */

int kt_compare_print(FILE *out, const kt_compare_result_t *result, kt_compare_format_t format)
{
    if (!out || !result || (result->count && !result->rows)) return KT_EINVAL;
    switch (format) {
    case KT_COMPARE_TEXT: print_text(out, result); break;
    case KT_COMPARE_MARKDOWN: print_markdown(out, result); break;
    case KT_COMPARE_JSON: {
        int rc = print_json(out, result);
        if (rc) return rc;
        break;
    }
    default: return KT_EINVAL;
    }
    return ferror(out) ? KT_EIO : 0;
}
