/* internal.h — internal: state shared between the core's files (config, kernel registry, recorder shards). */
#ifndef KT_CORE_INTERNAL_H
#define KT_CORE_INTERNAL_H

#include "ktiming.h"
#include "core/hclock.h"
#include "core/hist.h"

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#define KT__LD(p) atomic_load_explicit((p), memory_order_relaxed)
#define KT__ST(p, v) atomic_store_explicit((p), (v), memory_order_relaxed)
#define KT__LDA(p) atomic_load_explicit((p), memory_order_acquire)
#define KT__STR(p, v) atomic_store_explicit((p), (v), memory_order_release)

/* Dense ids live in two-level tables: a fixed directory of chunks of 64, so an id is found with two loads and
 * nothing is ever moved while another thread reads it. */
#define KT__CHUNK_BITS 6u
#define KT__CHUNK (1u << KT__CHUNK_BITS)
#define KT__DIR 1024u
#define KT__MAX_KERNELS (KT__CHUNK * KT__DIR - 1u)

/* ---------------------------------------------------------------------------------------------------
 * Configuration and lifecycle (core.c)
 * ------------------------------------------------------------------------------------------------- */

/* Sizes fixed by the first initialisation (explicit kt_init or lazy). */
typedef struct kt__config_t {
    uint32_t span_capacity;   /* spans kept per shard, 0 = span log off */
    uint32_t sample_capacity; /* reservoir size per kernel */
} kt__config_t;

extern kt__config_t kt__cfg;

/* Initialise with defaults if nobody has; cheap after the first call. */
void kt__ensure_init(void);

/* Writes KTIMING_OUTPUT / KTIMING_REPORT / KTIMING_TRACE at process exit (atexit.c, built with src/export). */
void kt__exit_write(void);
/* Non-zero in a process forked (without exec) from the one that loaded this library, whether or not either had
 * used ktiming: its exit-time outputs never take the parent's file. */
int kt__forked_since_load(void);
/* Will a snapshot be written at this process's exit: KTIMING_OUTPUT, KTIMING_TRACE or KTIMING_REPORT (not "0")
 * for kt__exit_write, or KTIMING_RUN_DIR for the interception libraries' handler (`ktiming run`)? */
int kt__exit_snapshot_wanted(void);

/* fork, called from the service layer's atfork handlers (service.h): prepare takes every core lock (life,
 * reset, shards, host clock, registry, last error -- the one order every other path also follows), release gives them back in parent and child (child = 1 also starts
 * the child's statistics empty). Each lock-owning file provides its part. */
void kt__core_fork_prepare(void);
void kt__core_fork_release(int child);
void kt__recorder_fork_prepare(void);
void kt__recorder_fork_release(void);
void kt__recorder_fork_child(void);
void kt__hclock_fork_prepare(void);
void kt__hclock_fork_release(void);
void kt__registry_fork_prepare(void);
void kt__registry_fork_release(void);

/* Records one host-timed dispatch with its span on the host thread's track (CPU zones, kt_cpu_dispatch_2d). */
void kt__record_host_span(kt_kernel_id_t kernel, uint64_t start_ns, uint64_t end_ns);

/* Host clock without the call through the exported symbol: CLOCK_MONOTONIC_RAW ns from the counter chosen by
 * kt__hclock_init (hclock.h, hclock.c). */
static inline uint64_t kt__now(void) { return kt__hc_now(); }
/* The same for CPU zone ends (an unordered counter read: hclock.h says why). */
static inline uint64_t kt__now_zone(void) { return kt__hc_now_zone(); }
/* Starts of intervals: a due model refresh runs before the read, not inside the interval (hclock.h). */
static inline uint64_t kt__now_zone_begin(void) { return kt__hc_now_begin(1); }
static inline uint64_t kt__now_begin(void) { return kt__hc_now_begin(0); }

/* Choose and calibrate the host counter, publish the host device record (first initialisation, hclock.c). */
void kt__hclock_init(void);

/* ---------------------------------------------------------------------------------------------------
 * Registry: kernels, queues, threads, devices (registry.c)
 * ------------------------------------------------------------------------------------------------- */

