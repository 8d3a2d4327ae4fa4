/* test_device_labels.c — one label per device in every output (issue 34): two GPUs of one model published through
 * the core API (kt_device_register), each with its own kernels and queue; text, markdown, CSV, lines, JSON, HTML
 * and the Chrome trace name them by the same labels, and the trace has one process per device. */
#include <ktiming.h>

#include <cJSON.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#define MODEL "NVIDIA H100 80GB HBM3"

static char *render(const kt_snapshot_t *s, kt_format_t f)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    assert_non_null(out);
    assert_int_equal(kt_report_print(out, s, f, NULL), 0);
    fclose(out);
    return text;
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

static kt_snapshot_t *two_gpus(void)
{
    kt_reset();
    static const char *const uuid[2] = {"GPU-11111111-2222-3333-4444-555555555555",
                                        "GPU-66666666-7777-8888-9999-000000000000"};
    static const char *const pci[2] = {"0000:41:00.0", "0000:c1:00.0"};
    for (int g = 0; g < 2; g++) {
        kt_device_id_t id;
        memset(&id, 0, sizeof id);
        snprintf(id.model, sizeof id.model, MODEL);
        snprintf(id.uuid, sizeof id.uuid, "%s", uuid[g]);
        snprintf(id.pci, sizeof id.pci, "%s", pci[g]);
        id.ordinal = g;
        const char *key = kt_device_register(KT_BACKEND_CUDA, &id);
        assert_non_null(key);
        kt_device_info_t clk;
        memset(&clk, 0, sizeof clk);
        clk.backend = KT_BACKEND_CUDA;
        snprintf(clk.key, sizeof clk.key, "%s", key);
        snprintf(clk.clock_domain, sizeof clk.clock_domain, "device");
        kt_device_publish(&clk);
        kt_dispatch_t d;
        memset(&d, 0, sizeof d);
        d.kernel = kt_kernel_intern("gemm", KT_BACKEND_CUDA, key);
        d.queue = kt_queue_register(KT_BACKEND_CUDA, key, "stream 7");
        d.flags = KT_SPAN_DEVICE;
        d.duration_ns = 1000u + 1000u * (unsigned)g;
        d.start_ns = 5000;
        d.end_ns = d.start_ns + d.duration_ns;
        kt_record_dispatch(&d);
    }
    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    return s;
}

static void test_every_output_same_labels(void **state)
{
    (void)state;
    kt_snapshot_t *s = two_gpus();
    assert_int_equal(s->count, 2);
    assert_string_equal(s->entries[0].device, MODEL " #0");
    assert_string_equal(s->entries[1].device, MODEL " #1");

    char *text = render(s, KT_FORMAT_TEXT), *md = render(s, KT_FORMAT_MARKDOWN), *csv = render(s, KT_FORMAT_CSV);
    char *lines = render(s, KT_FORMAT_LINES), *html = render(s, KT_FORMAT_HTML);
    for (int g = 0; g < 2; g++) {
        const char *label = g ? MODEL " #1" : MODEL " #0";
        assert_non_null(strstr(text, label));
        assert_non_null(strstr(md, label));
        assert_non_null(strstr(csv, label));
        assert_non_null(strstr(lines, label)); /* a kernel on two devices: lines name the device */
        assert_non_null(strstr(html, label));
    }
    assert_int_equal(count(lines, "[timing] gemm"), 2);
    assert_non_null(strstr(lines, " dev=" MODEL " #1\n"));
    assert_non_null(strstr(html, "uuid GPU-66666666-7777-8888-9999-000000000000, pci 0000:c1:00.0"));
    free(text);
    free(md);
    free(csv);
    free(lines);
    free(html);

    /* the Chrome trace: one process per device, named by its label, its identity in the process labels */
    char *trace = render(s, KT_FORMAT_CHROME);
    cJSON *root = cJSON_Parse(trace);
    assert_non_null(root);
    cJSON *ev = cJSON_IsArray(root) ? root : cJSON_GetObjectItem(root, "traceEvents");
    assert_non_null(ev);
    int pid[2] = {-1, -1}, labelled = 0;
    cJSON *it;
    cJSON_ArrayForEach(it, ev)
    {
        cJSON *name = cJSON_GetObjectItem(it, "name"), *args = cJSON_GetObjectItem(it, "args");
        if (!cJSON_IsString(name) || !args)
            continue;
        if (!strcmp(name->valuestring, "process_name")) {
            const char *n = cJSON_GetObjectItem(args, "name")->valuestring;
            for (int g = 0; g < 2; g++)
                if (!strcmp(n, g ? "CUDA " MODEL " #1" : "CUDA " MODEL " #0"))
                    pid[g] = cJSON_GetObjectItem(it, "pid")->valueint;
        } else if (!strcmp(name->valuestring, "process_labels")) {
            labelled += strstr(cJSON_GetObjectItem(args, "labels")->valuestring, "uuid GPU-") != NULL;
        }
    }
    assert_true(pid[0] >= 0 && pid[1] >= 0);
    assert_int_not_equal(pid[0], pid[1]);
    assert_int_equal(labelled, 2);
    cJSON_Delete(root);
    free(trace);
    kt_snapshot_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_every_output_same_labels)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
