/* vk_collect.c — collection: completed slots and execution records taken out of the ring, mapped onto the host
 * timeline and recorded; the thread-readback collector thread and its poll pass (the only place the driver is
 * asked for query results). Calls vk_clock.c and vk_ring.c; called by vk_record.c and vk_context.c. */
#include "backends/vulkan/vk_internal.h"
#include "core/internal.h"
#include "core/service.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KT__VK_COLLECT_BATCH 128u
#define KT__VK_POLL_CHUNK 128u    /* slots per vkGetQueryPoolResults call of the collector */

/* ---------------------------------------------------------------------------------------------------
 * The one collector thread (thread readback)
 * ------------------------------------------------------------------------------------------------- */

static kt__collector_t g_collector = KT__COLLECTOR_INIT; /* polls every thread-readback context */

int kt__vk_collector_start(int (*step)(void *))
{
    return kt__collector_start(&g_collector, "kt-vulkan", step, NULL, 0);
}

void kt__vk_collector_nap(uint64_t nap_ns)
{
    g_collector.nap_ns = nap_ns; /* read by the collector thread itself, after its step */
}

void kt__vk_collector_wake(void)
{
    kt__collector_wake(&g_collector);
}

void kt__vk_collector_stop(void)
{
    kt__collector_stop(&g_collector);
}

/* Thread readback: ask for passes and wait (until the deadline, kt_now_ns time) for one that began after this
 * call, or until nothing is outstanding. */
void kt__vk_wait_fresh_pass(kt_vk_ctx_t *ctx, uint64_t deadline_ns)
{
    if (ctx->copy_readback || !kt__collector_running(&g_collector))
        return;
    pthread_mutex_lock(&ctx->lock);
    uint64_t target = ctx->passes + 2; /* the next pass may have begun before the caller's work completed */
    while (ctx->closed_unread && ctx->passes < target) {
        uint64_t now = kt_now_ns();
        if (now >= deadline_ns)
            break;
        ctx->pass_requested = 1;
        pthread_mutex_unlock(&ctx->lock);
        kt__collector_wake(&g_collector);
        pthread_mutex_lock(&ctx->lock);
        uint64_t step = deadline_ns - now < 10000000u ? deadline_ns - now : 10000000u;
        struct timespec ts = kt__timespec_in(CLOCK_MONOTONIC, step);
        pthread_cond_timedwait(&ctx->pass_done, &ctx->lock, &ts);
    }
    pthread_mutex_unlock(&ctx->lock);
}

/* ---------------------------------------------------------------------------------------------------
 * Collection
 * ------------------------------------------------------------------------------------------------- */

/* A completed slot copied out of the ring. */
typedef struct kt__vk_done_t {
    kt_kernel_id_t kernel; /* what was timed */
    uint32_t thread;       /* recording thread */
    uint32_t lane;         /* queue track; 0: the context's */
    uint64_t enqueue_ns;   /* host time of the begin */
    uint64_t begin_raw;    /* device timestamps */
    uint64_t end_raw;
    uint32_t begin_as;     /* index of the entry of this pass whose begin is the same device timestamp (a direct
                              batch's pair, for its first dispatch), mapped once for both; KT__VK_NONE: none */
    kt_kernel_id_t inflight; /* counted in flight (the unit's field, moved here): ended once recorded or dropped */
    kt_launch_t launch;      /* launch configuration (zero: none) */
} kt__vk_done_t;

/* Whether the pair s still has its first dispatch to be read with: not when that dispatch was read in an earlier
 * pass (its slot released, or taken since by another recording). A pass can read the dispatch without the pair
 * (the dispatch first on the in-use list, the pass full before the pair); the pair then waited for words its
 * released slot no longer held, and the discard of its command buffer counted the batch as never submitted
 * (test_run_vulkan_threads `record_threads`, about 1 run in 100 under TSan on a loaded machine). */
static int pair_first_unread(const kt_vk_ctx_t *ctx, const kt__vk_slot_t *s)
{
    if (s->pair_first == KT__VK_NONE)
        return 0;
    const kt__vk_slot_t *f = &ctx->slots[s->pair_first];
    return f->state != KT__VK_SLOT_FREE && f->batch_pair == (uint32_t)(s - ctx->slots) && f->batch_pair_gen == s->gen;
}

/* A direct batch whose begin is its first dispatch's (lavapipe, pair_first): the pair and that dispatch are read
 * in one pass, neither before the other has landed (the pair's copy is the command buffer's last, and the pair
 * usually comes first on the in-use list, allocated at kt_vk_cmd_begin). The shared begin is then mapped once
 * (begin_as), so the batch span holds its first dispatch to the nanosecond, not only within the clock's bound:
 * the host-domain conversion moves between two calls. */
