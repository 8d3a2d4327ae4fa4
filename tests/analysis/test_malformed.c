/* test_malformed.c — bad input is refused with KT_EPARSE and a message naming where: every truncation of a
 * valid file, syntax errors (line/column/byte), trailing data, wrong or newer schema versions, and each
 * member check (types, ranges, 64-bit limits, indices, counts, duplicates, UTF-8); random byte corruption
 * never crashes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ktiming/analysis.h>

#include <cjson/cJSON.h>

#include "support/heap.h"
#include "support/snapshot_fixture.h"

/* Parses and expects KT_EPARSE with a message containing `want` (when non-NULL). */
static void expect_reject(const char *json, size_t len, const char *want)
{
    kt_snapshot_t *s = (kt_snapshot_t *)1;
    char err[512];
    memset(err, 'x', sizeof err);
    int rc = kt_snapshot_parse(json, len, &s, err, sizeof err);
    if (rc != KT_EPARSE)
        fail_msg("expected KT_EPARSE, got %d for: %.200s", rc, json);
    assert_null(s);
    assert_non_null(memchr(err, '\0', sizeof err));
    assert_true(strlen(err) > 0);
    if (want && !strstr(err, want))
        fail_msg("message \"%s\" lacks \"%s\"", err, want);
}

static void reject(const char *json, const char *want) { expect_reject(json, strlen(json), want); }

/* Parses and expects KT_EPARSE with exactly the message `want`. */
static void expect_exact(const char *json, const char *want)
{
    kt_snapshot_t *s = NULL;
    char err[512];
    assert_int_equal(kt_snapshot_parse(json, strlen(json), &s, err, sizeof err), KT_EPARSE);
    assert_string_equal(err, want);
}

static void test_every_truncation(void **state)
{
    (void)state;
    kt_snapshot_t *s = fx_snapshot_full();
    int rc;
    char *text = fx_render(s, KT_FORMAT_JSON, &rc);
    assert_int_equal(rc, 0);
    size_t len = strlen(text);
    size_t last_brace = len;
    while (last_brace > 0 && text[last_brace - 1] != '}')
        last_brace--;
    assert_true(last_brace > 0);
    last_brace--; /* index of the closing brace */
    size_t checked = 0;
    for (size_t cut = 0; cut <= last_brace; cut++) {
        kt_snapshot_t *out = (kt_snapshot_t *)1;
        char err[256] = "";
        /* A heap copy of exactly `cut` bytes, so ASan catches any read past the end. */
        char *part = malloc(cut ? cut : 1);
        memcpy(part, text, cut);
        rc = kt_snapshot_parse(part, cut, &out, err, sizeof err);
        free(part);
        if (rc != KT_EPARSE)
            fail_msg("truncation at byte %zu of %zu: got %d", cut, len, rc);
        assert_null(out);
        if (cut > 0 && (!strstr(err, "line ") || !strstr(err, "column ") || !strstr(err, "(byte ")))
            fail_msg("truncation at byte %zu: message without position: %s", cut, err);
        checked++;
    }
    assert_true(checked > 1000);
    /* Everything from the closing brace on parses (only whitespace follows). */
    kt_snapshot_t *out = NULL;
    assert_int_equal(kt_snapshot_parse(text, last_brace + 1, &out, NULL, 0), 0);
    fx_free(out);
    free(text);
    fx_free(s);
}

static void test_syntax_positions(void **state)
{
    (void)state;
    reject("{\n  \"schema\": \"ktiming.snapshot\",\n  \"version\": x\n}", "JSON syntax error at line 3, column 14 (byte 47 of 50)");
    reject("{\"schema\": \"ktiming.snapshot\",}", "line 1, column 31 (byte 30 of 31)");
    reject("{\"a\":1} {", "unexpected data after the JSON document at line 1, column 9 (byte 8 of 9)");
    expect_reject("{\"a\":1}\0{}", 10, "unexpected data after the JSON document at line 1, column 8 (byte 7 of 10)");
    reject("{\"schema\": \"ktiming.snapshot\", \"version\": 1, \"entries\": [", "ends early (truncated?)");
    reject("", "empty input");
    reject("   \n ", NULL);
    reject("[1,2]", "not a JSON object");
    reject("\"ktiming.snapshot\"", "not a JSON object");
}

