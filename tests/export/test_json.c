/* test_json.c — JSON writer: valid JSON with the versioned header, exact integers (strings above 2^53-1),
 * escaping (quotes, control characters, U+2028, invalid UTF-8), shortest exact doubles, null for non-finite,
 * refusal of inconsistent snapshots, and kt_report_write's all-or-nothing file replacement. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>

#include "support/snapshot_fixture.h"

static cJSON *render_parse(const kt_snapshot_t *s, char **text)
{
    int rc;
    *text = fx_render(s, KT_FORMAT_JSON, &rc);
    assert_int_equal(rc, 0);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(*text, &end, 1);
    if (!root)
        fail_msg("not JSON near: %.40s", end ? end : "?");
    return root;
}

static void test_header_and_sections(void **state)
{
    (void)state;
    kt_snapshot_t *s = fx_snapshot_full();
    char *text;
    cJSON *root = render_parse(s, &text);
    assert_string_equal(cJSON_GetObjectItem(root, "schema")->valuestring, "ktiming.snapshot");
    assert_int_equal(cJSON_GetObjectItem(root, "version")->valueint, 5);
    assert_true(cJSON_IsString(cJSON_GetObjectItem(root, "generator")));
    assert_string_equal(cJSON_GetObjectItem(root, "host")->valuestring, "testhost");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(root, "entries")), 3);
    cJSON *table = cJSON_GetObjectItem(root, "span_table");
    assert_int_equal(cJSON_GetObjectItem(table, "count")->valueint, 4);
    assert_null(cJSON_GetObjectItem(root, "spans")); /* spans are written as columns only */
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(root, "queues")), 2);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(root, "threads")), 2);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(root, "devices")), 2);
    cJSON *e1 = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "entries"), 1);
    assert_string_equal(cJSON_GetObjectItem(e1, "backend")->valuestring, "opencl");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(e1, "samples")), 20);
    assert_int_equal(cJSON_GetObjectItem(e1, "errors")->valueint, 2);
    /* columns: span 0 has no queue and no enqueue time ("-"), span 1 queue 1, spans 1 to 3 an uncertainty of 250 */
    char first[32], second[32];
    assert_int_equal(sscanf(cJSON_GetObjectItem(table, "queue")->valuestring, "%31s %31s", first, second), 2);
    assert_string_equal(first, "-");
    assert_string_equal(second, "1");
    assert_int_equal(sscanf(cJSON_GetObjectItem(table, "enqueue_ns")->valuestring, "%31s", first), 1);
    assert_string_equal(first, "-");
    assert_int_equal(sscanf(cJSON_GetObjectItem(table, "uncertainty_ns")->valuestring, "%31s %31s", first, second),
                     2);
    assert_string_equal(second, "250*3"); /* spans 1-3: a run (version 3) */
    cJSON *d0 = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "devices"), 0);
    assert_true(cJSON_GetObjectItem(d0, "drift_ppm")->valuedouble == -0.125);
    cJSON_Delete(root);
    free(text);
    fx_free(s);
}

static void test_large_integers_are_strings(void **state)
{
    (void)state;
    kt_snapshot_t *s = fx_snapshot_new(1);
    kt_kernel_timing_t *e = fx_entry(s, 0, "k", KT_BACKEND_CPU, "host", 2, 5, 1, 9);
    e->total_ns = UINT64_MAX;
    e->max_ns = 9007199254740991ull;      /* 2^53-1: still a number */
    e->last_ns = 9007199254740992ull;     /* 2^53: a string */
    s->taken_ns = 18446744073709551614ull;
    char *text;
    cJSON *root = render_parse(s, &text);
    cJSON *je = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "entries"), 0);
    assert_true(cJSON_IsString(cJSON_GetObjectItem(je, "total_ns")));
    assert_string_equal(cJSON_GetObjectItem(je, "total_ns")->valuestring, "18446744073709551615");
    assert_true(cJSON_IsNumber(cJSON_GetObjectItem(je, "max_ns")));
    assert_non_null(strstr(text, "\"max_ns\": 9007199254740991,"));
    assert_string_equal(cJSON_GetObjectItem(je, "last_ns")->valuestring, "9007199254740992");
    assert_string_equal(cJSON_GetObjectItem(root, "taken_ns")->valuestring, "18446744073709551614");
    cJSON_Delete(root);
    free(text);
    fx_free(s);
}

