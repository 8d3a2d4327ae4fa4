/* text.c — the human-readable table: the seed's "[timing] name backend avg= min= max= n=" line per kernel,
 * followed by percentiles, error/drop counts when non-zero and the device for GPU backends. */
#include "export/export.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MIN_COLS 20 /* the seed's {:20s} */
#define NAME_MAX_COLS 40 /* longer names are shortened in the middle so the columns stay aligned */
#define BACKEND_MIN_COLS 5
#define MS_INT_DIGITS 4  /* the seed's {:7.2} leaves 4 digits before the point */

/* A name prepared for a terminal: control characters and invalid UTF-8 shown as '?', and the byte offset of
 * every code point so it can be cut and padded by display columns (one column per code point). */
typedef struct text_name_t {
    char *bytes;   /* sanitised UTF-8, NUL-terminated */
    size_t *cp;    /* cp[i] = byte offset of code point i; cp[cols] = total length */
    size_t cols;   /* code points */
} text_name_t;

static int name_prepare(text_name_t *tn, const char *s, size_t maxlen)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t len = s ? strnlen(s, maxlen) : 0, o = 0, n = 0;
    tn->bytes = malloc(len + 1);
    tn->cp = malloc((len + 1) * sizeof *tn->cp);
    if (!tn->bytes || !tn->cp) {
        free(tn->bytes);
        free(tn->cp);
        return KT_ENOMEM;
    }
    for (size_t i = 0; i < len;) {
        size_t k = (p[i] < 0x20 || p[i] == 0x7f) ? 0 : kt__utf8_seq_len(p + i);
        if (k == 0 || i + k > len) { /* replace one bad byte, resynchronise on the next */
            tn->cp[n++] = o;
            tn->bytes[o++] = '?';
            i++;
            continue;
        }
        tn->cp[n++] = o;
        memcpy(tn->bytes + o, p + i, k);
        o += k;
        i += k;
    }
    tn->cp[n] = o;
    tn->bytes[o] = '\0';
    tn->cols = n;
    return 0;
}

static void name_release(text_name_t *tn)
{
    free(tn->bytes);
    free(tn->cp);
}

/* Writes tn in exactly `cols` columns: padded on the right, or shortened as "head...tail". */
static void name_write(FILE *out, const text_name_t *tn, size_t cols)
{
    if (tn->cols <= cols) {
        fwrite(tn->bytes, 1, tn->cp[tn->cols], out);
        for (size_t i = tn->cols; i < cols; i++)
            fputc(' ', out);
        return;
    }
    size_t keep = cols - 3, head = (keep + 1) / 2, tail = keep - head;
    fwrite(tn->bytes, 1, tn->cp[head], out);
    fputs("...", out);
    fwrite(tn->bytes + tn->cp[tn->cols - tail], 1, tn->cp[tn->cols] - tn->cp[tn->cols - tail], out);
}

/* Decimals so that the smallest non-zero time shown keeps 3 significant digits: 2 (the seed) for times of
 * 1 ms and up, more for sub-millisecond kernels, at most 6 (1 ns). */
static int pick_decimals(double smallest_ms)
{
    if (!(smallest_ms > 0.0) || smallest_ms >= 1.0)
        return 2;
    int d = 2 - (int)floor(log10(smallest_ms));
    return d > 6 ? 6 : d;
}

static int digits_u64(uint64_t v)
{
    int d = 1;
    while (v >= 10) {
        v /= 10;
        d++;
    }
    return d;
}

static int is_host_device(const char *dev) { return !dev || !*dev || !strcmp(dev, "host"); }

static const char *backend_label(kt_backend_t b)
{
    const char *s = kt_backend_name(b);
    return s ? s : "?";
}

/* Records lost because the kernel table was full: one line under the table. */
static void kernels_dropped_line(FILE *out, const kt_snapshot_t *snap)
{
    if (snap->kernels_dropped)
        fprintf(out, "[timing] %" PRIu64 " records dropped: kernel table full (kernels_dropped)\n",
                snap->kernels_dropped);
}

