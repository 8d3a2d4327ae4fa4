/* test_cl_two_devices.c — two devices of one model are two devices: each has its own entries (3 and 5 dispatches,
 * not one entry of 8) and its own published clock facts, whichever way they are alike:
 *   (no argument)  two identical root devices of one platform (PoCL with POCL_DEVICES="pthread pthread");
 *   sub            two sub-devices of the first device (clCreateSubDevices, CL_DEVICE_PARTITION_EQUALLY; PoCL);
 *   platforms      one device on each of two platforms with the same name (the driver double, FAKE_CL_PLATFORMS=2);
 *   ids            the same with cl_khr_device_uuid and cl_khr_pci_bus_info (FAKE_CL_IDS=1);
 *   sub (on the double with FAKE_CL_IDS=1): sub-devices of a device with a UUID keep the parent's key and kind.
 * Each device's identity in the snapshot (issue 34) is checked too: ordinal, platform, parent and partition, UUID and
 * PCI address where the driver gives them, and the labels that keep the two apart.
 * Skipped (77) where the driver cannot give two such devices. */
#include <ktiming.h>
#include <ktiming/cl.h>

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KT_TEST_SKIP 77

static const kt_cl_api_t *cl;
static cl_device_id g_devs[2];
static const char *g_how = ""; /* the argument: "", "sub", "platforms" or "ids" */

/* The device record of an entry, its identity checked for the kind of pair under test. */
static const kt_device_info_t *check_identity(const kt_snapshot_t *s, const kt_kernel_timing_t *e)
{
    const kt_device_info_t *d = kt_snapshot_device(s, KT_BACKEND_OPENCL, e->device);
    assert_non_null(d);
    assert_string_equal(d->name, e->device); /* the entry carries the record's label */
    char want[256];
    printf("device \"%s\": key \"%s\", id_kind %s, ordinal %d, platform \"%s\", parent \"%s\" #%d, uuid \"%s\", "
           "pci \"%s\"\n",
           d->name, d->key, d->id.id_kind, (int)d->id.ordinal, d->id.platform, d->id.parent, (int)d->id.partition,
           d->id.uuid, d->id.pci);
    if (!strcmp(g_how, "sub")) { /* a sub-device: its parent's key and its partition, no ids of its own */
        assert_string_not_equal(d->id.parent, "");
        assert_true(d->id.partition == 0 || d->id.partition == 1);
        assert_string_equal(d->id.uuid, "");
        if (getenv("FAKE_CL_IDS")) { /* the double's parent has a UUID: the sub-device's key is "uuid:<parent>/<k>" */
            assert_string_equal(d->id.id_kind, "uuid");
            snprintf(want, sizeof want, "%s/%d", d->id.parent, (int)d->id.partition);
            assert_string_equal(d->key, want);
            assert_true(!strncmp(d->id.parent, "uuid:", 5));
        }
        snprintf(want, sizeof want, " sub #%d", (int)d->id.partition);
        assert_true(strlen(d->name) > strlen(want) && !strcmp(d->name + strlen(d->name) - strlen(want), want));
        return d;
    }
    assert_string_equal(d->id.parent, "");
    assert_true(d->id.ordinal == 0 || d->id.ordinal == 1);
    assert_string_not_equal(d->id.platform, "");
    snprintf(want, sizeof want, "%s #%d", d->id.model, (int)d->id.ordinal); /* two of one model: "#<ordinal>" */
    assert_string_equal(d->name, want);
    if (!strcmp(g_how, "ids")) { /* the driver double's ids (fake_opencl.c), the ordinal being the platform's index */
        assert_string_equal(d->id.id_kind, "uuid");
        snprintf(want, sizeof want, "0000000%d-0000-4000-8000-0000000000%d0", (int)d->id.ordinal, (int)d->id.ordinal);
        assert_string_equal(d->id.uuid, want);
        snprintf(want, sizeof want, "0000:4%d:00.0", 1 + (int)d->id.ordinal);
        assert_string_equal(d->id.pci, want);
        assert_string_equal(d->id.driver_uuid, "ffffffff-ffff-ffff-ffff-ffffffffffff");
    } else { /* PoCL and the plain double have no stable id: the enumeration order says which is which */
        assert_string_equal(d->id.id_kind, "enumeration");
        assert_string_equal(d->id.uuid, "");
        assert_string_equal(d->id.pci, "");
    }
    return d;
}

