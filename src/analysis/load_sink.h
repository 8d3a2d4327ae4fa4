/* load_sink.h — the snapshot loader handing each entry to a caller as it is read, instead of keeping it
 * (load.c): a reader that needs a few fields of a million kernels holds those, not 360-byte entries. */
#ifndef KT_LOAD_SINK_H
#define KT_LOAD_SINK_H

#include <ktiming/analysis.h>

/* Receives entry `index` of `count` (the file's order), read and checked as kt_snapshot_load reads it. It may
 * take members the entry owns (name, device, samples, ...) by setting them to NULL; the loader frees the rest
 * (kt__entries_free, a batch of entries at a time). Returns 0, or an error (KT_ENOMEM) that ends the load. */
typedef struct kt__entry_sink_t {
    int (*take)(void *user, kt_kernel_timing_t *e, size_t index, size_t count);
    void *user;
} kt__entry_sink_t;

/* kt_snapshot_load, with every entry given to sink: *out then has no entries (count 0); everything else is
 * read and checked as usual, except what needs the entries together: their order and the duplicate check
 * (the sink's owner does those; kt__load_duplicate_error says it as the loader does) and the spans' entry
 * indices, which stay the file's. */
int kt__snapshot_load_sink(const char *path, const kt_load_opts_t *opts, const kt__entry_sink_t *sink,
                           kt_snapshot_t **out, char *errbuf, size_t errlen);

/* Frees entries[0..n) and everything they own (what kt_snapshot_free frees of its entries), then the array. */
void kt__entries_free(kt_kernel_timing_t *entries, size_t n);

/* The loader's message for entries `first` and `second` (file indices) with the same (name, backend, device),
 * for `path`, into errbuf. Returns KT_EPARSE. */
int kt__load_duplicate_error(const char *path, size_t first, size_t second, char *errbuf, size_t errlen);

/* Where a narrow reader's record keeps its key: offsetof its name and device (const char *), backend
 * (kt_backend_t) and from (size_t: its index in the file). */
typedef struct kt__key_layout_t {
    size_t name, device, backend, from;
} kt__key_layout_t;

/* Puts records v[0..n) (size bytes each, laid out as k says) in kt_snapshot_load's order (compare_match.h's
 * kt__key_cmp, equal keys by from), with a pass that finds them in order instead of a sort when they are, and
 * refuses a key given twice as the loader does (path names the file): 0, or kt__load_duplicate_error's code with
 * its message. The narrow readers (report_file.c, compare_files.c) order their records with it. */
int kt__records_order(void *v, size_t n, size_t size, const kt__key_layout_t *k, const char *path, char *errbuf,
                      size_t errlen);

#endif
