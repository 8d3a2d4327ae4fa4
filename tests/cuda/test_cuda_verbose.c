/* test_cuda_verbose.c — `ktiming run -v` lines for CUDA (issue 35.1): with KTIMING_VERBOSE=profile_exec every
 * dispatch the backend records is written as one line by the core's one writer, to KTIMING_LOG:
 *   ktiming,exec,cuda,<device>,<kernel>,<ms>,<start ns>,device
 * with the device and kernel names escaped as the exporters escape fields (',' as "\x2c"). */
#include "cuda_test_util.h"

#include <stdio.h>
#include <unistd.h>

#include "support/files.h"

static void test_one_line_per_dispatch(void **state)
{
    (void)state;
    struct CUctx_st *ctx = kt_test_ctx_enter();
    kt_test_cuda_driver_freeze_clock(1); /* event times differ by exactly the virtual work */
    assert_int_equal(kt_cuda_init(NULL), 0);
    struct CUstream_st *s = kt_test_stream();
    for (int i = 0; i < 3; i++) {
        kt_cuda_span_t span;
        assert_int_equal(kt_cuda_begin(&span, ctx, s, "vb,kernel"), 0);
        assert_int_equal(kt_test_cuda_driver_work(s, 5000, 1), 0);
        assert_int_equal(kt_cuda_end(&span), 0);
    }
    kt_flush();
    kt_snapshot_t *snap = kt_snapshot();
    const kt_kernel_timing_t *e = kt_test_find(snap, "vb,kernel");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 3);
    char prefix[512];
    snprintf(prefix, sizeof prefix, "ktiming,exec,cuda,%s,vb\\x2ckernel,0.005000,", e->device); /* its label */
    kt_snapshot_free(snap);

    const char *tmpl = getenv("KTIMING_LOG");
    assert_non_null(tmpl);
    char path[4096];
    snprintf(path, sizeof path, "%.*s%ld.log", (int)(strstr(tmpl, "%p") - tmpl), tmpl, (long)getpid());
    char *text = ktt_read_file(path, NULL);
    assert_non_null(text);
    unlink(path);
    int lines = 0, matched = 0;
    for (char *line = text, *nl; line && *line; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        lines++;
        print_message("%s\n", line);
        size_t len = strlen(line);
        matched += strncmp(line, prefix, strlen(prefix)) == 0 && len > 7 && !strcmp(line + len - 7, ",device");
    }
    free(text);
    assert_int_equal(lines, 3);
    assert_int_equal(matched, 3);
    assert_int_equal(cuStreamDestroy_v2(s), 0);
    kt_cuda_shutdown();
    kt_test_ctx_leave();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_line_per_dispatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
