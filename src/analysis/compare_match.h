/* compare_match.h — which kernel of BEFORE is which kernel of AFTER (compare_match.c): by device identity. */
#ifndef KT_COMPARE_MATCH_H
#define KT_COMPARE_MATCH_H

#include <ktiming.h>

/* One row of a comparison: a matched pair, or one side alone (the other NULL). */
typedef struct kt__cmp_pair_t {
    const kt_kernel_timing_t *b; /* BEFORE's entry, or NULL */
    const kt_kernel_timing_t *a; /* AFTER's entry, or NULL */
    const char *match;           /* how the devices were matched (static): "uuid", "pci", "model+ordinal",
                                    "name"; NULL for a one-sided row */
} kt__cmp_pair_t;

/* Pairs the entries of the two snapshots: same (name, backend) and the same device, where "the same device" is,
 * in this order of preference: the same stable id on both sides (UUID, else PCI address: a GPU renumbered by
 * CUDA_VISIBLE_DEVICES is still found), else the same model and ordinal, else the same device label. Each entry
 * is in one pair; the pairs are sorted by (name, backend, device label: BEFORE's where it has one). *out is a new
 * array (free() it). 0 or KT_ENOMEM. */
int kt__compare_match(const kt_snapshot_t *before, const kt_snapshot_t *after, kt__cmp_pair_t **out, size_t *n);

#endif
