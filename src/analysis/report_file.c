/* report_file.c — `ktiming report` of a table without holding the snapshot (report_file.h): the loader hands each
 * entry to a sink (load_sink.h) that keeps a narrow record of what a table prints; an entry the record cannot
 * stand for (errors, drops, bytes, launch configurations, a total past 64 bits, anything else a table might
 * read) is kept whole instead. Each row's entry is made again from its record when the table reads it. */
#include "analysis/report_file.h"

#include "analysis/compare_match.h"
#include "analysis/load_sink.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* What a table reads of a plain entry (120 bytes). */
typedef struct lean_t {
    const char *name;          /* in the name blocks */
    const char *device;        /* kept once per label */
    kt_kernel_timing_t *whole; /* non-NULL: the entry, whole (its name and device the record's) */
    uint64_t dispatch_count, total_ns, min_ns, max_ns, last_ns, p50_ns, p90_ns, p99_ns;
    double mean_ns, stddev_ns;
    size_t from;           /* index in the file: orders equal keys, names duplicates */
    uint32_t sample_count; /* samples the entry had (0 when none were given) */
    kt_backend_t backend;
} lean_t;

/* Where a record keeps its key (kt__records_order puts the records in the loader's order). */
static const kt__key_layout_t kLeanKey = {offsetof(lean_t, name), offsetof(lean_t, device), offsetof(lean_t, backend),
                                         offsetof(lean_t, from)};

struct kt__report_file_t {
    lean_t *v;
    size_t n;
    kt_snapshot_t *meta;
    kt__names_t *names;
    kt__cmp_strings_t *devices;
};

/* The samples are not kept (no table prints them): an entry made from a record that had some points here, so that
 * what reads `samples ? sample_count : 0` (the CSV) reads the count. Never dereferenced. */
static uint64_t samples_not_kept;

/* The entry a record stands for. */
static void lean_entry(const lean_t *r, kt_kernel_timing_t *e)
{
    memset(e, 0, sizeof *e);
    e->name = r->name;
    e->backend = r->backend;
    e->device = r->device;
    e->dispatch_count = r->dispatch_count;
    e->total_ns = r->total_ns;
    e->min_ns = r->min_ns;
    e->max_ns = r->max_ns;
    e->last_ns = r->last_ns;
    e->mean_ns = r->mean_ns;
    e->stddev_ns = r->stddev_ns;
    e->p50_ns = r->p50_ns;
    e->p90_ns = r->p90_ns;
    e->p99_ns = r->p99_ns;
    e->sample_count = r->sample_count;
    e->samples = r->sample_count ? &samples_not_kept : NULL;
    e->total128.lo = r->total_ns;
}

static int take(void *user, kt_kernel_timing_t *e, size_t i, size_t count)
{
    kt__report_file_t *f = user;
    if (!f->v && !(f->v = malloc((count ? count : 1) * sizeof *f->v)))
        return KT_ENOMEM;
    lean_t *r = &f->v[i];
    memset(r, 0, sizeof *r);
    r->name = kt__names_copy(&f->names, e->name ? e->name : "");
    char *dev = (char *)e->device;
    e->device = NULL; /* taken: kept, or freed when the label is kept already */
    r->device = dev ? kt__cmp_strings_keep(f->devices, dev) : NULL;
    if (!r->name || (dev && !r->device))
        return KT_ENOMEM;
    r->backend = e->backend;
    r->dispatch_count = e->dispatch_count;
    r->total_ns = e->total_ns;
    r->min_ns = e->min_ns;
    r->max_ns = e->max_ns;
    r->last_ns = e->last_ns;
    r->mean_ns = e->mean_ns;
    r->stddev_ns = e->stddev_ns;
    r->p50_ns = e->p50_ns;
    r->p90_ns = e->p90_ns;
    r->p99_ns = e->p99_ns;
    r->sample_count = e->samples ? e->sample_count : 0;
    r->from = i;
    f->n = i + 1;
    /* the entry as a table reads it: what no table reads (the samples' values, the histogram, the per-source
     * totals, the sum of squares) left out */
    kt_kernel_timing_t seen = *e, made;
    seen.name = r->name;
    seen.device = r->device;
    seen.sample_count = r->sample_count;
    seen.samples = r->sample_count ? &samples_not_kept : NULL;
    seen.sumsq128 = (kt_u128_t){0, 0};
    seen.hist = NULL;
    seen.hist_count = 0;
    seen.by_source = NULL;
    seen.by_source_count = 0;
    lean_entry(r, &made);
    if (!memcmp(&made, &seen, sizeof seen))
        return 0;
    if (!(r->whole = malloc(sizeof *r->whole)))
        return KT_ENOMEM;
    *r->whole = seen;
    e->configs = NULL; /* taken by the whole entry */
    return 0;
}

int kt__report_file_load(const char *path, size_t max_bytes, kt__report_file_t **out, char *errbuf, size_t errlen)
{
    if (errbuf && errlen)
        errbuf[0] = '\0';
    if (!out)
        return KT_EINVAL;
    *out = NULL;
    kt__report_file_t *f = calloc(1, sizeof *f);
    if (!f || !(f->devices = kt__cmp_strings_new())) {
        free(f);
        return KT_ENOMEM;
    }
    kt__entry_sink_t sink = {take, f};
    kt_load_opts_t o = {.max_bytes = max_bytes};
    int rc = kt__snapshot_load_sink(path, &o, &sink, &f->meta, errbuf, errlen);
    if (!rc) {
        free(f->meta->spans); /* read and checked; no table shows them */
        f->meta->spans = NULL;
        f->meta->span_count = 0;
        rc = kt__records_order(f->v, f->n, sizeof *f->v, &kLeanKey, path, errbuf, errlen);
    }
    if (rc) {
        kt__report_file_free(f);
        return rc;
    }
    *out = f;
    return 0;
}

const kt_snapshot_t *kt__report_file_meta(const kt__report_file_t *f) { return f ? f->meta : NULL; }

static const kt_kernel_timing_t *view_get(const kt__entry_view_t *v, size_t i, kt_kernel_timing_t *tmp)
{
    const lean_t *r = &((const kt__report_file_t *)v->user)->v[i];
    if (r->whole)
        return r->whole;
    lean_entry(r, tmp);
    return tmp;
}

void kt__report_file_view(const kt__report_file_t *f, kt__entry_view_t *v)
{
    *v = (kt__entry_view_t){f ? f->n : 0, NULL, view_get, f, f ? f->v : NULL, sizeof(lean_t), 0};
}

void kt__report_file_free(kt__report_file_t *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->n; i++) {
        if (f->v[i].whole)
            free(f->v[i].whole->configs);
        free(f->v[i].whole);
    }
    free(f->v);
    kt_snapshot_free(f->meta);
    kt__names_free(f->names);
    kt__cmp_strings_free(f->devices);
    free(f);
}
