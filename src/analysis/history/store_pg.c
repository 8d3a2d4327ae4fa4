/* store_pg.c — the PostgreSQL engine of the history store (libpq): a fleet's shared history. Parameters go as
 * text (blobs as binary), results come back as text and are typed by their column's type. Writers serialise on
 * a transaction-scoped advisory lock, so concurrent adds never race on a series' row.
 * libpq is loaded when a postgresql:// store is opened, never linked: it brings ~25 libraries (OpenSSL, GnuTLS,
 * Kerberos, LDAP) whose loading and relocation cost every start of the CLI ~4 ms of CPU and ~400 page faults,
 * `ktiming run` included (docs/run.md, the heavy case of bench/run_overhead). */
#include "history.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* ===================================================================================================== *
 * Naming a server: which strings are one, and how messages write it (never with its password)
 * ===================================================================================================== */

/* The first keyword of a libpq key=value connection string ("host=db dbname=perf"): such a string names a server,
 * never a SQLite file (it once became a file of that name). The keywords of libpq's documentation. */
static const char *const kConninfoKeys[] = {
    "host", "hostaddr", "port", "dbname", "user", "password", "passfile", "require_auth", "channel_binding",
    "connect_timeout", "client_encoding", "options", "application_name", "fallback_application_name", "keepalives",
    "keepalives_idle", "keepalives_interval", "keepalives_count", "tcp_user_timeout", "replication", "gssencmode",
    "sslmode", "requiressl", "sslcompression", "sslcert", "sslkey", "sslpassword", "sslcertmode", "sslrootcert",
    "sslcrl", "sslcrldir", "sslsni", "requirepeer", "ssl_min_protocol_version", "ssl_max_protocol_version",
    "krbsrvname", "gsslib", "gssdelegation", "service", "target_session_attrs", "load_balance_hosts", NULL};

int kth_is_server(const char *where)
{
    if (!where)
        return 0;
    if (!strncmp(where, "postgresql://", 13) || !strncmp(where, "postgres://", 11))
        return 1;
    const char *p = where;
    while (*p == ' ' || *p == '\t')
        p++;
    size_t n = 0;
    while (isalnum((unsigned char)p[n]) || p[n] == '_')
        n++;
    const char *q = p + n;
    while (*q == ' ' || *q == '\t')
        q++;
    if (!n || *q != '=')
        return 0;
    for (const char *const *k = kConninfoKeys; *k; k++)
        if (strlen(*k) == n && !strncmp(*k, p, n))
            return 1;
    return 0;
}

/* Appends s[0..n) to out (capacity cap, used *o), always NUL-terminated. */
static void put(char *out, size_t cap, size_t *o, const char *s, size_t n)
{
    for (size_t i = 0; i < n && *o + 1 < cap; i++)
        out[(*o)++] = s[i];
    out[*o] = '\0';
}

