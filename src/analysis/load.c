/* load.c — kt_snapshot_parse() and kt_snapshot_load(): JSON (schema ktiming.snapshot, docs/json-schema.md)
 * back into a kt_snapshot_t, with every value type-, range- and consistency-checked and every failure a
 * KT_EPARSE with a message naming the position or the member. */
#include <ktiming/analysis.h>

#include "common/shared.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SCHEMA_NAME KT_SNAPSHOT_SCHEMA_NAME
#define MAX_SAFE_INT 9007199254740991.0 /* 2^53 - 1: above it a JSON number may already have been rounded */

/* Parsing state: where errors go and which member is being read. */
typedef struct load_ctx_t {
    char *err;        /* caller's buffer, may be NULL */
    size_t errlen;    /* its size */
    char where[96];   /* path of the object being read, e.g. "entries[3]"; "" at the top level */
} load_ctx_t;

/* ---------------------------------------------------------------------------------------------------
 * Messages
 * ------------------------------------------------------------------------------------------------- */

static int fail(load_ctx_t *c, int code, const char *fmt, ...)
{
    if (c->err && c->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* Fails for member `key` of the current object: "entries[3].min_ns: <what>". */
static int fail_member(load_ctx_t *c, const char *key, const char *what)
{
    return fail(c, KT_EPARSE, "%s%s%s: %s", c->where, *c->where ? "." : "", key, what);
}

static void set_where(load_ctx_t *c, const char *array, size_t index)
{
    snprintf(c->where, sizeof c->where, "%s[%zu]", array, index);
}

/* ---------------------------------------------------------------------------------------------------
 * Member lookup: a member named twice is ambiguous (RFC 8259 leaves it to the reader), so it is refused.
 * ------------------------------------------------------------------------------------------------- */

static const cJSON *member(load_ctx_t *c, const cJSON *obj, const char *key, int *rc)
{
    const cJSON *found = NULL, *it;
    *rc = 0;
    cJSON_ArrayForEach(it, obj)
    {
        if (it->string && !strcmp(it->string, key)) {
            if (found) {
                *rc = fail_member(c, key, "member appears more than once");
                return NULL;
            }
            found = it;
        }
    }
    return found;
}

/* ---------------------------------------------------------------------------------------------------
 * Typed member readers. Each returns 0 or KT_EPARSE/KT_ENOMEM; absent optional members keep *out.
 * ------------------------------------------------------------------------------------------------- */

/* A JSON value as a uint64: a non-negative integral number up to 2^53-1, or a string of decimal digits. */
static int value_u64(const cJSON *v, uint64_t *out, const char **why)
{
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (!isfinite(d) || d < 0.0 || d != floor(d)) {
            *why = "expected a non-negative integer";
            return KT_EPARSE;
        }
        if (d > MAX_SAFE_INT) {
            *why = "integer above 2^53-1 must be written as a decimal string to stay exact";
            return KT_EPARSE;
        }
        *out = (uint64_t)d;
        return 0;
    }
    if (cJSON_IsString(v) && v->valuestring) {
        const char *s = v->valuestring;
        uint64_t x = 0;
        if (!*s) {
            *why = "expected a non-negative integer (empty string)";
            return KT_EPARSE;
        }
        for (; *s; s++) {
            unsigned dgt = (unsigned)(*s - '0');
            if (dgt > 9) {
                *why = "expected a non-negative integer (string with a non-digit)";
                return KT_EPARSE;
            }
            if (x > (UINT64_MAX - dgt) / 10) {
                *why = "integer does not fit in 64 bits";
                return KT_EPARSE;
            }
            x = x * 10 + dgt;
        }
        *out = x;
        return 0;
    }
    *why = "expected a non-negative integer";
    return KT_EPARSE;
}

static int get_u64(load_ctx_t *c, const cJSON *obj, const char *key, int required, uint64_t *out)
{
    int rc;
    const cJSON *v = member(c, obj, key, &rc);
    const char *why = NULL;
    if (rc)
        return rc;
    if (!v)
        return required ? fail_member(c, key, "missing") : 0;
    if (value_u64(v, out, &why))
        return fail_member(c, key, why);
    return 0;
}

static int get_u32(load_ctx_t *c, const cJSON *obj, const char *key, int required, uint32_t *out)
{
    uint64_t v = *out;
    int rc = get_u64(c, obj, key, required, &v);
    if (rc)
        return rc;
    if (v > UINT32_MAX)
        return fail_member(c, key, "integer does not fit in 32 bits");
    *out = (uint32_t)v;
    return 0;
}

/* An unsigned 128-bit integer: a number up to 2^53-1 or a decimal string (as kt__json_write_u128 writes). */
static int get_u128(load_ctx_t *c, const cJSON *obj, const char *key, int *present, kt_u128_t *out)
{
    int rc;
    const cJSON *v = member(c, obj, key, &rc);
    const char *why = NULL;
    *present = 0;
    if (rc || !v)
        return rc;
    if (cJSON_IsString(v) && v->valuestring && *v->valuestring) {
        unsigned __int128 x = 0;
        for (const char *p = v->valuestring; *p; p++) {
            unsigned dgt = (unsigned)(*p - '0');
            if (dgt > 9)
                return fail_member(c, key, "expected a non-negative integer (string with a non-digit)");
            if (x > (~(unsigned __int128)0 - dgt) / 10)
                return fail_member(c, key, "integer does not fit in 128 bits");
            x = x * 10 + dgt;
        }
        out->lo = (uint64_t)x;
        out->hi = (uint64_t)(x >> 64);
    } else {
        out->hi = 0;
        if (value_u64(v, &out->lo, &why))
            return fail_member(c, key, why);
    }
    *present = 1;
    return 0;
}

/* A double: a finite number, or null for "not a number" (what the writer emits for non-finite values). */
static int get_double(load_ctx_t *c, const cJSON *obj, const char *key, double *out)
{
    int rc;
    const cJSON *v = member(c, obj, key, &rc);
    if (rc || !v)
        return rc;
    if (cJSON_IsNull(v)) {
        *out = NAN;
        return 0;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return fail_member(c, key, "expected a number or null");
    *out = v->valuedouble;
    return 0;
}

/* Whether s is well-formed UTF-8 (RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF). JSON text
 * must be; cJSON passes raw bytes through unchecked, so this is where a file with stray bytes is refused. */
static int utf8_valid(const unsigned char *s)
{
    for (size_t n; *s; s += n)
        if ((n = kt__utf8_len(s, SIZE_MAX)) == 0)
            return 0;
    return 1;
}

/* A string member; *out is borrowed from the cJSON tree. */
static int get_str(load_ctx_t *c, const cJSON *obj, const char *key, int required, const char **out)
{
    int rc;
    const cJSON *v = member(c, obj, key, &rc);
    if (rc)
        return rc;
    if (!v)
        return required ? fail_member(c, key, "missing") : 0;
    if (!cJSON_IsString(v) || !v->valuestring)
        return fail_member(c, key, "expected a string");
    if (!utf8_valid((const unsigned char *)v->valuestring))
        return fail_member(c, key, "string is not valid UTF-8");
    *out = v->valuestring;
    return 0;
}

/* A string member copied into a fixed char array of the snapshot. */
static int get_str_into(load_ctx_t *c, const cJSON *obj, const char *key, int required, char *dst, size_t cap)
{
    const char *s = NULL;
    int rc = get_str(c, obj, key, required, &s);
    if (rc || !s)
        return rc;
    size_t n = strlen(s);
    if (n >= cap) {
        char why[64];
        snprintf(why, sizeof why, "string longer than %zu bytes", cap - 1);
        return fail_member(c, key, why);
    }
    memcpy(dst, s, n + 1);
    return 0;
}

static int get_str_dup(load_ctx_t *c, const cJSON *obj, const char *key, int required, const char *dflt,
                       const char **out)
{
    const char *s = dflt;
    int rc = get_str(c, obj, key, required, &s);
    if (rc)
        return rc;
    char *copy = strdup(s);
    if (!copy)
        return fail(c, KT_ENOMEM, "out of memory");
    *out = copy;
    return 0;
}

static int get_backend(load_ctx_t *c, const cJSON *obj, kt_backend_t *out)
{
    const char *s = NULL;
    int rc = get_str(c, obj, "backend", 1, &s);
    if (rc)
        return rc;
    for (int b = 0; b < KT_BACKEND_COUNT; b++)
        if (!strcasecmp(s, kt__backend_id((kt_backend_t)b))) {
            *out = (kt_backend_t)b;
            return 0;
        }
    return fail_member(c, "backend", "unknown backend (expected cpu, opencl, vulkan, cuda or metal)");
}

/* An optional array member: *arr is NULL when absent, *n its length. */
static int get_array(load_ctx_t *c, const cJSON *obj, const char *key, const cJSON **arr, size_t *n)
{
    int rc;
    const cJSON *v = member(c, obj, key, &rc);
    const cJSON *it;
    *arr = NULL;
    *n = 0;
    if (rc || !v || cJSON_IsNull(v))
        return rc;
    if (!cJSON_IsArray(v))
        return fail_member(c, key, "expected an array");
    cJSON_ArrayForEach(it, v)(*n)++;
    *arr = v;
    return 0;
}

static int expect_object(load_ctx_t *c, const cJSON *v)
{
    return cJSON_IsObject(v) ? 0 : fail(c, KT_EPARSE, "%s: expected an object", c->where);
}

/* ---------------------------------------------------------------------------------------------------
 * Sections
 * ------------------------------------------------------------------------------------------------- */

/* Members schema 2 added (all optional; a version-1 file derives what it can): exact sums, bytes, the last
 * error's name, drops by reason. */
static int read_entry_v2(load_ctx_t *c, const cJSON *o, kt_kernel_timing_t *e)
{
    int rc, has_sum = 0, has_sq = 0;
    const cJSON *by;
    if ((rc = get_u128(c, o, "sum_ns", &has_sum, &e->total128)) ||
        (rc = get_u128(c, o, "sumsq_ns2", &has_sq, &e->sumsq128)) || (rc = get_u64(c, o, "bytes", 0, &e->bytes)) ||
        (rc = get_str_into(c, o, "last_error", 0, e->last_error, sizeof e->last_error)))
        return rc;
    if (has_sum && (e->total128.hi ? UINT64_MAX : e->total128.lo) != e->total_ns)
        return fail_member(c, "sum_ns", "does not match total_ns (total_ns is the sum, saturated at 2^64-1)");
    if (!has_sum || !has_sq) { /* version 1: derive them */
        if (!has_sum)
            e->total128 = (kt_u128_t){0, 0};
        e->sumsq128 = (kt_u128_t){0, 0};
        kt__entry_sums(e, &e->total128, &e->sumsq128);
    }
    by = member(c, o, "dropped_by", &rc);
    if (rc)
        return rc;
    if (!by) {
        e->dropped_by[KT_DROP_UNSPECIFIED] = e->dropped;
        return 0;
    }
    if (!cJSON_IsObject(by))
        return fail_member(c, "dropped_by", "expected an object of reason: count");
    uint64_t total = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, by)
    {
        int r;
        for (r = 0; r < KT_DROP_REASON_COUNT && strcmp(it->string ? it->string : "", kt__drop_reason_id(r)); r++)
            ;
        if (r == KT_DROP_REASON_COUNT)
            r = KT_DROP_UNSPECIFIED; /* a reason from a newer ktiming: still counted */
        uint64_t v = 0;
        const char *why = NULL;
        if (value_u64(it, &v, &why))
            return fail_member(c, "dropped_by", why);
        if (v > UINT64_MAX - e->dropped_by[r] || v > UINT64_MAX - total)
            return fail_member(c, "dropped_by", "counts overflow 64 bits");
        e->dropped_by[r] += v;
        total += v;
    }
    if (total != e->dropped)
        return fail_member(c, "dropped_by", "counts do not add up to dropped");
    return 0;
}

static int read_entry(load_ctx_t *c, const cJSON *o, kt_kernel_timing_t *e)
{
    const cJSON *samples;
    size_t n;
    uint32_t declared = 0;
    int rc;
    if ((rc = expect_object(c, o)) || (rc = get_str_dup(c, o, "name", 1, "", &e->name)) ||
        (rc = get_backend(c, o, &e->backend)) ||
        (rc = get_str_dup(c, o, "device", 0, e->backend == KT_BACKEND_CPU ? "host" : "", &e->device)) ||
        (rc = get_u64(c, o, "dispatch_count", 1, &e->dispatch_count)) ||
        (rc = get_u64(c, o, "total_ns", 1, &e->total_ns)) || (rc = get_u64(c, o, "min_ns", 1, &e->min_ns)) ||
        (rc = get_u64(c, o, "max_ns", 1, &e->max_ns)) || (rc = get_u64(c, o, "last_ns", 0, &e->last_ns)))
        return rc;
    e->mean_ns = e->dispatch_count ? (double)e->total_ns / (double)e->dispatch_count : 0.0;
    if ((rc = get_double(c, o, "mean_ns", &e->mean_ns)) || (rc = get_double(c, o, "stddev_ns", &e->stddev_ns)) ||
        (rc = get_u64(c, o, "p50_ns", 0, &e->p50_ns)) || (rc = get_u64(c, o, "p90_ns", 0, &e->p90_ns)) ||
        (rc = get_u64(c, o, "p99_ns", 0, &e->p99_ns)) || (rc = get_u64(c, o, "errors", 0, &e->errors)) ||
        (rc = get_u64(c, o, "dropped", 0, &e->dropped)) ||
        (rc = get_u64(c, o, "spans_dropped", 0, &e->spans_dropped)) ||
        (rc = get_array(c, o, "samples", &samples, &n)))
        return rc;
    if ((rc = read_entry_v2(c, o, e)))
        return rc;
    declared = (uint32_t)(n > UINT32_MAX ? UINT32_MAX : n);
    if ((rc = get_u32(c, o, "sample_count", 0, &declared)))
        return rc;
    if (n > UINT32_MAX)
        return fail_member(c, "samples", "more than 2^32-1 samples");
    if (declared != n) {
        char why[96];
        snprintf(why, sizeof why, "%u does not match the %zu values in samples", declared, n);
        return fail_member(c, "sample_count", why);
    }
    if (n > e->dispatch_count)
        return fail_member(c, "sample_count", "larger than dispatch_count");
    if (e->dispatch_count && e->min_ns > e->max_ns)
        return fail_member(c, "min_ns", "larger than max_ns");
    if (n) {
        const cJSON *it;
        size_t i = 0;
        e->samples = malloc(n * sizeof *e->samples);
        if (!e->samples)
            return fail(c, KT_ENOMEM, "out of memory");
        cJSON_ArrayForEach(it, samples)
        {
            const char *why = NULL;
            if (value_u64(it, &e->samples[i], &why))
                return fail(c, KT_EPARSE, "%s.samples[%zu]: %s", c->where, i, why);
            i++;
        }
        e->sample_count = (uint32_t)n;
    }
    return 0;
}

static int read_span(load_ctx_t *c, const cJSON *o, kt_span_t *s, const kt_snapshot_t *snap)
{
    const cJSON *q;
    int rc;
    if ((rc = expect_object(c, o)) || (rc = get_u32(c, o, "entry", 1, &s->entry)) ||
        (rc = get_u32(c, o, "thread", 1, &s->thread)) || (rc = get_u32(c, o, "flags", 0, &s->flags)) ||
        (rc = get_u64(c, o, "duration_ns", 0, &s->duration_ns)) ||
        (rc = get_u64(c, o, "enqueue_ns", 0, &s->enqueue_ns)) ||
        (rc = get_u64(c, o, "queued_ns", 0, &s->queued_ns)) || (rc = get_u64(c, o, "submit_ns", 0, &s->submit_ns)) ||
        (rc = get_u64(c, o, "start_ns", 1, &s->start_ns)) || (rc = get_u64(c, o, "end_ns", 1, &s->end_ns)) ||
        (rc = get_u64(c, o, "uncertainty_ns", 0, &s->uncertainty_ns)))
        return rc;
    s->queue = UINT32_MAX;
    q = member(c, o, "queue", &rc);
    if (rc || (q && !cJSON_IsNull(q) && (rc = get_u32(c, o, "queue", 1, &s->queue))))
        return rc;
    if (s->entry >= snap->count)
        return fail_member(c, "entry", "index out of range of entries");
    if (s->queue != UINT32_MAX && s->queue >= snap->queue_count)
        return fail_member(c, "queue", "index out of range of queues");
    if (s->thread >= snap->thread_count)
        return fail_member(c, "thread", "index out of range of threads");
    return 0;
}

/* ---------------------------------------------------------------------------------------------------
 * span_table (schema 2): one string per column, `count` space-separated decimal integers each; start_ns as
 * deltas from the previous span's start, end/enqueue/queued/submit as offsets from the span's start (signed,
 * modulo 2^64); "-" marks an absent value.
 * ------------------------------------------------------------------------------------------------- */

/* The next value of a column: 0 with *v (and *absent) set, 1 at the end, -1 on a malformed value. */
static int col_next(const char **pp, uint64_t *v, int *absent)
{
    const char *p = *pp;
    while (*p == ' ')
        p++;
    if (!*p)
        return 1;
    int neg = 0;
    *absent = 0;
    if (*p == '-') {
        p++;
        if (*p == ' ' || !*p) {
            *absent = 1;
            *v = 0;
            *pp = p;
            return 0;
        }
        neg = 1;
    }
    if (*p < '0' || *p > '9')
        return -1;
    uint64_t x = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (x > (UINT64_MAX - d) / 10)
            return -1;
        x = x * 10 + d;
    }
    if (*p && *p != ' ')
        return -1;
    if (neg && x > (uint64_t)INT64_MAX + 1)
        return -1;
    *v = neg ? 0 - x : x;
    *pp = p;
    return 0;
}

