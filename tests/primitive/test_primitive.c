/* test_primitive.c — the primitive engine: CPU backend times per kernel and in total with trials, the order of
 * backend operations for deferred and immediate backends (the contract OpenCL/CUDA plug into), errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <ktiming.h>
#include <ktiming/primitive.h>

static void spin_ns(uint64_t ns)
{
    uint64_t t0 = kt_now_ns();
    while (kt_now_ns() - t0 < ns)
        ;
}

static int spin_cb(void *encoder, uint32_t trial, void *user)
{
    (void)trial;
    assert_null(encoder);
    spin_ns(*(const uint64_t *)user);
    return 0;
}

static void test_cpu_trials(void **state)
{
    (void)state;
    kt_reset();
    kt_primitive_backend_t be;
    assert_int_equal(kt_cpu_primitive_backend(&be), 0);
    uint64_t a = 1000000, b = 3000000; /* 1 ms and 3 ms per dispatch */
    const kt_primitive_kernel_t k[2] = {{"short", spin_cb, &a}, {"long", spin_cb, &b}};
    kt_primitive_t *p = NULL;
    assert_int_equal(kt_primitive_create(&(kt_primitive_desc_t){.name = "cpuprim", .kernels = k, .kernel_count = 2,
                                                                .backend = be}, &p), 0);
    kt_primitive_result_t r;
    assert_int_equal(kt_primitive_execute(p, &(kt_primitive_run_t){.trials = 5}, &r), 0);
    fprintf(stderr, "cpu primitive: short %.3f ms, long %.3f ms per dispatch, total %.3f ms\n",
            (double)r.gpu_ns[0] / 1e6, (double)r.gpu_ns[1] / 1e6, (double)r.cpu_total_ns / 1e6);
    assert_int_equal(r.kernel_count, 2);
    assert_int_equal(r.trials, 5);
    assert_true(r.gpu_total_ns[0] >= 5 * a && r.gpu_total_ns[1] >= 5 * b);
    /* Lower bounds only: a spin of a ns lasts at least a ns; a loaded machine may stretch it without limit. */
    assert_true(r.gpu_ns[0] >= a);
    assert_true(r.gpu_ns[1] >= b);
    assert_true(r.cpu_total_ns >= r.gpu_total_ns[0] + r.gpu_total_ns[1]);
    assert_true(r.cpu_ns == r.cpu_total_ns / 5);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e = kt_snapshot_find(s, "cpuprim/long", KT_BACKEND_CPU, "host");
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 1);
    assert_true(e->total_ns == r.gpu_ns[1]);
    e = kt_snapshot_find(s, "cpuprim", KT_BACKEND_CPU, "host");
    assert_non_null(e);
    assert_true(e->total_ns == r.cpu_ns);
    kt_snapshot_free(s);
    kt_primitive_destroy(p);
    kt_primitive_backend_destroy(&be);
}

/* ---------------------------------------------------------------------------------------------------
 * A scripted backend that logs the engine's calls
 * ------------------------------------------------------------------------------------------------- */

typedef struct fake_t {
    char log[512];        /* one letter per call */
    uint32_t flags;       /* ops flags to report */
    int fail_at_submit;   /* make submit fail */
    uint64_t next_tick;   /* fake device clock */
    uint64_t marks[8];    /* device ns per mark */
} fake_t;

static void logc(fake_t *f, char c)
{
    size_t n = strlen(f->log);
    if (n + 1 < sizeof(f->log)) {
        f->log[n] = c;
        f->log[n + 1] = 0;
    }
}

static const char *f_name(void *be) { (void)be; return "fake0"; }
static int f_open(void *be, uint32_t marks, void **enc) { logc(be, 'O'); *enc = be; return marks <= 8 ? 0 : KT_EINVAL; }
static int f_mark(void *be, void *enc, uint32_t i)
{
    fake_t *f = be;
    assert_ptr_equal(enc, be);
    logc(f, 'M');
    f->marks[i] = f->next_tick;
    return 0;
}
static int f_close(void *be, void *enc) { (void)enc; logc(be, 'C'); return 0; }
static int f_drain(void *be) { logc(be, 'D'); return 0; }
static int f_submit(void *be, void *enc) { (void)enc; logc(be, 'S'); return ((fake_t *)be)->fail_at_submit ? KT_EBACKEND : 0; }
static int f_wait(void *be, void *enc) { (void)enc; logc(be, 'W'); return 0; }
static int f_read(void *be, void *enc, uint32_t n, uint64_t *dev, uint64_t *host, uint64_t *unc)
{
    (void)enc;
    fake_t *f = be;
    logc(f, 'R');
    for (uint32_t i = 0; i < n; i++) {
        dev[i] = f->marks[i];
        host[i] = 0;
        unc[i] = 0;
    }
    return 0;
}

