/* compare_files.h — tool-only (`ktiming compare`; not installed): two snapshot files compared while holding, per
 * kernel, only what the comparison reads (kt__cmp_entry_t, 64 bytes and the name) instead of two whole
 * snapshots of 360-byte entries. The result is the one kt_compare gives for the two files loaded with
 * kt_snapshot_load (filtered as the CLI's --filter does), so kt_compare_print writes the same bytes. */
#ifndef KT_COMPARE_FILES_H
#define KT_COMPARE_FILES_H

#include <ktiming/compare.h>

typedef struct kt__cmp_files_t kt__cmp_files_t;

/* Reads BEFORE then AFTER (max_bytes each, > 0; "-" is standard input), each checked as kt_snapshot_load
 * checks it, with the same message in errbuf on failure; then keeps the kernels whose name matches the fnmatch
 * pattern filter (NULL or "": all). Returns 0 with *out, or kt_snapshot_load's code. */
KT_API int kt__compare_files_load(const char *before, const char *after, size_t max_bytes, const char *filter,
                                  kt__cmp_files_t **out, char *errbuf, size_t errlen);

/* kt_compare of the two files read. The result's strings are the files' (kt__compare_files_free releases both):
 * never kt_compare_free it. */
KT_API int kt__compare_files(kt__cmp_files_t *files, const kt_compare_opts_t *opts, kt_compare_result_t *out);

/* Releases result (may be NULL) and then files. */
KT_API void kt__compare_files_free(kt__cmp_files_t *files, kt_compare_result_t *result);

#endif
