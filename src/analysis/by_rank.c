/* by_rank.c — load balance across the ranks of a merged snapshot: kt_rank_balance() and the `--by-rank` text
 * report (mpiP-style: per kernel the spread of per-rank totals, the imbalance max/mean and the slowest rank). */
#include <ktiming/analysis.h>

#include "export/escape.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Ranks listed one by one under each kernel up to this many sources; above it only the summary line. */
#define BY_RANK_DETAIL_MAX 16

int kt_rank_balance(const kt_snapshot_t *snap, kt_rank_balance_t **out, size_t *count)
{
    if (!out || !count)
        return KT_EINVAL;
    *out = NULL;
    *count = 0;
    if (!snap || !snap->source_count || !snap->sources)
        return KT_EINVAL;
    if (!snap->count)
        return 0;
    kt_rank_balance_t *b = calloc(snap->count, sizeof *b);
    uint64_t *tot = calloc(snap->source_count, sizeof *tot);
    if (!b || !tot) {
        free(b);
        free(tot);
        return KT_ENOMEM;
    }
    size_t nb = 0;
    for (size_t i = 0, j; i < snap->count; i = j) {
        /* the kernel on every device (entries are sorted by name, backend, device): each rank's total over them */
        for (j = i + 1; j < snap->count && snap->entries[j].backend == snap->entries[i].backend &&
                        !strcmp(snap->entries[j].name, snap->entries[i].name);
             j++)
            ;
        memset(tot, 0, snap->source_count * sizeof *tot);
        for (size_t x = i; x < j; x++) {
            const kt_kernel_timing_t *e = &snap->entries[x];
            for (uint32_t k = 0; e->by_source && k < e->by_source_count; k++)
                if (e->by_source[k].source < snap->source_count) {
                    uint64_t *t = &tot[e->by_source[k].source];
                    *t = *t > UINT64_MAX - e->by_source[k].total_ns ? UINT64_MAX : *t + e->by_source[k].total_ns;
                }
        }
        kt_rank_balance_t *r = &b[nb++];
        long double sum = 0;
        r->entry = i;
        r->devices = (uint32_t)(j - i);
        r->sources = (uint32_t)snap->source_count;
        r->min_total_ns = UINT64_MAX;
        for (uint32_t s = 0; s < r->sources; s++) {
            sum += tot[s];
            if (s == 0 || tot[s] > r->max_total_ns) {
                r->max_total_ns = tot[s];
                r->slowest_source = s;
            }
            if (tot[s] < r->min_total_ns) {
                r->min_total_ns = tot[s];
                r->fastest_source = s;
            }
        }
        r->mean_total_ns = (double)(sum / r->sources);
        r->imbalance = r->mean_total_ns > 0 ? (double)r->max_total_ns / r->mean_total_ns : 0.0;
    }
    free(tot);
    *out = b;
    *count = nb;
    return 0;
}

/* "rank 2", or "pid 4242@host" for a source without a rank; the host name escaped as every text output's
 * names are (a snapshot is input: its names may carry terminal controls). */
static void source_label(char *buf, size_t size, const kt_source_info_t *so)
{
    if (so->rank >= 0) {
        snprintf(buf, size, "rank %" PRId32, so->rank);
    } else {
        char *host = kt__escape(so->host, SIZE_MAX, KT_ESC_TEXT, NULL);
        snprintf(buf, size, "pid %" PRId64 "@%s", so->pid, host ? host : "?");
        free(host);
    }
}

static void ms(char *buf, size_t size, double ns) { snprintf(buf, size, "%.3f ms", ns / 1e6); }

/* The device on which source `src` spent most of the kernel's time among its entries [first, first + n), and how
 * many of them it used; NULL when none. */
static const char *source_device(const kt_snapshot_t *snap, size_t first, uint32_t n, uint32_t src, int *used)
{
    const char *best = NULL;
    uint64_t best_ns = 0;
    *used = 0;
    for (size_t x = first; x < first + n; x++) {
        const kt_kernel_timing_t *e = &snap->entries[x];
        for (uint32_t k = 0; e->by_source && k < e->by_source_count; k++)
            if (e->by_source[k].source == src && e->by_source[k].dispatch_count) {
                ++*used;
                if (!best || e->by_source[k].total_ns > best_ns) {
                    best = e->device;
                    best_ns = e->by_source[k].total_ns;
                }
            }
    }
    return best;
}

