/* test_text.c — the text table and its markdown form: header and columns, a unit per value, sorting and
 * filtering, counts and devices, alignment with long and Unicode names, hostile names escaped in every
 * human-readable format (and CSV cells neutralised), argument checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <regex.h>

#include "support/snapshot_fixture.h"

/* getenv, counting reads of the locale's variables (the library's calls resolve to this one): scans environ as
 * libc's does. */
extern char **environ;
static unsigned g_locale_reads;
char *getenv(const char *name)
{
    if (!strcmp(name, "LC_ALL") || !strcmp(name, "LC_CTYPE") || !strcmp(name, "LANG"))
        g_locale_reads++;
    size_t n = strlen(name);
    for (char **e = environ; e && *e; e++)
        if (!strncmp(*e, name, n) && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

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

/* Display column (code points) at which `needle` ends in line, or -1. */
static long column_after(const char *line, const char *needle)
{
    const char *at = strstr(line, needle);
    if (!at)
        return -1;
    long col = 0;
    for (const char *p = line; p < at + strlen(needle); p++)
        if (((unsigned char)*p & 0xC0u) != 0x80u)
            col++;
    return col;
}

/* Display width of a line. */
static long cols_of(const char *line) { return column_after(line, line); }

static char *render_opts(const kt_snapshot_t *s, kt_format_t fmt, kt_sort_t sort, const char *filter, int *rc)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    kt_report_opts_t o = {.sort = sort, .filter = filter};
    *rc = kt_report_print(f, s, fmt, &o);
    fclose(f);
    return buf;
}

static void test_header_columns_and_units(void **state)
{
    (void)state;
    kt_snapshot_t *s = fx_snapshot_new(3);
    fx_entry(s, 0, "blur", KT_BACKEND_CPU, "host", 3, 12340000, 11980000, 14020000);
    fx_entry(s, 1, "tiny", KT_BACKEND_CPU, "host", 1000, 812, 640, 2500);
    fx_entry(s, 2, "huge", KT_BACKEND_CPU, "host", 2, 2500000004ull, 2400000000ull, 2600000000ull);
    int rc;
    char *out = fx_render(s, KT_FORMAT_TEXT, &rc);
    assert_int_equal(rc, 0);
    char *lines[8] = {0};
    size_t n = split_lines(out, lines, 8);
    assert_int_equal(n, 4);
    regex_t head;
    assert_int_equal(regcomp(&head,
                             "^\\[timing\\] kernel +backend +n +total +% +mean +stddev +min +p50 +p90 +p99 +max$",
                             REG_EXTENDED | REG_NOSUB),
                     0);
    assert_int_equal(regexec(&head, lines[0], 0, NULL, 0), 0);
    regfree(&head);
    /* every line keeps the prefix and has the same width; sorted by total: huge, blur, tiny */
    for (size_t i = 0; i < n; i++) {
        assert_memory_equal(lines[i], "[timing] ", 9);
        assert_int_equal(cols_of(lines[i]), cols_of(lines[0]));
    }
    assert_non_null(strstr(lines[1], "[timing] huge "));
    assert_non_null(strstr(lines[2], "[timing] blur "));
    assert_non_null(strstr(lines[3], "[timing] tiny "));
    /* a unit per value: seconds, milliseconds, microseconds, nanoseconds; no ms-with-many-digits */
    assert_non_null(strstr(lines[1], " 5.000 s "));   /* total */
    assert_non_null(strstr(lines[1], " 2.500 s "));   /* mean 2500.000004 ms */
    assert_non_null(strstr(lines[2], " 37.02 ms "));  /* total */
    assert_non_null(strstr(lines[2], " 12.34 ms "));  /* mean */
    assert_non_null(strstr(lines[3], " 812.0 \xc2\xb5s ")); /* total of 1000 x 812 ns */
    assert_non_null(strstr(lines[3], " 812 ns "));    /* mean */
    assert_non_null(strstr(lines[3], " 2.500 \xc2\xb5s")); /* max, the last column */
    assert_null(strstr(out, "avg="));
    /* the same table under a locale that is not UTF-8: "us", and no byte of the micro sign anywhere */
    setenv("LC_ALL", "C", 1);
    char *plain = fx_render(s, KT_FORMAT_TEXT, &rc);
    setenv("LC_ALL", "C.UTF-8", 1);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(plain, " 812.0 us "));
    assert_null(strstr(plain, "\xc2"));
    free(plain);
    /* shares of the total add up: 5 s of 5.038 s */
    assert_non_null(strstr(lines[1], " 99.2% "));
    assert_non_null(strstr(lines[3], " 0.0% "));
    /* right-aligned columns: every row's "mean" cell ends where the header's does */
    long mean_end = column_after(lines[0], "mean");
    assert_int_equal(column_after(lines[1], "2.500 s"), mean_end);
    assert_int_equal(column_after(lines[2], "12.34 ms"), mean_end);
    assert_int_equal(column_after(lines[3], "812 ns"), mean_end);
    free(out);
    fx_free(s);
}

