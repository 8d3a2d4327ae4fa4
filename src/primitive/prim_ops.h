/* prim_ops.h — the ops table of a device primitive backend whose hooks follow the prim_<op> naming
 * (OpenCL cl_primitive.c, Vulkan vk_primitive.c); internal, never installed. */
#ifndef KT_PRIM_OPS_H
#define KT_PRIM_OPS_H

#include <ktiming/primitive.h>

/* Initialiser for a kt_primitive_ops_t whose hooks are the file's static prim_device_name, prim_open, prim_mark,
 * prim_close, prim_drain, prim_submit, prim_wait, prim_read and prim_destroy. */
#define KT__PRIM_OPS(backend_, flags_)                                                                          \
    {                                                                                                           \
        .backend = (backend_), .flags = (flags_), .device_name = prim_device_name, .open = prim_open,           \
        .mark = prim_mark, .close = prim_close, .drain = prim_drain, .submit = prim_submit, .wait = prim_wait, \
        .read = prim_read, .destroy = prim_destroy,                                                             \
    }

#endif
