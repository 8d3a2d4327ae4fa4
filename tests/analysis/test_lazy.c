/* test_lazy.c — the loader parses the large arrays ("entries", the version-1 "spans") one element at a time
 * from the text; a document whose structure the scan cannot follow, or whose array names are written with
 * escapes, is parsed whole. Both paths must give the same answer: the same snapshot when the input is valid,
 * a refusal when it is not, and for a syntax error in an element the same position. Checked on every corpus
 * file, unchanged and with each byte replaced in turn. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ktiming/analysis.h>

#include "support/snapshot_fixture.h"

static const char *const kFiles[] = {"full.json",   "bigints.json",   "names.json",  "unsorted.json",
                                     "merged.json", "version2.json", "empty.json"};

/* The same document with the top-level "entries" and "spans" names written with a \u escape: the scan no
 * longer matches them, so the loader takes the whole-document path. */
static char *escaped_names(const char *json, size_t len, size_t *out_len)
{
    static const struct {
        const char *plain, *escaped;
    } kNames[] = {{"\"entries\":", "\"\\u0065ntries\":"}, {"\"spans\":", "\"\\u0073pans\":"}};
    char *out = malloc(len + 64);
    assert_non_null(out);
    size_t o = 0;
    int done[2] = {0, 0};
    for (size_t i = 0; i < len;) {
        int hit = 0;
        for (int k = 0; k < 2 && !hit; k++) {
            size_t pl = strlen(kNames[k].plain);
            if (!done[k] && i + pl <= len && !memcmp(json + i, kNames[k].plain, pl)) {
                size_t el = strlen(kNames[k].escaped);
                memcpy(out + o, kNames[k].escaped, el);
                o += el;
                i += pl;
                done[k] = hit = 1;
            }
        }
        if (!hit)
            out[o++] = json[i++];
    }
    *out_len = o;
    return out;
}

/* Parses doc both ways; fails the test when the answers differ. Returns the return code. */
static int both_paths(const char *doc, size_t len, const char *what)
{
    size_t elen = 0;
    char *esc = escaped_names(doc, len, &elen);
    kt_snapshot_t *a = NULL, *b = NULL;
    char ea[512] = "", eb[512] = "";
    int ra = kt_snapshot_parse(doc, len, &a, ea, sizeof ea), rb = kt_snapshot_parse(esc, elen, &b, eb, sizeof eb);
    if ((ra == 0) != (rb == 0))
        fail_msg("%s: element by element %d (%s), whole %d (%s)", what, ra, ea, rb, eb);
    if (ra == 0) {
        int rca = -1, rcb = -1;
        char *ja = fx_render(a, KT_FORMAT_JSON, &rca), *jb = fx_render(b, KT_FORMAT_JSON, &rcb);
        assert_true(ja && jb && rca == 0 && rcb == 0);
        if (strcmp(ja, jb))
            fail_msg("%s: the two paths read different snapshots", what);
        free(ja);
        free(jb);
    } else {
        assert_int_equal(ra, KT_EPARSE);
        assert_int_equal(rb, KT_EPARSE);
    }
    kt_snapshot_free(a);
    kt_snapshot_free(b);
    free(esc);
    return ra;
}

static char *corpus(const char *name, size_t *len)
{
    char *path = ktt_path(KT_FUZZ_CORPUS_DIR, name);
    char *data = ktt_read_file(path, len);
    assert_non_null(data);
    free(path);
    return data;
}

static void test_valid_files_agree(void **state)
{
    (void)state;
    for (size_t f = 0; f < sizeof kFiles / sizeof kFiles[0]; f++) {
        size_t len = 0;
        char *doc = corpus(kFiles[f], &len);
        int rc = both_paths(doc, len, kFiles[f]);
        assert_int_equal(rc, 0);
        free(doc);
    }
}

/* Every byte of every file replaced by each structural character (and a letter): both paths accept or refuse
 * alike, and accepted documents read the same. */
static void test_corruptions_agree(void **state)
{
    (void)state;
    static const char kBytes[] = {'{', '}', '[', ']', ',', ':', '"', '\\', ' ', 'x', '1'};
    size_t tried = 0, accepted = 0;
    for (size_t f = 0; f < sizeof kFiles / sizeof kFiles[0]; f++) {
        size_t len = 0;
        char *doc = corpus(kFiles[f], &len);
        for (size_t i = 0; i < len; i++) {
            char saved = doc[i];
            for (size_t b = 0; b < sizeof kBytes; b++) {
                if (kBytes[b] == saved)
                    continue;
                doc[i] = kBytes[b];
                char what[128];
                snprintf(what, sizeof what, "%s byte %zu -> '%c'", kFiles[f], i, kBytes[b]);
                accepted += both_paths(doc, len, what) == 0;
                tried++;
            }
            doc[i] = saved;
        }
        free(doc);
    }
    print_message("%zu corruptions, %zu still accepted by both paths\n", tried, accepted);
    assert_true(tried > 50000);
}

