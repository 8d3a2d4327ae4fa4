/* shared/tool_cl.h — OpenCL functions of libktiming that only its interception shim (tools/intercept/opencl) and
 * tests call. Exported from libktiming.so, declared here only: this header is not installed (docs/abi.md). */
#ifndef KTIMING_TOOL_CL_H
#define KTIMING_TOOL_CL_H

#include <ktiming/cl.h>

#if !KT_ENABLED
#error "shared/tool_cl.h is for ktiming's own tools, built with KTIMING_ENABLE=1"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Choose the loader library before the first kt_cl_load (overrides KTIMING_OPENCL_LIBRARY; an interception
 * layer points libktiming at its pass-through library this way, without setenv). 0, KT_EINVAL (NULL, empty or
 * too long), KT_ESTATE (already loaded: the choice is ignored). */
KT_API int kt_cl_use_library(const char *path);

/* An enqueue the driver refused (error != CL_SUCCESS): counted in `errors` of the kernel (name NULL: its
 * CL_KERNEL_FUNCTION_NAME) or command `name`, with the error's name (kt_cl_error_name) as the entry's
 * last_error. kt_cl_enqueue_ndrange does this itself. */
KT_API void kt_cl_enqueue_failed(kt_cl_ctx_t *ctx, cl_kernel kernel, const char *name, cl_int error);

/* Whether transfers and other commands are timed too (KTIMING_OPENCL_COMMANDS=all, the default) or only
 * kernels (KTIMING_OPENCL_COMMANDS=kernels). */
KT_API int kt_cl_commands_all(void);

/* Whether ktiming holds a reference to this event now (it retains a program's event while the command is in
 * flight): a shim subtracts it from CL_EVENT_REFERENCE_COUNT so the program reads the count it would without
 * ktiming. Looks through every record in flight: for such queries, not for a hot path. */
KT_API int kt_cl_event_held(cl_event event);

/* Copy a zero-terminated queue property list into out (capacity cap entries) with CL_QUEUE_PROFILING_ENABLE
 * added to CL_QUEUE_PROPERTIES (appending the pair if absent). in may be NULL. KT_EFULL if cap is short. For the
 * shim's clCreateCommandQueueWithProperties (for clCreateCommandQueue it ORs the bit into the properties). */
KT_API int kt_cl_queue_properties_profiled(const cl_queue_properties *in, cl_queue_properties *out, size_t cap);

/* kt_cl_track_kernel with the command's launch configuration (kt_dispatch_t.launch): the shim's clEnqueueTask
 * records 1 x 1 through it (PoCL reports a task's event as an NDRange). kt_cl_enqueue_ndrange records its own. */
KT_API int kt__cl_track_launch(kt_cl_ctx_t *ctx, cl_event event, cl_kernel kernel, const kt_launch_t *launch,
                               uint64_t enqueue_ns);

/* Command records ever made (slots handed out, process-wide; records are reused, never freed): what tracking
 * holds at most, for tests that bound it. */
KT_API uint32_t kt__cl_slots_made(void);

/* One step of the collector thread's loop, on the calling thread, when no collector thread runs
 * (KTIMING_OPENCL_COLLECTOR=0; otherwise nothing, 0): what the collector would do at its next wake-up, for tests
 * that check what it collects without depending on when it is scheduled. Returns 1 when it would look again at
 * once. */
KT_API int kt__cl_collector_pass(void);

/* An enqueue the driver refused on a queue ktiming could not attach (NULL or invalid): counted in `errors` of the
 * kernel (name NULL: its CL_KERNEL_FUNCTION_NAME) or command `name`, with the error's name, on the kernel's device
 * when its context has one, else on the device "unknown". error CL_SUCCESS: nothing. */
KT_API void kt__cl_enqueue_refused(cl_command_queue queue, cl_kernel kernel, const char *name, cl_int error);

#ifdef __cplusplus
}
#endif
#endif /* KTIMING_TOOL_CL_H */
