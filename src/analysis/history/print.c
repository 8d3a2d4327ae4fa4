/* print.c — `history show` and `history check` output: text, markdown, CSV, JSON and a self-contained HTML page
 * (per series an SVG of the median and interquartile band over runs, changes marked and linked to their commit). */
#include "history.h"

#include "export/escape.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Points of the sparkline (the last N runs). */
#define KTH_SPARK 24
/* Runs up to which the HTML page draws a point with a tooltip per run. */
#define KTH_HTML_POINTS 400
/* Previous runs whose median is the baseline of "change". */
#define KTH_PREV 5

int kth_parse_format(const char *s, kth_format_t *out)
{
    static const struct {
        const char *name;
        kth_format_t f;
    } k[] = {{"text", KTH_FMT_TEXT}, {"markdown", KTH_FMT_MARKDOWN}, {"md", KTH_FMT_MARKDOWN}, {"csv", KTH_FMT_CSV},
             {"json", KTH_FMT_JSON}, {"html", KTH_FMT_HTML}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (!strcmp(s, k[i].name)) {
            *out = k[i].f;
            return 0;
        }
    return -1;
}

/* ===================================================================================================== *
 * Small writers
 * ===================================================================================================== */

static void fmt_ns(char *buf, size_t n, double ns)
{
    if (!isfinite(ns))
        snprintf(buf, n, "-");
    else if (ns >= 1e9)
        snprintf(buf, n, "%.4g s", ns / 1e9);
    else if (ns >= 1e6)
        snprintf(buf, n, "%.4g ms", ns / 1e6);
    else if (ns >= 1e3)
        snprintf(buf, n, "%.4g µs", ns / 1e3);
    else
        snprintf(buf, n, "%.4g ns", ns);
}

static void fmt_pct(char *buf, size_t n, double r)
{
    if (!isfinite(r))
        snprintf(buf, n, "-");
    else
        snprintf(buf, n, "%+.1f %%", r * 100.0);
}

static void json_str(FILE *o, const char *s)
{
    fputc('"', o);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(o, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(o, "\\u%04x", *p);
        else
            fputc(*p, o);
    }
    fputc('"', o);
}

static void csv_str(FILE *o, const char *s)
{
    fputc('"', o);
    if (kt__csv_is_formula(s))
        fputc('\'', o);
    for (const char *p = s ? s : ""; *p; p++) {
        if (*p == '"')
            fputc('"', o);
        fputc(*p, o);
    }
    fputc('"', o);
}

/* Text for HTML: controls and invalid UTF-8 written as escapes (as in the text table), then the markup entities. */
static void html_str(FILE *o, const char *s)
{
    char *e = kt__escape(s ? s : "", s ? strlen(s) : 0, KT_ESC_TEXT, NULL);
    for (const char *p = e ? e : "?"; *p; p++) {
        switch (*p) {
        case '&': fputs("&amp;", o); break;
        case '<': fputs("&lt;", o); break;
        case '>': fputs("&gt;", o); break;
        case '"': fputs("&quot;", o); break;
        case '\'': fputs("&#39;", o); break;
        default: fputc(*p, o);
        }
    }
    free(e);
}

/* The commit URL from the template ("{commit}" replaced), written escaped for an HTML attribute or markdown. */
static void commit_url(FILE *o, const char *tmpl, const char *commit, int html)
{
    for (const char *p = tmpl; *p;) {
        if (!strncmp(p, "{commit}", 8)) {
            if (html)
                html_str(o, commit);
            else
                for (const char *c = commit; *c; c++) /* a commit is hex: anything else is dropped */
                    if ((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z'))
                        fputc(*c, o);
            p += 8;
        } else {
            if (html && (*p == '&' || *p == '<' || *p == '>' || *p == '"'))
                html_str(o, (char[]){*p, 0});
            else if (!html && (*p == ')' || *p == ' ' || *p == '\n'))
                fprintf(o, "%%%02X", (unsigned char)*p);
            else
                fputc(*p, o);
            p++;
        }
    }
}

/* The series' key (kernel, backend, device, machine) as the first cells of a row in the given format. */
static void series_key(FILE *o, const kth_series_t *se, kth_format_t fmt)
{
    const char *v[4] = {se->kernel, se->backend, se->device, se->machine};
    static const char *const kJson[4] = {"{\"kernel\": ", ", \"backend\": ", ", \"device\": ", ", \"machine\": "};
    for (int i = 0; i < 4; i++) {
        switch (fmt) {
        case KTH_FMT_CSV: if (i) fputc(',', o); csv_str(o, v[i]); break;
        case KTH_FMT_JSON: fputs(kJson[i], o); json_str(o, v[i]); break;
        case KTH_FMT_MARKDOWN: fputs(i ? " | " : "| ", o); kt__escape_write(o, v[i], KT_ESC_MARKDOWN); break;
        default: fputs(i == 0 ? "" : i == 1 ? " (" : ", ", o); kt__escape_write(o, v[i], KT_ESC_TEXT); break;
        }
    }
    if (fmt == KTH_FMT_TEXT)
        fputc(')', o);
}

static const char *short_commit(const char *c, char *buf)
{
    snprintf(buf, 13, "%s", *c ? c : "-");
    return buf;
}

/* ===================================================================================================== *
 * Per-series summary
 * ===================================================================================================== */

typedef struct row_t {
    double latest;   /* the last run's median */
    double previous; /* median of the KTH_PREV runs before it (NaN when none) */
    double change;   /* latest / previous - 1 */
    char spark[KTH_SPARK * 3 + 1]; /* UTF-8 blocks */
} row_t;

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void summarise(const kth_series_t *s, row_t *r)
{
    static const char *const kBlocks[8] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
    r->latest = s->pts[s->n - 1].median;
    double prev[KTH_PREV];
    size_t np = 0;
    for (size_t i = s->n - 1; i-- > 0 && np < KTH_PREV;)
        prev[np++] = s->pts[i].median;
    qsort(prev, np, sizeof *prev, cmp_dbl);
    r->previous = !np ? NAN : np % 2 ? prev[np / 2] : 0.5 * (prev[np / 2 - 1] + prev[np / 2]);
    r->change = np && r->previous > 0 ? r->latest / r->previous - 1.0 : NAN;
    size_t a = s->n > KTH_SPARK ? s->n - KTH_SPARK : 0;
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = a; i < s->n; i++) {
        lo = fmin(lo, s->pts[i].median);
        hi = fmax(hi, s->pts[i].median);
    }
    r->spark[0] = '\0';
    for (size_t i = a; i < s->n; i++) {
        int k = hi > lo ? (int)((s->pts[i].median - lo) / (hi - lo) * 7.0 + 0.5) : 3;
        strcat(r->spark, kBlocks[k < 0 ? 0 : k > 7 ? 7 : k]);
    }
}

/* ===================================================================================================== *
 * HTML
 * ===================================================================================================== */

static void html_page(FILE *o, const kth_history_t *h, const kth_check_result_t *c, const char *url)
{
    fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>ktiming history</title>\n<style>"
          "body{font:14px sans-serif;margin:1em 2em}svg{background:#fafafa;border:1px solid #ddd}"
          ".band{fill:#9ecae1;opacity:.5}.med{fill:none;stroke:#08519c;stroke-width:1.5}.pt{fill:#08519c}"
          ".chg line{stroke:#d62728;stroke-width:1.5}.chg text{fill:#d62728;font-size:11px}"
          "h2{font-size:15px;margin:1.2em 0 .2em}</style></head><body>\n<h1>ktiming history</h1>\n",
          o);
    fprintf(o, "<p>%zu series over %zu runs. The line is each run's median, the band its interquartile range; red "
               "marks are changes that <code>ktiming history check</code> confirmed.</p>\n",
            h->series_count, h->run_count);
    const double W = 720, H = 160, M = 40;
    for (size_t s = 0; s < h->series_count; s++) {
        const kth_series_t *se = &h->series[s];
        double lo = INFINITY, hi = -INFINITY;
        for (size_t i = 0; i < se->n; i++) {
            lo = fmin(lo, se->pts[i].q1);
            hi = fmax(hi, se->pts[i].q3);
        }
        if (!(hi > lo)) {
            hi = lo * 1.01 + 1.0;
            lo = lo * 0.99;
        }
        double dx = se->n > 1 ? (W - 2 * M) / (double)(se->n - 1) : 0.0;
#define KX(i) (M + dx * (double)(i))
#define KY(v) (H - M / 2 - ((v) - lo) / (hi - lo) * (H - M))
        fputs("<h2>", o);
        html_str(o, se->kernel);
        fputs(" — ", o);
        html_str(o, se->backend);
        fputs(" / ", o);
        html_str(o, se->device);
        fputs(" / ", o);
        html_str(o, se->machine);
        char a[32], b[32];
        fmt_ns(a, sizeof a, lo);
        fmt_ns(b, sizeof b, hi);
        fprintf(o, "</h2>\n<svg width=\"%.0f\" height=\"%.0f\" role=\"img\"><text x=\"2\" y=\"12\" font-size=\"10\">%s"
                   "</text><text x=\"2\" y=\"%.0f\" font-size=\"10\">%s</text>\n<polygon class=\"band\" points=\"",
                W, H, b, H - 4, a);
        for (size_t i = 0; i < se->n; i++)
            fprintf(o, "%.1f,%.1f ", KX(i), KY(se->pts[i].q3));
        for (size_t i = se->n; i-- > 0;)
            fprintf(o, "%.1f,%.1f ", KX(i), KY(se->pts[i].q1));
        fputs("\"/>\n<polyline class=\"med\" points=\"", o);
        for (size_t i = 0; i < se->n; i++)
            fprintf(o, "%.1f,%.1f ", KX(i), KY(se->pts[i].median));
        fputs("\"/>\n", o);
        /* Each run a point whose tooltip names its commit and median (up to KTH_HTML_POINTS runs: the page stays
         * small for long histories). */
        for (size_t i = 0; se->n <= KTH_HTML_POINTS && i < se->n; i++) {
            char med[32], sc[16];
            fmt_ns(med, sizeof med, se->pts[i].median);
            fprintf(o, "<circle class=\"pt\" cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\"><title>", KX(i), KY(se->pts[i].median));
            html_str(o, short_commit(h->runs[se->pts[i].run].commit, sc));
            fprintf(o, ": %s</title></circle>", med);
        }
        fputc('\n', o);
        for (size_t k = 0; c && k < c->count; k++) {
            const kth_change_t *ch = &c->changes[k];
            if (ch->series != s)
                continue;
            const char *commit = h->runs[se->pts[ch->at].run].commit;
            double x = KX(ch->at) - dx / 2;
            fputs("<g class=\"chg\">", o);
            if (url && *commit) {
                fputs("<a href=\"", o);
                commit_url(o, url, commit, 1);
                fputs("\">", o);
            }
            char pct[32], sc[16];
            fmt_pct(pct, sizeof pct, ch->change);
            fprintf(o, "<line x1=\"%.1f\" y1=\"10\" x2=\"%.1f\" y2=\"%.0f\"/><text x=\"%.1f\" y=\"20\">%s ", x, x, H - 10,
                    x + 3, pct);
            html_str(o, short_commit(commit, sc));
            fputs("</text>", o);
            if (url && *commit)
                fputs("</a>", o);
            fputs("</g>\n", o);
        }
#undef KX
#undef KY
        fputs("</svg>\n", o);
    }
    fputs("</body></html>\n", o);
}

/* ===================================================================================================== *
 * show
 * ===================================================================================================== */

/* A JSON list's item i: its separator and its series' key fields. */
static void json_item(FILE *o, size_t i, const kth_series_t *se)
{
    fputs(i ? ",\n  " : "\n  ", o);
    series_key(o, se, KTH_FMT_JSON);
}

/* The end of a show or check listing (JSON closes its list and object); 0, or KT_EIO when the stream failed. */
static int list_end(FILE *o, kth_format_t fmt)
{
    if (fmt == KTH_FMT_JSON)
        fputs("\n]}\n", o);
    return ferror(o) ? KT_EIO : 0;
}

int kth_print_show(FILE *o, const kth_history_t *h, const kth_check_result_t *check, kth_format_t fmt,
                   const char *url)
{
    if (fmt == KTH_FMT_HTML) {
        html_page(o, h, check, url);
        return ferror(o) ? KT_EIO : 0;
    }
    if (fmt == KTH_FMT_JSON)
        fprintf(o, "{\"format\": \"ktiming.history.show\", \"version\": 1, \"runs\": %zu, \"series\": [", h->run_count);
    else if (fmt == KTH_FMT_CSV)
        fputs("kernel,backend,device,machine,runs,latest_ns,previous_ns,change_pct,commit\n", o);
    else if (fmt == KTH_FMT_MARKDOWN)
        fputs("| kernel | backend | device | machine | runs | latest | vs previous | trend | commit |\n"
              "|---|---|---|---|---:|---:|---:|---|---|\n",
              o);
    size_t wk = 6, wd = 6, wm = 7;
    for (size_t s = 0; fmt == KTH_FMT_TEXT && s < h->series_count; s++) {
        char *e;
        size_t cols;
        if ((e = kt__escape(h->series[s].kernel, 256, KT_ESC_TEXT, &cols)))
            wk = cols > wk ? cols : wk;
        free(e);
        if ((e = kt__escape(h->series[s].device, 256, KT_ESC_TEXT, &cols)))
            wd = cols > wd ? cols : wd;
        free(e);
        if ((e = kt__escape(h->series[s].machine, 256, KT_ESC_TEXT, &cols)))
            wm = cols > wm ? cols : wm;
        free(e);
    }
    if (fmt == KTH_FMT_TEXT) {
        kt__escape_write_padded(o, "kernel", KT_ESC_TEXT, wk);
        fputs("  backend  ", o);
        kt__escape_write_padded(o, "device", KT_ESC_TEXT, wd);
        fputs("  ", o);
        kt__escape_write_padded(o, "machine", KT_ESC_TEXT, wm);
        fprintf(o, "  %5s  %10s  %9s  %-*s  commit\n", "runs", "latest", "vs prev", KTH_SPARK, "trend");
    }
    for (size_t s = 0; s < h->series_count; s++) {
        const kth_series_t *se = &h->series[s];
        row_t r;
        summarise(se, &r);
        const char *commit = h->runs[se->pts[se->n - 1].run].commit;
        char lat[32], pct[32], sc[16];
        fmt_ns(lat, sizeof lat, r.latest);
        fmt_pct(pct, sizeof pct, r.change);
        switch (fmt) {
        case KTH_FMT_TEXT:
            kt__escape_write_padded(o, se->kernel, KT_ESC_TEXT, wk);
            fputs("  ", o);
            kt__escape_write_padded(o, se->backend, KT_ESC_TEXT, 7);
            fputs("  ", o);
            kt__escape_write_padded(o, se->device, KT_ESC_TEXT, wd);
            fputs("  ", o);
            kt__escape_write_padded(o, se->machine, KT_ESC_TEXT, wm);
            fprintf(o, "  %5zu  %10s  %9s  %s", se->n, lat, pct, r.spark);
            for (size_t i = se->n < KTH_SPARK ? se->n : KTH_SPARK; i < KTH_SPARK; i++)
                fputc(' ', o);
            fputs("  ", o);
            kt__escape_write(o, short_commit(commit, sc), KT_ESC_TEXT);
            fputc('\n', o);
            break;
        case KTH_FMT_MARKDOWN:
            series_key(o, se, fmt);
            fprintf(o, " | %zu | %s | %s | %s | ", se->n, lat, pct, r.spark);
            kt__escape_write(o, short_commit(commit, sc), KT_ESC_MARKDOWN);
            fputs(" |\n", o);
            break;
        case KTH_FMT_CSV:
            series_key(o, se, fmt);
            fprintf(o, ",%zu,%.17g,", se->n, r.latest);
            if (isfinite(r.previous)) /* a change from 0 ns has no ratio: an empty field, never "nan" */
                fprintf(o, "%.17g,", r.previous);
            else
                fputc(',', o);
            if (isfinite(r.change))
                fprintf(o, "%.6f,", r.change * 100.0);
            else
                fputc(',', o);
            csv_str(o, commit);
            fputc('\n', o);
            break;
        case KTH_FMT_JSON:
            json_item(o, s, se);
            fprintf(o, ", \"runs\": %zu, \"latest_ns\": %.17g, ", se->n, r.latest);
            if (isfinite(r.previous)) /* JSON has no NaN: a change from 0 ns is null */
                fprintf(o, "\"previous_ns\": %.17g, ", r.previous);
            else
                fputs("\"previous_ns\": null, ", o);
            if (isfinite(r.change))
                fprintf(o, "\"change\": %.9g, ", r.change);
            else
                fputs("\"change\": null, ", o);
            fputs("\"commit\": ", o);
            json_str(o, commit);
            fputs(", \"medians_ns\": [", o);
            for (size_t i = 0; i < se->n; i++)
                fprintf(o, "%s%.17g", i ? ", " : "", se->pts[i].median);
            fputs("]}", o);
            break;
        case KTH_FMT_HTML: break;
        }
    }
    return list_end(o, fmt);
}

/* ===================================================================================================== *
 * check
 * ===================================================================================================== */

static void status_of(const kth_history_t *h, const kth_change_t *c, char *buf, size_t n)
{
    char sc[16];
    size_t last = h->series[c->series].n - c->at;
    if (c->tail) /* the last runs only: no level of three runs yet, so never "fixed" */
        snprintf(buf, n, last == 1 ? "%s (the last run)" : "%s (the last %zu runs)",
                 c->change < 0 ? "improvement" : "REGRESSION", last);
    else if (c->change < 0)
        snprintf(buf, n, "improvement");
    else if (c->fixed)
        snprintf(buf, n, "regression, fixed at %s", short_commit(h->runs[h->series[c->series].pts[c->fixed_at].run].commit, sc));
    else
        snprintf(buf, n, "REGRESSION");
}

int kth_print_check(FILE *o, const kth_history_t *h, const kth_check_result_t *r, kth_format_t fmt, const char *url)
{
    if (fmt == KTH_FMT_HTML)
        return kth_print_show(o, h, r, fmt, url);
    if (fmt == KTH_FMT_TEXT || fmt == KTH_FMT_MARKDOWN) {
        if (fmt == KTH_FMT_MARKDOWN)
            fputs("### ktiming history check\n\n", o);
        fprintf(o, "%s%zu change%s in %zu series over %zu runs (%zu candidates; threshold %g %%, FDR %g); %zu "
                   "regression%s not fixed%s\n",
                fmt == KTH_FMT_MARKDOWN ? "**" : "", r->count, r->count == 1 ? "" : "s", h->series_count, h->run_count,
                r->candidates, r->opts.threshold_pct, r->opts.alpha, r->regressions, r->regressions == 1 ? "" : "s",
                fmt == KTH_FMT_MARKDOWN ? "**\n" : "");
        if (!r->count)
            return ferror(o) ? KT_EIO : 0;
        if (fmt == KTH_FMT_MARKDOWN)
            fputs("| kernel | backend | device | machine | commit | before | after | change | 95 % CI | q | status |\n"
                  "|---|---|---|---|---|---:|---:|---:|---|---:|---|\n",
                  o);
        else
            fputc('\n', o);
    } else if (fmt == KTH_FMT_CSV) {
        fputs("kernel,backend,device,machine,commit,run,before_ns,after_ns,change_pct,ci_lo_pct,ci_hi_pct,p,q,status\n", o);
    } else {
        fprintf(o, "{\"format\": \"ktiming.history.check\", \"version\": 1, \"series\": %zu, \"runs\": %zu, "
                   "\"candidates\": %zu, \"regressions\": %zu, \"threshold_pct\": %g, \"alpha\": %g, \"changes\": [",
                h->series_count, h->run_count, r->candidates, r->regressions, r->opts.threshold_pct, r->opts.alpha);
    }
    for (size_t k = 0; k < r->count; k++) {
        const kth_change_t *c = &r->changes[k];
        const kth_series_t *se = &h->series[c->series];
        const char *commit = h->runs[se->pts[c->at].run].commit;
        char bf[32], af[32], pct[32], lo[32], hi[32], st[96], sc[16];
        fmt_ns(bf, sizeof bf, c->before_ns);
        fmt_ns(af, sizeof af, c->after_ns);
        fmt_pct(pct, sizeof pct, c->change);
        fmt_pct(lo, sizeof lo, c->ci_lo);
        fmt_pct(hi, sizeof hi, c->ci_hi);
        status_of(h, c, st, sizeof st);
        switch (fmt) {
        case KTH_FMT_TEXT:
            series_key(o, se, fmt);
            fputs(": ", o);
            fprintf(o, "%s at commit ", pct);
            kt__escape_write(o, short_commit(commit, sc), KT_ESC_TEXT);
            fprintf(o, " (run %zu of %zu), %s -> %s, 95 %% CI [%s, %s], q %.2g: ", c->at + 1, se->n, bf, af, lo, hi, c->q);
            kt__escape_write(o, st, KT_ESC_TEXT); /* it may name a commit */
            fputc('\n', o);
            break;
        case KTH_FMT_MARKDOWN:
            series_key(o, se, fmt);
            fputs(" | ", o);
            if (url && *commit) {
                fputc('[', o);
                kt__escape_write(o, short_commit(commit, sc), KT_ESC_MARKDOWN);
                fputs("](", o);
                commit_url(o, url, commit, 0);
                fputc(')', o);
            } else {
                kt__escape_write(o, short_commit(commit, sc), KT_ESC_MARKDOWN);
            }
            fprintf(o, " | %s | %s | %s | [%s, %s] | %.2g | ", bf, af, pct, lo, hi, c->q);
            kt__escape_write(o, st, KT_ESC_MARKDOWN);
            fputs(" |\n", o);
            break;
        case KTH_FMT_CSV:
            series_key(o, se, fmt);
            fputc(',', o);
            csv_str(o, commit);
            fprintf(o, ",%zu,%.17g,%.17g,%.6f,%.6f,%.6f,%.6g,%.6g,", c->at + 1, c->before_ns, c->after_ns,
                    c->change * 100.0, c->ci_lo * 100.0, c->ci_hi * 100.0, c->p, c->q);
            csv_str(o, st);
            fputc('\n', o);
            break;
        case KTH_FMT_JSON:
            json_item(o, k, se);
            fputs(", \"commit\": ", o);
            json_str(o, commit);
            fprintf(o, ", \"run\": %zu, \"before_ns\": %.17g, \"after_ns\": %.17g, \"change\": %.9g, \"ci\": [%.9g, "
                       "%.9g], \"p\": %.6g, \"q\": %.6g, \"regression\": %s, \"fixed\": %s",
                    c->at + 1, c->before_ns, c->after_ns, c->change, isfinite(c->ci_lo) ? c->ci_lo : 0.0,
                    isfinite(c->ci_hi) ? c->ci_hi : 0.0, c->p, c->q, c->change > 0 ? "true" : "false",
                    c->fixed ? "true" : "false");
            if (c->tail)
                fputs(", \"tail\": true", o);
            if (c->fixed) {
                fputs(", \"fixed_commit\": ", o);
                json_str(o, h->runs[se->pts[c->fixed_at].run].commit);
            }
            fputc('}', o);
            break;
        case KTH_FMT_HTML: break;
        }
    }
    return list_end(o, fmt);
}
