/* test_drops.c — drop reasons, named errors, bytes, exact 128-bit sums and saturating totals, error-code names,
 * pid and rank in snapshots. */
#include "test_util.h"

#include <unistd.h>

static const kt_kernel_timing_t *find(kt_snapshot_t *s, const char *name)
{
    const kt_kernel_timing_t *t = kt_snapshot_find(s, name, KT_BACKEND_OPENCL, "dev");
    assert_non_null(t);
    return t;
}

static void test_drop_reasons(void **state)
{
    (void)state;
    kt_reset();
    kt_kernel_id_t k = kt_kernel_intern("dropper", KT_BACKEND_OPENCL, "dev");
    kt_record_drop(k, KT_DROP_UNSPECIFIED);
    kt_record_drop(k, KT_DROP_RING_FULL);
    kt_record_drop(k, KT_DROP_RING_FULL);
    kt_record_drop(k, KT_DROP_IN_FLIGHT_AT_EXIT);
    kt_record_drop(k, (kt_drop_reason_t)99); /* out of range: unspecified, still counted */
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *t = find(s, "dropper");
    assert_int_equal(t->dropped, 5);
    assert_int_equal(t->dropped_by[KT_DROP_UNSPECIFIED], 2);
    assert_int_equal(t->dropped_by[KT_DROP_RING_FULL], 2);
    assert_int_equal(t->dropped_by[KT_DROP_IN_FLIGHT_AT_EXIT], 1);
    assert_int_equal(t->dispatch_count, 0);
    kt_snapshot_free(s);
    assert_string_equal(kt_drop_reason_name(KT_DROP_RING_FULL), "ring full");
    assert_string_equal(kt_drop_reason_name(KT_DROP_SIMULTANEOUS_USE), "simultaneous-use command buffer");
    assert_string_equal(kt_drop_reason_name(KT_DROP_REASON_COUNT), "unknown");
}

static void test_error_names(void **state)
{
    (void)state;
    kt_reset();
    kt_kernel_id_t k = kt_kernel_intern("failing", KT_BACKEND_OPENCL, "dev");
    kt_record_error(k, NULL);
    kt_record_error(k, "CL_INVALID_WORK_GROUP_SIZE");
    kt_record_error(k, NULL); /* counted, name kept */
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *t = find(s, "failing");
    assert_int_equal(t->errors, 3);
    assert_string_equal(t->last_error, "CL_INVALID_WORK_GROUP_SIZE");
    kt_snapshot_free(s);
    char longname[100];
    memset(longname, 'E', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    kt_record_error(k, longname); /* truncated, never overflowing */
    s = kt_snapshot();
    t = find(s, "failing");
    assert_int_equal(strlen(t->last_error), sizeof t->last_error - 1);
    kt_snapshot_free(s);
    kt_reset(); /* a new generation forgets it */
    kt_record_error(k, NULL);
    s = kt_snapshot();
    assert_string_equal(find(s, "failing")->last_error, "");
    kt_snapshot_free(s);
}

static void test_bytes(void **state)
{
    (void)state;
    kt_reset();
    kt_kernel_id_t k = kt_kernel_intern("clEnqueueWriteBuffer", KT_BACKEND_OPENCL, "dev");
    kt_dispatch_t d;
    memset(&d, 0, sizeof d);
    d.kernel = k;
    d.duration_ns = 100;
    d.bytes = 4096;
    kt_record_dispatch(&d);
    d.bytes = 1;
    kt_record_dispatch(&d);
    d.flags = KT_SPAN_ERROR; /* failed commands move nothing that counts */
    d.bytes = 1 << 20;
    kt_record_dispatch(&d);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *t = find(s, "clEnqueueWriteBuffer");
    assert_int_equal(t->bytes, 4097);
    assert_int_equal(t->dispatch_count, 2);
    assert_int_equal(t->errors, 1);
    kt_snapshot_free(s);
}

static void test_exact_sums(void **state)
{
    (void)state;
    kt_reset();
    kt_kernel_id_t k = kt_kernel_intern("huge", KT_BACKEND_OPENCL, "dev");
    const uint64_t big = UINT64_MAX - 10;
    kt_record_dispatch(&(kt_dispatch_t){.kernel = k, .duration_ns = big});
    kt_record_dispatch(&(kt_dispatch_t){.kernel = k, .duration_ns = big});
    kt_record_dispatch(&(kt_dispatch_t){.kernel = k, .duration_ns = 30});
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *t = find(s, "huge");
    unsigned __int128 want = (unsigned __int128)big * 2 + 30;
    assert_int_equal(t->total_ns, UINT64_MAX); /* saturated, never wrapped */
    assert_int_equal(t->total128.lo, (uint64_t)want);
    assert_int_equal(t->total128.hi, (uint64_t)(want >> 64));
    assert_true(t->mean_ns >= (double)t->min_ns && t->mean_ns <= (double)t->max_ns);
    assert_true(isnan(t->stddev_ns)); /* the sum of squares passed 2^128: unknown, never a wrapped value */
    kt_snapshot_free(s);

    kt_reset();
    kt_record_dispatch(&(kt_dispatch_t){.kernel = k, .duration_ns = 3});
    kt_record_dispatch(&(kt_dispatch_t){.kernel = k, .duration_ns = 5});
    s = kt_snapshot();
    t = find(s, "huge");
    assert_int_equal(t->total128.lo, 8);
    assert_int_equal(t->total128.hi, 0);
    assert_int_equal(t->sumsq128.lo, 34);
    assert_int_equal(t->total_ns, 8);
    kt_snapshot_free(s);
}

static void test_names_and_identity(void **state)
{
    (void)state;
    assert_string_equal(kt_err_name(KT_EINVAL), "KT_EINVAL");
    assert_string_equal(kt_err_name(KT_EDISABLED), "KT_EDISABLED");
    assert_string_equal(kt_err_name(0), "KT_OK");
    assert_string_equal(kt_err_name(-999), "KT_E?");
    unsetenv("OMPI_COMM_WORLD_RANK");
    unsetenv("PMI_RANK");
    unsetenv("PMIX_RANK");
    setenv("SLURM_PROCID", "5", 1);
    kt_snapshot_t *s = kt_snapshot();
    assert_int_equal(s->pid, (int64_t)getpid());
    assert_int_equal(s->rank, 5);
    assert_int_equal(s->kernels_dropped, 0);
    kt_snapshot_free(s);
    unsetenv("SLURM_PROCID");
    s = kt_snapshot();
    assert_int_equal(s->rank, -1);
    kt_snapshot_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_drop_reasons), cmocka_unit_test(test_error_names),
        cmocka_unit_test(test_bytes),        cmocka_unit_test(test_exact_sums),
        cmocka_unit_test(test_names_and_identity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
