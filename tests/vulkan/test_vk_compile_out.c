/* test_vk_compile_out.c — built without KTIMING_ENABLE: every kt_vk_* and kt_primitive_* call is the header's inline
 * no-op (KT_EDISABLED or 0), so instrumented Vulkan code compiles unchanged and needs no library. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ktiming.h>
#include <ktiming/primitive.h>
#include <ktiming/vk.h>

#if KT_ENABLED
#error "this test must be compiled without KTIMING_ENABLE"
#endif

static void test_compiled_out(void **state)
{
    (void)state;
    kt_vk_ctx_t *kv = (kt_vk_ctx_t *)(uintptr_t)1;
    VkCommandBuffer cmd = (VkCommandBuffer)(uintptr_t)0x40;
    assert_null(kt_vk_loader());
    assert_int_equal(kt_vk_ctx_create(&(kt_vk_desc_t){0}, &kv), KT_EDISABLED);
    assert_null(kv);
    assert_int_equal(kt_vk_begin(kv, cmd, "x"), 0);
    assert_int_equal(kt_vk_begin_id(kv, cmd, kt_vk_kernel(kv, "x")), 0);
    assert_int_equal(kt_vk_end(kv, cmd), 0);
    assert_int_equal(kt_vk_collect(kv), 0);
    assert_int_equal(kt_vk_collect_wait(kv, 1), 0);
    assert_int_equal(kt_vk_discard(kv, cmd), 0);
    assert_int_equal(kt_vk_recalibrate(kv), KT_EDISABLED);
    uint64_t h = 0;
    assert_int_equal(kt_vk_timestamp_to_host(kv, 1, &h, NULL), KT_EDISABLED);
    kt_device_info_t info;
    kt_vk_stats_t st;
    assert_int_equal(kt_vk_device_info(kv, &info), KT_EDISABLED);
    assert_int_equal(kt_vk_stats(kv, &st), KT_EDISABLED);
    kt_primitive_backend_t be = {0};
    assert_int_equal(kt_vk_primitive_backend_create(kv, &be), KT_EDISABLED);
    assert_int_equal(kt_cpu_primitive_backend(&be), KT_EDISABLED);
    kt_primitive_t *p = (kt_primitive_t *)(uintptr_t)1;
    assert_int_equal(kt_primitive_create(&(kt_primitive_desc_t){0}, &p), KT_EDISABLED);
    assert_null(p);
    kt_primitive_result_t r;
    assert_int_equal(kt_primitive_execute(p, NULL, &r), KT_EDISABLED);
    kt_primitive_destroy(p);
    kt_primitive_backend_destroy(&be);
    kt_vk_ctx_destroy(kv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_compiled_out)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
