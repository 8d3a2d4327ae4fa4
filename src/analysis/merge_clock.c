/* merge_clock.c — a merge's clock alignment: each input's offset and bound on the merged timeline from the
 * inputs' stated host clocks and clock anchors (merge_clock.h). */
#include "analysis/merge_clock.h"

#include "shared/clock_anchor.h"

#include <stdio.h>
#include <string.h>

static int same_host(const kt_snapshot_t *a, const kt_snapshot_t *b)
{
    return !strncmp(a->host, b->host, sizeof a->host);
}

static uint64_t distance(uint64_t a, uint64_t b) { return a > b ? a - b : b - a; }

void kt__merge_clocks(const kt_snapshot_t *const *in, size_t n, kt__merge_clock_t *pl, kt_snapshot_t *o)
{
    /* the merged timeline's clock: ktiming's wherever one input is on it, else the first stated */
    const char *ref = "";
    for (size_t i = 0; i < n; i++)
        if (!strcmp(in[i]->clock_domain, KT_CLOCK_HOST) || (!ref[0] && in[i]->clock_domain[0]))
            ref = in[i]->clock_domain;
    snprintf(o->clock_domain, sizeof o->clock_domain, "%s", ref);
    for (size_t i = 0; i < n; i++) {
        const kt_snapshot_t *s = in[i];
        memset(&pl[i], 0, sizeof pl[i]);
        pl[i].bound = same_host(s, in[0]) ? 0 : UINT64_MAX;
        if (!s->clock_domain[0] || !ref[0] || !strcmp(s->clock_domain, ref))
            continue; /* the merged clock, or not stated (older files): as before anchors */
        pl[i].bound = UINT64_MAX;
        if (strcmp(s->clock_domain, KT_CLOCK_MONO) || strcmp(ref, KT_CLOCK_HOST))
            continue; /* no anchor relates these clocks */
        const kt_clock_anchor_t *best = NULL;
        for (size_t j = 0; j < n; j++) {
            const kt_clock_anchor_t *a = &in[j]->clock_anchor;
            if (j == i || !a->host_ns || strcmp(in[j]->clock_domain, KT_CLOCK_HOST) || !same_host(in[j], s))
                continue;
            if (!best || distance(a->monotonic_ns, s->taken_ns) < distance(best->monotonic_ns, s->taken_ns))
                best = a;
        }
        if (!best)
            continue;
        pl[i].anchor = *best;
        pl[i].offset = kt__clock_anchor_offset(best);
        pl[i].bound = same_host(s, in[0]) ? best->bound_ns : UINT64_MAX;
    }
}

void kt__merge_clock_anchor(const kt_snapshot_t *const *in, size_t n, const kt__merge_clock_t *pl, kt_snapshot_t *o)
{
    memset(&o->clock_anchor, 0, sizeof o->clock_anchor);
    for (size_t i = 0; i < n; i++) {
        const kt_clock_anchor_t *a = &in[i]->clock_anchor;
        if (a->host_ns && !pl[i].offset && !pl[i].bound && !strcmp(in[i]->clock_domain, o->clock_domain) &&
            !strncmp(in[i]->host, o->host, sizeof o->host) && a->host_ns > o->clock_anchor.host_ns)
            o->clock_anchor = *a;
    }
}
