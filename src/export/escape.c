/* escape.c — names made safe for terminals, markdown and spreadsheets (see escape.h for the rules). */
#include "export/escape.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Decodes the UTF-8 sequence at s (avail bytes): its length (1..4) and *cp, or 0 when not valid UTF-8. */
static size_t utf8_decode(const unsigned char *s, size_t avail, uint32_t *cp)
{
    unsigned char c = s[0];
    size_t n;
    uint32_t v;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
        v = c & 0x1Fu;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        v = c & 0x0Fu;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        v = c & 0x07u;
    } else {
        return 0;
    }
    if (n > avail)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0u) != 0x80u)
            return 0;
        v = (v << 6) | (s[i] & 0x3Fu);
    }
    if ((n == 3 && v < 0x800) || (n == 4 && (v < 0x10000 || v > 0x10FFFF)) || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return n;
}

/* Code points shown as \uXXXX: C1 controls, and those that reorder or break a line of text. */
static int cp_is_hidden_control(uint32_t cp)
{
    return (cp >= 0x80 && cp <= 0x9F) || cp == 0x061C || cp == 0x200E || cp == 0x200F ||
           (cp >= 0x2028 && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

/* The replacement for one ASCII byte in a markdown cell, or NULL to keep it. */
static const char *markdown_replacement(unsigned char c)
{
    switch (c) {
    case '&': return "&amp;";
    case '<': return "&lt;";
    case '>': return "&gt;";
    case '|': return "\\|";
    case '`': return "\\`";
    case '*': return "\\*";
    case '_': return "\\_";
    case '[': return "\\[";
    case ']': return "\\]";
    case '~': return "\\~";
    default: return NULL;
    }
}

char *kt__escape(const char *s, size_t maxlen, unsigned flags, size_t *cols)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t len = s ? strnlen(s, maxlen) : 0;
    /* worst case: every byte becomes "\\\\" in markdown (4) or \xHH (4); "&amp;" is 5 */
    char *out = malloc(len * 6 + 1);
    if (!out)
        return NULL;
    size_t o = 0, n = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp = 0;
        size_t k = utf8_decode(p + i, len - i, &cp);
        if (k == 0 || cp < 0x20 || cp == 0x7F) { /* one byte shown as \xHH; resynchronise on the next */
            static const char kHex[] = "0123456789abcdef";
            const char *bs = (flags & KT_ESC_MARKDOWN) ? "\\\\" : "\\";
            size_t bl = strlen(bs);
            memcpy(out + o, bs, bl);
            o += bl;
            out[o++] = 'x';
            out[o++] = kHex[p[i] >> 4];
            out[o++] = kHex[p[i] & 15u];
            n += 4;
            i++;
            continue;
        }
        if (cp_is_hidden_control(cp)) {
            char buf[16];
            int bl = snprintf(buf, sizeof buf, "%s\\u%04x", (flags & KT_ESC_MARKDOWN) ? "\\" : "", (unsigned)cp);
            memcpy(out + o, buf, (size_t)bl);
            o += (size_t)bl;
            n += 6;
            i += k;
            continue;
        }
        if (cp == '\\') {
            const char *r = (flags & KT_ESC_MARKDOWN) ? "\\\\\\\\" : "\\\\"; /* renders as \\ in markdown */
            size_t rl = strlen(r);
            memcpy(out + o, r, rl);
            o += rl;
            n += 2;
            i++;
            continue;
        }
        const char *r = (flags & KT_ESC_MARKDOWN) && cp < 0x80 ? markdown_replacement((unsigned char)cp) : NULL;
        if (r) {
            size_t rl = strlen(r);
            memcpy(out + o, r, rl);
            o += rl;
            n += r[0] == '&' ? 1 : rl; /* an entity renders as one character */
            i++;
            continue;
        }
        memcpy(out + o, p + i, k);
        o += k;
        i += k;
        n++;
    }
    out[o] = '\0';
    if (cols)
        *cols = n;
    return out;
}

void kt__escape_write(FILE *out, const char *s, unsigned flags)
{
    char *e = kt__escape(s, SIZE_MAX, flags, NULL);
    fputs(e ? e : "?", out);
    free(e);
}

void kt__escape_write_padded(FILE *out, const char *s, unsigned flags, size_t width)
{
    size_t cols = 1;
    char *e = kt__escape(s, SIZE_MAX, flags, &cols);
    fputs(e ? e : "?", out);
    for (size_t i = cols; i < width; i++)
        fputc(' ', out);
    free(e);
}

size_t kt__text_cols(const char *s)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if ((*p & 0xC0u) != 0x80u)
            n++;
    return n;
}

int kt__csv_is_formula(const char *s)
{
    return s && (s[0] == '=' || s[0] == '+' || s[0] == '-' || s[0] == '@' || s[0] == '\t' || s[0] == '\r');
}
