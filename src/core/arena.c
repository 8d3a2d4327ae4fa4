/* arena.c — crash survival under `ktiming run`: the recorder's tables and roots in memory the parent can read.
 *
 * `ktiming run` creates a memfd (close-on-exec: no process of the run inherits it), maps it MAP_SHARED at an
 * address it chose and names both in KTIMING_RUN_ARENA ("<fd>:<address in hex>:<bytes>:<run's pid>"). Here, at
 * its first use of ktiming (not at load: a shell that loads libktiming through LD_PRELOAD and records nothing must
 * leave it to the program), the program opens it through /proc/<run's pid>/fd/<fd> and maps it at the same
 * address (MAP_FIXED_NOREPLACE: nothing of the program's is ever replaced; when the address is taken, one line
 * says so and the program runs without crash survival). From then on every allocation of the recorder and the
 * registry (shards, slots, reservoirs, histograms, span logs, interned names, queue/thread/device tables) comes
 * from the arena (kt__zalloc), and each root the snapshot starts from (shard list, generation, kernel directory
 * and count, configuration) is also stored in the arena's header when it changes -- never on the record path.
 * Pointers are valid in both processes, so when the program dies without writing its snapshot (a signal,
 * _exit, SIGKILL) `ktiming run` builds it with the library's own snapshot code from the arena
 * (kt_run_arena_snapshot, snapshot.c), reading without locks and following no pointer outside the arena. An
 * exec'd image of the same process records under a root of its own; other processes of the run that record are
 * counted in the header and write their own snapshot files at exit.
 */
#include "core/internal.h"
#include "core/service.h"

#include "shared/output.h"
#include "shared/run_arena.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 1u
#endif

/* Atomic: set once, at the first use, while other threads of the program may already read them. */
kt__arena_t *_Atomic kt__arena;
static kt__arena_t *_Atomic g_map;    /* the mapping's header, when this process allocates from it (else NULL) */
static kt__arena_t *_Atomic g_shared; /* the header as run sees it: g_map, or a view of its first pages only (a
                                       * forked child, or a process that found another one's arena), for the
                                       * counts */
static int g_counted;         /* this process was counted in g_shared->others */
static pthread_once_t g_claim_once = PTHREAD_ONCE_INIT;
_Atomic int kt__arena_child_pending;

/* ---------------------------------------------------------------------------------------------------
 * The program's side
 * ------------------------------------------------------------------------------------------------- */

/* The header's pages (what a process that does not allocate from the arena keeps mapped, for the counts). */
static size_t header_bytes(void)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (sizeof(kt__arena_t) + page - 1u) & ~(page - 1u);
}

/* Bytes at the arena's bump offset, or NULL when full. Spans logs and other large blocks (big) leave the last
 * eighth to the small tables: a program with many threads then loses some timelines, never its shards. */
static void *arena_bump(kt__arena_t *a, size_t n, int big)
{
    uint64_t sz = ((uint64_t)n + 63u) & ~(uint64_t)63u; /* every block on its own cache lines */
    if (big && atomic_load_explicit(&a->used, memory_order_relaxed) + sz > a->size - a->size / 8u)
        return NULL;
    uint64_t off = atomic_fetch_add_explicit(&a->used, sz, memory_order_relaxed);
    if (off <= a->size && sz <= a->size - off)
        return (unsigned char *)a + off; /* fresh memfd pages are zero; nothing is ever freed */
    return NULL;
}

#define ARENA_BIG (64u << 10) /* a span log (1.2 MB by default), a large reservoir block */

void *kt__zalloc(size_t n)
{
    kt__arena_claim();
    kt__arena_t *a = g_map;
    if (a && n) {
        void *p = arena_bump(a, n, n >= ARENA_BIG);
        if (p)
            return p;
        /* full: the rest lives on the heap, where run cannot read it; counted, and run says so */
        atomic_fetch_add_explicit(&a->outside, 1, memory_order_relaxed);
    }
    return calloc(1, n ? n : 1);
}

int kt__in_arena(const void *p)
{
    const kt__arena_t *a = g_map;
    return a && (uintptr_t)p >= (uintptr_t)a && (uintptr_t)p < (uintptr_t)a + a->size;
}

void kt__zfree(void *p)
{
    if (!kt__in_arena(p))
        free(p);
}

void kt__arena_shard_outside(void)
{
    if (g_map)
        atomic_fetch_add_explicit(&g_map->shards_outside, 1, memory_order_relaxed);
}

