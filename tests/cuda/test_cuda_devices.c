/* test_cuda_devices.c — issue 36.3: a node of identical GPUs (the double's two devices share one name, as 8 GPUs of
 * one model do). Each device stays its own entry and its own device record (`name #<ordinal>`), so neither its
 * dispatches nor its clock facts fold into another's; kt_cuda_device_info gives each board's UUID and PCI id. */
#include "cuda_test_util.h"


static void test_identical_devices_stay_apart(void **state)
{
    (void)state;
    assert_int_equal(kt_cuda_device_count(), 2);
    kt_cuda_device_t d[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(kt_cuda_device_info(i, &d[i]), 0);
    assert_string_equal(d[0].name, d[1].name); /* one model */
    assert_string_not_equal(d[0].label, d[1].label);
    assert_non_null(strstr(d[1].label, " #1"));
    assert_memory_not_equal(d[0].uuid, d[1].uuid, 16);
    assert_string_equal(d[0].pci_bus_id, "0000:17:00");
    assert_string_equal(d[1].pci_bus_id, "0000:27:00");

    struct CUctx_st *ctx[2];
    for (int i = 0; i < 2; i++) {
        assert_int_equal(kt_cuda_device_primary(i, &ctx[i]), 0);
        assert_int_equal(cuCtxPushCurrent_v2(ctx[i]), 0);
        struct CUstream_st *s = kt_test_stream();
        for (int k = 0; k <= i; k++) { /* device 0: one dispatch, device 1: two */
            kt_cuda_span_t span;
            assert_int_equal(kt_cuda_begin(&span, ctx[i], s, "same-kernel"), 0);
            assert_int_equal(kt_test_cuda_driver_work(s, 10000, 0), 0);
            assert_int_equal(kt_cuda_end(&span), 0);
        }
        assert_int_equal(cuStreamSynchronize(s), 0);
        assert_int_equal(cuStreamDestroy_v2(s), 0);
        struct CUctx_st *popped = NULL;
        assert_int_equal(cuCtxPopCurrent_v2(&popped), 0);
    }
    kt_flush();
    kt_snapshot_t *snap = kt_snapshot();
    const kt_kernel_timing_t *e0 = kt_snapshot_find(snap, "same-kernel", KT_BACKEND_CUDA, d[0].label);
    const kt_kernel_timing_t *e1 = kt_snapshot_find(snap, "same-kernel", KT_BACKEND_CUDA, d[1].label);
    assert_non_null(e0);
    assert_non_null(e1);
    assert_ptr_not_equal(e0, e1);
    assert_int_equal(e0->dispatch_count, 1);
    assert_int_equal(e1->dispatch_count, 2);
    int records = 0;
    for (size_t i = 0; i < snap->device_count; i++)
        if (snap->devices[i].backend == KT_BACKEND_CUDA &&
            (!strcmp(snap->devices[i].name, d[0].label) || !strcmp(snap->devices[i].name, d[1].label)))
            records++;
    assert_int_equal(records, 2); /* one device record each: their clock facts are not merged */
    kt_snapshot_free(snap);
    kt_cuda_shutdown();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_identical_devices_stay_apart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
