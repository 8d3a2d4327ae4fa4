/* test_device_id.c — device identity (issue 34): kt_device_register keys, entries/queues/clock facts keyed by
 * identity, labels unique per snapshot (model + shortest suffix), lookups by label or key. */
#include "test_util.h"

#include "core/device_label.h"

#include <pthread.h>

static kt_device_id_t gpu(const char *model, const char *uuid, const char *pci, int ordinal)
{
    kt_device_id_t id;
    memset(&id, 0, sizeof id);
    snprintf(id.vendor, sizeof id.vendor, "NVIDIA Corporation");
    snprintf(id.model, sizeof id.model, "%s", model);
    snprintf(id.uuid, sizeof id.uuid, "%s", uuid);
    snprintf(id.pci, sizeof id.pci, "%s", pci);
    id.ordinal = ordinal;
    return id;
}

static void dispatch(kt_kernel_id_t k, uint64_t ns)
{
    kt_dispatch_t d;
    memset(&d, 0, sizeof d);
    d.kernel = k;
    d.flags = KT_SPAN_DEVICE;
    d.duration_ns = ns;
    d.start_ns = 1000;
    d.end_ns = 1000 + ns;
    kt_record_dispatch(&d);
}

/* Two GPUs of one model (an 8-GPU node): two keys, two entries, two clock records, labels "#0" / "#1". Keyed by
 * name (today's backends), both devices' dispatches land in one entry. */
static void test_equal_names_distinct_uuids(void **state)
{
    (void)state;
    kt_reset();
    kt_device_id_t a = gpu("NVIDIA H100 80GB HBM3", "GPU-8C1F0000-0000-0000-0000-00000000000A", "0000:41:00.0", 0);
    kt_device_id_t b = gpu("NVIDIA H100 80GB HBM3", "GPU-8c1f0000-0000-0000-0000-00000000000b", "0000:C1:00.0", 1);
    const char *ka = kt_device_register(KT_BACKEND_CUDA, &a), *kb = kt_device_register(KT_BACKEND_CUDA, &b);
    assert_non_null(ka);
    assert_non_null(kb);
    assert_string_not_equal(ka, kb);
    assert_string_equal(ka, "uuid:gpu-8c1f0000-0000-0000-0000-00000000000a"); /* lowercased: one device, any case */
    assert_ptr_equal(kt_device_register(KT_BACKEND_CUDA, &a), ka);              /* the same pointer again */
    a.ordinal = 5; /* CUDA_VISIBLE_DEVICES renumbered it: still the same device */
    assert_ptr_equal(kt_device_register(KT_BACKEND_CUDA, &a), ka);

    dispatch(kt_kernel_intern("gemm", KT_BACKEND_CUDA, ka), 100);
    dispatch(kt_kernel_intern("gemm", KT_BACKEND_CUDA, kb), 900);
    uint32_t qa = kt_queue_register(KT_BACKEND_CUDA, ka, "stream 1");
    uint32_t qb = kt_queue_register(KT_BACKEND_CUDA, kb, "stream 1");
    assert_int_not_equal(qa, qb);

    kt_device_info_t clk;
    memset(&clk, 0, sizeof clk);
    clk.backend = KT_BACKEND_CUDA;
    snprintf(clk.key, sizeof clk.key, "%s", kb);
    snprintf(clk.clock_domain, sizeof clk.clock_domain, "device");
    clk.error_bound_ns = 77;
    kt_device_publish(&clk); /* clock facts of GPU 1 only */

    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    const kt_kernel_timing_t *ea = kt_snapshot_find(s, "gemm", KT_BACKEND_CUDA, "NVIDIA H100 80GB HBM3 #0");
    const kt_kernel_timing_t *eb = kt_snapshot_find(s, "gemm", KT_BACKEND_CUDA, "NVIDIA H100 80GB HBM3 #1");
    assert_non_null(ea);
    assert_non_null(eb);
    assert_ptr_not_equal(ea, eb);
    assert_int_equal(ea->min_ns, 100);
    assert_int_equal(ea->max_ns, 100);
    assert_int_equal(eb->min_ns, 900);
    assert_ptr_equal(kt_snapshot_find(s, "gemm", KT_BACKEND_CUDA, kb), eb); /* a key finds the same entry */

    const kt_device_info_t *da = kt_snapshot_device(s, KT_BACKEND_CUDA, ka);
    const kt_device_info_t *db = kt_snapshot_device(s, KT_BACKEND_CUDA, "NVIDIA H100 80GB HBM3 #1");
    assert_non_null(da);
    assert_non_null(db);
    assert_ptr_not_equal(da, db);
    assert_string_equal(da->name, "NVIDIA H100 80GB HBM3 #0");
    assert_string_equal(da->id.id_kind, "uuid");
    assert_string_equal(da->id.pci, "0000:41:00.0");
    assert_string_equal(db->id.pci, "0000:C1:00.0"); /* as given; the key is lowercase */
    assert_string_equal(da->id.vendor, "NVIDIA Corporation");
    assert_int_equal(da->id.ordinal, 0);
    assert_int_equal(da->id.partition, -1);
    assert_string_equal(da->host, s->host); /* filled by the core */
    assert_int_equal(da->rank, s->rank);
    assert_int_equal(da->error_bound_ns, 0); /* GPU 1's clock facts did not overwrite GPU 0's */
    assert_int_equal(db->error_bound_ns, 77);
    assert_string_equal(db->clock_domain, "device");
    assert_string_equal(db->id.model, "NVIDIA H100 80GB HBM3"); /* identity kept across the publish */

    int seen_a = 0, seen_b = 0;
    for (size_t i = 0; i < s->queue_count; i++) {
        if (s->queues[i].backend != KT_BACKEND_CUDA)
            continue;
        seen_a += !strcmp(s->queues[i].device, "NVIDIA H100 80GB HBM3 #0");
        seen_b += !strcmp(s->queues[i].device, "NVIDIA H100 80GB HBM3 #1");
    }
    assert_int_equal(seen_a, 1);
    assert_int_equal(seen_b, 1);
    kt_snapshot_free(s);
}

