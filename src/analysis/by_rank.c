/* by_rank.c — load balance across the ranks of a merged snapshot: kt_rank_balance() and the `--by-rank` text
 * report (mpiP-style: per kernel the spread of per-rank totals, the imbalance max/mean and the slowest rank). */
#include <ktiming/analysis.h>

#include "analysis/by_rank.h"
#include "export/escape.h"
#include "export/fixed.h"
#include "export/report_view.h"

#include <fenv.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Ranks listed one by one under each kernel up to this many sources; above it only the summary line. */
#define BY_RANK_DETAIL_MAX 16

/* The end of the kernel whose first entry is i: entries are sorted by name, backend, device, so the kernel on every
 * device is the run of entries with its name and backend. */
static size_t kernel_end(const kt__entry_view_t *v, size_t i)
{
    kt_kernel_timing_t ta, tb;
    const kt_kernel_timing_t *a = kt__view_entry(v, i, &ta);
    size_t j = i + 1;
    for (; j < v->count; j++) {
        const kt_kernel_timing_t *e = kt__view_entry(v, j, &tb);
        if (e->backend != a->backend || strcmp(e->name, a->name))
            break;
    }
    return j;
}

/* The balance of the kernel on entries [i, j): each of the nsrc sources' total over them (in tot, nsrc long). */
static void balance_of(const kt__entry_view_t *v, size_t i, size_t j, size_t nsrc, uint64_t *tot,
                       kt_rank_balance_t *r)
{
    memset(tot, 0, nsrc * sizeof *tot);
    for (size_t x = i; x < j; x++) {
        kt_kernel_timing_t tmp;
        const kt_kernel_timing_t *e = kt__view_entry(v, x, &tmp);
        for (uint32_t k = 0; e->by_source && k < e->by_source_count; k++)
            if (e->by_source[k].source < nsrc) {
                uint64_t *t = &tot[e->by_source[k].source];
                *t = *t > UINT64_MAX - e->by_source[k].total_ns ? UINT64_MAX : *t + e->by_source[k].total_ns;
            }
    }
    long double sum = 0;
    memset(r, 0, sizeof *r);
    r->entry = i;
    r->devices = (uint32_t)(j - i);
    r->sources = (uint32_t)nsrc;
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

static kt__entry_view_t own_view(const kt_snapshot_t *snap)
{
    return (kt__entry_view_t){snap->count, snap->entries, NULL, NULL, NULL, 0, 1};
}

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
    kt__entry_view_t v = own_view(snap);
    size_t nb = 0;
    for (size_t i = 0, j; i < snap->count; i = j) {
        j = kernel_end(&v, i);
        balance_of(&v, i, j, snap->source_count, tot, &b[nb++]);
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

/* snprintf(buf, size, "%.3f", v) (fixed.h's digits when it takes v under the default rounding mode, near: whether
 * it is): a report of a million kernels is five such numbers a kernel, and printf's were a quarter of its time. */
static void fixed3(char *buf, size_t size, double v, int near)
{
    if (v == 0.0 && size >= 6)
        memcpy(buf, "0.000", 6);
    else if (!near || !kt__fmt_fixed(buf, size, v, 3))
        snprintf(buf, size, "%.3f", v);
}

static void ms(char *buf, size_t size, double ns, int near)
{
    fixed3(buf, size, ns / 1e6, near);
    size_t n = strlen(buf);
    snprintf(buf + n, size - n, " ms");
}

/* The device on which source `src` spent most of the kernel's time among its entries [first, first + n), and how
 * many of them it used; NULL when none. */
static const char *source_device(const kt__entry_view_t *v, size_t first, uint32_t n, uint32_t src, int *used)
{
    const char *best = NULL;
    uint64_t best_ns = 0;
    *used = 0;
    for (size_t x = first; x < first + n; x++) {
        kt_kernel_timing_t tmp; /* a view's entry: its strings are the view's, they outlive tmp */
        const kt_kernel_timing_t *e = kt__view_entry(v, x, &tmp);
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
static void source_on_device(char *buf, size_t size, const kt_snapshot_t *snap, const kt__entry_view_t *v,
                             const kt_rank_balance_t *r, uint32_t src)
{
    char who[96];
    int used;
    source_label(who, sizeof who, &snap->sources[src]);
    const char *dev = r->devices > 1 ? source_device(v, r->entry, r->devices, src, &used) : NULL;
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

/* The report of snap (its sources) with the entries of v, written kernel by kernel: no balance array held. */
static int report_by_rank(FILE *out, const kt_snapshot_t *snap, const kt__entry_view_t *v)
{
    if (!out || !snap || !snap->source_count || !snap->sources)
        return KT_EINVAL;
    uint64_t *tot = calloc(snap->source_count, sizeof *tot);
    if (!tot)
        return KT_ENOMEM;
    char lo[40], mean[40], hi[40], imb[40], who[256];
    int near = fegetround() == FE_TONEAREST;
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
    for (size_t i = 0, j; i < v->count; i = j) {
        j = kernel_end(v, i);
        kt_rank_balance_t b;
        balance_of(v, i, j, snap->source_count, tot, &b);
        kt_kernel_timing_t te;
        const kt_kernel_timing_t *e = kt__view_entry(v, i, &te);
        ms(lo, sizeof lo, (double)b.min_total_ns, near);
        ms(mean, sizeof mean, b.mean_total_ns, near);
        ms(hi, sizeof hi, (double)b.max_total_ns, near);
        source_on_device(who, sizeof who, snap, v, &b, b.slowest_source);
        kt__escape_write_padded(out, e->name, KT_ESC_TEXT, 28);
        fixed3(imb, sizeof imb, b.imbalance, near);
        fprintf(out, " %-8s %14s %14s %14s %9s  %s\n", kt_backend_name(e->backend), lo, mean, hi, imb, who);
        if (snap->source_count > BY_RANK_DETAIL_MAX)
            continue;
        if (b.devices == 1) {
            for (uint32_t k = 0; e->by_source && k < e->by_source_count; k++) {
                const kt_source_total_t *t = &e->by_source[k];
                source_label(who, sizeof who, &snap->sources[t->source]);
                ms(hi, sizeof hi, (double)t->total_ns, near);
                fprintf(out, "    %-24s %14s  n=%" PRIu64 "\n", who, hi, t->dispatch_count);
            }
            continue;
        }
        /* several devices: each device's ranks under it */
        for (uint32_t x = 0; x < b.devices; x++) {
            kt_kernel_timing_t td;
            const kt_kernel_timing_t *d = kt__view_entry(v, b.entry + x, &td);
            fputs("    on ", out);
            kt__escape_write(out, d->device, KT_ESC_TEXT);
            fputc('\n', out);
            for (uint32_t k = 0; d->by_source && k < d->by_source_count; k++) {
                const kt_source_total_t *t = &d->by_source[k];
                source_label(who, sizeof who, &snap->sources[t->source]);
                ms(hi, sizeof hi, (double)t->total_ns, near);
                fprintf(out, "      %-22s %14s  n=%" PRIu64 "\n", who, hi, t->dispatch_count);
            }
        }
    }
    free(tot);
    /* flushed: a report held in the stream's buffer and never written (a full disk, a closed descriptor) is a
     * failure to say, not a success */
    return fflush(out) != 0 || ferror(out) ? KT_EIO : 0;
}

int kt_report_by_rank(FILE *out, const kt_snapshot_t *snap)
{
    if (!out || !snap)
        return KT_EINVAL;
    kt__entry_view_t v = own_view(snap);
    return report_by_rank(out, snap, &v);
}

/* ---------------------------------------------------------------------------------------------------
 * Entries kept for the report (by_rank.h): a small record each, their strings and per-source totals in blocks.
 * ------------------------------------------------------------------------------------------------- */

typedef struct kept_t {
    const char *name;
    const char *device;
    const kt_source_total_t *by_source;
    uint32_t by_source_count;
    kt_backend_t backend;
} kept_t;

#define KEPT_BLOCK ((size_t)1 << 20) /* bytes of a block of strings and totals (more for a larger item) */

struct kt__by_rank_t {
    kept_t *v;      /* the records */
    size_t n, cap;  /* held, room (the entries the store was made for) */
    char **blocks;  /* the blocks */
    size_t nblocks, cap_blocks;
    size_t used, size; /* of the last block */
};

kt__by_rank_t *kt__by_rank_new(size_t count)
{
    kt__by_rank_t *r = calloc(1, sizeof *r);
    if (r && count && !(r->v = malloc(count * sizeof *r->v))) {
        free(r);
        return NULL;
    }
    if (r)
        r->cap = count;
    return r;
}

/* n bytes in a block, 8-aligned; NULL when out of memory. */
static void *kept_alloc(kt__by_rank_t *r, size_t n)
{
    size_t at = (r->used + 7) & ~(size_t)7;
    if (!r->nblocks || at > r->size || r->size - at < n) {
        if (r->nblocks == r->cap_blocks) {
            size_t cap = r->cap_blocks ? 2 * r->cap_blocks : 16;
            char **b = realloc(r->blocks, cap * sizeof *b);
            if (!b)
                return NULL;
            r->blocks = b;
            r->cap_blocks = cap;
        }
        size_t size = n > KEPT_BLOCK ? n : KEPT_BLOCK;
        if (!(r->blocks[r->nblocks] = malloc(size)))
            return NULL;
        r->nblocks++;
        r->size = size;
        at = 0;
    }
    r->used = at + n;
    return r->blocks[r->nblocks - 1] + at;
}

static const char *kept_string(kt__by_rank_t *r, const char *s)
{
    size_t n = strlen(s ? s : "") + 1;
    char *p = kept_alloc(r, n);
    if (p)
        memcpy(p, s ? s : "", n);
    return p;
}

int kt__by_rank_keep(kt__by_rank_t *r, const kt_kernel_timing_t *e)
{
    if (r->n == r->cap)
        return KT_EINVAL; /* more than the store was made for */
    kept_t k = {kept_string(r, e->name), kept_string(r, e->device), NULL, 0, e->backend};
    if (!k.name || !k.device)
        return KT_ENOMEM;
    if (e->by_source && e->by_source_count) {
        kt_source_total_t *b = kept_alloc(r, e->by_source_count * sizeof *b);
        if (!b)
            return KT_ENOMEM;
        memcpy(b, e->by_source, e->by_source_count * sizeof *b);
        k.by_source = b;
        k.by_source_count = e->by_source_count;
    }
    r->v[r->n++] = k;
    return 0;
}

static const kt_kernel_timing_t *kept_get(const kt__entry_view_t *v, size_t i, kt_kernel_timing_t *tmp)
{
    const kept_t *k = &((const kt__by_rank_t *)v->user)->v[i];
    memset(tmp, 0, sizeof *tmp);
    tmp->name = k->name;
    tmp->device = k->device;
    tmp->backend = k->backend;
    tmp->by_source = (kt_source_total_t *)k->by_source;
    tmp->by_source_count = k->by_source_count;
    return tmp;
}

int kt__by_rank_print(FILE *out, const kt_snapshot_t *meta, const kt__by_rank_t *r)
{
    if (!r)
        return KT_EINVAL;
    kt__entry_view_t v = {r->n, NULL, kept_get, r, r->v, sizeof(kept_t), 0};
    return report_by_rank(out, meta, &v);
}

void kt__by_rank_free(kt__by_rank_t *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->nblocks; i++)
        free(r->blocks[i]);
    free(r->blocks);
    free(r->v);
    free(r);
}

static const kt_kernel_timing_t *keeping_get(const kt__entry_view_t *v, size_t i, kt_kernel_timing_t *tmp)
{
    kt__by_rank_keeping_t *k = (kt__by_rank_keeping_t *)v->user;
    const kt_kernel_timing_t *e = kt__view_entry(&k->inner, i, tmp);
    if (e && !k->rc)
        k->rc = kt__by_rank_keep(k->keep, e);
    return e;
}

void kt__by_rank_keeping(kt__by_rank_keeping_t *k, const kt__entry_view_t *inner, kt__by_rank_t *keep)
{
    k->inner = *inner;
    k->keep = keep;
    k->rc = 0;
    k->view = *inner;
    k->view.get = keeping_get;
    k->view.user = k;
}