/* Parses KTIMING_RUN_ARENA; 0 when it holds all four fields. */
static int arena_parse(const char *v, int *fd, uintptr_t *addr, uint64_t *size, long *pid)
{
    unsigned long long a = 0, s = 0;
    int n = 0;
    if (sscanf(v, "%d:%llx:%llu:%ld%n", fd, &a, &s, pid, &n) != 4 || v[n] != '\0' || !a ||
        s < sizeof(kt__arena_t) || *fd < 0 || *pid <= 0)
        return -1;
    *addr = (uintptr_t)a;
    *size = s;
    return 0;
}

#define ARENA_NAME "ktiming-run-arena"

/* run's memfd, opened anew through /proc (run holds it until the program's end): a descriptor of this process,
 * close-on-exec, or -1 with why in `why`. Checked to be the arena (its name and size), never another file behind
 * a reused pid. */
static int arena_open(long pid, int fd, uint64_t size, char *why, size_t cap)
{
    char path[64], link[128];
    snprintf(path, sizeof path, "/proc/%ld/fd/%d", pid, fd);
    ssize_t n = readlink(path, link, sizeof link - 1);
    int own = n > 0 ? open(path, O_RDWR | O_CLOEXEC) : -1;
    if (own < 0) {
        snprintf(why, cap, "%s: %s", path, strerror(errno));
        return -1;
    }
    link[n] = 0;
    struct stat st;
    if (strncmp(link, "/memfd:" ARENA_NAME, sizeof "/memfd:" ARENA_NAME - 1) != 0 || fstat(own, &st) != 0 ||
        (uint64_t)st.st_size != size) {
        snprintf(why, cap, "%s is not the run arena", path);
        close(own);
        return -1;
    }
    return own;
}

/* This program image: the kernel's AT_RANDOM bytes, new at every exec, the same for every copy of libktiming in
 * one image. */
static uint64_t image_token(void)
{
    const unsigned char *r = (const unsigned char *)(uintptr_t)getauxval(AT_RANDOM);
    uint64_t t = 0;
    if (r)
        memcpy(&t, r, sizeof t);
    return t | 1u; /* never 0 (a root not yet filled in) */
}

/* The newest image root of the chain starting at a (bounded: the arena is not trusted across an exec). */
static kt__arena_t *newest_root(kt__arena_t *a)
{
    kt__arena_t *r = a;
    for (int i = 0; i < 64; i++) {
        kt__arena_t *n = atomic_load_explicit(&r->newer, memory_order_acquire);
        if (!n || (uintptr_t)n < (uintptr_t)a || (uintptr_t)n + sizeof *n > (uintptr_t)a + a->size)
            break;
        r = n;
    }
    return r;
}

/* A root's fields for the image now recording under it. */
static void root_fill(kt__arena_t *r, uint64_t token)
{
    atomic_store_explicit(&r->gen, kt__generation(), memory_order_relaxed);
    atomic_store_explicit(&r->pid, (int64_t)getpid(), memory_order_relaxed);
    r->token = token;
}

/* At the process's first use of ktiming (kt__arena_claim), not at load: the first process of the run that uses
 * ktiming takes the arena (the program, or the first timed process a script starts; a shell or wrapper that only
 * loads libktiming through LD_PRELOAD never does). After an exec (the same pid, a new image) the new image takes a
 * root of its own in the same arena, so what the old image recorded stays readable. Any other process keeps the
 * header's pages only, to be counted: it writes its own snapshot at exit (kt__arena_exit_other). A process that
 * cannot open or map the arena says so in one line. */
