/* test_csv.c — CSV output: header, CRLF records, RFC 4180 quoting of names with commas, quotes and newlines,
 * read back with an independent RFC 4180 reader. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "support/snapshot_fixture.h"

#define MAX_FIELDS 32
#define MAX_RECORDS 16

/* A parsed CSV document: records of fields (copies). */
typedef struct csv_doc_t {
    size_t records;                          /* number of records */
    size_t fields[MAX_RECORDS];              /* fields per record */
    char *field[MAX_RECORDS][MAX_FIELDS];    /* field text */
} csv_doc_t;

/* RFC 4180 reader: records end with CRLF; quoted fields may hold CR, LF, commas and doubled quotes.
 * Returns 0, or -1 for text that is not RFC 4180 (a bare LF, a stray quote). */
static int csv_parse(const char *p, csv_doc_t *d)
{
    memset(d, 0, sizeof *d);
    while (*p) {
        size_t r = d->records++;
        for (;;) {
            char buf[512];
            size_t n = 0;
            if (*p == '"') {
                p++;
                for (;;) {
                    if (!*p)
                        return -1;
                    if (*p == '"') {
                        if (p[1] == '"') {
                            buf[n++] = '"';
                            p += 2;
                            continue;
                        }
                        p++;
                        break;
                    }
                    buf[n++] = *p++;
                }
            } else {
                while (*p && *p != ',' && *p != '\r' && *p != '\n') {
                    if (*p == '"')
                        return -1;
                    buf[n++] = *p++;
                }
            }
            buf[n] = '\0';
            d->field[r][d->fields[r]++] = fx_strdup(buf);
            if (*p == ',') {
                p++;
                continue;
            }
            if (p[0] == '\r' && p[1] == '\n') {
                p += 2;
                break;
            }
            return -1; /* bare LF, bare CR or missing final CRLF */
        }
    }
    return 0;
}

static void csv_free(csv_doc_t *d)
{
    for (size_t r = 0; r < d->records; r++)
        for (size_t f = 0; f < d->fields[r]; f++)
            free(d->field[r][f]);
}

static void test_header_and_rows(void **state)
{
    (void)state;
    kt_snapshot_t *s = fx_snapshot_full();
    int rc;
    char *out = fx_render(s, KT_FORMAT_CSV, &rc);
    assert_int_equal(rc, 0);
    const char *header = "name,backend,device,dispatch_count,total_ns,min_ns,max_ns,last_ns,mean_ns,stddev_ns,"
                         "p50_ns,p90_ns,p99_ns,errors,dropped,spans_dropped,sample_count,bytes,last_error\r\n";
    assert_memory_equal(out, header, strlen(header));
    csv_doc_t d;
    assert_int_equal(csv_parse(out, &d), 0);
    assert_int_equal(d.records, 1 + s->count);
    for (size_t r = 0; r < d.records; r++)
        assert_int_equal(d.fields[r], 19);
    assert_string_equal(d.field[1][0], "blur");
    assert_string_equal(d.field[1][1], "CPU");
    assert_string_equal(d.field[1][3], "3");
    assert_string_equal(d.field[1][4], "37020000");
    assert_string_equal(d.field[1][8], "12340000");
    assert_string_equal(d.field[2][1], "OpenCL");
    assert_string_equal(d.field[2][13], "2");
    assert_string_equal(d.field[2][14], "1");
    assert_string_equal(d.field[2][16], "20");
    /* A device name with a comma is quoted. */
    assert_string_equal(d.field[3][2], "llvmpipe (LLVM 15.0.6, 256 bits)");
    assert_non_null(strstr(out, ",\"llvmpipe (LLVM 15.0.6, 256 bits)\","));
    csv_free(&d);
    free(out);
    fx_free(s);
}

