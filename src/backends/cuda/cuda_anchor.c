/* cuda_anchor.c — CUDA backend: anchors that place device event times on the host timeline (an anchor event
 * recorded and bracketed by host clock reads, chains of anchors fitted into a clock model) and the placement of a
 * completed pair. Called with the consumer lock held and the context current. */
#include "cuda_internal.h"

#include "core/service.h"

#include <math.h>
#include <sched.h>
#include <string.h>

/* Longest gap between two anchors that still continues a chain (float ms keeps ~60 ns at 1 s). */
#define KT__CUDA_CHAIN_GAP_NS 2000000000ull
/* Longest spin waiting for an anchor event on the private stream. */
#define KT__CUDA_ANCHOR_WAIT_NS 20000000ull

/* The anchor stream and its two events, made once when ktiming first sees the context, on the program's thread
 * (like the pool's events): the collector thread then only uses handles, each after a context-id check, and never
 * has to guess whether handles it made while a reset raced it belong to the context's old life or its new one. */
void kt__cuda_anchor_create(kt__cuda_ctx_t *c)
{
    int pushed = 0;
    if (kt__cuda_ctx_enter(c, &pushed))
        return;
    kt__curesult r = kt__cu.cuStreamCreate(&c->anchor_stream, KT__CU_STREAM_NON_BLOCKING);
    if (r) {
        c->anchor_stream = NULL;
        kt__cuda_fail("cuStreamCreate (anchor stream)", r);
    }
    for (int i = 0; i < 2 && c->anchor_stream; i++) {
        r = kt__cu.cuEventCreate(&c->anchor_ev[i], KT__CU_EVENT_DEFAULT);
        if (r) {
            c->anchor_ev[i] = NULL;
            kt__cuda_fail("cuEventCreate (anchor)", r);
            break;
        }
        c->events_created++;
    }
    kt__cuda_ctx_leave(pushed);
}

/* Records anchor event `ev` on the anchor stream and waits for it, bracketing the wait with host clock reads.
 * 0 with [*h0, *h1] when it completed; -1 when the context is gone, the GPU is slow to reach it or a capture
 * forbids the query now (the next pass tries again), or the driver failed (last error set). */
static int anchor_record_wait(kt__cuda_ctx_t *c, kt__cuevent ev, uint64_t *h0, uint64_t *h1)
{
    if (!kt__cuda_ctx_alive(c)) /* before every use of a handle: a reset frees them all */
        return -1;
    *h0 = kt_now_ns();
    kt__curesult r = kt__cu.cuEventRecord(ev, c->anchor_stream);
    if (r) {
        kt__cuda_fail("cuEventRecord (anchor)", r);
        kt__cuda_ctx_alive(c); /* a reset answers this way too: then the caller queries nothing more */
        return -1;
    }
    uint32_t spins = 0;
    for (;;) {
        if (!kt__cuda_ctx_alive(c))
            return -1;
        r = kt__cu.cuEventQuery(ev);
        if (r != KT__CU_ERROR_NOT_READY && !kt__cuda_capture_busy(r))
            break;
        if (kt__cuda_capture_busy(r) || kt_now_ns() - *h0 > KT__CUDA_ANCHOR_WAIT_NS)
            return -1; /* the GPU is slow to reach it; try again next pass */
        if (++spins > 1000)
            sched_yield();
    }
    *h1 = kt_now_ns();
    if (r) {
        kt__cuda_fail("cuEventQuery (anchor)", r);
        kt__cuda_ctx_alive(c);
        return -1;
    }
    return 0;
}

/* Adds the completed anchor anchor_ev[nxt], bracketed by [h0, h1], to the chain (a new chain when the gap is too
 * long or the step cannot be read), refits the event model and makes it the newest anchor. */
