/* test_chrome.c — the Chrome trace exporter on a hand-built snapshot, parsed back with cJSON: tracks, lanes,
 * nesting, flow pairs and their binding, exact microsecond times, args; and KTIMING_TRACE written at exit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <ktiming.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/files.h"
#include "support/proc.h"
#include "trace_fixture.h"

/* ---------------------------------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------------------------------- */

static cJSON *export_parse(const kt_snapshot_t *snap)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(kt_report_print(f, snap, KT_FORMAT_CHROME, NULL), 0);
    fclose(f);
    cJSON *doc = cJSON_ParseWithLength(buf, len);
    if (!doc)
        fprintf(stderr, "unparsable trace near: %.80s\n", cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() : "?");
    free(buf);
    assert_non_null(doc);
    return doc;
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static int is_ph(const cJSON *e, const char *ph)
{
    const char *p = str(e, "ph");
    return p && !strcmp(p, ph);
}

/* pid of the process whose process_name is name, or -1. */
static int pid_named(const cJSON *events, const char *name)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, events) {
        if (is_ph(e, "M") && !strcmp(str(e, "name"), "process_name")) {
            const char *n = str(cJSON_GetObjectItemCaseSensitive(e, "args"), "name");
            if (n && !strcmp(n, name))
                return (int)num(e, "pid");
        }
    }
    return -1;
}

/* tid of the thread track named name in pid, or -1. */
static int tid_named(const cJSON *events, int pid, const char *name)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, events) {
        if (is_ph(e, "M") && !strcmp(str(e, "name"), "thread_name") && (int)num(e, "pid") == pid) {
            const char *n = str(cJSON_GetObjectItemCaseSensitive(e, "args"), "name");
            if (n && !strcmp(n, name))
                return (int)num(e, "tid");
        }
    }
    return -1;
}

static int count_x(const cJSON *events, int pid, int tid, const char *cat)
{
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, events) {
        if (is_ph(e, "X") && (pid < 0 || (int)num(e, "pid") == pid) && (tid < 0 || (int)num(e, "tid") == tid) &&
            (!cat || !strcmp(str(e, "cat"), cat)))
            n++;
    }
    return n;
}

/* The innermost X slice on (pid, tid) that encloses ts (what a flow event binds to), or NULL. */
static const cJSON *slice_at(const cJSON *events, int pid, int tid, double ts)
{
    const cJSON *e, *best = NULL;
    cJSON_ArrayForEach(e, events) {
        if (is_ph(e, "X") && (int)num(e, "pid") == pid && (int)num(e, "tid") == tid && num(e, "ts") <= ts + 1e-6 &&
            ts <= num(e, "ts") + num(e, "dur") + 1e-6 && (!best || num(e, "dur") < num(best, "dur")))
            best = e;
    }
    return best;
}

/* ---------------------------------------------------------------------------------------------------
 * Tests
 * ------------------------------------------------------------------------------------------------- */

static void test_tracks(void **state)
{
    (void)state;
    kt_snapshot_t *snap = trf_snapshot(1);
    cJSON *doc = export_parse(snap);
    const cJSON *events = cJSON_GetObjectItemCaseSensitive(doc, "traceEvents");
    assert_true(cJSON_IsArray(events));
    assert_string_equal(str(doc, "displayTimeUnit"), "ns");

    int host = pid_named(events, "host fixture-host");
    int ocl = pid_named(events, "OpenCL pthread-cpu");
    int vk = pid_named(events, "Vulkan llvmpipe (LLVM 15.0.6, 256 bits)");
    assert_int_equal(host, 1);
    assert_true(ocl > 1 && vk > 1 && ocl != vk);

    int t_main = tid_named(events, host, "main (tid 4242)");
    int t_two = tid_named(events, host, "thread 2 (tid 4243)");
    int q0 = tid_named(events, ocl, "queue 0x5501");
    int q1 = tid_named(events, ocl, "queue 0x5502 (out-of-order)");
    int q1b = tid_named(events, ocl, "queue 0x5502 (out-of-order) \xc2\xb7 lane 2");
    int q2 = tid_named(events, vk, "queue family 0 #0");
    assert_true(t_main > 0 && t_two > 0 && q0 > 0 && q1 > 0 && q1b > 0 && q2 > 0);
    assert_int_equal(tid_named(events, ocl, "queue 0x5501 \xc2\xb7 lane 2"), -1); /* in order: one lane */

    /* span counts per track: device spans on their queues (the out-of-order pairs split over two lanes) */
    assert_int_equal(count_x(events, ocl, q0, "OpenCL"), TRF_DEVICE_SPANS_Q0);
    assert_int_equal(count_x(events, ocl, q1, "OpenCL") + count_x(events, ocl, q1b, "OpenCL"), TRF_DEVICE_SPANS_Q1);
    assert_int_equal(count_x(events, ocl, q1b, "OpenCL"), 2);
    assert_int_equal(count_x(events, vk, q2, "Vulkan"), TRF_DEVICE_SPANS_Q2);
    assert_int_equal(count_x(events, host, -1, "CPU"), TRF_HOST_SPANS);
    assert_int_equal(count_x(events, host, -1, "enqueue"), TRF_DEVICE_SPANS);
    assert_int_equal(count_x(events, -1, -1, NULL), TRF_HOST_SPANS + 2 * TRF_DEVICE_SPANS);

    /* the clock facts go into the device process labels */
    int labelled = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, events) {
        if (is_ph(e, "M") && !strcmp(str(e, "name"), "process_labels") && (int)num(e, "pid") == vk) {
            const char *l = str(cJSON_GetObjectItemCaseSensitive(e, "args"), "labels");
            labelled = l && strstr(l, "CLOCK_MONOTONIC") && strstr(l, "800 ns");
        }
    }
    assert_true(labelled);
    cJSON_Delete(doc);
    kt_snapshot_free(snap);
}

