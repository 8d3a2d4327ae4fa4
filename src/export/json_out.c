/* json_out.c — the JSON snapshot exporter (schema ktiming.snapshot v2) and the JSON value writers it uses. */
#include "shared/shared.h"
#include "export/escape.h"
#include "export/export.h"
#include "export/fixed.h"

#include <fenv.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------------
 * Value writers
 * ------------------------------------------------------------------------------------------------- */

void kt__json_write_chars(FILE *out, const char *s, size_t maxlen, unsigned flags)
{
    static const char kHex[] = "0123456789ABCDEF";
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t left = s ? strnlen(s, maxlen) : 0;
    size_t room = maxlen == SIZE_MAX ? SIZE_MAX : maxlen ? maxlen - 1 : 0; /* bytes the reader may get back */
    const int html = (flags & KT__JSON_HTML) != 0;
    while (left > 0) {
        unsigned char c = *p;
        size_t n;
        if (c < 0x80) {
            if (!room)
                return;
            room--;
            switch (c) {
            case '"': fputs("\\\"", out); break;
            case '\\': fputs("\\\\", out); break;
            case '\n': fputs("\\n", out); break;
            case '\r': fputs("\\r", out); break;
            case '\t': fputs("\\t", out); break;
            case '\b': fputs(html ? "\\u0008" : "\\b", out); break;
            case '\f': fputs(html ? "\\u000c" : "\\f", out); break;
            case '<': case '>': case '&':
                if (html)
                    fprintf(out, "\\u%04x", (unsigned)c);
                else
                    fputc(c, out);
                break;
            default:
                if (c < 0x20 || c == 0x7f)
                    fprintf(out, "\\u%04x", (unsigned)c);
                else
                    fputc(c, out);
            }
            p++;
            left--;
            continue;
        }
        n = kt__utf8_len(p, left);
        size_t back = n == 0 ? 5 : n; /* what the reader gets back: U+FFFD and two hex digits for a stray byte */
        if (back > room)
            return;
        room -= back;
        if (n == 0) {
            char e[8] = {'\\', 'u', 'f', 'f', 'f', 'd', kHex[c >> 4], kHex[c & 15u]};
            fwrite(e, 1, sizeof e, out);
            p++;
            left--;
        } else if ((n == 3 && p[0] == 0xE2 && p[1] == 0x80 && p[2] == 0xA9) || kt__hidden_control(p, n)) {
            /* line separators and what kt__escape hides (C1, bidi): exact in JSON, inert on a terminal */
            unsigned cp = kt__hidden_control(p, n);
            fprintf(out, "\\u%04x", cp ? cp : 0x2029u);
            p += n;
            left -= n;
        } else {
            fwrite(p, 1, n, out);
            p += n;
            left -= n;
        }
    }
}

void kt__json_write_string(FILE *out, const char *s, size_t maxlen)
{
    fputc('"', out);
    kt__json_write_chars(out, s, maxlen, 0);
    fputc('"', out);
}

/* "00".."99": two digits per step when writing a number (a span table is ~180,000 numbers for 16,384 spans). */
static const char kDigits2[201] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                                  "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                                  "8081828384858687888990919293949596979899";

/* 10^i, for counting digits. */
static const uint64_t kPow10[20] = {1ull,
                                    10ull,
                                    100ull,
                                    1000ull,
                                    10000ull,
                                    100000ull,
                                    1000000ull,
                                    10000000ull,
                                    100000000ull,
                                    1000000000ull,
                                    10000000000ull,
                                    100000000000ull,
                                    1000000000000ull,
                                    10000000000000ull,
                                    100000000000000ull,
                                    1000000000000000ull,
                                    10000000000000000ull,
                                    100000000000000000ull,
                                    1000000000000000000ull,
                                    10000000000000000000ull};

/* Writes v in decimal at p (room for 20 characters); returns the end. The digits are counted from the bit
 * length (log10 2 ~ 1233/4096) and one comparison, not a division each, then written right to left, two per
 * step. */