static int pair_pending(const kt_vk_ctx_t *ctx, const kt__vk_slot_t *s)
{
    if (s->cmd_pair)
        return pair_first_unread(ctx, s) && !kt__vk_slot_copied(ctx, s->pair_first);
    if (s->batch_pair == KT__VK_NONE)
        return 0;
    const kt__vk_slot_t *p = &ctx->slots[s->batch_pair];
    if (p->gen != s->batch_pair_gen || p->state == KT__VK_SLOT_FREE) /* read already */
        return 0;
    return !kt__vk_slot_copied(ctx, s->batch_pair);
}

/* A harvested entry's begin and end from its landed readback words (begin at w[0], end at w[2]). */
static void done_stamps(kt__vk_done_t *o, const uint64_t *w)
{
    o->begin_raw = __atomic_load_n(&w[0], __ATOMIC_RELAXED);
    o->end_raw = __atomic_load_n(&w[2], __ATOMIC_RELAXED);
}

/* A harvested entry's origin, from its slot or execution record. */
static void done_origin(kt__vk_done_t *o, kt_kernel_id_t kernel, uint32_t thread, uint32_t lane, uint64_t enqueue_ns)
{
    o->kernel = kernel;
    o->thread = thread;
    o->lane = lane;
    o->enqueue_ns = enqueue_ns;
}

/* Take up to max completed slots out of the ring (oldest first). *more: stopped early, another pass has work. */
static uint32_t harvest_locked(kt_vk_ctx_t *ctx, kt__vk_done_t *out, uint32_t max, int *more)
{
    *more = 0;
    uint32_t n = 0;
    uint32_t slot = ctx->used_first;
    /* per_submission: the execution records (each a dispatch's or a batch's execution) */
    for (uint32_t k = 0; k < ctx->exec_used && n < max; k++) {
        uint32_t e = (ctx->exec_head + k) % ctx->exec_cap;
        kt__vk_exec_t *x = &ctx->execs[e];
        const uint64_t *w = ctx->words + kt__vk_exec_word(ctx, e);
        if (x->state != KT__VK_EXEC_PENDING || !kt__vk_words_landed(w))
            continue;
        done_stamps(&out[n], w);
        out[n].begin_as = KT__VK_NONE;
        done_origin(&out[n], x->kernel, x->thread, x->lane, x->enqueue_ns);
        out[n].inflight = x->inflight;
        out[n].launch = x->launch;
        x->inflight = 0;
        n++;
        kt__vk_exec_free_locked(ctx, e);
    }
    kt__vk_exec_reclaim_locked(ctx);
    uint32_t firsts[KT__VK_COLLECT_BATCH], first_at[KT__VK_COLLECT_BATCH], nfirsts = 0; /* pair_first -> entry */
    while (slot != KT__VK_NONE && n < max) {
        kt__vk_slot_t *s = &ctx->slots[slot];
        uint32_t next = s->next;
        out[n].begin_as = KT__VK_NONE;
        if (ctx->copy_readback) {
            /* per_submission: only a secondary's own copy is read here; the rest through execution records */
            if (s->state != KT__VK_SLOT_CLOSED || (ctx->per_submit && !s->self_copy) ||
                !kt__vk_slot_copied(ctx, slot) || pair_pending(ctx, s)) {
                slot = next;
                continue;
            }
            if (s->cmd_pair && pair_first_unread(ctx, s)) {
                if (n + 2 > max || nfirsts == KT__VK_COLLECT_BATCH) {
                    *more = 1; /* with its first dispatch, in the next pass */
                    break;
                }
                firsts[nfirsts] = s->pair_first;
                first_at[nfirsts++] = n;
            }
            if (s->unused) { /* a pair its batch did not need: its copy has landed, nothing writes it now */
                kt__vk_slot_release_locked(ctx, slot);
                slot = next;
                continue;
            }
            for (uint32_t f = 0; f < nfirsts && !s->cmd_pair; f++)
                if (firsts[f] == slot)
                    out[n].begin_as = first_at[f];
            const uint64_t *w = ctx->words + (size_t)slot * KT__VK_WORDS_PER_SLOT;
            done_stamps(&out[n], w);
        } else {
            if (s->state != KT__VK_SLOT_READY) {
                slot = next;
                continue;
            }
            out[n].begin_raw = s->begin_raw;
            out[n].end_raw = s->end_raw;
        }
        done_origin(&out[n], s->kernel, s->thread, s->lane, s->enqueue_ns);
        out[n].inflight = s->inflight;
        out[n].launch = s->launch;
        s->inflight = 0;
        n++;
        kt__vk_slot_release_locked(ctx, slot);
        slot = next;
    }
    return n;
}

/* One line per recorded dispatch (kt__verbose_line: stderr or KTIMING_LOG, never the program's stdout):
 * ktiming,exec,vulkan,<device>,<kernel>,<duration ms>,<start ns or empty>,device */