static int alloc_array(load_ctx_t *c, void **out, size_t count, size_t size);

static int read_span_table(load_ctx_t *c, const cJSON *t, kt_snapshot_t *s)
{
    static const char *const cols[] = {"entry",      "queue",     "thread",     "flags",
                                       "duration_ns", "start_ns", "end_ns",     "enqueue_ns",
                                       "queued_ns",  "submit_ns", "uncertainty_ns"};
    enum { NCOL = sizeof cols / sizeof cols[0] };
    int rc;
    uint64_t count = 0;
    snprintf(c->where, sizeof c->where, "span_table");
    if ((rc = expect_object(c, t)) || (rc = get_u64(c, t, "count", 1, &count)))
        return rc;
    if (count > SIZE_MAX / sizeof *s->spans)
        return fail_member(c, "count", "too many spans");
    const char *text[NCOL];
    for (int k = 0; k < NCOL; k++) {
        text[k] = "";
        if ((rc = get_str(c, t, cols[k], k < 7, &text[k])))
            return rc;
    }
    if ((rc = alloc_array(c, (void **)&s->spans, (size_t)count, sizeof *s->spans)))
        return rc;
    s->span_count = (size_t)count;
    for (int k = 0; k < NCOL; k++) {
        const char *p = text[k];
        uint64_t prev = 0;
        int optional_empty = k >= 7 && !*p; /* an optional column left out entirely */
        for (size_t i = 0; i < count; i++) {
            kt_span_t *sp = &s->spans[i];
            uint64_t v = 0;
            int absent = 1, r = optional_empty ? 0 : col_next(&p, &v, &absent);
            if (r != 0) {
                char why[96];
                if (r > 0)
                    snprintf(why, sizeof why, "%zu values, count says %llu", i, (unsigned long long)count);
                else
                    snprintf(why, sizeof why, "malformed value at span %zu", i);
                return fail_member(c, cols[k], why);
            }
            if (absent && k != 1 && k < 7)
                return fail_member(c, cols[k], "absent value in a required column");
            switch (k) {
            case 0:
            case 2:
            case 3:
                if (v > UINT32_MAX)
                    return fail_member(c, cols[k], "integer does not fit in 32 bits");
                if (k == 0)
                    sp->entry = (uint32_t)v;
                else if (k == 2)
                    sp->thread = (uint32_t)v;
                else
                    sp->flags = (uint32_t)v;
                break;
            case 1:
                if (!absent && v >= UINT32_MAX)
                    return fail_member(c, cols[k], "integer does not fit in 32 bits");
                sp->queue = absent ? UINT32_MAX : (uint32_t)v;
                break;
            case 4: sp->duration_ns = v; break;
            case 5:
                sp->start_ns = prev + v;
                prev = sp->start_ns;
                break;
            case 6: sp->end_ns = sp->start_ns + v; break;
            case 7: sp->enqueue_ns = absent ? 0 : sp->start_ns + v; break;
            case 8: sp->queued_ns = absent ? 0 : sp->start_ns + v; break;
            case 9: sp->submit_ns = absent ? 0 : sp->start_ns + v; break;
            default: sp->uncertainty_ns = v; break;
            }
        }
        uint64_t extra;
        int absent;
        if (!optional_empty && col_next(&p, &extra, &absent) != 1)
            return fail_member(c, cols[k], "more values than count");
    }
    for (size_t i = 0; i < s->span_count; i++) {
        const kt_span_t *sp = &s->spans[i];
        set_where(c, "span_table", i);
        if (sp->entry >= s->count)
            return fail_member(c, "entry", "index out of range of entries");
        if (sp->queue != UINT32_MAX && sp->queue >= s->queue_count)
            return fail_member(c, "queue", "index out of range of queues");
        if (sp->thread >= s->thread_count)
            return fail_member(c, "thread", "index out of range of threads");
    }
    c->where[0] = '\0';
    return 0;
}