static char *put_decimal(char *p, uint64_t v)
{
    unsigned t = ((unsigned)(64 - __builtin_clzll(v | 1)) * 1233u) >> 12;
    unsigned len = t + 1 - ((v | 1) < kPow10[t]); /* v | 1: 0 has a digit too */
    char *d = p + len;
    while (v >= 100) {
        unsigned r = (unsigned)(v % 100);
        v /= 100;
        d -= 2;
        memcpy(d, kDigits2 + 2 * r, 2);
    }
    if (v >= 10) {
        d -= 2;
        memcpy(d, kDigits2 + 2 * v, 2);
    } else {
        *--d = (char)('0' + v);
    }
    return p + len;
}

/* v at p as JSON (a number, or a quoted string above KT_JSON_MAX_SAFE_INT: room for 22 characters); the end. */
static char *put_json_u64(char *p, uint64_t v)
{
    if (v <= KT_JSON_MAX_SAFE_INT)
        return put_decimal(p, v);
    *p++ = '"';
    p = put_decimal(p, v);
    *p++ = '"';
    return p;
}

/* Not fprintf: a snapshot's entries hold a thousand numbers each (the reservoir), ~150 ns apiece that way. */
void kt__json_write_u64(FILE *out, uint64_t v)
{
    char buf[24];
    fwrite(buf, 1, (size_t)(put_json_u64(buf, v) - buf), out);
}

/* v as JSON in buf (48 bytes): a number, or a quoted decimal string above KT_JSON_MAX_SAFE_INT; *len bytes from
 * the pointer returned. */
static const char *put_json_u128(char *buf, kt_u128_t v, size_t *len)
{
    if (!v.hi) {
        *len = (size_t)(put_json_u64(buf, v.lo) - buf);
        return buf;
    }
    char *end = buf + 48, *p = end;
    unsigned __int128 x = (unsigned __int128)v.hi << 64 | v.lo;
    *--p = '"';
    do {
        *--p = (char)('0' + (int)(x % 10));
        x /= 10;
    } while (x);
    *--p = '"';
    *len = (size_t)(end - p);
    return p;
}

void kt__json_write_u128(FILE *out, kt_u128_t v)
{
    char buf[48];
    size_t n;
    const char *p = put_json_u128(buf, v, &n);
    fwrite(p, 1, n, out);
}

char *kt__format_double(char *buf, size_t size, double v)
{
    if (!isfinite(v)) {
        snprintf(buf, size, "null");
        return buf;
    }
    if (v == 0.0) { /* also folds -0.0, which JSON readers treat inconsistently */
        snprintf(buf, size, "0");
        return buf;
    }
    if (size >= 24 && kt__fmt_g15(buf, v)) /* most of a merged snapshot's means: no snprintf and strtod */
        return buf;
    if (size >= 24 && fegetround() == FE_TONEAREST && kt__fmt_g17(buf, v)) /* the others, and deviations */
        return buf;
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    return buf;
}

void kt__json_write_double(FILE *out, double v)
{
    char buf[40];
    fputs(kt__format_double(buf, sizeof buf, v), out);
}

/* ---------------------------------------------------------------------------------------------------
 * Snapshot document
 * ------------------------------------------------------------------------------------------------- */

static int backend_ok(kt_backend_t b) { return (int)b >= 0 && (int)b < KT_BACKEND_COUNT; }

/* Whether entry e of a snapshot of source_count sources is one the loader would read back. */
static int entry_ok(const kt_kernel_timing_t *e, size_t source_count)
{
    if (!backend_ok(e->backend))
        return 0;
    for (uint32_t k = 0; e->by_source && k < e->by_source_count; k++)
        if (e->by_source[k].source >= source_count)
            return 0;
    for (uint32_t k = 0; e->configs && k < e->config_count; k++)
        if (!kt__launch_kind_id(e->configs[k].launch.kind))
            return 0;
    return 1;
}

/* Whether the spans of snap are in range for `count` entries. */
static int spans_ok(const kt_snapshot_t *snap, size_t count)
{
    if (snap->span_count && !snap->spans)
        return 0;
    for (size_t i = 0; i < snap->span_count; i++) {
        const kt_span_t *s = &snap->spans[i];
        if (s->entry >= count || s->thread >= snap->thread_count ||
            (s->queue != UINT32_MAX && s->queue >= snap->queue_count))
            return 0;
    }
    return 1;
}

/* Refuses snapshots the loader would reject, before anything is written: everything but the entries of a view
 * (made on request: each is checked as it is made) and its spans (checked when the last entry is made, before
 * they are written: a view may make them with its entries). */
