/* history.h — kernel performance history (libktiming_history, internal to the CLI, its tests and bench): runs stored
 * in SQLite or PostgreSQL behind one storage interface, series per (kernel, backend, device, machine), change-point
 * detection confirmed with the U test. docs/history.md describes the schema and the statistics. */
#ifndef KT_HISTORY_H
#define KT_HISTORY_H

#include <ktiming.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The schema version this code writes; files at a higher version are refused, lower ones migrated. */
#define KTH_SCHEMA_VERSION 2

/* ---------------------------------------------------------------------------------------------------
 * Storage: one interface, two engines (store.c; store_sqlite.c, store_pg.c)
 * ------------------------------------------------------------------------------------------------- */

/* Type of a bound parameter or a result column. */
typedef enum kth_vtype_t { KTH_NULL = 0, KTH_INT, KTH_REAL, KTH_TEXT, KTH_BLOB } kth_vtype_t;

/* A parameter or a column value (text and blob point into the engine's buffers for a row's lifetime). */
typedef struct kth_val_t {
    kth_vtype_t t;   /* which member holds the value */
    int64_t i;       /* KTH_INT */
    double d;        /* KTH_REAL */
    const char *s;   /* KTH_TEXT, NUL-terminated */
    const void *b;   /* KTH_BLOB */
    size_t len;      /* KTH_BLOB bytes */
} kth_val_t;

/* Called per result row; non-zero stops the query (returned as the query's result). */
typedef int (*kth_row_cb)(void *ctx, const kth_val_t *cols, int ncols);

typedef struct kth_db_t kth_db_t;

/* One engine. SQL is written once: parameters are $1..$N in order of first use (SQLite reads them as named
 * parameters, PostgreSQL natively), and DDL uses the two type words below. */
typedef struct kth_engine_t {
    const char *name;       /* "sqlite", "postgresql" */
    const char *id_type;    /* an auto-numbered 64-bit primary key column type */
    const char *blob_type;  /* a byte-string column type */
    const char *begin_write; /* starts a transaction that serialises writers (schema and adds) */
    /* runs one statement with its parameters, calling cb per row: 0, cb's non-zero, or KT_EIO (db->err set) */
    int (*exec)(kth_db_t *db, const char *sql, const kth_val_t *params, int nparams, kth_row_cb cb, void *ctx);
    void (*close)(kth_db_t *db); /* releases the connection and the cache (db itself stays) */
    int (*changed)(kth_db_t *db); /* NULL, or 1 when a read may have seen the file change under it (kth_changed) */
} kth_engine_t;

/* An open history. */
struct kth_db_t {
    const kth_engine_t *engine; /* its engine */
    void *conn;                 /* sqlite3 * or PGconn * */
    void *cache;                /* engine-private (SQLite: prepared statements) */
    char where[256];            /* path or the URL without its password, for messages */
    char err[512];              /* the last error, one line */
};

/* 1 when `where` names a PostgreSQL server: a "postgresql://" or "postgres://" URL, or a libpq key=value string
 * whose first keyword is libpq's ("host=db dbname=perf"); 0 for a SQLite file. */
int kth_is_server(const char *where);
/* `where` as messages write it: a server without its password (user:secret@ in a URL, password= in its query or
 * in key=value pairs); a file as it is. */
void kth_server_display(const char *where, char *out, size_t cap);

/* Opens (creating when absent) and migrates the history at `where`: a server (kth_is_server; libpq; KT_ENOTSUP when
 * built without it), anything else a SQLite file. 0; KT_EIO (cannot open,
 * not a database), KT_EPARSE (a database that is not a ktiming history, or a newer schema), KT_ENOTSUP, KT_ENOMEM.
 * On failure *out is NULL and err holds one line. */
int kth_open(const char *where, kth_db_t **out, char *err, size_t errlen);
/* Opens without migrating beyond schema version `upto` (tests: an old history to migrate). */
int kth_open_at(const char *where, int upto, kth_db_t **out, char *err, size_t errlen);
/* Opens an existing history to read it (show, check): never creates, migrates or writes it (an older schema is read
 * as it is), and works without write access to a SQLite file or its folder, leaving no file beside it. An empty
 * database is refused ("no history there"), as are the files kth_open refuses. */
