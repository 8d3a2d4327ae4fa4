/* test_fixed_g17.c — kt__fmt_g17 (src/export/fixed.h), the JSON writer's doubles without printf: printf's bytes
 * (the shortest of %.15g..%.17g that strtod reads back) for random doubles across [1, 10^15), means total / n and
 * deviations as a merge makes them, exact ties at 15 and 16 digits (printf rounds them to the even digit), the
 * bottom and top of binades (where the double below is nearer), and negative values; declines (0) outside. */
#include "../../src/export/fixed.h"

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

/* kt__format_double's reference: the shortest of %.15g..%.17g that reads back. */
static void slow_g(char *buf, size_t size, double v)
{
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
}

/* v both ways: the same bytes, or declined (0) where allowed; returns whether it was taken. */
static int check(double v)
{
    char fast[32], slow[40];
    size_t n = kt__fmt_g17(fast, v);
    double a = fabs(v);
    if (!(a >= 1.0 && a < 1e15) || a == floor(a)) {
        assert_int_equal(n, 0);
        return 0;
    }
    if (!n) { /* declined only when rounding to 15 digits carries into another integer digit */
        char c15[40];
        snprintf(c15, sizeof c15, "%.0f", floor(a));
        size_t idig = strlen(c15);
        snprintf(c15, sizeof c15, "%.15g", a);
        size_t int15 = strcspn(c15, ".e");
        assert_true(int15 != idig || strchr(c15, 'e') != NULL);
        return 0;
    }
    slow_g(slow, sizeof slow, v);
    if (strcmp(fast, slow) != 0)
        print_message("%.17g: fast '%s', printf '%s'\n", v, fast, slow);
    assert_string_equal(fast, slow);
    assert_int_equal(n, strlen(slow));
    return 1;
}

static void test_random(void **state)
{
    (void)state;
    uint64_t seed = 11;
    int taken = 0, n16 = 0, n17 = 0;
    for (int i = 0; i < 400000; i++) {
        double v;
        switch (i % 6) {
        case 0: /* any double in [1, 2^50) */
            v = ldexp(1.0 + (double)(rng(&seed) >> 11) * 0x1p-53, (int)(rng(&seed) % 50));
            break;
        case 1: { /* a mean: total / n */
            uint64_t total = rng(&seed) >> (rng(&seed) % 40 + 14), n = rng(&seed) % 100000 + 1;
            v = (double)total / (double)n;
            break;
        }
        case 2: /* a deviation */
            v = sqrt((double)(rng(&seed) >> (rng(&seed) % 50 + 10)));
            break;
        case 3: /* a whole number and a half, a quarter, ...: exact ties at 15 and 16 digits */
            v = (double)(rng(&seed) % 1000000000000000ull) + (double)(rng(&seed) % 16 + 1) / 32.0;
            break;
        case 4: /* the bottom and top of a binade */
            v = ldexp(1.0 + (double)(rng(&seed) % 64) * 0x1p-52, (int)(rng(&seed) % 50));
            if (rng(&seed) & 1)
                v = nextafter(ldexp(1.0, (int)(rng(&seed) % 50) + 1), 0.0) - (double)(rng(&seed) % 4) * ldexp(1.0, -52);
            break;
        default: /* few digits: 12.25, 3.1 */
            v = (double)(rng(&seed) % 100000) / (double)(rng(&seed) % 1000 + 1);
            break;
        }
        if (rng(&seed) % 4 == 0)
            v = -v;
        if (check(v)) {
            char buf[40];
            snprintf(buf, sizeof buf, "%.15g", v);
            n16 += strtod(buf, NULL) != v;
            snprintf(buf, sizeof buf, "%.16g", v);
            n17 += strtod(buf, NULL) != v;
            taken++;
        }
    }
    print_message("taken %d of 400000; %d needed more than 15 digits, %d all 17\n", taken, n16, n17);
    assert_true(taken > 300000);
    assert_true(n16 > 10000 && n17 > 1000); /* the 16- and 17-digit paths were exercised */
}

static void test_edges(void **state)
{
    (void)state;
    static const double kEdge[] = {1.0, 1.5, 0.5, 0.0, -0.75, 1e15, 1e15 - 0.5, 999999999999999.9, 9.999999999999999,
                                   9.9999999999999982, 99999.999999999993, 1.0000000000000002, 123456789012345.5,
                                   123456789012344.5, 12345678901234.25, 4503599627370495.5, 1e300, -1e-300,
                                   2.5, 0.1 + 0.2, 1.0 / 3.0, 2.0 / 3.0 * 1e14};
    for (size_t i = 0; i < sizeof kEdge / sizeof kEdge[0]; i++)
        check(kEdge[i]);
    char buf[32];
    assert_int_equal(kt__fmt_g17(buf, 0.1 + 0.2), 0); /* below 1 */
    assert_int_equal(kt__fmt_g17(buf, 3.0), 0);       /* a whole number: kt__fmt_g15's */
    assert_int_equal(kt__fmt_g17(buf, NAN), 0);
    assert_int_equal(kt__fmt_g17(buf, INFINITY), 0);
    assert_int_equal(kt__fmt_g17(buf, -1234.0625), 10);
    assert_string_equal(buf, "-1234.0625");
    assert_int_equal(kt__fmt_g17(buf, 1.0 / 3.0 + 1.0), 18);
    assert_string_equal(buf, "1.3333333333333333");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random),
        cmocka_unit_test(test_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
