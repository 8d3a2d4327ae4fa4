/* cl_shim.c — helpers for interception shims (tools/intercept/opencl): what to time, and profiling added to a
 * queue's properties. */
#include "backends/opencl/cl_env.h"
#include "core/internal.h"
#include "shared/tool_cl.h"

#include <ktiming/cl.h>

int kt_cl_commands_all(void)
{
    kt__cl_env_read();
    return !kt__cl_env.kernels_only;
}

int kt_cl_queue_properties_profiled(const cl_queue_properties *in, cl_queue_properties *out, size_t cap)
{
    if (!out)
        return KT_EINVAL;
    size_t n = 0;
    int found = 0;
    for (size_t i = 0; in && in[i]; i += 2) {
        if (n + 2 > cap)
            return KT_EFULL;
        out[n] = in[i];
        out[n + 1] = in[i + 1];
        if (in[i] == CL_QUEUE_PROPERTIES) {
            out[n + 1] |= CL_QUEUE_PROFILING_ENABLE;
            found = 1;
        }
        n += 2;
    }
    if (!found) {
        if (n + 2 > cap)
            return KT_EFULL;
        out[n++] = CL_QUEUE_PROPERTIES;
        out[n++] = CL_QUEUE_PROFILING_ENABLE;
    }
    if (n + 1 > cap)
        return KT_EFULL;
    out[n] = 0;
    return 0;
}