static void test_sort_and_filter(void **state)
{
    (void)state;
    kt_snapshot_t *s = fx_snapshot_new(3);
    fx_entry(s, 0, "a_many", KT_BACKEND_CPU, "host", 1000, 1000, 900, 1100);   /* total 1 ms */
    fx_entry(s, 1, "b_slow", KT_BACKEND_CPU, "host", 2, 5000000, 4000000, 6000000); /* total 10 ms */
    fx_entry(s, 2, "c_mid", KT_BACKEND_CPU, "host", 10, 200000, 100000, 300000); /* total 2 ms */
    static const struct {
        kt_sort_t sort;
        const char *order[3];
    } kCases[] = {{KT_SORT_TOTAL, {"b_slow", "c_mid", "a_many"}},
                  {KT_SORT_NAME, {"a_many", "b_slow", "c_mid"}},
                  {KT_SORT_MEAN, {"b_slow", "c_mid", "a_many"}},
                  {KT_SORT_COUNT, {"a_many", "c_mid", "b_slow"}}};
    for (size_t k = 0; k < sizeof kCases / sizeof kCases[0]; k++) {
        int rc;
        char *out = render_opts(s, KT_FORMAT_TEXT, kCases[k].sort, NULL, &rc);
        assert_int_equal(rc, 0);
        char *lines[8] = {0};
        assert_int_equal(split_lines(out, lines, 8), 4);
        for (int i = 0; i < 3; i++)
            assert_non_null(strstr(lines[1 + i], kCases[k].order[i]));
        free(out);
    }
    int rc;
    char *out = render_opts(s, KT_FORMAT_TEXT, KT_SORT_NAME, "*_m*", &rc);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "a_many"));
    assert_non_null(strstr(out, "c_mid"));
    assert_null(strstr(out, "b_slow"));
    assert_non_null(strstr(out, "[timing] 2 of 3 kernels shown (filter)\n"));
    /* the share stays a share of the whole snapshot */
    assert_non_null(strstr(out, " 7.7% "));
    free(out);
    out = render_opts(s, KT_FORMAT_CSV, KT_SORT_TOTAL, "[bc]*", &rc);
    assert_int_equal(rc, 0);
    char *b = strstr(out, "\r\nb_slow,"), *c = strstr(out, "\r\nc_mid,");
    assert_non_null(b);
    assert_non_null(c);
    assert_true(b < c);
    assert_null(strstr(out, "a_many"));
    free(out);
    out = render_opts(s, KT_FORMAT_TEXT, (kt_sort_t)9, NULL, &rc);
    assert_int_equal(rc, KT_EINVAL);
    free(out);
    fx_free(s);
}

/* The text report of s with the per-API block (largest total first) into *buf (the caller frees it), split into
 * lines; the number of lines. */
static size_t render_by_api(const kt_snapshot_t *s, char **buf, char **lines, size_t max)
{
    size_t len = 0;
    *buf = NULL;
    FILE *f = open_memstream(buf, &len);
    kt_report_opts_t o = {.sort = KT_SORT_TOTAL, .filter = NULL, .by_api = 1};
    assert_int_equal(kt_report_print(f, s, KT_FORMAT_TEXT, &o), 0);
    fclose(f);
    return split_lines(*buf, lines, max);
}

/* by_api (the `ktiming run` summary): per API its kernels and its transfers (entries with bytes) apart, with
 * count, dispatches, total, share, bytes and bandwidth, then the sum, then the table; markdown has the same
 * block as a table. */
