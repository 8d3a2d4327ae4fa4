/* test_json_strings.c — strings that are cut or not UTF-8 in a snapshot written as JSON (report core.md items 2
 * and 3): the file loads back (kt_snapshot_load, what `ktiming report` uses), every fixed-size field fits its limit
 * and is cut at a character boundary, and names differing only in invalid bytes stay different entries. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ktiming.h>
#include <ktiming/analysis.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/files.h"
#include "support/snapshot_fixture.h"

/* Whether s is valid UTF-8 (no stray byte, no cut sequence at its end). */
static int utf8_ok(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        size_t n = *p < 0x80 ? 1 : (*p & 0xE0) == 0xC0 ? 2 : (*p & 0xF0) == 0xE0 ? 3 : (*p & 0xF8) == 0xF0 ? 4 : 0;
        if (!n)
            return 0;
        for (size_t i = 1; i < n; i++)
            if ((p[i] & 0xC0) != 0x80)
                return 0;
        p += n;
    }
    return 1;
}

/* Writes s as JSON into a fresh directory and loads it back; the loaded snapshot (the test frees it). */
static kt_snapshot_t *round_trip(const kt_snapshot_t *s)
{
    char *dir = ktt_tmpdir("json-strings");
    assert_non_null(dir);
    char *path = ktt_path(dir, "s.json");
    assert_int_equal(kt_report_write(path, s, KT_FORMAT_JSON, NULL), 0);
    kt_snapshot_t *back = NULL;
    char err[256] = "";
    int rc = kt_snapshot_load(path, NULL, &back, err, sizeof err);
    if (rc)
        fprintf(stderr, "load: %s\n", err);
    assert_int_equal(rc, 0);
    free(path);
    ktt_rmtree(dir);
    free(dir);
    return back;
}

static const kt_kernel_timing_t *find(const kt_snapshot_t *s, const char *name)
{
    for (size_t i = 0; i < s->count; i++)
        if (!strcmp(s->entries[i].name, name))
            return &s->entries[i];
    return NULL;
}

/* A thread named in Latin-1 (12 bytes, none of them UTF-8) before its first record. */
static void *latin1_thread(void *arg)
{
    (void)arg;
    if (pthread_setname_np(pthread_self(), "\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9") == 0) {
        KT_CPU_BEGIN(z, "zone");
        KT_CPU_END(z);
    }
    return NULL;
}

/* What the recorder keeps: an error name, a queue label and a thread name that are too long or not UTF-8. */
static void test_recorded_fields(void **state)
{
    (void)state;
    char err[80], lab[80];
    memset(err, 'E', 46);
    strcpy(err + 46, "\xc3\xa9tail"); /* 46 ASCII + "é" + more: the 47-byte field ends inside "é" */
    memset(lab, 'Q', 62);
    strcpy(lab + 62, "\xc3\xa9"); /* 62 ASCII + "é": the 63-byte field ends inside it */
    kt_kernel_id_t k = kt_kernel_intern("k_err", KT_BACKEND_CPU, NULL);
    kt_record_error(k, err);
    uint32_t q = kt_queue_register(KT_BACKEND_OPENCL, NULL, lab);
    uint32_t q2 = kt_queue_register(KT_BACKEND_OPENCL, NULL, "\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9");
    kt_kernel_id_t g = kt_kernel_intern("gpu", KT_BACKEND_OPENCL, NULL);
    uint64_t now = kt_now_ns();
    kt_record_dispatch(&(kt_dispatch_t){.kernel = g, .queue = q, .duration_ns = 5, .start_ns = now, .end_ns = now + 5});
    kt_record_dispatch(&(kt_dispatch_t){.kernel = g, .queue = q2, .duration_ns = 5, .start_ns = now + 10,
                                        .end_ns = now + 15});
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, latin1_thread, NULL), 0);
    assert_int_equal(pthread_join(th, NULL), 0);

    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    kt_snapshot_t *back = round_trip(s);
    const kt_kernel_timing_t *e = find(back, "k_err");
    assert_non_null(e);
    assert_true(utf8_ok(e->last_error));
    assert_int_equal(strlen(e->last_error), 46); /* the "é" that did not fit is left out whole */
    assert_true(back->queue_count >= 2);
    int full = 0;
    for (size_t i = 0; i < back->queue_count; i++) {
        assert_true(utf8_ok(back->queues[i].label));
        assert_true(strlen(back->queues[i].label) <= 63);
        full += !strncmp(back->queues[i].label, lab, 62);
    }
    assert_int_equal(full, 1);
    int latin1 = 0;
    for (size_t i = 0; i < back->thread_count; i++) {
        assert_true(utf8_ok(back->threads[i].name));
        assert_true(strlen(back->threads[i].name) <= 31);
        latin1 += !strncmp(back->threads[i].name, "\xef\xbf\xbd" "E9", 5);
    }
    assert_int_equal(latin1, 1);
    kt_snapshot_free(back);
    kt_snapshot_free(s);
}

