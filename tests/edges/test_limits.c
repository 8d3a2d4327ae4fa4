/* test_limits.c — snapshot readers are bounded: a first byte that cannot start a snapshot fails at once
 * (/dev/zero), a file or stream beyond the size limit is refused with a clear message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <ktiming.h>
#include <ktiming/analysis.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void test_dev_zero_fails_fast(void **state)
{
    (void)state;
    kt_snapshot_t *s = (kt_snapshot_t *)1;
    char err[512];
    alarm(120); /* before the fix this read until memory ran out; the alarm turns a hang into a failure */
    assert_int_equal(kt_snapshot_load("/dev/zero", NULL, &s, err, sizeof err), KT_EPARSE);
    alarm(0);
    assert_null(s);
    assert_non_null(strstr(err, "/dev/zero: not a ktiming snapshot: byte 0x00 at offset 0"));
}

static void test_file_over_limit(void **state)
{
    (void)state;
    char path[] = "/tmp/kt-limits.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    kt_record("limit_kernel", KT_BACKEND_CPU, 10);
    kt_snapshot_t *snap = kt_snapshot();
    assert_int_equal(kt_report_write(path, snap, KT_FORMAT_JSON, NULL), 0);
    kt_snapshot_free(snap);
    kt_snapshot_t *s = NULL;
    char err[512];
    assert_int_equal(kt_snapshot_load(path, &(kt_load_opts_t){.max_bytes = 100}, &s, err, sizeof err), KT_EFULL);
    assert_null(s);
    assert_non_null(strstr(err, "larger than the input limit"));
    assert_int_equal(kt_snapshot_load(path, &(kt_load_opts_t){.max_bytes = 1u << 20}, &s, err, sizeof err), 0);
    assert_non_null(kt_snapshot_find(s, "limit_kernel", KT_BACKEND_CPU, NULL));
    kt_snapshot_free(s);
    /* max_bytes 0 is the default limit (KT_SNAPSHOT_MAX_INPUT_DEFAULT), not "nothing" */
    assert_int_equal(kt_snapshot_load(path, &(kt_load_opts_t){.max_bytes = 0}, &s, err, sizeof err), 0);
    kt_snapshot_free(s);
    unlink(path);
}

/* A stream (no size to check up front) stops being read one byte past the limit. */
static void test_stream_over_limit(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        char buf[4096];
        memset(buf, ' ', sizeof buf);
        buf[0] = '{';
        for (;;) /* endless: only the reader's limit ends it (SIGPIPE) */
            if (write(p[1], buf, sizeof buf) < 0)
                _exit(0);
    }
    close(p[1]);
    char path[64];
    snprintf(path, sizeof path, "/dev/fd/%d", p[0]);
    kt_snapshot_t *s = NULL;
    char err[512];
    assert_int_equal(kt_snapshot_load(path, &(kt_load_opts_t){.max_bytes = 1u << 20}, &s, err, sizeof err), KT_EFULL);
    assert_non_null(strstr(err, "stopped reading"));
    close(p[0]);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dev_zero_fails_fast),
        cmocka_unit_test(test_file_over_limit),
        cmocka_unit_test(test_stream_over_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
