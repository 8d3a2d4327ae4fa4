/* cl_order.c — ordering: the records a poll pass found finished are recorded oldest enqueue first, whatever order
 * the pass met them in. */
#include "backends/opencl/cl_order.h"
#include "backends/opencl/cl_outcome.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

void kt__cl_batch_init(kt__cl_batch_t *b)
{
    b->v = b->stack;
    b->n = 0;
    b->cap = 256;
}

static int cmp_enqueue(const void *a, const void *b)
{
    uint64_t x = ((const kt__cl_done_t *)a)->enqueue_ns, y = ((const kt__cl_done_t *)b)->enqueue_ns;
    return (x > y) - (x < y);
}

/* Sorts v[0, n) by enqueue time, stably, through tmp (room for n): adjacent ascending runs are merged until one
 * is left. A pass's records are a few such runs (the free lists hand slots out in runs), so this is a few
 * linear passes, with the comparison inline: qsort's calls were ~1 ms of the collector per 20,000 commands. */
static void merge_sort_done(kt__cl_done_t *v, kt__cl_done_t *tmp, unsigned n)
{
    kt__cl_done_t *src = v, *dst = tmp;
    for (;;) {
        unsigned runs = 0, w = 0;
        for (unsigned i = 0; i < n; runs++) {
            unsigned mid = i + 1;
            while (mid < n && src[mid - 1].enqueue_ns <= src[mid].enqueue_ns)
                mid++;
            unsigned end = mid < n ? mid + 1 : n;
            while (end < n && src[end - 1].enqueue_ns <= src[end].enqueue_ns)
                end++;
            unsigned x = i, y = mid;
            while (x < mid && y < end)
                dst[w++] = src[y].enqueue_ns < src[x].enqueue_ns ? src[y++] : src[x++];
            while (x < mid)
                dst[w++] = src[x++];
            while (y < end)
                dst[w++] = src[y++];
            i = end;
        }
        kt__cl_done_t *t = src;
        src = dst;
        dst = t;
        if (runs <= 1)
            break;
    }
    if (src != v)
        memcpy(v, src, n * sizeof *v);
}

/* In enqueue order. A pass meets records in slot order, which the free lists make ascending or descending in
 * enqueue order as often as not: those are checked for first. */
static void batch_sort(kt__cl_batch_t *b)
{
    unsigned up = 1, down = 1;
    for (unsigned k = 1; k < b->n && (up || down); k++) {
        up = up && b->v[k - 1].enqueue_ns <= b->v[k].enqueue_ns;
        down = down && b->v[k - 1].enqueue_ns >= b->v[k].enqueue_ns;
    }
    if (up)
        return;
    if (down) {
        for (unsigned i = 0, j = b->n - 1; i < j; i++, j--) {
            kt__cl_done_t t = b->v[i];
            b->v[i] = b->v[j];
            b->v[j] = t;
        }
        return;
    }
    kt__cl_done_t stack[256];
    kt__cl_done_t *tmp = b->n <= 256 ? stack : malloc(b->n * sizeof *tmp);
    if (!tmp) {
        qsort(b->v, b->n, sizeof *b->v, cmp_enqueue);
        return;
    }
    merge_sort_done(b->v, tmp, b->n);
    if (tmp != stack)
        free(tmp);
}

static void batch_finish(kt__cl_batch_t *b)
{
    batch_sort(b);
    for (unsigned k = 0; k < b->n; k++)
        kt__cl_rec_finish_stamped(b->v[k].r,
                                  (cl_int)atomic_load_explicit(&b->v[k].r->cb_status, memory_order_relaxed), 0, 0,
                                  b->v[k].end_stamp);
    b->n = 0;
}

void kt__cl_batch_push(kt__cl_batch_t *b, kt__cl_rec_t *r, cl_int status, uint64_t end_stamp)
{
    atomic_store_explicit(&r->cb_status, (int)status, memory_order_relaxed);
    if (b->n == b->cap) {
        kt__cl_done_t *grown = b->cap <= UINT_MAX / 2 ? malloc(2 * (size_t)b->cap * sizeof *grown) : NULL;
        if (!grown) {
            batch_finish(b); /* no memory: these in order among themselves */
        } else {
            memcpy(grown, b->v, b->n * sizeof *grown);
            if (b->v != b->stack)
                free(b->v);
            b->v = grown;
            b->cap *= 2;
        }
    }
    b->v[b->n++] = (kt__cl_done_t){r->enqueue_ns, r, end_stamp};
}

void kt__cl_batch_done(kt__cl_batch_t *b)
{
    batch_finish(b);
    if (b->v != b->stack)
        free(b->v);
    b->v = b->stack;
}
