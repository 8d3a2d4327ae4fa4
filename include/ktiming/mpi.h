/* ktiming/mpi.h — MPI jobs on one timeline (libktiming_mpi, built when MPI is found; `ktiming::mpi` inside this
 * project's build tree only: installed, it is lib/ktiming/libktiming_mpi.so, without a CMake package target or .pc).
 *
 * Two ways to use it:
 *   - Link libktiming_mpi (or LD_PRELOAD it; `ktiming run --mpi` does that): it intercepts MPI_Init,
 *     MPI_Init_thread and MPI_Finalize through the standard PMPI profiling interface. At MPI_Init it takes the
 *     first clock samples; at MPI_Finalize it calls kt_mpi_gather(MPI_COMM_WORLD, 0, path) with path from
 *     KTIMING_MPI_OUTPUT (a template: %p %h %r %%; default "ktiming-mpi.json"), and KTIMING_MPI_TRACE (optional)
 *     gets the merged Chrome trace. KTIMING_MPI=0 turns the interception off (MPI calls pass straight through).
 *     Under `ktiming run` (KTIMING_RUN_DIR set) each rank's own snapshot is also left there for `ktiming run -o`.
 *   - Call kt_mpi_gather() yourself, between MPI_Init and MPI_Finalize, on any communicator.
 *
 * What a gather does (collective over comm): each rank's host clock is related to the root's by ping-pong
 * exchanges (the root reads its clock, the rank reads its own, the root reads again: a bracketed sample),
 * 32 per rank at MPI_Init (world, root 0) and 32 at the gather, fitted with the calibration module
 * (kt_clock_fit, KT_FIT_WEIGHTED, ktiming/clock_model.h): an offset, a drift across the job, and an error bound that
 * holds as long as each rank's read happened inside its bracket, which the exchange guarantees. Each rank's
 * snapshot is serialised to JSON (kt_report_print), sent to the root, parsed (kt_snapshot_parse), its spans
 * mapped onto the root's timeline (uncertainty_ns grows by the mapping's bound at each span) and merged
 * (kt_snapshot_merge): one source per rank, in rank order, with offset_ns / offset_bound_ns; entries carry
 * per-rank totals for load-balance views (kt_rank_balance, `ktiming report --by-rank`).
 *
 * Scale: gathering spans is O(ranks x spans) at the root. Above KTIMING_MPI_SPAN_RANKS ranks (default 64)
 * each rank writes its full snapshot (spans included) to its own file, "<path minus .json>.rank<R>.json", and
 * only the aggregates travel to the root (docs/scale.md).
 *
 * Test builds only: KTIMING_TEST_CLOCK_OFFSET_NS=N makes rank r's clock read N*r ns ahead (its clock samples
 * and its snapshot's times), to check that the alignment removes an offset. Only the copy of the library the
 * test suite links (built with KT_TEST_HOOKS=1) reads it; the built and installed libktiming_mpi ignores it.
 */
#ifndef KTIMING_MPI_H
#define KTIMING_MPI_H

#include <ktiming.h>
#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

#if KT_ENABLED

/* Gathers every rank's snapshot to root and, there, writes the merged snapshot (JSON) to path (a template:
 * %p %h %r %%; NULL: not written). Collective over comm. Returns the same code on every rank: 0, KT_EINVAL,
 * KT_ENOMEM, KT_EIO (writing), KT_EPARSE (a rank's snapshot did not parse), KT_EBACKEND (an MPI call failed). */
KT_API int kt_mpi_gather(MPI_Comm comm, int root, const char *path);

/* As kt_mpi_gather, and on root *out receives the merged snapshot (kt_snapshot_free it); NULL elsewhere. */
KT_API int kt_mpi_gather_snapshot(MPI_Comm comm, int root, const char *path, kt_snapshot_t **out);

#else

static inline int kt_mpi_gather(MPI_Comm comm, int root, const char *path)
{ (void)comm; (void)root; (void)path; return KT_EDISABLED; }
static inline int kt_mpi_gather_snapshot(MPI_Comm comm, int root, const char *path, kt_snapshot_t **out)
{ (void)comm; (void)root; (void)path; if (out) *out = NULL; return KT_EDISABLED; }

#endif

#ifdef __cplusplus
}
#endif
#endif /* KTIMING_MPI_H */