static int validate(const kt_snapshot_t *snap, const kt__entry_view_t *v)
{
    if ((v->count && !v->get && !v->entries) || (snap->source_count && !snap->sources) ||
        (snap->queue_count && !snap->queues) || (snap->thread_count && !snap->threads) ||
        (snap->device_count && !snap->devices))
        return KT_EINVAL;
    for (size_t i = 0; !v->get && i < v->count; i++)
        if (!entry_ok(&v->entries[i], snap->source_count))
            return KT_EINVAL;
    for (size_t i = 0; i < snap->queue_count; i++)
        if (!backend_ok(snap->queues[i].backend) || (snap->source_count && snap->queues[i].source >= snap->source_count))
            return KT_EINVAL;
    for (size_t i = 0; i < snap->thread_count; i++)
        if (snap->source_count && snap->threads[i].source >= snap->source_count)
            return KT_EINVAL;
    for (size_t i = 0; i < snap->device_count; i++)
        if (!backend_ok(snap->devices[i].backend))
            return KT_EINVAL;
    if (!v->get && !spans_ok(snap, v->count))
        return KT_EINVAL;
    return 0;
}

/* The entries are written through this buffer, not a stdio call per key and number: a merged snapshot of a
 * million entries is some 40 calls an entry, and fwrite/fputs were a sixth of `ktiming merge`. Everything else
 * (the header, the span table, queues, threads, devices) goes straight to the FILE; the buffer is flushed before. */
#define JB_SIZE 65536

typedef struct jbuf_t {
    FILE *out;
    size_t len;
    char buf[JB_SIZE];
} jbuf_t;

static void jb_flush(jbuf_t *b)
{
    if (b->len)
        fwrite(b->buf, 1, b->len, b->out);
    b->len = 0;
}

/* Room for n more bytes (n <= JB_SIZE); returns where they go. */
static char *jb_room(jbuf_t *b, size_t n)
{
    if (JB_SIZE - b->len < n)
        jb_flush(b);
    return b->buf + b->len;
}

static void jb_end(jbuf_t *b, const char *p) { b->len = (size_t)(p - b->buf); }

static void jb_put(jbuf_t *b, const char *s, size_t n)
{
    if (n > JB_SIZE / 2) {
        jb_flush(b);
        fwrite(s, 1, n, b->out);
        return;
    }
    memcpy(jb_room(b, n), s, n);
    b->len += n;
}

static void jb_puts(jbuf_t *b, const char *s) { jb_put(b, s, strlen(s)); }

static void jb_putc(jbuf_t *b, char c)
{
    *jb_room(b, 1) = c;
    b->len++;
}

static void jb_u64(jbuf_t *b, uint64_t v) { jb_end(b, put_json_u64(jb_room(b, 24), v)); }

/* A quoted JSON string: copied as it is when no byte needs escaping (printable ASCII but '"' and '\\'),
 * else written by kt__json_write_string after a flush. */
static void jb_string(jbuf_t *b, const char *s, size_t maxlen)
{
    size_t n = s ? strnlen(s, maxlen) : 0;
    int slow = maxlen != SIZE_MAX && n >= maxlen; /* a fixed field without its NUL: cut by the writer */
    for (size_t i = 0; !slow && i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        slow = c < 0x20 || c >= 0x7f || c == '"' || c == '\\';
    }
    if (slow) {
        jb_flush(b);
        kt__json_write_string(b->out, s, maxlen);
        return;
    }
    jb_putc(b, '"');
    jb_put(b, s ? s : "", n);
    jb_putc(b, '"');
}

/* sep, then `"key": ` (key one of this file's literals, nothing to escape). */
static void jb_key(jbuf_t *b, const char *sep, const char *key)
{
    size_t ns = strlen(sep), nk = strlen(key);
    char *p = jb_room(b, ns + nk + 4);
    memcpy(p, sep, ns);
    p += ns;
    *p++ = '"';
    memcpy(p, key, nk);
    p += nk;
    memcpy(p, "\": ", 3);
    jb_end(b, p + 3);
}

static void jb_field_u64(jbuf_t *b, const char *sep, const char *key, uint64_t v)
{
    jb_key(b, sep, key);
    jb_u64(b, v);
}

static void jb_u128(jbuf_t *b, kt_u128_t v)
{
    char buf[48];
    size_t n;
    const char *p = put_json_u128(buf, v, &n);
    jb_put(b, p, n);
}

