/* text.c — the human-readable kernel table ("[timing]" lines for terminals, or a markdown table): per kernel
 * n, total, share of the total, mean, stddev, min, p50, p90, p99, max with a unit chosen per value, rows sorted
 * and filtered as asked; also the row selection (sort + fnmatch filter) the CSV exporter shares. */
#include "shared/shared.h"
#include "export/escape.h"
#include "export/export.h"
#include "export/fixed.h"

#include <fenv.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MIN_COLS 6  /* "kernel" */
#define NAME_MAX_COLS 40 /* longer names are shortened in the middle so the columns stay aligned */
#define TIME_CELL 24     /* bytes of one formatted time cell */

/* ---------------------------------------------------------------------------------------------------
 * Row selection
 * ------------------------------------------------------------------------------------------------- */

/* A row being sorted: its key and its position in the snapshot (the tie-break, so the order is total). */
typedef struct sort_row_t {
    uint64_t u;   /* total or dispatch count */
    double d;     /* mean */
    size_t index; /* its index in the snapshot */
} sort_row_t;

static int cmp_index(const sort_row_t *a, const sort_row_t *b) { return (a->index > b->index) - (a->index < b->index); }

static int cmp_desc_u64(uint64_t a, uint64_t b) { return (a < b) - (a > b); }

static int cmp_total(const void *pa, const void *pb)
{
    const sort_row_t *a = pa, *b = pb;
    int r = cmp_desc_u64(a->u, b->u);
    return r ? r : cmp_index(a, b);
}

static int cmp_name(const void *pa, const void *pb) { return cmp_index(pa, pb); }

static int cmp_mean(const void *pa, const void *pb)
{
    const sort_row_t *a = pa, *b = pb;
    double x = a->d, y = b->d;
    int r = (x < y) - (x > y);
    return r ? r : cmp_index(a, b);
}

static int cmp_count(const void *pa, const void *pb)
{
    const sort_row_t *a = pa, *b = pb;
    int r = cmp_desc_u64(a->u, b->u);
    return r ? r : cmp_index(a, b);
}

int kt__report_rows(const kt__entry_view_t *v, const kt_report_opts_t *opts, size_t **rows, size_t *count)
{
    *rows = NULL;
    *count = 0;
    if (v->count && !v->entries && !v->get)
        return KT_EINVAL;
    kt_sort_t sort = opts ? opts->sort : KT_SORT_TOTAL;
    const char *filter = opts && opts->filter && *opts->filter ? opts->filter : NULL;
    if ((unsigned)sort > KT_SORT_COUNT)
        return KT_EINVAL;
    sort_row_t *tmp = malloc((v->count ? v->count : 1) * sizeof *tmp);
    size_t *idx = malloc((v->count ? v->count : 1) * sizeof *idx);
    if (!tmp || !idx) {
        free(tmp);
        free(idx);
        return KT_ENOMEM;
    }
    size_t n = 0;
    kt_kernel_timing_t scratch;
    for (size_t i = 0; i < v->count; i++) {
        const kt_kernel_timing_t *e = kt__view_entry(v, i, &scratch);
        if (filter && fnmatch(filter, e->name ? e->name : "", 0) != 0)
            continue;
        tmp[n].u = sort == KT_SORT_COUNT ? e->dispatch_count : e->total_ns;
        tmp[n].d = e->mean_ns;
        tmp[n].index = i;
        n++;
    }
    static int (*const kCmp[])(const void *, const void *) = {cmp_total, cmp_name, cmp_mean, cmp_count};
    qsort(tmp, n, sizeof *tmp, kCmp[sort]);
    for (size_t i = 0; i < n; i++)
        idx[i] = tmp[i].index;
    free(tmp);
    *rows = idx;
    *count = n;
    return 0;
}

/* ---------------------------------------------------------------------------------------------------
 * Launch configurations (--by-config)
 * ------------------------------------------------------------------------------------------------- */