int kth_open_read(const char *where, kth_db_t **out, char *err, size_t errlen);
/* 1 when what a read opened may have changed under it since (a SQLite file read as immutable, without write access,
 * that a writer touched meanwhile): read it again. */
int kth_changed(kth_db_t *db);
void kth_close(kth_db_t *db);
/* The schema version stored (0 when unknown). */
int kth_schema_version(kth_db_t *db);
/* One statement; KT_EIO with db->err set on failure. */
int kth_exec(kth_db_t *db, const char *sql, const kth_val_t *params, int nparams, kth_row_cb cb, void *ctx);
/* The SQLite and PostgreSQL openers (store_*.c): 0 or KT_EIO/KT_ENOTSUP with db->err set. `how`: KTH_OPEN_WRITE
 * (created when absent, WAL) or KTH_OPEN_READ (see kth_open_read). */
enum { KTH_OPEN_WRITE = 0, KTH_OPEN_READ = 1 };
int kth__sqlite_open(kth_db_t *db, const char *path, int how);
int kth__pg_open(kth_db_t *db, const char *url);
/* Loads a database client library once (*lib keeps its handle for the process): dlopen(soname), then names[i] into
 * fns[i]; 0, or KT_ENOTSUP with db->err set ("history: <needs> (<soname>): <why>"). Linked instead, a client cost
 * every start of the CLI, `ktiming run` included, its loading and relocation (docs/run.md). */
int kth__dl_load(kth_db_t *db, void **lib, const char *soname, const char *needs, const char *const *names, size_t n,
                 void **fns);
/* Defines `static int fname(kth_db_t *db)`: kth__dl_load of the functions FUNCS lists (an X-macro: FUNCS(X) is
 * X(f1) X(f2) ...), each stored by SET(f), which may use `fns[i++]` (the function's address). */
#define KTH_DL_LOADER(fname, FUNCS, SET, soname, needs)                                                          \
    static int fname(kth_db_t *db)                                                                               \
    {                                                                                                            \
        static void *lib;                                                                                        \
        static const char *const names[] = {FUNCS(KTH__DL_NAME)};                                                \
        void *fns[sizeof names / sizeof *names];                                                                 \
        if (lib)                                                                                                 \
            return 0;                                                                                            \
        int rc = kth__dl_load(db, &lib, soname, needs, names, sizeof fns / sizeof *fns, fns);                    \
        if (rc != 0)                                                                                             \
            return rc;                                                                                           \
        size_t i = 0;                                                                                            \
        FUNCS(SET)                                                                                               \
        return 0;                                                                                                \
    }
#define KTH__DL_NAME(f) #f,

/* Samples blob: ascending values as LEB128 deltas. */
size_t kth_samples_encode(const uint64_t *v, size_t n, uint8_t **out); /* bytes written to *out (malloc'd) */
int kth_samples_decode(const void *blob, size_t len, uint64_t **out, size_t *n); /* 0, KT_EPARSE, KT_ENOMEM */

/* Sorts v[0..n) ascending; the quantile q of sorted v (linear between order statistics; n > 0). */
void kth__sort_u64(uint64_t *v, size_t n);
double kth__quantile(const uint64_t *v, size_t n, double q);

/* ---------------------------------------------------------------------------------------------------
 * Adding runs (add.c)
 * ------------------------------------------------------------------------------------------------- */

/* A run's identity as given on the command line (NULL members: unknown, or the defaults below). */
typedef struct kth_run_info_t {
    const char *commit;   /* --commit */
    const char *branch;   /* --branch */
    const char *when;     /* --when, ISO 8601; NULL: now */
    const char *machine;  /* --machine; NULL: the snapshot's host */
    const char *const *tags; /* "k=v" strings (--tag) */
    size_t tag_count;        /* entries in tags */
} kth_run_info_t;

/* The longest --tag key stored (bytes); a longer one is refused, as is a key given twice. */
#define KTH_TAG_KEY_MAX 255

/* Parses an ISO 8601 time ("2026-11-27", "2026-11-27T01:02:03", with "Z" or "+hh:mm") to seconds since the
 * epoch (UTC); 0 or -1. */
