/* cl_env.c — the OpenCL backend's settings: its KTIMING_* variables (src/core/env.h), read once. */
#include "backends/opencl/cl_env.h"
#include "backends/opencl/cl_internal.h"
#include "core/service.h"

#include <pthread.h>
#include <string.h>

kt__cl_env_t kt__cl_env;
static pthread_once_t g_env_once = PTHREAD_ONCE_INIT;

static void read_env(void)
{
    const char *s = kt__env(KT_ENV_NAME(VERBOSE_SYNC));
    kt__cl_env.sync_default = s && *s && strcmp(s, "0") != 0;
    const char *c = kt__env(KT_ENV_NAME(OPENCL_COMMANDS));
    kt__cl_env.kernels_only = c && !strcmp(c, "kernels");
    const char *how = kt__env(KT_ENV_NAME(OPENCL_COMPLETION));
    kt__cl_env.callbacks = how && !strcmp(how, "callback");
    kt__verbose_on(); /* the core reads KTIMING_VERBOSE and KTIMING_LOG now, before the first record */
}

void kt__cl_env_read(void)
{
    pthread_once(&g_env_once, read_env);
}

int kt__cl_env_load(void)
{
    int rc = kt_cl_load(NULL);
    if (rc >= 0)
        kt__cl_env_read();
    return rc;
}
