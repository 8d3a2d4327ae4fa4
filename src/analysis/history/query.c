/* query.c — reading the history back: runs in time order, series by key, and each series' points (medians and
 * quartiles per run); reservoirs are read one (series, run) at a time, only where a check needs them. */
#include "history.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

/* A text column's value; "" for NULL or a non-text value. */
static const char *text_of(const kth_val_t *v) { return v->t == KTH_TEXT ? v->s : ""; }
static char *dup_text(const kth_val_t *v) { return strdup(text_of(v)); }

/* ===================================================================================================== *
 * Runs
 * ===================================================================================================== */

typedef struct load_ctx_t {
    kth_history_t *h;           /* being filled */
    const kth_filter_t *f;      /* filters */
    size_t cap;                 /* capacity of the array being filled */
    int oom;                    /* an allocation failed */
    int64_t *run_ids;           /* run ids ascending, for lookup */
    uint32_t *run_index;        /* their index in h->runs */
    int64_t *series_ids;        /* series ids ascending */
    uint32_t *series_index;     /* their index in h->series */
    size_t *pcap;               /* per series: capacity of pts */
    uint32_t *run_direct;       /* run id -> index when ids are dense (NULL otherwise) */
    uint32_t *series_direct;    /* series id -> index, likewise */
    int64_t run_max, series_max; /* largest id of each */
} load_ctx_t;

/* arr (used of *cap elements of size bytes) with room for one more: arr itself, or grown (first elements, then
 * doubling; *cap updated). NULL when out of memory: x->oom set, arr left as it was. */
static void *room_for_one(load_ctx_t *x, void *arr, size_t used, size_t *cap, size_t first, size_t size)
{
    if (used < *cap)
        return arr;
    size_t n = *cap ? *cap * 2 : first;
    void *p = realloc(arr, n * size);
    if (!p) {
        x->oom = 1;
        return NULL;
    }
    *cap = n;
    return p;
}

static int row_run(void *ctx, const kth_val_t *c, int n)
{
    load_ctx_t *x = ctx;
    kth_history_t *h = x->h;
    if (n < 5)
        return 0;
    const char *machine = text_of(&c[4]), *branch = text_of(&c[3]);
    if ((x->f->machine && fnmatch(x->f->machine, machine, 0)) || (x->f->branch && strcmp(x->f->branch, branch)))
        return 0;
    kth_run_t *runs = room_for_one(x, h->runs, h->run_count, &x->cap, 64, sizeof *runs);
    if (!runs)
        return 1;
    h->runs = runs;
    kth_run_t *r = &h->runs[h->run_count++];
    r->id = c[0].i;
    r->when = c[1].i;
    r->commit = dup_text(&c[2]);
    r->branch = dup_text(&c[3]);
    r->machine = dup_text(&c[4]);
    if (!r->commit || !r->branch || !r->machine) {
        x->oom = 1;
        return 1;
    }
    return 0;
}

/* ===================================================================================================== *
 * Series and points
 * ===================================================================================================== */

static int row_series(void *ctx, const kth_val_t *c, int n)
{
    load_ctx_t *x = ctx;
    kth_history_t *h = x->h;
    if (n < 5)
        return 0;
    const char *kernel = text_of(&c[1]), *device = text_of(&c[3]), *machine = text_of(&c[4]);
    if ((x->f->kernel && fnmatch(x->f->kernel, kernel, 0)) || (x->f->device && fnmatch(x->f->device, device, 0)) ||
        (x->f->machine && fnmatch(x->f->machine, machine, 0)))
        return 0;
    kth_series_t *series = room_for_one(x, h->series, h->series_count, &x->cap, 64, sizeof *series);
    if (!series)
        return 1;
    h->series = series;
    kth_series_t *s = &h->series[h->series_count++];
    memset(s, 0, sizeof *s);
    s->id = c[0].i;
    s->kernel = dup_text(&c[1]);
    s->backend = dup_text(&c[2]);
    s->device = dup_text(&c[3]);
    s->machine = dup_text(&c[4]);
    if (!s->kernel || !s->backend || !s->device || !s->machine) {
        x->oom = 1;
        return 1;
    }
    return 0;
}

static long find_id(const int64_t *ids, size_t n, int64_t id)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && ids[lo] == id ? (long)lo : -1;
}

/* Index of an id: a direct table when the ids are dense (as auto-numbered ids are), else a binary search. */
static long lookup(const int64_t *ids, const uint32_t *index, size_t n, const uint32_t *direct, int64_t max, int64_t id)
{
    if (direct)
        return id >= 0 && id <= max && direct[id] != UINT32_MAX ? (long)direct[id] : -1;
    long k = find_id(ids, n, id);
    return k < 0 ? -1 : (long)index[k];
}

