/* test_text.c — the text table: the seed's line shape, percentiles, counts, devices, alignment with long,
 * Unicode and control-character names, precision for sub-millisecond kernels, argument checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <regex.h>

#include "export/fixture.h"

/* Splits text into lines (modifies it); returns the number of lines. */
static size_t split_lines(char *text, char **lines, size_t max)
{
    size_t n = 0;
    for (char *p = text; *p && n < max;) {
        char *nl = strchr(p, '\n');
        lines[n++] = p;
        if (!nl)
            break;
        *nl = '\0';
        p = nl + 1;
    }
    return n;
}

/* Display column (code points) at which `needle` starts in line, or -1. */
static long column_of(const char *line, const char *needle)
{
    const char *at = strstr(line, needle);
    if (!at)
        return -1;
    long col = 0;
    for (const char *p = line; p < at; p++)
        if (((unsigned char)*p & 0xC0u) != 0x80u)
            col++;
    return col;
}

static void test_seed_line(void **state)
{
    (void)state;
    kt_snapshot_t *s = fx_snapshot_new(2);
    fx_entry(s, 0, "blur", KT_BACKEND_CPU, "host", 3, 12340000, 11980000, 14020000);
    fx_entry(s, 1, "vignette", KT_BACKEND_CPU, "host", 1, 3450000, 3210000, 4100000);
    int rc;
    char *out = fx_render(s, KT_FORMAT_TEXT, &rc);
    assert_int_equal(rc, 0);
    /* The seed's line, byte for byte, then the additions. */
    const char *seed = "[timing] blur                 CPU   avg=  12.34ms min=  11.98ms max=  14.02ms n=3 ";
    assert_memory_equal(out, seed, strlen(seed));
    regex_t re;
    assert_int_equal(regcomp(&re,
                             "^\\[timing\\] [^ ].{19} (CPU|OpenCL|Vulkan|CUDA|Metal) +avg= *[0-9]+\\.[0-9]{2,6}ms "
                             "min= *[0-9]+\\.[0-9]{2,6}ms max= *[0-9]+\\.[0-9]{2,6}ms n=[0-9]+ +p50= *[0-9.]+ms "
                             "p90= *[0-9.]+ms p99= *[0-9.]+ms$",
                             REG_EXTENDED | REG_NOSUB),
                     0);
    char *lines[8] = {0};
    size_t n = split_lines(out, lines, 8);
    assert_int_equal(n, 2);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(regexec(&re, lines[i], 0, NULL, 0), 0);
    assert_non_null(strstr(lines[0], "p50=  12.34ms p90=  13.18ms p99=  14.02ms"));
    assert_non_null(strstr(lines[1], "[timing] vignette             CPU   avg=   3.45ms min=   3.21ms max=   4.10ms n=1"));
    /* No error/drop counts and no device when they are zero / the host. */
    assert_null(strstr(out, "errors="));
    assert_null(strstr(out, "dropped="));
    assert_null(strstr(out, " on "));
    regfree(&re);
    free(out);
    fx_free(s);
}

static void test_counts_device_and_backend_column(void **state)
{
    (void)state;
    kt_snapshot_t *s = fx_snapshot_full();
    s->entries[2].spans_dropped = 7;
    int rc;
    char *out = fx_render(s, KT_FORMAT_TEXT, &rc);
    assert_int_equal(rc, 0);
    char *lines[8] = {0};
    size_t n = split_lines(out, lines, 8);
    assert_int_equal(n, 3);
    assert_null(strstr(lines[0], "errors="));
    assert_non_null(strstr(lines[1], " errors=2 dropped=1 on pthread-cpu"));
    assert_non_null(strstr(lines[2], " spans_dropped=7 on llvmpipe (LLVM 15.0.6, 256 bits)"));
    /* "OpenCL"/"Vulkan" are wider than the seed's 5 columns: the column widens for every row. */
    assert_non_null(strstr(lines[0], " CPU    avg="));
    assert_non_null(strstr(lines[1], " OpenCL avg="));
    for (size_t i = 1; i < n; i++) {
        assert_int_equal(column_of(lines[i], "avg="), column_of(lines[0], "avg="));
        assert_int_equal(column_of(lines[i], "p50="), column_of(lines[0], "p50="));
    }
    free(out);
    fx_free(s);
}

