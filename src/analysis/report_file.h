/* report_file.h — tool-only (`ktiming report` as a table; not installed): a snapshot file read for the text,
 * markdown, lines and CSV reports while holding, per kernel, only what those print (report_file.c: 120 bytes and
 * the name, against the 360 of a kt_kernel_timing_t and its own blocks). The report written from it is the one
 * kt_report_print writes for the file loaded with kt_snapshot_load, byte for byte. */
#ifndef KT_REPORT_FILE_H
#define KT_REPORT_FILE_H

#include <ktiming.h>
#include "export/report_view.h"

typedef struct kt__report_file_t kt__report_file_t;

/* Reads path (max_bytes > 0; "-" is standard input), checked as kt_snapshot_load checks it, with the same message
 * in errbuf on failure. Returns 0 with *out, or kt_snapshot_load's code. */
KT_API int kt__report_file_load(const char *path, size_t max_bytes, kt__report_file_t **out, char *errbuf,
                                size_t errlen);

/* The snapshot read, without its entries and spans (what kt__report_print_view reads besides the entries). */
KT_API const kt_snapshot_t *kt__report_file_meta(const kt__report_file_t *f);

/* The entries, in kt_snapshot_load's order, for kt__report_print_view / kt__report_write_view. */
KT_API void kt__report_file_view(const kt__report_file_t *f, kt__entry_view_t *v);

KT_API void kt__report_file_free(kt__report_file_t *f);

#endif