/* Sub-devices keep their parent and partition: 3 + 5 dispatches stay 3 and 5; labels "sub #k". Equal devices on
 * two platforms stay apart by the platform in the key. */
static void test_subdevices_and_platforms(void **state)
{
    (void)state;
    kt_reset();
    kt_device_id_t root;
    memset(&root, 0, sizeof root);
    snprintf(root.model, sizeof root.model, "cpu-haswell");
    snprintf(root.platform, sizeof root.platform, "Portable Computing Language");
    root.ordinal = 0;
    const char *kr = kt_device_register(KT_BACKEND_OPENCL, &root);
    assert_non_null(kr);
    assert_string_equal(kr, "enumeration:0:cpu-haswell@Portable Computing Language");
    kt_device_id_t sub = root;
    snprintf(sub.parent, sizeof sub.parent, "%s", kr);
    sub.partition = 0;
    const char *k0 = kt_device_register(KT_BACKEND_OPENCL, &sub);
    sub.partition = 1;
    const char *k1 = kt_device_register(KT_BACKEND_OPENCL, &sub);
    assert_non_null(k0);
    assert_non_null(k1);
    assert_string_equal(k1, "enumeration:0:cpu-haswell@Portable Computing Language/1");
    kt_device_id_t other = root; /* the same name on a second platform */
    snprintf(other.platform, sizeof other.platform, "Other Platform");
    other.ordinal = 1;
    const char *ko = kt_device_register(KT_BACKEND_OPENCL, &other);
    assert_string_not_equal(ko, kr);

    for (int i = 0; i < 3; i++)
        dispatch(kt_kernel_intern("k", KT_BACKEND_OPENCL, k0), 10);
    for (int i = 0; i < 5; i++)
        dispatch(kt_kernel_intern("k", KT_BACKEND_OPENCL, k1), 10);
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *e0 = kt_snapshot_find(s, "k", KT_BACKEND_OPENCL, "cpu-haswell #0 sub #0");
    const kt_kernel_timing_t *e1 = kt_snapshot_find(s, "k", KT_BACKEND_OPENCL, "cpu-haswell #0 sub #1");
    assert_non_null(e0);
    assert_non_null(e1);
    assert_int_equal(e0->dispatch_count, 3);
    assert_int_equal(e1->dispatch_count, 5);
    const kt_device_info_t *d1 = kt_snapshot_device(s, KT_BACKEND_OPENCL, k1);
    assert_non_null(d1);
    assert_string_equal(d1->id.parent, kr);
    assert_int_equal(d1->id.partition, 1);
    assert_string_equal(d1->id.id_kind, "enumeration"); /* the parent's kind */
    const kt_device_info_t *dr = kt_snapshot_device(s, KT_BACKEND_OPENCL, kr);
    const kt_device_info_t *dof = kt_snapshot_device(s, KT_BACKEND_OPENCL, ko);
    assert_string_equal(dr->name, "cpu-haswell #0");
    assert_string_equal(dof->name, "cpu-haswell #1");
    kt_snapshot_free(s);
}

