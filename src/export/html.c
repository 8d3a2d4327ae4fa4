/* html.c — self-contained HTML report: the snapshot as embedded JSON plus inline CSS and JS that draw the
 * kernel table, per-kernel duration distributions, a zoomable timeline and, for a comparison, the speedups.
 * No network: the stylesheet and script (src/export/html/report.{css,js}) are compiled into the library. */
#include "core/device_label.h"
#include "export/trace_json.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "kt_embed_report_css.h"
#include "kt_embed_report_js.h"

/* ---------------------------------------------------------------------------------------------------
 * Snapshot as JSON (the shape report.js reads)
 * ------------------------------------------------------------------------------------------------- */

static void kv_str(FILE *out, const char *k, const char *v, int comma)
{
    fprintf(out, "%s\"%s\":", comma ? "," : "", k);
    kt__trace_json_string(out, v);
}

static void kv_u64(FILE *out, const char *k, uint64_t v)
{
    fprintf(out, ",\"%s\":%" PRIu64, k, v);
}

static void kv_dbl(FILE *out, const char *k, double v)
{
    fprintf(out, ",\"%s\":%.3f", k, isfinite(v) ? v : 0.0);
}

static const char *backend_str(kt_backend_t b)
{
    return b < KT_BACKEND_COUNT ? kt_backend_name(b) : "?";
}

/* Earliest known time among the spans: the origin of the relative times in the page. */
static uint64_t spans_origin(const kt_snapshot_t *snap)
{
    uint64_t t0 = UINT64_MAX;
    for (size_t i = 0; i < snap->span_count; i++) {
        const kt_span_t *sp = &snap->spans[i];
        const uint64_t v[4] = {sp->start_ns, sp->enqueue_ns, sp->queued_ns, sp->submit_ns};
        for (int k = 0; k < 4; k++)
            if (v[k] && v[k] < t0)
                t0 = v[k];
    }
    return t0 == UINT64_MAX ? 0 : t0;
}

/* A span time relative to t0, or -1 when unknown. */
static void span_time(FILE *out, uint64_t v, uint64_t t0)
{
    if (v && v >= t0)
        fprintf(out, ",%" PRIu64, v - t0);
    else
        fputs(",-1", out);
}

static void write_entry(FILE *out, const kt_kernel_timing_t *e)
{
    kv_str(out, "name", e->name, 0);
    kv_str(out, "backend", backend_str(e->backend), 1);
    kv_str(out, "device", e->device, 1);
    kv_u64(out, "n", e->dispatch_count);
    kv_u64(out, "total", e->total_ns);
    kv_u64(out, "min", e->min_ns);
    kv_u64(out, "max", e->max_ns);
    kv_u64(out, "last", e->last_ns);
    kv_dbl(out, "mean", e->mean_ns);
    kv_dbl(out, "stddev", e->stddev_ns);
    kv_u64(out, "p50", e->p50_ns);
    kv_u64(out, "p90", e->p90_ns);
    kv_u64(out, "p99", e->p99_ns);
    kv_u64(out, "errors", e->errors);
    kv_u64(out, "dropped", e->dropped);
    kv_u64(out, "spans_dropped", e->spans_dropped);
    if (e->by_source && e->by_source_count) { /* a merged snapshot: [source, total] per source */
        fputs(",\"by_source\":[", out);
        for (uint32_t k = 0; k < e->by_source_count; k++)
            fprintf(out, "%s[%" PRIu32 ",%" PRIu64 "]", k ? "," : "", e->by_source[k].source,
                    e->by_source[k].total_ns);
        fputs("]", out);
    }
    if (e->configs && e->config_count) { /* launch configurations: [label, n, total, min, max] per row */
        fputs(",\"configs\":[", out);
        for (uint32_t k = 0; k < e->config_count; k++) {
            const kt_config_timing_t *c = &e->configs[k];
            char label[KT__LAUNCH_LABEL];
            kt__launch_label(label, sizeof label, &c->launch);
            fputs(k ? ",[" : "[", out);
            kt__trace_json_string(out, label);
            fprintf(out, ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "]", c->dispatch_count, c->total_ns, c->min_ns,
                    c->max_ns);
        }
        fputs("]", out);
    }
    fputs(",\"samples\":[", out);
    for (uint32_t k = 0; e->samples && k < e->sample_count; k++)
        fprintf(out, k ? ",%" PRIu64 : "%" PRIu64, e->samples[k]);
}

