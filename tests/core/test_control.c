/* test_control.c — enable/disable/reset/init/shutdown semantics, interning rules, errors and names. */
#include "test_util.h"

static uint64_t count_of(const char *name, kt_backend_t b)
{
    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    const kt_kernel_timing_t *t = kt_snapshot_find(s, name, b, NULL);
    uint64_t n = t ? t->dispatch_count : 0;
    kt_snapshot_free(s);
    return n;
}

static void test_init_once(void **state)
{
    (void)state;
    assert_int_equal(kt_init(NULL), 0); /* first: fine */
    assert_int_equal(kt_init(NULL), KT_ESTATE);
    assert_int_equal(kt_is_enabled(), 1); /* enabled by default */
}

static void test_enable_disable(void **state)
{
    (void)state;
    kt_reset();
    kt_record("ed", KT_BACKEND_CPU, 10);
    kt_disable();
    assert_int_equal(kt_is_enabled(), 0);
    kt_record("ed", KT_BACKEND_CPU, 10);
    KT_RECORD("ed", KT_BACKEND_CPU, 10);
    kt_record_dispatch(&(kt_dispatch_t){.kernel = kt_kernel_intern("ed", KT_BACKEND_CPU, NULL), .duration_ns = 10});
    kt_enable();
    assert_int_equal(kt_is_enabled(), 1);
    kt_record("ed", KT_BACKEND_CPU, 10);
    assert_int_equal(count_of("ed", KT_BACKEND_CPU), 2);
}

static void test_reset(void **state)
{
    (void)state;
    kt_kernel_id_t id = kt_kernel_intern("rs", KT_BACKEND_CPU, NULL);
    kt_record_dispatch(&(kt_dispatch_t){.kernel = id, .duration_ns = 5});
    kt_record_error(id, NULL);
    kt_record_drop(id, KT_DROP_UNSPECIFIED);
    kt_reset();
    kt_snapshot_t *s = kt_snapshot();
    assert_int_equal(s->count, 0); /* nothing at all after a reset */
    assert_int_equal(s->span_count, 0);
    kt_snapshot_free(s);
    assert_int_equal(kt_kernel_intern("rs", KT_BACKEND_CPU, NULL), id); /* ids stay valid */
    kt_record_dispatch(&(kt_dispatch_t){.kernel = id, .duration_ns = 7});
    s = kt_snapshot();
    const kt_kernel_timing_t *t = kt_snapshot_find(s, "rs", KT_BACKEND_CPU, NULL);
    assert_non_null(t);
    assert_int_equal(t->dispatch_count, 1);
    assert_int_equal(t->min_ns, 7);
    assert_int_equal(t->errors, 0);
    assert_int_equal(t->dropped, 0);
    kt_snapshot_free(s);
}

static void test_errors_and_drops(void **state)
{
    (void)state;
    kt_reset();
    kt_kernel_id_t id = kt_kernel_intern("ferr", KT_BACKEND_OPENCL, "dev0");
    kt_record_dispatch(&(kt_dispatch_t){.kernel = id, .duration_ns = 100});
    kt_record_error(id, NULL);
    kt_record_error(id, NULL);
    kt_record_drop(id, KT_DROP_UNSPECIFIED);
    kt_dispatch_t d;
    memset(&d, 0, sizeof d);
    d.kernel = id;
    d.flags = KT_SPAN_ERROR;
    d.duration_ns = 999999;
    kt_record_dispatch(&d);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *t = kt_snapshot_find(s, "ferr", KT_BACKEND_OPENCL, "dev0");
    assert_non_null(t);
    assert_int_equal(t->dispatch_count, 1); /* errors and drops are not aggregated */
    assert_int_equal(t->total_ns, 100);
    assert_int_equal(t->errors, 3);
    assert_int_equal(t->dropped, 1);
    kt_snapshot_free(s);

    /* An entry with only errors still appears. */
    kt_record_error(kt_kernel_intern("only_err", KT_BACKEND_CUDA, NULL), NULL);
    s = kt_snapshot();
    t = kt_snapshot_find(s, "only_err", KT_BACKEND_CUDA, "default");
    assert_non_null(t);
    assert_int_equal(t->dispatch_count, 0);
    assert_int_equal(t->errors, 1);
    assert_int_equal(t->min_ns, 0);
    assert_int_equal(t->sample_count, 0);
    assert_null(t->samples);
    kt_snapshot_free(s);
}

