/* add.c — `history add`: one snapshot file into the store as a run (identity, devices, per-kernel results with
 * their reservoir), in one transaction; the same file twice is recognised by its digest and stored once. */

#include "history.h"

#include <ktiming/analysis.h>

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* ===================================================================================================== *
 * Identity: time, digest, generator
 * ===================================================================================================== */

static int digits(const char **p, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++, (*p)++) {
        if (**p < '0' || **p > '9')
            return -1;
        v = v * 10 + (**p - '0');
    }
    *out = v;
    return 0;
}

int kth_parse_time(const char *s, int64_t *out)
{
    int y, mo, d, h = 0, mi = 0, sec = 0, off = 0;
    const char *p = s;
    if (!s || digits(&p, 4, &y) || *p++ != '-' || digits(&p, 2, &mo) || *p++ != '-' || digits(&p, 2, &d))
        return -1;
    if (*p == 'T' || *p == ' ') {
        p++;
        if (digits(&p, 2, &h) || *p++ != ':' || digits(&p, 2, &mi))
            return -1;
        if (*p == ':' && (p++, digits(&p, 2, &sec)))
            return -1;
        if (*p == '.') /* fractions of a second are dropped */
            for (p++; *p >= '0' && *p <= '9'; p++) {
            }
        if (*p == 'Z') {
            p++;
        } else if (*p == '+' || *p == '-') {
            int sign = *p++ == '-' ? -1 : 1, oh, om = 0;
            if (digits(&p, 2, &oh))
                return -1;
            if (*p == ':')
                p++;
            if (*p && digits(&p, 2, &om))
                return -1;
            off = sign * (oh * 3600 + om * 60);
        }
    }
    if (*p || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
        return -1;
    struct tm tm = {.tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h, .tm_min = mi, .tm_sec = sec};
    time_t t = timegm(&tm);
    if (t == (time_t)-1 || tm.tm_mday != d) /* 2026-02-30 normalises to March: refuse it */
        return -1;
    *out = (int64_t)t - off;
    return 0;
}

/* 128-bit digest of the bytes (two 64-bit lanes of multiply-xorshift over 8-byte words) as 32 hex digits: what
 * tells one stored run from another, not a cryptographic hash. */
static void digest(const char *s, size_t n, char out[33])
{
    uint64_t a = 0xcbf29ce484222325ull ^ n, b = 0x84222325cbf29ce4ull + n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        a = (a ^ w) * 0x100000001b3ull;
        a ^= a >> 32;
        b = (b + w) * 0x9e3779b97f4a7c15ull;
        b ^= b >> 29;
    }
    for (; i < n; i++) {
        a = (a ^ (uint8_t)s[i]) * 0x100000001b3ull;
        b = (b + (uint8_t)s[i]) * 0x9e3779b97f4a7c15ull;
    }
    a ^= a >> 33;
    a *= 0xff51afd7ed558ccdull;
    a ^= a >> 33;
    b ^= b >> 31;
    b *= 0xc4ceb9fe1a85ec53ull;
    b ^= b >> 33;
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)a, (unsigned long long)b);
}

/* The snapshot's "generator" member ("ktiming 0.1.0"), looked up in the first bytes; "" when absent. */
static void generator(const char *json, size_t len, char *out, size_t cap)
{
    *out = '\0';
    size_t lim = len < 8192 ? len : 8192;
    const char *k = memmem(json, lim, "\"generator\"", 11);
    if (!k)
        return;
    const char *q = memchr(k + 11, '"', lim - (size_t)(k + 11 - json));
    if (!q)
        return;
    size_t i = 0;
    for (q++; q < json + lim && *q != '"' && *q != '\\' && i + 1 < cap; q++)
        out[i++] = (unsigned char)*q < 0x20 ? '?' : *q;
    out[i] = '\0';
}

/* ===================================================================================================== *
 * Rows
 * ===================================================================================================== */

static kth_val_t vi(uint64_t v) { return (kth_val_t){.t = KTH_INT, .i = v > INT64_MAX ? INT64_MAX : (int64_t)v}; }
static kth_val_t vs(const char *s) { return (kth_val_t){.t = KTH_TEXT, .s = s ? s : ""}; }
static kth_val_t vd(double d) { return isfinite(d) ? (kth_val_t){.t = KTH_REAL, .d = d} : (kth_val_t){.t = KTH_NULL}; }

static int row_id(void *ctx, const kth_val_t *c, int n)
{
    if (n > 0 && c[0].t == KTH_INT)
        *(int64_t *)ctx = c[0].i;
    return 0;
}

