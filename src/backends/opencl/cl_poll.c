/* cl_poll.c — polling: each queue's FIFO of polled records looked at from its oldest (what a poll costs is what
 * finished since the last one), the slot scan for callback records, and the deadline-bounded flush loops. */
#include "backends/opencl/cl_poll.h"
#include "backends/opencl/cl_order.h"
#include "backends/opencl/cl_outcome.h"
#include "backends/opencl/cl_ring.h"
#include "core/internal.h"
#include "core/service.h"


static pthread_mutex_t g_poll_lock = PTHREAD_MUTEX_INITIALIZER; /* one FIFO poller at a time: records in order */
static _Atomic uint64_t g_polled;  /* polled records in the queues' FIFOs (seq_cst, see cl_poll.h) */
static _Atomic uint64_t g_collects; /* poll passes made by kt_cl_collect (the program's synchronisation points) */

int kt__cl_any_polled(void)
{
    return atomic_load(&g_polled) != 0;
}

void kt__cl_fifo_append(kt_cl_ctx_t *c, kt__cl_rec_t *r)
{
    atomic_store_explicit(&r->qnext, 0, memory_order_relaxed);
    atomic_fetch_add(&g_polled, 1);
    pthread_mutex_lock(&c->fifo_lock);
    if (c->fifo_tail)
        atomic_store_explicit(&kt__cl_slot_rec(c->fifo_tail - 1)->qnext, r->slot + 1, memory_order_release);
    else
        atomic_store_explicit(&c->fifo_head, r->slot + 1, memory_order_release);
    c->fifo_tail = r->slot + 1;
    pthread_mutex_unlock(&c->fifo_lock);
}

/* Unlinks r (whose predecessor in the FIFO is prev, NULL for the head). Caller holds g_poll_lock. */
static void fifo_unlink(kt_cl_ctx_t *c, kt__cl_rec_t *prev, kt__cl_rec_t *r)
{
    pthread_mutex_lock(&c->fifo_lock);
    uint32_t next = atomic_load_explicit(&r->qnext, memory_order_acquire);
    if (prev)
        atomic_store_explicit(&prev->qnext, next, memory_order_relaxed);
    else
        atomic_store_explicit(&c->fifo_head, next, memory_order_relaxed);
    if (c->fifo_tail == r->slot + 1)
        c->fifo_tail = prev ? prev->slot + 1 : 0;
    pthread_mutex_unlock(&c->fifo_lock);
    atomic_fetch_sub(&g_polled, 1);
}

/* Claims a polled record (POLLED -> PEEKED) and finds out whether its command is done: 1 when it is (the
 * record is then CLAIMED, *status set), -1 when it is still running (back to POLLED), 0 when the record was not
 * polled, -2 when it was enqueued after `newest` (back to POLLED, for the next pass). The end stamp is asked
 * for first: it is available only once the command is CL_COMPLETE (the specification's rule for
 * clGetEventProfilingInfo), and the record needs it anyway (*end_stamp), so a finished command costs no status
 * query. Without it, the status says whether the command failed (done too), finished a moment ago, or is still
 * running. */
static int poll_claim(kt__cl_rec_t *r, cl_int *status, uint64_t *end_stamp, uint64_t newest)
{
    uint64_t gen;
    if (!kt__cl_rec_poll_begin(r, &gen))
        return 0;
    if (r->enqueue_ns > newest) {
        kt__cl_rec_poll_end(r, gen, 0);
        return -2;
    }
    cl_ulong end = 0;
    *end_stamp = 0;
    if (kt__cl.clGetEventProfilingInfo(r->event, CL_PROFILING_COMMAND_END, sizeof end, &end, NULL) == CL_SUCCESS &&
        end != 0) {
        *status = CL_COMPLETE;
        *end_stamp = (uint64_t)end;
    } else {
        *status = CL_QUEUED;
        if (kt__cl.clGetEventInfo(r->event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof *status, status, NULL) !=
            CL_SUCCESS)
            *status = CL_INVALID_EVENT;
    }
    kt__cl_rec_poll_end(r, gen, *status <= CL_COMPLETE);
    return *status <= CL_COMPLETE ? 1 : -1;
}

/* How far a poll of a queue's FIFO goes. */
typedef enum walk_t {
    WALK_PREFIX, /* a synchronisation point: an in-order queue's finished records at its head; an out-of-order
                  * queue's finished ones past at most SYNC_SKIP_RUNNING still running */
    WALK_DONE,   /* every finished record: an out-of-order queue's finish in any order (the collector) */
    WALK_ALL,    /* every record, the unfinished ones dropped for `abandon` (detach, exit) or left (flush) */
} walk_t;

/* Records still running a synchronisation point's pass looks past on an out-of-order queue (one gated command at
 * its head held back every command behind it: none was recorded while the program kept synchronising). Past this
 * many it stops, so a sync's cost does not grow with a deep queue of gated commands; the queue is then left
 * uncovered, and the collector polls it whole. */
#define SYNC_SKIP_RUNNING 32u

