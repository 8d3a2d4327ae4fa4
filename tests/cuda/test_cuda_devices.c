/* test_cuda_devices.c — issues 36.3 and 34: a node of identical GPUs (the double's two devices share one name, as 8
 * GPUs of one model do). Each device is registered by its identity (UUID "GPU-..." as nvidia-smi writes it, PCI
 * domain:bus:device, ordinal): entries, tracks and clock facts are keyed by it, so neither its dispatches nor its
 * clock facts fold into another's, and the snapshot labels them "<model> #<ordinal>". With KT_TEST_CUDA_MIG=1 the
 * two devices are MIG instances of one GPU: one PCI address, UUIDs "MIG-...", still two devices. */
#include "cuda_test_util.h"

#include <stdlib.h>
#include <strings.h>


/* n spans named `name` of 10 us of work each on a new stream of ctx (made current meanwhile), completed. */
static void time_spans(struct CUctx_st *ctx, const char *name, int n)
{
    assert_int_equal(cuCtxPushCurrent_v2(ctx), 0);
    struct CUstream_st *s = kt_test_stream();
    for (int k = 0; k < n; k++) {
        kt_cuda_span_t span;
        assert_int_equal(kt_cuda_begin(&span, ctx, s, name), 0);
        assert_int_equal(kt_test_cuda_driver_work(s, 10000, 0), 0);
        assert_int_equal(kt_cuda_end(&span), 0);
    }
    assert_int_equal(cuStreamSynchronize(s), 0);
    assert_int_equal(cuStreamDestroy_v2(s), 0);
    struct CUctx_st *popped = NULL;
    assert_int_equal(cuCtxPopCurrent_v2(&popped), 0);
}

/* One source of labels: a program that uses only the second of two identical GPUs records it under the label
 * kt_cuda_device_info (and so `ktiming devices`) gives, "<model> #1", not the bare model a registry holding only
 * that device would give. Runs first: the core's device registry lasts for the process. */
static void test_label_is_the_snapshots_when_one_device_is_used(void **state)
{
    (void)state;
    struct CUctx_st *ctx = NULL;
    assert_int_equal(kt_cuda_device_primary(1, &ctx), 0);
    time_spans(ctx, "only-on-one", 1);
    kt_flush();
    kt_snapshot_t *snap = kt_snapshot(); /* before anything asked about device 0 */
    kt_cuda_device_t d;
    assert_int_equal(kt_cuda_device_info(1, &d), 0);
    const kt_device_info_t *rec = kt_snapshot_device(snap, KT_BACKEND_CUDA, d.key);
    assert_non_null(rec);
    print_message("device 1: kt_cuda_device_info label \"%s\", snapshot label \"%s\"\n", d.label, rec->name);
    assert_string_equal(rec->name, d.label);
    assert_non_null(strstr(d.label, " #1"));
    const kt_kernel_timing_t *e = kt_snapshot_find(snap, "only-on-one", KT_BACKEND_CUDA, d.label);
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 1);
    kt_snapshot_free(snap);
    kt_cuda_shutdown();
}

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
    const char *mig_env = getenv("KT_TEST_CUDA_MIG");
    int mig = mig_env && mig_env[0] == '1';
    /* KT_TEST_CUDA_PCI_DOMAIN (the MIG run): a domain past 0xffff, as VMD numbers them, kept whole */
    const char *dom_env = getenv("KT_TEST_CUDA_PCI_DOMAIN");
    char bus0[32], bus1[32], pci0[40], pci1[40];
    unsigned dom = dom_env ? (unsigned)strtoul(dom_env, NULL, 0) : 0u;
    snprintf(bus0, sizeof bus0, "%04x:17:00", dom);
    snprintf(bus1, sizeof bus1, "%04x:%s", dom, mig ? "17:00" : "27:00"); /* MIG instances share their GPU */
    snprintf(pci0, sizeof pci0, "%s.0", bus0);
    snprintf(pci1, sizeof pci1, "%s.0", bus1);
    assert_string_equal(d[0].pci_bus_id, bus0);
    assert_string_equal(d[1].pci_bus_id, bus1);
    char uuid[2][48];
    for (int i = 0; i < 2; i++) { /* the double's bytes, as nvidia-smi writes them */
        const unsigned char *u = d[i].uuid;
        snprintf(uuid[i], sizeof uuid[i], "%s-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                 mig ? "MIG" : "GPU", u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
                 u[13], u[14], u[15]);
        assert_string_equal(d[i].uuid_text, uuid[i]);
        assert_int_equal(d[i].mig, mig);
    }
    assert_string_not_equal(d[0].key, d[1].key);

    struct CUctx_st *ctx[2];
    for (int i = 0; i < 2; i++) {
        assert_int_equal(kt_cuda_device_primary(i, &ctx[i]), 0);
        time_spans(ctx[i], "same-kernel", i + 1); /* device 0: one dispatch, device 1: two */
    }
    /* Device 1's clock facts differ from device 0's: its %globaltimer granularity is measured (device 0 keeps the
     * event resolution), so facts published under the wrong device's record show. */
    uint64_t gt_res = 0;
    assert_int_equal(kt_cuda_globaltimer_resolution(ctx[1], &gt_res), 0);
    assert_true(gt_res > 0 && gt_res != KT_CUDA_EVENT_RESOLUTION_NS);
    kt_flush();
    kt_snapshot_t *snap = kt_snapshot();
    const kt_kernel_timing_t *e0 = kt_snapshot_find(snap, "same-kernel", KT_BACKEND_CUDA, d[0].label);
    const kt_kernel_timing_t *e1 = kt_snapshot_find(snap, "same-kernel", KT_BACKEND_CUDA, d[1].label);
    assert_ptr_equal(kt_snapshot_find(snap, "same-kernel", KT_BACKEND_CUDA, d[0].key), e0); /* by key too */
    assert_ptr_equal(kt_snapshot_find(snap, "same-kernel", KT_BACKEND_CUDA, d[1].key), e1);
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
    /* Issue 34: each record carries the identity it was registered with, and its label is the model + ordinal. */
    for (int i = 0; i < 2; i++) {
        const kt_device_info_t *rec = kt_snapshot_device(snap, KT_BACKEND_CUDA, d[i].key);
        assert_non_null(rec);
        assert_string_equal(rec->name, d[i].label);
        assert_string_equal(rec->key, d[i].key);
        assert_string_equal(rec->id.id_kind, "uuid");
        assert_string_equal(rec->id.vendor, "NVIDIA");
        assert_string_equal(rec->id.model, d[i].name);
        assert_int_equal(strcasecmp(rec->id.uuid, uuid[i]), 0); /* the core keeps it lowercased */
        assert_string_equal(rec->id.pci, i ? pci1 : pci0);
        assert_int_equal(rec->id.ordinal, i);
        /* each device's own clock facts, published under its own record */
        assert_string_equal(rec->clock_domain, "device");
        assert_int_equal(rec->frequency_hz, KT_CUDA_GLOBALTIMER_HZ);
        assert_int_equal(rec->resolution_ns, i ? gt_res : KT_CUDA_EVENT_RESOLUTION_NS);
    }
    kt_snapshot_free(snap);
    kt_cuda_shutdown();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_label_is_the_snapshots_when_one_device_is_used),
        cmocka_unit_test(test_identical_devices_stay_apart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