static int add_entry(kth_db_t *db, const kt_snapshot_t *s, const kt_kernel_timing_t *e, const char *machine,
                     int64_t run_id)
{
    static const char kSel[] =
        "SELECT id FROM kt_series WHERE kernel = $1 AND backend = $2 AND device = $3 AND machine = $4";
    static const char kIns[] = "INSERT INTO kt_series (kernel, backend, device, machine) VALUES ($1, $2, $3, $4) "
                               "RETURNING id";
    const char *backend = kt_backend_name(e->backend);
    kth_val_t key[4] = {vs(e->name), vs(backend), vs(e->device), vs(machine)};
    int64_t sid = -1;
    int rc = kth_exec(db, kSel, key, 4, row_id, &sid);
    if (!rc && sid < 0)
        rc = kth_exec(db, kIns, key, 4, row_id, &sid);
    if (rc)
        return rc;
    /* A snapshot without a mean (null in the file) keeps what its totals say; NOT NULL refused the whole run. */
    double mean = isfinite(e->mean_ns) ? e->mean_ns
                  : e->dispatch_count ? (double)e->total_ns / (double)e->dispatch_count : 0.0;
    /* The median: of the reservoir; else the snapshot's p50; else, where the snapshot has no p50 (the crash
     * handler writes none: it reads 0) but the kernel ran, its mean, never 0 ns. */
    double med = (double)e->p50_ns;
    if (!e->sample_count && !e->p50_ns && e->dispatch_count)
        med = mean;
    double q1 = med, q3 = med;
    uint64_t *v = NULL;
    if (e->sample_count) {
        if (!(v = malloc(e->sample_count * sizeof *v)))
            return KT_ENOMEM;
        memcpy(v, e->samples, e->sample_count * sizeof *v);
        kth__sort_u64(v, e->sample_count);
        med = kth__quantile(v, e->sample_count, 0.5);
        q1 = kth__quantile(v, e->sample_count, 0.25);
        q3 = kth__quantile(v, e->sample_count, 0.75);
    }
    uint64_t bound = 0;
    for (size_t i = 0; i < s->device_count; i++)
        if (s->devices[i].backend == e->backend && e->device && !strcmp(s->devices[i].name, e->device))
            bound = s->devices[i].error_bound_ns;
    uint8_t *blob = NULL;
    size_t blen = kth_samples_encode(v, e->sample_count, &blob); /* sorted already: encoded as they are */
    free(v);
    if (e->sample_count && !blob)
        return KT_ENOMEM;
    static const char kRes[] =
        "INSERT INTO kt_result (series_id, run_id, dispatches, total_ns, min_ns, max_ns, mean_ns, stddev_ns, p50_ns,"
        " p90_ns, p99_ns, median_ns, q1_ns, q3_ns, errors, dropped, bound_ns, sample_count, samples) VALUES ($1, $2,"
        " $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)";
    kth_val_t p[19] = {
        {.t = KTH_INT, .i = sid}, {.t = KTH_INT, .i = run_id}, vi(e->dispatch_count), vi(e->total_ns),
        vi(e->min_ns), vi(e->max_ns), vd(mean), vd(e->stddev_ns), vi(e->p50_ns), vi(e->p90_ns), vi(e->p99_ns),
        vd(med), vd(q1), vd(q3), vi(e->errors), vi(e->dropped), vi(bound), vi(e->sample_count),
        blob ? (kth_val_t){.t = KTH_BLOB, .b = blob, .len = blen} : (kth_val_t){.t = KTH_NULL}};
    rc = kth_exec(db, kRes, p, 19, NULL, NULL);
    free(blob);
    return rc;
}

