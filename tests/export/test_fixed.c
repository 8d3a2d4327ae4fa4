/* test_fixed.c — the tables' number formatting without printf (src/export/fixed.h): the same bytes as snprintf's
 * "%.*f" and "%" PRIu64 for random values across the whole range handled, for values a table prints (durations in
 * ns divided into us, ms, s), for exact ties (printf rounds them to the even digit), and nothing (0) outside it. */
#include "../../src/export/fixed.h"

#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static uint64_t rng(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int g_checked;

/* v formatted both ways with dec decimals: equal, or the fast one declined (0) outside its range only. */
static void same_fixed(double v, int dec)
{
    char fast[32], slow[32];
    size_t n = kt__fmt_fixed(fast, sizeof fast, v, dec);
    int sn = snprintf(slow, sizeof slow, "%.*f", dec, v);
    if (!(v >= 0x1p-10 && v < 0x1p43)) {
        assert_int_equal(n, 0);
        return;
    }
    if (n != (size_t)sn || strcmp(fast, slow) != 0)
        print_message("%.17g with %d decimals: fast '%s', printf '%s'\n", v, dec, n ? fast : "(declined)", slow);
    assert_int_equal(n, (size_t)sn);
    assert_string_equal(fast, slow);
    g_checked++;
}

static void test_random_values(void **state)
{
    (void)state;
    uint64_t seed = 42;
    g_checked = 0;
    for (int i = 0; i < 200000; i++) {
        /* log-uniform over [2^-12, 2^45): also past both ends of the range */
        double v = ldexp(1.0 + (double)(rng(&seed) >> 11) * 0x1p-53, (int)(rng(&seed) % 57) - 12);
        same_fixed(v, (int)(rng(&seed) % 4));
    }
    assert_true(g_checked > 150000);
}

static void test_durations(void **state)
{
    (void)state;
    static const double kScale[] = {1.0, 1e3, 1e6, 1e9};
    uint64_t seed = 7;
    for (int i = 0; i < 200000; i++) {
        uint64_t ns = rng(&seed) >> (rng(&seed) % 64);
        double v = (double)ns / kScale[i % 4];
        same_fixed(v, i % 4);
        same_fixed(v * 100.0 / 7.0, 1); /* a share */
    }
    for (uint64_t ns = 0; ns < 20000; ns++) /* every small count of ns, in each unit */
        for (int u = 0; u < 4; u++)
            same_fixed((double)ns / kScale[u], u == 0 ? 0 : 3 - (int)(ns % 3));
}

static void test_ties_go_to_even(void **state)
{
    (void)state;
    /* k + j / 2^b: exactly halfway between two outputs for some number of decimals */
    for (int k = 0; k < 300; k++)
        for (int b = 1; b <= 6; b++)
            for (int j = 1; j < (1 << b); j += 2)
                for (int dec = 0; dec <= 3; dec++)
                    same_fixed(k + ldexp(j, -b), dec);
    char buf[32];
    assert_int_equal(kt__fmt_fixed(buf, sizeof buf, 2.5, 0), 1);
    assert_string_equal(buf, "2");
    assert_int_equal(kt__fmt_fixed(buf, sizeof buf, 3.5, 0), 1);
    assert_string_equal(buf, "4");
    assert_int_equal(kt__fmt_fixed(buf, sizeof buf, 0.125, 2), 4);
    assert_string_equal(buf, "0.12");
    assert_int_equal(kt__fmt_fixed(buf, sizeof buf, 9.9995, 3), 5); /* 9.99949999...: rounds down */
    assert_string_equal(buf, "9.999");
}

static void test_declines_outside(void **state)
{
    (void)state;
    char buf[32];
    static const double kOut[] = {0.0, -0.0, -1.0, 0x1p-11, 0x1p43, 1e300, NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof kOut / sizeof kOut[0]; i++)
        assert_int_equal(kt__fmt_fixed(buf, sizeof buf, kOut[i], 1), 0);
    assert_int_equal(kt__fmt_fixed(buf, sizeof buf, 1.5, 4), 0);
    assert_int_equal(kt__fmt_fixed(buf, 5, 123.456, 2), 0); /* "123.46" needs 7 bytes */
    assert_int_equal(kt__fmt_fixed(buf, 7, 123.456, 2), 6);
    assert_string_equal(buf, "123.46");
}

