/* cl_env.c — the OpenCL backend's settings: KTIMING_* variables read once, and where verbose lines go. */
#include "backends/opencl/cl_env.h"
#include "backends/opencl/cl_internal.h"
#include "core/service.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

kt__cl_env_t kt__cl_env;
static pthread_once_t g_env_once = PTHREAD_ONCE_INIT;

static void read_env(void)
{
    const char *v = kt__env("KTIMING_VERBOSE");
    if (v) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", v);
        for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
            if (!strcmp(tok, "profile_exec") || !strcmp(tok, "all"))
                kt__cl_env.verbose = 1;
    }
    const char *s = kt__env("KTIMING_VERBOSE_SYNC");
    kt__cl_env.sync_default = s && *s && strcmp(s, "0") != 0;
    const char *c = kt__env("KTIMING_OPENCL_COMMANDS");
    kt__cl_env.kernels_only = c && !strcmp(c, "kernels");
    const char *how = kt__env("KTIMING_OPENCL_COMPLETION");
    kt__cl_env.callbacks = how && !strcmp(how, "callback");
    kt__cl_env.log = stderr;
    const char *log = kt__env("KTIMING_LOG");
    char path[4096];
    if (kt__cl_env.verbose && log && *log && kt__path_expand(log, -1, path, sizeof path) == 0) {
        FILE *f = fopen(path, "a");
        if (f) {
            setvbuf(f, NULL, _IOLBF, 0);
            kt__cl_env.log = f;
        }
    }
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

void kt__cl_log_line(const char *line)
{
    fputs(line, kt__cl_env.log);
    fflush(kt__cl_env.log);
}