static void test_schema_and_version(void **state)
{
    (void)state;
    reject("{\"version\":1,\"entries\":[]}", "no \"schema\" member");
    reject("{\"schema\":\"chrome.trace\",\"version\":1,\"entries\":[]}", "schema is \"chrome.trace\"");
    /* the file's schema is shown escaped (a message lands on a terminal): no raw ESC, CR, C1 or bidi control */
    expect_exact("{\"schema\":\"\\u001b[31mX\\r\\u009b\\u202e\",\"version\":5,\"entries\":[]}",
                 "not a ktiming snapshot: schema is \"\\x1b[31mX\\x0d\\u009b\\u202e\", expected \"ktiming.snapshot\"");
    reject("{\"schema\":7,\"version\":1,\"entries\":[]}", "schema: expected a string");
    reject("{\"schema\":\"ktiming.snapshot\",\"entries\":[]}", "version: missing");
    reject("{\"schema\":\"ktiming.snapshot\",\"version\":6,\"entries\":[]}",
           "unsupported schema version 6: this ktiming (" KT_VERSION_STRING ") reads versions up to 5");
    reject("{\"schema\":\"ktiming.snapshot\",\"version\":1e300,\"entries\":[]}", "unsupported schema version");
    reject("{\"schema\":\"ktiming.snapshot\",\"version\":0,\"entries\":[]}", "version: expected a positive integer");
    reject("{\"schema\":\"ktiming.snapshot\",\"version\":1.5,\"entries\":[]}", "version: expected a positive integer");
    reject("{\"schema\":\"ktiming.snapshot\",\"version\":\"1\",\"entries\":[]}", "version: expected a positive");
    reject("{\"schema\":\"ktiming.snapshot\",\"version\":1}", "entries: missing");
    reject("{\"schema\":\"ktiming.snapshot\",\"version\":1,\"entries\":{}}", "entries: expected an array");
}

#define HEAD "{\"schema\":\"ktiming.snapshot\",\"version\":1,"
/* An entry's members except name, backend and min_ns, which the cases below vary. */
#define REST "\"dispatch_count\":3,\"total_ns\":30,\"max_ns\":11"
#define E0 "{\"name\":\"a\",\"backend\":\"cpu\",\"min_ns\":9," REST
#define E1 "{\"name\":\"b\",\"backend\":\"cpu\",\"min_ns\":9," REST
#define E1_NO_MIN "{\"name\":\"b\",\"backend\":\"cpu\"," REST
#define E0_NO_NAME "{\"backend\":\"cpu\",\"min_ns\":9," REST
#define E1_NO_BACKEND "{\"name\":\"b\",\"min_ns\":9," REST
#define TH "\"threads\":[{\"os_tid\":1,\"name\":\"main\"}]"