/* Polls a queue's FIFO from its oldest record (caller holds g_poll_lock): finished ones go to b (recorded in
 * enqueue order by kt__cl_batch_done), unlinked; an in-order queue stops at its first record still running
 * (newer ones cannot be recorded before it), as does any walk at a record enqueued after `newest`. With
 * `abandon` (1 + a kt_drop_reason_t; WALK_ALL) the unfinished ones are counted dropped. Returns how many are
 * still running; *covered says whether the walk saw every record that could have finished (it did not stop
 * early on an out-of-order queue). */
static unsigned fifo_walk(kt_cl_ctx_t *c, walk_t how, uint64_t newest, int abandon, kt__cl_batch_t *b,
                          unsigned *finished, int *covered)
{
    unsigned running = 0, skipped = 0;
    kt__cl_rec_t *prev = NULL;
    uint32_t cur = atomic_load_explicit(&c->fifo_head, memory_order_acquire);
    int stop_at_running = how != WALK_ALL && !c->out_of_order;
    *covered = 1;
    while (cur) {
        kt__cl_rec_t *r = kt__cl_slot_rec(cur - 1);
        uint32_t next = atomic_load_explicit(&r->qnext, memory_order_acquire);
        cl_int st;
        uint64_t end_stamp;
        int got = poll_claim(r, &st, &end_stamp, newest);
        if (got == 1) {
            fifo_unlink(c, prev, r);
            kt__cl_batch_push(b, r, st, end_stamp);
            ++*finished;
        } else if (got == -1 && abandon) {
            kt__cl_rec_poll_take(r);
            fifo_unlink(c, prev, r);
            kt__cl_rec_finish(r, st, kt_now_ns(), abandon);
        } else {
            running++;
            if (got != -1 || stop_at_running) /* a newer record (-2): the rest are newer still */
                break;
            if (how == WALK_PREFIX && ++skipped > SYNC_SKIP_RUNNING) {
                *covered = 0;
                break;
            }
            prev = r;
        }
        cur = next;
    }
    if (cur) /* not looked at: in flight too (one is enough for the collector to keep polling) */
        running++;
    return running;
}

/* Polls the FIFOs of the given contexts (caller holds g_poll_lock) and records what finished; *running gets how
 * many are still in flight. A forked child's inherited contexts are left alone. With `covered_ns` (a
 * synchronisation point's time) each queue the walk covered is marked synced then. */
static unsigned poll_ctxs(void *const *ctxs, size_t n, walk_t how, uint64_t newest, int abandon,
                          unsigned *running, uint64_t covered_ns)
{
    kt__cl_batch_t done;
    kt__cl_batch_init(&done);
    unsigned finished = 0;
    *running = 0;
    for (size_t i = 0; i < n; i++) {
        kt_cl_ctx_t *c = ctxs[i];
        if (!atomic_load_explicit(&c->fifo_head, memory_order_acquire) || !kt__cl_ctx_mine(c))
            continue;
        int covered;
        *running += fifo_walk(c, how, newest, abandon, &done, &finished, &covered);
        if (covered_ns && covered)
            atomic_store_explicit(&c->synced_ns, covered_ns, memory_order_relaxed);
    }
    kt__cl_batch_done(&done);
    return finished;
}

/* Callback records are found by a scan of the slots (only while there are any): those of `only` (NULL: any)
 * that finished, or all of them with `abandon`, are finished here. */
static void scan_callbacks(kt_cl_ctx_t *only, int abandon)
{
    uint32_t n = kt__cl_rec_any_callback() ? kt__cl_slots_used() : 0;
    for (uint32_t i = 0; i < n; i++) {
        kt__cl_rec_t *r = kt__cl_slot_rec(i);
        uint64_t gen;
        if (!r || !kt__cl_rec_peek(r, &gen))
            continue;
        cl_int status = CL_QUEUED;
        int mine = (!only || r->ctx == only) && kt__cl_ctx_mine(r->ctx); /* never a parent's in a forked child */
        if (mine && kt__cl.clGetEventInfo(r->event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status,
                                          NULL) != CL_SUCCESS)
            status = CL_INVALID_EVENT;
        if (mine && (status <= CL_COMPLETE || abandon)) {
            kt__cl_rec_peek_claim(r, gen);
            kt__cl_rec_finish(r, status, kt_now_ns(), status > CL_COMPLETE ? abandon : 0);
            continue;
        }
        if (!kt__cl_rec_unpeek(r, gen) && kt__cl_ctx_mine(r->ctx)) /* the callback came while we looked: it left
                                                                      * its status for us */
            kt__cl_rec_finish(r, (cl_int)atomic_load(&r->cb_status), kt_now_ns(), 0);
    }
}

void kt__cl_collect_pass(kt_cl_ctx_t *only, int abandon)
{
    kt__cl_ring_drain(UINT32_MAX, 0); /* claimed by callbacks, queued for the collector: finish them here */
    scan_callbacks(only, abandon);
    if (!kt__cl_any_polled())
        return;
    kt__ctx_pin_t pin = {0};
    void *one = only;
    if (!only)
        kt__cl_ctx_pin(&pin);
    unsigned running;
    pthread_mutex_lock(&g_poll_lock);
    poll_ctxs(only ? &one : pin.ctx, only ? 1 : pin.n, WALK_ALL, UINT64_MAX, abandon, &running, 0);
    pthread_mutex_unlock(&g_poll_lock);
    if (!only)
        kt__cl_ctx_unpin(&pin);
}

