/* compare_files.c — `ktiming compare` of two files without holding two snapshots (compare_files.h): each entry
 * is read by the loader's sink (load_sink.h) into a narrow record, its name into a block of names, its device
 * label kept once, its samples taken as they are; the rest of the entry is freed as soon as it is read. */
#include "analysis/compare_files.h"

#include "analysis/compare_match.h"
#include "analysis/load_sink.h"

#include <fnmatch.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* One file as read. */
typedef struct file_side_t {
    kt__cmp_entry_t *v; /* its kernels, in the loader's order (name, backend, device) */
    size_t n;
    kt_snapshot_t *meta; /* everything but the entries (devices) */
} file_side_t;

struct kt__cmp_files_t {
    file_side_t side[2];
    kt__names_t *names;
    kt__cmp_strings_t *strings; /* device labels and the rows' reasons, each kept once */
};

/* The loader's sink: entry i of count, kept as a narrow record. */
typedef struct sink_ctx_t {
    kt__cmp_files_t *f;
    file_side_t *side;
} sink_ctx_t;

static int take(void *user, kt_kernel_timing_t *e, size_t i, size_t count)
{
    sink_ctx_t *s = user;
    file_side_t *side = s->side;
    if (!side->v && !(side->v = malloc(count * sizeof *side->v)))
        return KT_ENOMEM;
    kt__cmp_entry_t *r = &side->v[i];
    kt__cmp_entry_of(e, i, r);
    r->name = kt__names_copy(&s->f->names, e->name ? e->name : "");
    char *dev = (char *)e->device;
    e->device = NULL; /* taken: kept, or freed when the label is kept already */
    r->device = dev ? kt__cmp_strings_keep(s->f->strings, dev) : NULL;
    if (!r->name || (dev && !r->device))
        return KT_ENOMEM;
    e->samples = NULL; /* taken: r->samples */
    side->n = i + 1;
    return 0;
}

/* Where a record keeps its key (kt__records_order puts the records in the loader's order). */
static const kt__key_layout_t kCmpKey = {offsetof(kt__cmp_entry_t, name), offsetof(kt__cmp_entry_t, device),
                                        offsetof(kt__cmp_entry_t, backend), offsetof(kt__cmp_entry_t, from)};

/* Keeps the kernels whose name matches glob (ktiming's --filter). */
static void filter(file_side_t *side, const char *glob)
{
    if (!glob || !*glob)
        return;
    size_t kept = 0;
    for (size_t i = 0; i < side->n; i++) {
        if (fnmatch(glob, side->v[i].name, 0) == 0)
            side->v[kept++] = side->v[i];
        else
            free((void *)side->v[i].samples);
    }
    side->n = kept;
}

static int load_side(kt__cmp_files_t *f, file_side_t *side, const char *path, size_t max_bytes, char *errbuf,
                     size_t errlen)
{
    sink_ctx_t ctx = {f, side};
    kt__entry_sink_t sink = {take, &ctx};
    kt_load_opts_t o = {.max_bytes = max_bytes};
    int rc = kt__snapshot_load_sink(path, &o, &sink, &side->meta, errbuf, errlen);
    if (rc)
        return rc;
    free(side->meta->spans); /* read and checked; a comparison has no use for them */
    side->meta->spans = NULL;
    side->meta->span_count = 0;
    return kt__records_order(side->v, side->n, sizeof *side->v, &kCmpKey, path, errbuf, errlen);
}

int kt__compare_files_load(const char *before, const char *after, size_t max_bytes, const char *glob,
                           kt__cmp_files_t **out, char *errbuf, size_t errlen)
{
    if (errbuf && errlen)
        errbuf[0] = '\0';
    if (!out)
        return KT_EINVAL;
    *out = NULL;
    kt__cmp_files_t *f = calloc(1, sizeof *f);
    if (!f || !(f->strings = kt__cmp_strings_new())) {
        free(f);
        return KT_ENOMEM;
    }
    const char *paths[2] = {before, after};
    int rc = 0;
    for (int k = 0; k < 2 && !rc; k++)
        rc = load_side(f, &f->side[k], paths[k], max_bytes, errbuf, errlen);
    if (rc) {
        kt__compare_files_free(f, NULL);
        return rc;
    }
    filter(&f->side[0], glob);
    filter(&f->side[1], glob);
    *out = f;
    return 0;
}

int kt__compare_files(kt__cmp_files_t *f, const kt_compare_opts_t *opts, kt_compare_result_t *out)
{
    if (!f) {
        if (out)
            memset(out, 0, sizeof *out);
        return KT_EINVAL;
    }
    kt__cmp_side_t s[2];
    for (int k = 0; k < 2; k++)
        s[k] = (kt__cmp_side_t){f->side[k].v, f->side[k].n, f->side[k].meta->devices, f->side[k].meta->device_count};
    return kt__compare_sides(&s[0], &s[1], opts, f->strings, out);
}

void kt__compare_files_free(kt__cmp_files_t *f, kt_compare_result_t *result)
{
    kt__compare_rows_free(result);
    if (!f)
        return;
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; i < f->side[k].n; i++)
            free((void *)f->side[k].v[i].samples);
        free(f->side[k].v);
        kt_snapshot_free(f->side[k].meta);
    }
    kt__names_free(f->names);
    kt__cmp_strings_free(f->strings);
    free(f);
}