static void test_member_errors(void **state)
{
    (void)state;
    /* The reference document parses; each case below breaks one thing. */
    kt_snapshot_t *ok = NULL;
    const char *good = HEAD "\"entries\":[" E0 "}," E1 ",\"samples\":[9,10,11]}]," TH
                            ",\"spans\":[{\"entry\":1,\"thread\":0,\"start_ns\":1,\"end_ns\":2}]}";
    assert_int_equal(kt_snapshot_parse(good, strlen(good), &ok, NULL, 0), 0);
    assert_int_equal(ok->entries[1].sample_count, 3);
    fx_free(ok);

    reject(HEAD "\"entries\":[" E0 "}," E1_NO_MIN ",\"min_ns\":-1}]}", "entries[1].min_ns: expected a non-negative integer");
    reject(HEAD "\"entries\":[" E0 "}," E1_NO_MIN ",\"min_ns\":1.5}]}",
           "entries[1].min_ns: expected a non-negative integer");
    reject(HEAD "\"entries\":[" E0 ",\"p90_ns\":true}]}", "entries[0].p90_ns: expected a non-negative integer");
    reject(HEAD "\"entries\":[" E0 ",\"p90_ns\":\"12a\"}]}", "entries[0].p90_ns: expected a non-negative integer");
    reject(HEAD "\"entries\":[" E0 ",\"p90_ns\":\"\"}]}", "entries[0].p90_ns: expected a non-negative integer");
    reject(HEAD "\"entries\":[" E0 ",\"p90_ns\":\"-5\"}]}", "entries[0].p90_ns: expected a non-negative integer");
    reject(HEAD "\"entries\":[" E0 ",\"errors\":\"18446744073709551616\"}]}",
           "entries[0].errors: integer does not fit in 64 bits");
    reject(HEAD "\"entries\":[" E0 ",\"errors\":9007199254740993}]}", "entries[0].errors: integer above 2^53-1");
    reject(HEAD "\"entries\":[" E0 ",\"errors\":1e400}]}", "entries[0].errors: expected a non-negative integer");
    reject(HEAD "\"entries\":[{\"backend\":\"cpu\",\"dispatch_count\":1,\"total_ns\":1,\"min_ns\":1,\"max_ns\":1}]}",
           "entries[0].name: missing");
    reject(HEAD "\"entries\":[" E0_NO_NAME ",\"name\":5}]}", "entries[0].name: expected a string");
    reject(HEAD "\"entries\":[{\"name\":\"a\",\"backend\":\"cpu\",\"total_ns\":1,\"min_ns\":1,\"max_ns\":1}]}",
           "entries[0].dispatch_count: missing");
    reject(HEAD "\"entries\":[" E0 "}," E1_NO_BACKEND ",\"backend\":\"directx\"}]}", "entries[1].backend: unknown backend");
    reject(HEAD "\"entries\":[" E0 ",\"mean_ns\":\"fast\"}]}", "entries[0].mean_ns: expected a number or null");
    reject(HEAD "\"entries\":[" E0 ",\"samples\":[1,2],\"sample_count\":3}]}",
           "entries[0].sample_count: 3 does not match the 2 values in samples");
    reject(HEAD "\"entries\":[" E0 ",\"samples\":[1,2,3,4]}]}", "entries[0].sample_count: larger than dispatch_count");
    reject(HEAD "\"entries\":[" E0 ",\"samples\":[1,{},3]}]}", "entries[0].samples[1]: expected a non-negative integer");
    reject(HEAD "\"entries\":[" E0 ",\"samples\":7}]}", "entries[0].samples: expected an array");
    reject(HEAD "\"entries\":[" E1_NO_MIN ",\"min_ns\":12}]}", "entries[0].min_ns: larger than max_ns");
    reject(HEAD "\"entries\":[" E0 ",\"max_ns\":12}]}", "entries[0].max_ns: member appears more than once");
    reject("{\"schema\":\"ktiming.snapshot\",\"version\":1,\"version\":2,\"entries\":[]}",
           "version: member appears more than once");
    reject(HEAD "\"entries\":[" E0 "}," E0 "}]}", "entries[0] and entries[1]: the same (name, backend, device) twice");
    reject(HEAD "\"entries\":[" E1 "}," E0 "}," E1 "}]}", "the same (name, backend, device) twice");
    reject(HEAD "\"entries\":[5]}", "entries[0]: expected an object");
    reject(HEAD "\"entries\":[" E0_NO_NAME ",\"name\":\"bad\xff\"}]}", "entries[0].name: string is not valid UTF-8");
    reject(HEAD "\"entries\":[" E0_NO_NAME ",\"name\":\"\xed\xa0\x80\"}]}", "not valid UTF-8");
    /* past the eight-byte ASCII steps: a stray byte, a sequence cut by the string's end, one valid in between */
    reject(HEAD "\"entries\":[" E0_NO_NAME ",\"name\":\"abcdefghijklmnop\xff\"}]}", "not valid UTF-8");
    reject(HEAD "\"entries\":[" E0_NO_NAME ",\"name\":\"abcdefghi\xc3\"}]}", "not valid UTF-8");
    reject(HEAD "\"entries\":[" E0_NO_NAME ",\"name\":\"abcdefgh\xc3\xa9ijklmnopq\x80rs\"}]}", "not valid UTF-8");
    const char *long_ok = HEAD "\"entries\":[" E0_NO_NAME ",\"name\":\"abcdefgh\xc3\xa9ijklmnopq\xe6\x97\xa5rs\"}]}";
    kt_snapshot_t *named = NULL;
    assert_int_equal(kt_snapshot_parse(long_ok, strlen(long_ok), &named, NULL, 0), 0);
    assert_string_equal(named->entries[0].name, "abcdefgh\xc3\xa9ijklmnopq\xe6\x97\xa5rs");
    fx_free(named);
    reject(HEAD "\"entries\":[" E0_NO_NAME ",\"name\":\"\\ud800\"}]}", NULL); /* lone surrogate escape */

    reject(HEAD "\"entries\":[" E0 "}]," TH ",\"spans\":[{\"entry\":1,\"thread\":0,\"start_ns\":1,\"end_ns\":2}]}",
           "spans[0].entry: index out of range of entries");
    /* span_table (schema 2, columns): a good one, then counts, values and indices that do not hold */
#define ST_COLS(entry, start) "\"entry\":\"" entry "\",\"queue\":\"- -\",\"thread\":\"0 0\",\"flags\":\"1 1\"," \
    "\"duration_ns\":\"3 4\",\"start_ns\":\"" start "\",\"end_ns\":\"3 4\""
    const char *table = HEAD "\"entries\":[" E0 "}]," TH ",\"span_table\":{\"count\":2," ST_COLS("0 0", "100 -10")
                             ",\"enqueue_ns\":\"-5 -\"}}";
    assert_int_equal(kt_snapshot_parse(table, strlen(table), &ok, NULL, 0), 0);
    assert_int_equal(ok->span_count, 2);
    assert_int_equal(ok->spans[0].start_ns, 90); /* sorted by start: the second span (100 - 10) first */
    assert_int_equal(ok->spans[1].start_ns, 100);
    assert_int_equal(ok->spans[1].enqueue_ns, 95);
    assert_int_equal(ok->spans[0].enqueue_ns, 0);
    assert_int_equal(ok->spans[0].queue, UINT32_MAX);
    fx_free(ok);
    reject(HEAD "\"entries\":[" E0 "}]," TH ",\"span_table\":{\"count\":3," ST_COLS("0 0", "1 1") "}}",
           "span_table.entry: 2 values, count says 3");
    reject(HEAD "\"entries\":[" E0 "}]," TH ",\"span_table\":{\"count\":1," ST_COLS("0 0", "1 1") "}}",
           "span_table.entry: more values than count");
    reject(HEAD "\"entries\":[" E0 "}]," TH ",\"span_table\":{\"count\":2," ST_COLS("0 x", "1 1") "}}",
           "span_table.entry: malformed value at span 1");
    reject(HEAD "\"entries\":[" E0 "}]," TH ",\"span_table\":{\"count\":2," ST_COLS("0 -", "1 1") "}}",
           "span_table.entry: absent value in a required column");
    reject(HEAD "\"entries\":[" E0 "}]," TH ",\"span_table\":{\"count\":2," ST_COLS("0 1", "1 1") "}}",
           "span_table[1].entry: index out of range of entries");
    /* version 3: "v*n" runs, end times as offsets from start + duration; runs are no part of versions 1 and 2 */
#define HEAD3 "{\"schema\":\"ktiming.snapshot\",\"version\":3,"
#define ST3(entry, queue, end) "\"entry\":\"" entry "\",\"queue\":\"" queue "\",\"thread\":\"0*3\",\"flags\":\"1*3\"," \
    "\"duration_ns\":\"3 4 4\",\"start_ns\":\"100 10*2\",\"end_ns\":\"" end "\""
    const char *runs = HEAD3 "\"entries\":[" E0 "}]," TH ",\"span_table\":{\"count\":3," ST3("0*3", "-*3", "0*2 -1")
                           ",\"enqueue_ns\":\"-5*2 -\",\"uncertainty_ns\":\"- 7*2\"}}";
    assert_int_equal(kt_snapshot_parse(runs, strlen(runs), &ok, NULL, 0), 0);
    assert_int_equal(ok->span_count, 3);
    const uint64_t start[3] = {100, 110, 120}, end[3] = {103, 114, 123}, enq[3] = {95, 105, 0},
                   unc[3] = {0, 7, 7};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ok->spans[i].entry, 0);
        assert_int_equal(ok->spans[i].queue, UINT32_MAX);
        assert_int_equal(ok->spans[i].thread, 0);
        assert_int_equal(ok->spans[i].flags, 1);
        assert_int_equal(ok->spans[i].start_ns, start[i]);
        assert_int_equal(ok->spans[i].end_ns, end[i]); /* start + duration + offset */
        assert_int_equal(ok->spans[i].enqueue_ns, enq[i]);
        assert_int_equal(ok->spans[i].uncertainty_ns, unc[i]);
    }
    fx_free(ok);
    reject(HEAD3 "\"entries\":[" E0 "}]," TH ",\"span_table\":{\"count\":3," ST3("0*4", "-*3", "0*3") "}}",
           "span_table.entry: more values than count");
    reject(HEAD3 "\"entries\":[" E0 "}]," TH ",\"span_table\":{\"count\":3," ST3("0*2", "-*3", "0*3") "}}",
           "span_table.entry: 2 values, count says 3");
    /* malformed runs: a zero count, a count apart from its value, no value, trailing junk, an overflowing count */
