/* chrome.c — Chrome trace / Perfetto JSON exporter: host-thread and device-queue tracks, flows enqueue → run.
 *
 * Layout: process 1 is the host, one thread track per host thread (its CPU spans and one "enqueue <kernel>"
 * slice per device dispatch it enqueued, from the enqueue call to the device's QUEUED stamp). Each
 * (backend, device) is a process with one thread track per queue carrying the device spans, placed on the host
 * timeline (CLOCK_MONOTONIC_RAW), with the placement error bound and stage delays in their args. A v1 flow
 * ("s" inside the enqueue slice, "f" with "bp":"e" inside the device span, same "id") draws the arrow.
 * Slices on one track must nest for trace viewers; spans that overlap without nesting (out-of-order queues,
 * concurrent records) are moved to extra lanes of the same track ("queue X · lane 2"), never dropped.
 * Times are microseconds written with three decimals: exact nanoseconds.
 */
#include "core/device_label.h"
#include "export/trace_json.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------
 * Tracks and lanes
 * ------------------------------------------------------------------------------------------------- */

/* What a slice on a track stands for. */
enum { ITEM_SPAN = 0, ITEM_ENQUEUE = 1 };

/* One slice to place on a track. */
typedef struct tl_item_t {
    uint64_t start; /* host ns */
    uint64_t end;   /* host ns, >= start */
    uint32_t span;  /* index into snap->spans */
    uint32_t kind;  /* ITEM_SPAN or ITEM_ENQUEUE */
    uint32_t lane;  /* assigned lane, from 0 */
} tl_item_t;

/* A growable stack of slice end times: the open slices of one lane. */
typedef struct tl_stack_t {
    uint64_t *ends; /* open slice ends, innermost last */
    size_t n;       /* open slices */
    size_t cap;     /* allocated */
} tl_stack_t;

/* One track: a host thread or a device queue, possibly split into lanes. */
typedef struct tl_track_t {
    tl_item_t *items; /* slices, sorted by start once laid out */
    size_t n;         /* slices */
    size_t cap;       /* allocated */
    uint32_t lanes;   /* lanes used (>= 1 when n > 0) */
    uint32_t pid;     /* trace process */
    uint32_t tid;     /* trace thread id of lane 0; lane k is tid + k */
} tl_track_t;

static int track_push(tl_track_t *t, uint64_t start, uint64_t end, uint32_t span, uint32_t kind)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        tl_item_t *p = realloc(t->items, cap * sizeof *p);
        if (!p)
            return KT_ENOMEM;
        t->items = p;
        t->cap = cap;
    }
    t->items[t->n++] = (tl_item_t){start, end < start ? start : end, span, kind, 0};
    return 0;
}

static int item_cmp(const void *a, const void *b)
{
    const tl_item_t *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->end != y->end) /* the longer one first, so the shorter nests inside it */
        return x->end > y->end ? -1 : 1;
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    return x->span < y->span ? -1 : (x->span > y->span);
}

/* Sorts the track's slices and gives each the first lane where it nests inside the open slices or starts
 * after them. */
static int track_layout(tl_track_t *t)
{
    tl_stack_t *lanes = NULL;
    size_t nlanes = 0;
    int rc = 0;
    t->lanes = 1;
    if (t->n == 0)
        return 0;
    qsort(t->items, t->n, sizeof *t->items, item_cmp);
    for (size_t i = 0; i < t->n && rc == 0; i++) {
        tl_item_t *it = &t->items[i];
        size_t l;
        for (l = 0; l < nlanes; l++) {
            tl_stack_t *s = &lanes[l];
            while (s->n && s->ends[s->n - 1] <= it->start)
                s->n--;
            if (s->n == 0 || s->ends[s->n - 1] >= it->end)
                break;
        }
        if (l == nlanes) {
            tl_stack_t *p = realloc(lanes, (nlanes + 1) * sizeof *p);
            if (!p) {
                rc = KT_ENOMEM;
                break;
            }
            lanes = p;
            lanes[nlanes++] = (tl_stack_t){NULL, 0, 0};
        }
        tl_stack_t *s = &lanes[l];
        if (s->n == s->cap) {
            size_t cap = s->cap ? s->cap * 2 : 8;
            uint64_t *p = realloc(s->ends, cap * sizeof *p);
            if (!p) {
                rc = KT_ENOMEM;
                break;
            }
            s->ends = p;
            s->cap = cap;
        }
        s->ends[s->n++] = it->end;
        it->lane = (uint32_t)l;
    }
    t->lanes = (uint32_t)(nlanes ? nlanes : 1);
    for (size_t l = 0; l < nlanes; l++)
        free(lanes[l].ends);
    free(lanes);
    return rc;
}

