/* trace_json.h — internal: the Chrome trace and HTML report exporters and the JSON writing helpers they share. */
#ifndef KT_EXPORT_TRACE_JSON_H
#define KT_EXPORT_TRACE_JSON_H

#include <ktiming.h>
#include <stdint.h>
#include <stdio.h>

#include "export/export.h" /* kt__export_chrome, kt__export_html (declared with the other exporters) */

/* HTML report of `after`, with a comparison view against `before` when it is non-NULL. compare_json, when
 * non-NULL, is the JSON document `ktiming compare --format json` writes; it supplies the speedups, confidence
 * intervals and verdicts shown. Without it the page shows the ratio of medians of the two snapshots' samples
 * and no verdicts. compare_json is embedded as is (after making it safe inside a <script> element); a
 * document that does not parse is reported on the page, not here. Returns 0, KT_EINVAL or KT_EIO. */
int kt__export_html_compare(FILE *out, const kt_snapshot_t *before, const kt_snapshot_t *after,
                            const char *compare_json);

/* ---------------------------------------------------------------------------------------------------
 * JSON helpers
 * ------------------------------------------------------------------------------------------------- */

/* Writes s as a quoted JSON string ("" for NULL). Besides JSON's escapes it escapes '<', '>', '&', U+2028 and
 * U+2029, so the output is also safe inside an HTML <script> element; invalid UTF-8 bytes as kt__json_write_chars
 * writes them (U+FFFD and the byte in hex). */
void kt__trace_json_string(FILE *out, const char *s);

/* The same escaped characters without the surrounding quotes. */
void kt__trace_json_chars(FILE *out, const char *s);

/* Writes ns as microseconds with three decimals ("1234.567"), exact, no floating point. */
void kt__trace_json_us(FILE *out, uint64_t ns);

#endif