void kth_server_display(const char *where, char *out, size_t cap)
{
    size_t o = 0;
    if (!cap)
        return;
    *out = '\0';
    const char *scheme = strstr(where, "://");
    if (scheme && (!strncmp(where, "postgresql://", 13) || !strncmp(where, "postgres://", 11))) {
        /* URL: user:secret@ loses ":secret" (the credentials end at the first '@' before any '/', as libpq reads
         * them); a password=... of the query is left out. */
        const char *auth = scheme + 3, *at = auth + strcspn(auth, "@/");
        put(out, cap, &o, where, (size_t)(auth - where));
        if (*at == '@') {
            const char *colon = memchr(auth, ':', (size_t)(at - auth));
            put(out, cap, &o, auth, (size_t)((colon ? colon : at) - auth));
            auth = at;
        }
        const char *query = strchr(auth, '?');
        put(out, cap, &o, auth, (size_t)((query ? query : auth + strlen(auth)) - auth));
        if (!query)
            return;
        const char *sep = "?";
        for (const char *item = query + 1; *item;) {
            size_t len = strcspn(item, "&#");
            if (!(len >= 9 && !strncmp(item, "password=", 9)) && len) {
                put(out, cap, &o, sep, 1);
                put(out, cap, &o, item, len);
                sep = "&";
            }
            item += len;
            if (*item == '#') {
                put(out, cap, &o, item, strlen(item));
                break;
            }
            if (*item == '&')
                item++;
        }
        return;
    }
    /* key=value pairs: password=... (a value may be quoted, with \' and \\ inside) is left out. */
    for (const char *p = where; *p;) {
        const char *start = p;
        while (*p == ' ' || *p == '\t')
            p++;
        const char *key = p;
        while (*p && *p != '=' && *p != ' ' && *p != '\t')
            p++;
        int secret = (size_t)(p - key) == 8 && !strncmp(key, "password", 8);
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '=') {
            p++;
            while (*p == ' ' || *p == '\t')
                p++;
            if (*p == '\'') {
                for (p++; *p && *p != '\''; p++)
                    if (*p == '\\' && p[1])
                        p++;
                if (*p)
                    p++;
            } else {
                while (*p && *p != ' ' && *p != '\t')
                    p++;
            }
        }
        if (p == start) /* nothing consumed: stop rather than loop */
            break;
        if (!secret)
            put(out, cap, &o, start, (size_t)(p - start));
    }
    while (o && out[o - 1] == ' ')
        out[--o] = '\0';
    if (*out == ' ')
        memmove(out, out + 1, o--);
}

#if KTH_HAVE_LIBPQ
#include <dlfcn.h>
#include <libpq-fe.h>

/* The libpq functions used here, resolved from the library at the first open. */
#define KTH_PQ_FUNCS(X)                                                                                          \
    X(PQclear) X(PQconnectdb) X(PQerrorMessage) X(PQexec) X(PQexecParams) X(PQfinish) X(PQfreemem) X(PQftype)  \
    X(PQgetisnull) X(PQgetvalue) X(PQnfields) X(PQntuples) X(PQresultErrorMessage) X(PQresultStatus)           \
    X(PQsetNoticeProcessor) X(PQstatus) X(PQunescapeBytea)

static struct {
#define KTH_PQ_FIELD(f) __typeof__(f) *f;
    KTH_PQ_FUNCS(KTH_PQ_FIELD)
#undef KTH_PQ_FIELD
} pq;

/* Loads libpq once (the handle is kept for the process): pq_load(db), 0 or KT_ENOTSUP with db->err set. */
#define KTH_SET(f) pq.f = (__typeof__(pq.f))fns[i++];
KTH_DL_LOADER(pq_load, KTH_PQ_FUNCS, KTH_SET, KTH_LIBPQ_SONAME, "PostgreSQL needs libpq")
#undef KTH_SET

/* Type OIDs (pg_type.h): integers, floating point, bytea. */
enum { OID_BYTEA = 17, OID_INT8 = 20, OID_INT2 = 21, OID_INT4 = 23, OID_FLOAT4 = 700, OID_FLOAT8 = 701,
       OID_NUMERIC = 1700 };

static void pg_err(kth_db_t *db, const char *msg)
{
    snprintf(db->err, sizeof db->err, "%s: %s", db->where, msg && *msg ? msg : "PostgreSQL error");
    size_t n = 0;
    for (const char *c = db->err; *c; c++) { /* one line: line breaks and tabs as one space */
        int blank = *c == '\n' || *c == '\r' || *c == '\t';
        if (!blank || (n && db->err[n - 1] != ' '))
            db->err[n++] = blank ? ' ' : *c;
    }
    db->err[n] = '\0';
    while (n && db->err[n - 1] == ' ')
        db->err[--n] = '\0';
}

