/* ktiming/analysis.h — reading snapshots back from JSON (library ktiming::analysis, which uses cJSON).
 *
 *     kt_snapshot_t *s;
 *     char err[256];
 *     if (kt_snapshot_load("run.json", NULL, &s, err, sizeof err) != 0) { fprintf(stderr, "%s\n", err); ... }
 *     kt_report_print(stdout, s, KT_FORMAT_TEXT, NULL);
 *     kt_snapshot_free(s);
 *
 * The format is the versioned schema "ktiming.snapshot" written by kt_report_write(..., KT_FORMAT_JSON, opts) and
 * documented in docs/json-schema.md. Loaded snapshots follow the same memory contract as kt_snapshot() (see
 * kt_snapshot_t in ktiming.h) and are released with kt_snapshot_free(). Entries come back sorted by name,
 * backend, device (span entry indices are remapped when a file lists them in another order), spans sorted by
 * start_ns. Every uint64 value round-trips exactly.
 */
#ifndef KTIMING_ANALYSIS_H
#define KTIMING_ANALYSIS_H

#include <ktiming.h>

#if !KT_ENABLED
#error "ktiming/analysis.h needs KTIMING_ENABLE=1: define it where you include this header (README, \"Link\")"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The newest schema version this library reads; files with a larger "version" are rejected. */
#define KT_SNAPSHOT_SCHEMA_VERSION 5

/* Parses len bytes of JSON (need not be NUL-terminated) into a new snapshot stored in *out.
 * Returns 0; KT_EPARSE for malformed, truncated or inconsistent input, an unknown schema or a newer schema
 * version; KT_ENOMEM; or KT_EINVAL for NULL arguments. On failure *out is NULL and, when errbuf is non-NULL
 * and errlen > 0, errbuf holds a one-line NUL-terminated message naming the position ("line 3, column 17
 * (byte 52)") or the offending member ("entries[3].min_ns: expected a non-negative integer"). */
KT_API int kt_snapshot_parse(const char *json, size_t len, kt_snapshot_t **out, char *errbuf, size_t errlen);

/* Input size limit of kt_snapshot_load (1 GiB): well above any snapshot ktiming writes, below what would take
 * the parser's memory beyond a workstation's. */
#define KT_SNAPSHOT_MAX_INPUT_DEFAULT ((size_t)1024 << 20)

/* Options of kt_snapshot_load (NULL or zero-initialised = the defaults). */
typedef struct kt_load_opts_t {
    size_t max_bytes; /* input size limit; 0: KT_SNAPSHOT_MAX_INPUT_DEFAULT */
    int skip_spans;   /* non-zero: statistics only; the span sections ("spans", "span_table") are neither read nor
                       * checked, and the snapshot has span_count 0 (a summary of a large run loads several
                       * times faster) */
} kt_load_opts_t;

/* Reads the file at path and parses it as kt_snapshot_parse() does; "-" reads standard input. opts NULL: the
 * defaults. Returns the same codes plus KT_EIO when the file cannot be read (errno is kept, the message names
 * path). Messages start with the path. Bounded: a regular file larger than the limit (opts->max_bytes, else
 * KT_SNAPSHOT_MAX_INPUT_DEFAULT) is refused before reading, a stream after that many bytes (KT_EFULL); an input
 * whose first byte after whitespace is not '{' is refused at once (KT_EPARSE), so `/dev/zero` or a binary file
 * fails fast. */
KT_API int kt_snapshot_load(const char *path, const kt_load_opts_t *opts, kt_snapshot_t **out, char *errbuf,
                            size_t errlen);

/* Loads n files as kt_snapshot_load(path, NULL, ...) does, on `threads` threads (<= 0: the online cores, at most
 * 16), into out[0..n) in order. On the first failure every loaded snapshot is freed, out[] is all NULL, and the code and
 * message (naming the file) are that failure's. */
KT_API int kt_snapshot_load_many(const char *const *paths, size_t n, kt_snapshot_t **out, int threads,
                                 char *errbuf, size_t errlen);
/* The same with kt_snapshot_load's options for every file (NULL: the defaults), e.g. an input size limit. */
KT_API int kt_snapshot_load_many_opts(const char *const *paths, size_t n, const kt_load_opts_t *opts,
                                      kt_snapshot_t **out, int threads, char *errbuf, size_t errlen);

