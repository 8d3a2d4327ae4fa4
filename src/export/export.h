/* export.h — internal: the exporters behind kt_report_print() and the JSON/number writers they share. */
#ifndef KT_EXPORT_EXPORT_H
#define KT_EXPORT_EXPORT_H

#include <ktiming.h>
#include "export/report_view.h"
#include <locale.h>
#include <stdint.h>
#include <stdio.h>

/* Largest integer written as a bare JSON number: 2^53 - 1, the largest n such that every integer up to n is
 * exact in an IEEE double (JavaScript's Number.MAX_SAFE_INTEGER). Larger uint64 values are written as
 * decimal strings so that readers that parse numbers into doubles (cJSON, browsers) never round them. */
#define KT_JSON_MAX_SAFE_INT 9007199254740991ull

/* ---------------------------------------------------------------------------------------------------
 * Exporters: each writes one whole document for snap to out and returns 0, KT_EINVAL or KT_EIO.
 * They assume the C numeric locale (kt_report_print switches to it around the call). The tables read their
 * entries through a view (report_view.h: snap's own, or made on request) and the rest from snap.
 * ------------------------------------------------------------------------------------------------- */
int kt__export_text(FILE *out, const kt_snapshot_t *snap, const kt__entry_view_t *v, const kt_report_opts_t *opts);
int kt__export_markdown(FILE *out, const kt_snapshot_t *snap, const kt__entry_view_t *v,
                        const kt_report_opts_t *opts);
/* KT_FORMAT_LINES: "[timing] %-20s %-5s avg=%7.2fms min=%7.2fms max=%7.2fms n=%llu" per kernel (the seed's format),
 * rows in the text report's order and filter; names escaped as in the text report. */
int kt__export_lines(FILE *out, const kt_snapshot_t *snap, const kt__entry_view_t *v, const kt_report_opts_t *opts);
int kt__export_csv(FILE *out, const kt__entry_view_t *v, const kt_report_opts_t *opts);
int kt__export_json(FILE *out, const kt_snapshot_t *snap, const kt__entry_view_t *v);
int kt__export_chrome(FILE *out, const kt_snapshot_t *snap); /* chrome.c */
int kt__export_html(FILE *out, const kt_snapshot_t *snap);   /* html.c */

/* The rows a table report shows: indices into the view's entries matching opts->filter (fnmatch), in opts->sort
 * order (ties in snapshot order); opts NULL = every entry by total time. *rows is malloc'd (free it).
 * Returns 0, KT_EINVAL or KT_ENOMEM. */
int kt__report_rows(const kt__entry_view_t *v, const kt_report_opts_t *opts, size_t **rows, size_t *count);

/* Launch configurations in text (docs/cli.md, "--by-config"): "global=1024x768 local=16x16", "global=4096 local=auto"
 * (local NULL), "groups=64x1x1 local=256x1x1" ("groups=64x1x1" when the local size is unknown), "indirect",
 * "other", "none". KT__LAUNCH_LABEL bytes hold any. */
#define KT__LAUNCH_LABEL 160
void kt__launch_label(char *buf, size_t size, const kt_launch_t *l);
/* An entry's breakdown as entries (name, backend, device the entry's): one per configs[] row, then "none" for the
 * dispatches that carried no configuration (count and total only: min, max and the percentiles not known, marked by
 * min_ns > max_ns and p50_ns > p99_ns, which no real statistics have) -- the whole entry when it has no configs[]. Labels in labels[]; returns the rows (at most
 * config_count + 1). parts and labels hold KT_LAUNCH_CONFIGS_MAX + 2. */
uint32_t kt__config_parts(const kt_kernel_timing_t *e, kt_kernel_timing_t *parts, char (*labels)[KT__LAUNCH_LABEL]);
/* Whether an entry (or a part) has no min/max, and no percentiles, to show: no dispatches, or a part's "not known"
 * marks above. Never decided from a value: UINT64_MAX is a real duration. */
static inline int kt__no_range(const kt_kernel_timing_t *e) { return !e->dispatch_count || e->min_ns > e->max_ns; }
static inline int kt__no_pct(const kt_kernel_timing_t *e) { return kt__no_range(e) || e->p50_ns > e->p99_ns; }

/* A duration for people: "812 ns", "12.34 µs", "1.099 ms", "2.500 s" (four significant digits, the unit chosen
 * per value); "-" for a negative or non-finite value. */
void kt__format_duration(char *buf, size_t size, double ns);

/* ---------------------------------------------------------------------------------------------------
 * JSON writing helpers
 * ------------------------------------------------------------------------------------------------- */

/* Writes s (stopping at NUL; NULL is "") as a quoted JSON string, as kt__json_write_chars does: maxlen other than
 * SIZE_MAX is a fixed field's size, and the string read back then fits it (at most maxlen - 1 bytes). */
void kt__json_write_string(FILE *out, const char *s, size_t maxlen);

/* Writes v as a JSON number when v <= KT_JSON_MAX_SAFE_INT, else as a quoted decimal string. */
void kt__json_write_u64(FILE *out, uint64_t v);

/* Writes a 128-bit integer like kt__json_write_u64 (a decimal string above 2^53 - 1). */
void kt__json_write_u128(FILE *out, kt_u128_t v);

/* Writes v with the fewest significant digits (up to 17) that read back as exactly v; non-finite values
 * (which JSON cannot carry) are written as null. */
void kt__json_write_double(FILE *out, double v);

/* Formats v like kt__json_write_double into buf (at least 32 bytes); returns buf. */
char *kt__format_double(char *buf, size_t size, double v);

/* Numbers with '.', whatever LC_NUMERIC the program chose: every public writer switches this thread (never the
 * process) to the C numeric locale around its exporter, then restores it. */
typedef struct kt__c_numeric_t {
    locale_t c_numeric; /* the C locale made for the call ((locale_t)0 if none could be made) */
    locale_t previous;  /* the thread's locale before */
} kt__c_numeric_t;
kt__c_numeric_t kt__c_numeric_enter(void);
/* Restores the thread's locale; returns rc, or KT_EIO when rc is 0 and out failed to flush or has its error set. */
int kt__c_numeric_leave(kt__c_numeric_t l, FILE *out, int rc);

/* kt__json_write_chars flags. */
#define KT__JSON_HTML 1u /* also '<' '>' '&' as \u003c.., and \b \f as \u0008 \u000c: safe inside an HTML <script> */

/* The one JSON string-content writer (no quotes): s ("" for NULL); JSON's escapes, other control bytes as \u00XX,
 * U+2029 and what kt__escape hides (C1, bidi, U+2028) as \uXXXX. A byte that is not valid UTF-8 is written as
 * U+FFFD and the byte in two upper-case hex digits ("k\xff" -> "k\ufffdFF"), as the registry keeps kernel names
 * (registry.c, kept_form), so names differing in such bytes stay different (docs/json-schema.md). maxlen SIZE_MAX: no
 * limit; else a fixed field's size: at most maxlen bytes of s are read, and what is written decodes to at most
 * maxlen - 1 bytes, cut before the first character (or byte's U+FFFD form) that would not fit. The snapshot writer
 * (flags 0) and the Chrome trace / HTML writers (KT__JSON_HTML) both use it. */
void kt__json_write_chars(FILE *out, const char *s, size_t maxlen, unsigned flags);

#endif