/* Kernel names are kept to KT__NAME_MAX bytes: a longer one keeps its first bytes (cut at a UTF-8 boundary) and
 * ends in KT__NAME_MARK, and kt_snapshot_t.names_truncated counts such kernels. Every path from a caller's name
 * reads at most KT__NAME_MAX + 1 of its bytes, so a record costs the same for a 1 MiB name as for a 4 KiB one. */
#define KT__NAME_MAX 4096u
#define KT__NAME_MARK "...[truncated]"

/* One interned (name, backend, device); immutable once published. */
typedef struct kt__kernel_t {
    const char *name;     /* owned copy */
    size_t name_len;      /* strlen(name) */
    uint32_t name_keep;   /* a truncated name: the caller's bytes kept before KT__NAME_MARK; 0: not truncated */
    const char *device;   /* owned copy */
    kt_backend_t backend; /* API */
    uint32_t hash;        /* of the triple, for the intern table */
} kt__kernel_t;

/* The kernel with this id, or NULL if the id was never handed out. */
const kt__kernel_t *kt__kernel_get(kt_kernel_id_t id);
/* Whether `name` is what k was interned from: the same bytes, or for a truncated k its kept bytes followed by more
 * than KT__NAME_MAX bytes in all (reads at most KT__NAME_MAX + 1 bytes of name). Not for the hot path. */
int kt__kernel_named(const kt__kernel_t *k, const char *name);
/* Highest id handed out so far. */
uint32_t kt__kernel_count(void);
/* Kernels whose name was truncated (KT__NAME_MAX), since start. */
uint64_t kt__names_truncated(void);
/* Intern through the calling thread's pointer cache (for call sites that pass a string each time). */
kt_kernel_id_t kt__kernel_lookup_cached(const char *name, kt_backend_t backend);

/* The API's name of the kernel's most recent error (kt_record_error) in this reset generation, copied
 * into buf ("" if none). */
void kt__kernel_last_error(kt_kernel_id_t id, char *buf, size_t size);
/* Sets it (copied, truncated to 47 bytes). Errors are rare: this takes a lock. */
void kt__kernel_set_error(kt_kernel_id_t id, const char *name);

/* Copies for snapshots (malloc'ed arrays, NULL when empty). */
kt_queue_info_t *kt__queues_copy(size_t *count);
kt_thread_info_t *kt__threads_copy(size_t *count);
kt_device_info_t *kt__devices_copy(size_t *count);
/* The label kt_snapshot would give device (backend, key) now: device_label.c's rule over the registry's records
 * (the model alone, or with what tells it from another device of that model). Written into out and returned;
 * `fallback` (e.g. the model) when the key is NULL or not registered. Verbose lines; a copy and a malloc each. */
const char *kt__device_label_now(kt_backend_t backend, const char *key, const char *fallback, char *out, size_t cap);
/* Registers the calling thread's name again (it may have been set after its first record). */
void kt__thread_refresh(uint32_t ordinal);

/* ---------------------------------------------------------------------------------------------------
 * Recorder shards (recorder.c)
 * ------------------------------------------------------------------------------------------------- */

typedef _Atomic uint64_t kt__au64;
typedef _Atomic(kt__au64 *) kt__u64_ptr;

/* A slot's reservoir grows with use: block 0 holds samples [0, 16), block k >= 1 holds [16 * 2^(k-1), 16 * 2^k),
 * each allocated when the first sample reaches it and never moved (a snapshot may read while the owner
 * writes). 17 blocks cover the largest capacity (2^20). A kernel recorded once by a thread costs one slot
 * (~0.3 KB) plus 128 bytes of samples; one with a full 1024-sample reservoir 8 KB. */
#define KT__SMP_FIRST 16u
#define KT__SMP_BLOCKS 17u

/* The block holding sample index i, and i's offset in it. */
static inline uint32_t kt__smp_block(uint32_t i, uint32_t *off)
{
    if (i < KT__SMP_FIRST) {
        *off = i;
        return 0;
    }
    uint32_t k = 32u - (uint32_t)__builtin_clz(i / KT__SMP_FIRST);
    *off = i - (KT__SMP_FIRST << (k - 1u));
    return k;
}

/* Entries in block k. */
static inline uint32_t kt__smp_block_size(uint32_t k) { return k ? KT__SMP_FIRST << (k - 1u) : KT__SMP_FIRST; }

