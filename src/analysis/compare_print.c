/* compare_print.c — the comparison as an aligned text table, a markdown table, or JSON. */
#include <ktiming/compare.h>

#include "export/escape.h"
#include "export/fixed.h"

#include <cJSON.h>
#include <fenv.h>
#include <float.h>
#include <locale.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
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

/* Whether fixed.h may write this print's numbers: it writes what printf writes under the default rounding mode
 * with '.' as the decimal point (asked once per print, not per number). */
static int numbers_fast(void)
{
    return fegetround() == FE_TONEAREST && !strcmp(localeconv()->decimal_point, ".");
}

/* snprintf(buf, cap, "%.*f%s", dec, v, suffix), without printf when fast and fixed.h handles v. */
static void fmt_fixed(char *buf, size_t cap, double v, int dec, const char *suffix, int fast)
{
    if (!fast || !kt__fmt_append(buf, cap, kt__fmt_fixed(buf, cap, v, dec), suffix))
        snprintf(buf, cap, "%.*f%s", dec, v, suffix);
}

static void fmt_time(char *buf, size_t cap, double ns, int fast)
{
    if (!(ns > 0.0) || !isfinite(ns)) {
        snprintf(buf, cap, "-");
    } else if (ns < 1e3) {
        fmt_fixed(buf, cap, ns, 0, " ns", fast);
    } else if (ns < 1e6) {
        char unit[16] = " ";
        strncat(unit, kt__unit_us(), sizeof unit - 2);
        fmt_fixed(buf, cap, ns / 1e3, 2, unit, fast);
    } else if (ns < 1e9) {
        fmt_fixed(buf, cap, ns / 1e6, 2, " ms", fast);
    } else {
        fmt_fixed(buf, cap, ns / 1e9, 3, " s", fast);
    }
}

static void fmt_x(char *buf, size_t cap, double x, int fast)
{
    if (!isfinite(x)) snprintf(buf, cap, "-");
    else if (x > 0.0 && x < 0.0005) snprintf(buf, cap, "%.2gx", x); /* a 0 ns side: 5e-07x, not 0.000x */
    else fmt_fixed(buf, cap, x, 3, "x", fast);
}

static void fmt_ci(char *buf, size_t cap, double lo, double hi, int fast)
{
    char l[24], h[24];
    size_t nl = fast ? kt__fmt_fixed(l, sizeof l, lo, 3) : 0, nh = fast ? kt__fmt_fixed(h, sizeof h, hi, 3) : 0;
    if (!isfinite(lo) || !isfinite(hi)) snprintf(buf, cap, "-");
    else if (lo < 0.0005) snprintf(buf, cap, "[%.2gx, %.2gx]", lo, hi);
    else if (!nl || !nh || nl + nh + 7 > cap) snprintf(buf, cap, "[%.3fx, %.3fx]", lo, hi);
    else {
        buf[0] = '[';
        memcpy(buf + 1, l, nl);
        memcpy(buf + 1 + nl, "x, ", 3);
        memcpy(buf + 4 + nl, h, nh);
        memcpy(buf + 4 + nl + nh, "x]", 3);
    }
}

static void fmt_p(char *buf, size_t cap, double p, int fast)
{
    if (!isfinite(p)) snprintf(buf, cap, "-");
    else if (p < 0.001) snprintf(buf, cap, "<0.001");
    else fmt_fixed(buf, cap, p, 3, "", fast);
}