#define BAD_RUN(run) HEAD3 "\"entries\":[" E0 "}]," TH ",\"span_table\":{\"count\":3," ST3(run, "-*3", "0*3") "}}"
    static const char *const kBadRuns[] = {BAD_RUN("0*0 0*3"), BAD_RUN("0* 0 0"), BAD_RUN("*3"), BAD_RUN("0*3x"),
                                           BAD_RUN("0*99999999999999999999")};
#undef BAD_RUN
    for (size_t i = 0; i < sizeof kBadRuns / sizeof kBadRuns[0]; i++)
        reject(kBadRuns[i], "span_table.entry: malformed value at span 0");
    const char *absent_run = HEAD3 "\"entries\":[" E0 "}]," TH ",\"span_table\":{\"count\":3,"
                                 ST3("0*3", "-*3", "0*3") ",\"uncertainty_ns\":\"-*3\"}}";
    assert_int_equal(kt_snapshot_parse(absent_run, strlen(absent_run), &ok, NULL, 0), 0);
    assert_int_equal(ok->spans[2].uncertainty_ns, 0);
    assert_int_equal(ok->spans[2].end_ns, 124);
    fx_free(ok);
    /* the largest u64 reads back exactly; past it, by one or by a last digit, the value is refused */
#define UNC(v) HEAD3 "\"entries\":[" E0 "}]," TH ",\"span_table\":{\"count\":3," ST3("0*3", "-*3", "0*3") \
    ",\"uncertainty_ns\":\"" v "\"}}"
    const char *max_u64 = UNC("18446744073709551615*3");
    assert_int_equal(kt_snapshot_parse(max_u64, strlen(max_u64), &ok, NULL, 0), 0);
    assert_true(ok->spans[2].uncertainty_ns == UINT64_MAX);
    fx_free(ok);
    reject(UNC("18446744073709551616*3"), "span_table.uncertainty_ns: malformed value at span 0");
    reject(UNC("1 18446744073709551620*2"), "span_table.uncertainty_ns: malformed value at span 1");