/* vals[0, n) as "v, v, ..." (no brackets). */
static void jb_u64_list(jbuf_t *b, const uint64_t *vals, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        char *p = jb_room(b, 26);
        if (i) {
            *p++ = ',';
            *p++ = ' ';
        }
        jb_end(b, put_json_u64(p, vals[i]));
    }
}

/* sep, then `"key": ` (key one of this file's literals, nothing to escape): not fprintf, which was a fifth of
 * writing a million merged entries (twenty fields each). */
static void field_key(FILE *out, const char *sep, const char *key)
{
    fputs(sep, out);
    fputc('"', out);
    fputs(key, out);
    fputs("\": ", out);
}

/* Writes `"key": value` for a uint64 field; sep goes before it. */
static void field_u64(FILE *out, const char *sep, const char *key, uint64_t v)
{
    field_key(out, sep, key);
    kt__json_write_u64(out, v);
}

static void field_double(FILE *out, const char *sep, const char *key, double v)
{
    field_key(out, sep, key);
    kt__json_write_double(out, v);
}

static void field_string(FILE *out, const char *sep, const char *key, const char *s, size_t maxlen)
{
    field_key(out, sep, key);
    kt__json_write_string(out, s, maxlen);
}

/* "configs": the entry's breakdown by launch configuration (schema 5), one object per row: kind, the sizes
 * within dims ("size", "local"; none for indirect and other), count, total, min, max. */
static void write_configs(jbuf_t *b, const kt_kernel_timing_t *e)
{
    if (!e->configs || !e->config_count)
        return;
    jb_puts(b, ",\n     \"configs\": [");
    for (uint32_t i = 0; i < e->config_count; i++) {
        const kt_config_timing_t *c = &e->configs[i];
        const kt_launch_t *l = &c->launch;
        uint32_t dims = l->kind == KT_LAUNCH_ITEMS || l->kind == KT_LAUNCH_GROUPS ? (l->dims > 3 ? 3 : l->dims) : 0;
        const char *kind = kt__launch_kind_id(l->kind); /* never NULL: validate() refused such rows */
        jb_puts(b, i ? ",\n       {\"kind\": \"" : "{\"kind\": \"");
        jb_puts(b, kind ? kind : "other");
        jb_putc(b, '"');
        if (dims) {
            jb_puts(b, ", \"size\": [");
            jb_u64_list(b, l->size, dims);
            jb_puts(b, "], \"local\": [");
            jb_u64_list(b, l->local, dims);
            jb_putc(b, ']');
        }
        jb_field_u64(b, ", ", "dispatch_count", c->dispatch_count);
        jb_field_u64(b, ", ", "total_ns", c->total_ns);
        jb_field_u64(b, ", ", "min_ns", c->min_ns);
        jb_field_u64(b, ", ", "max_ns", c->max_ns);
        jb_putc(b, '}');
    }
    jb_putc(b, ']');
}

/* The counters in the order written, the two doubles between last_ns and p50_ns: each key with its separator
 * one literal of known length, all of them in one reserved stretch of the buffer (a million merged entries were
 * a strlen of each separator and key, and a room check, per field). */
static void write_counters(jbuf_t *b, const kt_kernel_timing_t *e)
{
#define KEY_(sep, key) sep "\"" key "\": "
#define COUNTER_(sep, key) {KEY_(sep, #key), sizeof KEY_(sep, #key) - 1, offsetof(kt_kernel_timing_t, key)}
    static const struct {
        const char *prefix;
        size_t len, off;
    } kCounters[] = {
        COUNTER_(",\n     ", dispatch_count), COUNTER_(", ", total_ns), COUNTER_(", ", min_ns),
        COUNTER_(", ", max_ns), COUNTER_(", ", last_ns), COUNTER_(", ", p50_ns), COUNTER_(", ", p90_ns),
        COUNTER_(", ", p99_ns), COUNTER_(",\n     ", errors), COUNTER_(", ", dropped),
        COUNTER_(", ", spans_dropped),
    };
    static const char kMean[] = KEY_(",\n     ", "mean_ns"), kStddev[] = KEY_(", ", "stddev_ns");
#undef COUNTER_
#undef KEY_
    /* room: 11 counters (a prefix of at most 32 bytes and 22 for the value) and 2 doubles (40 for the value) */
    char *p = jb_room(b, 11 * (32 + 22) + sizeof kMean + sizeof kStddev + 2 * 40);
    for (size_t k = 0; k < sizeof kCounters / sizeof kCounters[0]; k++) {
        if (k == 5) {
            memcpy(p, kMean, sizeof kMean - 1);
            p += sizeof kMean - 1;
            p += strlen(kt__format_double(p, 40, e->mean_ns));
            memcpy(p, kStddev, sizeof kStddev - 1);
            p += sizeof kStddev - 1;
            p += strlen(kt__format_double(p, 40, e->stddev_ns));
        }
        uint64_t v;
        memcpy(&v, (const char *)e + kCounters[k].off, sizeof v);
        memcpy(p, kCounters[k].prefix, kCounters[k].len);
        p = put_json_u64(p + kCounters[k].len, v);
    }
    jb_end(b, p);
}