static void test_u64(void **state)
{
    (void)state;
    uint64_t seed = 3;
    char fast[32], slow[32];
    for (int i = 0; i < 100000; i++) {
        uint64_t v = i < 3 ? (uint64_t[]){0, 1, UINT64_MAX}[i] : rng(&seed) >> (rng(&seed) % 64);
        size_t n = kt__fmt_u64(fast, sizeof fast, v);
        snprintf(slow, sizeof slow, "%" PRIu64, v);
        assert_string_equal(fast, slow);
        assert_int_equal(n, strlen(slow));
    }
    assert_int_equal(kt__fmt_u64(fast, 3, 123), 0);
    assert_int_equal(kt__fmt_u64(fast, 4, 123), 3);
    char buf[8];
    size_t n = kt__fmt_fixed(buf, sizeof buf, 12.5, 1);
    assert_int_equal(kt__fmt_append(buf, sizeof buf, n, " ms"), 7);
    assert_string_equal(buf, "12.5 ms");
    assert_int_equal(kt__fmt_append(buf, sizeof buf, 7, "x"), 0); /* no room */
    assert_int_equal(kt__fmt_append(buf, sizeof buf, 0, "x"), 0); /* nothing to append to */
}

/* kt__format_double's reference: the shortest of %.15g..%.17g that reads back. */
static void slow_g(char *buf, size_t size, double v)
{
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
}

/* kt__fmt_g15: printf's bytes for every multiple of 2^-10 it takes (means of counts), declines the rest. */
static void test_g15(void **state)
{
    (void)state;
    uint64_t seed = 7;
    int taken = 0;
    char fast[32], slow[40];
    for (int i = 0; i < 300000; i++) {
        double v;
        switch (i % 4) {
        case 0: v = (double)(rng(&seed) >> (rng(&seed) % 64)) / (double)(1u << (rng(&seed) % 11)); break;
        case 1: v = (double)(rng(&seed) % 100000000) / 32.0; break;
        case 2: v = ldexp(1.0 + (double)(rng(&seed) >> 11) * 0x1p-53, (int)(rng(&seed) % 60) - 4); break;
        default: v = (double)(rng(&seed) >> 14) / 1024.0; break;
        }
        if (rng(&seed) & 1)
            v = -v;
        size_t n = kt__fmt_g15(fast, v);
        slow_g(slow, sizeof slow, v);
        double a = fabs(v);
        if (!(a >= 1.0 && a < 1e15) || a * 1024.0 != floor(a * 1024.0)) {
            assert_int_equal(n, 0);
            continue;
        }
        if (!n) { /* declined only where the exact value (%.10f is exact here) has more than 15 significant digits */
            char exact[64];
            int len = snprintf(exact, sizeof exact, "%.10f", a);
            while (exact[len - 1] == '0')
                len--;
            if (exact[len - 1] == '.')
                len--;
            assert_true(len - (strchr(exact, '.') != NULL && strchr(exact, '.') < exact + len) > 15);
            continue;
        }
        if (strcmp(fast, slow) != 0)
            print_message("%.17g: fast '%s', printf '%s'\n", v, fast, slow);
        assert_string_equal(fast, slow);
        assert_int_equal(n, strlen(slow));
        taken++;
    }
    assert_true(taken > 100000);
    static const double kEdge[] = {1.0, -1.0, 999999999999999.0, 1e15, 0.5, 0.0, 10497.84375, 1.0009765625};
    for (size_t i = 0; i < sizeof kEdge / sizeof kEdge[0]; i++) {
        size_t n = kt__fmt_g15(fast, kEdge[i]);
        slow_g(slow, sizeof slow, kEdge[i]);
        if (fabs(kEdge[i]) >= 1.0 && fabs(kEdge[i]) < 1e15)
            assert_string_equal(fast, slow);
        else
            assert_int_equal(n, 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_values), cmocka_unit_test(test_durations),
        cmocka_unit_test(test_ties_go_to_even), cmocka_unit_test(test_declines_outside),
        cmocka_unit_test(test_u64), cmocka_unit_test(test_g15),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