#undef UNC
    reject(HEAD "\"entries\":[" E0 "}]," TH ",\"span_table\":{\"count\":2," ST_COLS("0*2", "1 1") "}}",
           "span_table.entry: malformed value at span 0"); /* version 1: no runs */
#undef ST3
#undef HEAD3
#undef ST_COLS
    reject(HEAD "\"entries\":[" E0 "}]," TH ",\"spans\":[{\"entry\":0,\"thread\":1,\"start_ns\":1,\"end_ns\":2}]}",
           "spans[0].thread: index out of range of threads");
    reject(HEAD "\"entries\":[" E0 "}]," TH
                ",\"spans\":[{\"entry\":0,\"thread\":0,\"queue\":0,\"start_ns\":1,\"end_ns\":2}]}",
           "spans[0].queue: index out of range of queues");
    reject(HEAD "\"entries\":[" E0 "}]," TH
                ",\"spans\":[{\"entry\":0,\"thread\":0,\"start_ns\":1,\"end_ns\":2},{\"entry\":4294967296,\"thread\":0,"
                "\"start_ns\":1,\"end_ns\":2}]}",
           "spans[1].entry: integer does not fit in 32 bits");
    reject(HEAD "\"entries\":[" E0 "}]," TH ",\"spans\":[{\"entry\":0,\"thread\":0,\"end_ns\":2}]}",
           "spans[0].start_ns: missing");
    reject(HEAD "\"entries\":[" E0 "}],\"spans\":[{\"entry\":0,\"start_ns\":1,\"end_ns\":2}]}",
           "spans[0].thread: missing");
    reject(HEAD "\"entries\":[],\"queues\":[{\"backend\":\"opencl\",\"label\":7}]}", "queues[0].label: expected a string");
    reject(HEAD "\"entries\":[],\"threads\":[{\"os_tid\":-3}]}", "threads[0].os_tid: expected a non-negative integer");
    reject(HEAD "\"entries\":[],\"threads\":[{\"name\":\"0123456789012345678901234567890123\"}]}",
           "threads[0].name: string longer than 31 bytes");
    reject(HEAD "\"entries\":[],\"devices\":[{\"backend\":\"vulkan\"}]}", "devices[0].name: missing");
    reject(HEAD "\"entries\":[],\"devices\":[{\"backend\":\"vulkan\",\"name\":\"x\",\"valid_bits\":4294967296}]}",
           "devices[0].valid_bits: integer does not fit in 32 bits");
    reject(HEAD "\"entries\":[],\"devices\":[{\"backend\":\"vulkan\",\"name\":\"x\",\"drift_ppm\":[]}]}",
           "devices[0].drift_ppm: expected a number or null");
    reject(HEAD "\"host\":\"0123456789012345678901234567890123456789012345678901234567890123\",\"entries\":[]}",
           "host: string longer than 63 bytes");
    reject(HEAD "\"taken_ns\":null,\"entries\":[]}", "taken_ns: expected a non-negative integer");
    /* Top-level members read after the entries are named from the top, not from the last entry. */
    expect_exact(HEAD "\"entries\":[" E0 "}],\"spans\":7}", "spans: expected an array");
    expect_exact(HEAD "\"entries\":[" E0 "}],\"queues\":{}}", "queues: expected an array");
}