/* A syntax error inside an element is reported at its position in the file, as the whole-document path does. */
static void test_element_syntax_error_position(void **state)
{
    (void)state;
    const char *doc = "{\"schema\":\"ktiming.snapshot\",\"version\":1,\"entries\":[\n"
                      "{\"name\":\"a\",\"backend\":\"cpu\",\"dispatch_count\":1,\"total_ns\":1,\"min_ns\":1,\"max_ns\":1},\n"
                      "{\"name\":\"b\",\"backend\":\"cpu\",\"dispatch_count\":1,\"total_ns\":1 \"min_ns\":1,\"max_ns\":1}\n"
                      "]}";
    kt_snapshot_t *s = NULL;
    char err[512];
    assert_int_equal(kt_snapshot_parse(doc, strlen(doc), &s, err, sizeof err), KT_EPARSE);
    /* line 3 of the file, where the comma is missing: cJSON stops at the quote of "min_ns" */
    const char *bad = strstr(doc, "1 \"min_ns\"") + 2;
    size_t byte = (size_t)(bad - doc);
    char want[128];
    snprintf(want, sizeof want, "(byte %zu of %zu)", byte, strlen(doc));
    if (!strstr(err, "line 3,") || !strstr(err, want))
        fail_msg("message \"%s\" does not name line 3 and %s", err, want);
    assert_null(s);
}

/* Values at the edges of what the fast element reader takes (numbers in every form of JSON's grammar, literals,
 * empty arrays and objects, nested arrays, non-ASCII names) and just past them (a name with an escape, a number
 * that is not JSON's): the element-by-element path reads what the whole-document path reads. */
static void test_plain_values_agree(void **state)
{
    (void)state;
    static const char *const kEntries[] = {
        "{\"name\":\"a\",\"backend\":\"cpu\",\"dispatch_count\":3,\"total_ns\":30,\"min_ns\":1E1,\"max_ns\":1e+1,"
        "\"mean_ns\":10.0,\"stddev_ns\":-0,\"samples\":[10,1.0e1,100e-1],\"sample_count\":3,\"dropped_by\":{},"
        "\"hist\":[],\"last_ns\":0.0e0}",
        "{\"name\":\"b\\u00e9\",\"backend\":\"cpu\",\"dispatch_count\":1,\"total_ns\":1,\"min_ns\":1,\"max_ns\":1}",
        "{\"name\":\"c\u00e9\xe2\x80\xae\",\"backend\":\"opencl\",\"device\":\"d\",\"dispatch_count\":2,"
        "\"total_ns\":\"4\",\"min_ns\":2,\"max_ns\":2,\"mean_ns\":null,\"extra\":[[1,[2,{\"x\":true}]],false,null]}",
        "{\"name\":\"d\",\"backend\":\"cpu\",\"dispatch_count\":1,\"total_ns\":9007199254740991,\"min_ns\":1,"
        "\"max_ns\":123456789012345,\"mean_ns\":0.30000000000000004,\"stddev_ns\":1e-320}",
        "{\"name\":\"e\",\"backend\":\"cpu\",\"dispatch_count\":01,\"total_ns\":1,\"min_ns\":1,\"max_ns\":1}",
        "{\"name\":\"f\",\"backend\":\"cpu\",\"dispatch_count\":1.,\"total_ns\":1,\"min_ns\":1,\"max_ns\":1}",
        "{\"name\":\"g\",\"backend\":\"cpu\",\"dispatch_count\":+1,\"total_ns\":1,\"min_ns\":1,\"max_ns\":1}",
        "{\"name\":\"h\",\"backend\":\"cpu\",\"dispatch_count\":1,\"total_ns\":1,\"min_ns\":1,\"max_ns\":1,\"x\":nul}",
        "{\"name\":\"i\",\"backend\":\"cpu\",\"dispatch_count\":1,\"total_ns\":1,\"min_ns\":1,\"max_ns\":1,"
        "\"x\":truex}",
        "{\"name\":\"j\",\"backend\":\"cpu\",\"dispatch_count\":1,\"total_ns\":1,\"min_ns\":1,\"max_ns\":1,\"x\":1e}",
    };
    for (size_t i = 0; i < sizeof kEntries / sizeof kEntries[0]; i++) {
        char doc[1024];
        snprintf(doc, sizeof doc, "{\"schema\":\"ktiming.snapshot\",\"version\":2,\"entries\":[\n%s,\n%s\n]}",
                 kEntries[i], kEntries[(i + 1) % (sizeof kEntries / sizeof kEntries[0])]);
        both_paths(doc, strlen(doc), kEntries[i]);
    }
}

