/* mpi_prog.c — an MPI program for the libktiming_mpi tests: every rank runs kernel "work" 70 times per unit of
 * work and kernel "common" 35 times; rank 2 does three units (the slow rank). Durations are synthetic and
 * known (1000 + 10 * (i % 7) ns, recorded with kt_record_dispatch at real start times), so the tests compute
 * every statistic directly. Prints "rank R first F last L" (true host times of its first/last span start).
 * Usage: mpi_prog [--gather PATH]  (--gather: call kt_mpi_gather explicitly before MPI_Finalize) */
#include <ktiming.h>
#ifdef KT_MPI_EXPLICIT
#include <ktiming/mpi.h>
#else
#include <mpi.h>
#endif

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rank = 0, size = 1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    kt_kernel_id_t work = kt_kernel_intern("work", KT_BACKEND_CPU, NULL);
    kt_kernel_id_t common = kt_kernel_intern("common", KT_BACKEND_CPU, NULL);
    int units = rank == 2 ? 3 : 1;
    uint64_t first = 0, last = 0;
    for (int i = 0; i < 70 * units; i++) {
        uint64_t d = 1000 + 10 * (uint64_t)(i % 7), t = kt_now_ns();
        kt_dispatch_t disp = {.kernel = work, .duration_ns = d, .start_ns = t, .end_ns = t + d};
        kt_record_dispatch(&disp);
        if (!first)
            first = t;
        last = t;
    }
    for (int i = 0; i < 35; i++) {
        uint64_t d = 500 + (uint64_t)rank, t = kt_now_ns();
        kt_dispatch_t disp = {.kernel = common, .duration_ns = d, .start_ns = t, .end_ns = t + d};
        kt_record_dispatch(&disp);
        last = t;
    }
    printf("rank %d first %llu last %llu\n", rank, (unsigned long long)first, (unsigned long long)last);
    fflush(stdout);
    int rc = 0;
#ifdef KT_MPI_EXPLICIT
    if (argc > 2 && !strcmp(argv[1], "--gather"))
        rc = kt_mpi_gather(MPI_COMM_WORLD, 0, argv[2]);
#endif
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return rc ? 1 : 0;
}