/* A name with \u0000 is refused (a C string would cut it short), wherever the string is; an escaped
 * backslash followed by "u0000" is an ordinary name and loads. */
static void test_escaped_nul_refused(void **state)
{
    (void)state;
    reject(HEAD "\"entries\":[{\"name\":\"a\\u0000b\",\"backend\":\"CPU\",\"device\":\"host\",\"dispatch_count\":0}]}",
           "a string holds \\u0000 (NUL) at line 1");
    reject(HEAD "\"entries\":[{\"name\":\"a\",\"backend\":\"CPU\",\"device\":\"h\\u0000\",\"dispatch_count\":0}]}",
           "names cannot contain NUL");
    const char *ok = HEAD "\"entries\":[{\"name\":\"a\\\\u0000b\",\"backend\":\"cpu\",\"min_ns\":9," REST "}]}";
    kt_snapshot_t *s = NULL;
    char err[256] = "";
    assert_int_equal(kt_snapshot_parse(ok, strlen(ok), &s, err, sizeof err), 0);
    assert_string_equal(s->entries[0].name, "a\\u0000b");
    fx_free(s);
}

/* Raw control bytes are refused wherever they are (JSON allows them only escaped): a raw 0x00 in a name used to
 * cut "al\0pha" to "al". */
static void test_raw_controls_refused(void **state)
{
    (void)state;
    static const char doc[] = HEAD "\"entries\":[{\"name\":\"al\0pha\",\"backend\":\"cpu\",\"min_ns\":9," REST "}]}";
    expect_reject(doc, sizeof doc - 1, "raw control character 0x00 at line 1");
    reject(HEAD "\"entries\":[{\"name\":\"a\x1b[2Jb\",\"backend\":\"cpu\",\"min_ns\":9," REST "}]}",
           "raw control character 0x1b");
    /* in a lazily parsed entry far into the document, past the first 64-byte blocks */
    char big[4096];
    size_t n = (size_t)snprintf(big, sizeof big, HEAD "\"entries\":[");
    for (int i = 0; i < 20; i++)
        n += (size_t)snprintf(big + n, sizeof big - n, "{\"name\":\"k%02d%s\",\"backend\":\"cpu\",\"min_ns\":9," REST "},",
                              i, i == 17 ? "\x01" : "");
    big[n - 1] = ']';
    big[n++] = '}';
    expect_reject(big, n, "raw control character 0x01");
}

