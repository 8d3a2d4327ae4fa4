/* cl_env.h — internal: the OpenCL backend's settings from the environment (read once). */
#ifndef KT_CL_ENV_H
#define KT_CL_ENV_H

/* What the environment says, read once (kt__cl_env_load) before the first record. Verbose lines (KTIMING_VERBOSE,
 * KTIMING_LOG) are the core's: kt__verbose_on, kt__verbose_line. */
typedef struct kt__cl_env_t {
    int sync_default; /* KTIMING_VERBOSE_SYNC=1 */
    int kernels_only; /* KTIMING_OPENCL_COMMANDS=kernels: transfers and other commands untimed */
    int callbacks;    /* KTIMING_OPENCL_COMPLETION=callback: profiled commands use callbacks too */
} kt__cl_env_t;

extern kt__cl_env_t kt__cl_env;

/* The loader (kt_cl_load) and the environment, once; kt_cl_load's result. */
int kt__cl_env_load(void);
/* The environment alone, once (the shim asks kt_cl_commands_all before anything is loaded). */
void kt__cl_env_read(void);

#endif
