/* test_cuda_cli.c — the CLI's CUDA hooks: `ktiming devices` lists the device with its clock facts and
 * `ktiming demo` times its kernels (run by the driver TEST DOUBLE, which simulates them by name); with
 * KT_TEST_EXPECT_UNAVAILABLE=1 (no driver) both report the reason and return KT_EUNAVAILABLE; with
 * KT_TEST_EXPECT_DEMO_ERROR=NAME (a driver too old for the demo's PTX) the demo fails naming the driver's code;
 * KT_TEST_EXPECT_CC overrides the compute capability `devices` must show. */
#include "cuda_test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli.h"

static int expect_unavailable(void)
{
    const char *s = getenv("KT_TEST_EXPECT_UNAVAILABLE");
    return s && s[0] == '1';
}

static void test_devices(void **state)
{
    (void)state;
    char buf[4096] = {0};
    FILE *f = tmpfile();
    assert_non_null(f);
    int n = ktcli_devices_cuda(f);
    rewind(f);
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = 0;
    print_message("%s", buf);
    if (expect_unavailable()) {
        assert_int_equal(n, KT_EUNAVAILABLE);
        assert_non_null(strstr(buf, "CUDA: CUDA driver not found: dlopen("));
        return;
    }
    assert_int_equal(n, 1);
    assert_non_null(strstr(buf, "ktiming test double (not a GPU)"));
    char cc[64];
    const char *want = getenv("KT_TEST_EXPECT_CC");
    snprintf(cc, sizeof cc, "compute capability %s", want && want[0] ? want : "9.0");
    assert_non_null(strstr(buf, cc));
    const char *demo_error = getenv("KT_TEST_EXPECT_DEMO_ERROR");
    if (demo_error && demo_error[0]) { /* a driver too old for any PTX ktiming has: no %globaltimer facts */
        assert_non_null(strstr(buf, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"));
        return;
    }
    assert_non_null(strstr(buf, "update granularity 1000 ns"));
    assert_non_null(strstr(buf, "calibration vs CLOCK_MONOTONIC_RAW"));
}

static void test_demo(void **state)
{
    (void)state;
    ktcli_demo_opts_t opts = {.warmup = 1, .dispatches = 12, .bytes = 1 << 16, .verbose = 1};
    const char *demo_error = getenv("KT_TEST_EXPECT_DEMO_ERROR");
    if (demo_error && demo_error[0]) { /* capture what the demo says on stderr */
        char path[] = "/tmp/kt_cuda_cli_XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        fflush(stderr);
        int saved = dup(2);
        dup2(fd, 2);
        int rc = ktcli_demo_cuda(&opts);
        fflush(stderr);
        dup2(saved, 2);
        close(saved);
        char buf[4096] = {0};
        ssize_t len = pread(fd, buf, sizeof buf - 1, 0);
        close(fd);
        unlink(path);
        print_message("%s", len > 0 ? buf : "");
        assert_int_equal(rc, KT_EBACKEND);
        assert_non_null(strstr(buf, "cuModuleLoadData"));
        assert_non_null(strstr(buf, demo_error));
        assert_non_null(strstr(buf, "(222)"));
        kt_cuda_shutdown();
        return;
    }
    int rc = ktcli_demo_cuda(&opts);
#if defined(KTCLI_CUDA_DEMO_PTX)
    if (!expect_unavailable()) {
        assert_int_equal(rc, 0);
        kt_snapshot_t *snap = kt_snapshot();
        const kt_kernel_timing_t *e = kt_test_find(snap, "saxpy");
        assert_non_null(e);
        assert_int_equal(e->dispatch_count, 12);
        assert_true(e->min_ns >= 20000 - 64); /* the double's simulated kernel: 20 us */
        e = kt_test_find(snap, "scale");
        assert_non_null(e);
        assert_int_equal(e->dispatch_count, 12);
        kt_snapshot_free(snap);
        kt_cuda_shutdown();
        return;
    }
#endif
    assert_int_equal(rc, KT_EUNAVAILABLE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_devices),
        cmocka_unit_test(test_demo),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