static void test_two_entries(void **state)
{
    (void)state;
    const int counts[2] = {3, 5};
    size_t g = 1;
    cl_context ctx[2];
    cl_program prog[2];
    cl_kernel k[2];
    cl_command_queue q[2];
    kt_cl_ctx_t *kc[2];
    for (int d = 0; d < 2; d++) { /* both attached (ktiming has met both devices) before either runs */
        cl_int err = 0;
        ctx[d] = cl->clCreateContext(NULL, 1, &g_devs[d], NULL, NULL, &err);
        assert_non_null(ctx[d]);
        const char *src = "__kernel void twin(void) {}";
        prog[d] = cl->clCreateProgramWithSource(ctx[d], 1, &src, NULL, &err);
        assert_int_equal(cl->clBuildProgram(prog[d], 1, &g_devs[d], "", NULL, NULL), CL_SUCCESS);
        k[d] = cl->clCreateKernel(prog[d], "twin", &err);
        assert_int_equal(err, CL_SUCCESS);
        q[d] = cl->clCreateCommandQueue(ctx[d], g_devs[d], CL_QUEUE_PROFILING_ENABLE, &err);
        assert_non_null(q[d]);
        assert_int_equal(kt_cl_attach(q[d], NULL, &kc[d]), 0);
    }
    for (int d = 0; d < 2; d++) {
        for (int i = 0; i < counts[d]; i++)
            assert_int_equal(kt_cl_enqueue_ndrange(kc[d], k[d], 1, NULL, &g, NULL, 0, NULL, NULL), CL_SUCCESS);
        assert_int_equal(kt_cl_detach(kc[d]), 0);
        cl->clReleaseCommandQueue(q[d]);
        cl->clReleaseKernel(k[d]);
        cl->clReleaseProgram(prog[d]);
        cl->clReleaseContext(ctx[d]);
    }
    kt_snapshot_t *s = kt_snapshot();
    const kt_kernel_timing_t *found[2] = {NULL, NULL};
    size_t n = 0;
    for (size_t i = 0; i < s->count; i++)
        if (s->entries[i].backend == KT_BACKEND_OPENCL && !strcmp(s->entries[i].name, "twin") && n < 2)
            found[n++] = &s->entries[i];
    assert_int_equal(n, 2);
    assert_string_not_equal(found[0]->device, found[1]->device);
    uint64_t a = found[0]->dispatch_count, b = found[1]->dispatch_count;
    assert_true((a == 3 && b == 5) || (a == 5 && b == 3));
    const kt_device_info_t *d0 = check_identity(s, found[0]), *d1 = check_identity(s, found[1]);
    assert_string_not_equal(d0->key, d1->key);
    if (!strcmp(g_how, "sub")) {
        assert_string_equal(d0->id.parent, d1->id.parent); /* one parent, partitions 0 and 1 */
        assert_int_not_equal(d0->id.partition, d1->id.partition);
    } else {
        assert_int_not_equal(d0->id.ordinal, d1->id.ordinal);
        assert_string_equal(d0->id.platform, d1->id.platform); /* PoCL's one platform; the double's two, named alike */
    }
    size_t published = 0;
    for (size_t i = 0; i < s->device_count; i++)
        published += s->devices[i].backend == KT_BACKEND_OPENCL &&
                     (!strcmp(s->devices[i].name, found[0]->device) || !strcmp(s->devices[i].name, found[1]->device));
    assert_int_equal(published, 2);
    printf("devices: \"%s\" (%llu), \"%s\" (%llu)\n", found[0]->device, (unsigned long long)a, found[1]->device,
           (unsigned long long)b);
    const char *log = getenv("KT_TEST_VERBOSE_LOG");
    if (log) { /* verbose lines name each device by its label too: 3 and 5 lines, never 8 of the plain model */
        uint64_t want[2] = {a, b}, got[2] = {0, 0}, other = 0;
        for (int tries = 0; tries < 500 && (got[0] != want[0] || got[1] != want[1]); tries++) {
            got[0] = got[1] = other = 0; /* the lines are written just after the records: wait for them, bounded */
            FILE *f = fopen(log, "r");
            char line[512];
            while (f && fgets(line, sizeof line, f)) {
                int j = 0;
                for (; j < 2; j++) {
                    char head[300];
                    snprintf(head, sizeof head, "ktiming,exec,opencl,%s,twin,", found[j]->device);
                    if (!strncmp(line, head, strlen(head)))
                        break;
                }
                if (j < 2)
                    got[j]++;
                else if (!strncmp(line, "ktiming,exec,opencl,", 20))
                    other++;
            }
            if (f)
                fclose(f);
            if (got[0] != want[0] || got[1] != want[1]) {
                struct timespec ms = {0, 10000000};
                nanosleep(&ms, NULL);
            }
        }
        printf("verbose lines: %llu for \"%s\", %llu for \"%s\", %llu naming neither\n", (unsigned long long)got[0],
               found[0]->device, (unsigned long long)got[1], found[1]->device, (unsigned long long)other);
        assert_int_equal(got[0], want[0]);
        assert_int_equal(got[1], want[1]);
        assert_int_equal(other, 0);
    }
    kt_snapshot_free(s);
}

