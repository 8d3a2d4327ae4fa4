/* test_run_arena.c — `ktiming run`'s reader of a dead program's arena (kt_run_arena_snapshot) is bounded and
 * follows nothing outside the arena: roots pointing elsewhere, a shard list looped onto itself, a kernel count past
 * the limit, a slot whose seqlock its dying owner left odd, a span count past the log, a name without its NUL --
 * each gives a snapshot (or none) instead of a crash or a hang; a well-formed arena gives its exact counts. The
 * arena is filled by hand here, as a program dying mid-update could leave it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core/internal.h"

#include "shared/run_arena.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define ARENA_BYTES (64u << 20)

typedef struct fixture_t {
    kt_run_arena_t *r;
    unsigned char *base; /* where the arena is mapped here */
    size_t used;         /* bump offset of the next block */
} fixture_t;

static void *take(fixture_t *f, size_t n)
{
    void *p = f->base + f->used;
    f->used += (n + 63u) & ~(size_t)63u;
    memset(p, 0, n);
    return p;
}

static kt__arena_t *hdr(fixture_t *f) { return (kt__arena_t *)(void *)f->base; }

/* A fresh arena holding one well-formed kernel "k" with `count` records of 10 ns on one shard. */
static void fill(fixture_t *f, uint64_t count)
{
    kt__arena_t *a = hdr(f);
    memset(a, 0, sizeof *a);
    f->used = (sizeof *a + 63u) & ~(size_t)63u;
    a->size = ARENA_BYTES;
    a->sample_capacity = 16;
    a->span_capacity = 4;
    a->gen = 1;
    kt__kernel_t *chunk = take(f, KT__CHUNK * sizeof *chunk);
    char *name = take(f, 2), *dev = take(f, 5);
    memcpy(name, "k", 2);
    memcpy(dev, "host", 5);
    chunk[1].name = name;
    chunk[1].device = dev;
    chunk[1].name_len = 1;
    chunk[1].backend = KT_BACKEND_CPU;
    a->kdir[0] = chunk;
    a->kcount = 1;
    kt__shard_t *s = take(f, sizeof *s);
    s->gen = 1;
    kt__slot_t *slots = take(f, KT__CHUNK * sizeof *slots);
    kt__slot_cold_t *cold = take(f, sizeof *cold);
    kt__slot_t *sl = &slots[1];
    sl->count = count;
    sl->total = count * 10;
    sl->sq_lo = count * 100;
    sl->min = count ? 10 : UINT64_MAX;
    sl->max = count ? 10 : 0;
    sl->pend = 10;
    sl->cold = cold;
    s->dir[0] = slots;
    a->shards = s;
    a->pid = 4242;
    a->used = f->used;
    a->magic = KT__ARENA_MAGIC;
}

static int setup(void **state)
{
    static fixture_t f;
    assert_int_equal(kt_run_arena_create(ARENA_BYTES, &f.r), 0);
    unsigned long long addr = 0;
    int fd = -1;
    assert_int_equal(sscanf(kt_run_arena_env(f.r), "%d:%llx:", &fd, &addr), 2);
    f.base = (unsigned char *)(uintptr_t)addr;
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    kt_run_arena_close(f->r);
    return 0;
}

/* The snapshot's count for "k" (-1: no such entry). */
static int64_t count_of(fixture_t *f)
{
    kt_snapshot_t *s = kt_run_arena_snapshot(f->r, "signal 9");
    assert_non_null(s);
    assert_string_equal(s->ended, "signal 9");
    const kt_kernel_timing_t *e = kt_snapshot_find(s, "k", KT_BACKEND_CPU, NULL);
    int64_t n = e ? (int64_t)e->dispatch_count : -1;
    kt_snapshot_free(s);
    return n;
}

static void test_unclaimed(void **state)
{
    fixture_t *f = *state;
    memset(hdr(f), 0, sizeof(kt__arena_t));
    int64_t pid = 0;
    assert_int_equal(kt_run_arena_status(f->r, &pid, NULL), 0);
    assert_null(kt_run_arena_snapshot(f->r, NULL)); /* no process attached: nothing to read */
}

static void test_well_formed(void **state)
{
    fixture_t *f = *state;
    fill(f, 7);
    int64_t pid = 0;
    assert_int_equal(kt_run_arena_status(f->r, &pid, NULL), 1);
    assert_int_equal(pid, 4242);
    assert_int_equal(count_of(f), 7);
}

static void test_roots_outside(void **state)
{
    fixture_t *f = *state;
    static kt__shard_t outside; /* memory of this process, not of the arena */
    fill(f, 7);
    hdr(f)->shards = &outside;
    assert_int_equal(count_of(f), -1);
    fill(f, 7);
    hdr(f)->kdir[0] = (kt__kernel_t *)(void *)&outside;
    assert_int_equal(count_of(f), -1);
    fill(f, 7);
    hdr(f)->shards->dir[0] = (kt__slot_t *)(void *)(f->base + ARENA_BYTES - 64); /* runs past the used part */
    assert_int_equal(count_of(f), -1);
}

static void test_shard_cycle(void **state)
{
    fixture_t *f = *state;
    fill(f, 7);
    hdr(f)->shards->next = hdr(f)->shards; /* a list looped onto itself: each shard read once */
    assert_int_equal(count_of(f), 7);
}

