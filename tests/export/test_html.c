/* test_html.c — the HTML report renders in headless Chromium without script errors: the page marks itself
 * data-kt-status="ok" after drawing, script errors set data-kt-errors; the DOM is dumped and checked for both
 * and for what each view must draw. Plain, comparison, broken comparison JSON, empty and large snapshots, and a
 * merged snapshot's load balance across ranks.
 * Exits 77 when Chromium is not installed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <ktiming.h>
#include <ktiming/analysis.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/files.h"
#include "trace_fixture.h"

#ifndef KT_CHROMIUM
#define KT_CHROMIUM "/usr/bin/chromium"
#endif

/* ---------------------------------------------------------------------------------------------------
 * Rendering
 * ------------------------------------------------------------------------------------------------- */

typedef int (*write_fn)(FILE *out, void *arg);

static int g_width; /* window width for the next render (0: Chromium's default) */

/* Writes a page with fn to a temporary file, renders it headless, returns the dumped DOM (malloc). */
static char *render(write_fn fn, void *arg)
{
    char *dir = ktt_tmpdir("html");
    assert_non_null(dir);
    char page[1024], profile[1024], dom[1024], log[1024], cmd[8192];
    snprintf(page, sizeof page, "%s/report.html", dir);
    snprintf(profile, sizeof profile, "%s/profile", dir);
    snprintf(dom, sizeof dom, "%s/dom.html", dir);
    snprintf(log, sizeof log, "%s/chromium.log", dir);
    FILE *f = fopen(page, "w");
    assert_non_null(f);
    assert_int_equal(fn(f, arg), 0);
    assert_int_equal(fclose(f), 0);
    char size[64] = "";
    if (g_width)
        snprintf(size, sizeof size, "--window-size=%d,1200 --hide-scrollbars", g_width);
    snprintf(cmd, sizeof cmd,
             "timeout 120 " KT_CHROMIUM " --headless --no-sandbox --disable-gpu --disable-background-networking "
             "--disable-component-update --disable-sync --no-first-run --user-data-dir=%s --enable-logging=stderr "
             "--v=0 --virtual-time-budget=5000 %s --dump-dom file://%s > %s 2> %s",
             profile, size, page, dom, log);
    int rc = system(cmd);
    char *out = ktt_read_file(dom, NULL);
    if (!out || rc != 0) {
        size_t n = 0;
        char *text = ktt_read_file(log, &n);
        fprintf(stderr, "chromium log (end):\n%s\n", text ? text + (n > 2000 ? n - 2000 : 0) : "(none)");
        free(text);
    }
    ktt_rmtree(dir);
    free(dir);
    assert_int_equal(rc, 0);
    assert_non_null(out);
    return out;
}

/* The page drew everything and recorded no script error. */
static void assert_drawn(const char *dom)
{
    const char *root = strstr(dom, "<html");
    assert_non_null(root);
    const char *end = strchr(root, '>');
    assert_non_null(end);
    char tag[512];
    snprintf(tag, sizeof tag, "%.*s", (int)(end - root), root);
    if (!strstr(tag, "data-kt-status=\"ok\"") || strstr(tag, "data-kt-errors")) {
        const char *banner = strstr(dom, "id=\"kt-error\"");
        fail_msg("page not drawn cleanly: %s ... %.400s", tag, banner ? banner : "");
    }
}

static int write_plain(FILE *out, void *arg)
{
    return kt_report_print(out, (const kt_snapshot_t *)arg, KT_FORMAT_HTML, NULL);
}

/* Arguments of write_compare. */
typedef struct compare_arg_t {
    const kt_snapshot_t *before; /* before snapshot */
    const kt_snapshot_t *after;  /* after snapshot */
    const char *json;            /* compare document or NULL */
} compare_arg_t;

static int write_compare(FILE *out, void *arg)
{
    const compare_arg_t *c = arg;
    return kt_report_compare_html(out, c->before, c->after, c->json);
}

/* The plain report followed by a script that hovers the timeline until a tooltip shows, zooms with the
 * wheel, and highlights a kernel from the legend; it reports through attributes on the root element. */