static void test_per_api_summary(void **state)
{
    (void)state;
    kt_snapshot_t *s = fx_snapshot_new(3);
    fx_entry(s, 0, "a", KT_BACKEND_OPENCL, "gpu", 10, 1000000, 900000, 1100000);  /* 10 ms */
    fx_entry(s, 1, "clEnqueueWriteBuffer", KT_BACKEND_OPENCL, "gpu", 5, 2000000, 1900000, 2100000); /* 10 ms */
    s->entries[1].bytes = 40000000; /* 40 MB in 10 ms: 4 GB/s */
    fx_entry(s, 2, "c", KT_BACKEND_VULKAN, "gpu", 100, 50000, 40000, 60000);     /* 5 ms */
    char *buf = NULL;
    size_t len = 0;
    kt_report_opts_t o = {.sort = KT_SORT_TOTAL, .filter = NULL, .by_api = 1};
    char *lines[16] = {0};
    size_t n = render_by_api(s, &buf, lines, 16);
    assert_int_equal(n, 5 + 4);
    assert_string_equal(lines[0], "[timing] API      what        count  dispatches      total       %");
    assert_string_equal(lines[1], "[timing] OpenCL   kernels         1          10   10.00 ms   40.0%");
    assert_string_equal(lines[2], "[timing] OpenCL   transfers       1           5   10.00 ms   40.0%  40.00 MB, 4.000 GB/s");
    assert_string_equal(lines[3], "[timing] Vulkan   kernels         1         100   5.000 ms   20.0%");
    assert_string_equal(lines[4], "[timing] all                      3         115   25.00 ms  100.0%  40.00 MB");
    assert_memory_equal(lines[5], "[timing] kernel ", 16);
    assert_memory_equal(lines[6], "[timing] a ", 11); /* 10 ms, tie with the transfer broken by name */
    assert_memory_equal(lines[7], "[timing] clEnqueueWriteBuffer ", 30);
    assert_non_null(strstr(lines[7], " bytes=40.00 MB (4.000 GB/s) on gpu"));
    assert_memory_equal(lines[8], "[timing] c ", 11);
    free(buf);
    buf = NULL;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(kt_report_print(f, s, KT_FORMAT_MARKDOWN, &o), 0);
    fclose(f);
    assert_non_null(strstr(buf, "| API | what | count | dispatches | total | % | moved |\n"));
    assert_non_null(strstr(buf, "| OpenCL | transfers | 1 | 5 | 10.00 ms | 40.0% | 40.00 MB, 4.000 GB/s |\n"));
    assert_non_null(strstr(buf, "| **all** |  | 3 | 115 | 25.00 ms | 100.0% | 40.00 MB |\n\n| kernel |"));
    free(buf);
    fx_free(s);
}

/* Errors with the last error's name, drops by reason and lost kernels are shown, names escaped. */
/* OpenCL memory commands that move nothing (the interposer's clEnqueueSVMUnmap, clEnqueueSVMFree: 0 bytes) are
 * their own kind, "memory", not kernels; a native kernel stays a kernel. */
static void test_per_api_memory_commands(void **state)
{
    (void)state;
    kt_snapshot_t *s = fx_snapshot_new(5);
    fx_entry(s, 0, "a", KT_BACKEND_OPENCL, "gpu", 10, 1000000, 900000, 1100000); /* 10 ms */
    fx_entry(s, 1, "clEnqueueSVMMemcpy", KT_BACKEND_OPENCL, "gpu", 5, 2000000, 1900000, 2100000); /* 10 ms */
    s->entries[1].bytes = 40000000;
    fx_entry(s, 2, "clEnqueueSVMUnmap", KT_BACKEND_OPENCL, "gpu", 4, 500000, 400000, 600000); /* 2 ms */
    fx_entry(s, 3, "clEnqueueSVMFree", KT_BACKEND_OPENCL, "gpu", 2, 1500000, 1400000, 1600000); /* 3 ms */
    fx_entry(s, 4, "clEnqueueNativeKernel", KT_BACKEND_OPENCL, "gpu", 1, 5000000, 5000000, 5000000); /* 5 ms */
    char *buf = NULL;
    char *lines[16] = {0};
    size_t n = render_by_api(s, &buf, lines, 16);
    assert_true(n >= 5);
    assert_string_equal(lines[1], "[timing] OpenCL   kernels         2          11   15.00 ms   50.0%");
    assert_string_equal(lines[2], "[timing] OpenCL   transfers       1           5   10.00 ms   33.3%  40.00 MB, 4.000 GB/s");
    assert_string_equal(lines[3], "[timing] OpenCL   memory          2           6   5.000 ms   16.7%");
    assert_string_equal(lines[4], "[timing] all                      5          22   30.00 ms  100.0%  40.00 MB");
    free(buf);
    fx_free(s);
}