static void make_cells(const kt_compare_row_t *r, cells_t *c, int fast)
{
    fmt_time(c->before, sizeof c->before, r->before.median_ns, fast);
    fmt_time(c->after, sizeof c->after, r->after.median_ns, fast);
    if (r->before.samples && !(r->before.median_ns > 0.0)) snprintf(c->before, sizeof c->before, "0 ns");
    if (r->after.samples && !(r->after.median_ns > 0.0)) snprintf(c->after, sizeof c->after, "0 ns");
    fmt_x(c->speedup, sizeof c->speedup, r->speedup_median, fast);
    fmt_ci(c->ci, sizeof c->ci, r->ci_lo, r->ci_hi, fast);
    fmt_x(c->mean, sizeof c->mean, r->speedup_mean, fast);
    fmt_p(c->p, sizeof c->p, r->p_value, fast);
    size_t n = kt__fmt_u64(c->n, sizeof c->n, r->before.samples); /* "%u/%u": two of 10 digits at most */
    c->n[n++] = '/';
    kt__fmt_u64(c->n + n, sizeof c->n - n, r->after.samples);
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
    int fast = numbers_fast();
    print_header_line(out, r);
    int wk = 6, wb = 7, wd = 6, wci = 15;
    for (size_t i = 0; i < r->count; i++) {
        const kt_compare_row_t *row = &r->rows[i];
        if (row->presence != KT_PRESENT_BOTH) continue;
        cells_t c;
        make_cells(row, &c, fast);
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
            make_cells(row, &c, fast);
            kt__escape_write_padded(out, row->name, KT_ESC_TEXT, (size_t)wk);
            fprintf(out, "  %-*s  ", wb, backend_label(row->backend));
            kt__escape_write_padded(out, row->device, KT_ESC_TEXT, (size_t)wd);
            fprintf(out, "  %12s  %12s  %8s  %-*s  %8s  %7s  %11s  %s\n", c.before, c.after, c.speedup, wci, c.ci,
                    c.mean, c.p, c.n, kt_verdict_name(row->verdict));
        }
        char gx[24], gci[40];
        fmt_x(gx, sizeof gx, r->geomean_speedup, fast);
        fmt_ci(gci, sizeof gci, r->geomean_ci_lo, r->geomean_ci_hi, fast);
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
    int fast = numbers_fast();
    print_header_line(out, r);
    fputs("\n| kernel | backend | device | before | after | speedup | CI | mean x | p | n b/a | verdict | note |\n"
          "|---|---|---|---:|---:|---:|---|---:|---:|---:|---|---|\n",
          out);
    for (size_t i = 0; i < r->count; i++) {
        const kt_compare_row_t *row = &r->rows[i];
        cells_t c;
        make_cells(row, &c, fast);
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
    fmt_x(gx, sizeof gx, r->geomean_speedup, fast);
    fmt_ci(gci, sizeof gci, r->geomean_ci_lo, r->geomean_ci_hi, fast);
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

/* Writes s with what kt__escape hides (C1, bidi, line controls; only ever inside strings, which are written as
 * UTF-8 as they are) as \uXXXX: the same value, and inert on a terminal. */
static void put_filtered(FILE *out, const char *s)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + strlen(s);
    while (p < end) {
        size_t n = *p == 0xC2 || *p == 0xD8 ? 2 : *p == 0xE2 ? 3 : 0;
        unsigned cp = n && (size_t)(end - p) >= n ? kt__hidden_control(p, n) : 0;
        if (cp) {
            fprintf(out, "\\u%04x", cp);
            p += n;
        } else {
            const unsigned char *q = p + 1;
            for (;;) { /* ASCII (most of a row) eight bytes a step: the lead bytes looked for are all above 0x7F */
                for (uint64_t x; end - q >= 8; q += 8) {
                    memcpy(&x, q, 8);
                    if (x & 0x8080808080808080ull)
                        break;
                }
                if (q >= end || *q == 0xC2 || *q == 0xD8 || *q == 0xE2)
                    break;
                q++;
            }
            fwrite(p, 1, (size_t)(q - p), out);
            p = q;
        }
    }
}

/* Writes v (consumed) unformatted after prefix; 0 or KT_ENOMEM. */
static int put_json(FILE *out, const char *prefix, cJSON *v)
{
    char *s = v ? cJSON_PrintUnformatted(v) : NULL;
    cJSON_Delete(v);
    if (!s) return KT_ENOMEM;
    fputs(prefix, out);
    put_filtered(out, s);
    cJSON_free(s);
    return 0;
}

/* ---------------------------------------------------------------------------------------------------
 * One kernel's row, written directly (a million rows built as cJSON trees and printed cost seconds of
 * allocation and a sscanf per number): byte for byte what cJSON_PrintUnformatted writes for the same object.
 * ------------------------------------------------------------------------------------------------- */

/* A row's text as it is built. */
typedef struct jbuf_t {
    char *p;    /* the text, NUL-terminated (malloc'd, reused for every row) */
    size_t n;   /* its length */
    size_t cap; /* bytes allocated */
    int bad;    /* an allocation failed */
    int fast;   /* numbers through fixed.h (numbers_fast) */
} jbuf_t;

static void jb_put(jbuf_t *b, const char *s, size_t n)
{
    if (b->bad) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 512;
        while (cap < b->n + n + 1) cap *= 2;
        char *bigger = realloc(b->p, cap);
        if (!bigger) {
            b->bad = 1;
            return;
        }
        b->p = bigger;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

/* A string as cJSON prints one: '"' and '\\' escaped, \b \f \n \r \t, other bytes below 0x20 as \u00XX, the
 * rest (UTF-8 included) as it is. */
static void jb_str(jbuf_t *b, const char *s)
{
    jb_put(b, "\"", 1);
    const char *run = s;
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch >= 0x20 && ch != '"' && ch != '\\') continue;
        jb_put(b, run, (size_t)(s - run));
        run = s + 1;
        char esc[8];
        switch (ch) {
        case '"': jb_put(b, "\\\"", 2); break;
        case '\\': jb_put(b, "\\\\", 2); break;
        case '\b': jb_put(b, "\\b", 2); break;
        case '\f': jb_put(b, "\\f", 2); break;
        case '\n': jb_put(b, "\\n", 2); break;
        case '\r': jb_put(b, "\\r", 2); break;
        case '\t': jb_put(b, "\\t", 2); break;
        default: jb_put(b, esc, (size_t)snprintf(esc, sizeof esc, "\\u%04x", ch)); break;
        }
    }
    jb_put(b, run, (size_t)(s - run));
    jb_put(b, "\"", 1);
}

