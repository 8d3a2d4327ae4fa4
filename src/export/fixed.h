/* fixed.h — numbers as the tables print them, without printf: a table of a million kernels formats twenty million
 * cells, and glibc's "%.*f" (multi-precision arithmetic per call) was half of `ktiming report`'s time. Each
 * function writes exactly what the printf call named in its comment writes, or returns 0 where it does not
 * handle the value (the caller then calls printf). Header-only (the exporters and tests/export/test_fixed.c). */
#ifndef KT_EXPORT_FIXED_H
#define KT_EXPORT_FIXED_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* snprintf(buf, size, "%" PRIu64, v); returns its length (0 when size cannot hold it). */
static inline size_t kt__fmt_u64(char *buf, size_t size, uint64_t v)
{
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (n + 1 > size)
        return 0;
    for (size_t i = 0; i < n; i++)
        buf[i] = tmp[n - 1 - i];
    buf[n] = '\0';
    return n;
}

/* snprintf(buf, size, "%.*f", dec, v) for 0 <= dec <= 3 and 2^-10 <= v < 2^43 (the range of a table's cells)
 * under the default rounding mode (the caller checks fegetround() == FE_TONEAREST once, not per cell: 2 % of a
 * report); 0 for anything else. printf rounds the exact binary value of v, and under the default rounding mode a tie goes to
 * the even digit: v = m * 2^-s exactly (m below 2^53, 10 <= s <= 62 in this range), so v * 10^dec = m * 10^dec / 2^s
 * with m * 10^dec below 2^63, and the quotient and remainder of that division decide the rounding exactly. */
static inline size_t kt__fmt_fixed(char *buf, size_t size, double v, int dec)
{
    static const uint64_t kPow10[] = {1, 10, 100, 1000};
    if (dec < 0 || dec > 3 || !(v >= 0x1p-10 && v < 0x1p43))
        return 0;
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits); /* IEEE 754 binary64, v normal and positive here */
    uint64_t m = (bits & ((UINT64_C(1) << 52) - 1)) | UINT64_C(1) << 52;
    int s = 1075 - (int)(bits >> 52); /* v = m * 2^-s: 2^52 <= m < 2^53, 10 <= s <= 62 */
    if (s < 1 || s > 62)
        return 0;
    uint64_t num = m * kPow10[dec], q = num >> s, r = num & ((UINT64_C(1) << s) - 1), half = UINT64_C(1) << (s - 1);
    if (r > half || (r == half && (q & 1)))
        q++;
    uint64_t ip = q / kPow10[dec], fp = q % kPow10[dec];
    size_t n = kt__fmt_u64(buf, size, ip);
    if (!n || (dec && n + 1 + (size_t)dec + 1 > size))
        return 0;
    if (dec) {
        buf[n++] = '.';
        for (int d = dec - 1; d >= 0; d--, fp /= 10)
            buf[n + (size_t)d] = (char)('0' + fp % 10);
        n += (size_t)dec;
        buf[n] = '\0';
    }
    return n;
}

/* What kt__format_double writes (the shortest of "%.15g", "%.16g", "%.17g" that reads back as v) for a v whose
 * exact decimal value has at most 15 significant digits and 1 <= |v| < 10^15 and is a multiple of 2^-10 (a
 * mean of counts in ns: total / n for n a power of two, or a whole number): then "%.15g" is that exact value,
 * trailing zeros dropped, and reads back. Returns its length, 0 for any other v (the caller uses printf). buf
 * holds at least 24 bytes. */
static inline size_t kt__fmt_g15(char *buf, double v)
{
    double a = v < 0 ? -v : v;
    if (!(a >= 1.0 && a < 1e15))
        return 0;
    double scaled = a * 1024.0; /* exact: a power of two; < 2^60 */
    uint64_t n = (uint64_t)scaled;
    if ((double)n != scaled)
        return 0;
    uint64_t ip = n >> 10, frac = (n & 1023u) * 9765625u; /* (n mod 2^10) / 2^10 = frac / 10^10 */
    int fdig = 10;
    if (!frac)
        fdig = 0;
    while (fdig && frac % 10 == 0) {
        frac /= 10;
        fdig--;
    }
    char digits[24];
    size_t idig = kt__fmt_u64(digits, sizeof digits, ip);
    if (idig + (size_t)fdig > 15)
        return 0;
    size_t len = 0;
    if (v < 0)
        buf[len++] = '-';
    memcpy(buf + len, digits, idig);
    len += idig;
    if (fdig) {
        buf[len++] = '.';
        for (int i = fdig - 1; i >= 0; i--) {
            buf[len + (size_t)i] = (char)('0' + frac % 10);
            frac /= 10;
        }
        len += (size_t)fdig;
    }
    buf[len] = '\0';
    return len;
}