static void test_quoting(void **state)
{
    (void)state;
    const char *names[] = {"say \"hi\"", "a,b", "two\nlines", "cr\r\nlf", "plain", "\xc3\xa9t\xc3\xa9"};
    const size_t k = sizeof names / sizeof names[0];
    kt_snapshot_t *s = fx_snapshot_new(k);
    for (size_t i = 0; i < k; i++)
        fx_entry(s, i, names[i], KT_BACKEND_CPU, "host", 1, 10, 10, 10);
    s->entries[0].mean_ns = 1.0 / 3.0;
    int rc;
    char *out = fx_render(s, KT_FORMAT_CSV, &rc);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "\r\n\"say \"\"hi\"\"\",CPU,"));
    assert_non_null(strstr(out, "\r\n\"a,b\",CPU,"));
    assert_non_null(strstr(out, "\r\nplain,CPU,"));
    csv_doc_t d;
    assert_int_equal(csv_parse(out, &d), 0);
    assert_int_equal(d.records, 1 + k);
    for (size_t i = 0; i < k; i++) {
        assert_int_equal(d.fields[1 + i], 19);
        /* names are escaped as in every text output: controls as \xHH, never raw (a CSV may reach a terminal) */
        const char *want = !strcmp(names[i], "two\nlines") ? "two\\x0alines"
                           : !strcmp(names[i], "cr\r\nlf")  ? "cr\\x0d\\x0alf"
                                                            : names[i];
        assert_string_equal(d.field[1 + i][0], want);
    }
    /* Doubles are written exactly (shortest round-trip form). */
    assert_string_equal(d.field[1][8], "0.3333333333333333");
    csv_free(&d);
    free(out);
    fx_free(s);
}

static void test_empty(void **state)
{
    (void)state;
    kt_snapshot_t *s = fx_snapshot_new(0);
    int rc;
    char *out = fx_render(s, KT_FORMAT_CSV, &rc);
    assert_int_equal(rc, 0);
    csv_doc_t d;
    assert_int_equal(csv_parse(out, &d), 0);
    assert_int_equal(d.records, 1);
    csv_free(&d);
    free(out);
    fx_free(s);
}

/* Durations of UINT64_MAX are real values, written as such (report core.md item 9): "no range" comes from the
 * dispatch count, never from the value; an entry without dispatches leaves its range and percentiles empty. */
static void test_max_durations(void **state)
{
    (void)state;
    kt_snapshot_t *s = fx_snapshot_new(2);
    kt_kernel_timing_t *h = fx_entry(s, 0, "huge", KT_BACKEND_CPU, "host", 2, UINT64_MAX, UINT64_MAX, UINT64_MAX);
    h->total_ns = h->p90_ns = UINT64_MAX;
    fx_entry(s, 1, "none", KT_BACKEND_CPU, "host", 0, 0, 0, 0);
    s->entries[1].errors = 1;
    int rc;
    char *out = fx_render(s, KT_FORMAT_CSV, &rc);
    assert_int_equal(rc, 0);
    csv_doc_t d;
    assert_int_equal(csv_parse(out, &d), 0);
    assert_int_equal(d.records, 3);
    assert_string_equal(d.field[1][0], "huge");
    for (size_t f = 5; f <= 6; f++) /* min_ns, max_ns */
        assert_string_equal(d.field[1][f], "18446744073709551615");
    for (size_t f = 10; f <= 12; f++) /* p50, p90, p99 */
        assert_string_equal(d.field[1][f], "18446744073709551615");
    assert_string_equal(d.field[2][0], "none");
    for (size_t f = 5; f <= 6; f++)
        assert_string_equal(d.field[2][f], "");
    for (size_t f = 10; f <= 12; f++)
        assert_string_equal(d.field[2][f], "");
    csv_free(&d);
    free(out);
    /* the seed's lines: a range of UINT64_MAX is shown, not "-" */
    out = fx_render(s, KT_FORMAT_LINES, &rc);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "huge"));
    assert_non_null(strstr(out, "min=18446744073709.55ms max=18446744073709.55ms"));
    free(out);
    fx_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_and_rows),
        cmocka_unit_test(test_quoting),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_max_durations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
