/* test_vk_ticks.c — timestamp arithmetic of the Vulkan backend with synthetic valid-bits values: masking,
 * durations across a wrap, sequential and model-guided unwrapping, period scaling. No device needed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "backends/vulkan/vk_ticks.h"

static void test_mask(void **state)
{
    (void)state;
    assert_true(kt__vk_ticks_mask(64) == UINT64_MAX);
    assert_true(kt__vk_ticks_mask(0) == UINT64_MAX);
    assert_true(kt__vk_ticks_mask(32) == UINT64_C(0xffffffff));
    assert_true(kt__vk_ticks_mask(36) == UINT64_C(0xfffffffff));
}

static void test_delta_across_wrap(void **state)
{
    (void)state;
    /* 32-bit counter: 0xffffff00 -> 0x100 is 0x200 ticks, not a negative or huge number. */
    assert_true(kt__vk_ticks_delta(UINT64_C(0xffffff00), UINT64_C(0x100), 32) == 0x200);
    /* Garbage above the valid bits is ignored. */
    assert_true(kt__vk_ticks_delta(UINT64_C(0xabc00000ffffff00), UINT64_C(0x1200000000000100), 32) == 0x200);
    assert_true(kt__vk_ticks_delta(5, 5, 28) == 0);
    assert_true(kt__vk_ticks_delta(100, 50, 64) == (uint64_t)-50);
    assert_true(kt__vk_ticks_signed_delta(UINT64_C(0x100), UINT64_C(0xffffff00), 32) == -0x200);
    assert_true(kt__vk_ticks_signed_delta(UINT64_C(0xffffff00), UINT64_C(0x100), 32) == 0x200);
    assert_true(kt__vk_ticks_signed_delta(100, 50, 64) == -50);
}

static void test_unwrap_sequence(void **state)
{
    (void)state;
    const uint32_t bits = 20; /* wraps every 1048576 ticks */
    const uint64_t mask = kt__vk_ticks_mask(bits);
    uint64_t truth = UINT64_C(123456789);
    kt__vk_unwrap_t u;
    kt__vk_unwrap_init(&u, bits, truth);
    int64_t base = (int64_t)truth;
    for (int i = 0; i < 1000; i++) {
        truth += 300000 + (uint64_t)(i % 7) * 1000; /* under half the range per step, many wraps in all */
        int64_t ext = kt__vk_unwrap(&u, truth & mask);
        assert_true(ext == (int64_t)truth - base);
        if (i % 10 == 0) { /* an older value arriving late still lands right */
            uint64_t older = truth - 200000;
            assert_true(kt__vk_unwrap(&u, older & mask) == (int64_t)older - base);
        }
    }
}

static void test_unwrap_near(void **state)
{
    (void)state;
    const uint32_t bits = 28;
    const uint64_t range = UINT64_C(1) << bits, mask = range - 1;
    kt__vk_unwrap_t u;
    kt__vk_unwrap_init(&u, bits, 1000);
    /* Ten wraps later, with nothing seen in between: sequential unwrapping cannot know, a prediction can. */
    uint64_t truth = 1000 + 10 * range + 12345;
    int64_t expected = (int64_t)(truth - 1000) - 5000000; /* prediction 5M ticks early */
    assert_true(kt__vk_unwrap_near(&u, truth & mask, expected) == (int64_t)(truth - 1000));
    expected = (int64_t)(truth - 1000) + 60000000; /* late by a quarter of the range */
    assert_true(kt__vk_unwrap_near(&u, truth & mask, expected) == (int64_t)(truth - 1000));
    /* The sequence continues from there. */
    assert_true(kt__vk_unwrap(&u, (truth + 777) & mask) == (int64_t)(truth - 1000 + 777));
}

static void test_period(void **state)
{
    (void)state;
    assert_true(kt__vk_ticks_to_ns(UINT64_C(1) << 62, 1.0) == UINT64_C(1) << 62);
    assert_true(kt__vk_ticks_to_ns(12, 83.333333) == 1000);        /* 12 MHz counter */
    assert_true(kt__vk_ticks_to_ns(1000000, 52.083333) == 52083333); /* 19.2 MHz counter */
    assert_true(kt__vk_ticks_to_ns(kt__vk_ticks_delta(UINT64_C(0xfffffff0), 0x10, 32), 10.0) == 320);
    /* Absolute device times near 2^61 ns: exact, where a double product loses the low bits. */
    assert_true(kt__vk_ticks_to_ns((UINT64_C(1) << 61) + 1, 3.0) == (UINT64_C(3) << 61) + 3);
    assert_true(kt__vk_ticks_to_ns((UINT64_C(1) << 60) + 1, 1.5) == (UINT64_C(3) << 59) + 2); /* 1.5 rounds up */
    assert_true(kt__vk_ticks_to_ns(UINT64_C(1) << 62, 8.0) == UINT64_MAX);                   /* saturates */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mask),
        cmocka_unit_test(test_delta_across_wrap),
        cmocka_unit_test(test_unwrap_sequence),
        cmocka_unit_test(test_unwrap_near),
        cmocka_unit_test(test_period),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