static const char kInteract[] =
    "<script>(function(){var R=document.documentElement;try{"
    "var c=document.querySelector('#kt-timeline canvas'),tip=document.querySelector('.tip'),r=c.getBoundingClientRect(),"
    "found='';"
    "for(var y=r.top+26;y<r.bottom&&!found;y+=3)for(var x=r.left+232;x<r.right&&!found;x+=2){"
    "c.dispatchEvent(new MouseEvent('mousemove',{clientX:x,clientY:y,bubbles:true}));"
    "if(tip.style.display==='block')found=tip.textContent;}"
    "c.dispatchEvent(new WheelEvent('wheel',{clientX:r.left+400,clientY:r.top+40,deltaY:-400,bubbles:true,"
    "cancelable:true}));"
    "c.dispatchEvent(new MouseEvent('mousedown',{clientX:r.left+400,clientY:r.top+40,bubbles:true}));"
    "c.dispatchEvent(new MouseEvent('mousemove',{clientX:r.left+300,clientY:r.top+40,bubbles:true}));"
    "window.dispatchEvent(new MouseEvent('mouseup',{}));"
    "document.querySelector('.legend span').click();"
    "var dimmed=document.querySelectorAll('.legend span.dim').length;"
    "R.setAttribute('data-kt-hover',found?'yes':'no');R.setAttribute('data-kt-dimmed',String(dimmed));"
    "var t=document.createElement('pre');t.id='kt-tip-text';t.textContent=found;document.body.appendChild(t);"
    "}catch(e){R.setAttribute('data-kt-hover','error '+e.message);}})();</script>";

/* The plain report of snapshot arg followed by a test script. */
static int plain_then(FILE *out, void *arg, const char *script)
{
    int rc = kt_report_print(out, (const kt_snapshot_t *)arg, KT_FORMAT_HTML, NULL);
    fputs(script, out);
    return rc;
}

static int write_interactive(FILE *out, void *arg) { return plain_then(out, arg, kInteract); }

/* A script run after the report has drawn: measures what a person would see and reports it as attributes of
 * the root element: whether the kernel table fits its box, which of its columns are in view, empty cards,
 * overlapping tick labels of the speedup plot, and whether each distribution caption's p50 is a p50 of the
 * kernel table. */
static const char kFit[] =
    "<script>(function(){var R=document.documentElement;try{"
    "var t=document.getElementById('kt-kernels');"
    "if(t){var sc=t.parentNode,sr=sc.getBoundingClientRect();"
    "R.setAttribute('data-kt-table-fits',sc.scrollWidth<=sc.clientWidth+1?'yes':'no '+sc.scrollWidth+'>'+sc.clientWidth);"
    "var th=t.querySelectorAll('th'),vis=[],p50col=-1;"
    "for(var i=0;i<th.length;i++){var r=th[i].getBoundingClientRect();if(th[i].textContent.indexOf('p50')===0)p50col=i;"
    "if(r.width>0&&r.right<=sr.right+1)vis.push(th[i].textContent.replace(/[^a-z0-9]/g,''));}"
    "R.setAttribute('data-kt-cols',vis.join(','));"
    "var p50s={};t.querySelectorAll('tbody tr').forEach(function(tr){p50s[tr.children[p50col].textContent]=1;});"
    "var bad=0;document.querySelectorAll('.dist').forEach(function(d){var sub=d.querySelectorAll('.sub');"
    "var m=/p50 ([^\\u00b7]+) \\u00b7/.exec(sub[sub.length-1].textContent);if(!m||!p50s[m[1]])bad++;});"
    "R.setAttribute('data-kt-caption-mismatch',String(bad));}"
    "var empty=0;document.querySelectorAll('main section').forEach(function(s){"
    "if(!s.textContent.trim()&&!s.querySelector('canvas,svg'))empty++;});"
    "R.setAttribute('data-kt-empty-sections',String(empty));"
    "var tk=document.querySelectorAll('.cmp-tick'),ov=0;"
    "for(var a=0;a<tk.length;a++)for(var b=a+1;b<tk.length;b++){var x=tk[a].getBoundingClientRect(),"
    "y=tk[b].getBoundingClientRect();if(x.left<y.right&&y.left<x.right&&x.top<y.bottom&&y.top<x.bottom)ov++;}"
    "R.setAttribute('data-kt-tick-overlaps',String(ov)+' of '+tk.length);"
    "}catch(e){R.setAttribute('data-kt-layout-error',e.message);}})();</script>";