/* A device published by name only (today's backends, the WebGPU demo) keeps working, identified as "name". */
static void test_publish_by_name(void **state)
{
    (void)state;
    kt_reset();
    kt_device_info_t d;
    memset(&d, 0, sizeof d);
    d.backend = KT_BACKEND_VULKAN;
    snprintf(d.name, sizeof d.name, "llvmpipe (LLVM 15.0.6, 256 bits)");
    kt_device_publish(&d);
    kt_record_dispatch(&(kt_dispatch_t){.kernel = kt_kernel_intern("blur", KT_BACKEND_VULKAN, d.name),
                                        .duration_ns = 5});
    kt_snapshot_t *s = kt_snapshot();
    const kt_device_info_t *v = kt_snapshot_device(s, KT_BACKEND_VULKAN, d.name);
    assert_non_null(v);
    assert_string_equal(v->name, d.name);
    assert_string_equal(v->key, d.name);
    assert_string_equal(v->id.id_kind, "name");
    assert_int_equal(v->id.ordinal, -1);
    assert_non_null(kt_snapshot_find(s, "blur", KT_BACKEND_VULKAN, d.name));
    const kt_device_info_t *h = kt_snapshot_device(s, KT_BACKEND_CPU, "host");
    assert_non_null(h);
    assert_string_equal(h->id.id_kind, "host");
    kt_snapshot_free(s);
}

static void test_register_rejects(void **state)
{
    (void)state;
    kt_device_id_t id;
    memset(&id, 0, sizeof id);
    assert_null(kt_device_register(KT_BACKEND_CUDA, NULL));
    assert_null(kt_device_register(KT_BACKEND_CUDA, &id)); /* no model */
    snprintf(id.model, sizeof id.model, "x");
    assert_null(kt_device_register(KT_BACKEND_COUNT, &id));
    memset(id.pci, 'a', sizeof id.pci); /* not terminated: cut, never read past */
    memset(id.platform, 'p', sizeof id.platform);
    const char *k = kt_device_register(KT_BACKEND_VULKAN, &id);
    assert_non_null(k);
    assert_true(strlen(k) < KT_DEVICE_KEY_MAX);
    memset(&id, 0, sizeof id); /* a key that would pass the limit: cut, with a hash keeping it distinct */
    memset(id.model, 'm', sizeof id.model - 1);
    memset(id.platform, 'p', sizeof id.platform - 1);
    const char *l1 = kt_device_register(KT_BACKEND_VULKAN, &id);
    id.platform[0] = 'q';
    const char *l2 = kt_device_register(KT_BACKEND_VULKAN, &id);
    assert_non_null(l1);
    assert_non_null(l2);
    assert_int_equal(strlen(l1), KT_DEVICE_KEY_MAX - 1);
    assert_string_not_equal(l1, l2);
}

static kt_device_info_t rec(const char *model, const char *host, int ordinal, const char *pci, const char *key)
{
    kt_device_info_t d;
    memset(&d, 0, sizeof d);
    d.backend = KT_BACKEND_CUDA;
    snprintf(d.id.model, sizeof d.id.model, "%s", model);
    snprintf(d.host, sizeof d.host, "%s", host);
    snprintf(d.id.pci, sizeof d.id.pci, "%s", pci);
    snprintf(d.key, sizeof d.key, "%s", key);
    snprintf(d.id.id_kind, sizeof d.id.id_kind, "pci");
    d.id.ordinal = ordinal;
    d.id.partition = -1;
    d.rank = -1;
    return d;
}

/* The shortest suffix: model alone when unique, "#ordinal", then the PCI address, then the host. */
static void test_labels_shortest_suffix(void **state)
{
    (void)state;
    kt_device_info_t d[6] = {
        rec("H100", "n1", 3, "0000:41:00.0", "pci:0000:41:00.0"), /* two hosts each with a GPU #3 */
        rec("H100", "n1", 5, "0000:c1:00.0", "pci:0000:c1:00.0"),
        rec("H100", "n2", 3, "0000:42:00.0", "pci:0000:42:00.0"),
        rec("A100", "n1", 0, "0000:01:00.0", "pci:0000:01:00.0"),
        rec("GPU 0", "n1", 0, "0000:01:00.0", "pci:0000:01:00.0"), /* two hosts, same GPU, same PCI address */
        rec("GPU 0", "n2", 0, "0000:01:00.0", "pci:0000:01:00.0"),
    };
    kt__device_labels(d, 6);
    assert_string_equal(d[0].name, "H100 #3 (0000:41:00.0)");
    assert_string_equal(d[1].name, "H100 #5 (0000:c1:00.0)");
    assert_string_equal(d[2].name, "H100 #3 (0000:42:00.0)");
    assert_string_equal(d[3].name, "A100");
    assert_string_equal(d[4].name, "GPU 0 @n1");
    assert_string_equal(d[5].name, "GPU 0 @n2");
    assert_ptr_equal(kt__device_lookup(d, 6, KT_BACKEND_CUDA, "GPU 0 @n2"), &d[5]);
    assert_ptr_equal(kt__device_by_key(d, 6, KT_BACKEND_CUDA, "pci:0000:c1:00.0"), &d[1]);
    assert_true(kt__device_stable(&d[0]));
    /* records alike in every part stay apart too */
    kt_device_info_t e[2] = {rec("X", "n", 0, "", "k"), rec("X", "n", 0, "", "k")};
    kt__device_labels(e, 2);
    assert_string_not_equal(e[0].name, e[1].name);
}

