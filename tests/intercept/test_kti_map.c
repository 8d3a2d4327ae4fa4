/* test_kti_map.c — the interception libraries' handle map against a reference model: random puts, gets and
 * deletes (backward-shift deletion must keep every remaining key findable), growth, clustered keys. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdlib.h>

#include "shim/kti_map.h"

#define KEYS 4096

static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void check_all(const kti_map_t *m, const uint64_t *keys, const int *live, size_t n)
{
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        void *v = kti_map_get(m, keys[i]);
        if (live[i]) {
            assert_ptr_equal(v, (void *)(uintptr_t)(i + 1));
            count++;
        } else {
            assert_null(v);
        }
    }
    assert_int_equal(m->n, count);
}

static void run_model(uint64_t seed, int clustered)
{
    kti_map_t m = {0};
    static uint64_t keys[KEYS];
    static int live[KEYS];
    uint64_t s = seed;
    for (size_t i = 0; i < KEYS; i++) {
        /* clustered: handles 16 bytes apart, as pointers from one allocator often are */
        keys[i] = clustered ? 0x7f0000001000ull + 16 * i : (rng(&s) | 1);
        live[i] = 0;
    }
    for (int step = 0; step < 200000; step++) {
        size_t i = (size_t)(rng(&s) % KEYS);
        if (rng(&s) % 3) {
            assert_int_equal(kti_map_put(&m, keys[i], (void *)(uintptr_t)(i + 1)), 0);
            live[i] = 1;
        } else {
            void *v = kti_map_del(&m, keys[i]);
            assert_ptr_equal(v, live[i] ? (void *)(uintptr_t)(i + 1) : NULL);
            live[i] = 0;
        }
        if (step % 20000 == 0)
            check_all(&m, keys, live, KEYS);
    }
    check_all(&m, keys, live, KEYS);
    assert_null(kti_map_get(&m, 0));
    assert_int_equal(kti_map_put(&m, 0, (void *)1), -1); /* key 0 means "empty" */
    kti_map_free(&m);
    assert_int_equal(m.n, 0);
    assert_null(kti_map_get(&m, keys[0]));
}

static void test_random(void **state)
{
    (void)state;
    run_model(0x9e3779b97f4a7c15ull, 0);
    run_model(12345, 0);
}

static void test_clustered(void **state)
{
    (void)state;
    run_model(777, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_random), cmocka_unit_test(test_clustered)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
