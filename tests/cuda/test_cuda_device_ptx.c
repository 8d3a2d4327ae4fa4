/* test_cuda_device_ptx.c — the PTX nvcc made from device/kt_cuda_device_check.cu holds what cuda_device.cuh
 * promises (%globaltimer reads, min/max atomics, the block barrier of KT_KERNEL_EXIT, the slot pointer declared
 * under the plain name kt_cuda_slot_ptr), and kt_cuda_slots_bind finds that pointer in the module (loaded into
 * the driver test double, which parses PTX declarations). */
#include "cuda_test_util.h"

#include <stdio.h>
#include <stdlib.h>

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (buf)
        buf[n] = 0;
    fclose(f);
    return buf;
}

static void test_ptx_contents(void **state)
{
    (void)state;
    const char *path = getenv("KT_TEST_DEVICE_PTX");
    assert_non_null(path);
    char *ptx = read_file(path);
    assert_non_null(ptx);
    assert_non_null(strstr(ptx, "%globaltimer"));
    assert_non_null(strstr(ptx, "atom.min.u64"));
    assert_non_null(strstr(ptx, "atom.max.u64"));
    assert_non_null(strstr(ptx, "bar.sync"));
    assert_non_null(strstr(ptx, ".u64 kt_cuda_slot_ptr;"));
    assert_non_null(strstr(ptx, ".entry kt_check_stamped("));
    assert_non_null(strstr(ptx, "kt_cuda_batch_timestamps"));

    struct CUctx_st *ctx = kt_test_ctx_enter();
    struct CUmod_st *mod = NULL;
    struct CUfunc_st *fn = NULL;
    assert_int_equal(cuModuleLoadData(&mod, ptx), 0);
    assert_int_equal(cuModuleGetFunction(&fn, mod, "kt_check_stamped"), 0);
    kt_cuda_slots_t *slots = NULL;
    assert_int_equal(kt_cuda_slots_create(&slots, ctx, 2), 0);
    struct CUstream_st *s = kt_test_stream();
    assert_int_equal(kt_cuda_slots_bind(slots, mod, s, 1), 0);
    assert_int_equal(cuStreamSynchronize(s), 0);
    kt_cuda_slots_destroy(slots);
    assert_int_equal(cuModuleUnload(mod), 0);
    assert_int_equal(cuStreamDestroy_v2(s), 0);
    kt_cuda_shutdown();
    kt_test_ctx_leave();
    free(ptx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_ptx_contents)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