static void verbose_line(const kt_vk_ctx_t *ctx, const kt_dispatch_t *r)
{
    const kt__kernel_t *k = kt__kernel_get(r->kernel);
    const char *name = k ? k->name : "?";
    char lab[128]; /* the device's label: two of one model are told apart */
    const char *dev = kt__device_label_now(KT_BACKEND_VULKAN, ctx->device_key, ctx->device_name, lab, sizeof lab);
    if (r->start_ns)
        kt__verbose_line("exec", "vulkan", dev, name, "%.6f,%llu,device", (double)r->duration_ns / 1e6,
                         (unsigned long long)r->start_ns);
    else
        kt__verbose_line("exec", "vulkan", dev, name, "%.6f,,device", (double)r->duration_ns / 1e6);
}

/* Whether a device duration can be true: a dispatch runs after kt_vk_begin recorded it and before its values
 * were read, so it cannot last longer than the host time between the two (1 % and 100 us of slack for the
 * device's tick period and the host clock). Values a driver or a stray write left in the queries or the readback
 * buffer (a begin of 0, an end from another use) fail it by far. */
static int duration_plausible(uint64_t duration_ns, uint64_t enqueue_ns, uint64_t now_ns)
{
    uint64_t elapsed = now_ns > enqueue_ns ? now_ns - enqueue_ns : 0;
    return duration_ns <= elapsed + elapsed / 100 + 100000u;
}

/* Records what was harvested; returns how many passed the sanity check (the rest are dropped, invalid times).
 * Each entry's in-flight count ends once it is recorded or dropped. */
static uint32_t record_done(kt_vk_ctx_t *ctx, kt__vk_done_t *d, uint32_t n)
{
    const int verbose = kt__verbose_on();
    uint32_t kept = 0;
    uint64_t now = kt_now_ns();
    uint64_t starts[KT__VK_COLLECT_BATCH], uncs[KT__VK_COLLECT_BATCH]; /* mapped begins (0: none) */
    pthread_mutex_lock(&ctx->model_lock);
    for (uint32_t i = 0; i < n; i++) {
        starts[i] = uncs[i] = 0;
        kt_dispatch_t r = {0};
        r.kernel = d[i].kernel;
        r.queue = d[i].lane ? d[i].lane : ctx->queue_id;
        r.thread = d[i].thread;
        r.flags = KT_SPAN_DEVICE;
        r.enqueue_ns = d[i].enqueue_ns;
        r.launch = d[i].launch;
        r.duration_ns = kt__vk_ticks_to_ns(kt__vk_ticks_delta(d[i].begin_raw, d[i].end_raw, ctx->valid_bits),
                                           ctx->period_ns);
        if (!duration_plausible(r.duration_ns, d[i].enqueue_ns, now)) {
            kt_record_drop(d[i].kernel, KT_DROP_INVALID_TIMES);
            atomic_fetch_add(&ctx->dropped, 1);
            kt__vk_inflight_settle(&d[i].inflight);
            continue;
        }
        kept++;
        uint64_t start = 0, unc = 0;
        uint32_t as = d[i].begin_as;
        int mapped = as < i && starts[as] && d[as].begin_raw == d[i].begin_raw;
        if (mapped) {
            start = starts[as];
            unc = uncs[as];
        } else {
            uint64_t dev = kt__vk_device_ns_locked(ctx, d[i].begin_raw, d[i].enqueue_ns);
            mapped = kt__vk_map_locked(ctx, dev, &start, &unc) == 0;
        }
        if (mapped) {
            starts[i] = start;
            uncs[i] = unc;
            r.start_ns = start;
            r.end_ns = start + r.duration_ns;
            r.uncertainty_ns = unc;
        }
        kt_record_dispatch(&r);
        kt__vk_inflight_settle(&d[i].inflight);
        if (verbose && (!ctx->per_submit || r.kernel != ctx->submit_kernel)) /* a line per dispatch */
            verbose_line(ctx, &r);
    }
    pthread_mutex_unlock(&ctx->model_lock);
    return kept;
}

