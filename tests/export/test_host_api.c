/* test_host_api.c — host API time: zones of backend host-api (what `ktiming run`'s interception libraries wrap
 * around clFinish, vkWaitForFences, ...) are recorded per API function on the thread's track, kept out of the
 * kernels' shares and sums, summarised as the time the program waited on the GPU, and read back from JSON. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ktiming.h>
#include <ktiming/analysis.h>
#include "shared/tool.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/files.h"

/* 3 waits in clFinish, 2 in vkWaitForFences, and one CPU kernel, all on this thread. */
static void record_some(void)
{
    for (int i = 0; i < 5; i++) {
        static kt_kernel_id_t site_cl, site_vk;
        kt_zone_t z = i < 3 ? kt__host_api_begin(&site_cl, "clFinish") : kt__host_api_begin(&site_vk, "vkWaitForFences");
        usleep(200);
        kt_zone_end(&z);
    }
    KT_CPU_BEGIN(k, "work");
    usleep(200);
    KT_CPU_END(k);
}

static char *render(const kt_snapshot_t *s, kt_format_t f, const kt_report_opts_t *o)
{
    FILE *t = tmpfile();
    assert_non_null(t);
    assert_int_equal(kt_report_print(t, s, f, o), 0);
    long n = ftell(t);
    assert_true(n > 0);
    char *text = calloc(1, (size_t)n + 1);
    assert_non_null(text);
    rewind(t);
    assert_int_equal(fread(text, 1, (size_t)n, t), (size_t)n);
    fclose(t);
    return text;
}

static void test_recorded_per_api(void **state)
{
    (void)state;
    kt_reset();
    record_some();
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *cl = kt_snapshot_find(s, "clFinish", KT_BACKEND_HOST_API, "host");
    const kt_kernel_timing_t *vk = kt_snapshot_find(s, "vkWaitForFences", KT_BACKEND_HOST_API, "host");
    assert_non_null(cl);
    assert_non_null(vk);
    assert_int_equal(cl->dispatch_count, 3);
    assert_int_equal(vk->dispatch_count, 2);
    assert_string_equal(kt_backend_name(KT_BACKEND_HOST_API), "host-api");
    /* each wait is a host span on this thread (no queue), inside the snapshot's time */
    size_t waits = 0;
    for (size_t i = 0; i < s->span_count; i++) {
        const kt_span_t *sp = &s->spans[i];
        if (s->entries[sp->entry].backend != KT_BACKEND_HOST_API)
            continue;
        waits++;
        assert_int_equal(sp->queue, UINT32_MAX);
        assert_true(sp->end_ns >= sp->start_ns);
        assert_true(sp->end_ns <= s->taken_ns);
    }
    assert_int_equal(waits, 5);
    kt_snapshot_free(s);
}

/* One wait: the summary says "1 call", not "1 calls". */
static void test_one_wait_one_call(void **state)
{
    (void)state;
    kt_reset();
    static kt_kernel_id_t site;
    kt_zone_t z = kt__host_api_begin(&site, "clFinish");
    kt_zone_end(&z);
    kt_snapshot_t *s = kt_snapshot();
    kt_report_opts_t o = {.sort = KT_SORT_TOTAL, .by_api = 1};
    char *text = render(s, KT_FORMAT_TEXT, &o);
    assert_non_null(strstr(text, " in 1 call (host-api waits"));
    free(text);
    text = render(s, KT_FORMAT_MARKDOWN, &o);
    assert_non_null(strstr(text, " in 1 call (host-api waits"));
    free(text);
    kt_snapshot_free(s);
}

static void test_report_keeps_waits_apart(void **state)
{
    (void)state;
    kt_reset();
    record_some();
    kt_snapshot_t *s = kt_snapshot();
    kt_report_opts_t o = {.sort = KT_SORT_TOTAL, .filter = NULL, .by_api = 1};
    char *text = render(s, KT_FORMAT_TEXT, &o);
    /* the summary: one waits row of 2 functions and 5 calls, not in "all" (1 kernel, 1 dispatch) */
    const char *row = strstr(text, "[timing] host-api waits");
    assert_non_null(row);
    unsigned long fns = 0, calls = 0;
    assert_int_equal(sscanf(row, "[timing] host-api waits %lu %lu", &fns, &calls), 2);
    assert_int_equal(fns, 2);
    assert_int_equal(calls, 5);
    const char *all = strstr(text, "[timing] all");
    assert_non_null(all);
    unsigned long kernels = 0, dispatches = 0;
    assert_int_equal(sscanf(all, "[timing] all %lu %lu", &kernels, &dispatches), 2);
    assert_int_equal(kernels, 1);
    assert_int_equal(dispatches, 1);
    assert_non_null(strstr(text, "[timing] the program's threads waited on the GPU for "));
    assert_non_null(strstr(text, " in 5 calls"));
    /* in the table the waits have no share; the one kernel has all of it */
    const char *line = strstr(text, "[timing] clFinish");
    assert_non_null(line);
    const char *eol = strchr(line, '\n');
    char buf[512];
    snprintf(buf, sizeof buf, "%.*s", (int)(eol - line), line);
    assert_non_null(strstr(buf, "  -  "));
    assert_non_null(strstr(text, "100.0%"));
    free(text);
    kt_snapshot_free(s);
}

static void test_json_round_trip(void **state)
{
    (void)state;
    kt_reset();
    record_some();
    kt_snapshot_t *s = kt_snapshot();
    char *dir = ktt_tmpdir("host_api");
    char *path = ktt_path(dir, "run.json");
    assert_int_equal(kt_report_write(path, s, KT_FORMAT_JSON, NULL), 0);
    char *json = ktt_read_file(path, NULL);
    assert_non_null(strstr(json, "\"backend\": \"host-api\""));
    free(json);
    kt_snapshot_t *back = NULL;
    char err[256];
    assert_int_equal(kt_snapshot_load(path, NULL, &back, err, sizeof err), 0);
    const kt_kernel_timing_t *cl = kt_snapshot_find(back, "clFinish", KT_BACKEND_HOST_API, "host");
    assert_non_null(cl);
    assert_int_equal(cl->dispatch_count, 3);
    kt_snapshot_free(back);
    kt_snapshot_free(s);
    ktt_rmtree(dir);
    free(path);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recorded_per_api),
        cmocka_unit_test(test_report_keeps_waits_apart),
        cmocka_unit_test(test_one_wait_one_call),
        cmocka_unit_test(test_json_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
