/* cl_ring.c — the completion queue: callbacks (on the driver's threads) push claimed slots into a bounded
 * lock-free ring (Vyukov's sequence-numbered cells; producers are any driver threads), and one drainer at a time
 * (the collector, or a flush) finishes them. */
#include "backends/opencl/cl_ring.h"
#include "backends/opencl/cl_outcome.h"

#include <pthread.h>
#include <stdatomic.h>

#define RING_CAP (1u << 13) /* callback completions buffered (host-timed queues; profiled ones are polled) */

/* One ring cell: seq says whose turn it is (pos: free for the producer of pos; pos+1: holds pos's slot). */
typedef struct ring_cell_t {
    _Atomic uint64_t seq; /* turn counter */
    uint32_t slot;        /* the claimed record */
} ring_cell_t;

static ring_cell_t g_ring[RING_CAP];
static _Alignas(64) _Atomic uint64_t g_ring_head;         /* next position producers claim */
static _Alignas(64) uint64_t g_ring_tail;                 /* next position to pop (under g_drain_lock) */
static pthread_mutex_t g_drain_lock = PTHREAD_MUTEX_INITIALIZER; /* one consumer at a time */

void kt__cl_ring_init(void)
{
    for (uint64_t i = 0; i < RING_CAP; i++)
        atomic_store_explicit(&g_ring[i].seq, i, memory_order_relaxed);
}

int kt__cl_ring_push(uint32_t slot)
{
    uint64_t pos = atomic_load_explicit(&g_ring_head, memory_order_relaxed);
    ring_cell_t *cell;
    for (;;) {
        cell = &g_ring[pos & (RING_CAP - 1)];
        uint64_t seq = atomic_load_explicit(&cell->seq, memory_order_acquire);
        int64_t diff = (int64_t)(seq - pos);
        if (diff == 0) {
            if (atomic_compare_exchange_weak_explicit(&g_ring_head, &pos, pos + 1, memory_order_seq_cst,
                                                      memory_order_relaxed))
                break;
        } else if (diff < 0) {
            return -1;
        } else {
            pos = atomic_load_explicit(&g_ring_head, memory_order_relaxed);
        }
    }
    cell->slot = slot;
    atomic_store_explicit(&cell->seq, pos + 1, memory_order_release);
    return 0;
}

/* Pop one slot (caller holds g_drain_lock); 0 when empty or the next producer has not finished writing. */
static int ring_pop(uint32_t *slot)
{
    ring_cell_t *cell = &g_ring[g_ring_tail & (RING_CAP - 1)];
    if (atomic_load_explicit(&cell->seq, memory_order_acquire) != g_ring_tail + 1)
        return 0;
    *slot = cell->slot;
    atomic_store_explicit(&cell->seq, g_ring_tail + RING_CAP, memory_order_release);
    g_ring_tail++;
    return 1;
}

int kt__cl_ring_nonempty(void)
{
    pthread_mutex_lock(&g_drain_lock);
    int r = atomic_load(&g_ring_head) != g_ring_tail;
    pthread_mutex_unlock(&g_drain_lock);
    return r;
}

unsigned kt__cl_ring_drain(unsigned max, int wait)
{
    if (wait)
        pthread_mutex_lock(&g_drain_lock);
    else if (pthread_mutex_trylock(&g_drain_lock) != 0)
        return 0;
    unsigned n = 0;
    uint32_t slot;
    while (n < max && ring_pop(&slot)) {
        kt__cl_rec_t *r = kt__cl_slot_rec(slot);
        if (!kt__cl_ctx_mine(r->ctx))
            continue; /* a forked child's copy of its parent's completion: the parent's driver state, left alone */
        kt__cl_rec_finish(r, (cl_int)atomic_load_explicit(&r->cb_status, memory_order_relaxed), r->observed_ns, 0);
        n++;
    }
    pthread_mutex_unlock(&g_drain_lock);
    return n;
}

void kt__cl_ring_fork_lock(void)
{
    pthread_mutex_lock(&g_drain_lock);
}

void kt__cl_ring_fork_unlock(void)
{
    pthread_mutex_unlock(&g_drain_lock);
}
