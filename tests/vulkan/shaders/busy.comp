// busy.comp — burns a controllable amount of device time: each invocation runs `iters` dependent integer steps
// (llvmpipe caps a loop at 65535 iterations, so scale with the group count, not iters).
#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer Out { uint v[]; };
layout(push_constant) uniform P { uint iters; } p;
void main()
{
    uint x = gl_GlobalInvocationID.x + 1u;
    for (uint i = 0u; i < p.iters; i++) {
        x ^= x >> 7;
        x = x * 0x9E3779B1u + i;
    }
    v[gl_LocalInvocationID.x] = x;
}