static void write_entry(jbuf_t *b, const kt_kernel_timing_t *e)
{
    uint32_t samples = e->samples ? e->sample_count : 0;
    jb_key(b, "    {", "name");
    jb_string(b, e->name, SIZE_MAX);
    jb_puts(b, ", \"backend\": \"");
    jb_puts(b, kt__backend_id(e->backend));
    jb_putc(b, '"');
    jb_key(b, ", ", "device");
    jb_string(b, e->device, SIZE_MAX);
    write_counters(b, e);
    kt_u128_t sum, sumsq;
    kt__entry_sums(e, &sum, &sumsq);
    jb_key(b, ",\n     ", "sum_ns");
    jb_u128(b, sum);
    jb_key(b, ", ", "sumsq_ns2");
    jb_u128(b, sumsq);
    if (e->bytes)
        jb_field_u64(b, ", ", "bytes", e->bytes);
    if (e->last_error[0]) {
        jb_key(b, ", ", "last_error");
        jb_string(b, e->last_error, sizeof e->last_error);
    }
    if (e->dropped) {
        uint64_t by[KT_DROP_REASON_COUNT];
        kt__entry_dropped_by(e, by);
        jb_puts(b, ", \"dropped_by\": {");
        const char *sep = "";
        for (int r = 0; r < KT_DROP_REASON_COUNT; r++)
            if (by[r]) {
                jb_field_u64(b, sep, kt__drop_reason_id(r), by[r]);
                sep = ", ";
            }
        jb_putc(b, '}');
    }
    if (e->hist && e->hist_count) { /* [lower_ns, count] per non-empty bucket: what a merge needs */
        jb_puts(b, ",\n     \"hist\": [");
        for (uint32_t i = 0; i < e->hist_count; i++) {
            char *p = jb_room(b, 56);
            if (i) {
                *p++ = ',';
                *p++ = ' ';
            }
            *p++ = '[';
            p = put_json_u64(p, e->hist[i].lower_ns);
            *p++ = ',';
            *p++ = ' ';
            p = put_json_u64(p, e->hist[i].count);
            *p++ = ']';
            jb_end(b, p);
        }
        jb_putc(b, ']');
    }
    if (e->by_source && e->by_source_count) { /* [source, dispatch_count, total_ns] per source */
        jb_puts(b, ",\n     \"by_source\": [");
        for (uint32_t i = 0; i < e->by_source_count; i++) {
            char *p = jb_room(b, 80);
            if (i) {
                *p++ = ',';
                *p++ = ' ';
            }
            *p++ = '[';
            p = put_decimal(p, e->by_source[i].source);
            *p++ = ',';
            *p++ = ' ';
            p = put_json_u64(p, e->by_source[i].dispatch_count);
            *p++ = ',';
            *p++ = ' ';
            p = put_json_u64(p, e->by_source[i].total_ns);
            *p++ = ']';
            jb_end(b, p);
        }
        jb_putc(b, ']');
    }
    write_configs(b, e);
    jb_field_u64(b, ",\n     ", "sample_count", samples);
    jb_puts(b, ",\n     \"samples\": [");
    jb_u64_list(b, e->samples, samples);
    jb_puts(b, "]}");
}