static int row_point(void *ctx, const kth_val_t *c, int n)
{
    load_ctx_t *x = ctx;
    if (n < 6)
        return 0;
    long si = lookup(x->series_ids, x->series_index, x->h->series_count, x->series_direct, x->series_max, c[0].i);
    long ri = si < 0 ? -1 : lookup(x->run_ids, x->run_index, x->h->run_count, x->run_direct, x->run_max, c[1].i);
    if (ri < 0)
        return 0;
    size_t s = (size_t)si;
    kth_series_t *se = &x->h->series[s];
    kth_point_t *pts = room_for_one(x, se->pts, se->n, &x->pcap[s], 16, sizeof *pts);
    if (!pts)
        return 1;
    se->pts = pts;
    kth_point_t *p = &se->pts[se->n++];
    p->run = (uint32_t)ri;
    p->median = c[2].d;
    p->q1 = c[3].t == KTH_NULL ? p->median : c[3].d;
    p->q3 = c[4].t == KTH_NULL ? p->median : c[4].d;
    p->samples = (uint32_t)c[5].i;
    return 0;
}

/* Sorting: ids with their index; series by key; points by run. */
typedef struct id_ix_t {
    int64_t id;  /* database id */
    uint32_t ix; /* index in the history's array */
} id_ix_t;

static int cmp_id(const void *a, const void *b)
{
    int64_t x = ((const id_ix_t *)a)->id, y = ((const id_ix_t *)b)->id;
    return x < y ? -1 : x > y;
}

static int cmp_series(const void *a, const void *b)
{
    const kth_series_t *x = a, *y = b;
    int c = strcmp(x->kernel, y->kernel);
    if (!c)
        c = strcmp(x->backend, y->backend);
    if (!c)
        c = strcmp(x->device, y->device);
    return c ? c : strcmp(x->machine, y->machine);
}

static int cmp_point(const void *a, const void *b)
{
    uint32_t x = ((const kth_point_t *)a)->run, y = ((const kth_point_t *)b)->run;
    return x < y ? -1 : x > y;
}

/* A direct id -> index table when the largest id is at most a few times the count; NULL otherwise. */
static uint32_t *direct_table(const int64_t *ids, const uint32_t *index, size_t n, int64_t *max)
{
    *max = n ? ids[n - 1] : -1;
    if (!n || ids[0] < 0 || *max > (int64_t)(4 * n + 1024))
        return NULL;
    uint32_t *t = malloc(((size_t)*max + 1) * sizeof *t);
    if (!t)
        return NULL; /* the binary search still works */
    memset(t, 0xff, ((size_t)*max + 1) * sizeof *t);
    for (size_t i = 0; i < n; i++)
        t[ids[i]] = index[i];
    return t;
}