/* ---------------------------------------------------------------------------------------------------
 * Merging snapshots (several processes, ranks or runs into one; docs/scale.md)
 *
 * Entries with the same (name, backend, device) are merged: dispatch_count, total_ns/total128, sumsq128,
 * errors, dropped, dropped_by, spans_dropped, bytes summed; min/max exact; mean and the sample stddev computed
 * from the exact sums (so they equal what one process recording every duration would report); histograms
 * added bucket by bucket, so p50/p90/p99 are what that one process would report (within 0.8 %). An input entry
 * without a histogram (a version-1 file) contributes its samples, each standing for count/sample_count
 * dispatches; the merged percentiles are then estimates and the merged entry carries no histogram. The samples
 * are a uniform sample of all dispatches: drawn without replacement from the inputs' reservoirs, an input
 * chosen in proportion to its dispatches not yet drawn (deterministic: a fixed seed); capacity that of the largest
 * full input reservoir, or, when none was full, all samples up to 1024 (the default capacity). last_ns and last_error come from the input taken last (on the merged timeline).
 * Launch configurations (configs) add up per configuration, kept to KT_LAUNCH_CONFIGS_MAX rows as a snapshot keeps
 * them (the smallest totals then add up in the "other" row).
 * Merging is associative in every statistic but the samples' identity (each is a uniform sample) and, past that
 * cap, which configurations end up in "other".
 *
 * Spans keep their source: the result lists every input process in `sources` (an input that is itself a
 * merge contributes its sources), threads and queues name their source, spans move onto the merged timeline
 * by their source's offset (their uncertainty_ns grows by its bound), and each entry's by_source holds every
 * source's dispatch count and total. Devices are kept apart by identity (docs/devices.md): one record per
 * (backend, host, device key), so "GPU 0" of two nodes, or two GPUs of one model on a node, stay two devices with
 * their own entries (labelled afresh: the model plus the shortest suffix unique in the result, e.g. "GPU 0 @n1");
 * with by_model, one record per (backend, model) folds identical models together (a per-model summary). A record
 * keeps the largest bound of its inputs. An input without device records (older files) groups by device name.
 * The result's host, taken_ns are the first input's host and the latest taken_ns; pid 0, rank -1.
 * ------------------------------------------------------------------------------------------------- */

/* Where each input's times go on the merged timeline. */
typedef struct kt_merge_opts_t {
    const int64_t *offset_ns;  /* per input, added to its host times (NULL: 0, the same clock, except for an input
                                  on CLOCK_MONOTONIC put on a same-host input's CLOCK_MONOTONIC_RAW timeline
                                  through that input's clock anchor: docs/json-schema.md, "Clock anchor") */
    const uint64_t *bound_ns;  /* per input, the offset's error bound (NULL: 0 for inputs on the first input's
                                  host, UINT64_MAX = unknown for the others: their clocks are not comparable; an
                                  anchor's bound, growing 500 ppm with a span's distance from it, for an input
                                  placed through one; UINT64_MAX for an input on a clock no anchor relates) */
    int by_model;              /* non-zero: fold devices of one model together (`ktiming merge --by-model`) */
} kt_merge_opts_t;

/* Merges n snapshots into a new one in *out (released with kt_snapshot_free). opts may be NULL. 0, KT_EINVAL
 * (NULL arguments, n == 0, an inconsistent input), KT_ENOMEM. The inputs are not modified. */
KT_API int kt_snapshot_merge(const kt_snapshot_t *const *in, size_t n, const kt_merge_opts_t *opts,
                             kt_snapshot_t **out);

/* ---------------------------------------------------------------------------------------------------
 * Load balance across ranks (from a merged snapshot's by_source totals)
 * ------------------------------------------------------------------------------------------------- */

/* One kernel (name, backend) across the sources of a merged snapshot, over every device it ran on (a merge keeps
 * devices apart: each rank's GPU is its own entry): each source's total is its sum over the kernel's entries. A
 * source that never ran the kernel counts with total 0. */
typedef struct kt_rank_balance_t {
    size_t entry;            /* index into the snapshot's entries: the kernel's first (entries entry .. entry +
                                devices - 1 are the kernel on each device) */
    uint32_t sources;        /* sources counted: all of the snapshot's */
    uint64_t min_total_ns;   /* smallest per-source total */
    uint64_t max_total_ns;   /* largest per-source total */
    double mean_total_ns;    /* mean of the per-source totals */
    double imbalance;        /* max / mean (1 = perfectly balanced; 0 when the mean is 0) */
    uint32_t slowest_source; /* source with the largest total (the lowest index on a tie) */
    uint32_t fastest_source; /* source with the smallest total (the lowest index on a tie) */
    uint32_t devices;        /* entries (devices) the kernel has */
} kt_rank_balance_t;

/* Per-kernel balance of a merged snapshot, one item per kernel (name, backend) in entry order, in a new array *out
 * of *count items (free() it). KT_EINVAL when the snapshot has no sources (not a merge). 0, KT_EINVAL, KT_ENOMEM. */
KT_API int kt_rank_balance(const kt_snapshot_t *snap, kt_rank_balance_t **out, size_t *count);

/* The `--by-rank` text report: per kernel min / mean / max of the per-rank totals, imbalance, slowest rank (and the
 * device it ran on when the kernel ran on several); then each rank's total per kernel, under each device. 0, KT_EINVAL (not a merged snapshot), KT_ENOMEM, KT_EIO. */
KT_API int kt_report_by_rank(FILE *out, const kt_snapshot_t *snap);

#ifdef __cplusplus
}
#endif
#endif /* KTIMING_ANALYSIS_H */