/* What kt__cl_flush_ctxs waits for: these contexts, one collection pass for `only` (NULL: every queue). */
typedef struct flush_arg_t {
    void *const *ctxs;
    size_t n;
    kt_cl_ctx_t *only;
} flush_arg_t;

static uint64_t pending_of(void *const *ctxs, size_t n)
{
    uint64_t p = 0;
    for (size_t i = 0; i < n; i++)
        p += kt__cl_ctx_in_flight(ctxs[i]);
    return p;
}

/* One pass of a flush (kt__drain's step): collect, and say how many commands are still in flight. */
static uint64_t flush_pass(void *arg)
{
    const flush_arg_t *f = arg;
    if (pending_of(f->ctxs, f->n) == 0)
        return 0;
    kt__cl_collect_pass(f->only, 0);
    return pending_of(f->ctxs, f->n);
}

int kt__cl_flush_ctxs(void *const *ctxs, size_t n, kt_cl_ctx_t *only, uint64_t deadline)
{
    for (size_t i = 0; i < n; i++) {
        kt_cl_ctx_t *c = ctxs[i];
        kt__cl.clFlush(c->queue); /* commands never submitted would never finish */
        kt__cl_dev_refresh(c->dev);
    }
    /* the default back-off: usually only callbacks already running remain, so it yields for the first ms (a sleep
     * is at least 50 us plus timer slack, longer than a burst of small commands) before napping */
    flush_arg_t f = {ctxs, n, only};
    return kt__drain(deadline, flush_pass, &f) ? KT_ETIMEDOUT : 0;
}

uint64_t kt__cl_deadline_after(uint64_t timeout_ns)
{
    return kt_now_ns() + (timeout_ns ? timeout_ns : kt__cl_timeout_ns());
}

int kt__cl_flush_all(uint64_t deadline)
{
    kt__ctx_pin_t pin;
    kt__cl_ctx_pin(&pin);
    int rc = pin.n ? kt__cl_flush_ctxs(pin.ctx, pin.n, NULL, deadline) : 0;
    if (!pin.n)
        kt__cl_collect_pass(NULL, 0);
    kt__cl_ctx_unpin(&pin);
    return rc;
}

void kt__cl_poll_sync_point(kt_cl_ctx_t *ctx, uint64_t enqueued_before_ns)
{
    unsigned running = 0;
    uint64_t now = kt_now_ns();
    uint64_t newest = enqueued_before_ns && enqueued_before_ns < now ? enqueued_before_ns : now;
    if (ctx) { /* the caller's queue: only its finished prefix */
        void *one = ctx;
        pthread_mutex_lock(&g_poll_lock);
        poll_ctxs(&one, 1, WALK_PREFIX, newest, 0, &running, now);
        pthread_mutex_unlock(&g_poll_lock);
    } else if (kt__cl_any_polled()) { /* each queue's finished prefix: one look at a queue whose oldest runs */
        kt__ctx_pin_t pin;
        kt__cl_ctx_pin(&pin);
        pthread_mutex_lock(&g_poll_lock);
        poll_ctxs(pin.ctx, pin.n, WALK_PREFIX, newest, 0, &running, now);
        pthread_mutex_unlock(&g_poll_lock);
        kt__cl_ctx_unpin(&pin);
    }
    atomic_fetch_add_explicit(&g_collects, 1, memory_order_relaxed);
}

uint64_t kt__cl_poll_sync_points(void)
{
    return atomic_load_explicit(&g_collects, memory_order_relaxed);
}

unsigned kt__cl_poll_done(uint64_t stale_before, unsigned *running)
{
    kt__ctx_pin_t pin;
    kt__cl_ctx_pin(&pin);
    size_t n = 0; /* the queues to poll, compacted in the pin's own array: with work, and stale */
    for (size_t i = 0; i < pin.n; i++) {
        kt_cl_ctx_t *c = pin.ctx[i];
        if (atomic_load_explicit(&c->fifo_head, memory_order_acquire) &&
            atomic_load_explicit(&c->synced_ns, memory_order_relaxed) < stale_before)
            pin.ctx[n++] = c;
    }
    unsigned done = 0;
    *running = 0;
    if (n) { /* no poll lock taken (no wait for a sync point's pass) when every queue with work was covered */
        pthread_mutex_lock(&g_poll_lock);
        done = poll_ctxs(pin.ctx, n, WALK_DONE, kt_now_ns(), 0, running, 0);
        pthread_mutex_unlock(&g_poll_lock);
    }
    kt__cl_ctx_unpin(&pin);
    return done;
}

void kt__cl_poll_fork_lock(void)
{
    pthread_mutex_lock(&g_poll_lock);
}

void kt__cl_poll_fork_unlock(void)
{
    pthread_mutex_unlock(&g_poll_lock);
}