/* Appends s after the n bytes of buf (NUL-terminated, size bytes); returns the new length, 0 when it does not fit. */
static inline size_t kt__fmt_append(char *buf, size_t size, size_t n, const char *s)
{
    size_t l = strlen(s);
    if (!n || n + l + 1 > size)
        return 0;
    memcpy(buf + n, s, l + 1);
    return n + l;
}

/* The nd lowest decimal digits of v (zero-padded) to out[0..nd), two at a time. */
static inline void kt__fmt_digits(char *out, uint64_t v, size_t nd)
{
    static const char kPairs[] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                                 "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                                 "8081828384858687888990919293949596979899";
    for (; nd >= 2; nd -= 2, v /= 100)
        memcpy(out + nd - 2, kPairs + 2 * (v % 100), 2);
    if (nd)
        out[0] = (char)('0' + v % 10);
}

/* 5^k for 0 <= k <= 54 (below 2^126). */
static inline unsigned __int128 kt__fmt_pow5(int k)
{
    static const uint64_t kPow5[] = {1ull, 5ull, 25ull, 125ull, 625ull, 3125ull, 15625ull, 78125ull, 390625ull,
                                     1953125ull, 9765625ull, 48828125ull, 244140625ull, 1220703125ull,
                                     6103515625ull, 30517578125ull, 152587890625ull, 762939453125ull,
                                     3814697265625ull, 19073486328125ull, 95367431640625ull, 476837158203125ull,
                                     2384185791015625ull, 11920928955078125ull, 59604644775390625ull,
                                     298023223876953125ull, 1490116119384765625ull, 7450580596923828125ull};
    return k <= 27 ? kPow5[k] : (unsigned __int128)kPow5[27] * kPow5[k - 27];
}

/* |v| * 10^k = num / (den5 * 2^dsh) exactly, |v| = m * 2^-t (m below 2^53), num and the divisor within 125 bits;
 * den5 is 1 or a power of 5. 0 when a factor does not fit (k above 30 or below -27, or too many bits). */
static inline int kt__fmt_scaled(uint64_t m, int t, int k, unsigned __int128 *num, uint64_t *den5, int *dsh)
{
    int e2 = k - t; /* the power of two: |v| * 10^k = m * 5^k * 2^(k-t) */
    if (k > 30 || k < -27 || e2 > 120 || e2 < -120)
        return 0;
    *num = (unsigned __int128)m * (k >= 0 ? kt__fmt_pow5(k) : 1); /* below 2^(53 + 70) */
    *den5 = k >= 0 ? 1 : (uint64_t)kt__fmt_pow5(-k);
    *dsh = e2 >= 0 ? 0 : -e2;
    if (e2 > 0) {
        if (*num >> (125 - e2))
            return 0;
        *num <<= e2;
    }
    return !((unsigned __int128)*den5 >> (125 - *dsh));
}

/* snprintf(buf, size, "%.*g", prec, v) for 1 <= prec <= 17 and v normal with about 10^-13 <= |v| < 10^25 (a
 * number in a comparison's JSON: speedups, p-values, means), under the default rounding mode; 0 where it does not
 * handle v (0, subnormal, not finite, beyond that range; the caller then calls printf). printf writes the exact
 * binary value rounded to prec significant digits, a tie to the even digit: |v| * 10^k = num / den exactly (k
 * puts prec digits before the point), and the quotient and remainder decide the digits and their rounding. When
 * back is not NULL, *back is what strtod reads back from buf (the double nearest the digits) where the same
 * arithmetic decides it, else NaN (the caller calls strtod): with den = 2^s, the digits lie delta / 5^k units in
 * the last place from v (delta = digits * den - num), never half-way between two, so the nearest double is v
 * moved by round(delta / 5^k) of its units when that stays within v's binade. */
