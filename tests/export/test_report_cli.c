/* test_report_cli.c — `ktiming report FILE.json --format chrome|html [-o OUT]` on a saved snapshot: the trace
 * parses with the fixture's tracks and spans, the HTML page is one self-contained document with the data; and
 * `ktiming compare --format html` embeds the comparison in AFTER's report. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <ktiming.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/files.h"
#include "support/proc.h"
#include "trace_fixture.h"

static char *g_dir; /* the test's private directory */

/* The whole file (the test fails when it cannot be read). */
static char *slurp(const char *path)
{
    char *text = ktt_read_file(path, NULL);
    assert_non_null(text);
    return text;
}

static int report(const char *in, const char *format, const char *out)
{
    return ktt_run((char *const[]){KT_CLI, "report", (char *)in, "--format", (char *)format, "-o", (char *)out, NULL},
                   NULL);
}

static void test_chrome_and_html(void **state)
{
    (void)state;
    char in[1024], trace[1024], html[1024];
    snprintf(in, sizeof in, "%s/snap.json", g_dir);
    snprintf(trace, sizeof trace, "%s/trace.json", g_dir);
    snprintf(html, sizeof html, "%s/report.html", g_dir);
    kt_snapshot_t *snap = trf_snapshot(1);
    assert_int_equal(kt_report_write(in, snap, KT_FORMAT_JSON, NULL), 0);
    kt_snapshot_free(snap);

    assert_int_equal(report(in, "chrome", trace), 0);
    char *text = slurp(trace);
    cJSON *doc = cJSON_Parse(text);
    free(text);
    assert_non_null(doc);
    int x = 0, flows = 0, threads = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(doc, "traceEvents")) {
        const char *ph = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "ph"));
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "name"));
        x += !strcmp(ph, "X");
        flows += !strcmp(ph, "s");
        threads += !strcmp(ph, "M") && !strcmp(name, "thread_name");
    }
    cJSON_Delete(doc);
    assert_int_equal(x, TRF_HOST_SPANS + 2 * TRF_DEVICE_SPANS); /* spans + enqueue slices survive the round trip */
    assert_int_equal(flows, TRF_DEVICE_SPANS);
    assert_int_equal(threads, 6); /* 2 host threads, 3 queues, one extra lane */

    assert_int_equal(report(in, "html", html), 0);
    text = slurp(html);
    assert_true(!strncmp(text, "<!DOCTYPE html>", 15));
    assert_non_null(strstr(text, "id=\"kt-data\""));
    assert_non_null(strstr(text, "\"name\":\"saxpy\""));
    /* self-contained: no external script, stylesheet, image or import (the only URL is the SVG namespace) */
    assert_null(strstr(text, "<link"));
    assert_null(strstr(text, " src="));
    assert_null(strstr(text, "@import"));
    assert_null(strstr(text, "url("));
    assert_null(strstr(text, "https://"));
    free(text);
}

/* `ktiming compare BEFORE AFTER --format html -o OUT`: AFTER's report with the comparison document embedded. */
static void test_compare_html(void **state)
{
    (void)state;
    char before[1024], after[1024], out[1024];
    snprintf(before, sizeof before, "%s/before.json", g_dir);
    snprintf(after, sizeof after, "%s/after.json", g_dir);
    snprintf(out, sizeof out, "%s/compare.html", g_dir);
    kt_snapshot_t *b = trf_before_snapshot(), *a = trf_snapshot(1);
    assert_int_equal(kt_report_write(before, b, KT_FORMAT_JSON, NULL), 0);
    assert_int_equal(kt_report_write(after, a, KT_FORMAT_JSON, NULL), 0);
    kt_snapshot_free(b);
    kt_snapshot_free(a);
    assert_int_equal(ktt_run((char *const[]){KT_CLI, "compare", before, after, "--format", "html", "-o", out, NULL},
                             NULL),
                     0);
    char *text = slurp(out);
    assert_true(!strncmp(text, "<!DOCTYPE html>", 15));
    const char *cmp = strstr(text, "id=\"kt-compare\">");
    assert_non_null(cmp);
    assert_non_null(strstr(cmp, "\"ktiming_compare\""));  /* the analysis library's JSON, embedded */
    assert_non_null(strstr(cmp, "\"FASTER\"")); /* blur is 1.5x faster in the fixture */
    assert_non_null(strstr(text, "\"before\":{\"host\""));   /* both snapshots are in the page */
    free(text);
}

int main(void)
{
    if (!(g_dir = ktt_tmpdir("report-cli")))
        return 1;
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_chrome_and_html), cmocka_unit_test(test_compare_html)};
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    ktt_rmtree(g_dir);
    free(g_dir);
    return rc;
}
