// vkcrash.comp — the one shader of vkcrashprog: every pipeline of it is named with VK_EXT_debug_utils.
#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer B { uint v[]; };
void main()
{
    v[gl_GlobalInvocationID.x] += 1u;
}
