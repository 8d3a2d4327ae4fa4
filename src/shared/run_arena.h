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
/* 1 when a process of the run attached (its pid into *pid, and into *exited whether ktiming's exit handler ran
 * in it), else 0. */
KT_API int kt_run_arena_status(const kt_run_arena_t *arena, int64_t *pid, int *exited);
/* The attached process's snapshot as its tables stand (it may be dead), `ended` copied into the snapshot's
 * `ended` (NULL: none); NULL when no process attached or out of memory. */
KT_API kt_snapshot_t *kt_run_arena_snapshot(const kt_run_arena_t *arena, const char *ended);
KT_API void kt_run_arena_close(kt_run_arena_t *arena);

#ifdef __cplusplus
}
#endif

#endif