/* A number as cJSON (1.7.15) prints one: null when not finite, else 15 significant digits when they read back
 * within DBL_EPSILON, 17 when not; the locale's decimal point written as '.'. The digits through fixed.h where
 * it can (b->fast), else printf. */
static void jb_num(jbuf_t *b, double d)
{
    char buf[32];
    if (!isfinite(d)) {
        jb_put(b, "null", 4);
        return;
    }
    if (d == floor(d) && fabs(d) < 1e15) { /* what "%1.15g" writes for an integer below 10^15, without printf */
        uint64_t v = (uint64_t)fabs(d);
        char *p = buf + sizeof buf;
        do *--p = (char)('0' + v % 10);
        while (v /= 10);
        if (signbit(d)) *--p = '-';
        jb_put(b, p, (size_t)(buf + sizeof buf - p));
        return;
    }
    double test = NAN; /* what strtod reads back from the 15 digits; kt__fmt_g mostly works it out */
    int len = b->fast ? (int)kt__fmt_g(buf, sizeof buf, d, 15, &test) : 0;
    if (!len) len = snprintf(buf, sizeof buf, "%1.15g", d);
    if (isnan(test)) test = strtod(buf, NULL);
    double big = fabs(test) > fabs(d) ? fabs(test) : fabs(d);
    if (!(fabs(test - d) <= big * DBL_EPSILON)) {
        len = b->fast ? (int)kt__fmt_g(buf, sizeof buf, d, 17, NULL) : 0;
        if (!len) len = snprintf(buf, sizeof buf, "%1.17g", d);
    }
    if (len < 0 || (size_t)len >= sizeof buf) {
        b->bad = 1;
        return;
    }
    char point = b->fast ? '.' : *localeconv()->decimal_point; /* fast: the point is '.' */
    for (int i = 0; point != '.' && i < len; i++)
        if (buf[i] == point) buf[i] = '.';
    jb_put(b, buf, (size_t)len);
}