/* One kernel's aggregates in one shard. Only the owning thread writes. A record stores its scalars (under the
 * seqlock `seq`) before its histogram count and reservoir sample, each a release store; a snapshot reads
 * samples and histogram first (acquire), then the scalars, so every value it copied belongs to a record those
 * scalars count (min <= sample <= max within one generation: see kt_snapshot in snapshot.c).
 *
 * Layout (issue 43): the part every record touches is 128 bytes (two cache lines), and a shard keeps these parts
 * dense, KT__CHUNK to a chunk in kernel-id order (s->dir): a loop over many kernels walks adjacent lines instead
 * of pointer-chasing ~1 KB records scattered over the heap. The rest (other record kinds, the reservoir, the
 * histogram's directory) lives in `cold`, allocated with the slot; the histogram block a record bumps is cached
 * in the hot part. A slot exists once `cold` is published (release; snapshots acquire it). */
/* A slot's breakdown by launch configuration (kt_launch_t), allocated with the first configured record of the
 * kernel on the thread: KT_LAUNCH_CONFIGS_MAX rows in first-seen order, then row KT_LAUNCH_CONFIGS_MAX adding up
 * every configuration past them (KT_LAUNCH_OTHER). The owner writes a new row's key and zeroed stats before
 * publishing `n` (release); every update of the stats happens inside the table's seqlock `seq`, after the slot's
 * scalars (a snapshot reads the table first: it counts no dispatch the scalars miss). */
typedef struct kt__cfg_row_t {
    kt_launch_t key;        /* the configuration (normalised: sizes past dims 0); immutable once published */
    _Atomic uint64_t count; /* dispatches with it */
    _Atomic uint64_t total; /* their summed duration, saturating */
    _Atomic uint64_t min;   /* shortest; UINT64_MAX while count is 0 */
    _Atomic uint64_t max;   /* longest */
} kt__cfg_row_t;

typedef struct kt__cfg_tab_t {
    _Atomic uint64_t seq;   /* seqlock: odd while the owner updates a row's stats */
    _Atomic uint32_t n;     /* rows [0, n) published (at most KT_LAUNCH_CONFIGS_MAX) */
    uint32_t hint;          /* owner only: the row hit last */
    kt__cfg_row_t rows[KT_LAUNCH_CONFIGS_MAX + 1]; /* the last: KT_LAUNCH_OTHER */
} kt__cfg_tab_t;

typedef struct kt__slot_cold_t {
    _Atomic uint64_t errors;     /* dispatches that ended in error */
    _Atomic uint64_t dropped;    /* dispatches lost before reaching the recorder (kt_record_drop) */
    _Atomic uint64_t dropped_by[KT_DROP_REASON_COUNT]; /* `dropped` by reason */
    _Atomic uint64_t bytes;      /* bytes moved by counted dispatches; stored after their scalars */
    double res_w;                /* owner only: Algorithm L's running W */
    uint32_t res_idx;            /* owner only: the position the next replacement takes (drawn ahead) */
    kt__u64_ptr smp[KT__SMP_BLOCKS];   /* reservoir in blocks that grow with use (kt__smp_block) */
    kt__u64_ptr hist[KT__HIST_BLOCKS]; /* histogram blocks of KT__HIST_BLOCK counters, lazily allocated; they
                                        * hold every record but the newest (`pend`) */
    _Atomic(kt__cfg_tab_t *) cfgs;     /* by launch configuration; NULL until a record carried one */
} kt__slot_cold_t;