/* "1024x768" from n sizes; with `chosen`, "auto" when all are 0 (OpenCL's local size NULL: the driver chose). */
static size_t put_dims(char *buf, size_t size, const uint64_t *v, uint32_t n, int chosen)
{
    size_t len = 0;
    int any = 0;
    for (uint32_t i = 0; i < n; i++)
        any |= v[i] != 0;
    if (!any && chosen)
        return (size_t)snprintf(buf, size, "auto");
    for (uint32_t i = 0; i < n && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%" PRIu64, i ? "x" : "", v[i]);
    return len;
}

void kt__launch_label(char *buf, size_t size, const kt_launch_t *l)
{
    uint32_t dims = l->dims < 1 ? 1 : l->dims > 3 ? 3 : l->dims;
    int items = l->kind == KT_LAUNCH_ITEMS, known = l->local[0] || l->local[1] || l->local[2];
    if (l->kind != KT_LAUNCH_ITEMS && l->kind != KT_LAUNCH_GROUPS) {
        snprintf(buf, size, "%s", l->kind == KT_LAUNCH_INDIRECT ? "indirect" : l->kind == KT_LAUNCH_OTHER ? "other"
                                                                                                          : "none");
        return;
    }
    size_t len = (size_t)snprintf(buf, size, items ? "global=" : "groups=");
    if (len < size)
        len += put_dims(buf + len, size - len, l->size, dims, 0);
    if (len < size && (items || known)) /* a group's size not known: left out */
        len += (size_t)snprintf(buf + len, size - len, " local=");
    if (len < size && (items || known))
        put_dims(buf + len, size - len, l->local, dims, 1);
}

/* A part of e as an entry of its own: e's name, backend and device, count and total; no spread, no percentiles. */
static void part_init(kt_kernel_timing_t *p, const kt_kernel_timing_t *e, uint64_t n, uint64_t total)
{
    memset(p, 0, sizeof *p);
    p->name = e->name;
    p->backend = e->backend;
    p->device = e->device;
    p->dispatch_count = n;
    p->total_ns = total;
    p->mean_ns = n ? (double)total / (double)n : 0.0;
    p->stddev_ns = NAN;                             /* not kept per configuration */
    p->p50_ns = UINT64_MAX; /* nor percentiles: "-" (p50 > p99, kt__no_pct) */
}

uint32_t kt__config_parts(const kt_kernel_timing_t *e, kt_kernel_timing_t *parts, char (*labels)[KT__LAUNCH_LABEL])
{
    uint32_t n = 0;
    uint64_t count = 0;
    unsigned __int128 total = 0;
    for (uint32_t i = 0; e->configs && i < e->config_count && i <= KT_LAUNCH_CONFIGS_MAX; i++) {
        const kt_config_timing_t *c = &e->configs[i];
        kt_kernel_timing_t *p = &parts[n];
        part_init(p, e, c->dispatch_count, c->total_ns);
        p->min_ns = c->min_ns;
        p->max_ns = c->max_ns;
        kt__launch_label(labels[n++], KT__LAUNCH_LABEL, &c->launch);
        count += c->dispatch_count;
        total += c->total_ns;
    }
    if (count < e->dispatch_count) { /* dispatches that carried no configuration: the rest of the entry */
        kt_kernel_timing_t *p = &parts[n];
        if (!n) {
            *p = *e; /* the whole entry: every statistic it has */
        } else {
            unsigned __int128 all = (unsigned __int128)e->total128.hi << 64 | e->total128.lo;
            if (!all)
                all = e->total_ns;
            all = all > total ? all - total : 0;
            part_init(p, e, e->dispatch_count - count, all > UINT64_MAX ? UINT64_MAX : (uint64_t)all);
            p->min_ns = UINT64_MAX; /* not known: shown as "-" (min > max, kt__no_range) */
            p->max_ns = 0;
        }
        snprintf(labels[n++], KT__LAUNCH_LABEL, "none");
    }
    return n;
}

/* ---------------------------------------------------------------------------------------------------
 * Cells
 * ------------------------------------------------------------------------------------------------- */

/* `us`: the microsecond unit as kt__unit_us() gives it, read once by the caller of many cells (NULL: read here
 * when needed; it reads the locale's variables). `nearest`: the rounding mode is the default (fixed.h; else
 * printf formats, in the mode set). */
static void format_duration_us(char *buf, size_t size, double ns, const char *us, int nearest)
{
    static const struct {
        const char *unit; /* suffix */
        double scale;     /* ns per unit */
    } kUnits[] = {{"ns", 1.0}, {NULL, 1e3}, {"ms", 1e6}, {"s", 1e9}}; /* NULL: the microsecond unit */
    if (!isfinite(ns) || ns < 0.0) {
        snprintf(buf, size, "-");
        return;
    }
    if (ns < 999.5) {
        if (!nearest || !kt__fmt_append(buf, size, kt__fmt_fixed(buf, size, ns, 0), " ns"))
            snprintf(buf, size, "%.0f ns", ns);
        return;
    }
    /* four significant digits in the largest unit that keeps at least 1 before the point */
    for (size_t u = 1; u < sizeof kUnits / sizeof kUnits[0]; u++) {
        double v = ns / kUnits[u].scale;
        int dec = v < 9.9995 ? 3 : v < 99.995 ? 2 : v < 999.95 ? 1 : 0;
        if (dec == 0 && u + 1 < sizeof kUnits / sizeof kUnits[0])
            continue;
        const char *unit = kUnits[u].unit ? kUnits[u].unit : us ? us : kt__unit_us();
        size_t n = nearest ? kt__fmt_append(buf, size, kt__fmt_fixed(buf, size, v, dec), " ") : 0;
        if (!kt__fmt_append(buf, size, n, unit))
            snprintf(buf, size, "%.*f %s", dec, v, unit);
        return;
    }
}

void kt__format_duration(char *buf, size_t size, double ns)
{
    format_duration_us(buf, size, ns, NULL, fegetround() == FE_TONEAREST);
}

/* part as a percentage of whole, one decimal; "-" when whole is 0. */
static void format_share(char *buf, size_t size, uint64_t part, long double whole, int nearest)
{
    if (!(whole > 0.0L))
        snprintf(buf, size, "-");
    else {
        double v = (double)(100.0L * (long double)part / whole);
        if (nearest && v >= 0.0 && v < 0x1p-10 && size >= 5) /* "%.1f%%": a kernel among many (fixed.h starts at 2^-10) */
            memcpy(buf, "0.0%", 5);
        else if (!nearest || !kt__fmt_append(buf, size, kt__fmt_fixed(buf, size, v, 1), "%"))
            snprintf(buf, size, "%.1f%%", v);
    }
}

/* Column indices of the table. */
enum {
    C_N, C_TOTAL, C_SHARE, C_MEAN, C_STDDEV, C_MIN, C_P50, C_P90, C_P99, C_MAX, C_COUNT
};
static const char *const kHeads[C_COUNT] = {"n",   "total", "%",   "mean", "stddev",
                                            "min", "p50",   "p90", "p99",  "max"};

/* One formatted row: an entry's, or (--by-config) one of its launch configurations'. */
typedef struct text_row_t {
    size_t index;                /* the entry's index in the view (a configuration's row: its entry's) */
    char *name;                  /* escaped name (a configuration's row: its label, indented in text) */
    size_t name_cols;            /* its display width */
    int part;                    /* 1: a configuration's row of the entry above (e points at `sub`) */
    const struct text_row_t *part_of; /* that entry's row */
    kt_kernel_timing_t *sub;     /* that configuration's share, as an entry (name, backend, device the entry's) */
} text_row_t;

/* The entry row r shows: its own (made in *tmp when the view makes entries) or its configuration's share. */
static const kt_kernel_timing_t *row_entry(const kt__entry_view_t *v, const text_row_t *r, kt_kernel_timing_t *tmp)
{
    return r->part ? r->sub : kt__view_entry(v, r->index, tmp);
}

/* What formats a row's numbers: the total they are a share of and the microsecond unit (read once per table).
 * A row's cells are formatted when they are written (twice for text: widths, then the line), not kept: a
 * million-kernel report held ~250 bytes of cells per row. */
typedef struct cells_ctx_t {
    long double all_total;
    const char *us;
    int nearest; /* the default rounding mode: cells formatted without printf (fixed.h) */
} cells_ctx_t;

typedef char row_cells_t[C_COUNT][TIME_CELL];

static void row_cells(const kt_kernel_timing_t *e, const cells_ctx_t *x, row_cells_t cell)
{
    long double all_total = x->all_total;
    const char *us = x->us;
    int nearest = x->nearest;
    kt__fmt_u64(cell[C_N], TIME_CELL, e->dispatch_count);
    int none = e->dispatch_count == 0;
    format_duration_us(cell[C_TOTAL], TIME_CELL, none ? -1.0 : (double)e->total_ns, us, nearest);
    format_share(cell[C_SHARE], TIME_CELL, e->total_ns,
                 kt__entry_is_batch(e) || kt__entry_is_wait(e) ? 0.0L : all_total, nearest);
    format_duration_us(cell[C_MEAN], TIME_CELL, none ? -1.0 : e->mean_ns, us, nearest);
    format_duration_us(cell[C_STDDEV], TIME_CELL, e->dispatch_count < 2 ? -1.0 : e->stddev_ns, us, nearest);
    int no_range = none || kt__no_range(e); /* a remainder's: not known */
    format_duration_us(cell[C_MIN], TIME_CELL, no_range ? -1.0 : (double)e->min_ns, us, nearest);
    /* a percentile of 0 under a positive min is none at all (a version-1 file without percentiles): "-" */
    int no_pct = none || kt__no_pct(e) || /* a configuration's: not kept */
                 (e->min_ns > 0 && !e->p50_ns && !e->p90_ns && !e->p99_ns);
    format_duration_us(cell[C_P50], TIME_CELL, no_pct ? -1.0 : (double)e->p50_ns, us, nearest);
    format_duration_us(cell[C_P90], TIME_CELL, no_pct ? -1.0 : (double)e->p90_ns, us, nearest);
    format_duration_us(cell[C_P99], TIME_CELL, no_pct ? -1.0 : (double)e->p99_ns, us, nearest);
    format_duration_us(cell[C_MAX], TIME_CELL, no_range ? -1.0 : (double)e->max_ns, us, nearest);
}

static int is_host_device(const char *dev) { return !dev || !*dev || !strcmp(dev, "host"); }

static const char *backend_label(kt_backend_t b)
{
    const char *s = kt_backend_name(b);
    return s ? s : "?";
}

static void pad(FILE *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        fputc(' ', out);
}

static void write_right(FILE *out, const char *s, size_t width)
{
    size_t c = kt__text_cols(s);
    pad(out, c < width ? width - c : 0);
    fputs(s, out);
}

/* Writes name (escaped, `cols` wide) in exactly `width` columns: padded on the right, or shortened in the
 * middle as "head...tail". */
static void name_write(FILE *out, const char *name, size_t cols, size_t width)
{
    if (cols <= width) {
        fputs(name, out);
        pad(out, width - cols);
        return;
    }
    size_t keep = width - 3, head = (keep + 1) / 2, tail = keep - head, col = 0;
    const char *p = name;
    for (; *p; p++) { /* escaped text is valid UTF-8: count lead bytes */
        if (((unsigned char)*p & 0xC0u) != 0x80u) {
            if (col == head)
                break;
            col++;
        }
        fputc(*p, out);
    }
    fputs("...", out);
    for (; *p; p++)
        if (((unsigned char)*p & 0xC0u) != 0x80u && col++ >= cols - tail)
            break;
    fputs(p, out);
}

/* Bytes for people: "512 B", "12.50 KB", "3.000 GB" (decimal units, as bandwidths are quoted). */
static void format_bytes(char *buf, size_t size, double b)
{
    static const char *const kUnits[] = {"B", "KB", "MB", "GB", "TB", "PB"};
    size_t u = 0;
    while (b >= 999.95 && u + 1 < sizeof kUnits / sizeof kUnits[0]) {
        b /= 1000.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, size, "%.0f B", b);
    else
        snprintf(buf, size, "%.*f %s", b < 9.9995 ? 3 : b < 99.995 ? 2 : 1, b, kUnits[u]);
}

/* The notes that follow a row when they apply: bytes moved and bandwidth (transfers), error count with the
 * last error's name, drop counts with their reasons, spans not kept, then the device. */
static void row_notes(FILE *out, const kt_kernel_timing_t *e, unsigned esc, int with_device)
{
    if (e->bytes) {
        char b[32], bw[32];
        format_bytes(b, sizeof b, (double)e->bytes);
        fprintf(out, " bytes=%s", b);
        if (e->total_ns) {
            format_bytes(bw, sizeof bw, (double)e->bytes * 1e9 / (double)e->total_ns);
            fprintf(out, " (%s/s)", bw);
        }
    }
    if (e->errors) {
        fprintf(out, " errors=%" PRIu64, e->errors);
        if (e->last_error[0]) {
            fputs(" (last ", out);
            kt__escape_write(out, e->last_error, esc);
            fputc(')', out);
        }
    }
    if (e->dropped) {
        fprintf(out, " dropped=%" PRIu64, e->dropped);
        int first = 1;
        for (int r = 0; r < KT_DROP_REASON_COUNT; r++) {
            if (!e->dropped_by[r])
                continue;
            fprintf(out, "%s%s %" PRIu64, first ? " (" : ", ", kt_drop_reason_name((kt_drop_reason_t)r),
                    e->dropped_by[r]);
            first = 0;
        }
        if (!first)
            fputc(')', out);
    }
    if (e->spans_dropped)
        fprintf(out, esc == KT_ESC_MARKDOWN ? " spans\\_dropped=%" PRIu64 : " spans_dropped=%" PRIu64,
                e->spans_dropped);
    if (with_device && (e->backend != KT_BACKEND_CPU || !is_host_device(e->device))) {
        fputs(" on ", out);
        kt__escape_write(out, e->device, esc);
    }
}

/* The line about records whose kernel could not be interned (the kernel table was full); nothing when none. */
static void write_kernels_dropped(FILE *out, const kt_snapshot_t *snap, int markdown)
{
    if (snap->ended[0]) { /* a program that died before writing its snapshot (docs/run.md, "When the program dies") */
        fputs(markdown ? "\n**note:** the program ended (" : "[timing] note: the program ended (", out);
        kt__escape_write(out, snap->ended, markdown ? KT_ESC_MARKDOWN : KT_ESC_TEXT);
        fputs(") before writing its timings: these were recovered from its memory\n", out);
    }
    if (snap->names_truncated)
        fprintf(out, "%s%" PRIu64 " kernel name%s longer than 4,096 bytes, kept as %s first bytes and "
                     "\"...[truncated]\" (names_truncated)\n",
                markdown ? "\n**note:** " : "[timing] note: ", snap->names_truncated,
                snap->names_truncated == 1 ? " was" : "s were", snap->names_truncated == 1 ? "its" : "their");
    if (!snap->kernels_dropped)
        return;
    fprintf(out, "%s%" PRIu64 " record%s lost: the kernel table was full (%s)\n",
            markdown ? "\n**warning:** " : "[timing] warning: ", snap->kernels_dropped,
            snap->kernels_dropped == 1 ? "" : "s", markdown ? "kernels\\_dropped" : "kernels_dropped");
}

/* ---------------------------------------------------------------------------------------------------
 * Writers
 * ------------------------------------------------------------------------------------------------- */

/* Totals of one API's kernels or transfers in the per-API summary. */
typedef struct api_total_t {
    uint64_t entries;    /* kernels (or transfer commands) */
    uint64_t dispatches; /* their dispatches */
    uint64_t bytes;      /* bytes moved (transfers) */
    long double total;   /* their time, ns */
} api_total_t;

/* One row of the per-API block. */
static void api_row(FILE *out, const char *api, const char *kind, const api_total_t *t, long double all, int markdown,
                    int with_bandwidth)
{
    char total[TIME_CELL], share[TIME_CELL], moved[64] = "";
    kt__format_duration(total, TIME_CELL, (double)t->total);
    if (all > 0.0L)
        snprintf(share, sizeof share, "%.1f%%", (double)(100.0L * t->total / all));
    else
        snprintf(share, sizeof share, "-");
    if (t->bytes) {
        char b[32], bw[32] = "";
        format_bytes(b, sizeof b, (double)t->bytes);
        if (with_bandwidth && t->total > 0.0L)
            format_bytes(bw, sizeof bw, (double)((long double)t->bytes * 1e9L / t->total));
        snprintf(moved, sizeof moved, "%s%s%s%s", b, bw[0] ? ", " : "", bw, bw[0] ? "/s" : "");
    }
    if (markdown) {
        fprintf(out, "| %s | %s | %" PRIu64 " | %" PRIu64 " | %s | %s | %s |\n", api, kind, t->entries, t->dispatches,
                total, share, moved);
        return;
    }
    fprintf(out, "[timing] %-8s %-9s %7" PRIu64 "  %10" PRIu64 "  ", api, kind, t->entries, t->dispatches);
    write_right(out, total, 9);
    fputs("  ", out);
    write_right(out, share, 6);
    if (moved[0])
        fprintf(out, "  %s", moved);
    fputc('\n', out);
}

/* The per-API block of the `ktiming run` summary: for each API that recorded something, its kernels and its
 * transfers (entries that moved bytes) and its submitted batches apart (Vulkan; a batch holds its dispatches, so it
 * has no share and is not in the sum) — how many, their dispatches, total time and share, bytes and
 * bandwidth — then the sum over everything. */
/* An OpenCL memory command (the interposer names each after its entry point: clEnqueueReadBuffer, ...SVMFree),
 * not a kernel; clEnqueueNativeKernel is one (a host function the device runs). */
static int is_cl_command(const kt_kernel_timing_t *e)
{
    return e->backend == KT_BACKEND_OPENCL && e->name && !strncmp(e->name, "clEnqueue", 9) &&
           strcmp(e->name, "clEnqueueNativeKernel") != 0;
}

/* Kinds of the per-API block, in the order printed. */
enum { K_KERNELS, K_TRANSFERS, K_MEMORY, K_BATCHES, K_WAITS, K_COUNT };

static void write_api_summary(FILE *out, const kt__entry_view_t *v, int markdown)
{
    api_total_t api[KT_BACKEND_COUNT + 1][K_COUNT], sum;
    memset(api, 0, sizeof api);
    memset(&sum, 0, sizeof sum);
    kt_kernel_timing_t scratch;
    for (size_t i = 0; i < v->count; i++) {
        const kt_kernel_timing_t *e = kt__view_entry(v, i, &scratch);
        size_t b = (unsigned)e->backend < KT_BACKEND_COUNT ? (size_t)e->backend : KT_BACKEND_COUNT;
        int batch = kt__entry_is_batch(e), wait = kt__entry_is_wait(e);
        /* a memory command that moved nothing (an unmap, an SVM free, a migration without content) is neither a
         * kernel nor a transfer */
        api_total_t *t = &api[b][wait              ? K_WAITS
                                 : batch           ? K_BATCHES
                                 : e->bytes > 0    ? K_TRANSFERS
                                 : is_cl_command(e) ? K_MEMORY
                                                   : K_KERNELS];
        t->entries++;
        t->dispatches += e->dispatch_count;
        t->bytes += e->bytes;
        t->total += (long double)e->total_ns;
        if (batch || wait) /* batches hold their dispatches' time, waits overlap it: neither is added again */
            continue;
        sum.entries++;
        sum.dispatches += e->dispatch_count;
        sum.bytes += e->bytes;
        sum.total += (long double)e->total_ns;
    }
    if (markdown)
        fputs("| API | what | count | dispatches | total | % | moved |\n|---|---|---:|---:|---:|---:|---|\n", out);
    else
        fputs("[timing] API      what        count  dispatches      total       %\n", out);
    /* waits: host API time, count = API functions, dispatches = calls; time the program waited on the GPU */
    static const char *const kinds[K_COUNT] = {"kernels", "transfers", "memory", "batches", "waits"};
    for (size_t b = 0; b <= KT_BACKEND_COUNT; b++)
        for (int k = 0; k < K_COUNT; k++)
            if (api[b][k].entries)
                api_row(out, b < KT_BACKEND_COUNT ? backend_label((kt_backend_t)b) : "?", kinds[k], &api[b][k],
                        k >= K_BATCHES ? 0.0L : sum.total, markdown, 1);
    api_row(out, markdown ? "**all**" : "all", "", &sum, sum.total, markdown, 0); /* time not all spent moving */
    const api_total_t *w = &api[KT_BACKEND_HOST_API][K_WAITS];
    if (w->entries) {
        char t[TIME_CELL];
        kt__format_duration(t, TIME_CELL, (double)w->total);
        const char *calls = w->dispatches == 1 ? "call" : "calls";
        fprintf(out,
                markdown ? "\nThe program's threads waited on the GPU for **%s** in %" PRIu64
                           " %s (host-api waits; this time overlaps the kernels').\n"
                         : "[timing] the program's threads waited on the GPU for %s in %" PRIu64
                           " %s (host-api waits, overlapping the kernels' time)\n",
                t, w->dispatches, calls);
    }
    if (markdown)
        fputc('\n', out);
}

/* The text table's column widths: the widest name (up to NAME_MAX_COLS), backend and cell of its rows. */
typedef struct widths_t {
    size_t name, backend, cell[C_COUNT];
} widths_t;

static void widths_init(widths_t *w)
{
    w->name = NAME_MIN_COLS;
    w->backend = strlen("backend");
    for (size_t c = 0; c < C_COUNT; c++)
        w->cell[c] = strlen(kHeads[c]);
}

/* Widens w for row r showing entry e: done as each row is made, while its entry is at hand, not in a pass of its
 * own (a million rows read in their sorted order are a million reads all over the entries, and as many cells). */
static void widths_add(widths_t *w, const text_row_t *r, const kt_kernel_timing_t *e, const cells_ctx_t *x)
{
    row_cells_t cell;
    size_t cap = r->part ? NAME_MAX_COLS + 24 : NAME_MAX_COLS; /* a label is read whole */
    size_t nc = r->name_cols > cap ? cap : r->name_cols;
    if (nc > w->name)
        w->name = nc;
    size_t bl = strlen(backend_label(e->backend));
    if (bl > w->backend)
        w->backend = bl;
    row_cells(e, x, cell);
    for (size_t c = 0; c < C_COUNT; c++) {
        size_t cc = kt__text_cols(cell[c]);
        if (cc > w->cell[c])
            w->cell[c] = cc;
    }
}

/* Whether row_notes writes anything for e. */
static int has_notes(const kt_kernel_timing_t *e, int with_device)
{
    return e->bytes || e->errors || e->dropped || e->spans_dropped ||
           (with_device && (e->backend != KT_BACKEND_CPU || !is_host_device(e->device)));
}

/* The text table's rows are put together here and written a buffer at a time, not by some 35 stdio calls a row
 * (fputs, fputc per pad, fprintf): those were a tenth of a million-kernel report. */
typedef struct line_buf_t {
    FILE *out;
    size_t len;
    char b[16384];
} line_buf_t;

static void lb_flush(line_buf_t *l)
{
    if (l->len)
        fwrite(l->b, 1, l->len, l->out);
    l->len = 0;
}

static void lb_put(line_buf_t *l, const char *s, size_t n)
{
    if (n > sizeof l->b - l->len) {
        lb_flush(l);
        if (n > sizeof l->b) {
            fwrite(s, 1, n, l->out);
            return;
        }
    }
    memcpy(l->b + l->len, s, n);
    l->len += n;
}

static void lb_pad(line_buf_t *l, size_t n)
{
    static const char kSpaces[] = "                                ";
    while (n) {
        size_t k = n < sizeof kSpaces - 1 ? n : sizeof kSpaces - 1;
        lb_put(l, kSpaces, k);
        n -= k;
    }
}

/* write_right's bytes: s right-aligned in width columns. */
static void lb_right(line_buf_t *l, const char *s, size_t width)
{
    size_t c = kt__text_cols(s);
    lb_pad(l, c < width ? width - c : 0);
    lb_put(l, s, strlen(s));
}

static void write_text(FILE *out, text_row_t *rows, size_t n, const kt__entry_view_t *v, size_t shown,
                       const cells_ctx_t *x, const widths_t *wd)
{
    row_cells_t cell;
    kt_kernel_timing_t scratch;
    size_t name_cols = wd->name, backend_cols = wd->backend;
    const size_t *w = wd->cell;
    fputs("[timing] ", out);
    name_write(out, "kernel", 6, name_cols);
    fprintf(out, " %-*s", (int)backend_cols, "backend");
    for (size_t c = 0; c < C_COUNT; c++) {
        fputs("  ", out);
        write_right(out, kHeads[c], w[c]);
    }
    fputc('\n', out);
    line_buf_t *l = malloc(sizeof *l);
    if (l) {
        l->out = out;
        l->len = 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (i + KT__VIEW_AHEAD < n)
            kt__view_prefetch(v, rows[i + KT__VIEW_AHEAD].index);
        const kt_kernel_timing_t *e = row_entry(v, &rows[i], &scratch);
        row_cells(e, x, cell);
        if (!l) { /* no buffer: the same bytes, a call at a time */
            fputs("[timing] ", out);
            name_write(out, rows[i].name, rows[i].name_cols, name_cols);
            fprintf(out, " %-*s", (int)backend_cols, rows[i].part ? "" : backend_label(e->backend));
            for (size_t c = 0; c < C_COUNT; c++) {
                fputs("  ", out);
                write_right(out, cell[c], w[c]);
            }
            if (!rows[i].part)
                row_notes(out, e, KT_ESC_TEXT, 1);
            fputc('\n', out);
            continue;
        }
        lb_put(l, "[timing] ", 9);
        if (rows[i].name_cols <= name_cols) {
            lb_put(l, rows[i].name, strlen(rows[i].name));
            lb_pad(l, name_cols - rows[i].name_cols);
        } else {
            lb_flush(l);
            name_write(out, rows[i].name, rows[i].name_cols, name_cols);
        }
        const char *bl = rows[i].part ? "" : backend_label(e->backend);
        size_t bn = strlen(bl);
        lb_put(l, " ", 1);
        lb_put(l, bl, bn);
        lb_pad(l, bn < backend_cols ? backend_cols - bn : 0);
        for (size_t c = 0; c < C_COUNT; c++) {
            lb_put(l, "  ", 2);
            lb_right(l, cell[c], w[c]);
        }
        if (!rows[i].part && has_notes(e, 1)) {
            lb_flush(l);
            row_notes(out, e, KT_ESC_TEXT, 1);
        }
        lb_put(l, "\n", 1);
    }
    if (l)
        lb_flush(l);
    free(l);
    if (shown < v->count)
        fprintf(out, "[timing] %zu of %zu kernels shown (filter)\n", shown, v->count);
}

static void write_markdown(FILE *out, text_row_t *rows, size_t n, const kt__entry_view_t *v, const cells_ctx_t *x)
{
    row_cells_t cell;
    kt_kernel_timing_t scratch;
    fputs("| kernel | backend | device", out);
    for (size_t c = 0; c < C_COUNT; c++)
        fprintf(out, " | %s", kHeads[c]);
    fputs(" | notes |\n|---|---|---", out);
    for (size_t c = 0; c < C_COUNT; c++)
        fputs("|---:", out);
    fputs("|---|\n", out);
    for (size_t i = 0; i < n; i++) {
        if (i + KT__VIEW_AHEAD < n)
            kt__view_prefetch(v, rows[i + KT__VIEW_AHEAD].index);
        const kt_kernel_timing_t *e = row_entry(v, &rows[i], &scratch);
        fputs("| ", out);
        fputs(rows[i].name, out);
        fprintf(out, " | %s | ", backend_label(e->backend));
        kt__escape_write(out, e->device, KT_ESC_MARKDOWN);
        row_cells(e, x, cell);
        for (size_t c = 0; c < C_COUNT; c++)
            fprintf(out, " | %s", cell[c]);
        fputs(" |", out);
        if (!rows[i].part)
            row_notes(out, e, KT_ESC_MARKDOWN, 0);
        fputs(" |\n", out);
    }
}

/* Whether another entry of the snapshot has the (name, backend) of e, entry i, on another device (entries are
 * sorted by name, backend, device: such entries are e's neighbours). */
static int on_several_devices(const kt__entry_view_t *v, size_t i, const kt_kernel_timing_t *e)
{
    kt_kernel_timing_t scratch;
    for (int k = 0; k < 2; k++) {
        if (k == 0 ? i == 0 : i + 1 >= v->count)
            continue;
        const kt_kernel_timing_t *n = kt__view_entry(v, k == 0 ? i - 1 : i + 1, &scratch);
        if (n->backend == e->backend && !strcmp(n->name, e->name))
            return 1;
    }
    return 0;
}

/* The seed's one-line-per-kernel format: milliseconds with two decimals, no table header; no device, except for a
 * kernel that ran on several devices (" dev=<label>", so each line stays one kernel on one device). */
static void write_lines(FILE *out, text_row_t *rows, size_t n, const kt__entry_view_t *v)
{
    kt_kernel_timing_t scratch, kernel;
    for (size_t i = 0; i < n; i++) {
        if (i + KT__VIEW_AHEAD < n)
            kt__view_prefetch(v, rows[i + KT__VIEW_AHEAD].index);
        const kt_kernel_timing_t *e = row_entry(v, &rows[i], &scratch);
        const text_row_t *k = rows[i].part ? rows[i].part_of : &rows[i]; /* the kernel's name */
        int no_range = kt__no_range(e);
        fputs("[timing] ", out);
        name_write(out, k->name, k->name_cols, 20);
        char lo[32] = "      -", hi[32] = "      -"; /* a remainder's range is not known */
        if (!no_range) {
            snprintf(lo, sizeof lo, "%7.2f", (double)e->min_ns / 1e6);
            snprintf(hi, sizeof hi, "%7.2f", (double)e->max_ns / 1e6);
        }
        fprintf(out, " %-5s avg=%7.2fms min=%sms max=%sms n=%llu", backend_label(e->backend), e->mean_ns / 1e6, lo,
                hi, (unsigned long long)e->dispatch_count);
        if (e->device && on_several_devices(v, k->index, kt__view_entry(v, k->index, &kernel))) {
            fputs(" dev=", out);
            kt__escape_write(out, e->device, KT_ESC_TEXT);
        }
        if (rows[i].part)
            fprintf(out, " %s", rows[i].name + 2);
        fputc('\n', out);
    }
}

/* After entry row k (rows[*w - 1]): a row per launch configuration of its entry and one for the dispatches that
 * carried none (kt__config_parts), each named by its label: indented in text and lines, "kernel [label]" in
 * markdown. 0 or KT_ENOMEM. */
static int config_rows(text_row_t *rows, size_t *w, const text_row_t *k, const kt_kernel_timing_t *e, int markdown)
{
    kt_kernel_timing_t parts[KT_LAUNCH_CONFIGS_MAX + 2];
    char labels[KT_LAUNCH_CONFIGS_MAX + 2][KT__LAUNCH_LABEL];
    uint32_t np = kt__config_parts(e, parts, labels);
    for (uint32_t j = 0; j < np && j < e->config_count + 1u; j++) {
        text_row_t *r = &rows[(*w)++];
        r->index = k->index;
        r->part = 1;
        r->part_of = k;
        if (!(r->sub = malloc(sizeof *r->sub)))
            return KT_ENOMEM;
        *r->sub = parts[j];
        size_t len = strlen(k->name) + strlen(labels[j]) + 4;
        if (!(r->name = malloc(len)))
            return KT_ENOMEM;
        if (markdown)
            snprintf(r->name, len, "%s [%s]", k->name, labels[j]);
        else
            snprintf(r->name, len, "  %s", labels[j]);
        r->name_cols = markdown ? k->name_cols + strlen(labels[j]) + 3 : strlen(labels[j]) + 2;
    }
    return 0;
}

/* The three shapes export_table writes. */
enum { TABLE_TEXT, TABLE_MARKDOWN, TABLE_LINES };

static int export_table(FILE *out, const kt_snapshot_t *snap, const kt__entry_view_t *v,
                        const kt_report_opts_t *opts, int shape)
{
    int markdown = shape == TABLE_MARKDOWN;
    if (v->count && !v->entries && !v->get)
        return KT_EINVAL;
    if (v->count == 0 && !markdown) {
        fputs("[timing] no kernels recorded\n", out);
        write_kernels_dropped(out, snap, 0);
        return ferror(out) ? KT_EIO : 0;
    }
    size_t *idx = NULL, n = 0;
    int rc = kt__report_rows(v, opts, &idx, &n);
    if (rc)
        return rc;
    int by_config = opts && opts->by_config;
    size_t nrows = n;
    kt_kernel_timing_t scratch;
    for (size_t i = 0; by_config && i < n; i++) { /* an entry's configurations and its "none" rest */
        const kt_kernel_timing_t *e = kt__view_entry(v, idx[i], &scratch);
        nrows += e->configs ? e->config_count + 1u : 0;
    }
    text_row_t *rows = calloc(nrows ? nrows : 1, sizeof *rows);
    if (!rows) {
        free(idx);
        return KT_ENOMEM;
    }
    long double all_total = 0.0L;
    for (size_t i = 0; i < v->count; i++) {
        const kt_kernel_timing_t *e = kt__view_entry(v, i, &scratch);
        if (!kt__entry_is_batch(e) && !kt__entry_is_wait(e)) /* overlap kernels */
            all_total += (long double)e->total_ns;
    }
    size_t w = 0;
    /* the locale's variables and the rounding mode read once per table, not per cell */
    cells_ctx_t x = {all_total, kt__unit_us(), fegetround() == FE_TONEAREST};
    widths_t widths;
    widths_init(&widths);
    for (size_t i = 0; i < n && !rc; i++) {
        text_row_t *r = &rows[w++];
        if (i + KT__VIEW_AHEAD < n)
            kt__view_prefetch(v, idx[i + KT__VIEW_AHEAD]);
        r->index = idx[i];
        const kt_kernel_timing_t *e = kt__view_entry(v, idx[i], &scratch);
        r->name = kt__escape(e->name, SIZE_MAX, markdown ? KT_ESC_MARKDOWN : KT_ESC_TEXT, &r->name_cols);
        if (!r->name) {
            rc = KT_ENOMEM;
            break;
        }
        if (by_config && e->configs && e->config_count)
            rc = config_rows(rows, &w, r, e, markdown);
        for (size_t k = (size_t)(r - rows); shape == TABLE_TEXT && !rc && k < w; k++)
            widths_add(&widths, &rows[k], rows[k].part ? rows[k].sub : e, &x);
    }
    size_t shown = n;
    n = w;
    if (!rc && shape != TABLE_LINES && opts && opts->by_api)
        write_api_summary(out, v, markdown);
    if (!rc) {
        if (shape == TABLE_LINES)
            write_lines(out, rows, n, v);
        else if (markdown)
            write_markdown(out, rows, n, v, &x);
        else
            write_text(out, rows, n, v, shown, &x, &widths);
        write_kernels_dropped(out, snap, markdown);
    }
    for (size_t i = 0; i < n; i++) {
        free(rows[i].name);
        free(rows[i].sub);
    }
    free(rows);
    free(idx);
    if (!rc && ferror(out))
        rc = KT_EIO;
    return rc;
}

int kt__export_text(FILE *out, const kt_snapshot_t *snap, const kt__entry_view_t *v, const kt_report_opts_t *opts)
{
    return export_table(out, snap, v, opts, TABLE_TEXT);
}

int kt__export_markdown(FILE *out, const kt_snapshot_t *snap, const kt__entry_view_t *v,
                        const kt_report_opts_t *opts)
{
    return export_table(out, snap, v, opts, TABLE_MARKDOWN);
}

int kt__export_lines(FILE *out, const kt_snapshot_t *snap, const kt__entry_view_t *v, const kt_report_opts_t *opts)
{
    return export_table(out, snap, v, opts, TABLE_LINES);
}
