/* timeline_json.c — JSON string and time writers shared by the Chrome trace and HTML exporters. */
#include "export/timeline.h"

#include "export/escape.h"

#include <inttypes.h>
#include <string.h>

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
        size_t n = kt__utf8_seq_len(p);
        if (n == 0) {
            fputs("\\ufffd", out);
            p++;
        } else if (n == 3 && p[0] == 0xE2 && p[1] == 0x80 && p[2] == 0xA9) {
            fputs("\\u2029", out);
            p += 3;
        } else if (kt__hidden_control(p, n)) { /* C1, bidi, U+2028: as kt__escape hides them */
            fprintf(out, "\\u%04x", kt__hidden_control(p, n));
            p += n;
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