static int read_device(load_ctx_t *c, const cJSON *o, kt_device_info_t *d)
{
    int rc;
    strcpy(d->clock_domain, "unknown");
    if ((rc = expect_object(c, o)) || (rc = get_backend(c, o, &d->backend)) ||
        (rc = get_str_into(c, o, "name", 1, d->name, sizeof d->name)) ||
        (rc = get_str_into(c, o, "clock_domain", 0, d->clock_domain, sizeof d->clock_domain)) ||
        (rc = get_u64(c, o, "resolution_ns", 0, &d->resolution_ns)) ||
        (rc = get_u64(c, o, "frequency_hz", 0, &d->frequency_hz)) ||
        (rc = get_u32(c, o, "valid_bits", 0, &d->valid_bits)) ||
        (rc = get_u64(c, o, "error_bound_ns", 0, &d->error_bound_ns)) ||
        (rc = get_double(c, o, "drift_ppm", &d->drift_ppm)) ||
        (rc = get_u32(c, o, "model_samples", 0, &d->model_samples)))
        return rc;
    return 0;
}

/* Allocates count zeroed elements (NULL, and success, when count is 0). */
static int alloc_array(load_ctx_t *c, void **out, size_t count, size_t size)
{
    *out = NULL;
    if (!count)
        return 0;
    *out = calloc(count, size);
    return *out ? 0 : fail(c, KT_ENOMEM, "out of memory");
}