/* A merged snapshot's sources: one timeline group and one bar per source (rank). */
static void write_source(FILE *out, const kt_source_info_t *so)
{
    char label[128];
    if (so->rank >= 0)
        snprintf(label, sizeof label, "rank %" PRId32, so->rank);
    else
        snprintf(label, sizeof label, "pid %" PRId64 "@%s", so->pid, so->host);
    kv_str(out, "label", label, 0);
    kv_str(out, "host", so->host, 1);
    fprintf(out, ",\"pid\":%" PRId64 ",\"rank\":%" PRId32 ",\"offset_ns\":%" PRId64, so->pid, so->rank,
            so->offset_ns);
    fprintf(out, ",\"bound_ns\":%.0f", so->offset_bound_ns == UINT64_MAX ? -1.0 : (double)so->offset_bound_ns);
}

static void write_device(FILE *out, const kt_device_info_t *d)
{
    kv_str(out, "backend", backend_str(d->backend), 0);
    kv_str(out, "name", d->name, 1);
    char id[KT_DEVICE_KEY_MAX + 96];
    kt__device_id_text(d, id, sizeof id);
    kv_str(out, "id", id, 1);
    kv_str(out, "host", d->host, 1);
    kv_str(out, "clock_domain", d->clock_domain, 1);
    kv_u64(out, "resolution_ns", d->resolution_ns);
    kv_u64(out, "frequency_hz", d->frequency_hz);
    kv_u64(out, "valid_bits", d->valid_bits);
    kv_u64(out, "error_bound_ns", d->error_bound_ns);
    kv_dbl(out, "drift_ppm", d->drift_ppm);
    kv_u64(out, "model_samples", d->model_samples);
}

/* Spans as flat tuples [entry, queue|-1, thread, flags, start, end, enqueue, queued, submit, uncertainty,
 * duration], times relative to t0, -1 when unknown; eight to a line. */
static void write_spans(FILE *out, const kt_snapshot_t *snap, uint64_t t0)
{
    for (size_t i = 0; i < snap->span_count; i++) {
        const kt_span_t *sp = &snap->spans[i];
        uint64_t end = sp->end_ns >= sp->start_ns && sp->end_ns ? sp->end_ns : sp->start_ns + sp->duration_ns;
        fprintf(out, "%s%" PRIu32 ",", i ? (i % 8 ? "," : ",\n") : "", sp->entry);
        if (sp->queue == UINT32_MAX)
            fputs("-1", out);
        else
            fprintf(out, "%" PRIu32, sp->queue);
        fprintf(out, ",%" PRIu32 ",%" PRIu32, sp->thread, sp->flags);
        span_time(out, sp->start_ns, t0);
        span_time(out, sp->start_ns ? end : 0, t0);
        span_time(out, sp->enqueue_ns, t0);
        span_time(out, sp->queued_ns, t0);
        span_time(out, sp->submit_ns, t0);
        fprintf(out, ",%" PRIu64 ",%" PRIu64, sp->uncertainty_ns, sp->duration_ns);
    }
}

static void write_snapshot(FILE *out, const kt_snapshot_t *snap, int with_spans)
{
    uint64_t t0 = spans_origin(snap);
    fputs("{", out);
    kv_str(out, "host", snap->host, 0);
    kv_u64(out, "taken_ns", snap->taken_ns);
    kv_u64(out, "t0", t0);
    fputs(",\"entries\":[", out);
    for (size_t i = 0; i < snap->count; i++) {
        fputs(i ? ",\n{" : "\n{", out);
        write_entry(out, &snap->entries[i]);
        fputs("]}", out);
    }
    fputs("],\n\"sources\":[", out);
    for (size_t i = 0; i < snap->source_count; i++) {
        fputs(i ? ",{" : "{", out);
        write_source(out, &snap->sources[i]);
        fputs("}", out);
    }
    fputs("],\n\"threads\":[", out);
    for (size_t i = 0; i < snap->thread_count; i++) {
        fprintf(out, "%s{\"tid\":%" PRIu64, i ? "," : "", snap->threads[i].os_tid);
        kv_str(out, "name", snap->threads[i].name, 1);
        fprintf(out, ",\"src\":%" PRIu32 "}", snap->threads[i].source);
    }
    fputs("],\n\"queues\":[", out);
    for (size_t i = 0; i < snap->queue_count; i++) {
        const kt_queue_info_t *q = &snap->queues[i];
        fputs(i ? ",{" : "{", out);
        kv_str(out, "backend", backend_str(q->backend), 0);
        kv_str(out, "device", q->device, 1);
        kv_str(out, "label", q->label, 1);
        fprintf(out, ",\"src\":%" PRIu32 "}", q->source);
    }
    fputs("],\n\"devices\":[", out);
    for (size_t i = 0; i < snap->device_count; i++) {
        fputs(i ? ",{" : "{", out);
        write_device(out, &snap->devices[i]);
        fputs("}", out);
    }
    fputs("],\n\"spans\":[", out);
    if (with_spans)
        write_spans(out, snap, t0);
    fputs("]}", out);
}