/* The message names "line L, column C (byte B": L and C must be those of byte B in doc. Returns B. */
static size_t check_position(const char *doc, const char *err)
{
    const char *at = strstr(err, " at line ");
    size_t line = 0, col = 0, byte = 0, l = 1, start = 0;
    if (!at || sscanf(at, " at line %zu, column %zu (byte %zu", &line, &col, &byte) != 3)
        fail_msg("no position in \"%s\"", err);
    for (size_t i = 0; i < byte; i++)
        if (doc[i] == '\n') {
            l++;
            start = i + 1;
        }
    if (line != l || col != byte - start + 1)
        fail_msg("\"%s\": byte %zu is at line %zu, column %zu", err, byte, l, byte - start + 1);
    return byte;
}

/* A document whose entries run past the 4 MiB behind which the loader gives their text back: all of them are read,
 * and an error far into them is reported at its line, column and byte (counted here from the text), a nesting too
 * deep as such, with deep nesting before the point given back. */
static void test_error_far_into_entries(void **state)
{
    (void)state;
    const size_t kEntries = 2600, kPad = 8000; /* 2,600 entries of 8 kB: 21 MB, a give-back every 4 MiB */
    size_t cap = kEntries * (kPad + 256) + 4096, n = 0;
    char *doc = malloc(cap);
    assert_non_null(doc);
    n += (size_t)snprintf(doc + n, cap - n, "{\"schema\":\"ktiming.snapshot\",\"version\":2,\"entries\":[\n");
    for (size_t i = 0; i < kEntries; i++) {
        n += (size_t)snprintf(doc + n, cap - n,
                              "%s{\"name\":\"k%05zu\",\"backend\":\"cpu\",\"dispatch_count\":1,\"total_ns\":1,"
                              "\"min_ns\":1,\"max_ns\":1%s}",
                              i ? "," : "", i,
                              i == 100 ? ",\"x\":[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]" : "");
        for (size_t k = 0; k < kPad; k++)
            doc[n++] = k % 97 == 0 ? '\n' : ' ';
    }
    n += (size_t)snprintf(doc + n, cap - n, "]}");
    kt_snapshot_t *s = NULL;
    char err[512];
    assert_int_equal(kt_snapshot_parse(doc, n, &s, err, sizeof err), 0);
    assert_int_equal(s->count, kEntries);
    assert_string_equal(s->entries[kEntries - 1].name, "k02599");
    kt_snapshot_free(s);
    s = NULL;
    /* a missing comma in the last entry, then a nesting too deep in it */
    char *last = strstr(doc + n - kPad - 200, "\"total_ns\":1,");
    assert_non_null(last);
    last[strlen("\"total_ns\":1")] = ' ';
    assert_int_equal(kt_snapshot_parse(doc, n, &s, err, sizeof err), KT_EPARSE);
    if (!strstr(err, "JSON syntax error at line "))
        fail_msg("%s", err);
    assert_int_equal(check_position(doc, err), (size_t)(last - doc) + strlen("\"total_ns\":1 "));
    last[strlen("\"total_ns\":1")] = ',';
    size_t deep = 1100, at = (size_t)(last - doc);
    char *deeper = malloc(n + 2 * deep + 16);
    assert_non_null(deeper);
    memcpy(deeper, doc, at);
    size_t m = at;
    m += (size_t)snprintf(deeper + m, 16, "\"y\":");
    memset(deeper + m, '[', deep);
    m += deep;
    memset(deeper + m, ']', deep);
    m += deep;
    deeper[m++] = ',';
    memcpy(deeper + m, doc + at, n - at);
    m += n - at;
    assert_int_equal(kt_snapshot_parse(deeper, m, &s, err, sizeof err), KT_EPARSE);
    if (!strstr(err, "nesting too deep at line "))
        fail_msg("%s", err);
    size_t byte = check_position(deeper, err);
    assert_true(byte > at && byte < at + 8 + deep); /* among the brackets */
    free(deeper);
    free(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_files_agree),
        cmocka_unit_test(test_corruptions_agree),
        cmocka_unit_test(test_element_syntax_error_position),
        cmocka_unit_test(test_plain_values_agree),
        cmocka_unit_test(test_error_far_into_entries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
