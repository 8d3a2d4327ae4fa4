/* test_cuda_unavailable.c — a missing driver, the toolkit's stub libcuda, the test double acting as the stub, and
 * a driver without devices all give KT_EUNAVAILABLE, with the driver's error named in kt_cuda_last_error().
 * The same source runs once per case; KT_TEST_EXPECT names the text the message must contain and
 * KT_TEST_EXPECT_RESULT the CUresult kt_cuda_last_result() must report. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <ktiming.h>
#include <ktiming/cuda.h>

static void check_message(void)
{
    const char *want = getenv("KT_TEST_EXPECT");
    const char *msg = kt_cuda_last_error();
    assert_non_null(msg);
    print_message("kt_cuda_last_error: %s\n", msg);
    assert_true(msg[0] != '\0');
    if (want)
        assert_non_null(strstr(msg, want));
    const char *res = getenv("KT_TEST_EXPECT_RESULT");
    if (res)
        assert_int_equal(kt_cuda_last_result(), atoi(res));
}

static void test_init_unavailable(void **state)
{
    (void)state;
    assert_int_equal(kt_cuda_init(NULL), KT_EUNAVAILABLE);
    check_message();
    assert_int_equal(kt_cuda_device_count(), KT_EUNAVAILABLE);
    check_message();
}

static void test_calls_unavailable(void **state)
{
    (void)state;
    kt_cuda_span_t span;
    assert_int_equal(kt_cuda_begin(&span, NULL, NULL, "k"), KT_EUNAVAILABLE);
    assert_null(span.pair);
    assert_int_equal(kt_cuda_end(&span), 0);
    check_message();

    kt_cuda_timer_t t = {0};
    kt_cuda_timer_start(&t);
    kt_cuda_timer_stop(&t);
    assert_true(kt_cuda_timer_elapsed_ms(&t) == 0.0);
    assert_int_equal(kt_cuda_timer_init(&t, NULL, NULL), KT_EUNAVAILABLE);
    kt_cuda_timer_destroy(&t);

    uint64_t ns = 0;
    assert_int_equal(kt_cuda_globaltimer_read(NULL, &ns), KT_EUNAVAILABLE);
    assert_int_equal(kt_cuda_calibrate(NULL, 0, KT_FIT_BASIC, NULL, NULL), KT_EUNAVAILABLE);
    kt_cuda_slots_t *slots = NULL;
    assert_int_equal(kt_cuda_slots_create(&slots, NULL, 4), KT_EUNAVAILABLE);
    assert_null(slots);
    check_message();

    /* Nothing was recorded, and flushing/shutting down an unavailable backend is harmless. */
    kt_flush();
    kt_snapshot_t *s = kt_snapshot();
    assert_non_null(s);
    for (size_t i = 0; i < s->count; i++)
        assert_int_not_equal(s->entries[i].backend, KT_BACKEND_CUDA);
    kt_snapshot_free(s);
    kt_cuda_shutdown();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_unavailable),
        cmocka_unit_test(test_calls_unavailable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