static void arena_claim(void)
{
    const char *v = kt__env(KT_ENV_NAME(RUN_ARENA));
    int fd;
    uintptr_t addr;
    uint64_t size;
    long pid;
    if (!v || !*v || arena_parse(v, &fd, &addr, &size, &pid) != 0)
        return;
    char why[160];
    int own = arena_open(pid, fd, size, why, sizeof why);
    if (own < 0) {
        fprintf(stderr, "ktiming: crash survival off: cannot open the run arena (%s); if the program dies without "
                        "exiting, its timings are lost\n", why);
        return;
    }
    void *p = mmap((void *)addr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, own, 0);
    int e = errno;
    close(own); /* the mapping stays; the program's own descriptors are left as they were */
    if (p == MAP_FAILED || p != (void *)addr) {
        if (p != MAP_FAILED) /* a kernel before 4.17 treats the flag as a hint */
            munmap(p, size);
        fprintf(stderr, "ktiming: crash survival off: cannot map the run arena at %#" PRIxPTR " (%s); if the "
                        "program dies without exiting, its timings are lost\n",
                addr, p == MAP_FAILED ? strerror(e) : "address taken");
        return;
    }
    kt__arena_t *a = p;
    uint64_t token = image_token();
    uint32_t free_ = 0;
    if (atomic_compare_exchange_strong(&a->claimed, &free_, 1u)) {
        a->size = size;
        atomic_store_explicit(&a->used, (sizeof *a + 63u) & ~(uint64_t)63u, memory_order_relaxed);
        root_fill(a, token);
        atomic_store_explicit(&a->magic, KT__ARENA_MAGIC, memory_order_release);
        g_map = g_shared = kt__arena = a;
        return;
    }
    /* taken: its taker stores the header right after its exchange (bounded wait for it) */
    for (int i = 0; i < 1000 && atomic_load_explicit(&a->magic, memory_order_acquire) != KT__ARENA_MAGIC; i++)
        sched_yield();
    int ready = atomic_load_explicit(&a->magic, memory_order_acquire) == KT__ARENA_MAGIC;
    if (ready && atomic_load_explicit(&a->pid, memory_order_relaxed) == (int64_t)getpid()) {
        kt__arena_t *last = newest_root(a);
        kt__arena_t *root = last->token != token ? arena_bump(a, sizeof *root, 0) : NULL;
        if (root) { /* this pid's earlier image exec'd us: a root of our own, after its */
            root_fill(root, token);
            atomic_store_explicit(&last->newer, root, memory_order_release);
            g_map = g_shared = a;
            kt__arena = root;
            return;
        }
        if (last->token == token) { /* another copy of libktiming in this image has it */
            munmap(p, size);
            return;
        }
    }
    size_t hb = header_bytes();
    munmap((unsigned char *)p + hb, size - hb);
    if (!ready) {
        munmap(p, hb);
        return;
    }
    g_shared = a; /* counted; its own snapshot is written at its exit */
    g_counted = 1;
    atomic_fetch_add_explicit(&a->others, 1, memory_order_relaxed);
}

void kt__arena_claim(void) { pthread_once(&g_claim_once, arena_claim); }

/* A forked child must not write into its parent's arena: the arena becomes private memory holding the same
 * bytes at the same address (every pointer stays valid), and the child goes on allocating from it. The header's
 * first pages stay shared through a second mapping, so the child's first record is counted there for run
 * (kt__arena_child_records) and its end too (kt__arena_exit_other). */