/* Mean and stddev must be durations (0 .. 2^64 ns), not 1e308 or negative. */
static void test_statistics_ranges(void **state)
{
    (void)state;
    reject(HEAD "\"entries\":[" E0 ",\"mean_ns\":1e308}]}", "entries[0].mean_ns: expected a duration");
    reject(HEAD "\"entries\":[" E0 ",\"mean_ns\":-5}]}", "entries[0].mean_ns: expected a duration");
    reject(HEAD "\"entries\":[" E0 ",\"stddev_ns\":1e308}]}", "entries[0].stddev_ns: expected a duration");
    reject(HEAD "\"entries\":[" E0 ",\"stddev_ns\":-0.5}]}", "entries[0].stddev_ns: expected a duration");
    const char *ok = HEAD "\"entries\":[" E0 ",\"mean_ns\":10,\"stddev_ns\":1}]}";
    kt_snapshot_t *s = NULL;
    assert_int_equal(kt_snapshot_parse(ok, strlen(ok), &s, NULL, 0), 0);
    fx_free(s);
}

/* Nesting beyond cJSON's 1,000 levels says so, not "syntax error". */
static void test_too_deep(void **state)
{
    (void)state;
    size_t depth = 1500, n = 0;
    char *doc = malloc(2 * depth + 64);
    assert_non_null(doc);
    n += (size_t)sprintf(doc, "{\"x\":");
    for (size_t i = 0; i < depth; i++)
        doc[n++] = '[';
    for (size_t i = 0; i < depth; i++)
        doc[n++] = ']';
    doc[n++] = '}';
    doc[n] = '\0';
    expect_reject(doc, n, "nesting too deep");
    free(doc);
}

/* A span_table whose run-length tokens ask for far more spans than its size can hold is refused before anything
 * is allocated (a 2 KB file asked for 10^8 spans: gigabytes and minutes). */
static void test_span_expansion_bounded(void **state)
{
    (void)state;
    const char *huge = "{\"schema\":\"ktiming.snapshot\",\"version\":3,\"entries\":[" E0 "}]," TH
                       ",\"span_table\":{\"count\":100000000,\"entry\":\"0*100000000\",\"queue\":\"-*100000000\","
                       "\"thread\":\"0*100000000\",\"flags\":\"0*100000000\",\"duration_ns\":\"1*100000000\","
                       "\"start_ns\":\"1*100000000\",\"end_ns\":\"0*100000000\"}}";
    reject(huge, "span_table.count: 100000000 spans from a");
    /* within the bound: loads */
    const char *fine = "{\"schema\":\"ktiming.snapshot\",\"version\":3,\"entries\":[" E0 "}]," TH
                       ",\"span_table\":{\"count\":1000,\"entry\":\"0*1000\",\"queue\":\"-*1000\","
                       "\"thread\":\"0*1000\",\"flags\":\"0*1000\",\"duration_ns\":\"1*1000\","
                       "\"start_ns\":\"1*1000\",\"end_ns\":\"0*1000\"}}";
    kt_snapshot_t *s = NULL;
    char err[256] = "";
    if (kt_snapshot_parse(fine, strlen(fine), &s, err, sizeof err) != 0)
        fail_msg("%s", err);
    assert_int_equal(s->span_count, 1000);
    kt_snapshot_free(s);
}

static void test_arguments(void **state)
{
    (void)state;
    kt_snapshot_t *s = (kt_snapshot_t *)1;
    char err[64];
    assert_int_equal(kt_snapshot_parse("{}", 2, NULL, err, sizeof err), KT_EINVAL);
    assert_int_equal(kt_snapshot_parse(NULL, 3, &s, err, sizeof err), KT_EINVAL);
    assert_null(s);
    assert_int_equal(kt_snapshot_parse("{}", 2, &s, NULL, 0), KT_EPARSE); /* no message buffer: still fine */
    /* A tiny message buffer is truncated, still NUL-terminated. */
    err[4] = 'x';
    assert_int_equal(kt_snapshot_parse("{\"a\":", 5, &s, err, 4), KT_EPARSE);
    assert_int_equal(strlen(err), 3);
    assert_int_equal(err[4], 'x');
    assert_int_equal(kt_snapshot_load(NULL, NULL, &s, err, sizeof err), KT_EINVAL);
}

/* xorshift64*: deterministic corruption for the test below. */
static uint64_t rng_next(uint64_t *x)
{
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    return *x * 2685821657736338717ull;
}