/* Slices on one track must nest (trace viewers reject partial overlaps). */
static void test_nesting(void **state)
{
    (void)state;
    kt_snapshot_t *snap = trf_snapshot(1);
    cJSON *doc = export_parse(snap);
    const cJSON *events = cJSON_GetObjectItemCaseSensitive(doc, "traceEvents");
    int n = cJSON_GetArraySize(events), checked = 0;
    for (int i = 0; i < n; i++) {
        const cJSON *a = cJSON_GetArrayItem(events, i);
        if (!is_ph(a, "X"))
            continue;
        for (int j = i + 1; j < n; j++) {
            const cJSON *b = cJSON_GetArrayItem(events, j);
            if (!is_ph(b, "X") || num(a, "pid") != num(b, "pid") || num(a, "tid") != num(b, "tid"))
                continue;
            double a0 = num(a, "ts"), a1 = a0 + num(a, "dur"), b0 = num(b, "ts"), b1 = b0 + num(b, "dur");
            int disjoint = a1 <= b0 || b1 <= a0;
            int nested = (a0 <= b0 && b1 <= a1) || (b0 <= a0 && a1 <= b1);
            if (!(disjoint || nested))
                fail_msg("slices overlap without nesting on pid %g tid %g: [%f,%f] [%f,%f]", num(a, "pid"),
                         num(a, "tid"), a0, a1, b0, b1);
            checked++;
        }
    }
    assert_true(checked > 20);
    cJSON_Delete(doc);
    kt_snapshot_free(snap);
}

/* Every flow start has one end with the same id; each binds inside the right slice. */
static void test_flows(void **state)
{
    (void)state;
    kt_snapshot_t *snap = trf_snapshot(1);
    cJSON *doc = export_parse(snap);
    const cJSON *events = cJSON_GetObjectItemCaseSensitive(doc, "traceEvents");
    int starts = 0, ends = 0;
    const cJSON *s;
    cJSON_ArrayForEach(s, events) {
        if (!is_ph(s, "s"))
            continue;
        starts++;
        double id = num(s, "id");
        const cJSON *f, *match = NULL;
        int matches = 0;
        cJSON_ArrayForEach(f, events) {
            if (is_ph(f, "f") && num(f, "id") == id) {
                matches++;
                match = f;
            }
        }
        assert_int_equal(matches, 1);
        assert_string_equal(str(match, "bp"), "e");
        assert_int_equal((int)num(s, "pid"), 1); /* from a host thread... */
        assert_true((int)num(match, "pid") > 1); /* ...to a device queue */
        const cJSON *from = slice_at(events, (int)num(s, "pid"), (int)num(s, "tid"), num(s, "ts"));
        const cJSON *to = slice_at(events, (int)num(match, "pid"), (int)num(match, "tid"), num(match, "ts"));
        assert_non_null(from);
        assert_non_null(to);
        assert_non_null(strstr(str(from, "name"), "enqueue "));
        /* the enqueue slice and the device slice are for the same kernel, the device one not earlier */
        assert_string_equal(str(from, "name") + strlen("enqueue "), str(to, "name"));
        assert_true(num(to, "ts") >= num(from, "ts"));
    }
    cJSON_ArrayForEach(s, events) ends += is_ph(s, "f");
    assert_int_equal(starts, TRF_DEVICE_SPANS);
    assert_int_equal(ends, TRF_DEVICE_SPANS);
    cJSON_Delete(doc);
    kt_snapshot_free(snap);
}

