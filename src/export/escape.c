/* escape.c — names made safe for terminals, markdown and spreadsheets (see escape.h for the rules). */
#include "export/escape.h"
#include "shared/shared.h"
#include "core/env.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Code points shown as \uXXXX: C1 controls, and those that reorder or break a line of text. */
static int cp_is_hidden_control(uint32_t cp)
{
    return (cp >= 0x80 && cp <= 0x9F) || cp == 0x061C || cp == 0x200E || cp == 0x200F ||
           (cp >= 0x2028 && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

unsigned kt__hidden_control(const unsigned char *p, size_t n)
{
    uint32_t cp = 0;
    return n >= 2 && kt__utf8_decode(p, n, &cp) == n && cp_is_hidden_control(cp) ? (unsigned)cp : 0u;
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

#define ESC_FIELD 0x100u /* internal flag (kt__escape_field): ',' is escaped too */
#define ESC_UNIT_MAX 16   /* longest output of one unit ("\\\\\\\\" or "\\\\u202e" and the like) */

/* Escapes the unit (one byte or code point) at p[0..avail) into buf[ESC_UNIT_MAX]: returns its length there;
 * *used receives the input bytes taken and *cols the display columns the output takes. */
static size_t escape_unit(const unsigned char *p, size_t avail, unsigned flags, char *buf, size_t *used,
                          size_t *cols)
{
    uint32_t cp = 0;
    size_t k = kt__utf8_decode(p, avail, &cp);
    int md = (flags & KT_ESC_MARKDOWN) != 0;
    if (k == 0 || cp < 0x20 || cp == 0x7F || (cp == ',' && (flags & ESC_FIELD))) {
        /* one byte shown as \xHH; resynchronise on the next */
        static const char kHex[] = "0123456789abcdef";
        size_t o = 0;
        if (md) buf[o++] = '\\';
        buf[o++] = '\\';
        buf[o++] = 'x';
        buf[o++] = kHex[p[0] >> 4];
        buf[o++] = kHex[p[0] & 15u];
        *used = 1;
        *cols = 4;
        return o;
    }
    *used = k;
    if (cp_is_hidden_control(cp)) {
        *cols = 6;
        return (size_t)snprintf(buf, ESC_UNIT_MAX, "%s\\u%04x", md ? "\\" : "", (unsigned)cp);
    }
    const char *r = cp == '\\' ? (md ? "\\\\\\\\" : "\\\\") /* renders as \\ in markdown */
                    : md && cp < 0x80 ? markdown_replacement((unsigned char)cp)
                                      : NULL;
    if (r) {
        size_t rl = strlen(r);
        memcpy(buf, r, rl);
        *cols = cp == '\\' ? 2 : r[0] == '&' ? 1 : rl; /* an entity renders as one character */
        return rl;
    }
    memcpy(buf, p, k);
    *cols = 1;
    return k;
}

size_t kt__text_plain_len(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len && p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\')
        i++;
    return i;
}

char *kt__escape(const char *s, size_t maxlen, unsigned flags, size_t *cols)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t len = s ? strnlen(s, maxlen) : 0;
    if (flags == KT_ESC_TEXT && kt__text_plain_len(s, len) == len) { /* its own escape: copied */
        char *copy = malloc(len + 1);
        if (copy) {
            memcpy(copy, p, len);
            copy[len] = '\0';
            if (cols)
                *cols = len;
        }
        return copy;
    }
    /* worst case: every byte becomes "\\\\" in markdown (4) or \xHH (4); "&amp;" is 5 */
    char *out = malloc(len * 6 + 1);
    if (!out)
        return NULL;
    size_t o = 0, n = 0;
    for (size_t i = 0; i < len;) {
        char buf[ESC_UNIT_MAX];
        size_t used, c, bl = escape_unit(p + i, len - i, flags, buf, &used, &c);
        memcpy(out + o, buf, bl);
        o += bl;
        n += c;
        i += used;
    }
    out[o] = '\0';
    if (cols)
        *cols = n;
    char *fit = realloc(out, o + 1); /* the worst case given back: a report keeps a million of these */
    return fit ? fit : out;
}

void kt__escape_field(char *dst, size_t cap, const char *s)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t len = strlen((const char *)p), o = 0;
    for (size_t i = 0; i < len;) {
        char buf[ESC_UNIT_MAX];
        size_t used, c, bl = escape_unit(p + i, len - i, KT_ESC_TEXT | ESC_FIELD, buf, &used, &c);
        if (o + bl >= cap)
            break;
        memcpy(dst + o, buf, bl);
        o += bl;
        i += used;
    }
    dst[o] = '\0';
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

const char *kt__unit_us(void)
{
    static const char *const kVars[] = {"LC_ALL", "LC_CTYPE", "LANG"};
    for (size_t i = 0; i < sizeof kVars / sizeof kVars[0]; i++) {
        const char *v = kt__env_any(kVars[i]); /* the locale, not ktiming's: as any program reads it */
        if (!v || !*v)
            continue;
        const char *dot = strchr(v, '.');
        if (dot && (!strncasecmp(dot + 1, "utf-8", 5) || !strncasecmp(dot + 1, "utf8", 4)))
            return "\xc2\xb5s";
        return "us";
    }
    return "us";
}