static void quiet_notice(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

static int pg_exec(kth_db_t *db, const char *sql, const kth_val_t *p, int np, kth_row_cb cb, void *ctx)
{
    PGconn *c = db->conn;
    const char *values[32];
    int lengths[32], formats[32];
    char num[32][40];
    if (np > 32) {
        pg_err(db, "too many parameters");
        return KT_EINVAL;
    }
    for (int i = 0; i < np; i++) {
        lengths[i] = 0;
        formats[i] = 0;
        switch (p[i].t) {
        case KTH_NULL: values[i] = NULL; break;
        case KTH_INT: snprintf(num[i], sizeof num[i], "%lld", (long long)p[i].i); values[i] = num[i]; break;
        case KTH_REAL: snprintf(num[i], sizeof num[i], "%.17g", p[i].d); values[i] = num[i]; break;
        case KTH_TEXT: values[i] = p[i].s; break;
        case KTH_BLOB:
            values[i] = p[i].b ? p[i].b : "";
            lengths[i] = (int)p[i].len;
            formats[i] = 1;
            break;
        }
    }
    PGresult *r = np ? pq.PQexecParams(c, sql, np, NULL, values, lengths, formats, 0) : pq.PQexec(c, sql);
    ExecStatusType st = pq.PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        pg_err(db, pq.PQresultErrorMessage(r));
        pq.PQclear(r);
        return KT_EIO;
    }
    int stop = 0, rows = pq.PQntuples(r), n = pq.PQnfields(r);
    if (n > 32)
        n = 32;
    kth_val_t cols[32];
    unsigned char *blobs[32];
    for (int row = 0; cb && row < rows && !stop; row++) {
        for (int i = 0; i < n; i++) {
            kth_val_t *v = &cols[i];
            memset(v, 0, sizeof *v);
            blobs[i] = NULL;
            if (pq.PQgetisnull(r, row, i))
                continue;
            const char *s = pq.PQgetvalue(r, row, i);
            switch (pq.PQftype(r, i)) {
            case OID_INT8: case OID_INT2: case OID_INT4:
                v->t = KTH_INT; v->i = strtoll(s, NULL, 10); v->d = (double)v->i; break;
            case OID_FLOAT4: case OID_FLOAT8: case OID_NUMERIC:
                v->t = KTH_REAL; v->d = strtod(s, NULL); v->i = (int64_t)v->d; break;
            case OID_BYTEA: {
                size_t len = 0;
                blobs[i] = pq.PQunescapeBytea((const unsigned char *)s, &len);
                v->t = KTH_BLOB; v->b = blobs[i]; v->len = blobs[i] ? len : 0;
                break;
            }
            default: v->t = KTH_TEXT; v->s = s; break;
            }
        }
        stop = cb(ctx, cols, n);
        for (int i = 0; i < n; i++)
            if (blobs[i])
                pq.PQfreemem(blobs[i]);
    }
    pq.PQclear(r);
    return stop;
}

static void pg_close(kth_db_t *db)
{
    if (db->conn)
        pq.PQfinish(db->conn);
    db->conn = NULL;
}

static const kth_engine_t kPostgres = {
    .name = "postgresql",
    .id_type = "BIGSERIAL PRIMARY KEY",
    .blob_type = "BYTEA",
    .begin_write = "BEGIN; SELECT pg_advisory_xact_lock(7306010842)",
    .exec = pg_exec,
    .close = pg_close,
};

int kth__pg_open(kth_db_t *db, const char *url)
{
    db->engine = &kPostgres;
    /* Messages name the server without the password (postgresql://user:secret@host → postgresql://user@host). */
    kth_server_display(url, db->where, sizeof db->where);
    int rc = pq_load(db);
    if (rc)
        return rc;
    PGconn *c = pq.PQconnectdb(url);
    db->conn = c;
    if (!c || pq.PQstatus(c) != CONNECTION_OK) {
        pg_err(db, c ? pq.PQerrorMessage(c) : "cannot connect");
        return KT_EIO;
    }
    pq.PQsetNoticeProcessor(c, quiet_notice, NULL);
    return 0;
}

#else /* !KTH_HAVE_LIBPQ */

int kth__pg_open(kth_db_t *db, const char *url)
{
    (void)url;
    snprintf(db->err, sizeof db->err, "%s", "history: this ktiming was built without PostgreSQL (libpq); "
                                              "rebuild with libpq-dev installed");
    return KT_ENOTSUP;
}

#endif
