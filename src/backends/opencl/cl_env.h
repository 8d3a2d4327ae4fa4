/* cl_env.h — internal: the OpenCL backend's settings from the environment (read once) and its verbose-line sink. */
#ifndef KT_CL_ENV_H
#define KT_CL_ENV_H

#include <stdio.h>

/* What the environment says, read once (kt__cl_env_load) before the first record. */
typedef struct kt__cl_env_t {
    int verbose;      /* KTIMING_VERBOSE=profile_exec (or all): one line per command */
    int sync_default; /* KTIMING_VERBOSE_SYNC=1 */
    int kernels_only; /* KTIMING_OPENCL_COMMANDS=kernels: transfers and other commands untimed */
    int callbacks;    /* KTIMING_OPENCL_COMPLETION=callback: profiled commands use callbacks too */
    FILE *log;        /* verbose lines: KTIMING_LOG=path, else stderr (never the program's stdout) */
} kt__cl_env_t;

extern kt__cl_env_t kt__cl_env;

/* The loader (kt_cl_load) and the environment, once; kt_cl_load's result. */
int kt__cl_env_load(void);
/* The environment alone, once (the shim asks kt_cl_commands_all before anything is loaded). */
void kt__cl_env_read(void);
/* One verbose line (already newline-terminated), written whole. */
void kt__cl_log_line(const char *line);

#endif