static void test_errors_drops_and_lost_kernels(void **state)
{
    (void)state;
    kt_snapshot_t *s = fx_snapshot_new(1);
    fx_entry(s, 0, "k", KT_BACKEND_OPENCL, "gpu", 10, 1000, 900, 1100);
    s->entries[0].errors = 3;
    snprintf(s->entries[0].last_error, sizeof s->entries[0].last_error, "CL_INVALID_WORK_GROUP_SIZE");
    s->entries[0].dropped = 5;
    s->entries[0].dropped_by[KT_DROP_RING_FULL] = 2;
    s->entries[0].dropped_by[KT_DROP_DEVICE_LOST] = 3;
    s->kernels_dropped = 7;
    int rc;
    char *out = fx_render(s, KT_FORMAT_TEXT, &rc);
    assert_int_equal(rc, 0);
    char want[160];
    snprintf(want, sizeof want, " errors=3 (last CL_INVALID_WORK_GROUP_SIZE) dropped=5 (%s 2, %s 3) on gpu\n",
             kt_drop_reason_name(KT_DROP_RING_FULL), kt_drop_reason_name(KT_DROP_DEVICE_LOST));
    assert_non_null(strstr(out, want));
    assert_non_null(strstr(out, "\n[timing] warning: 7 records lost: the kernel table was full (kernels_dropped)\n"));
    free(out);
    out = fx_render(s, KT_FORMAT_MARKDOWN, &rc);
    assert_non_null(strstr(out, "| errors=3 (last CL\\_INVALID\\_WORK\\_GROUP\\_SIZE) dropped=5 ("));
    assert_non_null(strstr(out, "**warning:** 7 records lost"));
    free(out);
    /* a hostile error name is escaped like a kernel name */
    snprintf(s->entries[0].last_error, sizeof s->entries[0].last_error, "E\x1b]0;x\x07");
    out = fx_render(s, KT_FORMAT_TEXT, &rc);
    assert_non_null(strstr(out, "(last E\\x1b]0;x\\x07)"));
    assert_null(strchr(out, '\x1b'));
    free(out);
    /* an empty snapshot still says records were lost */
    kt_snapshot_t *e = fx_snapshot_new(0);
    e->kernels_dropped = 1;
    out = fx_render(e, KT_FORMAT_TEXT, &rc);
    assert_string_equal(out, "[timing] no kernels recorded\n[timing] warning: 1 record lost: the kernel table was full "
                             "(kernels_dropped)\n");
    free(out);
    fx_free(e);
    fx_free(s);
}

static void test_counts_device_and_backend_column(void **state)
{
    (void)state;
    kt_snapshot_t *s = fx_snapshot_full();
    s->entries[2].spans_dropped = 7;
    int rc;
    char *out = render_opts(s, KT_FORMAT_TEXT, KT_SORT_NAME, NULL, &rc);
    assert_int_equal(rc, 0);
    char *lines[8] = {0};
    size_t n = split_lines(out, lines, 8);
    assert_int_equal(n, 4);
    assert_null(strstr(lines[1], "errors="));
    assert_non_null(strstr(lines[2], " errors=2 dropped=1 on pthread-cpu"));
    assert_non_null(strstr(lines[3], " spans_dropped=7 on llvmpipe (LLVM 15.0.6, 256 bits)"));
    assert_non_null(strstr(lines[1], " CPU     "));
    assert_non_null(strstr(lines[2], " OpenCL  "));
    /* a single dispatch has no stddev */
    assert_non_null(strstr(lines[3], " -  "));
    free(out);
    fx_free(s);
}