typedef struct kt__slot_t {
    /* Line 0: what every record reads and writes. */
    _Atomic uint64_t seq;        /* seqlock: odd while the owner updates the scalars */
    _Atomic uint64_t count;      /* successful dispatches */
    _Atomic uint64_t total;      /* sum of durations */
    _Atomic uint64_t sq_lo;      /* sum of squared durations, low 64 bits of a 128-bit integer */
    _Atomic uint64_t sq_hi;      /* ... high 64 bits */
    _Atomic uint64_t min;        /* smallest duration; UINT64_MAX while count is 0 */
    _Atomic uint64_t max;        /* largest duration */
    _Atomic uint64_t pend;       /* the newest record's duration, not in the histogram yet (while count > 0) */
    /* Line 1: read by every record, written by some. */
    uint64_t res_next;           /* owner only: count at which the reservoir takes the next record */
    _Atomic uint64_t last;       /* most recent duration in this shard */
    _Atomic uint64_t last_stamp; /* host end time of that dispatch, 0 when the record carried none */
    _Atomic uint64_t total_hi;   /* carries out of total: the exact sum is total_hi * 2^64 + total */
    _Atomic uint64_t spans_dropped; /* spans not kept: span log full */
    _Atomic uint64_t *hcache;    /* owner only: the histogram block bumped last ... */
    uint32_t hcache_block;       /* ... and its index (KT__HIST_BLOCKS: none) */
    _Atomic uint32_t res_fill;   /* samples [0, res_fill) hold values (= count until full) */
    _Atomic(kt__slot_cold_t *) cold; /* the rest; NULL: no slot here yet */
} kt__slot_t;
_Static_assert(sizeof(kt__slot_t) == 128, "a record's fields fill exactly two cache lines");


/* One span as stored in a shard's log: every field atomic so a snapshot may read while a reset reuses it. */
typedef struct kt__span_rec_t {
    _Atomic uint32_t kernel;   /* kernel id */
    _Atomic uint32_t queue;    /* queue id, 0 = host thread track */
    _Atomic uint32_t thread;   /* thread ordinal */
    _Atomic uint32_t flags;    /* KT_SPAN_* */
    _Atomic uint64_t t[7];     /* duration, enqueue, queued, submit, start, end, uncertainty (ns) */
} kt__span_rec_t;

/* Per-thread pointer cache entry for kt_record(name, ...). A hit is confirmed by comparing the caller's string
 * with the interned copy: the pointer alone proves nothing (a buffer reused for another name, or a library
 * unloaded and another loaded at the same address with its own literal there). */
typedef struct kt__name_cache_t {
    const char *ptr;       /* the caller's pointer */
    const char *name;      /* the interned copy it matched (immutable, never freed) */
    kt_kernel_id_t id;     /* what it interned to */
    uint32_t backend;      /* backend + 1; 0 = empty entry */
    uint32_t keep;         /* the interned name is truncated after this many bytes (0: it is whole) */
} kt__name_cache_t;

#define KT__NAME_CACHE 128u

/* A recording thread's private store. Shards outlive their thread (an exiting thread's records stay) and
 * are adopted by later threads. */
typedef struct kt__shard_t {
    struct kt__shard_t *next;                   /* registry list; set once before publication */
    uint32_t index;                             /* creation order, from 0 */
    _Atomic uint64_t gen;                       /* reset generation the data belongs to */
    int owned;                                  /* a live thread writes here (guarded by the shard list lock) */
    _Atomic(kt__slot_t *) dir[KT__DIR];         /* chunks of KT__CHUNK slots (64-byte aligned), by kernel id */
    _Atomic(kt__span_rec_t *) spans;            /* span log of kt__cfg.span_capacity, lazily allocated */
    _Atomic uint32_t span_count;                /* spans published (never above the capacity) */
    uint64_t rng;                               /* owner only: PRNG state for the reservoirs */
    kt__name_cache_t names[KT__NAME_CACHE];     /* owner only: kt_record() pointer cache */
} kt__shard_t;

/* The calling thread's shard (created or adopted on first use). NULL only when out of memory. */
kt__shard_t *kt__shard_self(void);
/* With spans on: allocates one span log now and writes each of its pages once, for the next thread that takes a
 * shard (recorder.c), so that its ~300 page faults are not taken on that thread: a program's thread that records
 * its commands at its synchronisation points (OpenCL) would take them inside its timed loop. For a thread off the
 * program's path (a backend's collector), which never takes the spare itself; once per process. */
void kt__span_log_spare_reserve(void);
/* When the process will write a snapshot at exit (KTIMING_RUN_DIR, KTIMING_OUTPUT, KTIMING_TRACE or
 * KTIMING_REPORT set) with spans on: allocates the span array of the next snapshot now, sized for one span log
 * and an eighth, and writes each of its pages once, so that the exit snapshot copies its spans into memory already mapped
 * (snapshot.c). For a thread off the program's path (a backend's collector); once per process. */