/* Times are exact µs with ns decimals; args carry the error bound, stage delays and flags. */
static void test_times_and_args(void **state)
{
    (void)state;
    kt_snapshot_t *snap = trf_snapshot(1);
    cJSON *doc = export_parse(snap);
    const cJSON *events = cJSON_GetObjectItemCaseSensitive(doc, "traceEvents");
    const cJSON *e;
    int blur = 0, errored = 0, host_timed = 0, trial = 0, weird = 0;
    cJSON_ArrayForEach(e, events) {
        if (!is_ph(e, "X"))
            continue;
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
        const char *name = str(e, "name");
        if (!strcmp(name, "blur") && num(e, "ts") == 1000000400.0) {
            blur = 1;
            assert_true(fabs(num(e, "dur") - 420.0) < 1e-9);
            assert_true(num(args, "uncertainty_ns") == 350);
            assert_true(num(args, "duration_ns") == 420000);
            assert_true(num(args, "queued_to_submit_ns") == 1700);
            assert_true(num(args, "submit_to_start_ns") == 247500);
            assert_true(num(args, "enqueue_to_start_ns") == 250000);
            assert_string_equal(str(args, "device"), "pthread-cpu");
        }
        errored += cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(args, "error"));
        host_timed += cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(args, "host_timed"));
        trial += cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(args, "trial"));
        weird += !strcmp(name, snap->entries[TRF_WEIRD].name); /* escaped and read back byte for byte */
    }
    assert_true(blur);
    assert_int_equal(errored, 1);
    assert_int_equal(host_timed, 1);
    assert_int_equal(trial, 1);
    assert_int_equal(weird, 1);
    cJSON_Delete(doc);
    kt_snapshot_free(snap);
}

static void test_ns_digits(void **state)
{
    (void)state;
    kt_snapshot_t *snap = trf_snapshot(1);
    snap->spans[0].start_ns += 7; /* the first host zone now starts at ...000.007 µs */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(kt_report_print(f, snap, KT_FORMAT_CHROME, NULL), 0);
    fclose(f);
    assert_non_null(strstr(buf, "\"ts\":1000000000.007"));
    free(buf);
    kt_snapshot_free(snap);
}

static void test_empty(void **state)
{
    (void)state;
    kt_snapshot_t empty;
    memset(&empty, 0, sizeof empty);
    cJSON *doc = export_parse(&empty);
    const cJSON *events = cJSON_GetObjectItemCaseSensitive(doc, "traceEvents");
    assert_int_equal(count_x(events, -1, -1, NULL), 0);
    assert_int_equal(pid_named(events, "host "), 1);
    cJSON_Delete(doc);
}

/* KTIMING_TRACE=path: the core's exit handler writes the trace (run in a child process). */
static void test_trace_at_exit(void **state)
{
    (void)state;
    char *dir = ktt_tmpdir("trace");
    assert_non_null(dir);
    char *path = ktt_path(dir, "trace.json");
    char self[4096], env[4200];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    assert_true(n > 0);
    self[n] = '\0';
    snprintf(env, sizeof env, "KTIMING_TRACE=%s", path);
    const char *envs[] = {env, NULL};
    assert_int_equal(ktt_run((char *const[]){self, "--record-and-exit", NULL}, &(ktt_spawn_t){.env = envs}), 0);
    char *buf = ktt_read_file(path, NULL);
    assert_non_null(buf);
    ktt_rmtree(dir);
    free(dir);
    free(path);
    cJSON *doc = cJSON_Parse(buf);
    free(buf);
    assert_non_null(doc);
    const cJSON *events = cJSON_GetObjectItemCaseSensitive(doc, "traceEvents");
    assert_int_equal(count_x(events, -1, -1, "OpenCL"), 2);
    assert_int_equal(count_x(events, 1, -1, "enqueue"), 2);
    cJSON_Delete(doc);
}

/* The child of test_trace_at_exit: two device dispatches on a registered queue, then a normal exit. */
static int record_and_exit(void)
{
    kt_kernel_id_t k = kt_kernel_intern("exit_kernel", KT_BACKEND_OPENCL, "fake device");
    uint32_t q = kt_queue_register(KT_BACKEND_OPENCL, "fake device", "queue exit");
    for (int i = 0; i < 2; i++) {
        uint64_t t = kt_now_ns();
        kt_dispatch_t d;
        memset(&d, 0, sizeof d);
        d.kernel = k;
        d.queue = q;
        d.flags = KT_SPAN_DEVICE;
        d.duration_ns = 5000;
        d.enqueue_ns = t;
        d.queued_ns = t + 100;
        d.submit_ns = t + 200;
        d.start_ns = t + 1000;
        d.end_ns = t + 6000;
        d.uncertainty_ns = 10;
        kt_record_dispatch(&d);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--record-and-exit"))
        return record_and_exit();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tracks),        cmocka_unit_test(test_nesting),
        cmocka_unit_test(test_flows),         cmocka_unit_test(test_times_and_args),
        cmocka_unit_test(test_ns_digits),     cmocka_unit_test(test_empty),
        cmocka_unit_test(test_trace_at_exit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