int kt__export_text(FILE *out, const kt_snapshot_t *snap)
{
    if (snap->count == 0) {
        fputs("[timing] no kernels recorded\n", out);
        kernels_dropped_line(out, snap);
        return ferror(out) ? KT_EIO : 0;
    }
    if (!snap->entries)
        return KT_EINVAL;

    text_name_t *names = calloc(snap->count, sizeof *names);
    if (!names)
        return KT_ENOMEM;
    int rc = 0;
    size_t name_cols = NAME_MIN_COLS, backend_cols = BACKEND_MIN_COLS;
    double smallest = 0.0, largest = 0.0;
    uint64_t most_dispatches = 0;
    for (size_t i = 0; i < snap->count && !rc; i++) {
        const kt_kernel_timing_t *e = &snap->entries[i];
        rc = name_prepare(&names[i], e->name, SIZE_MAX);
        if (rc)
            break;
        if (names[i].cols > name_cols)
            name_cols = names[i].cols > NAME_MAX_COLS ? NAME_MAX_COLS : names[i].cols;
        size_t bl = strlen(backend_label(e->backend));
        if (bl > backend_cols)
            backend_cols = bl;
        const double shown[] = {kt_timing_avg_ms(e), kt_timing_min_ms(e), kt_timing_max_ms(e),
                                (double)e->p50_ns / 1e6, (double)e->p90_ns / 1e6, (double)e->p99_ns / 1e6};
        for (size_t k = 0; k < sizeof shown / sizeof shown[0]; k++) {
            if (shown[k] > 0.0 && (smallest == 0.0 || shown[k] < smallest))
                smallest = shown[k];
            if (shown[k] > largest)
                largest = shown[k];
        }
        if (e->dispatch_count > most_dispatches)
            most_dispatches = e->dispatch_count;
    }

    if (!rc) {
        int dec = pick_decimals(smallest);
        int int_digits = digits_u64((uint64_t)largest);
        int width = (int_digits > MS_INT_DIGITS ? int_digits : MS_INT_DIGITS) + 1 + dec;
        int n_cols = digits_u64(most_dispatches);
        for (size_t i = 0; i < snap->count; i++) {
            const kt_kernel_timing_t *e = &snap->entries[i];
            fputs("[timing] ", out);
            name_write(out, &names[i], name_cols);
            fprintf(out, " %-*s avg=%*.*fms min=%*.*fms max=%*.*fms n=%-*" PRIu64, (int)backend_cols,
                    backend_label(e->backend), width, dec, kt_timing_avg_ms(e), width, dec, kt_timing_min_ms(e),
                    width, dec, kt_timing_max_ms(e), n_cols, e->dispatch_count);
            fprintf(out, " p50=%*.*fms p90=%*.*fms p99=%*.*fms", width, dec, (double)e->p50_ns / 1e6, width, dec,
                    (double)e->p90_ns / 1e6, width, dec, (double)e->p99_ns / 1e6);
            if (e->errors)
                fprintf(out, " errors=%" PRIu64, e->errors);
            if (e->dropped)
                fprintf(out, " dropped=%" PRIu64, e->dropped);
            if (e->spans_dropped)
                fprintf(out, " spans_dropped=%" PRIu64, e->spans_dropped);
            if (e->backend != KT_BACKEND_CPU || !is_host_device(e->device)) {
                text_name_t dev;
                rc = name_prepare(&dev, e->device, SIZE_MAX);
                if (rc)
                    break;
                fputs(" on ", out);
                name_write(out, &dev, dev.cols);
                name_release(&dev);
            }
            fputc('\n', out);
        }
    }
    if (!rc)
        kernels_dropped_line(out, snap);
    for (size_t i = 0; i < snap->count; i++)
        name_release(&names[i]);
    free(names);
    if (!rc && ferror(out))
        rc = KT_EIO;
    return rc;
}