static int tick_cb(void *encoder, uint32_t trial, void *user)
{
    (void)trial;
    fake_t *f = encoder;
    logc(f, 'k');
    f->next_tick += *(const uint64_t *)user;
    return 0;
}

static int fail_cb(void *encoder, uint32_t trial, void *user)
{
    (void)encoder;
    (void)user;
    return trial == 1 ? KT_EBACKEND : 0;
}

static void run_fake(fake_t *f, uint32_t trials, kt_primitive_result_t *r)
{
    kt_primitive_ops_t ops = {
        .backend = KT_BACKEND_OPENCL, .flags = f->flags, .device_name = f_name, .open = f_open, .mark = f_mark,
        .close = f_close, .drain = f_drain, .submit = f_submit, .wait = f_wait, .read = f_read,
    };
    uint64_t d0 = 100, d1 = 250;
    const kt_primitive_kernel_t k[2] = {{"a", tick_cb, &d0}, {"b", tick_cb, &d1}};
    kt_primitive_t *p = NULL;
    assert_int_equal(kt_primitive_create(&(kt_primitive_desc_t){.name = "fake", .kernels = k, .kernel_count = 2,
                                                                .backend = {&ops, f}}, &p), 0);
    f->log[0] = 0;
    f->next_tick = 1000;
    int rc = kt_primitive_execute(p, &(kt_primitive_run_t){.trials = trials, .no_record = 1}, r);
    assert_int_equal(rc, f->fail_at_submit ? KT_EBACKEND : 0);
    kt_primitive_destroy(p);
}

static void test_deferred_order(void **state)
{
    (void)state;
    fake_t f = {.flags = 0};
    kt_primitive_result_t r;
    run_fake(&f, 3, &r);
    /* Recorded first (marks around each kernel's trials), then drain, clock, submit, wait, clock, read. */
    assert_string_equal(f.log, "OMkkkMMkkkMCDSWR");
    assert_true(r.gpu_total_ns[0] == 300 && r.gpu_ns[0] == 100);
    assert_true(r.gpu_total_ns[1] == 750 && r.gpu_ns[1] == 250);
    assert_true(r.cpu_total_ns > 0);
}

static void test_immediate_order(void **state)
{
    (void)state;
    /* OpenCL/CUDA/CPU style: recording submits, so the drain and the clock come before it and no submit. */
    fake_t f = {.flags = KT_PRIMITIVE_OPS_RECORDING_SUBMITS};
    kt_primitive_result_t r;
    run_fake(&f, 2, &r);
    assert_string_equal(f.log, "DOMkkMMkkMCWR");
    assert_true(r.gpu_ns[1] == 250);
}

static void test_errors(void **state)
{
    (void)state;
    fake_t f = {.fail_at_submit = 1};
    kt_primitive_result_t r;
    run_fake(&f, 1, &r);
    kt_primitive_backend_t be;
    assert_int_equal(kt_cpu_primitive_backend(&be), 0);
    uint64_t a = 1000;
    const kt_primitive_kernel_t k[1] = {{"x", fail_cb, &a}};
    kt_primitive_t *p = NULL;
    assert_int_equal(kt_primitive_create(&(kt_primitive_desc_t){.name = "e", .kernels = k, .kernel_count = 0,
                                                                .backend = be}, &p), KT_EINVAL);
    assert_int_equal(kt_primitive_create(&(kt_primitive_desc_t){.name = "e", .kernels = k, .kernel_count = 17,
                                                                .backend = be}, &p), KT_EINVAL);
    assert_int_equal(kt_primitive_create(&(kt_primitive_desc_t){.name = "e", .kernels = k, .kernel_count = 1},
                                         &p), KT_EINVAL);
    assert_null(p);
    assert_int_equal(kt_primitive_create(&(kt_primitive_desc_t){.name = "e", .kernels = k, .kernel_count = 1,
                                                                .backend = be}, &p), 0);
    /* A kernel callback failing on its second trial fails the execution with its code. */
    assert_int_equal(kt_primitive_execute(p, &(kt_primitive_run_t){.trials = 3}, &r), KT_EBACKEND);
    assert_int_equal(kt_primitive_execute(p, NULL, &r), 0); /* one trial: fine */
    kt_primitive_destroy(p);
    kt_primitive_backend_destroy(&be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_trials),
        cmocka_unit_test(test_deferred_order),
        cmocka_unit_test(test_immediate_order),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
