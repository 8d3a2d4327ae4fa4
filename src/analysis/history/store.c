/* store.c — the history's storage interface: opening either engine, the versioned schema and its migrations,
 * and the samples' compact encoding. The SQL here is the one text both engines run. */
#include "history.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ===================================================================================================== *
 * Schema: one migration per version, each a list of statements (@ID the id type, @BLOB the blob type)
 * ===================================================================================================== */

static const char *const kMigration1[] = {
    "CREATE TABLE IF NOT EXISTS kt_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE kt_run (id @ID, digest TEXT NOT NULL UNIQUE, commit_sha TEXT NOT NULL, branch TEXT NOT NULL,"
    " run_time BIGINT NOT NULL, machine TEXT NOT NULL, host TEXT NOT NULL, generator TEXT NOT NULL,"
    " added_by TEXT NOT NULL, taken_ns BIGINT NOT NULL, kernels_dropped BIGINT NOT NULL)",
    "CREATE INDEX kt_run_time ON kt_run (run_time, id)",
    "CREATE TABLE kt_device (run_id BIGINT NOT NULL REFERENCES kt_run (id), backend TEXT NOT NULL,"
    " name TEXT NOT NULL, clock_domain TEXT NOT NULL, resolution_ns BIGINT NOT NULL, frequency_hz BIGINT NOT NULL,"
    " valid_bits BIGINT NOT NULL, error_bound_ns BIGINT NOT NULL, drift_ppm DOUBLE PRECISION NOT NULL,"
    " model_samples BIGINT NOT NULL)",
    "CREATE TABLE kt_series (id @ID, kernel TEXT NOT NULL, backend TEXT NOT NULL, device TEXT NOT NULL,"
    " machine TEXT NOT NULL, UNIQUE (kernel, backend, device, machine))",
    "CREATE TABLE kt_result (series_id BIGINT NOT NULL REFERENCES kt_series (id),"
    " run_id BIGINT NOT NULL REFERENCES kt_run (id), dispatches BIGINT NOT NULL, total_ns BIGINT NOT NULL,"
    " min_ns BIGINT NOT NULL, max_ns BIGINT NOT NULL, mean_ns DOUBLE PRECISION NOT NULL,"
    " stddev_ns DOUBLE PRECISION, p50_ns BIGINT NOT NULL, p90_ns BIGINT NOT NULL, p99_ns BIGINT NOT NULL,"
    " median_ns DOUBLE PRECISION NOT NULL, q1_ns DOUBLE PRECISION NOT NULL, q3_ns DOUBLE PRECISION NOT NULL,"
    " errors BIGINT NOT NULL, dropped BIGINT NOT NULL, bound_ns BIGINT NOT NULL, sample_count BIGINT NOT NULL,"
    " samples @BLOB, PRIMARY KEY (run_id, series_id))", /* run first: a run's rows append to the key's end */
    NULL};
/* Version 2: run tags, found by key and value too. */
static const char *const kMigration2[] = {
    "CREATE TABLE kt_tag (run_id BIGINT NOT NULL REFERENCES kt_run (id), key TEXT NOT NULL, value TEXT NOT NULL,"
    " PRIMARY KEY (run_id, key))",
    "CREATE INDEX kt_tag_key ON kt_tag (key, value)",
    NULL};
static const char *const *const kMigrations[KTH_SCHEMA_VERSION] = {kMigration1, kMigration2};

/* ===================================================================================================== *
 * Statements
 * ===================================================================================================== */

int kth_exec(kth_db_t *db, const char *sql, const kth_val_t *params, int nparams, kth_row_cb cb, void *ctx)
{
    return db->engine->exec(db, sql, params, nparams, cb, ctx);
}

static int set_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return 0;
}

/* Row callbacks: the first column as text into a buffer, or as an integer. */
typedef struct text_buf_t {
    char s[128]; /* the value */
    int rows;    /* rows seen */
} text_buf_t;