/* ---------------------------------------------------------------------------------------------------
 * The span table: spans as columns, each column one string of space-separated decimal integers (a number per
 * span), so a snapshot of many spans is small and reads without a JSON node per value (docs/json-schema.md,
 * "span_table"). Start times are deltas from the previous span's start, end times offsets from the span's
 * start plus its duration, the other times offsets from the span's start (all modulo 2^64, written as signed
 * 64-bit); "-" is an absent value (0, or no queue). A value repeated n times in a row is written once as
 * "v*n" (version 3): most columns of a program's spans hold one value throughout.
 * ------------------------------------------------------------------------------------------------- */

#define SPAN_BUF 65536

/* A column being written: a buffer flushed to out as it fills, and the run of equal values not yet written. */
typedef struct span_col_t {
    FILE *out;           /* destination */
    char buf[SPAN_BUF];  /* pending text */
    size_t len;          /* bytes pending */
    int first;           /* no value written yet */
    uint64_t run_v;      /* the value of the pending run */
    int run_signed;      /* ... written as signed */
    int run_absent;      /* ... absent ("-") */
    uint64_t run_n;      /* its length, 0 = none */
} span_col_t;

static void col_flush(span_col_t *c)
{
    fwrite(c->buf, 1, c->len, c->out);
    c->len = 0;
}

/* Writes the pending run: its value, and "*n" when it repeats. */
static void col_run_out(span_col_t *c)
{
    if (!c->run_n)
        return;
    if (c->len > SPAN_BUF - 64)
        col_flush(c);
    char *p = c->buf + c->len;
    if (!c->first)
        *p++ = ' ';
    c->first = 0;
    uint64_t v = c->run_v;
    if (c->run_absent) {
        *p++ = '-';
    } else {
        if (c->run_signed && (int64_t)v < 0) {
            *p++ = '-';
            v = 0 - v;
        }
        p = put_decimal(p, v);
    }
    if (c->run_n > 1) {
        *p++ = '*';
        p = put_decimal(p, c->run_n);
    }
    c->len = (size_t)(p - c->buf);
    c->run_n = 0;
}

/* Appends one value: v as unsigned, or as signed when is_signed, or "-" when absent. */
static void col_put(span_col_t *c, uint64_t v, int is_signed, int absent)
{
    if (absent)
        v = 0;
    if (c->run_n && c->run_v == v && c->run_absent == absent && c->run_signed == is_signed) {
        c->run_n++;
        return;
    }
    col_run_out(c);
    c->run_v = v;
    c->run_signed = is_signed;
    c->run_absent = absent;
    c->run_n = 1;
}

/* Which column of a span. */
enum { COL_ENTRY, COL_QUEUE, COL_THREAD, COL_FLAGS, COL_DURATION, COL_START, COL_END, COL_ENQUEUE, COL_QUEUED,
       COL_SUBMIT, COL_UNCERTAINTY, COL_COUNT };

static const char *const kSpanCols[COL_COUNT] = {"entry",      "queue",     "thread",     "flags",
                                                  "duration_ns", "start_ns", "end_ns",     "enqueue_ns",
                                                  "queued_ns",  "submit_ns", "uncertainty_ns"};

static void write_span_column(span_col_t *c, const kt_snapshot_t *snap, int col)
{
    uint64_t prev = 0;
    for (size_t i = 0; i < snap->span_count; i++) {
        const kt_span_t *s = &snap->spans[i];
        switch (col) {
        case COL_ENTRY: col_put(c, s->entry, 0, 0); break;
        case COL_QUEUE: col_put(c, s->queue, 0, s->queue == UINT32_MAX); break;
        case COL_THREAD: col_put(c, s->thread, 0, 0); break;
        case COL_FLAGS: col_put(c, s->flags, 0, 0); break;
        case COL_DURATION: col_put(c, s->duration_ns, 0, 0); break;
        case COL_START:
            col_put(c, s->start_ns - prev, 1, 0);
            prev = s->start_ns;
            break;
        case COL_END: col_put(c, s->end_ns - s->start_ns - s->duration_ns, 1, 0); break;
        case COL_ENQUEUE: col_put(c, s->enqueue_ns - s->start_ns, 1, s->enqueue_ns == 0); break;
        case COL_QUEUED: col_put(c, s->queued_ns - s->start_ns, 1, s->queued_ns == 0); break;
        case COL_SUBMIT: col_put(c, s->submit_ns - s->start_ns, 1, s->submit_ns == 0); break;
        default: col_put(c, s->uncertainty_ns, 0, s->uncertainty_ns == 0); break;
        }
    }
    col_run_out(c);
}