void kt__arena_fork_child(void)
{
    kt__arena_t *a = g_map;
    g_counted = 0;
    if (a && a == g_shared) { /* the parent's arena, shared with run (a grandchild's is private already) */
        size_t hb = header_bytes();
        void *view = mremap(a, 0, hb, MREMAP_MAYMOVE); /* a second mapping of the same shared pages */
        g_shared = view == MAP_FAILED ? NULL : view;
        uint64_t used = atomic_load_explicit(&a->used, memory_order_relaxed);
        if (used > a->size)
            used = a->size;
        size_t size = (size_t)a->size;
        void *copy = mmap(NULL, (size_t)used, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (copy == MAP_FAILED) { /* cannot copy: stop allocating there; what exists stays shared (rare) */
            g_map = NULL;
            kt__arena = NULL;
            return;
        }
        memcpy(copy, a, (size_t)used);
        if (mmap(a, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED) {
            munmap(copy, (size_t)used);
            g_map = NULL;
            kt__arena = NULL;
            return;
        }
        memcpy(a, copy, (size_t)used);
        munmap(copy, (size_t)used);
        atomic_store_explicit(&kt__arena->pid, (int64_t)getpid(), memory_order_relaxed);
    }
    if (g_shared)
        atomic_store_explicit(&kt__arena_child_pending, 1, memory_order_relaxed);
}

void kt__arena_child_records(void)
{
    if (!atomic_exchange_explicit(&kt__arena_child_pending, 0, memory_order_relaxed) || !g_shared)
        return;
    g_counted = 1;
    atomic_fetch_add_explicit(&g_shared->others, 1, memory_order_relaxed);
}

/* Records (counted, in error, dropped) in the shards of generation gen from head; with lo < hi every pointer is
 * checked to lie in [lo, hi) and the walk is bounded (a dead program's arena), else this process's own tables. */
static uint64_t shards_records(kt__shard_t *head, uint64_t gen, uintptr_t lo, uintptr_t hi)
{
    uint64_t total = 0, max = lo < hi ? (hi - lo) / sizeof(kt__shard_t) : UINT64_MAX;
#define IN(p, n) (lo == hi || ((uintptr_t)(p) >= lo && (uintptr_t)(p) < hi && (n) <= hi - (uintptr_t)(p)))
    for (kt__shard_t *s = head; s && max-- && IN(s, sizeof *s); s = s->next) {
        if (KT__LD(&s->gen) != gen)
            continue;
        for (uint32_t c = 0; c < KT__DIR; c++) {
            kt__slot_t *chunk = KT__LD(&s->dir[c]);
            if (!chunk || !IN(chunk, KT__CHUNK * sizeof *chunk))
                continue;
            for (uint32_t i = 0; i < KT__CHUNK; i++) {
                kt__slot_cold_t *cold = KT__LD(&chunk[i].cold);
                if (!cold)
                    continue;
                total += KT__LD(&chunk[i].count);
                if (IN(cold, sizeof *cold))
                    total += KT__LD(&cold->errors) + KT__LD(&cold->dropped);
            }
        }
    }
#undef IN
    return total;
}

void kt__arena_mark_closed(void)
{
    kt__arena_t *r = kt__arena;
    if (!r || g_map != g_shared) /* not the run's arena (a forked child's private copy) */
        return;
    atomic_store_explicit(&r->closed_records, shards_records(kt__shards_head(), kt__generation(), 0, 0),
                          memory_order_relaxed);
    atomic_store_explicit(&r->closed, 1, memory_order_release);
}

/* Under `ktiming run`: the kernel's in-flight count moved by delta. Its chunk of counters is allocated from the
 * arena on the kernel's first dispatch (two threads racing both allocate; one wins, the other's block stays
 * unused in the arena, which never frees). A counter may go below zero for an instant (an end seen before its
 * begin's store is not possible on one thread, but the reader clamps anyway). */
void kt__inflight_add(kt_kernel_id_t kernel, int64_t delta)
{
    kt__arena_t *a = kt__arena;
    if (!a || !kernel || kernel > KT__MAX_KERNELS)
        return;
    _Atomic(kt__au64 *) *slot = &a->inflight[kernel >> KT__CHUNK_BITS];
    kt__au64 *blk = atomic_load_explicit(slot, memory_order_acquire);
    if (!blk) {
        kt__au64 *fresh = kt__zalloc(KT__CHUNK * sizeof *fresh);
        if (!fresh)
            return; /* out of memory: this dispatch is not counted (nor its end, which finds no block) */
        if (atomic_compare_exchange_strong_explicit(slot, &blk, fresh, memory_order_acq_rel, memory_order_acquire))
            blk = fresh;
        else
            kt__zfree(fresh);
    }
    atomic_fetch_add_explicit(&blk[kernel & (KT__CHUNK - 1u)], (uint64_t)delta, memory_order_relaxed);
}

/* The core's exit handler ran: an exit status without a snapshot file then means nothing was recorded, not
 * that the exit handlers were skipped (_exit). */
void kt__arena_mark_exit(void)
{
    if (kt__arena && g_map == g_shared)
        atomic_store_explicit(&kt__arena->exited, 1, memory_order_release);
}

/* At the exit of a process of the run that recorded without holding the arena (a forked child, another program
 * the script starts): after every exit handler (a library destructor), its snapshot goes to
 * KTIMING_RUN_DIR/<pid>.json unless an interception library's exit writer put it there already, and run is told
 * it ended with its timings written (or with none recorded). One that dies before this is counted as lost. */
__attribute__((destructor)) static void arena_exit_other(void)
{
    if (!g_counted || !g_shared)
        return;
    g_counted = 0;
    const char *dir = kt__env(KT_ENV_NAME(RUN_DIR));
    char path[4096];
    if (!dir || !*dir || snprintf(path, sizeof path, "%s/%ld.json", dir, (long)getpid()) >= (int)sizeof path)
        return;
    int done = access(path, F_OK) == 0; /* written by an interception library's exit handler */
    kt_snapshot_t *snap = done ? NULL : kt_snapshot();
    int any = 0;
    for (size_t i = 0; snap && !any && i < snap->count; i++)
        any = snap->entries[i].dispatch_count || snap->entries[i].errors || snap->entries[i].dropped;
    if (snap && !any)
        done = 1; /* nothing recorded: nothing lost */
    if (any) {
        kt_output_t *o = NULL;
        if (kt_output_open(path, KT_OUTPUT_NOSYNC, &o) == 0) {
            if (kt_report_print(kt_output_file(o), snap, KT_FORMAT_JSON, NULL) != 0)
                kt_output_abort(o);
            else
                done = kt_output_commit(o) == 0;
        }
        if (!done)
            fprintf(stderr, "ktiming: could not write %s: %s\n", path, strerror(errno));
    }
    kt_snapshot_free(snap);
    if (done)
        atomic_fetch_add_explicit(&g_shared->others_done, 1, memory_order_relaxed);
}

/* ---------------------------------------------------------------------------------------------------
 * `ktiming run`'s side
 * ------------------------------------------------------------------------------------------------- */

struct kt_run_arena_t {
    int fd;             /* the memfd (close-on-exec: the run's processes open it through /proc/<pid>/fd) */
    kt__arena_t *map;   /* mapped here at the address the program maps it */
    size_t size;        /* bytes */
    char env[128];      /* KTIMING_RUN_ARENA's value */
};

/* Addresses tried first: far from where the kernel puts heaps (0x55..., 0x56...) and mmaps and stacks (0x7f...),
 * so the program, a new process laid out at random, finds the range free. */
static const uintptr_t kArenaHints[] = {0x3a0000000000ull, 0x2d0000000000ull, 0x1c0000000000ull};

int kt_run_arena_create(size_t size, kt_run_arena_t **out)
{
    *out = NULL;
    if (size < sizeof(kt__arena_t))
        return KT_EINVAL;
    kt_run_arena_t *r = calloc(1, sizeof *r);
    if (!r)
        return KT_ENOMEM;
    r->size = size;
#ifdef SYS_memfd_create
    r->fd = (int)syscall(SYS_memfd_create, ARENA_NAME, MFD_CLOEXEC); /* never inherited: opened through /proc */
#else
    r->fd = -1;
    errno = ENOSYS;
#endif
    if (r->fd < 0 || ftruncate(r->fd, (off_t)size) != 0)
        goto fail;
    void *p = MAP_FAILED;
    size_t hints = sizeof kArenaHints / sizeof kArenaHints[0];
#if defined(__SANITIZE_THREAD__)
    hints = 0; /* ThreadSanitizer keeps the program's memory in ranges of its own: let the kernel choose there */
#endif
    for (size_t i = 0; p == MAP_FAILED && i < hints; i++) {
        p = mmap((void *)kArenaHints[i], size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, r->fd, 0);
        if (p != MAP_FAILED && p != (void *)kArenaHints[i]) {
            munmap(p, size);
            p = MAP_FAILED;
        }
    }
    if (p == MAP_FAILED)
        p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
    if (p == MAP_FAILED)
        goto fail;
    r->map = p;
    snprintf(r->env, sizeof r->env, "%d:%" PRIxPTR ":%zu:%ld", r->fd, (uintptr_t)p, size, (long)getpid());
    *out = r;
    return 0;
fail:;
    int e = errno;
    if (r->fd >= 0)
        close(r->fd);
    free(r);
    errno = e;
    return KT_EIO;
}

const char *kt_run_arena_env(const kt_run_arena_t *r) { return r ? r->env : ""; }

void kt_run_arena_close(kt_run_arena_t *r)
{
    if (!r)
        return;
    if (r->map)
        munmap(r->map, r->size);
    if (r->fd >= 0)
        close(r->fd);
    free(r);
}

/* The image roots of the arena, oldest first, into roots (at most cap); their count. Bounded, and every root is
 * checked to lie inside what was allocated. */
static size_t arena_roots(const kt_run_arena_t *r, kt__arena_t **roots, size_t cap)
{
    kt__arena_t *a = r->map;
    uint64_t used = atomic_load_explicit(&a->used, memory_order_acquire);
    uintptr_t hi = (uintptr_t)a + (used < r->size ? used : r->size);
    size_t n = 0;
    for (kt__arena_t *x = a; x && n < cap;) {
        roots[n++] = x;
        x = atomic_load_explicit(&x->newer, memory_order_acquire);
        if (x && ((uintptr_t)x <= (uintptr_t)roots[n - 1] || (uintptr_t)x + sizeof *x > hi))
            break; /* only forward, inside the arena: no loop */
    }
    return n;
}

#define ARENA_IMAGES_MAX 64

int kt_run_arena_status(const kt_run_arena_t *r, int64_t *pid, int *exited)
{
    if (!r || !r->map || atomic_load_explicit(&r->map->magic, memory_order_acquire) != KT__ARENA_MAGIC)
        return 0;
    kt__arena_t *roots[ARENA_IMAGES_MAX];
    size_t n = arena_roots(r, roots, ARENA_IMAGES_MAX);
    if (pid)
        *pid = atomic_load_explicit(&r->map->pid, memory_order_relaxed);
    if (exited) /* the image that ran last */
        *exited = (int)atomic_load_explicit(&roots[n - 1]->exited, memory_order_acquire);
    return 1;
}

size_t kt_run_arena_images(const kt_run_arena_t *r)
{
    if (!kt_run_arena_status(r, NULL, NULL))
        return 0;
    kt__arena_t *roots[ARENA_IMAGES_MAX];
    return arena_roots(r, roots, ARENA_IMAGES_MAX);
}

void kt_run_arena_lost(const kt_run_arena_t *r, kt_run_arena_lost_t *out)
{
    memset(out, 0, sizeof *out);
    if (!kt_run_arena_status(r, NULL, NULL))
        return;
    const kt__arena_t *a = r->map;
    out->outside = atomic_load_explicit(&a->outside, memory_order_relaxed);
    out->threads_outside = atomic_load_explicit(&a->shards_outside, memory_order_relaxed);
    uint32_t others = atomic_load_explicit(&a->others, memory_order_relaxed);
    uint32_t done = atomic_load_explicit(&a->others_done, memory_order_relaxed);
    out->processes_lost = others > done ? others - done : 0;
}

uint64_t kt_run_arena_late(const kt_run_arena_t *r)
{
    if (!kt_run_arena_status(r, NULL, NULL))
        return 0;
    kt__arena_t *roots[ARENA_IMAGES_MAX];
    kt__arena_t *a = roots[arena_roots(r, roots, ARENA_IMAGES_MAX) - 1];
    if (!atomic_load_explicit(&a->closed, memory_order_acquire))
        return 0;
    uint64_t used = atomic_load_explicit(&r->map->used, memory_order_acquire);
    uintptr_t lo = (uintptr_t)r->map, hi = lo + (used < r->size ? used : r->size);
    uint64_t now = shards_records(atomic_load_explicit(&a->shards, memory_order_acquire),
                                  atomic_load_explicit(&a->gen, memory_order_acquire), lo, hi);
    uint64_t then = atomic_load_explicit(&a->closed_records, memory_order_relaxed);
    return now > then ? now - then : 0;
}

kt_snapshot_t *kt_run_arena_snapshot_image(const kt_run_arena_t *r, size_t image, const char *ended)
{
    if (!kt_run_arena_status(r, NULL, NULL))
        return NULL;
    kt__arena_t *roots[ARENA_IMAGES_MAX];
    size_t n = arena_roots(r, roots, ARENA_IMAGES_MAX);
    if (image >= n)
        return NULL;
    kt__arena_t *a = roots[image];
    uint64_t used = atomic_load_explicit(&r->map->used, memory_order_acquire);
    kt__src_t src;
    memset(&src, 0, sizeof src);
    src.lo = (uintptr_t)r->map;
    src.hi = (uintptr_t)r->map + (used < r->size ? used : r->size);
    src.head = atomic_load_explicit(&a->shards, memory_order_acquire);
    src.gen = atomic_load_explicit(&a->gen, memory_order_acquire);
    src.nk = atomic_load_explicit(&a->kcount, memory_order_acquire);
    if (src.nk > KT__MAX_KERNELS)
        src.nk = KT__MAX_KERNELS;
    src.kdir = a->kdir;
    src.sample_capacity = atomic_load_explicit(&a->sample_capacity, memory_order_relaxed);
    src.span_capacity = atomic_load_explicit(&a->span_capacity, memory_order_relaxed);
    src.kernels_dropped = atomic_load_explicit(&a->kernels_dropped, memory_order_relaxed);
    src.names_truncated = atomic_load_explicit(&a->names_truncated, memory_order_relaxed);
    src.arena = a;
    kt_snapshot_t *snap = kt__snapshot_from(&src);
    if (!snap)
        return NULL;
    snap->pid = (int64_t)atomic_load_explicit(&a->pid, memory_order_relaxed);
    snap->rank = -1;
    if (ended)
        snprintf(snap->ended, sizeof snap->ended, "%s", ended);
    return snap;
}

kt_snapshot_t *kt_run_arena_snapshot(const kt_run_arena_t *r, const char *ended)
{
    return kt_run_arena_snapshot_image(r, 0, ended);
}