static int row_text(void *ctx, const kth_val_t *c, int n)
{
    text_buf_t *t = ctx;
    if (n > 0 && c[0].t == KTH_TEXT && !t->rows)
        snprintf(t->s, sizeof t->s, "%s", c[0].s);
    else if (n > 0 && c[0].t == KTH_INT && !t->rows)
        snprintf(t->s, sizeof t->s, "%lld", (long long)c[0].i);
    t->rows++;
    return 0;
}

/* Tables present: whether kt_meta is among them and how many there are. */
typedef struct tables_t {
    int count;    /* tables */
    int has_meta; /* kt_meta is one */
} tables_t;

static int row_table(void *ctx, const kth_val_t *c, int n)
{
    tables_t *t = ctx;
    t->count++;
    if (n > 0 && c[0].t == KTH_TEXT && !strcmp(c[0].s, "kt_meta"))
        t->has_meta = 1;
    return 0;
}

static int meta_get(kth_db_t *db, const char *key, char *out, size_t len)
{
    text_buf_t t = {{0}, 0};
    kth_val_t p = {.t = KTH_TEXT, .s = key};
    int rc = kth_exec(db, "SELECT value FROM kt_meta WHERE key = $1", &p, 1, row_text, &t);
    if (rc)
        return rc;
    snprintf(out, len, "%s", t.rows ? t.s : "");
    return 0;
}

static int meta_set(kth_db_t *db, const char *key, const char *value)
{
    kth_val_t p[2] = {{.t = KTH_TEXT, .s = key}, {.t = KTH_TEXT, .s = value}};
    return kth_exec(db,
                    "INSERT INTO kt_meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = "
                    "excluded.value",
                    p, 2, NULL, NULL);
}

int kth_schema_version(kth_db_t *db)
{
    char v[32];
    if (meta_get(db, "version", v, sizeof v))
        return 0;
    return atoi(v);
}

/* ===================================================================================================== *
 * Opening and migrating
 * ===================================================================================================== */

/* A migration statement with the engine's type words in place of @ID and @BLOB. */
static void expand(char *out, size_t cap, const char *in, const kth_engine_t *e)
{
    size_t o = 0;
    while (*in && o + 1 < cap) {
        const char *word = !strncmp(in, "@ID", 3) ? e->id_type : !strncmp(in, "@BLOB", 5) ? e->blob_type : NULL;
        if (word) {
            in += word == e->id_type ? 3 : 5;
            for (; *word && o + 1 < cap; word++)
                out[o++] = *word;
        } else {
            out[o++] = *in++;
        }
    }
    out[o] = '\0';
}

/* Applies the migrations above the stored version up to `upto`, inside one serialised transaction. */
static int migrate(kth_db_t *db, int upto, char *err, size_t errlen)
{
    int rc = kth_exec(db, db->engine->begin_write, NULL, 0, NULL, NULL);
    if (rc)
        goto fail;
    char sql[2048];
    snprintf(sql, sizeof sql, "%s", kMigration1[0]);
    if ((rc = kth_exec(db, sql, NULL, 0, NULL, NULL)))
        goto rollback;
    char fmt[64] = "", ver[32] = "";
    if ((rc = meta_get(db, "format", fmt, sizeof fmt)) || (rc = meta_get(db, "version", ver, sizeof ver)))
        goto rollback;
    if (*fmt && strcmp(fmt, "ktiming.history")) {
        kth_exec(db, "ROLLBACK", NULL, 0, NULL, NULL);
        set_err(err, errlen, "%s: not a ktiming history (its kt_meta says format '%s')", db->where, fmt);
        return KT_EPARSE;
    }
    int have = atoi(ver);
    if (have > KTH_SCHEMA_VERSION) {
        kth_exec(db, "ROLLBACK", NULL, 0, NULL, NULL);
        set_err(err, errlen, "%s: history schema version %d is newer than this ktiming reads (%d); upgrade ktiming",
                db->where, have, KTH_SCHEMA_VERSION);
        return KT_EPARSE;
    }
    for (int v = have + 1; v <= upto; v++) {
        for (const char *const *st = kMigrations[v - 1]; *st; st++) {
            expand(sql, sizeof sql, *st, db->engine);
            if ((rc = kth_exec(db, sql, NULL, 0, NULL, NULL)))
                goto rollback;
        }
        snprintf(ver, sizeof ver, "%d", v);
        if ((rc = meta_set(db, "format", "ktiming.history")) || (rc = meta_set(db, "version", ver)))
            goto rollback;
    }
    if ((rc = kth_exec(db, "COMMIT", NULL, 0, NULL, NULL)))
        goto fail;
    return 0;
rollback:
    set_err(err, errlen, "%s", db->err);
    kth_exec(db, "ROLLBACK", NULL, 0, NULL, NULL);
    return rc;
fail:
    set_err(err, errlen, "%s", db->err);
    return rc;
}

