/* store_sqlite.c — the SQLite engine of the history store: a file in WAL mode with a busy timeout, so several
 * writers (CI jobs on one machine) queue instead of failing; prepared statements cached per SQL text.
 * SQLite is loaded when a store is opened, never linked (as libpq is, store_pg.c): linked, the dynamic loader
 * mapped and relocated it at every start of the CLI, `ktiming run` included, before anything ran (docs/run.md). */
#include "history.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The SQLite functions used here, resolved from the library at the first open. */
#define KTH_SQL_FUNCS(X)                                                                                         \
    X(sqlite3_bind_blob64) X(sqlite3_bind_double) X(sqlite3_bind_int64) X(sqlite3_bind_null)                   \
    X(sqlite3_bind_text) X(sqlite3_busy_timeout) X(sqlite3_clear_bindings) X(sqlite3_close)                    \
    X(sqlite3_column_blob) X(sqlite3_column_bytes) X(sqlite3_column_count) X(sqlite3_column_double)            \
    X(sqlite3_column_int64) X(sqlite3_column_text) X(sqlite3_column_type) X(sqlite3_errmsg) X(sqlite3_errstr)  \
    X(sqlite3_exec) X(sqlite3_extended_result_codes) X(sqlite3_finalize) X(sqlite3_free) X(sqlite3_open_v2)    \
    X(sqlite3_prepare_v2) X(sqlite3_reset) X(sqlite3_sql) X(sqlite3_step)

static struct {
#define KTH_SQL_FIELD(f) __typeof__(f) *f;
    KTH_SQL_FUNCS(KTH_SQL_FIELD)
#undef KTH_SQL_FIELD
} sq;

/* Loads SQLite once (the handle is kept for the process): sqlite_load(db), 0 or KT_ENOTSUP with db->err set. */
#define KTH_SET(f) sq.f = (__typeof__(sq.f))fns[i++];
KTH_DL_LOADER(sqlite_load, KTH_SQL_FUNCS, KTH_SET, KTH_SQLITE_SONAME, "the store needs SQLite")
#undef KTH_SET

/* How long a writer waits for another's transaction before giving up (ms). */
#define KTH_SQLITE_BUSY_MS 120000
/* Prepared statements kept (keyed by the SQL text's address, checked against the text). */
#define KTH_SQLITE_CACHE 32

typedef struct sqlite_cache_t {
    const char *sql[KTH_SQLITE_CACHE];      /* key */
    sqlite3_stmt *stmt[KTH_SQLITE_CACHE];   /* prepared */
    int read;                               /* opened to read (KTH_OPEN_READ) */
    int immutable;                          /* read as an immutable file: `opened` tells whether it changed */
    struct stat opened;                     /* the file when it was opened (immutable) */
} sqlite_cache_t;

static void sqlite_err(kth_db_t *db, int rc)
{
    sqlite3 *c = db->conn;
    sqlite_cache_t *cache = db->cache;
    if ((rc == SQLITE_CANTOPEN || rc == SQLITE_READONLY || rc == SQLITE_PERM) && cache)
        /* Name the permission problem rather than SQLite's "attempt to write a readonly database". */
        snprintf(db->err, sizeof db->err, "%s: %s (%s)", db->where, c ? sq.sqlite3_errmsg(c) : sq.sqlite3_errstr(rc),
                 cache->read ? "reading it needs its -wal and -shm files beside it, or write access to its folder to "
                               "make them"
                             : "adding needs write access to it, its folder and its -wal and -shm files");
    else if (rc == SQLITE_NOTADB)
        snprintf(db->err, sizeof db->err, "%s: not a ktiming history (not a SQLite database)", db->where);
    else if (rc == SQLITE_CORRUPT)
        snprintf(db->err, sizeof db->err, "%s: the SQLite database is corrupt (%s)", db->where,
                 c ? sq.sqlite3_errmsg(c) : sq.sqlite3_errstr(rc));
    else
        snprintf(db->err, sizeof db->err, "%s: %s", db->where, c ? sq.sqlite3_errmsg(c) : sq.sqlite3_errstr(rc));
}

static sqlite3_stmt *prepare(kth_db_t *db, const char *sql, int *rc)
{
    sqlite_cache_t *cache = db->cache;
    size_t h = ((uintptr_t)sql >> 3) % KTH_SQLITE_CACHE;
    if (cache->sql[h] == sql && !strcmp(sq.sqlite3_sql(cache->stmt[h]), sql)) { /* a buffer may be reused */
        sq.sqlite3_reset(cache->stmt[h]);
        sq.sqlite3_clear_bindings(cache->stmt[h]);
        return cache->stmt[h];
    }
    sqlite3_stmt *st = NULL;
    *rc = sq.sqlite3_prepare_v2(db->conn, sql, -1, &st, NULL);
    if (*rc != SQLITE_OK)
        return NULL;
    if (cache->stmt[h])
        sq.sqlite3_finalize(cache->stmt[h]);
    cache->sql[h] = sql;
    cache->stmt[h] = st;
    return st;
}