/* ---------------------------------------------------------------------------------------------------
 * Page
 * ------------------------------------------------------------------------------------------------- */

/* Records script errors from the very first line on, before report.js runs (the test reads the attributes). */
static const char kBootScript[] =
    "(function(){var r=document.documentElement;window.addEventListener('error',function(e){"
    "var n=(+r.getAttribute('data-kt-errors')||0)+1;r.setAttribute('data-kt-errors',String(n));"
    "r.setAttribute('data-kt-status','error');"
    "var m=(e&&e.message?e.message:String(e))+(e&&e.lineno?' (line '+e.lineno+')':'');"
    "var b=document.getElementById('kt-error');if(b){b.style.display='block';"
    "b.textContent+=(b.textContent?'\\n':'Report script error:\\n')+m;}});})();";

static const char kBody[] =
    "<header id=\"kt-header\"></header>\n<main>\n<div id=\"kt-error\"></div>\n"
    "<noscript><p>This report draws its tables and plots with JavaScript. The data is embedded in this file "
    "(element kt-data).</p></noscript>\n"
    "<div class=\"cards\" id=\"kt-cards\"></div>\n"
    "<section id=\"kt-compare-view\"></section>\n"
    "<section><h2>Kernels<span class=\"hint\">sorted by total time; click a header to sort</span></h2>"
    "<div id=\"kt-table\"></div></section>\n"
    "<section><h2>Duration distributions<span class=\"hint\">histogram of the kept samples; box = "
    "quartiles, whiskers = p5\xe2\x80\x93p95, dots = min/max</span></h2><div id=\"kt-dists\"></div></section>\n"
    "<section id=\"kt-ranks\"></section>\n"
    "<section><h2>Timeline<span class=\"hint\">one track per host thread and per device queue</span></h2>"
    "<div id=\"kt-timeline\"></div></section>\n"
    "<section id=\"kt-devices\"><h2>Devices and clocks</h2></section>\n"
    "</main>\n";

/* Copies a JSON document into a <script> element: '<' becomes \u003c (only strings can hold it in valid
 * JSON), so no "</script>" or "<!--" can end or confuse the element. */
static void write_embedded_json(FILE *out, const char *json)
{
    for (const char *p = json; *p; p++) {
        if (*p == '<')
            fputs("\\u003c", out);
        else
            fputc(*p, out);
    }
}

int kt__export_html_compare(FILE *out, const kt_snapshot_t *before, const kt_snapshot_t *after,
                            const char *compare_json)
{
    if (!out || !after)
        return KT_EINVAL;
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
          out);
    fprintf(out, "<meta name=\"generator\" content=\"ktiming %s\">\n<title>ktiming report", kt_version());
    if (before)
        fputs(" \xe2\x80\x94 comparison", out);
    fputs("</title>\n<style>\n", out);
    fwrite(kt_embed_report_css, 1, sizeof kt_embed_report_css - 1, out);
    fprintf(out, "</style>\n<script>%s</script>\n</head>\n<body>\n%s", kBootScript, kBody);
    fprintf(out, "<footer>generated by ktiming %s</footer>\n", kt_version());

    fputs("<script type=\"application/json\" id=\"kt-data\">\n{\"generator\":\"ktiming ", out);
    fputs(kt_version(), out);
    fputs("\",\n\"after\":", out);
    write_snapshot(out, after, 1);
    fputs(",\n\"before\":", out);
    if (before)
        write_snapshot(out, before, 0);
    else
        fputs("null", out);
    fputs("}\n</script>\n<script type=\"application/json\" id=\"kt-compare\">", out);
    if (compare_json)
        write_embedded_json(out, compare_json);
    else
        fputs("null", out);
    fputs("</script>\n<script>\n", out);
    fwrite(kt_embed_report_js, 1, sizeof kt_embed_report_js - 1, out);
    fputs("</script>\n</body>\n</html>\n", out);
    return ferror(out) ? KT_EIO : 0;
}

int kt__export_html(FILE *out, const kt_snapshot_t *snap)
{
    return kt__export_html_compare(out, NULL, snap, NULL);
}

int kt_report_compare_html(FILE *out, const kt_snapshot_t *before, const kt_snapshot_t *after,
                           const char *compare_json)
{
    if (!out || !after)
        return KT_EINVAL;
    kt__c_numeric_t l = kt__c_numeric_enter(); /* as kt_report_print does */
    return kt__c_numeric_leave(l, out, kt__export_html_compare(out, before, after, compare_json));
}