static int open_as(const char *where, int upto, int how, kth_db_t **out, char *err, size_t errlen)
{
    if (err && errlen)
        *err = '\0';
    if (!out || !where || !*where || upto < 1 || upto > KTH_SCHEMA_VERSION) {
        set_err(err, errlen, "history: no database given");
        return KT_EINVAL;
    }
    *out = NULL;
    kth_db_t *db = calloc(1, sizeof *db);
    if (!db) {
        set_err(err, errlen, "history: out of memory");
        return KT_ENOMEM;
    }
    int pg = kth_is_server(where);
    int rc = pg ? kth__pg_open(db, where) : kth__sqlite_open(db, where, how);
    if (rc) {
        set_err(err, errlen, "%s", db->err);
        if (db->engine)
            db->engine->close(db);
        free(db);
        return rc;
    }
    /* A database with tables but no kt_meta is someone else's: leave it alone. */
    tables_t t = {0, 0};
    const char *list = pg ? "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
                          : "SELECT name FROM sqlite_master WHERE type = 'table'";
    if ((rc = kth_exec(db, list, NULL, 0, row_table, &t))) {
        set_err(err, errlen, "%s", db->err);
        goto fail;
    }
    if (t.count && !t.has_meta) {
        set_err(err, errlen, "%s: not a ktiming history (the database holds other tables and no kt_meta)", db->where);
        rc = KT_EPARSE;
        goto fail;
    }
    if (how == KTH_OPEN_READ) { /* read as it is: the tables a read uses are there from version 1 on */
        char fmt[64] = "";
        int v = 0;
        if (!t.count) {
            set_err(err, errlen, "%s: no history there (an empty database); add runs first with 'ktiming history add'",
                    db->where);
            rc = KT_EPARSE;
        } else if ((rc = meta_get(db, "format", fmt, sizeof fmt))) {
            set_err(err, errlen, "%s", db->err);
        } else if (strcmp(fmt, "ktiming.history") || (v = kth_schema_version(db)) < 1) {
            set_err(err, errlen, "%s: not a ktiming history (its kt_meta says format '%s')", db->where, fmt);
            rc = KT_EPARSE;
        } else if (v > KTH_SCHEMA_VERSION) {
            set_err(err, errlen, "%s: history schema version %d is newer than this ktiming reads (%d); upgrade ktiming",
                    db->where, v, KTH_SCHEMA_VERSION);
            rc = KT_EPARSE;
        }
        if (rc)
            goto fail;
        *out = db;
        return 0;
    }
    /* Up to date: nothing to write (a read-only copy of a history can be shown and checked). */
    char fmt[64] = "";
    if (t.has_meta && !meta_get(db, "format", fmt, sizeof fmt) && !strcmp(fmt, "ktiming.history") &&
        kth_schema_version(db) == upto) {
        *out = db;
        return 0;
    }
    if ((rc = migrate(db, upto, err, errlen)))
        goto fail;
    *out = db;
    return 0;
fail:
    db->engine->close(db);
    free(db);
    return rc;
}

int kth_open_at(const char *where, int upto, kth_db_t **out, char *err, size_t errlen)
{
    return open_as(where, upto, KTH_OPEN_WRITE, out, err, errlen);
}

