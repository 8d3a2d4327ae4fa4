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