/* Threads registering the same eight GPUs at once (each context of a backend meets its device on its own thread),
 * recording on them, while snapshots are taken: one key per GPU, every record in its GPU's entry. */
#define REG_THREADS 4
#define REG_GPUS 8
static const char *g_reg_keys[REG_THREADS][REG_GPUS];

static void *register_worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    for (int round = 0; round < 50; round++)
        for (int g = 0; g < REG_GPUS; g++) {
            char uuid[48];
            snprintf(uuid, sizeof uuid, "GPU-%08x-0000-0000-0000-000000000000", (unsigned)g);
            kt_device_id_t id = gpu("threaded-gpu", uuid, "", g);
            const char *k = kt_device_register(KT_BACKEND_CUDA, &id);
            if (!round)
                g_reg_keys[t][g] = k;
            else if (k != g_reg_keys[t][g])
                g_reg_keys[t][g] = NULL; /* a second pointer for one GPU: reported below */
            kt_record_dispatch(&(kt_dispatch_t){.kernel = kt_kernel_intern("threaded_k", KT_BACKEND_CUDA, k),
                                                .duration_ns = 1});
        }
    return NULL;
}

static void test_register_threads(void **state)
{
    (void)state;
    kt_reset();
    pthread_t th[REG_THREADS];
    for (int t = 0; t < REG_THREADS; t++)
        assert_int_equal(pthread_create(&th[t], NULL, register_worker, (void *)(intptr_t)t), 0);
    for (int i = 0; i < 20; i++) /* snapshots while devices are registered and recorded on */
        kt_snapshot_free(kt_snapshot());
    for (int t = 0; t < REG_THREADS; t++)
        pthread_join(th[t], NULL);
    for (int g = 0; g < REG_GPUS; g++)
        for (int t = 0; t < REG_THREADS; t++) {
            assert_non_null(g_reg_keys[t][g]);
            assert_ptr_equal(g_reg_keys[t][g], g_reg_keys[0][g]);
        }
    kt_snapshot_t *s = kt_snapshot();
    for (int g = 0; g < REG_GPUS; g++) {
        char label[64];
        snprintf(label, sizeof label, "threaded-gpu #%d", g);
        const kt_kernel_timing_t *e = kt_snapshot_find(s, "threaded_k", KT_BACKEND_CUDA, label);
        assert_non_null(e);
        assert_int_equal(e->dispatch_count, REG_THREADS * 50);
    }
    kt_snapshot_free(s);
}

/* The same device registered twice, first as CUPTI's DEVICE record knows it (UUID, no PCI address, no vendor), then
 * as the CUDA backend does (the same UUID with its PCI address): one key, and the record gains what it lacked while
 * keeping what it had (the first model text). */
static void test_register_again_fills_what_was_missing(void **state)
{
    (void)state;
    kt_reset();
    kt_device_id_t first = gpu("NVIDIA H200", "GPU-11111111-2222-3333-4444-555555555555", "", 0);
    first.vendor[0] = 0;
    kt_device_id_t again = gpu("NVIDIA H200 (backend)", "GPU-11111111-2222-3333-4444-555555555555", "0000:17:00.0", 0);
    const char *k1 = kt_device_register(KT_BACKEND_CUDA, &first);
    const char *k2 = kt_device_register(KT_BACKEND_CUDA, &again);
    assert_non_null(k1);
    assert_ptr_equal(k1, k2);
    kt_snapshot_t *s = kt_snapshot();
    const kt_device_info_t *d = kt_snapshot_device(s, KT_BACKEND_CUDA, k1);
    assert_non_null(d);
    assert_string_equal(d->id.pci, "0000:17:00.0");
    assert_string_equal(d->id.vendor, "NVIDIA Corporation");
    assert_string_equal(d->id.model, "NVIDIA H200");
    kt_snapshot_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_equal_names_distinct_uuids), cmocka_unit_test(test_subdevices_and_platforms),
        cmocka_unit_test(test_publish_by_name),            cmocka_unit_test(test_register_rejects),
        cmocka_unit_test(test_labels_shortest_suffix),     cmocka_unit_test(test_register_threads),
        cmocka_unit_test(test_register_again_fills_what_was_missing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
