/* report_view.h — tool-only (not installed): the table reports (text, markdown, lines, CSV) of entries that are
 * not a snapshot's array: `ktiming report` keeps a narrow record per kernel (src/analysis/report_file.c) and
 * makes an entry from it when a row is sorted or written, instead of holding 360-byte entries. */
#ifndef KT_EXPORT_REPORT_VIEW_H
#define KT_EXPORT_REPORT_VIEW_H

#include <ktiming.h>
#include <stdio.h>

/* The entries a table reads, in the snapshot's order (name, backend, device). */
typedef struct kt__entry_view_t kt__entry_view_t;
struct kt__entry_view_t {
    size_t count;
    const kt_kernel_timing_t *entries; /* get NULL: entry i is entries[i] */
    /* entry i, made in *tmp or held by the view; read it before the next call with the same tmp */
    const kt_kernel_timing_t *(*get)(const kt__entry_view_t *v, size_t i, kt_kernel_timing_t *tmp);
    const void *user; /* get's */
    /* where get reads entry i from: records + i * stride (NULL: not said). A table reads its rows in their sorted
     * order, all over the records: it asks for a row's record a few rows ahead (kt__view_prefetch). */
    const void *records;
    size_t stride;
    /* 1: the entries are whole (every member a snapshot's entry has), so JSON may be written from them; 0: maybe
     * only what the tables read (`ktiming report`'s narrow records), and JSON is refused */
    int whole;
};

static inline const kt_kernel_timing_t *kt__view_entry(const kt__entry_view_t *v, size_t i, kt_kernel_timing_t *tmp)
{
    return v->get ? v->get(v, i, tmp) : &v->entries[i];
}

static inline void kt__view_prefetch(const kt__entry_view_t *v, size_t i)
{
    if (!v->get)
        __builtin_prefetch(&v->entries[i]);
    else if (v->records)
        __builtin_prefetch((const char *)v->records + i * v->stride);
}

#define KT__VIEW_AHEAD 8 /* rows ahead of the one being read */

/* kt_report_print / kt_report_write of meta (everything but the entries: its count and entries are not read)
 * with the entries of view: the same bytes as for a snapshot holding those entries. Table formats (text,
 * markdown, lines, csv), and JSON of a view of whole entries; another format is KT_EINVAL. JSON reads the
 * entries once, in order, and
 * meta's spans only after the last entry (so a view may make the spans with its entries: `ktiming merge`,
 * merge_consume.h); an entry the view cannot make (get NULL) is KT_ENOMEM, and kt__report_write_view then
 * leaves no file, as on any failure. */
KT_API int kt__report_print_view(FILE *out, const kt_snapshot_t *meta, const kt__entry_view_t *view, kt_format_t format,
                                 const kt_report_opts_t *opts);
KT_API int kt__report_write_view(const char *path, const kt_snapshot_t *meta, const kt__entry_view_t *view,
                                 kt_format_t format, const kt_report_opts_t *opts);

#endif
