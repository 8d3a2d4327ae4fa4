/* compare_match.h — which kernel of BEFORE is which kernel of AFTER (compare_match.c): by device identity; and the
 * comparison of two sides given as the narrow per-kernel records below (compare.c), which kt_compare and the
 * CLI's file comparison (compare_files.c) share. */
#ifndef KT_COMPARE_MATCH_H
#define KT_COMPARE_MATCH_H

#include <ktiming/compare.h>

/* What a comparison reads of one kernel: its key and the figures of kt_compare_side_t (64 bytes, against the
 * 360 of a kt_kernel_timing_t). The strings and samples belong to whoever built the record. */
typedef struct kt__cmp_entry_t {
    const char *name;        /* kernel name (NULL reads as "") */
    const char *device;      /* device label (NULL reads as "") */
    const uint64_t *samples; /* raw durations, NULL when none */
    uint64_t dispatch_count;
    uint64_t p50_ns;         /* the snapshot's p50: the median when there are no samples */
    double mean_ns;          /* the mean when there are no samples (total / count where the file gave none) */
    uint32_t sample_count;   /* values in samples[] (0 when samples is NULL) */
    kt_backend_t backend;
    size_t from;             /* index in the file or snapshot (orders equal keys; names duplicates) */
} kt__cmp_entry_t;

/* One side of a comparison: its kernels, in any order, and its device records. */
typedef struct kt__cmp_side_t {
    const kt__cmp_entry_t *entries;
    size_t count;
    const kt_device_info_t *devices;
    size_t device_count;
} kt__cmp_side_t;

/* The narrow record of a snapshot entry (pointing into it). */
void kt__cmp_entry_of(const kt_kernel_timing_t *t, size_t from, kt__cmp_entry_t *out);

/* One row of a comparison: a matched pair, or one side alone (the other NULL). */
typedef struct kt__cmp_pair_t {
    const kt__cmp_entry_t *b; /* BEFORE's entry, or NULL */
    const kt__cmp_entry_t *a; /* AFTER's entry, or NULL */
    const char *match;        /* how the devices were matched (static): "uuid", "pci", "model+ordinal",
                                 "name"; NULL for a one-sided row */
} kt__cmp_pair_t;

/* Pairs the entries of the two sides: same (name, backend) and the same device, where "the same device" is,
 * in this order of preference: the same stable id on both sides (UUID, else PCI address: a GPU renumbered by
 * CUDA_VISIBLE_DEVICES is still found), else the same model and ordinal, else the same device label. Each entry
 * is in one pair; the pairs are sorted by (name, backend, device label: BEFORE's where it has one). *out is a new
 * array (free() it). 0 or KT_ENOMEM. */
int kt__compare_match(const kt__cmp_side_t *before, const kt__cmp_side_t *after, kt__cmp_pair_t **out, size_t *n);

/* Strings the rows of a comparison point to instead of owning copies (compare_files.c): names and devices are
 * the entries' own, and equal reasons are kept once. NULL: every row owns its strings (kt_compare_free). */
typedef struct kt__cmp_strings_t kt__cmp_strings_t;
kt__cmp_strings_t *kt__cmp_strings_new(void);
void kt__cmp_strings_free(kt__cmp_strings_t *s);
/* The kept string equal to str (str, malloc'd, is taken: kept, or freed when an equal one is kept already);
 * NULL when out of memory (str freed). */
const char *kt__cmp_strings_keep(kt__cmp_strings_t *s, char *str);

/* Two keys (name, backend, device) in kt_snapshot_load's order, a NULL device read as "": <0, 0 or >0. The narrow
 * readers (compare_files.c, report_file.c) order their records and find duplicates with it. */
int kt__key_cmp(const char *an, kt_backend_t ab, const char *ad, const char *bn, kt_backend_t bb, const char *bd);

/* Names packed one after another in blocks of 1 MiB (compare_files.c, report_file.c): one allocation per MiB
 * instead of one per kernel. A NULL pointer is an empty set. */
typedef struct kt__names_t kt__names_t;
/* A copy of s kept in *names; NULL when out of memory. */
const char *kt__names_copy(kt__names_t **names, const char *s);
void kt__names_free(kt__names_t *names);

/* kt_compare on two sides of narrow records (kt_compare's contract). With strings non-NULL the rows' name,
 * device, device_after and reason are not the result's: release the result with kt__compare_rows_free and the
 * strings (after it) with kt__cmp_strings_free, never with kt_compare_free. */
int kt__compare_sides(const kt__cmp_side_t *before, const kt__cmp_side_t *after, const kt_compare_opts_t *opts,
                      kt__cmp_strings_t *strings, kt_compare_result_t *out);

/* Releases a result made with strings: its rows only. */
void kt__compare_rows_free(kt_compare_result_t *result);

#endif