/* ---------------------------------------------------------------------------------------------------
 * Writing events
 * ------------------------------------------------------------------------------------------------- */

/* Comma-separating event writer. */
typedef struct tl_writer_t {
    FILE *out;   /* destination */
    int first;   /* no event written yet */
} tl_writer_t;

static void ev_open(tl_writer_t *w)
{
    fputs(w->first ? "\n" : ",\n", w->out);
    w->first = 0;
}

static void ev_meta_name(tl_writer_t *w, const char *what, uint32_t pid, uint32_t tid, const char *name)
{
    ev_open(w);
    fprintf(w->out, "{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%" PRIu32 ",\"tid\":%" PRIu32 ",\"args\":{\"name\":",
            what, pid, tid);
    kt__trace_json_string(w->out, name);
    fputs("}}", w->out);
}

static void ev_meta_sort(tl_writer_t *w, const char *what, uint32_t pid, uint32_t tid, uint32_t index)
{
    ev_open(w);
    fprintf(w->out,
            "{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%" PRIu32 ",\"tid\":%" PRIu32
            ",\"args\":{\"sort_index\":%" PRIu32 "}}",
            what, pid, tid, index);
}

static const char *entry_name(const kt_snapshot_t *snap, const kt_span_t *sp)
{
    return sp->entry < snap->count && snap->entries[sp->entry].name ? snap->entries[sp->entry].name : "?";
}

static void write_u64_arg(FILE *out, const char *key, uint64_t v)
{
    fprintf(out, ",\"%s\":%" PRIu64, key, v);
}

/* Delay b - a when both stamps are known and in order. */
static int stage(uint64_t a, uint64_t b, uint64_t *out)
{
    if (!a || !b || b < a)
        return 0;
    *out = b - a;
    return 1;
}

static void ev_slice(tl_writer_t *w, const kt_snapshot_t *snap, const tl_track_t *t, const tl_item_t *it)
{
    const kt_span_t *sp = &snap->spans[it->span];
    const kt_kernel_timing_t *e = sp->entry < snap->count ? &snap->entries[sp->entry] : NULL;
    FILE *out = w->out;
    uint64_t d;
    ev_open(w);
    fputs("{\"ph\":\"X\",\"name\":", out);
    if (it->kind == ITEM_ENQUEUE) {
        fputs("\"enqueue ", out);
        kt__trace_json_chars(out, entry_name(snap, sp));
        fputs("\",\"cat\":\"enqueue\"", out);
    } else {
        kt__trace_json_string(out, entry_name(snap, sp));
        fputs(",\"cat\":", out);
        kt__trace_json_string(out, e ? kt_backend_name(e->backend) : "?");
    }
    fprintf(out, ",\"pid\":%" PRIu32 ",\"tid\":%" PRIu32 ",\"ts\":", t->pid, t->tid + it->lane);
    kt__trace_json_us(out, it->start);
    fputs(",\"dur\":", out);
    kt__trace_json_us(out, it->end - it->start);
    fputs(",\"args\":{\"kernel\":", out);
    kt__trace_json_string(out, entry_name(snap, sp));
    if (it->kind == ITEM_ENQUEUE) {
        fputs(",\"queue\":", out);
        kt__trace_json_string(out, sp->queue < snap->queue_count ? snap->queues[sp->queue].label : "?");
        if (stage(sp->enqueue_ns, sp->start_ns, &d))
            write_u64_arg(out, "enqueue_to_start_ns", d);
        fputs("}}", out);
        return;
    }
    if (e) {
        fputs(",\"device\":", out);
        kt__trace_json_string(out, e->device);
    }
    write_u64_arg(out, "duration_ns", sp->duration_ns);
    if (sp->flags & KT_SPAN_DEVICE)
        write_u64_arg(out, "uncertainty_ns", sp->uncertainty_ns);
    if (stage(sp->enqueue_ns, sp->queued_ns, &d))
        write_u64_arg(out, "enqueue_to_queued_ns", d);
    if (stage(sp->queued_ns, sp->submit_ns, &d))
        write_u64_arg(out, "queued_to_submit_ns", d);
    if (stage(sp->submit_ns, sp->start_ns, &d))
        write_u64_arg(out, "submit_to_start_ns", d);
    if (stage(sp->enqueue_ns, sp->start_ns, &d))
        write_u64_arg(out, "enqueue_to_start_ns", d);
    if (sp->flags & KT_SPAN_HOST_TIMED)
        fputs(",\"host_timed\":true", out);
    if (sp->flags & KT_SPAN_ERROR)
        fputs(",\"error\":true", out);
    if (sp->flags & KT_SPAN_TRIALS)
        fputs(",\"trial\":true", out);
    fputs("}}", out);
}