/* Names that differ only in invalid bytes stay different entries, each valid UTF-8 with the byte in hex; a real
 * name equal to such a form is the same kernel (its records counted there): no name twice, nothing lost. */
static void test_invalid_bytes_distinct(void **state)
{
    (void)state;
    kt_record("k\xff", KT_BACKEND_CPU, 10);
    kt_record("k\xfe", KT_BACKEND_CPU, 10);
    kt_record("k\xef\xbf\xbd" "FE", KT_BACKEND_CPU, 10); /* a real "k\uFFFDFE" */
    kt_record("k\xfe" "FE", KT_BACKEND_CPU, 10);
    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    kt_snapshot_t *back = round_trip(s);
    for (size_t i = 0; i < back->count; i++)
        assert_true(utf8_ok(back->entries[i].name));
    const kt_kernel_timing_t *e;
    assert_non_null(e = find(back, "k\xef\xbf\xbd" "FF"));
    assert_int_equal(e->dispatch_count, 1);
    assert_non_null(e = find(back, "k\xef\xbf\xbd" "FE"));
    assert_int_equal(e->dispatch_count, 2);
    assert_non_null(e = find(back, "k\xef\xbf\xbd" "FEFE"));
    assert_int_equal(e->dispatch_count, 1);
    kt_snapshot_free(back);
    kt_snapshot_free(s);

    /* a hand-built snapshot holding the raw bytes: written in the same form, still two entries */
    s = fx_snapshot_new(2);
    fx_entry(s, 0, "h\xfe", KT_BACKEND_CPU, "host", 1, 10, 10, 10);
    fx_entry(s, 1, "h\xff", KT_BACKEND_CPU, "host", 1, 10, 10, 10);
    back = round_trip(s);
    assert_int_equal(back->count, 2);
    assert_non_null(find(back, "h\xef\xbf\xbd" "FE"));
    assert_non_null(find(back, "h\xef\xbf\xbd" "FF"));
    kt_snapshot_free(back);
    fx_free(s);
}

/* A hand-built snapshot whose fixed-size fields are full and hold no NUL, or only invalid bytes: still loadable. */
static void test_full_fields(void **state)
{
    (void)state;
    kt_snapshot_t *s = fx_snapshot_new(1);
    fx_entry(s, 0, "k", KT_BACKEND_CPU, "host", 1, 10, 10, 10);
    memset(s->host, 'h', sizeof s->host); /* no NUL */
    memset(s->entries[0].last_error, 0xff, sizeof s->entries[0].last_error - 1);
    s->entries[0].last_error[sizeof s->entries[0].last_error - 1] = 0;
    kt_snapshot_t *back = round_trip(s);
    assert_int_equal(strlen(back->host), sizeof back->host - 1);
    assert_true(utf8_ok(back->entries[0].last_error));
    assert_true(strlen(back->entries[0].last_error) <= sizeof back->entries[0].last_error - 1);
    kt_snapshot_free(back);
    fx_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recorded_fields),
        cmocka_unit_test(test_invalid_bytes_distinct),
        cmocka_unit_test(test_full_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