void kt__snapshot_spare_reserve(void);
/* First shard of the list (each shard's `next` is immutable); iterate with the acquire load done here. */
kt__shard_t *kt__shards_head(void);
/* Records dropped since the last reset because their kernel could not be interned (table full). */
uint64_t kt__kernels_dropped(void);
/* Current reset generation. */
uint64_t kt__generation(void);
/* kt_reset() waits between these two calls: a snapshot holds the generation still while it reads, so no shard
 * it reads is cleared under it (recorders never wait on this). */
void kt__reset_hold(void);
void kt__reset_release(void);

/* Randomness shared by recorder and snapshot. */
static inline uint64_t kt__splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
/* Uniform in [0, n). */
static inline uint64_t kt__rand_below(uint64_t *s, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)kt__splitmix(s) * n) >> 64);
}
/* Uniform in (0, 1). */
static inline double kt__rand_open01(uint64_t *s)
{
    return ((double)(kt__splitmix(s) >> 11) + 0.5) * 0x1p-53;
}

/* kt__recording (declared in ktiming.h): the runtime switch, read on every record. */
/* Read through the GOT on purpose: an executable reading kt__recording (the KT_* macros) may hold a copy-
 * relocated instance, and the GOT entry is what points at the one everybody shares. */
static inline int kt__on(void) { return __atomic_load_n(&kt__recording, __ATOMIC_RELAXED); }

/* ---------------------------------------------------------------------------------------------------
 * Crash survival under `ktiming run` (arena.c): the run arena and what a snapshot reads
 * ------------------------------------------------------------------------------------------------- */

#define KT__ARENA_MAGIC 0x6b742d6172656e61ull /* "kt-arena" */

/* The header at the start of the run arena: the roots a snapshot starts from, stored here (besides the live
 * globals the record path reads) whenever they change, which is never on the record path. Everything they point
 * to was allocated from the arena (kt__zalloc). Written by the program, read by `ktiming run`. */
typedef struct kt__arena_t {
    _Atomic uint64_t magic;                 /* KT__ARENA_MAGIC once the header below holds */
    _Atomic uint32_t claimed;               /* 1: a process of the run took the arena */
    _Atomic uint32_t exited;                /* 1: the core's exit handler ran (an exit without snapshot: not _exit) */
    uint64_t size;                          /* bytes mapped */
    _Atomic uint64_t used;                  /* bump offset of the next allocation (may pass size when full) */
    _Atomic int64_t pid;                    /* the process that claimed the arena */
    _Atomic uint32_t span_capacity;         /* kt__cfg at its first initialisation */
    _Atomic uint32_t sample_capacity;
    _Atomic(kt__shard_t *) shards;          /* the shard list's head */
    _Atomic uint64_t gen;                   /* reset generation */
    _Atomic uint64_t kernels_dropped;       /* as kt__kernels_dropped */
    _Atomic uint64_t names_truncated;       /* as kt__names_truncated */
    _Atomic uint32_t kcount;                /* highest kernel id published */
    _Atomic(kt__kernel_t *) kdir[KT__DIR];  /* the kernel directory */
    _Atomic(kt_queue_info_t *) queues;      /* queue table (count stored after the pointer) */
    _Atomic uint32_t queue_count;
    _Atomic(kt_thread_info_t *) threads;    /* thread table */
    _Atomic uint32_t thread_count;
    _Atomic(kt_device_info_t *) devices;    /* device table */
    _Atomic uint32_t device_count;
    _Atomic(kt__au64 *) inflight[KT__DIR];  /* per kernel id, chunks of KT__CHUNK: device work handed to the
                                             * device and not finished yet (kt__inflight_begin/_end) */
    /* Each program image (the owner, then what it exec'd with the same pid) records under a root of its own: the
     * header above is the first image's root, each later one a block of this type in the arena. */
    _Atomic uint64_t closed_records;        /* records (counted, errors, dropped) at its last kt_shutdown */
    _Atomic uint32_t closed;                /* 1: kt_shutdown ran (the exit-time snapshot file is written after) */
    uint64_t token;                         /* the image that holds this root (AT_RANDOM: new at each exec) */
    _Atomic(struct kt__arena_t *) newer;    /* the root of the image the owner exec'd next, NULL: none */
    /* Header only: what run cannot read. */
    _Atomic uint64_t outside;               /* allocations made on the heap because the arena was full */
    _Atomic uint32_t shards_outside;        /* threads whose shard is on the heap (arena full): records lost */
    _Atomic uint32_t others;                /* other processes of the run that recorded (forked children, ...) */
    _Atomic uint32_t others_done;           /* ... of which ended writing their own snapshot file */
} kt__arena_t;

