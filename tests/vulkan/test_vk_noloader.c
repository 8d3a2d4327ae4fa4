/* test_vk_noloader.c — without a Vulkan loader (KTIMING_VULKAN_LIBRARY points nowhere) the backend reports
 * KT_EUNAVAILABLE instead of crashing, and the CPU primitive backend still works. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ktiming.h>
#include <ktiming/vk.h>

static void test_no_loader(void **state)
{
    (void)state;
    assert_null(kt_vk_loader());
    kt_vk_desc_t d = {0};
    kt_vk_ctx_t *kv = (kt_vk_ctx_t *)(uintptr_t)1;
    assert_int_equal(kt_vk_ctx_create(&d, &kv), KT_EINVAL); /* missing handles are reported first */
    assert_null(kv);
    /* Handles that would crash if ktiming touched them: it must stop at the missing loader. */
    d.instance = (VkInstance)(uintptr_t)0x10;
    d.physical_device = (VkPhysicalDevice)(uintptr_t)0x20;
    d.device = (VkDevice)(uintptr_t)0x30;
    assert_int_equal(kt_vk_ctx_create(&d, &kv), KT_EUNAVAILABLE);
    assert_null(kv);
    kt_vk_ctx_destroy(NULL);
    assert_int_equal(kt_vk_collect(NULL), KT_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_no_loader)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