/* Flow events sit in the middle of their slice, so they bind to it whatever order a viewer sorts ties in. */
static uint64_t mid(const tl_item_t *it)
{
    return it->start + (it->end - it->start) / 2;
}

static void ev_flow(tl_writer_t *w, char ph, uint32_t id, uint32_t pid, uint32_t tid, uint64_t ts)
{
    ev_open(w);
    fprintf(w->out,
            "{\"ph\":\"%c\",\"name\":\"dispatch\",\"cat\":\"flow\",\"id\":%" PRIu32 ",\"pid\":%" PRIu32
            ",\"tid\":%" PRIu32 ",\"ts\":",
            ph, id, pid, tid);
    kt__trace_json_us(w->out, ts);
    fputs(ph == 'f' ? ",\"bp\":\"e\"}" : "}", w->out);
}

/* ---------------------------------------------------------------------------------------------------
 * The exporter
 * ------------------------------------------------------------------------------------------------- */

/* A device process: the queues of one (backend, device). */
typedef struct tl_proc_t {
    uint32_t source;      /* source (kt_snapshot_t.sources) whose queues these are; 0 without sources */
    kt_backend_t backend; /* API */
    const char *device;   /* device name (borrowed from the snapshot) */
    uint32_t pid;         /* trace process id */
    uint32_t next_tid;    /* next free thread id in it */
} tl_proc_t;

static const kt_device_info_t *find_device(const kt_snapshot_t *snap, kt_backend_t backend, const char *name)
{
    return kt__device_lookup(snap->devices, snap->devices ? snap->device_count : 0, backend, name);
}

static void lane_name(char *buf, size_t size, const char *base, uint32_t lane)
{
    if (lane == 0)
        snprintf(buf, size, "%s", base);
    else
        snprintf(buf, size, "%s \xc2\xb7 lane %" PRIu32, base, lane + 1);
}

static int build_tracks(const kt_snapshot_t *snap, tl_track_t *threads, tl_track_t *queues, uint64_t *unplaced)
{
    for (size_t i = 0; i < snap->span_count; i++) {
        const kt_span_t *sp = &snap->spans[i];
        uint64_t start = sp->start_ns, end = sp->end_ns;
        if (!start) {
            (*unplaced)++;
            continue;
        }
        if (end < start || !end)
            end = start + sp->duration_ns;
        size_t th = sp->thread < snap->thread_count ? sp->thread : snap->thread_count;
        int rc;
        if (sp->queue == UINT32_MAX) {
            rc = track_push(&threads[th], start, end, (uint32_t)i, ITEM_SPAN);
        } else {
            size_t q = sp->queue < snap->queue_count ? sp->queue : snap->queue_count;
            rc = track_push(&queues[q], start, end, (uint32_t)i, ITEM_SPAN);
            if (rc == 0 && sp->enqueue_ns) {
                uint64_t eend = sp->queued_ns > sp->enqueue_ns ? sp->queued_ns : sp->enqueue_ns + 1;
                if (eend > start && start > sp->enqueue_ns)
                    eend = start;
                rc = track_push(&threads[th], sp->enqueue_ns, eend, (uint32_t)i, ITEM_ENQUEUE);
            }
        }
        if (rc)
            return rc;
    }
    return 0;
}

/* The timeline's tracks: host threads and device queues (each +1 for spans naming no known track), and the
 * device process groups the queues are gathered into. */
typedef struct tl_layout_t {
    tl_track_t *threads, *queues;
    size_t nth, nq;
    tl_proc_t *procs;
    size_t nprocs;
} tl_layout_t;

/* Thread ids: host threads in snapshot order, each lane its own id, one host process group per source (a merged
 * snapshot: pid 1 + source); device queues grouped by (source, backend, device), their groups after those. */