static int write_fit(FILE *out, void *arg) { return plain_then(out, arg, kFit); }

static int write_compare_fit(FILE *out, void *arg)
{
    const compare_arg_t *c = arg;
    int rc = kt_report_compare_html(out, c->before, c->after, c->json);
    fputs(kFit, out);
    return rc;
}

static const char *root_attr(const char *dom, const char *name, char *buf, size_t cap);

/* The plain report of snap with kFit, rendered at width px: drawn cleanly and its kernel table fits. */
static char *render_fitting(kt_snapshot_t *snap, int width)
{
    char buf[256];
    g_width = width;
    char *dom = render(write_fit, snap);
    g_width = 0;
    assert_drawn(dom);
    if (strcmp(root_attr(dom, "data-kt-table-fits", buf, sizeof buf), "yes"))
        fail_msg("at %d px the kernel table does not fit: %s", width, buf);
    return dom;
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* ---------------------------------------------------------------------------------------------------
 * Tests
 * ------------------------------------------------------------------------------------------------- */

static void test_plain(void **state)
{
    (void)state;
    kt_snapshot_t *snap = trf_snapshot(1);
    char *dom = render(write_plain, snap);
    assert_drawn(dom);
    /* the kernel table has one row per entry, the distributions one card each, the timeline a canvas */
    const char *table = strstr(dom, "id=\"kt-kernels\"");
    assert_non_null(table);
    assert_int_equal(count(dom, "class=\"dist\""), TRF_ENTRY_COUNT);
    assert_int_equal(count(dom, "aria-label=\"duration histogram of "), TRF_ENTRY_COUNT);
    assert_non_null(strstr(dom, "<canvas"));
    assert_non_null(strstr(dom, "saxpy"));
    assert_non_null(strstr(dom, "llvmpipe (LLVM 15.0.6, 256 bits)"));
    /* the hostile kernel name arrives as text, not markup */
    assert_non_null(strstr(dom, "we\"ird&lt;/script&gt;&lt;b&gt;&amp;"));
    assert_null(strstr(dom, "id=\"kt-compare-view\""));
    free(dom);
    kt_snapshot_free(snap);
}

static void test_interaction(void **state)
{
    (void)state;
    kt_snapshot_t *snap = trf_snapshot(1);
    char *dom = render(write_interactive, snap);
    assert_drawn(dom);
    if (!strstr(dom, "data-kt-hover=\"yes\"")) {
        const char *h = strstr(dom, "data-kt-hover");
        fail_msg("no tooltip while hovering the timeline: %.120s", h ? h : "(no attribute)");
    }
    const char *tip = strstr(dom, "id=\"kt-tip-text\"");
    assert_non_null(tip);
    assert_non_null(strstr(tip, "duration")); /* the tooltip lists the span's times */
    /* one kernel highlighted from the legend: every other one dimmed */
    char want[64];
    snprintf(want, sizeof want, "data-kt-dimmed=\"%d\"", TRF_ENTRY_COUNT - 1);
    assert_non_null(strstr(dom, want));
    free(dom);
    kt_snapshot_free(snap);
}

static void test_compare(void **state)
{
    (void)state;
    kt_snapshot_t *after = trf_snapshot(1), *before = trf_before_snapshot();
    compare_arg_t arg = {before, after, trf_compare_json};
    char *dom = render(write_compare, &arg);
    assert_drawn(dom);
    assert_non_null(strstr(dom, "Speedup per kernel"));
    assert_non_null(strstr(dom, "aria-label=\"speedup per kernel\""));
    assert_int_equal(count(dom, "class=\"tag FASTER\""), 1);
    assert_int_equal(count(dom, "class=\"tag SLOWER\""), 1);
    assert_int_equal(count(dom, "class=\"tag SAME\""), 1);
    assert_non_null(strstr(dom, "1.50\xc3\x97"));               /* blur's speedup */
    assert_non_null(strstr(dom, "Only in before: host_prep_v0")); /* one-sided kernels listed */
    free(dom);

    /* without a compare document: ratios of medians, no verdicts */
    arg.json = NULL;
    dom = render(write_compare, &arg);
    assert_drawn(dom);
    assert_non_null(strstr(dom, "No `ktiming compare` result was given"));
    assert_int_equal(count(dom, "class=\"tag FASTER\""), 0);
    free(dom);

    /* a broken document (with a script-ending sequence in it) is reported on the page, which still draws */
    arg.json = "{\"rows\":[</script><script>window.KT_INJECTED=1</script>";
    dom = render(write_compare, &arg);
    assert_drawn(dom);
    assert_non_null(strstr(dom, "The comparison document did not parse"));
    free(dom);
    kt_snapshot_free(after);
    kt_snapshot_free(before);
}

static void test_empty(void **state)
{
    (void)state;
    kt_snapshot_t *empty = calloc(1, sizeof *empty);
    char *dom = render(write_plain, empty);
    assert_drawn(dom);
    assert_non_null(strstr(dom, "No kernels were recorded."));
    assert_non_null(strstr(dom, "No spans were recorded"));
    free(dom);
    kt_snapshot_free(empty);
}

/* Many spans and samples: still drawn (the timeline culls and merges sub-pixel spans). */
static void test_large(void **state)
{
    (void)state;
    kt_snapshot_t *snap = trf_snapshot(8);
    size_t n = 40000;
    kt_span_t *spans = calloc(n, sizeof *spans);
    assert_non_null(spans);
    for (size_t i = 0; i < n; i++)
        trf_span(&spans[i], (uint32_t)(i % 3 ? TRF_SAXPY_CL : TRF_BLUR_CL), (uint32_t)(i % 2), (uint32_t)(i % 2),
                 KT_SPAN_DEVICE, TRF_BASE_NS + i * 1000, TRF_BASE_NS + 5000 + i * 1000, 900);
    free(snap->spans);
    snap->spans = spans;
    snap->span_count = n;
    char *dom = render(write_plain, snap);
    assert_drawn(dom);
    assert_non_null(strstr(dom, "<canvas"));
    free(dom);
    kt_snapshot_free(snap);
}

/* A script run after the report: checks the axis labels of every distribution plot (no two label boxes
 * intersect, none reaches outside its plot) and of the timeline (inside the canvas), reads the flow-arrow
 * count of the timeline, and lists each kernel's colour from the legend, as attributes and a <pre>. */
static const char kLayout[] =
    "<script>(function(){var R=document.documentElement;try{"
    "var overlaps=0,clipped=0,labels=0;"
    "Array.prototype.forEach.call(document.querySelectorAll('.dist svg'),function(svg){"
    "var sr=svg.getBoundingClientRect(),b=Array.prototype.map.call(svg.querySelectorAll('text.tick'),"
    "function(t){return t.getBoundingClientRect();});labels+=b.length;"
    "b.forEach(function(r,i){if(r.left<sr.left-0.5||r.right>sr.right+0.5)clipped++;"
    "for(var j=i+1;j<b.length;j++){var q=b[j];if(r.left<q.right&&q.left<r.right&&r.top<q.bottom&&q.top<r.bottom)"
    "overlaps++;}});});"
    "R.setAttribute('data-kt-ticklabels',String(labels));R.setAttribute('data-kt-overlaps',String(overlaps));"
    "R.setAttribute('data-kt-clipped',String(clipped));"
    "var c=document.querySelector('#kt-timeline canvas'),ax=(c&&c.getAttribute('data-kt-axis')||'').split(',');"
    "R.setAttribute('data-kt-axis-inside',ax.length===3&&+ax[0]>=0&&+ax[1]<=+ax[2]?'yes':'no '+ax.join(','));"
    "R.setAttribute('data-kt-flowinfo',c?c.getAttribute('data-kt-flows')||'':'');"
    "var cols=Array.prototype.map.call(document.querySelectorAll('.legend span'),function(sp){"
    "return sp.textContent+'='+sp.querySelector('.swatch').style.background;}).sort();"
    "var t=document.createElement('pre');t.id='kt-colors';t.textContent=cols.join('\\n');document.body.appendChild(t);"
    "}catch(e){R.setAttribute('data-kt-layout','error '+e.message);}})();</script>";

static int write_layout(FILE *out, void *arg) { return plain_then(out, arg, kLayout); }

/* The value of attribute `name` on the root element, copied into buf. */
static const char *root_attr(const char *dom, const char *name, char *buf, size_t cap)
{
    char pat[64];
    snprintf(pat, sizeof pat, "%s=\"", name);
    const char *root = strstr(dom, "<html"), *end = root ? strchr(root, '>') : NULL, *at = root ? strstr(root, pat) : NULL;
    if (!at || at > end)
        fail_msg("no %s on the root element", name);
    at += strlen(pat);
    const char *q = strchr(at, '"');
    snprintf(buf, cap, "%.*s", (int)(q - at), at);
    return buf;
}

/* Gives entry i samples spread log-uniformly over [lo, hi]: a distribution plot with a log axis and many
 * candidate tick labels (500 us, 1 ms, 2 ms, ...). */
static void spread_samples(kt_snapshot_t *s, size_t i, double lo, double hi)
{
    kt_kernel_timing_t *e = &s->entries[i];
    for (uint32_t k = 0; k < e->sample_count; k++)
        e->samples[k] = (uint64_t)(lo * pow(hi / lo, (double)k / (e->sample_count - 1)));
}

/* The <pre id="kt-colors"> list, malloc'd. */
static char *colors_of(const char *dom)
{
    const char *at = strstr(dom, "id=\"kt-colors\">");
    assert_non_null(at);
    at = strchr(at, '>') + 1;
    const char *end = strstr(at, "</pre>");
    assert_non_null(end);
    char *out = calloc(1, (size_t)(end - at) + 1);
    memcpy(out, at, (size_t)(end - at));
    return out;
}

static void test_labels_colors_flows(void **state)
{
    (void)state;
    char buf[128];
    /* report 1: log axes with many ticks, 1,000 dispatches with flows on the timeline */
    kt_snapshot_t *one = trf_snapshot(25);
    spread_samples(one, TRF_BLUR_CL, 90000.0, 60000000.0);
    spread_samples(one, TRF_SAXPY_CL, 400.0, 3000000.0);
    size_t n = 1000;
    kt_span_t *spans = calloc(n, sizeof *spans);
    assert_non_null(spans);
    for (size_t i = 0; i < n; i++) {
        trf_span(&spans[i], (uint32_t)(i % 2 ? TRF_SAXPY_CL : TRF_BLUR_CL), (uint32_t)(i % 2), 0, KT_SPAN_DEVICE,
                 TRF_BASE_NS + i * 20000, TRF_BASE_NS + 15000 + i * 20000, 900);
        spans[i].enqueue_ns = TRF_BASE_NS + i * 20000 - 5000;
    }
    free(one->spans);
    one->spans = spans;
    one->span_count = n;
    char *dom = render(write_layout, one);
    assert_drawn(dom);
    print_message("tick labels %s, overlaps %s, clipped %s; timeline axis inside: %s; flows: %s\n",
                  root_attr(dom, "data-kt-ticklabels", buf, sizeof buf), root_attr(dom, "data-kt-overlaps", buf + 16, 16),
                  root_attr(dom, "data-kt-clipped", buf + 32, 16), root_attr(dom, "data-kt-axis-inside", buf + 48, 40),
                  root_attr(dom, "data-kt-flowinfo", buf + 88, 40));
    assert_true(atoi(root_attr(dom, "data-kt-ticklabels", buf, sizeof buf)) >= 2 * TRF_ENTRY_COUNT);
    assert_string_equal(root_attr(dom, "data-kt-overlaps", buf, sizeof buf), "0");
    assert_string_equal(root_attr(dom, "data-kt-clipped", buf, sizeof buf), "0");
    assert_string_equal(root_attr(dom, "data-kt-axis-inside", buf, sizeof buf), "yes");
    /* 1,000 flows are bundled: far fewer curves than flows */
    int drawn = -1, bundles = -1, flows = -1;
    assert_int_equal(sscanf(root_attr(dom, "data-kt-flowinfo", buf, sizeof buf), "%d drawn, %d bundles, %d flows", &drawn,
                            &bundles, &flows),
                     3);
    assert_true(flows >= 900);
    assert_true(bundles > 0 && drawn <= 300);
    char *c1 = colors_of(dom);
    free(dom);

    /* report 2: the same program's kernels in another run (other totals, one kernel missing, another order) */
    kt_snapshot_t *two = trf_snapshot(1);
    free((void *)two->entries[TRF_HOST_PREP].name);
    two->entries[TRF_HOST_PREP].name = strdup("zz_other");
    two->entries[TRF_SCAN_VK].total_ns *= 1000;
    dom = render(write_layout, two);
    assert_drawn(dom);
    char *c2 = colors_of(dom);
    free(dom);
    /* every kernel present in both has the same colour */
    size_t common = 0;
    for (char *line = strtok(c2, "\n"); line; line = strtok(NULL, "\n")) {
        char *eq = strrchr(line, '=');
        assert_non_null(eq);
        if (strncmp(line, "zz_other", 8) == 0)
            continue;
        assert_non_null(strstr(c1, line));
        common++;
    }
    assert_int_equal(common, TRF_ENTRY_COUNT - 1);
    print_message("colours report 1:\n%s\n", c1);
    free(c1);
    free(c2);
    kt_snapshot_free(one);
    kt_snapshot_free(two);
}

/* A merged snapshot of four ranks draws the load-balance section: per kernel one bar per rank, the slowest rank's
 * bar red, and the imbalance (max / mean of the per-rank totals) and slowest rank named. */
/* What a person sees at 1400 and 1000 px: the kernel table fits (errors and dropped always in view), no empty
 * card, Vulkan submission batches neither in the table nor in the device time, long device titles on the timeline
 * cut with an ellipsis inside the label column, one p50 per kernel (caption = table), and the speedup axis's labels
 * apart. */
static void test_layout(void **state)
{
    (void)state;
    static const char kLongDev[] = "NVIDIA H100 80GB HBM3 with a long marketing name #3 (0000:41:00.0)";
    kt_snapshot_t *snap = trf_snapshot(1);
    size_t n = snap->count;
    snap->entries = realloc(snap->entries, (n + 3) * sizeof *snap->entries);
    assert_non_null(snap->entries);
    memset(&snap->entries[n], 0, 3 * sizeof *snap->entries);
    /* a batch of 283.1 ms around the Vulkan dispatches, and a long-named kernel on a long-named device */
    trf_entry(&snap->entries[n], "vkQueueSubmit", KT_BACKEND_VULKAN, "llvmpipe (LLVM 15.0.6, 256 bits)", 2831000, 100);
    trf_entry(&snap->entries[n + 1], "very_long_kernel_name_from_a_template_instantiation<float, 256, true>::run",
              KT_BACKEND_VULKAN, kLongDev, 3000, 10);
    snap->entries[n + 1].errors = 3;
    snap->entries[n + 1].dropped = 5;
    /* host API time: 7 calls of clFinish, a card of its own, not device time */
    trf_entry(&snap->entries[n + 2], "clFinish", KT_BACKEND_HOST_API, "host", 900000, 7);
    snap->count = n + 3;
    snprintf(snap->queues[2].device, sizeof snap->queues[2].device, "%s", kLongDev);
    free((char *)snap->entries[TRF_SCAN_VK].device);
    snap->entries[TRF_SCAN_VK].device = trf_strdup(kLongDev);
    snprintf(snap->devices[1].name, sizeof snap->devices[1].name, "%s", kLongDev);
    uint64_t device_total = 0;
    for (size_t i = 0; i < snap->count; i++)
        if (snap->entries[i].backend != KT_BACKEND_CPU && snap->entries[i].backend != KT_BACKEND_HOST_API && i != n)
            device_total += snap->entries[i].total_ns;
    char want_dev[32];
    snprintf(want_dev, sizeof want_dev, ">%.4g ms<", (double)device_total / 1e6);

    static const int kWidths[] = {1400, 1000};
    char buf[256];
    for (size_t w = 0; w < sizeof kWidths / sizeof kWidths[0]; w++) {
        char *dom = render_fitting(snap, kWidths[w]);
        const char *cols = root_attr(dom, "data-kt-cols", buf, sizeof buf);
        if (!strstr(cols, "errors") || !strstr(cols, "dropped") || !strstr(cols, "total"))
            fail_msg("at %d px columns in view: %s", kWidths[w], cols);
        assert_string_equal(root_attr(dom, "data-kt-empty-sections", buf, sizeof buf), "0");
        assert_string_equal(root_attr(dom, "data-kt-caption-mismatch", buf, sizeof buf), "0");
        /* the batch is a note under the table, not a row, and not in the device time */
        const char *tbody = strstr(dom, "<tbody>"), *tend = tbody ? strstr(tbody, "</tbody>") : NULL;
        assert_non_null(tend);
        const char *in_table = strstr(tbody, ">vkQueueSubmit<");
        assert_true(!in_table || in_table > tend);
        assert_non_null(strstr(dom, "id=\"kt-batches\""));
        if (!strstr(dom, want_dev))
            fail_msg("device time card lacks %s", want_dev);
        assert_non_null(strstr(dom, "waited on the GPU (7 calls)"));
        /* the long device's group title on the timeline is cut with an ellipsis */
        const char *titles = strstr(dom, "data-kt-titles=\"");
        assert_non_null(titles);
        const char *cut = strstr(titles, "Vulkan \xc2\xb7 NVIDIA");
        assert_non_null(cut);
        const char *bar = strpbrk(cut, "|\"");
        assert_non_null(bar);
        assert_memory_equal(bar - 3, "\xe2\x80\xa6", 3);
        free(dom);
    }

    kt_snapshot_t *before = trf_before_snapshot();
    compare_arg_t arg = {before, snap, trf_compare_json};
    g_width = 1400;
    char *dom = render(write_compare_fit, &arg);
    g_width = 0;
    assert_drawn(dom);
    const char *ov = root_attr(dom, "data-kt-tick-overlaps", buf, sizeof buf);
    if (strncmp(ov, "0 of ", 5) != 0 || !strcmp(ov, "0 of 0"))
        fail_msg("speedup axis labels overlap (or none drawn): %s", ov);
    free(dom);
    kt_snapshot_free(before);
    kt_snapshot_free(snap);
}

static void test_ranks(void **state)
{
    (void)state;
    /* per rank, the total of k1 and of k2: rank 2 is slowest on k1 (imbalance 200 / 125 = 1.600), rank 0 on k2
     * (400 / 175 = 2.286) */
    const unsigned k1[4] = {100, 100, 200, 100}, k2[4] = {400, 100, 100, 100};
    kt_snapshot_t *in[4];
    for (int r = 0; r < 4; r++) {
        char json[1024];
        snprintf(json, sizeof json,
                 "{\"schema\":\"ktiming.snapshot\",\"version\":2,\"host\":\"node%d\",\"pid\":%d,\"rank\":%d,"
                 "\"entries\":[{\"name\":\"k1\",\"backend\":\"cpu\",\"dispatch_count\":1,\"total_ns\":%u,"
                 "\"min_ns\":%u,\"max_ns\":%u},{\"name\":\"k2\",\"backend\":\"cpu\",\"dispatch_count\":1,"
                 "\"total_ns\":%u,\"min_ns\":%u,\"max_ns\":%u}]}",
                 r / 2, 100 + r, r, k1[r], k1[r], k1[r], k2[r], k2[r], k2[r]);
        char err[256] = "";
        if (kt_snapshot_parse(json, strlen(json), &in[r], err, sizeof err) != 0)
            fail_msg("rank %d: %s", r, err);
    }
    kt_snapshot_t *merged = NULL;
    assert_int_equal(kt_snapshot_merge((const kt_snapshot_t *const *)in, 4, NULL, &merged), 0);
    assert_int_equal(merged->source_count, 4);
    char *dom = render(write_plain, merged);
    assert_drawn(dom);
    assert_non_null(strstr(dom, "Load balance across ranks"));
    assert_int_equal(count(dom, "class=\"kt-rank-bars\""), 2);
    assert_int_equal(count(dom, "fill=\"#d83b3b\""), 2); /* one slowest bar per kernel */
    assert_non_null(strstr(dom, "imbalance 1.600 · slowest rank 2"));
    assert_non_null(strstr(dom, "imbalance 2.286 · slowest rank 0"));
    assert_non_null(strstr(dom, "<title>rank 3: "));
    free(dom);
    kt_snapshot_free(merged);
    for (int r = 0; r < 4; r++) kt_snapshot_free(in[r]);
}

/* Launch configurations (issue 40.2): the kernel table's "configs" column (the count, the breakdown on hover) and
 * the table of configurations under it, at 1400 and 1000 px, with the kernel table still fitting. blur's 40
 * dispatches: 25 with global 1024x768 local 16x16, 10 with local NULL, 5 without a configuration ("none"). */
static void test_configs(void **state)
{
    (void)state;
    kt_snapshot_t *snap = trf_snapshot(1);
    kt_kernel_timing_t *e = &snap->entries[TRF_BLUR_CL];
    e->configs = calloc(2, sizeof *e->configs);
    assert_non_null(e->configs);
    e->config_count = 2;
    e->configs[0] = (kt_config_timing_t){{KT_LAUNCH_ITEMS, 2, {1024, 768, 0}, {16, 16, 0}}, 25, 25 * 420000, 420000,
                                         480000};
    e->configs[1] = (kt_config_timing_t){{KT_LAUNCH_ITEMS, 2, {1024, 768, 0}, {0, 0, 0}}, 10, 10 * 430000, 430000,
                                         440000};
    static const int kWidths[] = {1400, 1000};
    char buf[256];
    for (size_t w = 0; w < sizeof kWidths / sizeof kWidths[0]; w++) {
        char *dom = render_fitting(snap, kWidths[w]);
        if (!strstr(root_attr(dom, "data-kt-cols", buf, sizeof buf), "configs"))
            fail_msg("at %d px the configs column is not in view: %s", kWidths[w], buf);
        /* the column: 2 on blur's row, with the breakdown as its title */
        assert_non_null(strstr(dom, "<span class=\"cfgs\" title=\"global=1024x768 local=16x16: 25 dispatches"));
        const char *t = strstr(dom, "id=\"kt-configs\"");
        assert_non_null(t);
        const char *a = strstr(t, ">global=1024x768 local=16x16<"), *b = strstr(t, ">global=1024x768 local=auto<"),
                   *n = strstr(t, ">none<");
        assert_non_null(a);
        assert_non_null(b);
        assert_non_null(n);
        assert_true(a < b && b < n); /* largest total first, the rest last */
        assert_non_null(strstr(a, "<td>25</td>"));
        assert_non_null(strstr(b, "<td>10</td>"));
        assert_non_null(strstr(n, "<td>5</td>"));
        assert_int_equal(count(t, "<tr data-kernel="), 3); /* only blur has configurations */
        free(dom);
    }
    kt_snapshot_free(snap);
}

int main(void)
{
    if (access(KT_CHROMIUM, X_OK) != 0) {
        fprintf(stderr, "test_html: %s not found, skipping\n", KT_CHROMIUM);
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain),
        cmocka_unit_test(test_interaction),
        cmocka_unit_test(test_compare),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_large),
        cmocka_unit_test(test_labels_colors_flows),
        cmocka_unit_test(test_ranks),
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_configs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
