/* kt_test_cupti.c — CUPTI TEST DOUBLE (not CUPTI) for the injection library's exit path: built with the real
 * libcupti's soname and loaded first, it accepts the activity setup and delivers one kernel record, named
 * "kt_fake_cupti_kernel", only when cuptiActivityFlushAll is called. A snapshot holding that kernel proves the
 * library flushed CUPTI before writing it. Timestamps are CLOCK_MONOTONIC_RAW + 1 s. */
#include <cupti.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KT_FAKE_CUPTI_API __attribute__((visibility("default")))

static CUpti_BuffersCallbackRequestFunc g_request;   /* the tool's buffer allocator */
static CUpti_BuffersCallbackCompleteFunc g_complete; /* the tool's record consumer */

KT_FAKE_CUPTI_API CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
                                                                      CUpti_BuffersCallbackCompleteFunc done)
{
    g_request = req;
    g_complete = done;
    return CUPTI_SUCCESS;
}

KT_FAKE_CUPTI_API CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind)
{
    (void)kind;
    return CUPTI_SUCCESS;
}

KT_FAKE_CUPTI_API CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t *timestamp)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    *timestamp = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + 1000000000ull;
    return CUPTI_SUCCESS;
}

KT_FAKE_CUPTI_API CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char **str)
{
    (void)result;
    *str = "fake CUPTI error";
    return CUPTI_SUCCESS;
}

KT_FAKE_CUPTI_API CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid,
                                                                  CUpti_Activity **record)
{
    uint8_t *next = *record ? (uint8_t *)*record + sizeof(CUpti_ActivityKernel10) : buffer;
    if ((size_t)(next - buffer) + sizeof(CUpti_ActivityKernel10) > valid)
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *record = (CUpti_Activity *)(void *)next;
    return CUPTI_SUCCESS;
}

KT_FAKE_CUPTI_API CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream,
                                                                        size_t *dropped)
{
    (void)ctx;
    (void)stream;
    *dropped = 0;
    return CUPTI_SUCCESS;
}

KT_FAKE_CUPTI_API CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag)
{
    (void)flag;
    if (!g_request || !g_complete)
        return CUPTI_ERROR_NOT_INITIALIZED;
    uint8_t *buf = NULL;
    size_t size = 0, max_records = 0;
    g_request(&buf, &size, &max_records);
    if (!buf || size < sizeof(CUpti_ActivityKernel10))
        return CUPTI_ERROR_OUT_OF_MEMORY;
    CUpti_ActivityKernel10 k;
    memset(&k, 0, sizeof k);
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.name = "kt_fake_cupti_kernel";
    cuptiGetTimestamp(&k.queued);
    k.submitted = k.queued + 1000;
    k.start = k.queued + 2000;
    k.end = k.start + 50000;
    k.deviceId = 0;
    k.streamId = 7;
    memcpy(buf, &k, sizeof k);
    g_complete(NULL, 0, buf, size, sizeof k); /* the tool frees buf */
    return CUPTI_SUCCESS;
}
