/* by_rank.h — tool-only (`ktiming merge --by-rank`; not installed): the by-rank report of entries kept as they
 * are merged, only what it reads of each (name, backend, device, per-source totals: some 80 bytes a kernel, not a
 * 376-byte entry and its samples), so the merge can be written as it is made and no merged snapshot is held. */
#ifndef KT_BY_RANK_H
#define KT_BY_RANK_H

#include <ktiming/analysis.h>

#include "export/report_view.h"

#include <stdio.h>

typedef struct kt__by_rank_t kt__by_rank_t;

/* An empty store for count entries (the merge's, kt__merge_count); NULL when out of memory. */
KT_API kt__by_rank_t *kt__by_rank_new(size_t count);

/* Keeps what the report reads of e (copied), the next entry in the merged snapshot's order. 0, KT_ENOMEM, or
 * KT_EINVAL past the count the store was made for. */
KT_API int kt__by_rank_keep(kt__by_rank_t *r, const kt_kernel_timing_t *e);

/* kt_report_by_rank of meta (its sources; its entries are not read) with the entries kept: the same text as for
 * a snapshot holding them. */
KT_API int kt__by_rank_print(FILE *out, const kt_snapshot_t *meta, const kt__by_rank_t *r);

KT_API void kt__by_rank_free(kt__by_rank_t *r);

/* A view (report_view.h) over inner that also keeps each entry it hands out in keep (kt__by_rank_keep), in the
 * order asked: `ktiming merge --by-rank` writes the merge through it and keeps what the report reads as it goes.
 * A failure to keep an entry is kept in rc (the first one) and fails the report, not the view. Fill with
 * kt__by_rank_keeping, then read k->view; k must stay where it is while the view is read. */
typedef struct kt__by_rank_keeping_t {
    kt__entry_view_t view;  /* inner's, entries kept as they are read */
    kt__entry_view_t inner;
    kt__by_rank_t *keep;
    int rc;
} kt__by_rank_keeping_t;

KT_API void kt__by_rank_keeping(kt__by_rank_keeping_t *k, const kt__entry_view_t *inner, kt__by_rank_t *keep);

#endif
