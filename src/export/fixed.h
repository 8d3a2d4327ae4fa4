/* fixed.h — numbers as the tables print them, without printf: a table of a million kernels formats twenty million
 * cells, and glibc's "%.*f" (multi-precision arithmetic per call) was half of `ktiming report`'s time. Each
 * function writes exactly what the printf call named in its comment writes, or returns 0 where it does not
 * handle the value (the caller then calls printf). Header-only (the exporters and tests/export/test_fixed.c). */
#ifndef KT_EXPORT_FIXED_H
#define KT_EXPORT_FIXED_H

#include <stddef.h>
#include <stdint.h>
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

/* What kt__format_double writes (the shortest of "%.15g", "%.16g", "%.17g" that strtod reads back as v) for a v
 * with 1 <= |v| < 10^15 that is not a whole number (a mean or a standard deviation in ns), under the default
 * rounding mode (the caller checks it): v = m / 2^s exactly (2^52 <= m < 2^53, 1 <= s <= 52), so v rounded to P
 * significant digits is q = m * 10^f / 2^s rounded half to even (f = P - the integer part's digits; the product is
 * below 2^107), as printf rounds the exact binary value; and q / 10^f reads back as v when it lies within half an
 * ulp of v (a quarter below v at the bottom of a binade; on the boundary, when m is even), as strtod rounds to the
 * nearest double: |q * 2^s - m * 10^f| compared with 10^f / 2, exactly. Returns the length, 0 where it declines
 * (the caller uses printf): |v| outside [1, 10^15), a whole number, or a rounding that carries into another digit.
 * buf holds at least 24 bytes. */
static inline size_t kt__fmt_g17(char *buf, double v)
{
    static const uint64_t kPow10[18] = {1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull,
                                        10000000ull, 100000000ull, 1000000000ull, 10000000000ull,
                                        100000000000ull, 1000000000000ull, 10000000000000ull,
                                        100000000000000ull, 1000000000000000ull, 10000000000000000ull,
                                        100000000000000000ull};
    double a = v < 0 ? -v : v;
    if (!(a >= 1.0 && a < 1e15))
        return 0;
    uint64_t bits;
    memcpy(&bits, &a, sizeof bits);
    int s = 1075 - (int)(bits >> 52);
    uint64_t m = (bits & ((UINT64_C(1) << 52) - 1)) | UINT64_C(1) << 52;
    if (s < 1 || s > 52 || !(m & ((UINT64_C(1) << s) - 1))) /* a whole number */
        return 0;
    unsigned idig = 1;
    while (idig < 16 && (m >> s) >= kPow10[idig])
        idig++;
    for (unsigned p = 15; p <= 17; p++) {
        unsigned f = p - idig; /* 0 <= f <= 16 */
        unsigned __int128 num = (unsigned __int128)m * kPow10[f], q = num >> s,
                          r = num & (((unsigned __int128)1 << s) - 1), half = (unsigned __int128)1 << (s - 1);
        if (r > half || (r == half && (q & 1)))
            q++;
        if (q >= kPow10[p])
            return 0; /* carried: one more integer digit */
        unsigned __int128 qs = q << s, d = qs < num ? num - qs : qs - num;
        d *= qs < num && m == UINT64_C(1) << 52 ? 4 : 2;
        if (d > kPow10[f] || (d == kPow10[f] && (m & 1)))
            continue; /* reads back as another double: one more digit */
        uint64_t ip = (uint64_t)(q / kPow10[f]), fp = (uint64_t)(q % kPow10[f]);
        size_t len = 0;
        if (v < 0)
            buf[len++] = '-';
        len += kt__fmt_u64(buf + len, 20, ip);
        while (f && fp % 10 == 0) {
            fp /= 10;
            f--;
        }
        if (f) {
            buf[len++] = '.';
            for (unsigned i = f; i-- > 0; fp /= 10)
                buf[len + i] = (char)('0' + fp % 10);
            len += f;
        }
        buf[len] = '\0';
        return len;
    }
    return 0;
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

#endif