static inline size_t kt__fmt_g(char *buf, size_t size, double v, int prec, double *back)
{
    static const uint64_t kPow10[] = {1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull,
                                      100000000ull, 1000000000ull, 10000000000ull, 100000000000ull,
                                      1000000000000ull, 10000000000000ull, 100000000000000ull,
                                      1000000000000000ull, 10000000000000000ull, 100000000000000000ull};
    if (back)
        *back = NAN;
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    int be = (int)(bits >> 52 & 0x7ff);
    if (prec < 1 || prec > 17 || be == 0 || be == 0x7ff)
        return 0;
    uint64_t m = (bits & ((UINT64_C(1) << 52) - 1)) | UINT64_C(1) << 52;
    int t = 1075 - be; /* |v| = m * 2^-t, 2^(52-t) <= |v| < 2^(53-t) */
    int x = (52 - t) * 30103 / 100000; /* the decimal exponent floor(log10 |v|), give or take one: corrected */
    unsigned __int128 num, den, q;
    uint64_t den5;
    int k, dsh;
    for (int tries = 0;; tries++) {
        k = prec - 1 - x;
        if (tries == 3 || !kt__fmt_scaled(m, t, k, &num, &den5, &dsh))
            return 0;
        den = (unsigned __int128)den5 << dsh;
        q = den5 == 1 ? num >> dsh : num / den; /* mostly a power of two */
        if (q < kPow10[prec - 1])
            x--;
        else if (q >= kPow10[prec])
            x++;
        else
            break;
    }
    unsigned __int128 r = num - q * den;
    if (2 * r > den || (2 * r == den && (q & 1)))
        q++;
    if (back && den5 == 1) { /* den = 2^(t-k) (or 1: the digits are v exactly), the digits v + delta / 5^k units */
        unsigned __int128 qd = q * den, ad = qd >= num ? qd - num : num - qd, f5 = kt__fmt_pow5(k);
        uint64_t steps = (uint64_t)((2 * ad + f5) / (2 * f5));
        uint64_t cand = qd >= num ? m + steps : m - steps;
        if (steps < (UINT64_C(1) << 51) && cand > UINT64_C(1) << 52 && cand < UINT64_C(1) << 53) {
            uint64_t bb = (bits & ~((UINT64_C(1) << 52) - 1)) | (cand & ((UINT64_C(1) << 52) - 1));
            memcpy(back, &bb, sizeof bb);
        }
    }
    if (q == kPow10[prec]) { /* rounded up to the next power of ten */
        q = kPow10[prec - 1];
        x++;
    }
    char dig[24];
    kt__fmt_digits(dig, (uint64_t)q, (size_t)prec); /* q has prec digits */
    size_t nd = (size_t)prec, n = 0;
    while (nd > 1 && dig[nd - 1] == '0')
        nd--;
    char out[40];
    if (v < 0)
        out[n++] = '-';
    if (x < -4 || x >= prec) { /* d.ddde+XX */
        out[n++] = dig[0];
        if (nd > 1) {
            out[n++] = '.';
            memcpy(out + n, dig + 1, nd - 1);
            n += nd - 1;
        }
        out[n++] = 'e';
        out[n++] = x < 0 ? '-' : '+';
        int ax = x < 0 ? -x : x;
        if (ax >= 100)
            out[n++] = (char)('0' + ax / 100);
        out[n++] = (char)('0' + ax / 10 % 10);
        out[n++] = (char)('0' + ax % 10);
    } else if (x >= 0) { /* ddd.ddd: x+1 digits before the point */
        memcpy(out + n, dig, (size_t)x + 1);
        n += (size_t)x + 1;
        if (nd > (size_t)x + 1) {
            out[n++] = '.';
            memcpy(out + n, dig + x + 1, nd - (size_t)x - 1);
            n += nd - (size_t)x - 1;
        }
    } else { /* 0.000ddd */
        out[n++] = '0';
        out[n++] = '.';
        for (int i = -1; i > x; i--)
            out[n++] = '0';
        memcpy(out + n, dig, nd);
        n += nd;
    }
    if (n + 1 > size)
        return 0;
    memcpy(buf, out, n);
    buf[n] = '\0';
    return n;
}

/* What kt__format_double writes (the shortest of "%.15g", "%.16g", "%.17g" that strtod reads back as v) for a v
 * with 1 <= |v| < 10^15 that is not a whole number (a mean or a standard deviation in ns; whole numbers are
 * kt__fmt_g15's), under the default rounding mode and the C numeric locale (the JSON writer's): kt__fmt_g's digits
 * at each precision in turn, until what strtod reads back is v (kt__fmt_g works that out; where it leaves it to
 * strtod, strtod is asked: digits on the bottom of a binade). Returns the length, 0 where it declines (the caller
 * uses printf): |v| outside [1, 10^15) or a whole number. buf holds at least 24 bytes. */
static inline size_t kt__fmt_g17(char *buf, double v)
{
    double a = v < 0 ? -v : v;
    if (!(a >= 1.0 && a < 1e15) || (double)(uint64_t)a == a)
        return 0;
    for (int p = 15; p <= 17; p++) {
        double back;
        size_t n = kt__fmt_g(buf, 24, v, p, &back);
        if (!n)
            return 0;
        if (back != back) /* NaN: not worked out */
            back = strtod(buf, NULL);
        if (back == v)
            return n;
    }
    return 0;
}

#endif