/* ids[i], index[i] of n items given by get(i), ascending by id. */
static int index_ids(size_t n, const kth_history_t *h, int runs, int64_t **ids, uint32_t **index)
{
    id_ix_t *t = malloc((n ? n : 1) * sizeof *t);
    *ids = malloc((n ? n : 1) * sizeof **ids);
    *index = malloc((n ? n : 1) * sizeof **index);
    if (!t || !*ids || !*index) {
        free(t);
        return KT_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        t[i] = (id_ix_t){runs ? h->runs[i].id : h->series[i].id, (uint32_t)i};
    qsort(t, n, sizeof *t, cmp_id);
    for (size_t i = 0; i < n; i++) {
        (*ids)[i] = t[i].id;
        (*index)[i] = t[i].ix;
    }
    free(t);
    return 0;
}

/* --last N, counted after every filter: the last N runs that hold a point of a series kept (a run of other kernels
 * or devices only is not one of them); the others and their points go. 0 or KT_ENOMEM. */
static int keep_last(kth_history_t *h, size_t last)
{
    uint32_t *map = malloc((h->run_count + 1) * sizeof *map); /* old index -> new, UINT32_MAX: dropped */
    if (!map)
        return KT_ENOMEM;
    memset(map, 0, (h->run_count + 1) * sizeof *map);
    for (size_t s = 0; s < h->series_count; s++)
        for (size_t i = 0; i < h->series[s].n; i++)
            map[h->series[s].pts[i].run] = 1;
    size_t kept = 0;
    for (size_t r = h->run_count; r-- > 0;) {
        int keep = map[r] && kept < last;
        kept += (size_t)keep;
        map[r] = keep ? 1 : UINT32_MAX;
    }
    size_t n = 0;
    for (size_t r = 0; r < h->run_count; r++) {
        if (map[r] == UINT32_MAX) {
            free(h->runs[r].commit);
            free(h->runs[r].branch);
            free(h->runs[r].machine);
            continue;
        }
        map[r] = (uint32_t)n;
        h->runs[n++] = h->runs[r];
    }
    h->run_count = n;
    for (size_t s = 0; s < h->series_count; s++) {
        kth_series_t *se = &h->series[s];
        size_t m = 0;
        for (size_t i = 0; i < se->n; i++)
            if (map[se->pts[i].run] != UINT32_MAX) {
                se->pts[m] = se->pts[i];
                se->pts[m++].run = map[se->pts[i].run];
            }
        se->n = m;
    }
    free(map);
    return 0;
}

int kth_load(kth_db_t *db, const kth_filter_t *f, kth_history_t *out)
{
    kth_filter_t none = {0};
    memset(out, 0, sizeof *out);
    load_ctx_t x = {.h = out, .f = f ? f : &none};
    int rc = kth_exec(db, "SELECT id, run_time, commit_sha, branch, machine FROM kt_run ORDER BY run_time, id", NULL,
                      0, row_run, &x);
    x.cap = 0;
    if (!rc && !x.oom)
        rc = kth_exec(db, "SELECT id, kernel, backend, device, machine FROM kt_series", NULL, 0, row_series, &x);
    if (!rc && !x.oom && out->series_count)
        qsort(out->series, out->series_count, sizeof *out->series, cmp_series);
    if (!rc && !x.oom) {
        x.pcap = calloc(out->series_count + 1, sizeof *x.pcap);
        if (!x.pcap || index_ids(out->run_count, out, 1, &x.run_ids, &x.run_index) ||
            index_ids(out->series_count, out, 0, &x.series_ids, &x.series_index))
            x.oom = 1;
    }
    if (!rc && !x.oom) {
        x.run_direct = direct_table(x.run_ids, x.run_index, out->run_count, &x.run_max);
        x.series_direct = direct_table(x.series_ids, x.series_index, out->series_count, &x.series_max);
    }
    if (!rc && !x.oom && out->run_count && out->series_count)
        rc = kth_exec(db, "SELECT series_id, run_id, median_ns, q1_ns, q3_ns, sample_count FROM kt_result", NULL, 0,
                      row_point, &x);
    for (size_t s = 0; !rc && !x.oom && s < out->series_count; s++)
        if (out->series[s].n > 1)
            qsort(out->series[s].pts, out->series[s].n, sizeof *out->series[s].pts, cmp_point);
    if (!rc && !x.oom && x.f->last && keep_last(out, x.f->last))
        x.oom = 1;
    /* Series without a point among the runs kept are dropped. */
    size_t keep = 0;
    for (size_t s = 0; !rc && !x.oom && s < out->series_count; s++) {
        if (out->series[s].n)
            out->series[keep++] = out->series[s];
        else {
            kth_series_t *se = &out->series[s];
            free(se->kernel), free(se->backend), free(se->device), free(se->machine), free(se->pts);
        }
    }
    if (!rc && !x.oom)
        out->series_count = keep;
    free(x.pcap);
    free(x.run_ids);
    free(x.run_index);
    free(x.series_ids);
    free(x.series_index);
    free(x.run_direct);
    free(x.series_direct);
    if (x.oom && !rc)
        rc = KT_ENOMEM;
    if (rc) {
        if (rc == KT_ENOMEM)
            snprintf(db->err, sizeof db->err, "%s: out of memory", db->where);
        kth_history_free(out);
    }
    return rc;
}

void kth_history_free(kth_history_t *h)
{
    if (!h)
        return;
    for (size_t i = 0; i < h->run_count; i++) {
        free(h->runs[i].commit);
        free(h->runs[i].branch);
        free(h->runs[i].machine);
    }
    for (size_t i = 0; i < h->series_count; i++) {
        kth_series_t *s = &h->series[i];
        free(s->kernel), free(s->backend), free(s->device), free(s->machine), free(s->pts);
    }
    free(h->runs);
    free(h->series);
    memset(h, 0, sizeof *h);
}

/* ===================================================================================================== *
 * Reservoirs
 * ===================================================================================================== */

typedef struct blob_ctx_t {
    uint64_t *v; /* decoded */
    size_t n;    /* values in v */
    int rc;      /* decoding result */
} blob_ctx_t;

static int row_blob(void *ctx, const kth_val_t *c, int n)
{
    blob_ctx_t *b = ctx;
    if (n > 0 && c[0].t == KTH_BLOB && !b->v)
        b->rc = kth_samples_decode(c[0].b, c[0].len, &b->v, &b->n);
    return 0;
}

int kth_load_samples(kth_db_t *db, int64_t series_id, int64_t run_id, uint64_t **out, size_t *n)
{
    blob_ctx_t b = {NULL, 0, 0};
    kth_val_t p[2] = {{.t = KTH_INT, .i = run_id}, {.t = KTH_INT, .i = series_id}};
    int rc = kth_exec(db, "SELECT samples FROM kt_result WHERE run_id = $1 AND series_id = $2", p, 2, row_blob, &b);
    if (!rc && b.rc) {
        snprintf(db->err, sizeof db->err, "%s: a stored reservoir is damaged (series %lld, run %lld)", db->where,
                 (long long)series_id, (long long)run_id);
        rc = b.rc;
    }
    if (rc) {
        free(b.v);
        b.v = NULL;
        b.n = 0;
    }
    *out = b.v;
    *n = b.n;
    return rc;
}

int kth_db_samples_fn(void *db, const kth_history_t *h, size_t series, size_t point, uint64_t **out, size_t *n)
{
    const kth_series_t *s = &h->series[series];
    return kth_load_samples(db, s->id, h->runs[s->pts[point].run].id, out, n);
}