int kth_parse_time(const char *s, int64_t *out);

/* Stores snapshot bytes json[0..len) (the file as read: its digest identifies the run). *run_id gets the run's
 * id and *added 1, or, when the same bytes are already stored, that run's id and 0. 0, KT_EPARSE (not a
 * snapshot, a bad --when or tag), KT_EIO (database), KT_ENOMEM; err holds one line. */
int kth_add_json(kth_db_t *db, const char *json, size_t len, const kth_run_info_t *info, int64_t *run_id,
                 int *added, char *err, size_t errlen);
/* kth_add_json on a file ("-": standard input). KT_EIO also when it cannot be read. */
int kth_add_file(kth_db_t *db, const char *path, const kth_run_info_t *info, int64_t *run_id, int *added,
                 char *err, size_t errlen);

/* ---------------------------------------------------------------------------------------------------
 * Reading series back (query.c)
 * ------------------------------------------------------------------------------------------------- */

/* A stored run. */
typedef struct kth_run_t {
    int64_t id;        /* database id */
    int64_t when;      /* seconds since the epoch, UTC */
    char *commit;      /* "" when unknown */
    char *branch;      /* "" when unknown */
    char *machine;     /* machine name */
} kth_run_t;

/* One run of one series. */
typedef struct kth_point_t {
    uint32_t run;      /* index into kth_history_t.runs (time order) */
    double median;     /* ns: median of the reservoir sample (p50 without samples) */
    double q1, q3;     /* ns: quartiles of the sample (the median without samples) */
    uint32_t samples;  /* reservoir size */
} kth_point_t;

/* One (kernel, backend, device, machine) over runs, in time order. */
typedef struct kth_series_t {
    int64_t id;        /* database id */
    char *kernel, *backend, *device, *machine; /* the key (backend as kt_backend_name writes it) */
    size_t n;          /* points */
    kth_point_t *pts;  /* one per run the series appears in, in time order */
} kth_series_t;

/* What to read (NULL / 0: everything). */
typedef struct kth_filter_t {
    const char *kernel;  /* fnmatch glob on kernel names */
    const char *device;  /* fnmatch glob on device names */
    const char *machine; /* fnmatch glob on machine names */
    const char *branch;  /* exact branch */
    size_t last;         /* only the last N runs that hold a series the filters above keep */
} kth_filter_t;

/* What was read: runs and series (released with kth_history_free). */
typedef struct kth_history_t {
    size_t run_count;     /* runs kept by the filter */
    kth_run_t *runs;      /* ascending by time, then id */
    size_t series_count;  /* series with at least one point among those runs */
    kth_series_t *series; /* by kernel, backend, device, machine (byte order) */
} kth_history_t;

int kth_load(kth_db_t *db, const kth_filter_t *f, kth_history_t *out);
void kth_history_free(kth_history_t *h);
/* The stored reservoir of one series in one run (malloc'd, ascending; *n 0 when none). */
int kth_load_samples(kth_db_t *db, int64_t series_id, int64_t run_id, uint64_t **out, size_t *n);

/* ---------------------------------------------------------------------------------------------------
 * Finding changes (detect.c)
 * ------------------------------------------------------------------------------------------------- */

/* Where a series' raw samples come from (the database, or a generator in tests). 0 or KT_E*. */
typedef int (*kth_samples_fn)(void *ctx, const kth_history_t *h, size_t series, size_t point, uint64_t **out,
                              size_t *n);
int kth_db_samples_fn(void *db, const kth_history_t *h, size_t series, size_t point, uint64_t **out, size_t *n);

typedef struct kth_check_opts_t {
    double threshold_pct; /* smallest change reported, percent; 0 = 5 */
    double alpha;         /* false discovery rate (Benjamini-Hochberg over all candidates); 0 = 0.05 */
    double penalty;       /* split penalty factor (x noise^2 x ln n); 0 = 3 */
    size_t window;        /* runs each side compared; 0 = 5 */
    size_t tail;          /* also compare the last N runs of each series with the runs before them (--tail); 0: no */
} kth_check_opts_t;

