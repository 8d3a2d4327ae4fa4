/* test_hostile.c — the same hostile names (terminal controls, a line break faking a table row, a bidi override,
 * a C1 CSI) fed to every output: report text, markdown, CSV, JSON, Chrome trace, HTML, the --by-rank report of a
 * merge, and compare's text, markdown and JSON. None may carry a raw control to the terminal or start a line the
 * name forged. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <ktiming.h>
#include <ktiming/analysis.h>
#include <ktiming/compare.h>

#define HOSTILE_KERNEL "t\x1b]0;owned\x07\x1b[2J\r\nfake row\xe2\x80\xae\xc2\x9b"
#define HOSTILE_DEVICE "d\x1b[31m\r\nfake dev"
#define HOSTILE_HOST "h\x1b]0;x\x07\r\nfake host"

/* Fails when out holds a raw control a terminal would act on (CSV's CRLF line ends aside), or a line starting with text a name forged. */
static void assert_inert(const char *what, const char *out)
{
    const unsigned char *p = (const unsigned char *)out;
    for (size_t i = 0; p[i]; i++) {
        if ((p[i] < 0x20 && p[i] != '\n' && p[i] != '\t' && !(p[i] == '\r' && p[i + 1] == '\n')) || p[i] == 0x7f)
            fail_msg("%s: raw control 0x%02x at byte %zu", what, p[i], i);
        if (p[i] == 0xc2 && p[i + 1] >= 0x80 && p[i + 1] <= 0x9f)
            fail_msg("%s: raw C1 control at byte %zu", what, i);
        if (p[i] == 0xe2 && p[i + 1] == 0x80 && p[i + 2] == 0xae)
            fail_msg("%s: raw bidi override at byte %zu", what, i);
        if ((i == 0 || p[i - 1] == '\n') && !strncmp((const char *)p + i, "fake", 4))
            fail_msg("%s: a name started a line at byte %zu", what, i);
    }
}

static char *capture_report(const kt_snapshot_t *s, kt_format_t f)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    assert_non_null(m);
    int rc = kt_report_print(m, s, f, NULL);
    fclose(m);
    assert_int_equal(rc, 0);
    return buf;
}

static kt_snapshot_t *hostile_snapshot(int64_t pid)
{
    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    snprintf(s->host, sizeof s->host, "%s", HOSTILE_HOST);
    s->pid = pid;
    return s;
}

static void test_every_format(void **state)
{
    (void)state;
    kt_reset();
    kt_kernel_id_t k = kt_kernel_intern(HOSTILE_KERNEL, KT_BACKEND_OPENCL, HOSTILE_DEVICE);
    assert_true(k != 0);
    for (uint64_t d = 1; d <= 20; d++)
        kt_record_dispatch(&(kt_dispatch_t){.kernel = k, .duration_ns = 1000 + d * 10});
    kt_snapshot_t *a = hostile_snapshot(101), *b = hostile_snapshot(102), *merged = NULL;
    const kt_snapshot_t *in[2] = {a, b};
    assert_int_equal(kt_snapshot_merge(in, 2, NULL, &merged), 0);
    assert_true(merged->source_count == 2);

    static const struct {
        kt_format_t f;
        const char *name;
    } kFormats[] = {{KT_FORMAT_TEXT, "text"},     {KT_FORMAT_MARKDOWN, "markdown"}, {KT_FORMAT_CSV, "csv"},
                    {KT_FORMAT_JSON, "json"},     {KT_FORMAT_CHROME, "chrome"},     {KT_FORMAT_HTML, "html"}};
    for (size_t i = 0; i < sizeof kFormats / sizeof kFormats[0]; i++) {
        for (int m = 0; m < 2; m++) {
            char what[64];
            snprintf(what, sizeof what, "report %s%s", kFormats[i].name, m ? " (merged)" : "");
            char *out = capture_report(m ? merged : a, kFormats[i].f);
            assert_inert(what, out);
            free(out);
        }
    }

    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    assert_int_equal(kt_report_by_rank(mem, merged), 0);
    fclose(mem);
    assert_inert("by-rank", buf);
    assert_non_null(strstr(buf, "\\x1b]0;owned")); /* the name is there, escaped */
    assert_non_null(strstr(buf, "host h\\x1b]0;x"));
    free(buf);

    kt_compare_result_t r;
    assert_int_equal(kt_compare(a, b, NULL, &r), 0);
    static const struct {
        kt_compare_format_t f;
        const char *name;
    } kCompare[] = {{KT_COMPARE_TEXT, "compare text"}, {KT_COMPARE_MARKDOWN, "compare markdown"},
                    {KT_COMPARE_JSON, "compare json"}};
    for (size_t i = 0; i < sizeof kCompare / sizeof kCompare[0]; i++) {
        buf = NULL;
        mem = open_memstream(&buf, &len);
        assert_int_equal(kt_compare_print(mem, &r, kCompare[i].f), 0);
        fclose(mem);
        assert_inert(kCompare[i].name, buf);
        free(buf);
    }
    kt_compare_free(&r);
    kt_snapshot_free(merged);
    kt_snapshot_free(a);
    kt_snapshot_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_every_format)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