/* A reservoir of 1,000 samples (written in chunks, several of them) comes out exactly and in order: every digit
 * count from 1 to 20, the 2^53 boundary (a number below it, a string from it on) and UINT64_MAX. */
static void test_samples_exact(void **state)
{
    (void)state;
    kt_snapshot_t *s = fx_snapshot_new(1);
    kt_kernel_timing_t *e = fx_entry(s, 0, "k", KT_BACKEND_CPU, "host", 1000, 5, 1, 9);
    fx_samples(s, 0, 1000, 0, 1);
    uint64_t p = 1;
    for (uint32_t j = 0; j < 1000; j++) {
        e->samples[j] = (p - 1) + (j % 7); /* 9..., 99..., 10^k + small */
        p = p >= 1000000000000000000ull ? 1 : p * 10;
    }
    e->samples[500] = 9007199254740991ull; /* 2^53-1: a number */
    e->samples[501] = 9007199254740992ull; /* 2^53: a string */
    e->samples[999] = UINT64_MAX;
    char *text;
    cJSON *root = render_parse(s, &text);
    cJSON *arr = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "entries"), 0), "samples");
    assert_int_equal(cJSON_GetArraySize(arr), 1000);
    for (uint32_t j = 0; j < 1000; j++) {
        cJSON *it = cJSON_GetArrayItem(arr, (int)j);
        char want[32];
        snprintf(want, sizeof want, "%llu", (unsigned long long)e->samples[j]);
        if (e->samples[j] > 9007199254740991ull) {
            if (!cJSON_IsString(it) || strcmp(it->valuestring, want) != 0)
                fail_msg("samples[%u]: want the string \"%s\"", j, want);
        } else if (!cJSON_IsNumber(it) || it->valuedouble != (double)e->samples[j]) {
            fail_msg("samples[%u]: want %s", j, want);
        }
    }
    assert_non_null(strstr(text, ", 9007199254740991, \"9007199254740992\", "));
    cJSON_Delete(root);
    free(text);
    fx_free(s);
}

static void test_string_escaping(void **state)
{
    (void)state;
    kt_snapshot_t *s = fx_snapshot_new(3);
    fx_entry(s, 0, "q\"b\\s/\n\r\t\b\f\x01\x1f\x7f", KT_BACKEND_CPU, "host", 1, 1, 1, 1);
    fx_entry(s, 1, "ls\xe2\x80\xa8ps\xe2\x80\xa9 \xf0\x9f\x9a\x80", KT_BACKEND_CPU, "host", 1, 1, 1, 1);
    fx_entry(s, 2, "bad\xff\xc3(\xed\xa0\x80z", KT_BACKEND_CPU, "host", 1, 1, 1, 1);
    char *text;
    cJSON *root = render_parse(s, &text);
    assert_non_null(strstr(text, "\"q\\\"b\\\\s/\\n\\r\\t\\b\\f\\u0001\\u001f\\u007f\""));
    assert_non_null(strstr(text, "\"ls\\u2028ps\\u2029 \xf0\x9f\x9a\x80\""));
    /* Invalid UTF-8 (a stray byte, a truncated sequence, an encoded surrogate): U+FFFD and the byte in hex, per
     * byte, so different bytes stay different names. */
    assert_non_null(strstr(text, "\"bad\\ufffdFF\\ufffdC3(\\ufffdED\\ufffdA0\\ufffd80z\""));
    cJSON *entries = cJSON_GetObjectItem(root, "entries");
    assert_string_equal(cJSON_GetArrayItem(entries, 0)->child->valuestring, "q\"b\\s/\n\r\t\b\f\x01\x1f\x7f");
    cJSON_Delete(root);
    free(text);
    fx_free(s);
}

static void test_doubles(void **state)
{
    (void)state;
    kt_snapshot_t *s = fx_snapshot_new(3);
    fx_entry(s, 0, "a", KT_BACKEND_CPU, "host", 3, 1, 1, 1)->mean_ns = 0.1;
    fx_entry(s, 1, "b", KT_BACKEND_CPU, "host", 3, 1, 1, 1)->mean_ns = 1.0 / 3.0;
    kt_kernel_timing_t *c = fx_entry(s, 2, "c", KT_BACKEND_CPU, "host", 3, 1, 1, 1);
    c->mean_ns = NAN;
    c->stddev_ns = INFINITY;
    char *text;
    cJSON *root = render_parse(s, &text);
    assert_non_null(strstr(text, "\"mean_ns\": 0.1,"));
    assert_non_null(strstr(text, "\"mean_ns\": 0.3333333333333333,"));
    assert_non_null(strstr(text, "\"mean_ns\": null, \"stddev_ns\": null,"));
    cJSON_Delete(root);
    free(text);
    fx_free(s);
}

