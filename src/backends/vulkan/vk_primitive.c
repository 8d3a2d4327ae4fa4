/* vk_primitive.c — the Vulkan primitive backend: its own command buffer, fence and timestamp pool per backend. */
#include "backends/vulkan/vk_internal.h"
#include "primitive/prim_ops.h"

#include <stdlib.h>

#define KT__VK_PRIM_TIMEOUT_NS UINT64_C(60000000000)

/* State of one Vulkan primitive backend. */
typedef struct kt__vk_prim_t {
    kt_vk_ctx_t *ctx;       /* device, table and clock model */
    VkCommandPool pool;     /* for cmd */
    VkCommandBuffer cmd;    /* the primitive's own encoder */
    VkFence fence;          /* signalled when the batch completes */
    VkQueryPool queries;    /* marks */
    uint32_t query_cap;     /* queries in `queries` */
    uint64_t submit_ns;     /* host time of the last submit (wrap reference for the marks) */
} kt__vk_prim_t;

static const char *prim_device_name(void *be)
{
    return ((kt__vk_prim_t *)be)->ctx->device_key; /* interning is by device key */
}

static int prim_open(void *be, uint32_t marks, void **encoder)
{
    kt__vk_prim_t *p = be;
    const kt__vk_table_t *vk = &p->ctx->vk;
    if (marks > p->query_cap) {
        if (p->queries)
            vk->vkDestroyQueryPool(p->ctx->device, p->queries, NULL);
        p->queries = VK_NULL_HANDLE;
        p->query_cap = 0;
        VkQueryPoolCreateInfo qpi = {
            .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
            .queryType = VK_QUERY_TYPE_TIMESTAMP,
            .queryCount = marks,
        };
        if (vk->vkCreateQueryPool(p->ctx->device, &qpi, NULL, &p->queries) != VK_SUCCESS)
            return KT_EBACKEND;
        p->query_cap = marks;
    }
    if (kt__vk_cmd_restart(p->ctx, p->cmd) != 0)
        return KT_EBACKEND;
    if (marks)
        vk->vkCmdResetQueryPool(p->cmd, p->queries, 0, marks);
    *encoder = (void *)p->cmd;
    return 0;
}

static int prim_mark(void *be, void *encoder, uint32_t index)
{
    kt__vk_prim_t *p = be;
    if (index >= p->query_cap)
        return KT_EINVAL;
    p->ctx->vk.vkCmdWriteTimestamp((VkCommandBuffer)encoder, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, p->queries,
                                   index);
    return 0;
}

static int prim_close(void *be, void *encoder)
{
    kt__vk_prim_t *p = be;
    return p->ctx->vk.vkEndCommandBuffer((VkCommandBuffer)encoder) == VK_SUCCESS ? 0 : KT_EBACKEND;
}

static int prim_drain(void *be)
{
    kt__vk_prim_t *p = be;
    return p->ctx->vk.vkQueueWaitIdle(p->ctx->queue) == VK_SUCCESS ? 0 : KT_EBACKEND;
}

static int prim_submit(void *be, void *encoder)
{
    kt__vk_prim_t *p = be;
    VkCommandBuffer cmd = (VkCommandBuffer)encoder;
    VkSubmitInfo si = {
        .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
        .commandBufferCount = 1,
        .pCommandBuffers = &cmd,
    };
    p->submit_ns = kt_now_ns();
    return p->ctx->vk.vkQueueSubmit(p->ctx->queue, 1, &si, p->fence) == VK_SUCCESS ? 0 : KT_EBACKEND;
}

static int prim_wait(void *be, void *encoder)
{
    kt__vk_prim_t *p = be;
    (void)encoder;
    const kt__vk_table_t *vk = &p->ctx->vk;
    VkResult r = vk->vkWaitForFences(p->ctx->device, 1, &p->fence, VK_TRUE, KT__VK_PRIM_TIMEOUT_NS);
    if (r != VK_SUCCESS)
        return r == VK_TIMEOUT ? KT_ETIMEDOUT : KT_EBACKEND;
    return vk->vkResetFences(p->ctx->device, 1, &p->fence) == VK_SUCCESS ? 0 : KT_EBACKEND;
}

static int prim_read(void *be, void *encoder, uint32_t count, uint64_t *device_ns, uint64_t *host_ns,
                     uint64_t *uncertainty_ns)
{
    kt__vk_prim_t *p = be;
    (void)encoder;
    if (count > p->query_cap)
        return KT_EINVAL;
    uint64_t vals[2 * KT_PRIMITIVE_MAX_KERNELS];
    if (count > 2 * KT_PRIMITIVE_MAX_KERNELS)
        return KT_EINVAL;
    /* The batch's fence has signalled, so this returns at once (on lavapipe it also waits for any other work
     * on the device, which an execution holding the queue does not have). */
    if (p->ctx->vk.vkGetQueryPoolResults(p->ctx->device, p->queries, 0, count, sizeof(vals), vals, sizeof(uint64_t),
                                         VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) != VK_SUCCESS)
        return KT_EBACKEND;
    kt_vk_ctx_t *ctx = p->ctx;
    pthread_mutex_lock(&ctx->model_lock);
    for (uint32_t i = 0; i < count; i++) {
        device_ns[i] = kt__vk_device_ns_locked(ctx, vals[i], p->submit_ns);
        host_ns[i] = 0;
        uncertainty_ns[i] = 0;
        kt__vk_map_locked(ctx, device_ns[i], &host_ns[i], &uncertainty_ns[i]);
    }
    pthread_mutex_unlock(&ctx->model_lock);
    return 0;
}

static void prim_destroy(void *be)
{
    kt__vk_prim_t *p = be;
    if (!p)
        return;
    const kt__vk_table_t *vk = &p->ctx->vk;
    if (p->queries)
        vk->vkDestroyQueryPool(p->ctx->device, p->queries, NULL);
    if (p->fence)
        vk->vkDestroyFence(p->ctx->device, p->fence, NULL);
    if (p->pool)
        vk->vkDestroyCommandPool(p->ctx->device, p->pool, NULL);
    free(p);
}

static const kt_primitive_ops_t g_vk_prim_ops = KT__PRIM_OPS(KT_BACKEND_VULKAN, 0);

int kt_vk_primitive_backend_create(kt_vk_ctx_t *ctx, kt_primitive_backend_t *out)
{
    if (!out)
        return KT_EINVAL;
    out->ops = NULL;
    out->ctx = NULL;
    if (!ctx)
        return KT_EINVAL;
    if (ctx->untimed)
        return KT_EUNAVAILABLE; /* the family has no timestamps */
    if (!ctx->queue)
        return KT_ESTATE; /* primitives submit: the context needs desc.queue */
    kt__vk_prim_t *p = calloc(1, sizeof(*p));
    if (!p)
        return KT_ENOMEM;
    p->ctx = ctx;
    if (kt__vk_cmd_create(ctx, VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, &p->pool, &p->cmd, &p->fence) != 0) {
        prim_destroy(p);
        return KT_EBACKEND;
    }
    out->ops = &g_vk_prim_ops;
    out->ctx = p;
    return 0;
}
