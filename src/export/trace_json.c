/* trace_json.c — JSON string and time writers shared by the Chrome trace and HTML exporters. */
#include "export/trace_json.h"

#include "export/export.h"

#include <inttypes.h>
#include <stdint.h>
#include <string.h>

void kt__trace_json_chars(FILE *out, const char *s) { kt__json_write_chars(out, s, SIZE_MAX, KT__JSON_HTML); }

void kt__trace_json_string(FILE *out, const char *s)
{
    fputc('"', out);
    kt__trace_json_chars(out, s);
    fputc('"', out);
}

void kt__trace_json_us(FILE *out, uint64_t ns)
{
    fprintf(out, "%" PRIu64 ".%03u", ns / 1000u, (unsigned)(ns % 1000u));
}
