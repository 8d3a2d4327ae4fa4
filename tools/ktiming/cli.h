/* cli.h — shared declarations of the ktiming command-line tool: subcommands and per-backend demo/device hooks. */
#ifndef KTCLI_H
#define KTCLI_H

#include <ktiming.h>
#include <stddef.h>
#include <stdio.h>

/* Options of `ktiming demo`, shared by every backend's demo. */
typedef struct ktcli_demo_opts_t {
    int warmup;       /* untimed dispatches per kernel before measuring */
    int dispatches;   /* timed dispatches per kernel (>= 10) */
    size_t bytes;     /* working-set size of the demo kernels */
    int verbose;      /* print progress lines */
} ktcli_demo_opts_t;

/* Subcommands: each takes argv after the subcommand name (argv[0] is the subcommand) and returns an exit code. */
int ktcli_cmd_demo(int argc, char **argv);
int ktcli_cmd_report(int argc, char **argv);
int ktcli_cmd_devices(int argc, char **argv);
int ktcli_cmd_compare(int argc, char **argv);
int ktcli_cmd_run(int argc, char **argv);
int ktcli_cmd_merge(int argc, char **argv);

/* Per-backend demo kernels: 0 on success, KT_EUNAVAILABLE when the backend has no device (after printing a
 * one-line note to stderr), another negative KT_E* on failure. */
int ktcli_demo_cpu(const ktcli_demo_opts_t *opts);
int ktcli_demo_opencl(const ktcli_demo_opts_t *opts);
int ktcli_demo_vulkan(const ktcli_demo_opts_t *opts);
int ktcli_demo_cuda(const ktcli_demo_opts_t *opts);

/* Per-backend device listings for `ktiming devices`: prints devices with their clock facts; returns the
 * number of devices, or a negative KT_E* (KT_EUNAVAILABLE when the runtime is absent). */
int ktcli_devices_opencl(FILE *out);
int ktcli_devices_vulkan(FILE *out);
int ktcli_devices_cuda(FILE *out);

#endif