/* ---------------------------------------------------------------------------------------------------
 * Ordering: entries by (name, backend, device), spans by start_ns, as kt_snapshot() delivers them
 * ------------------------------------------------------------------------------------------------- */

/* An element with its position in the file, so sorts are stable and indices can be remapped. */
typedef struct entry_pos_t {
    kt_kernel_timing_t e; /* the entry */
    size_t from;          /* its index in the file */
} entry_pos_t;

typedef struct span_pos_t {
    kt_span_t s; /* the span */
    size_t from; /* its index in the file */
} span_pos_t;

static int entry_pos_cmp(const void *a, const void *b)
{
    const entry_pos_t *x = a, *y = b;
    int r = kt__entry_order(&x->e, &y->e);
    return r ? r : (x->from < y->from ? -1 : x->from > y->from);
}

static int span_pos_cmp(const void *a, const void *b)
{
    const span_pos_t *x = a, *y = b;
    if (x->s.start_ns != y->s.start_ns)
        return x->s.start_ns < y->s.start_ns ? -1 : 1;
    return x->from < y->from ? -1 : x->from > y->from;
}

static int sort_entries(load_ctx_t *c, kt_snapshot_t *s)
{
    size_t i;
    for (i = 1; i < s->count; i++)
        if (kt__entry_order(&s->entries[i - 1], &s->entries[i]) >= 0)
            break;
    if (i >= s->count)
        return 0;
    entry_pos_t *tmp = malloc(s->count * sizeof *tmp);
    size_t *to = malloc(s->count * sizeof *to);
    if (!tmp || !to) {
        free(tmp);
        free(to);
        return fail(c, KT_ENOMEM, "out of memory");
    }
    for (i = 0; i < s->count; i++) {
        tmp[i].e = s->entries[i];
        tmp[i].from = i;
    }
    qsort(tmp, s->count, sizeof *tmp, entry_pos_cmp);
    for (i = 0; i < s->count; i++) {
        s->entries[i] = tmp[i].e;
        to[tmp[i].from] = i;
    }
    for (i = 0; i < s->span_count; i++)
        s->spans[i].entry = (uint32_t)to[s->spans[i].entry];
    for (i = 1; i < s->count; i++)
        if (kt__entry_order(&tmp[i - 1].e, &tmp[i].e) == 0)
            break;
    int rc = 0;
    if (i < s->count)
        rc = fail(c, KT_EPARSE, "entries[%zu] and entries[%zu]: the same (name, backend, device) twice",
                  tmp[i - 1].from, tmp[i].from);
    free(tmp);
    free(to);
    return rc;
}

