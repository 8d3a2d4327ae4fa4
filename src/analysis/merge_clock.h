/* merge_clock.h — internal: where each input of a merge goes on the merged timeline when the inputs' host clocks
 * differ (a Node WebGPU snapshot's CLOCK_MONOTONIC beside ktiming's CLOCK_MONOTONIC_RAW): through a same-host
 * snapshot's clock anchor, or marked unknown (docs/json-schema.md, "Clock anchor"). */
#ifndef KT_ANALYSIS_MERGE_CLOCK_H
#define KT_ANALYSIS_MERGE_CLOCK_H

#include <ktiming/analysis.h>

/* One input's placement. */
typedef struct kt__merge_clock_t {
    int64_t offset;           /* added to its host times */
    uint64_t bound;           /* error bound of offset (at the anchor when there is one); UINT64_MAX unknown */
    kt_clock_anchor_t anchor; /* host_ns != 0: its times were moved through this anchor, so each moved time's
                                 bound grows by KT_CLOCK_SLEW_PPM of its distance from anchor.monotonic_ns */
} kt__merge_clock_t;

/* The merged timeline's clock (written into o->clock_domain) and each input's placement into pl[0..n): inputs of
 * that clock, or of none stated (older files), as before anchors (offset 0; bound 0 on the first input's host,
 * unknown elsewhere); a CLOCK_MONOTONIC input on a CLOCK_MONOTONIC_RAW timeline through the anchor of a
 * CLOCK_MONOTONIC_RAW input of its host (the one taken nearest its own taken_ns), its bound unknown where that
 * host is not the first input's; any other clock, or no such anchor: offset 0, bound unknown. */
void kt__merge_clocks(const kt_snapshot_t *const *in, size_t n, kt__merge_clock_t *pl, kt_snapshot_t *o);

/* The merged snapshot's clock anchor: the latest of the inputs on its clock and host placed exactly (pl[i]: the
 * placements the merge used, offset 0 and bound 0). */
void kt__merge_clock_anchor(const kt_snapshot_t *const *in, size_t n, const kt__merge_clock_t *pl, kt_snapshot_t *o);

#endif