static void test_inconsistent_snapshot_refused(void **state)
{
    (void)state;
    kt_snapshot_t *s = fx_snapshot_full();
    int rc;
    char *text;
    s->spans[2].entry = 3; /* only 3 entries */
    text = fx_render(s, KT_FORMAT_JSON, &rc);
    assert_int_equal(rc, KT_EINVAL);
    assert_int_equal(strlen(text), 0); /* refused before writing anything */
    free(text);
    s->spans[2].entry = 0;
    s->spans[2].thread = 2;
    text = fx_render(s, KT_FORMAT_JSON, &rc);
    assert_int_equal(rc, KT_EINVAL);
    free(text);
    s->spans[2].thread = 0;
    s->entries[0].backend = (kt_backend_t)17;
    text = fx_render(s, KT_FORMAT_JSON, &rc);
    assert_int_equal(rc, KT_EINVAL);
    free(text);
    s->entries[0].backend = KT_BACKEND_CPU;
    text = fx_render(s, KT_FORMAT_JSON, &rc);
    assert_int_equal(rc, 0);
    free(text);
    fx_free(s);
}

static size_t count_dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

static void test_report_write_atomic(void **state)
{
    (void)state;
    char *dir = ktt_tmpdir("json");
    assert_non_null(dir);
    char *path = ktt_path(dir, "out.json");
    kt_snapshot_t *s = fx_snapshot_full();

    /* A successful write holds exactly what kt_report_print produces. */
    assert_int_equal(kt_report_write(path, s, KT_FORMAT_JSON, NULL), 0);
    int rc;
    char *expect = fx_render(s, KT_FORMAT_JSON, &rc);
    size_t len;
    char *got = ktt_read_file(path, &len);
    assert_non_null(got);
    assert_string_equal(got, expect);
    free(got);
    free(expect);

    /* A failing write (inconsistent snapshot) leaves the old file whole and no temporary file behind. */
    assert_int_equal(ktt_write_file(path, "old contents\n", 13), 0);
    s->spans[0].entry = 99;
    assert_int_equal(kt_report_write(path, s, KT_FORMAT_JSON, NULL), KT_EINVAL);
    got = ktt_read_file(path, &len);
    assert_string_equal(got, "old contents\n");
    free(got);
    assert_int_equal(count_dir_entries(dir), 1);
    s->spans[0].entry = 0;

    /* Replacing works; text and CSV too. */
    assert_int_equal(kt_report_write(path, s, KT_FORMAT_TEXT, NULL), 0);
    got = ktt_read_file(path, &len);
    assert_memory_equal(got, "[timing] kernel", 15);
    assert_non_null(strstr(got, "\n[timing] blur "));
    free(got);
    assert_int_equal(count_dir_entries(dir), 1);

    /* Unwritable places and bad arguments fail cleanly. */
    char *nodir = ktt_path(dir, "missing/out.json");
    assert_int_equal(kt_report_write(nodir, s, KT_FORMAT_JSON, NULL), KT_EIO);
    assert_int_equal(errno, ENOENT);
    assert_int_equal(kt_report_write(path, NULL, KT_FORMAT_JSON, NULL), KT_EINVAL);
    assert_int_equal(kt_report_write(NULL, s, KT_FORMAT_JSON, NULL), KT_EINVAL);
    assert_int_equal(kt_report_write(path, s, (kt_format_t)42, NULL), KT_EINVAL);
    assert_int_equal(count_dir_entries(dir), 1);

    free(nodir);
    fx_free(s);
    free(path);
    ktt_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_and_sections),
        cmocka_unit_test(test_large_integers_are_strings),
        cmocka_unit_test(test_samples_exact),
        cmocka_unit_test(test_string_escaping),
        cmocka_unit_test(test_doubles),
        cmocka_unit_test(test_inconsistent_snapshot_refused),
        cmocka_unit_test(test_report_write_atomic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
