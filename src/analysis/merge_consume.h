/* merge_consume.h — tool-only (`ktiming merge`; not installed): kt_snapshot_merge that releases its inputs'
 * entries as they are merged, so a merge of large files holds about one copy of the kernels, not two. */
#ifndef KT_MERGE_CONSUME_H
#define KT_MERGE_CONSUME_H

#include <ktiming/analysis.h>

/* kt_snapshot_merge of inputs (the same result, the same errors). The inputs' entries are emptied as they are
 * merged, whether it succeeds or fails: afterwards the inputs are only to be freed (kt_snapshot_free). */
KT_API int kt__snapshot_merge_consume(kt_snapshot_t *const *inputs, size_t n, const kt_merge_opts_t *opts,
                                      kt_snapshot_t **out);

#endif