int kth_add_json(kth_db_t *db, const char *json, size_t len, const kth_run_info_t *info, int64_t *run_id,
                 int *added, char *err, size_t errlen)
{
    kth_run_info_t none = {0};
    if (!info)
        info = &none;
    *run_id = -1;
    *added = 0;
    int64_t when = (int64_t)time(NULL);
    if (info->when && kth_parse_time(info->when, &when))
        return fail(err, errlen, KT_EPARSE, "--when: not an ISO 8601 time (2026-11-27T01:02:03Z): '%s'", info->when);
    for (size_t i = 0; i < info->tag_count; i++) {
        const char *eq = strchr(info->tags[i], '=');
        if (!eq || eq == info->tags[i])
            return fail(err, errlen, KT_EPARSE, "--tag: expected KEY=VALUE, not '%s'", info->tags[i]);
        size_t klen = (size_t)(eq - info->tags[i]);
        if (klen > KTH_TAG_KEY_MAX)
            return fail(err, errlen, KT_EPARSE, "--tag: a key longer than %d bytes: '%.40s...'", KTH_TAG_KEY_MAX,
                        info->tags[i]);
        for (size_t j = 0; j < i; j++) /* the same key twice: which value was meant is not known */
            if (!strncmp(info->tags[j], info->tags[i], klen + 1))
                return fail(err, errlen, KT_EPARSE, "--tag: key '%.*s' given twice", (int)klen, info->tags[i]);
    }
    kt_snapshot_t *s = NULL;
    char perr[256];
    int rc = kt_snapshot_parse(json, len, &s, perr, sizeof perr);
    if (rc)
        return fail(err, errlen, rc, "%s", perr);
    char dig[33], gen[64];
    digest(json, len, dig);
    generator(json, len, gen, sizeof gen);
    const char *machine = info->machine && *info->machine ? info->machine : *s->host ? s->host : "unknown";

    if ((rc = kth_exec(db, db->engine->begin_write, NULL, 0, NULL, NULL)))
        goto out;
    kth_val_t d = vs(dig);
    if ((rc = kth_exec(db, "SELECT id FROM kt_run WHERE digest = $1", &d, 1, row_id, run_id)))
        goto rollback;
    if (*run_id >= 0) { /* stored before: nothing to do */
        rc = kth_exec(db, "ROLLBACK", NULL, 0, NULL, NULL);
        goto out;
    }
    char by[64];
    snprintf(by, sizeof by, "ktiming %s", kt_version());
    kth_val_t r[10] = {vs(dig), vs(info->commit), vs(info->branch), {.t = KTH_INT, .i = when}, vs(machine),
                       vs(s->host), vs(gen), vs(by), vi(s->taken_ns), vi(s->kernels_dropped)};
    if ((rc = kth_exec(db,
                       "INSERT INTO kt_run (digest, commit_sha, branch, run_time, machine, host, generator, added_by,"
                       " taken_ns, kernels_dropped) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id",
                       r, 10, row_id, run_id)))
        goto rollback;
    for (size_t i = 0; i < s->device_count; i++) {
        const kt_device_info_t *dv = &s->devices[i];
        kth_val_t p[10] = {{.t = KTH_INT, .i = *run_id}, vs(kt_backend_name(dv->backend)), vs(dv->name),
                           vs(dv->clock_domain), vi(dv->resolution_ns), vi(dv->frequency_hz), vi(dv->valid_bits),
                           vi(dv->error_bound_ns), vd(dv->drift_ppm), vi(dv->model_samples)};
        if (!isfinite(dv->drift_ppm))
            p[8] = (kth_val_t){.t = KTH_REAL, .d = 0.0};
        if ((rc = kth_exec(db,
                           "INSERT INTO kt_device (run_id, backend, name, clock_domain, resolution_ns, frequency_hz,"
                           " valid_bits, error_bound_ns, drift_ppm, model_samples) VALUES ($1, $2, $3, $4, $5, $6,"
                           " $7, $8, $9, $10)",
                           p, 10, NULL, NULL)))
            goto rollback;
    }
    for (size_t i = 0; i < info->tag_count; i++) {
        const char *eq = strchr(info->tags[i], '=');
        char key[KTH_TAG_KEY_MAX + 1];
        snprintf(key, sizeof key, "%.*s", (int)(eq - info->tags[i]), info->tags[i]);
        kth_val_t p[3] = {{.t = KTH_INT, .i = *run_id}, vs(key), vs(eq + 1)};
        if ((rc = kth_exec(db, "INSERT INTO kt_tag (run_id, key, value) VALUES ($1, $2, $3)", p, 3, NULL, NULL)))
            goto rollback;
    }
    for (size_t i = 0; i < s->count; i++)
        if ((rc = add_entry(db, s, &s->entries[i], machine, *run_id)))
            goto rollback;
    if ((rc = kth_exec(db, "COMMIT", NULL, 0, NULL, NULL)))
        goto rollback;
    *added = 1;
    goto out;
rollback:
    fail(err, errlen, rc, "%s", rc == KT_ENOMEM ? "history: out of memory" : db->err);
    kth_exec(db, "ROLLBACK", NULL, 0, NULL, NULL);
    *run_id = -1;
    kt_snapshot_free(s);
    return rc;
out:
    if (rc)
        fail(err, errlen, rc, "%s", db->err);
    kt_snapshot_free(s);
    return rc;
}

int kth_add_file(kth_db_t *db, const char *path, const kth_run_info_t *info, int64_t *run_id, int *added,
                 char *err, size_t errlen)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f)
        return fail(err, errlen, KT_EIO, "%s: %s", path, strerror(errno));
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (size_t n; buf && (n = fread(buf + len, 1, cap - len, f)) > 0;) {
        len += n;
        if (len == cap) {
            if (cap >= KT_SNAPSHOT_MAX_INPUT_DEFAULT) {
                free(buf);
                if (f != stdin)
                    fclose(f);
                return fail(err, errlen, KT_EFULL, "%s: larger than %zu MiB", path, cap >> 20);
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    int bad = ferror(f);
    if (f != stdin)
        fclose(f);
    if (!buf)
        return fail(err, errlen, KT_ENOMEM, "%s: out of memory", path);
    if (bad) {
        free(buf);
        return fail(err, errlen, KT_EIO, "%s: read error", path);
    }
    char perr[512];
    int rc = kth_add_json(db, buf, len, info, run_id, added, perr, sizeof perr);
    free(buf);
    if (rc == KT_EPARSE && strncmp(perr, "--", 2))
        return fail(err, errlen, rc, "%s: %s", path, perr);
    if (rc) /* the database's message names the database: say which snapshot was not stored */
        return fail(err, errlen, rc, "%s: not stored: %s", path, perr);
    return 0;
}