/* Two devices of the kind the argument names into g_devs; 0, or KT_TEST_SKIP. */
static int pick_devices(const char *how)
{
    cl_platform_id p[2];
    cl_uint np = 0, n = 0;
    if (cl->clGetPlatformIDs(2, p, &np) != CL_SUCCESS || np == 0)
        return KT_TEST_SKIP;
    if (how && (!strcmp(how, "platforms") || !strcmp(how, "ids"))) {
        if (np < 2 || cl->clGetDeviceIDs(p[0], CL_DEVICE_TYPE_ALL, 1, &g_devs[0], NULL) != CL_SUCCESS ||
            cl->clGetDeviceIDs(p[1], CL_DEVICE_TYPE_ALL, 1, &g_devs[1], NULL) != CL_SUCCESS) {
            fprintf(stderr, "fewer than two OpenCL platforms: skipped\n");
            return KT_TEST_SKIP;
        }
        char a[128] = {0}, b[128] = {0};
        cl->clGetDeviceInfo(g_devs[0], CL_DEVICE_NAME, sizeof a - 1, a, NULL);
        cl->clGetDeviceInfo(g_devs[1], CL_DEVICE_NAME, sizeof b - 1, b, NULL);
        assert_string_equal(a, b); /* the case: equal names */
        return 0;
    }
    if (how && !strcmp(how, "sub")) {
        cl_device_id root;
        cl_uint units = 0;
        if (!cl->clCreateSubDevices || cl->clGetDeviceIDs(p[0], CL_DEVICE_TYPE_ALL, 1, &root, NULL) != CL_SUCCESS ||
            cl->clGetDeviceInfo(root, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, NULL) != CL_SUCCESS ||
            units < 2) {
            fprintf(stderr, "no device with two compute units to partition: skipped\n");
            return KT_TEST_SKIP;
        }
        const cl_device_partition_property props[] = {CL_DEVICE_PARTITION_EQUALLY,
                                                      (cl_device_partition_property)(units / 2), 0};
        if (cl->clCreateSubDevices(root, props, 2, g_devs, &n) != CL_SUCCESS || n < 2) {
            fprintf(stderr, "clCreateSubDevices gave no two sub-devices: skipped\n");
            return KT_TEST_SKIP;
        }
        return 0;
    }
    if (cl->clGetDeviceIDs(p[0], CL_DEVICE_TYPE_ALL, 2, g_devs, &n) != CL_SUCCESS || n < 2) {
        fprintf(stderr, "fewer than two OpenCL devices: skipped\n");
        return KT_TEST_SKIP;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (kt_cl_load(&cl) != 0)
        return KT_TEST_SKIP;
    g_how = argc > 1 ? argv[1] : "";
    if (getenv("KT_TEST_VERBOSE_LOG"))
        remove(getenv("KT_TEST_VERBOSE_LOG")); /* this run's lines only (ktiming opens it at its first line) */
    int rc = pick_devices(argc > 1 ? argv[1] : NULL);
    if (rc)
        return rc;
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_two_entries)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