/* ,"key": (no comma before the first member). The keys are this file's literals, none with a byte jb_str
 * escapes: copied as they are. */
static void jb_key(jbuf_t *b, const char *key, int first)
{
    jb_put(b, first ? "\"" : ",\"", first ? 1 : 2);
    jb_put(b, key, strlen(key));
    jb_put(b, "\":", 2);
}

static void jb_side(jbuf_t *b, const char *key, const kt_compare_side_t *s)
{
    jb_key(b, key, 0);
    jb_put(b, "{", 1);
    jb_key(b, "dispatches", 1);
    jb_num(b, (double)s->dispatches);
    jb_key(b, "samples", 0);
    jb_num(b, (double)s->samples);
    jb_key(b, "median_ns", 0);
    jb_num(b, s->median_ns);
    jb_key(b, "mean_ns", 0);
    jb_num(b, s->mean_ns);
    jb_key(b, "noise", 0);
    jb_num(b, s->noise);
    jb_key(b, "stdrel", 0);
    jb_num(b, s->stdrel);
    jb_put(b, "}", 1);
}

/* Writes one row after prefix; 0, or KT_ENOMEM (also for a row without a name or device, as before). */
static int put_row(FILE *out, const char *prefix, const kt_compare_row_t *row, jbuf_t *b)
{
    static const struct {
        const char *key;
        size_t off;
    } kNums[] = {{"speedup_median", offsetof(kt_compare_row_t, speedup_median)},
                 {"speedup_mean", offsetof(kt_compare_row_t, speedup_mean)},
                 {"ci_lo", offsetof(kt_compare_row_t, ci_lo)},
                 {"ci_hi", offsetof(kt_compare_row_t, ci_hi)},
                 {"p_value", offsetof(kt_compare_row_t, p_value)},
                 {"u", offsetof(kt_compare_row_t, u)}};
    if (!row->name || !row->device) return KT_ENOMEM;
    b->n = 0;
    jb_put(b, "{", 1);
    jb_key(b, "name", 1);
    jb_str(b, row->name);
    jb_key(b, "backend", 0);
    jb_str(b, backend_label(row->backend));
    jb_key(b, "device", 0);
    jb_str(b, row->device);
    jb_key(b, "presence", 0);
    jb_str(b, presence_name(row->presence));
    if (row->match) { /* how the row's devices were paired (docs/devices.md) */
        jb_key(b, "match", 0);
        jb_str(b, row->match);
    }
    if (row->device_after) {
        jb_key(b, "device_after", 0);
        jb_str(b, row->device_after);
    }
    jb_side(b, "before", &row->before);
    jb_side(b, "after", &row->after);
    for (size_t i = 0; i < sizeof kNums / sizeof kNums[0]; i++) {
        jb_key(b, kNums[i].key, 0);
        double v;
        memcpy(&v, (const char *)row + kNums[i].off, sizeof v);
        jb_num(b, v);
    }
    jb_key(b, "verdict", 0);
    jb_str(b, kt_verdict_name(row->verdict));
    jb_key(b, "reason", 0);
    jb_str(b, row->reason ? row->reason : "");
    if (row->verdict == KT_VERDICT_UNSURE && row->presence == KT_PRESENT_BOTH) {
        jb_key(b, "decide_samples", 0);
        jb_num(b, (double)row->decide_samples);
    }
    jb_put(b, "}", 1);
    if (b->bad) return KT_ENOMEM;
    fputs(prefix, out);
    put_filtered(out, b->p);
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
    jbuf_t b = {0};
    b.fast = numbers_fast();
    for (size_t i = 0; i < r->count && !rc; i++) rc = put_row(out, i ? ",\n    " : "\n    ", &r->rows[i], &b);
    free(b.p);
    if (rc) return rc;
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
