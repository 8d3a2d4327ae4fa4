/* merge_consume.h — tool-only (`ktiming merge`; not installed): kt_snapshot_merge that releases its inputs'
 * entries as they are merged, so a merge of large files holds about one copy of the kernels, not two; and the
 * merge made one entry at a time, so that `ktiming merge` writes each merged entry as it is made and no array of
 * merged entries is ever held. */
#ifndef KT_MERGE_CONSUME_H
#define KT_MERGE_CONSUME_H

#include <ktiming/analysis.h>

#include "export/report_view.h"

/* kt_snapshot_merge of inputs (the same result, the same errors). The inputs' entries are emptied as they are
 * merged, whether it succeeds or fails: afterwards the inputs are only to be freed (kt_snapshot_free). */
KT_API int kt__snapshot_merge_consume(kt_snapshot_t *const *inputs, size_t n, const kt_merge_opts_t *opts,
                                      kt_snapshot_t **out);

/* A merge made one entry at a time: kt_snapshot_merge is begin, next for each entry, end. */
typedef struct kt__merge_iter_t kt__merge_iter_t;

/* Checks the inputs and makes everything of the result but its entries and spans (header, sources, threads,
 * queues, devices: kt__merge_result). own: NULL, or inputs again, whose entries are then released as they are
 * merged (as kt__snapshot_merge_consume does). The inputs must stay until kt__merge_end. 0, KT_EINVAL (the
 * inputs kt_snapshot_merge refuses), KT_ENOMEM; *it is NULL on failure. */
KT_API int kt__merge_begin(const kt_snapshot_t *const *inputs, kt_snapshot_t *const *own, size_t n,
                           const kt_merge_opts_t *opts, kt__merge_iter_t **it);

/* The result being made: no entries (count 0); its spans are there once the last entry is made. */
KT_API const kt_snapshot_t *kt__merge_result(const kt__merge_iter_t *it);

/* How many entries the result has. */
KT_API size_t kt__merge_count(const kt__merge_iter_t *it);

/* The result's next entry, made in *t, which the caller owns afterwards (also on failure: what it holds is to be
 * freed as kt_snapshot_free frees an entry). After the last one the spans are merged. 0, KT_ENOMEM (and every
 * later call returns it), KT_EINVAL when all were made. */
KT_API int kt__merge_next(kt__merge_iter_t *it, kt_kernel_timing_t *t);

/* The first failure of begin or next, 0 if none. */
KT_API int kt__merge_status(const kt__merge_iter_t *it);

/* The entries as a view (report_view.h) for the JSON writer: entry i is made when it is asked for, in order
 * (i = 0, 1, ...), and freed when the next is asked for or at kt__merge_end; NULL on a failure (kt__merge_status
 * says which) or when asked out of order. With kt__merge_result as the meta, kt__report_write_view writes the
 * same bytes as kt_report_write of kt_snapshot_merge's result: the spans are merged when the last entry is made,
 * before the writer reaches them. */
KT_API void kt__merge_view(kt__merge_iter_t *it, kt__entry_view_t *v);

/* Frees the iteration and the result (the inputs are only to be freed afterwards). */
KT_API void kt__merge_end(kt__merge_iter_t *it);

#endif