static int sort_spans(load_ctx_t *c, kt_snapshot_t *s)
{
    size_t i;
    for (i = 1; i < s->span_count; i++)
        if (s->spans[i - 1].start_ns > s->spans[i].start_ns)
            break;
    if (i >= s->span_count)
        return 0;
    span_pos_t *tmp = malloc(s->span_count * sizeof *tmp);
    if (!tmp)
        return fail(c, KT_ENOMEM, "out of memory");
    for (i = 0; i < s->span_count; i++) {
        tmp[i].s = s->spans[i];
        tmp[i].from = i;
    }
    qsort(tmp, s->span_count, sizeof *tmp, span_pos_cmp);
    for (i = 0; i < s->span_count; i++)
        s->spans[i] = tmp[i].s;
    free(tmp);
    return 0;
}

/* ---------------------------------------------------------------------------------------------------
 * Document
 * ------------------------------------------------------------------------------------------------- */

static int read_document(load_ctx_t *c, const cJSON *root, kt_snapshot_t *s)
{
    const cJSON *arr, *it, *ver;
    const char *schema = NULL;
    size_t i, n;
    int rc;

    if (!cJSON_IsObject(root))
        return fail(c, KT_EPARSE, "not a ktiming snapshot: the document is not a JSON object");
    if ((rc = get_str(c, root, "schema", 0, &schema)))
        return rc;
    if (!schema)
        return fail(c, KT_EPARSE, "not a ktiming snapshot: no \"schema\" member");
    if (strcmp(schema, SCHEMA_NAME))
        return fail(c, KT_EPARSE, "not a ktiming snapshot: schema is \"%.64s\", expected \"" SCHEMA_NAME "\"",
                    schema);
    ver = member(c, root, "version", &rc);
    if (rc)
        return rc;
    if (!ver)
        return fail(c, KT_EPARSE, "version: missing");
    if (!cJSON_IsNumber(ver) || ver->valuedouble != floor(ver->valuedouble) || ver->valuedouble < 1.0)
        return fail(c, KT_EPARSE, "version: expected a positive integer");
    if (ver->valuedouble > KT_SNAPSHOT_SCHEMA_VERSION)
        return fail(c, KT_EPARSE,
                    "unsupported schema version %.0f: this ktiming (%s) reads versions up to %d; use a newer ktiming",
                    ver->valuedouble > 1e15 ? 1e15 : ver->valuedouble, KT_VERSION_STRING,
                    KT_SNAPSHOT_SCHEMA_VERSION);

    if ((rc = get_str_into(c, root, "host", 0, s->host, sizeof s->host)) ||
        (rc = get_u64(c, root, "taken_ns", 0, &s->taken_ns)) ||
        (rc = get_u64(c, root, "kernels_dropped", 0, &s->kernels_dropped)))
        return rc;
    s->rank = -1;
    const cJSON *pv = member(c, root, "pid", &rc), *rv = rc ? NULL : member(c, root, "rank", &rc);
    if (rc)
        return rc;
    if (pv && (!cJSON_IsNumber(pv) || pv->valuedouble != floor(pv->valuedouble) || pv->valuedouble < 0 ||
               pv->valuedouble > MAX_SAFE_INT))
        return fail(c, KT_EPARSE, "pid: expected a non-negative integer");
    if (rv && (!cJSON_IsNumber(rv) || rv->valuedouble != floor(rv->valuedouble) || rv->valuedouble < -1 ||
               rv->valuedouble > 2147483647.0))
        return fail(c, KT_EPARSE, "rank: expected an integer from -1 (none) to 2^31-1");
    s->pid = pv ? (int64_t)pv->valuedouble : 0;
    s->rank = rv ? (int32_t)rv->valuedouble : -1;

    /* Lookup tables first: spans refer to entries, queues and threads by index. */
    if ((rc = get_array(c, root, "entries", &arr, &n)))
        return rc;
    if (!arr)
        return fail(c, KT_EPARSE, "entries: missing");
    if ((rc = alloc_array(c, (void **)&s->entries, n, sizeof *s->entries)))
        return rc;
    s->count = n; /* only now: kt_snapshot_free() walks entries[0..count) */
    i = 0;
    cJSON_ArrayForEach(it, arr)
    {
        set_where(c, "entries", i);
        if ((rc = read_entry(c, it, &s->entries[i])))
            return rc;
        i++;
    }

    c->where[0] = '\0';
    if ((rc = get_array(c, root, "queues", &arr, &n)) ||
        (rc = alloc_array(c, (void **)&s->queues, n, sizeof *s->queues)))
        return rc;
    s->queue_count = n;
    i = 0;
    cJSON_ArrayForEach(it, arr)
    {
        kt_queue_info_t *q = &s->queues[i];
        set_where(c, "queues", i++);
        if ((rc = expect_object(c, it)) || (rc = get_backend(c, it, &q->backend)) ||
            (rc = get_str_into(c, it, "device", 0, q->device, sizeof q->device)) ||
            (rc = get_str_into(c, it, "label", 0, q->label, sizeof q->label)))
            return rc;
    }

    c->where[0] = '\0';
    if ((rc = get_array(c, root, "threads", &arr, &n)) ||
        (rc = alloc_array(c, (void **)&s->threads, n, sizeof *s->threads)))
        return rc;
    s->thread_count = n;
    i = 0;
    cJSON_ArrayForEach(it, arr)
    {
        kt_thread_info_t *t = &s->threads[i];
        set_where(c, "threads", i++);
        if ((rc = expect_object(c, it)) || (rc = get_u64(c, it, "os_tid", 0, &t->os_tid)) ||
            (rc = get_str_into(c, it, "name", 0, t->name, sizeof t->name)))
            return rc;
    }

    c->where[0] = '\0';
    if ((rc = get_array(c, root, "devices", &arr, &n)) ||
        (rc = alloc_array(c, (void **)&s->devices, n, sizeof *s->devices)))
        return rc;
    s->device_count = n;
    i = 0;
    cJSON_ArrayForEach(it, arr)
    {
        set_where(c, "devices", i);
        if ((rc = read_device(c, it, &s->devices[i])))
            return rc;
        i++;
    }

    c->where[0] = '\0';
    const cJSON *table = member(c, root, "span_table", &rc);
    if (rc)
        return rc;
    if ((rc = get_array(c, root, "spans", &arr, &n)))
        return rc;
    if (table && arr && n)
        return fail(c, KT_EPARSE, "spans and span_table: only one may hold spans");
    if (table && !cJSON_IsNull(table)) {
        if ((rc = read_span_table(c, table, s)))
            return rc;
        n = 0; /* nothing more to read */
    } else if ((rc = alloc_array(c, (void **)&s->spans, n, sizeof *s->spans))) {
        return rc;
    }
    if (!n)
        goto spans_done;
    s->span_count = n;
    i = 0;
    cJSON_ArrayForEach(it, arr)
    {
        set_where(c, "spans", i);
        if ((rc = read_span(c, it, &s->spans[i], s)))
            return rc;
        i++;
    }
spans_done:
    c->where[0] = '\0';
    if ((rc = sort_entries(c, s)) || (rc = sort_spans(c, s)))
        return rc;
    return 0;
}