static void test_random_corruption(void **state)
{
    (void)state;
    kt_snapshot_t *s = fx_snapshot_full();
    int rc;
    char *text = fx_render(s, KT_FORMAT_JSON, &rc);
    size_t len = strlen(text);
    char *buf = malloc(len);
    uint64_t seed = 0x9E3779B97F4A7C15ull;
    const char alphabet[] = "{}[]\",:0123456789-.eE\\ntrufalsn \xff\xc3";
    size_t accepted = 0, rejected = 0;
    for (int iter = 0; iter < 4000; iter++) {
        memcpy(buf, text, len);
        int edits = 1 + (int)(rng_next(&seed) % 4);
        for (int k = 0; k < edits; k++)
            buf[rng_next(&seed) % len] = alphabet[rng_next(&seed) % (sizeof alphabet - 1)];
        kt_snapshot_t *out = NULL;
        char err[256];
        rc = kt_snapshot_parse(buf, len, &out, err, sizeof err);
        if (rc == 0) {
            /* Whatever is accepted must be a consistent snapshot that writes and reads back identically. */
            char *again = fx_render(out, KT_FORMAT_JSON, &rc);
            assert_int_equal(rc, 0);
            kt_snapshot_t *twice = NULL;
            assert_int_equal(kt_snapshot_parse(again, strlen(again), &twice, err, sizeof err), 0);
            char why[128];
            if (fx_snapshot_diff(out, twice, why, sizeof why))
                fail_msg("iteration %d: re-read differs at %s", iter, why);
            fx_free(twice);
            free(again);
            fx_free(out);
            accepted++;
        } else {
            assert_int_equal(rc, KT_EPARSE);
            assert_null(out);
            rejected++;
        }
    }
    assert_true(rejected > 1000);
    assert_true(accepted > 10);
    free(buf);
    free(text);
    fx_free(s);
}

/* The most heap in use seen at cJSON's allocations: the loader parses the root object with cJSON while the text
 * it parses is held, so this samples the heap all along the parse. */
static size_t g_heap_peak;

static void *sampling_malloc(size_t size)
{
    size_t h = ktt_heap_used();
    if (h > g_heap_peak)
        g_heap_peak = h;
    return malloc(size);
}

/* A valid document followed by 16 MiB of junk: refused as "unexpected data", holding about the text once (the
 * parser's private copy), not twice (the root object was copied with the junk: docs/scale.md aims at 1.5x). */
static void test_junk_after_document_not_copied(void **state)
{
    (void)state;
    static const char kDoc[] = "{\"schema\":\"ktiming.snapshot\",\"version\":5,\"entries\":[{\"name\":\"k\","
                               "\"backend\":\"cpu\",\"dispatch_count\":1,\"total_ns\":5,\"min_ns\":5,\"max_ns\":5}]}";
    size_t junk = (size_t)16 << 20, len = sizeof kDoc - 1 + junk;
    char *text = calloc(1, len); /* zero bytes after the document, as a sparse file reads */
    assert_non_null(text);
    memcpy(text, kDoc, sizeof kDoc - 1);
    cJSON_InitHooks(&(cJSON_Hooks){.malloc_fn = sampling_malloc, .free_fn = free});
    size_t base = ktt_heap_used();
    g_heap_peak = base;
    kt_snapshot_t *s = NULL;
    char err[512];
    int rc = kt_snapshot_parse(text, len, &s, err, sizeof err);
    cJSON_InitHooks(NULL);
    assert_int_equal(rc, KT_EPARSE);
    assert_non_null(strstr(err, "unexpected data after the JSON document"));
    size_t held = g_heap_peak - base;
    print_message("a %zu-byte input with junk after the document: %zu bytes held (%.2fx)\n", len, held,
                  (double)held / (double)len);
    assert_true(held >= len);           /* the sampling saw the parser's copy of the text: not vacuous */
    assert_true(held < len + len / 2); /* and not a second copy */
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_truncation),
        cmocka_unit_test(test_syntax_positions),
        cmocka_unit_test(test_schema_and_version),
        cmocka_unit_test(test_member_errors),
        cmocka_unit_test(test_escaped_nul_refused),
        cmocka_unit_test(test_raw_controls_refused),
        cmocka_unit_test(test_statistics_ranges),
        cmocka_unit_test(test_too_deep),
        cmocka_unit_test(test_span_expansion_bounded),
        cmocka_unit_test(test_arguments),
        cmocka_unit_test(test_random_corruption),
        cmocka_unit_test(test_junk_after_document_not_copied),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