static void test_interning(void **state)
{
    (void)state;
    kt_kernel_id_t a = kt_kernel_intern("k", KT_BACKEND_CPU, NULL);
    assert_int_not_equal(a, 0);
    assert_int_equal(kt_kernel_intern("k", KT_BACKEND_CPU, "host"), a); /* NULL = "host" for CPU */
    assert_int_not_equal(kt_kernel_intern("k", KT_BACKEND_CPU, "other"), a);
    kt_kernel_id_t g = kt_kernel_intern("k", KT_BACKEND_VULKAN, NULL);
    assert_int_not_equal(g, a);
    assert_int_equal(kt_kernel_intern("k", KT_BACKEND_VULKAN, "default"), g); /* "default" otherwise */
    assert_int_equal(kt_kernel_intern(NULL, KT_BACKEND_CPU, NULL), 0);
    assert_int_equal(kt_kernel_intern("k", (kt_backend_t)42, NULL), 0);
    char buf[16];
    strcpy(buf, "copied");
    kt_kernel_id_t c = kt_kernel_intern(buf, KT_BACKEND_CPU, NULL);
    strcpy(buf, "changed"); /* the name was copied */
    assert_int_equal(kt_kernel_intern("copied", KT_BACKEND_CPU, NULL), c);

    /* kt_record through a reused buffer: the pointer cache must not confuse the two names. */
    kt_reset();
    strcpy(buf, "buf_a");
    kt_record(buf, KT_BACKEND_CPU, 1);
    strcpy(buf, "buf_b");
    kt_record(buf, KT_BACKEND_CPU, 2);
    kt_record(buf, KT_BACKEND_CPU, 2);
    assert_int_equal(count_of("buf_a", KT_BACKEND_CPU), 1);
    assert_int_equal(count_of("buf_b", KT_BACKEND_CPU), 2);

    /* Invalid ids are ignored, not crashes. */
    kt_record_dispatch(&(kt_dispatch_t){.kernel = 0, .duration_ns = 1});
    kt_record_dispatch(&(kt_dispatch_t){.kernel = 60000, .duration_ns = 1});
    kt_record_error(0, NULL);
    kt_record_drop(123456, KT_DROP_UNSPECIFIED);
    kt_record(NULL, KT_BACKEND_CPU, 1);
}

static void test_shutdown_and_reinit(void **state)
{
    (void)state;
    kt_reset();
    kt_record("sd", KT_BACKEND_CPU, 1);
    kt_shutdown();
    assert_int_equal(kt_is_enabled(), 0);
    kt_record("sd", KT_BACKEND_CPU, 1);
    kt_enable(); /* still shut down: records are dropped until kt_init */
    kt_record("sd", KT_BACKEND_CPU, 1);
    assert_int_equal(count_of("sd", KT_BACKEND_CPU), 1); /* data survives shutdown */
    kt_desc_t d;
    memset(&d, 0, sizeof d);
    d.start_disabled = 1;
    assert_int_equal(kt_init(&d), 0);
    assert_int_equal(kt_is_enabled(), 0);
    kt_enable();
    kt_record("sd", KT_BACKEND_CPU, 1);
    assert_int_equal(count_of("sd", KT_BACKEND_CPU), 2);
}

static void test_names(void **state)
{
    (void)state;
    assert_string_equal(kt_strerror(0), "success");
    assert_string_equal(kt_strerror(KT_EINVAL), "invalid argument");
    assert_string_equal(kt_strerror(KT_EUNAVAILABLE), "backend or device unavailable");
    assert_string_equal(kt_strerror(KT_EDISABLED), "ktiming compiled out");
    assert_string_equal(kt_strerror(-999), "unknown error");
    assert_string_equal(kt_backend_name(KT_BACKEND_CPU), "CPU");
    assert_string_equal(kt_backend_name(KT_BACKEND_OPENCL), "OpenCL");
    assert_string_equal(kt_backend_name(KT_BACKEND_VULKAN), "Vulkan");
    assert_string_equal(kt_backend_name(KT_BACKEND_CUDA), "CUDA");
    assert_string_equal(kt_backend_name(KT_BACKEND_METAL), "Metal");
    assert_string_equal(kt_backend_name((kt_backend_t)99), "unknown");
    assert_string_equal(kt_version(), KT_VERSION_STRING);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_once),
        cmocka_unit_test(test_enable_disable),
        cmocka_unit_test(test_reset),
        cmocka_unit_test(test_errors_and_drops),
        cmocka_unit_test(test_interning),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_shutdown_and_reinit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