static void test_counts_past_limits(void **state)
{
    fixture_t *f = *state;
    fill(f, 7);
    hdr(f)->kcount = UINT32_MAX; /* clamped; ids without a chunk are skipped */
    assert_int_equal(count_of(f), 7);
    fill(f, 7);
    hdr(f)->shards->span_count = 1000000; /* past span_capacity: the log is left out */
    hdr(f)->shards->spans = (kt__span_rec_t *)(void *)(f->base + 4096);
    assert_int_equal(count_of(f), 7);
    fill(f, 7);
    kt__slot_t *sl = &hdr(f)->shards->dir[0][1];
    sl->res_fill = UINT32_MAX; /* a reservoir fill past the capacity, its blocks absent */
    assert_int_equal(count_of(f), 7);
}

static void test_torn_record(void **state)
{
    fixture_t *f = *state;
    fill(f, 7);
    kt__slot_t *sl = &hdr(f)->shards->dir[0][1];
    sl->seq = 1; /* the owner died inside a record: read as it stands, after a bounded number of tries */
    sl->min = 50;
    sl->max = 10;
    kt_snapshot_t *s = kt_run_arena_snapshot(f->r, NULL);
    assert_non_null(s);
    const kt_kernel_timing_t *e = kt_snapshot_find(s, "k", KT_BACKEND_CPU, NULL);
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 7);
    assert_true(e->min_ns <= e->max_ns);
    kt_snapshot_free(s);
}

static void test_name_unterminated(void **state)
{
    fixture_t *f = *state;
    fill(f, 7);
    /* the name runs to the end of the used part without a NUL: the kernel cannot be named, so it is left out */
    char *tail = (char *)f->base + f->used - 8;
    memset(tail, 'x', 8);
    hdr(f)->kdir[0][1].name = tail;
    assert_int_equal(count_of(f), -1);
}

/* A program that exec'd (the same pid) records under a second root, linked from the first: each image's
 * snapshot is read on its own; a link pointing back or outside the used part ends the chain there. */
static void test_image_chain(void **state)
{
    fixture_t *f = *state;
    fill(f, 7);
    kt__arena_t *r2 = take(f, sizeof *r2);
    r2->gen = 1;
    r2->pid = 4242;
    r2->kdir[0] = hdr(f)->kdir[0];
    r2->kcount = 1;
    kt__shard_t *s = take(f, sizeof *s);
    s->gen = 1;
    kt__slot_t *slots = take(f, KT__CHUNK * sizeof *slots);
    slots[1].count = 3;
    slots[1].total = 30;
    slots[1].min = slots[1].max = slots[1].pend = 10;
    slots[1].cold = take(f, sizeof(kt__slot_cold_t));
    s->dir[0] = slots;
    r2->shards = s;
    r2->exited = 1;
    hdr(f)->used = f->used;
    hdr(f)->newer = r2;
    assert_int_equal(kt_run_arena_images(f->r), 2);
    int exited = 0;
    assert_int_equal(kt_run_arena_status(f->r, NULL, &exited), 1);
    assert_int_equal(exited, 1); /* the last image's */
    kt_snapshot_t *snap = kt_run_arena_snapshot_image(f->r, 1, NULL);
    assert_non_null(snap);
    const kt_kernel_timing_t *e = kt_snapshot_find(snap, "k", KT_BACKEND_CPU, NULL);
    assert_non_null(e);
    assert_int_equal(e->dispatch_count, 3);
    kt_snapshot_free(snap);
    assert_int_equal(count_of(f), 7); /* image 0 */
    assert_null(kt_run_arena_snapshot_image(f->r, 2, NULL));
    r2->newer = hdr(f); /* back to the first: a loop */
    assert_int_equal(kt_run_arena_images(f->r), 2);
    hdr(f)->newer = (kt__arena_t *)(void *)(f->base + ARENA_BYTES - 64); /* past the used part */
    assert_int_equal(kt_run_arena_images(f->r), 1);
}

/* What the program could not keep in the arena, as it counted it. */
static void test_lost_counts(void **state)
{
    fixture_t *f = *state;
    fill(f, 7);
    hdr(f)->outside = 5;
    hdr(f)->shards_outside = 2;
    hdr(f)->others = 3;
    hdr(f)->others_done = 1;
    kt_run_arena_lost_t lost;
    kt_run_arena_lost(f->r, &lost);
    assert_int_equal(lost.outside, 5);
    assert_int_equal(lost.threads_outside, 2);
    assert_int_equal(lost.processes_lost, 2);
    hdr(f)->others_done = 4; /* never below zero */
    kt_run_arena_lost(f->r, &lost);
    assert_int_equal(lost.processes_lost, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unclaimed),        cmocka_unit_test(test_well_formed),
        cmocka_unit_test(test_roots_outside),    cmocka_unit_test(test_shard_cycle),
        cmocka_unit_test(test_counts_past_limits), cmocka_unit_test(test_torn_record),
        cmocka_unit_test(test_name_unterminated), cmocka_unit_test(test_image_chain),
        cmocka_unit_test(test_lost_counts),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
