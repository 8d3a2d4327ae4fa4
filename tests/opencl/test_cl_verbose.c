/* test_cl_verbose.c — KTIMING_VERBOSE=profile_exec: one line per completed command, printed from the
 * completion path (the enqueuing thread only waits for the line to appear), with the documented fields. */
#include "support/cl_test_util.h"

#include <fcntl.h>
#include <unistd.h>

static int g_saved_stdout = -1;
static char g_path[64];

/* Send stderr (where verbose lines go: never the program's stdout) to a temporary file. */
static void capture_begin(void)
{
    fflush(stderr);
    snprintf(g_path, sizeof g_path, "/tmp/kt_cl_verbose_XXXXXX");
    int fd = mkstemp(g_path);
    assert_true(fd >= 0);
    g_saved_stdout = dup(2);
    dup2(fd, 2);
    close(fd);
}

static void capture_end(void)
{
    fflush(stderr);
    dup2(g_saved_stdout, 2);
    close(g_saved_stdout);
}

static char *read_capture(void)
{
    FILE *f = fopen(g_path, "r");
    assert_non_null(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Split a line into comma-separated fields (in place); returns the count. */
static int split(char *line, char **fields, int cap)
{
    int n = 0;
    char *p = line;
    while (n < cap) {
        fields[n++] = p;
        char *c = strchr(p, ',');
        if (!c)
            break;
        *c = '\0';
        p = c + 1;
    }
    return n;
}

/* The first line containing both needles, copied into out. */
static int find_line(const char *text, const char *a, const char *b, char *out, size_t cap)
{
    for (const char *p = text; *p;) {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len < cap) {
            memcpy(out, p, len);
            out[len] = '\0';
            if (strstr(out, a) && strstr(out, b))
                return 1;
        }
        p += len + (end ? 1 : 0);
    }
    return 0;
}

/* The profiled kernel's line: nine fields, the device name as a field. */
static void check_device_line(const char *text)
{
    char line[512], *f[16];
    char dev[512]; /* the device name as a field: commas as \x2c */
    size_t dn = 0;
    for (const char *p = clt.device_name; *p && dn + 5 < sizeof dev; p++) {
        if (*p == ',') {
            memcpy(dev + dn, "\\x2c", 4);
            dn += 4;
        } else {
            dev[dn++] = *p;
        }
    }
    dev[dn] = '\0';

    assert_true(find_line(text, ",tiny,", ",device", line, sizeof line));
    assert_int_equal(split(line, f, 16), 9);
    assert_string_equal(f[0], "ktiming");
    assert_string_equal(f[1], "exec");
    assert_string_equal(f[2], "opencl");
    assert_string_equal(f[3], dev);
    assert_string_equal(f[4], "tiny");
    assert_true(atof(f[5]) >= 0.0);
    assert_true(atof(f[7]) >= 0.0);
    assert_string_equal(f[8], "device");
}

static void check_busy_line(const char *text)
{
    char line[512], *f[16];
    /* The busy line's time is the recorded duration (device) — 5 ms-ish, not the gate wait. */
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e = clt_find(s, "busy");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 2);
    assert_true(find_line(text, ",busy,", ",device", line, sizeof line));
    assert_int_equal(split(line, f, 16), 9);
    double ms = atof(f[5]);
    assert_true(ms > 0.0);
    int matched = 0;
    for (size_t i = 0; i < s->span_count; i++)
        if (&s->entries[s->spans[i].entry] == e && (s->spans[i].flags & KT_SPAN_DEVICE))
            matched |= fabs((double)s->spans[i].duration_ns / 1e6 - ms) < 1e-5;
    assert_true(matched);
    kt_snapshot_free(s);

}

static void check_host_line(const char *text)
{
    char line[512], *f[16];
    /* Host-timed fallback line (queue without profiling): empty stage delays, "host". */
    assert_true(find_line(text, ",busy,", ",host", line, sizeof line));
    assert_int_equal(split(line, f, 16), 9);
    assert_string_equal(f[4], "busy");
    assert_string_equal(f[6], "");
    assert_string_equal(f[7], "");
    assert_string_equal(f[8], "host");

}