/* 1-based line and column (in bytes) of offset pos in text. */
static void line_col(const char *text, size_t pos, size_t *line, size_t *col)
{
    size_t l = 1, start = 0;
    for (size_t i = 0; i < pos; i++)
        if (text[i] == '\n') {
            l++;
            start = i + 1;
        }
    *line = l;
    *col = pos - start + 1;
}

/* Offset of the first "\u0000" escape inside a JSON string of text[0..len), or len when there is none. A C string
 * cannot hold U+0000: cJSON would cut the string there, so a name "a\u0000b" would silently become "a" (and could
 * then merge with the real "a"). The loader refuses such a document instead (docs/json-schema.md). */
static size_t find_escaped_nul(const char *text, size_t len)
{
    int in_string = 0;
    for (size_t i = 0; i < len; i++) {
        char ch = text[i];
        if (!in_string) {
            in_string = ch == '"';
            continue;
        }
        if (ch == '"') {
            in_string = 0;
        } else if (ch == '\\' && i + 1 < len) {
            if (text[i + 1] == 'u' && i + 5 < len && text[i + 2] == '0' && text[i + 3] == '0' && text[i + 4] == '0' &&
                text[i + 5] == '0')
                return i;
            i++; /* the escaped character (a quote or backslash among them) */
        }
    }
    return len;
}