static int sqlite_exec(kth_db_t *db, const char *sql, const kth_val_t *p, int np, kth_row_cb cb, void *ctx)
{
    int rc = SQLITE_OK;
    sqlite3_stmt *st = prepare(db, sql, &rc);
    if (!st) {
        sqlite_err(db, rc);
        return KT_EIO;
    }
    for (int i = 0; i < np; i++) {
        switch (p[i].t) {
        case KTH_NULL: rc = sq.sqlite3_bind_null(st, i + 1); break;
        case KTH_INT: rc = sq.sqlite3_bind_int64(st, i + 1, p[i].i); break;
        case KTH_REAL: rc = sq.sqlite3_bind_double(st, i + 1, p[i].d); break;
        case KTH_TEXT: rc = sq.sqlite3_bind_text(st, i + 1, p[i].s, -1, SQLITE_STATIC); break;
        case KTH_BLOB: rc = sq.sqlite3_bind_blob64(st, i + 1, p[i].b ? p[i].b : "", p[i].len, SQLITE_STATIC); break;
        }
        if (rc != SQLITE_OK) {
            sqlite_err(db, rc);
            return KT_EIO;
        }
    }
    kth_val_t cols[32];
    int stop = 0;
    while ((rc = sq.sqlite3_step(st)) == SQLITE_ROW) {
        if (!cb || stop)
            continue;
        int n = sq.sqlite3_column_count(st);
        if (n > 32)
            n = 32;
        for (int i = 0; i < n; i++) {
            kth_val_t *c = &cols[i];
            memset(c, 0, sizeof *c);
            switch (sq.sqlite3_column_type(st, i)) {
            case SQLITE_INTEGER: c->t = KTH_INT; c->i = sq.sqlite3_column_int64(st, i); c->d = (double)c->i; break;
            case SQLITE_FLOAT: c->t = KTH_REAL; c->d = sq.sqlite3_column_double(st, i); c->i = (int64_t)c->d; break;
            case SQLITE_TEXT: c->t = KTH_TEXT; c->s = (const char *)sq.sqlite3_column_text(st, i); break;
            case SQLITE_BLOB:
                c->t = KTH_BLOB;
                c->b = sq.sqlite3_column_blob(st, i);
                c->len = (size_t)sq.sqlite3_column_bytes(st, i);
                break;
            default: c->t = KTH_NULL; break;
            }
        }
        stop = cb(ctx, cols, n);
    }
    if (rc != SQLITE_DONE) {
        sqlite_err(db, rc);
        sq.sqlite3_reset(st);
        return KT_EIO;
    }
    sq.sqlite3_reset(st);
    return stop;
}

static void sqlite_close(kth_db_t *db)
{
    sqlite_cache_t *cache = db->cache;
    for (size_t i = 0; cache && i < KTH_SQLITE_CACHE; i++)
        if (cache->stmt[i])
            sq.sqlite3_finalize(cache->stmt[i]);
    free(cache);
    db->cache = NULL;
    if (db->conn)
        sq.sqlite3_close(db->conn);
    db->conn = NULL;
}

/* Whether an immutable read's file was written since it was opened (its content may then be inconsistent). */
static int sqlite_changed(kth_db_t *db)
{
    sqlite_cache_t *cache = db->cache;
    struct stat now;
    if (!cache || !cache->immutable)
        return 0;
    if (stat(db->where, &now) != 0)
        return 1;
    const struct stat *o = &cache->opened;
    return now.st_dev != o->st_dev || now.st_ino != o->st_ino || now.st_size != o->st_size ||
           now.st_mtim.tv_sec != o->st_mtim.tv_sec || now.st_mtim.tv_nsec != o->st_mtim.tv_nsec;
}

static const kth_engine_t kSqlite = {
    .name = "sqlite",
    .id_type = "INTEGER PRIMARY KEY",
    .blob_type = "BLOB",
    .begin_write = "BEGIN IMMEDIATE",
    .exec = sqlite_exec,
    .close = sqlite_close,
    .changed = sqlite_changed,
};