/* The source's label with the device it ran the kernel on ("rank 3 on H100 #3"), escaped for a terminal. */
static void source_on_device(char *buf, size_t size, const kt_snapshot_t *snap, const kt_rank_balance_t *r,
                             uint32_t src)
{
    char who[96];
    int used;
    source_label(who, sizeof who, &snap->sources[src]);
    const char *dev = r->devices > 1 ? source_device(snap, r->entry, r->devices, src, &used) : NULL;
    if (!dev) {
        snprintf(buf, size, "%s", who);
        return;
    }
    char *d = kt__escape(dev, 128, KT_ESC_TEXT, NULL);
    if (used > 1)
        snprintf(buf, size, "%s on %s (+%d)", who, d ? d : "?", used - 1);
    else
        snprintf(buf, size, "%s on %s", who, d ? d : "?");
    free(d);
}

int kt_report_by_rank(FILE *out, const kt_snapshot_t *snap)
{
    kt_rank_balance_t *b;
    size_t n;
    if (!out)
        return KT_EINVAL;
    int rc = kt_rank_balance(snap, &b, &n);
    if (rc)
        return rc;
    char lo[32], mean[32], hi[32], who[256];
    fprintf(out, "[by-rank] %zu sources (per-rank totals of each kernel; imbalance = max / mean)\n",
            snap->source_count);
    for (size_t s = 0; s < snap->source_count; s++) {
        const kt_source_info_t *so = &snap->sources[s];
        source_label(who, sizeof who, so);
        fprintf(out, "  %-12s host ", who);
        kt__escape_write(out, so->host, KT_ESC_TEXT);
        if (so->offset_bound_ns == UINT64_MAX)
            fprintf(out, " pid %" PRId64 ", clock offset unknown\n", so->pid);
        else
            fprintf(out, " pid %" PRId64 ", clock offset %+" PRId64 " ns +- %" PRIu64 " ns\n", so->pid,
                    so->offset_ns, so->offset_bound_ns);
    }
    fprintf(out, "%-28s %-8s %14s %14s %14s %9s  %s\n", "kernel", "backend", "min total", "mean total",
            "max total", "imbalance", "slowest");
    for (size_t i = 0; i < n; i++) {
        const kt_kernel_timing_t *e = &snap->entries[b[i].entry];
        ms(lo, sizeof lo, (double)b[i].min_total_ns);
        ms(mean, sizeof mean, b[i].mean_total_ns);
        ms(hi, sizeof hi, (double)b[i].max_total_ns);
        source_on_device(who, sizeof who, snap, &b[i], b[i].slowest_source);
        kt__escape_write_padded(out, e->name, KT_ESC_TEXT, 28);
        fprintf(out, " %-8s %14s %14s %14s %9.3f  %s\n", kt_backend_name(e->backend), lo, mean, hi, b[i].imbalance,
                who);
        if (snap->source_count > BY_RANK_DETAIL_MAX)
            continue;
        if (b[i].devices == 1) {
            for (uint32_t k = 0; e->by_source && k < e->by_source_count; k++) {
                const kt_source_total_t *t = &e->by_source[k];
                source_label(who, sizeof who, &snap->sources[t->source]);
                ms(hi, sizeof hi, (double)t->total_ns);
                fprintf(out, "    %-24s %14s  n=%" PRIu64 "\n", who, hi, t->dispatch_count);
            }
            continue;
        }
        /* several devices: each device's ranks under it */
        for (uint32_t x = 0; x < b[i].devices; x++) {
            const kt_kernel_timing_t *d = &snap->entries[b[i].entry + x];
            fputs("    on ", out);
            kt__escape_write(out, d->device, KT_ESC_TEXT);
            fputc('\n', out);
            for (uint32_t k = 0; d->by_source && k < d->by_source_count; k++) {
                const kt_source_total_t *t = &d->by_source[k];
                source_label(who, sizeof who, &snap->sources[t->source]);
                ms(hi, sizeof hi, (double)t->total_ns);
                fprintf(out, "      %-22s %14s  n=%" PRIu64 "\n", who, hi, t->dispatch_count);
            }
        }
    }
    free(b);
    return ferror(out) ? KT_EIO : 0;
}