int kt_snapshot_parse(const char *json, size_t len, kt_snapshot_t **out, char *errbuf, size_t errlen)
{
    load_ctx_t c = {errbuf, errlen, ""};
    if (errbuf && errlen)
        errbuf[0] = '\0';
    if (!out)
        return fail(&c, KT_EINVAL, "no output pointer");
    *out = NULL;
    if (!json && len)
        return fail(&c, KT_EINVAL, "no input");
    if (len == 0)
        return fail(&c, KT_EPARSE, "empty input: expected a JSON object");

    /* A private NUL-terminated copy: cJSON then never reads past the data, whatever the caller passed. */
    char *text = malloc(len + 1);
    if (!text)
        return fail(&c, KT_ENOMEM, "out of memory");
    memcpy(text, json, len);
    text[len] = '\0';

    /* cJSON reads numbers with strtod, which follows LC_NUMERIC: parse under the C locale (this thread only). */
    const char *end = NULL;
    locale_t c_numeric = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    locale_t previous = c_numeric ? uselocale(c_numeric) : (locale_t)0;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (c_numeric) {
        uselocale(previous);
        freelocale(c_numeric);
    }
    int rc = 0;
    if (!root) {
        size_t pos = end && end >= text && end <= text + len ? (size_t)(end - text) : len, line, col;
        line_col(text, pos, &line, &col);
        rc = fail(&c, KT_EPARSE, "JSON syntax error at line %zu, column %zu (byte %zu of %zu)%s", line, col, pos, len,
                  pos + 1 >= len ? ": the input ends early (truncated?)" : "");
        free(text);
        return rc;
    }
    /* Only whitespace may follow the document. */
    size_t pos = (size_t)(end - text);
    while (pos < len && (text[pos] == ' ' || text[pos] == '\t' || text[pos] == '\n' || text[pos] == '\r'))
        pos++;
    if (pos < len) {
        size_t line, col;
        line_col(text, pos, &line, &col);
        rc = fail(&c, KT_EPARSE, "unexpected data after the JSON document at line %zu, column %zu (byte %zu of %zu)",
                  line, col, pos, len);
        cJSON_Delete(root);
        free(text);
        return rc;
    }

    size_t nul = find_escaped_nul(text, len);
    if (nul < len) {
        size_t line, col;
        line_col(text, nul, &line, &col);
        rc = fail(&c, KT_EPARSE, "a string holds \\u0000 (NUL) at line %zu, column %zu: names cannot contain NUL; "
                  "refused rather than cut short", line, col);
        cJSON_Delete(root);
        free(text);
        return rc;
    }
    kt_snapshot_t *snap = calloc(1, sizeof *snap);
    if (!snap)
        rc = fail(&c, KT_ENOMEM, "out of memory");
    else
        rc = read_document(&c, root, snap);
    cJSON_Delete(root);
    free(text);
    if (rc) {
        kt_snapshot_free(snap);
        return rc;
    }
    *out = snap;
    return 0;
}