static void assign_ids(const kt_snapshot_t *snap, tl_layout_t *L)
{
    uint32_t nsrc = snap->source_count ? (uint32_t)snap->source_count : 1, tid = 1;
    for (size_t i = 0; i < L->nth; i++) {
        L->threads[i].pid = 1 + (i < snap->thread_count && snap->source_count ? snap->threads[i].source : 0);
        L->threads[i].tid = tid;
        if (L->threads[i].n)
            tid += L->threads[i].lanes;
    }
    for (size_t q = 0; q < L->nq; q++) {
        if (!L->queues[q].n)
            continue;
        kt_backend_t be = q < snap->queue_count ? snap->queues[q].backend : KT_BACKEND_COUNT;
        const char *dev = q < snap->queue_count ? snap->queues[q].device : "unknown device";
        uint32_t src = q < snap->queue_count && snap->source_count ? snap->queues[q].source : 0;
        size_t p;
        for (p = 0; p < L->nprocs; p++)
            if (L->procs[p].source == src && L->procs[p].backend == be && !strcmp(L->procs[p].device, dev))
                break;
        if (p == L->nprocs)
            L->procs[L->nprocs++] = (tl_proc_t){src, be, dev, (uint32_t)(1 + nsrc + p), 1};
        L->queues[q].pid = L->procs[p].pid;
        L->queues[q].tid = L->procs[p].next_tid;
        L->procs[p].next_tid += L->queues[q].lanes;
    }
}