static void test_long_and_unicode_names(void **state)
{
    (void)state;
    char longname[128];
    for (int i = 0; i < 90; i++)
        longname[i] = (char)('a' + i % 26);
    longname[90] = '\0';
    memcpy(longname + 80, "_TAILEND99", 10);
    kt_snapshot_t *s = fx_snapshot_new(3);
    fx_entry(s, 0, "blur", KT_BACKEND_CPU, "host", 3, 12340000, 11980000, 14020000);
    fx_entry(s, 1, longname, KT_BACKEND_CPU, "host", 10, 1000000, 900000, 1100000);
    fx_entry(s, 2, "flou_\xc3\xa9t\xc3\xa9_\xe2\x9c\x93", KT_BACKEND_CPU, "host", 5, 2000000, 1500000, 2500000);
    int rc;
    char *out = fx_render(s, KT_FORMAT_TEXT, &rc);
    assert_int_equal(rc, 0);
    char *lines[8] = {0};
    size_t n = split_lines(out, lines, 8);
    assert_int_equal(n, 4);
    assert_int_equal(column_after(lines[0], "kernel") - 6, (long)strlen("[timing] "));
    assert_int_equal(column_after(lines[0], "backend") - 7, (long)strlen("[timing] ") + 40 + 1);
    for (size_t i = 1; i < n; i++)
        assert_int_equal(cols_of(lines[i]), cols_of(lines[0]));
    /* sorted by total: blur 37 ms, long 10 ms, flou 10 ms (name order breaks the tie) */
    assert_non_null(strstr(lines[2], "[timing] abcdefghijklmnopqrs..."));
    assert_non_null(strstr(lines[2], "_TAILEND99 CPU"));
    assert_non_null(strstr(lines[3], "flou_\xc3\xa9t\xc3\xa9_\xe2\x9c\x93 "));
    free(out);
    fx_free(s);
}

/* The names an attacker would choose: terminal title, clear screen, carriage return and line feed (fake rows),
 * the right-to-left override, a raw C1 CSI byte, the C1 CSI as a code point, and a spreadsheet formula. */
static kt_snapshot_t *hostile_snapshot(void)
{
    kt_snapshot_t *s = fx_snapshot_new(6);
    fx_entry(s, 0, "t\x1b]0;owned\x07x", KT_BACKEND_CPU, "host", 3, 1000, 900, 1100);
    fx_entry(s, 1, "c\x1b[2Jy", KT_BACKEND_CPU, "host", 3, 2000, 900, 3100);
    fx_entry(s, 2, "r\rfake\nrow", KT_BACKEND_CPU, "host", 3, 3000, 900, 5100);
    fx_entry(s, 3, "bidi\xe2\x80\xae" "cod.exe", KT_BACKEND_CPU, "host", 3, 4000, 900, 7100);
    fx_entry(s, 4, "csi\x9b" "31m\xc2\x9b" "x", KT_BACKEND_CPU, "<b>dev|ice</b>", 3, 5000, 900, 9100);
    fx_entry(s, 5, "=cmd|' /C calc'!A0", KT_BACKEND_CPU, "host", 3, 6000, 900, 11100);
    return s;
}

/* No byte below 0x20 but LF (and CR before LF in CSV), no DEL, no C1 (raw or encoded), no bidi control. */
static void assert_inert(const char *out, int csv)
{
    for (const unsigned char *p = (const unsigned char *)out; *p; p++) {
        if (*p == '\n' || (csv && *p == '\r' && p[1] == '\n'))
            continue;
        assert_false(*p < 0x20 || *p == 0x7f);
        assert_false(*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f);
        assert_false(*p == 0xe2 && p[1] == 0x80 && p[2] >= 0xaa && p[2] <= 0xae);
        assert_false(*p == 0xe2 && p[1] == 0x81 && p[2] >= 0xa6 && p[2] <= 0xa9);
    }
    assert_null(strstr(out, "\x9b"));
}

static void test_hostile_names_text(void **state)
{
    (void)state;
    kt_snapshot_t *s = hostile_snapshot();
    int rc;
    char *out = render_opts(s, KT_FORMAT_TEXT, KT_SORT_NAME, NULL, &rc);
    assert_int_equal(rc, 0);
    assert_inert(out, 0);
    char *lines[16] = {0};
    char *copy = fx_strdup(out);
    assert_int_equal(split_lines(copy, lines, 16), 7); /* header + 6: CR/LF made no fake row */
    free(copy);
    assert_non_null(strstr(out, "t\\x1b]0;owned\\x07x"));
    assert_non_null(strstr(out, "c\\x1b[2Jy"));
    assert_non_null(strstr(out, "r\\x0dfake\\x0arow"));
    assert_non_null(strstr(out, "bidi\\u202ecod.exe"));
    assert_non_null(strstr(out, "csi\\x9b31m\\u009bx"));
    assert_non_null(strstr(out, "=cmd|' /C calc'!A0"));
    free(out);
    fx_free(s);
}