static void check_error_line(const char *text)
{
    char line[512], *f[16];
    /* The failed command: an error line, the name escaped (its comma and escape sequence shown, not acted on),
     * negative status. */
    assert_true(find_line(text, "ktiming,error,", "", line, sizeof line));
    assert_int_equal(split(line, f, 16), 7);
    assert_string_equal(f[2], "opencl");
    assert_string_equal(f[4], "fail\\x2cing\\x1b[2J");
    assert_null(strchr(text, '\x1b'));
    assert_true(atoi(f[5]) < 0);
    /* the status in words: an execution status, not an enqueue error (PoCL ends it with -1: no CL_DEVICE_NOT_FOUND) */
    if (atoi(f[5]) == CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST) {
        assert_string_equal(f[6], kt_cl_error_name(atoi(f[5])));
    } else {
        char want[64];
        snprintf(want, sizeof want, "execution status %d (", atoi(f[5]));
        assert_true(!strncmp(f[6], want, strlen(want)));
    }

}

static void test_verbose_lines(void **state)
{
    (void)state;
    cl_command_queue q = clt_queue(CL_QUEUE_PROFILING_ENABLE);
    cl_command_queue qn = clt_queue(0);
    cl_mem buf = clt_buffer(64);
    cl_kernel tiny = clt_kernel("tiny", buf);
    cl_kernel busy = clt_kernel("busy", buf);
    clt_busy_iterations(q, busy, 5.0);
    kt_cl_ctx_t *kc = NULL, *kn = NULL;
    assert_int_equal(kt_cl_attach(q, NULL, &kc), 0);
    assert_int_equal(kt_cl_attach(qn, NULL, &kn), 0);
    kt_cl_stats_t info;
    kt_cl_stats(kc, &info);
    assert_int_equal(info.mode, KT_CL_MODE_ASYNC);

    capture_begin();
    cl_int err = 0;
    cl_event gate = clt.api->clCreateUserEvent(clt.context, &err);
    size_t g = 64;
    assert_int_equal(kt_cl_enqueue_ndrange(kc, tiny, 1, NULL, &g, NULL, 1, &gate, NULL), CL_SUCCESS);
    clt_sleep_ms(20);
    fflush(stderr);
    int early = strstr(read_capture(), ",tiny,") != NULL;
    clt.api->clSetUserEventStatus(gate, CL_COMPLETE);
    /* No ktiming or OpenCL call from here on this thread: the line must come from the completion path. */
    int seen = 0;
    for (int i = 0; i < 10000 && !seen; i++) {
        clt_sleep_ms(1);
        seen = strstr(read_capture(), ",tiny,") != NULL;
    }
    assert_int_equal(kt_cl_enqueue_ndrange(kc, busy, 1, NULL, &g, NULL, 0, NULL, NULL), CL_SUCCESS);
    cl_event gate2 = clt.api->clCreateUserEvent(clt.context, &err);
    cl_event failing = NULL;
    assert_int_equal(clt.api->clEnqueueNDRangeKernel(q, tiny, 1, NULL, &g, NULL, 1, &gate2, &failing), CL_SUCCESS);
    assert_int_equal(kt_cl_track(kc, failing, "fail,ing\x1b[2J"), 0); /* a hostile name */
    clt.api->clSetUserEventStatus(gate2, -3);
    assert_int_equal(kt_cl_enqueue_ndrange(kn, busy, 1, NULL, &g, NULL, 0, NULL, NULL), CL_SUCCESS);
    assert_int_equal(kt_cl_flush(NULL, 0), 0);
    capture_end();

    assert_false(early);
    assert_true(seen);
    const char *text = read_capture();
    printf("%s", text);
    check_device_line(text);
    check_busy_line(text);
    check_host_line(text);
    check_error_line(text);

    unlink(g_path);
    assert_int_equal(kt_cl_detach(kc), 0);
    assert_int_equal(kt_cl_detach(kn), 0);
    clt.api->clReleaseEvent(failing);
    clt.api->clReleaseEvent(gate);
    clt.api->clReleaseEvent(gate2);
    clt.api->clReleaseKernel(tiny);
    clt.api->clReleaseKernel(busy);
    clt.api->clReleaseMemObject(buf);
    clt.api->clReleaseCommandQueue(q);
    clt.api->clReleaseCommandQueue(qn);
}