int kt_vk_collect(kt_vk_ctx_t *ctx)
{
    if (!ctx)
        return KT_EINVAL;
    if (ctx->untimed) /* nothing is ever in flight */
        return 0;
    /* One collector at a time, and callers wait for it rather than return 0 while it runs: a caller that has
     * just waited for its work (kt_vk_collect_wait, flushes) must see that work recorded when this returns. */
    pthread_mutex_lock(&ctx->collect_lock);
    uint64_t t0 = kt_now_ns();
    kt__vk_clock_maybe_refit(ctx);
    int total = 0;
    kt__vk_done_t batch[KT__VK_COLLECT_BATCH];
    for (;;) {
        int more;
        pthread_mutex_lock(&ctx->lock);
        uint32_t n = harvest_locked(ctx, batch, KT__VK_COLLECT_BATCH, &more);
        pthread_mutex_unlock(&ctx->lock);
        if (n)
            total += (int)record_done(ctx, batch, n);
        if (n < KT__VK_COLLECT_BATCH && !more)
            break;
    }
    atomic_fetch_add(&ctx->collected, (uint64_t)total);
    atomic_fetch_add(&ctx->collect_calls, 1);
    uint64_t dt = kt_now_ns() - t0;
    uint_fast64_t prev = atomic_load(&ctx->collect_max_ns);
    while (dt > prev && !atomic_compare_exchange_weak(&ctx->collect_max_ns, &prev, dt))
        ;
    pthread_mutex_unlock(&ctx->collect_lock);
    return total;
}

/* ---------------------------------------------------------------------------------------------------
 * Thread readback: the collector's poll pass, the only place the driver is asked for query results
 * ------------------------------------------------------------------------------------------------- */

/* One pass over the CLOSED slots (of `only`, unless VK_NULL_HANDLE), in runs contiguous in the query pool.
 * Called and returns with ctx->lock held; drops it around driver calls (the generations snapshot tells a slot
 * reused meanwhile). Passes may run concurrently (collector, discard, destroy): each has its own snapshot and
 * reads every slot it marked itself. Returns slots read. */
int kt__vk_poll_pass_locked(kt_vk_ctx_t *ctx, VkCommandBuffer only)
{
    int read = 0;
    uint32_t *mark = calloc(ctx->cap, sizeof(*mark));
    if (!mark)
        return 0;
    /* Snapshot the generations of the CLOSED slots: the list may change while the lock is dropped. */
    uint32_t nclosed = 0;
    for (uint32_t i = ctx->used_first; i != KT__VK_NONE; i = ctx->slots[i].next)
        if (ctx->slots[i].state == KT__VK_SLOT_CLOSED && (!only || ctx->slots[i].cmd == only)) {
            mark[i] = ctx->slots[i].gen | 0x80000000u; /* high bit: polled in this pass */
            nclosed++;
        }
    for (uint32_t first = 0; first < ctx->cap && nclosed;) {
        if (!(mark[first] & 0x80000000u)) {
            first++;
            continue;
        }
        uint32_t gens[KT__VK_POLL_CHUNK], count = 0;
        while (count < KT__VK_POLL_CHUNK && first + count < ctx->cap &&
               (mark[first + count] & 0x80000000u)) {
            gens[count] = mark[first + count] & 0x7fffffffu;
            count++;
        }
        nclosed -= count;
        pthread_mutex_unlock(&ctx->lock);
        uint64_t vals[4 * KT__VK_POLL_CHUNK];
        VkResult r = ctx->vk.vkGetQueryPoolResults(ctx->device, ctx->pool, 2 * first, 2 * count,
                                                   sizeof(uint64_t) * 4 * count, vals, 2 * sizeof(uint64_t),
                                                   VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WITH_AVAILABILITY_BIT);
        atomic_fetch_add(&ctx->polls, 1);
        pthread_mutex_lock(&ctx->lock);
        if (r != VK_SUCCESS && r != VK_NOT_READY)
            atomic_store(&ctx->last_error, (int)r);
        if (r == VK_SUCCESS || r == VK_NOT_READY) {
            for (uint32_t i = 0; i < count; i++) {
                kt__vk_slot_t *s = &ctx->slots[first + i];
                if (s->state != KT__VK_SLOT_CLOSED || (s->gen & 0x7fffffffu) != gens[i])
                    continue;
                if (!vals[4 * i + 1] || !vals[4 * i + 3]) {
                    s->half_read |= !vals[4 * i + 1] != !vals[4 * i + 3];
                    continue;
                }
                /* Until the reset kt_vk_begin recorded has run, the queries still hold the values they held
                 * when the slot was last released, available: timestamps never repeat, so equal values mean
                 * "not this use yet". Every release after a use that ran follows a read of it (collection, or
                 * the pass kt_vk_discard makes first), so those are the values kept here. */
                if (s->read_once && vals[4 * i] == s->begin_raw && vals[4 * i + 2] == s->end_raw)
                    continue;
                s->begin_raw = vals[4 * i];
                s->end_raw = vals[4 * i + 2];
                s->read_once = 1;
                s->state = KT__VK_SLOT_READY;
                ctx->closed_unread--;
                read++;
            }
        }
        first += count;
    }
    free(mark);
    return read;
}

int kt_vk_collect_wait(kt_vk_ctx_t *ctx, uint64_t timeout_ns)
{
    if (!ctx)
        return KT_EINVAL;
    uint64_t now = kt_now_ns();
    kt__vk_wait_fresh_pass(ctx, timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + timeout_ns);
    return kt_vk_collect(ctx);
}
