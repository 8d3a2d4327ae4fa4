/* shared/tool.h — core functions of libktiming that only its own tools (the interception libraries of `ktiming
 * run`) and tests call. Exported from libktiming.so, declared here only: this header is not installed
 * (docs/abi.md). The other tool-only headers: shared/output.h, shared/run_arena.h, shared/tool_cl.h. */
#ifndef KTIMING_TOOL_H
#define KTIMING_TOOL_H

#include <ktiming.h>

#if !KT_ENABLED
#error "shared/tool.h is for ktiming's own tools, built with KTIMING_ENABLE=1"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Host API time: a zone of kernel `api` of KT_BACKEND_HOST_API around a blocking GPU API call, ended with
 * kt_zone_end; one clock read at each end. */
KT_API kt_zone_t kt__host_api_begin(kt_kernel_id_t *site_cache, const char *api);

/* A CUDA context is about to be destroyed (cuCtxDestroy, cuDevicePrimaryCtxReset): what a CUPTI
 * CONTEXT_DESTROY_STARTING callback calls, on the destroying thread, while the context still exists. The CUDA
 * backend waits for a collector pass in progress, collects what completes (up to flush_timeout_ms), and retires
 * its state for the context, so none of the context's handles is used after the destruction. */
struct CUctx_st;
KT_API void kt__cuda_context_destroying(struct CUctx_st *ctx);

/* The CUPTI injection library holds CUPTI's subscription with CONTEXT_DESTROY_STARTING enabled (on = 1), so it calls
 * kt__cuda_context_destroying at every context destruction: kt_cuda_watch_resets(1) then succeeds without a
 * subscription of its own (CUPTI would refuse it one). */
KT_API void kt__cuda_resets_watched_by_tool(int on);

#ifdef __cplusplus
}
#endif
#endif /* KTIMING_TOOL_H */