static int write_span_table(FILE *out, const kt_snapshot_t *snap)
{
    span_col_t *c = malloc(sizeof *c);
    if (!c)
        return KT_ENOMEM;
    fprintf(out, ",\n  \"span_table\": {\"count\": %zu", snap->span_count);
    for (int col = 0; col < COL_COUNT; col++) {
        fprintf(out, ",\n    \"%s\": \"", kSpanCols[col]);
        c->out = out;
        c->len = 0;
        c->first = 1;
        c->run_n = 0;
        write_span_column(c, snap, col);
        col_flush(c);
        fputc('"', out);
    }
    fputs("}", out);
    free(c);
    return 0;
}

static void write_device(FILE *out, const kt_device_info_t *d)
{
    fprintf(out, "    {\"backend\": \"%s\"", kt__backend_id(d->backend));
    field_string(out, ", ", "name", d->name, sizeof d->name);
    field_string(out, ", ", "clock_domain", d->clock_domain, sizeof d->clock_domain);
    field_u64(out, ",\n     ", "resolution_ns", d->resolution_ns);
    field_u64(out, ", ", "frequency_hz", d->frequency_hz);
    fprintf(out, ", \"valid_bits\": %" PRIu32, d->valid_bits);
    field_u64(out, ", ", "error_bound_ns", d->error_bound_ns);
    field_double(out, ", ", "drift_ppm", d->drift_ppm);
    fprintf(out, ", \"model_samples\": %" PRIu32, d->model_samples);
    /* identity (version 4): name is the label; an id the API did not give is left out */
    field_string(out, ",\n     ", "key", d->key, sizeof d->key);
    field_string(out, ", ", "model", d->id.model, sizeof d->id.model);
    field_string(out, ", ", "id_kind", d->id.id_kind, sizeof d->id.id_kind);
    fprintf(out, ", \"ordinal\": %" PRId32, d->id.ordinal);
    static const struct {
        const char *key;
        size_t off, cap;
    } opt[] = {
        {"vendor", offsetof(kt_device_id_t, vendor), sizeof d->id.vendor},
        {"uuid", offsetof(kt_device_id_t, uuid), sizeof d->id.uuid},
        {"pci", offsetof(kt_device_id_t, pci), sizeof d->id.pci},
        {"driver_uuid", offsetof(kt_device_id_t, driver_uuid), sizeof d->id.driver_uuid},
        {"platform", offsetof(kt_device_id_t, platform), sizeof d->id.platform},
        {"parent", offsetof(kt_device_id_t, parent), sizeof d->id.parent},
    };
    for (size_t i = 0; i < sizeof opt / sizeof opt[0]; i++) {
        const char *v = (const char *)&d->id + opt[i].off;
        if (v[0])
            field_string(out, ", ", opt[i].key, v, opt[i].cap);
    }
    if (d->id.parent[0])
        fprintf(out, ", \"partition\": %" PRId32, d->id.partition);
    field_string(out, ",\n     ", "host", d->host, sizeof d->host);
    fprintf(out, ", \"rank\": %" PRId32 "}", d->rank);
}

/* Opens an array member; items are written by the caller between "[\n" and "\n  ]". */
static void array_open(FILE *out, const char *key, size_t n)
{
    fprintf(out, ",\n  \"%s\": [%s", key, n ? "\n" : "");
}

static void array_close(FILE *out, size_t n) { fputs(n ? "\n  ]" : "]", out); }