static void write_header(FILE *out, const kt_snapshot_t *snap, uint64_t unplaced)
{
    uint64_t spans_dropped = 0;
    for (size_t i = 0; i < snap->count; i++)
        spans_dropped += snap->entries[i].spans_dropped;
    fputs("{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"ktiming ", out);
    fputs(kt_version(), out);
    fputs("\",\"host\":", out);
    kt__trace_json_string(out, snap->host);
    fprintf(out,
            ",\"clock\":\"CLOCK_MONOTONIC_RAW\",\"taken_ns\":%" PRIu64 ",\"spans\":%zu,\"spans_dropped\":%" PRIu64
            ",\"spans_unplaced\":%" PRIu64 "},\n\"traceEvents\":[",
            snap->taken_ns, snap->span_count, spans_dropped, unplaced);
}

/* One host process group per source ("rank 2: host node07 pid 4242 (clock +12 ns ± 3 ns)"), or one for the
 * host. */
static void write_host_groups(tl_writer_t *w, const kt_snapshot_t *snap)
{
    char base[256];
    if (!snap->source_count) {
        snprintf(base, sizeof base, "host %s", snap->host[0] ? snap->host : "");
        ev_meta_name(w, "process_name", 1, 0, base);
        ev_meta_sort(w, "process_sort_index", 1, 0, 0);
    }
    for (uint32_t so = 0; so < snap->source_count; so++) {
        const kt_source_info_t *si = &snap->sources[so];
        int k = si->rank >= 0
                    ? snprintf(base, sizeof base, "rank %" PRId32 ": host %s pid %" PRId64, si->rank, si->host, si->pid)
                    : snprintf(base, sizeof base, "host %s pid %" PRId64, si->host, si->pid);
        if (k > 0 && (size_t)k < sizeof base) {
            if (si->offset_bound_ns == UINT64_MAX)
                snprintf(base + k, sizeof base - (size_t)k, " (own clock)");
            else if (si->offset_ns || si->offset_bound_ns)
                snprintf(base + k, sizeof base - (size_t)k, " (clock %+" PRId64 " ns \xc2\xb1 %" PRIu64 " ns)",
                         si->offset_ns, si->offset_bound_ns);
        }
        ev_meta_name(w, "process_name", 1 + so, 0, base);
        ev_meta_sort(w, "process_sort_index", 1 + so, 0, so);
    }
}

/* A track's lanes named "base", "base (2)", ... in their order. */
static void write_lane_names(tl_writer_t *w, const tl_track_t *t, const char *base)
{
    char name[300];
    for (uint32_t l = 0; l < t->lanes; l++) {
        lane_name(name, sizeof name, base, l);
        ev_meta_name(w, "thread_name", t->pid, t->tid + l, name);
        ev_meta_sort(w, "thread_sort_index", t->pid, t->tid + l, t->tid + l);
    }
}

static void write_thread_names(tl_writer_t *w, const kt_snapshot_t *snap, const tl_layout_t *L)
{
    char base[256];
    for (size_t i = 0; i < L->nth; i++) {
        if (!L->threads[i].n)
            continue;
        if (i < snap->thread_count) {
            const kt_thread_info_t *ti = &snap->threads[i];
            if (ti->name[0])
                snprintf(base, sizeof base, "%s (tid %" PRIu64 ")", ti->name, ti->os_tid);
            else
                snprintf(base, sizeof base, "thread %zu (tid %" PRIu64 ")", i + 1, ti->os_tid);
        } else {
            snprintf(base, sizeof base, "unknown thread");
        }
        write_lane_names(w, &L->threads[i], base);
    }
}

/* Device process groups ("rank 2: OpenCL <device>"), labelled with their clock and error bound. */
static void write_device_groups(tl_writer_t *w, const kt_snapshot_t *snap, const tl_layout_t *L)
{
    char base[512];
    for (size_t p = 0; p < L->nprocs; p++) {
        const tl_proc_t *pr = &L->procs[p];
        const char *be = pr->backend < KT_BACKEND_COUNT ? kt_backend_name(pr->backend) : "?";
        const kt_device_info_t *di = find_device(snap, pr->backend, pr->device);
        if (snap->source_count && snap->sources[pr->source].rank >= 0)
            snprintf(base, sizeof base, "rank %" PRId32 ": %s %s", snap->sources[pr->source].rank, be, pr->device);
        else if (snap->source_count)
            snprintf(base, sizeof base, "pid %" PRId64 ": %s %s", snap->sources[pr->source].pid, be, pr->device);
        else
            snprintf(base, sizeof base, "%s %s", be, pr->device);
        ev_meta_name(w, "process_name", pr->pid, 0, base);
        ev_meta_sort(w, "process_sort_index", pr->pid, 0, pr->pid);
        if (di) {
            char id[KT_DEVICE_KEY_MAX + 96];
            kt__device_id_text(di, id, sizeof id);
            snprintf(base, sizeof base, "%s, clock %s, error bound %" PRIu64 " ns", id, di->clock_domain,
                     di->error_bound_ns);
            ev_open(w);
            fprintf(w->out, "{\"ph\":\"M\",\"name\":\"process_labels\",\"pid\":%" PRIu32 ",\"tid\":0,\"args\":{"
                            "\"labels\":", pr->pid);
            kt__trace_json_string(w->out, base);
            fputs("}}", w->out);
        }
    }
    for (size_t q = 0; q < L->nq; q++)
        if (L->queues[q].n)
            write_lane_names(w, &L->queues[q], q < snap->queue_count ? snap->queues[q].label : "unknown queue");
}

/* Every slice, with a flow arrow from each enqueue to its execution. */
static void write_slices(tl_writer_t *w, const kt_snapshot_t *snap, const tl_layout_t *L)
{
    for (size_t q = 0; q < L->nq; q++)
        for (size_t k = 0; k < L->queues[q].n; k++) {
            const tl_item_t *it = &L->queues[q].items[k];
            ev_slice(w, snap, &L->queues[q], it);
            if (snap->spans[it->span].enqueue_ns)
                ev_flow(w, 'f', it->span + 1, L->queues[q].pid, L->queues[q].tid + it->lane, mid(it));
        }
    for (size_t i = 0; i < L->nth; i++)
        for (size_t k = 0; k < L->threads[i].n; k++) {
            const tl_item_t *it = &L->threads[i].items[k];
            ev_slice(w, snap, &L->threads[i], it);
            if (it->kind == ITEM_ENQUEUE)
                ev_flow(w, 's', it->span + 1, L->threads[i].pid, L->threads[i].tid + it->lane, mid(it));
        }
}

int kt__export_chrome(FILE *out, const kt_snapshot_t *snap)
{
    if (!out || !snap)
        return KT_EINVAL;
    tl_layout_t L = {NULL, NULL, snap->thread_count + 1, snap->queue_count + 1, NULL, 0};
    L.threads = calloc(L.nth, sizeof *L.threads);
    L.queues = calloc(L.nq, sizeof *L.queues);
    L.procs = calloc(L.nq, sizeof *L.procs);
    uint64_t unplaced = 0;
    int rc = (L.threads && L.queues && L.procs) ? 0 : KT_ENOMEM;
    if (rc == 0)
        rc = build_tracks(snap, L.threads, L.queues, &unplaced);
    for (size_t i = 0; rc == 0 && i < L.nth; i++)
        rc = track_layout(&L.threads[i]);
    for (size_t i = 0; rc == 0 && i < L.nq; i++)
        rc = track_layout(&L.queues[i]);
    if (rc == 0) {
        assign_ids(snap, &L);
        write_header(out, snap, unplaced);
        tl_writer_t w = {out, 1};
        write_host_groups(&w, snap);
        write_thread_names(&w, snap, &L);
        write_device_groups(&w, snap, &L);
        write_slices(&w, snap, &L);
        fputs("\n]}\n", out);
        if (ferror(out))
            rc = KT_EIO;
    }
    for (size_t i = 0; L.threads && i < L.nth; i++)
        free(L.threads[i].items);
    for (size_t i = 0; L.queues && i < L.nq; i++)
        free(L.queues[i].items);
    free(L.threads);
    free(L.queues);
    free(L.procs);
    return rc;
}