/* "file:" URI of an existing file, read as immutable: its absolute path with %, ? and # escaped. 0 or -1. */
static int immutable_uri(const char *path, char *out, size_t cap)
{
    char abs[PATH_MAX];
    if (!realpath(path, abs) || cap < 32)
        return -1;
    size_t o = (size_t)snprintf(out, cap, "file:");
    for (const char *p = abs; *p; p++) {
        if (o + 24 > cap)
            return -1;
        if (*p == '%' || *p == '?' || *p == '#')
            o += (size_t)snprintf(out + o, cap - o, "%%%02X", (unsigned char)*p);
        else
            out[o++] = *p;
    }
    snprintf(out + o, cap - o, "?immutable=1");
    return 0;
}

/* How a read opens the file, creating nothing beside it that its owner could not use afterwards:
 * - write access to the file and its folder: read-write (never created, nothing written); the last connection
 *   to close removes SQLite's -wal and -shm files, as a writer's does (a read-only one would leave them);
 * - otherwise, no -wal beside it, or an empty one (nothing since the last checkpoint): immutable, which creates
 *   nothing and takes no lock, its modification time checked at the end (kth_changed) since a writer could still
 *   start meanwhile;
 * - otherwise read-only, through the -wal and -shm that are there. */
static int read_mode(const char *path, char *uri, size_t cap, struct stat *st)
{
    char dir[PATH_MAX], wal[PATH_MAX + 8];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        slash[slash == dir] = '\0'; /* "/x" -> "/" */
    snprintf(wal, sizeof wal, "%s-wal", path);
    if (access(path, W_OK) == 0 && access(dir, W_OK) == 0)
        return SQLITE_OPEN_READWRITE;
    struct stat ws;
    int no_wal = stat(wal, &ws) != 0 ? errno == ENOENT : ws.st_size == 0; /* an empty one holds nothing to read */
    if (no_wal && stat(path, st) == 0 && immutable_uri(path, uri, cap) == 0)
        return SQLITE_OPEN_READONLY | SQLITE_OPEN_URI;
    return SQLITE_OPEN_READONLY;
}

int kth__sqlite_open(kth_db_t *db, const char *path, int how)
{
    db->engine = &kSqlite;
    snprintf(db->where, sizeof db->where, "%s", path);
    int rc = sqlite_load(db);
    if (rc != 0)
        return rc;
    sqlite_cache_t *cache = calloc(1, sizeof(sqlite_cache_t));
    if (!(db->cache = cache)) {
        snprintf(db->err, sizeof db->err, "%s: out of memory", path);
        return KT_ENOMEM;
    }
    char uri[PATH_MAX * 3 + 32];
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
    cache->read = how == KTH_OPEN_READ;
    if (cache->read) {
        flags = read_mode(path, uri, sizeof uri, &cache->opened);
        cache->immutable = (flags & SQLITE_OPEN_URI) != 0;
    }
    sqlite3 *c = NULL;
    rc = sq.sqlite3_open_v2(cache->immutable ? uri : path, &c, flags | SQLITE_OPEN_NOMUTEX, NULL);
    db->conn = c;
    if (rc != SQLITE_OK) {
        sqlite_err(db, rc);
        return KT_EIO;
    }
    sq.sqlite3_busy_timeout(c, KTH_SQLITE_BUSY_MS);
    sq.sqlite3_extended_result_codes(c, 0);
    if (cache->read) /* the file's journal mode is the writer's to set: a read changes nothing */
        return 0;
    /* WAL: readers never block the writer. Switching needs the file's lock for a moment; a busy answer (another
     * process opening at the same moment) is retried by the busy handler set above. */
    static const char *const kPragmas[] = {"PRAGMA journal_mode = WAL", "PRAGMA synchronous = NORMAL",
                                           "PRAGMA foreign_keys = ON", "PRAGMA cache_size = -32768", NULL};
    for (const char *const *pr = kPragmas; *pr; pr++) {
        /* The switch to WAL of a file that other processes are opening at the same moment can answer SQLITE_BUSY
         * at once, without the busy handler (SQLite does so where waiting could deadlock): 8 writers on a new file
         * lost 3 runs that way. Retried here, with growing naps, for as long as the busy timeout. */
        long waited_us = 0, nap_us = 1000;
        for (;;) {
            char *msg = NULL;
            rc = sq.sqlite3_exec(c, *pr, NULL, NULL, &msg);
            sq.sqlite3_free(msg);
            if ((rc != SQLITE_BUSY && rc != SQLITE_LOCKED) || waited_us >= KTH_SQLITE_BUSY_MS * 1000L)
                break;
            struct timespec ts = {0, nap_us * 1000L};
            nanosleep(&ts, NULL);
            waited_us += nap_us;
            nap_us = nap_us < 64000 ? nap_us * 2 : nap_us;
        }
        if (rc != SQLITE_OK) {
            sqlite_err(db, rc);
            return KT_EIO;
        }
    }
    return 0;
}
