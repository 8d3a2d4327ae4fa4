/* escape.h — internal: the one place that makes names safe for human-readable output (terminal text, markdown)
 * and for spreadsheets (CSV). Used by the text and markdown reports, the CSV exporter (names escaped as text, then
 * quoted), the compare tables and the `--by-rank` report (analysis library, which compiles escape.c in too), the
 * `ktiming run` summary and the backends' `-v` lines; the JSON writers use kt__hidden_control. Every format is fed
 * the same hostile names by tests/analysis/test_hostile.c. */
#ifndef KT_EXPORT_ESCAPE_H
#define KT_EXPORT_ESCAPE_H

#include <stddef.h>
#include <stdio.h>

/* kt__escape flags. */
#define KT_ESC_TEXT 0u     /* terminal text: controls, C1 controls, bidi controls, invalid UTF-8 and '\' escaped */
#define KT_ESC_MARKDOWN 1u /* also a markdown table cell: & < > as HTML entities, | ` * _ [ ] ~ \ backslashed */

/* Returns a malloc'd copy of at most maxlen bytes of s (NULL is "") in which nothing can move the cursor,
 * change the terminal, reorder the line or inject markup:
 *   bytes 0x00-0x1F and 0x7F            -> \xHH        (ESC -> \x1b, CR -> \x0d, LF -> \x0a)
 *   bytes that are not valid UTF-8      -> \xHH        (a lone 0x9b -> \x9b)
 *   C1 controls U+0080-U+009F           -> \u0080..\u009f
 *   bidi and line controls U+061C, U+200E, U+200F, U+2028-U+202E, U+2066-U+2069 -> \u202e etc.
 *   '\'                                 -> \\          (so an escape in the output is never ambiguous)
 * Everything else (valid printable UTF-8) is kept. *cols (when not NULL) receives the output's display width
 * counted as one column per code point. Returns NULL when out of memory. */
char *kt__escape(const char *s, size_t maxlen, unsigned flags, size_t *cols);

/* How many of s's first len bytes, from the start, are their own KT_ESC_TEXT escape (printable ASCII but '\\', a
 * column each): len when kt__escape(s, len, KT_ESC_TEXT) would give s back unchanged. */
size_t kt__text_plain_len(const char *s, size_t len);

/* Writes kt__escape(s) to out; on allocation failure writes "?" (never the raw bytes). */
void kt__escape_write(FILE *out, const char *s, unsigned flags);

/* Writes kt__escape(s) to out padded with spaces on the right to `width` columns (never cut). */
void kt__escape_write_padded(FILE *out, const char *s, unsigned flags, size_t width);

/* One field of a comma-separated log line (`ktiming run -v`): kt__escape(s, KT_ESC_TEXT) with ',' written as
 * "\x2c", cut at a code point to fit dst[cap] (cap >= 1; NUL-terminated). Never allocates. */
void kt__escape_field(char *dst, size_t cap, const char *s);

/* The code point of the n-byte UTF-8 sequence at p when it is one kt__escape shows as \uXXXX (C1 controls,
 * bidi and line controls), else 0: the JSON writers write those as \uXXXX too (exact, and inert on a terminal). */
unsigned kt__hidden_control(const unsigned char *p, size_t n);

/* Display columns (code points) of a valid UTF-8 string, such as kt__escape's output. */
size_t kt__text_cols(const char *s);

/* 1 when a spreadsheet would take a CSV cell starting like s as a formula (=, +, -, @, tab or CR first):
 * the CSV writer then prefixes the cell with a single quote (OWASP's CSV-injection rule). */
int kt__csv_is_formula(const char *s);

/* The microsecond unit for human-readable output: "µs" when the environment's locale (LC_ALL, else LC_CTYPE,
 * else LANG; the first one set and non-empty) names UTF-8, else "us" (LC_ALL=C, POSIX, unset, Latin-1), so a
 * terminal or a log that is not UTF-8 never gets bytes it would show as mojibake. */
const char *kt__unit_us(void);

#endif