/* A confirmed change. */
typedef struct kth_change_t {
    size_t series;       /* index into the history's series */
    size_t at;           /* first point at the new level */
    double before_ns, after_ns; /* medians of the pooled samples of the windows either side */
    double change;       /* after / before - 1 (0.1: 10 % slower) */
    double ci_lo, ci_hi; /* confidence interval of `change` (bootstrap, from kt_compare) */
    double p, q;         /* U-test p-value, Benjamini-Hochberg adjusted */
    int fixed;           /* a regression whose series later returns within the threshold of `before_ns` */
    size_t fixed_at;     /* the point where it did (when fixed) */
    int tail;            /* found by the tail test (opts.tail): the last runs against those before, not a level yet */
} kth_change_t;

typedef struct kth_check_result_t {
    size_t count;          /* confirmed changes */
    kth_change_t *changes; /* by series, then point */
    size_t candidates;     /* change points proposed before confirmation */
    size_t regressions;    /* changes slower, not fixed since */
    kth_check_opts_t opts; /* defaults filled in */
} kth_check_result_t;

/* Change points of one series of values (log medians), E-divisive means by binary segmentation with a penalty;
 * indices of the first point of each new segment, ascending, into *cps (capacity n). Returns the count. */
size_t kth_change_points(const double *x, size_t n, double penalty, size_t *cps);
int kth_check(const kth_history_t *h, kth_samples_fn fn, void *ctx, const kth_check_opts_t *opts,
              kth_check_result_t *out);
void kth_check_free(kth_check_result_t *r);

/* ---------------------------------------------------------------------------------------------------
 * Output (print.c)
 * ------------------------------------------------------------------------------------------------- */

typedef enum kth_format_t { KTH_FMT_TEXT = 0, KTH_FMT_MARKDOWN, KTH_FMT_CSV, KTH_FMT_JSON, KTH_FMT_HTML } kth_format_t;
int kth_parse_format(const char *s, kth_format_t *out);

/* `history show`: one row per series (latest median, change against the median of the previous runs, sparkline).
 * check may be NULL (HTML then marks no changes). commit_url: template with {commit}, or NULL. 0 or KT_EIO. */
int kth_print_show(FILE *out, const kth_history_t *h, const kth_check_result_t *check, kth_format_t fmt,
                   const char *commit_url);
/* `history check`: the changes found. */
int kth_print_check(FILE *out, const kth_history_t *h, const kth_check_result_t *r, kth_format_t fmt,
                    const char *commit_url);

/* ---------------------------------------------------------------------------------------------------
 * Synthetic histories (synth.c): for the accuracy test and the scale bench
 * ------------------------------------------------------------------------------------------------- */

typedef struct kth_synth_opts_t {
    uint64_t seed;        /* deterministic */
    size_t runs, kernels; /* history size */
    uint32_t samples;     /* reservoir per kernel and run */
    double run_noise;     /* relative run-to-run spread of the median (e.g. 0.02) */
    double sample_noise;  /* relative spread of samples within a run (e.g. 0.05) */
    double outlier_rate;  /* chance a run of a kernel is an outlier (+30..80 %) */
    double drift;         /* largest relative drift over the whole history of a machine (linear) */
    double step_share;    /* share of kernels given one step */
    const double *steps;  /* step sizes chosen among (relative, e.g. 0.1) */
    size_t step_kinds;    /* entries in steps */
} kth_synth_opts_t;

/* A generated history: the series' truth. */
typedef struct kth_synth_t {
    kth_history_t h;     /* runs and series (medians and quartiles of the generated samples) */
    double *step;        /* per series: its step (0 = stationary) */
    size_t *step_at;     /* per series: first point after the step */
    kth_synth_opts_t opts; /* the options it was made with */
} kth_synth_t;

int kth_synth(const kth_synth_opts_t *o, kth_synth_t *out);
void kth_synth_free(kth_synth_t *s);
/* The samples of (series, point), regenerated deterministically: a kth_samples_fn with ctx the kth_synth_t. */
int kth_synth_samples_fn(void *ctx, const kth_history_t *h, size_t series, size_t point, uint64_t **out, size_t *n);
/* The synthetic run as snapshot JSON (for adding through the real path): malloc'd text. */
char *kth_synth_run_json(const kth_synth_t *s, size_t run, size_t *len);

#endif