static void anchor_chain_add(kt__cuda_ctx_t *c, int nxt, uint64_t h0, uint64_t h1)
{
    uint64_t mid = h0 + (h1 - h0) / 2;
    int64_t pos = 0;
    int continues = 0;
    if (c->anchor_cur >= 0 && mid - c->anchor_mid_ns <= KT__CUDA_CHAIN_GAP_NS) {
        float step_ms = 0.0f;
        if (kt__cuda_ctx_alive(c) &&
            kt__cu.cuEventElapsedTime(&step_ms, c->anchor_ev[c->anchor_cur], c->anchor_ev[nxt]) == KT__CU_SUCCESS) {
            pos = c->anchor_chain_ns + (int64_t)llround((double)step_ms * 1e6);
            continues = 1;
        }
    }
    c->chain_len = continues ? c->chain_len + 1 : 1;
    c->chain[(c->chain_len - 1) % KT__CUDA_ANCHOR_SAMPLES] =
        (kt_clock_sample_t){KT__CUDA_CHAIN_BASE_NS + (uint64_t)pos, h0, h1};
    int publish = 0;
    kt_clock_model_t m;
    uint32_t n = c->chain_len < KT__CUDA_ANCHOR_SAMPLES ? c->chain_len : KT__CUDA_ANCHOR_SAMPLES;
    int fitted = n >= KT_CLOCK_MIN_SAMPLES &&
                 kt_clock_fit(c->chain, n, KT_FIT_WEIGHTED, KT_DOMAIN_MONOTONIC_RAW, &m) == 0;
    pthread_mutex_lock(&c->lock); /* publish and stats read these under c->lock */
    c->anchor_cur = nxt;
    c->anchor_chain_ns = pos;
    c->anchors_made++;
    c->anchor_mid_ns = mid;
    c->anchor_half_ns = (h1 - h0 + 1) / 2;
    if (fitted) {
        publish = !c->event_model_valid || (c->anchors_made % 64) == 0;
        c->event_model = m;
        c->event_model_valid = 1;
    } else {
        c->event_model_valid = 0;
    }
    pthread_mutex_unlock(&c->lock);
    if (publish)
        kt__cuda_publish(c);
}

/* A new anchor when the newest is older than the anchor period (or there is none). */
void kt__cuda_anchor_refresh(kt__cuda_ctx_t *c)
{
    uint64_t now = kt_now_ns();
    if (c->anchor_cur >= 0 && now - c->anchor_mid_ns < (uint64_t)kt__cuda_g.desc.anchor_period_ms * 1000000ull)
        return;
    if (!c->anchor_stream || !c->anchor_ev[0] || !c->anchor_ev[1])
        return; /* they could not be made: durations only */
    int nxt = c->anchor_cur < 0 ? 0 : 1 - c->anchor_cur;
    uint64_t h0 = 0, h1 = 0;
    if (anchor_record_wait(c, c->anchor_ev[nxt], &h0, &h1) == 0)
        anchor_chain_add(c, nxt, h0, h1);
}

/* Fill duration and host placement of a completed pair (consumer lock held, context current). */
int kt__cuda_pair_place(kt__cuda_ctx_t *c, const kt__cuda_pair_t *p, kt_dispatch_t *d)
{
    float dur_ms = 0.0f;
    if (!kt__cuda_ctx_alive(c))
        return KT_ESTATE; /* reset since it completed: its events are gone (the caller drops it) */
    kt__curesult r = kt__cu.cuEventElapsedTime(&dur_ms, p->start, p->end);
    if (r)
        return kt__cuda_fail("cuEventElapsedTime", r);
    memset(d, 0, sizeof *d);
    d->kernel = p->kernel;
    d->queue = p->queue ? p->queue->queue_id : 0;
    d->thread = p->thread;
    d->flags = KT_SPAN_DEVICE;
    d->enqueue_ns = p->enqueue_ns;
    d->duration_ns = dur_ms > 0.0f ? (uint64_t)llround((double)dur_ms * 1e6) : 0;
    if (c->anchor_cur < 0)
        return 0; /* no anchor yet: duration only, placement unknown (0) */
    float off_ms = 0.0f;
    if (!kt__cuda_ctx_alive(c) ||
        kt__cu.cuEventElapsedTime(&off_ms, c->anchor_ev[c->anchor_cur], p->start) != KT__CU_SUCCESS)
        return 0;
    double off_ns = (double)off_ms * 1e6;
    /* Half a float ulp of the offset, and half the event timestamp resolution. */
    double rounding = fabs(off_ns) * ldexp(1.0, -24) + KT_CUDA_EVENT_RESOLUTION_NS / 2.0;
    int64_t dev = c->anchor_chain_ns + (int64_t)llround(off_ns);
    uint64_t host = 0, unc = 0;
    if (c->event_model_valid &&
        kt_clock_to_host(&c->event_model, KT__CUDA_CHAIN_BASE_NS + (uint64_t)dev, &host, &unc) == 0) {
        unc += (uint64_t)llround(rounding);
    } else {
        double h = (double)c->anchor_mid_ns + off_ns;
        if (h <= 0.0)
            return 0;
        host = (uint64_t)llround(h);
        unc = c->anchor_half_ns + (uint64_t)llround(fabs(off_ns) * KT__CUDA_ASSUMED_DRIFT_PPM * 1e-6 + rounding);
    }
    d->start_ns = host;
    d->end_ns = host + d->duration_ns;
    d->uncertainty_ns = unc;
    return 0;
}
