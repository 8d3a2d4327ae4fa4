/* timeline_json.c — JSON string and time writers shared by the Chrome trace and HTML exporters. */
#include "export/timeline.h"

#include <inttypes.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (1..4), or 0 when the bytes there are not valid UTF-8. */
static size_t utf8_seq_len(const unsigned char *s)
{
    unsigned char c = s[0];
    size_t n;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
        cp = c & 0x1Fu;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        cp = c & 0x0Fu;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        cp = c & 0x07u;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0u) != 0x80u)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3Fu);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

void kt__tl_json_chars(FILE *out, const char *s)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        unsigned char c = *p;
        switch (c) {
        case '"': fputs("\\\"", out); p++; continue;
        case '\\': fputs("\\\\", out); p++; continue;
        case '\n': fputs("\\n", out); p++; continue;
        case '\r': fputs("\\r", out); p++; continue;
        case '\t': fputs("\\t", out); p++; continue;
        case '<': case '>': case '&': fprintf(out, "\\u%04x", c); p++; continue;
        default: break;
        }
        if (c < 0x20 || c == 0x7F) {
            fprintf(out, "\\u%04x", c);
            p++;
            continue;
        }
        size_t n = utf8_seq_len(p);
        if (n == 0) {
            fputs("\\ufffd", out);
            p++;
        } else if (n == 3 && p[0] == 0xE2 && p[1] == 0x80 && (p[2] == 0xA8 || p[2] == 0xA9)) {
            fputs(p[2] == 0xA8 ? "\\u2028" : "\\u2029", out);
            p += 3;
        } else {
            fwrite(p, 1, n, out);
            p += n;
        }
    }
}

void kt__tl_json_string(FILE *out, const char *s)
{
    fputc('"', out);
    kt__tl_json_chars(out, s);
    fputc('"', out);
}

void kt__tl_json_us(FILE *out, uint64_t ns)
{
    fprintf(out, "%" PRIu64 ".%03u", ns / 1000u, (unsigned)(ns % 1000u));
}