int kt__export_json(FILE *out, const kt_snapshot_t *snap, const kt__entry_view_t *v)
{
    int rc = validate(snap, v);
    if (rc)
        return rc;
    jbuf_t *b = v->count ? malloc(sizeof *b) : NULL;
    if (v->count && !b)
        return KT_ENOMEM;
    fprintf(out, "{\n  \"schema\": \"%s\",\n  \"version\": %d,\n  \"generator\": \"ktiming %s\"",
            KT_SNAPSHOT_SCHEMA_NAME, KT_SNAPSHOT_SCHEMA_WRITTEN, KT_VERSION_STRING);
    field_string(out, ",\n  ", "host", snap->host, sizeof snap->host);
    fprintf(out, ",\n  \"pid\": %" PRId64 ", \"rank\": %" PRId32, snap->pid, snap->rank);
    field_u64(out, ", ", "kernels_dropped", snap->kernels_dropped);
    if (snap->names_truncated) /* written only when some name was cut: older readers never see the key otherwise */
        field_u64(out, ", ", "names_truncated", snap->names_truncated);
    field_u64(out, ",\n  ", "taken_ns", snap->taken_ns);
    if (snap->ended[0]) /* a program that died before writing its own snapshot (ktiming run) */
        field_string(out, ", ", "ended", snap->ended, sizeof snap->ended);
    if (snap->clock_domain[0])
        field_string(out, ",\n  ", "clock_domain", snap->clock_domain, sizeof snap->clock_domain);
    if (snap->clock_anchor.host_ns) {
        field_u64(out, ",\n  \"clock_anchor\": {", "host_ns", snap->clock_anchor.host_ns);
        field_u64(out, ", ", "monotonic_ns", snap->clock_anchor.monotonic_ns);
        field_u64(out, ", ", "bound_ns", snap->clock_anchor.bound_ns);
        fputc('}', out);
    }
    if (snap->source_count) { /* a merged snapshot: the processes it holds */
        array_open(out, "sources", snap->source_count);
        for (size_t i = 0; i < snap->source_count; i++) {
            const kt_source_info_t *so = &snap->sources[i];
            fputs(i ? ",\n    {" : "    {", out);
            field_string(out, "", "host", so->host, sizeof so->host);
            fprintf(out, ", \"pid\": %" PRId64 ", \"rank\": %" PRId32 ", \"offset_ns\": %" PRId64, so->pid, so->rank,
                    so->offset_ns);
            field_u64(out, ", ", "offset_bound_ns", so->offset_bound_ns);
            if (so->clock_domain[0])
                field_string(out, ", ", "clock_domain", so->clock_domain, sizeof so->clock_domain);
            fputc('}', out);
        }
        array_close(out, snap->source_count);
    }

    array_open(out, "entries", v->count);
    if (v->count) {
        b->out = out;
        b->len = 0;
        for (size_t i = 0; i < v->count && !rc; i++) {
            kt_kernel_timing_t tmp;
            const kt_kernel_timing_t *e = kt__view_entry(v, i, &tmp);
            if (!e)
                rc = KT_ENOMEM;
            else if (v->get && !entry_ok(e, snap->source_count))
                rc = KT_EINVAL;
            if (rc)
                break;
            if (i)
                jb_put(b, ",\n", 2);
            write_entry(b, e);
        }
        jb_flush(b);
    }
    free(b);
    if (rc)
        return rc;
    if (v->get && !spans_ok(snap, v->count)) /* made with the entries */
        return KT_EINVAL;
    array_close(out, v->count);

    if ((rc = write_span_table(out, snap)))
        return rc;

    array_open(out, "queues", snap->queue_count);
    for (size_t i = 0; i < snap->queue_count; i++) {
        const kt_queue_info_t *q = &snap->queues[i];
        if (i)
            fputs(",\n", out);
        fprintf(out, "    {\"backend\": \"%s\"", kt__backend_id(q->backend));
        field_string(out, ", ", "device", q->device, sizeof q->device);
        field_string(out, ", ", "label", q->label, sizeof q->label);
        if (snap->source_count)
            fprintf(out, ", \"source\": %" PRIu32, q->source);
        fputc('}', out);
    }
    array_close(out, snap->queue_count);

    array_open(out, "threads", snap->thread_count);
    for (size_t i = 0; i < snap->thread_count; i++) {
        const kt_thread_info_t *t = &snap->threads[i];
        if (i)
            fputs(",\n", out);
        fputs("    {", out);
        field_u64(out, "", "os_tid", t->os_tid);
        field_string(out, ", ", "name", t->name, sizeof t->name);
        if (snap->source_count)
            fprintf(out, ", \"source\": %" PRIu32, t->source);
        fputc('}', out);
    }
    array_close(out, snap->thread_count);

    array_open(out, "devices", snap->device_count);
    for (size_t i = 0; i < snap->device_count; i++) {
        if (i)
            fputs(",\n", out);
        write_device(out, &snap->devices[i]);
    }
    array_close(out, snap->device_count);
    fputs("\n}\n", out);
    return ferror(out) ? KT_EIO : 0;
}