static void test_long_unicode_and_control_names(void **state)
{
    (void)state;
    char longname[128];
    for (int i = 0; i < 90; i++)
        longname[i] = (char)('a' + i % 26);
    longname[90] = '\0';
    memcpy(longname + 80, "_TAILEND99", 10);
    kt_snapshot_t *s = fx_snapshot_new(4);
    fx_entry(s, 0, "blur", KT_BACKEND_CPU, "host", 3, 12340000, 11980000, 14020000);
    fx_entry(s, 1, longname, KT_BACKEND_CPU, "host", 10, 1000000, 900000, 1100000);
    fx_entry(s, 2, "flou_\xc3\xa9t\xc3\xa9_\xe2\x9c\x93", KT_BACKEND_CPU, "host", 5, 2000000, 1500000, 2500000);
    fx_entry(s, 3, "bad\nname\t\x01\xff", KT_BACKEND_CPU, "host", 100, 1000000, 1000000, 1000000);
    int rc;
    char *out = fx_render(s, KT_FORMAT_TEXT, &rc);
    assert_int_equal(rc, 0);
    char *lines[8] = {0};
    size_t n = split_lines(out, lines, 8);
    assert_int_equal(n, 4); /* the newline inside a name did not add a line */
    long avg0 = column_of(lines[0], "avg=");
    assert_int_equal(avg0, (long)strlen("[timing] ") + 40 + 1 + 5 + 1); /* names capped at 40 columns */
    for (size_t i = 1; i < n; i++)
        assert_int_equal(column_of(lines[i], "avg="), avg0);
    /* The long name is shortened in the middle: its head and tail stay recognisable. */
    assert_non_null(strstr(lines[1], "[timing] abcdefghijklmnopqrs..."));
    assert_non_null(strstr(lines[1], "_TAILEND99 CPU"));
    assert_non_null(strstr(lines[2], "flou_\xc3\xa9t\xc3\xa9_\xe2\x9c\x93 "));
    assert_non_null(strstr(lines[3], "bad?name??? "));
    /* n is padded so the percentile columns line up whatever the count's width. */
    for (size_t i = 1; i < n; i++)
        assert_int_equal(column_of(lines[i], "p50="), column_of(lines[0], "p50="));
    free(out);
    fx_free(s);
}

static void test_submillisecond_precision(void **state)
{
    (void)state;
    kt_snapshot_t *s = fx_snapshot_new(2);
    fx_entry(s, 0, "tiny", KT_BACKEND_CUDA, "GPU 0", 10, 12300, 12100, 13400);
    fx_entry(s, 1, "big", KT_BACKEND_CUDA, "GPU 0", 10, 12345678900, 12345678900, 12345678900);
    int rc;
    char *out = fx_render(s, KT_FORMAT_TEXT, &rc);
    assert_int_equal(rc, 0);
    /* 12.3 us = 0.0123 ms keeps 3 significant digits; the widest value (12345.6789 ms) still fits. */
    assert_non_null(strstr(out, "avg=    0.0123ms min=    0.0121ms"));
    assert_non_null(strstr(out, "avg=12345.6789ms"));
    assert_non_null(strstr(out, " on GPU 0\n"));
    free(out);
    fx_free(s);
}

static void test_empty_and_arguments(void **state)
{
    (void)state;
    kt_snapshot_t *s = fx_snapshot_new(0);
    int rc;
    char *out = fx_render(s, KT_FORMAT_TEXT, &rc);
    assert_int_equal(rc, 0);
    assert_string_equal(out, "[timing] no kernels recorded\n");
    free(out);
    assert_int_equal(kt_report_print(NULL, s, KT_FORMAT_TEXT), KT_EINVAL);
    assert_int_equal(kt_report_print(stdout, NULL, KT_FORMAT_TEXT), KT_EINVAL);
    out = fx_render(s, (kt_format_t)99, &rc);
    assert_int_equal(rc, KT_EINVAL);
    free(out);
    fx_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_line),
        cmocka_unit_test(test_counts_device_and_backend_column),
        cmocka_unit_test(test_long_unicode_and_control_names),
        cmocka_unit_test(test_submillisecond_precision),
        cmocka_unit_test(test_empty_and_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