/* ---------------------------------------------------------------------------------------------------
 * Files
 * ------------------------------------------------------------------------------------------------- */

/* Reads all of f into a malloc'd buffer. */
static int read_all(FILE *f, char **data, size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    if (!buf)
        return KT_ENOMEM;
    for (;;) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) {
                free(buf);
                return KT_EIO;
            }
            break;
        }
        if (n == cap) {
            char *bigger = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
            if (!bigger) {
                free(buf);
                return KT_ENOMEM;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    *data = buf;
    *len = n;
    return 0;
}

int kt_snapshot_load(const char *path, kt_snapshot_t **out, char *errbuf, size_t errlen)
{
    load_ctx_t c = {errbuf, errlen, ""};
    if (out)
        *out = NULL;
    if (!path || !out)
        return fail(&c, KT_EINVAL, "no path or output pointer");
    int from_stdin = !strcmp(path, "-");
    FILE *f = from_stdin ? stdin : fopen(path, "rb");
    if (!f) {
        int saved = errno;
        fail(&c, KT_EIO, "%s: %s", path, strerror(saved));
        errno = saved;
        return KT_EIO;
    }
    char *data = NULL;
    size_t len = 0;
    int rc = read_all(f, &data, &len);
    int saved = errno;
    if (!from_stdin)
        fclose(f);
    if (rc) {
        fail(&c, rc, "%s: %s", path, rc == KT_EIO ? strerror(saved) : "out of memory");
        errno = saved;
        return rc;
    }
    char msg[512] = "";
    rc = kt_snapshot_parse(data, len, out, msg, sizeof msg);
    free(data);
    if (rc)
        fail(&c, rc, "%s: %s", path, msg);
    return rc;
}