int kth_open(const char *where, kth_db_t **out, char *err, size_t errlen)
{
    return open_as(where, KTH_SCHEMA_VERSION, KTH_OPEN_WRITE, out, err, errlen);
}

int kth_open_read(const char *where, kth_db_t **out, char *err, size_t errlen)
{
    return open_as(where, KTH_SCHEMA_VERSION, KTH_OPEN_READ, out, err, errlen);
}

int kth_changed(kth_db_t *db)
{
    return db && db->engine->changed ? db->engine->changed(db) : 0;
}

void kth_close(kth_db_t *db)
{
    if (!db)
        return;
    db->engine->close(db);
    free(db);
}

/* ===================================================================================================== *
 * Samples: sorted, then LEB128 deltas (a 1024-sample reservoir of similar durations takes ~2 KiB, not 8)
 * ===================================================================================================== */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

void kth__sort_u64(uint64_t *v, size_t n)
{
    if (n > 48) {
        qsort(v, n, sizeof *v, cmp_u64);
        return;
    }
    for (size_t i = 1; i < n; i++) { /* small reservoirs: insertion, no allocation */
        uint64_t x = v[i];
        size_t j = i;
        for (; j > 0 && v[j - 1] > x; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
}

double kth__quantile(const uint64_t *v, size_t n, double q)
{
    double pos = q * (double)(n - 1);
    size_t lo = (size_t)pos;
    double f = pos - (double)lo;
    return lo + 1 < n ? (double)v[lo] * (1 - f) + (double)v[lo + 1] * f : (double)v[lo];
}

size_t kth_samples_encode(const uint64_t *v, size_t n, uint8_t **out)
{
    *out = NULL;
    if (!n)
        return 0;
    uint64_t *s = malloc(n * sizeof *s);
    uint8_t *b = malloc(n * 10);
    if (!s || !b) {
        free(s);
        free(b);
        return 0;
    }
    memcpy(s, v, n * sizeof *s);
    for (size_t i = 1; i < n; i++)
        if (s[i] < s[i - 1]) { /* not sorted yet */
            kth__sort_u64(s, n);
            break;
        }
    size_t len = 0;
    uint64_t prev = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t d = s[i] - prev;
        prev = s[i];
        do {
            uint8_t byte = d & 0x7f;
            d >>= 7;
            b[len++] = byte | (d ? 0x80 : 0);
        } while (d);
    }
    free(s);
    *out = b;
    return len;
}

int kth_samples_decode(const void *blob, size_t len, uint64_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    const uint8_t *b = blob;
    size_t count = 0;
    for (size_t i = 0; i < len; i++)
        count += !(b[i] & 0x80);
    if (!count)
        return len ? KT_EPARSE : 0;
    uint64_t *v = malloc(count * sizeof *v);
    if (!v)
        return KT_ENOMEM;
    uint64_t prev = 0;
    size_t k = 0, i = 0;
    while (i < len) {
        uint64_t d = 0;
        unsigned shift = 0;
        for (;;) {
            if (i >= len || shift > 63) {
                free(v);
                return KT_EPARSE;
            }
            uint8_t byte = b[i++];
            d |= (uint64_t)(byte & 0x7f) << shift;
            shift += 7;
            if (!(byte & 0x80))
                break;
        }
        prev += d;
        v[k++] = prev;
    }
    *out = v;
    *n = k;
    return 0;
}

int kth__dl_load(kth_db_t *db, void **lib, const char *soname, const char *needs, const char *const *names, size_t n,
                 void **fns)
{
    if (*lib)
        return 0;
    void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    const char *missing = NULL;
    for (size_t i = 0; h && !missing && i < n; i++)
        if (!(fns[i] = dlsym(h, names[i])))
            missing = names[i];
    if (!h || missing) {
        snprintf(db->err, sizeof db->err, "history: %s (%s): %s", needs, soname, h ? missing : dlerror());
        if (h)
            dlclose(h);
        return KT_ENOTSUP;
    }
    *lib = h;
    return 0;
}