/* The root this process records under (the arena's header for its first image), NULL when not under `ktiming
 * run`, before the process first uses ktiming (kt__arena_claim), or when another process of the run has it. */
extern kt__arena_t *_Atomic kt__arena;
/* Takes the run arena, once, when the process first uses ktiming (its first initialisation or table allocation):
 * not at load, so a shell or wrapper that loads libktiming but records nothing leaves it to the program. */
void kt__arena_claim(void);
/* A forked child's first record (recorder.c's slow paths): counted in the run's header, so run can say when the
 * child ends without writing its snapshot. Nonzero while that count is still to be made. */
extern _Atomic int kt__arena_child_pending;
void kt__arena_child_records(void);
/* Zeroed memory for the recorder and registry: from the arena when there is one, else calloc. Never on the record
 * path's common case. */
void *kt__zalloc(size_t n);
/* Frees what kt__zalloc gave (arena memory is never reused). */
void kt__zfree(void *p);
int kt__in_arena(const void *p);
/* A forked child: the arena becomes private memory (the child must not write into its parent's tables). */
void kt__arena_fork_child(void);
/* The core's exit handler ran. */
void kt__arena_mark_exit(void);
/* A shard on the heap (the arena was full): not published as a root, counted. */
void kt__arena_shard_outside(void);
/* kt_shutdown ran (recording is off): the records so far, stored in the arena, so run can tell records made after
 * the exit-time snapshot file (recording on again, by later exit handlers or destructors) from what it holds. */
void kt__arena_mark_closed(void);
/* Device work in flight, per kernel, for a program that dies under `ktiming run` (its snapshot counts what was
 * still in flight as dropped, KT_DROP_IN_FLIGHT_AT_EXIT). A backend calls begin when it hands a dispatch to the
 * device (and has taken on to record it) and end exactly once when that dispatch is finished: recorded, counted as
 * an error or dropped. Never on the CPU zone path, never inside kt_record_dispatch; outside `run` each costs one
 * predictable branch. kt__arena is set at the process's first allocation of a table, before any kernel id exists,
 * so begin and end always see the same arena. */
void kt__inflight_add(kt_kernel_id_t kernel, int64_t delta);
static inline void kt__inflight_begin(kt_kernel_id_t kernel)
{
    if (__builtin_expect(kt__arena != NULL, 0))
        kt__inflight_add(kernel, 1);
}
static inline void kt__inflight_end(kt_kernel_id_t kernel)
{
    if (__builtin_expect(kt__arena != NULL, 0))
        kt__inflight_add(kernel, -1);
}
/* KTIMING_ON_CRASH=write outside `ktiming run`: the async-signal-safe crash writer's handlers (crash.c). */
void kt__crash_install(void);

/* What a snapshot reads: this process's tables, or a dead program's arena (lo < hi: every pointer followed is
 * checked to lie in [lo, hi), every count bounded, no lock taken and no seqlock waited on forever). */
typedef struct kt__src_t {
    kt__shard_t *head;                      /* shard list */
    uint64_t gen;                           /* generation read */
    uint32_t nk;                            /* kernel ids 1..nk */
    _Atomic(kt__kernel_t *) *kdir;          /* kernel directory */
    uint32_t sample_capacity, span_capacity;
    uint64_t kernels_dropped, names_truncated;
    uintptr_t lo, hi;                       /* the arena's bytes in use; 0, 0: this process's own tables */
    kt__arena_t *arena;                     /* the arena read (queues, threads, devices), or NULL */
} kt__src_t;

/* A snapshot of a source that is not this process (snapshot.c); NULL when out of memory. */
kt_snapshot_t *kt__snapshot_from(const kt__src_t *src);
/* The kernel directory (registry.c). */
_Atomic(kt__kernel_t *) *kt__kernel_dir(void);

#endif
