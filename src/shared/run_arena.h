/* shared/run_arena.h — `ktiming run`'s side of crash survival: the memory a timed program records into, readable
 * after the program is gone (docs/run.md, "When the program dies"). Not installed (docs/abi.md): exported for the
 * CLI and tests only. */
#ifndef KTIMING_RUN_ARENA_H
#define KTIMING_RUN_ARENA_H

#include <ktiming.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A memfd mapped here; the program started with KTIMING_RUN_ARENA=kt_run_arena_env() maps it at the same
 * address and keeps its recorder's tables there. */
typedef struct kt_run_arena_t kt_run_arena_t;

/* Creates an arena of `size` bytes (sparse: only what the program uses takes memory). 0, KT_EINVAL, KT_ENOMEM,
 * or KT_EIO with errno set. */
KT_API int kt_run_arena_create(size_t size, kt_run_arena_t **out);
/* The value for KTIMING_RUN_ARENA in the program's environment. */
KT_API const char *kt_run_arena_env(const kt_run_arena_t *arena);
/* 1 when a process of the run took the arena (its pid into *pid, and into *exited whether ktiming's exit handler
 * ran in its last image), else 0. A process takes it at its first use of ktiming, not at load. */
KT_API int kt_run_arena_status(const kt_run_arena_t *arena, int64_t *pid, int *exited);
/* The program images that recorded under the arena: 1, or more when its process exec'd (the same pid) and the new
 * image recorded too; 0 when no process took it. */
KT_API size_t kt_run_arena_images(const kt_run_arena_t *arena);
/* Image `image`'s snapshot (0: the first) as its tables stand (the process may be dead), `ended` copied into the
 * snapshot's `ended` (NULL: none); NULL when there is no such image or out of memory. */
KT_API kt_snapshot_t *kt_run_arena_snapshot_image(const kt_run_arena_t *arena, size_t image, const char *ended);
/* The first image's snapshot (kt_run_arena_snapshot_image 0). */
KT_API kt_snapshot_t *kt_run_arena_snapshot(const kt_run_arena_t *arena, const char *ended);
/* What the arena's snapshots cannot hold, as the program counted it. */
typedef struct kt_run_arena_lost_t {
    uint64_t outside;         /* allocations made on the heap because the arena was full (span logs first: a
                                 timeline then misses those threads' spans) */
    uint32_t threads_outside; /* threads whose whole shard was on the heap: their records are not in the snapshot */
    uint32_t processes_lost;  /* other processes of the run (forked children, programs a script starts) that used
                                 ktiming and ended without writing their snapshot (a signal, _exit): lost */
} kt_run_arena_lost_t;
KT_API void kt_run_arena_lost(const kt_run_arena_t *arena, kt_run_arena_lost_t *out);
/* Records the last image made after its last kt_shutdown (the one before its exit-time snapshot file): exit
 * handlers and destructors that ran after that file was written; 0 when none, or no kt_shutdown ran. */
KT_API uint64_t kt_run_arena_late(const kt_run_arena_t *arena);
KT_API void kt_run_arena_close(kt_run_arena_t *arena);

#ifdef __cplusplus
}
#endif

#endif