static void test_hostile_names_markdown(void **state)
{
    (void)state;
    kt_snapshot_t *s = hostile_snapshot();
    int rc;
    char *out = render_opts(s, KT_FORMAT_MARKDOWN, KT_SORT_NAME, NULL, &rc);
    assert_int_equal(rc, 0);
    assert_inert(out, 0);
    char *lines[16] = {0};
    char *copy = fx_strdup(out);
    size_t n = split_lines(copy, lines, 16);
    assert_int_equal(n, 8); /* header, rule, 6 rows */
    /* every row has exactly the header's cell count: no raw pipe splits a cell */
    for (size_t i = 0; i < n; i++) {
        size_t bars = 0;
        for (const char *p = lines[i]; *p; p++)
            if (*p == '|' && (p == lines[i] || p[-1] != '\\'))
                bars++;
        assert_int_equal(bars, 15);
    }
    free(copy);
    assert_null(strstr(out, "<b>"));
    assert_non_null(strstr(out, "&lt;b&gt;dev\\|ice&lt;/b&gt;"));
    assert_non_null(strstr(out, "=cmd\\|' /C calc'!A0"));
    assert_non_null(strstr(out, "t\\\\x1b\\]0;owned\\\\x07x")); /* renders as t\x1b]0;owned\x07x */
    assert_non_null(strstr(out, "bidi\\\\u202ecod.exe"));
    assert_non_null(strstr(out, "| kernel | backend | device | n | total | % | mean |"));
    free(out);
    fx_free(s);
}

static void test_hostile_names_csv(void **state)
{
    (void)state;
    kt_snapshot_t *s = hostile_snapshot();
    free((void *)s->entries[0].name);
    free((void *)s->entries[0].device);
    fx_entry(s, 0, "+1", KT_BACKEND_CPU, "-dev", 3, 1000, 900, 1100);
    int rc;
    char *out = render_opts(s, KT_FORMAT_CSV, KT_SORT_NAME, NULL, &rc);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "\r\n'=cmd|' /C calc'!A0,CPU,host,"));
    assert_non_null(strstr(out, "\r\n'+1,CPU,'-dev,"));
    assert_non_null(strstr(out, "\r\nr\\x0dfake\\x0arow,")); /* escaped as every text output's names */
    free(out);
    fx_free(s);
}

/* A large table reads the locale (for the microsecond unit) once, not once per cell. */
static void test_locale_read_once(void **state)
{
    (void)state;
    enum { ROWS = 300 };
    kt_snapshot_t *s = fx_snapshot_new(ROWS);
    for (size_t i = 0; i < ROWS; i++) {
        char name[32];
        snprintf(name, sizeof name, "k%zu", i);
        fx_entry(s, i, name, KT_BACKEND_CPU, "host", 10, 5000 + i, 2000, 9000); /* every time cell in us */
    }
    g_locale_reads = 0;
    int rc;
    char *out = fx_render(s, KT_FORMAT_TEXT, &rc);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, " \xc2\xb5s"));
    print_message("%u reads of the locale's variables for %d rows\n", g_locale_reads, ROWS);
    assert_true(g_locale_reads <= 3); /* LC_ALL, LC_CTYPE, LANG at most once each */
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
    assert_int_equal(kt_report_print(NULL, s, KT_FORMAT_TEXT, NULL), KT_EINVAL);
    assert_int_equal(kt_report_print(stdout, NULL, KT_FORMAT_TEXT, NULL), KT_EINVAL);
    out = fx_render(s, (kt_format_t)99, &rc);
    assert_int_equal(rc, KT_EINVAL);
    free(out);
    fx_free(s);
}

int main(void)
{
    setenv("LC_ALL", "C.UTF-8", 1); /* the units below are the UTF-8 ones (kt__unit_us follows the locale) */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_columns_and_units),
        cmocka_unit_test(test_sort_and_filter),
        cmocka_unit_test(test_per_api_summary),
        cmocka_unit_test(test_per_api_memory_commands),
        cmocka_unit_test(test_errors_drops_and_lost_kernels),
        cmocka_unit_test(test_counts_device_and_backend_column),
        cmocka_unit_test(test_long_and_unicode_names),
        cmocka_unit_test(test_hostile_names_text),
        cmocka_unit_test(test_hostile_names_markdown),
        cmocka_unit_test(test_hostile_names_csv),
        cmocka_unit_test(test_empty_and_arguments),
        cmocka_unit_test(test_locale_read_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
