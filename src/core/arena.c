/* arena.c — crash survival under `ktiming run`: the recorder's tables and roots in memory the parent can read.
 *
 * `ktiming run` creates a memfd (close-on-exec: no process of the run inherits it), maps it MAP_SHARED at an
 * address it chose and names both in KTIMING_RUN_ARENA ("<fd>:<address in hex>:<bytes>:<run's pid>"). Here, at
 * load, the program opens it through /proc/<run's pid>/fd/<fd> and maps it at the same address (MAP_FIXED_NOREPLACE: nothing of the program's is ever replaced; when the address is taken, one line
 * says so and the program runs without crash survival). From then on every allocation of the recorder and the
 * registry (shards, slots, reservoirs, histograms, span logs, interned names, queue/thread/device tables) comes
 * from the arena (kt__zalloc), and each root the snapshot starts from (shard list, generation, kernel directory
 * and count, configuration) is also stored in the arena's header when it changes -- never on the record path.
 * Pointers are valid in both processes, so when the program dies without writing its snapshot (a signal,
 * _exit, SIGKILL) `ktiming run` builds it with the library's own snapshot code from the arena
 * (kt_run_arena_snapshot, snapshot.c), reading without locks and following no pointer outside the arena.
 */
#include "core/internal.h"
#include "core/service.h"

#include "shared/run_arena.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

kt__arena_t *kt__arena;

/* ---------------------------------------------------------------------------------------------------
 * The program's side
 * ------------------------------------------------------------------------------------------------- */

void *kt__zalloc(size_t n)
{
    kt__arena_t *a = kt__arena;
    if (a && n) {
        uint64_t sz = ((uint64_t)n + 63u) & ~(uint64_t)63u; /* every block on its own cache lines */
        uint64_t off = atomic_fetch_add_explicit(&a->used, sz, memory_order_relaxed);
        if (off <= a->size && sz <= a->size - off)
            return (unsigned char *)a + off; /* fresh memfd pages are zero; nothing is ever freed */
        /* full: the rest lives on the heap (the parent then misses it, and says nothing is lost only for what
         * it can read) */
    }
    return calloc(1, n ? n : 1);
}

int kt__in_arena(const void *p)
{
    const kt__arena_t *a = kt__arena;
    return a && (uintptr_t)p >= (uintptr_t)a && (uintptr_t)p < (uintptr_t)a + a->size;
}

void kt__zfree(void *p)
{
    if (!kt__in_arena(p))
        free(p);
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

/* At load. The first process of the run that loads ktiming claims the arena (usually the program itself; for a
 * program started through a shell script, the first timed process the script starts); any later one finds it
 * claimed and stays out. A process that cannot open or map it says so in one line. Processes that never load
 * ktiming hold no descriptor of it. */
__attribute__((constructor)) static void arena_attach(void)
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
    uint32_t free_ = 0;
    if (!atomic_compare_exchange_strong(&a->claimed, &free_, 1u)) { /* another process of the run has it */
        munmap(p, size);
        return;
    }
    a->size = size;
    atomic_store_explicit(&a->used, (sizeof *a + 63u) & ~(uint64_t)63u, memory_order_relaxed);
    atomic_store_explicit(&a->gen, kt__generation(), memory_order_relaxed);
    atomic_store_explicit(&a->pid, (int64_t)getpid(), memory_order_relaxed);
    atomic_store_explicit(&a->magic, KT__ARENA_MAGIC, memory_order_release);
    kt__arena = a;
}

/* A forked child must not write into its parent's arena: the arena becomes private memory holding the same
 * bytes at the same address (every pointer stays valid), and the child goes on allocating from it. */
void kt__arena_fork_child(void)
{
    kt__arena_t *a = kt__arena;
    if (!a)
        return;
    uint64_t used = atomic_load_explicit(&a->used, memory_order_relaxed);
    if (used > a->size)
        used = a->size;
    size_t size = (size_t)a->size;
    void *copy = mmap(NULL, (size_t)used, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (copy == MAP_FAILED) { /* cannot copy: stop allocating there; what exists stays shared (rare) */
        kt__arena = NULL;
        return;
    }
    memcpy(copy, a, (size_t)used);
    if (mmap(a, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED) {
        munmap(copy, (size_t)used);
        kt__arena = NULL;
        return;
    }
    memcpy(a, copy, (size_t)used);
    munmap(copy, (size_t)used);
    atomic_store_explicit(&a->pid, (int64_t)getpid(), memory_order_relaxed);
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
    if (kt__arena)
        atomic_store_explicit(&kt__arena->exited, 1, memory_order_release);
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

int kt_run_arena_status(const kt_run_arena_t *r, int64_t *pid, int *exited)
{
    if (!r || !r->map || atomic_load_explicit(&r->map->magic, memory_order_acquire) != KT__ARENA_MAGIC)
        return 0;
    if (pid)
        *pid = atomic_load_explicit(&r->map->pid, memory_order_relaxed);
    if (exited)
        *exited = (int)atomic_load_explicit(&r->map->exited, memory_order_acquire);
    return 1;
}

kt_snapshot_t *kt_run_arena_snapshot(const kt_run_arena_t *r, const char *ended)
{
    if (!kt_run_arena_status(r, NULL, NULL))
        return NULL;
    kt__arena_t *a = r->map;
    uint64_t used = atomic_load_explicit(&a->used, memory_order_acquire);
    kt__src_t src;
    memset(&src, 0, sizeof src);
    src.lo = (uintptr_t)a;
    src.hi = (uintptr_t)a + (used < r->size ? used : r->size);
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