/* One in-order queue, the collector alone recording: its lines come in enqueue order, though after a few rounds
 * the records' slots (reused through free lists) no longer are. 64 names in turn, so each line's name says where
 * it belongs. */
static void test_verbose_enqueue_order(void **state)
{
    (void)state;
    enum { ROUNDS = 6, PER_ROUND = 300, NAMES = 64 };
    cl_command_queue q = clt_queue(CL_QUEUE_PROFILING_ENABLE);
    cl_mem buf = clt_buffer(64);
    cl_kernel tiny = clt_kernel("tiny", buf);
    kt_cl_ctx_t *kc = NULL;
    assert_int_equal(kt_cl_attach(q, NULL, &kc), 0);
    size_t g = 64;
    for (int i = 0; i < 8; i++) /* the collector running before the lines counted here: every record polled */
        assert_int_equal(kt_cl_enqueue_ndrange(kc, tiny, 1, NULL, &g, NULL, 0, NULL, NULL), CL_SUCCESS);
    clt.api->clFinish(q);
    assert_int_equal(clt_wait_recorded(kc, 10000).in_flight, 0);
    capture_begin();
    int seq = 0;
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < PER_ROUND; i++, seq++) {
            cl_event ev = NULL;
            assert_int_equal(clt.api->clEnqueueNDRangeKernel(q, tiny, 1, NULL, &g, NULL, 0, NULL, &ev), CL_SUCCESS);
            char name[16];
            snprintf(name, sizeof name, "ord%02d", seq % NAMES);
            assert_int_equal(kt_cl_track(kc, ev, name), 0);
            clt.api->clReleaseEvent(ev);
        }
        clt.api->clFinish(q);
        assert_int_equal(clt_wait_recorded(kc, 10000).in_flight, 0);
    }
    capture_end();
    FILE *f = fopen(g_path, "r");
    assert_non_null(f);
    char line[512];
    int n = 0, prev = -1, out_of_order = 0;
    char where[256] = "";
    size_t wn = 0;
    while (fgets(line, sizeof line, f)) {
        const char *p = strstr(line, ",ord");
        if (!p)
            continue;
        int k = atoi(p + 4);
        if (prev >= 0 && k != (prev + 1) % NAMES) {
            out_of_order++;
            if (wn < sizeof where - 40)
                wn += (size_t)snprintf(where + wn, sizeof where - wn, " line %d: ord%02d after ord%02d;", n, k, prev);
        }
        prev = k;
        n++;
    }
    fclose(f);
    unlink(g_path);
    assert_int_equal(n, ROUNDS * PER_ROUND);
    if (out_of_order)
        fail_msg("%d lines out of enqueue order:%s", out_of_order, where);
    assert_int_equal(kt_cl_detach(kc), 0);
    clt.api->clReleaseKernel(tiny);
    clt.api->clReleaseMemObject(buf);
    clt.api->clReleaseCommandQueue(q);
}

int main(void)
{
    if (clt_init() != 0) {
        fprintf(stderr, "no OpenCL device: skipped\n");
        return KT_TEST_SKIP;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_verbose_lines),
                                       cmocka_unit_test(test_verbose_enqueue_order)};
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    clt.api->clReleaseProgram(clt.program);
    clt.api->clReleaseContext(clt.context);
    return rc;
}
